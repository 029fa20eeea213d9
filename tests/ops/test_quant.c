/* matmul.awq4 and matmul.int8 through the registry, on the target device,
 * against a double-precision dequantize-then-matmul written here: random
 * integers, zeros and f16 scales (fresh, seeded) packed here into the formats
 * of orin/ops.h (AWQ's nibble order spelled out as its own table, not through
 * orin_awq_shift), outputs poisoned with NaN first. Sizes cross the CPU's
 * tiles (64 outputs, 256 rows of x) and their tails, with group sizes from 4
 * to the whole width; f32, f16 and bf16 activations, with and without a bias;
 * bad calls are errors naming the tensor. On cuda the weights go through the
 * matmul's prepare first (as the model loads them), each case runs twice
 * (the second call on what the first left: workspace, weights), real layer
 * widths are added, and so are the fused matmul.qkv.* and matmul.swiglu.*.
 *
 * On cuda the suite skips (77) while no plugin registers the ops there. */
#include "ops_test.h"

#include "orin/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const orin_dtype float_dtypes[] = {ORIN_F32, ORIN_F16, ORIN_BF16};

/* AWQ: nibble i (bits 4i..4i+3) of word j holds output column 8j + AWQ_ORDER[i]
 * (AutoAWQ's WQLinear_GEMM.from_linear, order_map). */
static const int AWQ_ORDER[8] = {0, 2, 4, 6, 1, 3, 5, 7};

static bool have_op(const char *op)
{
    return orin_registry_find(ops_test_registry(), op, "common", ops_target(), ORIN_F32) != NULL;
}

/* An f16 scale in [lo, hi), as its bits and its exact value. */
static uint16_t random_scale(ops_rng *r, double lo, double hi, double *value)
{
    uint16_t bits = orin_f32_to_f16((float)ops_rng_uniform(r, lo, hi));
    *value = orin_f16_to_f32(bits);
    return bits;
}

/* The case's tensors on the host, its dequantized weight w[out][in] in double. */
typedef struct quant_case {
    orin_dtype dt;
    int64_t n, in, out;
    int32_t group;
    bool bias;
    ops_buf x, b, y;
    void *qweight, *zeros;       /* host memory of the packed formats */
    uint16_t *scales;
    double *w;
} quant_case;

static void case_free(quant_case *c)
{
    ops_buf_free(&c->x);
    ops_buf_free(&c->b);
    ops_buf_free(&c->y);
    free(c->qweight);
    free(c->zeros);
    free(c->scales);
    free(c->w);
    ops_release();
}

static quant_case case_make(orin_dtype dt, int64_t n, int64_t in, int64_t out, int32_t group,
                            bool bias, uint64_t seed)
{
    quant_case c = {.dt = dt, .n = n, .in = in, .out = out, .group = group, .bias = bias};
    ops_rng rng = {.state = seed + (uint64_t)(n * 131 + in * 17 + out * 3 + group)};
    c.x = ops_buf_random(&rng, dt, (size_t)(n * in), -1, 1);
    c.b = ops_buf_random(&rng, dt, (size_t)out, -1, 1);
    c.y = ops_buf_nan(dt, (size_t)(n * out));
    c.w = malloc((size_t)(out * in) * sizeof *c.w);
    return c;
}

/* q[k][o] in 0..15 (both ends included), z[g][o] in 0..15, scales [groups][out],
 * packed into qweight [in][out/8] and zeros [groups][out/8]. */
static void fill_awq(quant_case *c, ops_rng *rng)
{
    const int64_t in = c->in, out = c->out, groups = in / c->group, words = out / 8;
    uint32_t *qw = calloc((size_t)(in * words), sizeof *qw);
    uint32_t *zw = calloc((size_t)(groups * words), sizeof *zw);
    uint8_t *z = malloc((size_t)(groups * out));
    double *s = malloc((size_t)(groups * out) * sizeof *s);
    c->scales = malloc((size_t)(groups * out) * sizeof *c->scales);
    for (int64_t i = 0; i < groups * out; i++) {
        z[i] = (uint8_t)(ops_rng_next(rng) % 16);
        c->scales[i] = random_scale(rng, 0.002, 0.05, &s[i]);
    }
    for (int64_t g = 0; g < groups; g++)
        for (int64_t j = 0; j < words; j++)
            for (int i = 0; i < 8; i++)
                zw[g * words + j] |= (uint32_t)z[g * out + 8 * j + AWQ_ORDER[i]] << (4 * i);
    for (int64_t k = 0; k < in; k++) {
        const int64_t g = k / c->group;
        for (int64_t j = 0; j < words; j++)
            for (int i = 0; i < 8; i++) {
                const int64_t o = 8 * j + AWQ_ORDER[i];
                uint32_t q = (uint32_t)(ops_rng_next(rng) % 16);
                if (k == 0 && o < 2)
                    q = o ? 15 : 0; /* both ends of the range */
                qw[k * words + j] |= q << (4 * i);
                c->w[o * in + k] = ((double)q - z[g * out + o]) * s[g * out + o];
            }
    }
    c->qweight = qw;
    c->zeros = zw;
    free(z);
    free(s);
}

