/* Encoding: added tokens, normalisation, the Split regex, then BPE per pre-token.
 *
 * The stages are Hugging Face's (tokenizers' AddedVocabulary and Tokenizer):
 *   1. added tokens with normalized = false are found in the raw text;
 *   2. each stretch between them is normalised (NFC when the file says so);
 *   3. added tokens with normalized = true are found in the normalised stretch;
 *   4. what is left is split by the pre_tokenizer's regex (Isolated: matches and
 *      the gaps between them are pre-tokens), and each pre-token goes to BPE.
 * The regex runs on one stretch at a time, so a look-ahead never sees past an
 * added token, as in Hugging Face. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

#include "orin/error.h"

/* ---- added tokens ---- */

static int added_by_length(const void *a, const void *b, void *ctx)
{
    const tok_added_set *set = ctx;
    uint32_t ia = *(const uint32_t *)a, ib = *(const uint32_t *)b;
    unsigned char fa = (unsigned char)set->text[ia][0], fb = (unsigned char)set->text[ib][0];
    if (fa != fb)
        return fa < fb ? -1 : 1;
    if (set->text_len[ia] != set->text_len[ib])
        return set->text_len[ia] > set->text_len[ib] ? -1 : 1; /* longest first */
    return ia < ib ? -1 : ia > ib;
}

int tok_added_set_build(orin_tokenizer *tok, tok_added_set *set, bool want_normalized)
{
    *set = (tok_added_set){0};
    size_t n = 0;
    for (size_t i = 0; i < tok->n_added; i++)
        n += tok->added[i].normalized == want_normalized;
    if (!n)
        return 0;
    /* text and text_len are indexed like tok->added; order lists this set's members. */
    set->text = calloc(tok->n_added, sizeof *set->text);
    set->text_len = calloc(tok->n_added, sizeof *set->text_len);
    set->order = calloc(n, sizeof *set->order);
    if (!set->text || !set->text_len || !set->order)
        return orin_error_set("out of memory");
    for (size_t i = 0; i < tok->n_added; i++) {
        const orin_added_token *a = &tok->added[i];
        if (a->normalized != want_normalized)
            continue;
        const char *text = a->content;
        size_t len = a->len;
        if (want_normalized && tok->nfc) {
            /* Matched in normalised text, so the token is normalised too. */
            const char *norm = tok_nfc(a->content, a->len, &len);
            if (!norm)
                return -1;
            text = tok_arena_strndup(&tok->arena, norm, len);
            if (norm != a->content)
                free((void *)norm);
            if (!text)
                return orin_error_set("out of memory");
        }
        if (!len)
            return orin_error_set("added token %d normalises to nothing", a->id);
        set->text[i] = text;
        set->text_len[i] = (uint32_t)len;
        set->order[set->n++] = (uint32_t)i;
    }
    qsort_r(set->order, set->n, sizeof *set->order, added_by_length, set);
    size_t k = 0;
    for (unsigned b = 0; b < 256; b++) {
        set->first[b] = (uint32_t)k;
        while (k < set->n && (unsigned char)set->text[set->order[k]][0] == b)
            k++;
    }
    set->first[256] = (uint32_t)k;
    return 0;
}

void tok_added_set_free(tok_added_set *set)
{
    free(set->order);
    free(set->text);
    free(set->text_len);
    *set = (tok_added_set){0};
}

/* Leftmost-longest match at or after `from`: the index into tok->added, or -1. */
static int64_t next_added(const tok_added_set *set, const char *s, size_t n, size_t from, size_t *at)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = from; i < n; i++) {
        unsigned b = p[i];
        for (uint32_t k = set->first[b]; k < set->first[b + 1]; k++) {
            uint32_t idx = set->order[k];
            if (set->text_len[idx] <= n - i && !memcmp(s + i, set->text[idx], set->text_len[idx])) {
                *at = i;
                return idx;
            }
        }
    }
    return -1;
}

/* Start of the character that ends s[0..n), n > 0 (s is valid UTF-8). */
static size_t last_char_start(const char *s, size_t n)
{
    size_t i = n - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    return i;
}

static uint32_t char_at(const char *s)
{
    uint32_t cp;
    tok_utf8_decode((const unsigned char *)s, &cp);
    return cp;
}

/* Start of the whitespace run that ends s[0..n). */
static size_t trailing_space_start(const char *s, size_t n)
{
    while (n > 0) {
        size_t i = last_char_start(s, n);
        if (!tok_is_whitespace(char_at(s + i)))
            break;
        n = i;
    }
    return n;
}

/* Length of the whitespace run that starts s[0..n). */
static size_t leading_space_len(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t step = tok_utf8_decode((const unsigned char *)s + i, &cp);
        if (!tok_is_whitespace(cp))
            break;
        i += step;
    }
    return i;
}

typedef struct encoder {
    const orin_tokenizer *tok;
    tok_state *st;
    tok_ids *out;
} encoder;

typedef int (*stretch_fn)(encoder *e, const char *s, size_t n);

/* Splits s on the set's added tokens the way Hugging Face's find_matches does,
 * emitting each token's id and handing the stretches between to `rest`. */
