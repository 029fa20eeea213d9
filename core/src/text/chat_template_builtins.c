/* Chat templates: filters, tests, global functions and str/dict/list methods,
 * each with the semantics of its Jinja2 builtin or Python method. */
#include "chat_template_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define ENV (&r->env)

/* Binds arguments to a parameter list declared inline:
 *   BIND("replace", v, "old", "new", "count"); then v[0], v[1], v[2]. */
#define BIND(fname, out, ...)                                                   \
    static const char *const out##_params[] = {__VA_ARGS__};                    \
    ct_val *out[ARRAY_LEN(out##_params)];                                       \
    ct_bind(r, pos, a, fname, out##_params, ARRAY_LEN(out##_params), out)

static const struct ct_args empty_args = {0};

static void no_args(struct ct_render *r, uint32_t pos, const struct ct_args *a, const char *name)
{
    if (a->npos || a->nkw)
        ct_fail(ENV, pos, "%s() takes no arguments", name);
}

/* ---- argument helpers ---- */

static ct_val *need_str(struct ct_render *r, uint32_t pos, ct_val *v, const char *what)
{
    if (v->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, v);
    if (v->kind != CT_STR)
        ct_fail(ENV, pos, "%s: expected a string, got %s", what, ct_type_name(v));
    return v;
}

static int64_t need_int(struct ct_render *r, uint32_t pos, ct_val *v, const char *what)
{
    if (v->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, v);
    if (v->kind == CT_BOOL)
        return v->u.b;
    if (v->kind != CT_INT)
        ct_fail(ENV, pos, "%s: expected an integer, got %s", what, ct_type_name(v));
    return v->u.i;
}

static bool opt_bool(ct_val *v, bool def)
{
    return v ? ct_truthy(v) : def;
}

static ct_val *str_of(struct ct_render *r, ct_val *v)
{
    return ct_to_str(ENV, v);
}

static ct_val *buf_str(struct ct_render *r, struct ct_buf *b)
{
    return b->data ? ct_str_nocopy(ENV, b->data, b->len) : ct_str_nocopy(ENV, "", 0);
}

/* ---- string primitives ---- */

static bool in_chars(uint32_t cp, const ct_val *chars)
{
    for (size_t i = 0; i < chars->u.str.len;)
        if (ct_utf8_next(chars->u.str.s, chars->u.str.len, &i) == cp)
            return true;
    return false;
}

/* str.strip/lstrip/rstrip: chars NULL or None means whitespace. */
static ct_val *strip(struct ct_render *r, ct_val *s, ct_val *chars, bool left, bool right)
{
    const char *p = s->u.str.s;
    size_t start = 0, end = s->u.str.len;
    bool ws = !chars || chars->kind == CT_NONE;
    if (left) {
        while (start < end) {
            size_t j = start;
            uint32_t cp = ct_utf8_next(p, end, &j);
            if (ws ? !ct_is_space(cp) : !in_chars(cp, chars))
                break;
            start = j;
        }
    }
    if (right) {
        while (end > start) {
            size_t i = end - 1;
            while (i > start && ((unsigned char)p[i] & 0xC0) == 0x80)
                i--;
            size_t j = i;
            uint32_t cp = ct_utf8_next(p, end, &j);
            if (ws ? !ct_is_space(cp) : !in_chars(cp, chars))
                break;
            end = i;
        }
    }
    if (start == 0 && end == s->u.str.len)
        return s;
    return ct_str(ENV, p + start, end - start);
}

static const char *find_sub(const char *s, size_t len, const char *sub, size_t n)
{
    if (!n)
        return s;
    return memmem(s, len, sub, n);
}

static const char *rfind_sub(const char *s, size_t len, const char *sub, size_t n)
{
    if (n > len)
        return NULL;
    for (size_t i = len - n + 1; i-- > 0;)
        if (memcmp(s + i, sub, n) == 0)
            return s + i;
    return NULL;
}

static ct_val *replace(struct ct_render *r, ct_val *s, ct_val *old, ct_val *new, int64_t count)
{
    const char *p = s->u.str.s;
    size_t len = s->u.str.len, on = old->u.str.len;
    struct ct_buf b = {.arena = true};
    if (!on) {
        /* Python inserts `new` before every character and at the end. */
        size_t i = 0;
        int64_t done = 0;
        while (count < 0 || done < count) {
            ct_buf_put(ENV, &b, new->u.str.s, new->u.str.len);
            done++;
            if (i >= len)
                break;
            size_t j = i;
            ct_utf8_next(p, len, &j);
            ct_buf_put(ENV, &b, p + i, j - i);
            i = j;
        }
        ct_buf_put(ENV, &b, p + i, len - i);
        return buf_str(r, &b);
    }
    size_t i = 0;
    for (int64_t done = 0; count < 0 || done < count; done++) {
        const char *hit = find_sub(p + i, len - i, old->u.str.s, on);
        if (!hit)
            break;
        size_t at = (size_t)(hit - p);
        ct_buf_put(ENV, &b, p + i, at - i);
        ct_buf_put(ENV, &b, new->u.str.s, new->u.str.len);
        i = at + on;
    }
    ct_buf_put(ENV, &b, p + i, len - i);
    return buf_str(r, &b);
}

/* str.split / str.rsplit. */
static ct_val *split(struct ct_render *r, uint32_t pos, ct_val *s, ct_val *sep, int64_t maxsplit,
                     bool from_right)
{
    const char *p = s->u.str.s;
    size_t len = s->u.str.len;
    struct ct_vec parts = {0};
    if (sep && sep->kind != CT_NONE) {
        need_str(r, pos, sep, "split");
        size_t n = sep->u.str.len;
        if (!n)
            ct_fail(ENV, pos, "split: empty separator");
        if (!from_right) {
            size_t i = 0;
            for (int64_t k = 0; maxsplit < 0 || k < maxsplit; k++) {
                const char *hit = find_sub(p + i, len - i, sep->u.str.s, n);
                if (!hit)
                    break;
                ct_vec_push(ENV, &parts, ct_str(ENV, p + i, (size_t)(hit - p) - i));
                i = (size_t)(hit - p) + n;
            }
            ct_vec_push(ENV, &parts, ct_str(ENV, p + i, len - i));
            return ct_vec_finish(ENV, &parts, false);
        }
        size_t end = len;
        struct ct_vec rev = {0};
        for (int64_t k = 0; maxsplit < 0 || k < maxsplit; k++) {
            const char *hit = rfind_sub(p, end, sep->u.str.s, n);
            if (!hit)
                break;
            size_t at = (size_t)(hit - p);
            ct_vec_push(ENV, &rev, ct_str(ENV, p + at + n, end - at - n));
            end = at;
        }
        ct_vec_push(ENV, &rev, ct_str(ENV, p, end));
        for (size_t i = rev.n; i-- > 0;)
            ct_vec_push(ENV, &parts, rev.items[i]);
        return ct_vec_finish(ENV, &parts, false);
    }
    /* Runs of whitespace; no empty strings. */
    size_t count = ct_utf8_count(p, len);
    bool *space = ct_alloc(ENV, count + 1);
    size_t *offs = ct_alloc(ENV, (count + 1) * sizeof *offs);
    for (size_t i = 0, k = 0; k < count; k++) {
        offs[k] = i;
        space[k] = ct_is_space(ct_utf8_next(p, len, &i));
    }
    offs[count] = len;
    if (!from_right) {
        size_t k = 0;
        int64_t done = 0;
        for (;;) {
            while (k < count && space[k])
                k++;
            if (k == count)
                break;
            if (maxsplit >= 0 && done == maxsplit) {
                /* The rest, trailing whitespace included, as Python does. */
                ct_vec_push(ENV, &parts, ct_str(ENV, p + offs[k], len - offs[k]));
                break;
            }
            size_t e = k;
            while (e < count && !space[e])
                e++;
            ct_vec_push(ENV, &parts, ct_str(ENV, p + offs[k], offs[e] - offs[k]));
            done++;
            k = e;
        }
        return ct_vec_finish(ENV, &parts, false);
    }
    struct ct_vec rev = {0};
    size_t k = count;
    int64_t done = 0;
    for (;;) {
        while (k > 0 && space[k - 1])
            k--;
        if (k == 0)
            break;
        if (maxsplit >= 0 && done == maxsplit) {
            ct_vec_push(ENV, &rev, ct_str(ENV, p, offs[k]));
            break;
        }
        size_t b = k;
        while (b > 0 && !space[b - 1])
            b--;
        ct_vec_push(ENV, &rev, ct_str(ENV, p + offs[b], offs[k] - offs[b]));
        done++;
        k = b;
    }
    for (size_t i = rev.n; i-- > 0;)
        ct_vec_push(ENV, &parts, rev.items[i]);
    return ct_vec_finish(ENV, &parts, false);
}

static bool is_line_break(uint32_t cp)
{
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
           cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

/* str.splitlines(): keepends false. */
static ct_val *splitlines(struct ct_render *r, ct_val *s)
{
    const char *p = s->u.str.s;
    size_t len = s->u.str.len, start = 0, i = 0;
    struct ct_vec lines = {0};
    while (i < len) {
        size_t at = i;
        uint32_t cp = ct_utf8_next(p, len, &i);
        if (!is_line_break(cp))
            continue;
        ct_vec_push(ENV, &lines, ct_str(ENV, p + start, at - start));
        if (cp == '\r' && i < len && p[i] == '\n')
            i++;
        start = i;
    }
    if (start < len)
        ct_vec_push(ENV, &lines, ct_str(ENV, p + start, len - start));
    return ct_vec_finish(ENV, &lines, false);
}

enum case_map { CASE_UPPER, CASE_LOWER, CASE_TITLE };

static uint32_t map_case(uint32_t cp, enum case_map m)
{
    utf8proc_int32_t c = (utf8proc_int32_t)cp;
    switch (m) {
    case CASE_UPPER: return (uint32_t)utf8proc_toupper(c);
    case CASE_LOWER: return (uint32_t)utf8proc_tolower(c);
    default: return (uint32_t)utf8proc_totitle(c);
    }
}

static bool is_cased(uint32_t cp)
{
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

/* mode: 0 upper, 1 lower, 2 Python title(), 3 capitalize(). */
static ct_val *change_case(struct ct_render *r, ct_val *s, int mode)
{
    struct ct_buf b = {.arena = true};
    const char *p = s->u.str.s;
    size_t len = s->u.str.len;
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < len;) {
        uint32_t cp = ct_utf8_next(p, len, &i), out;
        switch (mode) {
        case 0: out = map_case(cp, CASE_UPPER); break;
        case 1: out = map_case(cp, CASE_LOWER); break;
        case 2:
            out = map_case(cp, prev_cased ? CASE_LOWER : CASE_TITLE);
            prev_cased = is_cased(cp);
            break;
        default: out = map_case(cp, first ? CASE_TITLE : CASE_LOWER); break;
        }
        first = false;
        char enc[4];
        ct_buf_put(ENV, &b, enc, ct_utf8_put(out, enc));
    }
    return buf_str(r, &b);
}

static ct_val *html_escape(struct ct_render *r, ct_val *s)
{
    struct ct_buf b = {.arena = true};
    for (size_t i = 0; i < s->u.str.len; i++) {
        char c = s->u.str.s[i];
        switch (c) {
        case '&': ct_buf_put(ENV, &b, "&amp;", 5); break;
        case '<': ct_buf_put(ENV, &b, "&lt;", 4); break;
        case '>': ct_buf_put(ENV, &b, "&gt;", 4); break;
        case '"': ct_buf_put(ENV, &b, "&#34;", 5); break;
        case '\'': ct_buf_put(ENV, &b, "&#39;", 5); break;
        default: ct_buf_putc(ENV, &b, c); break;
        }
    }
    return buf_str(r, &b);
}

/* A str method's optional start/end as code point indices, to a byte range. */
static void str_range(struct ct_render *r, uint32_t pos, ct_val *s, ct_val *start, ct_val *end,
                      size_t *b0, size_t *b1)
{
    int64_t n = (int64_t)ct_utf8_count(s->u.str.s, s->u.str.len);
    int64_t a = 0, z = n;
    if (start && start->kind != CT_NONE)
        a = need_int(r, pos, start, "start");
    if (end && end->kind != CT_NONE)
        z = need_int(r, pos, end, "end");
    if (a < 0)
        a = a + n < 0 ? 0 : a + n;
    if (z < 0)
        z = z + n < 0 ? 0 : z + n;
    if (a > n)
        a = n;
    if (z > n)
        z = n;
    if (z < a)
        z = a;
    size_t i = 0;
    int64_t k = 0;
    for (; k < a; k++)
        ct_utf8_next(s->u.str.s, s->u.str.len, &i);
    *b0 = i;
    for (; k < z; k++)
        ct_utf8_next(s->u.str.s, s->u.str.len, &i);
    *b1 = i;
}

/* ---- methods ---- */

static ct_val *m_affix(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a,
                       bool prefix)
{
    BIND(prefix ? "startswith" : "endswith", v, "prefix", "start", "end");
    if (!v[0])
        ct_fail(ENV, pos, "%s() takes at least 1 argument", prefix ? "startswith" : "endswith");
    size_t b0, b1;
    str_range(r, pos, self, v[1], v[2], &b0, &b1);
    const char *s = self->u.str.s + b0;
    size_t len = b1 - b0;
    ct_val *one = v[0];
    size_t n = one->kind == CT_LIST && one->u.list.tuple ? one->u.list.n : 1;
    for (size_t i = 0; i < n; i++) {
        ct_val *x = one->kind == CT_LIST && one->u.list.tuple ? one->u.list.items[i] : one;
        need_str(r, pos, x, prefix ? "startswith" : "endswith");
        size_t xn = x->u.str.len;
        if (xn <= len && memcmp(prefix ? s : s + len - xn, x->u.str.s, xn) == 0)
            return &ct_true;
    }
    return &ct_false;
}

static ct_val *m_startswith(struct ct_render *r, uint32_t pos, ct_val *self,
                            const struct ct_args *a)
{
    return m_affix(r, pos, self, a, true);
}

static ct_val *m_endswith(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    return m_affix(r, pos, self, a, false);
}

static ct_val *m_split_any(struct ct_render *r, uint32_t pos, ct_val *self,
                           const struct ct_args *a, bool right)
{
    BIND(right ? "rsplit" : "split", v, "sep", "maxsplit");
    int64_t max = v[1] ? need_int(r, pos, v[1], "maxsplit") : -1;
    return split(r, pos, self, v[0], max, right);
}

static ct_val *m_split(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    return m_split_any(r, pos, self, a, false);
}

static ct_val *m_rsplit(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    return m_split_any(r, pos, self, a, true);
}

static ct_val *m_strip_any(struct ct_render *r, uint32_t pos, ct_val *self,
                           const struct ct_args *a, bool left, bool right)
{
    BIND("strip", v, "chars");
    if (v[0] && v[0]->kind != CT_NONE)
        need_str(r, pos, v[0], "strip");
    return strip(r, self, v[0], left, right);
}

static ct_val *m_strip(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    return m_strip_any(r, pos, self, a, true, true);
}

static ct_val *m_lstrip(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    return m_strip_any(r, pos, self, a, true, false);
}

static ct_val *m_rstrip(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    return m_strip_any(r, pos, self, a, false, true);
}

static ct_val *m_replace(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    BIND("replace", v, "old", "new", "count");
    if (!v[0] || !v[1])
        ct_fail(ENV, pos, "replace() takes at least 2 arguments");
    need_str(r, pos, v[0], "replace");
    need_str(r, pos, v[1], "replace");
    int64_t count = v[2] ? need_int(r, pos, v[2], "replace") : -1;
    return replace(r, self, v[0], v[1], count);
}

static ct_val *m_upper(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    no_args(r, pos, a, "upper");
    return change_case(r, self, 0);
}

static ct_val *m_lower(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    no_args(r, pos, a, "lower");
    return change_case(r, self, 1);
}

static ct_val *m_title(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    no_args(r, pos, a, "title");
    return change_case(r, self, 2);
}

static ct_val *m_capitalize(struct ct_render *r, uint32_t pos, ct_val *self,
                            const struct ct_args *a)
{
    no_args(r, pos, a, "capitalize");
    return change_case(r, self, 3);
}

static ct_val *m_find_any(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a,
                          const char *name, bool right, bool must)
{
    BIND(name, v, "sub", "start", "end");
    if (!v[0])
        ct_fail(ENV, pos, "%s() takes at least 1 argument", name);
    need_str(r, pos, v[0], name);
    size_t b0, b1;
    str_range(r, pos, self, v[1], v[2], &b0, &b1);
    const char *s = self->u.str.s;
    const char *hit = right ? rfind_sub(s + b0, b1 - b0, v[0]->u.str.s, v[0]->u.str.len)
                            : find_sub(s + b0, b1 - b0, v[0]->u.str.s, v[0]->u.str.len);
    if (!hit) {
        if (must)
            ct_fail(ENV, pos, "substring not found");
        return ct_int(ENV, -1);
    }
    return ct_int(ENV, (int64_t)ct_utf8_count(s, (size_t)(hit - s)));
}

static ct_val *m_find(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    return m_find_any(r, pos, self, a, "find", false, false);
}

static ct_val *m_rfind(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    return m_find_any(r, pos, self, a, "rfind", true, false);
}

static ct_val *m_str_index(struct ct_render *r, uint32_t pos, ct_val *self,
                           const struct ct_args *a)
{
    return m_find_any(r, pos, self, a, "index", false, true);
}

static ct_val *m_str_count(struct ct_render *r, uint32_t pos, ct_val *self,
                           const struct ct_args *a)
{
    BIND("count", v, "sub", "start", "end");
    if (!v[0])
        ct_fail(ENV, pos, "count() takes at least 1 argument");
    need_str(r, pos, v[0], "count");
    size_t b0, b1;
    str_range(r, pos, self, v[1], v[2], &b0, &b1);
    const char *s = self->u.str.s + b0;
    size_t len = b1 - b0, n = v[0]->u.str.len;
    if (!n)
        return ct_int(ENV, (int64_t)ct_utf8_count(s, len) + 1);
    int64_t count = 0;
    for (size_t i = 0;;) {
        const char *hit = find_sub(s + i, len - i, v[0]->u.str.s, n);
        if (!hit)
            break;
        count++;
        i = (size_t)(hit - s) + n;
    }
    return ct_int(ENV, count);
}

static ct_val *m_join(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    BIND("join", v, "iterable");
    if (!v[0])
        ct_fail(ENV, pos, "join() takes exactly one argument");
    ct_val *items = ct_iterate(r, pos, v[0]);
    struct ct_buf b = {.arena = true};
    for (size_t i = 0; i < items->u.list.n; i++) {
        ct_val *x = items->u.list.items[i];
        if (x->kind != CT_STR)
            ct_fail(ENV, pos, "sequence item %zu: expected str instance, %s found", i,
                    ct_type_name(x));
        if (i)
            ct_buf_put(ENV, &b, self->u.str.s, self->u.str.len);
        ct_buf_put(ENV, &b, x->u.str.s, x->u.str.len);
    }
    return buf_str(r, &b);
}

static ct_val *m_splitlines(struct ct_render *r, uint32_t pos, ct_val *self,
                            const struct ct_args *a)
{
    BIND("splitlines", v, "keepends");
    if (v[0] && ct_truthy(v[0]))
        ct_fail(ENV, pos, "splitlines(keepends=True) is not supported");
    return splitlines(r, self);
}

static ct_val *m_fix(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a,
                     bool prefix)
{
    BIND(prefix ? "removeprefix" : "removesuffix", v, "affix");
    if (!v[0])
        ct_fail(ENV, pos, "removeprefix/removesuffix takes exactly one argument");
    need_str(r, pos, v[0], "removeprefix");
    size_t n = v[0]->u.str.len, len = self->u.str.len;
    if (n > len)
        return self;
    if (prefix && !memcmp(self->u.str.s, v[0]->u.str.s, n))
        return ct_str(ENV, self->u.str.s + n, len - n);
    if (!prefix && !memcmp(self->u.str.s + len - n, v[0]->u.str.s, n))
        return ct_str(ENV, self->u.str.s, len - n);
    return self;
}

static ct_val *m_removeprefix(struct ct_render *r, uint32_t pos, ct_val *self,
                              const struct ct_args *a)
{
    return m_fix(r, pos, self, a, true);
}

static ct_val *m_removesuffix(struct ct_render *r, uint32_t pos, ct_val *self,
                              const struct ct_args *a)
{
    return m_fix(r, pos, self, a, false);
}

/* isdigit, isalpha, ...: every character passes and there is at least one. */
static ct_val *str_all(struct ct_render *r, ct_val *s, int kind)
{
    if (!s->u.str.len)
        return &ct_false;
    bool any_cased = false;
    for (size_t i = 0; i < s->u.str.len;) {
        uint32_t cp = ct_utf8_next(s->u.str.s, s->u.str.len, &i);
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        bool letter = c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
        bool number = c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
        bool ok;
        switch (kind) {
        case 0: ok = c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NO; break; /* isdigit */
        case 1: ok = letter; break;                                               /* isalpha */
        case 2: ok = letter || number; break;                                     /* isalnum */
        case 3: ok = ct_is_space(cp); break;                                      /* isspace */
        case 4: /* isupper */
            ok = c != UTF8PROC_CATEGORY_LL && c != UTF8PROC_CATEGORY_LT;
            any_cased |= c == UTF8PROC_CATEGORY_LU;
            break;
        default: /* islower */
            ok = c != UTF8PROC_CATEGORY_LU && c != UTF8PROC_CATEGORY_LT;
            any_cased |= c == UTF8PROC_CATEGORY_LL;
            break;
        }
        if (!ok)
            return &ct_false;
    }
    return ct_bool(kind < 4 || any_cased);
}

#define STR_PREDICATE(fname, kind)                                                         \
    static ct_val *m_##fname(struct ct_render *r, uint32_t pos, ct_val *self,              \
                             const struct ct_args *a)                                      \
    {                                                                                      \
        no_args(r, pos, a, #fname);                                                        \
        return str_all(r, self, kind);                                                     \
    }
STR_PREDICATE(isdigit, 0)
STR_PREDICATE(isalpha, 1)
STR_PREDICATE(isalnum, 2)
STR_PREDICATE(isspace, 3)
STR_PREDICATE(isupper, 4)
STR_PREDICATE(islower, 5)

/* str.format with {} / {0} / {name} fields and no format specs. */
static ct_val *m_format(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    const char *p = self->u.str.s;
    size_t len = self->u.str.len, auto_index = 0;
    struct ct_buf b = {.arena = true};
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if ((c == '{' || c == '}') && i + 1 < len && p[i + 1] == c) {
            ct_buf_putc(ENV, &b, c);
            i++;
            continue;
        }
        if (c == '}')
            ct_fail(ENV, pos, "format: single '}' encountered in format string");
        if (c != '{') {
            ct_buf_putc(ENV, &b, c);
            continue;
        }
        size_t close = i + 1;
        while (close < len && p[close] != '}')
            close++;
        if (close == len)
            ct_fail(ENV, pos, "format: single '{' encountered in format string");
        const char *field = p + i + 1;
        size_t flen = close - i - 1;
        if (memchr(field, ':', flen) || memchr(field, '!', flen) || memchr(field, '.', flen) ||
            memchr(field, '[', flen))
            ct_fail(ENV, pos, "format: only plain {} fields are supported");
        ct_val *v = NULL;
        if (!flen) {
            if (auto_index >= a->npos)
                ct_fail(ENV, pos, "format: not enough positional arguments");
            v = a->pos[auto_index++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            size_t k = (size_t)strtoul(field, NULL, 10);
            if (k >= a->npos)
                ct_fail(ENV, pos, "format: replacement index %zu out of range", k);
            v = a->pos[k];
        } else {
            for (size_t k = 0; k < a->nkw; k++)
                if (strlen(a->kw_names[k]) == flen && !memcmp(a->kw_names[k], field, flen))
                    v = a->kw[k];
            if (!v)
                ct_fail(ENV, pos, "format: no argument named '%.*s'", (int)flen, field);
        }
        ct_write_str(ENV, &b, v);
        i = close;
    }
    return buf_str(r, &b);
}

static ct_val *m_items(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    no_args(r, pos, a, "items");
    const struct ct_dict *d = self->u.dict;
    ct_val *l = ct_list(ENV, d->n, false);
    for (size_t i = 0; i < d->n; i++) {
        ct_val *t = ct_list(ENV, 2, true);
        t->u.list.items[0] = d->keys[i];
        t->u.list.items[1] = d->vals[i];
        l->u.list.items[i] = t;
    }
    return l;
}

static ct_val *m_keys(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    no_args(r, pos, a, "keys");
    return ct_iterate(r, pos, self);
}

static ct_val *m_values(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    no_args(r, pos, a, "values");
    ct_val *l = ct_list(ENV, self->u.dict->n, false);
    for (size_t i = 0; i < self->u.dict->n; i++)
        l->u.list.items[i] = self->u.dict->vals[i];
    return l;
}

static ct_val *m_get(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    BIND("get", v, "key", "default");
    if (!v[0])
        ct_fail(ENV, pos, "get() takes at least 1 argument");
    if (v[0]->kind == CT_STR) {
        ct_val *x = ct_dict_get(self->u.dict, v[0]->u.str.s, v[0]->u.str.len);
        if (x)
            return x;
    }
    return v[1] ? v[1] : &ct_none;
}

static ct_val *m_list_index(struct ct_render *r, uint32_t pos, ct_val *self,
                            const struct ct_args *a)
{
    BIND("index", v, "value");
    if (!v[0])
        ct_fail(ENV, pos, "index() takes at least 1 argument");
    for (size_t i = 0; i < self->u.list.n; i++)
        if (ct_equal(self->u.list.items[i], v[0]))
            return ct_int(ENV, (int64_t)i);
    ct_fail(ENV, pos, "list.index(x): x not in list");
}

static ct_val *m_list_count(struct ct_render *r, uint32_t pos, ct_val *self,
                            const struct ct_args *a)
{
    BIND("count", v, "value");
    if (!v[0])
        ct_fail(ENV, pos, "count() takes exactly one argument");
    int64_t n = 0;
    for (size_t i = 0; i < self->u.list.n; i++)
        n += ct_equal(self->u.list.items[i], v[0]);
    return ct_int(ENV, n);
}

static ct_val *m_cycle(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    if (!a->npos || a->nkw)
        ct_fail(ENV, pos, "loop.cycle() needs at least one positional argument");
    return a->pos[self->u.loop->index0 % a->npos];
}

static const struct ct_builtin str_methods[] = {
    {"startswith", m_startswith}, {"endswith", m_endswith},   {"split", m_split},
    {"rsplit", m_rsplit},         {"strip", m_strip},         {"lstrip", m_lstrip},
    {"rstrip", m_rstrip},         {"replace", m_replace},     {"upper", m_upper},
    {"lower", m_lower},           {"title", m_title},         {"capitalize", m_capitalize},
    {"find", m_find},             {"rfind", m_rfind},         {"index", m_str_index},
    {"count", m_str_count},       {"join", m_join},           {"splitlines", m_splitlines},
    {"removeprefix", m_removeprefix}, {"removesuffix", m_removesuffix},
    {"isdigit", m_isdigit},       {"isalpha", m_isalpha},     {"isalnum", m_isalnum},
    {"isspace", m_isspace},       {"isupper", m_isupper},     {"islower", m_islower},
    {"format", m_format},
};

static const struct ct_builtin dict_methods[] = {
    {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"get", m_get},
};

static const struct ct_builtin list_methods[] = {
    {"index", m_list_index}, {"count", m_list_count},
};

static const struct ct_builtin loop_methods[] = {
    {"cycle", m_cycle},
};

static const struct ct_builtin *find_in(const struct ct_builtin *t, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name))
            return &t[i];
    return NULL;
}

const struct ct_builtin *ct_find_method(const ct_val *v, const char *name)
{
    switch (v->kind) {
    case CT_STR: return find_in(str_methods, ARRAY_LEN(str_methods), name);
    case CT_DICT: return find_in(dict_methods, ARRAY_LEN(dict_methods), name);
    case CT_LIST: return find_in(list_methods, ARRAY_LEN(list_methods), name);
    case CT_LOOP: return find_in(loop_methods, ARRAY_LEN(loop_methods), name);
    default: return NULL;
    }
}

/* ---- filters ---- */

static ct_val *f_length(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "length");
    return ct_int(ENV, ct_length(r, pos, v));
}

static ct_val *f_tojson(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("tojson", x, "ensure_ascii", "indent", "separators", "sort_keys");
    struct ct_json_opts o = {
        .ensure_ascii = opt_bool(x[0], false),
        .indent = -1,
        .sort_keys = opt_bool(x[3], false),
    };
    if (x[1] && x[1]->kind != CT_NONE) {
        int64_t indent = need_int(r, pos, x[1], "tojson indent");
        o.indent = indent < 0 ? 0 : indent > 64 ? 64 : (int)indent;
    }
    o.item_sep = o.indent >= 0 ? "," : ", ";
    o.key_sep = ": ";
    if (x[2] && x[2]->kind != CT_NONE) {
        ct_val *s = x[2];
        if (s->kind != CT_LIST || s->u.list.n != 2 || s->u.list.items[0]->kind != CT_STR ||
            s->u.list.items[1]->kind != CT_STR)
            ct_fail(ENV, pos, "tojson: separators must be a pair of strings");
        o.item_sep = s->u.list.items[0]->u.str.s;
        o.key_sep = s->u.list.items[1]->u.str.s;
    }
    struct ct_buf b = {.arena = true};
    ct_write_json(ENV, &b, v, &o, pos, 0);
    return buf_str(r, &b);
}

static ct_val *f_trim(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("trim", x, "chars");
    if (x[0] && x[0]->kind != CT_NONE)
        need_str(r, pos, x[0], "trim");
    return strip(r, str_of(r, v), x[0], true, true);
}

static ct_val *f_upper(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "upper");
    return change_case(r, str_of(r, v), 0);
}

