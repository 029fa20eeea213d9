/* sampler.*: the token sampler (core/src/model/sampler.c).
 *
 *   greedy   temperature 0 and top_k 1 are the argmax (lowest id on ties, NaN skipped)
 *   seed     the same seed gives the same tokens; the draw is splitmix64 +
 *            xoshiro256** as documented (checked with an independent copy of the
 *            reference algorithms and splitmix64's known first output)
 *   masks    top_k / top_p / min_p / temperature on hand-worked examples
 *   penalty  repetition and presence penalties on known values
 *   chi2     200k draws per configuration against the exact distribution
 *            (chi-square below the 0.999 quantile), and against a wrong one
 *            (chi-square far above it: the test can fail)
 *   large    a 152k vocabulary: the distribution equals a full-sort
 *            reference, and the time per token */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "orin/error.h"
#include "orin/sampler.h"
#include "test_util.h"

static orin_sampler_params params(float t, int32_t k, float p, float min_p)
{
    orin_sampler_params sp = ORIN_SAMPLER_PARAMS_DEFAULT;
    sp.temperature = t;
    sp.top_k = k;
    sp.top_p = p;
    sp.min_p = min_p;
    return sp;
}

/* Sampling modifies its logits (scratch): work on a copy. */
static int32_t sample_copy(orin_sampler *s, const float *logits, int32_t v, const int32_t *hist,
                           int32_t nh)
{
    float *tmp = malloc((size_t)v * sizeof *tmp);
    memcpy(tmp, logits, (size_t)v * sizeof *tmp);
    int32_t id = orin_sampler_sample(s, tmp, v, hist, nh);
    free(tmp);
    return id;
}

static int dist_copy(orin_sampler *s, const float *logits, int32_t v, const int32_t *hist,
                     int32_t nh, double *probs)
{
    float *tmp = malloc((size_t)v * sizeof *tmp);
    memcpy(tmp, logits, (size_t)v * sizeof *tmp);
    int rc = orin_sampler_distribution(s, tmp, v, hist, nh, probs);
    free(tmp);
    return rc;
}

/* A deterministic generator for test inputs (not the sampler's). */
static uint64_t lcg = 12345;
static double frand(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) * 0x1.0p-53;
}

/* ---- an independent reference: HF's steps with a full sort ---- */

static int32_t order_v;
static const double *order_s;
static int by_score_desc(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (order_s[x] != order_s[y])
        return order_s[x] < order_s[y] ? 1 : -1;
    return (x > y) - (x < y);
}

static void reference(const float *logits, int32_t v, const orin_sampler_params *p,
                      const int32_t *hist, int32_t nh, double *probs)
{
    double *l = malloc((size_t)v * sizeof *l), *s = malloc((size_t)v * sizeof *s);
    int32_t *idx = malloc((size_t)v * sizeof *idx);
    bool *keep = calloc((size_t)v, sizeof *keep);
    for (int32_t i = 0; i < v; i++)
        l[i] = logits[i];
    /* Penalties: each distinct history token once. */
    for (int32_t i = 0; i < nh; i++) {
        int32_t t = hist[i];
        bool dup = false;
        for (int32_t j = 0; j < i; j++)
            dup |= hist[j] == t;
        if (dup || t < 0 || t >= v)
            continue;
        float x = (float)l[t];
        x = x > 0 ? x / p->repetition_penalty : x * p->repetition_penalty;
        l[t] = x - p->presence_penalty;
    }
    memset(probs, 0, (size_t)v * sizeof *probs);
    if (p->temperature == 0 || p->top_k == 1) {
        int32_t best = 0;
        for (int32_t i = 1; i < v; i++)
            if (l[i] > l[best])
                best = i;
        probs[best] = 1;
        goto out;
    }
    for (int32_t i = 0; i < v; i++) {
        s[i] = (float)l[i] / p->temperature;
        idx[i] = i;
    }
    order_s = s;
    order_v = v;
    qsort(idx, (size_t)v, sizeof *idx, by_score_desc);
    double threshold = p->top_k > 0 && p->top_k < v ? s[idx[p->top_k - 1]] : -INFINITY;
    double z = 0;
    for (int32_t i = 0; i < v; i++) {
        keep[i] = s[i] >= threshold;
        if (keep[i])
            z += exp(s[i] - s[idx[0]]);
    }
    double mass = 0;
    bool open = true;
    for (int32_t r = 0; r < v; r++) {
        int32_t i = idx[r];
        if (!keep[i])
            continue;
        if (!open || (r > 0 && mass >= p->top_p * z))
            keep[i] = open = false;
        else
            mass += exp(s[i] - s[idx[0]]);
    }
    double total = 0;
    for (int32_t i = 0; i < v; i++) {
        if (keep[i] && exp(s[i] - s[idx[0]]) < p->min_p)
            keep[i] = false;
        if (keep[i])
            total += exp(s[i] - s[idx[0]]);
    }
    for (int32_t i = 0; i < v; i++)
        probs[i] = keep[i] ? exp(s[i] - s[idx[0]]) / total : 0;
out:
    free(l);
    free(s);
    free(idx);
    free(keep);
}

