/* Chat templates: the evaluator. Python semantics for operators, Jinja2's for
 * undefined values, attribute lookup and scoping: a for loop body and a macro
 * get a fresh scope (set inside them does not leak out, which is why templates
 * use namespace()), if does not. */
#include "chat_template_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scopes ---- */

static struct ct_frame *new_frame(struct ct_render *r, struct ct_frame *parent)
{
    struct ct_frame *f = ct_alloc(&r->env, sizeof *f);
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

static void frame_set(struct ct_render *r, struct ct_frame *f, const char *name, ct_val *v)
{
    for (size_t i = 0; i < f->n; i++) {
        if (!strcmp(f->names[i], name)) {
            f->vals[i] = v;
            return;
        }
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4;
        const char **names = ct_alloc(&r->env, cap * sizeof *names);
        ct_val **vals = ct_alloc(&r->env, cap * sizeof *vals);
        if (f->n) {
            memcpy(names, f->names, f->n * sizeof *names);
            memcpy(vals, f->vals, f->n * sizeof *vals);
        }
        f->names = names;
        f->vals = vals;
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n] = v;
    f->n++;
}

static ct_val *lookup(struct ct_render *r, struct ct_frame *f, const char *name)
{
    for (; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (!strcmp(f->names[i], name))
                return f->vals[i];
    const struct ct_builtin *g = ct_find_global(name);
    if (g) {
        ct_val *v = ct_new(&r->env, CT_FUNC);
        v->u.func = g;
        return v;
    }
    return ct_undef(&r->env, "'%s' is undefined", name);
}

/* ---- errors ---- */

void ct_fail_undefined(struct ct_render *r, uint32_t pos, const ct_val *v)
{
    ct_fail(&r->env, pos, "%s", v->u.undef);
}

static _Noreturn void type_error(struct ct_render *r, uint32_t pos, const char *op,
                                 const ct_val *a, const ct_val *b)
{
    ct_fail(&r->env, pos, "unsupported operand type(s) for %s: '%s' and '%s'", op,
            ct_type_name(a), ct_type_name(b));
}

/* ---- helpers on values ---- */

int64_t ct_length(struct ct_render *r, uint32_t pos, ct_val *v)
{
    switch (v->kind) {
    case CT_UNDEF: return 0;
    case CT_STR: return (int64_t)ct_utf8_count(v->u.str.s, v->u.str.len);
    case CT_LIST: return (int64_t)v->u.list.n;
    case CT_DICT:
    case CT_NS: return (int64_t)v->u.dict->n;
    default: ct_fail(&r->env, pos, "object of type '%s' has no len()", ct_type_name(v));
    }
}

ct_val *ct_iterate(struct ct_render *r, uint32_t pos, ct_val *v)
{
    switch (v->kind) {
    case CT_UNDEF: return ct_list(&r->env, 0, false);
    case CT_LIST: return v;
    case CT_DICT: {
        ct_val *l = ct_list(&r->env, v->u.dict->n, false);
        for (size_t i = 0; i < v->u.dict->n; i++)
            l->u.list.items[i] = v->u.dict->keys[i];
        return l;
    }
    case CT_STR: {
        struct ct_vec vec = {0};
        for (size_t i = 0; i < v->u.str.len;) {
            size_t start = i;
            ct_utf8_next(v->u.str.s, v->u.str.len, &i);
            ct_vec_push(&r->env, &vec, ct_str(&r->env, v->u.str.s + start, i - start));
        }
        return ct_vec_finish(&r->env, &vec, false);
    }
    default: ct_fail(&r->env, pos, "'%s' object is not iterable", ct_type_name(v));
    }
}

static int64_t as_int(const ct_val *v)
{
    return v->kind == CT_BOOL ? v->u.b : v->u.i;
}

static int cmp_bytes(const ct_val *a, const ct_val *b)
{
    size_t n = a->u.str.len < b->u.str.len ? a->u.str.len : b->u.str.len;
    int c = memcmp(a->u.str.s, b->u.str.s, n);
    if (c)
        return c < 0 ? -1 : 1;
    return (a->u.str.len > b->u.str.len) - (a->u.str.len < b->u.str.len);
}

int ct_compare(struct ct_render *r, uint32_t pos, const ct_val *a, const ct_val *b)
{
    if (a->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, a);
    if (b->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, b);
    if (ct_is_number(a) && ct_is_number(b)) {
        if (a->kind != CT_FLOAT && b->kind != CT_FLOAT)
            return (as_int(a) > as_int(b)) - (as_int(a) < as_int(b));
        double x = ct_as_double(a), y = ct_as_double(b);
        return (x > y) - (x < y);
    }
    if (a->kind == CT_STR && b->kind == CT_STR)
        return cmp_bytes(a, b);
    if (a->kind == CT_LIST && b->kind == CT_LIST && a->u.list.tuple == b->u.list.tuple) {
        size_t n = a->u.list.n < b->u.list.n ? a->u.list.n : b->u.list.n;
        for (size_t i = 0; i < n; i++) {
            if (ct_equal(a->u.list.items[i], b->u.list.items[i]))
                continue;
            return ct_compare(r, pos, a->u.list.items[i], b->u.list.items[i]);
        }
        return (a->u.list.n > b->u.list.n) - (a->u.list.n < b->u.list.n);
    }
    ct_fail(&r->env, pos, "'<' not supported between instances of '%s' and '%s'",
            ct_type_name(a), ct_type_name(b));
}

static bool contains(struct ct_render *r, uint32_t pos, ct_val *item, ct_val *container)
{
    switch (container->kind) {
    case CT_STR:
        if (item->kind != CT_STR)
            ct_fail(&r->env, pos, "'in <string>' requires string as left operand, not %s",
                    ct_type_name(item));
        if (!item->u.str.len)
            return true;
        return memmem(container->u.str.s, container->u.str.len, item->u.str.s,
                      item->u.str.len) != NULL;
    case CT_LIST:
        for (size_t i = 0; i < container->u.list.n; i++)
            if (ct_equal(item, container->u.list.items[i]))
                return true;
        return false;
    case CT_DICT:
    case CT_NS:
        return item->kind == CT_STR &&
               ct_dict_get(container->u.dict, item->u.str.s, item->u.str.len) != NULL;
    case CT_UNDEF:
        return false;
    default:
        ct_fail(&r->env, pos, "argument of type '%s' is not iterable", ct_type_name(container));
    }
}

/* Byte offset of code point `index` in s (index in [0, count]). */
static size_t cp_offset(const char *s, size_t len, int64_t index)
{
    size_t i = 0;
    for (int64_t k = 0; k < index && i < len; k++)
        ct_utf8_next(s, len, &i);
    return i;
}

static ct_val *loop_attr(struct ct_render *r, const struct ct_loop *l, const char *name)
{
    int64_t i0 = (int64_t)l->index0, n = (int64_t)l->n;
    if (!strcmp(name, "index0"))
        return ct_int(&r->env, i0);
    if (!strcmp(name, "index"))
        return ct_int(&r->env, i0 + 1);
    if (!strcmp(name, "revindex0"))
        return ct_int(&r->env, n - i0 - 1);
    if (!strcmp(name, "revindex"))
        return ct_int(&r->env, n - i0);
    if (!strcmp(name, "first"))
        return ct_bool(i0 == 0);
    if (!strcmp(name, "last"))
        return ct_bool(i0 == n - 1);
    if (!strcmp(name, "length"))
        return ct_int(&r->env, n);
    if (!strcmp(name, "depth"))
        return ct_int(&r->env, 1);
    if (!strcmp(name, "depth0"))
        return ct_int(&r->env, 0);
    if (!strcmp(name, "previtem"))
        return i0 > 0 ? l->items[i0 - 1] : ct_undef(&r->env, "there is no previous item");
    if (!strcmp(name, "nextitem"))
        return i0 + 1 < n ? l->items[i0 + 1] : ct_undef(&r->env, "there is no next item");
    return NULL;
}

static ct_val *method_value(struct ct_render *r, ct_val *self, const struct ct_builtin *fn)
{
    ct_val *m = ct_new(&r->env, CT_METHOD);
    m->u.method.self = self;
    m->u.method.fn = fn;
    return m;
}

static const char *object_desc(struct ct_render *r, const ct_val *v)
{
    switch (v->kind) {
    case CT_NONE: return "'None'";
    case CT_BOOL: return v->u.b ? "'True'" : "'False'";
    default: {
        const char *t = ct_type_name(v);
        char *s = ct_alloc(&r->env, strlen(t) + 12);
        strcpy(s, "'");
        strcat(s, t);
        strcat(s, " object'");
        return s;
    }
    }
}

ct_val *ct_getattr(struct ct_render *r, uint32_t pos, ct_val *obj, const char *name)
{
    if (obj->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, obj);
    /* Jinja tries the Python attribute first: dict.items is the method even
     * when the dict has a key "items". */
    const struct ct_builtin *m = ct_find_method(obj, name);
    if (m)
        return method_value(r, obj, m);
    if (obj->kind == CT_DICT || obj->kind == CT_NS) {
        ct_val *v = ct_dict_get(obj->u.dict, name, strlen(name));
        if (v)
            return v;
    } else if (obj->kind == CT_LOOP) {
        ct_val *v = loop_attr(r, obj->u.loop, name);
        if (v)
            return v;
    }
    return ct_undef(&r->env, "%s has no attribute '%s'", object_desc(r, obj), name);
}

ct_val *ct_getitem(struct ct_render *r, uint32_t pos, ct_val *obj, ct_val *key)
{
    if (obj->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, obj);
    if (key->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, key);
    bool int_key = key->kind == CT_INT || key->kind == CT_BOOL;
    if (obj->kind == CT_LIST && int_key) {
        int64_t i = as_int(key), n = (int64_t)obj->u.list.n;
        if (i < 0)
            i += n;
        if (i >= 0 && i < n)
            return obj->u.list.items[i];
        return ct_undef(&r->env, "%s has no element %lld", object_desc(r, obj),
                        (long long)as_int(key));
    }
    if (obj->kind == CT_STR && int_key) {
        int64_t i = as_int(key), n = (int64_t)ct_utf8_count(obj->u.str.s, obj->u.str.len);
        if (i < 0)
            i += n;
        if (i >= 0 && i < n) {
            size_t a = cp_offset(obj->u.str.s, obj->u.str.len, i), b = a;
            ct_utf8_next(obj->u.str.s, obj->u.str.len, &b);
            return ct_str(&r->env, obj->u.str.s + a, b - a);
        }
        return ct_undef(&r->env, "%s has no element %lld", object_desc(r, obj),
                        (long long)as_int(key));
    }
    if ((obj->kind == CT_DICT || obj->kind == CT_NS) && key->kind == CT_STR) {
        ct_val *v = ct_dict_get(obj->u.dict, key->u.str.s, key->u.str.len);
        if (v)
            return v;
    }
    /* Then the attribute of that name, as Jinja's getitem does. */
    if (key->kind == CT_STR && !memchr(key->u.str.s, '\0', key->u.str.len)) {
        const struct ct_builtin *m = ct_find_method(obj, key->u.str.s);
        if (m)
            return method_value(r, obj, m);
        if (obj->kind == CT_LOOP) {
            ct_val *v = loop_attr(r, obj->u.loop, key->u.str.s);
            if (v)
                return v;
        }
        return ct_undef(&r->env, "%s has no attribute '%s'", object_desc(r, obj), key->u.str.s);
    }
    return ct_undef(&r->env, "%s has no element of that key", object_desc(r, obj));
}

/* Python's slice index arithmetic (PySlice_AdjustIndices). */
static size_t slice_indices(int64_t len, int64_t *start, int64_t *stop, int64_t step,
                            bool has_start, bool has_stop)
{
    if (!has_start)
        *start = step < 0 ? INT64_MAX : 0;
    if (!has_stop)
        *stop = step < 0 ? INT64_MIN : INT64_MAX;
    if (*start < 0) {
        *start = *start < -len ? (step < 0 ? -1 : 0) : *start + len;
    } else if (*start >= len) {
        *start = step < 0 ? len - 1 : len;
    }
    if (*stop < 0) {
        *stop = *stop < -len ? (step < 0 ? -1 : 0) : *stop + len;
    } else if (*stop >= len) {
        *stop = step < 0 ? len - 1 : len;
    }
    if (step < 0)
        return *stop < *start ? (size_t)((*start - *stop - 1) / -step + 1) : 0;
    return *start < *stop ? (size_t)((*stop - *start - 1) / step + 1) : 0;
}

static bool slice_bound(struct ct_render *r, uint32_t pos, ct_val *v, int64_t *out)
{
    if (!v || v->kind == CT_NONE)
        return false;
    if (v->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, v);
    if (v->kind != CT_INT && v->kind != CT_BOOL)
        ct_fail(&r->env, pos, "slice indices must be integers or None, not %s", ct_type_name(v));
    *out = as_int(v);
    return true;
}

static ct_val *do_slice(struct ct_render *r, uint32_t pos, ct_val *obj, ct_val *vstart,
                        ct_val *vstop, ct_val *vstep)
{
    if (obj->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, obj);
    int64_t start = 0, stop = 0, step = 1;
    bool has_start = slice_bound(r, pos, vstart, &start);
    bool has_stop = slice_bound(r, pos, vstop, &stop);
    if (slice_bound(r, pos, vstep, &step) && step == 0)
        ct_fail(&r->env, pos, "slice step cannot be zero");
    if (obj->kind == CT_LIST) {
        size_t n = slice_indices((int64_t)obj->u.list.n, &start, &stop, step, has_start, has_stop);
        ct_val *l = ct_list(&r->env, n, obj->u.list.tuple);
        for (size_t k = 0; k < n; k++)
            l->u.list.items[k] = obj->u.list.items[start + (int64_t)k * step];
        return l;
    }
    if (obj->kind == CT_STR) {
        const char *s = obj->u.str.s;
        size_t len = obj->u.str.len, count = ct_utf8_count(s, len);
        size_t *offs = ct_alloc(&r->env, (count + 1) * sizeof *offs);
        for (size_t i = 0, k = 0; k <= count; k++) {
            offs[k] = i;
            if (i < len)
                ct_utf8_next(s, len, &i);
        }
        size_t n = slice_indices((int64_t)count, &start, &stop, step, has_start, has_stop);
        struct ct_buf b = {.arena = true};
        for (size_t k = 0; k < n; k++) {
            int64_t c = start + (int64_t)k * step;
            ct_buf_put(&r->env, &b, s + offs[c], offs[c + 1] - offs[c]);
        }
        return b.data ? ct_str_nocopy(&r->env, b.data, b.len) : ct_str_nocopy(&r->env, "", 0);
    }
    /* Jinja's getitem turns the TypeError into an undefined value. */
    return ct_undef(&r->env, "'%s' object is not subscriptable", ct_type_name(obj));
}

/* ---- arithmetic ---- */

static ct_val *repeat(struct ct_render *r, uint32_t pos, ct_val *seq, int64_t times)
{
    if (times < 0)
        times = 0;
    if (seq->kind == CT_STR) {
        size_t len = seq->u.str.len;
        /* '' * 10**18 is '' at once, not after 10**18 turns of a loop. */
        if (len == 0 || times == 0)
            return ct_str_nocopy(&r->env, "", 0);
        if ((uint64_t)times > CT_OUTPUT_LIMIT / len)
            ct_fail(&r->env, pos, "string repetition result is too large");
        size_t total = len * (size_t)times;
        char *p = ct_alloc(&r->env, total + 1);
        for (size_t off = 0; off < total; off += len)
            memcpy(p + off, seq->u.str.s, len);
        p[total] = '\0';
        return ct_str_nocopy(&r->env, p, total);
    }
    if (seq->u.list.n && (uint64_t)times > (CT_OUTPUT_LIMIT / 8) / seq->u.list.n)
        ct_fail(&r->env, pos, "list repetition result is too large");
    size_t n = seq->u.list.n * (size_t)times;
    ct_val *l = ct_list(&r->env, n, seq->u.list.tuple);
    for (size_t i = 0; i < n; i++)
        l->u.list.items[i] = seq->u.list.items[i % seq->u.list.n];
    return l;
}

static double py_fmod(double a, double b)
{
    double m = fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0)))
        m += b;
    return m;
}

