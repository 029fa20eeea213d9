/* Token sampling: penalties, temperature, top-k, top-p, min-p and a seeded
 * draw, in Hugging Face's order (see orin/sampler.h for the steps). */
#include "orin/sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "orin/error.h"

/* A token still in the running: its scaled logit and, once known, its
 * weight exp(s - s_max) (the softmax before normalisation). */
struct cand {
    float s;
    int32_t id;
    double w;
};

struct orin_sampler {
    orin_sampler_params p;
    uint64_t rng[4];     /* xoshiro256** state */
    int32_t cap;         /* the scratch arrays hold this many tokens */
    uint8_t *seen;       /* [cap] marks distinct history tokens; all 0 between calls */
    struct cand *cands;  /* [cap] candidates after top-k */
    struct cand *kept;   /* [cap] candidates after top-p and min-p */
};

/* ---- random numbers: splitmix64 seeds xoshiro256** ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro256ss(uint64_t st[4])
{
    uint64_t result = rotl(st[1] * 5, 7) * 9;
    uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl(st[3], 45);
    return result;
}

/* Uniform in [0, 1) from the top 53 bits. */
static double uniform(orin_sampler *s)
{
    return (double)(xoshiro256ss(s->rng) >> 11) * 0x1.0p-53;
}

void orin_sampler_seed(orin_sampler *s, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
}

/* ---- setup ---- */

static int check_params(const orin_sampler_params *p)
{
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return orin_error_set("sampler: temperature %g must be >= 0 and finite",
                              (double)p->temperature);
    if (p->top_k < 0)
        return orin_error_set("sampler: top_k %d must be >= 0", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return orin_error_set("sampler: top_p %g is not in (0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return orin_error_set("sampler: min_p %g is not in [0, 1]", (double)p->min_p);
    if (!(p->repetition_penalty > 0.0f) || isinf(p->repetition_penalty))
        return orin_error_set("sampler: repetition_penalty %g must be > 0 and finite",
                              (double)p->repetition_penalty);
    if (!isfinite(p->presence_penalty))
        return orin_error_set("sampler: presence_penalty %g must be finite",
                              (double)p->presence_penalty);
    return 0;
}

orin_sampler *orin_sampler_create(const orin_sampler_params *p)
{
    if (!p) {
        orin_error_set("sampler: no parameters");
        return NULL;
    }
    if (check_params(p))
        return NULL;
    orin_sampler *s = calloc(1, sizeof *s);
    if (!s) {
        orin_error_set("sampler: out of memory");
        return NULL;
    }
    s->p = *p;
    orin_sampler_seed(s, p->seed);
    return s;
}

const orin_sampler_params *orin_sampler_get_params(const orin_sampler *s)
{
    return &s->p;
}

void orin_sampler_free(orin_sampler *s)
{
    if (!s)
        return;
    free(s->seen);
    free(s->cands);
    free(s->kept);
    free(s);
}

static int reserve(orin_sampler *s, int32_t vocab)
{
    if (vocab < 1)
        return orin_error_set("sampler: vocabulary size %d must be >= 1", vocab);
    if (vocab <= s->cap)
        return 0;
    uint8_t *seen = calloc((size_t)vocab, 1);
    struct cand *cands = malloc((size_t)vocab * sizeof *cands);
    struct cand *kept = malloc((size_t)vocab * sizeof *kept);
    if (!seen || !cands || !kept) {
        free(seen);
        free(cands);
        free(kept);
        return orin_error_set("sampler: out of memory for a vocabulary of %d", vocab);
    }
    free(s->seen);
    free(s->cands);
    free(s->kept);
    s->seen = seen;
    s->cands = cands;
    s->kept = kept;
    s->cap = vocab;
    return 0;
}

/* ---- steps 1-3 ---- */

void orin_sampler_penalize(float *logits, int32_t vocab, const int32_t *history, int32_t n,
                           float repetition, float presence, uint8_t *seen)
{
    if (n <= 0 || (repetition == 1.0f && presence == 0.0f))
        return;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = history[i];
        if (t < 0 || t >= vocab || seen[t])
            continue;
        seen[t] = 1;
        float x = logits[t];
        if (repetition != 1.0f)
            x = x > 0 ? x / repetition : x * repetition;
        logits[t] = x - presence;
    }
    for (int32_t i = 0; i < n; i++)
        if (history[i] >= 0 && history[i] < vocab)
            seen[history[i]] = 0;
}

static void apply_penalties(orin_sampler *s, float *logits, int32_t vocab, const int32_t *history,
                            int32_t n)
{
    orin_sampler_penalize(logits, vocab, history, n, s->p.repetition_penalty,
                          s->p.presence_penalty, s->seen);
}

/* The lowest id of the largest logit, NaN skipped; -1 when all are NaN. */
static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
            best = i;
    return best;
}

