/* Every corpus line against Hugging Face: the ids, transformers' decode with and
 * without special tokens, decode(encode(x)) == NFC(x) for valid text, and the
 * U+FFFD replacement of invalid lines against Python's errors="replace".
 * With --threads: four threads encode the corpus at once on one tokenizer.
 *
 * usage: test_tokenizer_corpus TOKENIZER_DIR corpus.jsonl [--threads] */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "orin/error.h"
#include "tok_test_data.h"
#include "test_util.h"

static bool has_added_token(const orin_tokenizer *tok, const char *text, size_t len)
{
    const orin_added_token *added;
    size_t n = orin_tokenizer_added_tokens(tok, &added);
    for (size_t i = 0; i < n; i++)
        if (memmem(text, len, added[i].content, added[i].len))
            return true;
    return false;
}

/* NFC by utf8proc directly: the whole text, whereas the tokenizer normalises
 * the stretches between added tokens (hence the has_added_token guard). */
static char *nfc(const char *s, size_t n)
{
    utf8proc_uint8_t *out = NULL;
    if (utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &out,
                     UTF8PROC_STABLE | UTF8PROC_COMPOSE) < 0)
        return NULL;
    return (char *)out;
}

static bool same_text(const char *label, const char *got, size_t got_len, const char *want)
{
    size_t want_len = strlen(want);
    if (got_len == want_len && !memcmp(got, want, want_len))
        return true;
    size_t i = 0;
    while (i < got_len && i < want_len && got[i] == want[i])
        i++;
    fprintf(stderr, "%s: text differs at byte %zu (got %zu bytes, want %zu)\n", label, i, got_len, want_len);
    return false;
}

static void check_record(const orin_tokenizer *tok, const tok_record *r)
{
    char label[96];
    int32_t *ids = NULL;
    size_t n_ids = 0, len = 0;
    char *text = NULL;
    snprintf(label, sizeof label, "corpus.jsonl:%d (%s)", r->line, r->cat);

    CHECK(orin_tokenizer_encode(tok, r->text, r->len, &ids, &n_ids) == 0, "%s: %s", label, orin_error());
    CHECK(tok_ids_equal(label, ids, n_ids, r->ids, r->n_ids));

    /* Decoding the reference ids: transformers' strings. */
    CHECK(orin_tokenizer_decode(tok, r->ids, r->n_ids, 0, &text, &len) == 0);
    CHECK(text && same_text(label, text, len, r->decoded), "decode");
    free(text);
    CHECK(orin_tokenizer_decode(tok, r->ids, r->n_ids, ORIN_DECODE_SKIP_SPECIAL, &text, &len) == 0);
    CHECK(text && same_text(label, text, len, r->decoded_skip), "decode, skipping special tokens");
    free(text);

    if (r->valid && !has_added_token(tok, r->text, r->len)) {
        char *want = nfc(r->text, r->len);
        CHECK(orin_tokenizer_decode(tok, ids, n_ids, 0, &text, &len) == 0);
        CHECK(want && text && same_text(label, text, len, want), "decode(encode(x)) == NFC(x)");
        free(text);
        free(want);
    }
    if (!r->valid) {
        char *clean = orin_utf8_sanitize(r->text, r->len, &len);
        CHECK(clean && r->replaced && same_text(label, clean, len, r->replaced), "U+FFFD replacement");
        free(clean);
    }
    free(ids);
}

typedef struct worker {
    const orin_tokenizer *tok;
    const tok_corpus *corpus;
    size_t start;
    int mismatches;
} worker;

static void *encode_all(void *arg)
{
    worker *w = arg;
    for (size_t k = 0; k < w->corpus->n; k++) {
        const tok_record *r = &w->corpus->recs[(w->start + k) % w->corpus->n];
        int32_t *ids = NULL;
        size_t n = 0;
        if (orin_tokenizer_encode(w->tok, r->text, r->len, &ids, &n) ||
            n != r->n_ids || memcmp(ids, r->ids, n * sizeof *ids))
            w->mismatches++;
        free(ids);
    }
    return NULL;
}

static void check_threads(const orin_tokenizer *tok, const tok_corpus *corpus)
{
    enum { N_THREADS = 4 };
    pthread_t th[N_THREADS];
    worker w[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        w[i] = (worker){.tok = tok, .corpus = corpus, .start = corpus->n * (size_t)i / N_THREADS};
        CHECK(pthread_create(&th[i], NULL, encode_all, &w[i]) == 0);
    }
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].mismatches == 0, "thread %d: %d lines differ", i, w[i].mismatches);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR corpus.jsonl [--threads]\n", argv[0]);
        return 2;
    }
    tok_corpus corpus;
    if (tok_corpus_load(argv[2], &corpus))
        return 1;
    orin_tokenizer *tok = tok_load_or_die(argv[1]);
    CHECK(corpus.n >= 2000, "the corpus has %zu lines", corpus.n);
    if (argc > 3 && !strcmp(argv[3], "--threads")) {
        check_threads(tok, &corpus);
    } else {
        for (size_t i = 0; i < corpus.n; i++)
            check_record(tok, &corpus.recs[i]);
    }
    orin_tokenizer_free(tok);
    tok_corpus_free(&corpus);
    return test_finish();
}
