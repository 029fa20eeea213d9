/* Loading tokenizer.json and tokenizer_config.json into an orin_tokenizer.
 *
 * Every section that changes what encode or decode produce is read and checked:
 * a type or an option that orin does not implement is an error naming the key,
 * so that a file orin cannot reproduce exactly is refused rather than
 * tokenized differently. */
#include "tokenizer_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orin/error.h"
#include "orin/file.h"

/* Ids above this are taken for a corrupt file rather than allocated for. */
#define TOK_MAX_ID (1 << 24)

static cJSON *parse_json_file(const char *path)
{
    size_t len = 0;
    /* Qwen's tokenizer.json is 11 MB; 1 GiB is no tokenizer. */
    char *text = orin_read_file(path, 1u << 30, &len);
    if (!text)
        return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        orin_error_set("%s: invalid JSON near byte %zu of %zu", path, at, len);
    } else if (!cJSON_IsObject(root)) {
        orin_error_set("%s: the top level is not a JSON object", path);
        cJSON_Delete(root);
        root = NULL;
    }
    free(text);
    return root;
}

/* Small accessors that say what was expected. */

static const char *type_of(const cJSON *obj)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

static int get_bool(const cJSON *obj, const char *key, bool dflt, bool *out, const char *file, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsBool(v))
        return orin_error_set("%s: %s.%s is not true or false", file, where, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_id(const cJSON *v, int32_t *out)
{
    if (!cJSON_IsNumber(v))
        return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= TOK_MAX_ID) || d != (double)(int64_t)d)
        return -1;
    *out = (int32_t)d;
    return 0;
}

/* An empty or null string option counts as absent. */
static bool string_option_set(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return false;
    return !cJSON_IsString(v) || v->valuestring[0] != '\0';
}

/* ---- the model section ---- */

static int check_model_options(const cJSON *model, const char *file, bool *ignore_merges)
{
    const char *type = type_of(model);
    if (!type)
        return orin_error_set("%s: model.type is missing (orin needs \"BPE\")", file);
    if (strcmp(type, "BPE"))
        return orin_error_set("%s: model.type \"%s\" is not supported (orin reads BPE only)", file, type);

    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0.0))
        return orin_error_set("%s: model.dropout is set; orin encodes deterministically and does not support "
                              "BPE dropout", file);
    if (string_option_set(model, "continuing_subword_prefix"))
        return orin_error_set("%s: model.continuing_subword_prefix is not supported", file);
    if (string_option_set(model, "end_of_word_suffix"))
        return orin_error_set("%s: model.end_of_word_suffix is not supported", file);
    /* byte_fallback, unk_token and fuse_unk only act on a character that has
     * no token; the load refuses a vocabulary that lacks any of the 256 byte
     * tokens, so with byte-level input they never act. */
    bool byte_fallback;
    if (get_bool(model, "byte_fallback", false, &byte_fallback, file, "model"))
        return -1;
    return get_bool(model, "ignore_merges", false, ignore_merges, file, "model");
}

typedef struct vocab_entry {
    const char *key;
    int32_t id;
} vocab_entry;

static int read_vocab(const cJSON *vocab, const char *file, vocab_entry **entries, size_t *n, int32_t *max_id)
{
    if (!cJSON_IsObject(vocab))
        return orin_error_set("%s: model.vocab is missing or not an object", file);
    size_t count = 0;
    for (const cJSON *e = vocab->child; e; e = e->next)
        count++;
    if (!count)
        return orin_error_set("%s: model.vocab is empty", file);
    *entries = malloc(count * sizeof **entries);
    if (!*entries)
        return orin_error_set("%s: out of memory", file);
    *n = 0;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int32_t id;
        if (get_id(e, &id))
            return orin_error_set("%s: model.vocab[\"%.60s\"] is not an id in 0..%d", file, e->string, TOK_MAX_ID);
        (*entries)[(*n)++] = (vocab_entry){.key = e->string, .id = id};
        if (id > *max_id)
            *max_id = id;
    }
    return 0;
}

