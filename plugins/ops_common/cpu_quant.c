/* ops_common on the CPU: matmul.awq4 and matmul.int8, the reference
 * implementations of the matmuls over quantized weights (orin_qweight in
 * orin/ops.h), for f32, f16 and bf16 activations.
 *
 * Tiled like the float matmul (cpu.c): CPU_MATMUL_W_ROWS outputs a task over
 * the op threads, two paths:
 *  - one row of x (a decode step, bound by reading the weights): each tile's
 *    packed weights are read once and dequantized in registers as they are
 *    multiplied, summed in f32. AWQ words hold 8 outputs of one input k, so
 *    the k loop is outside and the tile's 64 sums inside; int8 rows are
 *    outputs, so each output is one dot over its row.
 *  - more rows (prefill): each tile is dequantized once per CPU_MATMUL_X_ROWS
 *    rows of x into f32 scratch (AWQ as [in][cols], its own order; int8 as
 *    [cols][in]) and multiplied by a one-thread OpenBLAS sgemm.
 * A dequantized weight ((q - z) * s, or q * s) is exact in f32: prefill
 * multiplies by those weights; decode takes them apart (a group's sums of x q,
 * and for AWQ of x, scaled once), so the two paths differ in their f32
 * rounding, not in the function. */
#include "cpu.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/op_check.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define CPU ORIN_DEVICE_CPU
#define W_ROWS CPU_MATMUL_W_ROWS
#define X_ROWS CPU_MATMUL_X_ROWS

struct quant_job {
    const orin_matmul_quant_args *a;
    orin_weight_format fmt;
    orin_dtype dt;
    int64_t in, out, r0;
    int rows;                /* rows of x in xt now */
    const float *xt;         /* rows r0..r0+rows-1 of x as f32 */
    float *scratch;          /* prefill, per worker: w tile, y tile */
    size_t scratch_floats;   /* per worker */
};

/* ---- AWQ int4 ---- */

/* The decode tile works in a word's own nibble order (nibble i of word j is
 * column 8j + AWQ_ORDER[i]) so that every nibble comes out of the word by the
 * same operation, a mask (nibbles 4..7 after one shift by 16), its place's
 * power of two taken off once a group. The compiler turns the 4-lane loops
 * into vector code (no per-lane shifts needed); the sums are put back in
 * column order at the end. */
static const int AWQ_ORDER[8] = {0, 2, 4, 6, 1, 3, 5, 7};
static const uint32_t NIBBLE_MASK[4] = {0xfu, 0xf0u, 0xf00u, 0xf000u};
static const float NIBBLE_SCALE[4] = {1.0f, 1.0f / 16, 1.0f / 256, 1.0f / 4096};

/* Zeros and scales of group g for columns c0..c0+cols (cols a multiple of 8),
 * in nibble order: zero[8j + i] and scale[8j + i] are column 8j + AWQ_ORDER[i]'s. */
static void awq_group_params(const orin_qweight *w, int64_t out, int64_t g, int64_t c0, int cols,
                             float *zero, float *scale)
{
    const uint32_t *zw = (const uint32_t *)w->zeros.data + g * (out / 8) + c0 / 8;
    const uint16_t *s = (const uint16_t *)w->scales.data + g * out + c0;
    for (int j = 0; j < cols / 8; j++)
        for (int i = 0; i < 8; i++) {
            zero[8 * j + i] = (float)((zw[j] >> (4 * i)) & 15u);
            scale[8 * j + i] = orin_f16_to_f32(s[8 * j + AWQ_ORDER[i]]);
        }
}

/* acc[0..4) += xk * q' for the 4 nibbles of `half` (a word's low 16 bits, or
 * its high 16 shifted down), q' the nibble masked in place: q 16^i. */
static inline void awq_fma4(float *acc, uint32_t half, float xk)
{
    for (int i = 0; i < 4; i++)
        acc[i] += xk * (float)(int32_t)(half & NIBBLE_MASK[i]);
}

/* y[c] = sum_k x[k] w[c0 + c][k], c < cols, reading each word once. A group
 * keeps sum_k x[k] q'[k][c] and sum_k x[k] and adds scale (its sum 16^-i less
 * zero times the sum of x) to y[c] at its end, so that a weight costs a mask,
 * a conversion and a multiply-add: w = (q - z) s taken apart, as the GPU's
 * GEMV does (its exact f32 products, the rounding of other sums). */
