/* Attention through the registry: mha, fa1 and fa2, prefill and decode, against
 * a double-precision reference written here, at sizes that cross every tile
 * boundary, with GQA, causal chunks after earlier tokens, cache views with
 * non-default strides, and bad calls rejected with errors.
 *
 * The error of an attention output is measured against its condition,
 * sum_j p_j |v_j| (what rounding errors in a weighted average scale with), so
 * that "1e-5 relative" means the same thing for outputs near zero.
 *
 * Every case runs on the target device (--device cuda: the GPU). The GPU run
 * adds its own cases (long prefills and decodes up to 32k positions, GQA ratios
 * 1 to 16, f16 and bf16 throughout), flash-against-mha comparisons on large
 * shapes, positions outside the bound (a NaN row, not an error: they are in
 * device memory), the registry's fallback for a head_dim a provider declines,
 * and a decode captured into a CUDA graph and replayed for 2,000 steps.
 *
 * Usage: test_ops_attention [mha|fa1|fa2]... [--device cuda]  (default: all three) */
#include "ops_test.h"

#include "orin/device.h"
#include "orin/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef OPS_TEST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static const char *const all_providers[] = {"mha", "fa1", "fa2"};
static const char *providers[3];
static int n_providers;

/* The cache's layout: [capacity, Hkv, hd]; or head-major with rows padded by 8
 * elements (other strides); or head-major padded by 3, strides no 16-byte
 * access can take (a kernel's element-wise path). */
typedef enum { LAYOUT_DEFAULT, LAYOUT_HEAD_MAJOR, LAYOUT_ODD } cache_layout;

typedef struct att_case {
    int n;              /* query rows (1 for decode) */
    int start;          /* position of the first row */
    int heads, kv_heads, hd;
    cache_layout layout; /* head-major rows padded by 8: non-default strides */
    int spare;          /* capacity beyond the last position used */
    bool graph_bound;   /* max_kv_len = capacity, as a captured graph passes it */
    double q_range;     /* q uniform in +-q_range; above 10 "large scores", see att_make */
    bool scattered;     /* positions not start + i but scattered, unordered */
} att_case;

typedef struct att_data {
    att_case c;
    orin_dtype dt;
    int32_t *pos;
    int32_t kv_len;     /* max position + 1 */
    int32_t capacity;
    ops_buf q, k, v;    /* k, v: the whole cache */
    orin_kv_view view;
    double *ref, *cond;
    double max_score;   /* the largest score the reference saw */
} att_data;

static int64_t cache_offset(const att_data *d, int64_t pos, int64_t head)
{
    return pos * d->view.pos_stride + head * d->view.head_stride;
}

static void att_make(att_data *d, const att_case *c, orin_dtype dt, uint64_t seed)
{
    ops_rng rng = {.state = seed};
    memset(d, 0, sizeof *d);
    d->c = *c;
    d->dt = dt;
    d->pos = malloc(c->n * sizeof(int32_t));
    d->kv_len = 0;
    for (int i = 0; i < c->n; i++) {
        d->pos[i] = c->scattered ? c->start + (int32_t)(ops_rng_next(&rng) % 700) : c->start + i;
        d->kv_len = d->pos[i] + 1 > d->kv_len ? d->pos[i] + 1 : d->kv_len;
    }
    d->capacity = d->kv_len + c->spare;
    const bool head_major = c->layout != LAYOUT_DEFAULT;
    int64_t row = c->hd + (c->layout == LAYOUT_HEAD_MAJOR ? 8 : c->layout == LAYOUT_ODD ? 3 : 0);
    d->view = (orin_kv_view){
        .dtype = dt,
        .n_kv_heads = c->kv_heads,
        .head_dim = c->hd,
        .pos_stride = head_major ? row : (int64_t)c->kv_heads * c->hd,
        .head_stride = head_major ? row * d->capacity : c->hd,
        .capacity = d->capacity,
    };
    size_t cache_elems = (size_t)d->capacity * c->kv_heads * row;
    double qr = c->q_range ? c->q_range : 2.0;
    d->q = ops_buf_random(&rng, dt, (size_t)c->n * c->heads * c->hd, -qr, qr);
    /* Unwritten cache slots (padding, positions past the last) hold NaN: an
     * implementation that lets them into a result fails. */
    d->k = ops_buf_nan(dt, cache_elems);
    d->v = ops_buf_nan(dt, cache_elems);
    /* Large scores (hundreds: exp overflows unless the max is subtracted) are
     * made exact in f32, so that the check measures the softmax and not the
     * rounding of the scores themselves (1e-5 of a score of 300 moves p by
     * 3e-3): q holds integers, K multiples of 1/16, and with hd = 64 every
     * partial dot product needs under 24 bits and the scale 1/8 is exact. */
    bool exact_scores = qr > 10;
    if (exact_scores) {
        for (size_t i = 0; i < d->q.n; i++)
            ops_store(dt, d->q.data, i, round(d->q.value[i]));
        ops_buf_read(&d->q);
    }
    for (int64_t p = 0; p < d->kv_len; p++)
        for (int64_t h = 0; h < c->kv_heads; h++)
            for (int64_t i = 0; i < c->hd; i++) {
                double k = ops_rng_uniform(&rng, -1, 1);
                ops_store(dt, d->k.data, cache_offset(d, p, h) + i,
                          exact_scores ? round(k * 16) / 16 : k);
                ops_store(dt, d->v.data, cache_offset(d, p, h) + i, ops_rng_uniform(&rng, -1, 1));
            }
    ops_buf_read(&d->k);
    ops_buf_read(&d->v);
    d->view.k = d->k.data;
    d->view.v = d->v.data;
}

