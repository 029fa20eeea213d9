/* Chat templates: lexer and parser (Jinja2 syntax, with the environment that
 * transformers uses: trim_blocks, lstrip_blocks, keep_trailing_newline off).
 *
 * The lexer follows jinja2/lexer.py rule for rule where whitespace is
 * concerned, because that is what decides the bytes a template renders:
 * "{%-" strips all whitespace before the tag, "-%}" all after; otherwise a
 * block or comment tag eats one newline after it (trim_blocks), and spaces
 * and tabs between the start of a line and a block or comment tag go
 * (lstrip_blocks) unless the tag starts with "{%+". The parser follows
 * jinja2/parser.py's grammar and operator precedence. */
#include "chat_template_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- tokens ---- */

enum tok_kind {
    TK_DATA, TK_BLOCK_BEGIN, TK_BLOCK_END, TK_VAR_BEGIN, TK_VAR_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP, TK_EOF,
};

/* Two-character operators; one-character ones are their own character. */
enum { T_FLOORDIV = 256, T_POW, T_EQ, T_NE, T_LE, T_GE };

struct tok {
    enum tok_kind kind;
    uint32_t pos;
    int op;
    const char *s; /* name, decoded string or data */
    size_t len;
    int64_t i;
    double f;
};

struct lexer {
    struct ct_env *env;
    const char *src;
    size_t len, pos;
    bool line_starting;
    struct tok *toks;
    size_t n, cap;
    char balance[CT_MAX_DEPTH];
    int nbalance;
};

