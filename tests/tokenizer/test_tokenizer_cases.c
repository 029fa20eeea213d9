/* Edge cases, the lookups and the option-rich small tokenizers, all against
 * values that scripts/gen_tokenizer_refs.py took from Hugging Face.
 *
 * usage: test_tokenizer_cases QWEN3_DIR cases.json corpus.jsonl DATA_DIR
 * (DATA_DIR holds tiny/ and tiny-ignore-merges/) */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "orin/error.h"
#include "tok_test_data.h"
#include "test_util.h"

/* The 1 MB case: valid corpus texts in order, cycling, joined by "\n",
 * until the target is reached (as corpus_text() in the script). */
static char *corpus_text(const tok_corpus *c, size_t target, size_t *len)
{
    size_t cap = target + 65536, n = 0;
    char *out = malloc(cap);
    while (n < target) {
        for (size_t i = 0; i < c->n && n < target; i++) {
            const tok_record *r = &c->recs[i];
            if (!r->valid)
                continue;
            if (n + r->len + 1 > cap) {
                cap = (n + r->len + 1) * 2;
                out = realloc(out, cap);
            }
            if (n)
                out[n++] = '\n';
            memcpy(out + n, r->text, r->len);
            n += r->len;
        }
    }
    *len = n;
    return out;
}

static char *case_text(const cJSON *c, const tok_corpus *corpus, size_t *len)
{
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(c, "repeat");
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(c, "corpus_bytes");
    if (cJSON_IsString(text)) {
        *len = strlen(text->valuestring);
        return strdup(text->valuestring);
    }
    if (cJSON_IsString(rep)) {
        size_t unit = strlen(rep->valuestring);
        size_t times = (size_t)cJSON_GetObjectItemCaseSensitive(c, "times")->valuedouble;
        char *out = malloc(unit * times + 1);
        for (size_t i = 0; i < times; i++)
            memcpy(out + i * unit, rep->valuestring, unit);
        *len = unit * times;
        return out;
    }
    return corpus_text(corpus, (size_t)bytes->valuedouble, len);
}

static void check_cases(const orin_tokenizer *tok, const cJSON *cases, const tok_corpus *corpus)
{
    const cJSON *c;
    int count = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        size_t len, n_ids = 0, dec_len = 0;
        char *text = case_text(c, corpus, &len), *dec = NULL;
        int32_t *ids = NULL;
        const cJSON *want_bytes = cJSON_GetObjectItemCaseSensitive(c, "bytes");
        if (want_bytes)
            CHECK(len == (size_t)want_bytes->valuedouble, "%s: built %zu bytes", name, len);
        CHECK(orin_tokenizer_encode(tok, text, len, &ids, &n_ids) == 0, "%s: %s", name, orin_error());
        CHECK(ids != NULL, "%s: ids must not be NULL, even when empty", name);
        const cJSON *want_ids = cJSON_GetObjectItemCaseSensitive(c, "ids");
        if (want_ids) {
            size_t n_want;
            int32_t *want = tok_json_ids(want_ids, &n_want);
            CHECK(tok_ids_equal(name, ids, n_ids, want, n_want));
            free(want);
        } else {
            size_t n_want = (size_t)cJSON_GetObjectItemCaseSensitive(c, "count")->valuedouble;
            uint64_t h = strtoull(cJSON_GetObjectItemCaseSensitive(c, "fnv1a64")->valuestring, NULL, 16);
            CHECK(n_ids == n_want, "%s: %zu ids, want %zu", name, n_ids, n_want);
            CHECK(tok_fnv1a64_ids(ids, n_ids) == h, "%s: the ids' hash differs", name);
        }
        /* The made-up cases are NFC text, so decoding gives them back exactly
         * (the corpus one holds NFD lines; test_tokenizer_corpus covers those). */
        if (!want_bytes) {
            CHECK(orin_tokenizer_decode(tok, ids, n_ids, 0, &dec, &dec_len) == 0);
            CHECK(dec && dec_len == len && !memcmp(dec, text, len), "%s: decode(encode(x)) != x", name);
            free(dec);
        }
        free(ids);
        free(text);
        count++;
    }
    CHECK(count >= 10, "only %d cases", count);
}

static int32_t json_id(const cJSON *v)
{
    return cJSON_IsNumber(v) ? (int32_t)v->valuedouble : -1;
}

