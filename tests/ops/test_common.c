/* ops_common through the registry: every op against a double-precision
 * reference written here (fresh seeded inputs, outputs poisoned with NaN first),
 * rope against Hugging Face's own numbers, and bad calls rejected with errors. */
#include "ops_test.h"
#include "rope_hf_ref.h"

#include "orin/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const orin_dtype float_dtypes[] = {ORIN_F32, ORIN_F16, ORIN_BF16};

static const orin_op_impl *impl_of(const char *op, orin_dtype dt)
{
    return ops_test_impl(op, "common", dt);
}

static int run(const orin_op_impl *impl, const orin_exec *ex, const void *args)
{
    if (!impl)
        return -1;
    orin_error_clear();
    int rc = impl->run(ex, args);
    CHECK(rc == 0, "%s %s: %s", impl->op, orin_dtype_name(impl->dtype), orin_error());
    return rc;
}

/* ---- embedding ---- */

static void test_embedding(orin_dtype dt)
{
    ops_rng rng = {.state = 11};
    const int64_t vocab = 50, d = 33, n = 7;
    ops_buf table = ops_buf_random(&rng, dt, vocab * d, -1, 1);
    ops_buf out = ops_buf_nan(dt, n * d);
    int32_t ids[7] = {0, 49, 3, 3, 17, 0, 48};
    orin_embedding_args a = {
        .table = ops_tensor(table.data, dt, 2, (int64_t[]){vocab, d}),
        .ids = ops_tensor(ids, ORIN_I32, 1, (int64_t[]){n}),
        .out = ops_tensor(out.data, dt, 2, (int64_t[]){n, d}),
    };
    const orin_op_impl *impl = impl_of(ORIN_OP_EMBEDDING, dt);
    orin_exec ex = ops_test_exec(0);
    if (run(impl, &ex, &a) == 0) {
        size_t row = (size_t)d * orin_dtype_size(dt);
        bool same = true;
        for (int64_t i = 0; i < n; i++)
            same &= memcmp((char *)out.data + i * row, (char *)table.data + ids[i] * row, row) == 0;
        CHECK(same, "embedding %s: rows differ from the table", orin_dtype_name(dt));
    }

    ids[2] = 50;
    ops_expect_error("id past the vocabulary", impl, &ex, &a, "ids[2] = 50");
    ids[2] = -1;
    ops_expect_error("negative id", impl, &ex, &a, "ids[2] = -1");
    ids[2] = 3;
    a.out.shape[1] = d + 1;
    a.out.stride[0] = d + 1;
    ops_expect_error("out width", impl, &ex, &a, "out: dimension 1");
    ops_buf_free(&table);
    ops_buf_free(&out);
}

/* ---- rmsnorm ---- */

static void rmsnorm_case(orin_dtype dt, int ndim, const int64_t *dims, bool in_place)
{
    ops_rng rng = {.state = 100 + (uint64_t)dims[ndim - 1]};
    orin_tensor shape = ops_tensor(NULL, dt, ndim, dims);
    int64_t total = orin_tensor_numel(&shape), dim = dims[ndim - 1], rows = total / dim;
    const float eps = 1e-6f;
    ops_buf x = ops_buf_random(&rng, dt, total, -3, 3);
    ops_buf w = ops_buf_random(&rng, dt, dim, -2, 2);
    ops_buf out = in_place ? x : ops_buf_nan(dt, total);
    double *ref = malloc(total * sizeof(double));
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t j = 0; j < dim; j++)
            ss += x.value[r * dim + j] * x.value[r * dim + j];
        double inv = 1.0 / sqrt(ss / dim + eps);
        for (int64_t j = 0; j < dim; j++)
            ref[r * dim + j] = w.value[j] * x.value[r * dim + j] * inv;
    }
    orin_rmsnorm_args a = {
        .x = ops_tensor(x.data, dt, ndim, dims),
        .weight = ops_tensor(w.data, dt, 1, &dim),
        .out = ops_tensor(out.data, dt, ndim, dims),
        .eps = eps,
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "rmsnorm %s dim %lld rows %lld%s", orin_dtype_name(dt),
             (long long)dim, (long long)rows, in_place ? " in place" : "");
    if (run(impl_of(ORIN_OP_RMSNORM, dt), &ex, &a) == 0)
        ops_check_close(what, &out, ref, NULL, ops_tol(dt), ops_atol(dt));
    free(ref);
    if (!in_place)
        ops_buf_free(&out);
    ops_buf_free(&x);
    ops_buf_free(&w);
}

