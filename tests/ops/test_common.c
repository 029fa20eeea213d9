/* ops_common through the registry, on the target device (the host, or with
 * --device cuda the GPU): every op against a double-precision reference written
 * here (fresh seeded inputs, outputs poisoned with NaN first), rope against
 * Hugging Face's own numbers, and bad calls rejected with errors.
 *
 * Ids and positions live in device memory on the GPU, where only the kernels
 * see them: the host target rejects a bad one with an error, the GPU gives an
 * out-of-vocabulary id a NaN row and a negative rope position a NaN token, and
 * skips a kv_write position outside the cache; each target runs its own cases
 * of these. Sizes only the GPU has time for (thousands of rows, matmuls of
 * 4096) run there only (ops_on_gpu()). */
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

/* A tensor over b's elements from `offset` on. The whole buffer is mapped
 * first, so that on the GPU the view sits at the same offset in one device
 * copy: a view one element in stays misaligned. */
static orin_tensor tensor_at(ops_buf *b, size_t offset, int ndim, const int64_t *dims)
{
    size_t size = orin_dtype_size(b->dt);
    ops_dev(b->data, b->n * size);
    return ops_tensor((char *)b->data + offset * size, b->dt, ndim, dims);
}

/* Row counts the GPU cases sweep: up to 4097, but for the largest under
 * compute-sanitizer (ops_test_quick: 10-100x slower). */
static const int64_t gpu_rows[] = {1, 7, 33, 4097};

static size_t gpu_row_counts(void)
{
    return ops_test_quick() ? 3 : 4;
}

/* The largest GPU cases: on the GPU, not under compute-sanitizer. */
static bool gpu_big(void)
{
    return ops_on_gpu() && !ops_test_quick();
}

/* Elements [offset, offset + n) of b, over the same memory (not to be freed). */
static ops_buf buf_view(const ops_buf *b, size_t offset, size_t n)
{
    return (ops_buf){.dt = b->dt, .n = n,
                     .data = (char *)b->data + offset * orin_dtype_size(b->dt),
                     .value = b->value + offset};
}

static bool all_nan(const ops_buf *b, size_t from, size_t n)
{
    for (size_t i = from; i < from + n; i++)
        if (!isnan(ops_value(b->dt, b->data, i)))
            return false;
    return true;
}

/* ---- embedding ---- */

/* n ids spread over the vocabulary (the first and last ids included); with
 * bad_ids (the GPU: n >= 4) three of them outside it, whose rows must come out
 * NaN. Every other row must be the table's, bit for bit. */
static void embedding_case(orin_dtype dt, int64_t vocab, int64_t d, int64_t n, bool bad_ids)
{
    ops_rng rng = {.state = 10 + (uint64_t)(vocab + d + n)};
    ops_buf table = ops_buf_random(&rng, dt, vocab * d, -1, 1);
    ops_buf out = ops_buf_nan(dt, n * d);
    int32_t *ids = malloc(n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 7919 + 3) % vocab);
    ids[0] = 0;
    ids[n - 1] = (int32_t)vocab - 1;
    if (bad_ids) {
        ids[1] = (int32_t)vocab;
        ids[2] = -1;
        ids[n - 2] = INT32_MIN;
    }
    orin_embedding_args a = {
        .table = ops_tensor(table.data, dt, 2, (int64_t[]){vocab, d}),
        .ids = ops_tensor(ids, ORIN_I32, 1, &n),
        .out = ops_tensor(out.data, dt, 2, (int64_t[]){n, d}),
    };
    orin_exec ex = ops_test_exec(0);
    if (run(impl_of(ORIN_OP_EMBEDDING, dt), &ex, &a) == 0) {
        ops_buf_fetch(&out);
        size_t row = (size_t)d * orin_dtype_size(dt);
        int64_t wrong = -1;
        for (int64_t i = n - 1; i >= 0; i--) {
            bool ok = ids[i] >= 0 && ids[i] < vocab
                          ? memcmp((char *)out.data + i * row,
                                   (char *)table.data + (int64_t)ids[i] * row, row) == 0
                          : all_nan(&out, (size_t)(i * d), (size_t)d);
            wrong = ok ? wrong : i;
        }
        CHECK(wrong < 0, "embedding %s [%lld x %lld] n %lld%s: row %lld (id %d) is wrong",
              orin_dtype_name(dt), (long long)vocab, (long long)d, (long long)n,
              bad_ids ? " with bad ids" : "", (long long)wrong, wrong < 0 ? 0 : ids[wrong]);
    }
    free(ids);
    ops_buf_free(&table);
    ops_buf_free(&out);
    ops_release();
}

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
        ops_buf_fetch(&out);
        size_t row = (size_t)d * orin_dtype_size(dt);
        bool same = true;
        for (int64_t i = 0; i < n; i++)
            same &= memcmp((char *)out.data + i * row, (char *)table.data + ids[i] * row, row) == 0;
        CHECK(same, "embedding %s: rows differ from the table", orin_dtype_name(dt));
    }

    /* the host checks ids before the copy; on the GPU see embedding_case */
    if (!ops_on_gpu()) {
        ids[2] = 50;
        ops_expect_error("id past the vocabulary", impl, &ex, &a, "ids[2] = 50");
        ids[2] = -1;
        ops_expect_error("negative id", impl, &ex, &a, "ids[2] = -1");
        ids[2] = 3;
    }
    a.out.shape[1] = d + 1;
    a.out.stride[0] = d + 1;
    ops_expect_error("out width", impl, &ex, &a, "out: dimension 1");
    a.out.shape[1] = d;
    a.out.stride[0] = d;
    if (ops_on_gpu()) {
        a.ids = orin_tensor_make(ids, ORIN_I32, ORIN_DEVICE_CPU, 1, (int64_t[]){n});
        ops_expect_error("ids on the host", impl, &ex, &a, "ids: on cpu, expected cuda");
    }
    ops_buf_free(&table);
    ops_buf_free(&out);
    ops_release();

    embedding_case(dt, 50, 64, 7, false); /* whole 16-byte rows */
    if (ops_on_gpu()) {
        const int64_t widths[] = {33, 64, 1000, 1003};
        for (size_t r = 0; r < gpu_row_counts(); r++)
            for (size_t w = 0; w < 4; w++)
                embedding_case(dt, 300, widths[w], gpu_rows[r], false);
        embedding_case(dt, 50, 33, 7, true);
        embedding_case(dt, 50, 64, 33, true);
    }
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
    if (run(impl_of(ORIN_OP_RMSNORM, dt), &ex, &a) == 0) {
        ops_buf_fetch(&out);
        ops_check_close(what, &out, ref, NULL, ops_tol(dt), ops_atol(dt));
    }
    free(ref);
    if (!in_place)
        ops_buf_free(&out);
    ops_buf_free(&x);
    ops_buf_free(&w);
    ops_release();
}