static ct_val *arith_int(struct ct_render *r, uint32_t pos, enum ct_op op, int64_t a, int64_t b)
{
    int64_t out;
    switch (op) {
    case OP_ADD:
        if (__builtin_add_overflow(a, b, &out))
            break;
        return ct_int(&r->env, out);
    case OP_SUB:
        if (__builtin_sub_overflow(a, b, &out))
            break;
        return ct_int(&r->env, out);
    case OP_MUL:
        if (__builtin_mul_overflow(a, b, &out))
            break;
        return ct_int(&r->env, out);
    case OP_DIV:
        if (b == 0)
            ct_fail(&r->env, pos, "division by zero");
        return ct_float(&r->env, (double)a / (double)b);
    case OP_FLOORDIV:
    case OP_MOD: {
        if (b == 0)
            ct_fail(&r->env, pos, "integer division or modulo by zero");
        if (a == INT64_MIN && b == -1)
            break;
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
            q -= 1;
            m += b;
        }
        return ct_int(&r->env, op == OP_MOD ? m : q);
    }
    case OP_POW:
        if (b < 0)
            return ct_float(&r->env, pow((double)a, (double)b));
        out = 1;
        for (int64_t base = a, e = b; e; e >>= 1) {
            if ((e & 1) && __builtin_mul_overflow(out, base, &out))
                goto overflow;
            if (e > 1 && __builtin_mul_overflow(base, base, &base))
                goto overflow;
        }
        return ct_int(&r->env, out);
    default:
        break;
    }
