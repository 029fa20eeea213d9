/* ops.sample: sample.candidates through the registry on the target device (the
 * host, or with --device cuda the GPU), against a reference written here: the
 * penalties on each distinct history token, then every logit that is a number
 * sorted by value (descending, ties by lower id), cut at the top_k-th value
 * with its ties. The op must match it bit for bit: count, values and ids, and
 * leave the rest of its outputs (poisoned first) untouched.
 *
 * The logits are drawn per case from patterns that cross what the CUDA op does
 * in pieces (slices of 4096 logits, regions of max + 1 entries, a merge that
 * stages 4096 entries): ties at the k-th value that fit and that do not, ties
 * spread over every slice, a slice flooded with ties below or at the answer,
 * more than 4096 entries above the merge's bound, NaN, +-inf and +-0. Each
 * case runs twice on one workspace with different histories (the op keeps
 * nothing between calls). n_history outside 0..cap is an error on the host;
 * on the GPU, which cannot check it, it is clamped. */
#include "ops_test.h"

#include "orin/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const orin_dtype float_dtypes[] = {ORIN_F32, ORIN_F16, ORIN_BF16};

/* The CUDA op's slice (cuda_sample.cu), so that patterns can aim at it. */
#define SLICE 4096

static const orin_op_impl *impl_of(orin_dtype dt)
{
    return ops_test_impl(ORIN_OP_SAMPLE_CANDIDATES, "common", dt);
}

/* ---- the reference ---- */

typedef struct entry {
    float value;
    int32_t id;
} entry;

