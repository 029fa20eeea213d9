/* Thread-local error message and stderr logging. */
#include "orin/error.h"

#include <stdio.h>
#include <string.h>

#define ORIN_ERROR_CAP 1024

static _Thread_local char error_buf[ORIN_ERROR_CAP];
static orin_log_level log_level = ORIN_LOG_INFO;

int orin_error_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_buf, sizeof error_buf, fmt, ap);
    va_end(ap);
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
    /* One write per line so that lines from threads do not interleave. */
    fprintf(stderr, "orin: %s%s\n", tags[level], line);
}