static ct_val *f_lower(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "lower");
    return change_case(r, str_of(r, v), 1);
}

static ct_val *f_capitalize(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "capitalize");
    return change_case(r, str_of(r, v), 3);
}

/* Jinja's title: words start after runs of [-\s({[<]. */
static ct_val *f_title(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "title");
    ct_val *s = str_of(r, v);
    struct ct_buf b = {.arena = true};
    bool word_start = true;
    for (size_t i = 0; i < s->u.str.len;) {
        uint32_t cp = ct_utf8_next(s->u.str.s, s->u.str.len, &i);
        bool sep = ct_is_space(cp) || (cp < 0x80 && strchr("-({[<", (int)cp) && cp);
        uint32_t out = sep ? cp : map_case(cp, word_start ? CASE_UPPER : CASE_LOWER);
        word_start = sep;
        char enc[4];
        ct_buf_put(ENV, &b, enc, ct_utf8_put(out, enc));
    }
    return buf_str(r, &b);
}

static ct_val *f_default(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("default", x, "default_value", "boolean");
    ct_val *def = x[0] ? x[0] : ct_str_nocopy(ENV, "", 0);
    if (v->kind == CT_UNDEF || (opt_bool(x[1], false) && !ct_truthy(v)))
        return def;
    return v;
}

