#include "test_util.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int test_passed, test_failed;

int test_finish(void)
{
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

cJSON *test_load_json(const char *path)
{
    char *text = test_read_file(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK(j != NULL, "cannot read %s", path);
    return j;
}

char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = (n + 65536 + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

int test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

int test_run(const char *cmd, char **output, bool merge_stderr)
{
    char full[8192];
    snprintf(full, sizeof full, "%s%s", cmd, merge_stderr ? " 2>&1" : "");
    FILE *p = popen(full, "r");
    if (!p)
        return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (cap - n < 2048) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            } else {
                buf = nb;
            }
        }
    }
    int status = pclose(p);
    if (buf)
        buf[n] = '\0';
    if (output)
        *output = buf;
    else
        free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

char *test_tmpdir(const char *tag)
{
    char *path = malloc(256);
    if (!path)
        return NULL;
    snprintf(path, 256, "/tmp/orin-test-%s-XXXXXX", tag);
    if (!mkdtemp(path)) {
        free(path);
        return NULL;
    }
    return path;
}

bool test_tmpdir_remove(char *path)
{
    if (!path)
        return true;
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    const bool ok = system(cmd) == 0;
    if (!ok)
        fprintf(stderr, "could not remove %s\n", path);
    free(path);
    return ok;
}
