/* FlashAttention-2 on the CPU (Dao 2023), and split-KV decode (Flash-Decoding).
 *
 * Prefill: one block per (Q tile, head). The block loads its Q tile once, then
 * walks the KV tiles, keeping per row a running max m, running sum l and an
 * unnormalised accumulator:
 *     m' = max(m, rowmax(S)),  P = exp(S - m'),
 *     l = exp(m - m') l + rowsum(P),  acc = exp(m - m') acc + P V
 * and divides by l once at the end. KV tiles past the tile's last position are
 * never visited (causal skipping); the diagonal ones are masked.
 *
 * Decode: the n = 1 query is split along the cache. A block is (split, kv head):
 * its rows are that kv head's group of query heads (GQA packed into the row
 * dimension, so a K/V tile is loaded once for the group). Each block writes its
 * normalised partial output O_s and lse_s = m + log(l) into the workspace; the
 * combine step computes lse = log(sum_s exp(lse_s)) and
 * out = sum_s exp(lse_s - lse) O_s. */
#include "cpu.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/op_check.h"

#include <math.h>
#include <stdlib.h>

typedef struct fa2_job {
    const orin_attention_args *a;
    orin_dtype dt;
    int64_t n, heads, head_dim, group;
    int64_t splits;          /* decode: splits max_kv_len allows */
    float *partial_o;        /* decode workspace: [splits, H, hd] */
    float *partial_lse;      /* decode workspace: [splits, H] */
    size_t scratch_floats;   /* per worker */
    float *scratch;
} fa2_job;

/* Per-worker scratch for a block of `rows` query rows. */
typedef struct fa2_block {
    float *kt, *v, *q, *s, *acc, *m, *l, *alpha;
    int32_t *row_pos;
} fa2_block;

static size_t fa2_scratch_floats(int64_t rows, int64_t hd)
{
    return (size_t)(2 * hd * FA2_BLOCK_KV + 2 * rows * hd + rows * FA2_BLOCK_KV + 4 * rows);
}

static fa2_block fa2_block_at(const fa2_job *job, int worker, int64_t rows)
{
    const int64_t hd = job->head_dim;
    fa2_block b;
    b.kt = job->scratch + (size_t)worker * job->scratch_floats;
    b.v = b.kt + hd * FA2_BLOCK_KV;
    b.q = b.v + FA2_BLOCK_KV * hd;
    b.s = b.q + rows * hd;
    b.acc = b.s + rows * FA2_BLOCK_KV;
    b.m = b.acc + rows * hd;
    b.l = b.m + rows;
    b.alpha = b.l + rows;
    b.row_pos = (int32_t *)(b.alpha + rows);
    return b;
}

/* Runs the FA2 inner loop of one block over cache positions [kv_begin, kv_end)
 * of kv_head, for `rows` query rows already in b->q and b->row_pos; leaves the
 * unnormalised acc, m and l. */
static void fa2_block_run(const fa2_job *job, fa2_block *b, int rows, int32_t kv_head,
                          int32_t kv_begin, int32_t kv_end)
{
    const int hd = (int)job->head_dim;
    for (int r = 0; r < rows; r++) {
        for (int d = 0; d < hd; d++)
            b->acc[r * hd + d] = 0.0f;
        b->m[r] = -INFINITY;
        b->l[r] = 0.0f;
    }
    for (int32_t j0 = kv_begin; j0 < kv_end; j0 += FA2_BLOCK_KV) {
        int cols = kv_end - j0 < FA2_BLOCK_KV ? kv_end - j0 : FA2_BLOCK_KV;
        orin_cpu_load_kv_tile(&job->a->cache, kv_head, j0, cols, b->kt, FA2_BLOCK_KV, b->v);
        orin_cpu_scores_tile(b->s, FA2_BLOCK_KV, b->q, hd, b->kt, FA2_BLOCK_KV, rows, cols, hd,
                             job->a->scale, j0, b->row_pos);
        for (int r = 0; r < rows; r++) {
            float *s = b->s + r * FA2_BLOCK_KV;
            float tile_max = orin_cpu_row_max(s, cols);
            float m_new = tile_max > b->m[r] ? tile_max : b->m[r];
            /* m_new = -inf only while a row has seen nothing: alpha 1, P 0. */
            b->alpha[r] = m_new == -INFINITY ? 1.0f : expf(b->m[r] - m_new);
            b->l[r] = b->alpha[r] * b->l[r] + orin_cpu_exp_sum(s, cols, m_new);
            b->m[r] = m_new;
        }
        orin_cpu_pv_tile(b->acc, hd, b->alpha, b->s, FA2_BLOCK_KV, b->v, rows, cols, hd);
    }
}

