// attention_fa2's CUDA decode, part 1 of 4, included by cuda_decode.cu only (its
// header comment describes the kernels): the instrumentation switches, the
// launch parameters (fa2d_params), the device helpers every kernel shares (the
// pieces of 0..p, the K/V prefetch, loads), the split kernels' shared memory,
// the combine kernel and the end of a split block.
#ifndef ORIN_ATTENTION_FA2_CUDA_DECODE_COMMON_CUH
#define ORIN_ATTENTION_FA2_CUDA_DECODE_COMMON_CUH

#include "cuda.h"

#include "orin/cuda_util.cuh"

#include <cooperative_groups.h>
#include <math.h>
#include <stdint.h>

// Knock-outs, for timing only (bench/knockouts.sh attention; any bit set makes
// the results wrong): where a short decode's fixed cost goes, as
// QMMA_KNOCKOUT does for the quantized GEMV, in the cluster kernel (AUTO's
// pick up to 8k positions; bits 2 and 4 reach fa2d_split_mma too, through
// the warp range they share). Bits: 1 no PDL wait; 2 no K/V steps (no K/V
// loads, no mma: each warp's state stays empty); 4 no reads of p and q after
// the wait (p taken as max_kv_len - 1, q as zeros); 8 no merge: neither the
// block's nor the cluster's, each warp writing the sum of its state instead.
#ifndef FA2D_KNOCKOUT
#define FA2D_KNOCKOUT 0
#endif
enum { FA2D_KO_WAIT = 1, FA2D_KO_STEPS = 2, FA2D_KO_INPUTS = 4, FA2D_KO_MERGE = 8 };
// Where output d of row r sits in a warp's O rows [rows][HD] in shared memory:
// bits 1-2 of d flipped by (r / 2) % 4, so that the pairs
// fa2d_mma_store_warp stores (lane (g, t): rows 2t and 2t + 1, columns 8g + c
// and 8g + c + 1) fall in distinct banks within each half-warp (unswizzled,
// the 4 t of a half-warp hit the same banks: 4 ways), while any 32
// consecutive outputs of a row, which the merges read, stay in 32 banks (a
// permutation within each 8). Stores and loads of those rows all go through it.
// H200, Qwen3-8B: the stores' phase of the cluster kernel ~1,030 -> ~575
// cycles; attention_bench at 512 5.78 -> 5.00 us; the steps at 512 AWQ -0.021
// ms, int8 -0.015 (bench/notes/fa2-decode.md, fourteenth session).
template <int HD> __device__ __forceinline__ int fa2d_o_col(int r, int d)
{
    return HD % 8 == 0 ? d ^ ((r >> 1 & 3) << 1) : d;
}

// Timeline, for timing only (-DFA2D_TIMELINE=1): thread 0 of each block of
// unit 0 of the cluster kernel stamps %globaltimer and clock64 at its marks
// (start, wait, range, steps, warps stored, block merged, barrier 1, outputs,
// barrier 2), and the host prints them every 50th eager call to stderr
// (bench/fa2_timeline.sh). FA2D_MARK reads the kernel's `rank`.
#ifndef FA2D_TIMELINE
#define FA2D_TIMELINE 0
#endif
#if FA2D_TIMELINE
__device__ unsigned long long fa2d_tl[16][9][2];
#define FA2D_MARK(k, dep)                                                                   \
    do {                                                                                    \
        if (blockIdx.y == 0 && threadIdx.x == 0 && rank < 16) {                             \
            unsigned long long g_, c_;                                                      \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g_) : "f"((float)(dep)));      \
            asm volatile("mov.u64 %0, %%clock64;" : "=l"(c_) : "l"(g_));                    \
            fa2d_tl[rank][k][0] = g_;                                                       \
            fa2d_tl[rank][k][1] = c_;                                                       \
        }                                                                                   \
    } while (0)
#else
#define FA2D_MARK(k, dep) do {} while (0)
#endif

namespace cg = cooperative_groups;

enum {
    FA2D_WARPS = 4,
    FA2D_THREADS = FA2D_WARPS * 32,
    FA2D_ALIGN = 64,       // split lengths are multiples of this (a block step of every kernel)
    FA2D_MAX_SPLITS = 512,  // the combine keeps R x this many weights in shared memory
    FA2D_MMA_ROWS = 8,     // query rows a block of the mma kernel takes (the mma's n)
    FA2D_SIMT_ROWS = 4,    // at most, in the simt kernel (registers: q and acc are R x 8 f32)
    FA2D_SLABS = 8,        // streams that can run the fused variant
    FA2D_SLAB_COUNTERS = 1024,
    FA2D_CLUSTER_WARPS = 16,   // warps a block of the cluster kernel (default; "cwarps=8")
    FA2D_CLUSTER_SHORT = 8192, // max_kv_len up to which the cluster kernel runs even on part of the SMs
    FA2D_CLUSTER_TINY = 4096,  // ... up to which clusters of 16 8-warp blocks may be picked
    FA2D_PREFETCH_LONG = 4,    // warp steps from which a piece takes the default prefetch
    FA2D_PREFETCH_SHORT_BYTES = 3 << 20, // ... and a call's K/V bytes up to which every piece does
};