static void test_rmsnorm(orin_dtype dt)
{
    rmsnorm_case(dt, 2, (int64_t[]){1, 1}, false);
    rmsnorm_case(dt, 2, (int64_t[]){5, 64}, false);
    rmsnorm_case(dt, 2, (int64_t[]){3, 1000}, true);
    rmsnorm_case(dt, 3, (int64_t[]){7, 4, 128}, false); /* Qwen3's q norm: rows = n * heads */
    rmsnorm_case(dt, 2, (int64_t[]){2, 4097}, false);
    if (ops_on_gpu()) {
        /* a warp a row up to 256 (16-byte vectors where rows are whole ones:
         * 128, 256), a block a row past it (1000, 1024; 4097 and 300 element
         * by element) */
        const int64_t dims[] = {67, 128, 256, 300, 1000, 1024};
        for (size_t r = 0; r < gpu_row_counts(); r++)
            for (size_t d = 0; d < 6; d++)
                rmsnorm_case(dt, 2, (int64_t[]){gpu_rows[r], dims[d]}, d % 2 == 1);
        rmsnorm_case(dt, 2, (int64_t[]){33, 4097}, false);
        if (gpu_big())
            rmsnorm_case(dt, 3, (int64_t[]){4097, 16, 128}, true);
    }

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
    void *x_data = a.x.data;
    a.x.data = NULL;
    ops_expect_error("NULL x", impl, &ex, &a, "x: no data");
    a.x.data = x_data;
    a.eps = NAN;
    ops_expect_error("NaN eps", impl, &ex, &a, "eps");
    a.eps = 1e-6f;
    a.out.data = (char *)x_data + orin_dtype_size(dt);
    ops_expect_error("out shifted over x", impl, &ex, &a, "partly overlaps");
    a.out.data = x_data;
    if (ops_on_gpu()) {
        a.weight = orin_tensor_make(dummy + 4, dt, ORIN_DEVICE_CPU, 1, (int64_t[]){4});
        ops_expect_error("weight on the host", impl, &ex, &a, "weight: on cpu, expected cuda");
    }
    ops_release();
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

/* ref and scale (|x1 c| + |x2 s|, what rounding scales with) of rope over in;
 * with sc set, its frequencies (the f32 angle pos * inv_freq[j]) and cos and
 * sin times its factor. */
static void rope_ref(const double *in, const int32_t *pos, int64_t n, int64_t heads, int64_t hd,
                     float theta, const orin_rope_scaling *sc, double *ref, double *scale)
{
    int64_t half = hd / 2;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t h = 0; h < heads; h++) {
            int64_t o = (i * heads + h) * hd;
            const double *row = in + o;
            for (int64_t j = 0; j < half; j++) {
                double angle = sc ? (float)pos[i] * sc->inv_freq[j] : hf_angle(pos[i], j, hd, theta);
                double f = sc ? sc->attention_factor : 1.0;
                double c = cos(angle) * f, s = sin(angle) * f, x1 = row[j], x2 = row[j + half];
                ref[o + j] = x1 * c - x2 * s;
                ref[o + j + half] = x2 * c + x1 * s;
                scale[o + j] = fabs(x1 * c) + fabs(x2 * s);
                scale[o + j + half] = fabs(x2 * c) + fabs(x1 * s);
            }
        }
    }
}