/* ---- prefill ---- */

/* Block = (Q tile, head): task = tile * heads + head. */
static int fa2_prefill_block(void *ctx, int worker, int64_t task)
{
    const fa2_job *job = ctx;
    const orin_attention_args *a = job->a;
    const int64_t hd = job->head_dim, heads = job->heads, ld = heads * hd;
    const int64_t i0 = task / heads * FA2_BLOCK_Q, head = task % heads;
    const int rows = (int)(job->n - i0 < FA2_BLOCK_Q ? job->n - i0 : FA2_BLOCK_Q);
    const int32_t *pos = (const int32_t *)a->positions.data + i0;
    fa2_block b = fa2_block_at(job, worker, FA2_BLOCK_Q);

    int32_t last = 0;
    for (int r = 0; r < rows; r++) {
        b.row_pos[r] = pos[r];
        last = pos[r] > last ? pos[r] : last;
        orin_cpu_load_f32(b.q + r * hd, orin_cpu_elem(a->q.data, job->dt, (i0 + r) * ld + head * hd),
                          job->dt, hd);
    }
    /* KV tiles after `last` are fully masked for every row: not visited. */
    fa2_block_run(job, &b, rows, (int32_t)(head / job->group), 0, last + 1);

    for (int r = 0; r < rows; r++) {
        float inv_l = 1.0f / b.l[r];
        for (int64_t d = 0; d < hd; d++)
            b.acc[r * hd + d] *= inv_l;
        orin_cpu_store_f32(orin_cpu_elem(a->out.data, job->dt, (i0 + r) * ld + head * hd),
                           job->dt, b.acc + r * hd, hd);
    }
    return 0;
}

static int fa2_setup(const char *label, const orin_exec *ex, const orin_attention_args *a,
                     orin_dtype dt, bool decode, fa2_job *job, int32_t *max_pos)
{
    if (orin_check_exec(label, ex, ORIN_DEVICE_CPU) ||
        orin_check_attention(label, a, ORIN_DEVICE_CPU, dt, decode) ||
        orin_cpu_check_positions(label, &a->positions, a->max_kv_len, "max_kv_len", max_pos))
        return -1;
    *job = (fa2_job){
        .a = a,
        .dt = dt,
        .n = a->q.shape[0],
        .heads = a->q.shape[1],
        .head_dim = a->q.shape[2],
        .group = a->q.shape[1] / a->cache.n_kv_heads,
    };
    return 0;
}

static int fa2_alloc_scratch(const char *label, fa2_job *job, int workers, int64_t rows)
{
    job->scratch_floats = fa2_scratch_floats(rows, job->head_dim);
    job->scratch = malloc((size_t)workers * job->scratch_floats * sizeof(float));
    if (!job->scratch)
        return orin_error_set("%s: out of memory for scratch", label);
    return 0;
}

static int clamp_workers(const orin_exec *ex, int64_t tasks)
{
    int workers = orin_cpu_threads(ex->device);
    return workers > tasks ? (int)tasks : workers;
}

int fa2_cpu_prefill(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt)
{
    const char *label = "attention.prefill (fa2)";
    fa2_job job;
    int32_t max_pos;
    if (fa2_setup(label, ex, a, dt, false, &job, &max_pos))
        return -1;
    int64_t tasks = (job.n + FA2_BLOCK_Q - 1) / FA2_BLOCK_Q * job.heads;
    int workers = clamp_workers(ex, tasks);
    if (fa2_alloc_scratch(label, &job, workers, FA2_BLOCK_Q))
        return -1;
    int rc = orin_cpu_parallel_for(workers, tasks, fa2_prefill_block, &job);
    free(job.scratch);
    return rc;
}

/* ---- decode ---- */

static int64_t fa2_splits(int32_t max_kv_len)
{
    return ((int64_t)max_kv_len + FA2_SPLIT_KV - 1) / FA2_SPLIT_KV;
}

size_t fa2_decode_workspace_size(const orin_attention_args *a)
{
    if (!a || a->q.ndim != 3 || a->q.shape[1] < 1 || a->q.shape[2] < 1 || a->max_kv_len < 1)
        return 0; /* run() reports the bad call */
    return (size_t)fa2_splits(a->max_kv_len) * (size_t)a->q.shape[1] *
           ((size_t)a->q.shape[2] + 1) * sizeof(float);
}