static ct_val *attr_path(struct ct_render *r, uint32_t pos, ct_val *v, ct_val *attr)
{
    if (attr->kind == CT_INT)
        return ct_getitem(r, pos, v, attr);
    need_str(r, pos, attr, "attribute");
    /* "a.b.0" walks attributes and indices, as Jinja's make_attrgetter. */
    const char *s = attr->u.str.s;
    while (1) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        ct_val *key;
        char *end;
        long long idx = strtoll(s, &end, 10);
        if (n && end == s + n)
            key = ct_int(ENV, idx);
        else
            key = ct_str(ENV, s, n);
        v = ct_getitem(r, pos, v, key);
        if (!dot)
            return v;
        s = dot + 1;
    }
}

static ct_val *f_join(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("join", x, "d", "attribute");
    ct_val *sep = x[0] ? str_of(r, x[0]) : NULL;
    ct_val *items = ct_iterate(r, pos, v);
    struct ct_buf b = {.arena = true};
    for (size_t i = 0; i < items->u.list.n; i++) {
        ct_val *it = items->u.list.items[i];
        if (x[1] && x[1]->kind != CT_NONE)
            it = attr_path(r, pos, it, x[1]);
        if (i && sep)
            ct_buf_put(ENV, &b, sep->u.str.s, sep->u.str.len);
        ct_write_str(ENV, &b, it);
    }
    return buf_str(r, &b);
}