static struct tok *push_tok(struct lexer *lx, enum tok_kind kind, size_t pos)
{
    if (lx->n == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        struct tok *t = ct_alloc(lx->env, cap * sizeof *t);
        if (lx->n)
            memcpy(t, lx->toks, lx->n * sizeof *t);
        lx->toks = t;
        lx->cap = cap;
    }
    struct tok *t = &lx->toks[lx->n++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->pos = (uint32_t)pos;
    return t;
}

static void push_data(struct lexer *lx, size_t start, size_t end)
{
    if (end <= start)
        return;
    struct tok *t = push_tok(lx, TK_DATA, start);
    t->s = lx->src + start;
    t->len = end - start;
}

/* Start of the code point that ends at s[end - 1]. */
static size_t prev_cp(const char *s, size_t start, size_t end)
{
    size_t i = end - 1;
    while (i > start && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    return i;
}

static size_t rstrip_ws(const char *s, size_t start, size_t end)
{
    while (end > start) {
        size_t i = prev_cp(s, start, end), j = i;
        if (!ct_is_space(ct_utf8_next(s, end, &j)))
            break;
        end = i;
    }
    return end;
}

static size_t skip_ws(const char *s, size_t len, size_t pos)
{
    while (pos < len) {
        size_t j = pos;
        if (!ct_is_space(ct_utf8_next(s, len, &j)))
            break;
        pos = j;
    }
    return pos;
}

static bool starts(const struct lexer *lx, size_t pos, const char *lit)
{
    size_t n = strlen(lit);
    return pos + n <= lx->len && memcmp(lx->src + pos, lit, n) == 0;
}

/* The text before a tag, after whitespace control: returns its new end. */
static size_t strip_before_tag(struct lexer *lx, size_t start, size_t end, char mark, bool var)
{
    if (mark == '-')
        return rstrip_ws(lx->src, start, end);
    if (mark == '+' || var)
        return end;
    size_t l_pos = start;
    for (size_t i = end; i > start; i--) {
        if (lx->src[i - 1] == '\n') {
            l_pos = i;
            break;
        }
    }
    if (l_pos == start && !lx->line_starting)
        return end;
    if (l_pos < end && rstrip_ws(lx->src, l_pos, end) == l_pos)
        return l_pos;
    return end;
}

/* After a block or comment end: "-" eats all whitespace, "+" nothing, plain
 * one newline (trim_blocks). Returns the position after. */
static size_t after_block_end(struct lexer *lx, size_t pos, char mark)
{
    if (mark == '-')
        pos = skip_ws(lx->src, lx->len, pos);
    else if (mark != '+' && pos < lx->len && lx->src[pos] == '\n')
        pos++;
    lx->line_starting = pos > 0 && lx->src[pos - 1] == '\n';
    return pos;
}

static void lex_comment(struct lexer *lx, size_t tag, size_t body)
{
    if (body >= lx->len) { /* "{#" ending the source: Jinja's lexer just stops */
        lx->pos = lx->len;
        return;
    }
    for (size_t j = body; j + 2 <= lx->len; j++) {
        char mark = 0;
        size_t end;
        if (starts(lx, j, "+#}") || starts(lx, j, "-#}")) {
            mark = lx->src[j];
            end = j + 3;
        } else if (starts(lx, j, "#}")) {
            end = j + 2;
        } else {
            continue;
        }
        lx->pos = after_block_end(lx, end, mark);
        return;
    }
    ct_fail(lx->env, (uint32_t)tag, "missing end of comment tag");
}

/* {% raw %}...{% endraw %}: returns false when the tag at `tag` is not raw. */
static bool lex_raw(struct lexer *lx, size_t tag, size_t text_start)
{
    size_t p = tag + 2;
    char mark = 0;
    if (p < lx->len && (lx->src[p] == '-' || lx->src[p] == '+'))
        mark = lx->src[p++];
    p = skip_ws(lx->src, lx->len, p);
    if (!starts(lx, p, "raw"))
        return false;
    p = skip_ws(lx->src, lx->len, p + 3);
    if (starts(lx, p, "-%}"))
        p = skip_ws(lx->src, lx->len, p + 3);
    else if (starts(lx, p, "%}"))
        p += 2;
    else
        return false;
    push_data(lx, text_start, strip_before_tag(lx, text_start, tag, mark, false));
    lx->line_starting = lx->src[p - 1] == '\n';
    /* Find "{%[-+]? endraw %}" and the whitespace control around it. */
    for (size_t j = p; j + 2 <= lx->len; j++) {
        if (!starts(lx, j, "{%"))
            continue;
        size_t q = j + 2;
        char emark = 0;
        if (q < lx->len && (lx->src[q] == '-' || lx->src[q] == '+'))
            emark = lx->src[q++];
        q = skip_ws(lx->src, lx->len, q);
        if (!starts(lx, q, "endraw"))
            continue;
        q = skip_ws(lx->src, lx->len, q + 6);
        char close = 0;
        if (starts(lx, q, "+%}") || starts(lx, q, "-%}"))
            close = lx->src[q++];
        if (!starts(lx, q, "%}"))
            continue;
        push_data(lx, p, strip_before_tag(lx, p, j, emark, false));
        lx->pos = after_block_end(lx, q + 2, close);
        return true;
    }
    ct_fail(lx->env, (uint32_t)tag, "missing end of raw directive");
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* Names are Python identifiers, Unicode letters included. Returns the length
 * of the code point at s[pos] when it may appear in a name (at its start when
 * `first`), else 0. */
static size_t name_char(const char *s, size_t len, size_t pos, bool first)
{
    unsigned char c = (unsigned char)s[pos];
    if (c < 0x80)
        return is_name_start((char)c) || (!first && is_digit((char)c)) ? 1 : 0;
    size_t j = pos;
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)ct_utf8_next(s, len, &j));
    bool letter = (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                  cat == UTF8PROC_CATEGORY_NL;
    bool cont = cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC ||
                cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_PC;
    return letter || (!first && cont) ? j - pos : 0;
}

/* Digits with optional single underscores between them; returns the end. */
static size_t scan_digits(const struct lexer *lx, size_t p)
{
    if (p >= lx->len || !is_digit(lx->src[p]))
        return p;
    while (p < lx->len) {
        if (is_digit(lx->src[p]))
            p++;
        else if (lx->src[p] == '_' && p + 1 < lx->len && is_digit(lx->src[p + 1]))
            p++;
        else
            break;
    }
    return p;
}

static char *copy_digits(struct lexer *lx, size_t start, size_t end)
{
    char *s = ct_alloc(lx->env, end - start + 1);
    size_t n = 0;
    for (size_t i = start; i < end; i++)
        if (lx->src[i] != '_')
            s[n++] = lx->src[i];
    s[n] = '\0';
    return s;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static void lex_number(struct lexer *lx)
{
    size_t start = lx->pos, p = scan_digits(lx, start);
    bool after_dot = start > 0 && lx->src[start - 1] == '.';
    /* Float: digits . digits [e exp] | digits e exp (not right after a dot). */
    size_t q = p;
    bool is_float = false;
    if (!after_dot && q + 1 < lx->len && lx->src[q] == '.' && is_digit(lx->src[q + 1])) {
        q = scan_digits(lx, q + 1);
        is_float = true;
    }
    if (!after_dot && q < lx->len && (lx->src[q] == 'e' || lx->src[q] == 'E')) {
        size_t e = q + 1;
        if (e < lx->len && (lx->src[e] == '+' || lx->src[e] == '-'))
            e++;
        size_t d = scan_digits(lx, e);
        if (d > e) {
            q = d;
            is_float = true;
        }
    }
    if (is_float) {
        struct tok *t = push_tok(lx, TK_FLOAT, start);
        t->f = strtod(copy_digits(lx, start, q), NULL);
        lx->pos = q;
        return;
    }
    int base = 10;
    size_t ds = start;
    if (lx->src[start] == '0' && start + 2 < lx->len) {
        /* 0x1f, 0o17, 0b101 (an underscore may follow the prefix); "0or" is 0 or. */
        char c = lx->src[start + 1] | 0x20;
        base = c == 'x' ? 16 : c == 'o' ? 8 : c == 'b' ? 2 : 10;
        size_t d = start + 2;
        if (d + 1 < lx->len && lx->src[d] == '_')
            d++;
        int h = hexval(lx->src[d]);
        if (base != 10 && (h < 0 || h >= base))
            base = 10;
    }
    if (base != 10) {
        ds = start + 2;
        p = ds;
        while (p < lx->len && (lx->src[p] == '_' ||
                               (hexval(lx->src[p]) >= 0 && hexval(lx->src[p]) < base)))
            p++;
    } else if (lx->src[start] == '0') {
        p = start + 1; /* Jinja: "0" then whatever follows is a new token */
        while (p + 1 < lx->len && lx->src[p] == '_' && lx->src[p + 1] == '0')
            p += 2;
        while (p < lx->len && lx->src[p] == '0')
            p++;
    }
    char *digits = copy_digits(lx, ds, p);
    char *end;
    unsigned long long v = strtoull(digits, &end, base);
    if (!*digits || *end || v > INT64_MAX)
        ct_fail(lx->env, (uint32_t)start, "invalid or too large integer literal");
    struct tok *t = push_tok(lx, TK_INT, start);
    t->i = (int64_t)v;
    lx->pos = p;
}

/* Python's unicode-escape decoding of a string literal's body, as Jinja does. */
static void lex_string(struct lexer *lx)
{
    size_t start = lx->pos;
    char quote = lx->src[start];
    size_t p = start + 1;
    while (p < lx->len && lx->src[p] != quote) {
        if (lx->src[p] == '\\')
            p++;
        p++;
    }
    if (p >= lx->len)
        ct_fail(lx->env, (uint32_t)start, "unterminated string literal");
    size_t body = start + 1, body_end = p;
    struct ct_buf b = {.arena = true};
    for (size_t i = body; i < body_end;) {
        char c = lx->src[i];
        if (c != '\\') {
            ct_buf_putc(lx->env, &b, c);
            i++;
            continue;
        }
        char e = lx->src[i + 1];
        size_t at = i;
        i += 2;
        uint32_t cp;
        int ndig = 0;
        switch (e) {
        case '\n': continue;
        case '\\': ct_buf_putc(lx->env, &b, '\\'); continue;
        case '\'': ct_buf_putc(lx->env, &b, '\''); continue;
        case '"': ct_buf_putc(lx->env, &b, '"'); continue;
        case 'a': ct_buf_putc(lx->env, &b, '\a'); continue;
        case 'b': ct_buf_putc(lx->env, &b, '\b'); continue;
        case 'f': ct_buf_putc(lx->env, &b, '\f'); continue;
        case 'n': ct_buf_putc(lx->env, &b, '\n'); continue;
        case 'r': ct_buf_putc(lx->env, &b, '\r'); continue;
        case 't': ct_buf_putc(lx->env, &b, '\t'); continue;
        case 'v': ct_buf_putc(lx->env, &b, '\v'); continue;
        case 'x': ndig = 2; break;
        case 'u': ndig = 4; break;
        case 'U': ndig = 8; break;
        case 'N': ct_fail(lx->env, (uint32_t)at, "\\N{...} escapes are not supported");
        default: break;
        }
        if (e >= '0' && e <= '7') {
            cp = (uint32_t)(e - '0');
            for (int k = 0; k < 2 && i < body_end && lx->src[i] >= '0' && lx->src[i] <= '7'; k++)
                cp = cp * 8 + (uint32_t)(lx->src[i++] - '0');
        } else if (ndig) {
            cp = 0;
            for (int k = 0; k < ndig; k++, i++) {
                int h = i < body_end ? hexval(lx->src[i]) : -1;
                if (h < 0)
                    ct_fail(lx->env, (uint32_t)at, "truncated \\%c escape in string literal", e);
                cp = cp << 4 | (uint32_t)h;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                ct_fail(lx->env, (uint32_t)at, "invalid code point U+%X in string literal", cp);
        } else if ((unsigned char)e >= 0x80) {
            /* Jinja backslash-replaces non-ASCII before decoding, so "\é"
             * decodes to a backslash and the text "xe9". */
            size_t j = i - 1;
            cp = ct_utf8_next(lx->src, body_end, &j);
            i = j;
            ct_buf_printf(lx->env, &b, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x",
                          cp);
            continue;
        } else {
            ct_buf_putc(lx->env, &b, '\\');
            ct_buf_putc(lx->env, &b, e);
            continue;
        }
        char enc[4];
        ct_buf_put(lx->env, &b, enc, ct_utf8_put(cp, enc));
    }
    struct tok *t = push_tok(lx, TK_STRING, start);
    t->s = b.data ? b.data : "";
    t->len = b.len;
    lx->pos = p + 1;
}

static void lex_operator(struct lexer *lx)
{
    static const struct {
        const char *s;
        int op;
    } two[] = {{"//", T_FLOORDIV}, {"**", T_POW}, {"==", T_EQ},
               {"!=", T_NE},       {">=", T_GE},  {"<=", T_LE}};
    size_t start = lx->pos;
    for (size_t k = 0; k < sizeof two / sizeof two[0]; k++) {
        if (starts(lx, start, two[k].s)) {
            push_tok(lx, TK_OP, start)->op = two[k].op;
            lx->pos += 2;
            return;
        }
    }
    char c = lx->src[start];
    if (!strchr("+-/*%~[](){}=.:|,;<>", c) || c == '\0') {
        size_t j = start;
        uint32_t cp = ct_utf8_next(lx->src, lx->len, &j);
        if (cp >= 0x20 && cp < 0x7F)
            ct_fail(lx->env, (uint32_t)start, "unexpected character '%c'", (char)cp);
        ct_fail(lx->env, (uint32_t)start, "unexpected character U+%04X", cp);
    }
    if (c == '(' || c == '[' || c == '{') {
        if (lx->nbalance == CT_MAX_DEPTH)
            ct_fail(lx->env, (uint32_t)start, "brackets nest too deeply");
        lx->balance[lx->nbalance++] = c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
        if (!lx->nbalance)
            ct_fail(lx->env, (uint32_t)start, "unexpected '%c'", c);
        char want = lx->balance[--lx->nbalance];
        if (want != c)
            ct_fail(lx->env, (uint32_t)start, "unexpected '%c', expected '%c'", c, want);
    }
    push_tok(lx, TK_OP, start)->op = c;
    lx->pos++;
}

/* The inside of {% ... %} or {{ ... }}, up to and including its end. */
static void lex_tag(struct lexer *lx, size_t tag, bool var)
{
    lx->nbalance = 0;
    for (;;) {
        size_t p = lx->pos;
        if (!lx->nbalance) {
            if (var && (starts(lx, p, "-}}") || starts(lx, p, "}}"))) {
                bool strip = lx->src[p] == '-';
                push_tok(lx, TK_VAR_END, p);
                p += strip ? 3 : 2;
                if (strip)
                    p = skip_ws(lx->src, lx->len, p);
                lx->line_starting = lx->src[p - 1] == '\n';
                lx->pos = p;
                return;
            }
            if (!var && (starts(lx, p, "-%}") || starts(lx, p, "+%}") || starts(lx, p, "%}"))) {
                char mark = lx->src[p] == '%' ? 0 : lx->src[p];
                push_tok(lx, TK_BLOCK_END, p);
                lx->pos = after_block_end(lx, p + (mark ? 3 : 2), mark);
                return;
            }
        }
        if (p >= lx->len)
            ct_fail(lx->env, (uint32_t)tag, "unexpected end of template: '%s' is not closed",
                    var ? "{{" : "{%");
        size_t q = skip_ws(lx->src, lx->len, p);
        if (q != p) {
            lx->pos = q;
            continue;
        }
        char c = lx->src[p];
        if (is_digit(c)) {
            lex_number(lx);
        } else if (name_char(lx->src, lx->len, p, true)) {
            size_t e = p, k;
            while (e < lx->len && (k = name_char(lx->src, lx->len, e, e == p)))
                e += k;
            struct tok *t = push_tok(lx, TK_NAME, p);
            t->s = ct_strndup(lx->env, lx->src + p, e - p);
            t->len = e - p;
            lx->pos = e;
        } else if (c == '\'' || c == '"') {
            lex_string(lx);
        } else {
            lex_operator(lx);
        }
    }
}

static size_t find_tag(const struct lexer *lx, size_t from)
{
    for (size_t i = from; i + 1 < lx->len; i++)
        if (lx->src[i] == '{' && (lx->src[i + 1] == '{' || lx->src[i + 1] == '%' ||
                                  lx->src[i + 1] == '#'))
            return i;
    return lx->len;
}

static void lex(struct lexer *lx)
{
    lx->line_starting = true;
    while (lx->pos < lx->len) {
        size_t text = lx->pos, tag = find_tag(lx, text);
        if (tag == lx->len) {
            push_data(lx, text, lx->len);
            break;
        }
        char kind = lx->src[tag + 1];
        if (kind == '%' && lex_raw(lx, tag, text))
            continue;
        size_t body = tag + 2;
        char mark = 0;
        if (body < lx->len && (lx->src[body] == '-' || lx->src[body] == '+'))
            mark = lx->src[body++];
        push_data(lx, text, strip_before_tag(lx, text, tag, mark, kind == '{'));
        lx->pos = body;
        if (kind == '#') {
            lex_comment(lx, tag, body);
            continue;
        }
        push_tok(lx, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, tag);
        lex_tag(lx, tag, kind == '{');
    }
    push_tok(lx, TK_EOF, lx->len);
}

/* ---- parser ---- */

struct parser {
    struct ct_env *env;
    struct tok *toks;
    size_t n, i;
    int depth;
    int loop_depth;
};

static struct tok *cur(struct parser *p)
{
    return &p->toks[p->i];
}

static struct tok *look(struct parser *p)
{
    return &p->toks[p->i + 1 < p->n ? p->i + 1 : p->n - 1];
}

static void advance(struct parser *p)
{
    if (p->i + 1 < p->n)
        p->i++;
}

static bool is_op(const struct tok *t, int op)
{
    return t->kind == TK_OP && t->op == op;
}

static bool is_name(const struct tok *t, const char *name)
{
    return t->kind == TK_NAME && strcmp(t->s, name) == 0;
}

static const char *describe(const struct tok *t)
{
    static _Thread_local char buf[64];
    switch (t->kind) {
    case TK_DATA: return "template data";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "end of statement block";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "end of print statement";
    case TK_NAME: snprintf(buf, sizeof buf, "'%.40s'", t->s); return buf;
    case TK_STRING: return "string";
    case TK_INT: return "integer";
    case TK_FLOAT: return "float";
    case TK_EOF: return "end of template";
    case TK_OP:
        switch (t->op) {
        case T_FLOORDIV: return "'//'";
        case T_POW: return "'**'";
        case T_EQ: return "'=='";
        case T_NE: return "'!='";
        case T_LE: return "'<='";
        case T_GE: return "'>='";
        default: snprintf(buf, sizeof buf, "'%c'", t->op); return buf;
        }
    }
    return "token";
}

static _Noreturn void unexpected(struct parser *p, const char *what)
{
    struct tok *t = cur(p);
    ct_fail(p->env, t->pos, "expected %s, got %s", what, describe(t));
}

static void expect_op(struct parser *p, int op, const char *what)
{
    if (!is_op(cur(p), op))
        unexpected(p, what);
    advance(p);
}

static const char *expect_name(struct parser *p)
{
    if (cur(p)->kind != TK_NAME)
        unexpected(p, "a name");
    const char *s = cur(p)->s;
    advance(p);
    return s;
}

/* The '%}' that opens a statement's body; Jinja accepts a Python-style ':'
 * before it ({% if x: %}). */
static void expect_body_start(struct parser *p)
{
    if (is_op(cur(p), ':'))
        advance(p);
    if (cur(p)->kind != TK_BLOCK_END)
        unexpected(p, "'%}'");
    advance(p);
}

static void expect_block_end(struct parser *p)
{
    if (cur(p)->kind != TK_BLOCK_END)
        unexpected(p, "'%}'");
    advance(p);
}

static void enter(struct parser *p)
{
    if (++p->depth > CT_MAX_DEPTH)
        ct_fail(p->env, cur(p)->pos, "template nests too deeply");
}

static struct ct_expr *new_expr(struct parser *p, enum ct_expr_kind kind, uint32_t pos)
{
    struct ct_expr *e = ct_alloc(p->env, sizeof *e);
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->pos = pos;
    return e;
}

/* A growing array of pointers in the arena. */
struct ptrs {
    void **items;
    size_t n, cap;
};

static void ptrs_push(struct parser *p, struct ptrs *v, void *x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        void **items = ct_alloc(p->env, cap * sizeof *items);
        if (v->n)
            memcpy(items, v->items, v->n * sizeof *items);
        v->items = items;
        v->cap = cap;
    }
    v->items[v->n++] = x;
}

static struct ct_expr *parse_expression(struct parser *p, bool with_condexpr);
static struct ct_expr *parse_unary(struct parser *p, bool with_filter);
static struct ct_expr *parse_primary(struct parser *p);
static struct ct_expr *parse_postfix(struct parser *p, struct ct_expr *e);

static bool tuple_end(struct parser *p, const char *extra_end)
{
    struct tok *t = cur(p);
    if (t->kind == TK_VAR_END || t->kind == TK_BLOCK_END || is_op(t, ')'))
        return true;
    return extra_end && is_name(t, extra_end);
}

/* expr (, expr)* : a tuple when there is a comma. */
static struct ct_expr *parse_tuple(struct parser *p, bool with_condexpr, const char *extra_end,
                                   bool explicit_parens)
{
    uint32_t pos = cur(p)->pos;
    struct ptrs items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n)
            expect_op(p, ',', "','");
        if (tuple_end(p, extra_end))
            break;
        ptrs_push(p, &items, parse_expression(p, with_condexpr));
        if (is_op(cur(p), ','))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (items.n)
            return items.items[0];
        if (!explicit_parens)
            unexpected(p, "an expression");
    }
    struct ct_expr *e = new_expr(p, EX_TUPLE, pos);
    e->u.seq.n = items.n;
    e->u.seq.items = (struct ct_expr **)items.items;
    return e;
}

static void parse_call_args(struct parser *p, struct ct_arglist *args)
{
    expect_op(p, '(', "'('");
    struct ptrs pos = {0}, kw = {0}, kw_names = {0};
    while (!is_op(cur(p), ')')) {
        if (pos.n || kw.n)
            expect_op(p, ',', "','");
        if (is_op(cur(p), ')'))
            break;
        if (is_op(cur(p), '*') || is_op(cur(p), T_POW))
            ct_fail(p->env, cur(p)->pos, "*args and **kwargs in calls are not supported");
        if (cur(p)->kind == TK_NAME && is_op(look(p), '=')) {
            ptrs_push(p, &kw_names, (void *)cur(p)->s);
            advance(p);
            advance(p);
            ptrs_push(p, &kw, parse_expression(p, true));
        } else {
            if (kw.n)
                ct_fail(p->env, cur(p)->pos, "positional argument follows keyword argument");
            ptrs_push(p, &pos, parse_expression(p, true));
        }
    }
    advance(p);
    args->npos = pos.n;
    args->pos = (struct ct_expr **)pos.items;
    args->nkw = kw.n;
    args->kw = (struct ct_expr **)kw.items;
    args->kw_names = (const char **)kw_names.items;
}

static struct ct_expr *const_expr(struct parser *p, uint32_t pos, ct_val *v);

/* One subscript: an expression, or a slice [start]:[stop][:[step]] (returned
 * as an EX_SLICE of obj). */
static struct ct_expr *parse_subscribed(struct parser *p, struct ct_expr *obj, uint32_t pos)
{
    struct ct_expr *parts[3] = {NULL, NULL, NULL};
    if (!is_op(cur(p), ':')) {
        parts[0] = parse_expression(p, true);
        if (!is_op(cur(p), ':'))
            return parts[0];
    }
    advance(p);
    if (!is_op(cur(p), ']') && !is_op(cur(p), ',') && !is_op(cur(p), ':'))
        parts[1] = parse_expression(p, true);
    if (is_op(cur(p), ':')) {
        advance(p);
        if (!is_op(cur(p), ']') && !is_op(cur(p), ','))
            parts[2] = parse_expression(p, true);
    }
    struct ct_expr *e = new_expr(p, EX_SLICE, pos);
    e->u.slice.obj = obj;
    e->u.slice.start = parts[0];
    e->u.slice.stop = parts[1];
    e->u.slice.step = parts[2];
    return e;
}

static struct ct_expr *parse_subscript(struct parser *p, struct ct_expr *obj)
{
    struct tok *t = cur(p);
    if (is_op(t, '.')) {
        advance(p);
        struct tok *n = cur(p);
        if (n->kind == TK_NAME) {
            struct ct_expr *e = new_expr(p, EX_ATTR, n->pos);
            e->u.attr.obj = obj;
            e->u.attr.name = n->s;
            advance(p);
            return e;
        }
        if (n->kind != TK_INT)
            unexpected(p, "a name or number after '.'");
        struct ct_expr *e = new_expr(p, EX_ITEM, n->pos);
        e->u.item.obj = obj;
        e->u.item.key = new_expr(p, EX_CONST, n->pos);
        e->u.item.key->u.cval = ct_int(p->env, n->i);
        advance(p);
        return e;
    }
    /* '[' subscript (, subscript)* ']', each an index or start:stop:step;
     * as in Jinja, anything but exactly one makes a tuple key ("x[]" too). */
    advance(p);
    struct ptrs keys = {0};
    while (!is_op(cur(p), ']')) {
        if (keys.n)
            expect_op(p, ',', "','");
        ptrs_push(p, &keys, parse_subscribed(p, obj, t->pos));
    }
    advance(p);
    if (keys.n == 1) {
        struct ct_expr *k = keys.items[0];
        if (k->kind == EX_SLICE)
            return k;
        struct ct_expr *e = new_expr(p, EX_ITEM, t->pos);
        e->u.item.obj = obj;
        e->u.item.key = k;
        return e;
    }
    struct ct_expr *tuple = new_expr(p, EX_TUPLE, t->pos);
    tuple->u.seq.n = keys.n;
    tuple->u.seq.items = (struct ct_expr **)keys.items;
    for (size_t i = 0; i < keys.n; i++)
        if (tuple->u.seq.items[i]->kind == EX_SLICE) /* a tuple of slices finds nothing either */
            tuple->u.seq.items[i] = const_expr(p, t->pos, &ct_none);
    struct ct_expr *e = new_expr(p, EX_ITEM, t->pos);
    e->u.item.obj = obj;
    e->u.item.key = tuple;
    return e;
}

static struct ct_expr *parse_postfix(struct parser *p, struct ct_expr *e)
{
    for (;;) {
        struct tok *t = cur(p);
        if (is_op(t, '.') || is_op(t, '[')) {
            e = parse_subscript(p, e);
        } else if (is_op(t, '(')) {
            struct ct_expr *c = new_expr(p, EX_CALL, t->pos);
            c->u.call.fn = e;
            parse_call_args(p, &c->u.call.args);
            e = c;
        } else {
            return e;
        }
    }
}

/* A filter or test name, possibly dotted. */
static const char *parse_dotted_name(struct parser *p)
{
    const char *name = expect_name(p);
    while (is_op(cur(p), '.') && look(p)->kind == TK_NAME) {
        advance(p);
        const char *more = expect_name(p);
        size_t a = strlen(name), b = strlen(more);
        char *s = ct_alloc(p->env, a + b + 2);
        memcpy(s, name, a);
        s[a] = '.';
        memcpy(s + a + 1, more, b + 1);
        name = s;
    }
    return name;
}

/* Filters and tests point at their name: errors name it. An unknown name is
 * checked after parsing (check_stmts), as Jinja defers some to render time. */
static struct ct_expr *parse_filter(struct parser *p, struct ct_expr *arg)
{
    advance(p); /* '|' */
    uint32_t npos = cur(p)->pos;
    const char *name = parse_dotted_name(p);
    struct ct_expr *e = new_expr(p, EX_FILTER, npos);
    e->u.filter.arg = arg;
    e->u.filter.fn = ct_find_filter(name);
    e->u.filter.name = name;
    if (is_op(cur(p), '('))
        parse_call_args(p, &e->u.filter.args);
    return e;
}

static struct ct_expr *parse_test(struct parser *p, struct ct_expr *arg)
{
    advance(p); /* 'is' */
    bool negate = false;
    if (is_name(cur(p), "not")) {
        negate = true;
        advance(p);
    }
    uint32_t npos = cur(p)->pos;
    const char *name = parse_dotted_name(p);
    struct ct_expr *e = new_expr(p, EX_TEST, npos);
    e->u.filter.arg = arg;
    e->u.filter.fn = ct_find_test(name);
    e->u.filter.name = name;
    e->u.filter.negate = negate;
    struct tok *t = cur(p);
    if (is_op(t, '(')) {
        parse_call_args(p, &e->u.filter.args);
    } else if ((t->kind == TK_NAME || t->kind == TK_STRING || t->kind == TK_INT ||
                t->kind == TK_FLOAT || is_op(t, '[') || is_op(t, '{')) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        /* "x is divisibleby 3": one argument without parentheses. */
        if (is_name(t, "is"))
            ct_fail(p->env, t->pos, "you cannot chain multiple tests with 'is'");
        struct ct_expr *a = parse_postfix(p, parse_primary(p));
        e->u.filter.args.npos = 1;
        e->u.filter.args.pos = ct_alloc(p->env, sizeof(struct ct_expr *));
        e->u.filter.args.pos[0] = a;
    }
    return e;
}

static struct ct_expr *parse_filter_expr(struct parser *p, struct ct_expr *e)
{
    for (;;) {
        struct tok *t = cur(p);
        if (is_op(t, '|')) {
            e = parse_filter(p, e);
        } else if (is_name(t, "is")) {
            e = parse_test(p, e);
        } else if (is_op(t, '(')) {
            struct ct_expr *c = new_expr(p, EX_CALL, t->pos);
            c->u.call.fn = e;
            parse_call_args(p, &c->u.call.args);
            e = c;
        } else {
            return e;
        }
    }
}

static struct ct_expr *const_expr(struct parser *p, uint32_t pos, ct_val *v)
{
    struct ct_expr *e = new_expr(p, EX_CONST, pos);
    e->u.cval = v;
    return e;
}

static struct ct_expr *parse_primary(struct parser *p)
{
    enter(p);
    struct tok *t = cur(p);
    struct ct_expr *e;
    switch (t->kind) {
    case TK_NAME:
        advance(p);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            e = const_expr(p, t->pos, &ct_true);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            e = const_expr(p, t->pos, &ct_false);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            e = const_expr(p, t->pos, &ct_none);
        else {
            e = new_expr(p, EX_NAME, t->pos);
            e->u.name = t->s;
        }
        break;
    case TK_STRING: {
        /* Adjacent literals concatenate: "a" "b" is "ab". */
        struct ct_buf b = {.arena = true};
        while (cur(p)->kind == TK_STRING) {
            ct_buf_put(p->env, &b, cur(p)->s, cur(p)->len);
            advance(p);
        }
        e = const_expr(p, t->pos, ct_str_nocopy(p->env, b.data ? b.data : "", b.len));
        break;
    }
    case TK_INT:
        advance(p);
        e = const_expr(p, t->pos, ct_int(p->env, t->i));
        break;
    case TK_FLOAT:
        advance(p);
        e = const_expr(p, t->pos, ct_float(p->env, t->f));
        break;
    case TK_OP:
        if (t->op == '(') {
            advance(p);
            e = parse_tuple(p, true, NULL, true);
            expect_op(p, ')', "')'");
            break;
        }
        if (t->op == '[') {
            advance(p);
            struct ptrs items = {0};
            while (!is_op(cur(p), ']')) {
                if (items.n)
                    expect_op(p, ',', "','");
                if (is_op(cur(p), ']'))
                    break;
                ptrs_push(p, &items, parse_expression(p, true));
            }
            advance(p);
            e = new_expr(p, EX_LIST, t->pos);
            e->u.seq.n = items.n;
            e->u.seq.items = (struct ct_expr **)items.items;
            break;
        }
        if (t->op == '{') {
            advance(p);
            struct ptrs keys = {0}, vals = {0};
            while (!is_op(cur(p), '}')) {
                if (keys.n)
                    expect_op(p, ',', "','");
                if (is_op(cur(p), '}'))
                    break;
                ptrs_push(p, &keys, parse_expression(p, true));
                expect_op(p, ':', "':'");
                ptrs_push(p, &vals, parse_expression(p, true));
            }
            advance(p);
            e = new_expr(p, EX_DICT, t->pos);
            e->u.seq.n = keys.n;
            e->u.seq.items = (struct ct_expr **)keys.items;
            e->u.seq.vals = (struct ct_expr **)vals.items;
            break;
        }
        /* fall through */
    default:
        unexpected(p, "an expression");
    }
    p->depth--;
    return e;
}

static struct ct_expr *parse_unary(struct parser *p, bool with_filter)
{
    enter(p);
    struct tok *t = cur(p);
    struct ct_expr *e;
    if (is_op(t, '-') || is_op(t, '+')) {
        advance(p);
        e = new_expr(p, t->op == '-' ? EX_NEG : EX_POS, t->pos);
        e->u.unary = parse_unary(p, false);
    } else {
        e = parse_primary(p);
    }
    e = parse_postfix(p, e);
    if (with_filter)
        e = parse_filter_expr(p, e);
    p->depth--;
    return e;
}

static struct ct_expr *binary(struct parser *p, enum ct_op op, uint32_t pos, struct ct_expr *l,
                              struct ct_expr *r)
{
    struct ct_expr *e = new_expr(p, EX_BIN, pos);
    e->u.bin.op = op;
    e->u.bin.l = l;
    e->u.bin.r = r;
    return e;
}

static struct ct_expr *parse_pow(struct parser *p)
{
    struct ct_expr *e = parse_unary(p, true);
    while (is_op(cur(p), T_POW)) {
        uint32_t pos = cur(p)->pos;
        advance(p);
        e = binary(p, OP_POW, pos, e, parse_unary(p, true));
    }
    return e;
}

static struct ct_expr *parse_math2(struct parser *p)
{
    struct ct_expr *e = parse_pow(p);
    for (;;) {
        struct tok *t = cur(p);
        enum ct_op op;
        if (is_op(t, '*'))
            op = OP_MUL;
        else if (is_op(t, '/'))
            op = OP_DIV;
        else if (is_op(t, T_FLOORDIV))
            op = OP_FLOORDIV;
        else if (is_op(t, '%'))
            op = OP_MOD;
        else
            return e;
        advance(p);
        e = binary(p, op, t->pos, e, parse_pow(p));
    }
}

static struct ct_expr *parse_concat(struct parser *p)
{
    uint32_t pos = cur(p)->pos;
    struct ct_expr *first = parse_math2(p);
    if (!is_op(cur(p), '~'))
        return first;
    struct ptrs items = {0};
    ptrs_push(p, &items, first);
    while (is_op(cur(p), '~')) {
        advance(p);
        ptrs_push(p, &items, parse_math2(p));
    }
    struct ct_expr *e = new_expr(p, EX_CONCAT, pos);
    e->u.seq.n = items.n;
    e->u.seq.items = (struct ct_expr **)items.items;
    return e;
}

static struct ct_expr *parse_math1(struct parser *p)
{
    struct ct_expr *e = parse_concat(p);
    for (;;) {
        struct tok *t = cur(p);
        if (!is_op(t, '+') && !is_op(t, '-'))
            return e;
        advance(p);
        e = binary(p, t->op == '+' ? OP_ADD : OP_SUB, t->pos, e, parse_concat(p));
    }
}

static struct ct_expr *parse_compare(struct parser *p)
{
    uint32_t pos = cur(p)->pos;
    struct ct_expr *first = parse_math1(p);
    struct ptrs operands = {0};
    enum ct_op ops[64];
    size_t n = 0;
    ptrs_push(p, &operands, first);
    for (;;) {
        struct tok *t = cur(p);
        enum ct_op op;
        if (is_op(t, T_EQ))
            op = OP_EQ;
        else if (is_op(t, T_NE))
            op = OP_NE;
        else if (is_op(t, '<'))
            op = OP_LT;
        else if (is_op(t, T_LE))
            op = OP_LE;
        else if (is_op(t, '>'))
            op = OP_GT;
        else if (is_op(t, T_GE))
            op = OP_GE;
        else if (is_name(t, "in"))
            op = OP_IN;
        else if (is_name(t, "not") && is_name(look(p), "in")) {
            op = OP_NOTIN;
            advance(p);
        } else
            break;
        if (n == sizeof ops / sizeof ops[0])
            ct_fail(p->env, t->pos, "too many chained comparisons");
        advance(p);
        ops[n++] = op;
        ptrs_push(p, &operands, parse_math1(p));
    }
    if (!n)
        return first;
    struct ct_expr *e = new_expr(p, EX_CMP, pos);
    e->u.cmp.n = n;
    e->u.cmp.ops = ct_alloc(p->env, n * sizeof *ops);
    memcpy(e->u.cmp.ops, ops, n * sizeof *ops);
    e->u.cmp.operands = (struct ct_expr **)operands.items;
    return e;
}

static struct ct_expr *parse_not(struct parser *p)
{
    struct tok *t = cur(p);
    if (!is_name(t, "not"))
        return parse_compare(p);
    enter(p);
    advance(p);
    struct ct_expr *e = new_expr(p, EX_NOT, t->pos);
    e->u.unary = parse_not(p);
    p->depth--;
    return e;
}

static struct ct_expr *parse_and(struct parser *p)
{
    struct ct_expr *e = parse_not(p);
    while (is_name(cur(p), "and")) {
        struct ct_expr *a = new_expr(p, EX_AND, cur(p)->pos);
        advance(p);
        a->u.bin.l = e;
        a->u.bin.r = parse_not(p);
        e = a;
    }
    return e;
}

static struct ct_expr *parse_or(struct parser *p)
{
    struct ct_expr *e = parse_and(p);
    while (is_name(cur(p), "or")) {
        struct ct_expr *o = new_expr(p, EX_OR, cur(p)->pos);
        advance(p);
        o->u.bin.l = e;
        o->u.bin.r = parse_and(p);
        e = o;
    }
    return e;
}

/* a if cond else b (else optional: undefined). */
static struct ct_expr *parse_condexpr(struct parser *p)
{
    struct ct_expr *e = parse_or(p);
    while (is_name(cur(p), "if")) {
        enter(p);
        struct ct_expr *c = new_expr(p, EX_COND, cur(p)->pos);
        advance(p);
        c->u.cond.then = e;
        c->u.cond.cond = parse_or(p);
        if (is_name(cur(p), "else")) {
            advance(p);
            c->u.cond.other = parse_condexpr(p);
        }
        e = c;
        p->depth--;
    }
    return e;
}

static struct ct_expr *parse_expression(struct parser *p, bool with_condexpr)
{
    enter(p);
    struct ct_expr *e = with_condexpr ? parse_condexpr(p) : parse_or(p);
    p->depth--;
    return e;
}

/* ---- statements ---- */

static struct ct_node *new_node(struct parser *p, enum ct_node_kind kind, uint32_t pos)
{
    struct ct_node *n = ct_alloc(p->env, sizeof *n);
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->pos = pos;
    return n;
}

/* name | (name, name...) | name, name... | ns.attr (with_attr) */
static void parse_target(struct parser *p, struct ct_target *tg, bool with_attr,
                         const char *extra_end)
{
    tg->pos = cur(p)->pos;
    if (with_attr && cur(p)->kind == TK_NAME && is_op(look(p), '.')) {
        tg->kind = TG_ATTR;
        tg->name = expect_name(p);
        advance(p);
        tg->attr = expect_name(p);
        return;
    }
    bool parens = is_op(cur(p), '(');
    if (parens)
        advance(p);
    struct ptrs names = {0};
    bool comma = false;
    for (;;) {
        if (cur(p)->kind != TK_NAME)
            unexpected(p, "a variable name to assign to");
        if (!strcmp(cur(p)->s, "true") || !strcmp(cur(p)->s, "false") ||
            !strcmp(cur(p)->s, "none") || !strcmp(cur(p)->s, "True") ||
            !strcmp(cur(p)->s, "False") || !strcmp(cur(p)->s, "None"))
            ct_fail(p->env, cur(p)->pos, "cannot assign to '%s'", cur(p)->s);
        ptrs_push(p, &names, (void *)cur(p)->s);
        advance(p);
        if (!is_op(cur(p), ','))
            break;
        comma = true;
        advance(p);
        if ((parens && is_op(cur(p), ')')) || (extra_end && is_name(cur(p), extra_end)) ||
            is_op(cur(p), '='))
            break;
    }
    if (parens)
        expect_op(p, ')', "')'");
    if (!comma && !parens) {
        tg->kind = TG_NAME;
        tg->name = names.items[0];
        return;
    }
    tg->kind = TG_TUPLE;
    tg->n = names.n;
    tg->names = (const char **)names.items;
}

static struct ct_node *parse_body(struct parser *p, const char *const *ends);

/* After parse_body stopped at an end tag: which one (and consumes its name). */
static const char *end_tag(struct parser *p)
{
    const char *s = cur(p)->s;
    advance(p);
    return s;
}

static struct ct_node *parse_if(struct parser *p)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    struct ct_node *first = NULL, *node = NULL;
    const char *tag = "if";
    for (;;) {
        struct ct_node *n = new_node(p, ND_IF, cur(p)->pos);
        advance(p); /* if / elif */
        n->u.if_.cond = parse_tuple(p, false, NULL, false);
        expect_body_start(p);
        n->u.if_.then = parse_body(p, ends);
        if (node)
            node->u.if_.other = n;
        else
            first = n;
        node = n;
        if (is_name(cur(p), "elif")) {
            tag = "elif";
            continue;
        }
        tag = end_tag(p);
        if (!strcmp(tag, "else")) {
            static const char *const else_ends[] = {"endif", NULL};
            expect_body_start(p);
            node->u.if_.other = parse_body(p, else_ends);
            end_tag(p);
        }
        expect_block_end(p);
        return first;
    }
}

