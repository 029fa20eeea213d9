/* Tokenizer helpers: arena, buffers, hash maps, UTF-8 and the byte-level alphabet. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- arena ---- */

struct tok_arena_chunk {
    tok_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

#define TOK_ARENA_CHUNK (256u * 1024u)

void *tok_arena_alloc(tok_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    tok_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > TOK_ARENA_CHUNK ? size : TOK_ARENA_CHUNK;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

char *tok_arena_strndup(tok_arena *a, const char *s, size_t n)
{
    char *p = tok_arena_alloc(a, n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void tok_arena_free(tok_arena *a)
{
    while (a->head) {
        tok_arena_chunk *next = a->head->next;
        free(a->head);
        a->head = next;
    }
}

/* ---- buffers ---- */

int tok_buf_reserve(tok_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < extra)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int tok_buf_append(tok_buf *b, const void *data, size_t n)
{
    if (!n)
        return 0;
    if (tok_buf_reserve(b, n))
        return -1;
    memcpy(b->data + b->len, data, n);
    b->len += n;
    return 0;
}

int tok_ids_reserve(tok_ids *v, size_t extra)
{
    if (v->cap - v->len >= extra)
        return 0;
    size_t cap = v->cap ? v->cap : 64;
    while (cap - v->len < extra)
        cap *= 2;
    int32_t *p = realloc(v->data, cap * sizeof *p);
    if (!p)
        return -1;
    v->data = p;
    v->cap = cap;
    return 0;
}

/* ---- hashing ---- */

uint64_t tok_hash_bytes(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t v = 0;
        memcpy(&v, p, n);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 29;
    }
    return tok_mix64(h);
}

static size_t table_size_for(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

int tok_strmap_init(tok_strmap *m, size_t n_keys, const char *const *keys, const uint32_t *lens)
{
    size_t cap = table_size_for(n_keys);
    *m = (tok_strmap){
        .slots = calloc(cap, sizeof *m->slots),
        .mask = cap - 1,
        .keys = keys,
        .lens = lens,
    };
    return m->slots ? 0 : -1;
}

int64_t tok_strmap_insert(tok_strmap *m, uint32_t i)
{
    uint64_t h = tok_hash_bytes(m->keys[i], m->lens[i]);
    uint32_t tag = (uint32_t)h;
    for (size_t s = (h >> 32) & m->mask;; s = (s + 1) & m->mask) {
        tok_strmap_slot *slot = &m->slots[s];
        if (!slot->index) {
            *slot = (tok_strmap_slot){.index = i + 1, .tag = tag};
            return -1;
        }
        uint32_t at = slot->index - 1;
        if (slot->tag == tag && m->lens[at] == m->lens[i] && !memcmp(m->keys[at], m->keys[i], m->lens[i]))
            return at;
    }
}

int64_t tok_strmap_find(const tok_strmap *m, const char *key, size_t len)
{
    if (!m->slots)
        return -1;
    uint64_t h = tok_hash_bytes(key, len);
    uint32_t tag = (uint32_t)h;
    for (size_t s = (h >> 32) & m->mask;; s = (s + 1) & m->mask) {
        const tok_strmap_slot *slot = &m->slots[s];
        if (!slot->index)
            return -1;
        uint32_t at = slot->index - 1;
        if (slot->tag == tag && m->lens[at] == len && !memcmp(m->keys[at], key, len))
            return at;
    }
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->slots);
    m->slots = NULL;
}

int tok_mergemap_init(tok_mergemap *m, size_t n)
{
    size_t cap = table_size_for(n);
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots)
        return -1;
    for (size_t i = 0; i < cap; i++)
        m->slots[i].key = UINT64_MAX;
    m->mask = cap - 1;
    m->count = 0;
    return 0;
}

void tok_mergemap_put(tok_mergemap *m, int32_t left, int32_t right, uint32_t rank, int32_t merged)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (size_t i = tok_mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        tok_merge_slot *s = &m->slots[i];
        if (s->key == UINT64_MAX)
            m->count++;
        else if (s->key != key)
            continue;
        *s = (tok_merge_slot){.key = key, .rank = rank, .merged = merged};
        return;
    }
}

void tok_mergemap_free(tok_mergemap *m)
{
    free(m->slots);
    m->slots = NULL;
}

/* ---- UTF-8 ---- */

size_t tok_utf8_step(const unsigned char *s, size_t n, bool *valid, bool *incomplete)
{
    unsigned c = s[0];
    unsigned lo = 0x80, hi = 0xBF;
    size_t need;

    *valid = true;
    *incomplete = false;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c == 0xE0) {
        need = 2;
        lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
        need = 2;
    } else if (c == 0xED) { /* no surrogates */
        need = 2;
        hi = 0x9F;
    } else if (c == 0xF0) {
        need = 3;
        lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
        need = 3;
    } else if (c == 0xF4) { /* nothing above U+10FFFF */
        need = 3;
        hi = 0x8F;
    } else {
        *valid = false; /* 80..C1, F5..FF never start a character */
        return 1;
    }
    for (size_t i = 1; i <= need; i++) {
        if (i >= n) {
            *valid = false;
            *incomplete = true;
            return i;
        }
        if (s[i] < lo || s[i] > hi) {
            *valid = false;
            return i;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return need + 1;
}

size_t tok_utf8_valid_prefix(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        /* ASCII eight bytes at a time. */
        while (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (v & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        bool valid, incomplete;
        size_t step = tok_utf8_step(s + i, n - i, &valid, &incomplete);
        if (!valid)
            break;
        i += step;
    }
    return i;
}

int tok_utf8_append_lossy(tok_buf *out, const unsigned char *in, size_t n, bool hold_tail, size_t *held)
{
    size_t i = 0;
    if (held)
        *held = 0;
    while (i < n) {
        size_t good = tok_utf8_valid_prefix(in + i, n - i);
        if (tok_buf_append(out, in + i, good))
            return -1;
        i += good;
        if (i >= n)
            break;
        bool valid, incomplete;
        size_t step = tok_utf8_step(in + i, n - i, &valid, &incomplete);
        if (incomplete && hold_tail) {
            if (held)
                *held = n - i;
            break;
        }
        if (tok_buf_append(out, TOK_REPLACEMENT, 3))
            return -1;
        i += step;
    }
    return 0;
}

char *orin_utf8_sanitize(const char *in, size_t len, size_t *out_len)
{
    tok_buf out = {0};
    if (tok_buf_reserve(&out, len + 1) || tok_utf8_append_lossy(&out, (const unsigned char *)in, len, false, NULL) ||
        tok_buf_append(&out, "", 1)) {
        free(out.data);
        return NULL;
    }
    if (out_len)
        *out_len = out.len - 1;
    return out.data;
}

size_t tok_utf8_decode(const unsigned char *s, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0) {
        *cp = (c & 0x1F) << 6 | (s[1] & 0x3F);
        return 2;
    }
    if (c < 0xF0) {
        *cp = (c & 0x0F) << 12 | (s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        return 3;
    }
    *cp = (c & 0x07) << 18 | (s[1] & 0x3F) << 12 | (s[2] & 0x3F) << 6 | (s[3] & 0x3F);
    return 4;
}

size_t tok_utf8_encode(uint32_t cp, unsigned char *o)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- character classes (Unicode facts, not tokenizer settings) ---- */

bool tok_is_whitespace(uint32_t cp)
{
    if (cp <= 0x20)
        return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85)
        return false;
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* Used only for single_word added tokens. Follows utf8proc's Unicode version
 * (15.0); characters added in 15.1 and 16.0 count as non-word here. */
bool tok_is_word_char(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    if (cp == 0x200C || cp == 0x200D)
        return true;
    /* Letter-like symbols that Unicode counts as Alphabetic. */
    if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
        (cp >= 0x1F170 && cp <= 0x1F189))
        return true;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves; the
 * other 68 (0-32, 127-160, 173) take U+0100.. in byte order. */
static bool byte_is_printable(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
}

uint32_t tok_byte_to_cp(uint8_t b)
{
    if (byte_is_printable(b))
        return b;
    if (b <= 32)
        return 256 + b;
    if (b <= 160)
        return 256 + 33 + (b - 127);
    return 256 + 67; /* 173 */
}

int tok_cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return byte_is_printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68)
        return -1;
    unsigned i = cp - 256;
    if (i < 33)
        return (int)i;
    if (i < 67)
        return (int)(127 + i - 33);
    return 173;
}