static void test_rmsnorm(orin_dtype dt)
{
    rmsnorm_case(dt, 2, (int64_t[]){1, 1}, false);
    rmsnorm_case(dt, 2, (int64_t[]){5, 64}, false);
    rmsnorm_case(dt, 2, (int64_t[]){3, 1000}, true);
    rmsnorm_case(dt, 3, (int64_t[]){7, 4, 128}, false); /* Qwen3's q norm: rows = n * heads */
    rmsnorm_case(dt, 2, (int64_t[]){2, 4097}, false);

    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = impl_of(ORIN_OP_RMSNORM, dt);
    float dummy[8] = {0};
    orin_rmsnorm_args a = {
        .x = ops_tensor(dummy, dt, 2, (int64_t[]){1, 4}),
        .weight = ops_tensor(dummy + 4, dt, 1, (int64_t[]){3}),
        .out = ops_tensor(dummy, dt, 2, (int64_t[]){1, 4}),
        .eps = 1e-6f,
    };
    ops_expect_error("weight length", impl, &ex, &a, "rmsnorm (common): weight: dimension 0");
    a.weight.shape[0] = 4;
    a.weight.dtype = dt == ORIN_F32 ? ORIN_F16 : ORIN_F32;
    ops_expect_error("weight dtype", impl, &ex, &a, "weight: dtype");
    a.weight.dtype = dt;
    a.x.data = NULL;
    ops_expect_error("NULL x", impl, &ex, &a, "x: no data");
    a.x.data = dummy;
    a.eps = NAN;
    ops_expect_error("NaN eps", impl, &ex, &a, "eps");
    a.eps = 1e-6f;
    a.out.data = (char *)dummy + orin_dtype_size(dt);
    ops_expect_error("out shifted over x", impl, &ex, &a, "partly overlaps");
}

/* ---- rope ---- */

/* Hugging Face's float32 inv_freq and angle (see cpu.c), then the rotation in
 * double: what the op must produce up to f32 rounding of its last steps. */
static float hf_angle(int32_t pos, int64_t j, int64_t hd, float theta)
{
    float exponent = (float)(2 * j) / (float)hd;
    float inv_freq = 1.0f / (float)pow((double)theta, (double)exponent);
    return (float)pos * inv_freq;
}

static void rope_case(orin_dtype dt, int64_t n, int64_t heads, int64_t hd, float theta,
                      int32_t pos0)
{
    ops_rng rng = {.state = 200 + (uint64_t)hd};
    int64_t total = n * heads * hd, half = hd / 2;
    ops_buf x = ops_buf_random(&rng, dt, total, -2, 2);
    double *in = malloc(total * sizeof(double)), *ref = malloc(total * sizeof(double));
    double *scale = malloc(total * sizeof(double));
    int32_t *pos = malloc(n * sizeof(int32_t));
    memcpy(in, x.value, total * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        pos[i] = pos0 + (int32_t)(i * 37 % 1000);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t h = 0; h < heads; h++) {
            const double *row = in + (i * heads + h) * hd;
            for (int64_t j = 0; j < half; j++) {
                double angle = hf_angle(pos[i], j, hd, theta);
                double c = cos(angle), s = sin(angle), x1 = row[j], x2 = row[j + half];
                int64_t o = (i * heads + h) * hd;
                ref[o + j] = x1 * c - x2 * s;
                ref[o + j + half] = x2 * c + x1 * s;
                scale[o + j] = fabs(x1 * c) + fabs(x2 * s);
                scale[o + j + half] = fabs(x2 * c) + fabs(x1 * s);
            }
        }
    }
    orin_rope_args a = {
        .x = ops_tensor(x.data, dt, 3, (int64_t[]){n, heads, hd}),
        .positions = ops_tensor(pos, ORIN_I32, 1, &n),
        .theta = theta,
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "rope %s n %lld heads %lld hd %lld from %d",
             orin_dtype_name(dt), (long long)n, (long long)heads, (long long)hd, pos0);
    if (run(impl_of(ORIN_OP_ROPE, dt), &ex, &a) == 0)
        ops_check_close(what, &x, ref, scale, ops_tol(dt), ops_atol(dt));
    free(in);
    free(ref);
    free(scale);
    free(pos);
    ops_buf_free(&x);
}

