/* Private to the tokenizer_*.c files: the loaded tokenizer and its helpers. */
#ifndef ORIN_TOKENIZER_INTERNAL_H
#define ORIN_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orin/tokenizer.h"

/* ---- bump allocator for the many small strings of a vocabulary ---- */

typedef struct tok_arena_chunk tok_arena_chunk;
typedef struct tok_arena {
    tok_arena_chunk *head;
} tok_arena;

void *tok_arena_alloc(tok_arena *a, size_t size);
/* Copies n bytes and appends a NUL. */
char *tok_arena_strndup(tok_arena *a, const char *s, size_t n);
void tok_arena_free(tok_arena *a);

/* ---- growable byte and id buffers ---- */

typedef struct tok_buf {
    char *data;
    size_t len, cap;
} tok_buf;

int tok_buf_reserve(tok_buf *b, size_t extra);
int tok_buf_append(tok_buf *b, const void *data, size_t n);

typedef struct tok_ids {
    int32_t *data;
    size_t len, cap;
} tok_ids;

int tok_ids_reserve(tok_ids *v, size_t extra);
static inline int tok_ids_push(tok_ids *v, int32_t id)
{
    if (v->len == v->cap && tok_ids_reserve(v, 1))
        return -1;
    v->data[v->len++] = id;
    return 0;
}

/* ---- hashing ---- */

uint64_t tok_hash_bytes(const void *data, size_t n);

/* String -> index map over keys the caller owns (keys[i], lens[i]). Open
 * addressing; each slot keeps the hash's low bits to skip most compares. */
typedef struct tok_strmap_slot {
    uint32_t index;    /* index + 1, 0 = empty */
    uint32_t tag;      /* low 32 bits of the key's hash */
} tok_strmap_slot;

typedef struct tok_strmap {
    tok_strmap_slot *slots;
    size_t mask;
    const char *const *keys;
    const uint32_t *lens;
} tok_strmap;

int tok_strmap_init(tok_strmap *m, size_t n_keys, const char *const *keys, const uint32_t *lens);
/* Inserts index i (keys[i]); returns the index already present for an equal key,
 * or -1 when i went in. */
int64_t tok_strmap_insert(tok_strmap *m, uint32_t i);
int64_t tok_strmap_find(const tok_strmap *m, const char *key, size_t len);
void tok_strmap_free(tok_strmap *m);

/* (left id, right id) -> (rank, merged id) for the BPE merges. */
typedef struct tok_merge_slot {
    uint64_t key;      /* left << 32 | right; UINT64_MAX = empty */
    uint32_t rank;
    int32_t merged;
} tok_merge_slot;

typedef struct tok_mergemap {
    tok_merge_slot *slots;
    size_t mask;
    size_t count;
} tok_mergemap;

int tok_mergemap_init(tok_mergemap *m, size_t n);
/* A later merge of the same pair replaces the earlier one (as Hugging Face's
 * HashMap collect does). */
void tok_mergemap_put(tok_mergemap *m, int32_t left, int32_t right, uint32_t rank, int32_t merged);
void tok_mergemap_free(tok_mergemap *m);

static inline uint64_t tok_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static inline const tok_merge_slot *tok_mergemap_get(const tok_mergemap *m, int32_t left, int32_t right)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (size_t i = tok_mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        const tok_merge_slot *s = &m->slots[i];
        if (s->key == key)
            return s;
        if (s->key == UINT64_MAX)
            return NULL;
    }
}

/* ---- UTF-8 and Unicode helpers ---- */

#define TOK_REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

/* Length of the valid UTF-8 prefix of s[0..n). */
size_t tok_utf8_valid_prefix(const unsigned char *s, size_t n);
/* Length of the maximal subpart of a (possibly) valid sequence starting at s[0]:
 * returns the full length when s starts a complete valid character, otherwise
 * sets *valid = false and returns how many bytes the one U+FFFD replaces. When
 * `at_end` is false and the input ends inside a valid prefix, *incomplete is set
 * instead (the caller may wait for more bytes). */
size_t tok_utf8_step(const unsigned char *s, size_t n, bool *valid, bool *incomplete);
/* Appends in[0..n) to out with invalid subparts replaced; bytes of a trailing
 * incomplete-but-valid-so-far sequence are left out when hold_tail, and their
 * count is returned in *held. */
int tok_utf8_append_lossy(tok_buf *out, const unsigned char *in, size_t n, bool hold_tail, size_t *held);
/* Decodes one code point from valid UTF-8; returns its length. */
size_t tok_utf8_decode(const unsigned char *s, uint32_t *cp);
/* Encodes cp; returns the length (1..4). */
size_t tok_utf8_encode(uint32_t cp, unsigned char *out);