static ct_val *f_first(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "first");
    ct_val *items = ct_iterate(r, pos, v);
    if (!items->u.list.n)
        return ct_undef(ENV, "No first item, sequence was empty.");
    return items->u.list.items[0];
}

static ct_val *f_last(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "last");
    ct_val *items = ct_iterate(r, pos, v);
    if (!items->u.list.n)
        return ct_undef(ENV, "No last item, sequence was empty.");
    return items->u.list.items[items->u.list.n - 1];
}

static ct_val *f_list(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "list");
    ct_val *items = ct_iterate(r, pos, v);
    if (items->kind == CT_LIST && !items->u.list.tuple)
        return items;
    ct_val *l = ct_list(ENV, items->u.list.n, false);
    for (size_t i = 0; i < items->u.list.n; i++)
        l->u.list.items[i] = items->u.list.items[i];
    return l;
}

static ct_val *f_string(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "string");
    return str_of(r, v);
}

/* Drops the underscores Python allows between digits ("1_000", "0x_ff"). */
static char *strip_underscores(struct ct_render *r, const char *s)
{
    size_t n = strlen(s), k = 0;
    char *out = ct_alloc(ENV, n + 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '_' && k && i + 1 < n && s[i + 1] != '_' && s[i + 1] != ' ' &&
            out[k - 1] != ' ' && out[k - 1] != '_')
            continue;
        out[k++] = s[i];
    }
    out[k] = '\0';
    return out;
}