static bool is_greedy(const orin_sampler *s)
{
    return s->p.temperature == 0.0f || s->p.top_k == 1;
}

bool orin_sampler_plain_greedy(const orin_sampler *s)
{
    return is_greedy(s) && s->p.repetition_penalty == 1.0f && s->p.presence_penalty == 0.0f;
}

/* ---- steps 4-6 ---- */

/* Heaps of struct cand: a max-heap when `max` (larger s first, then the lower
 * id, so that top-p breaks ties the same way everywhere), else a min-heap on s. */
static bool above(const struct cand *a, const struct cand *b, bool max)
{
    if (max)
        return a->s > b->s || (a->s == b->s && a->id < b->id);
    return a->s < b->s;
}

static void sift_down(struct cand *h, size_t n, size_t i, bool max)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, top = i;
        if (l < n && above(&h[l], &h[top], max))
            top = l;
        if (r < n && above(&h[r], &h[top], max))
            top = r;
        if (top == i)
            return;
        struct cand t = h[i];
        h[i] = h[top];
        h[top] = t;
        i = top;
    }
}

static void sift_up(struct cand *h, size_t i, bool max)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!above(&h[i], &h[parent], max))
            return;
        struct cand t = h[i];
        h[i] = h[parent];
        h[parent] = t;
        i = parent;
    }
}

/* Step 4's cut, from the k-th largest raw logit `kth` (-INFINITY: no cut):
 * x -> x / T is monotonic, so the k-th largest scaled logit is kth / T, and a
 * token stays when its scaled logit is >= that. Raw values a little below kth
 * may divide to the same scaled value (HF keeps those ties): the prefilter
 * bounds how far below to look. */
struct top_k_cut {
    float t, threshold, prefilter;
};

static struct top_k_cut top_k_cut(float t, float kth)
{
    struct top_k_cut cut = {.t = t, .threshold = -INFINITY, .prefilter = -INFINITY};
    if (kth > -INFINITY) {
        cut.threshold = kth / t;
        cut.prefilter = kth - fabsf(kth) * 0x1p-16f - 0x1p-126f;
    }
    return cut;
}

/* Whether raw logit x survives temperature and top-k; *scaled gets x / T.
 * Monotonic in x: if x survives, so does every larger x. */
static bool top_k_keeps(const struct top_k_cut *cut, float x, float *scaled)
{
    if (!(x >= cut->prefilter)) /* also skips NaN */
        return false;
    *scaled = x / cut->t;
    return *scaled >= cut->threshold && *scaled > -INFINITY;
}

/* The k-th largest logit (NaN skipped) from a min-heap of the k largest over
 * one pass (s->cands as the heap); -INFINITY when top_k is off or fewer than k
 * logits are numbers. Partial selection: no sort of the vocabulary. */
static float kth_largest(orin_sampler *s, const float *logits, int32_t vocab)
{
    int32_t k = s->p.top_k;
    if (k <= 0 || k >= vocab)
        return -INFINITY;
    struct cand *c = s->cands;
    size_t n = 0;
    for (int32_t i = 0; i < vocab; i++) {
        float x = logits[i];
        if (isnan(x))
            continue;
        if (n < (size_t)k) {
            c[n] = (struct cand){.s = x, .id = i};
            sift_up(c, n++, false);
        } else if (x > c[0].s) {
            c[0] = (struct cand){.s = x, .id = i};
            sift_down(c, n, 0, false);
        }
    }
    return n == (size_t)k ? c[0].s : -INFINITY;
}

/* Temperature and top-k: s->cands gets the surviving tokens, in id order,
 * with their scaled logits. */
static int32_t candidates(orin_sampler *s, const float *logits, int32_t vocab)
{
    struct top_k_cut cut = top_k_cut(s->p.temperature, kth_largest(s, logits, vocab));
    struct cand *c = s->cands;
    int32_t n = 0;
    for (int32_t i = 0; i < vocab; i++) {
        float x;
        if (top_k_keeps(&cut, logits[i], &x))
            c[n++] = (struct cand){.s = x, .id = i};
    }
    if (!n)
        return orin_error_set("sampler: no logit is finite (all -inf or NaN)");
    return n;
}

/* Steps 5-6 on s->cands[0..n) (id order): s->kept[0..return) with their
 * weights. */
