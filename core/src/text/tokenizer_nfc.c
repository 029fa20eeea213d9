/* NFC with a quick check: utf8proc normalises only the stretches that can change.
 *
 * A character is a "boundary" when nothing before it can combine with it or
 * with anything after it: canonical combining class 0, never the second half
 * of a canonical composition, and (when it decomposes) its decomposition starts
 * with such a character. NFC of a text is then the concatenation of NFC of the
 * pieces between boundaries. A boundary that NFC also leaves as it is, is
 * "inert"; a stretch of inert characters is copied as it is, and only a piece
 * around anything else goes through utf8proc. The flags come from utf8proc's
 * own data (so its Unicode version), computed once per process. */
#include "tokenizer_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "orin/error.h"

#define NFC_TABLE_END 0x30000u /* decompositions and combining pairs all lie below */

enum { NFC_BOUNDARY = 1, NFC_INERT = 2 };

static uint8_t *nfc_flags; /* 2 bits per code point below NFC_TABLE_END, 4 to a byte */
static pthread_once_t nfc_once = PTHREAD_ONCE_INIT;

static bool is_surrogate(uint32_t cp)
{
    return cp >= 0xD800 && cp <= 0xDFFF;
}

/* The canonical decomposition (utf8proc applies Hangul's algorithmically). */
static int decompose(uint32_t cp, utf8proc_int32_t out[8])
{
    int boundclass = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, out, 8, UTF8PROC_DECOMPOSE, &boundclass);
    return n < 0 || n > 8 ? 1 : (int)n;
}

static bool nfc_of_char_is_itself(uint32_t cp)
{
    unsigned char in[4];
    size_t n = tok_utf8_encode(cp, in);
    utf8proc_uint8_t *out = NULL;
    utf8proc_ssize_t len = utf8proc_map(in, (utf8proc_ssize_t)n, &out, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    bool same = len == (utf8proc_ssize_t)n && !memcmp(out, in, n);
    free(out);
    return same;
}

static void build_table(void)
{
    /* Anything that follows the first character of a canonical decomposition
     * may be the second half of a composition: a superset of the real ones,
     * which only costs speed. */
    uint8_t *second = calloc(NFC_TABLE_END / 8, 1);
    uint8_t *flags = calloc(NFC_TABLE_END / 4, 1);
    utf8proc_int32_t d[8];
    if (!second || !flags)
        goto out;
    for (uint32_t cp = 0; cp < NFC_TABLE_END; cp++) {
        if (is_surrogate(cp))
            continue;
        int n = decompose(cp, d);
        for (int k = 1; k < n; k++)
            if ((uint32_t)d[k] < NFC_TABLE_END)
                second[d[k] / 8] |= (uint8_t)(1u << (d[k] % 8));
    }
#define IS_SECOND(c) ((uint32_t)(c) >= NFC_TABLE_END || (second[(c) / 8] >> ((c) % 8) & 1))
    for (uint32_t cp = 0; cp < NFC_TABLE_END; cp++) {
        if (is_surrogate(cp) || utf8proc_get_property((utf8proc_int32_t)cp)->combining_class || IS_SECOND(cp))
            continue;
        int n = decompose(cp, d);
        bool decomposes = n > 1 || (uint32_t)d[0] != cp;
        if (decomposes && (utf8proc_get_property(d[0])->combining_class || IS_SECOND(d[0])))
            continue;
        unsigned f = NFC_BOUNDARY;
        if (!decomposes || nfc_of_char_is_itself(cp))
            f |= NFC_INERT;
        flags[cp / 4] |= (uint8_t)(f << (cp % 4 * 2));
    }
#undef IS_SECOND
    nfc_flags = flags;
    flags = NULL;
out:
    free(second);
    free(flags);
}

static unsigned char_flags(uint32_t cp)
{
    if (cp < NFC_TABLE_END)
        return nfc_flags[cp / 4] >> (cp % 4 * 2) & 3;
    /* Above the table: no decompositions, so class 0 means inert. */
    return utf8proc_get_property((utf8proc_int32_t)cp)->combining_class ? 0 : NFC_BOUNDARY | NFC_INERT;
}

int tok_nfc_init(void)
{
    pthread_once(&nfc_once, build_table);
    return nfc_flags ? 0 : orin_error_set("tokenizer: out of memory for the NFC table");
}

/* Runs utf8proc over s[0..n) and appends the result. */
static int append_nfc(tok_buf *out, const unsigned char *s, size_t n)
{
    utf8proc_uint8_t *norm = NULL;
    utf8proc_ssize_t len = utf8proc_map(s, (utf8proc_ssize_t)n, &norm, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (len < 0)
        return orin_error_set("tokenizer: NFC failed: %s", utf8proc_errmsg(len));
    int rc = tok_buf_append(out, norm, (size_t)len);
    free(norm);
    return rc ? orin_error_set("tokenizer: out of memory") : 0;
}

/* Index of the first character at or after i that is not inert (n if none);
 * *boundary is the start of the last boundary character before it. */
static size_t next_active(const unsigned char *s, size_t n, size_t i, size_t *boundary)
{
    while (i < n) {
        if (s[i] < 0x80) { /* ASCII is inert */
            *boundary = i++;
            continue;
        }
        uint32_t cp;
        size_t step = tok_utf8_decode(s + i, &cp);
        unsigned f = char_flags(cp);
        if (!(f & NFC_INERT))
            return i;
        *boundary = i;
        i += step;
    }
    return n;
}

/* The end of the piece that starts with a non-inert character at i: the next
 * inert boundary character. */
static size_t piece_end(const unsigned char *s, size_t n, size_t i)
{
    uint32_t cp;
    i += tok_utf8_decode(s + i, &cp);
    while (i < n) {
        if (s[i] < 0x80)
            return i;
        size_t step = tok_utf8_decode(s + i, &cp);
        if ((char_flags(cp) & (NFC_BOUNDARY | NFC_INERT)) == (NFC_BOUNDARY | NFC_INERT))
            return i;
        i += step;
    }
    return n;
}

const char *tok_nfc(const char *text, size_t n, size_t *out_len)
{
    const unsigned char *s = (const unsigned char *)text;
    tok_buf out = {0};
    size_t boundary = 0, done = 0, at;

    *out_len = n;
    if (tok_nfc_init())
        return NULL;
    at = next_active(s, n, 0, &boundary);
    if (at == n)
        return text;
    while (at < n) {
        /* The piece starts at the last boundary, whose character may compose
         * with what follows, or at the active character when it is one. */
        uint32_t cp;
        tok_utf8_decode(s + at, &cp);
        size_t start = (char_flags(cp) & NFC_BOUNDARY) ? at : boundary;
        size_t end = piece_end(s, n, at);
        if (tok_buf_append(&out, s + done, start - done)) {
            orin_error_set("tokenizer: out of memory");
            goto fail;
        }
        if (append_nfc(&out, s + start, end - start))
            goto fail;
        done = boundary = end;
        at = next_active(s, n, end, &boundary);
    }
    if (tok_buf_append(&out, s + done, n - done) || tok_buf_append(&out, "", 1)) {
        orin_error_set("tokenizer: out of memory");
        goto fail;
    }
    *out_len = out.len - 1;
    return out.data;
fail:
    free(out.data);
    return NULL;
}