overflow:
    ct_fail(&r->env, pos, "integer overflow");
}

static ct_val *arith_float(struct ct_render *r, uint32_t pos, enum ct_op op, double a, double b)
{
    switch (op) {
    case OP_ADD: return ct_float(&r->env, a + b);
    case OP_SUB: return ct_float(&r->env, a - b);
    case OP_MUL: return ct_float(&r->env, a * b);
    case OP_DIV:
        if (b == 0)
            ct_fail(&r->env, pos, "float division by zero");
        return ct_float(&r->env, a / b);
    case OP_FLOORDIV:
        if (b == 0)
            ct_fail(&r->env, pos, "float floor division by zero");
        return ct_float(&r->env, floor(a / b));
    case OP_MOD:
        if (b == 0)
            ct_fail(&r->env, pos, "float modulo by zero");
        return ct_float(&r->env, py_fmod(a, b));
    case OP_POW: return ct_float(&r->env, pow(a, b));
    default: ct_fail(&r->env, pos, "bad arithmetic operator");
    }
}

static const char *op_name(enum ct_op op)
{
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    return op <= OP_POW ? names[op] : "?";
}

static ct_val *concat(struct ct_render *r, ct_val *a, ct_val *b)
{
    if (a->kind == CT_STR) {
        size_t n = a->u.str.len + b->u.str.len;
        char *s = ct_alloc(&r->env, n + 1);
        memcpy(s, a->u.str.s, a->u.str.len);
        memcpy(s + a->u.str.len, b->u.str.s, b->u.str.len);
        s[n] = '\0';
        return ct_str_nocopy(&r->env, s, n);
    }
    ct_val *l = ct_list(&r->env, a->u.list.n + b->u.list.n, a->u.list.tuple);
    if (a->u.list.n)
        memcpy(l->u.list.items, a->u.list.items, a->u.list.n * sizeof(ct_val *));
    if (b->u.list.n)
        memcpy(l->u.list.items + a->u.list.n, b->u.list.items, b->u.list.n * sizeof(ct_val *));
    return l;
}

