/* The streaming decoder: hand-worked byte sequences (the Unicode "maximal
 * subpart" rule that Python's errors="replace" and Rust's from_utf8_lossy
 * follow), then every corpus line: no chunk holds a partial character and the
 * chunks add up to transformers' decode.
 *
 * usage: test_tokenizer_stream TOKENIZER_DIR corpus.jsonl */
#include <stdlib.h>
#include <string.h>

#include "orin/error.h"
#include "tok_test_data.h"
#include "test_util.h"

#define FFFD "\xEF\xBF\xBD"

/* GPT-2's byte alphabet, written out again here: byte -> the token spelling. */
static void byte_spelling(unsigned b, char out[3])
{
    unsigned cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) {
        cp = b;
    } else {
        unsigned n = 0;
        for (unsigned x = 0; x < b; x++)
            n += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174);
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

static int32_t byte_id(const orin_tokenizer *tok, unsigned b)
{
    char s[3];
    byte_spelling(b, s);
    int32_t id = orin_tokenizer_token_to_id(tok, s);
    size_t len = 0;
    const char *bytes = orin_tokenizer_id_bytes(tok, id, &len);
    CHECK(bytes && len == 1 && (unsigned char)bytes[0] == b, "byte token for 0x%02X", b);
    return id;
}

typedef struct step {
    int32_t id;        /* pushed when >= -1000; BYTE(x) pushes the token of byte x */
    const char *want;  /* what the push returns */
} step;

#define BYTE(x) (-2000 - (x))
#define FLUSH INT32_MIN

static void run_steps(const orin_tokenizer *tok, const char *name, unsigned flags, const step *steps, size_t n)
{
    orin_detokenizer *dt = orin_detokenizer_new(tok, flags);
    CHECK(dt != NULL);
    if (!dt)
        return;
    for (size_t i = 0; i < n; i++) {
        const char *out = NULL;
        size_t len = 99;
        int rc;
        if (steps[i].id == FLUSH) {
            rc = orin_detokenizer_flush(dt, &out, &len);
        } else {
            int32_t id = steps[i].id <= -2000 ? byte_id(tok, (unsigned)(-2000 - steps[i].id)) : steps[i].id;
            rc = orin_detokenizer_push(dt, id, &out, &len);
        }
        CHECK(rc == 0 && len == strlen(steps[i].want) && !memcmp(out, steps[i].want, len),
              "%s, step %zu: got \"%.*s\" (%zu bytes), want \"%s\"", name, i, (int)len, out ? out : "", len,
              steps[i].want);
    }
    orin_detokenizer_free(dt);
}

#define RUN(tok, name, flags, ...)                                                  \
    do {                                                                            \
        static const step s_[] = {__VA_ARGS__};                                     \
        run_steps(tok, name, flags, s_, sizeof s_ / sizeof *s_);                    \
    } while (0)