static void check_api(const orin_tokenizer *tok, const cJSON *api)
{
    CHECK(orin_tokenizer_vocab_size(tok) == (size_t)cJSON_GetObjectItemCaseSensitive(api, "vocab_size")->valuedouble);
    CHECK(orin_tokenizer_bos_id(tok) == json_id(cJSON_GetObjectItemCaseSensitive(api, "bos_id")));
    CHECK(orin_tokenizer_eos_id(tok) == json_id(cJSON_GetObjectItemCaseSensitive(api, "eos_id")));
    CHECK(orin_tokenizer_pad_id(tok) == json_id(cJSON_GetObjectItemCaseSensitive(api, "pad_id")));
    CHECK(orin_tokenizer_role_id(tok, ORIN_TOKEN_UNK) == json_id(cJSON_GetObjectItemCaseSensitive(api, "unk_id")));
    const char *eos = orin_tokenizer_role_token(tok, ORIN_TOKEN_EOS);
    const char *pad = orin_tokenizer_role_token(tok, ORIN_TOKEN_PAD);
    CHECK(eos && !strcmp(eos, cJSON_GetObjectItemCaseSensitive(api, "eos_token")->valuestring));
    CHECK(pad && !strcmp(pad, cJSON_GetObjectItemCaseSensitive(api, "pad_token")->valuestring));
    CHECK(orin_tokenizer_role_token(tok, ORIN_TOKEN_BOS) == NULL);
    CHECK(orin_tokenizer_role_id(tok, (orin_token_role)99) == -1);

    const char *tmpl = orin_tokenizer_chat_template(tok);
    CHECK(tmpl != NULL);
    if (tmpl) {
        size_t n = strlen(tmpl);
        CHECK(n == (size_t)cJSON_GetObjectItemCaseSensitive(api, "chat_template_bytes")->valuedouble);
        uint64_t h = strtoull(cJSON_GetObjectItemCaseSensitive(api, "chat_template_fnv1a64")->valuestring, NULL, 16);
        CHECK(tok_fnv1a64(tmpl, n, 0xcbf29ce484222325ULL) == h, "chat template differs from transformers'");
    }

    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(api, "tokens")) {
        const char *t = cJSON_GetObjectItemCaseSensitive(e, "token")->valuestring;
        int32_t want = json_id(cJSON_GetObjectItemCaseSensitive(e, "id"));
        CHECK(orin_tokenizer_token_to_id(tok, t) == want, "token_to_id(\"%s\") = %d, want %d", t,
              orin_tokenizer_token_to_id(tok, t), want);
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(api, "ids")) {
        int32_t id = json_id(cJSON_GetObjectItemCaseSensitive(e, "id"));
        const char *want = cJSON_GetObjectItemCaseSensitive(e, "token")->valuestring;
        const char *got = orin_tokenizer_id_to_token(tok, id);
        CHECK(got && !strcmp(got, want), "id_to_token(%d) = \"%s\", want \"%s\"", id, got ? got : "(null)", want);
    }
    CHECK(orin_tokenizer_id_to_token(tok, -1) == NULL);
    CHECK(orin_tokenizer_id_to_token(tok, (int32_t)orin_tokenizer_vocab_size(tok)) == NULL);
    CHECK(orin_tokenizer_id_bytes(tok, 1 << 30, NULL) == NULL);

    const orin_added_token *added;
    size_t n_added = orin_tokenizer_added_tokens(tok, &added), i = 0;
    const cJSON *want_added = cJSON_GetObjectItemCaseSensitive(api, "added");
    CHECK(n_added == (size_t)cJSON_GetArraySize(want_added));
    cJSON_ArrayForEach(e, want_added) {
        if (i >= n_added)
            break;
        const orin_added_token *a = &added[i++];
        CHECK(!strcmp(a->content, cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring));
        CHECK(a->special == cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")), "%s", a->content);
        CHECK(a->single_word == cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "single_word")));
        CHECK(a->lstrip == cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "lstrip")));
        CHECK(a->rstrip == cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "rstrip")));
        CHECK(a->normalized == cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "normalized")));
        CHECK(orin_tokenizer_is_special(tok, a->id) == a->special);
        CHECK(orin_tokenizer_token_to_id(tok, a->content) == a->id);
    }

    /* Ids outside the vocabulary are skipped, as Hugging Face does. */
    int32_t ids[] = {9707, -1, 151700, 1 << 30, 1879};
    char *text = NULL;
    CHECK(orin_tokenizer_decode(tok, ids, 5, 0, &text, NULL) == 0 && text && !strcmp(text, "Hello world"),
          "got \"%s\"", text ? text : "(null)");
    free(text);
    CHECK(orin_tokenizer_decode(tok, NULL, 0, 0, &text, NULL) == 0 && text && !text[0]);
    free(text);
}

