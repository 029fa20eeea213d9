/* ops_common on the CPU: the reference implementations of the non-attention ops.
 *
 * Every kernel checks its whole call before touching memory. f16 and bf16 data
 * is converted to f32 a row (or a chunk) at a time, computed in f32, and rounded
 * once on the way out. Nothing here keeps state between calls. */
#include "cpu.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/op_check.h"
#include "orin/rope.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CPU ORIN_DEVICE_CPU

/* Elementwise ops go through f32 in chunks of this many elements. */
#define ELEMENTWISE_CHUNK 1024

/* The matmul, every dtype, runs over tiles of MATMUL_W_ROWS rows of w (output
 * columns) handed out to the op threads (OpenBLAS itself runs one thread: two
 * pools of spinning threads would fight over the cores). Two paths:
 *  - one row of x (a decode step, bound by reading the weights): each row of w
 *    is read once, f16/bf16 widened in registers (orin_cpu_dot), f32 by a
 *    one-thread sgemv per tile; nothing is written but y.
 *  - more rows (prefill): a one-thread sgemm per tile, on MATMUL_X_ROWS rows of
 *    x at a time. f32 runs in place; f16/bf16 convert x's rows once (shared) and
 *    each thread its tile of w. Their scratch: X * in floats shared, plus
 *    W * in + X * W + W floats per thread (1.06 MiB for in = 4096), X being
 *    min(n, MATMUL_X_ROWS); with n <= MATMUL_X_ROWS each row of w is converted
 *    once. */
#define MATMUL_X_ROWS CPU_MATMUL_X_ROWS
#define MATMUL_W_ROWS CPU_MATMUL_W_ROWS

/* ---- embedding ---- */

int cpu_embedding(const orin_exec *ex, const orin_embedding_args *a, orin_dtype dt)
{
    const char *label = "embedding (common)";
    if (orin_check_embedding(label, ex, a, CPU, dt))
        return -1;

    const int32_t *ids = a->ids.data;
    int64_t n = a->ids.shape[0], vocab = a->table.shape[0];
    /* All ids first, so that a bad one leaves out untouched. */
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab)
            return orin_error_set("%s: ids[%lld] = %d is outside the vocabulary (0..%lld)", label,
                                  (long long)i, ids[i], (long long)vocab - 1);
    }
    size_t row_bytes = (size_t)a->table.shape[1] * orin_dtype_size(dt);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)a->out.data + i * row_bytes,
               (const char *)a->table.data + ids[i] * row_bytes, row_bytes);
    return 0;
}

/* ---- rmsnorm ---- */

/* Hugging Face's order of operations: the mean of squares, rsqrt(mean + eps),
 * x * that, then weight * the result. The sum of squares is taken in double so
 * that the reference is as close to exact as f32 outputs allow. */
static void rmsnorm_row(float *row, const float *weight, int64_t dim, float eps)
{
    double sum_sq = 0.0;
    for (int64_t j = 0; j < dim; j++)
        sum_sq += (double)row[j] * row[j];
    float mean_sq = (float)(sum_sq / (double)dim);
    float inv_rms = 1.0f / sqrtf(mean_sq + eps);
    for (int64_t j = 0; j < dim; j++)
        row[j] = weight[j] * (row[j] * inv_rms);
}

int cpu_rmsnorm(const orin_exec *ex, const orin_rmsnorm_args *a, orin_dtype dt)
{
    const char *label = "rmsnorm (common)";
    if (orin_check_rmsnorm(label, ex, a, CPU, dt))
        return -1;

    int64_t dim = a->x.shape[a->x.ndim - 1], rows = orin_tensor_rows(&a->x);
    float *buf = malloc(2 * (size_t)dim * sizeof(float));
    if (!buf)
        return orin_error_set("%s: out of memory for %lld floats", label, 2 * (long long)dim);
    float *weight = buf, *row = buf + dim;
    orin_cpu_load_f32(weight, a->weight.data, dt, dim);
    for (int64_t r = 0; r < rows; r++) {
        orin_cpu_load_f32(row, orin_cpu_elem(a->x.data, dt, r * dim), dt, dim);
        rmsnorm_row(row, weight, dim, a->eps);
        orin_cpu_store_f32(orin_cpu_elem(a->out.data, dt, r * dim), dt, row, dim);
    }
    free(buf);
    return 0;
}