/* The reference: scores, max-subtracted softmax and P.V, all in double. */
static void att_reference(att_data *d)
{
    const att_case *c = &d->c;
    size_t total = (size_t)c->n * c->heads * c->hd;
    d->ref = malloc(total * sizeof(double));
    d->cond = malloc(total * sizeof(double));
    double *p = malloc(d->kv_len * sizeof(double));
    double scale = 1.0 / sqrt((double)c->hd);
    int group = c->heads / c->kv_heads;
    for (int i = 0; i < c->n; i++) {
        for (int h = 0; h < c->heads; h++) {
            const double *q = d->q.value + ((size_t)i * c->heads + h) * c->hd;
            double max = -INFINITY, sum = 0;
            for (int j = 0; j <= d->pos[i]; j++) {
                const double *k = d->k.value + cache_offset(d, j, h / group);
                double dot = 0;
                for (int e = 0; e < c->hd; e++)
                    dot += q[e] * k[e];
                p[j] = dot * (double)(float)scale;
                max = p[j] > max ? p[j] : max;
                d->max_score = p[j] > d->max_score ? p[j] : d->max_score;
            }
            for (int j = 0; j <= d->pos[i]; j++) {
                p[j] = exp(p[j] - max);
                sum += p[j];
            }
            double *ref = d->ref + ((size_t)i * c->heads + h) * c->hd;
            double *cond = d->cond + ((size_t)i * c->heads + h) * c->hd;
            for (int e = 0; e < c->hd; e++) {
                double acc = 0, mag = 0;
                for (int j = 0; j <= d->pos[i]; j++) {
                    double v = d->v.value[cache_offset(d, j, h / group) + e];
                    acc += p[j] * v;
                    mag += p[j] * fabs(v);
                }
                ref[e] = acc / sum;
                cond[e] = mag / sum;
            }
        }
    }
    free(p);
}

static void att_free(att_data *d)
{
    free(d->pos);
    free(d->ref);
    free(d->cond);
    ops_buf_free(&d->q);
    ops_buf_free(&d->k);
    ops_buf_free(&d->v);
}

/* The call on the target: q, out, positions and the cache copied there (the
 * cache as a whole, padding and unwritten NaN slots included). */
static orin_attention_args att_args(const att_data *d, void *out)
{
    const att_case *c = &d->c;
    int64_t dims[3] = {c->n, c->heads, c->hd};
    orin_kv_view view = d->view;
    size_t cache_bytes = d->k.n * orin_dtype_size(d->dt);
    view.k = ops_dev(d->k.data, cache_bytes);
    view.v = ops_dev(d->v.data, cache_bytes);
    return (orin_attention_args){
        .q = ops_tensor(d->q.data, d->dt, 3, dims),
        .out = ops_tensor(out, d->dt, 3, dims),
        .positions = ops_tensor(d->pos, ORIN_I32, 1, dims),
        .cache = view,
        .scale = (float)(1.0 / sqrt((double)c->hd)),
        .max_kv_len = c->graph_bound ? d->capacity : d->kv_len,
    };
}

/* The same call with no data behind it (what `supports` and a bind read). */
static orin_attention_args att_shape(const att_data *d)
{
    const att_case *c = &d->c;
    int64_t dims[3] = {c->n, c->heads, c->hd};
    return (orin_attention_args){
        .q = orin_tensor_make(NULL, d->dt, ops_target(), 3, dims),
        .out = orin_tensor_make(NULL, d->dt, ops_target(), 3, dims),
        .positions = orin_tensor_make(NULL, ORIN_I32, ops_target(), 1, dims),
        .cache = d->view,
        .scale = (float)(1.0 / sqrt((double)c->hd)),
        .max_kv_len = c->graph_bound ? d->capacity : d->kv_len,
    };
}

/* Whether impl declines calls shaped like the case (its `supports`); says so. */
static bool att_declined(const orin_op_impl *impl, const att_data *d, const char *what)
{
    char why[160] = "";
    orin_attention_args shape = att_shape(d);
    if (!impl->supports || impl->supports(&shape, why, sizeof why))
        return false;
    printf("  %s: declined (%s)\n", what, why);
    return true;
}

/* Runs impl on the case with `threads` threads into a fresh NaN-poisoned out,
 * with a NaN-poisoned workspace of the size it asks for, and fetches out. */
static int att_run(const orin_op_impl *impl, const att_data *d, int threads, ops_buf *out)
{
    *out = ops_buf_nan(d->dt, d->q.n);
    orin_attention_args a = att_args(d, out->data);
    orin_exec ex = ops_test_exec(threads);
    size_t ws = impl->workspace_size ? impl->workspace_size(&a) : 0;
    ex.workspace = ws ? ops_workspace(ws) : NULL; /* every byte 0xff: NaN floats */
    ex.workspace_size = ws;
    orin_error_clear();
    int rc = impl->run(&ex, &a);
    CHECK(rc == 0, "%s %s: %s", impl->op, impl->provider, orin_error());
    if (rc == 0)
        ops_buf_fetch(out);
    return rc;
}

static void att_describe(char *buf, size_t cap, const char *provider, const att_data *d)
{
    const att_case *c = &d->c;
    snprintf(buf, cap, "%s %s %s: n %d from %d%s (kv %d, cap %d%s), heads %d/%d, hd %d%s%s",
             provider, c->n == 1 && !c->scattered ? "1 row" : "rows", orin_dtype_name(d->dt),
             c->n, c->start, c->scattered ? " scattered" : "", d->kv_len, d->capacity,
             c->graph_bound ? ", graph bound" : "", c->heads, c->kv_heads, c->hd,
             c->layout == LAYOUT_HEAD_MAJOR ? ", head-major padded cache"
             : c->layout == LAYOUT_ODD    ? ", head-major cache padded by 3"
                                          : "",
             c->q_range > 10 ? ", large scores" : "");
}

static void att_case_run(const char *op, const att_case *c, orin_dtype dt, uint64_t seed,
                         bool check_determinism)
{
    att_data d;
    att_make(&d, c, dt, seed);
    att_reference(&d);
    if (c->q_range > 10)
        CHECK(d.max_score > 100, "large scores: the largest is only %g", d.max_score);
    for (int p = 0; p < n_providers; p++) {
        const orin_op_impl *impl = ops_test_impl(op, providers[p], dt);
        if (!impl)
            continue;
        char what[256], selected[300];
        att_describe(what, sizeof what, providers[p], &d);
        snprintf(selected, sizeof selected, "%s %s", op, what);
        if (!ops_test_selected(selected) || att_declined(impl, &d, what))
            continue;
        ops_buf out;
        if (att_run(impl, &d, 0, &out) == 0)
            ops_check_close(what, &out, d.ref, d.cond, ops_tol(dt), ops_atol(dt));
        if (check_determinism) {
            /* the same bits whatever the thread count (on the GPU: run to run) */
            ops_buf one, three;
            if (att_run(impl, &d, 1, &one) == 0 && att_run(impl, &d, 3, &three) == 0)
                CHECK(memcmp(one.data, out.data, out.n * orin_dtype_size(dt)) == 0 &&
                          memcmp(three.data, out.data, out.n * orin_dtype_size(dt)) == 0,
                      "%s: results change with the thread count", what);
            ops_buf_free(&one);
            ops_buf_free(&three);
        }
        ops_buf_free(&out);
        ops_release();
    }
    att_free(&d);
}

