/* Helpers for CPU op implementations: dtype loads and stores, a thread pool,
 * checks of values held in host memory, and the f32 tile routines the CPU
 * attention kernels share. */
#ifndef ORIN_CPU_UTIL_H
#define ORIN_CPU_UTIL_H

#include "orin/ops.h"
#include "orin/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds on the monotonic clock, for timing (any origin). */
double orin_seconds(void);

/* ---- threads ---- */

#define ORIN_CPU_MAX_THREADS 64

/* Host threads an op may use: dev->threads, or every online core when it is 0
 * (or dev is NULL); at most ORIN_CPU_MAX_THREADS. */
int orin_cpu_threads(const orin_device *dev);

/* One unit of work. `worker` (0 <= worker < workers) names the thread running it,
 * for per-worker scratch. Returns 0, or -1 with orin_error_set(). */
typedef int (*orin_cpu_task_fn)(void *ctx, int worker, int64_t task);

/* Runs fn(ctx, worker, t) for every t in 0..n_tasks-1 on up to `workers` threads
 * of a process-wide pool, the caller being worker 0. Tasks are handed out in
 * order as threads free up, so results are deterministic as long as each task
 * writes only its own outputs. Returns 0, or -1 with the first failing task's
 * error (tasks not yet started are then skipped). A call made from inside a
 * task, or while another thread is using the pool, runs serially. */
int orin_cpu_parallel_for(int workers, int64_t n_tasks, orin_cpu_task_fn fn, void *ctx);

/* ---- element access and conversions ---- */

/* Address of element i of an array of dt. */
static inline void *orin_cpu_elem(const void *base, orin_dtype dt, int64_t i)
{
    return (char *)base + i * (int64_t)orin_dtype_size(dt);
}

/* dst[0..n) = src[0..n) as f32; src is f32, f16 or bf16. */
void orin_cpu_load_f32(float *dst, const void *src, orin_dtype dt, size_t n);
/* dst[0..n) = src[0..n) rounded to dt (f32, f16 or bf16; nearest even). */
void orin_cpu_store_f32(void *dst, orin_dtype dt, const float *src, size_t n);

/* x[0..n) . w[0..n): x is f32, w is f32, f16 or bf16, widened a block at a time
 * in registers (no f32 copy of w is written), summed in f32. The order of the
 * sum depends only on n. */
float orin_cpu_dot(const float *x, const void *w, orin_dtype dt, size_t n);

/* ---- values in host memory ---- */

/* Every positions[i] (an i32 host tensor) lies in 0..limit-1, where `limit_what`
 * says what bounds it ("the cache capacity"). Stores the largest in *max_pos
 * when max_pos is not NULL. */
int orin_cpu_check_positions(const char *label, const orin_tensor *positions, int32_t limit,
                             const char *limit_what, int32_t *max_pos);

/* ---- attention tiles (f32) ---- */

/* Loads positions pos0..pos0+count-1 of kv head `head` from the cache: K
 * transposed into kt (kt[i * ldk + c] = K[pos0 + c][i], i < head_dim) and V as
 * rows (v[c * head_dim + i]). The view was checked with orin_check_kv_view. */
void orin_cpu_load_kv_tile(const orin_kv_view *kv, int32_t head, int32_t pos0, int32_t count,
                           float *kt, int ldk, float *v);

/* Scores of a (rows x cols) tile: s[r * lds + c] = scale * q[r] . K[pos0 + c],
 * with q rows of hd at stride ldq and K as loaded above. Causal mask: where
 * pos0 + c > row_pos[r], the score is -INFINITY. */
void orin_cpu_scores_tile(float *s, int lds, const float *q, int ldq, const float *kt, int ldk,
                          int rows, int cols, int hd, float scale, int32_t pos0,
                          const int32_t *row_pos);

/* o[r] = alpha[r] * o[r] + sum_c p[r * ldp + c] * v[c], for rows of hd floats
 * (o at stride ldo, v as loaded above). */
void orin_cpu_pv_tile(float *o, int ldo, const float *alpha, const float *p, int ldp,
                      const float *v, int rows, int cols, int hd);

/* Largest of x[0..n), -INFINITY when all are. */
float orin_cpu_row_max(const float *x, int n);
/* x[c] = exp(x[c] - m), returning the sum. With m = -INFINITY (a fully masked
 * row) every x[c] becomes 0 and the sum is 0, never NaN. */
float orin_cpu_exp_sum(float *x, int n, float m);

#ifdef __cplusplus
}
#endif
#endif
