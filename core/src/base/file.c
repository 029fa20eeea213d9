/* Reading whole files (see orin/file.h). */
#include "orin/file.h"
#include "orin/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

char *orin_read_stream(FILE *f, const char *name, size_t max_bytes, size_t *len)
{
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            size_t grown_cap = cap ? cap * 2 : 65536;
            char *grown = realloc(buf, grown_cap + 1);
            if (!grown) {
                orin_error_set("%s: out of memory reading it", name);
                goto fail;
            }
            buf = grown;
            cap = grown_cap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n > max_bytes) {
            orin_error_set("%s: larger than %zu bytes", name, max_bytes);
            errno = EFBIG;
            goto fail;
        }
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        int err = errno;
        orin_error_set("%s: cannot read: %s", name, strerror(err));
        errno = err;
        goto fail;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
fail:
    free(buf);
    return NULL;
}

char *orin_read_file(const char *path, size_t max_bytes, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        int err = errno;
        orin_error_set("%s: cannot open: %s", path, strerror(err));
        errno = err;
        return NULL;
    }
    char *buf = orin_read_stream(f, path, max_bytes, len);
    int err = errno;
    fclose(f);
    errno = err;
    return buf;
}
