// ops_common's matmuls over quantized weights on CUDA: matmul.int8 and
// matmul.awq4 (orin_qweight in orin/ops.h), for f32, f16 and bf16 activations.
//
// One row of x (a decode step) is bound by reading the packed weights, so a
// GEMV reads them once, dequantizes in registers and accumulates in f32:
//  - int8 weights are [out][in] bytes, one output a row: the float GEMV's shape
//    (R rows a block, 16-byte loads, here 16 weights a load);
//  - AWQ words are [in][out/8]: one k-row of words covers every output, so a
//    block takes a strip of outputs and a range of k (split-K); the last block
//    of a strip to finish sums the strip's partials in a fixed order (the
//    result does not depend on which block came last).
// The dequantized weight ((q - z) * s, or q * s) is the exact f32 one; the
// decode GEMVs sum x * (q - z) over a group and multiply by s once a group,
// which differs from the CPU's order only in rounding.
//
// More rows (prefill) are bound by the tensor cores: a slice of outputs at a
// time is dequantized into the workspace in the compute dtype (AWQ k-major,
// as its words are; int8 [out][in]) and multiplied by cuBLASLt (cuda_lt_gemm).
// That moves the slice's f16 bytes through L2 once more, a few percent of the
// product's time at prefill sizes; in f16/bf16 the weights are rounded to the
// compute dtype first, as transformers' and vLLM's AWQ paths do (in f32 they
// stay exact).
#include "cuda.h"
#include "cuda_gemv.cuh"

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/op_check.h"


#define CUDA ORIN_DEVICE_CUDA

// Bytes of dequantized weights a prefill slice holds: small enough to stay in
// L2 between the dequantize and the product that reads it.
#define SLICE_BYTES ((size_t)16 << 20)
#define SLICE_ALIGN 256
// The AWQ GEMV's split-K: k rows a block takes are a multiple of this (8 warps
// x a batch of 8 rows), and the grid aims at this many blocks per SM.
#define AWQ_K_QUANTUM 64
// 16-byte chunks of each row the int8 GEMV has in flight per lane.
#define INT8_UNROLL 4
#define AWQ_MAX_K 1024 // k rows a block takes at most (x staged in shared memory)
#define AWQ_BATCH 8
// (Tunables, overridable with -D for bench/ experiments.)
#ifndef AWQ_BLOCKS_PER_SM
#define AWQ_BLOCKS_PER_SM 2
#endif
// Partials the last block of a strip has in flight per column.
#ifndef AWQ_SUM_BATCH
#define AWQ_SUM_BATCH 16
#endif
// The AWQ kernel's minimum resident blocks per SM (caps its registers).
#ifndef AWQ_MIN_BLOCKS
#define AWQ_MIN_BLOCKS 1
#endif
// k rows a block takes at least (a multiple of AWQ_K_QUANTUM): fewer, longer
// blocks for the small products, whose partial sums would cost more than the
// parallelism buys.
#ifndef AWQ_MIN_K
#define AWQ_MIN_K 64
#endif
// Words a thread takes at most (2: 8-byte loads).
#ifndef AWQ_MAX_WPT
#define AWQ_MAX_WPT 2
#endif
// Counted for the workspace bound (the grid never takes more SMs than this).
#define AWQ_MAX_SMS 256
// Strip counters (the split-K's "last block" tickets): slabs for this many
// streams, of this many strips each.
#define AWQ_COUNTER_SLABS 8
#define AWQ_COUNTERS 4096

// 2^23 as f32: its low mantissa bits are an integer's, so OR-ing a small
// unsigned integer q into them gives the float 2^23 + q exactly.
#define MAGIC_BITS 0x4B000000u
#define MAGIC 8388608.0f

// Column (0..7) of nibble i of an AWQ word: AWQ's interleaved order 0 2 4 6 1 3 5 7.
__host__ __device__ __forceinline__ int awq_column_of_nibble(int i)
{
    return ((i & 3) << 1) | (i >> 2);
}

// ---- int8 GEMV ----------------------------------------------------------------------

struct int8_gemv_params {
    const int8_t *q;       // [out][in]
    const __half *scales;  // [out][in / group]
    const void *x, *bias;  // x [in], bias [out] or NULL
    void *y;               // [out]
    int in, out, group;
};

// The 4 signed bytes of w as f32, exactly: each byte biased to unsigned
// (xor 0x80), placed in the mantissa of 2^23 by a byte permute, less 2^23 + 128.
// Two instructions a byte instead of a quarter-rate integer conversion.
__device__ __forceinline__ void int8x4_to_f32(uint32_t w, float (&f)[4])
{
    const uint32_t u = w ^ 0x80808080u;
#pragma unroll
    for (int i = 0; i < 4; i++)
        f[i] = __int_as_float(__byte_perm(u, MAGIC_BITS, 0x7540 | i)) - (MAGIC + 128.0f);
}

// The 16 signed bytes of raw as f32, exactly.
__device__ __forceinline__ void int8x16_to_f32(uint4 raw, float (&q)[16])
{
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float f[4];
        int8x4_to_f32(words[j], f);
#pragma unroll
        for (int i = 0; i < 4; i++)
            q[4 * j + i] = f[i];
    }
}

// sum_i q_i x_i over the 16 bytes of raw.
__device__ __forceinline__ float int8_dot16(uint4 raw, const float (&x)[16])
{
    float q[16], s = 0.0f;
    int8x16_to_f32(raw, q);
#pragma unroll
    for (int i = 0; i < 16; i++)
        s = fmaf(q[i], x[i], s);
    return s;
}

// x[16c .. 16c + 16) as f32 (x 16-byte aligned).
template <typename T>
__device__ __forceinline__ void load_x16(const T *x, int c, float (&xv)[16])
{
    constexpr int V = orin_cu_vec<T>::n;
#pragma unroll
    for (int h = 0; h < 16 / V; h++) {
        float part[V];
        orin_cu_load16(x + (size_t)c * 16 + h * V, part);
#pragma unroll
        for (int i = 0; i < V; i++)
            xv[h * V + i] = part[i];
    }
}