static int read_added_tokens(orin_tokenizer *tok, const cJSON *list, const char *file, int32_t *max_id)
{
    if (!list || cJSON_IsNull(list))
        return 0;
    if (!cJSON_IsArray(list))
        return orin_error_set("%s: added_tokens is not an array", file);
    size_t n = (size_t)cJSON_GetArraySize(list);
    if (!n)
        return 0;
    tok->added = calloc(n, sizeof *tok->added);
    tok->added_keys = calloc(n, sizeof *tok->added_keys);
    tok->added_key_lens = calloc(n, sizeof *tok->added_key_lens);
    if (!tok->added || !tok->added_keys || !tok->added_key_lens)
        return orin_error_set("%s: out of memory", file);

    size_t i = 0;
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        orin_added_token *a = &tok->added[i];
        if (!cJSON_IsObject(e) || !cJSON_IsString(content) || !content->valuestring[0])
            return orin_error_set("%s: %s has no content string", file, where);
        if (get_id(cJSON_GetObjectItemCaseSensitive(e, "id"), &a->id))
            return orin_error_set("%s: %s (\"%.60s\") has no valid id", file, where, content->valuestring);
        a->len = strlen(content->valuestring);
        a->content = tok_arena_strndup(&tok->arena, content->valuestring, a->len);
        if (!a->content)
            return orin_error_set("%s: out of memory", file);
        /* Defaults are those of Hugging Face's AddedToken. */
        if (get_bool(e, "special", false, &a->special, file, where) ||
            get_bool(e, "single_word", false, &a->single_word, file, where) ||
            get_bool(e, "lstrip", false, &a->lstrip, file, where) ||
            get_bool(e, "rstrip", false, &a->rstrip, file, where) ||
            get_bool(e, "normalized", !a->special, &a->normalized, file, where))
            return -1;
        tok->added_keys[i] = a->content;
        tok->added_key_lens[i] = (uint32_t)a->len;
        if (a->id > *max_id)
            *max_id = a->id;
    }
    tok->n_added = n;
    if (tok_strmap_init(&tok->added_map, n, tok->added_keys, tok->added_key_lens))
        return orin_error_set("%s: out of memory", file);
    for (i = 0; i < n; i++) {
        if (tok_strmap_insert(&tok->added_map, (uint32_t)i) >= 0)
            return orin_error_set("%s: added token \"%.60s\" is listed twice", file, tok->added[i].content);
    }
    return 0;
}

static int alloc_id_tables(orin_tokenizer *tok, size_t n_ids, const char *file)
{
    tok->n_ids = n_ids;
    tok->spelling = calloc(n_ids, sizeof *tok->spelling);
    tok->spelling_len = calloc(n_ids, sizeof *tok->spelling_len);
    tok->bytes = calloc(n_ids, sizeof *tok->bytes);
    tok->bytes_len = calloc(n_ids, sizeof *tok->bytes_len);
    tok->id_flags = calloc(n_ids, sizeof *tok->id_flags);
    tok->model_spelling = calloc(n_ids, sizeof *tok->model_spelling);
    tok->model_spelling_len = calloc(n_ids, sizeof *tok->model_spelling_len);
    if (!tok->spelling || !tok->spelling_len || !tok->bytes || !tok->bytes_len || !tok->id_flags ||
        !tok->model_spelling || !tok->model_spelling_len)
        return orin_error_set("%s: out of memory for %zu ids", file, n_ids);
    return 0;
}

/* The bytes a token decodes to: its characters read through the byte-level
 * alphabet, or (as Hugging Face's ByteLevel decoder does) its own UTF-8 when
 * some character is not in that alphabet. Sets *mapped accordingly. */
static const char *token_bytes(tok_arena *arena, const char *s, size_t n, uint32_t *out_len, bool *mapped)
{
    unsigned char *out = tok_arena_alloc(arena, n + 1);
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t len = 0;
    *mapped = tok_utf8_valid_prefix(p, n) == n;
    for (size_t i = 0; *mapped && i < n;) {
        uint32_t cp;
        i += tok_utf8_decode(p + i, &cp);
        int b = tok_cp_to_byte(cp);
        if (b < 0)
            *mapped = false;
        else
            out[len++] = (unsigned char)b;
    }
    if (!*mapped) {
        memcpy(out, s, n);
        len = n;
    }
    *out_len = (uint32_t)len;
    return (const char *)out;
}