static void awq_matvec_tile(const orin_qweight *w, const float *x, int64_t in, int64_t out,
                            int64_t c0, int cols, float *y)
{
    float zero[W_ROWS], scale[W_ROWS], acc[W_ROWS], gacc[W_ROWS];
    const uint32_t *words = (const uint32_t *)w->qweight.data + c0 / 8;
    const int64_t group = w->group_size, stride = out / 8;
    memset(acc, 0, sizeof acc);
    for (int64_t k0 = 0; k0 < in; k0 += group) {
        awq_group_params(w, out, k0 / group, c0, cols, zero, scale);
        memset(gacc, 0, sizeof gacc);
        float xsum = 0.0f;
        for (int64_t k = k0; k < k0 + group; k++) {
            const uint32_t *row = words + k * stride;
            const float xk = x[k];
            xsum += xk;
            for (int j = 0; j < cols / 8; j++) {
                const uint32_t word = row[j];
                awq_fma4(gacc + 8 * j, word, xk);
                awq_fma4(gacc + 8 * j + 4, word >> 16, xk);
            }
        }
        for (int c = 0; c < cols; c++)
            acc[c] += scale[c] * (gacc[c] * NIBBLE_SCALE[c % 4] - zero[c] * xsum);
    }
    for (int j = 0; j < cols / 8; j++)
        for (int i = 0; i < 8; i++)
            y[8 * j + AWQ_ORDER[i]] = acc[8 * j + i];
}

/* wt[k][c] = w[c0 + c][k]: the tile dequantized in AWQ's own (k-major) order. */
static void awq_dequant_tile(const orin_qweight *w, int64_t in, int64_t out, int64_t c0,
                             int cols, float *wt)
{
    float zero[W_ROWS], scale[W_ROWS];
    const uint32_t *words = (const uint32_t *)w->qweight.data + c0 / 8;
    const int64_t group = w->group_size, stride = out / 8;
    for (int64_t k = 0; k < in; k++) {
        if (k % group == 0)
            awq_group_params(w, out, k / group, c0, cols, zero, scale);
        const uint32_t *row = words + k * stride;
        float *dst = wt + k * cols;
        for (int j = 0; j < cols / 8; j++)
            for (int i = 0; i < 8; i++) {
                float q = (float)((row[j] >> (4 * i)) & 15u);
                dst[8 * j + AWQ_ORDER[i]] = (q - zero[8 * j + i]) * scale[8 * j + i];
            }
    }
}

/* ---- int8 ---- */

/* Partial sums a dot keeps: independent chains, so that the loop is not one
 * long dependency on a single sum (and the compiler vectorizes it). */
#define DOT_LANES 8

/* y[c] = sum_k x[k] w[c0 + c][k]: a dot over each output's row, in
 * DOT_LANES partial sums (lane k % DOT_LANES; an order that depends only on
 * the shapes) of x q a group, each scaled once at the group's end, added up at
 * the end. */
static void int8_matvec_tile(const orin_qweight *w, const float *x, int64_t in, int64_t c0,
                             int cols, float *y)
{
    const int64_t group = w->group_size, groups = in / group;
    for (int c = 0; c < cols; c++) {
        const int8_t *row = (const int8_t *)w->qweight.data + (c0 + c) * in;
        const uint16_t *scales = (const uint16_t *)w->scales.data + (c0 + c) * groups;
        float acc[DOT_LANES] = {0};
        for (int64_t g = 0; g < groups; g++) {
            float gacc[DOT_LANES] = {0};
            int64_t k = g * group;
            const int64_t end = k + group;
            for (; k % DOT_LANES != 0 && k < end; k++)
                gacc[k % DOT_LANES] += x[k] * (float)row[k];
            for (; k + DOT_LANES <= end; k += DOT_LANES)
                for (int l = 0; l < DOT_LANES; l++)
                    gacc[l] += x[k + l] * (float)row[k + l];
            for (; k < end; k++)
                gacc[k % DOT_LANES] += x[k] * (float)row[k];
            const float s = orin_f16_to_f32(scales[g]);
            for (int l = 0; l < DOT_LANES; l++)
                acc[l] += s * gacc[l];
        }
        float sum = 0.0f;
        for (int l = 0; l < DOT_LANES; l++)
            sum += acc[l];
        y[c] = sum;
    }
}

/* wt[c][k] = w[c0 + c][k]. */
static void int8_dequant_tile(const orin_qweight *w, int64_t in, int64_t c0, int cols, float *wt)
{
    const int64_t group = w->group_size, groups = in / group;
    for (int c = 0; c < cols; c++) {
        const int8_t *row = (const int8_t *)w->qweight.data + (c0 + c) * in;
        const uint16_t *scales = (const uint16_t *)w->scales.data + (c0 + c) * groups;
        float *dst = wt + (int64_t)c * in;
        for (int64_t g = 0; g < groups; g++) {
            const float s = orin_f16_to_f32(scales[g]);
            for (int64_t k = g * group; k < (g + 1) * group; k++)
                dst[k] = (float)row[k] * s;
        }
    }
}

/* ---- the tiles ---- */

/* y tile [rows, cols] (leading dimension cols) = xt . tile^T, the tile as
 * dequantized above. */
