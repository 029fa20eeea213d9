/* sampler.finish: orin_sampler_finish on what sample.candidates wrote (its
 * CPU reference, plugins/ops_common/cpu_sample.c, compiled in) gives the
 * tokens orin_sampler_sample gives on the whole logits, draw after draw, with
 * the random state carried along; or says it cannot (ORIN_SAMPLER_NEED_LOGITS),
 * and then the caller samples the whole logits, as the model will.
 *
 *   equal     many parameter sets (temperature, top_k 1/5/20/50, top_p,
 *             min_p, penalties) x 200 draws each over logits of three kinds:
 *             f32 values, bf16-rounded ones (ties), and ones with planted
 *             near-ties (a logit an ulp below the k-th, which step 4 keeps
 *             when it divides to the same value): the token sequences match.
 *             The op asked for orin_sampler_candidates_top_k (the model's
 *             way), and for top_k exactly (more fallbacks, none wrong).
 *   edges     a near-tie the candidates cannot show is reported, not
 *             guessed; top_k 0; ties that do not fit; all NaN, all -inf,
 *             +inf; candidates the op cannot have written. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"
#include "orin/device.h"
#include "orin/error.h"
#include "orin/sampler.h"
#include "test_util.h"

enum { MAX = 256 };

/* ---- the op ---- */

typedef struct op_out {
    float values[MAX];
    int32_t ids[MAX];
    int32_t count;
    int32_t top_k;
} op_out;

/* sample.candidates (the CPU reference) on f32 logits. */
static int run_op(const float *logits, int32_t vocab, const int32_t *hist, int32_t nh,
                  const orin_sampler_params *p, int32_t top_k, op_out *out)
{
    static int32_t empty[1];
    int32_t n_history = nh;
    int64_t v = vocab, cap = nh > 0 ? nh : 1, one = 1, max = MAX;
    orin_sample_candidates_args a = {
        .logits = orin_tensor_make((void *)logits, ORIN_F32, ORIN_DEVICE_CPU, 1, &v),
        .history = orin_tensor_make(nh > 0 ? (void *)hist : empty, ORIN_I32, ORIN_DEVICE_CPU,
                                    1, &cap),
        .n_history = orin_tensor_make(&n_history, ORIN_I32, ORIN_DEVICE_CPU, 1, &one),
        .values = orin_tensor_make(out->values, ORIN_F32, ORIN_DEVICE_CPU, 1, &max),
        .ids = orin_tensor_make(out->ids, ORIN_I32, ORIN_DEVICE_CPU, 1, &max),
        .count = orin_tensor_make(&out->count, ORIN_I32, ORIN_DEVICE_CPU, 1, &one),
        .repetition_penalty = p->repetition_penalty,
        .presence_penalty = p->presence_penalty,
        .top_k = top_k,
    };
    size_t ws_size = cpu_sample_candidates_workspace_size(&a);
    void *ws = malloc(ws_size);
    orin_exec ex = {.device = orin_device_cpu(), .workspace = ws, .workspace_size = ws_size};
    int rc = cpu_sample_candidates(&ex, &a, ORIN_F32);
    free(ws);
    out->top_k = top_k;
    return rc;
}

static orin_sampler_candidates candidates_of(const op_out *o, int32_t vocab)
{
    return (orin_sampler_candidates){.values = o->values, .ids = o->ids, .count = o->count,
                                     .max = MAX, .top_k = o->top_k, .vocab = vocab};
}

/* orin_sampler_sample on a copy (it penalises in place). */
static int32_t sample_full(orin_sampler *s, const float *logits, int32_t vocab,
                           const int32_t *hist, int32_t nh)
{
    float *tmp = malloc((size_t)vocab * sizeof *tmp);
    memcpy(tmp, logits, (size_t)vocab * sizeof *tmp);
    int32_t id = orin_sampler_sample(s, tmp, vocab, hist, nh);
    free(tmp);
    return id;
}

/* The model's step: the op, then finish, then the whole logits if need be.
 * top_k_op 0: orin_sampler_candidates_top_k decides. Counts the fallbacks. */