/* ---- rope ---- */

/* inv_freq[j] = 1 / theta^(2j / hd), computed as Hugging Face does it in float32
 * (orin_rope_power, then 1 / that), so that the angle pos * inv_freq, also a
 * float32 product as in transformers, is the same float: at position 1000 an
 * angle off by one ulp moves cos by ~1e-4. */
static void rope_inv_freq(float *inv_freq, int64_t half, int64_t hd, float theta)
{
    for (int64_t j = 0; j < half; j++)
        inv_freq[j] = 1.0f / orin_rope_power(theta, (int)j, (int)hd);
}

/* cpu.h: x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin. */
void cpu_rope_token(const orin_tensor *x, orin_dtype dt, int64_t i, const float *cos_t,
                    const float *sin_t, float *row)
{
    const int64_t heads = x->shape[1], hd = x->shape[2], half = hd / 2;
    for (int64_t h = 0; h < heads; h++) {
        void *p = orin_cpu_elem(x->data, dt, (i * heads + h) * hd);
        orin_cpu_load_f32(row, p, dt, hd);
        for (int64_t j = 0; j < half; j++) {
            float x1 = row[j], x2 = row[j + half];
            float x1c = x1 * cos_t[j], x2s = x2 * sin_t[j];
            float x2c = x2 * cos_t[j], x1s = x1 * sin_t[j];
            row[j] = x1c - x2s;
            row[j + half] = x2c + x1s;
        }
        orin_cpu_store_f32(p, dt, row, hd);
    }
}

int cpu_rope(const orin_exec *ex, const orin_rope_args *a, orin_dtype dt)
{
    const char *label = "rope (common)";
    if (orin_check_rope(label, ex, a, CPU, dt) ||
        orin_cpu_check_positions(label, &a->positions, INT32_MAX, "a position", NULL))
        return -1;
    int64_t n = a->x.shape[0], hd = a->x.shape[2];

    int64_t half = hd / 2;
    float *buf = malloc((3 * (size_t)half + (size_t)hd) * sizeof(float));
    if (!buf)
        return orin_error_set("%s: out of memory", label);
    float *inv_freq = buf, *cos_t = buf + half, *sin_t = buf + 2 * half, *row = buf + 3 * half;
    float factor = 1.0f; /* times 1 leaves cos and sin as they are, bit for bit */
    if (a->scaling.inv_freq) {
        memcpy(inv_freq, a->scaling.inv_freq, (size_t)half * sizeof(float));
        factor = a->scaling.attention_factor;
    } else {
        rope_inv_freq(inv_freq, half, hd, a->theta);
    }

    const int32_t *pos = a->positions.data;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < half; j++) {
            float angle = (float)pos[i] * inv_freq[j];
            cos_t[j] = (float)cos((double)angle) * factor;
            sin_t[j] = (float)sin((double)angle) * factor;
        }
        cpu_rope_token(&a->x, dt, i, cos_t, sin_t, row);
    }
    free(buf);
    return 0;
}

/* ---- matmul ---- */

/* OpenBLAS runs one thread (see above); it is told so before the first matmul,
 * and again only if something else changed it since. */
void cpu_blas_single_thread(void)
{
    if (openblas_get_num_threads() != 1)
        openblas_set_num_threads(1);
}

/* Threads for a job of `tiles` tiles of w: runtime.threads, no more than tiles. */
int cpu_w_tile_workers(const orin_exec *ex, int64_t tiles)
{
    int threads = orin_cpu_threads(ex->device);
    return tiles < threads ? (int)tiles : threads;
}

/* ---- one row of x ---- */

struct matvec_job {
    const orin_matmul_args *a;
    orin_dtype dt;
    int64_t in, out;
    const float *x;
};

/* Task t: y[c0..c0+cols) = x . w[c] + bias[c], c0 = t * MATMUL_W_ROWS. f32 rows
 * go to a one-thread sgemv (OpenBLAS's kernel reads f32 faster than
 * orin_cpu_dot: 94 against 107 ms per Qwen3-0.6B step on 2 threads). */