static int32_t filter_tokens(orin_sampler *s, int32_t n)
{
    struct cand *c = s->cands, *kept = s->kept;
    float s_max = c[0].s;
    for (int32_t i = 1; i < n; i++)
        if (c[i].s > s_max)
            s_max = c[i].s;
    if (s->p.top_p == 1.0f && s->p.min_p > 0.0f && s_max < INFINITY) {
        /* min_p alone: drop p < min_p * p_max, i.e. s < s_max + log(min_p),
         * before paying for the exponentials (a margin, then the exact test). */
        float cut = s_max + logf(s->p.min_p) - 1e-3f;
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].s >= cut)
                c[m++] = c[i];
        n = m;
    }
    double total = 0;
    for (int32_t i = 0; i < n; i++) {
        /* With +inf logits, the limit of the softmax: uniform over them. */
        c[i].w = s_max == INFINITY ? (c[i].s == INFINITY) : expf(c[i].s - s_max);
        total += c[i].w;
    }
    int32_t nk = 0;
    if (s->p.top_p < 1.0f) {
        /* Pop in descending order; keep a token while the mass ranked above
         * it is below top_p (the first one always). */
        double limit = (double)s->p.top_p * total, mass = 0;
        size_t h = (size_t)n;
        for (size_t i = h / 2; i-- > 0;)
            sift_down(c, h, i, true);
        while (h > 0 && (nk == 0 || mass < limit)) {
            kept[nk++] = c[0];
            mass += c[0].w;
            c[0] = c[--h];
            sift_down(c, h, 0, true);
        }
    } else {
        memcpy(kept, c, (size_t)n * sizeof *c);
        nk = n;
    }
    if (s->p.min_p > 0.0f) {
        /* probability / largest probability is w: the largest has w = 1. */
        double min_p = s->p.min_p;
        int32_t m = 0;
        for (int32_t i = 0; i < nk; i++)
            if (kept[i].w >= min_p)
                kept[m++] = kept[i];
        nk = m;
    }
    return nk;
}

/* Steps 3-6 on the whole vocabulary: s->kept[0..return) with their weights. */
static int32_t select_tokens(orin_sampler *s, const float *logits, int32_t vocab)
{
    int32_t n = candidates(s, logits, vocab);
    return n < 0 ? -1 : filter_tokens(s, n);
}

/* Step 7: the first kept token whose cumulative weight passes u * total; kept
 * tokens of weight 0 (exp underflow) can never be drawn. */
static int32_t draw(orin_sampler *s, int32_t n)
{
    double total = 0;
    for (int32_t i = 0; i < n; i++)
        total += s->kept[i].w;
    double u = uniform(s) * total, acc = 0;
    int32_t last = 0;
    for (int32_t i = 0; i < n; i++) {
        if (s->kept[i].w <= 0)
            continue;
        acc += s->kept[i].w;
        last = i;
        if (u < acc)
            return s->kept[i].id;
    }
    return s->kept[last].id; /* u * total rounded up to the total */
}

/* ---- entry points ---- */

int orin_sampler_distribution(orin_sampler *s, float *logits, int32_t vocab,
                              const int32_t *history, int32_t n_history, double *probs)
{
    if (reserve(s, vocab) != 0)
        return -1;
    apply_penalties(s, logits, vocab, history, n_history);
    memset(probs, 0, (size_t)vocab * sizeof *probs);
    if (is_greedy(s)) {
        int32_t best = argmax(logits, vocab);
        if (best < 0)
            return orin_error_set("sampler: every logit is NaN");
        probs[best] = 1.0;
        return 0;
    }
    int32_t n = select_tokens(s, logits, vocab);
    if (n < 0)
        return -1;
    double total = 0;
    for (int32_t i = 0; i < n; i++)
        total += s->kept[i].w;
    for (int32_t i = 0; i < n; i++)
        probs[s->kept[i].id] = s->kept[i].w / total;
    return 0;
}

int32_t orin_sampler_sample(orin_sampler *s, float *logits, int32_t vocab, const int32_t *history,
                            int32_t n_history)
{
    if (reserve(s, vocab) != 0)
        return -1;
    apply_penalties(s, logits, vocab, history, n_history);
    if (is_greedy(s)) {
        int32_t best = argmax(logits, vocab);
        return best >= 0 ? best : orin_error_set("sampler: every logit is NaN");
    }
    int32_t n = select_tokens(s, logits, vocab);
    return n < 0 ? -1 : draw(s, n);
}

/* ---- finishing on the candidates of sample.candidates ---- */

int32_t orin_sampler_candidates_top_k(const orin_sampler *s, int32_t max)
{
    if (is_greedy(s))
        return max >= 1 ? 1 : 0;
    int32_t k = s->p.top_k;
    if (k < 1 || k > max)
        return 0;
    int32_t room = (max - k) / 2;
    return k + (room < k ? room : k);
}

static int by_id(const void *a, const void *b)
{
    int32_t x = ((const struct cand *)a)->id, y = ((const struct cand *)b)->id;
    return (x > y) - (x < y);
}

