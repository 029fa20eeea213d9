// Multi-head attention on the GPU, the textbook way: for every (query row, head)
// the scores over all allowed cache positions are materialised in the workspace,
// soft-maxed (max-subtracted) and used to weight V. It is the reference the flash
// kernels are tested against on the GPU, so it is written to be plainly right:
// f32 everywhere inside (dot products, softmax, P.V), one rounding to the compute
// dtype at the end, no tiling tricks, any head_dim.
#include "cuda.h"

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/op_check.h"

// 16 warps a block; each warp takes UNROLL positions at a time so that that many
// cache rows are in flight per warp (a 32k decode is latency-bound otherwise).
enum { MHA_THREADS = 512, MHA_WARPS = MHA_THREADS / 32, MHA_UNROLL = 4 };

struct mha_params {
    const void *q;
    void *out;
    const int32_t *positions;
    orin_kv_view kv;
    float *scores; // workspace [n, H, max_kv_len]
    int heads, head_dim, group, max_kv_len;
    float scale;
};

// Max that keeps a NaN (as orin_cu_warp_max does).
__device__ __forceinline__ float mha_nan_max(float a, float b)
{
    return (b > a || b != b) ? b : a;
}

// One block per (query row, head). Launch: grid (n, H), MHA_THREADS threads,
// dynamic shared memory (1 + MHA_WARPS) * head_dim floats (q as f32, then one
// P.V accumulator row per warp).
//   1. scores: warps over positions (UNROLL rows each at a time), lanes over
//      head_dim, a warp sum per dot product; written to the workspace;
//   2. block max, then p = exp(s - max) in place and the block sum;
//   3. P.V: warps over positions again, lanes over head_dim, each warp into its
//      own shared accumulator row; the rows are summed and divided by the sum.
// Bound by memory latency and bandwidth (each K and V row is read once per query
// head; nothing is reused between blocks). A position outside 0..max_kv_len-1
// (device memory, unchecked on the host) gives a NaN row and reads nothing.
template <typename T>
__global__ void __launch_bounds__(MHA_THREADS) mha_kernel(const mha_params p)
{
    extern __shared__ float mha_smem[];
    __shared__ float scratch[32];
    const int row = blockIdx.x, head = blockIdx.y, hd = p.head_dim;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t qoff = ((int64_t)row * p.heads + head) * hd;
    T *out = (T *)p.out + qoff;

    const int32_t pos = p.positions[row];
    if (pos < 0 || pos >= p.max_kv_len) { // block-uniform: no barrier is skipped unevenly
        for (int d = threadIdx.x; d < hd; d += MHA_THREADS)
            out[d] = orin_cu_from_f32<T>(__int_as_float(0x7fc00000));
        return;
    }

    const T *q_row = (const T *)p.q + qoff;
    const T *k = (const T *)p.kv.k, *v = (const T *)p.kv.v;
    const int kv_head = head / p.group;
    float *scores = p.scores + ((int64_t)row * p.heads + head) * p.max_kv_len;
    float *q = mha_smem;       // [hd]
    float *acc = q + hd;       // [MHA_WARPS][hd]

    for (int d = threadIdx.x; d < hd; d += MHA_THREADS)
        q[d] = orin_cu_f32(q_row[d]);
    for (int i = threadIdx.x; i < MHA_WARPS * hd; i += MHA_THREADS)
        acc[i] = 0.0f;
    __syncthreads();

    // 1. scores. Rows past pos are replaced by row j0 (always <= pos) so that
    // every load is in bounds; their dot products are dropped.
    float local_max = -INFINITY;
    for (int j0 = warp; j0 <= pos; j0 += MHA_WARPS * MHA_UNROLL) {
        const T *k_row[MHA_UNROLL];
        float dot[MHA_UNROLL];
#pragma unroll
        for (int u = 0; u < MHA_UNROLL; u++) {
            int j = j0 + u * MHA_WARPS;
            k_row[u] = k + orin_kv_offset(&p.kv, j <= pos ? j : j0, kv_head);
            dot[u] = 0.0f;
        }
        for (int d = lane; d < hd; d += 32) {
            float qd = q[d];
#pragma unroll
            for (int u = 0; u < MHA_UNROLL; u++)
                dot[u] += qd * orin_cu_f32(k_row[u][d]);
        }
#pragma unroll
        for (int u = 0; u < MHA_UNROLL; u++) {
            int j = j0 + u * MHA_WARPS;
            float s = orin_cu_warp_sum(dot[u]) * p.scale;
            if (j <= pos) {
                if (lane == 0)
                    scores[j] = s;
                local_max = mha_nan_max(local_max, s);
            }
        }
    }
    // (the reductions' barriers also publish the scores to the whole block)
    const float max = orin_cu_block_max(local_max, scratch);

    // 2. p = exp(s - max), and the sum
    float sum = 0.0f;
    for (int j = threadIdx.x; j <= pos; j += MHA_THREADS) {
        float e = expf(scores[j] - max);
        scores[j] = e;
        sum += e;
    }
    sum = orin_cu_block_sum(sum, scratch);

    // 3. P.V into this warp's accumulator row (each lane owns its d's)
    float *my_acc = acc + warp * hd;
    for (int j0 = warp; j0 <= pos; j0 += MHA_WARPS * MHA_UNROLL) {
        const T *v_row[MHA_UNROLL];
        float pj[MHA_UNROLL];
#pragma unroll
        for (int u = 0; u < MHA_UNROLL; u++) {
            int j = j0 + u * MHA_WARPS;
            v_row[u] = v + orin_kv_offset(&p.kv, j <= pos ? j : j0, kv_head);
            pj[u] = j <= pos ? scores[j] : 0.0f;
        }
        for (int d = lane; d < hd; d += 32) {
            float a = my_acc[d];
#pragma unroll
            for (int u = 0; u < MHA_UNROLL; u++)
                a += pj[u] * orin_cu_f32(v_row[u][d]);
            my_acc[d] = a;
        }
    }
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += MHA_THREADS) {
        float total = 0.0f;
        for (int w = 0; w < MHA_WARPS; w++)
            total += acc[w * hd + d];
        out[d] = orin_cu_from_f32<T>(total / sum);
    }
}