static int matvec_w_tile(void *ctx, int worker, int64_t t)
{
    (void)worker;
    const struct matvec_job *job = ctx;
    const orin_matmul_args *a = job->a;
    orin_dtype dt = job->dt;
    int64_t in = job->in, c0 = t * MATMUL_W_ROWS;
    int cols = (int)(job->out - c0 < MATMUL_W_ROWS ? job->out - c0 : MATMUL_W_ROWS);
    float y[MATMUL_W_ROWS], bias[MATMUL_W_ROWS];
    if (dt == ORIN_F32) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, cols, (int)in, 1.0f,
                    (const float *)a->w.data + c0 * in, (int)in, job->x, 1, 0.0f, y, 1);
    } else {
        for (int c = 0; c < cols; c++)
            y[c] = orin_cpu_dot(job->x, orin_cpu_elem(a->w.data, dt, (c0 + c) * in), dt,
                                (size_t)in);
    }
    if (a->bias.data) {
        orin_cpu_load_f32(bias, orin_cpu_elem(a->bias.data, dt, c0), dt, cols);
        for (int c = 0; c < cols; c++)
            y[c] += bias[c];
    }
    orin_cpu_store_f32(orin_cpu_elem(a->y.data, dt, c0), dt, y, cols);
    return 0;
}

static int matvec(const orin_exec *ex, const orin_matmul_args *a, orin_dtype dt, int64_t in,
                  int64_t out)
{
    int64_t w_tiles = (out + MATMUL_W_ROWS - 1) / MATMUL_W_ROWS;
    struct matvec_job job = {.a = a, .dt = dt, .in = in, .out = out, .x = a->x.data};
    float *converted = NULL; /* x as f32, for f16/bf16 (f32 is used in place) */
    if (dt != ORIN_F32) {
        converted = malloc((size_t)in * sizeof(float));
        if (!converted)
            return orin_error_set("matmul (common): out of memory for %lld floats",
                                  (long long)in);
        orin_cpu_load_f32(converted, a->x.data, dt, (size_t)in);
        job.x = converted;
    }
    int rc = orin_cpu_parallel_for(cpu_w_tile_workers(ex, w_tiles), w_tiles, matvec_w_tile, &job);
    free(converted);
    return rc;
}

/* ---- several rows of x ---- */

int cpu_x_block(const orin_tensor *x, orin_dtype dt, int64_t r0, int64_t n, int64_t in,
                int block_rows, float *buf, const float **xt)
{
    int rows = (int)(n - r0 < block_rows ? n - r0 : block_rows);
    if (dt == ORIN_F32) {
        *xt = (const float *)x->data + r0 * in;
    } else {
        orin_cpu_load_f32(buf, orin_cpu_elem(x->data, dt, r0 * in), dt, (size_t)rows * in);
        *xt = buf;
    }
    return rows;
}

/* xt: rows r0..r0+rows-1 of x as f32 (in place for f32). */
struct matmul_job {
    const orin_matmul_args *a;
    orin_dtype dt;
    int64_t in, out, r0;
    int rows;                /* rows in xt now */
    int x_rows;              /* rows xt holds at most: min(n, MATMUL_X_ROWS) */
    const float *xt;
    float *scratch;          /* f16/bf16, per worker: w tile, y tile, bias tile */
    size_t scratch_floats;   /* per worker */
};

