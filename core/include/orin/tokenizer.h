/* The tokenizer: Hugging Face byte-level BPE (Qwen2 / Qwen3) read from a model
 * folder's tokenizer.json and tokenizer_config.json, exact against Hugging Face
 * `tokenizers` (Tokenizer.encode(text, add_special_tokens=False) and decode).
 *
 * Encoding follows the file: added tokens are matched first (leftmost-longest,
 * honouring each one's single_word / lstrip / rstrip / normalized), the rest is
 * normalised (NFC when the file's normalizer says so), split with the file's
 * Split regex (PCRE2), mapped to bytes and merged by BPE rank. Nothing that the
 * files say is built in: pattern, vocabulary, merges, added tokens and the
 * eos / pad / bos tokens all come from them.
 *
 * Text is UTF-8. Invalid UTF-8 in the input is not an error: each maximal
 * invalid subpart is replaced by U+FFFD, exactly as Python's
 * bytes.decode("utf-8", errors="replace") does, so the ids equal those that
 * Hugging Face gives for the replace-decoded string.
 *
 * A loaded tokenizer is read-only: encode, decode and the lookups may be called
 * from several threads at once. */
#ifndef ORIN_TOKENIZER_H
#define ORIN_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orin_tokenizer orin_tokenizer;

/* One entry of tokenizer.json's "added_tokens", as written there. */
typedef struct orin_added_token {
    const char *content;  /* NUL-terminated UTF-8 */
    size_t len;           /* bytes of content */
    int32_t id;
    bool special;         /* skipped by ORIN_DECODE_SKIP_SPECIAL */
    bool single_word;     /* matches only when not inside a word */
    bool lstrip;          /* swallows the whitespace before it */
    bool rstrip;          /* swallows the whitespace after it */
    bool normalized;      /* matched in the normalised text rather than the raw text */
} orin_added_token;

/* Tokens that tokenizer_config.json names for a role. */
typedef enum orin_token_role {
    ORIN_TOKEN_BOS = 0, /* bos_token */
    ORIN_TOKEN_EOS,     /* eos_token */
    ORIN_TOKEN_PAD,     /* pad_token */
    ORIN_TOKEN_UNK,     /* unk_token */
    ORIN_TOKEN_ROLE_COUNT
} orin_token_role;

/* Loads model_dir/tokenizer.json and, when present, model_dir/tokenizer_config.json.
 * Returns NULL with orin_error_set() naming the file and the reason (missing file,
 * bad JSON, unsupported model / normalizer / pre_tokenizer / decoder type, a merge
 * naming a token that is not in the vocabulary, ...). */
orin_tokenizer *orin_tokenizer_load(const char *model_dir);
/* The same with explicit paths; config_path may be NULL (no roles, no chat template). */
orin_tokenizer *orin_tokenizer_load_files(const char *tokenizer_json_path, const char *config_path);
void orin_tokenizer_free(orin_tokenizer *tok);

/* Encodes len bytes of text (no BOS, no chat template, no post-processing).
 * On success *ids is malloc'd (the caller frees; non-NULL even for zero ids)
 * and *n_ids is its length. Returns 0, or -1 with orin_error_set(). */
int orin_tokenizer_encode(const orin_tokenizer *tok, const char *text, size_t len,
                          int32_t **ids, size_t *n_ids);

enum {
    ORIN_DECODE_SKIP_SPECIAL = 1u << 0, /* leave out added tokens marked special */
};

/* Decodes ids to text: each token's bytes, concatenated, with every invalid
 * UTF-8 subpart replaced by U+FFFD (as Hugging Face decode does). Ids outside
 * the vocabulary are skipped, as Hugging Face does. *text is malloc'd and
 * NUL-terminated; *len (may be NULL) excludes the NUL. Returns 0 or -1. */
int orin_tokenizer_decode(const orin_tokenizer *tok, const int32_t *ids, size_t n_ids,
                          unsigned flags, char **text, size_t *len);

/* Vocabulary size including added tokens (the largest id + 1). */
size_t orin_tokenizer_vocab_size(const orin_tokenizer *tok);
/* The id of a token as tokenizer.json spells it ("<|im_end|>", "Ġthe"); -1 if none. */
int32_t orin_tokenizer_token_to_id(const orin_tokenizer *tok, const char *token);
/* The token's spelling in tokenizer.json; NULL for an unknown id. */
const char *orin_tokenizer_id_to_token(const orin_tokenizer *tok, int32_t id);
/* The raw bytes that decoding this one id yields (not NUL-terminated, may be
 * invalid UTF-8 on its own); NULL for an unknown id. */
const char *orin_tokenizer_id_bytes(const orin_tokenizer *tok, int32_t id, size_t *len);
/* True for added tokens marked "special". */
bool orin_tokenizer_is_special(const orin_tokenizer *tok, int32_t id);

/* tokenizer.json's added tokens, in file order. */
size_t orin_tokenizer_added_tokens(const orin_tokenizer *tok, const orin_added_token **tokens);

/* The token that tokenizer_config.json names for a role (a string or an
 * {"content": ...} object): its id, or -1 when the role is absent or null. */
int32_t orin_tokenizer_role_id(const orin_tokenizer *tok, orin_token_role role);
/* ... and its spelling; NULL when absent. */
const char *orin_tokenizer_role_token(const orin_tokenizer *tok, orin_token_role role);

static inline int32_t orin_tokenizer_eos_id(const orin_tokenizer *tok)
{
    return orin_tokenizer_role_id(tok, ORIN_TOKEN_EOS);
}
static inline int32_t orin_tokenizer_pad_id(const orin_tokenizer *tok)
{
    return orin_tokenizer_role_id(tok, ORIN_TOKEN_PAD);
}
static inline int32_t orin_tokenizer_bos_id(const orin_tokenizer *tok)
{
    return orin_tokenizer_role_id(tok, ORIN_TOKEN_BOS);
}

/* tokenizer_config.json's "chat_template" (raw Jinja text), NULL when absent. */
const char *orin_tokenizer_chat_template(const orin_tokenizer *tok);

/* Streaming decode: push ids one at a time, get back the bytes that now form
 * complete UTF-8. A character split across tokens is held back until it
 * completes; bytes that can never complete come out as U+FFFD at once. The
 * concatenated output of every push and the final flush equals
 * orin_tokenizer_decode() of all the ids with the same flags. */
typedef struct orin_detokenizer orin_detokenizer;

orin_detokenizer *orin_detokenizer_new(const orin_tokenizer *tok, unsigned flags);
/* *out points into the detokenizer (valid until its next call); *len may be 0.
 * Returns 0, or -1 on allocation failure. */
int orin_detokenizer_push(orin_detokenizer *dt, int32_t id, const char **out, size_t *len);
/* Ends the stream: an incomplete tail becomes U+FFFD. The detokenizer is then
 * empty and may be reused for a new stream. */
int orin_detokenizer_flush(orin_detokenizer *dt, const char **out, size_t *len);
void orin_detokenizer_free(orin_detokenizer *dt);

/* Replaces each maximal invalid UTF-8 subpart of in[0..len) by U+FFFD (EF BF BD).
 * Returns a malloc'd NUL-terminated copy (its length in *out_len), or NULL when
 * out of memory. Exposed because the CLI and tests use the same rule. */
char *orin_utf8_sanitize(const char *in, size_t len, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif
