// What ops_common's batch-1 products share (cuda_fused.cu: the float GEMV;
// cuda_qmma_gemv.cuh: the int8 and AWQ GEMV on tiles): 256-thread blocks, weight loads that
// skip L1, and the block's sum of per-thread partials.
#ifndef ORIN_OPS_COMMON_CUDA_GEMV_CUH
#define ORIN_OPS_COMMON_CUDA_GEMV_CUH

#include "orin/cuda_util.cuh"

#define GEMV_THREADS 256

// Knock-out, for timing only (bench/notes/quant.md): x's loads after the PDL
// wait cut to the first 1/GEMV_KO_X_DIV of the row (the rest staged as zeros),
// in gemv_norm_row and the quantized GEMV's staging: whether x's bytes or its
// one round trip cost the products' chain. Any value but 1 makes results wrong.
#ifndef GEMV_KO_X_DIV
#define GEMV_KO_X_DIV 1
#endif

// 16 bytes of W, bypassing L1 (each weight byte is read once per step; x, which
// every block reads, keeps L1 to itself).
__device__ __forceinline__ uint4 load_weights16(const void *p)
{
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

// Sums acc[r] over the block; thread r (< ROWS) gets row r's total.
template <int ROWS>
__device__ __forceinline__ float gemv_block_sum(float (&acc)[ROWS])
{
    __shared__ float partial[GEMV_THREADS / 32][ROWS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        float v = orin_cu_warp_sum(acc[r]);
        if (lane == 0)
            partial[warp][r] = v;
    }
    __syncthreads();
    float total = 0.0f;
    if (threadIdx.x < ROWS)
        for (int wp = 0; wp < GEMV_THREADS / 32; wp++)
            total += partial[wp][threadIdx.x];
    return total;
}

// Rows per block of a row-dot GEMV: 8 (up to max_rows) while the grid keeps
// >= 3 blocks an SM, else 4, 2 or 1 for >= 4 blocks an SM. More rows a block
// are more loads in flight a thread (8 rows x GEMV_UNROLL 16-byte chunks); the
// gate/up GEMV, 2 x 4 rows a block, streamed at 98 % of the copy bandwidth
// where the 4-row plain one reached 45-72 % (bench/notes/decode.md).
#ifndef GEMV_ROWS_MAX
#define GEMV_ROWS_MAX 8
#endif
static inline int gemv_rows_per_block(const orin_exec *ex, int64_t rows, int max_rows)
{
    int sms = orin_cu_sm_count(ex);
    if (max_rows >= 8 && rows >= 24 * sms)
        return 8;
    return rows >= 16 * sms ? 4 : rows >= 8 * sms ? 2 : 1;
}

// ---- the add + rmsnorm prologue of a fused product (orin_norm_in) ----------------

// orin_norm_in's pointers for a kernel; weight NULL: no prologue.
template <typename T> struct gemv_norm {
    const T *residual; // NULL: x_out = x
    const T *weight;
    T *x_out;
    float eps;
};

// Shared memory gemv_norm_row takes for a row of d: x_out's scratch (in the
// resident GEMV then the normalised row) and the norm's weight, d values of T
// each. A row wider than GEMV_NORM_SMEM_MAX allows,
// not whole 16-byte vectors, or unaligned, runs the add_rmsnorm kernel into the
// workspace before the product instead.
#define GEMV_NORM_SMEM_MAX ((size_t)48 << 10)
static inline size_t gemv_norm_smem(int64_t d, size_t elem)
{
    return 2 * (size_t)d * elem;
}

// Before the PDL wait (a norm's weight is never written by a kernel): its d
// values into ws [d] by cp.async, thread t < 256 copying the 16-byte vectors
// t, t + 256, ..., the ones gemv_norm_row reads back in that thread, so no
// barrier is needed between the two: the weight's L2 round trip is off the
// critical path.
template <typename T>
__device__ __forceinline__ void gemv_norm_fetch_weight(const gemv_norm<T> &p, int d, T *ws)
{
    constexpr int N = orin_cu_vec<T>::n;
    if (threadIdx.x >= 256)
        return;
    for (int u = threadIdx.x; u < d / N; u += 256)
        orin_cu_cp_async16(orin_cu_smem_addr(ws + (size_t)u * N), p.weight + (size_t)u * N);
    orin_cu_cp_async_commit();
}

// The normalised row's vector u into hs itself: the resident GEMV's layout.
template <typename T> struct gemv_norm_put_row {
    T *hs;
    __device__ __forceinline__ void operator()(int u, const float (&v)[orin_cu_vec<T>::n]) const
    {
        orin_cu_store16(hs + (size_t)u * orin_cu_vec<T>::n, v);
    }
};

// x_out = x + residual (rounded to T); then vector u of the row the product
// reads, weight * (x_out * 1/sqrt(mean(x_out^2) + eps)), goes to put(u, v).
// hs [d]: scratch in shared memory for x_out; ws [d]: the weight, fetched by
// gemv_norm_fetch_weight before the PDL wait. A block's threads below 256 take
// the 16-byte vectors t, t + 256, ... and sum their squares in that order,
// then orin_cu_block_sum (threads past 256 add zeros, which leave the sum's
// tree as it is): the order of add_rmsnorm_vec_kernel (cuda_fused.cu), so the
// row is that op's output bit for bit and a fused product gives the unfused
// sequence's result. Block 0 writes x_out (every block computes the same sum;
// x_out overlaps neither input, so no block reads what it writes). Runs after
// the PDL wait: x and the residual are the kernels' before. Loads of BATCH
// vectors of x and of the residual go out together: one L2 round trip for rows
// up to BATCH x 256 vectors (BATCH 4: d = 8,192 in f16). Each thread reads back
// only the vectors it wrote to hs and ws, and put gets them in that thread:
// the caller synchronises before other threads read what put wrote.
template <typename T, int BATCH = 4, typename Put>
__device__ __forceinline__ void gemv_norm_row(const gemv_norm<T> &p, const T *__restrict__ x,
                                              int d, T *hs, const T *ws, float *scratch,
                                              const Put &put)
{
    constexpr int N = orin_cu_vec<T>::n;
    const int units = d / N, t = (int)threadIdx.x;
    T *x_out = blockIdx.x == 0 ? p.x_out : nullptr;
    float ss = 0.0f;
    for (int u0 = t; u0 < units && t < 256; u0 += BATCH * 256) {
        uint4 xv[BATCH], rv[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            const int u = u0 + b * 256;
            if constexpr (GEMV_KO_X_DIV != 1)
                xv[b] = rv[b] = make_uint4(0u, 0u, 0u, 0u);
            if (u < units / GEMV_KO_X_DIV) {
                xv[b] = *reinterpret_cast<const uint4 *>(x + (size_t)u * N);
                if (p.residual)
                    rv[b] = *reinterpret_cast<const uint4 *>(p.residual + (size_t)u * N);
            }
        }
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            const int u = u0 + b * 256;
            if (u >= units)
                break;
            uint4 sum = xv[b];
            if (p.residual) { // the sum as add stores it
                const T *xe = reinterpret_cast<const T *>(&xv[b]);
                const T *re = reinterpret_cast<const T *>(&rv[b]);
                T *se = reinterpret_cast<T *>(&sum);
#pragma unroll
                for (int e = 0; e < N; e++)
                    se[e] = orin_cu_from_f32<T>(orin_cu_f32(xe[e]) + orin_cu_f32(re[e]));
            }
            const T *se = reinterpret_cast<const T *>(&sum);
#pragma unroll
            for (int e = 0; e < N; e++)
                ss = fmaf(orin_cu_f32(se[e]), orin_cu_f32(se[e]), ss);
            *reinterpret_cast<uint4 *>(hs + (size_t)u * N) = sum;
            if (x_out)
                *reinterpret_cast<uint4 *>(x_out + (size_t)u * N) = sum;
        }
    }
    orin_cu_cp_async_wait<0>(); // this thread's vectors of ws
    ss = orin_cu_block_sum(ss, scratch);
    const float inv = 1.0f / sqrtf(ss / (float)d + p.eps);
    for (int u = t; u < units && t < 256; u += 256) {
        float v[N], w[N];
        orin_cu_load16(hs + (size_t)u * N, v);
        orin_cu_load16(ws + (size_t)u * N, w);
#pragma unroll
        for (int e = 0; e < N; e++)
            v[e] = w[e] * (v[e] * inv);
        put(u, v);
    }
}

#endif