/* Positions from pos0 on, scattered over 1000; with bad_pos (the GPU: n >= 3)
 * token 1 at a negative position, whose rows must come out NaN; with sc, a
 * scaled rope (rope_scaled_case). */
static void rope_case_scaled(orin_dtype dt, int64_t n, int64_t heads, int64_t hd, float theta,
                             int32_t pos0, bool bad_pos, const orin_rope_scaling *sc)
{
    ops_rng rng = {.state = 200 + (uint64_t)hd};
    int64_t total = n * heads * hd, token = heads * hd;
    ops_buf x = ops_buf_random(&rng, dt, total, -2, 2);
    double *ref = malloc(total * sizeof(double)), *scale = malloc(total * sizeof(double));
    int32_t *pos = malloc(n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        pos[i] = pos0 + (int32_t)(i * 37 % 1000);
    if (bad_pos)
        pos[1] = -4;
    rope_ref(x.value, pos, n, heads, hd, theta, sc, ref, scale);
    orin_rope_args a = {
        .x = ops_tensor(x.data, dt, 3, (int64_t[]){n, heads, hd}),
        .positions = ops_tensor(pos, ORIN_I32, 1, &n),
        .theta = theta,
    };
    if (sc)
        a.scaling = *sc;
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "rope %s n %lld heads %lld hd %lld from %d%s%s",
             orin_dtype_name(dt), (long long)n, (long long)heads, (long long)hd, pos0,
             bad_pos ? ", token 1 at -4" : "", sc ? ", scaled" : "");
    if (run(impl_of(ORIN_OP_ROPE, dt), &ex, &a) == 0) {
        ops_buf_fetch(&x);
        if (!bad_pos) {
            ops_check_close(what, &x, ref, scale, ops_tol(dt), ops_atol(dt));
        } else {
            CHECK(all_nan(&x, (size_t)token, (size_t)token), "%s: token 1 is not NaN", what);
            ops_buf first = buf_view(&x, 0, (size_t)token);
            ops_buf rest = buf_view(&x, 2 * (size_t)token, (size_t)(total - 2 * token));
            ops_check_close(what, &first, ref, scale, ops_tol(dt), ops_atol(dt));
            ops_check_close(what, &rest, ref + 2 * token, scale + 2 * token, ops_tol(dt),
                            ops_atol(dt));
        }
    }
    free(ref);
    free(scale);
    free(pos);
    ops_buf_free(&x);
    ops_release();
}

static void rope_case(orin_dtype dt, int64_t n, int64_t heads, int64_t hd, float theta,
                      int32_t pos0, bool bad_pos)
{
    rope_case_scaled(dt, n, heads, hd, theta, pos0, bad_pos, NULL);
}

/* A scaled rope (rope_scaling linear, yarn: orin_rope_scaling): frequencies
 * of no formula, the angle's f32 product with them, and cos and sin times the
 * factor; the unscaled frequencies' formula must not be used. */
static void rope_scaled_case(orin_dtype dt, int64_t n, int64_t heads, int64_t hd, int32_t pos0,
                             bool bad_pos)
{
    float inv[1024];
    const orin_rope_scaling sc = ops_rope_scaled_table(inv, hd, 10000.0);
    rope_case_scaled(dt, n, heads, hd, 10000.0f, pos0, bad_pos, &sc);
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
    if (run(impl_of(ORIN_OP_ROPE, ORIN_F32), &ex, &a) == 0) {
        ops_buf_fetch(&x);
        ops_check_close(what, &x, ref, scale, 1e-6, 0);
    }
    free(ref);
    free(scale);
    ops_buf_free(&x);
    ops_release();
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
    if (run(impl_of(ORIN_OP_ROPE, ORIN_F32), &ex, &a) != 0) {
        ops_release();
        return;
    }
    ops_fetch(x, sizeof x);
    ops_release();
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
    rope_case(dt, 1, 1, 2, 10000.0f, 5, false);
    rope_case(dt, 9, 4, 64, 10000.0f, 0, false);
    rope_case(dt, 5, 2, 128, 1000000.0f, 1090, false);
    rope_case(dt, 3, 3, 256, 5e5f, 30000, false);
    if (ops_on_gpu()) {
        for (size_t t = 0; t < gpu_row_counts(); t++) {
            rope_case(dt, gpu_rows[t], 4, 128, 1000000.0f, 4000, false);
            rope_case(dt, gpu_rows[t], 3, 64, 10000.0f, 100, false);
        }
        /* past the host-computed table of 256 frequencies: the device computes the rest */
        rope_case(dt, 7, 2, 1030, 10000.0f, 2000, false);
        rope_case(dt, 3, 2, 8, 10000.0f, 3, true);
        rope_case(dt, 33, 4, 128, 1000000.0f, 70, true);
        for (size_t t = 0; t < gpu_row_counts(); t++)
            rope_scaled_case(dt, gpu_rows[t], 4, 128, 4000, false);
        rope_scaled_case(dt, 5, 2, 512, 20000, false); /* the table's whole 256 */
        rope_scaled_case(dt, 3, 2, 8, 3, true);
    }
    rope_scaled_case(dt, 1, 1, 2, 5, false);
    rope_scaled_case(dt, 9, 4, 64, 0, false);
    rope_scaled_case(dt, 5, 2, 128, 31000, false);

    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = impl_of(ORIN_OP_ROPE, dt);
    float dummy[12] = {0};
    int32_t pos[2] = {0, -4};
    orin_rope_args a = {
        .x = ops_tensor(dummy, dt, 3, (int64_t[]){2, 1, 4}),
        .positions = ops_tensor(pos, ORIN_I32, 1, (int64_t[]){2}),
        .theta = 10000.0f,
    };
    /* the host checks positions; on the GPU see rope_case's bad_pos */
    if (!ops_on_gpu())
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
    a.x.stride[0] = 4;
    a.positions.dtype = ORIN_F32;
    ops_expect_error("positions dtype", impl, &ex, &a, "positions: dtype f32, expected i32");
    a.positions.dtype = ORIN_I32;
    const float inv[2] = {1.0f, 0.5f};
    a.scaling = (orin_rope_scaling){.inv_freq = inv, .attention_factor = 0.0f};
    ops_expect_error("scaling factor 0", impl, &ex, &a, "scaling.attention_factor 0");
    a.scaling.attention_factor = NAN;
    ops_expect_error("scaling factor NaN", impl, &ex, &a, "scaling.attention_factor nan");
    ops_release();
}