/* The numbers transformers' Qwen3 code produces (tests/ops/gen_rope_ref.py). */
static void rope_hf_case(const char *name, const float *want, const int32_t *positions,
                         int64_t n, int64_t heads, int64_t hd, float theta)
{
    int64_t total = n * heads * hd;
    ops_buf x = ops_buf_nan(ORIN_F32, total);
    double *ref = malloc(total * sizeof(double)), *scale = malloc(total * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t d = 0; d < hd; d++) {
                int64_t o = (i * heads + h) * hd + d;
                ((float *)x.data)[o] = (float)((d * 37 + h * 11 + i * 5) % 17) / 8 - 1;
                ref[o] = want[o];
                /* the inputs are at most 1 in magnitude: |x1 cos| + |x2 sin| <= 2 */
                scale[o] = 2.0;
            }
    orin_rope_args a = {
        .x = ops_tensor(x.data, ORIN_F32, 3, (int64_t[]){n, heads, hd}),
        .positions = ops_tensor((void *)positions, ORIN_I32, 1, &n),
        .theta = theta,
    };
    orin_exec ex = ops_test_exec(0);
    char what[64];
    snprintf(what, sizeof what, "rope vs transformers (%s)", name);
    /* transformers' float32 cos/sin are within an ulp of ours: 1e-6 of 2 */
    if (run(impl_of(ORIN_OP_ROPE, ORIN_F32), &ex, &a) == 0)
        ops_check_close(what, &x, ref, scale, 1e-6, 0);
    free(ref);
    free(scale);
    ops_buf_free(&x);
}

/* Two positions worked by hand: hd = 4, theta = 100, so inv_freq = {1, 0.1}. */
static void rope_hand_case(void)
{
    float x[2][4] = {{1, 2, 3, 4}, {1, 2, 3, 4}};
    int32_t pos[2] = {0, 2};
    orin_rope_args a = {
        .x = ops_tensor(x, ORIN_F32, 3, (int64_t[]){2, 1, 4}),
        .positions = ops_tensor(pos, ORIN_I32, 1, (int64_t[]){2}),
        .theta = 100.0f,
    };
    orin_exec ex = ops_test_exec(0);
    if (run(impl_of(ORIN_OP_ROPE, ORIN_F32), &ex, &a) != 0)
        return;
    /* position 0: unchanged. position 2: pairs (1, 3) by 2 rad, (2, 4) by 0.2 rad. */
    double c2 = cos(2.0), s2 = sin(2.0), c02 = cos(0.2), s02 = sin(0.2);
    double want[2][4] = {
        {1, 2, 3, 4},
        {1 * c2 - 3 * s2, 2 * c02 - 4 * s02, 3 * c2 + 1 * s2, 4 * c02 + 2 * s02},
    };
    bool ok = true;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            ok &= fabs(x[i][j] - want[i][j]) < 1e-6;
    CHECK(ok, "rope by hand: got {%g %g %g %g}, want {%g %g %g %g}", x[1][0], x[1][1], x[1][2],
          x[1][3], want[1][0], want[1][1], want[1][2], want[1][3]);
}

