/* ops_common on the CPU: the ops of the vision encoders (layernorm, gelu,
 * rope.table, pos_interp). Like cpu.c: each call checked whole first, f16/bf16 widened to
 * f32 a row or a chunk at a time, results rounded once on the way out. */
#include "cpu.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/op_check.h"

#include <math.h>
#include <stdlib.h>

#define CPU ORIN_DEVICE_CPU

/* Elementwise ops go through f32 in chunks of this many elements. */
#define GELU_CHUNK 1024

/* ---- layernorm ---- */

/* torch's LayerNorm: mean, biased variance, (x - mean) * rsqrt(var + eps),
 * then * weight + bias. Both moments are summed in double (two passes, so
 * that a large mean does not cancel the variance away). */
static void layernorm_row(float *row, const float *weight, const float *bias, int64_t dim,
                          float eps)
{
    double sum = 0.0;
    for (int64_t j = 0; j < dim; j++)
        sum += row[j];
    const double mean = sum / (double)dim;
    double sq = 0.0;
    for (int64_t j = 0; j < dim; j++)
        sq += ((double)row[j] - mean) * ((double)row[j] - mean);
    const double inv = 1.0 / sqrt(sq / (double)dim + (double)eps);
    for (int64_t j = 0; j < dim; j++)
        row[j] = (float)(((double)row[j] - mean) * inv) * weight[j] + bias[j];
}

int cpu_layernorm(const orin_exec *ex, const orin_layernorm_args *a, orin_dtype dt)
{
    const char *label = "layernorm (common)";
    if (orin_check_layernorm(label, ex, a, CPU, dt))
        return -1;

    const int64_t dim = a->x.shape[a->x.ndim - 1], rows = orin_tensor_rows(&a->x);
    float *buf = malloc(3 * (size_t)dim * sizeof(float));
    if (!buf)
        return orin_error_set("%s: out of memory for %lld floats", label, 3 * (long long)dim);
    float *weight = buf, *bias = buf + dim, *row = buf + 2 * dim;
    orin_cpu_load_f32(weight, a->weight.data, dt, dim);
    orin_cpu_load_f32(bias, a->bias.data, dt, dim);
    for (int64_t r = 0; r < rows; r++) {
        orin_cpu_load_f32(row, orin_cpu_elem(a->x.data, dt, r * dim), dt, dim);
        layernorm_row(row, weight, bias, dim, a->eps);
        orin_cpu_store_f32(orin_cpu_elem(a->out.data, dt, r * dim), dt, row, dim);
    }
    free(buf);
    return 0;
}

/* ---- gelu ---- */

/* Each value through double: erf and tanh of libm are then exact to the f32
 * output's rounding, for both forms. */
static void gelu_chunk(float *x, int len, orin_gelu_kind kind)
{
    const double k_tanh = 0.79788456080286535588; /* sqrt(2 / pi) */
    const double k_erf = 0.70710678118654752440;  /* 1 / sqrt(2) */
    for (int i = 0; i < len; i++) {
        const double v = x[i];
        const double t = kind == ORIN_GELU_TANH ? tanh(k_tanh * (v + 0.044715 * v * v * v))
                                                : erf(v * k_erf);
        x[i] = (float)(0.5 * v * (1.0 + t));
    }
}

int cpu_gelu(const orin_exec *ex, const orin_gelu_args *a, orin_dtype dt)
{
    if (orin_check_gelu("gelu (common)", ex, a, CPU, dt))
        return -1;

    float buf[GELU_CHUNK];
    const int64_t total = orin_tensor_numel(&a->x);
    for (int64_t i = 0; i < total; i += GELU_CHUNK) {
        const int len = (int)(total - i < GELU_CHUNK ? total - i : GELU_CHUNK);
        orin_cpu_load_f32(buf, orin_cpu_elem(a->x.data, dt, i), dt, len);
        gelu_chunk(buf, len, a->kind);
        orin_cpu_store_f32(orin_cpu_elem(a->out.data, dt, i), dt, buf, len);
    }
    return 0;
}

/* ---- rope.table ---- */

int cpu_rope_table(const orin_exec *ex, const orin_rope_table_args *a, orin_dtype dt)
{
    const char *label = "rope.table (common)";
    if (orin_check_rope_table(label, ex, a, CPU, dt))
        return -1;

    const int64_t n = a->x.shape[0], hd = a->x.shape[2], half = hd / 2;
    float *row = malloc((size_t)hd * sizeof(float));
    if (!row)
        return orin_error_set("%s: out of memory", label);
    for (int64_t i = 0; i < n; i++) {
        const float *cos_t = (const float *)a->cos.data + i * half;
        const float *sin_t = (const float *)a->sin.data + i * half;
        cpu_rope_token(&a->x, dt, i, cos_t, sin_t, row);
    }
    free(row);
    return 0;
}

/* ---- pos_interp ---- */

/* Patch k of the frame: its four taps' rows of the table (f32, from the table
 * in dt) blended in double. taps: 4 rows of d floats. */
static void pos_interp_patch(const orin_pos_interp_args *a, orin_dtype dt, int64_t k,
                             float *taps, float *out)
{
    const int64_t d = a->table.shape[1];
    int32_t row, col;
    double fh, fw;
    orin_patch_rc(k, a->w, a->merge, &row, &col);
    const int32_t h0 = orin_pos_interp_tap(row, a->h, a->side, &fh);
    const int32_t w0 = orin_pos_interp_tap(col, a->w, a->side, &fw);
    const int32_t h1 = h0 + 1 < a->side ? h0 + 1 : a->side - 1;
    const int32_t w1 = w0 + 1 < a->side ? w0 + 1 : a->side - 1;
    const int64_t at[4] = {(int64_t)h0 * a->side + w0, (int64_t)h0 * a->side + w1,
                           (int64_t)h1 * a->side + w0, (int64_t)h1 * a->side + w1};
    const double wt[4] = {(1 - fh) * (1 - fw), (1 - fh) * fw, fh * (1 - fw), fh * fw};
    for (int t = 0; t < 4; t++)
        orin_cpu_load_f32(taps + t * d, orin_cpu_elem(a->table.data, dt, at[t] * d), dt, d);
    for (int64_t j = 0; j < d; j++)
        out[j] = (float)(wt[0] * taps[j] + wt[1] * taps[d + j] + wt[2] * taps[2 * d + j] +
                         wt[3] * taps[3 * d + j]);
}

int cpu_pos_interp(const orin_exec *ex, const orin_pos_interp_args *a, orin_dtype dt)
{
    const char *label = "pos_interp (common)";
    if (orin_check_pos_interp(label, ex, a, CPU, dt))
        return -1;

    const int64_t d = a->table.shape[1], area = (int64_t)a->h * a->w;
    const int64_t frames = a->out.shape[0] / area;
    float *buf = malloc(5 * (size_t)d * sizeof(float));
    if (!buf)
        return orin_error_set("%s: out of memory for %lld floats", label, 5 * (long long)d);
    float *row = buf + 4 * d;
    for (int64_t k = 0; k < area; k++) {
        pos_interp_patch(a, dt, k, buf, row);
        for (int64_t f = 0; f < frames; f++) /* every frame has the same positions */
            orin_cpu_store_f32(orin_cpu_elem(a->out.data, dt, (f * area + k) * d), dt, row, d);
    }
    free(buf);
    return 0;
}