static ct_val *binop(struct ct_render *r, uint32_t pos, enum ct_op op, ct_val *a, ct_val *b)
{
    if (a->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, a);
    if (b->kind == CT_UNDEF)
        ct_fail_undefined(r, pos, b);
    if (ct_is_number(a) && ct_is_number(b)) {
        if (a->kind == CT_FLOAT || b->kind == CT_FLOAT)
            return arith_float(r, pos, op, ct_as_double(a), ct_as_double(b));
        return arith_int(r, pos, op, as_int(a), as_int(b));
    }
    if (op == OP_ADD && a->kind == CT_STR && b->kind == CT_STR)
        return concat(r, a, b);
    if (op == OP_ADD && a->kind == CT_LIST && b->kind == CT_LIST &&
        a->u.list.tuple == b->u.list.tuple)
        return concat(r, a, b);
    if (op == OP_MUL) {
        if ((a->kind == CT_STR || a->kind == CT_LIST) && (b->kind == CT_INT || b->kind == CT_BOOL))
            return repeat(r, pos, a, as_int(b));
        if ((b->kind == CT_STR || b->kind == CT_LIST) && (a->kind == CT_INT || a->kind == CT_BOOL))
            return repeat(r, pos, b, as_int(a));
    }
    if (op == OP_MOD && a->kind == CT_STR)
        ct_fail(&r->env, pos, "printf-style string formatting (%%) is not supported");
    type_error(r, pos, op_name(op), a, b);
}

