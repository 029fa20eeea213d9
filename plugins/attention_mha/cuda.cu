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

// Dot products of q (f32, shared memory) with the key rows j0 + u * MHA_WARPS,
// u < MHA_UNROLL, times scale, reduced over the warp (every lane gets them):
// UNROLL rows in flight per warp. Rows past `last` are replaced by row j0
// (callers keep j0 <= last) so that every load is in bounds; their dots are
// to be dropped. `key(j)` is the address of key row j.
template <typename T, typename KeyRow>
__device__ __forceinline__ void mha_warp_dots(const float *q, int hd, KeyRow key, int j0, int last,
                                              float scale, float (&dot)[MHA_UNROLL])
{
    const int lane = threadIdx.x & 31;
    const T *k_row[MHA_UNROLL];
#pragma unroll
    for (int u = 0; u < MHA_UNROLL; u++) {
        int j = j0 + u * MHA_WARPS;
        k_row[u] = key(j <= last ? j : j0);
        dot[u] = 0.0f;
    }
    for (int d = lane; d < hd; d += 32) {
        float qd = q[d];
#pragma unroll
        for (int u = 0; u < MHA_UNROLL; u++)
            dot[u] += qd * orin_cu_f32(k_row[u][d]);
    }
#pragma unroll
    for (int u = 0; u < MHA_UNROLL; u++)
        dot[u] = orin_cu_warp_sum(dot[u]) * scale;
}

// acc[d] += sum_u pj[u] * V[j0 + u * MHA_WARPS][d] over the lane's d's (a
// warp's own accumulator row); pj[u] must be 0 for rows past `last`, which
// read row j0 instead.
template <typename T, typename ValueRow>
__device__ __forceinline__ void mha_warp_pv(float *acc, int hd, ValueRow value, int j0, int last,
                                            const float (&pj)[MHA_UNROLL])
{
    const int lane = threadIdx.x & 31;
    const T *v_row[MHA_UNROLL];
#pragma unroll
    for (int u = 0; u < MHA_UNROLL; u++) {
        int j = j0 + u * MHA_WARPS;
        v_row[u] = value(j <= last ? j : j0);
    }
    for (int d = lane; d < hd; d += 32) {
        float a = acc[d];
#pragma unroll
        for (int u = 0; u < MHA_UNROLL; u++)
            a += pj[u] * orin_cu_f32(v_row[u][d]);
        acc[d] = a;
    }
}

// The block's epilogue: sums the warps' accumulator rows, divides by the
// softmax sum, rounds once to T.
template <typename T>
__device__ __forceinline__ void mha_write_out(T *out, const float *acc, int hd, float sum)
{
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += MHA_THREADS) {
        float total = 0.0f;
        for (int w = 0; w < MHA_WARPS; w++)
            total += acc[w * hd + d];
        out[d] = orin_cu_from_f32<T>(total / sum);
    }
}

// Stages q as f32 in shared memory and zeroes the warps' accumulator rows.
template <typename T>
__device__ __forceinline__ void mha_stage_q(float *q, float *acc, const T *q_row, int hd)
{
    for (int d = threadIdx.x; d < hd; d += MHA_THREADS)
        q[d] = orin_cu_f32(q_row[d]);
    for (int i = threadIdx.x; i < MHA_WARPS * hd; i += MHA_THREADS)
        acc[i] = 0.0f;
    __syncthreads();
}