/* ---- the cases ---- */

/* CASE(n, start, heads, kv heads, head_dim, extras as designated initialisers) */
#define CASE(n_, start_, heads_, kv_heads_, hd_, ...)                                    \
    {.n = n_, .start = start_, .heads = heads_, .kv_heads = kv_heads_, .hd = hd_, __VA_ARGS__}
#define HEAD_MAJOR .layout = LAYOUT_HEAD_MAJOR
#define ODD_STRIDES .layout = LAYOUT_ODD

static const att_case prefill_cases[] = {
    CASE(1, 0, 1, 1, 64),
    CASE(1, 700, 4, 1, 128),
    CASE(63, 0, 2, 2, 64),
    CASE(64, 0, 4, 2, 128),
    CASE(65, 0, 8, 2, 64, .spare = 100),
    CASE(65, 130, 8, 1, 128),
    CASE(127, 0, 4, 4, 64, HEAD_MAJOR, .spare = 5),
    CASE(128, 0, 2, 1, 128),
    CASE(129, 3, 4, 2, 64),
    CASE(255, 0, 4, 4, 128, HEAD_MAJOR, .spare = 1),
    CASE(256, 1, 8, 1, 64),
    CASE(257, 0, 2, 1, 128, .spare = 31),
    CASE(257, 300, 4, 2, 64),
    CASE(64, 960, 8, 4, 128),        /* a chunk after earlier tokens, ending at 1024 */
    CASE(65, 959, 4, 1, 64),
    CASE(1023, 0, 2, 1, 64),
    CASE(1024, 0, 1, 1, 128, HEAD_MAJOR, .spare = 3),
    CASE(1025, 0, 2, 2, 64, .spare = 7),
    CASE(1025, 0, 8, 8, 128),
    CASE(100, 0, 4, 2, 64, .scattered = true),
    CASE(300, 50, 8, 2, 64, .scattered = true, .spare = 9),
    CASE(65, 0, 2, 1, 64, .q_range = 300),
};

static const att_case decode_cases[] = {
    CASE(1, 0, 1, 1, 64),
    CASE(1, 62, 2, 2, 128),
    CASE(1, 63, 4, 2, 64),
    CASE(1, 64, 8, 2, 128, .spare = 10),
    CASE(1, 254, 8, 1, 64),
    CASE(1, 255, 4, 4, 128, HEAD_MAJOR, .spare = 2),
    CASE(1, 256, 2, 1, 64, .graph_bound = true, .spare = 300),
    CASE(1, 511, 8, 4, 128),
    CASE(1, 512, 4, 1, 64, .graph_bound = true, .spare = 1),
    CASE(1, 1022, 8, 8, 64),
    CASE(1, 1023, 16, 2, 128, .graph_bound = true, .spare = 2000),
    CASE(1, 1024, 8, 1, 128, HEAD_MAJOR),
    CASE(1, 4096, 8, 2, 128, .spare = 3),
    CASE(1, 4096, 4, 4, 64, HEAD_MAJOR, .spare = 100, .graph_bound = true),
    CASE(1, 300, 4, 1, 64, .q_range = 300),
};

/* f16 and bf16: fewer cases, 1e-2. */
static const att_case half_prefill_cases[] = {
    CASE(65, 100, 4, 2, 64),
    CASE(130, 0, 8, 1, 128, HEAD_MAJOR, .spare = 4),
};
static const att_case half_decode_cases[] = {
    CASE(1, 299, 4, 1, 128),
    CASE(1, 1024, 8, 2, 64, .graph_bound = true, .spare = 600),
};

/* The GPU's own cases (the host reference is O(n kv H hd) in double: the long
 * ones have few heads). Query lengths 1, 7, 64, 65, 500 and 2049 from position
 * 0 and later; decodes and prefill chunks ending at KV lengths 63, 64, 65, 255,
 * 256, 257, 1023, 1025, 4097 and 32768; GQA ratios 1, 2, 4, 7, 8 and 16-20
 * (several decode tiles of one kv head); head_dim 64 and 128, and 96 (which
 * only mha runs); every dtype. */
typedef struct gpu_case {
    bool decode;
    orin_dtype dt;
    bool repeat;  /* also run twice more: the same bits every run */
    att_case c;
} gpu_case;

#define PRE(dt_, ...) {.decode = false, .dt = dt_, .c = CASE(__VA_ARGS__)}
#define DEC(dt_, ...) {.decode = true, .dt = dt_, .c = CASE(__VA_ARGS__)}
#define PRE_REPEAT(dt_, ...) {.decode = false, .dt = dt_, .repeat = true, .c = CASE(__VA_ARGS__)}
#define DEC_REPEAT(dt_, ...) {.decode = true, .dt = dt_, .repeat = true, .c = CASE(__VA_ARGS__)}

