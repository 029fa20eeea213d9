/* Internals of the chat template interpreter (chat_template*.c), not installed.
 *
 * Memory: every node and value lives in an arena (struct ct_arena), one per
 * compiled template and one per render, freed in one go. Values are immutable
 * once built (the sandbox transformers uses forbids mutating lists and dicts),
 * so they are shared freely without reference counts.
 *
 * Errors: the parser and the evaluator unwind with longjmp to the public entry
 * point (ct_fail). Nothing is malloc'd between the setjmp and the longjmp except
 * through the arena or the output buffer, which the entry point frees, so an
 * error anywhere leaks nothing and needs no check at every call site. */
#ifndef ORIN_CHAT_TEMPLATE_IMPL_H
#define ORIN_CHAT_TEMPLATE_IMPL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orin/chat_template.h"

/* Limits that keep a hostile or broken template from taking the machine. */
#define CT_ARENA_LIMIT   ((size_t)256 << 20) /* bytes per render / per compile */
#define CT_OUTPUT_LIMIT  ((size_t)4 << 20)   /* rendered bytes: ~1M tokens, the longest context */
/* Bytes written to all buffers of a render together: a macro's output is
 * captured, then copied into its caller's: 200 nested calls would copy
 * CT_OUTPUT_LIMIT 200 times. */
#define CT_WRITE_LIMIT   (2 * CT_OUTPUT_LIMIT)
#define CT_MAX_DEPTH     200                 /* parser nesting and macro calls */
#define CT_MAX_RANGE     100000              /* range() items, as Jinja's sandbox */
/* Statements run per render. Nested loops multiply (five loops over 100 items
 * run 10^10 bodies): without a budget a hostile template never returns. The
 * Qwen3 template takes ~10 per message, so this allows ~25k messages, more
 * than any context holds. */
#define CT_MAX_STEPS     250000
/* Expression and block frames in progress at once, macro calls included: the
 * C stack they take stays under ~1 MiB even with AddressSanitizer's frames. */
#define CT_MAX_NESTING   2000
#define CT_NOPOS         UINT32_MAX

/* ---- arena and error unwinding ---- */

struct ct_chunk;
struct ct_arena {
    struct ct_chunk *head;
    size_t total;
};

/* Where errors go: the source (for line:col), the file name, the jump target
 * and the arena that allocations come from. */
struct ct_env {
    jmp_buf jmp;
    const char *src;
    size_t src_len;
    const char *name;
    struct ct_arena *arena;
    size_t written;           /* bytes put into any buffer, against CT_WRITE_LIMIT */
};

_Noreturn void ct_fail(struct ct_env *env, uint32_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void *ct_alloc(struct ct_env *env, size_t n);
char *ct_strndup(struct ct_env *env, const char *s, size_t n);
void ct_arena_free(struct ct_arena *a);

/* A growing byte buffer: malloc'd (the owner frees .data), or with .arena set,
 * taken from the env's arena (nothing to free, safe across ct_fail). */
struct ct_buf {
    char *data;
    size_t len, cap;
    bool arena;
};
void ct_buf_put(struct ct_env *env, struct ct_buf *b, const char *s, size_t n);
void ct_buf_putc(struct ct_env *env, struct ct_buf *b, char c);
void ct_buf_printf(struct ct_env *env, struct ct_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- UTF-8 ---- */

bool ct_utf8_valid(const char *s, size_t len);
/* Decodes the code point at s[*i] (valid UTF-8 assumed) and advances *i. */
uint32_t ct_utf8_next(const char *s, size_t len, size_t *i);
/* Encodes cp into out[0..4); returns the byte count. */
size_t ct_utf8_put(uint32_t cp, char *out);
size_t ct_utf8_count(const char *s, size_t len);
/* Python's str.isspace() for one code point. */
bool ct_is_space(uint32_t cp);

/* ---- values ---- */

enum ct_kind {
    CT_UNDEF, CT_NONE, CT_BOOL, CT_INT, CT_FLOAT, CT_STR, CT_LIST, CT_DICT,
    CT_NS,      /* namespace(): a dict whose attributes can be set */
    CT_LOOP,    /* the loop variable of a for */
    CT_FUNC,    /* a global function: namespace, range, raise_exception, ... */
    CT_MACRO,
    CT_METHOD,  /* a bound method: "abc".startswith, dict.items, ... */
};

typedef struct ct_val ct_val;
struct ct_builtin;
struct ct_macro;
struct ct_frame;

struct ct_dict {
    size_t n, cap;
    ct_val **keys; /* strings */
    ct_val **vals;
};

struct ct_loop {
    ct_val **items;
    size_t n, index0;
};

struct ct_val {
    enum ct_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *s; /* NUL-terminated, valid UTF-8 */
            size_t len;
        } str;
        struct {
            ct_val **items;
            size_t n;
            bool tuple;
        } list;
        struct ct_dict *dict; /* CT_DICT, CT_NS */
        struct ct_loop *loop;
        const struct ct_builtin *func;
        struct {
            const struct ct_macro *def;
            struct ct_frame *scope;
        } macro;
        struct {
            ct_val *self;
            const struct ct_builtin *fn;
        } method;
        const char *undef; /* why it is undefined, for the error when it is used */
    } u;
};

