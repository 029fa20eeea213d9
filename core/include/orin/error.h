/* Errors and logging.
 *
 * Functions that fail return -1 (or NULL) and leave a one-line message, naming the
 * thing and the reason, in a thread-local buffer that the caller reads with
 * orin_error(). The message is what a user sees after "orin-run: ". */
#ifndef ORIN_ERROR_H
#define ORIN_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ORIN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define ORIN_PRINTF(fmt, args)
#endif

/* Sets the current error (printf-style); always returns -1 so that
 * `return orin_error_set(...)` reads naturally. */
int orin_error_set(const char *fmt, ...) ORIN_PRINTF(1, 2);
/* Prefixes the current error with context: "model.safetensors: " + old message. */
int orin_error_prefix(const char *fmt, ...) ORIN_PRINTF(1, 2);
const char *orin_error(void);
void orin_error_clear(void);

/* Optimal string alignment distance of two names (Levenshtein plus adjacent
 * swaps), for "did you mean" hints; SIZE_MAX past 64 characters. */
size_t orin_edit_distance(const char *a, const char *b);

typedef enum orin_log_level { ORIN_LOG_ERROR = 0, ORIN_LOG_WARN, ORIN_LOG_INFO, ORIN_LOG_DEBUG } orin_log_level;

/* Log lines go to stderr prefixed with "orin: "; the default level is INFO. */
void orin_log_set_level(orin_log_level level);
orin_log_level orin_log_get_level(void);
void orin_log(orin_log_level level, const char *fmt, ...) ORIN_PRINTF(2, 3);

#ifdef __cplusplus
}
#endif
#endif