/* ---- matmul ---- */

/* x, w, bias and y sit `offset` elements into their buffers (one element in:
 * 2- or 4-byte aligned views, as sub-views of activations can be). With
 * `workspace` the exec offers what the implementation asks for, as the model
 * does; without, none. */
static void matmul_case(orin_dtype dt, int64_t n, int64_t in, int64_t out, bool bias,
                        size_t offset, bool workspace)
{
    ops_rng rng = {.state = 300 + (uint64_t)(n * 7 + in * 3 + out)};
    ops_buf x = ops_buf_random(&rng, dt, n * in + offset, -1, 1);
    ops_buf w = ops_buf_random(&rng, dt, out * in + offset, -1, 1);
    ops_buf b = ops_buf_random(&rng, dt, out + offset, -1, 1);
    ops_buf y = ops_buf_nan(dt, n * out + offset);
    const double *xv = x.value + offset, *wv = w.value + offset, *bv = b.value + offset;
    double *ref = malloc(n * out * sizeof(double)), *scale = malloc(n * out * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
            double sum = bias ? bv[o] : 0, mag = bias ? fabs(bv[o]) : 0;
            const double *xr = xv + i * in, *wr = wv + o * in;
            for (int64_t k = 0; k < in; k++) {
                sum += xr[k] * wr[k];
                mag += fabs(xr[k] * wr[k]);
            }
            ref[i * out + o] = sum;
            scale[i * out + o] = mag;
        }
    orin_matmul_args a = {
        .x = tensor_at(&x, offset, 2, (int64_t[]){n, in}),
        .w = tensor_at(&w, offset, 2, (int64_t[]){out, in}),
        .bias = bias ? tensor_at(&b, offset, 1, &out) : (orin_tensor){0},
        .y = tensor_at(&y, offset, 2, (int64_t[]){n, out}),
    };
    const orin_op_impl *impl = impl_of(ORIN_OP_MATMUL, dt);
    orin_exec ex = ops_test_exec(0);
    if (workspace && impl && impl->workspace_size) {
        ex.workspace_size = impl->workspace_size(&a);
        ex.workspace = ops_workspace(ex.workspace_size);
    }
    char what[160];
    snprintf(what, sizeof what, "matmul %s %lldx%lld . %lldx%lld^T%s%s%s", orin_dtype_name(dt),
             (long long)n, (long long)in, (long long)out, (long long)in, bias ? " + bias" : "",
             offset ? ", views one element in" : "", workspace ? "" : ", no workspace");
    if (run(impl, &ex, &a) == 0) {
        ops_buf_fetch(&y);
        ops_buf got = buf_view(&y, offset, (size_t)(n * out));
        ops_check_close(what, &got, ref, scale, ops_tol(dt), ops_atol(dt));
    }
    free(ref);
    free(scale);
    ops_buf_free(&x);
    ops_buf_free(&w);
    ops_buf_free(&b);
    ops_buf_free(&y);
    ops_release();
}