/* ---- calls ---- */

static ct_val *eval(struct ct_render *r, const struct ct_expr *e, struct ct_frame *f);
static int exec(struct ct_render *r, const struct ct_node *n, struct ct_frame *f);

static void eval_args(struct ct_render *r, const struct ct_arglist *al, struct ct_frame *f,
                      struct ct_args *out)
{
    out->npos = al->npos;
    out->nkw = al->nkw;
    out->pos = al->npos ? ct_alloc(&r->env, al->npos * sizeof(ct_val *)) : NULL;
    out->kw = al->nkw ? ct_alloc(&r->env, al->nkw * sizeof(ct_val *)) : NULL;
    out->kw_names = al->kw_names;
    for (size_t i = 0; i < al->npos; i++)
        out->pos[i] = eval(r, al->pos[i], f);
    for (size_t i = 0; i < al->nkw; i++)
        out->kw[i] = eval(r, al->kw[i], f);
}

void ct_bind(struct ct_render *r, uint32_t pos, const struct ct_args *a, const char *fname,
             const char *const *params, size_t nparams, ct_val **out)
{
    for (size_t i = 0; i < nparams; i++)
        out[i] = NULL;
    if (a->npos > nparams)
        ct_fail(&r->env, pos, "%s() takes at most %zu argument%s (%zu given)", fname, nparams,
                nparams == 1 ? "" : "s", a->npos);
    for (size_t i = 0; i < a->npos; i++)
        out[i] = a->pos[i];
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        while (i < nparams && strcmp(params[i], a->kw_names[k]))
            i++;
        if (i == nparams)
            ct_fail(&r->env, pos, "%s() got an unexpected keyword argument '%s'", fname,
                    a->kw_names[k]);
        if (out[i])
            ct_fail(&r->env, pos, "%s() got multiple values for argument '%s'", fname,
                    a->kw_names[k]);
        out[i] = a->kw[k];
    }
}

static ct_val *capture(struct ct_render *r, const struct ct_node *body, struct ct_frame *f)
{
    struct ct_buf buf = {.arena = true}, *saved = r->out;
    r->out = &buf;
    exec(r, body, f);
    r->out = saved;
    return buf.data ? ct_str_nocopy(&r->env, buf.data, buf.len) : ct_str_nocopy(&r->env, "", 0);
}