// The fused variant's arrival counters: [slab][kv head * row chunks + chunk].
__device__ unsigned int fa2d_counters[FA2D_SLABS][FA2D_SLAB_COUNTERS];

struct fa2d_params {
    const void *q;               // [H, hd]
    void *out;                   // [H, hd]
    const int32_t *positions;    // [1]
    orin_kv_view cache;
    float scale;                 // the call's scale; times log2(e) for the exp2 kernels
    int32_t max_kv_len;
    int heads, head_dim, group;  // H, hd, H / Hkv
    int row_chunks;              // ceil(group / R), R: the kernel's rows per block
    int splits;
    float *partial_o;            // [splits, H, hd]
    float *partial_lse;          // [splits, H]
    int slab;                    // fused: the counter slab; -1: two-kernel
    int prefetch_steps;          // K/V warp steps prefetched before the PDL wait (fa2d_prefetch_warp)
    int skew;                    // cluster kernel, testing ("skew=N"): the position read
                                 // before the wait taken as p - N, so that every call reruns
};

// ---- small device helpers ----

__device__ __forceinline__ float fa2d_nan(void)
{
    return __int_as_float(0x7fc00000);
}

// exp in the kernel's score units: base 2 for the f16/bf16 kernels (log2(e) is
// folded into the scale: one more rounding, ~1e-6 relative in p at scores of
// tens, far under their 1e-2), base e for f32, exact to the library's expf.
template <bool LOG2> __device__ __forceinline__ float fa2d_exp(float x)
{
    return LOG2 ? exp2f(x) : expf(x);
}

// The natural-log lse of a running (m, l) in the kernel's units.
template <bool LOG2> __device__ __forceinline__ float fa2d_lse(float m, float l)
{
    return LOG2 ? (m + log2f(l)) * 0.69314718055994531f : m + logf(l);
}

// The pieces of positions 0..p: n = p + 1 positions (0 when p is invalid) in
// pieces of `len` (a multiple of FA2D_ALIGN); pieces 0 .. active - 1 are not
// empty, the rest are.
struct fa2d_pieces {
    int64_t n, len;
    int active;
};

// The length of each of `splits` pieces of n positions.
__device__ __forceinline__ int64_t fa2d_piece_len(int64_t n, int splits)
{
    return ((n + splits - 1) / splits + FA2D_ALIGN - 1) / FA2D_ALIGN * FA2D_ALIGN;
}

__device__ __forceinline__ fa2d_pieces fa2d_cut_at(const fa2d_params &P, int32_t p)
{
    fa2d_pieces c;
    c.n = (p >= 0 && p < P.max_kv_len) ? (int64_t)p + 1 : 0;
    c.len = fa2d_piece_len(c.n, P.splits);
    c.active = c.len ? (int)((c.n + c.len - 1) / c.len) : 0;
    return c;
}

__device__ __forceinline__ fa2d_pieces fa2d_cut(const fa2d_params &P)
{
    return fa2d_cut_at(P, P.positions[0]);
}

// This block's piece: [*begin, *end), empty when begin >= end (past p, or p
// invalid: then every piece is empty).
__device__ __forceinline__ void fa2d_range_at(const fa2d_params &P, int32_t p, int split,
                                              int64_t *begin, int64_t *end)
{
    const fa2d_pieces c = fa2d_cut_at(P, p);
    *begin = (int64_t)split * c.len;
    *end = *begin + c.len < c.n ? *begin + c.len : c.n;
}

__device__ __forceinline__ void fa2d_range(const fa2d_params &P, int split, int64_t *begin,
                                           int64_t *end)
{
    fa2d_range_at(P, P.positions[0], split, begin, end);
}

