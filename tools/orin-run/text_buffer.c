#include "text_buffer.h"

#include "orin/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int text_buffer_printf(text_buffer *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->data ? b->data + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            return orin_error_set("output: formatting failed");
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return 0;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *data = realloc(b->data, cap);
        if (!data)
            return orin_error_set("output: out of memory");
        b->data = data;
        b->cap = cap;
    }
}

void text_buffer_free(text_buffer *b)
{
    free(b->data);
    *b = (text_buffer){0};
}