static void test_rope(orin_dtype dt)
{
    rope_case(dt, 1, 1, 2, 10000.0f, 5);
    rope_case(dt, 9, 4, 64, 10000.0f, 0);
    rope_case(dt, 5, 2, 128, 1000000.0f, 1090);
    rope_case(dt, 3, 3, 256, 5e5f, 30000);

    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = impl_of(ORIN_OP_ROPE, dt);
    float dummy[12] = {0};
    int32_t pos[2] = {0, -4};
    orin_rope_args a = {
        .x = ops_tensor(dummy, dt, 3, (int64_t[]){2, 1, 4}),
        .positions = ops_tensor(pos, ORIN_I32, 1, (int64_t[]){2}),
        .theta = 10000.0f,
    };
    ops_expect_error("negative position", impl, &ex, &a, "positions[1] = -4");
    pos[1] = 1;
    a.x.shape[2] = 3;
    a.x.stride[1] = a.x.stride[0] = 3;
    ops_expect_error("odd head_dim", impl, &ex, &a, "odd");
    a.x.shape[2] = 4;
    a.x.stride[1] = a.x.stride[0] = 4;
    a.positions.shape[0] = 3;
    ops_expect_error("positions length", impl, &ex, &a, "positions: dimension 0");
    a.positions.shape[0] = 2;
    a.x.stride[0] = 5;
    ops_expect_error("strided x", impl, &ex, &a, "not contiguous");
}

/* ---- matmul ---- */

static void matmul_case(orin_dtype dt, int64_t n, int64_t in, int64_t out, bool bias)
{
    ops_rng rng = {.state = 300 + (uint64_t)(n * 7 + in * 3 + out)};
    ops_buf x = ops_buf_random(&rng, dt, n * in, -1, 1);
    ops_buf w = ops_buf_random(&rng, dt, out * in, -1, 1);
    ops_buf b = ops_buf_random(&rng, dt, out, -1, 1);
    ops_buf y = ops_buf_nan(dt, n * out);
    double *ref = malloc(n * out * sizeof(double)), *scale = malloc(n * out * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
            double sum = bias ? b.value[o] : 0, mag = bias ? fabs(b.value[o]) : 0;
            for (int64_t k = 0; k < in; k++) {
                sum += x.value[i * in + k] * w.value[o * in + k];
                mag += fabs(x.value[i * in + k] * w.value[o * in + k]);
            }
            ref[i * out + o] = sum;
            scale[i * out + o] = mag;
        }
    orin_matmul_args a = {
        .x = ops_tensor(x.data, dt, 2, (int64_t[]){n, in}),
        .w = ops_tensor(w.data, dt, 2, (int64_t[]){out, in}),
        .bias = bias ? ops_tensor(b.data, dt, 1, &out) : (orin_tensor){0},
        .y = ops_tensor(y.data, dt, 2, (int64_t[]){n, out}),
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "matmul %s %lldx%lld . %lldx%lld^T%s", orin_dtype_name(dt),
             (long long)n, (long long)in, (long long)out, (long long)in, bias ? " + bias" : "");
    if (run(impl_of(ORIN_OP_MATMUL, dt), &ex, &a) == 0)
        ops_check_close(what, &y, ref, scale, ops_tol(dt), ops_atol(dt));
    free(ref);
    free(scale);
    ops_buf_free(&x);
    ops_buf_free(&w);
    ops_buf_free(&b);
    ops_buf_free(&y);
}