static int32_t sample_via_op(orin_sampler *s, const orin_sampler_params *p, const float *logits,
                             int32_t vocab, const int32_t *hist, int32_t nh, int32_t top_k_op,
                             int *fallbacks)
{
    int32_t k = top_k_op ? top_k_op : orin_sampler_candidates_top_k(s, MAX);
    if (k > 0) {
        op_out o;
        if (run_op(logits, vocab, hist, nh, p, k, &o) != 0)
            return -100;
        orin_sampler_candidates c = candidates_of(&o, vocab);
        int32_t id = orin_sampler_finish(s, &c);
        if (id != ORIN_SAMPLER_NEED_LOGITS)
            return id;
    }
    ++*fallbacks;
    return sample_full(s, logits, vocab, hist, nh);
}

/* ---- logits ---- */

static uint64_t rng_state = 99;
static double frand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

static float bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

static int by_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* A model-like row: a broad tail and a few strong tokens. kind 0: f32;
 * 1: bf16-rounded (ties); 2: f32 with near-ties planted around the k-th
 * largest (values one and two ulps below a top value). */
static void make_logits(float *l, int32_t vocab, int kind, int32_t k)
{
    for (int32_t i = 0; i < vocab; i++)
        l[i] = (float)(frand() * 8 - 4);
    for (int i = 0; i < 60; i++)
        l[(int32_t)(frand() * vocab)] = (float)(4 + frand() * 6);
    if (kind == 1)
        for (int32_t i = 0; i < vocab; i++)
            l[i] = bf16_round(l[i]);
    if (kind == 2 && k > 0) {
        float *sorted = malloc((size_t)vocab * sizeof *sorted);
        memcpy(sorted, l, (size_t)vocab * sizeof *sorted);
        qsort(sorted, (size_t)vocab, sizeof *sorted, by_desc);
        for (int j = -2; j <= 2; j++) {
            int32_t r = k - 1 + j;
            if (r < 0 || r >= vocab)
                continue;
            float below = nextafterf(sorted[r], -INFINITY);
            l[(int32_t)(frand() * vocab)] = below;
            l[(int32_t)(frand() * vocab)] = nextafterf(below, -INFINITY);
        }
        free(sorted);
    }
}

/* ---- equal ---- */

static orin_sampler_params params(float t, int32_t k, float top_p, float min_p, float rep,
                                  float presence, uint64_t seed)
{
    orin_sampler_params p = ORIN_SAMPLER_PARAMS_DEFAULT;
    p.temperature = t;
    p.top_k = k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repetition_penalty = rep;
    p.presence_penalty = presence;
    p.seed = seed;
    return p;
}

/* draws tokens from both ways, the history growing with them; returns the
 * number of fallbacks; CHECKs equality. */
static int compare_run(const orin_sampler_params *p, int32_t vocab, int kind, int draws,
                       bool exact_k)
{
    orin_sampler *full = orin_sampler_create(p), *fin = orin_sampler_create(p);
    float *l = malloc((size_t)vocab * sizeof *l);
    int32_t *hist = malloc((size_t)(draws + 40) * sizeof *hist);
    int32_t nh = 0;
    for (; nh < 40; nh++) /* a prompt, with repeats and ids outside the vocabulary */
        hist[nh] = nh % 7 == 3 ? vocab + nh : (int32_t)(frand() * vocab) % (nh / 3 + 5);
    int fallbacks = 0, differ = -1;
    for (int d = 0; d < draws; d++) {
        make_logits(l, vocab, kind, p->top_k);
        /* the tokens of the history among the strongest, so that penalties bite */
        l[hist[nh - 1] >= 0 && hist[nh - 1] < vocab ? hist[nh - 1] : 0] = 9.0f;
        int32_t a = sample_full(full, l, vocab, hist, nh);
        int32_t top_k_op = exact_k && p->top_k > 0 && p->temperature > 0 ? p->top_k : 0;
        int32_t b = sample_via_op(fin, p, l, vocab, hist, nh, top_k_op, &fallbacks);
        if (a != b || a < 0) {
            differ = d;
            break;
        }
        hist[nh++] = a;
    }
    CHECK(differ < 0, "T %g top_k %d top_p %g min_p %g rep %g presence %g, logits kind %d%s: "
          "draw %d differs (%s)", (double)p->temperature, p->top_k, (double)p->top_p,
          (double)p->min_p, (double)p->repetition_penalty, (double)p->presence_penalty, kind,
          exact_k ? ", op asked for top_k" : "", differ, orin_error());
    /* The random states are the same: one more draw on flat logits agrees. */
    for (int32_t i = 0; i < vocab; i++)
        l[i] = 0.5f;
    int32_t fa = sample_full(full, l, vocab, NULL, 0);
    int32_t fb = sample_full(fin, l, vocab, NULL, 0);
    CHECK(fa == fb, "random states differ after the run (%d vs %d)", fa, fb);
    orin_sampler_free(full);
    orin_sampler_free(fin);
    free(l);
    free(hist);
    return fallbacks;
}

