/* Chat templates: arena, errors, UTF-8 and the value model (Python semantics
 * for truth, equality, str(), repr() and json.dumps()). */
#include "chat_template_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "orin/error.h"

/* ---- arena ---- */

struct ct_chunk {
    struct ct_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

#define CT_CHUNK_SIZE ((size_t)64 << 10)

void *ct_alloc(struct ct_env *env, size_t n)
{
    struct ct_arena *a = env->arena;
    n = (n + 15) & ~(size_t)15;
    struct ct_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CT_CHUNK_SIZE / 4 ? n : CT_CHUNK_SIZE;
        if (a->total + cap > CT_ARENA_LIMIT)
            ct_fail(env, CT_NOPOS, "template needs more than %zu MiB of memory",
                    CT_ARENA_LIMIT >> 20);
        c = malloc(sizeof *c + cap);
        if (!c)
            ct_fail(env, CT_NOPOS, "out of memory");
        c->cap = cap;
        c->used = 0;
        a->total += cap;
        /* A big block goes behind the current chunk so that the rest of the
         * current chunk stays usable. */
        if (cap > CT_CHUNK_SIZE && a->head) {
            c->next = a->head->next;
            a->head->next = c;
            c->used = n;
            return c->data;
        }
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

char *ct_strndup(struct ct_env *env, const char *s, size_t n)
{
    char *p = ct_alloc(env, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void ct_arena_free(struct ct_arena *a)
{
    struct ct_chunk *c = a->head;
    while (c) {
        struct ct_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}

/* ---- errors ---- */

static void line_col(const char *src, size_t len, uint32_t pos, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    if (pos > len)
        pos = (uint32_t)len;
    size_t start = 0;
    for (size_t i = 0; i < pos; i++) {
        if (src[i] == '\n') {
            ++*line;
            start = i + 1;
        }
    }
    /* Columns count characters, not bytes. */
    for (size_t i = start; i < pos; i++)
        if (((unsigned char)src[i] & 0xC0) != 0x80)
            ++*col;
}

void ct_fail(struct ct_env *env, uint32_t pos, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *name = env->name ? env->name : "chat template";
    if (pos == CT_NOPOS || !env->src) {
        orin_error_set("%s: %s", name, msg);
    } else {
        size_t line, col;
        line_col(env->src, env->src_len, pos, &line, &col);
        orin_error_set("%s:%zu:%zu: %s", name, line, col, msg);
    }
    longjmp(env->jmp, 1);
}

/* ---- buffers ---- */

void ct_buf_put(struct ct_env *env, struct ct_buf *b, const char *s, size_t n)
{
    env->written += n;
    if (env->written > CT_WRITE_LIMIT)
        ct_fail(env, CT_NOPOS, "the template writes more than %zu MiB (output and macro "
                "captures together)", CT_WRITE_LIMIT >> 20);
    if (b->len + n + 1 > b->cap) {
        if (b->len + n > CT_OUTPUT_LIMIT)
            ct_fail(env, CT_NOPOS, "rendered text exceeds %zu MiB", CT_OUTPUT_LIMIT >> 20);
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p;
        if (b->arena) {
            p = ct_alloc(env, cap);
            if (b->len)
                memcpy(p, b->data, b->len);
        } else {
            p = realloc(b->data, cap);
            if (!p)
                ct_fail(env, CT_NOPOS, "out of memory");
        }
        b->data = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ct_buf_putc(struct ct_env *env, struct ct_buf *b, char c)
{
    ct_buf_put(env, b, &c, 1);
}

void ct_buf_printf(struct ct_env *env, struct ct_buf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    ct_buf_put(env, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---- UTF-8 ---- */

bool ct_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned char c = p[i];
        size_t n;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            n = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            n = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (i + n > len)
            return false;
        for (size_t k = 1; k < n; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += n;
    }
    return true;
}

uint32_t ct_utf8_next(const char *s, size_t len, size_t *i)
{
    const unsigned char *p = (const unsigned char *)s + *i;
    size_t left = len - *i;
    if (p[0] < 0x80 || left < 2) {
        *i += 1;
        return p[0];
    }
    if ((p[0] & 0xE0) == 0xC0) {
        *i += 2;
        return (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
    }
    if ((p[0] & 0xF0) == 0xE0 && left >= 3) {
        *i += 3;
        return (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
    }
    if (left >= 4) {
        *i += 4;
        return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
               (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    }
    *i += 1;
    return p[0];
}

size_t ct_utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t ct_utf8_count(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

bool ct_is_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
           cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* ---- values ---- */

ct_val ct_none = {.kind = CT_NONE};
ct_val ct_true = {.kind = CT_BOOL, .u.b = true};
ct_val ct_false = {.kind = CT_BOOL, .u.b = false};
ct_val ct_undefined = {.kind = CT_UNDEF, .u.undef = "value is undefined"};

ct_val *ct_new(struct ct_env *env, enum ct_kind kind)
{
    ct_val *v = ct_alloc(env, sizeof *v);
    memset(v, 0, sizeof *v);
    v->kind = kind;
    return v;
}

ct_val *ct_bool(bool b)
{
    return b ? &ct_true : &ct_false;
}

ct_val *ct_int(struct ct_env *env, int64_t i)
{
    ct_val *v = ct_new(env, CT_INT);
    v->u.i = i;
    return v;
}

ct_val *ct_float(struct ct_env *env, double f)
{
    ct_val *v = ct_new(env, CT_FLOAT);
    v->u.f = f;
    return v;
}

ct_val *ct_str_nocopy(struct ct_env *env, const char *s, size_t len)
{
    ct_val *v = ct_new(env, CT_STR);
    v->u.str.s = s;
    v->u.str.len = len;
    return v;
}

ct_val *ct_str(struct ct_env *env, const char *s, size_t len)
{
    return ct_str_nocopy(env, ct_strndup(env, s, len), len);
}

ct_val *ct_cstr(struct ct_env *env, const char *s)
{
    return ct_str(env, s, strlen(s));
}

ct_val *ct_list(struct ct_env *env, size_t n, bool tuple)
{
    ct_val *v = ct_new(env, CT_LIST);
    v->u.list.items = n ? ct_alloc(env, n * sizeof(ct_val *)) : NULL;
    for (size_t i = 0; i < n; i++)
        v->u.list.items[i] = &ct_none;
    v->u.list.n = n;
    v->u.list.tuple = tuple;
    return v;
}

ct_val *ct_dict(struct ct_env *env)
{
    ct_val *v = ct_new(env, CT_DICT);
    v->u.dict = ct_alloc(env, sizeof *v->u.dict);
    memset(v->u.dict, 0, sizeof *v->u.dict);
    return v;
}

ct_val *ct_undef(struct ct_env *env, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ct_val *v = ct_new(env, CT_UNDEF);
    v->u.undef = ct_strndup(env, msg, strlen(msg));
    return v;
}

ct_val *ct_dict_get(const struct ct_dict *d, const char *key, size_t len)
{
    for (size_t i = 0; i < d->n; i++) {
        const ct_val *k = d->keys[i];
        if (k->u.str.len == len && memcmp(k->u.str.s, key, len) == 0)
            return d->vals[i];
    }
    return NULL;
}

void ct_dict_set(struct ct_env *env, struct ct_dict *d, ct_val *key, ct_val *val)
{
    for (size_t i = 0; i < d->n; i++) {
        const ct_val *k = d->keys[i];
        if (k->u.str.len == key->u.str.len &&
            memcmp(k->u.str.s, key->u.str.s, key->u.str.len) == 0) {
            d->vals[i] = val;
            return;
        }
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        ct_val **keys = ct_alloc(env, cap * sizeof *keys);
        ct_val **vals = ct_alloc(env, cap * sizeof *vals);
        if (d->n) {
            memcpy(keys, d->keys, d->n * sizeof *keys);
            memcpy(vals, d->vals, d->n * sizeof *vals);
        }
        d->keys = keys;
        d->vals = vals;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
}

void ct_vec_push(struct ct_env *env, struct ct_vec *v, ct_val *x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        ct_val **items = ct_alloc(env, cap * sizeof *items);
        if (v->n)
            memcpy(items, v->items, v->n * sizeof *items);
        v->items = items;
        v->cap = cap;
    }
    v->items[v->n++] = x;
}

ct_val *ct_vec_finish(struct ct_env *env, struct ct_vec *v, bool tuple)
{
    ct_val *l = ct_new(env, CT_LIST);
    l->u.list.items = v->items;
    l->u.list.n = v->n;
    l->u.list.tuple = tuple;
    return l;
}

const char *ct_type_name(const ct_val *v)
{
    switch (v->kind) {
    case CT_UNDEF: return "Undefined";
    case CT_NONE: return "NoneType";
    case CT_BOOL: return "bool";
    case CT_INT: return "int";
    case CT_FLOAT: return "float";
    case CT_STR: return "str";
    case CT_LIST: return v->u.list.tuple ? "tuple" : "list";
    case CT_DICT: return "dict";
    case CT_NS: return "Namespace";
    case CT_LOOP: return "LoopContext";
    case CT_FUNC: return "function";
    case CT_MACRO: return "Macro";
    case CT_METHOD: return "builtin_function_or_method";
    }
    return "object";
}

bool ct_truthy(const ct_val *v)
{
    switch (v->kind) {
    case CT_UNDEF:
    case CT_NONE: return false;
    case CT_BOOL: return v->u.b;
    case CT_INT: return v->u.i != 0;
    case CT_FLOAT: return v->u.f != 0.0;
    case CT_STR: return v->u.str.len != 0;
    case CT_LIST: return v->u.list.n != 0;
    case CT_DICT: return v->u.dict->n != 0;
    default: return true;
    }
}

bool ct_is_number(const ct_val *v)
{
    return v->kind == CT_BOOL || v->kind == CT_INT || v->kind == CT_FLOAT;
}

double ct_as_double(const ct_val *v)
{
    switch (v->kind) {
    case CT_BOOL: return v->u.b;
    case CT_INT: return (double)v->u.i;
    case CT_FLOAT: return v->u.f;
    default: return 0;
    }
}

static int64_t as_int(const ct_val *v)
{
    return v->kind == CT_BOOL ? v->u.b : v->u.i;
}

bool ct_equal(const ct_val *a, const ct_val *b)
{
    if (ct_is_number(a) && ct_is_number(b)) {
        if (a->kind != CT_FLOAT && b->kind != CT_FLOAT)
            return as_int(a) == as_int(b);
        return ct_as_double(a) == ct_as_double(b);
    }
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case CT_UNDEF:
    case CT_NONE: return true;
    case CT_STR:
        return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
    case CT_LIST:
        if (a->u.list.n != b->u.list.n || a->u.list.tuple != b->u.list.tuple)
            return false;
        for (size_t i = 0; i < a->u.list.n; i++)
            if (!ct_equal(a->u.list.items[i], b->u.list.items[i]))
                return false;
        return true;
    case CT_DICT:
        if (a->u.dict->n != b->u.dict->n)
            return false;
        for (size_t i = 0; i < a->u.dict->n; i++) {
            const ct_val *k = a->u.dict->keys[i];
            const ct_val *o = ct_dict_get(b->u.dict, k->u.str.s, k->u.str.len);
            if (!o || !ct_equal(a->u.dict->vals[i], o))
                return false;
        }
        return true;
    case CT_FUNC: return a->u.func == b->u.func;
    default: return a == b;
    }
}

/* ---- printing ---- */

/* float.__repr__: the shortest digits that round-trip, in fixed notation when
 * the decimal exponent is in [-4, 16), scientific otherwise. */
void ct_write_float(struct ct_buf *b, struct ct_env *env, double f)
{
    if (isnan(f)) {
        ct_buf_put(env, b, "nan", 3);
        return;
    }
    if (isinf(f)) {
        ct_buf_put(env, b, f < 0 ? "-inf" : "inf", f < 0 ? 4 : 3);
        return;
    }
    char tmp[40];
    for (int prec = 0; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec, f);
        if (strtod(tmp, NULL) == f)
            break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX: split into sign, digits and exponent. */
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg)
        p++;
    char digits[24];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    int exp10 = atoi(p + 1);
    int decpt = exp10 + 1; /* value = 0.DIGITS * 10^decpt */
    if (neg)
        ct_buf_putc(env, b, '-');
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            ct_buf_put(env, b, "0.", 2);
            for (int i = 0; i < -decpt; i++)
                ct_buf_putc(env, b, '0');
            ct_buf_put(env, b, digits, nd);
        } else if ((size_t)decpt >= nd) {
            ct_buf_put(env, b, digits, nd);
            for (size_t i = nd; i < (size_t)decpt; i++)
                ct_buf_putc(env, b, '0');
            ct_buf_put(env, b, ".0", 2);
        } else {
            ct_buf_put(env, b, digits, (size_t)decpt);
            ct_buf_putc(env, b, '.');
            ct_buf_put(env, b, digits + decpt, nd - (size_t)decpt);
        }
        return;
    }
    ct_buf_putc(env, b, digits[0]);
    if (nd > 1) {
        ct_buf_putc(env, b, '.');
        ct_buf_put(env, b, digits + 1, nd - 1);
    }
    ct_buf_printf(env, b, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
}

static bool is_printable(uint32_t cp)
{
    if (cp == ' ')
        return true;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
        return false;
    default:
        return true;
    }
}

static void write_str_repr(struct ct_env *env, struct ct_buf *b, const char *s, size_t len)
{
    bool has_single = memchr(s, '\'', len) != NULL;
    bool has_double = memchr(s, '"', len) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    ct_buf_putc(env, b, quote);
    for (size_t i = 0; i < len;) {
        size_t start = i;
        uint32_t cp = ct_utf8_next(s, len, &i);
        if (cp == (uint32_t)quote || cp == '\\') {
            ct_buf_putc(env, b, '\\');
            ct_buf_putc(env, b, (char)cp);
        } else if (cp == '\n') {
            ct_buf_put(env, b, "\\n", 2);
        } else if (cp == '\r') {
            ct_buf_put(env, b, "\\r", 2);
        } else if (cp == '\t') {
            ct_buf_put(env, b, "\\t", 2);
        } else if (cp < 0x20 || cp == 0x7F) {
            ct_buf_printf(env, b, "\\x%02x", cp);
        } else if (cp < 0x80 || is_printable(cp)) {
            ct_buf_put(env, b, s + start, i - start);
        } else if (cp < 0x100) {
            ct_buf_printf(env, b, "\\x%02x", cp);
        } else if (cp < 0x10000) {
            ct_buf_printf(env, b, "\\u%04x", cp);
        } else {
            ct_buf_printf(env, b, "\\U%08x", cp);
        }
    }
    ct_buf_putc(env, b, quote);
}

/* The containers being written, outermost first: a value may hold itself
 * (a namespace attribute set to the namespace, a list appended to itself),
 * which Python's repr prints as [...] or {...}; nesting deeper than
 * CT_MAX_DEPTH is an error, as Python's RecursionError. */
struct repr_stack {
    const void *open[CT_MAX_DEPTH];
    int n;
};

static void write_str_at(struct ct_env *env, struct ct_buf *b, const ct_val *v,
                         struct repr_stack *st);

static void write_repr_at(struct ct_env *env, struct ct_buf *b, const ct_val *v,
                          struct repr_stack *st)
{
    if (v->kind == CT_STR)
        write_str_repr(env, b, v->u.str.s, v->u.str.len);
    else if (v->kind == CT_UNDEF)
        ct_buf_put(env, b, "Undefined", 9);
    else
        write_str_at(env, b, v, st);
}

/* Enters container `c`: false when it is already open (a cycle). */
static bool enter(struct ct_env *env, struct repr_stack *st, const void *c)
{
    for (int i = 0; i < st->n; i++)
        if (st->open[i] == c)
            return false;
    if (st->n == CT_MAX_DEPTH)
        ct_fail(env, CT_NOPOS, "a value nests too deeply to print (over %d levels)", CT_MAX_DEPTH);
    st->open[st->n++] = c;
    return true;
}

static void write_seq(struct ct_env *env, struct ct_buf *b, const ct_val *v, struct repr_stack *st)
{
    bool tuple = v->u.list.tuple;
    if (v->u.list.n && !enter(env, st, v->u.list.items)) {
        ct_buf_put(env, b, tuple ? "(...)" : "[...]", 5);
        return;
    }
    ct_buf_putc(env, b, tuple ? '(' : '[');
    for (size_t i = 0; i < v->u.list.n; i++) {
        if (i)
            ct_buf_put(env, b, ", ", 2);
        write_repr_at(env, b, v->u.list.items[i], st);
    }
    if (tuple && v->u.list.n == 1)
        ct_buf_putc(env, b, ',');
    ct_buf_putc(env, b, tuple ? ')' : ']');
    if (v->u.list.n)
        st->n--;
}

static void write_dict(struct ct_env *env, struct ct_buf *b, const struct ct_dict *d,
                       struct repr_stack *st)
{
    if (!enter(env, st, d)) {
        ct_buf_put(env, b, "{...}", 5);
        return;
    }
    ct_buf_putc(env, b, '{');
    for (size_t i = 0; i < d->n; i++) {
        if (i)
            ct_buf_put(env, b, ", ", 2);
        write_repr_at(env, b, d->keys[i], st);
        ct_buf_put(env, b, ": ", 2);
        write_repr_at(env, b, d->vals[i], st);
    }
    ct_buf_putc(env, b, '}');
    st->n--;
}

void ct_write_repr(struct ct_env *env, struct ct_buf *b, const ct_val *v)
{
    struct repr_stack st = {.n = 0};
    write_repr_at(env, b, v, &st);
}

static void write_str_at(struct ct_env *env, struct ct_buf *b, const ct_val *v,
                         struct repr_stack *st)
{
    switch (v->kind) {
    case CT_UNDEF: return;
    case CT_NONE: ct_buf_put(env, b, "None", 4); return;
    case CT_BOOL: ct_buf_put(env, b, v->u.b ? "True" : "False", v->u.b ? 4 : 5); return;
    case CT_INT: ct_buf_printf(env, b, "%lld", (long long)v->u.i); return;
    case CT_FLOAT: ct_write_float(b, env, v->u.f); return;
    case CT_STR: ct_buf_put(env, b, v->u.str.s, v->u.str.len); return;
    case CT_LIST: write_seq(env, b, v, st); return;
    case CT_DICT: write_dict(env, b, v->u.dict, st); return;
    case CT_NS:
        ct_buf_put(env, b, "<Namespace ", 11);
        write_dict(env, b, v->u.dict, st);
        ct_buf_putc(env, b, '>');
        return;
    case CT_LOOP: ct_buf_put(env, b, "<LoopContext>", 13); return;
    case CT_FUNC: ct_buf_printf(env, b, "<function %s>", v->u.func->name); return;
    case CT_MACRO: ct_buf_printf(env, b, "<Macro '%s'>", v->u.macro.def->name); return;
    case CT_METHOD: ct_buf_printf(env, b, "<built-in method %s>", v->u.method.fn->name); return;
    }
}

void ct_write_str(struct ct_env *env, struct ct_buf *b, const ct_val *v)
{
    struct repr_stack st = {.n = 0};
    write_str_at(env, b, v, &st);
}

ct_val *ct_to_str(struct ct_env *env, ct_val *v)
{
    if (v->kind == CT_STR)
        return v;
    struct ct_buf b = {.arena = true};
    ct_write_str(env, &b, v);
    return b.data ? ct_str_nocopy(env, b.data, b.len) : ct_str_nocopy(env, "", 0);
}

/* ---- json.dumps ---- */

static void json_string(struct ct_env *env, struct ct_buf *b, const char *s, size_t len,
                        bool ensure_ascii)
{
    ct_buf_putc(env, b, '"');
    for (size_t i = 0; i < len;) {
        size_t start = i;
        uint32_t cp = ct_utf8_next(s, len, &i);
        switch (cp) {
        case '"': ct_buf_put(env, b, "\\\"", 2); continue;
        case '\\': ct_buf_put(env, b, "\\\\", 2); continue;
        case '\n': ct_buf_put(env, b, "\\n", 2); continue;
        case '\r': ct_buf_put(env, b, "\\r", 2); continue;
        case '\t': ct_buf_put(env, b, "\\t", 2); continue;
        case '\b': ct_buf_put(env, b, "\\b", 2); continue;
        case '\f': ct_buf_put(env, b, "\\f", 2); continue;
        default: break;
        }
        if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
            if (cp >= 0x10000) {
                uint32_t c = cp - 0x10000;
                ct_buf_printf(env, b, "\\u%04x\\u%04x", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
            } else {
                ct_buf_printf(env, b, "\\u%04x", cp);
            }
        } else {
            ct_buf_put(env, b, s + start, i - start);
        }
    }
    ct_buf_putc(env, b, '"');
}

static void json_newline(struct ct_env *env, struct ct_buf *b, const struct ct_json_opts *o,
                         int depth)
{
    ct_buf_putc(env, b, '\n');
    for (int i = 0; i < o->indent * depth; i++)
        ct_buf_putc(env, b, ' ');
}

static int cmp_keys(const void *a, const void *b)
{
    const ct_val *x = *(ct_val *const *)a, *y = *(ct_val *const *)b;
    size_t n = x->u.str.len < y->u.str.len ? x->u.str.len : y->u.str.len;
    int c = memcmp(x->u.str.s, y->u.str.s, n);
    if (c)
        return c;
    return (x->u.str.len > y->u.str.len) - (x->u.str.len < y->u.str.len);
}

void ct_write_json(struct ct_env *env, struct ct_buf *b, const ct_val *v,
                   const struct ct_json_opts *o, uint32_t pos, int depth)
{
    if (depth > CT_MAX_DEPTH)
        ct_fail(env, pos, "tojson: value nests too deeply");
    switch (v->kind) {
    case CT_NONE: ct_buf_put(env, b, "null", 4); return;
    case CT_BOOL: ct_buf_put(env, b, v->u.b ? "true" : "false", v->u.b ? 4 : 5); return;
    case CT_INT: ct_buf_printf(env, b, "%lld", (long long)v->u.i); return;
    case CT_FLOAT:
        if (isnan(v->u.f))
            ct_buf_put(env, b, "NaN", 3);
        else if (isinf(v->u.f))
            ct_buf_put(env, b, v->u.f < 0 ? "-Infinity" : "Infinity", v->u.f < 0 ? 9 : 8);
        else
            ct_write_float(b, env, v->u.f);
        return;
    case CT_STR: json_string(env, b, v->u.str.s, v->u.str.len, o->ensure_ascii); return;
    case CT_LIST:
        if (!v->u.list.n) {
            ct_buf_put(env, b, "[]", 2);
            return;
        }
        ct_buf_putc(env, b, '[');
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i)
                ct_buf_put(env, b, o->item_sep, strlen(o->item_sep));
            if (o->indent >= 0)
                json_newline(env, b, o, depth + 1);
            ct_write_json(env, b, v->u.list.items[i], o, pos, depth + 1);
        }
        if (o->indent >= 0)
            json_newline(env, b, o, depth);
        ct_buf_putc(env, b, ']');
        return;
    case CT_DICT: {
        const struct ct_dict *d = v->u.dict;
        if (!d->n) {
            ct_buf_put(env, b, "{}", 2);
            return;
        }
        size_t *order = ct_alloc(env, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++)
            order[i] = i;
        if (o->sort_keys) {
            ct_val **keys = ct_alloc(env, d->n * sizeof *keys);
            memcpy(keys, d->keys, d->n * sizeof *keys);
            qsort(keys, d->n, sizeof *keys, cmp_keys);
            for (size_t i = 0; i < d->n; i++)
                for (size_t j = 0; j < d->n; j++)
                    if (d->keys[j] == keys[i])
                        order[i] = j;
        }
        ct_buf_putc(env, b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i)
                ct_buf_put(env, b, o->item_sep, strlen(o->item_sep));
            if (o->indent >= 0)
                json_newline(env, b, o, depth + 1);
            const ct_val *k = d->keys[order[i]];
            json_string(env, b, k->u.str.s, k->u.str.len, o->ensure_ascii);
            ct_buf_put(env, b, o->key_sep, strlen(o->key_sep));
            ct_write_json(env, b, d->vals[order[i]], o, pos, depth + 1);
        }
        if (o->indent >= 0)
            json_newline(env, b, o, depth);
        ct_buf_putc(env, b, '}');
        return;
    }
    default:
        ct_fail(env, pos, "tojson: Object of type %s is not JSON serializable", ct_type_name(v));
    }
}