static const gpu_case gpu_cases[] = {
    /* prefill: the query lengths, from 0 and from later positions */
    PRE(ORIN_F16, 1, 0, 8, 8, 128),
    PRE(ORIN_BF16, 1, 1000, 14, 2, 64),
    PRE(ORIN_F32, 7, 0, 4, 4, 64),
    PRE(ORIN_F16, 7, 57, 8, 1, 128),                    /* ends at 64 */
    PRE(ORIN_F32, 64, 0, 14, 2, 128),
    PRE(ORIN_BF16, 64, 192, 8, 2, 64),                  /* ends at 256 */
    PRE(ORIN_BF16, 65, 0, 8, 1, 64),
    PRE(ORIN_F16, 65, 958, 4, 2, 128, .spare = 3),      /* ends at 1023 */
    PRE(ORIN_F16, 500, 0, 4, 1, 128),
    PRE(ORIN_F32, 500, 525, 2, 2, 64),                  /* ends at 1025 */
    PRE(ORIN_BF16, 2049, 0, 2, 1, 64),
    PRE_REPEAT(ORIN_F16, 2049, 2048, 1, 1, 128, HEAD_MAJOR, .spare = 9), /* ends at 4097 */
    /* prefill chunks ending at the decode lengths */
    PRE(ORIN_F32, 63, 0, 4, 2, 128),                    /* 63 */
    PRE(ORIN_F16, 62, 3, 7, 7, 64),                     /* 65 */
    PRE(ORIN_BF16, 63, 192, 4, 1, 128, .graph_bound = true, .spare = 70), /* 255 */
    PRE(ORIN_F32, 129, 128, 8, 4, 64),                  /* 257 */
    PRE(ORIN_F16, 65, 4032, 4, 1, 128),                 /* 4097 */
    PRE(ORIN_F32, 65, 32703, 2, 1, 64),                 /* 32768 */
    PRE(ORIN_BF16, 100, 32668, 2, 2, 128, HEAD_MAJOR),  /* 32768 */
    /* scattered, unordered positions; large scores; a head_dim only mha runs */
    PRE(ORIN_F16, 300, 50, 8, 2, 64, .scattered = true, .spare = 9),
    PRE(ORIN_BF16, 700, 10, 4, 1, 128, .scattered = true),
    PRE(ORIN_F16, 65, 0, 2, 1, 64, .q_range = 300),
    PRE(ORIN_BF16, 130, 7, 4, 2, 64, .q_range = 300),
    PRE(ORIN_F32, 65, 10, 4, 2, 96),
    PRE(ORIN_F16, 130, 5, 8, 2, 128, ODD_STRIDES),
    /* decode: the KV lengths, GQA 1, 2, 4, 7, 8 and groups of 16 and 20 */
    DEC(ORIN_F32, 1, 62, 4, 4, 64),
    DEC(ORIN_F16, 1, 63, 8, 2, 128),
    DEC(ORIN_BF16, 1, 64, 14, 2, 128),
    DEC(ORIN_F16, 1, 254, 8, 1, 64),
    DEC(ORIN_BF16, 1, 255, 16, 8, 128, HEAD_MAJOR, .spare = 5),
    DEC(ORIN_F32, 1, 256, 7, 1, 64, .graph_bound = true, .spare = 100),
    DEC(ORIN_F16, 1, 1022, 8, 2, 128, HEAD_MAJOR),
    DEC(ORIN_BF16, 1, 1024, 32, 4, 128),
    DEC(ORIN_F16, 1, 4096, 8, 8, 64, .graph_bound = true, .spare = 1000),
    DEC(ORIN_F32, 1, 4096, 14, 2, 128),
    DEC_REPEAT(ORIN_F16, 1, 32767, 8, 2, 128),
    DEC(ORIN_BF16, 1, 32767, 4, 1, 64, .graph_bound = true, .spare = 5),
    DEC(ORIN_F32, 1, 32767, 2, 2, 128),
    DEC(ORIN_F16, 1, 500, 32, 2, 128),                  /* a group of 16 */
    DEC(ORIN_F32, 1, 100, 40, 2, 64, HEAD_MAJOR),       /* a group of 20 */
    DEC(ORIN_F16, 1, 300, 4, 1, 64, .q_range = 300),
    DEC(ORIN_BF16, 1, 77, 6, 2, 96),
    DEC(ORIN_F32, 1, 700, 8, 2, 64, ODD_STRIDES),
    DEC(ORIN_BF16, 1, 300, 4, 4, 128, ODD_STRIDES, .graph_bound = true, .spare = 20),
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void run_cases(void)
{
    for (size_t i = 0; i < COUNT(prefill_cases); i++)
        att_case_run(ORIN_OP_ATTENTION_PREFILL, &prefill_cases[i], ORIN_F32, 1000 + i, i == 12);
    for (size_t i = 0; i < COUNT(decode_cases); i++)
        att_case_run(ORIN_OP_ATTENTION_DECODE, &decode_cases[i], ORIN_F32, 2000 + i, i == 12);
    orin_dtype halves[2] = {ORIN_F16, ORIN_BF16};
    for (int h = 0; h < 2; h++) {
        for (size_t i = 0; i < COUNT(half_prefill_cases); i++)
            att_case_run(ORIN_OP_ATTENTION_PREFILL, &half_prefill_cases[i], halves[h], 3000 + i,
                         false);
        for (size_t i = 0; i < COUNT(half_decode_cases); i++)
            att_case_run(ORIN_OP_ATTENTION_DECODE, &half_decode_cases[i], halves[h], 4000 + i,
                         false);
    }
    if (!ops_on_gpu())
        return;
    for (size_t i = 0; i < COUNT(gpu_cases); i++) {
        const gpu_case *g = &gpu_cases[i];
        if (ops_test_quick() && (g->c.n > 1000 || g->c.start + g->c.n > 4200))
            continue; /* under a sanitizer: the long ones are left out */
        att_case_run(g->decode ? ORIN_OP_ATTENTION_DECODE : ORIN_OP_ATTENTION_PREFILL, &g->c,
                     g->dt, 5000 + i, g->repeat);
    }
}

/* ---- flash providers against the mha kernel, on shapes too large for the host
 * reference ----
 * mha's output stands in for the reference. The error scale is 0.5, the
 * condition sum_j p_j |v_j| of these inputs (V uniform in +-1 and scores of
 * a few units, so p spreads over many positions and the condition is near
 * E|v| = 0.5), and both sides are within the tolerance of the truth. */

static const gpu_case big_cases[] = {
    PRE(ORIN_F16, 4096, 0, 16, 4, 128),
    PRE(ORIN_BF16, 2049, 3000, 8, 1, 64, HEAD_MAJOR, .spare = 11),
    PRE(ORIN_F32, 1500, 0, 12, 2, 128),
    DEC(ORIN_F16, 1, 32767, 32, 4, 128),
    DEC(ORIN_BF16, 1, 65000, 16, 2, 64, .graph_bound = true, .spare = 536),
    DEC(ORIN_F32, 1, 40000, 8, 2, 128),
};

static void compare_with_mha(const gpu_case *g, uint64_t seed)
{
    const char *op = g->decode ? ORIN_OP_ATTENTION_DECODE : ORIN_OP_ATTENTION_PREFILL;
    const orin_op_impl *mha = ops_test_impl(op, "mha", g->dt);
    if (!mha)
        return;
    att_data d;
    att_make(&d, &g->c, g->dt, seed);
    ops_buf ref;
    if (att_run(mha, &d, 0, &ref) != 0) {
        ops_buf_free(&ref);
        ops_release();
        att_free(&d);
        return;
    }
    double *scale = malloc(ref.n * sizeof(double));
    size_t finite = 0;
    for (size_t i = 0; i < ref.n; i++) {
        scale[i] = 0.5;
        finite += isfinite(ref.value[i]) != 0;
    }
    CHECK(finite == ref.n, "mha on a big case: %zu of %zu outputs not finite", ref.n - finite,
          ref.n);
    for (int p = 0; p < n_providers; p++) {
        if (strcmp(providers[p], "mha") == 0)
            continue;
        const orin_op_impl *impl = ops_test_impl(op, providers[p], g->dt);
        char what[300], desc[256];
        att_describe(desc, sizeof desc, providers[p], &d);
        snprintf(what, sizeof what, "%s %s against mha", op, desc);
        if (!impl || !ops_test_selected(what) || att_declined(impl, &d, what))
            continue;
        ops_buf out;
        if (att_run(impl, &d, 0, &out) == 0)
            ops_check_close(what, &out, ref.value, scale, ops_tol(g->dt), ops_atol(g->dt));
        ops_buf_free(&out);
    }
    free(scale);
    ops_buf_free(&ref);
    ops_release();
    att_free(&d);
}

static void test_against_mha(void)
{
    if (ops_test_quick())
        return;
    for (size_t i = 0; i < COUNT(big_cases); i++)
        compare_with_mha(&big_cases[i], 6000 + i);
}

/* ---- positions outside the bound, on the GPU ----
 * They are in device memory, so no check sees them: the row is NaN, the other
 * rows are right, and nothing outside the cache is read (no crash; run it under
 * compute-sanitizer to see the reads). */

static void bad_position_case(const char *op, const att_case *c, const int *rows,
                              const int32_t *values, int count, uint64_t seed)
{
    att_data d;
    att_make(&d, c, ORIN_F16, seed);
    att_reference(&d);
    for (int b = 0; b < count; b++)
        d.pos[rows[b]] = values[b];
    for (int p = 0; p < n_providers; p++) {
        const orin_op_impl *impl = ops_test_impl(op, providers[p], ORIN_F16);
        if (!impl)
            continue;
        ops_buf out;
        if (att_run(impl, &d, 0, &out) == 0) {
            size_t row = (size_t)c->heads * c->hd, bad_nan = 0, bad_value = 0;
            for (size_t i = 0; i < out.n; i++) {
                bool bad_row = false;
                for (int b = 0; b < count; b++)
                    bad_row |= (size_t)rows[b] == i / row;
                double err = fabs(out.value[i] - d.ref[i]);
                if (bad_row)
                    bad_nan += !isnan(out.value[i]);
                else
                    bad_value += !(err <= ops_tol(ORIN_F16) * d.cond[i] + ops_atol(ORIN_F16));
            }
            CHECK(bad_nan == 0 && bad_value == 0,
                  "%s %s, positions out of bounds: %zu elements of their rows not NaN, %zu of "
                  "the other rows wrong", op, providers[p], bad_nan, bad_value);
        }
        ops_buf_free(&out);
        ops_release();
    }
    att_free(&d);
}

static void test_bad_positions(void)
{
    const att_case prefill = CASE(70, 10, 8, 2, 64, .spare = 6);
    const int rows[3] = {3, 40, 69};
    const int32_t values[3] = {-1, 80 /* = max_kv_len */, 1 << 30};
    bad_position_case(ORIN_OP_ATTENTION_PREFILL, &prefill, rows, values, 3, 51);
    const att_case decode = CASE(1, 300, 8, 2, 128, .graph_bound = true, .spare = 4);
    const int row0[1] = {0};
    const int32_t past[1] = {305 /* = capacity */}, negative[1] = {-7};
    bad_position_case(ORIN_OP_ATTENTION_DECODE, &decode, row0, past, 1, 52);
    bad_position_case(ORIN_OP_ATTENTION_DECODE, &decode, row0, negative, 1, 53);
}

/* ---- the registry's fallback for a shape a provider declines (GPU) ---- */

static bool has_provider(const char *name)
{
    for (int p = 0; p < n_providers; p++)
        if (strcmp(providers[p], name) == 0)
            return true;
    return false;
}

static void test_fallback(void)
{
    const att_case c = CASE(1, 20, 4, 2, 96);
    att_data d;
    att_make(&d, &c, ORIN_F16, 54);
    orin_attention_args shape96 = att_shape(&d);
    d.c.hd = 128;
    d.view.head_dim = 128;
    orin_attention_args shape128 = att_shape(&d);
    const char *ops[2] = {ORIN_OP_ATTENTION_PREFILL, ORIN_OP_ATTENTION_DECODE};
    for (int o = 0; o < 2; o++) {
        char why[160] = "";
        if (has_provider("fa1")) {
            const orin_op_impl *fa1 = ops_test_impl(ops[o], "fa1", ORIN_F16);
            CHECK(fa1 && fa1->supports && !fa1->supports(&shape96, why, sizeof why) &&
                      strstr(why, "head_dim 96") && fa1->supports(&shape128, why, sizeof why),
                  "fa1 %s on cuda: declines head_dim 96, runs 128 (why: \"%s\")", ops[o], why);
        }
        for (int p = 0; p < n_providers; p++) {
            const orin_op_impl *impl = ops_test_impl(ops[o], providers[p], ORIN_F16);
            if (!impl || !impl->supports || impl->supports(&shape96, why, sizeof why))
                continue; /* runs head_dim 96 itself: nothing to fall back from */
            orin_bind_request req = {
                .op = ops[o],
                .provider = providers[p],
                .device = ORIN_DEVICE_CUDA,
                .dtype = ORIN_F16,
                .args = &shape96,
            };
            const orin_op_impl *bound = orin_registry_bind(ops_test_registry(), &req);
            CHECK(bound && strcmp(bound->provider, "mha") == 0,
                  "%s asked of %s at head_dim 96: bound %s (%s)", ops[o], providers[p],
                  bound ? bound->provider : "nothing", bound ? "" : orin_error());
            req.strict = true;
            CHECK(orin_registry_bind(ops_test_registry(), &req) == NULL,
                  "%s asked of %s at head_dim 96, strict: a fallback was bound", ops[o],
                  providers[p]);
        }
    }
    att_free(&d);
}

/* ---- a decode captured into a CUDA graph, replayed step after step ----
 * The call is captured once with max_kv_len = capacity, as the engine captures
 * it. Each step then writes its K/V row, its position and a fresh q row into
 * the buffers the graph reads (async copies on the device's stream, outside the
 * graph), poisons both outputs, replays the graph and runs the same call
 * eagerly: the output must be the eager one bit for bit (the same kernel on the
 * same inputs). It must also be within tolerance of an eager call with the exact
 * max_kv_len = position + 1 (bitwise too where the provider's launch does not
 * depend on max_kv_len; the count is printed), and every 100 steps of the
 * double reference. */
#ifdef OPS_TEST_HAVE_CUDA

enum { GRAPH_STEPS = 2000, GRAPH_START = 60, GRAPH_HEADS = 8, GRAPH_KV_HEADS = 2, GRAPH_HD = 128 };

/* Steps replayed: all of them, or 100 under a sanitizer (ORIN_TEST_QUICK). */
static int graph_steps(void)
{
    return ops_test_quick() ? 100 : GRAPH_STEPS;
}

static bool cuda_ok(const char *what, cudaError_t err)
{
    CHECK(err == cudaSuccess, "graph replay: %s: %s", what, cudaGetErrorString(err));
    return err == cudaSuccess;
}

/* The double reference of step s: the case's cache, position p, q row s. */
static void graph_check_reference(const char *what, att_data *d, const ops_buf *qs, int s,
                                  int32_t p, const ops_buf *got)
{
    size_t row = (size_t)GRAPH_HEADS * GRAPH_HD;
    att_data st = *d;
    int32_t pos = p;
    st.pos = &pos;
    st.kv_len = p + 1;
    st.q = (ops_buf){
        .dt = d->dt,
        .n = row,
        .data = (char *)qs->data + (size_t)s * row * orin_dtype_size(d->dt),
        .value = qs->value + (size_t)s * row,
    };
    att_reference(&st);
    ops_check_close(what, got, st.ref, st.cond, ops_tol(d->dt), ops_atol(d->dt));
    free(st.ref);
    free(st.cond);
}

/* One provider's replay: the buffers the graph reads, and three outputs. */
typedef struct graph_run {
    const char *provider;
    const orin_op_impl *impl;
    att_data d;                  /* the cache's values for every position, on the host */
    ops_buf k0, v0;              /* the cache as uploaded: positions past START are NaN */
    ops_buf qs;                  /* one q row a step */
    int32_t *steps_pos;          /* one position a step */
    int32_t pos0;
    ops_buf out_graph, out_bound, out_exact;
    orin_attention_args graph_args, bound_args, exact_args;
    orin_exec ex;
    cudaStream_t stream;
    size_t kv_row_bytes, out_bytes;
} graph_run;

static void graph_setup(graph_run *g)
{
    const orin_dtype dt = ORIN_F16;
    const att_case c = CASE(1, GRAPH_START + GRAPH_STEPS - 1, GRAPH_HEADS, GRAPH_KV_HEADS,
                            GRAPH_HD, .graph_bound = true, .spare = 40);
    att_make(&g->d, &c, dt, 77); /* K and V of every position the steps reach */
    ops_rng rng = {.state = 78};
    const size_t elem = orin_dtype_size(dt), row = (size_t)GRAPH_HEADS * GRAPH_HD;
    const size_t cache_bytes = g->d.k.n * elem;
    g->kv_row_bytes = (size_t)g->d.view.pos_stride * elem;
    g->out_bytes = row * elem;

    g->k0 = ops_buf_nan(dt, g->d.k.n);
    g->v0 = ops_buf_nan(dt, g->d.v.n);
    memcpy(g->k0.data, g->d.k.data, GRAPH_START * g->kv_row_bytes);
    memcpy(g->v0.data, g->d.v.data, GRAPH_START * g->kv_row_bytes);
    g->qs = ops_buf_random(&rng, dt, GRAPH_STEPS * row, -2, 2);
    g->steps_pos = malloc(GRAPH_STEPS * sizeof(int32_t));
    for (int s = 0; s < GRAPH_STEPS; s++)
        g->steps_pos[s] = GRAPH_START + s;
    g->pos0 = GRAPH_START;
    g->out_graph = ops_buf_nan(dt, row);
    g->out_bound = ops_buf_nan(dt, row);
    g->out_exact = ops_buf_nan(dt, row);

    int64_t dims[3] = {1, GRAPH_HEADS, GRAPH_HD};
    g->graph_args = (orin_attention_args){
        .q = ops_tensor(g->qs.data, dt, 3, dims), /* step 0's row; later rows copied in */
        .out = ops_tensor(g->out_graph.data, dt, 3, dims),
        .positions = ops_tensor(&g->pos0, ORIN_I32, 1, dims),
        .cache = g->d.view,
        .scale = (float)(1.0 / sqrt((double)GRAPH_HD)),
        .max_kv_len = g->d.capacity,
    };
    g->graph_args.cache.k = ops_dev(g->k0.data, cache_bytes);
    g->graph_args.cache.v = ops_dev(g->v0.data, cache_bytes);
    g->bound_args = g->exact_args = g->graph_args;
    g->bound_args.out = ops_tensor(g->out_bound.data, dt, 3, dims);
    g->exact_args.out = ops_tensor(g->out_exact.data, dt, 3, dims);

    g->ex = ops_test_exec(0);
    size_t ws = g->impl->workspace_size ? g->impl->workspace_size(&g->graph_args) : 0;
    g->ex.workspace = ws ? ops_workspace(ws) : NULL; /* the largest: max_kv_len = capacity */
    g->ex.workspace_size = ws;
    g->stream = (cudaStream_t)g->ex.device->stream;
}

static void graph_teardown(graph_run *g)
{
    ops_release();
    ops_buf_free(&g->k0);
    ops_buf_free(&g->v0);
    ops_buf_free(&g->qs);
    ops_buf_free(&g->out_graph);
    ops_buf_free(&g->out_bound);
    ops_buf_free(&g->out_exact);
    free(g->steps_pos);
    att_free(&g->d);
}

/* One eager call first (so that nothing done once happens inside the capture),
 * then the capture of the call with max_kv_len = capacity. */
static bool graph_capture(graph_run *g, cudaGraph_t *graph, cudaGraphExec_t *exec)
{
    orin_error_clear();
    int rc = g->impl->run(&g->ex, &g->bound_args);
    CHECK(rc == 0, "graph replay: %s: eager call: %s", g->provider, orin_error());
    if (rc != 0 || !cuda_ok("eager call", cudaStreamSynchronize(g->stream)) ||
        !cuda_ok("begin capture", cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeGlobal)))
        return false;
    rc = g->impl->run(&g->ex, &g->graph_args);
    cudaError_t end = cudaStreamEndCapture(g->stream, graph);
    CHECK(rc == 0, "graph replay: %s: captured call: %s", g->provider, orin_error());
    return rc == 0 && cuda_ok("end capture", end) &&
           cuda_ok("instantiate", cudaGraphInstantiate(exec, *graph, 0));
}