static ct_val *call_macro(struct ct_render *r, uint32_t pos, ct_val *mv, const struct ct_args *a)
{
    const struct ct_macro *m = mv->u.macro.def;
    if (r->depth >= CT_MAX_DEPTH)
        ct_fail(&r->env, pos, "macro '%s': calls nest too deeply", m->name);
    ct_val **bound = ct_alloc(&r->env, (m->nparams + 1) * sizeof *bound);
    ct_bind(r, pos, a, m->name, m->params, m->nparams, bound);
    struct ct_frame *f = new_frame(r, mv->u.macro.scope);
    for (size_t i = 0; i < m->nparams; i++) {
        ct_val *v = bound[i];
        if (!v)
            v = m->defaults[i] ? eval(r, m->defaults[i], f)
                               : ct_undef(&r->env, "parameter '%s' was not provided", m->params[i]);
        frame_set(r, f, m->params[i], v);
    }
    r->depth++;
    ct_val *out = capture(r, m->body, f);
    r->depth--;
    return out;
}

ct_val *ct_call_value(struct ct_render *r, uint32_t pos, ct_val *fn, const struct ct_args *a)
{
    switch (fn->kind) {
    case CT_FUNC: return fn->u.func->fn(r, pos, NULL, a);
    case CT_METHOD: return fn->u.method.fn->fn(r, pos, fn->u.method.self, a);
    case CT_MACRO: return call_macro(r, pos, fn, a);
    case CT_UNDEF: ct_fail_undefined(r, pos, fn);
    default: ct_fail(&r->env, pos, "'%s' object is not callable", ct_type_name(fn));
    }
}

/* ---- expressions ---- */

static ct_val *eval_compare(struct ct_render *r, const struct ct_expr *e, struct ct_frame *f)
{
    ct_val *left = eval(r, e->u.cmp.operands[0], f);
    for (size_t i = 0; i < e->u.cmp.n; i++) {
        ct_val *right = eval(r, e->u.cmp.operands[i + 1], f);
        bool ok;
        switch (e->u.cmp.ops[i]) {
        case OP_EQ: ok = ct_equal(left, right); break;
        case OP_NE: ok = !ct_equal(left, right); break;
        case OP_LT: ok = ct_compare(r, e->pos, left, right) < 0; break;
        case OP_LE: ok = ct_compare(r, e->pos, left, right) <= 0; break;
        case OP_GT: ok = ct_compare(r, e->pos, left, right) > 0; break;
        case OP_GE: ok = ct_compare(r, e->pos, left, right) >= 0; break;
        case OP_IN: ok = contains(r, e->pos, left, right); break;
        case OP_NOTIN: ok = !contains(r, e->pos, left, right); break;
        default: ok = false; break;
        }
        if (!ok)
            return &ct_false;
        left = right;
    }
    return &ct_true;
}

/* Expressions and statements recurse on the C stack, and macros multiply that
 * (a macro 200 calls deep, each an expression 200 deep, is 40,000 frames): so
 * the frames of both in progress are counted against one limit. */
static void enter(struct ct_render *r, uint32_t pos)
{
    if (++r->nesting > CT_MAX_NESTING)
        ct_fail(&r->env, pos, "expressions and blocks nest more than %d deep (across "
                "macro calls)", CT_MAX_NESTING);
}

static ct_val *eval_expr(struct ct_render *r, const struct ct_expr *e, struct ct_frame *f);

static ct_val *eval(struct ct_render *r, const struct ct_expr *e, struct ct_frame *f)
{
    enter(r, e->pos);
    ct_val *v = eval_expr(r, e, f);
    r->nesting--;
    return v;
}

