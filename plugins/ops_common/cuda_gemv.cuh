// What ops_common's batch-1 products share (cuda_fused.cu: the float GEMV;
// cuda_quant.cu: the int8 and AWQ GEMV on tiles): 256-thread blocks, weight loads that
// skip L1, and the block's sum of per-thread partials.
#ifndef ORIN_OPS_COMMON_CUDA_GEMV_CUH
#define ORIN_OPS_COMMON_CUDA_GEMV_CUH

#include "orin/cuda_util.cuh"

#define GEMV_THREADS 256

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

// Rows per block of a row-dot GEMV: enough blocks for >= 4 per SM, else fewer
// rows per block.
static inline int gemv_rows_per_block(const orin_exec *ex, int64_t rows)
{
    int sms = orin_cu_sm_count(ex);
    return rows >= 16 * sms ? 4 : rows >= 8 * sms ? 2 : 1;
}

#endif