/* Parses a Python int or float literal out of a string; false when it is not one. */
static bool parse_number(const char *s, bool want_int, int base, int64_t *i, double *f)
{
    char *end = (char *)s;
    while (*s == ' ' || *s == '\t' || *s == '\n')
        s++;
    if (want_int) {
        long long v = strtoll(s, &end, base);
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (end != s && !*end) {
            *i = v;
            return true;
        }
    }
    if (strpbrk(s, "xXpP") && !strpbrk(s, "nN")) /* strtod's hex floats are not Python's */
        return false;
    double d = strtod(s, &end);
    while (*end == ' ' || *end == '\t' || *end == '\n')
        end++;
    if (end == s || *end)
        return false;
    *f = d;
    if (want_int) {
        if (!isfinite(d) || d >= 9.2e18 || d <= -9.2e18)
            return false;
        *i = (int64_t)d;
    }
    return true;
}

static ct_val *f_int(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("int", x, "default", "base");
    ct_val *def = x[0] ? x[0] : ct_int(ENV, 0);
    int64_t base = x[1] ? need_int(r, pos, x[1], "int base") : 10;
    bool base_ok = base == 0 || (base >= 2 && base <= 36);
    switch (v->kind) {
    case CT_INT: return v;
    case CT_BOOL: return ct_int(ENV, v->u.b);
    case CT_FLOAT:
        if (!isfinite(v->u.f) || fabs(v->u.f) >= 9.2e18)
            return def;
        return ct_int(ENV, (int64_t)v->u.f);
    case CT_STR: {
        /* int(s, base), else int(float(s)), else the default: Jinja's order. */
        int64_t i;
        double f;
        const char *s = strip_underscores(r, v->u.str.s);
        if (base_ok && parse_number(s, true, (int)base, &i, &f))
            return ct_int(ENV, i);
        if (parse_number(s, false, 10, &i, &f) && isfinite(f) && fabs(f) < 9.2e18)
            return ct_int(ENV, (int64_t)f);
        return def;
    }
    default: return def;
    }
}

static ct_val *f_float(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("float", x, "default");
    ct_val *def = x[0] ? x[0] : ct_float(ENV, 0.0);
    if (ct_is_number(v))
        return ct_float(ENV, ct_as_double(v));
    if (v->kind == CT_STR) {
        int64_t i;
        double f;
        if (parse_number(v->u.str.s, false, 10, &i, &f))
            return ct_float(ENV, f);
    }
    return def;
}

static ct_val *f_abs(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "abs");
    if (v->kind == CT_FLOAT)
        return ct_float(ENV, fabs(v->u.f));
    int64_t i = need_int(r, pos, v, "abs");
    if (i == INT64_MIN)
        ct_fail(ENV, pos, "integer overflow");
    return ct_int(ENV, i < 0 ? -i : i);
}

static ct_val *f_round(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("round", arg, "precision", "method");
    if (!ct_is_number(v))
        ct_fail(ENV, pos, "round: expected a number, got %s", ct_type_name(v));
    int64_t prec = arg[0] ? need_int(r, pos, arg[0], "round precision") : 0;
    const char *method = arg[1] ? need_str(r, pos, arg[1], "round method")->u.str.s : "common";
    double x = ct_as_double(v), m = pow(10.0, (double)prec);
    if (!strcmp(method, "common") && v->kind != CT_FLOAT) {
        /* round(int, ndigits) stays an int in Python. */
        int64_t i = v->kind == CT_BOOL ? v->u.b : v->u.i;
        if (prec >= 0)
            return ct_int(ENV, i);
        return ct_int(ENV, (int64_t)(nearbyint((double)i * m) / m));
    }
    if (!strcmp(method, "common")) {
        /* Python's round(): the correctly rounded decimal, ties to even,
         * which is what printf's %.*f computes from the exact binary value. */
        if (prec >= 0 && prec <= 300 && isfinite(x)) {
            char tmp[400];
            snprintf(tmp, sizeof tmp, "%.*f", (int)prec, x);
            return ct_float(ENV, strtod(tmp, NULL));
        }
        return ct_float(ENV, nearbyint(x * m) / m);
    }
    if (!strcmp(method, "ceil"))
        return ct_float(ENV, ceil(x * m) / m);
    if (!strcmp(method, "floor"))
        return ct_float(ENV, floor(x * m) / m);
    ct_fail(ENV, pos, "round: method must be common, ceil or floor");
}

static ct_val *f_replace(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("replace", x, "old", "new", "count");
    if (!x[0] || !x[1])
        ct_fail(ENV, pos, "replace filter takes at least 2 arguments");
    int64_t count = x[2] && x[2]->kind != CT_NONE ? need_int(r, pos, x[2], "replace") : -1;
    return replace(r, str_of(r, v), str_of(r, x[0]), str_of(r, x[1]), count);
}