/* q[o][k] in -127..127 (both ends included), scales [out][groups]. */
static void fill_int8(quant_case *c, ops_rng *rng)
{
    const int64_t in = c->in, out = c->out, groups = in / c->group;
    int8_t *q = malloc((size_t)(out * in));
    c->scales = malloc((size_t)(out * groups) * sizeof *c->scales);
    for (int64_t o = 0; o < out; o++)
        for (int64_t g = 0; g < groups; g++) {
            double s;
            c->scales[o * groups + g] = random_scale(rng, 1e-4, 0.01, &s);
            for (int64_t k = g * c->group; k < (g + 1) * c->group; k++) {
                int v = (int)(ops_rng_next(rng) % 255) - 127;
                if (o == 0 && k < 2)
                    v = k ? 127 : -127;
                q[o * in + k] = (int8_t)v;
                c->w[o * in + k] = v * s;
            }
        }
    c->qweight = q;
}

/* The call struct over the case's tensors on the target. */
static orin_matmul_quant_args case_args(quant_case *c, orin_weight_format fmt)
{
    const int64_t in = c->in, out = c->out, groups = in / c->group;
    orin_matmul_quant_args a = {
        .x = ops_tensor(c->x.data, c->dt, 2, (int64_t[]){c->n, in}),
        .y = ops_tensor(c->y.data, c->dt, 2, (int64_t[]){c->n, out}),
        .w.group_size = c->group,
    };
    if (fmt == ORIN_WEIGHT_AWQ4) {
        a.w.qweight = ops_tensor(c->qweight, ORIN_I32, 2, (int64_t[]){in, out / 8});
        a.w.zeros = ops_tensor(c->zeros, ORIN_I32, 2, (int64_t[]){groups, out / 8});
        a.w.scales = ops_tensor(c->scales, ORIN_F16, 2, (int64_t[]){groups, out});
    } else {
        a.w.qweight = ops_tensor(c->qweight, ORIN_I8, 2, (int64_t[]){out, in});
        a.w.scales = ops_tensor(c->scales, ORIN_F16, 2, (int64_t[]){out, groups});
    }
    if (c->bias)
        a.bias = ops_tensor(c->b.data, c->dt, 1, &c->out);
    return a;
}

/* ref[r][o] = sum_k x[r][k] w[o][k] (+ bias[o]) in double, and mag[r][o]
 * the sum of those terms' magnitudes ([n][out] each, the caller's). */
static void case_reference(const quant_case *c, const ops_buf *x, double *ref, double *mag)
{
    const int64_t in = c->in, out = c->out;
    for (int64_t r = 0; r < c->n; r++)
        for (int64_t o = 0; o < out; o++) {
            double sum = c->bias ? c->b.value[o] : 0, m = c->bias ? fabs(c->b.value[o]) : 0;
            for (int64_t k = 0; k < in; k++) {
                double p = x->value[r * in + k] * c->w[o * in + k];
                sum += p;
                m += fabs(p);
            }
            ref[r * out + o] = sum;
            mag[r * out + o] = m;
        }
}

/* y against case_reference, to the dtype's tolerance of the sum of the
 * magnitudes; x: the case's own, or the one a fused call shares. */
static void case_check_x(quant_case *c, const ops_buf *x, const char *what)
{
    const size_t count = (size_t)(c->n * c->out);
    double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
    case_reference(c, x, ref, scale);
    ops_buf_fetch(&c->y);
    ops_check_close(what, &c->y, ref, scale, ops_tol(c->dt), ops_atol(c->dt));
    free(ref);
    free(scale);
}

static void case_check(quant_case *c, const char *what)
{
    case_check_x(c, &c->x, what);
}

/* The rounding a product may add beyond its output's own, where x is all
 * positive (test_precision): y within `rel` of |ref| (twice the output
 * dtype's rounding) plus `of_sum` of the sum of the magnitudes. Sums of x
 * then do not cancel, so any offset the kernel takes off a sum after the
 * fact (the GPU's folded zero points) is as large against y as it gets. */
static void case_check_precise(quant_case *c, const char *what)
{
    const double rel = c->dt == ORIN_F32 ? 1e-6 : c->dt == ORIN_F16 ? 0x1p-10 : 0x1p-7;
    const double of_sum = 1e-5;
    const size_t count = (size_t)(c->n * c->out);
    double *ref = malloc(count * sizeof *ref), *bound = malloc(count * sizeof *bound);
    case_reference(c, &c->x, ref, bound);
    for (size_t i = 0; i < count; i++) /* bound held the magnitudes */
        bound[i] = rel * fabs(ref[i]) + of_sum * bound[i];
    char tight[240];
    snprintf(tight, sizeof tight, "%s, x in [0.25, 1.25]: beyond the output's rounding", what);
    const double worst = ops_check_close(tight, &c->y, ref, bound, 1.0, 0.0);
    printf("precision: %s: worst %.3g of the bound\n", what, worst);
    free(ref);
    free(bound);
}

