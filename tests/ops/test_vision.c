/* The vision encoders' ops through the registry, on the target device (the
 * host, or with --device cuda the GPU): layernorm, gelu and rope.table
 * (ops_common) and attention.full (mha; on the GPU fa2's tensor-core one
 * too), each against a double-precision reference written here, on fresh
 * seeded inputs with the outputs poisoned with NaN first, odd sizes and
 * Qwen3-VL's own, segments that cross the flash kernel's tiles, in place where
 * allowed, every float dtype; and bad calls, each one error naming the tensor.
 *
 * attention.full's cu_seqlens values are checked by the host target only: on
 * the GPU they live in device memory, out of the host's sight, and bad ones
 * must give NaN rows, never a read out of bounds. */
#include "ops_test.h"

#include "orin/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const orin_dtype float_dtypes[] = {ORIN_F32, ORIN_F16, ORIN_BF16};

/* Rows (tokens) past what one turn of a CUDA grid covers (32 blocks a
 * multiprocessor, 132 multiprocessors on an H100), so that the kernels'
 * grid-stride loops take a second turn. */
#define MANY_ROWS 9000

static int run(const orin_op_impl *impl, const orin_exec *ex, const void *args)
{
    if (!impl)
        return -1;
    orin_error_clear();
    int rc = impl->run(ex, args);
    CHECK(rc == 0, "%s %s: %s", impl->op, orin_dtype_name(impl->dtype), orin_error());
    return rc;
}

/* ---- layernorm ---- */

static void layernorm_case(orin_dtype dt, int64_t rows, int64_t dim, double offset,
                           bool in_place)
{
    ops_rng rng = {.state = 1000 + (uint64_t)(rows * 31 + dim)};
    const float eps = 1e-6f;
    const int64_t total = rows * dim, dims[2] = {rows, dim};
    /* offset: rows far from zero mean, where a one-pass variance would cancel */
    ops_buf x = ops_buf_random(&rng, dt, total, offset - 3, offset + 3);
    ops_buf w = ops_buf_random(&rng, dt, dim, 0.5, 1.5);
    ops_buf b = ops_buf_random(&rng, dt, dim, -0.5, 0.5);
    ops_buf out = in_place ? x : ops_buf_nan(dt, total);
    double *ref = malloc(total * sizeof(double)), *scale = malloc(total * sizeof(double));
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x.value + r * dim;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < dim; j++)
            mean += xr[j] / dim;
        for (int64_t j = 0; j < dim; j++)
            var += (xr[j] - mean) * (xr[j] - mean) / dim;
        for (int64_t j = 0; j < dim; j++) {
            double norm = (xr[j] - mean) / sqrt(var + eps) * w.value[j];
            ref[r * dim + j] = norm + b.value[j];
            scale[r * dim + j] = fabs(norm) + fabs(b.value[j]);
        }
    }
    orin_layernorm_args a = {
        .x = ops_tensor(x.data, dt, 2, dims),
        .weight = ops_tensor(w.data, dt, 1, &dim),
        .bias = ops_tensor(b.data, dt, 1, &dim),
        .out = ops_tensor(out.data, dt, 2, dims),
        .eps = eps,
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "layernorm %s %lldx%lld, mean near %g%s", orin_dtype_name(dt),
             (long long)rows, (long long)dim, offset, in_place ? ", in place" : "");
    if (run(ops_test_impl(ORIN_OP_LAYERNORM, "common", dt), &ex, &a) == 0) {
        ops_buf_fetch(&out);
        ops_check_close(what, &out, ref, scale, ops_tol(dt), ops_atol(dt));
    }
    free(ref);
    free(scale);
    if (!in_place)
        ops_buf_free(&out);
    ops_buf_free(&x);
    ops_buf_free(&w);
    ops_buf_free(&b);
    ops_release();
}