/* ---- greedy ---- */

static void test_greedy(void)
{
    enum { V = 1000 };
    float logits[V];
    for (int trial = 0; trial < 50; trial++) {
        int32_t best = 0;
        for (int32_t i = 0; i < V; i++) {
            logits[i] = (float)(frand() * 20 - 10);
            if (logits[i] > logits[best])
                best = i;
        }
        orin_sampler_params g = params(0, 0, 1, 0), k1 = params(0.8f, 1, 1, 0);
        g.seed = k1.seed = (uint64_t)trial;
        orin_sampler *a = orin_sampler_create(&g), *b = orin_sampler_create(&k1);
        CHECK(sample_copy(a, logits, V, NULL, 0) == best, "temperature 0 is the argmax");
        CHECK(sample_copy(b, logits, V, NULL, 0) == best, "top_k 1 is the argmax");
        orin_sampler_free(a);
        orin_sampler_free(b);
    }
    /* Ties: the lowest id. NaN: skipped. All NaN: an error. */
    float ties[5] = {1, 3, NAN, 3, 2};
    orin_sampler_params g = params(0, 0, 1, 0);
    orin_sampler *s = orin_sampler_create(&g);
    CHECK(sample_copy(s, ties, 5, NULL, 0) == 1, "lowest id on ties, NaN skipped");
    float nan3[3] = {NAN, NAN, NAN};
    CHECK(sample_copy(s, nan3, 3, NULL, 0) == -1, "all NaN is an error");
    CHECK(strstr(orin_error(), "NaN") != NULL, "%s", orin_error());
    CHECK(sample_copy(s, ties, 0, NULL, 0) == -1, "empty vocabulary is an error");
    double probs[5];
    CHECK(dist_copy(s, ties, 5, NULL, 0, probs) == 0 && probs[1] == 1 && probs[3] == 0,
          "greedy distribution is one-hot");
    orin_sampler_free(s);

    /* Plain greedy (matmul.argmax may stand in for it): greedy, no penalty. */
    struct {
        orin_sampler_params p;
        bool plain;
    } kinds[] = {
        {params(0, 0, 1, 0), true},       {params(0.8f, 1, 1, 0), true},
        {params(0.8f, 2, 1, 0), false},   {params(1, 0, 1, 0), false},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        for (int pen = 0; pen < 3; pen++) {
            orin_sampler_params p = kinds[i].p;
            p.repetition_penalty = pen == 1 ? 1.1f : 1.0f;
            p.presence_penalty = pen == 2 ? 0.5f : 0.0f;
            orin_sampler *q = orin_sampler_create(&p);
            CHECK(q && orin_sampler_plain_greedy(q) == (kinds[i].plain && pen == 0),
                  "plain greedy: kind %zu, penalty %d", i, pen);
            orin_sampler_free(q);
        }
    }

    /* Parameters are checked. */
    orin_sampler_params bad[] = {params(-1, 0, 1, 0), params(1, -1, 1, 0), params(1, 0, 0, 0),
                                 params(1, 0, 1.5f, 0), params(1, 0, 1, -0.1f),
                                 params(1, 0, 1, 1.5f), params(NAN, 0, 1, 0)};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        orin_sampler *x = orin_sampler_create(&bad[i]);
        CHECK(x == NULL && strncmp(orin_error(), "sampler: ", 9) == 0, "bad params %zu accepted", i);
        orin_sampler_free(x);
    }
    orin_sampler_params rp = params(1, 0, 1, 0);
    rp.repetition_penalty = 0;
    CHECK(orin_sampler_create(&rp) == NULL, "repetition_penalty 0 accepted");
    rp = params(1, 0, 1, 0);
    rp.presence_penalty = INFINITY;
    CHECK(orin_sampler_create(&rp) == NULL, "infinite presence_penalty accepted");
    CHECK(orin_sampler_create(NULL) == NULL, "NULL params accepted");
    orin_sampler_free(NULL);
}