/* One case; precise: x all positive, and the tighter check too. */
static void quant_case_run(orin_weight_format fmt, orin_dtype dt, int64_t n, int64_t in,
                           int64_t out, int32_t group, bool bias, bool precise)
{
    const char *op = fmt == ORIN_WEIGHT_AWQ4 ? ORIN_OP_MATMUL_AWQ4 : ORIN_OP_MATMUL_INT8;
    quant_case c = case_make(dt, n, in, out, group, bias, fmt == ORIN_WEIGHT_AWQ4 ? 700 : 800);
    ops_rng rng = {.state = 900 + (uint64_t)(n + in + out + group)};
    if (precise) {
        ops_buf_free(&c.x);
        c.x = ops_buf_random(&rng, dt, (size_t)(n * in), 0.25, 1.25);
    }
    if (fmt == ORIN_WEIGHT_AWQ4)
        fill_awq(&c, &rng);
    else
        fill_int8(&c, &rng);
    orin_matmul_quant_args a = case_args(&c, fmt);
    const orin_op_impl *impl = ops_test_impl(op, "common", dt);
    orin_exec ex = ops_test_exec(0);
    /* the workspace the implementation declares, poisoned, as the model offers it */
    if (impl && impl->workspace_size) {
        ex.workspace_size = impl->workspace_size(&a);
        ex.workspace = ops_workspace(ex.workspace_size);
    }
    char what[160];
    snprintf(what, sizeof what, "%s %s %lldx%lld . [%lldx%lld, group %d]^T%s", op,
             orin_dtype_name(dt), (long long)n, (long long)in, (long long)out, (long long)in,
             group, bias ? " + bias" : "");
    orin_error_clear();
    /* the weight as the model keeps it: through the implementation's prepare */
    if (impl && impl->prepare && impl->prepare(&ex, &a) != 0) {
        CHECK(false, "%s: prepare: %s", what, orin_error());
        impl = NULL;
    }
    /* ops_common's prepare on the GPU: f16/bf16 weights of whole 16-output,
     * 64-input tiles and groups of whole tiles, whose x and group data fit a
     * GEMV block's 96 KiB of shared memory, leave the stored layout, so that
     * the cases above run its kernels too */
    const bool tiles = ops_on_gpu() && dt != ORIN_F32 && out % 16 == 0 && in % 64 == 0 &&
                       group % 16 == 0 && in * 2 + in / group * 128 <= 96 * 1024;
    CHECK(!impl || !tiles || a.w.layout != 0, "%s: prepare left the stored layout", what);
    /* on the GPU twice, the second run bit for bit the first (no sum may
     * depend on the order in which blocks run) */
    const size_t y_bytes = c.y.n * orin_dtype_size(c.y.dt);
    void *first = ops_on_gpu() ? malloc(y_bytes) : NULL;
    CHECK(!ops_on_gpu() || first, "%s: no memory for the first run's output", what);
    for (int pass = 0; impl && pass < (first ? 2 : 1); pass++) {
        int rc = impl->run(&ex, &a);
        CHECK(rc == 0, "%s: %s", what, orin_error());
        if (rc != 0)
            break;
        case_check(&c, what);
        if (precise)
            case_check_precise(&c, what);
        if (first && pass == 0)
            memcpy(first, c.y.data, y_bytes);
        else if (first)
            CHECK(memcmp(first, c.y.data, y_bytes) == 0, "%s: a second run differs", what);
        for (size_t i = 0; i < c.y.n; i++) /* poisoned again for the next pass */
            ops_store(c.dt, c.y.data, i, NAN);
        a.y = ops_tensor(c.y.data, dt, 2, (int64_t[]){n, out});
    }
    free(first);
    case_free(&c);
}

/* (n, in, out, group): one row (decode) and several (prefill), one word of
 * outputs to several tiles with a tail, x rows past one chunk of 256 (and a
 * last chunk of one row), groups from 4 to the whole width. */
typedef struct shape {
    int64_t n, in, out;
    int32_t group;
} shape;

static const shape awq_shapes[] = {
    {1, 64, 8, 64},    {1, 96, 200, 32},  {1, 256, 64, 128}, {1, 48, 24, 48},
    {3, 40, 72, 8},    {7, 128, 136, 16}, {300, 64, 80, 32}, {257, 32, 16, 4},
    {1, 192, 32, 64},
};
static const shape int8_shapes[] = {
    {1, 1, 1, 1},     {1, 67, 33, 67},   {1, 256, 65, 128}, {1, 300, 129, 100},
    {5, 96, 70, 32},  {300, 64, 65, 64}, {257, 16, 8, 4},  {1, 256, 48, 64},
    {9, 64, 32, 32},
};
/* The GPU's sizes: real layer widths (4096 and 12288 x 4096: grids of 256
 * blocks, the deep batches on a GPU of 128-256 SMs), and shapes that stay in
 * the stored layout (1040 inputs: not whole units; 32,768 inputs in 2,048
 * groups: more than a block's shared memory holds). */