static struct ct_node *parse_for(struct parser *p)
{
    static const char *const ends[] = {"endfor", "else", NULL};
    static const char *const else_ends[] = {"endfor", NULL};
    struct ct_node *n = new_node(p, ND_FOR, cur(p)->pos);
    advance(p);
    parse_target(p, &n->u.for_.target, false, "in");
    if (!is_name(cur(p), "in"))
        unexpected(p, "'in'");
    advance(p);
    n->u.for_.iter = parse_tuple(p, false, "recursive", false);
    if (is_name(cur(p), "if")) {
        advance(p);
        n->u.for_.filter = parse_expression(p, true);
    }
    if (is_name(cur(p), "recursive"))
        ct_fail(p->env, cur(p)->pos, "recursive for loops are not supported");
    expect_body_start(p);
    p->loop_depth++;
    n->u.for_.body = parse_body(p, ends);
    p->loop_depth--;
    if (!strcmp(end_tag(p), "else")) {
        expect_body_start(p);
        n->u.for_.other = parse_body(p, else_ends);
        end_tag(p);
    }
    expect_block_end(p);
    return n;
}

static struct ct_node *parse_set(struct parser *p)
{
    static const char *const ends[] = {"endset", NULL};
    uint32_t pos = cur(p)->pos;
    advance(p);
    struct ct_target tg;
    memset(&tg, 0, sizeof tg);
    parse_target(p, &tg, true, NULL);
    if (is_op(cur(p), '=')) {
        advance(p);
        struct ct_node *n = new_node(p, ND_SET, pos);
        n->u.set.target = tg;
        n->u.set.value = parse_tuple(p, true, NULL, false);
        expect_block_end(p);
        return n;
    }
    if (is_op(cur(p), '|'))
        ct_fail(p->env, cur(p)->pos, "filters on {%% set %%} blocks are not supported");
    if (tg.kind != TG_NAME)
        ct_fail(p->env, tg.pos, "a {%% set %%} block assigns one plain name");
    expect_body_start(p);
    struct ct_node *n = new_node(p, ND_SET_BLOCK, pos);
    n->u.set_block.name = tg.name;
    int saved = p->loop_depth;
    p->loop_depth = 0;
    n->u.set_block.body = parse_body(p, ends);
    p->loop_depth = saved;
    end_tag(p);
    expect_block_end(p);
    return n;
}