template <typename T>
static int mha_launch(const char *label, const orin_exec *ex, const mha_params *p, int n,
                      size_t smem)
{
    if (smem > 48 * 1024 &&
        orin_cu_call(label, "cudaFuncSetAttribute (shared memory)",
                     cudaFuncSetAttribute(mha_kernel<T>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)smem)))
        return -1;
    dim3 grid((unsigned)n, (unsigned)p->heads);
    mha_kernel<T><<<grid, MHA_THREADS, smem, orin_cu_stream(ex)>>>(*p);
    return 0;
}

extern "C" size_t mha_cuda_workspace_size(const orin_attention_args *a)
{
    if (!a || a->q.ndim != 3 || a->q.shape[0] < 1 || a->q.shape[1] < 1 || a->max_kv_len < 1)
        return 0; // run() reports the bad call
    return (size_t)a->q.shape[0] * (size_t)a->q.shape[1] * (size_t)a->max_kv_len *
           sizeof(float);
}

extern "C" int mha_cuda_attention(const orin_exec *ex, const orin_attention_args *a,
                                  orin_dtype dt, bool decode)
{
    const char *label = decode ? "attention.decode (mha)" : "attention.prefill (mha)";
    if (orin_check_exec(label, ex, ORIN_DEVICE_CUDA) ||
        orin_check_attention(label, a, ORIN_DEVICE_CUDA, dt, decode))
        return -1;
    size_t need = mha_cuda_workspace_size(a);
    if (!ex->workspace || ex->workspace_size < need)
        return orin_error_set("%s: workspace of %zu bytes, the call needs %zu", label,
                              ex->workspace ? ex->workspace_size : 0, need);

    const int64_t n = a->q.shape[0], heads = a->q.shape[1], hd = a->q.shape[2];
    if (n > INT32_MAX || heads > 65535)
        return orin_error_set("%s: %lld rows of %lld heads: more than one launch takes", label,
                              (long long)n, (long long)heads);
    size_t smem = (size_t)(1 + MHA_WARPS) * (size_t)hd * sizeof(float);
    mha_params p = {
        .q = a->q.data,
        .out = a->out.data,
        .positions = (const int32_t *)a->positions.data,
        .kv = a->cache,
        .scores = (float *)ex->workspace,
        .heads = (int)heads,
        .head_dim = (int)hd,
        .group = (int)(heads / a->cache.n_kv_heads),
        .max_kv_len = a->max_kv_len,
        .scale = a->scale,
    };
    int rc = 0;
    ORIN_CU_DISPATCH(dt, label, T, rc = mha_launch<T>(label, ex, &p, (int)n, smem));
    if (rc)
        return rc;
    return orin_cu_launched(label, dt, "n %lld, heads %lld/%d, head_dim %lld, max_kv_len %d",
                            (long long)n, (long long)heads, a->cache.n_kv_heads, (long long)hd,
                            a->max_kv_len);
}