static const shape gpu_shapes[] = {
    {1, 4096, 4096, 128}, {1, 4096, 12288, 128}, {1, 12288, 4096, 128},
    {33, 1024, 2048, 128}, {300, 2048, 520, 64},
    {1, 1040, 128, 16},   {1, 2048, 192, 32},
    /* tiles (GPU prepare): a group across the warps' shares of k (576 = 9 units
     * of 64 over 8 warps), warps with no share (192), many groups a block
     * (4096 / 16), rows past 16 tiles, and prefill over tiles */
    {1, 576, 48, 192},    {1, 192, 32, 64},     {1, 4096, 64, 16},  {1, 1024, 1040, 32},
    {17, 576, 1040, 64},  {2, 8192, 32, 2048},  {1, 32768, 16, 16},
    /* 450 n-tiles: more than 3 8-warp blocks an SM of a 132-SM GPU hold, in
     * pairs where pairs fit one wave */
    {1, 256, 7200, 128},
    /* small models' o and down, few n-tiles against a 132-SM GPU's SMs:
     * Qwen3-4B's (160 n-tiles), Qwen3-0.6B's o (64: 16-warp blocks),
     * Qwen2.5-1.5B's down (96) */
    {1, 4096, 2560, 128}, {1, 9728, 2560, 128}, {1, 2048, 1024, 128}, {1, 8960, 1536, 128},
};

static void test_format(orin_weight_format fmt, orin_dtype dt)
{
    const shape *shapes = fmt == ORIN_WEIGHT_AWQ4 ? awq_shapes : int8_shapes;
    size_t count = fmt == ORIN_WEIGHT_AWQ4 ? sizeof awq_shapes / sizeof awq_shapes[0]
                                           : sizeof int8_shapes / sizeof int8_shapes[0];
    for (size_t i = 0; i < count; i++)
        for (int bias = 0; bias < 2; bias++)
            quant_case_run(fmt, dt, shapes[i].n, shapes[i].in, shapes[i].out, shapes[i].group,
                           bias, false);
    for (size_t i = 0; ops_on_gpu() && !ops_test_quick() && i < sizeof gpu_shapes / sizeof gpu_shapes[0];
         i++)
        quant_case_run(fmt, dt, gpu_shapes[i].n, gpu_shapes[i].in, gpu_shapes[i].out,
                       gpu_shapes[i].group, i % 2, false);
}

/* One row of x all positive over a real width (a GEMV on tiles on the GPU),
 * groups of 128 and of 32, checked to the tighter bound of
 * case_check_precise. */
static void test_precision(orin_weight_format fmt, orin_dtype dt)
{
    quant_case_run(fmt, dt, 1, 4096, 256, 128, false, true);
    quant_case_run(fmt, dt, 1, 2048, 64, 32, true, true);
}

/* ---- matmul.qkv.* and matmul.swiglu.* (fused, on the GPU) ---- */

/* A case of format fmt filled with fresh values, its weight prepared by the
 * format's matmul as the model prepares it (the fused ops read that layout). */
static quant_case fused_part(orin_weight_format fmt, orin_dtype dt, int64_t n, int64_t in,
                             int64_t out, int32_t group, bool bias, uint64_t seed,
                             orin_matmul_quant_args *a)
{
    quant_case c = case_make(dt, n, in, out, group, bias, seed);
    ops_rng rng = {.state = seed * 7 + 1};
    if (fmt == ORIN_WEIGHT_AWQ4)
        fill_awq(&c, &rng);
    else
        fill_int8(&c, &rng);
    *a = case_args(&c, fmt);
    const orin_op_impl *mm =
        ops_test_impl(fmt == ORIN_WEIGHT_AWQ4 ? ORIN_OP_MATMUL_AWQ4 : ORIN_OP_MATMUL_INT8,
                      "common", dt);
    orin_exec ex = ops_test_exec(0);
    orin_error_clear();
    CHECK(mm && (!mm->prepare || mm->prepare(&ex, a) == 0), "prepare: %s", orin_error());
    return c;
}

/* A fused op of ops_common: on cuda it must be there, on the host it is not. */
static const orin_op_impl *fused_impl(const char *op, orin_dtype dt)
{
    return ops_on_gpu() ? ops_test_impl(op, "common", dt) : NULL;
}

static orin_exec fused_exec(const orin_op_impl *impl, const void *args)
{
    orin_exec ex = ops_test_exec(0);
    ex.workspace_size = impl->workspace_size ? impl->workspace_size(args) : 0;
    ex.workspace = ex.workspace_size ? ops_workspace(ex.workspace_size) : NULL;
    return ex;
}

/* q, k and v of c[0]'s x as one fused call over three fresh prepared parts. */
static orin_matmul_qkv_quant_args qkv_parts(orin_weight_format fmt, orin_dtype dt, int64_t n,
                                            int64_t in, const int64_t outs[3], int32_t group,
                                            bool bias, uint64_t seed, quant_case c[3])
{
    orin_matmul_quant_args part[3];
    for (int i = 0; i < 3; i++)
        c[i] = fused_part(fmt, dt, n, in, outs[i], group, bias, seed + (uint64_t)i, &part[i]);
    orin_matmul_qkv_quant_args a = {.x = part[0].x};
    for (int i = 0; i < 3; i++) {
        a.w[i] = part[i].w;
        a.bias[i] = part[i].bias;
        a.y[i] = part[i].y;
    }
    return a;
}