static void test_matmul(orin_dtype dt)
{
    for (int bias = 0; bias < 2; bias++) {
        matmul_case(dt, 1, 1, 1, bias, 0, true);
        matmul_case(dt, 1, 64, 1000, bias, 0, true);
        /* One row (decode): f16/bf16 take the widening dot; in = 1000 ends on a
         * block of 8, in = 67 on a tail of 3 after two blocks of 32. */
        matmul_case(dt, 1, 1000, 257, bias, 0, true);
        matmul_case(dt, 1, 67, 33, bias, 0, true);
        matmul_case(dt, 7, 129, 33, bias, 0, true);
        matmul_case(dt, 300, 67, 513, bias, 0, true); /* past one tile of x rows and of w rows */
        matmul_case(dt, 3, 1000, 257, bias, 0, true);
        if (gpu_big()) {
            matmul_case(dt, 1, 4096, 4097, bias, 0, true);
            matmul_case(dt, 300, 1000, 513, bias, 0, true);
            matmul_case(dt, 4097, 64, 65, bias, 0, true);
        }
        if (ops_on_gpu()) {
            matmul_case(dt, 7, 67, 33, bias, 0, true);
            matmul_case(dt, 33, 128, 256, bias, 0, true);
            /* 2- or 4-byte aligned views (the bias too: cuBLASLt's epilogue
             * does not take it then), and no workspace at all */
            matmul_case(dt, 1, 67, 33, bias, 1, true);
            matmul_case(dt, 33, 256, 96, bias, 1, true);
            matmul_case(dt, 7, 67, 33, bias, 0, false);
            matmul_case(dt, 129, 1000, 257, bias, 0, false);
        }
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
    if (ops_on_gpu()) {
        a.y = ops_tensor(buf + 32, dt, 2, (int64_t[]){2, 3});
        a.w = orin_tensor_make(buf + 8, dt, ORIN_DEVICE_CPU, 2, (int64_t[]){3, 4});
        ops_expect_error("w on the host", impl, &ex, &a, "w: on cpu, expected cuda");
    }
    ops_release();
}

/* ---- swiglu and add ---- */

/* alias 1: out is gate, 2: out is up. offset: every tensor that many elements
 * into its buffer (one element in: no 16-byte vectors on the GPU). */
static void swiglu_case(orin_dtype dt, int64_t n, int64_t f, int alias, size_t offset)
{
    ops_rng rng = {.state = 400 + (uint64_t)(n * f)};
    size_t total = (size_t)(n * f);
    ops_buf g = ops_buf_random(&rng, dt, total + offset, -8, 8);
    ops_buf u = ops_buf_random(&rng, dt, total + offset, -2, 2);
    ops_buf nan_out = ops_buf_nan(dt, alias ? 1 : total + offset);
    ops_buf *out = alias == 1 ? &g : alias == 2 ? &u : &nan_out;
    double *ref = malloc(total * sizeof(double));
    for (size_t i = 0; i < total; i++) {
        double gi = g.value[offset + i];
        ref[i] = gi / (1 + exp(-gi)) * u.value[offset + i];
    }
    const int64_t dims[2] = {n, f};
    orin_swiglu_args a = {
        .gate = tensor_at(&g, offset, 2, dims),
        .up = tensor_at(&u, offset, 2, dims),
        .out = tensor_at(out, offset, 2, dims),
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "swiglu %s %lldx%lld%s%s", orin_dtype_name(dt), (long long)n,
             (long long)f, alias == 1 ? " into gate" : alias == 2 ? " into up" : "",
             offset ? ", views one element in" : "");
    if (run(impl_of(ORIN_OP_SWIGLU, dt), &ex, &a) == 0) {
        ops_buf_fetch(out);
        ops_buf got = buf_view(out, offset, total);
        ops_check_close(what, &got, ref, NULL, ops_tol(dt), ops_atol(dt));
    }
    free(ref);
    ops_buf_free(&g);
    ops_buf_free(&u);
    ops_buf_free(&nan_out);
    ops_release();
}

static void add_case(orin_dtype dt, int ndim, const int64_t *dims, int alias, size_t offset)
{
    orin_tensor shape = ops_tensor(NULL, dt, ndim, dims);
    size_t total = (size_t)orin_tensor_numel(&shape);
    ops_rng rng = {.state = 500 + (uint64_t)total};
    ops_buf x = ops_buf_random(&rng, dt, total + offset, -4, 4);
    ops_buf y = ops_buf_random(&rng, dt, total + offset, -4, 4);
    ops_buf nan_out = ops_buf_nan(dt, alias ? 1 : total + offset);
    ops_buf *out = alias == 1 ? &x : alias == 2 ? &y : &nan_out;
    double *ref = malloc(total * sizeof(double)), *scale = malloc(total * sizeof(double));
    for (size_t i = 0; i < total; i++) {
        ref[i] = x.value[offset + i] + y.value[offset + i];
        scale[i] = fabs(x.value[offset + i]) + fabs(y.value[offset + i]);
    }
    orin_add_args a = {
        .a = tensor_at(&x, offset, ndim, dims),
        .b = tensor_at(&y, offset, ndim, dims),
        .out = tensor_at(out, offset, ndim, dims),
    };
    orin_exec ex = ops_test_exec(0);
    char what[128];
    snprintf(what, sizeof what, "add %s %zu elements%s%s", orin_dtype_name(dt), total,
             alias == 1 ? " into a" : alias == 2 ? " into b" : "",
             offset ? ", views one element in" : "");
    if (run(impl_of(ORIN_OP_ADD, dt), &ex, &a) == 0) {
        ops_buf_fetch(out);
        ops_buf got = buf_view(out, offset, total);
        ops_check_close(what, &got, ref, scale, ops_tol(dt), ops_atol(dt));
    }
    free(ref);
    free(scale);
    ops_buf_free(&x);
    ops_buf_free(&y);
    ops_buf_free(&nan_out);
    ops_release();
}

static void test_elementwise(orin_dtype dt)
{
    swiglu_case(dt, 1, 1, 0, 0);
    swiglu_case(dt, 5, 1001, 0, 0);
    swiglu_case(dt, 3, 2048, 1, 0);
    swiglu_case(dt, 2, 333, 2, 0);
    add_case(dt, 1, (int64_t[]){1}, 0, 0);
    add_case(dt, 2, (int64_t[]){3, 1025}, 0, 0);
    add_case(dt, 3, (int64_t[]){2, 3, 700}, 1, 0);
    add_case(dt, 2, (int64_t[]){4, 999}, 2, 0);
    swiglu_case(dt, 3, 37, 0, 1);
    add_case(dt, 2, (int64_t[]){3, 37}, 0, 1);
    if (ops_on_gpu()) {
        /* 16-byte vectors and a tail (widths not multiples of 8), element by
         * element one element in, in place */
        const int64_t widths[] = {3, 1001, 3000};
        for (size_t r = 0; r < gpu_row_counts(); r++)
            for (size_t w = 0; w < 3; w++) {
                int64_t rows = gpu_rows[r];
                int alias = (int)((r + w) % 3);
                swiglu_case(dt, rows, widths[w], alias, 0);
                swiglu_case(dt, rows, widths[w], 0, 1);
                add_case(dt, 2, (int64_t[]){rows, widths[w]}, alias, 0);
                add_case(dt, 2, (int64_t[]){rows, widths[w]}, 0, 1);
            }
    }

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
    if (ops_on_gpu()) {
        s.up = ops_tensor(buf + 8, dt, 2, (int64_t[]){2, 4});
        s.out = orin_tensor_make(buf + 16, dt, ORIN_DEVICE_CPU, 2, (int64_t[]){2, 4});
        ops_expect_error("out on the host", impl_of(ORIN_OP_SWIGLU, dt), &ex, &s,
                         "swiglu (common): out: on cpu, expected cuda");
    }
    ops_release();
}

/* ---- argmax ---- */

/* cpu.c's argmax_row over the values as read back: the first NaN, else the
 * lowest index of the largest value. */
static int32_t argmax_ref(const double *x, int64_t len)
{
    int64_t best = 0;
    for (int64_t j = 0; j < len; j++) {
        if (isnan(x[j]))
            return (int32_t)j;
        if (x[j] > x[best])
            best = j;
    }
    return (int32_t)best;
}

/* rows x len random values with, row by row in turn: two NaNs, all equal, a
 * tie of the largest, all -inf, nothing planted. With odd lengths the rows
 * start at every alignment, so the GPU's unaligned head, vectors and tail all
 * get the answer. */
static void argmax_case(orin_dtype dt, int64_t rows, int64_t len)
{
    ops_rng rng = {.state = 610 + (uint64_t)(rows + len)};
    ops_buf x = ops_buf_random(&rng, dt, rows * len, -30, 30);
    for (int64_t r = 0; r < rows; r++) {
        int64_t at = r * len;
        switch (r % 5) {
        case 0:
            ops_store(dt, x.data, at + (r * 13) % len, NAN);
            ops_store(dt, x.data, at + len - 1, NAN);
            break;
        case 1:
            for (int64_t j = 0; j < len; j++)
                ops_store(dt, x.data, at + j, -3);
            break;
        case 2:
            ops_store(dt, x.data, at + (r * 7) % len, 100);
            ops_store(dt, x.data, at + len - 1 - (r * 3) % len, 100);
            break;
        case 3:
            for (int64_t j = 0; j < len; j++)
                ops_store(dt, x.data, at + j, -INFINITY);
            break;
        default:
            break;
        }
    }
    ops_buf_read(&x);
    int32_t *out = malloc(rows * sizeof(int32_t));
    for (int64_t r = 0; r < rows; r++)
        out[r] = -7;
    orin_argmax_args a = {
        .x = ops_tensor(x.data, dt, 2, (int64_t[]){rows, len}),
        .out = ops_tensor(out, ORIN_I32, 1, &rows),
    };
    orin_exec ex = ops_test_exec(0);
    if (run(impl_of(ORIN_OP_ARGMAX, dt), &ex, &a) == 0) {
        ops_fetch(out, rows * sizeof(int32_t));
        int64_t wrong = -1;
        for (int64_t r = rows - 1; r >= 0; r--)
            wrong = out[r] == argmax_ref(x.value + r * len, len) ? wrong : r;
        CHECK(wrong < 0, "argmax %s [%lld, %lld]: row %lld: %d, want %d", orin_dtype_name(dt),
              (long long)rows, (long long)len, (long long)wrong, wrong < 0 ? 0 : out[wrong],
              wrong < 0 ? 0 : argmax_ref(x.value + wrong * len, len));
    }
    free(out);
    ops_buf_free(&x);
    ops_release();
}

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
        ops_fetch(out, sizeof out);
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
        ops_fetch(got, sizeof got);
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
    b.out.shape[0] = 3;
    b.out.dtype = ORIN_F32;
    ops_expect_error("out dtype", impl, &ex, &b, "argmax (common): out: dtype f32, expected i32");
    ops_buf_free(&x);
    ops_buf_free(&y);
    ops_release();

    argmax_case(dt, 10, 37);
    if (ops_on_gpu()) {
        const int64_t lens[] = {1, 3, 67, 3001};
        for (size_t r = 0; r < gpu_row_counts(); r++)
            for (size_t l = 0; l < 4; l++)
                argmax_case(dt, gpu_rows[r], lens[l]);
        if (gpu_big())
            argmax_case(dt, 5, 151937);
    }
}