// y = (q * s) x (+ bias). Launch: grid ceil(out / (8 RW)), 256 threads: a warp
// per RW rows (no shared memory, no block barrier: a warp's shuffle sum ends
// it). VEC (in and group multiples of 16, q and x 16-byte aligned): lane l
// takes the 16-byte chunks l, l + 32, ... of its rows, INT8_UNROLL x RW of
// them in flight; one chunk lies in one group, so its dot is scaled once.
// Otherwise single bytes, lane-strided. Bound by the weight bytes: a warp a
// row keeps even 1,024-row products (k/v) at 128 blocks with their loads in
// flight, where a block a row would be latency-bound.
template <typename T, int RW, bool VEC>
__global__ void __launch_bounds__(GEMV_THREADS) int8_gemv_kernel(int8_gemv_params p)
{
    const T *x = (const T *)p.x;
    const int groups = p.in / p.group;
    const int lane = threadIdx.x & 31;
    const int row0 = (blockIdx.x * (GEMV_THREADS / 32) + (threadIdx.x >> 5)) * RW;
    int rows[RW];
#pragma unroll
    for (int r = 0; r < RW; r++)
        rows[r] = min(row0 + r, p.out - 1); // past the end: a real row, result dropped
    // PDL prologue (orin/cuda_util.cuh): the previous kernel wrote x.
    orin_cu_allow_next();
    orin_cu_wait_prior();
    float acc[RW] = {};
    if (VEC) {
        // a chunk past the end reads the row's chunk 0 again and is not counted
        const int chunks = p.in / 16;
        for (int c0 = lane; c0 < chunks; c0 += INT8_UNROLL * 32) {
            uint4 raw[INT8_UNROLL][RW];
#pragma unroll
            for (int u = 0; u < INT8_UNROLL; u++) {
                const int c = c0 + u * 32 < chunks ? c0 + u * 32 : 0;
#pragma unroll
                for (int r = 0; r < RW; r++)
                    raw[u][r] = load_weights16(p.q + (size_t)rows[r] * p.in + (size_t)c * 16);
            }
#pragma unroll
            for (int u = 0; u < INT8_UNROLL; u++) {
                const int c = c0 + u * 32;
                if (c >= chunks)
                    break;
                float xv[16];
                load_x16(x, c, xv);
                const int g = c * 16 / p.group;
#pragma unroll
                for (int r = 0; r < RW; r++)
                    acc[r] = fmaf(int8_dot16(raw[u][r], xv),
                                  __half2float(p.scales[(size_t)rows[r] * groups + g]), acc[r]);
            }
        }
    } else {
        for (int k = lane; k < p.in; k += 32) {
            const float xk = orin_cu_f32(x[k]);
#pragma unroll
            for (int r = 0; r < RW; r++) {
                const float s = __half2float(p.scales[(size_t)rows[r] * groups + k / p.group]);
                acc[r] = fmaf(xk, (float)p.q[(size_t)rows[r] * p.in + k] * s, acc[r]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RW; r++) {
        const float sum = orin_cu_warp_sum(acc[r]);
        if (lane == 0 && row0 + r < p.out) {
            const float b = p.bias ? orin_cu_f32(((const T *)p.bias)[row0 + r]) : 0.0f;
            ((T *)p.y)[row0 + r] = orin_cu_from_f32<T>(sum + b);
        }
    }
}

template <typename T, int RW>
static void launch_int8_gemv(const orin_exec *ex, const int8_gemv_params &p, bool vec)
{
    const int per_block = RW * (GEMV_THREADS / 32);
    orin_cu_launch(ex, true, vec ? int8_gemv_kernel<T, RW, true> : int8_gemv_kernel<T, RW, false>,
                   dim3((p.out + per_block - 1) / per_block), dim3(GEMV_THREADS), 0, p);
}

// Rows a warp takes: 2 where that still leaves 16 warps per SM, else 1.
template <typename T>
static void int8_gemv(const orin_exec *ex, const int8_gemv_params &p)
{
    const bool vec = p.in % 16 == 0 && p.group % 16 == 0 && orin_cu_aligned16(p.q) &&
                     orin_cu_aligned16(p.x);
    if (p.out >= 2 * 16 * orin_cu_sm_count(ex))
        launch_int8_gemv<T, 2>(ex, p, vec);
    else
        launch_int8_gemv<T, 1>(ex, p, vec);
}

// ---- AWQ GEMV -----------------------------------------------------------------------

// Ticket counters, one slab per stream (so that two streams never share one):
// this module's own device memory, zero at load and left at zero by every
// launch, which the shared workspace could not be (other ops scribble on it).
__device__ unsigned awq_counters[AWQ_COUNTER_SLABS][AWQ_COUNTERS];
static orin_cu_stream_slots awq_slabs = ORIN_CU_STREAM_SLOTS_INIT;

struct awq_gemv_params {
    const uint32_t *qweight, *zeros; // [in][out/8], [groups][out/8]
    const __half *scales;            // [groups][out]
    const void *x, *bias;            // x [in], bias [out] or NULL
    void *y;                         // [out]
    float *partials;                 // [ksplit][out] (ksplit > 1)
    int slab;                        // awq_counters' slab of the stream (ksplit > 1)
    int in, out, group;
    int k_per_block, ksplit;
};

template <int WPT>
__device__ __forceinline__ void load_awq_words(const uint32_t *p, uint32_t (&w)[WPT])
{
    if (WPT == 2) {
        uint2 v = load_weights8(p);
        w[0] = v.x;
        w[WPT - 1] = v.y;
    } else {
        w[0] = load_weights4(p);
    }
}

// y[col] = sum + bias[col], rounded to T.
template <typename T>
__device__ __forceinline__ void store_out(const awq_gemv_params &p, int col, float sum)
{
    if (p.bias)
        sum += orin_cu_f32(((const T *)p.bias)[col]);
    ((T *)p.y)[col] = orin_cu_from_f32<T>(sum);
}

// The end of a block of either AWQ kernel, after its warps' sums met in shared
// memory: total(c) is the block's sum for column strip0 + c of its STRIP.
// One split: y = total + bias. Several: each block writes its partial, and the
// last of the strip's blocks to take a ticket (threadFenceReduction's pattern:
// each block's writes are visible before its ticket is taken) sums the
// partials in block order, AWQ_SUM_BATCH loads in flight (one after another,
// an L2 round trip each, they would cost more than the product), stores y and
// resets the counter for the next launch on this stream.
template <typename T, int STRIP, typename Total>
__device__ __forceinline__ void awq_finish(const awq_gemv_params &p, Total total)
{
    __shared__ bool last;
    const int strip0 = blockIdx.x * STRIP;
    for (int c = threadIdx.x; c < STRIP && strip0 + c < p.out; c += GEMV_THREADS) {
        if (p.ksplit == 1)
            store_out<T>(p, strip0 + c, total(c));
        else
            p.partials[(size_t)blockIdx.y * p.out + strip0 + c] = total(c);
    }
    if (p.ksplit == 1)
        return;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(&awq_counters[p.slab][blockIdx.x], 1u) == (unsigned)p.ksplit - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    for (int c = threadIdx.x; c < STRIP && strip0 + c < p.out; c += GEMV_THREADS) {
        const float *col = p.partials + strip0 + c;
        float sum = 0.0f;
        int b = 0;
        for (; b + AWQ_SUM_BATCH <= p.ksplit; b += AWQ_SUM_BATCH) {
            float v[AWQ_SUM_BATCH];
#pragma unroll
            for (int j = 0; j < AWQ_SUM_BATCH; j++)
                v[j] = __ldcg(col + (size_t)(b + j) * p.out);
#pragma unroll
            for (int j = 0; j < AWQ_SUM_BATCH; j++)
                sum += v[j];
        }
        for (; b < p.ksplit; b++)
            sum += __ldcg(col + (size_t)b * p.out);
        store_out<T>(p, strip0 + c, sum);
    }
    if (threadIdx.x == 0)
        awq_counters[p.slab][blockIdx.x] = 0;
}

// The 8 nibbles of an AWQ word as f32, each in the mantissa of 2^23 at its
// own place: nibble i of the word at bits b_i of the float (nibble_unit(i) =
// 2^b_i), so that the float is 2^23 + q 2^b_i exactly. Nibbles 0-4 stay where they
// are (bits 0-19 of the word), 5-7 come from the word shifted right by 12: one
// shift and one LOP3 a nibble, no per-nibble shift. Subtracting
// 2^23 + z 2^b_i leaves (q - z) 2^b_i, exact; the power
// of two comes off with the scale at the end of the group.
// (a & MASK) | c in one LOP3 (lut 0xEA). Written as PTX: from C the compiler
// folds both constants in and splits it in two (LOP3 takes one immediate).
template <uint32_t MASK>
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t c)
{
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "n"(MASK), "r"(c));
    return d;
}

// `magic` is MAGIC_BITS held in a register (see and_or).
__device__ __forceinline__ void awq_nibbles(uint32_t w, uint32_t magic, float (&m)[8])
{
    const uint32_t hi = w >> 12;
    m[0] = __int_as_float(and_or<0xFu>(w, magic));
    m[1] = __int_as_float(and_or<0xF0u>(w, magic));
    m[2] = __int_as_float(and_or<0xF00u>(w, magic));
    m[3] = __int_as_float(and_or<0xF000u>(w, magic));
    m[4] = __int_as_float(and_or<0xF0000u>(w, magic));
    m[5] = __int_as_float(and_or<0xF00u>(hi, magic));
    m[6] = __int_as_float(and_or<0xF000u>(hi, magic));
    m[7] = __int_as_float(and_or<0xF0000u>(hi, magic));
}

// part += x[k + u] (q[u] - zero) for the batch's rows inside the segment (a
// row past it, read again as the segment's last, counts 0 times).
template <int WPT>
__device__ __forceinline__ void awq_batch_fma(const uint32_t (&q)[AWQ_BATCH][WPT],
                                              const float *xs, int k, int seg_end, int block_k,
                                              uint32_t magic, const float (&zero)[8 * WPT],
                                              float (&part)[8 * WPT])
{
#pragma unroll
    for (int u = 0; u < AWQ_BATCH; u++) {
        const float xk = xs[min(k + u, seg_end - 1) - block_k] * (k + u < seg_end ? 1.0f : 0.0f);
#pragma unroll
        for (int w = 0; w < WPT; w++) {
            float m[8];
            awq_nibbles(q[u][w], magic, m);
#pragma unroll
            for (int i = 0; i < 8; i++)
                part[8 * w + i] = fmaf(xk, m[i] - zero[8 * w + i], part[8 * w + i]);
        }
    }
}

// The words of rows k..k+AWQ_BATCH-1 (clamped to the segment's last row).
template <int WPT>
__device__ __forceinline__ void awq_load_batch(const uint32_t *qweight, int words, int word0,
                                               int k, int seg_end,
                                               uint32_t (&q)[AWQ_BATCH][WPT])
{
    const uint32_t *row = qweight + (size_t)k * words + word0;
#pragma unroll
    for (int u = 0; u < AWQ_BATCH; u++)
        load_awq_words<WPT>(row + (size_t)min(u, seg_end - 1 - k) * words, q[u]);
}

__device__ __forceinline__ float nibble_unit(int i)
{
    return (float)(1u << (i < 5 ? 4 * i : 4 * i - 12));
}

// Launch: grid (strips, ksplit), 256 threads (8 warps). Block (s, b) owns the
// strip of 32 x WPT words (256 x WPT outputs) at s and the k rows
// [b K, (b + 1) K), K = k_per_block, a multiple of 64 and at most AWQ_MAX_K;
// warp w takes K / 8 of them, lane l the WPT words at (32 s + l) WPT of each
// row: a warp reads 128 x WPT contiguous bytes a row, AWQ_BATCH rows (all of a
// batch's loads issued before the first use). x[block's rows] is staged in
// shared memory as f32 once. Per group a thread sums x[k] (q - z) (awq_nibbles
// less the zero, exact) and then multiplies by the scale. The 8 warps' sums
// meet in shared memory (32 x (8 WPT + 1) floats a warp, padded against bank
// conflicts); with ksplit > 1 each block writes its partial and the last of
// the strip's blocks (a ticket counter, reset by that block) sums them in
// block order and stores y. Per nibble: 1 LOP3, 1 FADD, 1 FFMA (+1 SHF a word):
// about 3 instructions a weight, so the 4-bit stream is issue-bound near 3 TB/s
// on an H100; the partials (ksplit x out floats) stay in L2.
template <typename T, int WPT>
__global__ void __launch_bounds__(GEMV_THREADS, AWQ_MIN_BLOCKS) awq_gemv_kernel(awq_gemv_params p)
{
    constexpr int COLS = 8 * WPT;   // outputs a thread owns
    constexpr int STRIP = 32 * COLS;
    constexpr int WARPS = GEMV_THREADS / 32;
    __shared__ float red[WARPS][32 * (COLS + 1)];
    __shared__ float xs[AWQ_MAX_K];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int words = p.out / 8;
    const int word0 = (blockIdx.x * 32 + lane) * WPT;
    const bool active = word0 < words;

    float acc[COLS] = {};
    const int per_warp = p.k_per_block / WARPS;
    const int block_k = blockIdx.y * p.k_per_block;
    const int block_end = min(block_k + p.k_per_block, p.in);
    int k = block_k + warp * per_warp;
    const int k_end = min(k + per_warp, block_end);

    // PDL prologue (orin/cuda_util.cuh): the previous kernel wrote x.
    orin_cu_allow_next();
    orin_cu_wait_prior();
    for (int i = threadIdx.x; i < block_end - block_k; i += GEMV_THREADS)
        xs[i] = orin_cu_f32(((const T *)p.x)[block_k + i]);
    __syncthreads();

    uint32_t magic = MAGIC_BITS;
    asm volatile("" : "+r"(magic)); // a register, not an immediate (awq_nibbles)
    while (active && k < k_end) {
        const int g = k / p.group;
        const int seg_end = min(k_end, (g + 1) * p.group);
        float zero[COLS], part[COLS] = {};
#pragma unroll
        for (int w = 0; w < WPT; w++) {
            const uint32_t z = __ldg(p.zeros + (size_t)g * words + word0 + w);
#pragma unroll
            for (int i = 0; i < 8; i++)
                zero[8 * w + i] = MAGIC + (float)((z >> (4 * i)) & 15u) * nibble_unit(i);
        }
        // Batches of AWQ_BATCH rows, double-buffered (qa, qb by turns): the
        // next batch's words are loaded before this one is used, so that a
        // thread always has a batch of loads in flight (the compiler would
        // otherwise issue each load just before its use).
        uint32_t qa[AWQ_BATCH][WPT], qb[AWQ_BATCH][WPT];
        awq_load_batch<WPT>(p.qweight, words, word0, k, seg_end, qa);
        for (;;) {
            if (k + AWQ_BATCH < seg_end)
                awq_load_batch<WPT>(p.qweight, words, word0, k + AWQ_BATCH, seg_end, qb);
            awq_batch_fma<WPT>(qa, xs, k, seg_end, block_k, magic, zero, part);
            if ((k += AWQ_BATCH) >= seg_end)
                break;
            if (k + AWQ_BATCH < seg_end)
                awq_load_batch<WPT>(p.qweight, words, word0, k + AWQ_BATCH, seg_end, qa);
            awq_batch_fma<WPT>(qb, xs, k, seg_end, block_k, magic, zero, part);
            if ((k += AWQ_BATCH) >= seg_end)
                break;
        }
        const __half *s = p.scales + (size_t)g * p.out + (size_t)word0 * 8;
#pragma unroll
        for (int w = 0; w < WPT; w++)
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[8 * w + i] = fmaf(__half2float(s[8 * w + awq_column_of_nibble(i)]) /
                                          nibble_unit(i),
                                      part[8 * w + i], acc[8 * w + i]);
    }

    // The warps' sums in column order: lane l's column e at l (COLS + 1) + e.
#pragma unroll
    for (int w = 0; w < WPT; w++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            red[warp][lane * (COLS + 1) + 8 * w + awq_column_of_nibble(i)] = acc[8 * w + i];
    __syncthreads();
    awq_finish<T, STRIP>(p, [&](int c) {
        float total = 0.0f;
#pragma unroll
        for (int wp = 0; wp < WARPS; wp++)
            total += red[wp][c / COLS * (COLS + 1) + c % COLS];
        return total;
    });
}

// ---- AWQ GEMV on tensor cores (f16, bf16; sm_80+; ORIN_AWQ_DECODE=mma) -----------
//
// The CUDA-core kernel above spends ~3 instructions a weight and is issue-bound
// near 1.3 TB/s on an H100 (bench/notes/quant.md). This variant, kept beside it
// (llm.c's way: versions side by side, each tested), was predicted at ~2.4 TB/s
// and measured at 0.8: see the notes for why it missed. Here the multiply-adds go to
// mma.sync m16n8k16 with f32 accumulators: x is row 0 of the A tile (rows 1-15
// zero), the dequantized weights (q - z, exact in f16/bf16) are B, and row 0 of
// D is the tile's 8 outputs' dot products over 16 k. B's fragment gives lane
// (g, t) column g at k = 2t, 2t+1, 2t+8, 2t+9: a lane loads those 4 rows' words
// of word column g of the warp's 8, and each of a word's 8 nibbles is column g
// of one of 8 tiles (tile i: nibble i of the 8 words). A nibble pair of two
// rows becomes a 2-element register by one byte permute (the two words' byte
// i/2 side by side), a shift for the odd nibbles, and one LOP3 into the
// mantissa of 1024 (f16) or 128 (bf16); subtracting base + z in the same type
// leaves q - z exactly: ~1.5 instructions a weight. Scales multiply the f32
// sums once a group (group a multiple of 16).
//
// Launch: grid (out / 64, ksplit), 256 threads (8 warps); block (s, b): the 64
// outputs of words 8s..8s+7 and rows [b K, (b + 1) K), K a multiple of 512;
// warp w takes K / 8 rows in batches of AWQ_MMA_CHUNKS 16-row chunks (4 x
// AWQ_MMA_CHUNKS word loads a lane in flight). The 8 warps' sums meet in
// shared memory (8 x 64 floats); then awq_finish. Bound by the packed weight
// bytes (a warp's load is 4 rows x 32 contiguous bytes: whole sectors).
#define AWQ_MMA_STRIP 64
#define AWQ_MMA_CHUNKS 4
#define AWQ_MMA_K_QUANTUM (8 * 16 * AWQ_MMA_CHUNKS)

template <typename T> struct awq_mma_type;
template <> struct awq_mma_type<__half> {
    static constexpr uint32_t MAGIC2 = 0x64006400u; // f16 1024 in both halves
    static constexpr float BASE = 1024.0f;
};
template <> struct awq_mma_type<__nv_bfloat16> {
    static constexpr uint32_t MAGIC2 = 0x43004300u; // bf16 128 in both halves
    static constexpr float BASE = 128.0f;
};

// Nibble i of words a (low half) and b (high half) in the mantissa of BASE:
// the register (BASE + q_a, BASE + q_b) of type T.
template <typename T>
__device__ __forceinline__ uint32_t awq_nibble_pair(uint32_t a, uint32_t b, int i)
{
    uint32_t v = __byte_perm(a, b, (uint32_t)(i >> 1) | ((uint32_t)(4 + (i >> 1)) << 8));
    if (i & 1)
        v >>= 4;
    return and_or<0x000F000Fu>(v, awq_mma_type<T>::MAGIC2);
}

// x - y elementwise on two 2-element registers of T (exact for our integers).
template <typename T> __device__ __forceinline__ uint32_t sub2(uint32_t x, uint32_t y);
template <> __device__ __forceinline__ uint32_t sub2<__half>(uint32_t x, uint32_t y)
{
    __half2 r = __hsub2(*reinterpret_cast<__half2 *>(&x), *reinterpret_cast<__half2 *>(&y));
    return *reinterpret_cast<uint32_t *>(&r);
}
template <> __device__ __forceinline__ uint32_t sub2<__nv_bfloat16>(uint32_t x, uint32_t y)
{
    __nv_bfloat162 r = __hsub2(*reinterpret_cast<__nv_bfloat162 *>(&x),
                               *reinterpret_cast<__nv_bfloat162 *>(&y));
    return *reinterpret_cast<uint32_t *>(&r);
}

template <typename T>
__global__ void __launch_bounds__(GEMV_THREADS) awq_gemv_mma_kernel(awq_gemv_params p)
{
    constexpr int WARPS = GEMV_THREADS / 32;
    __shared__ float red[WARPS][AWQ_MMA_STRIP];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int words = p.out / 8;
    const int word = blockIdx.x * 8 + g; // this lane's word column
    const uint32_t *x2 = (const uint32_t *)p.x; // x as pairs of T

    const int per_warp = p.k_per_block / WARPS;
    const int block_end = min((blockIdx.y + 1) * p.k_per_block, p.in);
    int k = blockIdx.y * p.k_per_block + warp * per_warp;
    const int k_end = min(k + per_warp, block_end);

    orin_cu_allow_next(); // PDL (orin/cuda_util.cuh): the previous kernel wrote x
    orin_cu_wait_prior();

    float acc[8][2] = {}; // lanes 0-3: outputs 8 (word0 + 2t + e) + column of nibble i
    float d[8][4] = {};   // the tiles' accumulators over the current group
    uint32_t zero[8];     // (BASE + z, BASE + z) of nibble i of this lane's word
    int group = -1;
    for (; k < k_end; k += 16 * AWQ_MMA_CHUNKS) {
        // the batch's words: rows k0 + 2t, +1, +8, +9 of each chunk (a chunk
        // past the warp's rows reads the first one again and is skipped)
        uint32_t w[AWQ_MMA_CHUNKS][4];
#pragma unroll
        for (int c = 0; c < AWQ_MMA_CHUNKS; c++) {
            const int k0 = k + 16 * c < k_end ? k + 16 * c : k;
            const int rows[4] = {k0 + 2 * t, k0 + 2 * t + 1, k0 + 2 * t + 8, k0 + 2 * t + 9};
#pragma unroll
            for (int r = 0; r < 4; r++)
                w[c][r] = load_weights4(p.qweight + (size_t)rows[r] * words + word);
        }
#pragma unroll
        for (int c = 0; c < AWQ_MMA_CHUNKS; c++) {
            const int k0 = k + 16 * c;
            if (k0 >= k_end)
                break;
            if (k0 / p.group != group) { // a new group: its zeros
                group = k0 / p.group;
                const uint32_t zw = __ldg(p.zeros + (size_t)group * words + word);
#pragma unroll
                for (int i = 0; i < 8; i++)
                    zero[i] = awq_nibble_pair<T>(zw, zw, i);
            }
            // A: x[k0 .. k0 + 16) in row 0 (lanes 0-3), zero elsewhere
            const uint32_t a0 = g == 0 ? __ldg(x2 + (k0 >> 1) + t) : 0u;
            const uint32_t a2 = g == 0 ? __ldg(x2 + (k0 >> 1) + t + 4) : 0u;
#pragma unroll
            for (int i = 0; i < 8; i++)
                orin_cu_mma16816<T>(d[i], a0, 0u, a2, 0u,
                                    sub2<T>(awq_nibble_pair<T>(w[c][0], w[c][1], i), zero[i]),
                                    sub2<T>(awq_nibble_pair<T>(w[c][2], w[c][3], i), zero[i]));
            const bool group_ends = (k0 + 16) % p.group == 0 || k0 + 16 >= k_end;
            if (group_ends && g == 0) { // row 0 of D: outputs of words 2t, 2t + 1
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const uint4 s16 = *reinterpret_cast<const uint4 *>(
                        p.scales + (size_t)group * p.out + (size_t)(blockIdx.x * 8 + 2 * t + e) * 8);
                    const __half *sc = reinterpret_cast<const __half *>(&s16);
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        acc[i][e] = fmaf(__half2float(sc[awq_column_of_nibble(i)]), d[i][e],
                                         acc[i][e]);
                }
            }
            if (group_ends)
#pragma unroll
                for (int i = 0; i < 8; i++)
                    d[i][0] = d[i][1] = d[i][2] = d[i][3] = 0.0f;
        }
    }

    if (g == 0)
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                red[warp][(2 * t + e) * 8 + awq_column_of_nibble(i)] = acc[i][e];
    __syncthreads();
    awq_finish<T, AWQ_MMA_STRIP>(p, [&](int c) {
        float total = 0.0f;
#pragma unroll
        for (int wp = 0; wp < WARPS; wp++)
            total += red[wp][c];
        return total;
    });
}

// Words a thread takes: 2 (8-byte loads) where every row of words is 8-byte
// aligned, else 1.
static int awq_words_per_thread(const orin_qweight *w, int64_t out)
{
    return AWQ_MAX_WPT == 2 && (out / 8) % 2 == 0 && ((uintptr_t)w->qweight.data & 7u) == 0
               ? 2
               : 1;
}

static int64_t awq_strips(int64_t out, int wpt)
{
    return (out / 8 + 32 * wpt - 1) / (32 * wpt);
}

// How an AWQ decode runs: the kernel (tensor cores or CUDA cores, and then its
// words a thread), its strips of outputs, and the split-K: k rows a block (a
// multiple of the kernel's quantum) so that the grid holds about
// AWQ_BLOCKS_PER_SM blocks per SM; one split where the strips alone fill the
// GPU or there are more strips than counters.
struct awq_plan {
    bool mma;
    int wpt;
    int64_t strips;
    int k_per_block, ksplit;
};

// Whether the tensor-core kernel takes the call: asked for (ORIN_AWQ_DECODE=mma:
// measured slower than the CUDA-core kernel so far, 6.47 against 5.12 ms a
// Qwen3-8B step on an H100, bench/notes/quant.md, so it is not the default),
// f16/bf16 on sm_80+, whole 16-row chunks within groups, whole 64-output
// strips, x in 4-byte pairs.
static bool awq_mma_fits(const orin_exec *ex, const orin_matmul_quant_args *a, orin_dtype dt,
                         int64_t in, int64_t out)
{
    static int asked = -1;
    if (asked < 0) {
        const char *env = getenv("ORIN_AWQ_DECODE");
        asked = env && strcmp(env, "mma") == 0;
    }
    return asked && (dt == ORIN_F16 || dt == ORIN_BF16) && orin_cu_cc_major(ex) >= 8 &&
           a->w.group_size % 16 == 0 && in % 16 == 0 && out % AWQ_MMA_STRIP == 0 &&
           ((uintptr_t)a->x.data & 3u) == 0;
}

static awq_plan awq_plan_for(int sms, bool mma, int wpt, int64_t in, int64_t out)
{
    awq_plan pl = {.mma = mma, .wpt = wpt, .strips = 0, .k_per_block = 0, .ksplit = 1};
    pl.strips = mma ? out / AWQ_MMA_STRIP : awq_strips(out, wpt);
    pl.strips = pl.strips > 0 ? pl.strips : 1; /* out < 8: one empty strip */
    const int64_t quantum = mma ? AWQ_MMA_K_QUANTUM : AWQ_K_QUANTUM;
    const int64_t min_k = mma ? AWQ_MMA_K_QUANTUM : AWQ_MIN_K;
    const int64_t max_k = mma ? (in + quantum - 1) / quantum * quantum : AWQ_MAX_K;
    sms = sms < AWQ_MAX_SMS ? sms : AWQ_MAX_SMS;
    int64_t want = ((int64_t)AWQ_BLOCKS_PER_SM * sms + pl.strips - 1) / pl.strips;
    if (pl.strips > AWQ_COUNTERS || want < 1)
        want = 1;
    int64_t k = (in + want - 1) / want;
    k = (k + quantum - 1) / quantum * quantum;
    k = k > min_k ? k : min_k;
    k = k < max_k ? k : max_k;
    pl.k_per_block = (int)k;
    pl.ksplit = (int)((in + k - 1) / k);
    return pl;
}

// The split-K's partials: ksplit x out floats, at their most (either kernel,
// the widest strips, the largest GPU counted).
static size_t awq_partials_bytes(int64_t in, int64_t out)
{
    size_t most = 0;
    for (int kind = 0; kind < 3; kind++) {
        const awq_plan pl = awq_plan_for(AWQ_MAX_SMS, kind == 2, kind == 1 ? 1 : 2, in, out);
        const size_t b = (size_t)pl.ksplit * (size_t)out * sizeof(float);
        most = b > most ? b : most;
    }
    return most;
}

template <typename T>
static void awq_gemv(const orin_exec *ex, const awq_gemv_params &p, const awq_plan &pl)
{
    const dim3 grid((unsigned)pl.strips, (unsigned)p.ksplit), block(GEMV_THREADS);
    if (pl.mma) {
        if constexpr (sizeof(T) == 2)
            orin_cu_launch(ex, true, awq_gemv_mma_kernel<T>, grid, block, 0, p);
        return;
    }
    orin_cu_launch(ex, true, pl.wpt == 2 ? awq_gemv_kernel<T, 2> : awq_gemv_kernel<T, 1>, grid,
                   block, 0, p);
}

// ---- dequantizing a slice (prefill) ---------------------------------------------------

// dst[0..N) = v rounded to T, in 16-byte stores (dst 16-byte aligned, N x
// sizeof(T) a multiple of 16).
template <typename T, int N>
__device__ __forceinline__ void store_floats(T *dst, const float (&v)[N])
{
    constexpr int V = orin_cu_vec<T>::n;
#pragma unroll
    for (int h = 0; h < N / V; h++) {
        float part[V];
#pragma unroll
        for (int i = 0; i < V; i++)
            part[i] = v[h * V + i];
        orin_cu_store16(dst + h * V, part);
    }
}

// wt[k][c] = w[c0 + c][k] for c < cols (a multiple of 8): the AWQ slice in its
// own k-major order. Launch: grid-stride over in x cols/8 words, 256 threads;
// a thread reads one word, its zero word and 8 scales, and writes 8 outputs
// (16 or 32 contiguous bytes). Bound by the bytes written.
template <typename T>
__global__ void awq_dequant_kernel(const uint32_t *__restrict__ qweight,
                                   const uint32_t *__restrict__ zeros,
                                   const __half *__restrict__ scales, T *__restrict__ wt, int in,
                                   int out, int group, int c0, int cols)
{
    const int words = out / 8, slice_words = cols / 8;
    const int64_t total = (int64_t)in * slice_words;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int k = (int)(t / slice_words), j = (int)(t % slice_words), g = k / group;
        const uint32_t q = qweight[(size_t)k * words + c0 / 8 + j];
        const uint32_t z = zeros[(size_t)g * words + c0 / 8 + j];
        // the 8 scales in one 16-byte load (out and c0 are multiples of 8)
        const uint4 s16 = *reinterpret_cast<const uint4 *>(scales + (size_t)g * out + c0 + 8 * j);
        const __half *s = reinterpret_cast<const __half *>(&s16);
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[awq_column_of_nibble(i)] =
                (float)((int)((q >> (4 * i)) & 15u) - (int)((z >> (4 * i)) & 15u)) *
                __half2float(s[awq_column_of_nibble(i)]);
        store_floats<T>(wt + (size_t)k * cols + 8 * j, v);
    }
}