/* Step s's inputs into the buffers the graph reads, outputs poisoned, the
 * replay, and the two eager calls; all queued on the device's stream. */
static bool graph_step(graph_run *g, cudaGraphExec_t exec, int s)
{
    const int32_t p = g->steps_pos[s];
    const size_t at = (size_t)p * g->kv_row_bytes;
    g->exact_args.max_kv_len = p + 1;
    bool ok =
        cuda_ok("K row", cudaMemcpyAsync((char *)g->graph_args.cache.k + at, (char *)g->d.k.data + at,
                                         g->kv_row_bytes, cudaMemcpyHostToDevice, g->stream)) &&
        cuda_ok("V row", cudaMemcpyAsync((char *)g->graph_args.cache.v + at, (char *)g->d.v.data + at,
                                         g->kv_row_bytes, cudaMemcpyHostToDevice, g->stream)) &&
        cuda_ok("position", cudaMemcpyAsync(g->graph_args.positions.data, &g->steps_pos[s],
                                            sizeof(int32_t), cudaMemcpyHostToDevice, g->stream)) &&
        cuda_ok("q row", cudaMemcpyAsync(g->graph_args.q.data,
                                         (char *)g->qs.data + (size_t)s * g->out_bytes,
                                         g->out_bytes, cudaMemcpyHostToDevice, g->stream)) &&
        cuda_ok("poison", cudaMemsetAsync(g->graph_args.out.data, 0xff, g->out_bytes, g->stream)) &&
        cuda_ok("poison", cudaMemsetAsync(g->bound_args.out.data, 0xff, g->out_bytes, g->stream)) &&
        cuda_ok("poison", cudaMemsetAsync(g->exact_args.out.data, 0xff, g->out_bytes, g->stream)) &&
        cuda_ok("replay", cudaGraphLaunch(exec, g->stream));
    if (!ok)
        return false;
    orin_error_clear();
    int rc = g->impl->run(&g->ex, &g->bound_args);
    if (rc == 0)
        rc = g->impl->run(&g->ex, &g->exact_args);
    CHECK(rc == 0, "graph replay: %s step %d: eager call: %s", g->provider, s, orin_error());
    if (rc != 0)
        return false;
    ops_fetch(g->out_graph.data, g->out_bytes);
    ops_fetch(g->out_bound.data, g->out_bytes);
    ops_fetch(g->out_exact.data, g->out_bytes);
    ops_buf_read(&g->out_graph);
    ops_buf_read(&g->out_bound);
    ops_buf_read(&g->out_exact);
    return true;
}

