/* The pre_tokenizer's Split pattern, compiled with PCRE2.
 *
 * tokenizer.json patterns are written for Hugging Face tokenizers, which runs
 * them with Oniguruma. Two things differ from PCRE2 (10.42, as in Debian 12)
 * and are bridged here, found by comparing the pre-tokenization of every code
 * point against Hugging Face:
 *   - Oniguruma's \s is the Unicode White_Space property; PCRE2's \s with UCP
 *     also takes U+180E. \s and \S are rewritten to \p{White_Space} and
 *     \P{White_Space}.
 *   - Oniguruma's Unicode tables are at Unicode 16.0, PCRE2 10.42's at 14.0.
 *     The letters and numbers assigned in Unicode 15.0 to 16.0 are added to
 *     \p{L} and \p{N} (harmless where PCRE2 already knows them).
 * \P{L} and \P{N} are left as they are (the Qwen patterns do not use them). */
#include "tokenizer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orin/error.h"

typedef struct cp_range {
    uint32_t first, last;
} cp_range;

/* General category L*, assigned in Unicode 15.0, 15.1 and 16.0. */
static const cp_range new_letters[] = {
    {0x1C89, 0x1C8A},   {0xA7CB, 0xA7CD},   {0xA7DA, 0xA7DC},   {0x105C0, 0x105F3}, {0x10D4A, 0x10D65},
    {0x10D6F, 0x10D85}, {0x10EC2, 0x10EC4}, {0x1123F, 0x11240}, {0x11380, 0x11389}, {0x1138B, 0x1138B},
    {0x1138E, 0x1138E}, {0x11390, 0x113B5}, {0x113B7, 0x113B7}, {0x113D1, 0x113D1}, {0x113D3, 0x113D3},
    {0x11BC0, 0x11BE0}, {0x11F02, 0x11F02}, {0x11F04, 0x11F10}, {0x11F12, 0x11F33}, {0x1342F, 0x1342F},
    {0x13441, 0x13446}, {0x13460, 0x143FA}, {0x16100, 0x1611D}, {0x16D40, 0x16D6C}, {0x18CFF, 0x18CFF},
    {0x1B132, 0x1B132}, {0x1B155, 0x1B155}, {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D}, {0x1E4D0, 0x1E4EB},
    {0x1E5D0, 0x1E5ED}, {0x1E5F0, 0x1E5F0}, {0x2B739, 0x2B739}, {0x2EBF0, 0x2EE5D}, {0x31350, 0x323AF},
};

/* General category N*, assigned in Unicode 15.0, 15.1 and 16.0. */
static const cp_range new_numbers[] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x11F50, 0x11F59}, {0x16130, 0x16139},
    {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9}, {0x1D2C0, 0x1D2D3}, {0x1E4F0, 0x1E4F9}, {0x1E5F1, 0x1E5FA},
};

static int append_str(tok_buf *out, const char *s)
{
    return tok_buf_append(out, s, strlen(s));
}

/* \p{L} or \p{N} with the newer code points, as class items when already inside
 * a class, else as a class of their own. */
static int append_property(tok_buf *out, const char *prop, const cp_range *extra, size_t n, bool in_class)
{
    if ((!in_class && append_str(out, "[")) || append_str(out, prop))
        return -1;
    for (size_t i = 0; i < n; i++) {
        char item[40];
        snprintf(item, sizeof item, "\\x{%X}-\\x{%X}", (unsigned)extra[i].first, (unsigned)extra[i].last);
        if (append_str(out, item))
            return -1;
    }
    return !in_class && append_str(out, "]") ? -1 : 0;
}

/* Length of the escape at p when it is \p{L} / \pL (or N), else 0. */
static size_t property_escape(const char *p, char prop)
{
    if (p[1] != 'p')
        return 0;
    if (p[2] == prop)
        return 3;
    if (p[2] == '{' && p[3] == prop && p[4] == '}')
        return 5;
    return 0;
}

static int translate_escape(tok_buf *out, const char *p, size_t left, bool in_class, size_t *used)
{
    size_t len;
    if (left < 2) {
        *used = left;
        return tok_buf_append(out, p, left);
    }
    if (p[1] == 's' || p[1] == 'S') {
        *used = 2;
        return append_str(out, p[1] == 's' ? "\\p{White_Space}" : "\\P{White_Space}");
    }
    if ((len = property_escape(p, 'L'))) {
        *used = len;
        return append_property(out, "\\p{L}", new_letters, sizeof new_letters / sizeof *new_letters, in_class);
    }
    if ((len = property_escape(p, 'N'))) {
        *used = len;
        return append_property(out, "\\p{N}", new_numbers, sizeof new_numbers / sizeof *new_numbers, in_class);
    }
    if (p[1] == 'Q') {
        /* \Q...\E quotes literally: copy it untouched. */
        const char *end = strstr(p + 2, "\\E");
        *used = end ? (size_t)(end - p) + 2 : left;
        return tok_buf_append(out, p, *used);
    }
    *used = 2;
    return tok_buf_append(out, p, 2);
}

static char *oniguruma_to_pcre2(const char *pattern)
{
    size_t n = strlen(pattern);
    bool in_class = false;
    tok_buf out = {0};
    for (size_t i = 0; i < n;) {
        const char *p = pattern + i;
        size_t used = 1;
        int rc;
        if (*p == '\\') {
            rc = translate_escape(&out, p, n - i, in_class, &used);
        } else if (!in_class && *p == '[') {
            /* A ']' right after "[" or "[^" is a literal, not the end. */
            in_class = true;
            used += p[used] == '^';
            used += p[used] == ']';
            rc = tok_buf_append(&out, p, used);
        } else if (in_class && p[0] == '[' && p[1] == ':') {
            const char *end = strstr(p + 2, ":]");
            used = end ? (size_t)(end - p) + 2 : 1;
            rc = tok_buf_append(&out, p, used);
        } else {
            if (in_class && *p == ']')
                in_class = false;
            rc = tok_buf_append(&out, p, 1);
        }
        if (rc)
            goto fail;
        i += used;
    }
    if (tok_buf_append(&out, "", 1))
        goto fail;
    return out.data;
fail:
    free(out.data);
    return NULL;
}

int tok_compile_split(orin_tokenizer *tok, const char *pattern, const char *file)
{
    char *translated = oniguruma_to_pcre2(pattern);
    if (!translated)
        return orin_error_set("%s: out of memory", file);
    int err;
    PCRE2_SIZE err_at;
    tok->split_re = pcre2_compile((PCRE2_SPTR)translated, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &err_at,
                                  NULL);
    free(translated);
    if (!tok->split_re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return orin_error_set("%s: pre_tokenizer Split regex does not compile: %s", file, (const char *)msg);
    }
    /* JIT is several times faster; the interpreter is the fallback where the
     * library was built without it. */
    tok->split_jit = pcre2_jit_compile(tok->split_re, PCRE2_JIT_COMPLETE) == 0;
    return 0;
}