static int by_value_then_id(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    if (a->value > b->value)
        return -1;
    if (a->value < b->value)
        return 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* What the op must write: returns the count (max + 1 when the candidates do
 * not fit) and fills out[0..count) when they do. */
static int32_t reference(const ops_buf *logits, const int32_t *hist, int32_t nh, float rep,
                         float presence, int32_t k, int32_t max, entry *out)
{
    size_t vocab = logits->n;
    float *x = malloc(vocab * sizeof *x);
    bool *done = calloc(vocab, sizeof *done);
    entry *all = malloc(vocab * sizeof *all);
    for (size_t i = 0; i < vocab; i++)
        x[i] = (float)logits->value[i];
    for (int32_t i = 0; i < nh; i++) {
        int32_t t = hist[i];
        if (t < 0 || (size_t)t >= vocab || done[t])
            continue;
        done[t] = true;
        float v = x[t];
        if (rep != 1.0f)
            v = v > 0 ? v / rep : v * rep;
        x[t] = v - presence;
    }
    size_t m = 0;
    for (size_t i = 0; i < vocab; i++)
        if (!isnan(x[i]))
            all[m++] = (entry){x[i], (int32_t)i};
    qsort(all, m, sizeof *all, by_value_then_id);
    size_t count = m;
    if (m >= (size_t)k) {
        count = (size_t)k;
        while (count < m && all[count].value >= all[k - 1].value)
            count++;
    }
    if (count <= (size_t)max)
        memcpy(out, all, count * sizeof *out);
    free(x);
    free(done);
    free(all);
    return count > (size_t)max ? max + 1 : (int32_t)count;
}

/* ---- logits ---- */

typedef enum pattern {
    RANDOM,        /* uniform in [-8, 8) (bf16 and f16 tie a lot by themselves) */
    TIES_FIT,      /* k/2 distinct tops, then ties at the k-th that fit in max */
    TIES_OVERFLOW, /* ... ties that do not */
    SPECIALS,      /* NaN, -inf, +inf and +-0 among random values */
    ZEROS,         /* the k-th value is 0, +0 and -0 tied across it */
    ALL_EQUAL,
    ALL_NAN,
    FEW_NUMBERS,   /* fewer numbers than k: NaN and -inf elsewhere */
    SLICE_FLOOD,   /* the first slice all ties, below the answer */
    SLICE_FLOOD_TOP, /* the first slice all ties at the top: do not fit */
    SPILL,         /* every slice: 63 tops over a floor of ties at 5 */
} pattern;

static const char *pattern_names[] = {
    "random", "ties fit", "ties overflow", "specials", "zeros", "all equal", "all NaN",
    "few numbers", "slice flood", "slice flood at the top", "spill",
};

/* n distinct positions of 0..vocab-1 (n <= vocab), shuffled. */
static int32_t *positions(ops_rng *r, int64_t vocab, int64_t n)
{
    int32_t *p = malloc((size_t)vocab * sizeof *p);
    for (int64_t i = 0; i < vocab; i++)
        p[i] = (int32_t)i;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i + (int64_t)(ops_rng_next(r) % (uint64_t)(vocab - i));
        int32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}

/* The logits of a pattern; *tops gets a few ids at the top (for the history). */
static ops_buf make_logits(ops_rng *r, orin_dtype dt, int64_t vocab, pattern pat, int32_t k,
                           int32_t max, int32_t tops[4])
{
    ops_buf b = ops_buf_random(r, dt, (size_t)vocab, -8, pat == TIES_FIT ||
                                                             pat == TIES_OVERFLOW ? 4 : 8);
    int32_t *p = positions(r, vocab, vocab);
    int64_t above = k / 2 < vocab ? k / 2 : vocab, ties = 0;
    switch (pat) {
    case TIES_FIT:
    case TIES_OVERFLOW:
        ties = pat == TIES_FIT ? k - above + 3 : max - above + 6;
        if (above + ties > vocab)
            ties = vocab - above;
        for (int64_t i = 0; i < above; i++)
            ops_store(dt, b.data, p[i], 12.0 + 0.5 * (double)i);
        for (int64_t i = above; i < above + ties; i++)
            ops_store(dt, b.data, p[i], 9.5);
        break;
    case SPECIALS:
        for (int64_t i = 0; i < vocab; i++) {
            uint64_t u = ops_rng_next(r) % 20;
            double v = u == 0 ? NAN : u == 1 ? -INFINITY : u == 2 ? 0.0 : u == 3 ? -0.0 : NAN;
            if (u < 4)
                ops_store(dt, b.data, p[i], v);
        }
        for (int64_t i = 0; i < vocab && i < 3; i++)
            ops_store(dt, b.data, p[i], INFINITY);
        break;
    case ZEROS:
        for (int64_t i = 0; i < vocab; i++)
            ops_store(dt, b.data, i, -1.0 - ops_rng_uniform(r, 0, 4));
        for (int64_t i = 0; i < vocab && i < k - 2; i++)
            ops_store(dt, b.data, p[i], 1.0 + (double)i);
        for (int64_t i = k - 2 > 0 ? k - 2 : 0; i < vocab && i < k + 8; i++)
            ops_store(dt, b.data, p[i], i % 2 ? -0.0 : 0.0);
        break;
    case ALL_EQUAL:
        for (int64_t i = 0; i < vocab; i++)
            ops_store(dt, b.data, i, 0.25);
        break;
    case ALL_NAN:
        for (int64_t i = 0; i < vocab; i++)
            ops_store(dt, b.data, i, NAN);
        break;
    case FEW_NUMBERS:
        for (int64_t i = 0; i < vocab; i++)
            ops_store(dt, b.data, p[i], i < k / 2 ? 1.0 + (double)i : i % 2 ? NAN : -INFINITY);
        break;
    case SLICE_FLOOD:
    case SLICE_FLOOD_TOP:
        for (int64_t i = 0; i < vocab && i < SLICE; i++)
            ops_store(dt, b.data, i, pat == SLICE_FLOOD ? 1.0 : 9.5);
        break;
    case SPILL:
        for (int64_t i = 0; i < vocab; i++)
            ops_store(dt, b.data, i, i % SLICE < 63 ? ops_rng_uniform(r, 6, 8) : 5.0);
        break;
    default:
        break;
    }
    ops_buf_read(&b);
    /* The largest few, for the history to penalise. */
    for (int j = 0; j < 4; j++)
        tops[j] = -1;
    for (int64_t i = 0; i < vocab; i++) {
        double v = b.value[i];
        for (int j = 0; j < 4; j++) {
            if (tops[j] < 0 || v > b.value[tops[j]]) {
                memmove(&tops[j + 1], &tops[j], (size_t)(3 - j) * sizeof *tops);
                tops[j] = (int32_t)i;
                break;
            }
        }
    }
    free(p);
    return b;
}

/* cap ids: random ones in -3..vocab+2 (outside the vocabulary too), the tops
 * of the logits twice each, and repeats. */
static void make_history(ops_rng *r, int32_t *hist, int32_t cap, int64_t vocab,
                         const int32_t tops[4])
{
    for (int32_t i = 0; i < cap; i++)
        hist[i] = (int32_t)((int64_t)(ops_rng_next(r) % (uint64_t)(vocab + 6)) - 3);
    for (int32_t i = 0; i < cap && i < 8; i++)
        hist[(i * 7919) % cap] = tops[i % 4] >= 0 ? tops[i % 4] : 0;
    for (int32_t i = 8; i < cap; i += 5)
        hist[i] = hist[i / 2];
}

/* ---- cases ---- */

typedef struct sample_case {
    int64_t vocab;
    pattern pat;
    int32_t k, max;
    float rep, presence;
    int32_t cap;          /* history length */
    bool misaligned;      /* history one id into its buffer */
} sample_case;

static const char *case_str(char *buf, size_t cap, orin_dtype dt, const sample_case *c,
                            int32_t nh)
{
    snprintf(buf, cap, "%s V %lld %s k %d max %d rep %g presence %g history %d/%d%s",
             orin_dtype_name(dt), (long long)c->vocab, pattern_names[c->pat], c->k, c->max,
             (double)c->rep, (double)c->presence, nh, c->cap, c->misaligned ? " misaligned" : "");
    return buf;
}

/* Runs the op once on the given buffers and compares with the reference. */
static void run_and_compare(const orin_op_impl *impl, orin_dtype dt, const sample_case *c,
                            ops_buf *logits, int32_t *hist_buf, int32_t nh_stored,
                            int32_t nh_ref, void *workspace, size_t ws_size)
{
    char what[200];
    case_str(what, sizeof what, dt, c, nh_stored);
    int32_t max = c->max;
    float *values = malloc((size_t)max * sizeof *values);
    int32_t *ids = malloc((size_t)max * sizeof *ids), count = -7, n_history = nh_stored;
    entry *want = malloc((size_t)max * sizeof *want);
    for (int32_t i = 0; i < max; i++) {
        values[i] = NAN;
        ids[i] = -7;
    }
    int64_t cap = c->cap, one = 1, m = max;
    /* The whole history buffer is mapped first: a view one id in stays
     * misaligned on the GPU too. */
    ops_dev(hist_buf, (size_t)(cap + 1) * sizeof *hist_buf);
    int32_t *hist = hist_buf + (c->misaligned ? 1 : 0);
    orin_sample_candidates_args a = {
        .logits = ops_tensor(logits->data, dt, 1, &c->vocab),
        .history = ops_tensor(hist, ORIN_I32, 1, &cap),
        .n_history = ops_tensor(&n_history, ORIN_I32, 1, &one),
        .values = ops_tensor(values, ORIN_F32, 1, &m),
        .ids = ops_tensor(ids, ORIN_I32, 1, &m),
        .count = ops_tensor(&count, ORIN_I32, 1, &one),
        .repetition_penalty = c->rep,
        .presence_penalty = c->presence,
        .top_k = c->k,
    };
    orin_exec ex = ops_test_exec(0);
    ex.workspace = workspace;
    ex.workspace_size = ws_size;
    orin_error_clear();
    int rc = impl->run(&ex, &a);
    CHECK(rc == 0, "%s: %s", what, orin_error());
    if (rc == 0) {
        ops_fetch(&count, sizeof count);
        ops_fetch(values, (size_t)max * sizeof *values);
        ops_fetch(ids, (size_t)max * sizeof *ids);
        int32_t want_n = reference(logits, hist, nh_ref, c->rep, c->presence, c->k, max, want);
        CHECK(count == want_n, "%s: count %d, want %d", what, count, want_n);
        int32_t written = want_n <= max ? want_n : 0, bad = -1;
        for (int32_t i = max - 1; i >= 0; i--) {
            bool ok = i < written ? memcmp(&values[i], &want[i].value, sizeof(float)) == 0 &&
                                        ids[i] == want[i].id
                                  : isnan(values[i]) && ids[i] == -7;
            bad = ok ? bad : i;
        }
        CHECK(bad < 0, "%s: entry %d is (%.9g, %d), want %s (%.9g, %d)", what, bad,
              bad < 0 ? 0.0 : (double)values[bad], bad < 0 ? 0 : ids[bad],
              bad < written ? "" : "untouched", bad >= 0 && bad < written ?
              (double)want[bad].value : NAN, bad >= 0 && bad < written ? want[bad].id : -7);
    }
    free(values);
    free(ids);
    free(want);
}

static void sample_case_run(orin_dtype dt, const sample_case *c, uint64_t seed)
{
    ops_rng r = {.state = seed};
    int32_t tops[4];
    ops_buf logits = make_logits(&r, dt, c->vocab, c->pat, c->k, c->max, tops);
    int32_t *hist_buf = malloc((size_t)(c->cap + 1) * sizeof *hist_buf);
    hist_buf[0] = 0;
    make_history(&r, hist_buf + (c->misaligned ? 1 : 0), c->cap, c->vocab, tops);
    const orin_op_impl *impl = impl_of(dt);
    if (!impl)
        goto out;
    int64_t one = 1, m = c->max;
    orin_sample_candidates_args shape = {
        .logits = ops_tensor(NULL, dt, 1, &c->vocab),
        .values = ops_tensor(NULL, ORIN_F32, 1, &m),
        .count = ops_tensor(NULL, ORIN_I32, 1, &one),
    };
    size_t ws_size = impl->workspace_size ? impl->workspace_size(&shape) : 0;
    void *ws = ops_workspace(ws_size);

    /* The whole history, then a part of another one on the same workspace. */
    run_and_compare(impl, dt, c, &logits, hist_buf, c->cap, c->cap, ws, ws_size);
    make_history(&r, hist_buf + (c->misaligned ? 1 : 0), c->cap, c->vocab, tops);
    int32_t part = c->cap / 3;
    run_and_compare(impl, dt, c, &logits, hist_buf, part, part, ws, ws_size);
    if (ops_on_gpu()) { /* n_history past either end is clamped */
        run_and_compare(impl, dt, c, &logits, hist_buf, c->cap + 5, c->cap, ws, ws_size);
        run_and_compare(impl, dt, c, &logits, hist_buf, -3, 0, ws, ws_size);
    }
out:
    free(hist_buf);
    ops_buf_free(&logits);
    ops_release();
}

static void test_candidates(orin_dtype dt)
{
    const int64_t vocabs[] = {1, 7, 1000, SLICE + 1, 151936};
    const sample_case base[] = {
        {.pat = RANDOM, .k = 1, .max = 256, .rep = 1.0f, .presence = 0.0f, .cap = 50},
        {.pat = RANDOM, .k = 1, .max = 256, .rep = 1.3f, .presence = 0.5f, .cap = 50},
        {.pat = RANDOM, .k = 20, .max = 256, .rep = 1.1f, .presence = 0.0f, .cap = 301},
        {.pat = RANDOM, .k = 64, .max = 256, .rep = 1.0f, .presence = 0.25f, .cap = 64,
         .misaligned = true},
        {.pat = TIES_FIT, .k = 5, .max = 256, .rep = 1.0f, .presence = 0.0f, .cap = 9},
        {.pat = TIES_FIT, .k = 40, .max = 256, .rep = 2.0f, .presence = 0.0f, .cap = 20},
        {.pat = TIES_OVERFLOW, .k = 5, .max = 16, .rep = 1.0f, .presence = 0.0f, .cap = 9},
        {.pat = SPECIALS, .k = 20, .max = 256, .rep = 1.3f, .presence = 0.5f, .cap = 77},
        {.pat = ZEROS, .k = 5, .max = 64, .rep = 1.0f, .presence = 0.0f, .cap = 3},
        {.pat = ALL_EQUAL, .k = 1, .max = 8, .rep = 1.0f, .presence = 0.0f, .cap = 1},
        {.pat = ALL_NAN, .k = 3, .max = 8, .rep = 1.2f, .presence = 0.0f, .cap = 4},
        {.pat = FEW_NUMBERS, .k = 12, .max = 16, .rep = 1.0f, .presence = 0.0f, .cap = 4},
    };
    uint64_t seed = 1000 * (uint64_t)dt;
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
            sample_case c = base[i];
            c.vocab = vocabs[v];
            sample_case_run(dt, &c, ++seed);
        }
    }
    /* The CUDA op's pieces at the size that matters. */
    const sample_case big[] = {
        {.pat = SLICE_FLOOD, .k = 20, .max = 256, .rep = 1.0f, .presence = 0.0f, .cap = 10},
        {.pat = SLICE_FLOOD_TOP, .k = 20, .max = 256, .rep = 1.0f, .presence = 0.0f, .cap = 10},
        {.pat = SPILL, .k = 64, .max = 256, .rep = 1.0f, .presence = 0.0f, .cap = 10},
        {.pat = SPILL, .k = 2, .max = 1024, .rep = 1.0f, .presence = 0.0f, .cap = 10},
        {.pat = RANDOM, .k = 256, .max = 256, .rep = 1.05f, .presence = 0.0f, .cap = 1000},
        {.pat = RANDOM, .k = 1000, .max = 1024, .rep = 1.0f, .presence = 0.0f, .cap = 1},
        {.pat = TIES_FIT, .k = 64, .max = 256, .rep = 1.0f, .presence = 0.0f, .cap = 1},
        {.pat = RANDOM, .k = 20, .max = 256, .rep = 1.05f, .presence = 0.3f, .cap = 40000},
        {.pat = RANDOM, .k = 1, .max = 256, .rep = 1.05f, .presence = 0.0f, .cap = 40001,
         .misaligned = true},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        sample_case c = big[i];
        c.vocab = 151936;
        sample_case_run(dt, &c, ++seed);
    }
}