static int split_on_added(encoder *e, const tok_added_set *set, const char *s, size_t n, stretch_fn rest)
{
    if (!set->n)
        return rest(e, s, n);
    size_t done = 0, from = 0, at;
    int64_t idx;
    while ((idx = next_added(set, s, n, from, &at)) >= 0) {
        const orin_added_token *a = &e->tok->added[idx];
        size_t start = at, stop = at + set->text_len[idx];
        from = stop;
        if (a->single_word) {
            bool space_before = start == 0 || !tok_is_word_char(char_at(s + last_char_start(s, start)));
            bool space_after = stop == n || !tok_is_word_char(char_at(s + stop));
            if (!space_before || !space_after)
                continue;
        }
        if (a->lstrip) {
            size_t new_start = trailing_space_start(s, start);
            start = new_start > done ? new_start : done;
        }
        if (a->rstrip)
            stop += leading_space_len(s + stop, n - stop);
        if (done < start && rest(e, s + done, start - done))
            return -1;
        if (tok_ids_push(e->out, a->id))
            return orin_error_set("tokenizer: out of memory");
        done = stop;
    }
    if (done < n)
        return rest(e, s + done, n - done);
    return 0;
}

/* Stage 4: the regex split and BPE. */
static int encode_pretokens(encoder *e, const char *s, size_t n)
{
    const orin_tokenizer *tok = e->tok;
    tok_state *st = e->st;
    const unsigned char *u = (const unsigned char *)s;
    size_t pos = 0, done = 0;
    while (pos < n) {
        int rc = tok->split_jit ? pcre2_jit_match(tok->split_re, u, n, pos, 0, st->md, st->mctx)
                                : pcre2_match(tok->split_re, u, n, pos, PCRE2_NO_UTF_CHECK, st->md, st->mctx);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return orin_error_set("tokenizer: split regex failed at byte %zu: %s", pos, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
        size_t start = ov[0], stop = ov[1];
        if (stop == start) {
            /* An empty match splits nothing; step over one character. */
            uint32_t cp;
            pos = start + (start < n ? tok_utf8_decode(u + start, &cp) : 1);
            continue;
        }
        if (done < start && tok_bpe_word(tok, st, u + done, start - done, e->out))
            return -1;
        if (tok_bpe_word(tok, st, u + start, stop - start, e->out))
            return -1;
        done = pos = stop;
    }
    if (done < n)
        return tok_bpe_word(tok, st, u + done, n - done, e->out);
    return 0;
}

/* Stages 2 and 3. */
static int encode_normalized(encoder *e, const char *s, size_t n)
{
    size_t len = n;
    const char *norm = e->tok->nfc ? tok_nfc(s, n, &len) : s;
    if (!norm)
        return -1;
    int rc = split_on_added(e, &e->tok->norm_set, norm, len, encode_pretokens);
    if (norm != s)
        free((void *)norm);
    return rc;
}

/* ---- per-caller state ---- */

tok_state *tok_state_new(const orin_tokenizer *tok)
{
    tok_state *st = calloc(1, sizeof *st);
    if (!st)
        goto fail;
    st->md = pcre2_match_data_create_from_pattern(tok->split_re, NULL);
    st->mctx = pcre2_match_context_create(NULL);
    if (!st->md || !st->mctx || tok_cache_init(&st->cache))
        goto fail;
    /* A run of 20 M spaces is one match that backtracks over the whole run:
     * lift PCRE2's default limits (10 M steps), which would refuse it. The
     * patterns tokenizers use are linear in the run length. */
    pcre2_set_match_limit(st->mctx, UINT32_MAX);
    pcre2_set_depth_limit(st->mctx, UINT32_MAX);
    pcre2_set_heap_limit(st->mctx, UINT32_MAX);
    if (tok->split_jit) {
        /* Generous stack for long runs of one class (whitespace, digits). */
        st->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
        if (!st->jit_stack)
            goto fail;
        pcre2_jit_stack_assign(st->mctx, NULL, st->jit_stack);
    }
    return st;
fail:
    tok_state_free(st);
    orin_error_set("tokenizer: out of memory");
    return NULL;
}

void tok_state_free(tok_state *st)
{
    if (!st)
        return;
    if (st->md)
        pcre2_match_data_free(st->md);
    if (st->mctx)
        pcre2_match_context_free(st->mctx);
    if (st->jit_stack)
        pcre2_jit_stack_free(st->jit_stack);
    tok_cache_free(&st->cache);
    free(st->sym);
    free(st->merged);
    free(st->rank);
    free(st->prev);
    free(st->next);
    free(st->heap);
    free(st);
}

int orin_tokenizer_encode(const orin_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n_ids)
{
    tok_ids out = {0};
    char *clean = NULL;
    tok_state *st = NULL;
    bool shared = false;
    int rc = -1;

    *ids = NULL;
    *n_ids = 0;
    if (!text && len)
        return orin_error_set("tokenizer: encode: NULL text");
    if (tok_ids_reserve(&out, len / 4 + 16))
        goto oom;
    if (len && tok_utf8_valid_prefix((const unsigned char *)text, len) != len) {
        clean = orin_utf8_sanitize(text, len, &len);
        if (!clean)
            goto oom;
        text = clean;
    }
    if (pthread_mutex_trylock(&tok->shared->lock) == 0) {
        st = tok->shared->state;
        shared = true;
    } else {
        st = tok_state_new(tok);
        if (!st)
            goto out;
    }
    encoder e = {.tok = tok, .st = st, .out = &out};
    if (len && split_on_added(&e, &tok->raw_set, text, len, encode_normalized))
        goto out;
    *ids = out.data;
    *n_ids = out.len;
    out.data = NULL;
    rc = 0;
    goto out;
oom:
    orin_error_set("tokenizer: out of memory encoding %zu bytes", len);
out:
    if (shared)
        pthread_mutex_unlock(&tok->shared->lock);
    else
        tok_state_free(st);
    free(clean);
    free(out.data);
    return rc;
}