static ct_val *eval_expr(struct ct_render *r, const struct ct_expr *e, struct ct_frame *f)
{
    switch (e->kind) {
    case EX_CONST: return e->u.cval;
    case EX_NAME: return lookup(r, f, e->u.name);
    case EX_ATTR: return ct_getattr(r, e->pos, eval(r, e->u.attr.obj, f), e->u.attr.name);
    case EX_ITEM: {
        ct_val *obj = eval(r, e->u.item.obj, f);
        return ct_getitem(r, e->pos, obj, eval(r, e->u.item.key, f));
    }
    case EX_SLICE: {
        ct_val *obj = eval(r, e->u.slice.obj, f);
        ct_val *a = e->u.slice.start ? eval(r, e->u.slice.start, f) : NULL;
        ct_val *b = e->u.slice.stop ? eval(r, e->u.slice.stop, f) : NULL;
        ct_val *c = e->u.slice.step ? eval(r, e->u.slice.step, f) : NULL;
        return do_slice(r, e->pos, obj, a, b, c);
    }
    case EX_CALL: {
        ct_val *fn = eval(r, e->u.call.fn, f);
        struct ct_args a;
        eval_args(r, &e->u.call.args, f, &a);
        return ct_call_value(r, e->pos, fn, &a);
    }
    case EX_FILTER: {
        if (!e->u.filter.fn)
            ct_fail(&r->env, e->pos, "no filter named '%s'", e->u.filter.name);
        ct_val *v = eval(r, e->u.filter.arg, f);
        struct ct_args a;
        eval_args(r, &e->u.filter.args, f, &a);
        return e->u.filter.fn->fn(r, e->pos, v, &a);
    }
    case EX_TEST: {
        if (!e->u.filter.fn)
            ct_fail(&r->env, e->pos, "no test named '%s'", e->u.filter.name);
        ct_val *v = eval(r, e->u.filter.arg, f);
        struct ct_args a;
        eval_args(r, &e->u.filter.args, f, &a);
        bool ok = ct_truthy(e->u.filter.fn->fn(r, e->pos, v, &a));
        return ct_bool(ok != e->u.filter.negate);
    }
    case EX_NOT: return ct_bool(!ct_truthy(eval(r, e->u.unary, f)));
    case EX_NEG:
    case EX_POS: {
        ct_val *v = eval(r, e->u.unary, f);
        if (v->kind == CT_UNDEF)
            ct_fail_undefined(r, e->pos, v);
        if (!ct_is_number(v))
            ct_fail(&r->env, e->pos, "bad operand type for unary %c: '%s'",
                    e->kind == EX_NEG ? '-' : '+', ct_type_name(v));
        if (e->kind == EX_POS)
            return v->kind == CT_BOOL ? ct_int(&r->env, v->u.b) : v;
        if (v->kind == CT_FLOAT)
            return ct_float(&r->env, -v->u.f);
        return arith_int(r, e->pos, OP_SUB, 0, as_int(v));
    }
    case EX_BIN:
        return binop(r, e->pos, e->u.bin.op, eval(r, e->u.bin.l, f), eval(r, e->u.bin.r, f));
    case EX_AND: {
        ct_val *l = eval(r, e->u.bin.l, f);
        return ct_truthy(l) ? eval(r, e->u.bin.r, f) : l;
    }
    case EX_OR: {
        ct_val *l = eval(r, e->u.bin.l, f);
        return ct_truthy(l) ? l : eval(r, e->u.bin.r, f);
    }
    case EX_CMP: return eval_compare(r, e, f);
    case EX_COND:
        if (ct_truthy(eval(r, e->u.cond.cond, f)))
            return eval(r, e->u.cond.then, f);
        if (e->u.cond.other)
            return eval(r, e->u.cond.other, f);
        return ct_undef(&r->env, "the inline if-expression evaluated to false and has no else");
    case EX_LIST:
    case EX_TUPLE: {
        ct_val *l = ct_list(&r->env, e->u.seq.n, e->kind == EX_TUPLE);
        for (size_t i = 0; i < e->u.seq.n; i++)
            l->u.list.items[i] = eval(r, e->u.seq.items[i], f);
        return l;
    }
    case EX_DICT: {
        ct_val *d = ct_dict(&r->env);
        for (size_t i = 0; i < e->u.seq.n; i++) {
            ct_val *k = eval(r, e->u.seq.items[i], f);
            if (k->kind != CT_STR)
                ct_fail(&r->env, e->u.seq.items[i]->pos, "dict keys must be strings, not %s",
                        ct_type_name(k));
            ct_dict_set(&r->env, d->u.dict, k, eval(r, e->u.seq.vals[i], f));
        }
        return d;
    }
    case EX_CONCAT: {
        struct ct_buf b = {.arena = true};
        for (size_t i = 0; i < e->u.seq.n; i++)
            ct_write_str(&r->env, &b, eval(r, e->u.seq.items[i], f));
        return b.data ? ct_str_nocopy(&r->env, b.data, b.len) : ct_str_nocopy(&r->env, "", 0);
    }
    }
    ct_fail(&r->env, e->pos, "unknown expression");
}

/* ---- statements ---- */

enum { FLOW_NEXT = 0, FLOW_BREAK, FLOW_CONTINUE };

static void assign(struct ct_render *r, const struct ct_target *tg, ct_val *v,
                   struct ct_frame *f)
{
    switch (tg->kind) {
    case TG_NAME:
        frame_set(r, f, tg->name, v);
        return;
    case TG_ATTR: {
        ct_val *ns = lookup(r, f, tg->name);
        if (ns->kind != CT_NS)
            ct_fail(&r->env, tg->pos, "cannot assign attribute on non-namespace object");
        if (tg->attr[0] == '_')
            ct_fail(&r->env, tg->pos, "cannot store underscore-prefixed attributes on a namespace");
        ct_dict_set(&r->env, ns->u.dict, ct_cstr(&r->env, tg->attr), v);
        return;
    }
    case TG_TUPLE: {
        ct_val *items = ct_iterate(r, tg->pos, v);
        if (items->u.list.n != tg->n)
            ct_fail(&r->env, tg->pos, "%s values to unpack (expected %zu, got %zu)",
                    items->u.list.n > tg->n ? "too many" : "not enough", tg->n, items->u.list.n);
        for (size_t i = 0; i < tg->n; i++)
            frame_set(r, f, tg->names[i], items->u.list.items[i]);
        return;
    }
    }
}

