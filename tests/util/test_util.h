/* A tiny test harness: CHECK() records a failure and goes on, so one run shows
 * every broken case; test_finish() prints "N passed, N failed" and returns the
 * exit code. */
#ifndef ORIN_TEST_UTIL_H
#define ORIN_TEST_UTIL_H

#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>

extern int test_passed, test_failed;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (cond) {                                                               \
            test_passed++;                                                        \
        } else {                                                                  \
            test_failed++;                                                        \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, " " __VA_ARGS__);                                     \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

/* Exit code of a skipped test (ctest SKIP_RETURN_CODE). */
#define TEST_SKIP 77

int test_finish(void);

/* Reads a whole file; NULL when it cannot. The caller frees. */
char *test_read_file(const char *path, size_t *len);
/* A JSON file parsed (cJSON_Delete it), or NULL with a CHECK failure naming
 * the file when it cannot be read or parsed. */
struct cJSON *test_load_json(const char *path);
/* Writes a file; 0 on success. */
int test_write_file(const char *path, const void *data, size_t len);
/* Runs a shell command, captures stdout (and stderr if merge) into a malloc'd
 * string; returns the exit status (or -1). */
int test_run(const char *cmd, char **output, bool merge_stderr);
/* Creates a fresh temporary directory under /tmp; the caller frees the path. */
char *test_tmpdir(const char *tag);
/* Removes a test_tmpdir() directory and all it holds, then frees the path;
 * false (after a line on stderr) if the removal failed. */
bool test_tmpdir_remove(char *path);

#endif
