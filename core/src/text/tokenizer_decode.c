/* Decoding (whole and streaming) and the lookups. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

#include "orin/error.h"

/* The bytes of one id under the flags, or NULL when the id yields nothing
 * (unknown ids are skipped, as Hugging Face's decode does). */
static const char *id_piece(const orin_tokenizer *tok, int32_t id, unsigned flags, size_t *len)
{
    if (id < 0 || (size_t)id >= tok->n_ids || !(tok->id_flags[id] & TOK_ID_VALID))
        return NULL;
    if ((flags & ORIN_DECODE_SKIP_SPECIAL) && (tok->id_flags[id] & TOK_ID_SPECIAL))
        return NULL;
    *len = tok->bytes_len[id];
    return tok->bytes[id];
}

int orin_tokenizer_decode(const orin_tokenizer *tok, const int32_t *ids, size_t n_ids, unsigned flags, char **text,
                          size_t *len)
{
    tok_buf raw = {0}, out = {0};
    int rc = -1;
    *text = NULL;
    for (size_t i = 0; i < n_ids; i++) {
        size_t n;
        const char *piece = id_piece(tok, ids[i], flags, &n);
        if (piece && tok_buf_append(&raw, piece, n))
            goto out;
    }
    /* Hugging Face joins the bytes, then reads them with from_utf8_lossy. */
    if (tok_buf_reserve(&out, raw.len + 1) ||
        tok_utf8_append_lossy(&out, (const unsigned char *)raw.data, raw.len, false, NULL) ||
        tok_buf_append(&out, "", 1))
        goto out;
    *text = out.data;
    if (len)
        *len = out.len - 1;
    out.data = NULL;
    rc = 0;
out:
    if (rc)
        orin_error_set("tokenizer: out of memory decoding %zu ids", n_ids);
    free(raw.data);
    free(out.data);
    return rc;
}

/* ---- streaming ---- */

struct orin_detokenizer {
    const orin_tokenizer *tok;
    unsigned flags;
    unsigned char pending[4]; /* the start of a character not yet complete */
    size_t n_pending;
    tok_buf work, out;
};

orin_detokenizer *orin_detokenizer_new(const orin_tokenizer *tok, unsigned flags)
{
    orin_detokenizer *dt = calloc(1, sizeof *dt);
    if (!dt) {
        orin_error_set("tokenizer: out of memory");
        return NULL;
    }
    dt->tok = tok;
    dt->flags = flags;
    return dt;
}

/* Converts pending + piece, keeping back a tail that may still complete. The
 * lossy reading is the same as over the whole stream because a held tail is a
 * valid prefix: whatever byte comes next either continues it or ends it as one
 * U+FFFD, exactly as it would have in one pass. */
static int emit(orin_detokenizer *dt, const char *piece, size_t n, bool final, const char **out, size_t *len)
{
    dt->work.len = 0;
    dt->out.len = 0;
    size_t held = 0;
    if (tok_buf_append(&dt->work, dt->pending, dt->n_pending) || tok_buf_append(&dt->work, piece, n) ||
        tok_utf8_append_lossy(&dt->out, (const unsigned char *)dt->work.data, dt->work.len, !final, &held))
        return orin_error_set("tokenizer: out of memory");
    if (held)
        memcpy(dt->pending, dt->work.data + dt->work.len - held, held);
    dt->n_pending = held;
    *out = dt->out.data ? dt->out.data : "";
    *len = dt->out.len;
    return 0;
}

int orin_detokenizer_push(orin_detokenizer *dt, int32_t id, const char **out, size_t *len)
{
    size_t n = 0;
    const char *piece = id_piece(dt->tok, id, dt->flags, &n);
    return emit(dt, piece ? piece : "", piece ? n : 0, false, out, len);
}

int orin_detokenizer_flush(orin_detokenizer *dt, const char **out, size_t *len)
{
    return emit(dt, "", 0, true, out, len);
}

void orin_detokenizer_free(orin_detokenizer *dt)
{
    if (!dt)
        return;
    free(dt->work.data);
    free(dt->out.data);
    free(dt);
}

/* ---- lookups ---- */

size_t orin_tokenizer_vocab_size(const orin_tokenizer *tok)
{
    return tok->n_ids;
}

int32_t orin_tokenizer_token_to_id(const orin_tokenizer *tok, const char *token)
{
    size_t len = strlen(token);
    int64_t i = tok_strmap_find(&tok->added_map, token, len);
    if (i >= 0)
        return tok->added[i].id;
    return (int32_t)tok_strmap_find(&tok->model_map, token, len);
}

const char *orin_tokenizer_id_to_token(const orin_tokenizer *tok, int32_t id)
{
    if (id < 0 || (size_t)id >= tok->n_ids)
        return NULL;
    return tok->spelling[id];
}

const char *orin_tokenizer_id_bytes(const orin_tokenizer *tok, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= tok->n_ids || !tok->bytes[id])
        return NULL;
    if (len)
        *len = tok->bytes_len[id];
    return tok->bytes[id];
}

bool orin_tokenizer_is_special(const orin_tokenizer *tok, int32_t id)
{
    return id >= 0 && (size_t)id < tok->n_ids && (tok->id_flags[id] & TOK_ID_SPECIAL);
}

size_t orin_tokenizer_added_tokens(const orin_tokenizer *tok, const orin_added_token **tokens)
{
    *tokens = tok->added;
    return tok->n_added;
}

int32_t orin_tokenizer_role_id(const orin_tokenizer *tok, orin_token_role role)
{
    return role >= 0 && role < ORIN_TOKEN_ROLE_COUNT ? tok->role_id[role] : -1;
}

const char *orin_tokenizer_role_token(const orin_tokenizer *tok, orin_token_role role)
{
    return role >= 0 && role < ORIN_TOKEN_ROLE_COUNT ? tok->role_token[role] : NULL;
}

const char *orin_tokenizer_chat_template(const orin_tokenizer *tok)
{
    return tok->chat_template;
}
