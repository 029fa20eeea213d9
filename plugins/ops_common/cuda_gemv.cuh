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

#endif