static void graph_replay(const char *provider)
{
    graph_run g = {.provider = provider};
    g.impl = ops_test_impl(ORIN_OP_ATTENTION_DECODE, provider, ORIN_F16);
    if (!g.impl)
        return;
    CHECK(g.impl->flags & ORIN_OP_GRAPH_SAFE, "graph replay: %s decode is not graph-safe",
          provider);
    graph_setup(&g);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (graph_capture(&g, &graph, &exec)) {
        const size_t row = g.out_graph.n;
        const double tol = ops_tol(ORIN_F16), atol = ops_atol(ORIN_F16);
        int differ = 0, first_differ = -1, same_exact = 0, s;
        double worst_exact = 0.0;
        double *half = malloc(row * sizeof(double));
        for (size_t i = 0; i < row; i++)
            half[i] = 0.5; /* the error scale, as in compare_with_mha */
        const int steps = graph_steps();
        for (s = 0; s < steps && graph_step(&g, exec, s); s++) {
            const int32_t p = g.steps_pos[s];
            if (memcmp(g.out_graph.data, g.out_bound.data, g.out_bytes) != 0) {
                differ++;
                first_differ = first_differ < 0 ? s : first_differ;
            }
            same_exact += memcmp(g.out_graph.data, g.out_exact.data, g.out_bytes) == 0;
            char what[200];
            snprintf(what, sizeof what, "graph replay: %s step %d (position %d) against the "
                     "eager call with max_kv_len %d", provider, s, p, p + 1);
            double r = ops_check_close(what, &g.out_graph, g.out_exact.value, half, tol, atol);
            worst_exact = r > worst_exact ? r : worst_exact;
            if (s % 100 == 0 || s == steps - 1) {
                snprintf(what, sizeof what, "graph replay: %s step %d (position %d)", provider,
                         s, p);
                graph_check_reference(what, &g.d, &g.qs, s, p, &g.out_graph);
            }
        }
        CHECK(s == steps && differ == 0,
              "graph replay: %s: %d steps run of %d; %d differ from the eager call with the same "
              "max_kv_len (first: step %d)", provider, s, steps, differ, first_differ);
        printf("graph replay: %s: %d steps; bitwise equal to the eager call with the exact "
               "max_kv_len at %d of them (worst difference %.3g x the tolerance)\n",
               provider, s, same_exact, worst_exact);
        free(half);
    }
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    graph_teardown(&g);
}