/* q, k and v of one x: each output against its double reference. */
static void qkv_quant_case(orin_weight_format fmt, orin_dtype dt, int64_t n, int64_t in,
                           const int64_t outs[3], int32_t group, bool bias)
{
    const char *op = fmt == ORIN_WEIGHT_AWQ4 ? ORIN_OP_MATMUL_QKV_AWQ4 : ORIN_OP_MATMUL_QKV_INT8;
    const orin_op_impl *impl = fused_impl(op, dt);
    if (!impl)
        return;
    quant_case c[3];
    orin_matmul_qkv_quant_args a = qkv_parts(fmt, dt, n, in, outs, group, bias, 40, c);
    char what[160];
    snprintf(what, sizeof what, "%s %s x [%lld, %lld], outs %lld/%lld/%lld, group %d%s", op,
             orin_dtype_name(dt), (long long)n, (long long)in, (long long)outs[0],
             (long long)outs[1], (long long)outs[2], group, bias ? " + bias" : "");
    orin_exec ex = fused_exec(impl, &a);
    orin_error_clear();
    const int rc = impl->run(&ex, &a);
    CHECK(rc == 0, "%s: %s", what, orin_error());
    for (int i = 0; rc == 0 && i < 3; i++) {
        char part_what[200];
        snprintf(part_what, sizeof part_what, "%s: y[%d]", what, i);
        case_check_x(&c[i], &c[0].x, part_what);
    }
    for (int i = 0; i < 3; i++)
        case_free(&c[i]);
}

/* silu(x . gate^T) * (x . up^T) against the sequence matmul, matmul, swiglu of
 * the same provider (each product checked against double above). */
static void swiglu_quant_case(orin_weight_format fmt, orin_dtype dt, int64_t n, int64_t in,
                              int64_t f, int32_t group)
{
    const char *op =
        fmt == ORIN_WEIGHT_AWQ4 ? ORIN_OP_MATMUL_SWIGLU_AWQ4 : ORIN_OP_MATMUL_SWIGLU_INT8;
    const char *mm_op = fmt == ORIN_WEIGHT_AWQ4 ? ORIN_OP_MATMUL_AWQ4 : ORIN_OP_MATMUL_INT8;
    const orin_op_impl *impl = fused_impl(op, dt);
    if (!impl)
        return;
    const orin_op_impl *mm = ops_test_impl(mm_op, "common", dt);
    const orin_op_impl *sw = ops_test_impl(ORIN_OP_SWIGLU, "common", dt);
    if (!impl || !mm || !sw)
        return;
    orin_matmul_quant_args g, u;
    quant_case cg = fused_part(fmt, dt, n, in, f, group, false, 50, &g);
    quant_case cu = fused_part(fmt, dt, n, in, f, group, false, 51, &u);
    u.x = g.x; /* one x */
    ops_buf out = ops_buf_nan(dt, (size_t)(n * f));
    orin_matmul_swiglu_quant_args a = {
        .x = g.x, .w_gate = g.w, .w_up = u.w,
        .out = ops_tensor(out.data, dt, 2, (int64_t[]){n, f}),
    };
    char what[160];
    snprintf(what, sizeof what, "%s %s x [%lld, %lld], f %lld, group %d", op,
             orin_dtype_name(dt), (long long)n, (long long)in, (long long)f, group);
    orin_exec ex = fused_exec(impl, &a), mex = fused_exec(mm, &g);
    orin_error_clear();
    const orin_swiglu_args s = {.gate = g.y, .up = u.y, .out = g.y};
    const int rc = impl->run(&ex, &a);
    CHECK(rc == 0, "%s: %s", what, orin_error());
    const int seq = mm->run(&mex, &g) || mm->run(&mex, &u) || sw->run(&ex, &s);
    CHECK(seq == 0, "%s: the sequence: %s", what, orin_error());
    if (rc == 0 && seq == 0) {
        ops_buf_fetch(&out);
        ops_buf_fetch(&cg.y);
        double *ref = malloc(out.n * sizeof *ref), *scale = malloc(out.n * sizeof *scale);
        double mean_abs = 0;
        for (size_t i = 0; i < out.n; i++)
            mean_abs += fabs(cg.y.value[i]) / (double)out.n;
        for (size_t i = 0; i < out.n; i++) {
            ref[i] = cg.y.value[i];
            scale[i] = fabs(ref[i]) + mean_abs;
        }
        ops_check_close(what, &out, ref, scale, ops_tol(dt), ops_atol(dt));
        free(ref);
        free(scale);
    }
    ops_buf_free(&out);
    case_free(&cg);
    case_free(&cu);
}

/* ---- the norm in front (orin_norm_in) ---- */

/* The fused call with the norm in front against the same op over add_rmsnorm's
 * rows: q, k, v (or the SwiGLU) bit for bit, the sum in x_out too. */