/* ---- seed ---- */

static uint64_t ref_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t ref_xoshiro(uint64_t s[4])
{
#define ROTL(x, k) (((x) << (k)) | ((x) >> (64 - (k))))
    uint64_t result = ROTL(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ROTL(s[3], 45);
    return result;
#undef ROTL
}

static void test_seed(void)
{
    /* The reference generator itself: splitmix64's published first output for seed 0. */
    uint64_t x = 0;
    CHECK(ref_splitmix64(&x) == 0xE220A8397B1DCDAFull, "splitmix64 reference value");

    enum { V = 64, N = 2000 };
    float logits[V];
    for (int i = 0; i < V; i++)
        logits[i] = (float)(frand() * 4);
    orin_sampler_params p = params(0.9f, 0, 1, 0);
    p.seed = 42;
    orin_sampler *a = orin_sampler_create(&p), *b = orin_sampler_create(&p);
    p.seed = 43;
    orin_sampler *c = orin_sampler_create(&p);
    int32_t first[N];
    int same = 0, differ = 0;
    for (int i = 0; i < N; i++) {
        first[i] = sample_copy(a, logits, V, NULL, 0);
        same += first[i] == sample_copy(b, logits, V, NULL, 0);
        differ += first[i] != sample_copy(c, logits, V, NULL, 0);
    }
    CHECK(same == N, "same seed: %d of %d tokens equal", same, N);
    CHECK(differ > N / 2, "another seed: only %d of %d tokens differ", differ, N);
    orin_sampler_seed(a, 42);
    int again = 0;
    for (int i = 0; i < N; i++)
        again += first[i] == sample_copy(a, logits, V, NULL, 0);
    CHECK(again == N, "reseeding restarts the sequence (%d of %d)", again, N);

    /* The documented draw: equal logits, no filters -> token floor(u * V) with
     * u = (xoshiro256** >> 11) * 2^-53, the state seeded by splitmix64(seed). */
    float flat[V];
    for (int i = 0; i < V; i++)
        flat[i] = 0.25f;
    orin_sampler_params fp = ORIN_SAMPLER_PARAMS_DEFAULT;
    fp.seed = 0xC0FFEEull;
    orin_sampler *f = orin_sampler_create(&fp);
    uint64_t st[4], sx = fp.seed;
    for (int i = 0; i < 4; i++)
        st[i] = ref_splitmix64(&sx);
    int match = 0;
    for (int i = 0; i < N; i++) {
        double u = (double)(ref_xoshiro(st) >> 11) * 0x1.0p-53;
        match += sample_copy(f, flat, V, NULL, 0) == (int32_t)(u * V);
    }
    CHECK(match == N, "draws follow splitmix64 + xoshiro256** (%d of %d)", match, N);
    orin_sampler_free(a);
    orin_sampler_free(b);
    orin_sampler_free(c);
    orin_sampler_free(f);
}

/* ---- masks ---- */

static void expect_probs(const char *what, const orin_sampler_params *p, const float *logits,
                         int32_t v, const int32_t *hist, int32_t nh, const double *want)
{
    orin_sampler *s = orin_sampler_create(p);
    double got[16], ref[16];
    CHECK(s && dist_copy(s, logits, v, hist, nh, got) == 0, "%s: %s", what, orin_error());
    reference(logits, v, p, hist, nh, ref);
    for (int32_t i = 0; i < v; i++) {
        CHECK(fabs(got[i] - want[i]) < 1e-6, "%s: token %d: %.9f, hand-worked %.9f", what, i,
              got[i], want[i]);
        CHECK(fabs(ref[i] - want[i]) < 1e-6, "%s: token %d: reference %.9f, hand-worked %.9f",
              what, i, ref[i], want[i]);
    }
    orin_sampler_free(s);
}

static void test_masks(void)
{
    /* Logits whose softmax is exactly [0.5, 0.2, 0.15, 0.1, 0.05]. */
    const double p0[5] = {0.5, 0.2, 0.15, 0.1, 0.05};
    float l[5];
    for (int i = 0; i < 5; i++)
        l[i] = (float)log(p0[i]);

    orin_sampler_params p = params(1, 0, 1, 0);
    expect_probs("no filter", &p, l, 5, NULL, 0, p0);

    p = params(1, 2, 1, 0);
    expect_probs("top_k 2", &p, l, 5, NULL, 0, (double[]){0.5 / 0.7, 0.2 / 0.7, 0, 0, 0});

    /* top_p: keep while the mass above < p: 0 (keep), 0.5 (keep), 0.7 (keep), 0.85 (stop). */
    p = params(1, 0, 0.75f, 0);
    expect_probs("top_p 0.75", &p, l, 5, NULL, 0,
                 (double[]){0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0});
    p = params(1, 0, 0.45f, 0);
    expect_probs("top_p 0.45", &p, l, 5, NULL, 0, (double[]){1, 0, 0, 0, 0});
    p = params(1, 0, 0.55f, 0);
    expect_probs("top_p 0.55", &p, l, 5, NULL, 0, (double[]){0.5 / 0.7, 0.2 / 0.7, 0, 0, 0});

    /* min_p: drop p < min_p * 0.5. */
    p = params(1, 0, 1, 0.35f); /* threshold 0.175 */
    expect_probs("min_p 0.35", &p, l, 5, NULL, 0, (double[]){0.5 / 0.7, 0.2 / 0.7, 0, 0, 0});
    p = params(1, 0, 1, 0.25f); /* threshold 0.125 */
    expect_probs("min_p 0.25", &p, l, 5, NULL, 0,
                 (double[]){0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0});

    /* temperature 2: p^(1/2) renormalised. */
    double sq[5], z = 0;
    for (int i = 0; i < 5; i++)
        z += sq[i] = sqrt(p0[i]);
    for (int i = 0; i < 5; i++)
        sq[i] /= z;
    p = params(2, 0, 1, 0);
    expect_probs("temperature 2", &p, l, 5, NULL, 0, sq);

    /* Everything: T 0.5 -> p^2 = [.25 .04 .0225 .01 .0025]; top_k 3 -> [.8 .128 .072];
     * top_p 0.9 -> masses above 0, .8, .928: keep two; min_p 0.1 -> .128 >= .08 stays. */
    p = params(0.5f, 3, 0.9f, 0.1f);
    expect_probs("T 0.5, top_k 3, top_p 0.9, min_p 0.1", &p, l, 5, NULL, 0,
                 (double[]){0.8 / 0.928, 0.128 / 0.928, 0, 0, 0});
    /* min_p after top_p renormalisation changes nothing relative: 0.2 x 0.8 = .16 > .128. */
    p = params(0.5f, 3, 0.9f, 0.2f);
    expect_probs("... min_p 0.2", &p, l, 5, NULL, 0, (double[]){1, 0, 0, 0, 0});

    /* top_k keeps every token tied with the k-th largest, as HF does. */
    float ties[5] = {3, 2, 2, 2, 1};
    double e3 = exp(3.0), e2 = exp(2.0), zt = e3 + 3 * e2;
    p = params(1, 3, 1, 0);
    expect_probs("top_k 3 with ties", &p, ties, 5, NULL, 0,
                 (double[]){e3 / zt, e2 / zt, e2 / zt, e2 / zt, 0});

    /* -inf is a masked token; NaN is skipped; only -inf is an error. */
    float masked[4] = {0, -INFINITY, NAN, 0};
    p = params(1, 0, 1, 0);
    orin_sampler *s = orin_sampler_create(&p);
    double got[4];
    CHECK(dist_copy(s, masked, 4, NULL, 0, got) == 0 && got[0] == 0.5 && got[1] == 0 &&
              got[2] == 0 && got[3] == 0.5,
          "-inf and NaN masked");
    for (int i = 0; i < 200; i++) {
        int32_t id = sample_copy(s, masked, 4, NULL, 0);
        CHECK(id == 0 || id == 3, "drew masked token %d", id);
    }
    float dead[3] = {-INFINITY, -INFINITY, NAN};
    CHECK(sample_copy(s, dead, 3, NULL, 0) == -1 && strstr(orin_error(), "no logit is finite"),
          "all -inf: %s", orin_error());
    float inf[4] = {1, INFINITY, 5, INFINITY};
    CHECK(dist_copy(s, inf, 4, NULL, 0, got) == 0 && got[1] == 0.5 && got[3] == 0.5 &&
              got[0] == 0 && got[2] == 0,
          "+inf logits share the mass");
    orin_sampler_free(s);
}

/* ---- penalties ---- */

static void test_penalty(void)
{
    /* Recover the penalised logits from the distribution at temperature 1:
     * log p_i - log p_3 + l_3 (token 3 is never in the history). */
    const float l[6] = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f, -0.5f};
    const int32_t hist[] = {0, 1, 1, 4, 0, 99, -7, 5, 5};
    const int32_t nh = sizeof hist / sizeof hist[0];
    struct {
        float rep, presence;
        float want[6];
    } cases[] = {
        /* > 0 divided, < 0 multiplied, 0 stays 0; ids 99 and -7 ignored; duplicates once. */
        {2.0f, 0.0f, {1.0f, -2.0f, 0.5f, 3.0f, 0.0f, -1.0f}},
        {1.0f, 0.5f, {1.5f, -1.5f, 0.5f, 3.0f, -0.5f, -1.0f}},
        {2.0f, 0.5f, {0.5f, -2.5f, 0.5f, 3.0f, -0.5f, -1.5f}},
        {0.5f, 0.0f, {4.0f, -0.5f, 0.5f, 3.0f, 0.0f, -0.25f}}, /* < 1 rewards repeats */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        orin_sampler_params p = params(1, 0, 1, 0);
        p.repetition_penalty = cases[c].rep;
        p.presence_penalty = cases[c].presence;
        orin_sampler *s = orin_sampler_create(&p);
        double probs[6];
        CHECK(dist_copy(s, l, 6, hist, nh, probs) == 0, "%s", orin_error());
        for (int i = 0; i < 6; i++) {
            double got = log(probs[i]) - log(probs[3]) + 3.0;
            CHECK(fabs(got - cases[c].want[i]) < 1e-5,
                  "rep %g presence %g: token %d penalised to %.6f, want %.6f",
                  (double)cases[c].rep, (double)cases[c].presence, i, got,
                  (double)cases[c].want[i]);
        }
        orin_sampler_free(s);
    }
    /* Greedy sees the penalty: 3.0 > 2.0 but history {3} with penalty 2 gives 1.5. */
    orin_sampler_params g = params(0, 0, 1, 0);
    g.repetition_penalty = 2.0f;
    orin_sampler *s = orin_sampler_create(&g);
    CHECK(sample_copy(s, l, 6, (int32_t[]){3}, 1) == 0, "greedy after the penalty");
    CHECK(sample_copy(s, l, 6, NULL, 0) == 3, "no history, no penalty");
    /* The sampler's marks are cleared: a second call with another history is clean. */
    CHECK(sample_copy(s, l, 6, (int32_t[]){0}, 1) == 3, "marks cleared between calls");
    orin_sampler_free(s);
}