/* Block = (split, kv head): task = split * kv_heads + kv_head. */
static int fa2_decode_split(void *ctx, int worker, int64_t task)
{
    const fa2_job *job = ctx;
    const orin_attention_args *a = job->a;
    const int64_t hd = job->head_dim, group = job->group, kv_heads = job->heads / group;
    const int64_t split = task / kv_heads, kv_head = task % kv_heads;
    const int32_t pos = *(const int32_t *)a->positions.data;
    const int64_t begin = split * FA2_SPLIT_KV;
    const int64_t end = begin + FA2_SPLIT_KV < pos + 1 ? begin + FA2_SPLIT_KV : pos + 1;
    float *o = job->partial_o + (split * job->heads + kv_head * group) * hd;
    float *lse = job->partial_lse + split * job->heads + kv_head * group;

    if (begin >= end) { /* past the position: an empty split */
        for (int64_t r = 0; r < group; r++) {
            lse[r] = -INFINITY;
            for (int64_t d = 0; d < hd; d++)
                o[r * hd + d] = 0.0f;
        }
        return 0;
    }

    fa2_block b = fa2_block_at(job, worker, group);
    /* The group's query heads are consecutive in q: rows of hd at stride hd. */
    orin_cpu_load_f32(b.q, orin_cpu_elem(a->q.data, job->dt, kv_head * group * hd), job->dt,
                      (size_t)(group * hd));
    for (int64_t r = 0; r < group; r++)
        b.row_pos[r] = pos;
    fa2_block_run(job, &b, (int)group, (int32_t)kv_head, (int32_t)begin, (int32_t)end);

    for (int64_t r = 0; r < group; r++) {
        float inv_l = 1.0f / b.l[r];
        for (int64_t d = 0; d < hd; d++)
            o[r * hd + d] = b.acc[r * hd + d] * inv_l;
        lse[r] = b.m[r] + logf(b.l[r]);
    }
    return 0;
}

/* The combine step, one query head per task. */
static int fa2_decode_combine(void *ctx, int worker, int64_t head)
{
    const fa2_job *job = ctx;
    const int64_t hd = job->head_dim, heads = job->heads;
    float *out = job->scratch + (size_t)worker * job->scratch_floats;

    float max_lse = -INFINITY;
    for (int64_t s = 0; s < job->splits; s++) {
        float lse = job->partial_lse[s * heads + head];
        max_lse = lse > max_lse ? lse : max_lse;
    }
    float sum = 0.0f;
    for (int64_t s = 0; s < job->splits; s++)
        sum += expf(job->partial_lse[s * heads + head] - max_lse);
    float lse = max_lse + logf(sum);

    for (int64_t d = 0; d < hd; d++)
        out[d] = 0.0f;
    for (int64_t s = 0; s < job->splits; s++) {
        float lse_s = job->partial_lse[s * heads + head];
        if (lse_s == -INFINITY)
            continue; /* an empty split */
        float w = expf(lse_s - lse);
        const float *o = job->partial_o + (s * heads + head) * hd;
        for (int64_t d = 0; d < hd; d++)
            out[d] += w * o[d];
    }
    orin_cpu_store_f32(orin_cpu_elem(job->a->out.data, job->dt, head * hd), job->dt, out, hd);
    return 0;
}

int fa2_cpu_decode(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt)
{
    const char *label = "attention.decode (fa2)";
    fa2_job job;
    int32_t max_pos;
    if (fa2_setup(label, ex, a, dt, true, &job, &max_pos))
        return -1;
    size_t need = fa2_decode_workspace_size(a);
    if (!ex->workspace || ex->workspace_size < need)
        return orin_error_set("%s: workspace of %zu bytes, the call needs %zu", label,
                              ex->workspace ? ex->workspace_size : 0, need);
    job.splits = fa2_splits(a->max_kv_len);
    job.partial_o = ex->workspace;
    job.partial_lse = job.partial_o + job.splits * job.heads * job.head_dim;

    int64_t kv_heads = job.heads / job.group, tasks = job.splits * kv_heads;
    int workers = clamp_workers(ex, tasks > job.heads ? tasks : job.heads);
    if (fa2_alloc_scratch(label, &job, workers, job.group))
        return -1;
    int rc = orin_cpu_parallel_for(clamp_workers(ex, tasks), tasks, fa2_decode_split, &job);
    if (rc == 0)
        rc = orin_cpu_parallel_for(clamp_workers(ex, job.heads), job.heads, fa2_decode_combine,
                                   &job);
    free(job.scratch);
    return rc;
}
