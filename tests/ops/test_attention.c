/* Attention through the registry: mha, fa1 and fa2, prefill and decode, against
 * a double-precision reference written here, at sizes that cross every tile
 * boundary, with GQA, causal chunks after earlier tokens, cache views with
 * non-default strides, and bad calls rejected with errors.
 *
 * The error of an attention output is measured against its condition,
 * sum_j p_j |v_j| (what rounding errors in a weighted average scale with), so
 * that "1e-5 relative" means the same thing for outputs near zero.
 *
 * Usage: test_ops_attention [mha|fa1|fa2]  (default: all three) */
#include "ops_test.h"

#include "orin/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const all_providers[] = {"mha", "fa1", "fa2"};
static const char *providers[3];
static int n_providers;

typedef enum { LAYOUT_DEFAULT, LAYOUT_HEAD_MAJOR } cache_layout;

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
    int64_t row = c->layout == LAYOUT_HEAD_MAJOR ? c->hd + 8 : c->hd;
    d->view = (orin_kv_view){
        .dtype = dt,
        .n_kv_heads = c->kv_heads,
        .head_dim = c->hd,
        .pos_stride = c->layout == LAYOUT_HEAD_MAJOR ? row : (int64_t)c->kv_heads * c->hd,
        .head_stride = c->layout == LAYOUT_HEAD_MAJOR ? row * d->capacity : c->hd,
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

static orin_attention_args att_args(const att_data *d, void *out)
{
    const att_case *c = &d->c;
    int64_t dims[3] = {c->n, c->heads, c->hd};
    return (orin_attention_args){
        .q = ops_tensor(d->q.data, d->dt, 3, dims),
        .out = ops_tensor(out, d->dt, 3, dims),
        .positions = ops_tensor(d->pos, ORIN_I32, 1, dims),
        .cache = d->view,
        .scale = (float)(1.0 / sqrt((double)c->hd)),
        .max_kv_len = c->graph_bound ? d->capacity : d->kv_len,
    };
}

/* Runs impl on the case with `threads` threads into a fresh NaN-poisoned out,
 * with a NaN-poisoned workspace of the size it asks for. */
static int att_run(const orin_op_impl *impl, const att_data *d, int threads, ops_buf *out)
{
    *out = ops_buf_nan(d->dt, d->q.n);
    orin_attention_args a = att_args(d, out->data);
    orin_exec ex = ops_test_exec(threads);
    size_t ws = impl->workspace_size ? impl->workspace_size(&a) : 0;
    ex.workspace = ws ? malloc(ws) : NULL;
    ex.workspace_size = ws;
    if (ws)
        memset(ex.workspace, 0xff, ws); /* NaN floats */
    orin_error_clear();
    int rc = impl->run(&ex, &a);
    CHECK(rc == 0, "%s %s: %s", impl->op, impl->provider, orin_error());
    free(ex.workspace);
    return rc;
}

static void att_describe(char *buf, size_t cap, const char *provider, const att_data *d)
{
    const att_case *c = &d->c;
    snprintf(buf, cap, "%s %s %s: n %d from %d%s (kv %d, cap %d%s), heads %d/%d, hd %d%s%s",
             provider, c->n == 1 && !c->scattered ? "1 row" : "rows", orin_dtype_name(d->dt),
             c->n, c->start, c->scattered ? " scattered" : "", d->kv_len, d->capacity,
             c->graph_bound ? ", graph bound" : "", c->heads, c->kv_heads, c->hd,
             c->layout == LAYOUT_HEAD_MAJOR ? ", head-major padded cache" : "",
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
        char what[256];
        att_describe(what, sizeof what, providers[p], &d);
        ops_buf out;
        if (att_run(impl, &d, 0, &out) == 0)
            ops_check_close(what, &out, d.ref, d.cond, ops_tol(dt), ops_atol(dt));
        if (check_determinism) {
            /* the same bits whatever the thread count */
            ops_buf one, three;
            if (att_run(impl, &d, 1, &one) == 0 && att_run(impl, &d, 3, &three) == 0)
                CHECK(memcmp(one.data, out.data, out.n * orin_dtype_size(dt)) == 0 &&
                          memcmp(three.data, out.data, out.n * orin_dtype_size(dt)) == 0,
                      "%s: results change with the thread count", what);
            ops_buf_free(&one);
            ops_buf_free(&three);
        }
        ops_buf_free(&out);
    }
    att_free(&d);
}

/* ---- the cases ---- */

/* CASE(n, start, heads, kv heads, head_dim, extras as designated initialisers) */
#define CASE(n_, start_, heads_, kv_heads_, hd_, ...)                                    \
    {.n = n_, .start = start_, .heads = heads_, .kv_heads = kv_heads_, .hd = hd_, __VA_ARGS__}
#define HEAD_MAJOR .layout = LAYOUT_HEAD_MAJOR

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
}

