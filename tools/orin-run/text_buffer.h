/* A growable text buffer for output assembled before it is printed. */
#ifndef ORIN_RUN_TEXT_BUFFER_H
#define ORIN_RUN_TEXT_BUFFER_H

#include <stddef.h>

typedef struct text_buffer {
    char *data;
    size_t len, cap;
} text_buffer;

/* Appends printf-formatted text; 0, or -1 with orin_error_set() when out of memory. */
int text_buffer_printf(text_buffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void text_buffer_free(text_buffer *b);

#endif