static void test_layernorm(orin_dtype dt)
{
    layernorm_case(dt, 1, 1, 0, false);
    layernorm_case(dt, 7, 33, 0, false);
    layernorm_case(dt, 3, 1000, 0, true);
    layernorm_case(dt, 5, 257, 100, false);
    layernorm_case(dt, 2, 4097, 0, false);
    /* longer than the rows cuda stages in shared memory, in place */
    layernorm_case(dt, 3, 10007, 100, true);
    /* Qwen3-VL's vision blocks: 300 patches of 1152 */
    layernorm_case(dt, 300, 1152, 0, false);
    layernorm_case(dt, MANY_ROWS, 40, 0, false);

    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = ops_test_impl(ORIN_OP_LAYERNORM, "common", dt);
    float dummy[16] = {0};
    /* one device copy of all of dummy, so that views into it keep their overlaps */
    ops_dev(dummy, sizeof dummy);
    orin_layernorm_args a = {
        .x = ops_tensor(dummy, dt, 2, (int64_t[]){1, 4}),
        .weight = ops_tensor(dummy + 4, dt, 1, (int64_t[]){4}),
        .bias = ops_tensor(dummy + 8, dt, 1, (int64_t[]){3}),
        .out = ops_tensor(dummy, dt, 2, (int64_t[]){1, 4}),
        .eps = 1e-6f,
    };
    ops_expect_error("bias length", impl, &ex, &a, "layernorm (common): bias: dimension 0");
    a.bias.shape[0] = 4;
    void *bias_data = a.bias.data;
    a.bias.data = NULL;
    ops_expect_error("no bias", impl, &ex, &a, "bias: no data");
    a.bias.data = bias_data;
    a.weight.dtype = dt == ORIN_F32 ? ORIN_F16 : ORIN_F32;
    ops_expect_error("weight dtype", impl, &ex, &a, "weight: dtype");
    a.weight.dtype = dt;
    a.eps = -1.0f;
    ops_expect_error("negative eps", impl, &ex, &a, "eps");
    a.eps = 1e-6f;
    a.out.data = (char *)a.x.data + orin_dtype_size(dt);
    ops_expect_error("out shifted over x", impl, &ex, &a, "out partly overlaps x");
    a.out = ops_tensor(dummy + 5, dt, 2, (int64_t[]){1, 4});
    ops_expect_error("out over the weight", impl, &ex, &a, "out overlaps weight");
    if (ops_on_gpu()) {
        a.out = a.x;
        a.weight = orin_tensor_make(dummy + 4, dt, ORIN_DEVICE_CPU, 1, (int64_t[]){4});
        ops_expect_error("weight on the host", impl, &ex, &a, "weight: on cpu, expected cuda");
    }
    ops_release();
}

/* ---- gelu ---- */

static double gelu_ref(double x, orin_gelu_kind kind)
{
    if (kind == ORIN_GELU_TANH)
        return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2)));
}

/* A tensor over b's elements from `offset` on, inside one device copy of all
 * of b: an offset of one element leaves the view misaligned on the GPU too. */
static orin_tensor tensor_at(ops_buf *b, int64_t offset, int64_t n)
{
    const size_t size = orin_dtype_size(b->dt);
    ops_dev(b->data, b->n * size);
    return ops_tensor((char *)b->data + offset * size, b->dt, 1, &n);
}