/* ---- kv_write ---- */

typedef struct kv_case {
    int n, heads, hd, capacity;
    int pad;          /* elements after each cache row */
    bool head_major;  /* [Hkv, capacity, hd + pad], else [capacity, Hkv, hd + pad] */
} kv_case;

/* Writes n tokens at pos[] into a cache filled with marks, then checks the
 * whole cache: the written rows replaced, everything else (padding, other
 * positions, and on the GPU the rows of positions outside the cache, which
 * are skipped) untouched. */
static void kv_write_case(orin_dtype dt, const kv_case *c, const int32_t *pos)
{
    const int64_t row = c->hd + c->pad;
    const int64_t pos_stride = c->head_major ? row : c->heads * row;
    const int64_t head_stride = c->head_major ? c->capacity * row : row;
    const size_t cache_elems = (size_t)c->heads * c->capacity * row;
    const size_t cache_bytes = cache_elems * orin_dtype_size(dt);
    ops_rng rng = {.state = 700 + (uint64_t)(c->n + c->hd + c->pad)};
    ops_buf k = ops_buf_random(&rng, dt, (size_t)c->n * c->heads * c->hd, -1, 1);
    ops_buf v = ops_buf_random(&rng, dt, (size_t)c->n * c->heads * c->hd, -1, 1);
    ops_buf ck = ops_buf_random(&rng, dt, cache_elems, 5, 6); /* marks untouched slots */
    ops_buf cv = ops_buf_random(&rng, dt, cache_elems, 5, 6);
    double *want_k = malloc(cache_elems * sizeof(double));
    double *want_v = malloc(cache_elems * sizeof(double));
    memcpy(want_k, ck.value, cache_elems * sizeof(double));
    memcpy(want_v, cv.value, cache_elems * sizeof(double));
    for (int i = 0; i < c->n; i++) {
        if (pos[i] < 0 || pos[i] >= c->capacity)
            continue;
        for (int h = 0; h < c->heads; h++)
            for (int d = 0; d < c->hd; d++) {
                size_t at = (size_t)(pos[i] * pos_stride + h * head_stride + d);
                want_k[at] = k.value[((size_t)i * c->heads + h) * c->hd + d];
                want_v[at] = v.value[((size_t)i * c->heads + h) * c->hd + d];
            }
    }
    int64_t n = c->n;
    orin_kv_write_args a = {
        .k = ops_tensor(k.data, dt, 3, (int64_t[]){n, c->heads, c->hd}),
        .v = ops_tensor(v.data, dt, 3, (int64_t[]){n, c->heads, c->hd}),
        .positions = ops_tensor((void *)pos, ORIN_I32, 1, &n),
        .cache = {
            .k = ops_dev(ck.data, cache_bytes), .v = ops_dev(cv.data, cache_bytes),
            .dtype = dt, .n_kv_heads = c->heads, .head_dim = c->hd,
            .pos_stride = pos_stride, .head_stride = head_stride, .capacity = c->capacity,
        },
    };
    orin_exec ex = ops_test_exec(0);
    if (run(impl_of(ORIN_OP_KV_WRITE, dt), &ex, &a) == 0) {
        ops_buf_fetch(&ck);
        ops_buf_fetch(&cv);
        size_t wrong = cache_elems;
        for (size_t e = cache_elems; e-- > 0;)
            wrong = ck.value[e] == want_k[e] && cv.value[e] == want_v[e] ? wrong : e;
        CHECK(wrong == cache_elems, "kv_write %s n %d, %d heads of %d, capacity %d, pad %d%s: "
              "cache element %zu differs from the expected one", orin_dtype_name(dt), c->n,
              c->heads, c->hd, c->capacity, c->pad, c->head_major ? ", head-major" : "", wrong);
    }
    free(want_k);
    free(want_v);
    ops_buf_free(&k);
    ops_buf_free(&v);
    ops_buf_free(&ck);
    ops_buf_free(&cv);
    ops_release();
}