static void test_graph_replay(void)
{
    for (int p = 0; p < n_providers; p++)
        graph_replay(providers[p]);
}
#else
static void test_graph_replay(void)
{
    CHECK(false, "graph replay: this test was built without the CUDA runtime");
}
#endif

/* ---- bad calls ---- */

static void expect(const orin_op_impl *impl, att_data *d, const char *what, const char *needle,
                   void (*spoil)(orin_attention_args *, orin_exec *))
{
    ops_buf out = ops_buf_nan(d->dt, d->q.n);
    orin_attention_args a = att_args(d, out.data);
    orin_exec ex = ops_test_exec(0);
    size_t ws = impl->workspace_size ? impl->workspace_size(&a) : 0;
    ex.workspace = ws ? ops_workspace(ws) : NULL;
    ex.workspace_size = ws;
    spoil(&a, &ex);
    ops_expect_error(what, impl, &ex, &a, needle);
    ops_release();
    ops_buf_free(&out);
}

static void spoil_heads(orin_attention_args *a, orin_exec *ex)
{
    a->cache.n_kv_heads = 3;
    a->cache.pos_stride = 3 * a->cache.head_stride; /* a consistent [cap, 3, hd] view */
}
static void spoil_position(orin_attention_args *a, orin_exec *ex) { a->max_kv_len -= 1; }
static void spoil_bound(orin_attention_args *a, orin_exec *ex) { a->max_kv_len = a->cache.capacity + 1; }
static void spoil_head_dim(orin_attention_args *a, orin_exec *ex) { a->cache.head_dim = 32; }
static void spoil_alias(orin_attention_args *a, orin_exec *ex) { a->out.data = a->q.data; }
static void spoil_scale(orin_attention_args *a, orin_exec *ex) { a->scale = NAN; }
static void spoil_cache(orin_attention_args *a, orin_exec *ex) { a->cache.v = NULL; }
static void spoil_q_dtype(orin_attention_args *a, orin_exec *ex) { a->q.dtype = ORIN_BF16; }
static void spoil_workspace(orin_attention_args *a, orin_exec *ex) { ex->workspace_size -= 4; }
static void spoil_device(orin_attention_args *a, orin_exec *ex)
{
    a->q.device = a->q.device == ORIN_DEVICE_CPU ? ORIN_DEVICE_CUDA : ORIN_DEVICE_CPU;
}