// The warp's first steps of K and V rows (rows base + s * stride .. + 15 for
// s < steps, of this block's piece `split`, warps interleaved by 16 positions)
// into L2: P.prefetch_steps of them, or with -1 one where the piece has
// FA2D_PREFETCH_LONG steps a warp or the call's whole K/V is FA2D_PREFETCH_SHORT_BYTES
// at most (otherwise the prefetch takes more of the previous kernel's bandwidth
// than it saves), or none with 0. Called BEFORE
// the PDL wait, so that the
// first DRAM round trips overlap the previous kernel's tail (the combine of the
// call before, or rope_kv_write). Safe whatever that kernel writes: a prefetch
// only fills L2, where every write lands, and moves no data into the SM. p is
// read here without the wait, as a hint: a value the previous kernel is about
// to change only makes the prefetch useless, never the result wrong (the read
// is volatile, so the kernel reads positions again after the wait), and a p
// outside 0..max_kv_len - 1 prefetches nothing (rows below max_kv_len are in
// the cache). Two 128-byte lines a row at hd 128, one at hd 64.
template <typename T, int HD>
__device__ __forceinline__ void fa2d_prefetch_warp(const fa2d_params &P, int split, int kvh,
                                                   int64_t stride)
{
    if (P.prefetch_steps == 0)
        return;
    const int32_t p = *(const volatile int32_t *)P.positions;
    int64_t begin, end;
    fa2d_range_at(P, p, split, &begin, &end); // empty for an invalid p
    // the call's K and V bytes: what a prefetch of every piece would pull
    const int64_t bytes = ((int64_t)p + 1) * (P.heads / P.group) * HD * (int64_t)sizeof(T) * 2;
    const bool longer = end - begin >= FA2D_PREFETCH_LONG * stride;
    const int steps = P.prefetch_steps > 0 ? P.prefetch_steps
                      : longer || bytes <= FA2D_PREFETCH_SHORT_BYTES ? 1
                                                                     : 0;
    constexpr int LINES = HD * (int)sizeof(T) / 128, PER_STEP = 16 * 2 * LINES;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const T *K = (const T *)P.cache.k, *V = (const T *)P.cache.v;
    for (int s = 0; s < steps; s++) {
        const int64_t base = begin + 16 * warp + s * stride;
        if (base >= end)
            break;
        for (int i = lane; i < PER_STEP; i += 32) {
            const int row = i / (2 * LINES), tensor = i / LINES % 2, line = i % LINES;
            if (base + row < end) {
                const T *a = (tensor ? V : K) + orin_kv_offset(&P.cache, base + row, kvh) +
                             line * (128 / (int)sizeof(T));
                orin_cu_prefetch_l2(a);
            }
        }
    }
}

// Whether position p is one the call may decode (a row of the cache below max_kv_len).
__device__ __forceinline__ bool fa2d_valid_at(const fa2d_params &P, int32_t p)
{
    return p >= 0 && p < P.max_kv_len;
}

// 16 bytes of a K/V row (16-byte aligned), or zeros for a masked position (its
// memory is not touched). The L2::256B hint fetches the rest of the 256-byte
// row segment with the first access: the next load instructions of the step
// read it.
__device__ __forceinline__ uint4 fa2d_ld16(const void *p, bool ok)
{
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (ok)
        asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p));
    return v;
}

// ---- shared memory ----

// Per-warp results of a block (m, l in the kernel's units; o unnormalised),
// then reused by the fused combine for the split weights and partial sums.
template <int R> struct fa2d_combine_smem {
    float w[R][FA2D_MAX_SPLITS];     // exp(lse_s - max) of each row
    float4 part[2 * FA2D_THREADS];   // partial sums of the split groups
    float inv[R];                    // 1 / sum of each row's weights
    unsigned int last;               // fused: this block combines
};

template <int R, int HD> union __align__(16) fa2d_smem { // 16: fa2d_mma_store_warp stores pairs
    struct {
        float o[FA2D_WARPS][R][HD];
        float m[FA2D_WARPS][R];
        float l[FA2D_WARPS][R];
    } merge;
    fa2d_combine_smem<R> combine;
};

// ---- the combine (both variants) ----