/* Unicode White_Space (Rust's char::is_whitespace, Oniguruma's \s). */
bool tok_is_whitespace(uint32_t cp);
/* Rust regex's \w (Alphabetic, marks, decimal digits, connector punctuation, joiners). */
bool tok_is_word_char(uint32_t cp);

/* GPT-2 byte-level alphabet: each byte is shown as one printable code point. */
uint32_t tok_byte_to_cp(uint8_t b);
/* The byte a code point stands for, or -1 when it is not in the alphabet. */
int tok_cp_to_byte(uint32_t cp);

/* ---- the tokenizer ---- */

enum {
    TOK_ID_VALID = 1u << 0,   /* some token has this id */
    TOK_ID_SPECIAL = 1u << 1, /* an added token marked special */
    TOK_ID_ADDED = 1u << 2,
};

/* Added tokens grouped by first byte for a leftmost-longest scan. */
typedef struct tok_added_set {
    uint32_t n;
    uint32_t *order;        /* indexes into tok->added, grouped by first byte */
    const char **text;      /* pattern bytes of each (content, or normalised content) */
    uint32_t *text_len;
    uint32_t first[257];    /* order[first[b] .. first[b + 1]) start with byte b */
} tok_added_set;

/* Word cache: pre-token bytes -> ids, cleared when full. */
typedef struct tok_cache_slot {
    uint64_t hash;     /* 0 = empty */
    uint32_t key_off;  /* into keys */
    uint32_t ids_off;  /* into ids */
    uint16_t key_len;
    uint16_t n_ids;
} tok_cache_slot;

typedef struct tok_cache {
    tok_cache_slot *slots;
    size_t mask, count;
    tok_buf keys;
    tok_ids ids;
} tok_cache;

/* Per-caller scratch: regex match data, BPE work arrays and the word cache. */
typedef struct tok_state {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
    tok_cache cache;
    size_t cap;        /* length of each work array */
    int32_t *sym;
    int32_t *merged;
    uint32_t *rank;
    int32_t *prev, *next;
    uint64_t *heap;
} tok_state;

struct orin_tokenizer {
    size_t n_ids;              /* largest id + 1 */
    const char **spelling;     /* id -> spelling in tokenizer.json (NULL = hole) */
    uint32_t *spelling_len;
    const char **bytes;        /* id -> bytes that decoding yields */
    uint32_t *bytes_len;
    uint8_t *id_flags;         /* TOK_ID_* */

    /* The model's vocabulary: spelling -> id. */
    const char **model_spelling;
    uint32_t *model_spelling_len;
    tok_strmap model_map;

    /* The BPE model. */
    int32_t byte_id[256];      /* id of each single byte */
    tok_mergemap merges;
    bool ignore_merges;
    tok_strmap word_map;       /* raw bytes -> model id, only for ignore_merges */
    const char **word_bytes;
    uint32_t *word_bytes_len;

    /* Added tokens. */
    orin_added_token *added;
    size_t n_added;
    const char **added_keys;
    uint32_t *added_key_lens;
    tok_strmap added_map;      /* content -> index in added */
    tok_added_set raw_set;     /* normalized = false: matched in the raw text */
    tok_added_set norm_set;    /* normalized = true: matched after normalising */

    bool nfc;                  /* normalizer is NFC */
    pcre2_code *split_re;      /* the pre_tokenizer's Split pattern */
    bool split_jit;

    int32_t role_id[ORIN_TOKEN_ROLE_COUNT];
    const char *role_token[ORIN_TOKEN_ROLE_COUNT];
    const char *chat_template;

    /* Scratch and word cache for encode, shared under a lock; a caller that
     * finds it busy makes a private one. Behind a pointer, as the only part
     * that changes after loading. */
    struct tok_shared {
        pthread_mutex_t lock;
        tok_state *state;
    } *shared;

    tok_arena arena;
};

tok_state *tok_state_new(const orin_tokenizer *tok);
void tok_state_free(tok_state *st);
int tok_cache_init(tok_cache *c);
void tok_cache_free(tok_cache *c);
/* BPE of one pre-token (raw bytes), appending ids. */
int tok_bpe_word(const orin_tokenizer *tok, tok_state *st, const unsigned char *w, size_t n, tok_ids *out);

/* Sets up tok->split_re from the file's pattern (Oniguruma syntax). */
int tok_compile_split(orin_tokenizer *tok, const char *pattern, const char *file);
/* Builds the NFC quick-check table (once per process). */
int tok_nfc_init(void);
/* NFC of s[0..n); returns s itself when it is already NFC, else a malloc'd copy
 * (the caller frees when the result differs from s). NULL on failure. */
const char *tok_nfc(const char *s, size_t n, size_t *out_len);

/* Builds an added-token set from tok->added entries whose `normalized` equals
 * want_normalized. */
int tok_added_set_build(orin_tokenizer *tok, tok_added_set *set, bool want_normalized);
void tok_added_set_free(tok_added_set *set);

#endif