static void test_errors(void)
{
    const att_case prefill = {5, 10, 4, 2, 64, .spare = 4};
    const att_case decode = {1, 300, 4, 2, 64, .spare = 4};
    att_data dp, dd;
    att_make(&dp, &prefill, ORIN_F32, 9);
    att_make(&dd, &decode, ORIN_F32, 10);
    for (int p = 0; p < n_providers; p++) {
        for (int is_decode = 0; is_decode < 2; is_decode++) {
            const char *op = is_decode ? ORIN_OP_ATTENTION_DECODE : ORIN_OP_ATTENTION_PREFILL;
            const orin_op_impl *impl = ops_test_impl(op, providers[p], ORIN_F32);
            att_data *d = is_decode ? &dd : &dp;
            if (!impl)
                continue;
            expect(impl, d, "heads not a multiple", "not a multiple of 3 kv heads", spoil_heads);
            /* positions are read on the host only there; the GPU's answer to a
             * position past the bound is a NaN row (test_bad_positions) */
            if (!ops_on_gpu())
                expect(impl, d, "position past max_kv_len", "(max_kv_len)", spoil_position);
            expect(impl, d, "max_kv_len past capacity", "the cache capacity", spoil_bound);
            expect(impl, d, "head_dim", "kv cache: head_dim 32", spoil_head_dim);
            expect(impl, d, "out aliasing q", "out overlaps q", spoil_alias);
            expect(impl, d, "NaN scale", "scale", spoil_scale);
            expect(impl, d, "no V", "kv cache: no data", spoil_cache);
            expect(impl, d, "q dtype", "q: dtype bf16, expected f32", spoil_q_dtype);
            expect(impl, d, "q on the wrong device", "q: on ", spoil_device);
            orin_attention_args shape = att_shape(d);
            if (impl->workspace_size && impl->workspace_size(&shape) > 0)
                expect(impl, d, "workspace too small", "workspace of", spoil_workspace);
        }
        /* decode takes one token */
        const orin_op_impl *impl = ops_test_impl(ORIN_OP_ATTENTION_DECODE, providers[p], ORIN_F32);
        if (impl) {
            ops_buf out = ops_buf_nan(ORIN_F32, dp.q.n);
            orin_attention_args a = att_args(&dp, out.data);
            orin_exec ex = ops_test_exec(0);
            ops_expect_error("decode of 5 tokens", impl, &ex, &a, "5 tokens, decode takes 1");
            ops_release();
            ops_buf_free(&out);
        }
    }
    att_free(&dp);
    att_free(&dd);
}

/* What each attention plugin registers on the target, and with which flags:
 * mha the reference, every decode graph-safe, workspaces declared where the
 * kernels need one. fa2's CUDA rows are checked for flags only. */
static void test_registrations(void)
{
    orin_dtype dts[3] = {ORIN_F32, ORIN_F16, ORIN_BF16};
    for (int p = 0; p < 3; p++) {
        for (int t = 0; t < 3; t++) {
            const char *name = all_providers[p];
            const orin_op_impl *pre = ops_test_impl(ORIN_OP_ATTENTION_PREFILL, name, dts[t]);
            const orin_op_impl *dec = ops_test_impl(ORIN_OP_ATTENTION_DECODE, name, dts[t]);
            bool mha = strcmp(name, "mha") == 0, fa2 = strcmp(name, "fa2") == 0;
            if (pre)
                CHECK(!!(pre->flags & ORIN_OP_REFERENCE) == mha, "%s prefill: reference flag",
                      name);
            if (dec)
                CHECK((dec->flags & ORIN_OP_GRAPH_SAFE) && !!(dec->flags & ORIN_OP_REFERENCE) == mha,
                      "%s decode: flags %#x", name, dec->flags);
            /* on the GPU mha keeps its scores, fa1 its O, m and l in the workspace */
            if (ops_on_gpu() && !fa2 && pre && dec)
                CHECK(pre->workspace_size && dec->workspace_size,
                      "%s %s on cuda: no workspace declared", name, orin_dtype_name(dts[t]));
            orin_exec ex = ops_test_exec(0);
            ops_expect_error("no call struct", pre, &ex, NULL, "no arguments");
            ops_expect_error("no call struct", dec, &ex, NULL, "no arguments");
        }
    }
    const orin_op_impl *fa2 = ops_test_impl(ORIN_OP_ATTENTION_DECODE, "fa2", ORIN_F32);
    if (fa2 && !ops_on_gpu()) {
        /* the CPU implementation: 2 heads of 64, max_kv_len 513: 3 splits of 256,
         * each 2 x (64 + 1) floats */
        float q[128];
        orin_attention_args a = {
            .q = ops_tensor(q, ORIN_F32, 3, (int64_t[]){1, 2, 64}),
            .max_kv_len = 513,
        };
        CHECK(fa2->workspace_size && fa2->workspace_size(&a) == 3 * 2 * 65 * sizeof(float),
              "fa2 decode workspace: %zu bytes", fa2->workspace_size ? fa2->workspace_size(&a) : 0);
    }
}

int main(int argc, char **argv)
{
    ops_test_init(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0) {
            i++;
            continue;
        }
        providers[n_providers++ % 3] = argv[i];
    }
    if (n_providers == 0) {
        memcpy(providers, all_providers, sizeof providers);
        n_providers = 3;
    }
    if (n_providers > 3)
        n_providers = 3;
    ops_test_registry();
    test_registrations();
    run_cases();
    /* under ORIN_TEST_ONLY, the parts that are not cases run only when named */
    if (ops_test_selected("errors"))
        test_errors();
    if (ops_on_gpu()) {
        test_against_mha();
        if (ops_test_selected("bad positions"))
            test_bad_positions();
        if (ops_test_selected("fallback"))
            test_fallback();
        if (ops_test_selected("graph replay"))
            test_graph_replay();
    }
    ops_test_registry_free();
    return test_finish();
}