// w[r][k] = q[r0 + r][k] * s[r0 + r][k / group] for r < rows: the int8 slice
// in its own [out][in] order. Launch: grid-stride, 256 threads; VEC (in and
// group multiples of 16, q 16-byte aligned): 16 weights a thread, one 16-byte
// load and 16 x sizeof(T) bytes of stores; else one weight a thread. Bound by
// the bytes written.
template <typename T, bool VEC>
__global__ void int8_dequant_kernel(const int8_t *__restrict__ q, const __half *__restrict__ scales,
                                    T *__restrict__ w, int in, int group, int r0, int rows)
{
    const int groups = in / group;
    const int per = VEC ? 16 : 1;
    const int64_t total = (int64_t)rows * in / per;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = r0 + t * per / in;
        const int k = (int)(t * per % in);
        const float sc = __half2float(scales[r * groups + k / group]);
        if (!VEC) {
            w[t] = orin_cu_from_f32<T>((float)q[r * in + k] * sc);
            continue;
        }
        float v[16];
        int8x16_to_f32(*reinterpret_cast<const uint4 *>(q + r * in + k), v);
#pragma unroll
        for (int i = 0; i < 16; i++)
            v[i] *= sc;
        store_floats<T>(w + t * 16, v);
    }
}

static unsigned grid_for(const orin_exec *ex, int64_t items)
{
    int64_t blocks = (items + GEMV_THREADS - 1) / GEMV_THREADS;
    int64_t cap = (int64_t)orin_cu_sm_count(ex) * 16;
    return (unsigned)(blocks < cap ? blocks : cap);
}

