/* Encoding arbitrary bytes with the real Qwen3 tokenizer (151k tokens, its
 * pre-split regex, NFC, the added tokens). Properties: every id is in the
 * vocabulary; streaming decode equals whole decode; for ASCII input (which
 * NFC leaves alone and the byte-level model covers) decode(encode(x)) == x. */
#include "fuzz_util.h"

#include "orin/error.h"
#include "orin/tokenizer.h"

#ifndef FUZZ_QWEN3_DIR
#error "FUZZ_QWEN3_DIR: the folder holding the unpacked Qwen3 tokenizer.json"
#endif

static orin_tokenizer *tok;
static size_t vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("ORIN_FUZZ_TOKENIZER_DIR");
    tok = orin_tokenizer_load(dir ? dir : FUZZ_QWEN3_DIR);
    if (!tok) {
        fprintf(stderr, "fuzz_tokenizer_encode: %s\n", orin_error());
        exit(1);
    }
    vocab = orin_tokenizer_vocab_size(tok);
    return 0;
}

static bool is_ascii(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++)
        if (data[i] >= 0x80)
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int32_t *ids = NULL;
    size_t n = 0;
    FUZZ_ASSERT(orin_tokenizer_encode(tok, (const char *)data, size, &ids, &n) == 0, "encode: %s",
                orin_error());
    FUZZ_ASSERT(ids != NULL, "encode gave NULL ids");
    for (size_t i = 0; i < n; i++)
        FUZZ_ASSERT(ids[i] >= 0 && (size_t)ids[i] < vocab, "id %d", ids[i]);

    char *text = NULL;
    size_t len = 0;
    FUZZ_ASSERT(orin_tokenizer_decode(tok, ids, n, 0, &text, &len) == 0, "decode: %s",
                orin_error());
    if (is_ascii(data, size))
        FUZZ_ASSERT(len == size && memcmp(text, data, size) == 0,
                    "ASCII round trip: %zu bytes in, %zu out", size, len);

    /* Streaming decode, one id at a time, equals the whole decode. */
    orin_detokenizer *dt = orin_detokenizer_new(tok, 0);
    FUZZ_ASSERT(dt, "detokenizer_new");
    size_t at = 0;
    const char *out;
    size_t olen;
    for (size_t i = 0; i <= n; i++) {
        int rc = i < n ? orin_detokenizer_push(dt, ids[i], &out, &olen)
                       : orin_detokenizer_flush(dt, &out, &olen);
        FUZZ_ASSERT(rc == 0, "detokenizer: %s", orin_error());
        FUZZ_ASSERT(at + olen <= len && memcmp(text + at, out, olen) == 0,
                    "streamed output differs from decode at byte %zu", at);
        at += olen;
    }
    FUZZ_ASSERT(at == len, "streamed %zu bytes, decode %zu", at, len);
    orin_detokenizer_free(dt);
    free(text);
    free(ids);
    return 0;
}