static ct_val *f_reverse(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "reverse");
    ct_val *items = ct_iterate(r, pos, v);
    size_t n = items->u.list.n;
    if (v->kind == CT_STR) {
        struct ct_buf b = {.arena = true};
        for (size_t i = n; i-- > 0;) {
            ct_val *c = items->u.list.items[i];
            ct_buf_put(ENV, &b, c->u.str.s, c->u.str.len);
        }
        return buf_str(r, &b);
    }
    ct_val *l = ct_list(ENV, n, false);
    for (size_t i = 0; i < n; i++)
        l->u.list.items[i] = items->u.list.items[n - 1 - i];
    return l;
}

static ct_val *f_items(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "items");
    if (v->kind == CT_UNDEF)
        return ct_list(ENV, 0, false);
    if (v->kind != CT_DICT && v->kind != CT_NS)
        ct_fail(ENV, pos, "items: can only get item pairs from a mapping, not %s",
                ct_type_name(v));
    return m_items(r, pos, v, &empty_args);
}

static ct_val *lowered(struct ct_render *r, ct_val *v, bool case_sensitive)
{
    return !case_sensitive && v->kind == CT_STR ? change_case(r, v, 1) : v;
}

/* A stable merge sort of vals by keys, with Python's comparisons. */
static void sort_by(struct ct_render *r, uint32_t pos, ct_val **vals, ct_val **keys, size_t n,
                    bool reverse)
{
    if (n < 2)
        return;
    ct_val **tv = ct_alloc(ENV, n * sizeof *tv), **tk = ct_alloc(ENV, n * sizeof *tk);
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c = ct_compare(r, pos, keys[j], keys[i]);
                bool take_right = reverse ? c > 0 : c < 0;
                if (take_right) {
                    tv[k] = vals[j];
                    tk[k++] = keys[j++];
                } else {
                    tv[k] = vals[i];
                    tk[k++] = keys[i++];
                }
            }
            while (i < mid) {
                tv[k] = vals[i];
                tk[k++] = keys[i++];
            }
            while (j < hi) {
                tv[k] = vals[j];
                tk[k++] = keys[j++];
            }
        }
        memcpy(vals, tv, n * sizeof *vals);
        memcpy(keys, tk, n * sizeof *keys);
    }
}

static ct_val *f_sort(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("sort", x, "reverse", "case_sensitive", "attribute");
    ct_val *items = ct_iterate(r, pos, v);
    size_t n = items->u.list.n;
    ct_val *out = ct_list(ENV, n, false);
    ct_val **keys = ct_alloc(ENV, (n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        ct_val *it = items->u.list.items[i];
        out->u.list.items[i] = it;
        ct_val *k = x[2] && x[2]->kind != CT_NONE ? attr_path(r, pos, it, x[2]) : it;
        keys[i] = lowered(r, k, opt_bool(x[1], false));
    }
    sort_by(r, pos, out->u.list.items, keys, n, opt_bool(x[0], false));
    return out;
}

static ct_val *f_dictsort(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("dictsort", x, "case_sensitive", "by", "reverse");
    if (v->kind != CT_DICT && v->kind != CT_NS)
        ct_fail(ENV, pos, "dictsort: expected a mapping, got %s", ct_type_name(v));
    bool by_value = false;
    if (x[1]) {
        const char *by = need_str(r, pos, x[1], "dictsort by")->u.str.s;
        if (!strcmp(by, "value"))
            by_value = true;
        else if (strcmp(by, "key"))
            ct_fail(ENV, pos, "dictsort: you can only sort by either \"key\" or \"value\"");
    }
    ct_val *pairs = m_items(r, pos, v, &empty_args);
    size_t n = pairs->u.list.n;
    ct_val **keys = ct_alloc(ENV, (n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++)
        keys[i] = lowered(r, pairs->u.list.items[i]->u.list.items[by_value],
                          opt_bool(x[0], false));
    sort_by(r, pos, pairs->u.list.items, keys, n, opt_bool(x[2], false));
    return pairs;
}

static ct_val *f_minmax(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a,
                        bool max)
{
    BIND(max ? "max" : "min", x, "case_sensitive", "attribute");
    ct_val *items = ct_iterate(r, pos, v);
    if (!items->u.list.n)
        return ct_undef(ENV, "No aggregated item, sequence was empty.");
    ct_val *best = NULL, *best_key = NULL;
    for (size_t i = 0; i < items->u.list.n; i++) {
        ct_val *it = items->u.list.items[i];
        ct_val *k = x[1] && x[1]->kind != CT_NONE ? attr_path(r, pos, it, x[1]) : it;
        k = lowered(r, k, opt_bool(x[0], false));
        if (!best || (max ? ct_compare(r, pos, k, best_key) > 0 : ct_compare(r, pos, k, best_key) < 0)) {
            best = it;
            best_key = k;
        }
    }
    return best;
}

static ct_val *f_min(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    return f_minmax(r, pos, v, a, false);
}

static ct_val *f_max(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    return f_minmax(r, pos, v, a, true);
}

static ct_val *f_sum(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("sum", x, "attribute", "start");
    ct_val *items = ct_iterate(r, pos, v);
    ct_val *total = x[1] ? x[1] : ct_int(ENV, 0);
    for (size_t i = 0; i < items->u.list.n; i++) {
        ct_val *it = items->u.list.items[i];
        if (x[0] && x[0]->kind != CT_NONE)
            it = attr_path(r, pos, it, x[0]);
        if (!ct_is_number(total) || !ct_is_number(it))
            ct_fail(ENV, pos, "sum: unsupported operand types '%s' and '%s'",
                    ct_type_name(total), ct_type_name(it));
        if (total->kind == CT_FLOAT || it->kind == CT_FLOAT) {
            total = ct_float(ENV, ct_as_double(total) + ct_as_double(it));
        } else {
            int64_t s;
            if (__builtin_add_overflow(need_int(r, pos, total, "sum"), need_int(r, pos, it, "sum"),
                                       &s))
                ct_fail(ENV, pos, "integer overflow");
            total = ct_int(ENV, s);
        }
    }
    return total;
}

static ct_val *f_unique(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("unique", x, "case_sensitive", "attribute");
    ct_val *items = ct_iterate(r, pos, v);
    struct ct_vec out = {0}, seen = {0};
    for (size_t i = 0; i < items->u.list.n; i++) {
        ct_val *it = items->u.list.items[i];
        ct_val *k = x[1] && x[1]->kind != CT_NONE ? attr_path(r, pos, it, x[1]) : it;
        k = lowered(r, k, opt_bool(x[0], false));
        bool dup = false;
        for (size_t j = 0; j < seen.n && !dup; j++)
            dup = ct_equal(seen.items[j], k);
        if (dup)
            continue;
        ct_vec_push(ENV, &seen, k);
        ct_vec_push(ENV, &out, it);
    }
    return ct_vec_finish(ENV, &out, false);
}

/* Applies a test by name (select/reject family); `rest` are its arguments. */
static bool apply_test(struct ct_render *r, uint32_t pos, ct_val *name, ct_val *v, ct_val **rest,
                       size_t nrest)
{
    if (!name)
        return ct_truthy(v);
    const struct ct_builtin *t = ct_find_test(need_str(r, pos, name, "test name")->u.str.s);
    if (!t)
        ct_fail(ENV, pos, "no test named '%s'", name->u.str.s);
    struct ct_args a = {.npos = nrest, .pos = rest};
    return ct_truthy(t->fn(r, pos, v, &a));
}

static ct_val *select_common(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a,
                             bool attr, bool keep)
{
    if (a->nkw)
        ct_fail(ENV, pos, "select/reject filters take no keyword arguments");
    size_t skip = attr ? 1 : 0;
    if (attr && !a->npos)
        ct_fail(ENV, pos, "selectattr/rejectattr need an attribute name");
    ct_val *test = a->npos > skip ? a->pos[skip] : NULL;
    ct_val **rest = a->npos > skip + 1 ? a->pos + skip + 1 : NULL;
    size_t nrest = a->npos > skip + 1 ? a->npos - skip - 1 : 0;
    ct_val *items = ct_iterate(r, pos, v);
    struct ct_vec out = {0};
    for (size_t i = 0; i < items->u.list.n; i++) {
        ct_val *it = items->u.list.items[i];
        ct_val *subject = attr ? attr_path(r, pos, it, a->pos[0]) : it;
        if (apply_test(r, pos, test, subject, rest, nrest) == keep)
            ct_vec_push(ENV, &out, it);
    }
    return ct_vec_finish(ENV, &out, false);
}

static ct_val *f_select(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    return select_common(r, pos, v, a, false, true);
}

static ct_val *f_reject(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    return select_common(r, pos, v, a, false, false);
}

static ct_val *f_selectattr(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    return select_common(r, pos, v, a, true, true);
}

static ct_val *f_rejectattr(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    return select_common(r, pos, v, a, true, false);
}

static ct_val *f_map(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    ct_val *items = ct_iterate(r, pos, v);
    ct_val *attribute = NULL, *def = NULL;
    for (size_t k = 0; k < a->nkw; k++) {
        if (!strcmp(a->kw_names[k], "attribute"))
            attribute = a->kw[k];
        else if (!strcmp(a->kw_names[k], "default"))
            def = a->kw[k];
        else if (!attribute)
            ct_fail(ENV, pos, "map: unexpected keyword argument '%s'", a->kw_names[k]);
    }
    ct_val *out = ct_list(ENV, items->u.list.n, false);
    if (attribute) {
        for (size_t i = 0; i < items->u.list.n; i++) {
            ct_val *x = attr_path(r, pos, items->u.list.items[i], attribute);
            out->u.list.items[i] = x->kind == CT_UNDEF && def ? def : x;
        }
        return out;
    }
    if (!a->npos)
        ct_fail(ENV, pos, "map: needs a filter name or attribute=");
    if (!items->u.list.n)
        return out; /* Jinja looks the filter up lazily, per item */
    const char *name = need_str(r, pos, a->pos[0], "map filter name")->u.str.s;
    const struct ct_builtin *fl = ct_find_filter(name);
    if (!fl)
        ct_fail(ENV, pos, "no filter named '%s'", name);
    struct ct_args rest = {.npos = a->npos - 1, .pos = a->pos + 1, .nkw = a->nkw,
                           .kw_names = a->kw_names, .kw = a->kw};
    for (size_t i = 0; i < items->u.list.n; i++)
        out->u.list.items[i] = fl->fn(r, pos, items->u.list.items[i], &rest);
    return out;
}

/* Jinja's indent: s += "\n" first, then splitlines, as do_indent does. */
static ct_val *f_indent(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("indent", x, "width", "first", "blank");
    ct_val *ind;
    if (x[0] && x[0]->kind == CT_STR) {
        ind = x[0];
    } else {
        int64_t w = x[0] ? need_int(r, pos, x[0], "indent width") : 4;
        if (w < 0)
            w = 0;
        if (w > 1024)
            ct_fail(ENV, pos, "indent: width too large");
        char *spaces = ct_alloc(ENV, (size_t)w + 1);
        memset(spaces, ' ', (size_t)w);
        spaces[w] = '\0';
        ind = ct_str_nocopy(ENV, spaces, (size_t)w);
    }
    ct_val *s = str_of(r, v);
    struct ct_buf tmp = {.arena = true};
    ct_buf_put(ENV, &tmp, s->u.str.s, s->u.str.len);
    ct_buf_putc(ENV, &tmp, '\n');
    ct_val *lines = splitlines(r, buf_str(r, &tmp));
    struct ct_buf b = {.arena = true};
    if (opt_bool(x[1], false))
        ct_buf_put(ENV, &b, ind->u.str.s, ind->u.str.len);
    bool blank = opt_bool(x[2], false);
    for (size_t i = 0; i < lines->u.list.n; i++) {
        ct_val *line = lines->u.list.items[i];
        if (i) {
            ct_buf_putc(ENV, &b, '\n');
            if (blank || line->u.str.len)
                ct_buf_put(ENV, &b, ind->u.str.s, ind->u.str.len);
        }
        ct_buf_put(ENV, &b, line->u.str.s, line->u.str.len);
    }
    return buf_str(r, &b);
}

static ct_val *f_safe(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "safe");
    return v;
}

static ct_val *f_escape(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "escape");
    return html_escape(r, str_of(r, v));
}

