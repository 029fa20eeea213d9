/* Helpers for CPU op implementations: see orin/cpu_util.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_sigmask, sysconf(_SC_NPROCESSORS_ONLN) */
#endif
#include "orin/cpu_util.h"
#include "orin/error.h"
#include "dtype_internal.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- threads ---- */

int orin_cpu_threads(const orin_device *dev)
{
    long n = dev && dev->threads > 0 ? dev->threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > ORIN_CPU_MAX_THREADS ? ORIN_CPU_MAX_THREADS : (int)n;
}

/* The pool: helper threads started on first use and kept for the life of the
 * process, each waiting for the next job. A job is one parallel_for call; the
 * caller works on it too, as worker 0. Tasks are claimed from an atomic counter.
 *
 * A decode step is a few hundred jobs of tens of microseconds each, about what it
 * costs to wake a sleeping thread. So helpers, and the caller waiting for them,
 * first spin for POOL_SPIN_NS watching an atomic, and only then sleep on a
 * condition variable: back to back jobs never sleep, an idle pool soon does.
 *
 * The job word packs the job's generation with its number of helpers, so that a
 * helper reads both at once: it takes part when its worker number is within the
 * count. The job's fields are written before the word is published (release)
 * and read after it is seen (acquire); the next job is published only once every
 * helper of this one has left it (running back to 0). */
#define POOL_SPIN_NS 100000
#define JOB_HELPER_BITS 8 /* > log2(ORIN_CPU_MAX_THREADS) */

struct helper_start {
    int worker;
    uint64_t job; /* the job word current when it was started */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;  /* a new job was posted */
    pthread_cond_t done;  /* the last helper left the job */
    int helpers;          /* helper threads started, workers 1..helpers */
    struct helper_start start[ORIN_CPU_MAX_THREADS];
    _Atomic uint64_t job; /* generation << JOB_HELPER_BITS | helpers taking part */
    /* the current job */
    orin_cpu_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    atomic_int running;   /* helpers still in the job */
    atomic_int_fast64_t next;
    atomic_int failed;
    char error[1024];     /* the first failing task's message */
} pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

/* Held by the thread whose job the pool runs. */
static pthread_mutex_t pool_busy = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local bool in_task;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double orin_seconds(void)
{
    return (double)now_ns() * 1e-9;
}

static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until done(arg) or POOL_SPIN_NS have passed; returns done(arg). The
 * clock is read every 64 rounds (a read costs more than a pause). */
static bool spin_until(bool (*done)(const void *), const void *arg)
{
    int64_t deadline = 0;
    for (unsigned round = 0;; round++) {
        if (done(arg))
            return true;
        if (round % 64 == 0) {
            int64_t now = now_ns();
            if (deadline == 0)
                deadline = now + POOL_SPIN_NS;
            else if (now >= deadline)
                return false;
        }
        spin_pause();
    }
}

static bool job_changed(const void *seen)
{
    return atomic_load_explicit(&pool.job, memory_order_acquire) != *(const uint64_t *)seen;
}

static bool job_finished(const void *unused)
{
    (void)unused;
    return atomic_load_explicit(&pool.running, memory_order_acquire) == 0;
}

static void run_tasks(int worker)
{
    in_task = true;
    while (!atomic_load(&pool.failed)) {
        int64_t t = atomic_fetch_add(&pool.next, 1);
        if (t >= pool.n_tasks)
            break;
        if (pool.fn(pool.ctx, worker, t) == 0)
            continue;
        if (atomic_exchange(&pool.failed, 1) == 0)
            snprintf(pool.error, sizeof pool.error, "%s", orin_error());
        break;
    }
    in_task = false;
}