template <typename T>
__device__ __forceinline__ void mha_nan_row(T *out, int hd)
{
    for (int d = threadIdx.x; d < hd; d += MHA_THREADS)
        out[d] = orin_cu_from_f32<T>(__int_as_float(0x7fc00000));
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
        mha_nan_row(out, hd);
        return;
    }

    const T *k = (const T *)p.kv.k, *v = (const T *)p.kv.v;
    const int kv_head = head / p.group;
    const orin_kv_view kv = p.kv;
    auto key = [&](int j) { return k + orin_kv_offset(&kv, j, kv_head); };
    auto value = [&](int j) { return v + orin_kv_offset(&kv, j, kv_head); };
    float *scores = p.scores + ((int64_t)row * p.heads + head) * p.max_kv_len;
    float *q = mha_smem;       // [hd]
    float *acc = q + hd;       // [MHA_WARPS][hd]
    mha_stage_q(q, acc, (const T *)p.q + qoff, hd);

    // 1. scores
    float local_max = -INFINITY;
    for (int j0 = warp; j0 <= pos; j0 += MHA_WARPS * MHA_UNROLL) {
        float dot[MHA_UNROLL];
        mha_warp_dots<T>(q, hd, key, j0, pos, p.scale, dot);
#pragma unroll
        for (int u = 0; u < MHA_UNROLL; u++) {
            int j = j0 + u * MHA_WARPS;
            if (j <= pos) {
                if (lane == 0)
                    scores[j] = dot[u];
                local_max = mha_nan_max(local_max, dot[u]);
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
        float pj[MHA_UNROLL];
#pragma unroll
        for (int u = 0; u < MHA_UNROLL; u++) {
            int j = j0 + u * MHA_WARPS;
            pj[u] = j <= pos ? scores[j] : 0.0f;
        }
        mha_warp_pv<T>(my_acc, hd, value, j0, pos, pj);
    }
    mha_write_out(out, acc, hd, sum);
}

// ---- attention.full: bidirectional within segments, no cache ----

struct mha_full_params {
    const void *q, *k, *v; // q [n, H, hd], k and v [n, Hkv, hd]
    void *out;             // [n, H, hd]
    const int32_t *cu;     // cu_seqlens [segments + 1], device memory
    int segments, n, heads, kv_heads, head_dim, group;
    float scale;
};

// The segment [*lo, *hi) of token `row`: the last s with cu[s] <= row (a
// binary search, which passes over empty segments). cu_seqlens lives in
// device memory and the host never sees it: false when the values found do
// not frame the row inside 0..n, and the row is then NaN, reading nothing.
__device__ __forceinline__ bool mha_segment_of(const mha_full_params &p, int row, int *lo,
                                               int *hi)
{
    int a = 0, b = p.segments - 1;
    while (a < b) {
        int mid = (a + b + 1) / 2;
        if (p.cu[mid] <= row)
            a = mid;
        else
            b = mid - 1;
    }
    *lo = p.cu[a];
    *hi = p.cu[a + 1];
    return *lo >= 0 && *lo <= row && row < *hi && *hi <= p.n;
}

// attention.full, one block per (query row, head). Launch: grid (n, H),
// MHA_THREADS threads, dynamic shared memory (1 + MHA_WARPS) * head_dim floats
// (as mha_kernel). With no workspace (a segment can hold every token of a
// large image), the scores are computed twice:
//   1. the row's max over its segment's keys;
//   2. the same dots again, p = exp(s - max), the sum and P.V at once.
// f32 throughout, one rounding at the end: the reference for any head_dim.
// Bound by L2 bandwidth (a segment's K and V are read twice per query row and
// head), not written for speed: the flash providers are.
template <typename T>
__global__ void __launch_bounds__(MHA_THREADS) mha_full_kernel(const mha_full_params p)
{
    extern __shared__ float mha_smem[];
    __shared__ float scratch[32];
    const int row = blockIdx.x, head = blockIdx.y, hd = p.head_dim;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t qoff = ((int64_t)row * p.heads + head) * hd;
    T *out = (T *)p.out + qoff;

    int lo, hi;
    if (!mha_segment_of(p, row, &lo, &hi)) { // block-uniform
        mha_nan_row(out, hd);
        return;
    }
    const int last = hi - 1;
    const int64_t ld = (int64_t)p.kv_heads * hd, kv_off = (int64_t)(head / p.group) * hd;
    const T *k = (const T *)p.k + kv_off, *v = (const T *)p.v + kv_off;
    auto key = [&](int j) { return k + (int64_t)j * ld; };
    auto value = [&](int j) { return v + (int64_t)j * ld; };
    float *q = mha_smem;       // [hd]
    float *acc = q + hd;       // [MHA_WARPS][hd]
    mha_stage_q(q, acc, (const T *)p.q + qoff, hd);

    // 1. the max
    float local_max = -INFINITY;
    for (int j0 = lo + warp; j0 <= last; j0 += MHA_WARPS * MHA_UNROLL) {
        float dot[MHA_UNROLL];
        mha_warp_dots<T>(q, hd, key, j0, last, p.scale, dot);
#pragma unroll
        for (int u = 0; u < MHA_UNROLL; u++)
            if (j0 + u * MHA_WARPS <= last)
                local_max = mha_nan_max(local_max, dot[u]);
    }
    const float max = orin_cu_block_max(local_max, scratch);

    // 2. p, its sum (each warp's dots are the same in every lane: lane 0
    // counts them) and P.V into this warp's accumulator row
    float sum = 0.0f, *my_acc = acc + warp * hd;
    for (int j0 = lo + warp; j0 <= last; j0 += MHA_WARPS * MHA_UNROLL) {
        float pj[MHA_UNROLL];
        mha_warp_dots<T>(q, hd, key, j0, last, p.scale, pj);
#pragma unroll
        for (int u = 0; u < MHA_UNROLL; u++) {
            pj[u] = j0 + u * MHA_WARPS <= last ? expf(pj[u] - max) : 0.0f;
            if (lane == 0)
                sum += pj[u];
        }
        mha_warp_pv<T>(my_acc, hd, value, j0, last, pj);
    }
    sum = orin_cu_block_sum(sum, scratch);
    mha_write_out(out, acc, hd, sum);
}

// Sets the kernel's dynamic shared memory limit where it is past the default.
static int mha_smem_limit(const char *label, const void *kernel, size_t smem)
{
    if (smem <= 48 * 1024)
        return 0;
    return orin_cu_call(label, "cudaFuncSetAttribute (shared memory)",
                        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem));
}