static void test_kv_write(orin_dtype dt)
{
    /* A head-major cache [Hkv, capacity, hd + 3] (padded rows): strides that are
     * not the default layout, so that the op must follow them. */
    enum { CAP = 10, HKV = 2, HD = 8, PAD = 3, N = 3 };
    const kv_case padded = {.n = N, .heads = HKV, .hd = HD, .capacity = CAP, .pad = PAD,
                            .head_major = true};
    kv_write_case(dt, &padded, (int32_t[]){5, 0, 9});
    if (ops_on_gpu()) {
        /* the default layout and a head-major one padded by 8: 16-byte rows */
        int32_t pos[33];
        for (int i = 0; i < 33; i++)
            pos[i] = (i * 97 + 11) % 4097;
        kv_write_case(dt, &(kv_case){.n = 33, .heads = 8, .hd = 128, .capacity = 4097}, pos);
        for (int i = 0; i < 7; i++)
            pos[i] = (i * 37 + 5) % 300;
        kv_write_case(dt, &(kv_case){.n = 7, .heads = 2, .hd = 64, .capacity = 300, .pad = 8,
                                     .head_major = true}, pos);
        kv_write_case(dt, &(kv_case){.n = 1, .heads = 4, .hd = 128, .capacity = 8}, (int32_t[]){7});
        /* positions outside the cache (only the GPU sees them): skipped */
        kv_write_case(dt, &(kv_case){.n = 5, .heads = HKV, .hd = HD, .capacity = CAP,
                                     .pad = PAD, .head_major = true},
                      (int32_t[]){5, CAP, -1, 9, INT32_MIN});
        kv_write_case(dt, &(kv_case){.n = 3, .heads = 8, .hd = 128, .capacity = 64},
                      (int32_t[]){64, 63, -64});
    }

    /* bad calls */
    ops_rng rng = {.state = 701};
    const int64_t head_stride = CAP * (HD + PAD), pos_stride = HD + PAD;
    size_t cache_elems = HKV * CAP * (HD + PAD);
    ops_buf k = ops_buf_random(&rng, dt, N * HKV * HD, -1, 1);
    ops_buf ck = ops_buf_random(&rng, dt, cache_elems, 5, 6);
    int32_t pos[N] = {5, 0, 9};
    orin_kv_write_args a = {
        .k = ops_tensor(k.data, dt, 3, (int64_t[]){N, HKV, HD}),
        .v = ops_tensor(k.data, dt, 3, (int64_t[]){N, HKV, HD}),
        .positions = ops_tensor(pos, ORIN_I32, 1, (int64_t[]){N}),
        .cache = {
            .k = ops_dev(ck.data, cache_elems * orin_dtype_size(dt)),
            .v = ops_dev(ck.data, cache_elems * orin_dtype_size(dt)),
            .dtype = dt, .n_kv_heads = HKV, .head_dim = HD,
            .pos_stride = pos_stride, .head_stride = head_stride, .capacity = CAP,
        },
    };
    orin_exec ex = ops_test_exec(0);
    const orin_op_impl *impl = impl_of(ORIN_OP_KV_WRITE, dt);
    /* the host checks positions; on the GPU see the skipping cases above */
    if (!ops_on_gpu()) {
        pos[1] = CAP;
        ops_expect_error("position past capacity", impl, &ex, &a, "positions[1] = 10");
        pos[1] = 0;
    }
    a.cache.pos_stride = HD - 1;
    ops_expect_error("overlapping rows", impl, &ex, &a, "overlap");
    a.cache.pos_stride = pos_stride;
    a.cache.n_kv_heads = 1;
    ops_expect_error("kv heads", impl, &ex, &a, "k: 2 heads, the cache has 1");
    a.cache.n_kv_heads = HKV;
    a.cache.dtype = dt == ORIN_F32 ? ORIN_BF16 : ORIN_F32;
    ops_expect_error("cache dtype", impl, &ex, &a, "kv cache: dtype");
    a.cache.dtype = dt;
    a.v.shape[0] = N - 1;
    ops_expect_error("v shape", impl, &ex, &a, "kv_write (common): v: dimension 0 is 2");
    a.v.shape[0] = N;
    if (ops_on_gpu()) {
        a.positions = orin_tensor_make(pos, ORIN_I32, ORIN_DEVICE_CPU, 1, (int64_t[]){N});
        ops_expect_error("positions on the host", impl, &ex, &a,
                         "kv_write (common): positions: on cpu, expected cuda");
    }
    ops_buf_free(&k);
    ops_buf_free(&ck);
    ops_release();
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
    if (!ops_on_gpu()) {
        a.x.device = ORIN_DEVICE_CUDA;
        ops_expect_error("x on the GPU", impl, &ex, &a, "x: on cuda");
    } else {
        orin_exec host = {.device = orin_device_cpu()};
        ops_expect_error("a host exec", impl, &host, &a, "exec device is cpu");
        a.x = orin_tensor_make(x, ORIN_F32, ORIN_DEVICE_CPU, 2, (int64_t[]){1, 2});
        ops_expect_error("x on the host", impl, &ex, &a, "x: on cpu, expected cuda");
    }
    ops_release();
}

/* Every op at every dtype is there, flagged as the reference and graph-safe,
 * and a call with no call struct is an error rather than a crash. */
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
            CHECK(impl->flags & ORIN_OP_GRAPH_SAFE, "%s %s: not flagged graph-safe", ops[i],
                  orin_dtype_name(float_dtypes[t]));
            ops_expect_error("no call struct", impl, &ex, NULL, "no arguments");
        }
    }
    /* the GPU matmul asks for cuBLASLt's workspace */
    if (ops_on_gpu()) {
        const orin_op_impl *mm = impl_of(ORIN_OP_MATMUL, ORIN_BF16);
        CHECK(mm && mm->workspace_size && mm->workspace_size(&(orin_matmul_args){0}) > 0,
              "matmul on cuda declares no workspace");
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
