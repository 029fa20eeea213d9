/* Byte-level BPE of one pre-token, with a per-state word cache.
 *
 * The merge order is Hugging Face's: repeatedly merge the adjacent pair with the
 * lowest rank, the leftmost one on a tie. Short words use a flat array (a scan
 * per merge is cheaper than a heap for a handful of symbols); long ones (a run
 * of 100k spaces is one pre-token) use a min-heap over (rank, position) with a
 * linked list of symbols, so that cost stays O(n log n). */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

#include "orin/error.h"

#define TOK_SMALL_WORD 48          /* longest word merged with the flat-array loop */
#define TOK_CACHE_MAX_WORD 255     /* longer words are not cached */
#define TOK_CACHE_SLOTS (1u << 16) /* cleared when 3/4 full */
#define TOK_CACHE_BYTES (8u << 20) /* ... or when the stored keys pass this */

/* ---- cache ---- */

int tok_cache_init(tok_cache *c)
{
    *c = (tok_cache){.slots = calloc(TOK_CACHE_SLOTS, sizeof *c->slots), .mask = TOK_CACHE_SLOTS - 1};
    return c->slots ? 0 : -1;
}

void tok_cache_free(tok_cache *c)
{
    free(c->slots);
    free(c->keys.data);
    free(c->ids.data);
    *c = (tok_cache){0};
}

static void cache_clear(tok_cache *c)
{
    memset(c->slots, 0, (c->mask + 1) * sizeof *c->slots);
    c->count = 0;
    c->keys.len = 0;
    c->ids.len = 0;
}

static uint64_t cache_hash(const unsigned char *w, size_t n)
{
    uint64_t h = tok_hash_bytes(w, n);
    return h ? h : 1; /* 0 marks an empty slot */
}

static const tok_cache_slot *cache_find(const tok_cache *c, uint64_t h, const unsigned char *w, size_t n)
{
    for (size_t i = h & c->mask;; i = (i + 1) & c->mask) {
        const tok_cache_slot *s = &c->slots[i];
        if (!s->hash)
            return NULL;
        if (s->hash == h && s->key_len == n && !memcmp(c->keys.data + s->key_off, w, n))
            return s;
    }
}

static void cache_put(tok_cache *c, uint64_t h, const unsigned char *w, size_t n, const int32_t *ids, size_t n_ids)
{
    if (c->count + 1 > (c->mask + 1) / 4 * 3 || c->keys.len > TOK_CACHE_BYTES)
        cache_clear(c);
    if (tok_buf_reserve(&c->keys, n) || tok_ids_reserve(&c->ids, n_ids))
        return; /* the cache is an optimisation: no memory, no entry */
    size_t i = h & c->mask;
    while (c->slots[i].hash)
        i = (i + 1) & c->mask;
    c->slots[i] = (tok_cache_slot){
        .hash = h,
        .key_off = (uint32_t)c->keys.len,
        .ids_off = (uint32_t)c->ids.len,
        .key_len = (uint16_t)n,
        .n_ids = (uint16_t)n_ids,
    };
    memcpy(c->keys.data + c->keys.len, w, n);
    c->keys.len += n;
    memcpy(c->ids.data + c->ids.len, ids, n_ids * sizeof *ids);
    c->ids.len += n_ids;
    c->count++;
}

/* ---- work arrays ---- */

static int reserve_work(tok_state *st, size_t n)
{
    if (n <= st->cap)
        return 0;
    size_t cap = st->cap ? st->cap : 256;
    while (cap < n)
        cap *= 2;
    int32_t *sym = realloc(st->sym, cap * sizeof *sym);
    if (sym)
        st->sym = sym;
    int32_t *merged = realloc(st->merged, cap * sizeof *merged);
    if (merged)
        st->merged = merged;
    uint32_t *rank = realloc(st->rank, cap * sizeof *rank);
    if (rank)
        st->rank = rank;
    int32_t *prev = realloc(st->prev, cap * sizeof *prev);
    if (prev)
        st->prev = prev;
    int32_t *next = realloc(st->next, cap * sizeof *next);
    if (next)
        st->next = next;
    uint64_t *heap = realloc(st->heap, 3 * cap * sizeof *heap);
    if (heap)
        st->heap = heap;
    if (!sym || !merged || !rank || !prev || !next || !heap)
        return -1;
    st->cap = cap;
    return 0;
}

/* ---- merging ---- */

static inline void pair_rank(const orin_tokenizer *tok, int32_t left, int32_t right, uint32_t *rank, int32_t *merged)
{
    const tok_merge_slot *s = tok_mergemap_get(&tok->merges, left, right);
    *rank = s ? s->rank : UINT32_MAX;
    *merged = s ? s->merged : -1;
}

/* Flat array: O(n^2) in the worst case, fastest for short words. Leaves the
 * result in st->sym and returns its length. */