static void qkv_quant_norm_case(orin_weight_format fmt, orin_dtype dt, int64_t n, int64_t in,
                                const int64_t outs[3], int32_t group, bool residual)
{
    const char *op = fmt == ORIN_WEIGHT_AWQ4 ? ORIN_OP_MATMUL_QKV_AWQ4 : ORIN_OP_MATMUL_QKV_INT8;
    const orin_op_impl *impl = fused_impl(op, dt);
    if (!impl)
        return;
    quant_case c[3];
    orin_matmul_qkv_quant_args a = qkv_parts(fmt, dt, n, in, outs, group, true, 80, c);
    ops_norm_fixture f;
    ops_buf y_ref[3];
    const int made = ops_norm_fixture_make(&f, &c[0].x, n, in, residual, 90 + (uint64_t)in);
    a.norm = f.norm;
    for (int i = 0; i < 3; i++)
        y_ref[i] = ops_buf_nan(dt, (size_t)(n * outs[i]));
    orin_matmul_qkv_quant_args plain = a;
    plain.x = f.h_t;
    plain.norm = (orin_norm_in){0};
    for (int i = 0; i < 3; i++)
        plain.y[i] = ops_tensor(y_ref[i].data, dt, 2, (int64_t[]){n, outs[i]});
    char what[200];
    snprintf(what, sizeof what, "%s %s + norm%s, x [%lld, %lld], outs %lld/%lld/%lld, group %d",
             op, orin_dtype_name(dt), residual ? " + residual" : "", (long long)n,
             (long long)in, (long long)outs[0], (long long)outs[1], (long long)outs[2], group);
    orin_exec ex = fused_exec(impl, &a), pex = fused_exec(impl, &plain);
    orin_error_clear();
    const int rc = made == 0 ? impl->run(&ex, &a) || impl->run(&pex, &plain) : -1;
    CHECK(rc == 0, "%s: %s", what, orin_error());
    if (rc == 0) {
        ops_norm_fixture_check(&f, &c[0].x, what);
        for (int i = 0; i < 3; i++) {
            char part_what[240];
            snprintf(part_what, sizeof part_what, "%s: y[%d]", what, i);
            ops_check_bitwise(part_what, &c[i].y, &y_ref[i]);
        }
    }
    for (int i = 0; i < 3; i++)
        ops_buf_free(&y_ref[i]);
    ops_norm_fixture_free(&f);
    for (int i = 0; i < 3; i++)
        case_free(&c[i]);
}

static void swiglu_quant_norm_case(orin_weight_format fmt, orin_dtype dt, int64_t n, int64_t in,
                                   int64_t f_out, int32_t group, bool residual)
{
    const char *op =
        fmt == ORIN_WEIGHT_AWQ4 ? ORIN_OP_MATMUL_SWIGLU_AWQ4 : ORIN_OP_MATMUL_SWIGLU_INT8;
    const orin_op_impl *impl = fused_impl(op, dt);
    if (!impl)
        return;
    orin_matmul_quant_args g, u;
    quant_case cg = fused_part(fmt, dt, n, in, f_out, group, false, 85, &g);
    quant_case cu = fused_part(fmt, dt, n, in, f_out, group, false, 86, &u);
    ops_norm_fixture f;
    const int made = ops_norm_fixture_make(&f, &cg.x, n, in, residual, 95 + (uint64_t)in);
    ops_buf out = ops_buf_nan(dt, (size_t)(n * f_out)), ref = ops_buf_nan(dt, (size_t)(n * f_out));
    const int64_t od[2] = {n, f_out};
    orin_matmul_swiglu_quant_args a = {.x = g.x, .norm = f.norm, .w_gate = g.w, .w_up = u.w,
                                       .out = ops_tensor(out.data, dt, 2, od)};
    orin_matmul_swiglu_quant_args plain = {.x = f.h_t, .w_gate = g.w, .w_up = u.w,
                                           .out = ops_tensor(ref.data, dt, 2, od)};
    char what[200];
    snprintf(what, sizeof what, "%s %s + norm%s, x [%lld, %lld], f %lld, group %d", op,
             orin_dtype_name(dt), residual ? " + residual" : "", (long long)n, (long long)in,
             (long long)f_out, group);
    orin_exec ex = fused_exec(impl, &a), pex = fused_exec(impl, &plain);
    orin_error_clear();
    const int rc = made == 0 ? impl->run(&ex, &a) || impl->run(&pex, &plain) : -1;
    CHECK(rc == 0, "%s: %s", what, orin_error());
    if (rc == 0) {
        ops_norm_fixture_check(&f, &cg.x, what);
        ops_check_bitwise(what, &out, &ref);
    }
    ops_buf_free(&out);
    ops_buf_free(&ref);
    ops_norm_fixture_free(&f);
    case_free(&cg);
    case_free(&cu);
}

/* Decode over tiles (Qwen3-8B's and Qwen2.5-7B's widths, odd tile counts,
 * groups of 16 up to the width), prefill, and shapes the tiles do not fit
 * (1040 inputs: the sequence of products then). */