static ct_val *f_attr(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    BIND("attr", x, "name");
    if (!x[0])
        ct_fail(ENV, pos, "attr filter needs a name");
    return ct_getattr(r, pos, v, need_str(r, pos, x[0], "attr")->u.str.s);
}

static ct_val *f_wordcount(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    no_args(r, pos, a, "wordcount");
    ct_val *s = str_of(r, v);
    int64_t n = 0;
    bool in_word = false;
    for (size_t i = 0; i < s->u.str.len;) {
        uint32_t cp = ct_utf8_next(s->u.str.s, s->u.str.len, &i);
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        bool w = (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
                 (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO) || cp == '_';
        if (w && !in_word)
            n++;
        in_word = w;
    }
    return ct_int(ENV, n);
}

static const struct ct_builtin filters[] = {
    {"length", f_length},       {"count", f_length},         {"tojson", f_tojson},
    {"trim", f_trim},           {"upper", f_upper},          {"lower", f_lower},
    {"capitalize", f_capitalize}, {"title", f_title},        {"default", f_default},
    {"d", f_default},           {"join", f_join},            {"first", f_first},
    {"last", f_last},           {"list", f_list},            {"string", f_string},
    {"int", f_int},             {"float", f_float},          {"abs", f_abs},
    {"round", f_round},         {"replace", f_replace},      {"reverse", f_reverse},
    {"items", f_items},         {"dictsort", f_dictsort},    {"sort", f_sort},
    {"min", f_min},             {"max", f_max},              {"sum", f_sum},
    {"unique", f_unique},       {"select", f_select},        {"reject", f_reject},
    {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"map", f_map},
    {"indent", f_indent},       {"safe", f_safe},            {"escape", f_escape},
    {"e", f_escape},            {"forceescape", f_escape},   {"attr", f_attr},
    {"wordcount", f_wordcount},
};

const struct ct_builtin *ct_find_filter(const char *name)
{
    return find_in(filters, ARRAY_LEN(filters), name);
}

/* ---- tests ---- */

static ct_val *test_arg(struct ct_render *r, uint32_t pos, const struct ct_args *a,
                        const char *name)
{
    BIND(name, x, "other");
    if (!x[0])
        ct_fail(ENV, pos, "test '%s' needs an argument", name);
    return x[0];
}

#define TEST(fname, expr)                                                                  \
    static ct_val *t_##fname(struct ct_render *r, uint32_t pos, ct_val *v,                 \
                             const struct ct_args *a)                                      \
    {                                                                                      \
        return ct_bool(expr);                                                              \
    }
