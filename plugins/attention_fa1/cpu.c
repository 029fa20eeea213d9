/* FlashAttention-1 on the CPU (Dao et al. 2022, Algorithm 1), per head:
 *
 *   O = 0, l = 0, m = -inf                       (in the workspace: "HBM")
 *   for each KV tile j:                          (outer)
 *     load K_j, V_j
 *     for each Q tile i:                         (inner)
 *       S = scale * Q_i K_j^T, causally masked
 *       m~ = rowmax(S), P~ = exp(S - m~), l~ = rowsum(P~)
 *       m' = max(m_i, m~), l' = exp(m_i - m') l_i + exp(m~ - m') l~
 *       O_i = (l_i exp(m_i - m') O_i + exp(m~ - m') P~ V_j) / l'
 *       m_i = m', l_i = l'
 *
 * O is kept normalised after every step, as FA1 does, in f32 whatever the compute
 * dtype (FA1's CUDA code also accumulates into an f32 O in memory), and is
 * rounded into `out` at the end. A Q tile whose rows all sit before the KV tile
 * is skipped: it would add nothing. Heads run in parallel. */
#include "cpu.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/op_check.h"

#include <math.h>
#include <stdlib.h>

typedef struct fa1_job {
    const orin_attention_args *a;
    orin_dtype dt;
    int64_t n, heads, head_dim, group;
    int32_t kv_len;            /* max position + 1 */
    float *o, *l, *m;          /* workspace: O [n, H, hd], l and m [n, H] */
    const int32_t *tile_max;   /* largest position in each Q tile */
    size_t scratch_floats;     /* per worker */
    float *scratch;
} fa1_job;

/* One row's online-softmax step: turns s (this tile's scores) into the weights
 * P~ exp(m~ - m') / l' and returns the factor l_i exp(m_i - m') / l' for O_i. */
static float fa1_row_update(float *s, int cols, float *m_i, float *l_i)
{
    float m_tile = orin_cpu_row_max(s, cols);
    float l_tile = orin_cpu_exp_sum(s, cols, m_tile);
    if (l_tile == 0.0f)
        return 1.0f; /* the row sees nothing in this tile: O_i stays */
    float m_new = m_tile > *m_i ? m_tile : *m_i;
    float keep = expf(*m_i - m_new) * *l_i;     /* 0 on the first tile (m_i = -inf) */
    float add = expf(m_tile - m_new);
    float l_new = keep + add * l_tile;
    for (int c = 0; c < cols; c++)
        s[c] *= add / l_new;
    *m_i = m_new;
    *l_i = l_new;
    return keep / l_new;
}

static int fa1_head(void *ctx, int worker, int64_t head)
{
    const fa1_job *job = ctx;
    const orin_attention_args *a = job->a;
    const int64_t hd = job->head_dim, heads = job->heads, n = job->n;
    const int64_t ld = heads * hd; /* between rows of q, out and O */
    const int32_t *pos = a->positions.data;

    float *kt = job->scratch + (size_t)worker * job->scratch_floats; /* [hd][BLOCK_KV] */
    float *v = kt + hd * FA1_BLOCK_KV;                               /* [BLOCK_KV][hd] */
    float *q = v + FA1_BLOCK_KV * hd;                                /* [BLOCK_Q][hd] */
    float *s = q + FA1_BLOCK_Q * hd;                                 /* [BLOCK_Q][BLOCK_KV] */
    float *factor = s + FA1_BLOCK_Q * FA1_BLOCK_KV;                  /* [BLOCK_Q] */

    for (int64_t i = 0; i < n; i++) {
        for (int64_t d = 0; d < hd; d++)
            job->o[i * ld + head * hd + d] = 0.0f;
        job->l[i * heads + head] = 0.0f;
        job->m[i * heads + head] = -INFINITY;
    }

    for (int32_t j0 = 0; j0 < job->kv_len; j0 += FA1_BLOCK_KV) {
        int cols = job->kv_len - j0 < FA1_BLOCK_KV ? job->kv_len - j0 : FA1_BLOCK_KV;
        orin_cpu_load_kv_tile(&a->cache, (int32_t)(head / job->group), j0, cols, kt,
                              FA1_BLOCK_KV, v);
        for (int64_t i0 = 0; i0 < n; i0 += FA1_BLOCK_Q) {
            if (job->tile_max[i0 / FA1_BLOCK_Q] < j0)
                continue; /* every row of this Q tile is before the KV tile */
            int rows = (int)(n - i0 < FA1_BLOCK_Q ? n - i0 : FA1_BLOCK_Q);
            for (int r = 0; r < rows; r++)
                orin_cpu_load_f32(q + r * hd,
                                  orin_cpu_elem(a->q.data, job->dt, (i0 + r) * ld + head * hd),
                                  job->dt, hd);
            orin_cpu_scores_tile(s, FA1_BLOCK_KV, q, (int)hd, kt, FA1_BLOCK_KV, rows, cols,
                                 (int)hd, a->scale, j0, pos + i0);
            for (int r = 0; r < rows; r++) {
                int64_t row = (i0 + r) * heads + head;
                factor[r] = fa1_row_update(s + r * FA1_BLOCK_KV, cols, &job->m[row],
                                           &job->l[row]);
            }
            orin_cpu_pv_tile(job->o + i0 * ld + head * hd, (int)ld, factor, s, FA1_BLOCK_KV, v,
                             rows, cols, (int)hd);
        }
    }

    for (int64_t i = 0; i < n; i++)
        orin_cpu_store_f32(orin_cpu_elem(a->out.data, job->dt, i * ld + head * hd), job->dt,
                           job->o + i * ld + head * hd, hd);
    return 0;
}

