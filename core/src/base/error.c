/* Thread-local error message and stderr logging. */
#include "orin/error.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define ORIN_ERROR_CAP 1024

static _Thread_local char error_buf[ORIN_ERROR_CAP];
static orin_log_level log_level = ORIN_LOG_INFO;

/* Messages quote names and values from downloaded files, which may hold
 * newlines or other control characters: escape them (\n, \r, \xHH), so
 * that a message stays the one line that callers print. Truncates to cap. */
static void keep_one_line(char *msg, size_t cap)
{
    if (!strpbrk(msg, "\x01\x02\x03\x04\x05\x06\x07\x08\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12"
                      "\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f"))
        return;
    char out[ORIN_ERROR_CAP];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && n + 5 < sizeof out; p++) {
        if (*p == '\n')
            n += (size_t)snprintf(out + n, sizeof out - n, "\\n");
        else if (*p == '\r')
            n += (size_t)snprintf(out + n, sizeof out - n, "\\r");
        else if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
            n += (size_t)snprintf(out + n, sizeof out - n, "\\x%02x", *p);
        else
            out[n++] = (char)*p;
    }
    out[n] = '\0';
    snprintf(msg, cap, "%s", out);
}

int orin_error_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_buf, sizeof error_buf, fmt, ap);
    va_end(ap);
    keep_one_line(error_buf, sizeof error_buf);
    return -1;
}

int orin_error_prefix(const char *fmt, ...)
{
    char prefix[ORIN_ERROR_CAP], old[ORIN_ERROR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, error_buf, sizeof old);
    /* A message too long for the buffer keeps its start: the file and the key
     * matter more than the tail of the reason. */
    if (snprintf(error_buf, sizeof error_buf, "%s%s", prefix, old) >= (int)sizeof error_buf)
        error_buf[sizeof error_buf - 1] = '\0';
    keep_one_line(error_buf, sizeof error_buf);
    return -1;
}

const char *orin_error(void)
{
    return error_buf[0] ? error_buf : "unknown error";
}

void orin_error_clear(void)
{
    error_buf[0] = '\0';
}

void orin_log_set_level(orin_log_level level)
{
    log_level = level;
}

orin_log_level orin_log_get_level(void)
{
    return log_level;
}

void orin_log(orin_log_level level, const char *fmt, ...)
{
    if (level > log_level || level < ORIN_LOG_ERROR)
        return;
    static const char *const tags[] = {"error: ", "warning: ", "", "debug: "};
    char line[ORIN_ERROR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    keep_one_line(line, sizeof line);
    /* One write per line so that lines from threads do not interleave. */
    fprintf(stderr, "orin: %s%s\n", tags[level], line);
}

size_t orin_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return SIZE_MAX;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}