/* The next job word after `seen`: spinning first, then asleep. */
static uint64_t wait_for_job(uint64_t seen)
{
    if (!spin_until(job_changed, &seen)) {
        pthread_mutex_lock(&pool.lock);
        while (atomic_load_explicit(&pool.job, memory_order_acquire) == seen)
            pthread_cond_wait(&pool.wake, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
    }
    return atomic_load_explicit(&pool.job, memory_order_acquire);
}

static void *helper_main(void *arg)
{
    const struct helper_start *start = arg;
    uint64_t seen = start->job;
    uint64_t helper_mask = (1u << JOB_HELPER_BITS) - 1;

    for (;;) {
        seen = wait_for_job(seen);
        if ((uint64_t)start->worker > (seen & helper_mask))
            continue; /* not in this job */
        run_tasks(start->worker);
        if (atomic_fetch_sub_explicit(&pool.running, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool.lock);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.lock);
        }
    }
    return NULL;
}

/* Starts helpers until there are `want`; called with pool.lock held. Helpers
 * block every signal, so that signals reach the program's own threads. */
static void start_helpers(int want)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (pool.helpers < want) {
        struct helper_start *start = &pool.start[pool.helpers];
        start->worker = pool.helpers + 1;
        start->job = atomic_load_explicit(&pool.job, memory_order_relaxed);
        pthread_t tid;
        if (pthread_create(&tid, NULL, helper_main, start) != 0)
            break; /* run with the helpers we have */
        pthread_detach(tid);
        pool.helpers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static int run_serial(int64_t n_tasks, orin_cpu_task_fn fn, void *ctx)
{
    bool nested = in_task;
    int rc = 0;
    in_task = true;
    for (int64_t t = 0; t < n_tasks && rc == 0; t++)
        rc = fn(ctx, 0, t);
    in_task = nested;
    return rc;
}

int orin_cpu_parallel_for(int workers, int64_t n_tasks, orin_cpu_task_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return 0;
    if (workers > n_tasks)
        workers = (int)n_tasks;
    if (workers > ORIN_CPU_MAX_THREADS)
        workers = ORIN_CPU_MAX_THREADS;
    if (workers <= 1 || in_task || pthread_mutex_trylock(&pool_busy) != 0)
        return run_serial(n_tasks, fn, ctx);

    pthread_mutex_lock(&pool.lock);
    start_helpers(workers - 1);
    int helpers = pool.helpers < workers - 1 ? pool.helpers : workers - 1;
    if (helpers == 0) {
        pthread_mutex_unlock(&pool.lock);
        pthread_mutex_unlock(&pool_busy);
        return run_serial(n_tasks, fn, ctx);
    }
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n_tasks = n_tasks;
    atomic_store_explicit(&pool.running, helpers, memory_order_relaxed);
    atomic_store_explicit(&pool.next, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.failed, 0, memory_order_relaxed);
    uint64_t generation = atomic_load_explicit(&pool.job, memory_order_relaxed) >> JOB_HELPER_BITS;
    atomic_store_explicit(&pool.job, (generation + 1) << JOB_HELPER_BITS | (uint64_t)helpers,
                          memory_order_release);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);

    run_tasks(0);

    if (!spin_until(job_finished, NULL)) {
        pthread_mutex_lock(&pool.lock);
        while (atomic_load_explicit(&pool.running, memory_order_acquire) > 0)
            pthread_cond_wait(&pool.done, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
    }

    int rc = 0;
    if (atomic_load(&pool.failed))
        rc = orin_error_set("%s", pool.error);
    pthread_mutex_unlock(&pool_busy);
    return rc;
}

/* ---- conversions ---- */

void orin_cpu_load_f32(float *dst, const void *src, orin_dtype dt, size_t n)
{
    if (dt == ORIN_F32)
        memcpy(dst, src, n * sizeof(float));
    else
        orin_convert(dst, ORIN_F32, src, dt, n);
}

void orin_cpu_store_f32(void *dst, orin_dtype dt, const float *src, size_t n)
{
    if (dt == ORIN_F32)
        memmove(dst, src, n * sizeof(float));
    else
        orin_convert(dst, dt, src, ORIN_F32, n);
}

/* acc += x[i..i+8) * w[i..i+8), w widened to f32 in registers. A bf16 NaN is
 * left signalling here: any NaN makes the sum NaN, so the quiet bit that
 * orin_widen_bf16_v8 sets would only cost time. */
static ORIN_WIDEN_INLINE void dot_block(orin_v8f32 *acc, const float *x, const void *w,
                                        orin_dtype dt, size_t i)
{
    orin_v8f32 xv, wv;
    if (dt == ORIN_BF16) {
        orin_v8u32 bits;
        orin_load_v8u16(&bits, (const uint16_t *)w + i);
        wv = (orin_v8f32)(bits << 16);
    } else if (dt == ORIN_F16) {
        orin_widen_f16_v8(&wv, (const uint16_t *)w + i);
    } else {
        memcpy(&wv, (const float *)w + i, sizeof wv);
    }
    memcpy(&xv, x + i, sizeof xv);
    *acc += xv * wv;
}

/* Four vectors of partial sums over blocks of 32: one chain of vector additions
 * would wait on the adder's latency every 8 elements, slower than memory
 * delivers them. Then blocks of 8, then the tail into the lanes. The order of
 * the sum depends only on n. Inlined once per dtype (dt a constant), so that
 * the loops carry no dtype test and their constants are loaded once. */
static ORIN_WIDEN_INLINE float dot_of(const float *x, const void *w, orin_dtype dt, size_t n)
{
    enum { B = ORIN_WIDEN_BLOCK };
    orin_v8f32 acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
    size_t i = 0;
    for (; i + 4 * B <= n; i += 4 * B) {
        dot_block(&acc0, x, w, dt, i);
        dot_block(&acc1, x, w, dt, i + B);
        dot_block(&acc2, x, w, dt, i + 2 * B);
        dot_block(&acc3, x, w, dt, i + 3 * B);
    }
    orin_v8f32 acc = (acc0 + acc1) + (acc2 + acc3);
    for (; i + B <= n; i += B)
        dot_block(&acc, x, w, dt, i);

    float lanes[B], tail[B];
    memcpy(lanes, &acc, sizeof lanes);
    orin_cpu_load_f32(tail, orin_cpu_elem(w, dt, i), dt, n - i);
    for (size_t u = 0; i + u < n; u++)
        lanes[u] += x[i + u] * tail[u];
    for (int width = B / 2; width > 0; width /= 2) /* a fixed pairwise tree */
        for (int u = 0; u < width; u++)
            lanes[u] += lanes[u + width];
    return lanes[0];
}

static ORIN_WIDEN_INLINE float dot_any(const float *x, const void *w, orin_dtype dt, size_t n)
{
    switch (dt) {
    case ORIN_BF16:
        return dot_of(x, w, ORIN_BF16, n);
    case ORIN_F16:
        return dot_of(x, w, ORIN_F16, n);
    default:
        return dot_of(x, w, ORIN_F32, n);
    }
}

#if ORIN_AVX2_PATH
int orin_cpu_avx2(void)
{
    static atomic_int cached = -1;
    int avx2 = atomic_load_explicit(&cached, memory_order_relaxed);
    if (avx2 < 0) {
        const char *off = getenv("ORIN_CPU_NO_AVX2");
        bool forced_off = off && *off && strcmp(off, "0") != 0;
        avx2 = !forced_off && __builtin_cpu_supports("avx2");
        atomic_store_explicit(&cached, avx2, memory_order_relaxed);
    }
    return avx2;
}

ORIN_TARGET_AVX2 static float dot_avx2(const float *x, const void *w, orin_dtype dt, size_t n)
{
    return dot_any(x, w, dt, n);
}
#endif

float orin_cpu_dot(const float *x, const void *w, orin_dtype dt, size_t n)
{
#if ORIN_AVX2_PATH
    if (orin_cpu_avx2())
        return dot_avx2(x, w, dt, n);
#endif
    return dot_any(x, w, dt, n);
}

/* ---- values in host memory ---- */

int orin_cpu_check_positions(const char *label, const orin_tensor *positions, int32_t limit,
                             const char *limit_what, int32_t *max_pos)
{
    const int32_t *pos = positions->data;
    int64_t n = orin_tensor_numel(positions);
    int32_t max = -1;
    for (int64_t i = 0; i < n; i++) {
        if (pos[i] < 0 || pos[i] >= limit)
            return orin_error_set("%s: positions[%lld] = %d is outside 0..%d (%s)", label,
                                  (long long)i, pos[i], limit - 1, limit_what);
        if (pos[i] > max)
            max = pos[i];
    }
    if (max_pos)
        *max_pos = max;
    return 0;
}

/* ---- attention tiles ---- */

void orin_cpu_load_kv_tile(const orin_kv_view *kv, int32_t head, int32_t pos0, int32_t count,
                           float *kt, int ldk, float *v)
{
    enum { CHUNK = 64 };
    const int hd = kv->head_dim;
    float chunk[CHUNK];

    for (int c = 0; c < count; c++) {
        int64_t off = orin_kv_offset(kv, pos0 + c, head);
        for (int i0 = 0; i0 < hd; i0 += CHUNK) {
            int len = hd - i0 < CHUNK ? hd - i0 : CHUNK;
            orin_cpu_load_f32(chunk, orin_cpu_elem(kv->k, kv->dtype, off + i0), kv->dtype, len);
            for (int i = 0; i < len; i++)
                kt[(int64_t)(i0 + i) * ldk + c] = chunk[i];
        }
        orin_cpu_load_f32(v + (int64_t)c * hd, orin_cpu_elem(kv->v, kv->dtype, off), kv->dtype,
                          hd);
    }
}

/* y += a * x, and y *= a, over n floats. Blocks of a fixed 8 elements let the
 * compiler vectorise them at -O2; each element gets the same two roundings as
 * in scalar code, so results do not depend on the vector width. */
static inline void axpy(float *restrict y, const float *restrict x, float a, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++)
            y[i + u] += a * x[i + u];
    for (; i < n; i++)
        y[i] += a * x[i];
}