size_t fa1_workspace_size(const orin_attention_args *a)
{
    if (!a || a->q.ndim != 3 || a->q.shape[0] < 1 || a->q.shape[1] < 1 || a->q.shape[2] < 1)
        return 0; /* run() reports the bad call */
    return (size_t)a->q.shape[0] * (size_t)a->q.shape[1] * ((size_t)a->q.shape[2] + 2) *
           sizeof(float);
}

int fa1_cpu_attention(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt,
                      bool decode)
{
    const char *label = decode ? "attention.decode (fa1)" : "attention.prefill (fa1)";
    int32_t max_pos;
    if (orin_check_exec(label, ex, ORIN_DEVICE_CPU) ||
        orin_check_attention(label, a, ORIN_DEVICE_CPU, dt, decode) ||
        orin_cpu_check_positions(label, &a->positions, a->max_kv_len, "max_kv_len", &max_pos))
        return -1;
    size_t need = fa1_workspace_size(a);
    if (!ex->workspace || ex->workspace_size < need)
        return orin_error_set("%s: workspace of %zu bytes, the call needs %zu", label,
                              ex->workspace ? ex->workspace_size : 0, need);

    int64_t n = a->q.shape[0], heads = a->q.shape[1], hd = a->q.shape[2];
    int64_t q_tiles = (n + FA1_BLOCK_Q - 1) / FA1_BLOCK_Q;
    int workers = orin_cpu_threads(ex->device);
    if (workers > heads)
        workers = (int)heads;
    fa1_job job = {
        .a = a,
        .dt = dt,
        .n = n,
        .heads = heads,
        .head_dim = hd,
        .group = heads / a->cache.n_kv_heads,
        .kv_len = max_pos + 1,
        .o = ex->workspace,
        .scratch_floats = (size_t)(2 * hd * FA1_BLOCK_KV + FA1_BLOCK_Q * hd +
                                   FA1_BLOCK_Q * FA1_BLOCK_KV + FA1_BLOCK_Q),
    };
    job.l = job.o + n * heads * hd;
    job.m = job.l + n * heads;

    int32_t *tile_max = malloc((size_t)q_tiles * sizeof(int32_t));
    job.scratch = malloc((size_t)workers * job.scratch_floats * sizeof(float));
    int rc = -1;
    if (!tile_max || !job.scratch) {
        orin_error_set("%s: out of memory for scratch", label);
        goto out;
    }
    const int32_t *pos = a->positions.data;
    for (int64_t t = 0; t < q_tiles; t++) {
        tile_max[t] = -1;
        for (int64_t i = t * FA1_BLOCK_Q; i < n && i < (t + 1) * FA1_BLOCK_Q; i++)
            tile_max[t] = pos[i] > tile_max[t] ? pos[i] : tile_max[t];
    }
    job.tile_max = tile_max;
    rc = orin_cpu_parallel_for(workers, heads, fa1_head, &job);
out:
    free(tile_max);
    free(job.scratch);
    return rc;
}