static void test_equal(void)
{
    const float temps[] = {0.0f, 0.6f, 0.7f, 1.3f};
    const int32_t ks[] = {1, 5, 20, 50};
    const struct {
        float top_p, min_p, rep, presence;
    } rest[] = {
        {1.0f, 0.0f, 1.0f, 0.0f},
        {0.8f, 0.0f, 1.05f, 0.0f},
        {0.95f, 0.05f, 1.3f, 0.4f},
    };
    int runs = 0, fallbacks = 0, fallbacks_exact = 0, draws = 0;
    uint64_t seed = 1;
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++)
        for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
            for (size_t r = 0; r < sizeof rest / sizeof rest[0]; r++) {
                int kind = (int)((t + k + r) % 3);
                orin_sampler_params p = params(temps[t], ks[k], rest[r].top_p, rest[r].min_p,
                                               rest[r].rep, rest[r].presence, seed++);
                int32_t vocab = kind == 2 ? 1500 : 3001;
                fallbacks += compare_run(&p, vocab, kind, 200, false);
                fallbacks_exact += compare_run(&p, vocab, 2, 60, true);
                runs++;
                draws += 260;
            }
    printf("%d parameter sets, %d draws: %d fallbacks asking the op for the margin, %d asking "
           "it for top_k exactly (near-ties planted)\n", runs, draws, fallbacks, fallbacks_exact);
    /* The near-ties make asking for top_k alone fall back at times, and the
     * margin makes that rare. */
    CHECK(fallbacks_exact > 0, "near-ties never made finish fall back");
    CHECK(fallbacks * 20 < runs * 200, "%d fallbacks in %d draws", fallbacks, runs * 200);
}

/* ---- edges ---- */