/* ---- bad calls ---- */

static void expect(const orin_op_impl *impl, att_data *d, const char *what, const char *needle,
                   void (*spoil)(orin_attention_args *, orin_exec *))
{
    ops_buf out = ops_buf_nan(d->dt, d->q.n);
    orin_attention_args a = att_args(d, out.data);
    orin_exec ex = ops_test_exec(0);
    size_t ws = impl->workspace_size ? impl->workspace_size(&a) : 0;
    ex.workspace = ws ? calloc(1, ws) : NULL;
    ex.workspace_size = ws;
    spoil(&a, &ex);
    ops_expect_error(what, impl, &ex, &a, needle);
    free(ex.workspace);
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
            expect(impl, d, "position past max_kv_len", "(max_kv_len)", spoil_position);
            expect(impl, d, "max_kv_len past capacity", "the cache capacity", spoil_bound);
            expect(impl, d, "head_dim", "kv cache: head_dim 32", spoil_head_dim);
            expect(impl, d, "out aliasing q", "out overlaps q", spoil_alias);
            expect(impl, d, "NaN scale", "scale", spoil_scale);
            expect(impl, d, "no V", "kv cache: no data", spoil_cache);
            expect(impl, d, "q dtype", "q: dtype bf16, expected f32", spoil_q_dtype);
            if (impl->workspace_size)
                expect(impl, d, "workspace too small", "workspace of", spoil_workspace);
        }
        /* decode takes one token */
        const orin_op_impl *impl = ops_test_impl(ORIN_OP_ATTENTION_DECODE, providers[p], ORIN_F32);
        if (impl) {
            ops_buf out = ops_buf_nan(ORIN_F32, dp.q.n);
            orin_attention_args a = att_args(&dp, out.data);
            orin_exec ex = ops_test_exec(0);
            ops_expect_error("decode of 5 tokens", impl, &ex, &a, "5 tokens, decode takes 1");
            ops_buf_free(&out);
        }
    }
    att_free(&dp);
    att_free(&dd);
}

/* What each attention plugin registers, and with which flags. */
static void test_registrations(void)
{
    orin_dtype dts[3] = {ORIN_F32, ORIN_F16, ORIN_BF16};
    for (int p = 0; p < 3; p++) {
        for (int t = 0; t < 3; t++) {
            const orin_op_impl *pre = ops_test_impl(ORIN_OP_ATTENTION_PREFILL, all_providers[p], dts[t]);
            const orin_op_impl *dec = ops_test_impl(ORIN_OP_ATTENTION_DECODE, all_providers[p], dts[t]);
            bool mha = strcmp(all_providers[p], "mha") == 0;
            if (pre)
                CHECK(!!(pre->flags & ORIN_OP_REFERENCE) == mha, "%s prefill: reference flag",
                      all_providers[p]);
            if (dec)
                CHECK((dec->flags & ORIN_OP_GRAPH_SAFE) && !!(dec->flags & ORIN_OP_REFERENCE) == mha,
                      "%s decode: flags %#x", all_providers[p], dec->flags);
            orin_exec ex = ops_test_exec(0);
            ops_expect_error("no call struct", pre, &ex, NULL, "no arguments");
            ops_expect_error("no call struct", dec, &ex, NULL, "no arguments");
        }
    }
    const orin_op_impl *fa2 = ops_test_impl(ORIN_OP_ATTENTION_DECODE, "fa2", ORIN_F32);
    if (fa2) {
        /* 2 heads of 64, max_kv_len 513: 3 splits of 256, each 2 x (64 + 1) floats */
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
    ops_test_registry();
    test_registrations();
    run_cases();
    test_errors();
    ops_test_registry_free();
    return test_finish();
}