static int by_value_desc(const void *a, const void *b)
{
    float x = ((const struct cand *)a)->s, y = ((const struct cand *)b)->s;
    return (x < y) - (x > y);
}

/* The op's list in s->cands (raw penalised logits, id order) and its sorted
 * copy in s->kept (descending); checks what the op promises. */
static int load_candidates(orin_sampler *s, const orin_sampler_candidates *c)
{
    int32_t n = c->count;
    if (reserve(s, n) != 0)
        return -1;
    for (int32_t i = 0; i < n; i++) {
        if (c->ids[i] < 0 || c->ids[i] >= c->vocab || isnan(c->values[i]))
            return orin_error_set("sampler: candidate %d is (%d, %g): not a token of the "
                                  "vocabulary (%d) with a logit", i, c->ids[i],
                                  (double)c->values[i], c->vocab);
        s->cands[i] = (struct cand){.s = c->values[i], .id = c->ids[i]};
    }
    qsort(s->cands, (size_t)n, sizeof *s->cands, by_id);
    for (int32_t i = 1; i < n; i++)
        if (s->cands[i].id == s->cands[i - 1].id)
            return orin_error_set("sampler: candidate id %d appears twice", s->cands[i].id);
    memcpy(s->kept, s->cands, (size_t)n * sizeof *s->cands);
    qsort(s->kept, (size_t)n, sizeof *s->kept, by_value_desc);
    return 0;
}

/* Greedy on the candidates: the largest, lowest id on ties (as argmax). */
static int32_t finish_greedy(const orin_sampler_candidates *c)
{
    int32_t best = -1;
    for (int32_t i = 0; i < c->count; i++) {
        float v = c->values[i];
        if (best < 0 || v > c->values[best] || (v == c->values[best] && c->ids[i] < c->ids[best]))
            best = i;
    }
    return c->ids[best];
}

/* Step 4 on the candidates: s->cands (id order) keeps what candidates() keeps
 * on the whole vocabulary; returns how many, or ORIN_SAMPLER_NEED_LOGITS when
 * a logit the op left out could be kept.
 *
 * The op wrote every logit >= the smallest it wrote, b (ties included), or,
 * when it wrote fewer than it was asked for, every logit that is a number
 * ("whole"). The host cut needs the k-th largest: known when k <= count.
 * A left-out logit is < b, and top_k_keeps is monotonic, so none of them is
 * kept when the float just below b is not. That fails only when b lies within
 * an ulp or two of the cut after dividing by T (ask the op for more than top_k:
 * orin_sampler_candidates_top_k), or when the host keeps everything. */
static int32_t finish_candidates(orin_sampler *s, const orin_sampler_candidates *c)
{
    int32_t n = c->count, k = s->p.top_k;
    bool whole = n < c->top_k || n == c->vocab;
    bool cut = k > 0 && k < c->vocab && k <= n;
    if (!cut && !whole)
        return ORIN_SAMPLER_NEED_LOGITS;
    struct top_k_cut tc = top_k_cut(s->p.temperature, cut ? s->kept[k - 1].s : -INFINITY);
    float scaled;
    if (!whole && top_k_keeps(&tc, nextafterf(s->kept[n - 1].s, -INFINITY), &scaled))
        return ORIN_SAMPLER_NEED_LOGITS;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (top_k_keeps(&tc, s->cands[i].s, &scaled))
            s->cands[m++] = (struct cand){.s = scaled, .id = s->cands[i].id};
    if (!m)
        return orin_error_set("sampler: no logit is finite (all -inf or NaN)");
    return m;
}

int32_t orin_sampler_finish(orin_sampler *s, const orin_sampler_candidates *c)
{
    if (!c || c->vocab < 1 || c->top_k < 1 || c->count < 0 || c->max < 0 ||
        (c->count > 0 && (!c->values || !c->ids)))
        return orin_error_set("sampler: finish: bad candidates (count %d, max %d, top_k %d, "
                              "vocabulary %d)", c ? c->count : 0, c ? c->max : 0,
                              c ? c->top_k : 0, c ? c->vocab : 0);
    if (c->count > c->max)
        return ORIN_SAMPLER_NEED_LOGITS; /* the ties did not fit */
    if (c->count == 0) /* every logit is NaN */
        return is_greedy(s) ? orin_error_set("sampler: every logit is NaN")
                            : orin_error_set("sampler: no logit is finite (all -inf or NaN)");
    if (load_candidates(s, c) != 0)
        return -1;
    if (is_greedy(s))
        return finish_greedy(c);
    int32_t n = finish_candidates(s, c);
    if (n < 0)
        return n;
    return draw(s, filter_tokens(s, n));
}