static struct ct_node *parse_macro(struct parser *p)
{
    static const char *const ends[] = {"endmacro", NULL};
    struct ct_node *n = new_node(p, ND_MACRO, cur(p)->pos);
    advance(p);
    struct ct_macro *m = ct_alloc(p->env, sizeof *m);
    memset(m, 0, sizeof *m);
    m->pos = n->pos;
    m->name = expect_name(p);
    expect_op(p, '(', "'('");
    struct ptrs params = {0}, defaults = {0};
    bool any_default = false;
    while (!is_op(cur(p), ')')) {
        if (params.n)
            expect_op(p, ',', "','");
        if (is_op(cur(p), ')'))
            break;
        ptrs_push(p, &params, (void *)expect_name(p));
        struct ct_expr *def = NULL;
        if (is_op(cur(p), '=')) {
            advance(p);
            def = parse_expression(p, true);
            any_default = true;
        } else if (any_default) {
            ct_fail(p->env, cur(p)->pos, "non-default argument follows default argument");
        }
        ptrs_push(p, &defaults, def);
    }
    advance(p);
    expect_body_start(p);
    m->nparams = params.n;
    m->params = (const char **)params.items;
    m->defaults = (struct ct_expr **)defaults.items;
    int saved = p->loop_depth;
    p->loop_depth = 0;
    m->body = parse_body(p, ends);
    p->loop_depth = saved;
    end_tag(p);
    expect_block_end(p);
    n->u.macro = m;
    return n;
}

