/* Multi-head attention on the CPU, the textbook way: for every (query row, head)
 * the scores over all allowed cache positions are materialised, soft-maxed
 * (max-subtracted), and used to weight V. It is the reference the flash kernels
 * are tested against, so it favours accuracy over speed: dot products, the
 * softmax sum and P.V are accumulated in double, and only the result is rounded
 * to the compute dtype. */
#include "cpu.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/op_check.h"

#include <math.h>
#include <stdlib.h>

typedef struct mha_job {
    const orin_attention_args *a;
    orin_dtype dt;
    int64_t heads, head_dim, group; /* group: query heads per kv head */
    size_t scratch_doubles;         /* per worker */
    double *scratch;
} mha_job;

/* The keys one (query row, head) attends to: key/value j (j < len) at element
 * offset offset(ctx, j) of k and v. */
typedef struct mha_keys {
    const void *k, *v;
    int64_t (*offset)(const void *ctx, int64_t j);
    const void *ctx;
    int64_t len;
} mha_keys;

/* out[0..hd) = softmax(scale q . K^T) V over the keys, in double; scratch:
 * acc (hd doubles), scores (len doubles), then q and a k/v row (2 hd floats). */
static void mha_attend(const void *q_in, void *out, const mha_keys *keys, int64_t hd,
                       double scale, orin_dtype dt, double *scratch)
{
    double *acc = scratch, *scores = acc + hd;
    float *q = (float *)(scores + keys->len), *kv_row = q + hd;
    orin_cpu_load_f32(q, q_in, dt, hd);

    double max = -INFINITY;
    for (int64_t j = 0; j < keys->len; j++) {
        orin_cpu_load_f32(kv_row, orin_cpu_elem(keys->k, dt, keys->offset(keys->ctx, j)), dt, hd);
        double dot = 0.0;
        for (int64_t i = 0; i < hd; i++)
            dot += (double)q[i] * kv_row[i];
        scores[j] = dot * scale;
        max = scores[j] > max ? scores[j] : max;
    }

    double sum = 0.0;
    for (int64_t i = 0; i < hd; i++)
        acc[i] = 0.0;
    for (int64_t j = 0; j < keys->len; j++) {
        double p = exp(scores[j] - max);
        orin_cpu_load_f32(kv_row, orin_cpu_elem(keys->v, dt, keys->offset(keys->ctx, j)), dt, hd);
        sum += p;
        for (int64_t i = 0; i < hd; i++)
            acc[i] += p * kv_row[i];
    }

    for (int64_t i = 0; i < hd; i++)
        q[i] = (float)(acc[i] / sum);
    orin_cpu_store_f32(out, dt, q, hd);
}

/* The cache's key j of one kv head. */
struct cache_keys {
    const orin_kv_view *kv;
    int64_t kv_head;
};

static int64_t cache_offset(const void *ctx, int64_t j)
{
    const struct cache_keys *c = ctx;
    return orin_kv_offset(c->kv, (int32_t)j, c->kv_head);
}

/* One (query row, head): task = row * heads + head. */
static int mha_task(void *ctx, int worker, int64_t task)
{
    const mha_job *job = ctx;
    const orin_attention_args *a = job->a;
    const orin_kv_view *kv = &a->cache;
    const orin_dtype dt = job->dt;
    const int64_t hd = job->head_dim, row = task / job->heads, head = task % job->heads;
    const int64_t kv_head = head / job->group;
    const int32_t pos = ((const int32_t *)a->positions.data)[row];

    const struct cache_keys ck = {.kv = kv, .kv_head = kv_head};
    const mha_keys keys = {.k = kv->k, .v = kv->v, .offset = cache_offset, .ctx = &ck,
                           .len = (int64_t)pos + 1};
    const int64_t at = (row * job->heads + head) * hd;
    mha_attend(orin_cpu_elem(a->q.data, dt, at), orin_cpu_elem(a->out.data, dt, at), &keys, hd,
               a->scale, dt, job->scratch + (size_t)worker * job->scratch_doubles);
    return 0;
}

int mha_cpu_attention(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt,
                      bool decode)
{
    const char *label = decode ? "attention.decode (mha)" : "attention.prefill (mha)";
    int32_t max_pos;
    if (orin_check_exec(label, ex, ORIN_DEVICE_CPU) ||
        orin_check_attention(label, a, ORIN_DEVICE_CPU, dt, decode) ||
        orin_cpu_check_positions(label, &a->positions, a->max_kv_len, "max_kv_len", &max_pos))
        return -1;

    int64_t n = a->q.shape[0], heads = a->q.shape[1], hd = a->q.shape[2];
    int workers = orin_cpu_threads(ex->device);
    if (workers > n * heads)
        workers = (int)(n * heads);
    /* Per worker: acc (hd doubles), scores (max_pos + 1 doubles), then q and a
     * cache row (2 * hd floats = hd doubles). */
    mha_job job = {
        .a = a,
        .dt = dt,
        .heads = heads,
        .head_dim = hd,
        .group = heads / a->cache.n_kv_heads,
        .scratch_doubles = (size_t)(2 * hd + max_pos + 1),
    };
    job.scratch = malloc((size_t)workers * job.scratch_doubles * sizeof(double));
    if (!job.scratch)
        return orin_error_set("%s: out of memory for scratch", label);
    int rc = orin_cpu_parallel_for(workers, n * heads, mha_task, &job);
    free(job.scratch);
    return rc;
}