/* A test without parameters: extra arguments are an error, as in Python. */
#define TEST0(fname, expr)                                                                 \
    static ct_val *t_##fname(struct ct_render *r, uint32_t pos, ct_val *v,                 \
                             const struct ct_args *a)                                      \
    {                                                                                      \
        no_args(r, pos, a, "test " #fname);                                                \
        return ct_bool(expr);                                                              \
    }

TEST0(defined, v->kind != CT_UNDEF)
TEST0(undefined, v->kind == CT_UNDEF)
TEST0(none, v->kind == CT_NONE)
TEST0(boolean, v->kind == CT_BOOL)
TEST0(true, v->kind == CT_BOOL && v->u.b)
TEST0(false, v->kind == CT_BOOL && !v->u.b)
TEST0(integer, v->kind == CT_INT)
TEST0(float, v->kind == CT_FLOAT)
TEST0(number, ct_is_number(v))
TEST0(string, v->kind == CT_STR)
TEST0(mapping, v->kind == CT_DICT)
TEST0(iterable, v->kind == CT_STR || v->kind == CT_LIST || v->kind == CT_DICT ||
                   v->kind == CT_UNDEF)
TEST0(sequence, v->kind == CT_STR || v->kind == CT_LIST || v->kind == CT_DICT)
TEST0(callable, v->kind == CT_FUNC || v->kind == CT_MACRO || v->kind == CT_METHOD)
TEST0(escaped, false)
TEST(eq, ct_equal(v, test_arg(r, pos, a, "eq")))
TEST(ne, !ct_equal(v, test_arg(r, pos, a, "ne")))
TEST(lt, ct_compare(r, pos, v, test_arg(r, pos, a, "lt")) < 0)
TEST(le, ct_compare(r, pos, v, test_arg(r, pos, a, "le")) <= 0)
TEST(gt, ct_compare(r, pos, v, test_arg(r, pos, a, "gt")) > 0)
TEST(ge, ct_compare(r, pos, v, test_arg(r, pos, a, "ge")) >= 0)
TEST0(lower, v->kind == CT_STR && ct_truthy(str_all(r, v, 5)))
TEST0(upper, v->kind == CT_STR && ct_truthy(str_all(r, v, 4)))

static ct_val *t_sameas(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    ct_val *o = test_arg(r, pos, a, "sameas");
    if (v->kind == CT_NONE || v->kind == CT_BOOL)
        return ct_bool(o->kind == v->kind && (v->kind == CT_NONE || o->u.b == v->u.b));
    return ct_bool(v == o);
}

static ct_val *t_in(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    ct_val *seq = test_arg(r, pos, a, "in");
    ct_val *items = ct_iterate(r, pos, seq);
    if (seq->kind == CT_STR) {
        need_str(r, pos, v, "in");
        return ct_bool(!v->u.str.len ||
                       memmem(seq->u.str.s, seq->u.str.len, v->u.str.s, v->u.str.len));
    }
    for (size_t i = 0; i < items->u.list.n; i++)
        if (ct_equal(v, items->u.list.items[i]))
            return &ct_true;
    return &ct_false;
}

static ct_val *t_even(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    return ct_bool(need_int(r, pos, v, "even") % 2 == 0);
}

static ct_val *t_odd(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    return ct_bool(need_int(r, pos, v, "odd") % 2 != 0);
}

static ct_val *t_divisibleby(struct ct_render *r, uint32_t pos, ct_val *v,
                             const struct ct_args *a)
{
    int64_t d = need_int(r, pos, test_arg(r, pos, a, "divisibleby"), "divisibleby");
    if (!d)
        ct_fail(ENV, pos, "integer division or modulo by zero");
    return ct_bool(need_int(r, pos, v, "divisibleby") % d == 0);
}

static ct_val *t_filter(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    return ct_bool(v->kind == CT_STR && ct_find_filter(v->u.str.s));
}

static ct_val *t_test(struct ct_render *r, uint32_t pos, ct_val *v, const struct ct_args *a)
{
    return ct_bool(v->kind == CT_STR && ct_find_test(v->u.str.s));
}

static const struct ct_builtin tests[] = {
    {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},
    {"boolean", t_boolean},   {"true", t_true},           {"false", t_false},
    {"integer", t_integer},   {"float", t_float},         {"number", t_number},
    {"string", t_string},     {"mapping", t_mapping},     {"iterable", t_iterable},
    {"sequence", t_sequence}, {"callable", t_callable},   {"escaped", t_escaped},
    {"eq", t_eq},             {"equalto", t_eq},          {"==", t_eq},
    {"ne", t_ne},             {"!=", t_ne},               {"lt", t_lt},
    {"lessthan", t_lt},       {"<", t_lt},                {"le", t_le},
    {"<=", t_le},             {"gt", t_gt},               {"greaterthan", t_gt},
    {">", t_gt},              {"ge", t_ge},               {">=", t_ge},
    {"lower", t_lower},       {"upper", t_upper},         {"sameas", t_sameas},
    {"in", t_in},             {"even", t_even},           {"odd", t_odd},
    {"divisibleby", t_divisibleby}, {"filter", t_filter}, {"test", t_test},
};

const struct ct_builtin *ct_find_test(const char *name)
{
    return find_in(tests, ARRAY_LEN(tests), name);
}

/* ---- globals ---- */

static ct_val *g_namespace(struct ct_render *r, uint32_t pos, ct_val *self,
                           const struct ct_args *a)
{
    ct_val *ns = ct_dict(ENV);
    ns->kind = CT_NS;
    for (size_t i = 0; i < a->npos; i++) {
        ct_val *d = a->pos[i];
        if (d->kind != CT_DICT)
            ct_fail(ENV, pos, "namespace() positional arguments must be dicts");
        for (size_t k = 0; k < d->u.dict->n; k++)
            ct_dict_set(ENV, ns->u.dict, d->u.dict->keys[k], d->u.dict->vals[k]);
    }
    for (size_t k = 0; k < a->nkw; k++) {
        if (a->kw_names[k][0] == '_')
            ct_fail(ENV, pos, "cannot store underscore-prefixed attributes on a namespace");
        ct_dict_set(ENV, ns->u.dict, ct_cstr(ENV, a->kw_names[k]), a->kw[k]);
    }
    return ns;
}

static ct_val *g_dict(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    ct_val *ns = g_namespace(r, pos, self, a);
    ns->kind = CT_DICT;
    return ns;
}

static ct_val *g_raise_exception(struct ct_render *r, uint32_t pos, ct_val *self,
                                 const struct ct_args *a)
{
    BIND("raise_exception", x, "message");
    ct_val *msg = x[0] ? str_of(r, x[0]) : ct_cstr(ENV, "");
    ct_fail(ENV, pos, "template error: %s", msg->u.str.s);
}

static ct_val *g_range(struct ct_render *r, uint32_t pos, ct_val *self, const struct ct_args *a)
{
    if (a->nkw || !a->npos || a->npos > 3)
        ct_fail(ENV, pos, "range() takes 1 to 3 positional arguments");
    int64_t start = 0, stop, step = 1;
    if (a->npos == 1) {
        stop = need_int(r, pos, a->pos[0], "range");
    } else {
        start = need_int(r, pos, a->pos[0], "range");
        stop = need_int(r, pos, a->pos[1], "range");
        if (a->npos == 3)
            step = need_int(r, pos, a->pos[2], "range");
    }
    if (!step)
        ct_fail(ENV, pos, "range() arg 3 must not be zero");
    struct ct_vec v = {0};
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (v.n == CT_MAX_RANGE)
            ct_fail(ENV, pos, "range too big, the sandbox allows at most %d items", CT_MAX_RANGE);
        ct_vec_push(ENV, &v, ct_int(ENV, i));
        if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step))
            break;
    }
    return ct_vec_finish(ENV, &v, false);
}

static ct_val *g_strftime_now(struct ct_render *r, uint32_t pos, ct_val *self,
                              const struct ct_args *a)
{
    BIND("strftime_now", x, "format");
    if (!x[0])
        ct_fail(ENV, pos, "strftime_now() needs a format");
    const char *fmt = need_str(r, pos, x[0], "strftime_now")->u.str.s;
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char out[256];
    size_t n = strftime(out, sizeof out, fmt, &tm);
    return ct_str(ENV, out, n);
}

static const struct ct_builtin globals[] = {
    {"namespace", g_namespace},   {"dict", g_dict},   {"raise_exception", g_raise_exception},
    {"range", g_range},           {"strftime_now", g_strftime_now},
};

const struct ct_builtin *ct_find_global(const char *name)
{
    return find_in(globals, ARRAY_LEN(globals), name);
}