static struct ct_node *parse_with(struct parser *p)
{
    static const char *const ends[] = {"endwith", NULL};
    struct ct_node *n = new_node(p, ND_WITH, cur(p)->pos);
    advance(p);
    struct ptrs values = {0};
    struct ct_target targets[32];
    size_t nt = 0;
    while (cur(p)->kind != TK_BLOCK_END && !is_op(cur(p), ':')) {
        if (nt)
            expect_op(p, ',', "','");
        if (nt == sizeof targets / sizeof targets[0])
            ct_fail(p->env, cur(p)->pos, "too many assignments in {%% with %%}");
        memset(&targets[nt], 0, sizeof targets[nt]);
        parse_target(p, &targets[nt++], false, NULL);
        expect_op(p, '=', "'='");
        ptrs_push(p, &values, parse_expression(p, true));
    }
    expect_body_start(p);
    n->u.with.n = nt;
    n->u.with.targets = ct_alloc(p->env, (nt ? nt : 1) * sizeof *targets);
    memcpy(n->u.with.targets, targets, nt * sizeof *targets);
    n->u.with.values = (struct ct_expr **)values.items;
    n->u.with.body = parse_body(p, ends);
    end_tag(p);
    expect_block_end(p);
    return n;
}

/* {% generation %}...{% endgeneration %} (transformers' assistant mask
 * marker): renders its body, in a scope of its own as Jinja's call block. */