static int build_model_vocab(orin_tokenizer *tok, const vocab_entry *entries, size_t n, const char *file)
{
    for (size_t i = 0; i < n; i++) {
        int32_t id = entries[i].id;
        if (tok->model_spelling[id])
            return orin_error_set("%s: model.vocab gives id %d to both \"%.60s\" and \"%.60s\"", file, id,
                                  tok->model_spelling[id], entries[i].key);
        size_t len = strlen(entries[i].key);
        tok->model_spelling[id] = tok_arena_strndup(&tok->arena, entries[i].key, len);
        if (!tok->model_spelling[id])
            return orin_error_set("%s: out of memory", file);
        tok->model_spelling_len[id] = (uint32_t)len;
    }
    if (tok_strmap_init(&tok->model_map, n, tok->model_spelling, tok->model_spelling_len))
        return orin_error_set("%s: out of memory", file);
    if (tok->ignore_merges) {
        /* ignore_merges looks whole pre-tokens up by their bytes. */
        tok->word_bytes = calloc(tok->n_ids, sizeof *tok->word_bytes);
        tok->word_bytes_len = calloc(tok->n_ids, sizeof *tok->word_bytes_len);
        if (!tok->word_bytes || !tok->word_bytes_len ||
            tok_strmap_init(&tok->word_map, n, tok->word_bytes, tok->word_bytes_len))
            return orin_error_set("%s: out of memory", file);
    }

    for (size_t id = 0; id < tok->n_ids; id++) {
        const char *s = tok->model_spelling[id];
        if (!s)
            continue;
        if (tok_strmap_insert(&tok->model_map, (uint32_t)id) >= 0)
            return orin_error_set("%s: model.vocab lists \"%.60s\" twice", file, s);
        bool mapped;
        tok->spelling[id] = s;
        tok->spelling_len[id] = tok->model_spelling_len[id];
        tok->bytes[id] = token_bytes(&tok->arena, s, tok->spelling_len[id], &tok->bytes_len[id], &mapped);
        if (!tok->bytes[id])
            return orin_error_set("%s: out of memory", file);
        tok->id_flags[id] = TOK_ID_VALID;
        if (tok->ignore_merges && mapped) {
            tok->word_bytes[id] = tok->bytes[id];
            tok->word_bytes_len[id] = tok->bytes_len[id];
            tok_strmap_insert(&tok->word_map, (uint32_t)id);
        }
    }

    for (unsigned b = 0; b < 256; b++) {
        unsigned char u[4];
        size_t len = tok_utf8_encode(tok_byte_to_cp((uint8_t)b), u);
        int64_t id = tok_strmap_find(&tok->model_map, (const char *)u, len);
        if (id < 0)
            return orin_error_set("%s: model.vocab has no token \"%.*s\" for byte 0x%02X; orin needs all 256 "
                                  "byte-level tokens", file, (int)len, (const char *)u, b);
        tok->byte_id[b] = (int32_t)id;
    }
    return 0;
}

static int lookup_merge_part(const orin_tokenizer *tok, const char *s, size_t n, size_t index, const char *file,
                             int32_t *id)
{
    int64_t found = tok_strmap_find(&tok->model_map, s, n);
    if (found < 0)
        return orin_error_set("%s: model.merges[%zu]: \"%.*s\" is not in model.vocab", file, index,
                              (int)(n > 60 ? 60 : n), s);
    *id = (int32_t)found;
    return 0;
}

/* The two halves of a merge, in either form; -1 when it is neither. */
static int merge_halves(const cJSON *m, const char **left, size_t *left_len, const char **right, size_t *right_len)
{
    if (cJSON_IsString(m)) {
        /* The older "left right" form: byte-level tokens never hold a space. */
        const char *space = strchr(m->valuestring, ' ');
        if (!space || strchr(space + 1, ' '))
            return -1;
        *left = m->valuestring;
        *left_len = (size_t)(space - *left);
        *right = space + 1;
        *right_len = strlen(*right);
        return 0;
    }
    if (!cJSON_IsArray(m) || !cJSON_IsString(m->child) || !m->child->next || !cJSON_IsString(m->child->next) ||
        m->child->next->next)
        return -1;
    *left = m->child->valuestring;
    *left_len = strlen(*left);
    *right = m->child->next->valuestring;
    *right_len = strlen(*right);
    return 0;
}

