/* Shared by the libFuzzer targets: a check that stops the fuzzer with a
 * message (a finding), and small input helpers. */
#ifndef ORIN_FUZZ_UTIL_H
#define ORIN_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property the code promises does not hold: abort, so that libFuzzer keeps
 * the input as a crash. */
#define FUZZ_ASSERT(cond, ...)                                                      \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: FUZZ_ASSERT(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
            abort();                                                                \
        }                                                                           \
    } while (0)

/* A NUL-terminated copy of the input (the caller frees). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Every error the library reports is one line. */
static inline void fuzz_check_error(const char *err)
{
    FUZZ_ASSERT(err && err[0], "failure without an error message");
    FUZZ_ASSERT(!strchr(err, '\n'), "error of several lines: %s", err);
}

#endif