static void test_matmul(orin_dtype dt)
{
    for (int bias = 0; bias < 2; bias++) {
        matmul_case(dt, 1, 1, 1, bias);
        matmul_case(dt, 1, 64, 1000, bias);
        /* One row (decode): f16/bf16 take the widening dot; in = 1000 ends on a
         * block of 8, in = 67 on a tail of 3 after two blocks of 32. */
        matmul_case(dt, 1, 1000, 257, bias);
        matmul_case(dt, 1, 67, 33, bias);
        matmul_case(dt, 7, 129, 33, bias);
        matmul_case(dt, 300, 67, 513, bias); /* past one tile of x rows and of w rows */
        matmul_case(dt, 3, 1000, 257, bias);
    }

    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = impl_of(ORIN_OP_MATMUL, dt);
    float buf[64] = {0};
    orin_matmul_args a = {
        .x = ops_tensor(buf, dt, 2, (int64_t[]){2, 4}),
        .w = ops_tensor(buf + 8, dt, 2, (int64_t[]){3, 5}),
        .y = ops_tensor(buf + 32, dt, 2, (int64_t[]){2, 3}),
    };
    ops_expect_error("inner dimensions", impl, &ex, &a, "matmul (common): w: dimension 1 is 5");
    a.w = ops_tensor(buf + 8, dt, 2, (int64_t[]){3, 4});
    a.bias = ops_tensor(buf + 24, dt, 1, (int64_t[]){2});
    ops_expect_error("bias length", impl, &ex, &a, "bias: dimension 0 is 2");
    a.bias = (orin_tensor){0};
    a.y = ops_tensor(buf + 32, dt, 2, (int64_t[]){3, 3});
    ops_expect_error("y rows", impl, &ex, &a, "y has 3 rows");
    a.y = ops_tensor(buf, dt, 2, (int64_t[]){2, 3});
    ops_expect_error("y over x", impl, &ex, &a, "overlaps x");
}

/* ---- swiglu and add ---- */

static void swiglu_case(orin_dtype dt, int64_t n, int64_t f, int alias)
{
    ops_rng rng = {.state = 400 + (uint64_t)(n * f)};
    ops_buf g = ops_buf_random(&rng, dt, n * f, -8, 8);
    ops_buf u = ops_buf_random(&rng, dt, n * f, -2, 2);
    ops_buf nan_out = ops_buf_nan(dt, alias ? 1 : n * f);
    ops_buf *out = alias == 1 ? &g : alias == 2 ? &u : &nan_out;
    double *ref = malloc(n * f * sizeof(double));
    for (int64_t i = 0; i < n * f; i++)
        ref[i] = g.value[i] / (1 + exp(-g.value[i])) * u.value[i];
    orin_swiglu_args a = {
        .gate = ops_tensor(g.data, dt, 2, (int64_t[]){n, f}),
        .up = ops_tensor(u.data, dt, 2, (int64_t[]){n, f}),
        .out = ops_tensor(out->data, dt, 2, (int64_t[]){n, f}),
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "swiglu %s %lldx%lld%s", orin_dtype_name(dt), (long long)n,
             (long long)f, alias == 1 ? " into gate" : alias == 2 ? " into up" : "");
    if (run(impl_of(ORIN_OP_SWIGLU, dt), &ex, &a) == 0)
        ops_check_close(what, out, ref, NULL, ops_tol(dt), ops_atol(dt));
    free(ref);
    ops_buf_free(&g);
    ops_buf_free(&u);
    ops_buf_free(&nan_out);
}

static void add_case(orin_dtype dt, int ndim, const int64_t *dims, int alias)
{
    orin_tensor shape = ops_tensor(NULL, dt, ndim, dims);
    int64_t total = orin_tensor_numel(&shape);
    ops_rng rng = {.state = 500 + (uint64_t)total};
    ops_buf x = ops_buf_random(&rng, dt, total, -4, 4);
    ops_buf y = ops_buf_random(&rng, dt, total, -4, 4);
    ops_buf nan_out = ops_buf_nan(dt, alias ? 1 : total);
    ops_buf *out = alias == 1 ? &x : alias == 2 ? &y : &nan_out;
    double *ref = malloc(total * sizeof(double)), *scale = malloc(total * sizeof(double));
    for (int64_t i = 0; i < total; i++) {
        ref[i] = x.value[i] + y.value[i];
        scale[i] = fabs(x.value[i]) + fabs(y.value[i]);
    }
    orin_add_args a = {
        .a = ops_tensor(x.data, dt, ndim, dims),
        .b = ops_tensor(y.data, dt, ndim, dims),
        .out = ops_tensor(out->data, dt, ndim, dims),
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "add %s %lld elements%s", orin_dtype_name(dt), (long long)total,
             alias == 1 ? " into a" : alias == 2 ? " into b" : "");
    if (run(impl_of(ORIN_OP_ADD, dt), &ex, &a) == 0)
        ops_check_close(what, out, ref, scale, ops_tol(dt), ops_atol(dt));
    free(ref);
    free(scale);
    ops_buf_free(&x);
    ops_buf_free(&y);
    ops_buf_free(&nan_out);
}