static void test_fused(orin_weight_format fmt, orin_dtype dt)
{
    static const struct {
        int64_t n, in, outs[3];
        int32_t group;
    } qkv[] = {
        {1, 4096, {4096, 1024, 1024}, 128}, {1, 3584, {3584, 512, 512}, 128},
        {1, 576, {48, 16, 16}, 64},          {1, 256, {32, 32, 64}, 16},
        {1, 1040, {64, 32, 32}, 16},         {5, 256, {128, 64, 64}, 32},
        /* more n-tiles than an H100 has SMs twice over (a grid in more than
         * one wave), warps with no share of k */
        {1, 256, {4096, 512, 256}, 128},
        /* Qwen3-14B's q/k/v (448 n-tiles, every segment even: AWQ's in
         * pairs on a 132-SM GPU), and an odd segment (one n-tile a block) */
        {1, 256, {5120, 1024, 1024}, 128}, {1, 256, {5104, 1024, 1040}, 128},
    };
    static const struct {
        int64_t n, in, f;
        int32_t group;
    } mlp[] = {
        {1, 4096, 12288, 128}, {1, 576, 1040, 64}, {1, 256, 48, 256},
        {1, 1040, 64, 16},     {3, 256, 160, 32},  {1, 256, 4800, 32},
        /* more n-tiles than 3 8-warp blocks an SM of a 132-SM GPU hold:
         * gate/up then takes them in pairs where their count is even (400)
         * and pairs fit one wave; where it is odd (397), AWQ in one wave of
         * blocks that loop over them (QMMA_SWIGLU_LOOP) and int8 one a
         * block. At 1,024 inputs every warp's units are whole batches in
         * both formats (the kernels without end tests); at 1,536 AWQ's warps
         * end in a half batch (the loop's end tests); at 384 the groups are
         * odd, which the loop does not take */
        {1, 512, 6400, 128},   {1, 256, 6352, 128}, {1, 1024, 6352, 128},
        {1, 1536, 6352, 128},  {1, 384, 6352, 128},
    };
    for (size_t i = 0; i < sizeof qkv / sizeof qkv[0]; i++) {
        if (qkv[i].in >= 2048 && ops_test_quick())
            continue;
        qkv_quant_case(fmt, dt, qkv[i].n, qkv[i].in, qkv[i].outs, qkv[i].group, i % 2);
    }
    for (size_t i = 0; i < sizeof mlp / sizeof mlp[0]; i++) {
        if (mlp[i].in >= 2048 && ops_test_quick())
            continue;
        swiglu_quant_case(fmt, dt, mlp[i].n, mlp[i].in, mlp[i].f, mlp[i].group);
    }
    /* the norm in front: folded into the GEMV on tiles, and run apart (rows > 1;
     * a width the tiles do not take) */
    qkv_quant_norm_case(fmt, dt, 1, 4096, (int64_t[]){4096, 1024, 1024}, 128, true);
    qkv_quant_norm_case(fmt, dt, 1, 576, (int64_t[]){48, 16, 16}, 64, false);
    qkv_quant_norm_case(fmt, dt, 5, 256, (int64_t[]){128, 64, 64}, 32, true);
    qkv_quant_norm_case(fmt, dt, 1, 1040, (int64_t[]){64, 32, 32}, 16, true);
    swiglu_quant_norm_case(fmt, dt, 1, 3584, 512, 128, true);
    swiglu_quant_norm_case(fmt, dt, 1, 256, 48, 256, false);
    swiglu_quant_norm_case(fmt, dt, 3, 256, 160, 32, true);
    qkv_quant_norm_case(fmt, dt, 1, 256, (int64_t[]){4096, 512, 256}, 128, true);
    swiglu_quant_norm_case(fmt, dt, 1, 256, 4800, 32, true);
    qkv_quant_norm_case(fmt, dt, 1, 256, (int64_t[]){5120, 1024, 1024}, 128, true);
    /* 750 n-tiles: in pairs on a 132-SM GPU; 850: past one wave of pairs */
    swiglu_quant_norm_case(fmt, dt, 1, 256, 12000, 128, true);
    swiglu_quant_norm_case(fmt, dt, 1, 256, 13600, 128, true);
    swiglu_quant_norm_case(fmt, dt, 1, 1024, 13600, 128, true);
    swiglu_quant_norm_case(fmt, dt, 1, 1536, 13600, 128, true);
}

/* ---- bad calls ---- */