static size_t merge_small(const orin_tokenizer *tok, tok_state *st, const unsigned char *w, size_t n)
{
    int32_t *sym = st->sym, *merged = st->merged;
    uint32_t *rank = st->rank;
    size_t m = n;

    for (size_t i = 0; i < n; i++)
        sym[i] = tok->byte_id[w[i]];
    for (size_t i = 0; i + 1 < m; i++)
        pair_rank(tok, sym[i], sym[i + 1], &rank[i], &merged[i]);

    while (m > 1) {
        uint32_t best = UINT32_MAX;
        size_t at = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            if (rank[i] < best) {
                best = rank[i];
                at = i;
            }
        }
        if (best == UINT32_MAX)
            break;
        sym[at] = merged[at];
        size_t tail = m - at - 2;
        memmove(sym + at + 1, sym + at + 2, tail * sizeof *sym);
        memmove(rank + at + 1, rank + at + 2, tail * sizeof *rank);
        memmove(merged + at + 1, merged + at + 2, tail * sizeof *merged);
        m--;
        if (at > 0)
            pair_rank(tok, sym[at - 1], sym[at], &rank[at - 1], &merged[at - 1]);
        if (at + 1 < m)
            pair_rank(tok, sym[at], sym[at + 1], &rank[at], &merged[at]);
    }
    return m;
}

/* Min-heap of (rank << 32 | position): the lowest rank, then the leftmost. */
static void heap_push(uint64_t *heap, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i) {
        size_t parent = (i - 1) / 2;
        if (heap[parent] <= v)
            break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = v;
}

static uint64_t heap_pop(uint64_t *heap, size_t *n)
{
    uint64_t top = heap[0], last = heap[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *n)
            break;
        if (child + 1 < *n && heap[child + 1] < heap[child])
            child++;
        if (heap[child] >= last)
            break;
        heap[i] = heap[child];
        i = child;
    }
    if (*n)
        heap[i] = last;
    return top;
}

/* Looks up the pair that starts at pos, remembers it there and queues it. */
static void queue_pair(const orin_tokenizer *tok, tok_state *st, size_t *heap_n, int32_t pos)
{
    int32_t right = st->next[pos];
    st->rank[pos] = UINT32_MAX;
    if (right < 0)
        return;
    pair_rank(tok, st->sym[pos], st->sym[right], &st->rank[pos], &st->merged[pos]);
    if (st->rank[pos] != UINT32_MAX)
        heap_push(st->heap, heap_n, (uint64_t)st->rank[pos] << 32 | (uint32_t)pos);
}

/* Heap and linked list: O(n log n). Leaves the result in st->sym[0..m). */
static size_t merge_large(const orin_tokenizer *tok, tok_state *st, const unsigned char *w, size_t n)
{
    int32_t *sym = st->sym, *prev = st->prev, *next = st->next;
    size_t heap_n = 0;

    for (size_t i = 0; i < n; i++) {
        sym[i] = tok->byte_id[w[i]];
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i < n; i++)
        queue_pair(tok, st, &heap_n, (int32_t)i);

    while (heap_n) {
        uint64_t top = heap_pop(st->heap, &heap_n);
        int32_t pos = (int32_t)(uint32_t)top;
        /* Stale when pos is gone or its pair changed since it was queued:
         * ranks are unique per pair, so an equal rank means the same pair. */
        if (sym[pos] < 0 || st->rank[pos] != (uint32_t)(top >> 32))
            continue;
        int32_t right = next[pos];
        sym[pos] = st->merged[pos];
        sym[right] = -1;
        next[pos] = next[right];
        if (next[right] >= 0)
            prev[next[right]] = pos;
        if (prev[pos] >= 0)
            queue_pair(tok, st, &heap_n, prev[pos]);
        queue_pair(tok, st, &heap_n, pos);
    }

    size_t m = 0;
    for (int32_t i = 0; i >= 0; i = next[i])
        sym[m++] = sym[i];
    return m;
}

int tok_bpe_word(const orin_tokenizer *tok, tok_state *st, const unsigned char *w, size_t n, tok_ids *out)
{
    if (n == 0)
        return 0;
    if (n > INT32_MAX)
        return orin_error_set("tokenizer: a %zu-byte pre-token is too long", n);
    if (n == 1)
        return tok_ids_push(out, tok->byte_id[w[0]]);
    if (tok->ignore_merges) {
        int64_t id = tok_strmap_find(&tok->word_map, (const char *)w, n);
        if (id >= 0)
            return tok_ids_push(out, (int32_t)id);
    }

    uint64_t h = 0;
    if (n <= TOK_CACHE_MAX_WORD) {
        h = cache_hash(w, n);
        const tok_cache_slot *hit = cache_find(&st->cache, h, w, n);
        if (hit) {
            if (tok_ids_reserve(out, hit->n_ids))
                return orin_error_set("tokenizer: out of memory");
            memcpy(out->data + out->len, st->cache.ids.data + hit->ids_off, hit->n_ids * sizeof(int32_t));
            out->len += hit->n_ids;
            return 0;
        }
    }

    if (reserve_work(st, n) || tok_ids_reserve(out, n))
        return orin_error_set("tokenizer: out of memory for a %zu-byte word", n);
    size_t m = n <= TOK_SMALL_WORD ? merge_small(tok, st, w, n) : merge_large(tok, st, w, n);
    memcpy(out->data + out->len, st->sym, m * sizeof(int32_t));
    out->len += m;
    if (h)
        cache_put(&st->cache, h, w, n, st->sym, m);
    return 0;
}