/* gelu over elements offset.. offset + n - 1 of x (and of out). */
static void gelu_case(orin_dtype dt, int64_t n, orin_gelu_kind kind, bool in_place,
                      int64_t offset)
{
    ops_rng rng = {.state = 2000 + (uint64_t)n + kind};
    ops_buf x = ops_buf_random(&rng, dt, offset + n, -6, 6);
    ops_buf out = in_place ? x : ops_buf_nan(dt, offset + n);
    double *ref = malloc(n * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        ref[i] = gelu_ref(x.value[offset + i], kind);
    orin_gelu_args a = {
        .x = tensor_at(&x, offset, n),
        .out = tensor_at(&out, offset, n),
        .kind = kind,
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "gelu %s %s n %lld%s%s", kind == ORIN_GELU_TANH ? "tanh" : "erf",
             orin_dtype_name(dt), (long long)n, in_place ? ", in place" : "",
             offset ? ", one element in" : "");
    if (run(ops_test_impl(ORIN_OP_GELU, "common", dt), &ex, &a) == 0) {
        ops_buf_fetch(&out);
        ops_buf got = {.dt = dt, .n = n,
                       .data = (char *)out.data + offset * orin_dtype_size(dt),
                       .value = out.value + offset};
        /* far left both forms are tiny: an absolute floor at the dtype's
         * resolution of 1 */
        ops_check_close(what, &got, ref, NULL, ops_tol(dt), ops_tol(dt) * 1e-3);
    }
    free(ref);
    if (!in_place)
        ops_buf_free(&out);
    ops_buf_free(&x);
    ops_release();
}

static void test_gelu(orin_dtype dt)
{
    for (int kind = ORIN_GELU_ERF; kind <= ORIN_GELU_TANH; kind++) {
        gelu_case(dt, 1, kind, false, 0);
        gelu_case(dt, 1023, kind, false, 0);
        gelu_case(dt, 3001, kind, true, 0); /* past two chunks */
        gelu_case(dt, 999, kind, false, 1); /* no 16-byte vectors on the GPU */
        /* Qwen3-VL's vision MLP: 300 patches of 4304 */
        gelu_case(dt, 300 * 4304, kind, true, 0);
    }
    /* past one turn of the largest grid, 8 elements a thread (GPU only: the
     * host has no turns, and 16M elements of reference take it a while) */
    if (ops_on_gpu() && !ops_test_quick())
        gelu_case(dt, (INT64_C(1) << 24) + 5, ORIN_GELU_TANH, true, 0);
    /* the two forms differ by up to ~5e-4: an op that ignores kind fails */
    float v = 2.5f, out = NAN;
    if (dt == ORIN_F32) {
        orin_gelu_args a = {
            .x = ops_tensor(&v, dt, 1, (int64_t[]){1}),
            .out = ops_tensor(&out, dt, 1, (int64_t[]){1}),
            .kind = ORIN_GELU_ERF,
        };
        orin_exec ex = ops_test_exec(0);
        if (run(ops_test_impl(ORIN_OP_GELU, "common", dt), &ex, &a) == 0) {
            ops_fetch(&out, sizeof out);
            CHECK(fabs(out - gelu_ref(2.5, ORIN_GELU_ERF)) < 1e-6 &&
                      fabs(out - gelu_ref(2.5, ORIN_GELU_TANH)) > 1e-5,
                  "gelu erf at 2.5: %.9g", out);
        }
        ops_release();
    }

    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = ops_test_impl(ORIN_OP_GELU, "common", dt);
    float dummy[16] = {0};
    ops_dev(dummy, sizeof dummy); /* one device copy: views keep their overlaps */
    orin_gelu_args a = {
        .x = ops_tensor(dummy, dt, 2, (int64_t[]){2, 3}),
        .out = ops_tensor(dummy + 8, dt, 2, (int64_t[]){3, 2}),
        .kind = ORIN_GELU_TANH,
    };
    ops_expect_error("shape", impl, &ex, &a, "gelu (common): out: dimension 0 is 3");
    a.out = ops_tensor(dummy + 8, dt, 2, (int64_t[]){2, 3});
    a.kind = (orin_gelu_kind)7;
    ops_expect_error("kind", impl, &ex, &a, "kind 7");
    a.kind = ORIN_GELU_ERF;
    a.out.data = (char *)a.x.data + orin_dtype_size(dt);
    ops_expect_error("out shifted over x", impl, &ex, &a, "out partly overlaps x");
    if (ops_on_gpu()) {
        a.out = orin_tensor_make(dummy + 8, dt, ORIN_DEVICE_CPU, 2, (int64_t[]){2, 3});
        ops_expect_error("out on the host", impl, &ex, &a, "out: on cpu, expected cuda");
    }
    ops_release();
}

/* ---- rope.table ---- */

static void rope_table_case(orin_dtype dt, int64_t n, int64_t heads, int64_t hd)
{
    ops_rng rng = {.state = 3000 + (uint64_t)(n * 7 + heads * 3 + hd)};
    const int64_t half = hd / 2, total = n * heads * hd;
    ops_buf x = ops_buf_random(&rng, dt, total, -2, 2);
    float *cos_t = malloc(n * half * sizeof(float)), *sin_t = malloc(n * half * sizeof(float));
    for (int64_t i = 0; i < n * half; i++) {
        double angle = ops_rng_uniform(&rng, -50, 50);
        cos_t[i] = (float)cos(angle);
        sin_t[i] = (float)sin(angle);
    }
    double *ref = malloc(total * sizeof(double)), *scale = malloc(total * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t j = 0; j < half; j++) {
                int64_t o = (i * heads + h) * hd + j;
                double x1 = x.value[o], x2 = x.value[o + half];
                double c = cos_t[i * half + j], s = sin_t[i * half + j];
                ref[o] = x1 * c - x2 * s;
                ref[o + half] = x2 * c + x1 * s;
                scale[o] = fabs(x1 * c) + fabs(x2 * s);
                scale[o + half] = fabs(x2 * c) + fabs(x1 * s);
            }
    orin_rope_table_args a = {
        .x = ops_tensor(x.data, dt, 3, (int64_t[]){n, heads, hd}),
        .cos = ops_tensor(cos_t, ORIN_F32, 2, (int64_t[]){n, half}),
        .sin = ops_tensor(sin_t, ORIN_F32, 2, (int64_t[]){n, half}),
    };
    orin_exec ex = ops_test_exec(0);
    char what[96];
    snprintf(what, sizeof what, "rope.table %s [%lld, %lld, %lld]", orin_dtype_name(dt),
             (long long)n, (long long)heads, (long long)hd);
    if (run(ops_test_impl(ORIN_OP_ROPE_TABLE, "common", dt), &ex, &a) == 0) {
        ops_buf_fetch(&x);
        ops_check_close(what, &x, ref, scale, ops_tol(dt), ops_atol(dt));
    }
    free(ref);
    free(scale);
    free(cos_t);
    free(sin_t);
    ops_buf_free(&x);
    ops_release();
}

static void test_rope_table(orin_dtype dt)
{
    rope_table_case(dt, 1, 1, 2);
    rope_table_case(dt, 7, 3, 16);
    rope_table_case(dt, 33, 4, 128);
    rope_table_case(dt, 5, 2, 6); /* a half of 3: no vector width divides it */
    rope_table_case(dt, 300, 16, 72); /* Qwen3-VL's vision attention */
    rope_table_case(dt, MANY_ROWS, 1, 4);

    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = ops_test_impl(ORIN_OP_ROPE_TABLE, "common", dt);
    float x[24] = {0}, c[8] = {0}, s[8] = {0};
    orin_rope_table_args a = {
        .x = ops_tensor(x, dt, 3, (int64_t[]){2, 3, 4}),
        .cos = ops_tensor(c, ORIN_F32, 2, (int64_t[]){2, 3}),
        .sin = ops_tensor(s, ORIN_F32, 2, (int64_t[]){2, 2}),
    };
    ops_expect_error("cos width", impl, &ex, &a, "rope.table (common): cos: dimension 1 is 3");
    a.cos.shape[1] = 2;
    a.cos.stride[0] = 2;
    a.sin.dtype = ORIN_BF16;
    ops_expect_error("sin dtype", impl, &ex, &a, "sin: dtype bf16, expected f32");
    a.sin.dtype = ORIN_F32;
    a.sin.shape[0] = 3;
    ops_expect_error("sin rows", impl, &ex, &a, "sin: dimension 0 is 3");
    a.sin.shape[0] = 2;
    a.x = ops_tensor(x, dt, 3, (int64_t[]){2, 4, 3});
    ops_expect_error("odd head_dim", impl, &ex, &a, "x: head_dim 3 is odd");
    if (ops_on_gpu()) {
        a.x = ops_tensor(x, dt, 3, (int64_t[]){2, 3, 4});
        a.cos = orin_tensor_make(c, ORIN_F32, ORIN_DEVICE_CPU, 2, (int64_t[]){2, 2});
        ops_expect_error("cos on the host", impl, &ex, &a, "cos: on cpu, expected cuda");
    }
    ops_release();
}

/* ---- pos_interp ---- */

/* transformers' fast_pos_embed_interpolate, written out per axis: the target
 * positions linspace(0, side - 1, n), floor and ceil (clamped) taps, and the
 * fractional part as the ceil tap's weight. */
static void axis_reference(int32_t i, int32_t n, int32_t side, int32_t tap[2], double wt[2])
{
    const double pos = n == 1 ? 0.0 : (double)(side - 1) * i / (n - 1);
    tap[0] = (int32_t)floor(pos);
    tap[1] = tap[0] + 1 > side - 1 ? side - 1 : tap[0] + 1;
    wt[1] = pos - tap[0];
    wt[0] = 1.0 - wt[1];
}

/* The reference walks the grid window by window (merge x merge patches each,
 * windows row-major, patches row-major inside), as the processor orders them. */
static void pos_interp_case(orin_dtype dt, int32_t side, int32_t h, int32_t w, int32_t merge,
                            int64_t d, int64_t frames)
{
    ops_rng rng = {.state = 4000 + (uint64_t)(side * 31 + h * 7 + w * 3 + d + frames)};
    const int64_t area = (int64_t)h * w, rows = frames * area;
    ops_buf table = ops_buf_random(&rng, dt, (size_t)(side * side * d), -1, 1);
    ops_buf out = ops_buf_nan(dt, (size_t)(rows * d));
    double *ref = malloc((size_t)(rows * d) * sizeof(double));
    double *scale = malloc((size_t)(rows * d) * sizeof(double));
    int64_t k = 0;
    for (int32_t wr = 0; wr < h / merge; wr++)
        for (int32_t wc = 0; wc < w / merge; wc++)
            for (int32_t i = 0; i < merge; i++)
                for (int32_t j = 0; j < merge; j++, k++) {
                    int32_t th[2], tw[2];
                    double wh[2], ww[2];
                    axis_reference(wr * merge + i, h, side, th, wh);
                    axis_reference(wc * merge + j, w, side, tw, ww);
                    for (int64_t c = 0; c < d; c++) {
                        double sum = 0, mag = 0;
                        for (int a = 0; a < 2; a++)
                            for (int b = 0; b < 2; b++) {
                                double t = table.value[((int64_t)th[a] * side + tw[b]) * d + c];
                                sum += wh[a] * ww[b] * t;
                                mag += fabs(wh[a] * ww[b] * t);
                            }
                        for (int64_t f = 0; f < frames; f++) {
                            ref[(f * area + k) * d + c] = sum;
                            scale[(f * area + k) * d + c] = mag;
                        }
                    }
                }
    orin_pos_interp_args a = {
        .table = ops_tensor(table.data, dt, 2, (int64_t[]){(int64_t)side * side, d}),
        .out = ops_tensor(out.data, dt, 2, (int64_t[]){rows, d}),
        .side = side, .h = h, .w = w, .merge = merge,
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "pos_interp %s side %d grid %d x %d merge %d d %lld x%lld",
             orin_dtype_name(dt), side, h, w, merge, (long long)d, (long long)frames);
    if (run(ops_test_impl(ORIN_OP_POS_INTERP, "common", dt), &ex, &a) == 0) {
        ops_buf_fetch(&out);
        ops_check_close(what, &out, ref, scale, ops_tol(dt), ops_atol(dt));
    }
    free(ref);
    free(scale);
    ops_buf_free(&table);
    ops_buf_free(&out);
    ops_release();
}

static void test_pos_interp(orin_dtype dt)
{
    pos_interp_case(dt, 4, 2, 2, 2, 8, 1);
    pos_interp_case(dt, 48, 24, 32, 2, 72, 2);  /* a downscale, Qwen3-VL's table side */
    pos_interp_case(dt, 5, 6, 4, 2, 3, 1);      /* no vector width divides d */
    pos_interp_case(dt, 4, 10, 6, 2, 16, 1);    /* an upscale */
    pos_interp_case(dt, 3, 1, 3, 1, 8, 3);      /* a grid one patch high */
    pos_interp_case(dt, 1, 2, 2, 1, 4, 1);      /* a table of one position */
    pos_interp_case(dt, 7, 4, 48, 4, 40, 1);    /* extreme aspect, merge 4 */

    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = ops_test_impl(ORIN_OP_POS_INTERP, "common", dt);
    float table[64] = {0}, out[64] = {0};
    orin_pos_interp_args a = {
        .table = ops_tensor(table, dt, 2, (int64_t[]){9, 4}),
        .out = ops_tensor(out, dt, 2, (int64_t[]){6, 4}),
        .side = 3, .h = 2, .w = 2, .merge = 2,
    };
    ops_expect_error("frames", impl, &ex, &a, "out: 6 rows are no whole number of 2 x 2");
    a.out.shape[0] = 4;
    a.side = 2;
    ops_expect_error("side", impl, &ex, &a, "table: 9 rows for a grid of side 2");
    a.side = 3;
    a.w = 3;
    ops_expect_error("merge", impl, &ex, &a, "grid 2 x 3: both must be positive multiples");
    a.w = 2;
    a.out = ops_tensor(out, dt, 2, (int64_t[]){4, 5});
    ops_expect_error("width", impl, &ex, &a, "out: dimension 1 is 5");
    ops_release();
}

/* ---- attention.full ---- */

typedef struct full_case {
    int n, heads, kv_heads, hd;
    int segments;          /* lengths: cu[] below */
    const int32_t *cu;
} full_case;

static void attention_full_case(const char *provider, orin_dtype dt, const full_case *c)
{
    ops_rng rng = {.state = 4000 + (uint64_t)(c->n * 13 + c->heads * 5 + c->hd)};
    const int64_t n = c->n, H = c->heads, Hkv = c->kv_heads, hd = c->hd;
    ops_buf q = ops_buf_random(&rng, dt, n * H * hd, -2, 2);
    ops_buf k = ops_buf_random(&rng, dt, n * Hkv * hd, -2, 2);
    ops_buf v = ops_buf_random(&rng, dt, n * Hkv * hd, -1, 1);
    ops_buf out = ops_buf_nan(dt, n * H * hd);
    double *ref = calloc(n * H * hd, sizeof(double)), *cond = calloc(n * H * hd, sizeof(double));
    double *p = malloc(n * sizeof(double));
    const double scale = 1.0 / sqrt((double)hd);
    for (int s = 0; s < c->segments; s++)
        for (int64_t i = c->cu[s]; i < c->cu[s + 1]; i++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t kh = h / (H / Hkv), o = (i * H + h) * hd;
                double max = -INFINITY, sum = 0;
                for (int64_t j = c->cu[s]; j < c->cu[s + 1]; j++) {
                    double dot = 0;
                    for (int64_t d = 0; d < hd; d++)
                        dot += q.value[o + d] * k.value[(j * Hkv + kh) * hd + d];
                    p[j] = dot * scale;
                    max = p[j] > max ? p[j] : max;
                }
                for (int64_t j = c->cu[s]; j < c->cu[s + 1]; j++)
                    sum += p[j] = exp(p[j] - max);
                for (int64_t j = c->cu[s]; j < c->cu[s + 1]; j++)
                    for (int64_t d = 0; d < hd; d++) {
                        double vj = v.value[(j * Hkv + kh) * hd + d];
                        ref[o + d] += p[j] / sum * vj;
                        cond[o + d] += p[j] / sum * fabs(vj);
                    }
            }
    const int64_t segs = c->segments + 1;
    int32_t *cu = malloc(segs * sizeof(int32_t));
    memcpy(cu, c->cu, segs * sizeof(int32_t));
    orin_attention_full_args a = {
        .q = ops_tensor(q.data, dt, 3, (int64_t[]){n, H, hd}),
        .k = ops_tensor(k.data, dt, 3, (int64_t[]){n, Hkv, hd}),
        .v = ops_tensor(v.data, dt, 3, (int64_t[]){n, Hkv, hd}),
        .out = ops_tensor(out.data, dt, 3, (int64_t[]){n, H, hd}),
        .cu_seqlens = ops_tensor(cu, ORIN_I32, 1, &segs),
        .scale = (float)scale,
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "attention.full (%s) %s n %d H %d Hkv %d hd %d, %d segments",
             provider, orin_dtype_name(dt), c->n, c->heads, c->kv_heads, c->hd, c->segments);
    if (run(ops_test_impl(ORIN_OP_ATTENTION_FULL, provider, dt), &ex, &a) == 0) {
        ops_buf_fetch(&out);
        ops_check_close(what, &out, ref, cond, ops_tol(dt), ops_atol(dt));
    }
    free(cu);
    free(ref);
    free(cond);
    free(p);
    ops_buf_free(&q);
    ops_buf_free(&k);
    ops_buf_free(&v);
    ops_buf_free(&out);
    ops_release();
}

/* Segments that cross the flash kernels' tiles (128 or 192 query rows, 64
 * keys): one of one token, an empty one, ends at 63, 64, 65, 127, 128, 129,
 * 191 and past 256; at the head_dims fa2 runs (72: Qwen3-VL-8B's vision
 * tower). Two images of 500 and 600 patches: long loops (many rescales), Q
 * tiles that straddle them, a warpgroup whose first tile is not the block's. */
static const int32_t cross_300[] = {0, 1, 65, 65, 129, 191, 300};
static const int32_t cross_257[] = {0, 257};
static const int32_t cross_200[] = {0, 63, 64, 127, 128, 200};
static const int32_t images_1100[] = {0, 500, 1100};
static const full_case tile_cases[] = {
    {.n = 300, .heads = 4, .kv_heads = 2, .hd = 64, .segments = 6, .cu = cross_300},
    {.n = 257, .heads = 3, .kv_heads = 3, .hd = 72, .segments = 1, .cu = cross_257},
    {.n = 300, .heads = 2, .kv_heads = 1, .hd = 72, .segments = 6, .cu = cross_300},
    {.n = 1100, .heads = 4, .kv_heads = 2, .hd = 72, .segments = 2, .cu = images_1100},
    {.n = 200, .heads = 2, .kv_heads = 2, .hd = 128, .segments = 5, .cu = cross_200},
};
#define N_TILE_CASES (sizeof tile_cases / sizeof tile_cases[0])

/* cu_seqlens lives in device memory on the GPU, where no host check reads it:
 * values that frame no row (decreasing, past n) must make NaN rows or rows of
 * some segment's attention, never a read out of bounds (run under
 * compute-sanitizer by scripts/gpu-test.sh) nor a crash. */
static void attention_full_bad_segments(const char *provider, orin_dtype dt, int64_t hd)
{
    const int64_t n = 10, H = 2;
    ops_rng rng = {.state = 77};
    ops_buf q = ops_buf_random(&rng, dt, n * H * hd, -1, 1);
    ops_buf k = ops_buf_random(&rng, dt, n * H * hd, -1, 1);
    ops_buf v = ops_buf_random(&rng, dt, n * H * hd, -1, 1);
    ops_buf out = ops_buf_nan(dt, n * H * hd);
    int32_t cu[4] = {0, 7, 3, 1000};
    const int64_t segs = 4;
    orin_attention_full_args a = {
        .q = ops_tensor(q.data, dt, 3, (int64_t[]){n, H, hd}),
        .k = ops_tensor(k.data, dt, 3, (int64_t[]){n, H, hd}),
        .v = ops_tensor(v.data, dt, 3, (int64_t[]){n, H, hd}),
        .out = ops_tensor(out.data, dt, 3, (int64_t[]){n, H, hd}),
        .cu_seqlens = ops_tensor(cu, ORIN_I32, 1, &segs),
        .scale = 0.125f,
    };
    orin_exec ex = ops_test_exec(0);
    if (run(ops_test_impl(ORIN_OP_ATTENTION_FULL, provider, dt), &ex, &a) == 0) {
        ops_buf_fetch(&out);
        int bad = 0;
        for (int64_t i = 0; i < n * H * hd; i++)
            bad += !isnan(out.value[i]) && fabs(out.value[i]) > 1.0 + 1e-2;
        CHECK(bad == 0, "attention.full (%s) %s, cu_seqlens {0, 7, 3, 1000}: %d values are "
              "neither NaN nor a weighted mean of V", provider, orin_dtype_name(dt), bad);
    }
    ops_buf_free(&q);
    ops_buf_free(&k);
    ops_buf_free(&v);
    ops_buf_free(&out);
    ops_release();
}

/* fa2's tensor-core attention.full (the GPU, f16 and bf16): the tile cases,
 * bad segments; a head_dim it has no kernel for is declined at bind time. */
static void test_attention_full_fa2(orin_dtype dt)
{
    if (!ops_on_gpu() || dt == ORIN_F32)
        return;
    for (size_t i = 0; i < N_TILE_CASES; i++)
        attention_full_case("fa2", dt, &tile_cases[i]);
    attention_full_bad_segments("fa2", dt, 72);
    orin_attention_full_args probe = {
        .q = orin_tensor_make(NULL, dt, ORIN_DEVICE_CUDA, 3, (int64_t[]){1, 2, 96}),
    };
    orin_bind_request req = {.op = ORIN_OP_ATTENTION_FULL, .provider = "fa2",
                             .device = ORIN_DEVICE_CUDA, .dtype = dt, .args = &probe};
    const orin_op_impl *bound = orin_registry_bind(ops_test_registry(), &req);
    CHECK(bound && strcmp(bound->provider, "mha") == 0, "attention.full for fa2 at hd 96: %s",
          bound ? bound->provider : orin_error());
    probe.q.shape[2] = 72;
    bound = orin_registry_bind(ops_test_registry(), &req);
    CHECK(bound && strcmp(bound->provider, "fa2") == 0, "attention.full for fa2 at hd 72: %s",
          bound ? bound->provider : orin_error());
}

static void test_attention_full(orin_dtype dt)
{
    static const int32_t one[] = {0, 1}, single[] = {0, 37};
    static const int32_t images[] = {0, 24, 64}, empty[] = {0, 5, 5, 12, 13};
    const full_case cases[] = {
        {.n = 1, .heads = 1, .kv_heads = 1, .hd = 8, .segments = 1, .cu = one},
        {.n = 37, .heads = 3, .kv_heads = 3, .hd = 16, .segments = 1, .cu = single},
        {.n = 64, .heads = 4, .kv_heads = 2, .hd = 16, .segments = 2, .cu = images},
        {.n = 13, .heads = 6, .kv_heads = 1, .hd = 33, .segments = 4, .cu = empty},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        attention_full_case("mha", dt, &cases[i]);
    for (size_t i = 0; i < N_TILE_CASES; i++)
        attention_full_case("mha", dt, &tile_cases[i]);
    if (ops_on_gpu())
        attention_full_bad_segments("mha", dt, 33);

    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = ops_test_impl(ORIN_OP_ATTENTION_FULL, "mha", dt);
    float q[32] = {0}, k[32] = {0}, v[32] = {0}, out[32];
    int32_t cu[3] = {0, 2, 4};
    orin_attention_full_args a = {
        .q = ops_tensor(q, dt, 3, (int64_t[]){4, 2, 2}),
        .k = ops_tensor(k, dt, 3, (int64_t[]){4, 2, 2}),
        .v = ops_tensor(v, dt, 3, (int64_t[]){4, 2, 2}),
        .out = ops_tensor(out, dt, 3, (int64_t[]){4, 2, 2}),
        .cu_seqlens = ops_tensor(cu, ORIN_I32, 1, (int64_t[]){3}),
        .scale = 0.5f,
    };
    /* the values of cu_seqlens: the host's checks (on the GPU they are in
     * device memory, which the host does not read) */
    if (!ops_on_gpu()) {
        cu[2] = 5;
        ops_expect_error("cu_seqlens past n", impl, &ex, &a,
                         "attention.full (mha): cu_seqlens[2] = 5, expected 4");
        cu[2] = 4;
        cu[1] = -1;
        ops_expect_error("decreasing cu_seqlens", impl, &ex, &a,
                         "cu_seqlens[1] = -1 is below cu_seqlens[0] = 0");
        cu[1] = 2;
        cu[0] = 1;
        ops_expect_error("cu_seqlens[0]", impl, &ex, &a, "cu_seqlens[0] = 1, expected 0");
        cu[0] = 0;
    }
    a.cu_seqlens.shape[0] = 1;
    ops_expect_error("no segment", impl, &ex, &a, "cu_seqlens: 1 entries");
    a.cu_seqlens.shape[0] = 3;
    a.v = ops_tensor(v, dt, 3, (int64_t[]){4, 1, 2});
    ops_expect_error("v heads", impl, &ex, &a, "v: dimension 1 is 1");
    a.v = ops_tensor(v, dt, 3, (int64_t[]){4, 2, 2});
    a.k = ops_tensor(k, dt, 3, (int64_t[]){3, 2, 2});
    ops_expect_error("k tokens", impl, &ex, &a, "k: dimension 0 is 3");
    a.k = ops_tensor(k, dt, 3, (int64_t[]){4, 2, 2});
    a.q = ops_tensor(q, dt, 3, (int64_t[]){4, 3, 2});
    a.out = ops_tensor(out, dt, 3, (int64_t[]){4, 3, 2});
    ops_expect_error("GQA ratio", impl, &ex, &a, "3 query heads are not a multiple of 2");
    a.q = ops_tensor(q, dt, 3, (int64_t[]){4, 2, 2});
    a.out = ops_tensor(q, dt, 3, (int64_t[]){4, 2, 2});
    ops_expect_error("out over q", impl, &ex, &a, "out overlaps q");
    a.out = ops_tensor(out, dt, 3, (int64_t[]){4, 2, 2});
    a.scale = 0.0f;
    ops_expect_error("scale", impl, &ex, &a, "scale 0");
    ops_release();
}

/* The new ops are each registered for every dtype, flagged as the reference
 * (fa2's attention.full, on cuda in f16 and bf16, is not), and a call
 * without a call struct is an error, not a crash. */
static void test_registrations(void)
{
    static const struct {
        const char *op, *provider;
    } ops[] = {
        {ORIN_OP_LAYERNORM, "common"},
        {ORIN_OP_GELU, "common"},
        {ORIN_OP_ROPE_TABLE, "common"},
        {ORIN_OP_POS_INTERP, "common"},
        {ORIN_OP_ATTENTION_FULL, "mha"},
        {ORIN_OP_ATTENTION_FULL, "fa2"}, /* on cuda, f16 and bf16 only */
    };
    orin_exec ex = ops_test_exec(0);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        for (size_t t = 0; t < 3; t++) {
            const orin_dtype dt = float_dtypes[t];
            const bool common = strcmp(ops[i].provider, "common") == 0,
                       reference = strcmp(ops[i].provider, "fa2") != 0;
            if (!reference && (!ops_on_gpu() || dt == ORIN_F32))
                continue;
            const orin_op_impl *impl = ops_test_impl(ops[i].op, ops[i].provider, dt);
            if (!impl)
                continue;
            CHECK(!!(impl->flags & ORIN_OP_REFERENCE) == reference,
                  "%s (%s) %s: reference flag %s", ops[i].op, ops[i].provider,
                  orin_dtype_name(dt), reference ? "missing" : "set");
            /* ops_common's launches depend on shapes only, on either device */
            CHECK(!common || (impl->flags & ORIN_OP_GRAPH_SAFE), "%s %s: not flagged graph-safe",
                  ops[i].op, orin_dtype_name(dt));
            ops_expect_error("no call struct", impl, &ex, NULL, "no arguments");
        }
    /* fa2 has no attention.full on the host: the registry falls back to mha's */
    orin_bind_request req = {.op = ORIN_OP_ATTENTION_FULL, .provider = "fa2",
                             .device = ORIN_DEVICE_CPU, .dtype = ORIN_F32};
    const orin_op_impl *bound = orin_registry_bind(ops_test_registry(), &req);
    CHECK(bound && strcmp(bound->provider, "mha") == 0, "attention.full for fa2: %s",
          bound ? bound->provider : orin_error());
}

int main(int argc, char **argv)
{
    ops_test_init(argc, argv);
    ops_test_registry();
    test_registrations();
    for (size_t i = 0; i < sizeof float_dtypes / sizeof float_dtypes[0]; i++) {
        orin_dtype dt = float_dtypes[i];
        test_layernorm(dt);
        test_gelu(dt);
        test_rope_table(dt);
        test_pos_interp(dt);
        test_attention_full(dt);
        test_attention_full_fa2(dt);
    }
    ops_test_registry_free();
    return test_finish();
}