static int build_merges(orin_tokenizer *tok, const cJSON *merges, const char *file)
{
    if (!cJSON_IsArray(merges))
        return orin_error_set("%s: model.merges is missing or not an array", file);
    size_t n = (size_t)cJSON_GetArraySize(merges);
    if (tok_mergemap_init(&tok->merges, n))
        return orin_error_set("%s: out of memory", file);

    char stack_buf[256];
    size_t index = 0;
    for (const cJSON *m = merges->child; m; m = m->next, index++) {
        const char *left, *right;
        size_t left_len, right_len;
        if (merge_halves(m, &left, &left_len, &right, &right_len)) {
            if (cJSON_IsString(m))
                return orin_error_set("%s: model.merges[%zu] \"%.60s\" is not two tokens separated by one space",
                                      file, index, m->valuestring);
            return orin_error_set("%s: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", file, index);
        }
        int32_t left_id = -1, right_id = -1, merged_id = -1;
        if (lookup_merge_part(tok, left, left_len, index, file, &left_id) ||
            lookup_merge_part(tok, right, right_len, index, file, &right_id))
            return -1;
        size_t joined_len = left_len + right_len;
        char *joined = joined_len <= sizeof stack_buf ? stack_buf : malloc(joined_len);
        if (!joined)
            return orin_error_set("%s: out of memory", file);
        memcpy(joined, left, left_len);
        memcpy(joined + left_len, right, right_len);
        int rc = lookup_merge_part(tok, joined, joined_len, index, file, &merged_id);
        if (joined != stack_buf)
            free(joined);
        if (rc)
            return -1;
        tok_mergemap_put(&tok->merges, left_id, right_id, (uint32_t)index, merged_id);
    }
    return 0;
}

/* Added tokens take their ids over from the model (Hugging Face looks them up
 * first). A token matched in normalised text is also spelt and decoded in its
 * normalised form, as Hugging Face's id_to_token and decode do. */
static int apply_added_tokens(orin_tokenizer *tok, const char *file)
{
    for (size_t i = 0; i < tok->n_added; i++) {
        const orin_added_token *a = &tok->added[i];
        const char *text = a->content;
        size_t len = a->len;
        bool mapped;
        if (a->normalized && tok->nfc) {
            const char *norm = tok_nfc(a->content, a->len, &len);
            if (!norm)
                return orin_error_prefix("%s: ", file);
            text = tok_arena_strndup(&tok->arena, norm, len);
            if (norm != a->content)
                free((void *)norm);
            if (!text)
                return orin_error_set("%s: out of memory", file);
        }
        tok->spelling[a->id] = text;
        tok->spelling_len[a->id] = (uint32_t)len;
        tok->bytes[a->id] = token_bytes(&tok->arena, text, len, &tok->bytes_len[a->id], &mapped);
        if (!tok->bytes[a->id])
            return orin_error_set("%s: out of memory", file);
        tok->id_flags[a->id] = TOK_ID_VALID | TOK_ID_ADDED | (a->special ? TOK_ID_SPECIAL : 0);
    }
    return 0;
}

/* ---- normalizer, pre_tokenizer, decoder ---- */

static int read_normalizer(orin_tokenizer *tok, const cJSON *norm, const char *file)
{
    if (!norm || cJSON_IsNull(norm))
        return 0;
    const char *type = type_of(norm);
    if (type && !strcmp(type, "NFC")) {
        tok->nfc = true;
        return tok_nfc_init();
    }
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(norm, "normalizers");
        if (!cJSON_IsArray(list))
            return orin_error_set("%s: normalizer.normalizers is not an array", file);
        for (const cJSON *e = list->child; e; e = e->next) {
            const char *t = type_of(e);
            if (!t || strcmp(t, "NFC"))
                return orin_error_set("%s: normalizer \"%s\" in the Sequence is not supported (orin supports NFC)",
                                      file, t ? t : "?");
            tok->nfc = true;
        }
        return tok->nfc ? tok_nfc_init() : 0;
    }
    return orin_error_set("%s: normalizer type \"%s\" is not supported (orin supports NFC or none)", file,
                          type ? type : "?");
}

static int read_split(orin_tokenizer *tok, const cJSON *split, const char *file)
{
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    const cJSON *regex = cJSON_GetObjectItemCaseSensitive(pattern, "Regex");
    const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(split, "behavior");
    bool invert;
    if (!cJSON_IsString(regex))
        return orin_error_set("%s: pre_tokenizer Split: pattern is not {\"Regex\": ...} (only regex patterns are "
                              "supported)", file);
    if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated"))
        return orin_error_set("%s: pre_tokenizer Split: behavior \"%s\" is not supported (orin supports Isolated)",
                              file, cJSON_IsString(behavior) ? behavior->valuestring : "?");
    if (get_bool(split, "invert", false, &invert, file, "pre_tokenizer Split"))
        return -1;
    if (invert)
        return orin_error_set("%s: pre_tokenizer Split: invert = true is not supported", file);
    return tok_compile_split(tok, regex->valuestring, file);
}

