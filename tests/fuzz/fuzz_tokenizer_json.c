/* tokenizer.json (and tokenizer_config.json) loading. Input: the bytes of a
 * tokenizer.json, optionally followed by a NUL byte and a tokenizer_config.json
 * (JSON text holds no raw NUL, so the split is unambiguous). The files reach
 * the loader through memfds. A tokenizer that loads must then encode, decode
 * and stream-decode a fixed text without fault, with every id it produces in
 * its vocabulary. */
#include "fuzz_util.h"

#include "orin/error.h"
#include "orin/tokenizer.h"

#include <sys/mman.h>
#include <unistd.h>

static int json_fd = -1, config_fd = -1;

static void fill(int fd, const uint8_t *data, size_t size)
{
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
}

static const char sample[] = "Hello, world! <|im_start|>user\nÀ l'été 123 4567 \xF0\x9F\x98\x80"
                             "\xff\xfe  \t\r\n<|endoftext|>x";

static void exercise(const orin_tokenizer *tok)
{
    int32_t *ids = NULL;
    size_t n = 0;
    size_t vocab = orin_tokenizer_vocab_size(tok);
    if (orin_tokenizer_encode(tok, sample, sizeof sample - 1, &ids, &n) != 0) {
        fuzz_check_error(orin_error());
        return;
    }
    for (size_t i = 0; i < n; i++) {
        FUZZ_ASSERT(ids[i] >= 0 && (size_t)ids[i] < vocab, "id %d outside a vocabulary of %zu",
                    ids[i], vocab);
        size_t len;
        FUZZ_ASSERT(orin_tokenizer_id_bytes(tok, ids[i], &len) != NULL, "id %d has no bytes",
                    ids[i]);
    }
    char *text = NULL;
    size_t len = 0;
    if (orin_tokenizer_decode(tok, ids, n, ORIN_DECODE_SKIP_SPECIAL, &text, &len) == 0)
        FUZZ_ASSERT(strlen(text) <= len, "decode length");
    free(text);
    orin_detokenizer *dt = orin_detokenizer_new(tok, 0);
    for (size_t i = 0; dt && i < n; i++) {
        const char *out;
        size_t olen;
        orin_detokenizer_push(dt, ids[i], &out, &olen);
    }
    orin_detokenizer_free(dt);
    free(ids);
    for (int r = 0; r < ORIN_TOKEN_ROLE_COUNT; r++) {
        int32_t id = orin_tokenizer_role_id(tok, (orin_token_role)r);
        FUZZ_ASSERT(id >= -1 && (id < 0 || (size_t)id < vocab), "role %d: id %d", r, id);
    }
    orin_tokenizer_token_to_id(tok, "Hello");
    orin_tokenizer_id_to_token(tok, (int32_t)vocab - 1);
    orin_tokenizer_chat_template(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (json_fd < 0) {
        json_fd = memfd_create("tokenizer.json", 0);
        config_fd = memfd_create("tokenizer_config.json", 0);
        if (json_fd < 0 || config_fd < 0)
            abort();
    }
    const uint8_t *nul = memchr(data, '\0', size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    char json_path[64], config_path[64];
    snprintf(json_path, sizeof json_path, "/proc/self/fd/%d", json_fd);
    snprintf(config_path, sizeof config_path, "/proc/self/fd/%d", config_fd);
    fill(json_fd, data, json_len);
    if (nul)
        fill(config_fd, nul + 1, size - json_len - 1);
    orin_tokenizer *tok = orin_tokenizer_load_files(json_path, nul ? config_path : NULL);
    if (!tok) {
        fuzz_check_error(orin_error());
        return 0;
    }
    exercise(tok);
    orin_tokenizer_free(tok);
    return 0;
}