static void test_elementwise(orin_dtype dt)
{
    swiglu_case(dt, 1, 1, 0);
    swiglu_case(dt, 5, 1001, 0);
    swiglu_case(dt, 3, 2048, 1);
    swiglu_case(dt, 2, 333, 2);
    add_case(dt, 1, (int64_t[]){1}, 0);
    add_case(dt, 2, (int64_t[]){3, 1025}, 0);
    add_case(dt, 3, (int64_t[]){2, 3, 700}, 1);
    add_case(dt, 2, (int64_t[]){4, 999}, 2);

    orin_exec ex = ops_test_exec(0);
    float buf[32] = {0};
    orin_add_args a = {
        .a = ops_tensor(buf, dt, 2, (int64_t[]){2, 4}),
        .b = ops_tensor(buf + 8, dt, 2, (int64_t[]){4, 2}),
        .out = ops_tensor(buf + 16, dt, 2, (int64_t[]){2, 4}),
    };
    ops_expect_error("shapes", impl_of(ORIN_OP_ADD, dt), &ex, &a, "add (common): b: dimension 0");
    orin_swiglu_args s = {
        .gate = ops_tensor(buf, dt, 2, (int64_t[]){2, 4}),
        .up = ops_tensor(buf + 8, ORIN_I32, 2, (int64_t[]){2, 4}),
        .out = ops_tensor(buf + 16, dt, 2, (int64_t[]){2, 4}),
    };
    ops_expect_error("up dtype", impl_of(ORIN_OP_SWIGLU, dt), &ex, &s, "swiglu (common): up: dtype i32");
}

/* ---- argmax ---- */

static void test_argmax(orin_dtype dt)
{
    enum { ROWS = 7, V = 3000 };
    ops_rng rng = {.state = 600};
    ops_buf x = ops_buf_random(&rng, dt, ROWS * V, -10, 10);
    /* planted answers; ties must give the lowest index */
    int32_t want[ROWS] = {2999, 0, 1500, 1024, 5, 77, 0};
    ops_store(dt, x.data, 0 * V + 2999, 20);                     /* last column */
    ops_store(dt, x.data, 1 * V + 0, 20);                        /* first column */
    ops_store(dt, x.data, 2 * V + 1500, 20);                     /* a tie: */
    ops_store(dt, x.data, 2 * V + 2500, 20);                     /*   1500 wins */
    ops_store(dt, x.data, 3 * V + 1024, 15);                     /* a tie in the dtype: */
    ops_store(dt, x.data, 3 * V + 2048, dt == ORIN_F32 ? 15 : 15.0001); /* equal once rounded */
    ops_store(dt, x.data, 4 * V + 5, NAN);                       /* NaN wins, the first */
    ops_store(dt, x.data, 4 * V + 6, 20);
    ops_store(dt, x.data, 4 * V + 9, NAN);
    for (int j = 0; j < V; j++)                                 /* all -inf but one */
        ops_store(dt, x.data, 5 * V + j, -INFINITY);
    ops_store(dt, x.data, 5 * V + 77, -1e4);
    for (int j = 0; j < V; j++)                                 /* all equal */
        ops_store(dt, x.data, 6 * V + j, -3);
    int32_t out[ROWS];
    for (int i = 0; i < ROWS; i++)
        out[i] = -7;
    orin_argmax_args a = {
        .x = ops_tensor(x.data, dt, 2, (int64_t[]){ROWS, V}),
        .out = ops_tensor(out, ORIN_I32, 1, (int64_t[]){ROWS}),
    };
    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = impl_of(ORIN_OP_ARGMAX, dt);
    if (run(impl, &ex, &a) == 0) {
        for (int i = 0; i < ROWS; i++)
            CHECK(out[i] == want[i], "argmax %s row %d: %d, want %d", orin_dtype_name(dt), i,
                  out[i], want[i]);
    }
    /* no planted value: the reference argmax of random data */
    ops_rng rng2 = {.state = 601};
    ops_buf y = ops_buf_random(&rng2, dt, 3 * 151936, -30, 30);
    int32_t got[3] = {-7, -7, -7};
    orin_argmax_args b = {
        .x = ops_tensor(y.data, dt, 2, (int64_t[]){3, 151936}),
        .out = ops_tensor(got, ORIN_I32, 1, (int64_t[]){3}),
    };
    if (run(impl, &ex, &b) == 0) {
        for (int i = 0; i < 3; i++) {
            int32_t best = 0;
            for (int32_t j = 1; j < 151936; j++)
                best = y.value[i * 151936 + j] > y.value[i * 151936 + best] ? j : best;
            CHECK(got[i] == best, "argmax %s vocab row %d: %d, want %d", orin_dtype_name(dt), i,
                  got[i], best);
        }
    }
    b.out.shape[0] = 2;
    ops_expect_error("out length", impl, &ex, &b, "argmax (common): out: dimension 0 is 2");
    ops_buf_free(&x);
    ops_buf_free(&y);
}