/* ---- chi-square ---- */

/* The 0.999 quantile of chi-square with df degrees of freedom: a table for
 * small df, the Wilson-Hilferty approximation above. */
static double chi2_q999(int df)
{
    static const double table[] = {0,      10.828, 13.816, 16.266, 18.467, 20.515,
                                   22.458, 24.322, 26.124, 27.877, 29.588};
    if (df <= 10)
        return table[df];
    double z = 3.090232, a = 2.0 / (9.0 * df);
    return df * pow(1 - a + z * sqrt(a), 3);
}

/* Chi-square of counts against probabilities; tokens with probability 0 must
 * have no draws (else +inf). Sets *df. */
static double chi2(const long *counts, const double *probs, int v, long n, int *df)
{
    double x = 0;
    int cats = 0;
    for (int i = 0; i < v; i++) {
        if (probs[i] <= 0) {
            if (counts[i])
                return INFINITY;
            continue;
        }
        double e = probs[i] * (double)n;
        x += (counts[i] - e) * (counts[i] - e) / e;
        cats++;
    }
    *df = cats - 1;
    return x;
}

static void test_chi2(void)
{
    enum { V = 12, N = 200000 };
    float l[V];
    for (int i = 0; i < V; i++)
        l[i] = (float)(frand() * 3 - 1);
    const int32_t hist[] = {2, 5, 5, 7};
    struct {
        const char *name;
        orin_sampler_params p;
        bool penalised;
    } cfgs[] = {
        {"plain softmax", params(1, 0, 1, 0), false},
        {"T 0.7, top_k 6", params(0.7f, 6, 1, 0), false},
        {"T 1.3, top_p 0.8", params(1.3f, 0, 0.8f, 0), false},
        {"T 0.9, top_k 8, top_p 0.9, min_p 0.05", params(0.9f, 8, 0.9f, 0.05f), false},
        {"penalties, T 1, top_k 10", params(1, 10, 1, 0), true},
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        orin_sampler_params p = cfgs[c].p;
        p.seed = 1000 + c;
        if (cfgs[c].penalised) {
            p.repetition_penalty = 1.3f;
            p.presence_penalty = 0.4f;
        }
        const int32_t *h = cfgs[c].penalised ? hist : NULL;
        int32_t nh = cfgs[c].penalised ? 4 : 0;
        double exact[V], wrong[V];
        reference(l, V, &p, h, nh, exact);
        orin_sampler *s = orin_sampler_create(&p);
        long counts[V] = {0};
        for (long i = 0; i < N; i++) {
            int32_t id = sample_copy(s, l, V, h, nh);
            CHECK(id >= 0 && id < V, "%s: token %d", cfgs[c].name, id);
            if (id >= 0 && id < V)
                counts[id]++;
        }
        int df;
        double x = chi2(counts, exact, V, N, &df);
        double q = chi2_q999(df);
        printf("%-40s chi2 %8.2f  df %2d  0.999 quantile %6.2f\n", cfgs[c].name, x, df, q);
        CHECK(df >= 1 && x < q, "%s: chi2 %.2f >= %.2f (df %d)", cfgs[c].name, x, q, df);

        /* The same counts against a wrong distribution (10% of the mass of
         * the likeliest token moved to the next one) must fail by far. */
        memcpy(wrong, exact, sizeof wrong);
        int top = 0, second = -1;
        for (int i = 0; i < V; i++)
            if (exact[i] > exact[top])
                top = i;
        for (int i = 0; i < V; i++)
            if (i != top && exact[i] > 0 && (second < 0 || exact[i] > exact[second]))
                second = i;
        if (second >= 0) {
            wrong[second] += 0.1 * wrong[top];
            wrong[top] *= 0.9;
            int dfw;
            double xw = chi2(counts, wrong, V, N, &dfw);
            printf("%-40s chi2 %8.2f  against a 10%%-biased expectation\n", "", xw);
            CHECK(xw > 10 * chi2_q999(dfw), "%s: a biased expectation passes (chi2 %.2f)",
                  cfgs[c].name, xw);
        }
        orin_sampler_free(s);
    }
}