/* ---- attention.full: bidirectional, within segments ---- */

typedef struct full_job {
    const orin_attention_full_args *a;
    orin_dtype dt;
    int64_t heads, kv_heads, head_dim, group;
    const int32_t *cu;              /* cu_seqlens */
    int64_t segments;
    size_t scratch_doubles;         /* per worker */
    double *scratch;
} full_job;

/* cu_seqlens starts at 0, never decreases and ends at n; the longest segment
 * goes to *max_len (it sizes the scores). */
static int check_cu_seqlens(const char *label, const orin_attention_full_args *a,
                            int64_t *max_len)
{
    const int32_t *cu = a->cu_seqlens.data;
    const int64_t count = a->cu_seqlens.shape[0], n = a->q.shape[0];
    if (cu[0] != 0)
        return orin_error_set("%s: cu_seqlens[0] = %d, expected 0", label, cu[0]);
    *max_len = 0;
    for (int64_t s = 1; s < count; s++) {
        if (cu[s] < cu[s - 1])
            return orin_error_set("%s: cu_seqlens[%lld] = %d is below cu_seqlens[%lld] = %d",
                                  label, (long long)s, cu[s], (long long)s - 1, cu[s - 1]);
        if (cu[s] - cu[s - 1] > *max_len)
            *max_len = cu[s] - cu[s - 1];
    }
    if (cu[count - 1] != n)
        return orin_error_set("%s: cu_seqlens[%lld] = %d, expected %lld (the tokens in q)",
                              label, (long long)count - 1, cu[count - 1], (long long)n);
    return 0;
}

/* The segment holding token `row`: the last s with cu[s] <= row (empty
 * segments, cu[s] == cu[s + 1], are passed over). */
static int64_t segment_of(const full_job *job, int64_t row)
{
    int64_t lo = 0, hi = job->segments - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) / 2;
        if (job->cu[mid] <= row)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Key j of a segment starting at token `first`, one kv head of [n, Hkv, hd]. */
struct seg_keys {
    int64_t first, kv_heads, kv_head, hd;
};

static int64_t seg_offset(const void *ctx, int64_t j)
{
    const struct seg_keys *c = ctx;
    return ((c->first + j) * c->kv_heads + c->kv_head) * c->hd;
}

/* One (query row, head): task = row * heads + head; as mha_task, over the
 * keys of the row's segment. */
static int full_task(void *ctx, int worker, int64_t task)
{
    const full_job *job = ctx;
    const orin_attention_full_args *a = job->a;
    const orin_dtype dt = job->dt;
    const int64_t hd = job->head_dim, row = task / job->heads, head = task % job->heads;
    const int64_t kv_head = head / job->group, seg = segment_of(job, row);
    const int64_t first = job->cu[seg], len = job->cu[seg + 1] - first;

    const struct seg_keys sk = {.first = first, .kv_heads = job->kv_heads, .kv_head = kv_head,
                                .hd = hd};
    const mha_keys keys = {.k = a->k.data, .v = a->v.data, .offset = seg_offset, .ctx = &sk,
                           .len = len};
    const int64_t at = (row * job->heads + head) * hd;
    mha_attend(orin_cpu_elem(a->q.data, dt, at), orin_cpu_elem(a->out.data, dt, at), &keys, hd,
               a->scale, dt, job->scratch + (size_t)worker * job->scratch_doubles);
    return 0;
}

int mha_cpu_attention_full(const orin_exec *ex, const orin_attention_full_args *a,
                           orin_dtype dt)
{
    const char *label = "attention.full (mha)";
    int64_t max_len = 0;
    if (orin_check_attention_full(label, ex, a, ORIN_DEVICE_CPU, dt) ||
        check_cu_seqlens(label, a, &max_len))
        return -1;

    const int64_t n = a->q.shape[0], heads = a->q.shape[1], hd = a->q.shape[2];
    int workers = orin_cpu_threads(ex->device);
    if (workers > n * heads)
        workers = (int)(n * heads);
    /* Per worker: acc (hd doubles), scores (max_len doubles), then q and a
     * k/v row (2 * hd floats = hd doubles). */
    full_job job = {
        .a = a,
        .dt = dt,
        .heads = heads,
        .kv_heads = a->k.shape[1],
        .head_dim = hd,
        .group = heads / a->k.shape[1],
        .cu = a->cu_seqlens.data,
        .segments = a->cu_seqlens.shape[0] - 1,
        .scratch_doubles = (size_t)(2 * hd + max_len),
    };
    job.scratch = malloc((size_t)workers * job.scratch_doubles * sizeof(double));
    if (!job.scratch)
        return orin_error_set("%s: out of memory for scratch", label);
    int rc = orin_cpu_parallel_for(workers, n * heads, full_task, &job);
    free(job.scratch);
    return rc;
}