static void test_edges(void)
{
    /* A near-tie finish cannot see: with T = 0.7 find a k-th value whose float
     * below divides to the same value, put that below it, ask for top_k. */
    const float t = 0.7f;
    float kth = 6.0f;
    while (nextafterf(kth, -INFINITY) / t != kth / t)
        kth = nextafterf(kth, INFINITY);
    float l[8] = {9.0f, 8.0f, kth, nextafterf(kth, -INFINITY), 1.0f, 0.5f, -1.0f, -2.0f};
    orin_sampler_params p = params(t, 3, 1.0f, 0.0f, 1.0f, 0.0f, 5);
    orin_sampler *s = orin_sampler_create(&p), *ref = orin_sampler_create(&p);
    op_out o;
    CHECK(run_op(l, 8, NULL, 0, &p, 3, &o) == 0 && o.count == 3, "op on the near-tie: %d",
          o.count);
    orin_sampler_candidates c = candidates_of(&o, 8);
    CHECK(orin_sampler_finish(s, &c) == ORIN_SAMPLER_NEED_LOGITS,
          "a near-tie the op left out was not reported");
    /* Asked for the margin, the op shows it and finish decides, drawing as
     * the whole-vocabulary sampler does (token 3 is in its support). */
    int32_t k_op = orin_sampler_candidates_top_k(s, MAX);
    CHECK(k_op == 6, "candidates_top_k: %d, want 6", k_op);
    CHECK(run_op(l, 8, NULL, 0, &p, k_op, &o) == 0, "%s", orin_error());
    c = candidates_of(&o, 8);
    for (int i = 0; i < 50; i++) {
        int32_t a = sample_full(ref, l, 8, NULL, 0), b = orin_sampler_finish(s, &c);
        CHECK(a == b, "near-tie with the margin: %d vs %d", a, b);
    }
    orin_sampler_free(s);
    orin_sampler_free(ref);

    /* top_k 0: fine when the op wrote every logit, else the whole logits. */
    p = params(1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 6);
    s = orin_sampler_create(&p);
    ref = orin_sampler_create(&p);
    CHECK(orin_sampler_candidates_top_k(s, MAX) == 0, "top_k 0 asks the op for something");
    CHECK(run_op(l, 8, NULL, 0, &p, 9, &o) == 0 && o.count == 8, "op over V = 8");
    c = candidates_of(&o, 8);
    for (int i = 0; i < 50; i++) {
        int32_t a = sample_full(ref, l, 8, NULL, 0), b = orin_sampler_finish(s, &c);
        CHECK(a == b, "top_k 0, whole vocabulary: %d vs %d", a, b);
    }
    CHECK(run_op(l, 8, NULL, 0, &p, 4, &o) == 0, "op");
    c = candidates_of(&o, 8);
    CHECK(orin_sampler_finish(s, &c) == ORIN_SAMPLER_NEED_LOGITS, "top_k 0 on 4 of 8 logits");
    orin_sampler_free(s);
    orin_sampler_free(ref);

    /* Ties that did not fit, and what the op cannot have written. */
    p = params(0.8f, 2, 1.0f, 0.0f, 1.0f, 0.0f, 7);
    s = orin_sampler_create(&p);
    c = (orin_sampler_candidates){.values = o.values, .ids = o.ids, .count = MAX + 1,
                                  .max = MAX, .top_k = 4, .vocab = 8};
    CHECK(orin_sampler_finish(s, &c) == ORIN_SAMPLER_NEED_LOGITS, "ties that did not fit");
    float bad_v[2] = {1.0f, 0.5f};
    int32_t bad_id[2] = {3, 8};
    c = (orin_sampler_candidates){.values = bad_v, .ids = bad_id, .count = 2, .max = 2,
                                  .top_k = 2, .vocab = 8};
    CHECK(orin_sampler_finish(s, &c) == -1 && strstr(orin_error(), "candidate"),
          "id past the vocabulary: %s", orin_error());
    bad_id[1] = 3;
    CHECK(orin_sampler_finish(s, &c) == -1 && strstr(orin_error(), "twice"), "repeated id: %s",
          orin_error());
    bad_id[1] = 4;
    bad_v[1] = NAN;
    CHECK(orin_sampler_finish(s, &c) == -1, "NaN candidate accepted");
    c.top_k = 0;
    CHECK(orin_sampler_finish(s, &c) == -1, "top_k 0 candidates accepted");
    CHECK(orin_sampler_finish(s, NULL) == -1, "NULL candidates accepted");
    orin_sampler_free(s);

    /* No usable logit: the same error either way; greedy on all -inf is
     * token 0 either way; +inf ties with top_k: the same answer either way. */
    const float all_nan[4] = {NAN, NAN, NAN, NAN};
    const float all_ninf[4] = {-INFINITY, -INFINITY, -INFINITY, NAN};
    const float pinf[5] = {1.0f, INFINITY, 2.0f, INFINITY, INFINITY};
    const struct {
        const float *l;
        int32_t vocab;
        float t;
        int32_t k;
    } dead[] = {
        {all_nan, 4, 1.0f, 2}, {all_nan, 4, 0.0f, 2}, {all_ninf, 4, 1.0f, 2},
        {all_ninf, 4, 0.0f, 2}, {pinf, 5, 1.0f, 2}, {pinf, 5, 1.0f, 4}, {pinf, 5, 0.0f, 2},
    };
    for (size_t i = 0; i < sizeof dead / sizeof dead[0]; i++) {
        p = params(dead[i].t, dead[i].k, 1.0f, 0.0f, 1.0f, 0.0f, 8);
        s = orin_sampler_create(&p);
        ref = orin_sampler_create(&p);
        int fallbacks = 0;
        for (int d = 0; d < 5; d++) {
            int32_t a = sample_full(ref, dead[i].l, dead[i].vocab, NULL, 0);
            char err_a[256];
            snprintf(err_a, sizeof err_a, "%s", orin_error());
            int32_t b = sample_via_op(s, &p, dead[i].l, dead[i].vocab, NULL, 0, 0, &fallbacks);
            CHECK(a == b && (a >= 0 || strcmp(err_a, orin_error()) == 0),
                  "special logits %zu: %d (%s) vs %d (%s)", i, a, err_a, b, orin_error());
        }
        orin_sampler_free(s);
        orin_sampler_free(ref);
    }
}

int main(void)
{
    test_equal();
    test_edges();
    return test_finish();
}