static void check_hand_worked(const orin_tokenizer *tok)
{
    int32_t im_end = orin_tokenizer_token_to_id(tok, "<|im_end|>");
    int32_t nihao = orin_tokenizer_token_to_id(tok, "ä½łå¥½"); /* "你好" */

    RUN(tok, "4-byte char byte by byte", 0, {BYTE(0xF0), ""}, {BYTE(0x9F), ""}, {BYTE(0x98), ""},
        {BYTE(0x80), "😀"}, {FLUSH, ""});
    RUN(tok, "truncated, then ASCII", 0, {BYTE(0xF0), ""}, {BYTE(0x9F), ""}, {BYTE('a'), FFFD "a"}, {FLUSH, ""});
    RUN(tok, "truncated at the end", 0, {BYTE(0xE4), ""}, {BYTE(0xBD), ""}, {FLUSH, FFFD});
    RUN(tok, "lone continuation", 0, {BYTE(0x80), FFFD}, {BYTE('x'), "x"});
    RUN(tok, "never a lead byte", 0, {BYTE(0xC0), FFFD}, {BYTE(0x80), FFFD}, {BYTE(0xFF), FFFD});
    RUN(tok, "surrogate", 0, {BYTE(0xED), ""}, {BYTE(0xA0), FFFD FFFD}, {BYTE(0x80), FFFD});
    RUN(tok, "overlong", 0, {BYTE(0xE0), ""}, {BYTE(0x80), FFFD FFFD});
    RUN(tok, "above U+10FFFF", 0, {BYTE(0xF4), ""}, {BYTE(0x90), FFFD FFFD});
    RUN(tok, "restart inside", 0, {BYTE(0xF0), ""}, {BYTE(0x9F), ""}, {BYTE(0x98), ""}, {BYTE(0xF0), FFFD},
        {BYTE(0x9F), ""}, {BYTE(0x98), ""}, {BYTE(0x80), "😀"}, {FLUSH, ""});
    RUN(tok, "unknown ids are skipped", 0, {BYTE(0xF0), ""}, {-5, ""}, {BYTE(0x9F), ""}, {10000000, ""},
        {BYTE(0x98), ""}, {BYTE(0x80), "😀"});

    /* Steps with ids known only at run time. */
    step multi[] = {{BYTE(0xE4), ""}, {nihao, FFFD "你好"}, {nihao, "你好"}, {FLUSH, ""}};
    run_steps(tok, "multi-byte token", 0, multi, 4);
    step special[] = {{im_end, "<|im_end|>"}, {BYTE('a'), "a"}};
    run_steps(tok, "special kept", 0, special, 2);
    step skipped[] = {{BYTE(0xE4), ""}, {im_end, ""}, {BYTE(0xBD), ""}, {BYTE(0xA0), "你"}};
    run_steps(tok, "special skipped", ORIN_DECODE_SKIP_SPECIAL, skipped, 4);
    step reuse[] = {{BYTE(0xE4), ""}, {FLUSH, FFFD}, {BYTE('o'), "o"}, {BYTE(0xC3), ""}, {BYTE(0xA9), "é"}};
    run_steps(tok, "reuse after flush", 0, reuse, 5);
}

/* Streams ids; every chunk must be whole UTF-8 and together they must equal want. */
static void check_stream(const orin_tokenizer *tok, const tok_record *r, unsigned flags, const char *want)
{
    orin_detokenizer *dt = orin_detokenizer_new(tok, flags);
    size_t want_len = strlen(want), n_all = 0, len;
    const char *out;
    bool whole = true, same = true;
    for (size_t i = 0; i <= r->n_ids; i++) {
        int rc = i < r->n_ids ? orin_detokenizer_push(dt, r->ids[i], &out, &len)
                              : orin_detokenizer_flush(dt, &out, &len);
        CHECK(rc == 0);
        whole = whole && tok_strict_utf8(out, len);
        same = same && n_all + len <= want_len && !memcmp(want + n_all, out, len);
        n_all += len;
    }
    CHECK(whole, "corpus.jsonl:%d: a chunk was not whole UTF-8", r->line);
    CHECK(same && n_all == want_len, "corpus.jsonl:%d (%s, flags %u): streamed text differs from the decode",
          r->line, r->cat, flags);
    orin_detokenizer_free(dt);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR corpus.jsonl\n", argv[0]);
        return 2;
    }
    tok_corpus corpus;
    if (tok_corpus_load(argv[2], &corpus))
        return 1;
    orin_tokenizer *tok = tok_load_or_die(argv[1]);
    check_hand_worked(tok);
    for (size_t i = 0; i < corpus.n; i++) {
        const tok_record *r = &corpus.recs[i];
        check_stream(tok, r, 0, r->decoded);
        if (strcmp(r->decoded, r->decoded_skip))
            check_stream(tok, r, ORIN_DECODE_SKIP_SPECIAL, r->decoded_skip);
    }
    orin_tokenizer_free(tok);
    tok_corpus_free(&corpus);
    return test_finish();
}