template <typename T>
static int mha_launch(const char *label, const orin_exec *ex, const mha_params *p, int n,
                      size_t smem)
{
    if (mha_smem_limit(label, (const void *)mha_kernel<T>, smem))
        return -1;
    dim3 grid((unsigned)n, (unsigned)p->heads);
    mha_kernel<T><<<grid, MHA_THREADS, smem, orin_cu_stream(ex)>>>(*p);
    return 0;
}

template <typename T>
static int mha_full_launch(const char *label, const orin_exec *ex, const mha_full_params *p,
                           size_t smem)
{
    if (mha_smem_limit(label, (const void *)mha_full_kernel<T>, smem))
        return -1;
    dim3 grid((unsigned)p->n, (unsigned)p->heads);
    mha_full_kernel<T><<<grid, MHA_THREADS, smem, orin_cu_stream(ex)>>>(*p);
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

extern "C" int mha_cuda_attention_full(const orin_exec *ex, const orin_attention_full_args *a,
                                       orin_dtype dt)
{
    const char *label = "attention.full (mha)";
    if (orin_check_attention_full(label, ex, a, ORIN_DEVICE_CUDA, dt))
        return -1;
    const int64_t n = a->q.shape[0], heads = a->q.shape[1], hd = a->q.shape[2];
    const int64_t kv_heads = a->k.shape[1], segments = a->cu_seqlens.shape[0] - 1;
    if (heads > 65535 || segments > INT32_MAX)
        return orin_error_set("%s: %lld heads, %lld segments: more than one launch takes", label,
                              (long long)heads, (long long)segments);
    if (n == 0)
        return 0;
    mha_full_params p = {
        .q = a->q.data,
        .k = a->k.data,
        .v = a->v.data,
        .out = a->out.data,
        .cu = (const int32_t *)a->cu_seqlens.data,
        .segments = (int)segments,
        .n = (int)n,
        .heads = (int)heads,
        .kv_heads = (int)kv_heads,
        .head_dim = (int)hd,
        .group = (int)(heads / kv_heads),
        .scale = a->scale,
    };
    size_t smem = (size_t)(1 + MHA_WARPS) * (size_t)hd * sizeof(float);
    int rc = 0;
    ORIN_CU_DISPATCH(dt, label, T, rc = mha_full_launch<T>(label, ex, &p, smem));
    if (rc)
        return rc;
    return orin_cu_launched(label, dt, "n %lld, heads %lld/%lld, head_dim %lld, %lld segments",
                            (long long)n, (long long)heads, (long long)kv_heads, (long long)hd,
                            (long long)segments);
}