static int read_byte_level(const cJSON *bl, const char *file)
{
    bool add_prefix_space, use_regex;
    /* Hugging Face's defaults for a ByteLevel that omits these are true. */
    if (get_bool(bl, "add_prefix_space", true, &add_prefix_space, file, "pre_tokenizer ByteLevel") ||
        get_bool(bl, "use_regex", true, &use_regex, file, "pre_tokenizer ByteLevel"))
        return -1;
    if (add_prefix_space)
        return orin_error_set("%s: pre_tokenizer ByteLevel: add_prefix_space = true is not supported", file);
    if (use_regex)
        return orin_error_set("%s: pre_tokenizer ByteLevel: use_regex = true is not supported (orin needs the "
                              "split pattern spelled out in a Split pre-tokenizer)", file);
    return 0;
}

static int read_pre_tokenizer(orin_tokenizer *tok, const cJSON *pre, const char *file)
{
    const char *type = pre ? type_of(pre) : NULL;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    if (!type || strcmp(type, "Sequence") || !cJSON_IsArray(list) || cJSON_GetArraySize(list) != 2)
        return orin_error_set("%s: pre_tokenizer must be a Sequence of Split (regex, Isolated) and ByteLevel; "
                              "found %s", file, type ? type : "none");
    const char *first = type_of(list->child), *second = type_of(list->child->next);
    if (!first || strcmp(first, "Split") || !second || strcmp(second, "ByteLevel"))
        return orin_error_set("%s: pre_tokenizer Sequence of %s, %s is not supported (orin needs Split, ByteLevel)",
                              file, first ? first : "?", second ? second : "?");
    if (read_split(tok, list->child, file))
        return -1;
    return read_byte_level(list->child->next, file);
}

static int check_decoder(const cJSON *dec, const char *file)
{
    const char *type = dec ? type_of(dec) : NULL;
    if (!type || strcmp(type, "ByteLevel"))
        return orin_error_set("%s: decoder %s is not supported (orin needs ByteLevel)", file,
                              type ? type : "missing");
    return 0;
}

/* ---- tokenizer_config.json ---- */

static int read_role(orin_tokenizer *tok, const cJSON *cfg, orin_token_role role, const char *key,
                     const char *file)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v))
        v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v))
        return orin_error_set("%s: %s is neither a string nor {\"content\": string}", file, key);
    int32_t id = orin_tokenizer_token_to_id(tok, v->valuestring);
    if (id < 0)
        return orin_error_set("%s: %s \"%.60s\" is not a token of tokenizer.json", file, key, v->valuestring);
    tok->role_id[role] = id;
    tok->role_token[role] = tok->spelling[id];
    return 0;
}

static int read_config(orin_tokenizer *tok, const char *path)
{
    static const char *const role_keys[ORIN_TOKEN_ROLE_COUNT] = {
        [ORIN_TOKEN_BOS] = "bos_token",
        [ORIN_TOKEN_EOS] = "eos_token",
        [ORIN_TOKEN_PAD] = "pad_token",
        [ORIN_TOKEN_UNK] = "unk_token",
    };
    cJSON *cfg = parse_json_file(path);
    int rc = -1;
    if (!cfg)
        return -1;
    for (int r = 0; r < ORIN_TOKEN_ROLE_COUNT; r++) {
        if (read_role(tok, cfg, (orin_token_role)r, role_keys[r], path))
            goto out;
    }
    const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsArray(tmpl)) {
        /* The list form [{"name": ..., "template": ...}]: take "default". */
        const cJSON *e;
        cJSON_ArrayForEach(e, tmpl) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
            if (cJSON_IsString(name) && !strcmp(name->valuestring, "default")) {
                tmpl = cJSON_GetObjectItemCaseSensitive(e, "template");
                break;
            }
        }
    }
    if (cJSON_IsString(tmpl)) {
        tok->chat_template = tok_arena_strndup(&tok->arena, tmpl->valuestring, strlen(tmpl->valuestring));
        if (!tok->chat_template) {
            orin_error_set("%s: out of memory", path);
            goto out;
        }
    } else if (tmpl && !cJSON_IsNull(tmpl) && !cJSON_IsArray(tmpl)) {
        orin_error_set("%s: chat_template is not a string", path);
        goto out;
    }
    rc = 0;