/* ---- kv_write ---- */

static void test_kv_write(orin_dtype dt)
{
    /* A head-major cache [Hkv, capacity, hd + 3] (padded rows): strides that are
     * not the default layout, so that the op must follow them. */
    enum { CAP = 10, HKV = 2, HD = 8, PAD = 3, N = 3 };
    const int64_t head_stride = CAP * (HD + PAD), pos_stride = HD + PAD;
    size_t cache_elems = HKV * CAP * (HD + PAD);
    ops_rng rng = {.state = 700};
    ops_buf k = ops_buf_random(&rng, dt, N * HKV * HD, -1, 1);
    ops_buf v = ops_buf_random(&rng, dt, N * HKV * HD, -1, 1);
    ops_buf ck = ops_buf_random(&rng, dt, cache_elems, 5, 6); /* marks untouched slots */
    ops_buf cv = ops_buf_random(&rng, dt, cache_elems, 5, 6);
    double *old_k = malloc(cache_elems * sizeof(double)), *old_v = malloc(cache_elems * sizeof(double));
    memcpy(old_k, ck.value, cache_elems * sizeof(double));
    memcpy(old_v, cv.value, cache_elems * sizeof(double));
    int32_t pos[N] = {5, 0, 9};
    orin_kv_write_args a = {
        .k = ops_tensor(k.data, dt, 3, (int64_t[]){N, HKV, HD}),
        .v = ops_tensor(v.data, dt, 3, (int64_t[]){N, HKV, HD}),
        .positions = ops_tensor(pos, ORIN_I32, 1, (int64_t[]){N}),
        .cache = {
            .k = ck.data, .v = cv.data, .dtype = dt, .n_kv_heads = HKV, .head_dim = HD,
            .pos_stride = pos_stride, .head_stride = head_stride, .capacity = CAP,
        },
    };
    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = impl_of(ORIN_OP_KV_WRITE, dt);
    if (run(impl, &ex, &a) == 0) {
        ops_buf_read(&ck);
        ops_buf_read(&cv);
        /* expected cache: the old one with the written rows replaced */
        for (int i = 0; i < N; i++)
            for (int h = 0; h < HKV; h++)
                for (int d = 0; d < HD; d++) {
                    size_t at = pos[i] * pos_stride + h * head_stride + d;
                    old_k[at] = k.value[(i * HKV + h) * HD + d];
                    old_v[at] = v.value[(i * HKV + h) * HD + d];
                }
        bool same = true;
        for (size_t e = 0; e < cache_elems; e++)
            same &= ck.value[e] == old_k[e] && cv.value[e] == old_v[e];
        CHECK(same, "kv_write %s: cache differs from the expected one", orin_dtype_name(dt));
    }

    pos[1] = CAP;
    ops_expect_error("position past capacity", impl, &ex, &a, "positions[1] = 10");
    pos[1] = 0;
    a.cache.pos_stride = HD - 1;
    ops_expect_error("overlapping rows", impl, &ex, &a, "overlap");
    a.cache.pos_stride = pos_stride;
    a.cache.n_kv_heads = 1;
    ops_expect_error("kv heads", impl, &ex, &a, "k: 2 heads, the cache has 1");
    a.cache.n_kv_heads = HKV;
    a.cache.dtype = dt == ORIN_F32 ? ORIN_BF16 : ORIN_F32;
    ops_expect_error("cache dtype", impl, &ex, &a, "kv cache: dtype");
    free(old_k);
    free(old_v);
    ops_buf_free(&k);
    ops_buf_free(&v);
    ops_buf_free(&ck);
    ops_buf_free(&cv);
}