/* Every statement and every loop iteration (empty bodies too) is a step. */
static void count_step(struct ct_render *r, uint32_t pos)
{
    if (++r->steps > CT_MAX_STEPS)
        ct_fail(&r->env, pos, "the template ran more than %d steps (statements and loop "
                "iterations); a loop without end?", CT_MAX_STEPS);
}

static void exec_for(struct ct_render *r, const struct ct_node *n, struct ct_frame *f)
{
    ct_val *items = ct_iterate(r, n->u.for_.iter->pos, eval(r, n->u.for_.iter, f));
    if (n->u.for_.filter) {
        /* "for x in xs if cond": the loop (and loop.length) sees only the kept items. */
        struct ct_vec kept = {0};
        for (size_t i = 0; i < items->u.list.n; i++) {
            count_step(r, n->pos);
            struct ct_frame *tf = new_frame(r, f);
            assign(r, &n->u.for_.target, items->u.list.items[i], tf);
            if (ct_truthy(eval(r, n->u.for_.filter, tf)))
                ct_vec_push(&r->env, &kept, items->u.list.items[i]);
        }
        items = ct_vec_finish(&r->env, &kept, false);
    }
    if (!items->u.list.n) {
        exec(r, n->u.for_.other, f);
        return;
    }
    for (size_t i = 0; i < items->u.list.n; i++) {
        count_step(r, n->pos);
        struct ct_frame *body = new_frame(r, f);
        struct ct_loop *loop = ct_alloc(&r->env, sizeof *loop);
        loop->items = items->u.list.items;
        loop->n = items->u.list.n;
        loop->index0 = i;
        ct_val *lv = ct_new(&r->env, CT_LOOP);
        lv->u.loop = loop;
        frame_set(r, body, "loop", lv);
        assign(r, &n->u.for_.target, items->u.list.items[i], body);
        if (exec(r, n->u.for_.body, body) == FLOW_BREAK)
            break;
    }
}

static int exec_nodes(struct ct_render *r, const struct ct_node *n, struct ct_frame *f);

static int exec(struct ct_render *r, const struct ct_node *n, struct ct_frame *f)
{
    if (!n)
        return FLOW_NEXT;
    enter(r, n->pos);
    int flow = exec_nodes(r, n, f);
    r->nesting--;
    return flow;
}

static int exec_nodes(struct ct_render *r, const struct ct_node *n, struct ct_frame *f)
{
    for (; n; n = n->next) {
        count_step(r, n->pos);
        switch (n->kind) {
        case ND_TEXT:
            ct_buf_put(&r->env, r->out, n->u.text.s, n->u.text.len);
            break;
        case ND_OUTPUT:
            ct_write_str(&r->env, r->out, eval(r, n->u.expr, f));
            break;
        case ND_IF: {
            int flow = exec(r, ct_truthy(eval(r, n->u.if_.cond, f)) ? n->u.if_.then
                                                                     : n->u.if_.other, f);
            if (flow != FLOW_NEXT)
                return flow;
            break;
        }
        case ND_FOR:
            exec_for(r, n, f);
            break;
        case ND_SET:
            assign(r, &n->u.set.target, eval(r, n->u.set.value, f), f);
            break;
        case ND_SET_BLOCK:
            frame_set(r, f, n->u.set_block.name, capture(r, n->u.set_block.body, new_frame(r, f)));
            break;
        case ND_MACRO: {
            ct_val *m = ct_new(&r->env, CT_MACRO);
            m->u.macro.def = n->u.macro;
            m->u.macro.scope = f;
            frame_set(r, f, n->u.macro->name, m);
            break;
        }
        case ND_WITH: {
            struct ct_frame *inner = new_frame(r, f);
            ct_val **vals = ct_alloc(&r->env, (n->u.with.n + 1) * sizeof *vals);
            for (size_t i = 0; i < n->u.with.n; i++)
                vals[i] = eval(r, n->u.with.values[i], f);
            for (size_t i = 0; i < n->u.with.n; i++)
                assign(r, &n->u.with.targets[i], vals[i], inner);
            int flow = exec(r, n->u.with.body, inner);
            if (flow != FLOW_NEXT)
                return flow;
            break;
        }
        case ND_BREAK: return FLOW_BREAK;
        case ND_CONTINUE: return FLOW_CONTINUE;
        }
    }
    return FLOW_NEXT;
}

void ct_set_global(struct ct_render *r, const char *name, ct_val *v)
{
    if (!r->globals)
        r->globals = new_frame(r, NULL);
    frame_set(r, r->globals, ct_strndup(&r->env, name, strlen(name)), v);
}

void ct_render_tree(struct ct_render *r, const struct ct_node *body)
{
    exec(r, body, new_frame(r, r->globals));
}