// Output rows head0 .. head0 + rows - 1 (R >= rows) from the active splits'
// partials; the whole block (FA2D_THREADS) calls it, and it ends with a
// barrier. For each split the rows' partial outputs are one contiguous run of
// rows x hd floats, read as float4 columns: a thread takes a column and a
// group of splits (every G-th), many loads in flight. Reads through L2
// (__ldcg): in the fused variant other blocks wrote them during this launch.
//
// EARLY (the two-kernel combine, which has the registers): the first batch of
// the thread's first item is loaded before the weights, which it does not
// depend on, so that the partials and the lse come back in one round trip.
template <typename T, int R, bool EARLY>
__device__ void fa2d_combine_rows(const fa2d_params &P, int head0, int rows, int active,
                                  fa2d_combine_smem<R> &cs)
{
    constexpr int PER_LANE = FA2D_MAX_SPLITS / 32, BATCH = 16;
    const int H = P.heads, hd = P.head_dim, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int cols = rows * hd / 4, per_row = hd / 4;
    const int G = cols >= FA2D_THREADS ? 1 : FA2D_THREADS / cols;
    const int64_t split_stride = (int64_t)H * hd / 4; // float4s from one split to the next
    const float4 *base = reinterpret_cast<const float4 *>(P.partial_o + (int64_t)head0 * hd);
    float4 early[EARLY ? BATCH : 1];
    if (EARLY) {
        const int c = tid % cols, grp = tid / cols;
#pragma unroll
        for (int k = 0; k < BATCH; k++) {
            const int s = grp + k * G;
            early[k] = tid < cols * G && s < active ? __ldcg(base + s * split_stride + c)
                                                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
    // Each row's weights relative to its largest lse (a warp a row; every
    // lse of the row in flight at once).
    for (int r = warp; r < rows; r += FA2D_WARPS) {
        const float *lse = P.partial_lse + head0 + r;
        float v[PER_LANE], mx = -INFINITY;
#pragma unroll
        for (int k = 0; k < PER_LANE; k++) {
            const int s = lane + 32 * k;
            v[k] = s < active ? __ldcg(lse + (int64_t)s * H) : -INFINITY;
            mx = fmaxf(mx, v[k]);
        }
        mx = orin_cu_warp_max(mx);
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < PER_LANE; k++) {
            const int s = lane + 32 * k;
            if (s < active) {
                const float e = expf(v[k] - mx);
                cs.w[r][s] = e;
                sum += e;
            }
        }
        sum = orin_cu_warp_sum(sum); // NaN data: NaN, and so the row
        if (lane == 0)
            cs.inv[r] = 1.0f / sum;
    }
    __syncthreads();
    for (int item = tid; item < cols * G; item += FA2D_THREADS) {
        const int c = item % cols, grp = item / cols, r = c / per_row;
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        // BATCH loads in flight, then their sums (one L2 round trip a batch).
        for (int s0 = grp; s0 < active; s0 += BATCH * G) {
            const bool loaded = EARLY && item == tid && s0 == grp;
            float4 o[BATCH];
            float e[BATCH];
#pragma unroll
            for (int k = 0; k < BATCH; k++) {
                const int s = s0 + k * G;
                if (loaded)
                    o[k] = early[EARLY ? k : 0];
                else
                    o[k] = s < active ? __ldcg(base + s * split_stride + c)
                                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                e[k] = s < active ? cs.w[r][s] : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < BATCH; k++) {
                acc.x += e[k] * o[k].x;
                acc.y += e[k] * o[k].y;
                acc.z += e[k] * o[k].z;
                acc.w += e[k] * o[k].w;
            }
        }
        cs.part[item] = acc;
    }
    __syncthreads();
    T *out = (T *)P.out + (int64_t)head0 * hd;
    for (int c = tid; c < cols; c += FA2D_THREADS) {
        float4 acc = cs.part[c];
        for (int g = 1; g < G; g++) {
            const float4 o = cs.part[g * cols + c];
            acc.x += o.x;
            acc.y += o.y;
            acc.z += o.z;
            acc.w += o.w;
        }
        const float inv = cs.inv[c / per_row];
        out[4 * c] = orin_cu_from_f32<T>(acc.x * inv);
        out[4 * c + 1] = orin_cu_from_f32<T>(acc.y * inv);
        out[4 * c + 2] = orin_cu_from_f32<T>(acc.z * inv);
        out[4 * c + 3] = orin_cu_from_f32<T>(acc.w * inv);
    }
    __syncthreads();
}

// Output rows head0 .. head0 + rows - 1: combined, or NaN for an invalid position.
template <typename T, int R, bool EARLY>
__device__ void fa2d_combine_or_nan(const fa2d_params &P, int head0, int rows,
                                    fa2d_combine_smem<R> &cs)
{
    const fa2d_pieces c = fa2d_cut(P);
    if (c.active == 0) { // p invalid (block-uniform)
        T *out = (T *)P.out + (int64_t)head0 * P.head_dim;
        for (int i = threadIdx.x; i < rows * P.head_dim; i += FA2D_THREADS)
            out[i] = orin_cu_from_f32<T>(fa2d_nan());
        return;
    }
    fa2d_combine_rows<T, R, EARLY>(P, head0, rows, c.active, cs);
}

// Two-kernel variant. Launch: grid (H), FA2D_THREADS threads, ~6 KB static
// shared memory; one block per query head, the hd / 4 float4 columns times
// 128 / (hd / 4) split groups. Reads active x (hd + 1) floats per head from L2;
// latency-bound: the lse and the first 16 partials a thread come back in one
// round trip (EARLY), up to 64 splits at hd 128; 168 registers, one block a head.
template <typename T> __global__ void __launch_bounds__(FA2D_THREADS) fa2d_combine(const fa2d_params P)
{
    __shared__ fa2d_combine_smem<1> cs;
    orin_cu_allow_next();
    orin_cu_wait_prior();
    fa2d_combine_or_nan<T, 1, true>(P, blockIdx.x, 1, cs);
}

// ---- the end of a split block (both kernels) ----

// Merges the block's warps (smem.merge, filled by the caller) into this split's
// partial rows: O normalised by l, and lse. Rows head0 .. head0 + rows - 1.
template <int R, int HD, bool LOG2>
__device__ void fa2d_write_partial(const fa2d_params &P, fa2d_smem<R, HD> &sm, int split,
                                   int head0, int rows)
{
    __syncthreads();
    for (int i = threadIdx.x; i < rows * HD; i += FA2D_THREADS) {
        const int r = i / HD, d = i % HD;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < FA2D_WARPS; w++)
            M = fmaxf(M, sm.merge.m[w][r]);
        // Warp 0 holds the piece's first position, so M is finite (or NaN data).
        float L = 0.0f, O = 0.0f;
#pragma unroll
        for (int w = 0; w < FA2D_WARPS; w++) {
            float mw = sm.merge.m[w][r];
            float e = mw == -INFINITY ? 0.0f : fa2d_exp<LOG2>(mw - M);
            L += e * sm.merge.l[w][r];
            O += e * sm.merge.o[w][r][fa2d_o_col<HD>(r, d)];
        }
        const int64_t row = (int64_t)split * P.heads + head0 + r;
        P.partial_o[row * HD + d] = O / L;
        if (d == 0)
            P.partial_lse[row] = fa2d_lse<LOG2>(M, L);
    }
}