/* ---- bad calls ---- */

static void test_errors(orin_dtype dt)
{
    const orin_op_impl *impl = impl_of(dt);
    if (!impl)
        return;
    ops_rng r = {.state = 7};
    ops_buf logits = ops_buf_random(&r, dt, 100, -1, 1);
    int32_t hist[4] = {1, 2, 3, 4}, n_history = 4, count = 0, ids[8];
    float values[8];
    int64_t vocab = 100, cap = 4, one = 1, m = 8;
    orin_sample_candidates_args a = {
        .logits = ops_tensor(logits.data, dt, 1, &vocab),
        .history = ops_tensor(hist, ORIN_I32, 1, &cap),
        .n_history = ops_tensor(&n_history, ORIN_I32, 1, &one),
        .values = ops_tensor(values, ORIN_F32, 1, &m),
        .ids = ops_tensor(ids, ORIN_I32, 1, &m),
        .count = ops_tensor(&count, ORIN_I32, 1, &one),
        .repetition_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .top_k = 3,
    };
    size_t ws_size = impl->workspace_size ? impl->workspace_size(&a) : 0;
    orin_exec ex = ops_test_exec(0);
    ex.workspace = ops_workspace(ws_size);
    ex.workspace_size = ws_size;
    orin_error_clear();
    CHECK(impl->run(&ex, &a) == 0, "sample.candidates %s: a good call fails: %s",
          orin_dtype_name(dt), orin_error());

    a.top_k = 0;
    ops_expect_error("top_k 0", impl, &ex, &a, "top_k 0 is not in 1..8");
    a.top_k = 9;
    ops_expect_error("top_k past max", impl, &ex, &a, "top_k 9 is not in 1..8");
    a.top_k = 3;
    a.repetition_penalty = 0.0f;
    ops_expect_error("repetition_penalty 0", impl, &ex, &a, "repetition_penalty 0");
    a.repetition_penalty = 1.0f;
    a.presence_penalty = NAN;
    ops_expect_error("presence_penalty NaN", impl, &ex, &a, "presence_penalty");
    a.presence_penalty = 0.0f;
    a.values.dtype = ORIN_I32;
    ops_expect_error("values i32", impl, &ex, &a, "values: dtype i32, expected f32");
    a.values.dtype = ORIN_F32;
    a.ids.shape[0] = 7;
    ops_expect_error("ids shorter than values", impl, &ex, &a, "ids");
    a.ids.shape[0] = 8;
    a.count.shape[0] = 2;
    a.count.stride[0] = 1;
    ops_expect_error("count of 2", impl, &ex, &a, "count");
    a.count.shape[0] = 1;
    a.logits.ndim = 2;
    a.logits.shape[0] = 1;
    a.logits.shape[1] = 100;
    a.logits.stride[0] = 100;
    a.logits.stride[1] = 1;
    ops_expect_error("2-d logits", impl, &ex, &a, "logits");
    a.logits = ops_tensor(logits.data, dt, 1, &vocab);
    a.ids = a.values;
    a.ids.dtype = ORIN_I32;
    ops_expect_error("ids over values", impl, &ex, &a, "ids");
    a.ids = ops_tensor(ids, ORIN_I32, 1, &m);
    ex.workspace_size = ws_size - 1;
    ops_expect_error("small workspace", impl, &ex, &a, "workspace");
    ex.workspace_size = ws_size;
    if (!ops_on_gpu()) { /* the host sees n_history; the GPU clamps it (above) */
        n_history = 5;
        ops_expect_error("n_history past the history", impl, &ex, &a, "n_history 5");
        n_history = -1;
        ops_expect_error("negative n_history", impl, &ex, &a, "n_history -1");
    }
    ops_buf_free(&logits);
    ops_release();
}