/* y[rows, cols] (leading dimension ldy) = x[rows, in] . w[cols, in]^T + bias. */
static void sgemm_bias(float *y, int ldy, const float *x, const float *w, const float *bias,
                       int rows, int cols, int in)
{
    float beta = 0.0f;
    if (bias) {
        for (int r = 0; r < rows; r++)
            memcpy(y + (int64_t)r * ldy, bias, (size_t)cols * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, in, 1.0f, x, in, w, in,
                beta, y, ldy);
}

/* Task t: columns t * MATMUL_W_ROWS.. of y for the rows in xt. */
static int matmul_w_tile(void *ctx, int worker, int64_t t)
{
    const struct matmul_job *job = ctx;
    const orin_matmul_args *a = job->a;
    orin_dtype dt = job->dt;
    int64_t in = job->in, out = job->out, c0 = t * MATMUL_W_ROWS;
    int cols = (int)(out - c0 < MATMUL_W_ROWS ? out - c0 : MATMUL_W_ROWS);
    if (dt == ORIN_F32) {
        const float *bias = a->bias.data ? (const float *)a->bias.data + c0 : NULL;
        sgemm_bias((float *)a->y.data + job->r0 * out + c0, (int)out, job->xt,
                   (const float *)a->w.data + c0 * in, bias, job->rows, cols, (int)in);
        return 0;
    }
    float *wt = job->scratch + (size_t)worker * job->scratch_floats;
    float *yt = wt + (size_t)MATMUL_W_ROWS * in, *bt = yt + (size_t)job->x_rows * MATMUL_W_ROWS;
    orin_cpu_load_f32(wt, orin_cpu_elem(a->w.data, dt, c0 * in), dt, (size_t)cols * in);
    if (a->bias.data)
        orin_cpu_load_f32(bt, orin_cpu_elem(a->bias.data, dt, c0), dt, cols);
    sgemm_bias(yt, cols, job->xt, wt, a->bias.data ? bt : NULL, job->rows, cols, (int)in);
    for (int r = 0; r < job->rows; r++)
        orin_cpu_store_f32(orin_cpu_elem(a->y.data, dt, (job->r0 + r) * out + c0), dt,
                           yt + (int64_t)r * cols, cols);
    return 0;
}

static int matmul_rows(const orin_exec *ex, const orin_matmul_args *a, orin_dtype dt, int64_t n,
                       int64_t in, int64_t out)
{
    int64_t w_tiles = (out + MATMUL_W_ROWS - 1) / MATMUL_W_ROWS;
    int workers = cpu_w_tile_workers(ex, w_tiles);
    int x_rows = n < MATMUL_X_ROWS ? (int)n : MATMUL_X_ROWS;
    struct matmul_job job = {.a = a, .dt = dt, .in = in, .out = out, .x_rows = x_rows};
    float *buf = NULL;
    if (dt != ORIN_F32) {
        job.scratch_floats = (size_t)MATMUL_W_ROWS * in + (size_t)x_rows * MATMUL_W_ROWS +
                             MATMUL_W_ROWS;
        size_t floats = (size_t)x_rows * in + (size_t)workers * job.scratch_floats;
        buf = malloc(floats * sizeof(float));
        if (!buf)
            return orin_error_set("matmul (common): out of memory for %zu bytes of scratch",
                                  floats * sizeof(float));
        job.scratch = buf + (size_t)x_rows * in;
    }

    int rc = 0;
    for (int64_t r0 = 0; r0 < n && rc == 0; r0 += MATMUL_X_ROWS) {
        job.r0 = r0;
        job.rows = cpu_x_block(&a->x, dt, r0, n, in, MATMUL_X_ROWS, buf, &job.xt);
        rc = orin_cpu_parallel_for(workers, w_tiles, matmul_w_tile, &job);
    }
    free(buf);
    return rc;
}

int cpu_matmul(const orin_exec *ex, const orin_matmul_args *a, orin_dtype dt)
{
    const char *label = "matmul (common)";
    if (orin_check_matmul(label, ex, a, CPU, dt))
        return -1;
    int64_t n = orin_tensor_rows(&a->x), in = a->w.shape[1], out = a->w.shape[0];
    if (n > INT_MAX || in > INT_MAX || out > INT_MAX)
        return orin_error_set("%s: dimensions beyond what BLAS takes (%lld x %lld x %lld)",
                              label, (long long)n, (long long)in, (long long)out);

    cpu_blas_single_thread();
    return n == 1 ? matvec(ex, a, dt, in, out) : matmul_rows(ex, a, dt, n, in, out);
}

/* ---- elementwise: swiglu, add ---- */

typedef void (*binary_fn)(float *out, const float *a, const float *b, int len);

static void swiglu_chunk(float *out, const float *gate, const float *up, int len)
{
    for (int i = 0; i < len; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

static void add_chunk(float *out, const float *a, const float *b, int len)
{
    for (int i = 0; i < len; i++)
        out[i] = a[i] + b[i];
}

/* out = fn(a, b) over same-shaped tensors, through f32 a chunk at a time; out may
 * be a or b exactly (each chunk is read before it is written). */
static int elementwise(const orin_exec *ex, const char *label, const char *a_name,
                       const orin_tensor *a, const char *b_name, const orin_tensor *b,
                       const orin_tensor *out, orin_dtype dt, binary_fn fn)
{
    if (orin_check_binary(label, ex, a_name, a, b_name, b, out, CPU, dt))
        return -1;

    float abuf[ELEMENTWISE_CHUNK], bbuf[ELEMENTWISE_CHUNK];
    int64_t total = orin_tensor_numel(a);
    for (int64_t i = 0; i < total; i += ELEMENTWISE_CHUNK) {
        int len = (int)(total - i < ELEMENTWISE_CHUNK ? total - i : ELEMENTWISE_CHUNK);
        orin_cpu_load_f32(abuf, orin_cpu_elem(a->data, dt, i), dt, len);
        orin_cpu_load_f32(bbuf, orin_cpu_elem(b->data, dt, i), dt, len);
        fn(abuf, abuf, bbuf, len);
        orin_cpu_store_f32(orin_cpu_elem(out->data, dt, i), dt, abuf, len);
    }
    return 0;
}

int cpu_swiglu(const orin_exec *ex, const orin_swiglu_args *a, orin_dtype dt)
{
    return elementwise(ex, "swiglu (common)", "gate", &a->gate, "up", &a->up, &a->out, dt,
                       swiglu_chunk);
}

int cpu_add(const orin_exec *ex, const orin_add_args *a, orin_dtype dt)
{
    return elementwise(ex, "add (common)", "a", &a->a, "b", &a->b, &a->out, dt, add_chunk);
}

/* ---- argmax ---- */

/* The lowest index of the largest value. NaN counts as larger than everything,
 * as in torch.argmax and numpy.argmax: a row holding NaN gives its first NaN's
 * index, so a broken model shows instead of producing plausible tokens. */
static int64_t argmax_row(const void *x, orin_dtype dt, int64_t len)
{
    float chunk[ELEMENTWISE_CHUNK];
    float best = 0.0f;
    int64_t best_j = -1;
    for (int64_t j0 = 0; j0 < len; j0 += ELEMENTWISE_CHUNK) {
        int clen = (int)(len - j0 < ELEMENTWISE_CHUNK ? len - j0 : ELEMENTWISE_CHUNK);
        orin_cpu_load_f32(chunk, orin_cpu_elem(x, dt, j0), dt, clen);
        for (int j = 0; j < clen; j++) {
            if (isnan(chunk[j]))
                return j0 + j;
            if (best_j < 0 || chunk[j] > best) {
                best = chunk[j];
                best_j = j0 + j;
            }
        }
    }
    return best_j;
}

int cpu_argmax(const orin_exec *ex, const orin_argmax_args *a, orin_dtype dt)
{
    const char *label = "argmax (common)";
    if (orin_check_argmax(label, ex, a, CPU, dt))
        return -1;
    int64_t n = a->x.shape[0], vocab = a->x.shape[1];
    int32_t *out = a->out.data;
    for (int64_t i = 0; i < n; i++)
        out[i] = (int32_t)argmax_row(orin_cpu_elem(a->x.data, dt, i * vocab), dt, vocab);
    return 0;
}

/* ---- kv_write ---- */

int cpu_kv_write(const orin_exec *ex, const orin_kv_write_args *a, orin_dtype dt)
{
    const char *label = "kv_write (common)";
    if (orin_check_kv_write(label, ex, a, CPU, dt))
        return -1;
    if (orin_cpu_check_positions(label, &a->positions, a->cache.capacity, "the cache capacity",
                                 NULL))
        return -1;

    const int32_t *pos = a->positions.data;
    int64_t n = a->k.shape[0], heads = a->k.shape[1], hd = a->k.shape[2];
    size_t row_bytes = (size_t)hd * orin_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t h = 0; h < heads; h++) {
            int64_t src = (i * heads + h) * hd;
            int64_t dst = orin_kv_offset(&a->cache, pos[i], h);
            memcpy(orin_cpu_elem(a->cache.k, dt, dst), orin_cpu_elem(a->k.data, dt, src),
                   row_bytes);
            memcpy(orin_cpu_elem(a->cache.v, dt, dst), orin_cpu_elem(a->v.data, dt, src),
                   row_bytes);
        }
    }
    return 0;
}