out:
    cJSON_Delete(cfg);
    return rc;
}

/* ---- putting it together ---- */

static int load_tokenizer_json(orin_tokenizer *tok, const char *path)
{
    vocab_entry *entries = NULL;
    size_t n_entries = 0;
    int32_t max_id = -1;
    int rc = -1;
    cJSON *root = parse_json_file(path);
    if (!root)
        return -1;

    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) {
        orin_error_set("%s: \"model\" is missing or not an object", path);
        goto out;
    }
    if (check_model_options(model, path, &tok->ignore_merges) ||
        read_vocab(cJSON_GetObjectItemCaseSensitive(model, "vocab"), path, &entries, &n_entries, &max_id) ||
        read_added_tokens(tok, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), path, &max_id) ||
        alloc_id_tables(tok, (size_t)max_id + 1, path) ||
        build_model_vocab(tok, entries, n_entries, path) ||
        build_merges(tok, cJSON_GetObjectItemCaseSensitive(model, "merges"), path) ||
        read_normalizer(tok, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), path) ||
        apply_added_tokens(tok, path) ||
        read_pre_tokenizer(tok, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), path) ||
        check_decoder(cJSON_GetObjectItemCaseSensitive(root, "decoder"), path))
        goto out;
    if (tok_added_set_build(tok, &tok->raw_set, false) || tok_added_set_build(tok, &tok->norm_set, true)) {
        orin_error_prefix("%s: ", path);
        goto out;
    }
    rc = 0;
out:
    free(entries);
    cJSON_Delete(root);
    return rc;
}

orin_tokenizer *orin_tokenizer_load_files(const char *tokenizer_json_path, const char *config_path)
{
    orin_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        orin_error_set("tokenizer: out of memory");
        return NULL;
    }
    for (int r = 0; r < ORIN_TOKEN_ROLE_COUNT; r++)
        tok->role_id[r] = -1;
    if (load_tokenizer_json(tok, tokenizer_json_path) || (config_path && read_config(tok, config_path)))
        goto fail;
    tok->shared = calloc(1, sizeof *tok->shared);
    if (!tok->shared) {
        orin_error_set("tokenizer: out of memory");
        goto fail;
    }
    pthread_mutex_init(&tok->shared->lock, NULL);
    tok->shared->state = tok_state_new(tok);
    if (!tok->shared->state)
        goto fail;
    return tok;
fail:
    orin_tokenizer_free(tok);
    return NULL;
}

orin_tokenizer *orin_tokenizer_load(const char *model_dir)
{
    size_t n = strlen(model_dir);
    char *json_path = malloc(n + 32), *config_path = malloc(n + 32);
    orin_tokenizer *tok = NULL;
    if (!json_path || !config_path) {
        orin_error_set("tokenizer: out of memory");
        goto out;
    }
    snprintf(json_path, n + 32, "%s/tokenizer.json", model_dir);
    snprintf(config_path, n + 32, "%s/tokenizer_config.json", model_dir);
    /* tokenizer_config.json is optional; tokenizer.json is not. */
    tok = orin_tokenizer_load_files(json_path, access(config_path, F_OK) == 0 ? config_path : NULL);
out:
    free(json_path);
    free(config_path);
    return tok;
}

void orin_tokenizer_free(orin_tokenizer *tok)
{
    if (!tok)
        return;
    if (tok->shared) {
        tok_state_free(tok->shared->state);
        pthread_mutex_destroy(&tok->shared->lock);
        free(tok->shared);
    }
    if (tok->split_re)
        pcre2_code_free(tok->split_re);
    tok_added_set_free(&tok->raw_set);
    tok_added_set_free(&tok->norm_set);
    tok_strmap_free(&tok->model_map);
    tok_strmap_free(&tok->word_map);
    tok_strmap_free(&tok->added_map);
    tok_mergemap_free(&tok->merges);
    free(tok->spelling);
    free(tok->spelling_len);
    free(tok->bytes);
    free(tok->bytes_len);
    free(tok->id_flags);
    free(tok->model_spelling);
    free(tok->model_spelling_len);
    free(tok->word_bytes);
    free(tok->word_bytes_len);
    free(tok->added);
    free(tok->added_keys);
    free(tok->added_key_lens);
    tok_arena_free(&tok->arena);
    free(tok);
}