/* ---- the exec ---- */

static void test_exec_checks(void)
{
    float x[4] = {1, 2, 3, 4}, w[2] = {1, 1}, y[2];
    orin_matmul_args a = {
        .x = ops_tensor(x, ORIN_F32, 2, (int64_t[]){1, 2}),
        .w = ops_tensor(w, ORIN_F32, 2, (int64_t[]){1, 2}),
        .y = ops_tensor(y, ORIN_F32, 2, (int64_t[]){1, 1}),
    };
    const orin_op_impl *impl = impl_of(ORIN_OP_MATMUL, ORIN_F32);
    orin_exec none = {0};
    ops_expect_error("no device", impl, &none, &a, "no exec device");
    orin_exec ex = ops_test_exec(0);
    a.x.device = ORIN_DEVICE_CUDA;
    ops_expect_error("x on the GPU", impl, &ex, &a, "x: on cuda");
}

/* Every op at every dtype is there, flagged as the reference, and a call with
 * no call struct is an error rather than a crash. */
static void test_registrations(void)
{
    static const char *const ops[] = {
        ORIN_OP_EMBEDDING, ORIN_OP_RMSNORM, ORIN_OP_ROPE,   ORIN_OP_MATMUL,
        ORIN_OP_SWIGLU,    ORIN_OP_ADD,     ORIN_OP_ARGMAX, ORIN_OP_KV_WRITE,
    };
    orin_exec ex = ops_test_exec(0);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        for (size_t t = 0; t < sizeof float_dtypes / sizeof float_dtypes[0]; t++) {
            const orin_op_impl *impl = impl_of(ops[i], float_dtypes[t]);
            if (!impl)
                continue;
            CHECK(impl->flags & ORIN_OP_REFERENCE, "%s %s: not flagged as the reference",
                  ops[i], orin_dtype_name(float_dtypes[t]));
            ops_expect_error("no call struct", impl, &ex, NULL, "no arguments");
        }
    }
}

int main(int argc, char **argv)
{
    ops_test_init(argc, argv);
    ops_test_registry();
    test_registrations();
    for (size_t i = 0; i < sizeof float_dtypes / sizeof float_dtypes[0]; i++) {
        orin_dtype dt = float_dtypes[i];
        test_embedding(dt);
        test_rmsnorm(dt);
        test_rope(dt);
        test_matmul(dt);
        test_elementwise(dt);
        test_argmax(dt);
        test_kv_write(dt);
    }
    rope_hand_case();
    rope_hf_case("qwen3, hd 128, theta 1e6", rope_hf_qwen3, rope_hf_qwen3_positions,
                 sizeof rope_hf_qwen3_positions / sizeof(int32_t), ROPE_HF_QWEN3_HEADS,
                 ROPE_HF_QWEN3_HD, ROPE_HF_QWEN3_THETA);
    rope_hf_case("qwen2, hd 64, theta 1e4", rope_hf_qwen2, rope_hf_qwen2_positions,
                 sizeof rope_hf_qwen2_positions / sizeof(int32_t), ROPE_HF_QWEN2_HEADS,
                 ROPE_HF_QWEN2_HD, ROPE_HF_QWEN2_THETA);
    test_exec_checks();
    ops_test_registry_free();
    return test_finish();
}