extern ct_val ct_none, ct_true, ct_false, ct_undefined;

ct_val *ct_new(struct ct_env *env, enum ct_kind kind);
ct_val *ct_bool(bool b);
ct_val *ct_int(struct ct_env *env, int64_t i);
ct_val *ct_float(struct ct_env *env, double f);
ct_val *ct_str(struct ct_env *env, const char *s, size_t len); /* copies */
ct_val *ct_str_nocopy(struct ct_env *env, const char *s, size_t len);
ct_val *ct_cstr(struct ct_env *env, const char *s);
ct_val *ct_list(struct ct_env *env, size_t n, bool tuple); /* n items, NULL-filled */
ct_val *ct_dict(struct ct_env *env);
ct_val *ct_undef(struct ct_env *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ct_dict_set(struct ct_env *env, struct ct_dict *d, ct_val *key, ct_val *val);
ct_val *ct_dict_get(const struct ct_dict *d, const char *key, size_t len);

/* A list being built. */
struct ct_vec {
    ct_val **items;
    size_t n, cap;
};
void ct_vec_push(struct ct_env *env, struct ct_vec *v, ct_val *x);
ct_val *ct_vec_finish(struct ct_env *env, struct ct_vec *v, bool tuple);

const char *ct_type_name(const ct_val *v); /* Python's type name: 'str', 'dict', ... */
bool ct_truthy(const ct_val *v);
bool ct_equal(const ct_val *a, const ct_val *b);
bool ct_is_number(const ct_val *v); /* bool, int or float */
double ct_as_double(const ct_val *v);

/* str(v) and repr(v) as Python prints them. Undefined prints as "". */
void ct_write_str(struct ct_env *env, struct ct_buf *b, const ct_val *v);
void ct_write_repr(struct ct_env *env, struct ct_buf *b, const ct_val *v);
ct_val *ct_to_str(struct ct_env *env, ct_val *v);
void ct_write_float(struct ct_buf *b, struct ct_env *env, double f); /* float.__repr__ */

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) as transformers' tojson. */
struct ct_json_opts {
    bool ensure_ascii;
    int indent;          /* < 0: None */
    const char *item_sep, *key_sep;
    bool sort_keys;
};
void ct_write_json(struct ct_env *env, struct ct_buf *b, const ct_val *v,
                   const struct ct_json_opts *o, uint32_t pos, int depth);

/* ---- the syntax tree ---- */

enum ct_op {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
};

enum ct_expr_kind {
    EX_CONST, EX_NAME, EX_ATTR, EX_ITEM, EX_SLICE, EX_CALL, EX_FILTER, EX_TEST,
    EX_NOT, EX_NEG, EX_POS, EX_BIN, EX_AND, EX_OR, EX_CMP, EX_COND,
    EX_LIST, EX_TUPLE, EX_DICT, EX_CONCAT,
};

struct ct_expr;

struct ct_arglist {
    size_t npos, nkw;
    struct ct_expr **pos;
    const char **kw_names;
    struct ct_expr **kw;
};

struct ct_expr {
    enum ct_expr_kind kind;
    uint32_t pos;
    union {
        ct_val *cval;
        const char *name;
        struct {
            struct ct_expr *obj;
            const char *name;
        } attr;
        struct {
            struct ct_expr *obj, *key;
        } item;
        struct {
            struct ct_expr *obj, *start, *stop, *step;
        } slice;
        struct {
            struct ct_expr *fn;
            struct ct_arglist args;
        } call;
        struct { /* EX_FILTER and EX_TEST */
            struct ct_expr *arg;
            const struct ct_builtin *fn; /* NULL: unknown, an error when evaluated */
            const char *name;
            struct ct_arglist args;
            bool negate;
        } filter;
        struct ct_expr *unary;
        struct {
            enum ct_op op;
            struct ct_expr *l, *r;
        } bin;
        struct { /* a < b <= c: n operators, n + 1 operands */
            size_t n;
            enum ct_op *ops;
            struct ct_expr **operands;
        } cmp;
        struct {
            struct ct_expr *cond, *then, *other; /* other may be NULL */
        } cond;
        struct { /* list, tuple, concat; dict: items are keys, vals values */
            size_t n;
            struct ct_expr **items, **vals;
        } seq;
    } u;
};