static struct ct_node *parse_generation(struct parser *p)
{
    static const char *const ends[] = {"endgeneration", NULL};
    struct ct_node *n = new_node(p, ND_WITH, cur(p)->pos);
    advance(p);
    expect_body_start(p);
    n->u.with.targets = ct_alloc(p->env, sizeof(struct ct_target));
    n->u.with.body = parse_body(p, ends);
    end_tag(p);
    expect_block_end(p);
    return n;
}

static struct ct_node *parse_statement(struct parser *p)
{
    static const char *const unsupported[] = {
        "filter", "call", "include", "import", "from", "extends", "block", "autoescape",
        "do", "trans", "pluralize", NULL};
    static const char *const stray[] = {
        "elif", "else", "endif", "endfor", "endset", "endmacro", "endwith", "endgeneration",
        "endraw", "endfilter", "endcall", "endblock", NULL};
    struct tok *t = cur(p);
    if (t->kind != TK_NAME)
        unexpected(p, "a tag name");
    if (!strcmp(t->s, "if"))
        return parse_if(p);
    if (!strcmp(t->s, "for"))
        return parse_for(p);
    if (!strcmp(t->s, "set"))
        return parse_set(p);
    if (!strcmp(t->s, "macro"))
        return parse_macro(p);
    if (!strcmp(t->s, "with"))
        return parse_with(p);
    if (!strcmp(t->s, "generation"))
        return parse_generation(p);
    if (!strcmp(t->s, "break") || !strcmp(t->s, "continue")) {
        if (!p->loop_depth)
            ct_fail(p->env, t->pos, "'%s' outside a for loop", t->s);
        struct ct_node *n = new_node(p, t->s[0] == 'b' ? ND_BREAK : ND_CONTINUE, t->pos);
        advance(p);
        expect_block_end(p);
        return n;
    }
    for (size_t i = 0; unsupported[i]; i++)
        if (!strcmp(t->s, unsupported[i]))
            ct_fail(p->env, t->pos, "'%s' tags are not supported", t->s);
    for (size_t i = 0; stray[i]; i++)
        if (!strcmp(t->s, stray[i]))
            ct_fail(p->env, t->pos, "unexpected '%s': no open block to close", t->s);
    ct_fail(p->env, t->pos, "unknown tag '%s'", t->s);
}