/* ---- time ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* GPU only, printed, not checked: calls back to back over Qwen's vocabulary
 * with a 4096-token history, the wall time per call (the two launches of an
 * eager call included: an upper bound on the GPU time in a graph). */
static void time_candidates(orin_dtype dt)
{
    if (!ops_on_gpu() || ops_test_quick())
        return;
    const orin_op_impl *impl = impl_of(dt);
    if (!impl)
        return;
    ops_rng r = {.state = 77};
    int64_t vocab = 151936, cap = 4096, one = 1, m = 256;
    ops_buf logits = ops_buf_random(&r, dt, (size_t)vocab, -8, 8);
    int32_t *hist = malloc((size_t)cap * sizeof *hist), n_history = (int32_t)cap, count = 0;
    for (int64_t i = 0; i < cap; i++)
        hist[i] = (int32_t)(ops_rng_next(&r) % (uint64_t)vocab);
    float values[256];
    int32_t ids[256];
    orin_sample_candidates_args a = {
        .logits = ops_tensor(logits.data, dt, 1, &vocab),
        .history = ops_tensor(hist, ORIN_I32, 1, &cap),
        .n_history = ops_tensor(&n_history, ORIN_I32, 1, &one),
        .values = ops_tensor(values, ORIN_F32, 1, &m),
        .ids = ops_tensor(ids, ORIN_I32, 1, &m),
        .count = ops_tensor(&count, ORIN_I32, 1, &one),
    };
    orin_exec ex = ops_test_exec(0);
    ex.workspace_size = impl->workspace_size(&a);
    ex.workspace = ops_workspace(ex.workspace_size);
    const int32_t ks[] = {1, 20, 40, 64, 256};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        for (int pen = 0; pen < 2; pen++) {
            a.top_k = ks[i];
            a.repetition_penalty = pen ? 1.1f : 1.0f;
            a.presence_penalty = 0.0f;
            const int reps = 200;
            bool ok = impl->run(&ex, &a) == 0;
            ops_fetch(&count, sizeof count);
            double t0 = now_s();
            for (int rep = 0; rep < reps && ok; rep++)
                ok = impl->run(&ex, &a) == 0;
            ops_fetch(&count, sizeof count);
            double us = (now_s() - t0) / reps * 1e6;
            CHECK(ok, "timing run: %s", orin_error());
            printf("sample.candidates %s V %lld top_k %3d %s: %.1f us a call (count %d)\n",
                   orin_dtype_name(dt), (long long)vocab, ks[i],
                   pen ? "penalties over 4096 ids" : "no penalties          ", us, count);
        }
    free(hist);
    ops_buf_free(&logits);
    ops_release();
}

/* Registered as the contract says: the CPU one is the reference, both are
 * graph-safe and declare a workspace. */
static void test_registration(void)
{
    for (size_t i = 0; i < sizeof float_dtypes / sizeof float_dtypes[0]; i++) {
        const orin_op_impl *impl = impl_of(float_dtypes[i]);
        if (!impl)
            continue;
        CHECK(impl->flags & ORIN_OP_GRAPH_SAFE, "sample.candidates: not graph-safe");
        CHECK(ops_on_gpu() || (impl->flags & ORIN_OP_REFERENCE),
              "sample.candidates (cpu): not the reference");
        CHECK(impl->workspace_size != NULL, "sample.candidates: no workspace_size");
    }
}

int main(int argc, char **argv)
{
    ops_test_init(argc, argv);
    ops_test_registry();
    test_registration();
    for (size_t i = 0; i < sizeof float_dtypes / sizeof float_dtypes[0]; i++) {
        test_candidates(float_dtypes[i]);
        test_errors(float_dtypes[i]);
        time_candidates(float_dtypes[i]);
    }
    ops_test_registry_free();
    return test_finish();
}