static void test_errors(orin_dtype dt)
{
    const orin_op_impl *awq = ops_test_impl(ORIN_OP_MATMUL_AWQ4, "common", dt);
    const orin_op_impl *i8 = ops_test_impl(ORIN_OP_MATMUL_INT8, "common", dt);
    if (!awq || !i8)
        return;
    orin_exec ex = ops_test_exec(0);
    quant_case c = case_make(dt, 2, 64, 16, 32, true, 1);
    ops_rng rng = {.state = 5};
    fill_awq(&c, &rng);
    orin_matmul_quant_args a = case_args(&c, ORIN_WEIGHT_AWQ4), bad = a;
    bad.w.group_size = 24;
    ops_expect_error("group not dividing", awq, &ex, &bad,
                     "matmul.awq4 (common): group_size 24 does not divide the input width 64");
    bad = a;
    bad.w.group_size = 0;
    ops_expect_error("group 0", awq, &ex, &bad, "group_size 0");
    bad = a;
    bad.w.scales = ops_tensor(c.scales, ORIN_F16, 2, (int64_t[]){4, 8});
    ops_expect_error("scales shape", awq, &ex, &bad, "scales: dimension 0 is 4, expected 2");
    bad = a;
    bad.w.zeros = ops_tensor(c.zeros, ORIN_I32, 2, (int64_t[]){2, 1});
    ops_expect_error("zeros shape", awq, &ex, &bad, "zeros: dimension 1 is 1, expected 2");
    bad = a;
    bad.w.qweight = ops_tensor(c.qweight, ORIN_I8, 2, (int64_t[]){64, 2});
    ops_expect_error("qweight dtype", awq, &ex, &bad, "qweight: dtype i8, expected i32");
    bad = a;
    bad.w.qweight = ops_tensor(c.qweight, ORIN_I32, 2, (int64_t[]){32, 2});
    ops_expect_error("qweight rows", awq, &ex, &bad, "qweight: dimension 0 is 32, expected 64");
    bad = a;
    bad.y = ops_tensor(c.y.data, dt, 2, (int64_t[]){2, 12});
    ops_expect_error("outputs not 8k", awq, &ex, &bad, "12 outputs");
    bad = a;
    bad.bias = ops_tensor(c.b.data, dt, 1, (int64_t[]){8});
    ops_expect_error("bias length", awq, &ex, &bad, "bias: dimension 0 is 8, expected 16");
    bad = a;
    bad.y = ops_tensor(c.x.data, dt, 2, (int64_t[]){2, 16});
    ops_expect_error("y over x", awq, &ex, &bad, "y overlaps x");
    bad = a;
    bad.y = ops_tensor(c.y.data, dt, 2, (int64_t[]){1, 16});
    ops_expect_error("y rows", awq, &ex, &bad, "y has 1 rows, x has 2");
    ops_expect_error("awq args to int8", i8, &ex, &a, "zeros: int8 weights are symmetric");
    bad = a;
    bad.w.layout = 7; /* no prepare makes it */
    ops_expect_error("unknown layout", awq, &ex, &bad, "w.layout 7");
    bad = a;
    bad.w.zeros = (orin_tensor){0};
    bad.w.scales = ops_tensor(c.scales, ORIN_F16, 2, (int64_t[]){16, 2});
    ops_expect_error("int8 qweight dtype", i8, &ex, &bad, "qweight: dtype i32, expected i8");
    if (ops_on_gpu()) {
        bad = a;
        bad.w.scales = orin_tensor_make(c.scales, ORIN_F16, ORIN_DEVICE_CPU, 2,
                                        (int64_t[]){2, 16});
        ops_expect_error("scales on the host", awq, &ex, &bad, "scales: on cpu, expected cuda");
    }
    /* the fused ops name the part at fault */
    const orin_op_impl *qkv = fused_impl(ORIN_OP_MATMUL_QKV_AWQ4, dt);
    const orin_op_impl *mlp = fused_impl(ORIN_OP_MATMUL_SWIGLU_AWQ4, dt);
    if (qkv && mlp) {
        bad = a;
        bad.w.group_size = 24;
        orin_matmul_qkv_quant_args q3 = {.x = a.x, .w = {a.w, bad.w, a.w}, .y = {a.y, a.y, a.y}};
        ops_expect_error("qkv part", qkv, &ex, &q3, "w[1]: group_size 24");
        orin_matmul_swiglu_quant_args sw = {.x = a.x, .w_gate = a.w, .w_up = bad.w, .out = a.y};
        ops_expect_error("swiglu part", mlp, &ex, &sw, "w_up: group_size 24");
    }
    case_free(&c);
}

static void test_registrations(void)
{
    for (size_t i = 0; i < sizeof float_dtypes / sizeof float_dtypes[0]; i++) {
        const char *ops[2] = {ORIN_OP_MATMUL_AWQ4, ORIN_OP_MATMUL_INT8};
        for (int j = 0; j < 2; j++) {
            const orin_op_impl *impl = ops_test_impl(ops[j], "common", float_dtypes[i]);
            CHECK(impl && (impl->flags & ORIN_OP_REFERENCE) && (impl->flags & ORIN_OP_GRAPH_SAFE),
                  "%s %s: not flagged reference and graph-safe", ops[j],
                  orin_dtype_name(float_dtypes[i]));
        }
    }
}

int main(int argc, char **argv)
{
    ops_test_init(argc, argv);
    ops_test_registry();
    if (ops_on_gpu() && !have_op(ORIN_OP_MATMUL_AWQ4) && !have_op(ORIN_OP_MATMUL_INT8)) {
        printf("skipped: no plugin runs matmul.awq4 or matmul.int8 on cuda yet\n");
        ops_test_registry_free();
        return TEST_SKIP;
    }
    test_registrations();
    for (size_t i = 0; i < sizeof float_dtypes / sizeof float_dtypes[0]; i++) {
        test_format(ORIN_WEIGHT_AWQ4, float_dtypes[i]);
        test_format(ORIN_WEIGHT_INT8, float_dtypes[i]);
        test_precision(ORIN_WEIGHT_AWQ4, float_dtypes[i]);
        test_precision(ORIN_WEIGHT_INT8, float_dtypes[i]);
        test_fused(ORIN_WEIGHT_AWQ4, float_dtypes[i]);
        test_fused(ORIN_WEIGHT_INT8, float_dtypes[i]);
        test_errors(float_dtypes[i]);
    }
    ops_test_registry_free();
    return test_finish();
}