/* ---- large vocabulary ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_large(void)
{
    enum { V = 152064 };
    float *l = malloc(V * sizeof *l), *tmp = malloc(V * sizeof *tmp);
    double *got = malloc(V * sizeof *got), *ref = malloc(V * sizeof *ref);
    /* Logits like a model's: a few strong tokens over a broad, tie-rich tail
     * (rounded to bf16-like steps, so ties at the top-k boundary happen). */
    for (int i = 0; i < V; i++)
        l[i] = (float)(nearbyint((frand() * 8 - 4) * 16) / 16);
    for (int i = 0; i < 40; i++)
        l[(int)(frand() * V)] = (float)(8 + frand() * 4);
    int32_t hist[64];
    for (int i = 0; i < 64; i++)
        hist[i] = (int32_t)(frand() * V);
    struct {
        const char *name;
        orin_sampler_params p;
    } cfgs[] = {
        {"Qwen2.5 (T 0.7, top_k 20, top_p 0.8, rep 1.05)", params(0.7f, 20, 0.8f, 0)},
        {"Qwen3 (T 0.6, top_k 20, top_p 0.95)", params(0.6f, 20, 0.95f, 0)},
        {"top_p 0.9 alone", params(1, 0, 0.9f, 0)},
        {"min_p 0.05 alone", params(1, 0, 1, 0.05f)},
        {"top_k 5000", params(1, 5000, 1, 0)},
        {"plain softmax", params(1, 0, 1, 0)},
    };
    cfgs[0].p.repetition_penalty = 1.05f;
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        orin_sampler_params *p = &cfgs[c].p;
        orin_sampler *s = orin_sampler_create(p);
        CHECK(dist_copy(s, l, V, hist, 64, got) == 0, "%s", orin_error());
        reference(l, V, p, hist, 64, ref);
        double max_err = 0;
        int support = 0, ref_support = 0;
        for (int i = 0; i < V; i++) {
            max_err = fmax(max_err, fabs(got[i] - ref[i]));
            support += got[i] > 0;
            ref_support += ref[i] > 0;
        }
        CHECK(max_err < 1e-6 && support == ref_support, "%s: max error %.3g, support %d vs %d",
              cfgs[c].name, max_err, support, ref_support);
        int reps = 20;
        double t0 = now_s();
        for (int r = 0; r < reps; r++) {
            memcpy(tmp, l, V * sizeof *tmp);
            int32_t id = orin_sampler_sample(s, tmp, V, hist, 64);
            CHECK(id >= 0 && ref[id] > 0, "%s: drew token %d outside the support", cfgs[c].name, id);
        }
        double per = (now_s() - t0) / reps;
        printf("%-48s support %6d  %.3f ms/token (V = %d, incl. copying the logits)\n",
               cfgs[c].name, support, per * 1e3, V);
        orin_sampler_free(s);
    }
    free(l);
    free(tmp);
    free(got);
    free(ref);
}

int main(int argc, char **argv)
{
    const char *g = argc > 1 ? argv[1] : "all";
    bool all = !strcmp(g, "all");
    if (all || !strcmp(g, "greedy"))
        test_greedy();
    if (all || !strcmp(g, "seed"))
        test_seed();
    if (all || !strcmp(g, "masks"))
        test_masks();
    if (all || !strcmp(g, "penalty"))
        test_penalty();
    if (all || !strcmp(g, "chi2"))
        test_chi2();
    if (all || !strcmp(g, "large"))
        test_large();
    return test_finish();
}