static bool in_list(const char *s, const char *const *list)
{
    for (size_t i = 0; list && list[i]; i++)
        if (!strcmp(s, list[i]))
            return true;
    return false;
}

/* Nodes up to EOF (ends NULL) or up to a tag named in `ends`: then the parser
 * stands on that tag's name. */
static struct ct_node *parse_body(struct parser *p, const char *const *ends)
{
    enter(p);
    uint32_t start = cur(p)->pos;
    struct ct_node *head = NULL, **tail = &head;
    for (;;) {
        struct tok *t = cur(p);
        struct ct_node *n = NULL;
        switch (t->kind) {
        case TK_DATA:
            n = new_node(p, ND_TEXT, t->pos);
            n->u.text.s = t->s;
            n->u.text.len = t->len;
            advance(p);
            break;
        case TK_VAR_BEGIN:
            advance(p);
            n = new_node(p, ND_OUTPUT, cur(p)->pos);
            n->u.expr = parse_tuple(p, true, NULL, false);
            if (cur(p)->kind != TK_VAR_END)
                unexpected(p, "'}}'");
            advance(p);
            break;
        case TK_BLOCK_BEGIN:
            advance(p);
            if (cur(p)->kind == TK_NAME && in_list(cur(p)->s, ends)) {
                p->depth--;
                return head;
            }
            n = parse_statement(p);
            break;
        case TK_EOF:
            if (ends) {
                const char *closer = ends[0];
                for (size_t i = 0; ends[i]; i++)
                    if (!strncmp(ends[i], "end", 3))
                        closer = ends[i];
                ct_fail(p->env, start, "unexpected end of template: missing {%% %s %%}", closer);
            }
            p->depth--;
            return head;
        default:
            unexpected(p, "template data or a tag");
        }
        *tail = n;
        while (n->next)
            n = n->next;
        tail = &n->next;
    }
}