static void tile_sgemm(const struct quant_job *job, const float *wt, int cols, float *yt)
{
    const int in = (int)job->in;
    if (job->fmt == ORIN_WEIGHT_AWQ4) /* wt [in][cols] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, job->rows, cols, in, 1.0f,
                    job->xt, in, wt, cols, 0.0f, yt, cols);
    else /* wt [cols][in] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, job->rows, cols, in, 1.0f,
                    job->xt, in, wt, in, 0.0f, yt, cols);
}

/* Task t: outputs t * W_ROWS.. of y for the rows in xt. */
static int quant_tile(void *ctx, int worker, int64_t t)
{
    const struct quant_job *job = ctx;
    const orin_matmul_quant_args *a = job->a;
    const orin_dtype dt = job->dt;
    const int64_t in = job->in, out = job->out, c0 = t * W_ROWS;
    const int cols = (int)(out - c0 < W_ROWS ? out - c0 : W_ROWS);
    float ybuf[W_ROWS], bias[W_ROWS];
    float *yt = ybuf;
    if (job->rows == 1 && job->fmt == ORIN_WEIGHT_AWQ4) {
        awq_matvec_tile(&a->w, job->xt, in, out, c0, cols, yt);
    } else if (job->rows == 1) {
        int8_matvec_tile(&a->w, job->xt, in, c0, cols, yt);
    } else {
        float *wt = job->scratch + (size_t)worker * job->scratch_floats;
        yt = wt + (size_t)W_ROWS * in;
        if (job->fmt == ORIN_WEIGHT_AWQ4)
            awq_dequant_tile(&a->w, in, out, c0, cols, wt);
        else
            int8_dequant_tile(&a->w, in, c0, cols, wt);
        tile_sgemm(job, wt, cols, yt);
    }
    if (a->bias.data)
        orin_cpu_load_f32(bias, orin_cpu_elem(a->bias.data, dt, c0), dt, (size_t)cols);
    for (int r = 0; r < job->rows; r++) {
        float *yr = yt + (int64_t)r * cols;
        if (a->bias.data)
            for (int c = 0; c < cols; c++)
                yr[c] += bias[c];
        orin_cpu_store_f32(orin_cpu_elem(a->y.data, dt, (job->r0 + r) * out + c0), dt, yr,
                           (size_t)cols);
    }
    return 0;
}

static int matmul_quant(const orin_exec *ex, const orin_matmul_quant_args *a,
                        orin_weight_format fmt, orin_dtype dt, const char *label)
{
    if (orin_check_matmul_quant(label, ex, a, fmt, CPU, dt))
        return -1;
    if (a->w.layout != 0) /* no prepare here: only the stored layout */
        return orin_error_set("%s: w.layout %u: this implementation reads the stored layout "
                              "(0) only", label, a->w.layout);
    const int64_t n = orin_tensor_rows(&a->x), in = a->x.shape[a->x.ndim - 1];
    const int64_t out = a->y.shape[a->y.ndim - 1];
    if (n > INT_MAX || in > INT_MAX || out > INT_MAX)
        return orin_error_set("%s: dimensions beyond what BLAS takes (%lld x %lld x %lld)",
                              label, (long long)n, (long long)in, (long long)out);
    cpu_blas_single_thread();

    const int64_t tiles = (out + W_ROWS - 1) / W_ROWS;
    const int workers = cpu_w_tile_workers(ex, tiles);
    const int x_rows = n < X_ROWS ? (int)n : X_ROWS;
    struct quant_job job = {.a = a, .fmt = fmt, .dt = dt, .in = in, .out = out};
    /* x as f32 (f16/bf16; f32 is used in place), then per worker a
     * dequantized tile and its y (prefill only) */
    size_t x_floats = dt == ORIN_F32 ? 0 : (size_t)x_rows * in;
    job.scratch_floats = n == 1 ? 0 : (size_t)W_ROWS * in + (size_t)x_rows * W_ROWS;
    size_t floats = x_floats + (size_t)workers * job.scratch_floats;
    float *buf = floats ? malloc(floats * sizeof(float)) : NULL;
    if (floats && !buf)
        return orin_error_set("%s: out of memory for %zu bytes of scratch", label,
                              floats * sizeof(float));
    job.scratch = buf ? buf + x_floats : NULL;

    int rc = 0;
    for (int64_t r0 = 0; r0 < n && rc == 0; r0 += X_ROWS) {
        job.r0 = r0;
        job.rows = cpu_x_block(&a->x, dt, r0, n, in, X_ROWS, buf, &job.xt);
        rc = orin_cpu_parallel_for(workers, tiles, quant_tile, &job);
    }
    free(buf);
    return rc;
}

int cpu_matmul_awq4(const orin_exec *ex, const orin_matmul_quant_args *a, orin_dtype dt)
{
    return matmul_quant(ex, a, ORIN_WEIGHT_AWQ4, dt, "matmul.awq4 (common)");
}

int cpu_matmul_int8(const orin_exec *ex, const orin_matmul_quant_args *a, orin_dtype dt)
{
    return matmul_quant(ex, a, ORIN_WEIGHT_INT8, dt, "matmul.int8 (common)");
}
