/* The sampler (see orin/sampler.h for the order of the steps). */
#include "orin/sampler.h"
#include "orin/error.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct candidate {
    int32_t id;
    float logit;
} candidate;

struct orin_sampler {
    orin_sampler_params p;
    uint64_t rng[4];          /* xoshiro256** state */
    candidate *cand;          /* scratch, [cap] */
    double *prob;             /* scratch, [cap] */
    uint8_t *seen;            /* scratch, [cap]: history membership */
    int32_t cap;
};

/* ---- random numbers: splitmix64 seeds xoshiro256** ---------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform(orin_sampler *s)
{
    return (double)(xoshiro_next(s->rng) >> 11) * 0x1.0p-53;
}

/* ---- setup ------------------------------------------------------------------------ */

orin_sampler *orin_sampler_create(const orin_sampler_params *p)
{
    if (!(p->temperature >= 0) || p->top_k < 0 || !(p->top_p > 0 && p->top_p <= 1) ||
        !(p->min_p >= 0 && p->min_p < 1) || !(p->repetition_penalty > 0) ||
        !isfinite(p->presence_penalty)) {
        orin_error_set("sampler: parameter out of range (temperature %g, top_k %d, top_p %g, "
                       "min_p %g, repetition_penalty %g)",
                       p->temperature, p->top_k, p->top_p, p->min_p, p->repetition_penalty);
        return NULL;
    }
    orin_sampler *s = calloc(1, sizeof *s);
    if (!s) {
        orin_error_set("sampler: out of memory");
        return NULL;
    }
    s->p = *p;
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    return s;
}

void orin_sampler_free(orin_sampler *s)
{
    if (!s)
        return;
    free(s->cand);
    free(s->prob);
    free(s->seen);
    free(s);
}

static int reserve(orin_sampler *s, int32_t vocab)
{
    if (vocab <= s->cap)
        return 0;
    candidate *c = realloc(s->cand, (size_t)vocab * sizeof *c);
    if (c)
        s->cand = c;
    double *p = realloc(s->prob, (size_t)vocab * sizeof *p);
    if (p)
        s->prob = p;
    uint8_t *seen = realloc(s->seen, (size_t)vocab);
    if (seen)
        s->seen = seen;
    if (!c || !p || !seen)
        return orin_error_set("sampler: out of memory for %d candidates", vocab);
    s->cap = vocab;
    return 0;
}

/* ---- the steps ------------------------------------------------------------------ */

static void apply_penalties(orin_sampler *s, float *logits, int32_t vocab, const int32_t *history,
                            int32_t n)
{
    const float rep = s->p.repetition_penalty, pres = s->p.presence_penalty;
    if ((rep == 1.0f && pres == 0.0f) || n == 0)
        return;
    memset(s->seen, 0, (size_t)vocab);
    for (int32_t i = 0; i < n; i++) {
        int32_t id = history[i];
        if (id < 0 || id >= vocab || s->seen[id])
            continue; /* each distinct token once, as Hugging Face's gather/scatter does */
        s->seen[id] = 1;
        float l = logits[id];
        l = l > 0 ? l / rep : l * rep;
        logits[id] = l - pres;
    }
}

static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
            best = i;
    return best;
}

/* Descending by logit, ascending id on ties (a total order: deterministic). */
static int cmp_candidate(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Moves the k best candidates to the front (unordered): quickselect. */
static void select_top(candidate *c, int32_t n, int32_t k)
{
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        candidate pivot = c[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (cmp_candidate(&c[i], &pivot) < 0)
                i++;
            while (cmp_candidate(&c[j], &pivot) > 0)
                j--;
            if (i <= j) {
                candidate t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
}

/* Steps 3-6: leaves the kept candidates sorted in s->cand[0..*kept) and
 * their normalised probabilities in s->prob. */
static int warp(orin_sampler *s, const float *logits, int32_t vocab, int32_t *kept)
{
    const float inv_t = 1.0f / s->p.temperature;
    int32_t n = 0;
    for (int32_t i = 0; i < vocab; i++)
        if (!isnan(logits[i]))
            s->cand[n++] = (candidate){.id = i, .logit = logits[i] * inv_t};
    if (n == 0)
        return orin_error_set("sampler: every logit is NaN");
    if (s->p.top_k > 0 && s->p.top_k < n) {
        select_top(s->cand, n, s->p.top_k);
        n = s->p.top_k;
    }
    qsort(s->cand, (size_t)n, sizeof *s->cand, cmp_candidate);

    double max = s->cand[0].logit, sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += s->prob[i] = exp((double)s->cand[i].logit - max);
    for (int32_t i = 0; i < n; i++)
        s->prob[i] /= sum;

    if (s->p.top_p < 1.0f) {
        double above = 0;
        int32_t keep = 0;
        while (keep < n && above < s->p.top_p)
            above += s->prob[keep++];
        n = keep;
    }
    if (s->p.min_p > 0) {
        double floor = s->p.min_p * s->prob[0];
        int32_t keep = 1;
        while (keep < n && s->prob[keep] >= floor)
            keep++;
        n = keep;
    }
    sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += s->prob[i];
    for (int32_t i = 0; i < n; i++)
        s->prob[i] /= sum;
    *kept = n;
    return 0;
}

static bool is_greedy(const orin_sampler *s)
{
    return s->p.temperature == 0.0f || s->p.top_k == 1;
}

int orin_sampler_distribution(orin_sampler *s, float *logits, int32_t vocab,
                              const int32_t *history, int32_t n_history, double *probs)
{
    if (vocab < 1 || reserve(s, vocab) != 0)
        return vocab < 1 ? orin_error_set("sampler: empty vocabulary") : -1;
    apply_penalties(s, logits, vocab, history, n_history);
    memset(probs, 0, (size_t)vocab * sizeof *probs);
    if (is_greedy(s)) {
        int32_t best = argmax(logits, vocab);
        if (best < 0)
            return orin_error_set("sampler: every logit is NaN");
        probs[best] = 1;
        return 0;
    }
    int32_t n;
    if (warp(s, logits, vocab, &n) != 0)
        return -1;
    for (int32_t i = 0; i < n; i++)
        probs[s->cand[i].id] = s->prob[i];
    return 0;
}

int32_t orin_sampler_sample(orin_sampler *s, float *logits, int32_t vocab, const int32_t *history,
                            int32_t n_history)
{
    if (vocab < 1)
        return orin_error_set("sampler: empty vocabulary");
    if (reserve(s, vocab) != 0)
        return -1;
    apply_penalties(s, logits, vocab, history, n_history);
    if (is_greedy(s)) {
        int32_t best = argmax(logits, vocab);
        return best >= 0 ? best : orin_error_set("sampler: every logit is NaN");
    }
    int32_t n;
    if (warp(s, logits, vocab, &n) != 0)
        return -1;
    double u = uniform(s), acc = 0;
    for (int32_t i = 0; i < n - 1; i++) {
        acc += s->prob[i];
        if (u < acc)
            return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}