static void check_tiny(const char *dir, const cJSON *ref)
{
    orin_tokenizer *tok = tok_load_or_die(dir);
    const cJSON *row, *rows = cJSON_GetObjectItemCaseSensitive(ref, "rows");
    /* Hugging Face spells a normalized added token in its normalised form but
     * finds it only by its written form. */
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(ref, "token_to_id")) {
        const char *t = cJSON_GetObjectItemCaseSensitive(row, "token")->valuestring;
        int32_t want = json_id(cJSON_GetObjectItemCaseSensitive(row, "id"));
        CHECK(orin_tokenizer_token_to_id(tok, t) == want, "%s: token_to_id(\"%s\") = %d, want %d", dir, t,
              orin_tokenizer_token_to_id(tok, t), want);
    }
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(ref, "id_to_token")) {
        int32_t id = json_id(cJSON_GetObjectItemCaseSensitive(row, "id"));
        const char *want = cJSON_GetObjectItemCaseSensitive(row, "token")->valuestring;
        const char *got = orin_tokenizer_id_to_token(tok, id);
        CHECK(got && !strcmp(got, want), "%s: id_to_token(%d) = \"%s\", want \"%s\"", dir, id, got ? got : "",
              want);
    }
    CHECK(orin_tokenizer_chat_template(tok) == NULL, "%s has no tokenizer_config.json", dir);
    CHECK(orin_tokenizer_eos_id(tok) == -1);
    cJSON_ArrayForEach(row, rows) {
        const char *text = cJSON_GetObjectItemCaseSensitive(row, "text")->valuestring;
        char label[160];
        snprintf(label, sizeof label, "%.100s: \"%.40s\"", dir, text);
        size_t n_want, n_ids = 0;
        int32_t *want = tok_json_ids(cJSON_GetObjectItemCaseSensitive(row, "ids"), &n_want), *ids = NULL;
        CHECK(orin_tokenizer_encode(tok, text, strlen(text), &ids, &n_ids) == 0);
        CHECK(tok_ids_equal(label, ids, n_ids, want, n_want));
        const char *keys[] = {"decoded", "decoded_skip"};
        for (int k = 0; k < 2; k++) {
            char *dec = NULL;
            const char *exp = cJSON_GetObjectItemCaseSensitive(row, keys[k])->valuestring;
            CHECK(orin_tokenizer_decode(tok, want, n_want, k ? ORIN_DECODE_SKIP_SPECIAL : 0, &dec, NULL) == 0);
            CHECK(dec && !strcmp(dec, exp), "%s: %s \"%s\", want \"%s\"", label, keys[k], dec ? dec : "", exp);
            free(dec);
        }
        free(ids);
        free(want);
    }
    orin_tokenizer_free(tok);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s QWEN3_DIR cases.json corpus.jsonl DATA_DIR\n", argv[0]);
        return 2;
    }
    cJSON *ref = tok_json_load(argv[2]);
    tok_corpus corpus;
    if (!ref || tok_corpus_load(argv[3], &corpus))
        return 1;
    orin_tokenizer *tok = tok_load_or_die(argv[1]);
    check_cases(tok, cJSON_GetObjectItemCaseSensitive(ref, "cases"), &corpus);
    check_api(tok, cJSON_GetObjectItemCaseSensitive(ref, "api"));
    orin_tokenizer_free(tok);

    const cJSON *tiny = cJSON_GetObjectItemCaseSensitive(ref, "tiny");
    const char *names[] = {"tiny", "tiny-ignore-merges"};
    for (int i = 0; i < 2; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", argv[4], names[i]);
        check_tiny(dir, cJSON_GetObjectItemCaseSensitive(tiny, names[i]));
    }
    cJSON_Delete(ref);
    tok_corpus_free(&corpus);
    return test_finish();
}