enum ct_target_kind { TG_NAME, TG_ATTR, TG_TUPLE };

struct ct_target {
    enum ct_target_kind kind;
    uint32_t pos;
    const char *name;   /* TG_NAME, TG_ATTR (the namespace) */
    const char *attr;   /* TG_ATTR */
    size_t n;           /* TG_TUPLE */
    const char **names;
};

enum ct_node_kind {
    ND_TEXT, ND_OUTPUT, ND_IF, ND_FOR, ND_SET, ND_SET_BLOCK, ND_MACRO, ND_WITH,
    ND_BREAK, ND_CONTINUE,
};

struct ct_node;

struct ct_macro {
    const char *name;
    uint32_t pos;
    size_t nparams;
    const char **params;
    struct ct_expr **defaults; /* NULL where a parameter has none */
    struct ct_node *body;
};

struct ct_node {
    enum ct_node_kind kind;
    uint32_t pos;
    struct ct_node *next;
    union {
        struct {
            const char *s;
            size_t len;
        } text;
        struct ct_expr *expr;
        struct {
            struct ct_expr *cond;
            struct ct_node *then, *other;
        } if_;
        struct {
            struct ct_target target;
            struct ct_expr *iter, *filter;
            struct ct_node *body, *other;
        } for_;
        struct {
            struct ct_target target;
            struct ct_expr *value;
        } set;
        struct {
            const char *name;
            struct ct_node *body;
        } set_block;
        struct ct_macro *macro;
        struct {
            size_t n;
            struct ct_target *targets;
            struct ct_expr **values;
            struct ct_node *body;
        } with;
    } u;
};

/* Normalises newlines and drops one trailing newline (Jinja's defaults), then
 * parses. The returned tree and normalised source live in env->arena. */
struct ct_node *ct_parse(struct ct_env *env, const char *src, size_t len);

/* ---- evaluation ---- */

struct ct_frame {
    struct ct_frame *parent;
    size_t n, cap;
    const char **names;
    ct_val **vals;
};

struct ct_render {
    struct ct_env env;
    struct ct_buf *out;       /* where text goes now: the result, or a macro's capture */
    struct ct_frame *globals;
    int depth;                /* macro calls in progress */
    uint32_t steps;           /* statements run, against CT_MAX_STEPS */
    int nesting;              /* eval/exec frames in progress, against CT_MAX_NESTING */
};

/* Call arguments after evaluation. */
struct ct_args {
    size_t npos, nkw;
    ct_val **pos;
    const char **kw_names;
    ct_val **kw;
};

/* A filter, test, global function or method. `self` is the filtered or tested
 * value, or the receiver of a method; NULL for globals. */
typedef ct_val *(*ct_builtin_fn)(struct ct_render *r, uint32_t pos, ct_val *self,
                                 const struct ct_args *a);
struct ct_builtin {
    const char *name;
    ct_builtin_fn fn;
};

const struct ct_builtin *ct_find_filter(const char *name);
const struct ct_builtin *ct_find_test(const char *name);
const struct ct_builtin *ct_find_global(const char *name);
/* The method `name` of v's type, or NULL. */
const struct ct_builtin *ct_find_method(const ct_val *v, const char *name);

/* Binds a call's arguments to named parameters (Python rules: positional
 * first, then keywords, no duplicates). out[i] is NULL where not given. */
void ct_bind(struct ct_render *r, uint32_t pos, const struct ct_args *a, const char *fname,
             const char *const *params, size_t nparams, ct_val **out);

/* Used by builtins that take tests and filters by name (select, map). */
ct_val *ct_call_value(struct ct_render *r, uint32_t pos, ct_val *fn, const struct ct_args *a);
ct_val *ct_getattr(struct ct_render *r, uint32_t pos, ct_val *obj, const char *name);
ct_val *ct_getitem(struct ct_render *r, uint32_t pos, ct_val *obj, ct_val *key);
/* The items a for loop over v visits (undefined: none). */
ct_val *ct_iterate(struct ct_render *r, uint32_t pos, ct_val *v);
int64_t ct_length(struct ct_render *r, uint32_t pos, ct_val *v);
/* Python's a < b (-1), == (0), > (1); TypeError for unorderable types. */
int ct_compare(struct ct_render *r, uint32_t pos, const ct_val *a, const ct_val *b);
_Noreturn void ct_fail_undefined(struct ct_render *r, uint32_t pos, const ct_val *v);

/* Defines a template variable (in r->globals, created on first use). */
void ct_set_global(struct ct_render *r, const char *name, ct_val *v);
/* Renders the whole tree into r->out. */
void ct_render_tree(struct ct_render *r, const struct ct_node *body);

#endif