// An empty piece: lse = -inf marks it (O is not written). The combine reads
// only the active pieces, which it counts from p itself.
__device__ __forceinline__ void fa2d_write_empty(const fa2d_params &P, int split, int head0,
                                                 int rows)
{
    if ((int)threadIdx.x < rows)
        P.partial_lse[(int64_t)split * P.heads + head0 + threadIdx.x] = -INFINITY;
}

// Fused variant: counts this block in; the last of the unit's splits combines
// the unit's rows and resets the counter for the next launch.
template <typename T, int R, int HD>
__device__ void fa2d_finish_fused(const fa2d_params &P, fa2d_smem<R, HD> &sm, int unit, int head0,
                                  int rows)
{
    __threadfence(); // this thread's partial writes, before the count (release)
    __syncthreads(); // every thread's, and smem.merge is no longer read
    if (threadIdx.x == 0) {
        unsigned int *counter = &fa2d_counters[P.slab][unit];
        unsigned int ticket = atomicAdd(counter, 1u);
        sm.combine.last = ticket == (unsigned int)P.splits - 1;
        if (sm.combine.last)
            atomicExch(counter, 0u);
    }
    __syncthreads();
    if (!sm.combine.last) // block-uniform
        return;
    __threadfence(); // acquire: the other blocks' partials
    fa2d_combine_or_nan<T, R, false>(P, head0, rows, sm.combine);
}

// A split kernel's block: its unit (kv head, first query row, rows of it) and
// its piece [begin, end) of the cache, from the grid (split, unit).
struct fa2d_block {
    int split, unit, kvh, head0, rows;
    int64_t begin, end;
};

// The block's coordinates for R-row chunks; false when its piece is empty: then
// it is written as such (and the fused combine run where the call uses it) and
// the block is done. Block-uniform.
template <typename T, int R, int HD>
__device__ __forceinline__ bool fa2d_split_block(const fa2d_params &P, fa2d_smem<R, HD> &sm,
                                                 fa2d_block *b)
{
    b->split = blockIdx.x;
    b->unit = blockIdx.y;
    b->kvh = b->unit / P.row_chunks;
    const int chunk = b->unit % P.row_chunks;
    b->head0 = b->kvh * P.group + chunk * R;
    b->rows = min(R, P.group - chunk * R);
    fa2d_range(P, b->split, &b->begin, &b->end);
    if (b->begin < b->end)
        return true;
    fa2d_write_empty(P, b->split, b->head0, b->rows);
    if (P.slab >= 0)
        fa2d_finish_fused<T, R, HD>(P, sm, b->unit, b->head0, b->rows);
    return false;
}

#endif