// Outputs a slice holds: as many as SLICE_BYTES of dequantized weights take
// (a multiple of 64 where it can, of 8 at least), at most out.
static int64_t slice_outputs(int64_t in, int64_t out, orin_dtype dt)
{
    int64_t cols = (int64_t)(SLICE_BYTES / ((size_t)in * orin_dtype_size(dt)));
    cols = cols >= 64 ? cols / 64 * 64 : 8;
    return cols < out ? cols : out;
}

static size_t slice_bytes(int64_t in, int64_t out, orin_dtype dt)
{
    size_t b = (size_t)slice_outputs(in, out, dt) * (size_t)in * orin_dtype_size(dt);
    return (b + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
}

// ---- the ops ------------------------------------------------------------------------

struct quant_call {
    const char *label;
    orin_weight_format fmt;
    orin_dtype dt;
    int64_t n, in, out;
};

// Prefill: dequantize a slice of outputs, multiply, next slice. The workspace
// holds the slice, then cuBLASLt's own.
static int quant_prefill(const orin_exec *ex, const orin_matmul_quant_args *a,
                         const quant_call *c)
{
    const size_t need = slice_bytes(c->in, c->out, c->dt);
    const uintptr_t base = ((uintptr_t)ex->workspace + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
    const size_t pad = base - (uintptr_t)ex->workspace;
    if (!ex->workspace || ex->workspace_size < pad + need)
        return orin_error_set("%s: workspace of %zu bytes, %zu needed", c->label,
                              ex->workspace_size, pad + need);
    void *slice = (void *)base, *lt_ws;
    size_t lt_bytes = cuda_matmul_usable_workspace((char *)slice + need,
                                                   ex->workspace_size - pad - need, &lt_ws);
    const int64_t cols = slice_outputs(c->in, c->out, c->dt);
    const size_t elem = orin_dtype_size(c->dt);
    const orin_qweight *w = &a->w;
    const bool int8_vec = c->in % 16 == 0 && w->group_size % 16 == 0 &&
                          orin_cu_aligned16(w->qweight.data);
    for (int64_t o0 = 0; o0 < c->out; o0 += cols) {
        const int64_t rows = c->out - o0 < cols ? c->out - o0 : cols;
        const unsigned blocks = grid_for(ex, c->fmt == ORIN_WEIGHT_AWQ4 ? c->in * rows / 8
                                             : int8_vec                 ? c->in * rows / 16
                                                                        : c->in * rows);
        cudaStream_t stream = orin_cu_stream(ex);
        if (c->fmt == ORIN_WEIGHT_AWQ4) {
            ORIN_CU_DISPATCH(c->dt, c->label, T,
                             awq_dequant_kernel<T><<<blocks, GEMV_THREADS, 0, stream>>>(
                                 (const uint32_t *)w->qweight.data,
                                 (const uint32_t *)w->zeros.data, (const __half *)w->scales.data,
                                 (T *)slice, (int)c->in, (int)c->out, w->group_size, (int)o0,
                                 (int)rows));
        } else if (int8_vec) {
            ORIN_CU_DISPATCH(c->dt, c->label, T,
                             int8_dequant_kernel<T, true><<<blocks, GEMV_THREADS, 0, stream>>>(
                                 (const int8_t *)w->qweight.data, (const __half *)w->scales.data,
                                 (T *)slice, (int)c->in, w->group_size, (int)o0, (int)rows));
        } else {
            ORIN_CU_DISPATCH(c->dt, c->label, T,
                             int8_dequant_kernel<T, false><<<blocks, GEMV_THREADS, 0, stream>>>(
                                 (const int8_t *)w->qweight.data, (const __half *)w->scales.data,
                                 (T *)slice, (int)c->in, w->group_size, (int)o0, (int)rows));
        }
        if (orin_cu_launched(c->label, c->dt, "dequantize w [%lld, %lld] rows %lld..%lld",
                             (long long)c->out, (long long)c->in, (long long)o0,
                             (long long)(o0 + rows)))
            return -1;
        const bool kmajor = c->fmt == ORIN_WEIGHT_AWQ4;
        const cuda_gemm g = {
            .n = c->n, .in = c->in, .out = rows,
            .x = a->x.data, .w = slice,
            .bias = a->bias.data ? (const char *)a->bias.data + (size_t)o0 * elem : NULL,
            .y = (char *)a->y.data + (size_t)o0 * elem,
            .w_kmajor = kmajor, .ldw = kmajor ? rows : c->in, .ldy = c->out,
        };
        if (cuda_lt_gemm(ex, c->label, c->dt, &g, lt_ws, lt_bytes) != 0)
            return -1;
    }
    return 0;
}

static int awq_decode(const orin_exec *ex, const orin_matmul_quant_args *a, const quant_call *c)
{
    const awq_plan pl = awq_plan_for(orin_cu_sm_count(ex), awq_mma_fits(ex, a, c->dt, c->in, c->out),
                                     awq_words_per_thread(&a->w, c->out), c->in, c->out);
    awq_gemv_params p = {
        .qweight = (const uint32_t *)a->w.qweight.data,
        .zeros = (const uint32_t *)a->w.zeros.data,
        .scales = (const __half *)a->w.scales.data,
        .x = a->x.data, .bias = a->bias.data, .y = a->y.data,
        .partials = NULL, .slab = -1,
        .in = (int)c->in, .out = (int)c->out, .group = a->w.group_size,
        .k_per_block = pl.k_per_block, .ksplit = pl.ksplit,
    };
    if (p.ksplit > 1 && pl.strips > AWQ_COUNTERS)
        return orin_error_set("%s: w [%lld, %lld]: more than %d outputs with more than %d "
                              "inputs (the decode kernel's limits)", c->label, (long long)c->out,
                              (long long)c->in, AWQ_COUNTERS * 32 * pl.wpt * 8, AWQ_MAX_K);
    if (p.ksplit > 1) {
        const size_t need = (size_t)p.ksplit * (size_t)c->out * sizeof(float);
        if (!ex->workspace || ex->workspace_size < need || !orin_cu_aligned16(ex->workspace))
            return orin_error_set("%s: workspace of %zu bytes, %zu needed (16-byte aligned)",
                                  c->label, ex->workspace_size, need);
        p.partials = (float *)ex->workspace;
        p.slab = orin_cu_stream_slot(&awq_slabs, ex, AWQ_COUNTER_SLABS);
        if (p.slab < 0)
            return orin_error_set("%s: split-K counters for more than %d streams", c->label,
                                  AWQ_COUNTER_SLABS);
    }
    ORIN_CU_DISPATCH(c->dt, c->label, T, awq_gemv<T>(ex, p, pl));
    return orin_cu_launched(c->label, c->dt, "awq gemv (%s): x [1, %lld], w [%lld, %lld], group %d",
                            pl.mma ? "tensor cores" : "cuda cores", (long long)c->in,
                            (long long)c->out, (long long)c->in, a->w.group_size);
}

static int int8_decode(const orin_exec *ex, const orin_matmul_quant_args *a, const quant_call *c)
{
    const int8_gemv_params p = {
        .q = (const int8_t *)a->w.qweight.data,
        .scales = (const __half *)a->w.scales.data,
        .x = a->x.data, .bias = a->bias.data, .y = a->y.data,
        .in = (int)c->in, .out = (int)c->out, .group = a->w.group_size,
    };
    ORIN_CU_DISPATCH(c->dt, c->label, T, int8_gemv<T>(ex, p));
    return orin_cu_launched(c->label, c->dt, "int8 gemv: x [1, %lld], w [%lld, %lld], group %d",
                            (long long)c->in, (long long)c->out, (long long)c->in,
                            a->w.group_size);
}

static int matmul_quant(const orin_exec *ex, const orin_matmul_quant_args *a,
                        orin_weight_format fmt, orin_dtype dt, const char *label)
{
    if (orin_check_matmul_quant(label, ex, a, fmt, CUDA, dt))
        return -1;
    if (dt != ORIN_F32 && dt != ORIN_F16 && dt != ORIN_BF16)
        return orin_error_set("%s: dtype %s is not supported on cuda", label,
                              orin_dtype_name(dt));
    const quant_call c = {
        .label = label, .fmt = fmt, .dt = dt,
        .n = orin_tensor_rows(&a->x),
        .in = a->x.shape[a->x.ndim - 1],
        .out = a->y.shape[a->y.ndim - 1],
    };
    if (c.in > INT32_MAX || c.out > INT32_MAX)
        return orin_error_set("%s: dimensions beyond 2^31 (w [%lld, %lld])", label,
                              (long long)c.out, (long long)c.in);
    if (c.n > 1)
        return quant_prefill(ex, a, &c);
    return fmt == ORIN_WEIGHT_AWQ4 ? awq_decode(ex, a, &c) : int8_decode(ex, a, &c);
}

extern "C" int cuda_matmul_awq4(const orin_exec *ex, const orin_matmul_quant_args *a,
                                orin_dtype dt)
{
    return matmul_quant(ex, a, ORIN_WEIGHT_AWQ4, dt, "matmul.awq4 (common)");
}

extern "C" int cuda_matmul_int8(const orin_exec *ex, const orin_matmul_quant_args *a,
                                orin_dtype dt)
{
    return matmul_quant(ex, a, ORIN_WEIGHT_INT8, dt, "matmul.int8 (common)");
}

// The larger of the prefill's (a slice, then cuBLASLt's workspace) and the
// AWQ decode's (the split-K partials), for the widest call the args describe.
extern "C" size_t cuda_matmul_quant_workspace_size(const void *args)
{
    const orin_matmul_quant_args *a = (const orin_matmul_quant_args *)args;
    if (!a || a->x.ndim < 1 || a->y.ndim < 1)
        return 0;
    const int64_t in = a->x.shape[a->x.ndim - 1], out = a->y.shape[a->y.ndim - 1];
    if (in < 1 || out < 1)
        return 0;
    const size_t prefill = SLICE_ALIGN + slice_bytes(in, out, a->x.dtype) +
                           cuda_matmul_workspace_size(args);
    const size_t decode = awq_partials_bytes(in, out);
    return prefill > decode ? prefill : decode;
}