/* ---- unknown filters and tests ----
 *
 * Jinja reports an unknown filter or test when compiling, except inside an
 * {% if %} (its test and its bodies, but not loops or macros nested in them)
 * or an inline if, where the error waits until the filter runs. */

static void check_stmts(struct ct_env *env, const struct ct_node *n, bool soft);

static void check_expr(struct ct_env *env, const struct ct_expr *e, bool soft)
{
    if (!e)
        return;
    switch (e->kind) {
    case EX_CONST:
    case EX_NAME: return;
    case EX_ATTR: check_expr(env, e->u.attr.obj, soft); return;
    case EX_ITEM:
        check_expr(env, e->u.item.obj, soft);
        check_expr(env, e->u.item.key, soft);
        return;
    case EX_SLICE:
        check_expr(env, e->u.slice.obj, soft);
        check_expr(env, e->u.slice.start, soft);
        check_expr(env, e->u.slice.stop, soft);
        check_expr(env, e->u.slice.step, soft);
        return;
    case EX_CALL:
    case EX_FILTER:
    case EX_TEST: {
        const struct ct_arglist *a = e->kind == EX_CALL ? &e->u.call.args : &e->u.filter.args;
        if (e->kind == EX_CALL) {
            check_expr(env, e->u.call.fn, soft);
        } else {
            if (!e->u.filter.fn && !soft)
                ct_fail(env, e->pos, "no %s named '%s'", e->kind == EX_FILTER ? "filter" : "test",
                        e->u.filter.name);
            check_expr(env, e->u.filter.arg, soft);
        }
        for (size_t i = 0; i < a->npos; i++)
            check_expr(env, a->pos[i], soft);
        for (size_t i = 0; i < a->nkw; i++)
            check_expr(env, a->kw[i], soft);
        return;
    }
    case EX_NOT:
    case EX_NEG:
    case EX_POS: check_expr(env, e->u.unary, soft); return;
    case EX_BIN:
    case EX_AND:
    case EX_OR:
        check_expr(env, e->u.bin.l, soft);
        check_expr(env, e->u.bin.r, soft);
        return;
    case EX_CMP:
        for (size_t i = 0; i <= e->u.cmp.n; i++)
            check_expr(env, e->u.cmp.operands[i], soft);
        return;
    case EX_COND:
        check_expr(env, e->u.cond.cond, true);
        check_expr(env, e->u.cond.then, true);
        check_expr(env, e->u.cond.other, true);
        return;
    case EX_LIST:
    case EX_TUPLE:
    case EX_DICT:
    case EX_CONCAT:
        for (size_t i = 0; i < e->u.seq.n; i++) {
            check_expr(env, e->u.seq.items[i], soft);
            if (e->kind == EX_DICT)
                check_expr(env, e->u.seq.vals[i], soft);
        }
        return;
    }
}

static void check_stmts(struct ct_env *env, const struct ct_node *n, bool soft)
{
    for (; n; n = n->next) {
        switch (n->kind) {
        case ND_TEXT:
        case ND_BREAK:
        case ND_CONTINUE: break;
        case ND_OUTPUT: check_expr(env, n->u.expr, soft); break;
        case ND_IF:
            check_expr(env, n->u.if_.cond, true);
            check_stmts(env, n->u.if_.then, true);
            check_stmts(env, n->u.if_.other, true);
            break;
        case ND_FOR:
            check_expr(env, n->u.for_.iter, soft);
            check_expr(env, n->u.for_.filter, false);
            check_stmts(env, n->u.for_.body, false);
            check_stmts(env, n->u.for_.other, false);
            break;
        case ND_SET: check_expr(env, n->u.set.value, soft); break;
        case ND_SET_BLOCK: check_stmts(env, n->u.set_block.body, false); break;
        case ND_MACRO:
            for (size_t i = 0; i < n->u.macro->nparams; i++)
                check_expr(env, n->u.macro->defaults[i], false);
            check_stmts(env, n->u.macro->body, false);
            break;
        case ND_WITH:
            for (size_t i = 0; i < n->u.with.n; i++)
                check_expr(env, n->u.with.values[i], soft);
            check_stmts(env, n->u.with.body, false);
            break;
        }
    }
}

struct ct_node *ct_parse(struct ct_env *env, const char *src, size_t len)
{
    /* Jinja's lexer turns \r\n and \r into \n and drops one trailing newline. */
    char *norm = ct_alloc(env, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            norm[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            norm[n++] = src[i];
        }
    }
    if (n && norm[n - 1] == '\n')
        n--;
    norm[n] = '\0';
    env->src = norm;
    env->src_len = n;

    struct lexer lx = {.env = env, .src = norm, .len = n};
    lex(&lx);
    struct parser p = {.env = env, .toks = lx.toks, .n = lx.n};
    struct ct_node *body = parse_body(&p, NULL);
    check_stmts(env, body, false);
    return body;
}