static inline void scale_row(float *restrict y, float a, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++)
            y[i + u] *= a;
    for (; i < n; i++)
        y[i] *= a;
}

/* Scores run over columns innermost (an axpy over a row of kt), so that each
 * score is still the dot product summed in order of i. */
void orin_cpu_scores_tile(float *s, int lds, const float *q, int ldq, const float *kt, int ldk,
                          int rows, int cols, int hd, float scale, int32_t pos0,
                          const int32_t *row_pos)
{
    for (int r = 0; r < rows; r++) {
        float *srow = s + (int64_t)r * lds;
        const float *qrow = q + (int64_t)r * ldq;
        for (int c = 0; c < cols; c++)
            srow[c] = 0.0f;
        for (int i = 0; i < hd; i++)
            axpy(srow, kt + (int64_t)i * ldk, qrow[i], cols);
        /* Columns past the row's position are masked; the rest are scaled. */
        int64_t allowed = (int64_t)row_pos[r] - pos0 + 1;
        for (int c = 0; c < cols; c++)
            srow[c] = c < allowed ? srow[c] * scale : -INFINITY;
    }
}

void orin_cpu_pv_tile(float *o, int ldo, const float *alpha, const float *p, int ldp,
                      const float *v, int rows, int cols, int hd)
{
    for (int r = 0; r < rows; r++) {
        float *orow = o + (int64_t)r * ldo;
        const float *prow = p + (int64_t)r * ldp;
        scale_row(orow, alpha[r], hd);
        for (int c = 0; c < cols; c++) {
            if (prow[c] == 0.0f)
                continue; /* masked: adds nothing (and skips 0 * inf) */
            axpy(orow, v + (int64_t)c * hd, prow[c], hd);
        }
    }
}

float orin_cpu_row_max(const float *x, int n)
{
    float m = -INFINITY;
    for (int c = 0; c < n; c++)
        m = x[c] > m ? x[c] : m;
    return m;
}

float orin_cpu_exp_sum(float *x, int n, float m)
{
    float sum = 0.0f;
    if (m == -INFINITY) {
        for (int c = 0; c < n; c++)
            x[c] = 0.0f;
        return 0.0f;
    }
    for (int c = 0; c < n; c++) {
        x[c] = expf(x[c] - m);
        sum += x[c];
    }
    return sum;
}
