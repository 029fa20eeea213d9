// FlashAttention-2 decode on CUDA: split-KV ("Flash-Decoding"), GQA-native.
//
// One query row (n == 1) attends cache positions 0..p, p = positions[0] read
// from device memory inside the kernels. The cache is cut into `splits` pieces;
// a block is (split, kv head, row chunk) and its rows are the query heads of
// that kv head (up to 8 of them; more go to further row chunks), so each K/V
// byte it loads serves the whole group. Each block writes its partial output,
// normalised by its own l, and lse = m + log(l) into the f32 workspace:
//     workspace = O_s [splits, H, hd], then lse_s [splits, H]
// and the combine computes lse = log(sum_s exp(lse_s)) and
//     out = sum_s exp(lse_s - lse) O_s
// over the splits that saw a position (the others write lse_s = -inf and no
// O_s; the combine counts the active ones from p and reads only those).
//
// Graph safety: the grid (splits) follows the SM count and max_kv_len only,
// never p. Inside the kernel the split length follows p: the p + 1 positions
// are cut into `splits` pieces of a multiple of 64, so a graph captured at the
// cache capacity replayed at a short position still spreads its work over
// every block (the pieces past p exit at once). run() never synchronises,
// allocates, or reads device memory.
//
// Positions: p outside 0..max_kv_len-1 (device memory, unchecked on the host)
// gives a NaN output row and reads no K/V; max_kv_len <= capacity is checked on
// the host, so no value of p leads to an out-of-bounds access. Cache slots past
// p (NaN in the tests) are never loaded: a masked position's K and V registers
// are zero and its score is -inf, so its weight is exactly 0.
//
// Two split kernels, one workspace format:
//   mma  (f16, bf16; 16-byte aligned cache rows; sm_80+): S^T = K Q^T and
//        O^T += V^T P^T on tensor cores (mma.sync m16n8k16, f32 accumulators),
//        with K and V fed to the mma straight from 16-byte global loads (the dot
//        products' dimension order is permuted consistently for K and Q; V is
//        re-paired with byte permutes). P is rounded to the cache dtype as the
//        mma operand (as every flash kernel does): the weights sum to exactly 1
//        since l sums the rounded values. Scores, softmax and accumulators f32.
//   simt (f32, any cache alignment, or ORIN_FA2_DECODE_CONFIG=simt): CUDA cores,
//        f32 throughout; lanes split head_dim in 16-byte pieces, warp-shuffle
//        sums give the scores.
// and a variant of the mma kernel, the default where the split kernel runs
// (two-kernel, fused, and AUTO where it picks two-kernel): fa2d_split_cp, the
// same math on K and V staged through shared memory with cp.async, so that a
// warp's next tiles stay in flight through its math; the same partials bit for
// bit. 32k on an H200: 40.9 -> 40.0 us (ORIN_FA2_DECODE_CONFIG "cpasync=0"
// runs fa2d_split_mma for comparison).
// Three ways to merge the pieces, chosen per call (ORIN_FA2_DECODE_CONFIG can
// force one):
//   cluster (sm_90, the mma kernel): the pieces are the blocks of one
//        thread-block cluster per (kv head, row chunk), which merge over
//        distributed shared memory: one launch, no workspace
//        (fa2d_cluster_mma, blocks of 16 warps, or of 8 up to 4k positions
//        where 16 whole SMs a cluster do not fit). Chosen where every unit's
//        cluster runs at once and either they cover >= 80 % of the SMs or
//        max_kv_len <= 8192 (fa2d_cluster_size). H200, Qwen3-8B shape, graph
//        replay: 1k 7.4 us against 10.3 two-kernel, 8k 17.1 against 18.0;
//        H100: 1k 7.9 us (16 x 8 warps) against 8.3 (8 x 16).
//   two-kernel (the rest): a second kernel, one block per query head, combines.
//   fused: the last block of a (kv head, row chunk) to finish, found
//        with an atomic counter, combines that chunk's rows: one launch. The
//        counters are this module's own device memory (zero at load), not the
//        workspace: a model shares one workspace between all its ops, so nothing
//        left there survives to the next call, and a test poisons it. One slab
//        per stream, so that two streams never share a counter; every launch
//        leaves them zero again (its last block resets its counter).
// Measured (H100, Qwen3-8B shape, graph replay, bench/attention.sh): two-kernel
// is faster than fused at every length (1k: 8.7 against 9.1 us; 8k: 20.5
// against 24.0; 32k: 53.3 against 56.9), against the prediction that the second
// launch would cost more than the counter: in a graph the launch is cheap,
// while the last block's combine serialises behind the slowest split and its
// counter fence. fused remains for comparison.
//
// Before the PDL wait, the cp.async split kernel and the cluster kernel may
// prefetch their first K/V rows into L2 (fa2d_prefetch_warp), so that the first
// DRAM round trip overlaps the previous kernel's tail: by default one warp step
// where the call's piece has at least 4 steps a warp (long contexts), or where
// the call's whole K/V is at most 3 MB (short ones: the prefetch is all of it).
// H100, graph replay: 32k 53.4 -> 52.4 us, 16k 31.7 -> 29.8. Qwen3-8B in a
// model, 8 KV heads: at 513-640 positions (2-2.5 MB) AWQ, int8 and f16 each
// 0.005-0.017 ms a token faster; at 897-1,024 (3.5-4 MB) int8 and f16 faster
// but AWQ, whose q/k/v GEMV the prefetch takes bandwidth from, 0.008 slower;
// at 8k a prefetch of two steps (half the layer's K/V) cost 0.05 ms
// (bench/notes/fa2-decode.md).
//
// ORIN_FA2_DECODE_CONFIG: words joined by '+': "auto", "cluster",
// "cluster=8|12|14|16", "two-kernel" or "fused"; "mma" or "simt"; "cpasync" or
// "cpasync=2|3|4|6" (the mma split kernel through shared memory, with the
// default or that many K/V tiles in flight a warp; "cpasync=0": through
// registers, fa2d_split_mma); "bps=N" (blocks per SM the split count aims at;
// default: the kernel's occupancy); "cwarps=8|16" (the cluster kernel's warps a
// block; default: AUTO's pick); "prefetch=N" (warp steps prefetched before the
// PDL wait, 0..8; default: the rule above). Unset or empty: auto+mma. An
// unknown word is an error.
#include "cuda.h"

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/op_check.h"

#include <cooperative_groups.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#define FA2D_LABEL "attention.decode (fa2)"

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

__device__ __forceinline__ bool fa2d_valid_position(const fa2d_params &P)
{
    const int32_t p = P.positions[0];
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

template <int R, int HD> union fa2d_smem {
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
            O += e * sm.merge.o[w][r][d];
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

// ---- the mma kernel (f16, bf16) ----

template <typename T> struct fa2d_pair;
template <> struct fa2d_pair<__half> {
    // (lo, hi) rounded to f16, as one 32-bit mma operand register; and back.
    static __device__ __forceinline__ uint32_t pack(float lo, float hi, float2 *rounded)
    {
        __half2 h = __floats2half2_rn(lo, hi);
        *rounded = __half22float2(h);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};
template <> struct fa2d_pair<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi, float2 *rounded)
    {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        *rounded = __bfloat1622float2(h);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};

__device__ __forceinline__ uint32_t fa2d_word(const uint4 &v, int i)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Query row `row` (of H), 16-byte chunk `chunk`, as raw dtype bits; zeros past
// the block's rows. Loaded element by element: q carries no alignment promise.
template <typename T>
__device__ __forceinline__ uint4 fa2d_q_chunk(const fa2d_params &P, int row, int chunk, bool ok)
{
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (ok) {
        T e[8];
        const T *src = (const T *)P.q + (int64_t)row * P.head_dim + chunk * 8;
#pragma unroll
        for (int i = 0; i < 8; i++)
            e[i] = src[i];
        memcpy(&v, e, sizeof v);
    }
    return v;
}

// The running state of one lane of the mma kernel: O^T accumulators (query rows
// 2t, 2t+1 x its dims), and those rows' max m and sum l (in log2 units).
template <int HD> struct fa2d_mma_state {
    float o[HD / 16][4];
    float m0, m1, l0, l1;
};

// A warp's state before its first step: m = -inf, l = 0, O = 0 (what an empty
// share leaves).
template <int HD> __device__ __forceinline__ void fa2d_mma_state_clear(fa2d_mma_state<HD> &st)
{
#pragma unroll
    for (int i = 0; i < HD / 16; i++)
        st.o[i][0] = st.o[i][1] = st.o[i][2] = st.o[i][3] = 0.0f;
    st.m0 = st.m1 = -INFINITY;
    st.l0 = st.l1 = 0.0f;
}

// The math of one warp step of 16 positions, shared by the mma kernels (the
// register-load and cp.async split kernels, the cluster kernel). Lane (g, t)
// holds K rows g and g + 8, 16-byte chunks 4j + t (ka, kb); V rows 2t, 2t + 1,
// 2t + 8, 2t + 9, chunks g + 8h (va, vb, vc, vd); masked rows are zeros. See
// fa2d_split_mma for the layouts. (Arrays, not a struct of them: as arrays the
// kernels compile to the SASS they had before these helpers existed.)

// S^T += K Q^T, then scaled: s[0], s[1] = position g, rows 2t, 2t+1; s[2], s[3]
// = position g + 8; -inf where the position is masked (ok0: g, ok1: g + 8).
template <typename T, int HD>
__device__ __forceinline__ void fa2d_mma_scores(const uint4 (&ka)[HD / 32],
                                                const uint4 (&kb)[HD / 32],
                                                const uint4 (&qf)[HD / 32], float scale,
                                                bool ok0, bool ok1, float (&s)[4])
{
#pragma unroll
    for (int j = 0; j < HD / 32; j++) {
        orin_cu_mma16816<T>(s, ka[j].x, kb[j].x, ka[j].y, kb[j].y, qf[j].x, qf[j].y);
        orin_cu_mma16816<T>(s, ka[j].z, kb[j].z, ka[j].w, kb[j].w, qf[j].z, qf[j].w);
    }
    s[0] = ok0 ? s[0] * scale : -INFINITY;
    s[1] = ok0 ? s[1] * scale : -INFINITY;
    s[2] = ok1 ? s[2] * scale : -INFINITY;
    s[3] = ok1 ? s[3] * scale : -INFINITY;
}

// Online softmax of rows 2t, 2t+1 over the step's 16 positions (lanes g):
// updates m, l and rescales O; returns the P^T B operand of O^T += V^T P^T.
template <typename T, int HD>
__device__ __forceinline__ void fa2d_mma_softmax(const float (&s)[4], fa2d_mma_state<HD> &st,
                                                 uint32_t *b0, uint32_t *b1)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float mx0 = fmaxf(s[0], s[2]), mx1 = fmaxf(s[1], s[3]);
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    mx0 = fmaxf(mx0, st.m0);
    mx1 = fmaxf(mx1, st.m1);
    // A row that has seen only masked positions has max -inf: subtract 0 instead
    // (its p are exp2(-inf) = 0, and its alpha multiplies zeros).
    const float mu0 = mx0 == -INFINITY ? 0.0f : mx0, mu1 = mx1 == -INFINITY ? 0.0f : mx1;
    const float alpha0 = exp2f(st.m0 - mu0), alpha1 = exp2f(st.m1 - mu1);
    st.m0 = mx0;
    st.m1 = mx1;
    float2 r01, r23;
    const uint32_t p01 = fa2d_pair<T>::pack(exp2f(s[0] - mu0), exp2f(s[1] - mu1), &r01);
    const uint32_t p23 = fa2d_pair<T>::pack(exp2f(s[2] - mu0), exp2f(s[3] - mu1), &r23);
    st.l0 = st.l0 * alpha0 + (r01.x + r23.x);
    st.l1 = st.l1 * alpha1 + (r01.y + r23.y);
    // Most steps leave every max where it was (alpha 1): skip the rescale then.
    if (__any_sync(0xffffffffu, alpha0 != 1.0f || alpha1 != 1.0f)) {
#pragma unroll
        for (int i = 0; i < HD / 16; i++) {
            st.o[i][0] *= alpha0;
            st.o[i][1] *= alpha1;
            st.o[i][2] *= alpha0;
            st.o[i][3] *= alpha1;
        }
    }

    // P^T B operand: row g, positions (2t, 2t+1) and (2t+8, 2t+9). Position
    // 2t's pair of rows (g & ~1, g | 1) is p01 of lane 4(2t) + g/2 = src_a,
    // position 2t+1's is p01 of src_b = src_a + 4; positions 2t+8, 2t+9 are
    // their p23. The half for row g is the high one when g is odd.
    const int src_a = 8 * t + (g >> 1), src_b = src_a + 4;
    const unsigned int sel = (g & 1) ? 0x7632u : 0x5410u;
    const uint32_t xa = __shfl_sync(0xffffffffu, p01, src_a);
    const uint32_t xb = __shfl_sync(0xffffffffu, p01, src_b);
    const uint32_t ya = __shfl_sync(0xffffffffu, p23, src_a);
    const uint32_t yb = __shfl_sync(0xffffffffu, p23, src_b);
    *b0 = __byte_perm(xa, xb, sel);
    *b1 = __byte_perm(ya, yb, sel);
}

// O^T += V^T P^T, one m-tile (16 dims) at a time: rows g, g + 8 of tile i are
// elements 2(i%4), 2(i%4)+1 of chunk g + 8(i/4), paired by position.
template <typename T, int HD>
__device__ __forceinline__ void fa2d_mma_pv(const uint4 (&va)[HD / 64], const uint4 (&vb)[HD / 64],
                                            const uint4 (&vc)[HD / 64], const uint4 (&vd)[HD / 64],
                                            uint32_t b0, uint32_t b1, fa2d_mma_state<HD> &st)
{
#pragma unroll
    for (int i = 0; i < HD / 16; i++) {
        const int h = i / 4, w = i % 4;
        const uint32_t x0 = fa2d_word(va[h], w), x1 = fa2d_word(vb[h], w);
        const uint32_t x8 = fa2d_word(vc[h], w), x9 = fa2d_word(vd[h], w);
        orin_cu_mma16816<T>(st.o[i], __byte_perm(x0, x1, 0x5410u), __byte_perm(x0, x1, 0x7632u),
                    __byte_perm(x8, x9, 0x5410u), __byte_perm(x8, x9, 0x7632u), b0, b1);
    }
}

// One warp step of the mma kernel: positions base .. base + 15 (MASKED: those
// at or past `end` are not loaded and weigh 0). See fa2d_split_mma.
template <typename T, int HD, bool MASKED>
__device__ __forceinline__ void fa2d_mma_step(const orin_kv_view &cache, int kvh, int64_t base,
                                              int64_t end, const uint4 (&qf)[HD / 32], float scale,
                                              fa2d_mma_state<HD> &st)
{
    constexpr int KJ = HD / 32, VH = HD / 64;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const T *K = (const T *)cache.k, *V = (const T *)cache.v;
    const int64_t pk = base + g, pv = base + 2 * t;
    // A masked position's address is that of `base` (always < end): computed, never loaded.
    const bool ok_k0 = !MASKED || pk < end, ok_k1 = !MASKED || pk + 8 < end;
    const bool ok_v0 = !MASKED || pv < end, ok_v1 = !MASKED || pv + 1 < end;
    const bool ok_v8 = !MASKED || pv + 8 < end, ok_v9 = !MASKED || pv + 9 < end;
    // The lane's first 16 bytes in each row (K: chunk t, V: chunk g); its other
    // chunks are constant byte offsets from there (64 and 128 bytes apart).
    const char *k0 = (const char *)(K + orin_kv_offset(&cache, ok_k0 ? pk : base, kvh)) + 16 * t;
    const char *k1 = (const char *)(K + orin_kv_offset(&cache, ok_k1 ? pk + 8 : base, kvh)) + 16 * t;
    const char *v0 = (const char *)(V + orin_kv_offset(&cache, ok_v0 ? pv : base, kvh)) + 16 * g;
    const char *v1 = (const char *)(V + orin_kv_offset(&cache, ok_v1 ? pv + 1 : base, kvh)) + 16 * g;
    const char *v8 = (const char *)(V + orin_kv_offset(&cache, ok_v8 ? pv + 8 : base, kvh)) + 16 * g;
    const char *v9 = (const char *)(V + orin_kv_offset(&cache, ok_v9 ? pv + 9 : base, kvh)) + 16 * g;

    // Every load of the step first: 2 KJ + 4 VH 16-byte loads in flight.
    uint4 ka[KJ], kb[KJ], va[VH], vb[VH], vc[VH], vd[VH];
#pragma unroll
    for (int j = 0; j < KJ; j++) { // chunk 4j + t
        ka[j] = fa2d_ld16(k0 + 64 * j, ok_k0);
        kb[j] = fa2d_ld16(k1 + 64 * j, ok_k1);
    }
#pragma unroll
    for (int h = 0; h < VH; h++) { // chunk g + 8h
        va[h] = fa2d_ld16(v0 + 128 * h, ok_v0);
        vb[h] = fa2d_ld16(v1 + 128 * h, ok_v1);
        vc[h] = fa2d_ld16(v8 + 128 * h, ok_v8);
        vd[h] = fa2d_ld16(v9 + 128 * h, ok_v9);
    }

    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    fa2d_mma_scores<T, HD>(ka, kb, qf, scale, ok_k0, ok_k1, s);
    uint32_t b0, b1;
    fa2d_mma_softmax<T, HD>(s, st, &b0, &b1);
    fa2d_mma_pv<T, HD>(va, vb, vc, vd, b0, b1, st);
}

// The warp's share of positions [begin, end) of kv head kvh for query rows
// head0 .. head0 + rows - 1 (zero rows pad them to 8): steps of 16 positions,
// the W warps of the block interleaved. st starts fresh; an empty share leaves
// m = -inf, l = 0, O = 0. Ends with l summed over the lanes that share a row.
template <typename T, int HD, int W>
__device__ __forceinline__ void fa2d_mma_warp_range(const fa2d_params &P, int kvh, int head0,
                                                    int rows, int64_t begin, int64_t end,
                                                    fa2d_mma_state<HD> &st)
{
    constexpr int KJ = HD / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    fa2d_mma_state_clear(st);
    int64_t base = begin + 16 * warp;
    if (base < end) { // warp-uniform
        uint4 qf[KJ];
#pragma unroll
        for (int j = 0; j < KJ; j++)
            qf[j] = FA2D_KNOCKOUT & FA2D_KO_INPUTS
                        ? make_uint4(0u, 0u, 0u, 0u)
                        : fa2d_q_chunk<T>(P, head0 + g, 4 * j + t, g < rows);
        const orin_kv_view cache = P.cache;
        if (FA2D_KNOCKOUT & FA2D_KO_STEPS)
            base = end; // warp-uniform: no step runs
        for (; base + 16 <= end; base += 16 * W)
            fa2d_mma_step<T, HD, false>(cache, kvh, base, end, qf, P.scale, st);
        if (base < end) // warp-uniform
            fa2d_mma_step<T, HD, true>(cache, kvh, base, end, qf, P.scale, st);
    }
    // l: this lane's positions only; sum over the 8 lanes g of each t.
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) {
        st.l0 += __shfl_xor_sync(0xffffffffu, st.l0, off);
        st.l1 += __shfl_xor_sync(0xffffffffu, st.l1, off);
    }
}

// The warp's (m, l, O) of the 8 rows into shared memory: o[8][HD], m[8], l[8].
template <int HD>
__device__ __forceinline__ void fa2d_mma_store_warp(const fa2d_mma_state<HD> &st,
                                                    float (*o)[HD], float *m, float *l)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (g == 0) {
        m[2 * t] = st.m0;
        m[2 * t + 1] = st.m1;
        l[2 * t] = st.l0;
        l[2 * t + 1] = st.l1;
    }
#pragma unroll
    for (int i = 0; i < HD / 16; i++) {
        const int d = 8 * (g + 8 * (i / 4)) + 2 * (i % 4);
        o[2 * t][d] = st.o[i][0];
        o[2 * t + 1][d] = st.o[i][1];
        o[2 * t][d + 1] = st.o[i][2];
        o[2 * t + 1][d + 1] = st.o[i][3];
    }
}

// Launch: grid (splits, Hkv * row chunks), 128 threads (4 warps), 20.5 KB static
// shared memory (the warps' results, 4 x 8 x (hd + 2) floats, reused by the fused
// combine for 8 x 512 split weights). A warp takes 16 positions
// a step (warps interleaved, so a block step is 64 positions), for up to 8 query
// rows (the group's; zero rows pad it). Lane (g = lane / 4, t = lane % 4):
//   K: positions g and g + 8, 16-byte chunks 4j + t (j < hd / 32): the mma A
//      operand of S^T = K Q^T (16 positions x 8 rows, k over head_dim) as
//      loaded. The k order within the mma is permuted (chunk 4j + t supplies k
//      2t, 2t+1, 2t+8, 2t+9 of k-steps 2j and 2j+1); Q's B operand (row g, the
//      same chunks) uses the same permutation, so the sums are the dot products.
//   V: positions 2t, 2t+1, 2t+8, 2t+9, chunks g + 8h (h < hd / 64): the A
//      operand of O^T += V^T P^T, re-paired by position with byte permutes.
//   P^T's B operand (row g, positions 2t..) comes from S^T's accumulators (rows
//      2t', 2t'+1 at position g') by 4 shuffles.
// Full steps run unmasked; a piece's last step, if partial, masks.
// Bound: memory bandwidth. 16 loads of 16 bytes in flight per thread a step
// (hd 128), 4 blocks of 4 warps an SM at 128 registers; the tensor cores do
// the arithmetic, about 20 warp instructions a position in all.
template <typename T, int HD>
__global__ void __launch_bounds__(FA2D_THREADS, 4) fa2d_split_mma(const fa2d_params P)
{
    constexpr int R = FA2D_MMA_ROWS;
    __shared__ fa2d_smem<R, HD> sm;
    orin_cu_allow_next(); // PDL (orin/cuda_util.cuh): q and the cache's newest row
    orin_cu_wait_prior(); // come from the kernel before

    const int warp = threadIdx.x >> 5;
    fa2d_block b;
    if (!fa2d_split_block<T, R, HD>(P, sm, &b))
        return;
    fa2d_mma_state<HD> st;
    fa2d_mma_warp_range<T, HD, FA2D_WARPS>(P, b.kvh, b.head0, b.rows, b.begin, b.end, st);
    fa2d_mma_store_warp<HD>(st, sm.merge.o[warp], sm.merge.m[warp], sm.merge.l[warp]);
    fa2d_write_partial<R, HD, true>(P, sm, b.split, b.head0, b.rows);
    if (P.slab >= 0)
        fa2d_finish_fused<T, R, HD>(P, sm, b.unit, b.head0, b.rows);
}

// ---- the cp.async mma kernel (f16, bf16; sm_80+): K and V staged in shared memory ----

// A warp's tiles: 16 positions (one warp step) x hd elements of K or V. Tile
// 2k is the K, tile 2k + 1 the V of the warp's step k; the warp keeps N of
// them in a ring of N slots (tile n in slot n % N).
template <int HD> __host__ __device__ constexpr int fa2d_tile_bytes()
{
    return 16 * HD * 2;
}

// The cp.async kernel's dynamic shared memory: the rings of the 4 warps, then
// (after the loop, in the same bytes) the merge and combine's fa2d_smem.
template <int HD, int N> constexpr size_t fa2d_cp_smem()
{
    constexpr size_t rings = (size_t)FA2D_WARPS * N * fa2d_tile_bytes<HD>();
    return rings > sizeof(fa2d_smem<FA2D_MMA_ROWS, HD>) ? rings
                                                        : sizeof(fa2d_smem<FA2D_MMA_ROWS, HD>);
}

// Tile row r's 16-byte chunk c lives at chunk c ^ fa2d_swz(r) of the row. A
// 16-byte shared load is served a quarter warp (8 lanes) at a time, and rows
// are a multiple of 128 bytes (all 32 banks) long. Unswizzled, a quarter warp's
// K fragment (rows g, g + 1, chunks 4j + t) would hit 4 bank groups twice and
// its V fragment (rows 2t, chunks g, g + 1) 2 groups four times. The XOR flips
// bit 2 between rows 2q and 2q + 1 (K: the two rows take the two halves of the
// 8 groups) and gives rows 0, 2, 4, 6 (and 1, 3, 5, 7) distinct bits 1-2 (V:
// four rows x 2 chunks cover the 8 groups). The copies write a whole 128 bytes
// of one row a quarter warp: conflict-free under any XOR.
__device__ __forceinline__ int fa2d_swz(int row)
{
    return (row & 6) ^ ((row & 1) << 2);
}

// The copies of one tile: rows base .. base + 15 of X (the cache's K or V) for
// kv head kvh into the slot at shared address `slot`. A lane copies 16 bytes
// of a row; one warp instruction takes 512 contiguous-row bytes (2 rows at hd
// 128, 4 at hd 64). MASKED: rows at or past `end` are zero-filled and read
// nothing (their address is that of `base`, always < end).
template <typename T, int HD, bool MASKED>
__device__ __forceinline__ void fa2d_cp_tile(const orin_kv_view &cache, const T *X, int kvh,
                                             int64_t base, int64_t end, uint32_t slot)
{
    constexpr int CPR = HD / 8, RPI = 32 / CPR; // chunks a row, rows an instruction
    const int lane = threadIdx.x & 31, r0 = lane / CPR, c = lane % CPR;
#pragma unroll
    for (int i = 0; i < 16 / RPI; i++) {
        const int r = r0 + RPI * i;
        const bool ok = !MASKED || base + r < end;
        const T *src = X + orin_kv_offset(&cache, ok ? base + r : base, kvh) + 8 * c;
        orin_cu_cp_async16(slot + 16 * (r * CPR + (c ^ fa2d_swz(r))), src, ok ? 16 : 0);
    }
}

// Starts the copy of the K (V_TILE false) or V tile of the warp step at base
// into `slot`, as one commit group; a step past the warp's share (base >= end)
// commits an empty group, so that every tile, real or not, is one group and
// cp.async.wait_group N - 1 always means "the oldest tile has landed".
template <typename T, int HD, bool V_TILE>
__device__ __forceinline__ void fa2d_cp_issue(const orin_kv_view &cache, int kvh, int64_t base,
                                              int64_t end, uint32_t slot)
{
    const T *X = (const T *)(V_TILE ? cache.v : cache.k);
    if (base + 16 <= end) // warp-uniform
        fa2d_cp_tile<T, HD, false>(cache, X, kvh, base, end, slot);
    else if (base < end)
        fa2d_cp_tile<T, HD, true>(cache, X, kvh, base, end, slot);
    orin_cu_cp_async_commit();
}

// The K fragments of a landed tile: rows g, g + 8 (same swizzle), chunks 4j + t.
template <int HD>
__device__ __forceinline__ void fa2d_lds_k(const unsigned char *tile, uint4 (&ka)[HD / 32],
                                           uint4 (&kb)[HD / 32])
{
    constexpr int ROW = HD * 2;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, s = fa2d_swz(g);
#pragma unroll
    for (int j = 0; j < HD / 32; j++) {
        const int c = (4 * j + t) ^ s;
        ka[j] = *reinterpret_cast<const uint4 *>(tile + g * ROW + 16 * c);
        kb[j] = *reinterpret_cast<const uint4 *>(tile + (g + 8) * ROW + 16 * c);
    }
}

// The V fragments of a landed tile: rows 2t, 2t + 1, 2t + 8, 2t + 9, chunks g + 8h.
template <int HD>
__device__ __forceinline__ void fa2d_lds_v(const unsigned char *tile, uint4 (&va)[HD / 64],
                                           uint4 (&vb)[HD / 64], uint4 (&vc)[HD / 64],
                                           uint4 (&vd)[HD / 64])
{
    constexpr int ROW = HD * 2;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int s0 = fa2d_swz(2 * t), s1 = fa2d_swz(2 * t + 1);
#pragma unroll
    for (int h = 0; h < HD / 64; h++) {
        const int c0 = (g + 8 * h) ^ s0, c1 = (g + 8 * h) ^ s1;
        va[h] = *reinterpret_cast<const uint4 *>(tile + 2 * t * ROW + 16 * c0);
        vb[h] = *reinterpret_cast<const uint4 *>(tile + (2 * t + 1) * ROW + 16 * c1);
        vc[h] = *reinterpret_cast<const uint4 *>(tile + (2 * t + 8) * ROW + 16 * c0);
        vd[h] = *reinterpret_cast<const uint4 *>(tile + (2 * t + 9) * ROW + 16 * c1);
    }
}

// A warp's ring: its slots (generic and shared addresses) and the slot of the
// oldest tile in flight, the next to be consumed.
struct fa2d_ring {
    unsigned char *base;
    uint32_t addr;
    int slot;
};

// Waits for the ring's oldest tile and makes every lane's copies visible to
// the warp; returns the tile.
template <int HD, int N> __device__ __forceinline__ const unsigned char *fa2d_ring_wait(fa2d_ring &r)
{
    orin_cu_cp_async_wait<N - 1>();
    __syncwarp();
    return r.base + r.slot * fa2d_tile_bytes<HD>();
}

// After the oldest tile's fragments are in registers: refills its slot with
// the tile N further on (the step at `base`, K or V) and moves to the next.
// The __syncwarp keeps any lane's copies from landing before every lane has
// read the slot.
template <typename T, int HD, int N, bool V_TILE>
__device__ __forceinline__ void fa2d_ring_refill(fa2d_ring &r, const orin_kv_view &cache, int kvh,
                                                 int64_t base, int64_t end)
{
    __syncwarp();
    fa2d_cp_issue<T, HD, V_TILE>(cache, kvh, base, end, r.addr + r.slot * fa2d_tile_bytes<HD>());
    r.slot = r.slot + 1 == N ? 0 : r.slot + 1;
}

// One warp step of the cp.async kernel: positions base .. base + 15 from the
// ring (MASKED: those at or past `end` weigh 0; they were zero-filled). Tile
// 2k + N, refilled after the K of step k, is step k + N / 2's (V when N is
// odd); tile 2k + 1 + N, after the V, is step k + (N + 1) / 2's.
template <typename T, int HD, int N, bool MASKED>
__device__ __forceinline__ void fa2d_cp_step(const orin_kv_view &cache, int kvh, int64_t base,
                                             int64_t end, const uint4 (&qf)[HD / 32], float scale,
                                             fa2d_ring &ring, fa2d_mma_state<HD> &st)
{
    constexpr int64_t STEP = 16 * FA2D_WARPS;
    const int g = (threadIdx.x & 31) >> 2;
    uint4 ka[HD / 32], kb[HD / 32];
    fa2d_lds_k<HD>(fa2d_ring_wait<HD, N>(ring), ka, kb);
    fa2d_ring_refill<T, HD, N, N % 2 == 1>(ring, cache, kvh, base + N / 2 * STEP, end);
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    fa2d_mma_scores<T, HD>(ka, kb, qf, scale, !MASKED || base + g < end,
                           !MASKED || base + g + 8 < end, s);
    uint32_t b0, b1;
    fa2d_mma_softmax<T, HD>(s, st, &b0, &b1);

    uint4 va[HD / 64], vb[HD / 64], vc[HD / 64], vd[HD / 64];
    fa2d_lds_v<HD>(fa2d_ring_wait<HD, N>(ring), va, vb, vc, vd);
    fa2d_ring_refill<T, HD, N, N % 2 == 0>(ring, cache, kvh, base + (N + 1) / 2 * STEP, end);
    fa2d_mma_pv<T, HD>(va, vb, vc, vd, b0, b1, st);
}

// fa2d_mma_warp_range through the ring: the warp's first N tiles are started
// before q is loaded, then each step consumes two and starts two. Leaves no
// copy in flight.
template <typename T, int HD, int N>
__device__ __forceinline__ void fa2d_cp_warp_range(const fa2d_params &P, int kvh, int head0,
                                                   int rows, int64_t begin, int64_t end,
                                                   unsigned char *slots, fa2d_mma_state<HD> &st)
{
    constexpr int KJ = HD / 32;
    constexpr int64_t STEP = 16 * FA2D_WARPS;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    fa2d_mma_state_clear(st);
    int64_t base = begin + 16 * warp;
    if (base < end) { // warp-uniform
        const orin_kv_view cache = P.cache;
        fa2d_ring ring = {slots, orin_cu_smem_addr(slots), 0};
#pragma unroll
        for (int n = 0; n < N; n++) {
            const uint32_t slot = ring.addr + n * fa2d_tile_bytes<HD>();
            if (n % 2)
                fa2d_cp_issue<T, HD, true>(cache, kvh, base + n / 2 * STEP, end, slot);
            else
                fa2d_cp_issue<T, HD, false>(cache, kvh, base + n / 2 * STEP, end, slot);
        }
        uint4 qf[KJ];
#pragma unroll
        for (int j = 0; j < KJ; j++)
            qf[j] = fa2d_q_chunk<T>(P, head0 + g, 4 * j + t, g < rows);
        for (; base + 16 <= end; base += STEP)
            fa2d_cp_step<T, HD, N, false>(cache, kvh, base, end, qf, P.scale, ring, st);
        if (base < end) // warp-uniform
            fa2d_cp_step<T, HD, N, true>(cache, kvh, base, end, qf, P.scale, ring, st);
        orin_cu_cp_async_wait<0>(); // only empty groups are left: a formality
    }
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) {
        st.l0 += __shfl_xor_sync(0xffffffffu, st.l0, off);
        st.l1 += __shfl_xor_sync(0xffffffffu, st.l1, off);
    }
}

// Launch: grid (splits, Hkv * row chunks), 128 threads (4 warps), dynamic
// shared memory fa2d_cp_smem<hd, N>: each warp's ring of N tiles of 16 x hd
// K or V (N x 4 KB at hd 128, N x 2 KB at hd 64), reused after the loop for the
// merge (fa2d_smem, 20.5 KB, the floor). 48 KB at the defaults. The same
// blocks, warp steps, fragments and math (fa2d_mma_scores, _softmax, _pv) as
// fa2d_split_mma, so the same partials bit for bit and the same combine; only
// the way K and V reach the registers differs. Each warp streams its tiles
// (K0 V0 K1 V1 ...) global -> shared with cp.async.cg, one commit group a
// tile: 16 bytes a lane, a warp instruction 512 bytes of whole rows (full
// 128-byte lines, no L1 allocation, no registers while in flight). Before
// each half of a step it waits for the oldest group (wait_group N - 1), loads
// that tile's fragments into registers (16-byte shared loads, conflict-free by
// fa2d_swz), and refills the slot with the tile N further on before the math.
// So N tiles (N / 2 steps) stay in flight through the math and the waits,
// where fa2d_split_mma has its step's 8 KB in flight only between its loads
// and their use, and nothing during the math.
// N (ORIN_FA2_DECODE_CONFIG "cpasync=2|3|4|6"; default 2 at hd 128, 4 at hd
// 64: 8 KB a warp). At most 3 at hd 128 keep the 4 blocks an SM that the
// register-bound occupancy (128 registers) gives and the split count is sized
// for (228 KB an SM less 1 KB a block leaves 56 KB a block; tiles come in 16
// KB a block at hd 128, 8 KB at hd 64). Measured at 32k on an H200 (graph, us):
// N 2: 40.0, 3: 40.5, 4: 40.0-40.2, registers (fa2d_split_mma) 40.9: 2 tiles,
// 16 warps x 8 KB = 128 KB an SM in flight, already cover what Little's law
// asks (~35-50 KB at 4.3 TB/s and 1-1.5 us); keeping them in flight across the
// math is what pays, and more depth does not. Tails: rows past the piece are zero-filled (not
// read) and masked as in fa2d_split_mma's last step; tiles past the warp's
// share are empty groups. Bound: memory bandwidth (bench/notes/fa2-decode.md
// has the prediction).
template <typename T, int HD, int N>
__global__ void __launch_bounds__(FA2D_THREADS, 4) fa2d_split_cp(const fa2d_params P)
{
    constexpr int R = FA2D_MMA_ROWS;
    extern __shared__ __align__(16) unsigned char fa2d_dynamic_smem[];
    fa2d_smem<R, HD> &sm = *reinterpret_cast<fa2d_smem<R, HD> *>(fa2d_dynamic_smem);
    orin_cu_allow_next(); // PDL, as in fa2d_split_mma
    fa2d_prefetch_warp<T, HD>(P, blockIdx.x, blockIdx.y / P.row_chunks, 16 * FA2D_WARPS);
    orin_cu_wait_prior();

    const int warp = threadIdx.x >> 5;
    fa2d_block b;
    if (!fa2d_split_block<T, R, HD>(P, sm, &b))
        return;
    fa2d_mma_state<HD> st;
    fa2d_cp_warp_range<T, HD, N>(P, b.kvh, b.head0, b.rows, b.begin, b.end,
                                 fa2d_dynamic_smem + warp * N * fa2d_tile_bytes<HD>(), st);
    __syncthreads(); // every warp is done with its ring: the merge reuses the bytes
    fa2d_mma_store_warp<HD>(st, sm.merge.o[warp], sm.merge.m[warp], sm.merge.l[warp]);
    fa2d_write_partial<R, HD, true>(P, sm, b.split, b.head0, b.rows);
    if (P.slab >= 0)
        fa2d_finish_fused<T, R, HD>(P, sm, b.unit, b.head0, b.rows);
}

// ---- the cluster kernel (sm_90: f16, bf16): one launch, no workspace ----

// Per block: its warps' results, then the block's merged rows, which the
// other blocks of the cluster read through distributed shared memory.
template <int HD, int W> struct fa2d_cluster_smem {
    float o[W][FA2D_MMA_ROWS][HD]; // each warp's O, unnormalised
    float m[W][FA2D_MMA_ROWS];
    float l[W][FA2D_MMA_ROWS];
    float block_o[FA2D_MMA_ROWS][HD]; // the block's O relative to block_m
    float block_m[FA2D_MMA_ROWS];
    float block_l[FA2D_MMA_ROWS];
};

// Launch: grid (C, Hkv * row chunks) in clusters of C (8 to 16) blocks along
// x, one cluster a (kv head, row chunk) unit; W x 32 threads (W = 16 warps:
// dynamic shared memory sizeof(fa2d_cluster_smem) 70.7 KB at hd 128, one block
// an SM; W = 8: 37 KB, up to two an SM, so that a cluster of 16 fits in a GPC
// with fewer than 16 free SMs); 128 registers. Block rank r takes piece r of the
// p + 1 positions (fa2d_range with splits = C); its warps run the mma
// kernel's steps (fa2d_mma_step), merge in shared memory, then, after a
// cluster barrier, each block combines a 1/C share of the unit's rows x hd
// outputs from all C blocks' merged rows over distributed shared memory
// (mapa + ld.shared::cluster, ~200 cycles a round trip against ~1 us for the
// split kernel's partials through global memory and a second launch), and a
// second barrier keeps every block's shared memory alive until all have read it.
// Bound: the latency of one launch and its few round trips at short contexts
// (Qwen3-8B, H200, clusters of 8 on 64 SMs: 7.4 us at 1k against 10.3 for
// two kernels; H100, 16 x 8 warps: 7.9 us against 8.3 for 8 x 16); memory
// bandwidth at long ones, where it runs only if the clusters cover most SMs
// with 16 warps an SM (8-warp blocks stream too few bytes: 32k at 76 % of the
// copy against 86 % for the split kernel).
template <typename T, int HD, int C, int W>
__global__ void __launch_bounds__(W * 32, 16 / W) fa2d_cluster_mma(const fa2d_params P)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int R = FA2D_MMA_ROWS, THREADS = W * 32;
    extern __shared__ __align__(16) unsigned char fa2d_dynamic_smem[];
    fa2d_cluster_smem<HD, W> &sm =
        *reinterpret_cast<fa2d_cluster_smem<HD, W> *>(fa2d_dynamic_smem);
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank(), unit = blockIdx.y;
    FA2D_MARK(0, 0.0f);
    orin_cu_allow_next(); // PDL, as in fa2d_split_mma
    fa2d_prefetch_warp<T, HD>(P, rank, unit / P.row_chunks, 16 * W);
    if constexpr (!(FA2D_KNOCKOUT & FA2D_KO_WAIT))
        orin_cu_wait_prior();
    FA2D_MARK(1, 0.0f);

    const int warp = threadIdx.x >> 5;
    const int kvh = unit / P.row_chunks, chunk = unit % P.row_chunks;
    const int head0 = kvh * P.group + chunk * R;
    const int rows = min(R, P.group - chunk * R);

    int64_t begin, end;
    if constexpr (FA2D_KNOCKOUT & FA2D_KO_INPUTS)
        fa2d_range_at(P, P.max_kv_len - 1, rank, &begin, &end);
    else
        fa2d_range(P, rank, &begin, &end);
    FA2D_MARK(2, end);
    // Read here, with the piece (the same p, one load): read after the first
    // cluster barrier it was an L2 round trip on the kernel's tail.
    bool valid = true;
    if constexpr (!(FA2D_KNOCKOUT & FA2D_KO_INPUTS))
        valid = fa2d_valid_position(P);
    fa2d_mma_state<HD> st;
    fa2d_mma_warp_range<T, HD, W>(P, kvh, head0, rows, begin, end, st);
    FA2D_MARK(3, st.l0 + st.o[HD / 16 - 1][3]);
    if constexpr (FA2D_KNOCKOUT & FA2D_KO_MERGE) {
        // One value a warp keeps the work alive: the sum of every accumulator,
        // so that no V load or mma is dead code (a single accumulator let the
        // compiler drop half of V's loads and most of P V).
        float sum = st.m0 + st.m1 + st.l0 + st.l1;
#pragma unroll
        for (int i = 0; i < HD / 16; i++)
            sum += st.o[i][0] + st.o[i][1] + st.o[i][2] + st.o[i][3];
        if ((threadIdx.x & 31) == 0)
            ((T *)P.out)[(int64_t)head0 * HD + (rank * W + warp) % (rows * HD)] =
                orin_cu_from_f32<T>(sum);
        return;
    }
    fa2d_mma_store_warp<HD>(st, sm.o[warp], sm.m[warp], sm.l[warp]);
    __syncthreads();
    FA2D_MARK(4, 0.0f);

    // The block's rows from its warps (a warp without positions weighs 0).
    for (int i = threadIdx.x; i < rows * HD; i += THREADS) {
        const int r = i / HD, d = i % HD;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < W; w++)
            M = fmaxf(M, sm.m[w][r]);
        float L = 0.0f, O = 0.0f;
#pragma unroll
        for (int w = 0; w < W; w++) {
            const float mw = sm.m[w][r], e = mw == -INFINITY ? 0.0f : exp2f(mw - M);
            L += e * sm.l[w][r];
            O += e * sm.o[w][r][d];
        }
        sm.block_o[r][d] = O;
        if (d == 0) {
            sm.block_m[r] = M;
            sm.block_l[r] = L;
        }
    }
    FA2D_MARK(5, sm.block_l[0]);
    cluster.sync(); // release this block's rows, acquire the others'
    FA2D_MARK(6, 0.0f);

    // This block's share of the unit's outputs, merged over the cluster. An
    // invalid p left every piece empty: every weight is 0 and the row NaN.
    const int items = rows * HD, share = (items + C - 1) / C;
    for (int i = threadIdx.x; i < share; i += THREADS) {
        const int item = rank * share + i;
        if (item >= items)
            break;
        const int r = item / HD, d = item % HD;
        float mj[C], lj[C], oj[C];
#pragma unroll
        for (int j = 0; j < C; j++) { // all 3 C remote loads in flight
            const fa2d_cluster_smem<HD, W> *other = cluster.map_shared_rank(&sm, (unsigned)j);
            mj[j] = other->block_m[r];
            lj[j] = other->block_l[r];
            oj[j] = other->block_o[r][d];
        }
        float M = -INFINITY;
#pragma unroll
        for (int j = 0; j < C; j++)
            M = fmaxf(M, mj[j]);
        float L = 0.0f, O = 0.0f;
#pragma unroll
        for (int j = 0; j < C; j++) {
            const float e = mj[j] == -INFINITY ? 0.0f : exp2f(mj[j] - M);
            L += e * lj[j];
            O += e * oj[j];
        }
        T *out = (T *)P.out + (int64_t)(head0 + r) * HD + d;
        *out = orin_cu_from_f32<T>(valid ? O / L : fa2d_nan());
    }
    FA2D_MARK(7, 0.0f);
    cluster.sync(); // no block exits while another may still read its rows
    FA2D_MARK(8, 0.0f);
#endif
}

// ---- the simt kernel (every dtype; any alignment) ----

// VEC elements of a row at p as f32: one 16-byte load (VEC16: p 16-byte aligned),
// or element by element; zeros for a masked position.
template <typename T, int VEC, bool VEC16>
__device__ __forceinline__ void fa2d_load_row(const T *p, bool ok, float (&out)[VEC])
{
    if (VEC16) {
        const uint4 raw = fa2d_ld16(p, ok);
        const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
        for (int i = 0; i < VEC; i++)
            out[i] = orin_cu_f32(e[i]);
    } else {
#pragma unroll
        for (int i = 0; i < VEC; i++)
            out[i] = ok ? orin_cu_f32(p[i]) : 0.0f;
    }
}

// Launch: grid (splits, Hkv * row chunks), 128 threads (4 warps), 6-12 KB static
// shared memory (4 x R x (hd + 2) floats, or the fused combine's R x 512 split
// weights, whichever is larger). LANES = hd / VEC lanes share a position, each
// holding VEC (16 bytes of) dims of q (R rows, f32) and of its P.V accumulator;
// a warp reads 32 / LANES positions per load instruction and U = 4 of those a
// step, K and V loads all in flight before the math. Scores are warp-shuffle
// sums over the LANES lanes (every lane of the position gets the same bits),
// and each position group keeps its own running (m, l); the groups and the warps
// merge at the end. Bound: instruction issue as much as bandwidth (SASS at R 4,
// hd 128: ~96 warp instructions a 512-byte f16 position, ~167 a 1 KB f32 one:
// the FMAs, the shuffle sums and the softmax repeated on each lane of a
// position), hence the mma kernel for f16/bf16.
template <typename T, int HD, int R, bool VEC16>
__global__ void __launch_bounds__(FA2D_THREADS, 1) fa2d_split_simt(const fa2d_params P)
{
    constexpr int VEC = 16 / (int)sizeof(T);
    constexpr int LANES = HD / VEC, PPW = 32 / LANES, U = 4, STEP = PPW * U;
    constexpr bool LOG2 = sizeof(T) < 4;
    static_assert(LANES <= 32 && 32 % LANES == 0, "head_dim / VEC lanes per position");
    __shared__ fa2d_smem<R, HD> sm;
    orin_cu_allow_next();
    orin_cu_wait_prior();

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int slot = lane / LANES, sub = lane % LANES; // position slot, dims chunk
    fa2d_block b;
    if (!fa2d_split_block<T, R, HD>(P, sm, &b))
        return;
    const int split = b.split, unit = b.unit, kvh = b.kvh, head0 = b.head0, rows = b.rows;
    const int64_t begin = b.begin, end = b.end;
    const orin_kv_view cache = P.cache;
    const T *K = (const T *)cache.k, *V = (const T *)cache.v;

    float q[R][VEC], acc[R][VEC], m[R], l[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const T *src = (const T *)P.q + (int64_t)(head0 + r) * HD + sub * VEC;
#pragma unroll
        for (int i = 0; i < VEC; i++) {
            q[r][i] = r < rows ? orin_cu_f32(src[i]) : 0.0f;
            acc[r][i] = 0.0f;
        }
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    const float scale = P.scale;

    for (int64_t base = begin + STEP * warp; base < end; base += STEP * FA2D_WARPS) {
        float kf[U][VEC], vf[U][VEC];
        bool ok[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t pos = base + u * PPW + slot;
            ok[u] = pos < end;
            const int64_t off = orin_kv_offset(&cache, ok[u] ? pos : begin, kvh) + sub * VEC;
            fa2d_load_row<T, VEC, VEC16>(K + off, ok[u], kf[u]);
            fa2d_load_row<T, VEC, VEC16>(V + off, ok[u], vf[u]);
        }
        float s[U][R];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                float dot = 0.0f;
#pragma unroll
                for (int i = 0; i < VEC; i++)
                    dot = fmaf(q[r][i], kf[u][i], dot);
                s[u][r] = dot;
            }
#pragma unroll
        for (int off = LANES / 2; off > 0; off >>= 1)
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int r = 0; r < R; r++)
                    s[u][r] += __shfl_xor_sync(0xffffffffu, s[u][r], off);
#pragma unroll
        for (int r = 0; r < R; r++) {
            float mx = m[r];
#pragma unroll
            for (int u = 0; u < U; u++) {
                s[u][r] = ok[u] ? s[u][r] * scale : -INFINITY;
                mx = fmaxf(mx, s[u][r]);
            }
            const float mu = mx == -INFINITY ? 0.0f : mx;
            const float alpha = fa2d_exp<LOG2>(m[r] - mu);
            float p[U], psum = 0.0f;
#pragma unroll
            for (int u = 0; u < U; u++) {
                p[u] = fa2d_exp<LOG2>(s[u][r] - mu);
                psum += p[u];
            }
            l[r] = l[r] * alpha + psum;
            m[r] = mx;
#pragma unroll
            for (int i = 0; i < VEC; i++) {
                float a = acc[r][i] * alpha;
#pragma unroll
                for (int u = 0; u < U; u++)
                    a = fmaf(p[u], vf[u][i], a);
                acc[r][i] = a;
            }
        }
    }

    // Merge the warp's position slots (lanes LANES apart), then hand the warp's
    // result to the block merge.
#pragma unroll
    for (int off = LANES; off < 32; off <<= 1)
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float mo = __shfl_xor_sync(0xffffffffu, m[r], off);
            const float lo = __shfl_xor_sync(0xffffffffu, l[r], off);
            const float mx = fmaxf(m[r], mo), mu = mx == -INFINITY ? 0.0f : mx;
            const float a = fa2d_exp<LOG2>(m[r] - mu), b = fa2d_exp<LOG2>(mo - mu);
            l[r] = l[r] * a + lo * b;
            m[r] = mx;
#pragma unroll
            for (int i = 0; i < VEC; i++)
                acc[r][i] = acc[r][i] * a + __shfl_xor_sync(0xffffffffu, acc[r][i], off) * b;
        }
    if (slot == 0) {
#pragma unroll
        for (int r = 0; r < R; r++) {
#pragma unroll
            for (int i = 0; i < VEC; i++)
                sm.merge.o[warp][r][sub * VEC + i] = acc[r][i];
            if (sub == 0) {
                sm.merge.m[warp][r] = m[r];
                sm.merge.l[warp][r] = l[r];
            }
        }
    }
    fa2d_write_partial<R, HD, LOG2>(P, sm, split, head0, rows);
    if (P.slab >= 0)
        fa2d_finish_fused<T, R, HD>(P, sm, unit, head0, rows);
}

// ---- host side ----

namespace {

// How a call's pieces are merged (ORIN_FA2_DECODE_CONFIG's first words).
enum fa2d_combine_mode {
    FA2D_COMBINE_AUTO,       // cluster where it fits and pays (fa2d_cluster_size), else two-kernel
    FA2D_COMBINE_CLUSTER,    // cluster wherever the GPU runs it at all
    FA2D_COMBINE_TWO_KERNEL, // split kernel + combine kernel
    FA2D_COMBINE_FUSED,      // split kernel, its last block a unit combines
};

struct fa2d_config {
    fa2d_combine_mode combine;
    int cluster; // CLUSTER: 8, 12, 14 or 16 ("cluster=N"), 0: the largest the GPU runs
    bool simt;
    int bps; // 0: the kernel's occupancy
    int cp;  // the mma split kernel: 0 fa2d_split_mma ("cpasync=0"); else fa2d_split_cp
             // with this many tiles a warp (2, 3, 4, 6; "cpasync=N"), -1 its default
    int prefetch; // warp steps prefetched before the PDL wait ("prefetch=N", 0..8), -1 default
    int cwarps;   // warps a block of the cluster kernel: 8 or 16 ("cwarps=N"), 0: AUTO's pick
};

// ORIN_FA2_DECODE_CONFIG, read at every call (the benchmark changes it between rows).
int fa2d_parse_config(fa2d_config *cfg)
{
    *cfg = fa2d_config{.combine = FA2D_COMBINE_AUTO, .cluster = 0, .simt = false, .bps = 0,
                       .cp = -1, .prefetch = -1, .cwarps = 0};
    const char *env = getenv("ORIN_FA2_DECODE_CONFIG");
    if (!env)
        return 0;
    const char *p = env;
    while (*p) {
        size_t len = strcspn(p, "+");
        char word[32];
        if (len >= sizeof word)
            len = sizeof word - 1;
        memcpy(word, p, len);
        word[len] = '\0';
        int n = 0;
        char extra;
        if (len == 0) {
            // "a++b" or a trailing '+': nothing
        } else if (strcmp(word, "auto") == 0) {
            cfg->combine = FA2D_COMBINE_AUTO;
        } else if (strcmp(word, "cluster") == 0) {
            cfg->combine = FA2D_COMBINE_CLUSTER;
            cfg->cluster = 0;
        } else if (sscanf(word, "cluster=%d%c", &n, &extra) == 1 &&
                   (n == 8 || n == 12 || n == 14 || n == 16)) {
            cfg->combine = FA2D_COMBINE_CLUSTER;
            cfg->cluster = n;
        } else if (strcmp(word, "fused") == 0) {
            cfg->combine = FA2D_COMBINE_FUSED;
        } else if (strcmp(word, "two-kernel") == 0) {
            cfg->combine = FA2D_COMBINE_TWO_KERNEL;
        } else if (strcmp(word, "mma") == 0) {
            cfg->simt = false;
        } else if (strcmp(word, "simt") == 0) {
            cfg->simt = true;
        } else if (sscanf(word, "bps=%d%c", &n, &extra) == 1 && n >= 1 && n <= 64) {
            cfg->bps = n;
        } else if (strcmp(word, "cpasync") == 0) {
            cfg->cp = -1;
        } else if (sscanf(word, "cpasync=%d%c", &n, &extra) == 1 &&
                   (n == 0 || n == 2 || n == 3 || n == 4 || n == 6)) {
            cfg->cp = n;
        } else if (sscanf(word, "cwarps=%d%c", &n, &extra) == 1 && (n == 8 || n == 16)) {
            cfg->cwarps = n;
        } else if (sscanf(word, "prefetch=%d%c", &n, &extra) == 1 && n >= 0 && n <= 8) {
            cfg->prefetch = n;
        } else {
            return orin_error_set("%s: ORIN_FA2_DECODE_CONFIG \"%s\": unknown \"%s\" (words "
                                  "joined by '+': auto, cluster, cluster=8|12|14|16, two-kernel, "
                                  "fused, mma, simt, cpasync, cpasync=0|2|3|4|6, bps=1..64, "
                                  "prefetch=0..8, cwarps=8|16)",
                                  FA2D_LABEL, env, word);
        }
        p += strcspn(p, "+");
        if (*p == '+')
            p++;
    }
    return 0;
}

// fa2d_params.prefetch_steps: the configured count ("prefetch=N"), else -1,
// the kernel's rule from p (fa2d_prefetch_warp: one step where the call's piece
// has FA2D_PREFETCH_LONG steps a warp or its K/V is FA2D_PREFETCH_SHORT_BYTES at most).
// Graph-safe: the rule reads p on the device, so a graph captured at one length
// replays right at any other.
int fa2d_prefetch_steps(const fa2d_config *cfg)
{
    return cfg->prefetch >= 0 ? cfg->prefetch : -1;
}

// The counter slab of the exec's stream, or -1 when all are taken (the call then
// combines in a second kernel). Slabs are never given back: a stream that goes
// away leaves its slab zeroed, reused if a stream with the same handle comes.
int fa2d_stream_slab(const orin_exec *ex)
{
    static orin_cu_stream_slots slabs = ORIN_CU_STREAM_SLOTS_INIT;
    return orin_cu_stream_slot(&slabs, ex, FA2D_SLABS);
}

// Whether the exec's GPU runs mma.sync for f16/bf16 (sm_80 and later).
bool fa2d_has_mma(const orin_exec *ex)
{
    return orin_cu_cc_major(ex) >= 8;
}

typedef void (*fa2d_kernel)(const fa2d_params);

// Blocks of `kernel` one SM holds (its occupancy) at `smem` bytes of dynamic
// shared memory, cached per kernel and device; 2 if the runtime cannot tell.
// The first call for a kernel with dynamic shared memory also lets it have
// that much (needed above 48 KB) and asks for the largest shared memory
// carveout, so that the blocks counted are the blocks that run.
int fa2d_blocks_per_sm(const orin_exec *ex, fa2d_kernel kernel, size_t smem)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct {
        fa2d_kernel kernel;
        int dev, blocks;
    } cache[64];
    static int used;
    const int dev = ex->device->index;
    int blocks = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < used && !blocks; i++)
        if (cache[i].kernel == kernel && cache[i].dev == dev)
            blocks = cache[i].blocks;
    pthread_mutex_unlock(&lock);
    if (blocks)
        return blocks;
    const bool set = !smem ||
        (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) ==
             cudaSuccess &&
         cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                              cudaSharedmemCarveoutMaxShared) == cudaSuccess);
    if (!set ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, FA2D_THREADS, smem) !=
            cudaSuccess ||
        blocks < 1) {
        (void)cudaGetLastError(); // the launch reports what matters
        blocks = 2;
    }
    pthread_mutex_lock(&lock);
    if (used < 64)
        cache[used++] = {kernel, dev, blocks};
    pthread_mutex_unlock(&lock);
    return blocks;
}

// The split count any GPU may use for this max_kv_len: pieces of at least
// FA2D_ALIGN positions, at most FA2D_MAX_SPLITS. The workspace is sized for it.
int fa2d_max_splits(int32_t max_kv_len)
{
    int64_t n = ((int64_t)max_kv_len + FA2D_ALIGN - 1) / FA2D_ALIGN;
    return n < 1 ? 1 : n > FA2D_MAX_SPLITS ? FA2D_MAX_SPLITS : (int)n;
}

// One wave of blocks: SMs x blocks per SM over the (kv head, row chunk) units,
// capped by fa2d_max_splits. Depends on max_kv_len, never on the position.
int fa2d_splits(int sms, int blocks_per_sm, int units, int32_t max_kv_len)
{
    int64_t want = (int64_t)sms * blocks_per_sm / units;
    int cap = fa2d_max_splits(max_kv_len);
    return want < 1 ? 1 : want > cap ? cap : (int)want;
}

template <typename T, int HD> fa2d_kernel fa2d_pick_simt(int rows, bool vec16)
{
    if (rows == 1)
        return vec16 ? fa2d_split_simt<T, HD, 1, true> : fa2d_split_simt<T, HD, 1, false>;
    if (rows == 2)
        return vec16 ? fa2d_split_simt<T, HD, 2, true> : fa2d_split_simt<T, HD, 2, false>;
    return vec16 ? fa2d_split_simt<T, HD, 4, true> : fa2d_split_simt<T, HD, 4, false>;
}

template <typename T> fa2d_kernel fa2d_pick_mma(int hd)
{
    if constexpr (sizeof(T) == 2)
        return hd == 64 ? fa2d_split_mma<T, 64> : fa2d_split_mma<T, 128>;
    return NULL;
}

// The cp.async kernel's tiles a warp for cfg->cp at head_dim hd: the default
// is 8 KB a warp (fa2d_split_cp says why).
int fa2d_cp_tiles(int cp, int hd)
{
    return cp > 0 ? cp : hd == 64 ? 4 : 2;
}

template <typename T, int HD> fa2d_kernel fa2d_pick_cp_hd(int tiles, size_t *smem)
{
    switch (tiles) {
    case 2: *smem = fa2d_cp_smem<HD, 2>(); return fa2d_split_cp<T, HD, 2>;
    case 4: *smem = fa2d_cp_smem<HD, 4>(); return fa2d_split_cp<T, HD, 4>;
    case 6: *smem = fa2d_cp_smem<HD, 6>(); return fa2d_split_cp<T, HD, 6>;
    default: *smem = fa2d_cp_smem<HD, 3>(); return fa2d_split_cp<T, HD, 3>;
    }
}

// fa2d_split_cp for the dtype, head_dim and tile count, and its dynamic shared memory.
template <typename T> fa2d_kernel fa2d_pick_cp(int hd, int tiles, size_t *smem)
{
    if constexpr (sizeof(T) == 2)
        return hd == 64 ? fa2d_pick_cp_hd<T, 64>(tiles, smem)
                        : fa2d_pick_cp_hd<T, 128>(tiles, smem);
    return NULL;
}

// Clusters of C blocks of the cluster kernel the exec's GPU holds at once, 0
// where it runs none (before sm_90, or the runtime refuses the cluster size):
// asked once per device and kernel, after allowing its shared memory and, for
// C > 8, the non-portable cluster size.
template <typename T, int HD, int C, int W> int fa2d_cluster_capacity(const orin_exec *ex)
{
    static int cached[16]; // capacity + 1; 0: not asked yet
    const int dev = ex->device->index;
    if (dev >= 0 && dev < 16 && cached[dev])
        return cached[dev] - 1;
    int clusters = 0;
    const fa2d_kernel kernel = fa2d_cluster_mma<T, HD, C, W>;
    const int smem = (int)sizeof(fa2d_cluster_smem<HD, W>);
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = C;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(C, 1);
    lc.blockDim = dim3(W * 32);
    lc.dynamicSmemBytes = (size_t)smem;
    lc.attrs = &attr;
    lc.numAttrs = 1;
    if (orin_cu_cc_major(ex) < 9 ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) !=
            cudaSuccess ||
        (C > 8 && cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                       1) != cudaSuccess) ||
        cudaOccupancyMaxActiveClusters(&clusters, kernel, &lc) != cudaSuccess)
        clusters = 0;
    (void)cudaGetLastError();
    if (dev >= 0 && dev < 16)
        cached[dev] = clusters + 1;
    return clusters;
}

// The cluster sizes the kernel is built for, largest first. Not only powers of
// two: a cluster's blocks must share a GPC, and GPCs differ in SM count (an
// H200's 132 SMs hold 7 clusters of 16 blocks of one SM each, 15 of 8), so 14
// or 12 can give every unit of a model its cluster at once where 16 cannot.
static const int fa2d_cluster_sizes[] = {16, 14, 12, 8};

template <typename T, int HD, int W> int fa2d_capacity_w(const orin_exec *ex, int c)
{
    switch (c) {
    case 16: return fa2d_cluster_capacity<T, HD, 16, W>(ex);
    case 14: return fa2d_cluster_capacity<T, HD, 14, W>(ex);
    case 12: return fa2d_cluster_capacity<T, HD, 12, W>(ex);
    default: return fa2d_cluster_capacity<T, HD, 8, W>(ex);
    }
}

template <typename T, int HD> int fa2d_capacity_of(const orin_exec *ex, int c, int w)
{
    return w == 8 ? fa2d_capacity_w<T, HD, 8>(ex, c) : fa2d_capacity_w<T, HD, 16>(ex, c);
}

// The clusters this call runs the cluster kernel with: C blocks of W warps,
// C = 0 for none.
struct fa2d_cluster_shape {
    int c, w;
};

// AUTO: the largest C whose clusters of 16-warp blocks, one a unit, all run at
// once, if they cover at least 80 % of the SMs (long contexts are
// bandwidth-bound) or the context is at most FA2D_CLUSTER_SHORT (latency-bound:
// one launch instead of two matters more there than the SMs left idle); else
// none (two-kernel). Up to FA2D_CLUSTER_TINY, where clusters of 16 such blocks
// do not all fit, clusters of 16 blocks of 8 warps first: a cluster's blocks
// must share a GPC, and half-size blocks let 16 of them fit where 16 whole SMs
// are not free; twice the blocks with half the positions each shorten the
// latency chain of a short call, but 8 warps an SM stream too few bytes for
// long ones. CLUSTER: the configured size and warps, or the largest size the
// GPU runs at all. Measured on Qwen3-8B's shape (8 units; an H100 or H200 runs
// 7 clusters of 16 16-warp blocks at once and 15 of 8) in
// bench/notes/fa2-decode.md: 16 x 8 warps up to 4k, 8 x 16 up to 8k,
// two-kernel beyond.
template <typename T, int HD>
fa2d_cluster_shape fa2d_cluster_size(const orin_exec *ex, const fa2d_config *cfg, int units,
                                     int32_t max_kv_len)
{
    const fa2d_cluster_shape none = {0, 0};
    if (cfg->combine != FA2D_COMBINE_AUTO && cfg->combine != FA2D_COMBINE_CLUSTER)
        return none;
    const int w = cfg->cwarps ? cfg->cwarps : FA2D_CLUSTER_WARPS;
    if (cfg->combine == FA2D_COMBINE_CLUSTER) {
        if (cfg->cluster)
            return fa2d_capacity_of<T, HD>(ex, cfg->cluster, w) > 0
                       ? fa2d_cluster_shape{cfg->cluster, w} : none;
        for (int c : fa2d_cluster_sizes)
            if (fa2d_capacity_of<T, HD>(ex, c, w) > 0)
                return {c, w};
        return none;
    }
    if (!cfg->cwarps && max_kv_len <= FA2D_CLUSTER_TINY &&
        fa2d_capacity_of<T, HD>(ex, 16, FA2D_CLUSTER_WARPS) < units &&
        fa2d_capacity_of<T, HD>(ex, 16, 8) >= units)
        return {16, 8};
    const int64_t sms = orin_cu_sm_count(ex);
    for (int c : fa2d_cluster_sizes) {
        if (fa2d_capacity_of<T, HD>(ex, c, w) < units)
            continue;
        const bool covers = (int64_t)units * c * 10 >= sms * 8;
        return covers || max_kv_len <= FA2D_CLUSTER_SHORT ? fa2d_cluster_shape{c, w} : none;
    }
    return none;
}

#if FA2D_TIMELINE
// Every 50th call outside a graph capture: the timeline of unit 0's blocks,
// ns since rank 0's start (globaltimer) and cycles since the block's own
// start (clock64), mark by mark.
static void fa2d_dump_timeline(const orin_exec *ex, int c)
{
    static int calls;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    cudaStream_t stream = orin_cu_stream(ex);
    if (++calls % 50 || cudaStreamIsCapturing(stream, &cap) != cudaSuccess ||
        cap != cudaStreamCaptureStatusNone)
        return;
    unsigned long long tl[16][9][2];
    if (cudaStreamSynchronize(stream) != cudaSuccess ||
        cudaMemcpyFromSymbol(tl, fa2d_tl, sizeof tl) != cudaSuccess)
        return;
    for (int r = 0; r < c && r < 16; r++) {
        fprintf(stderr, "fa2d timeline call %d rank %2d ns:", calls, r);
        for (int k = 0; k < 9; k++)
            fprintf(stderr, " %6lld", (long long)(tl[r][k][0] - tl[0][0][0]));
        fprintf(stderr, "  cycles:");
        for (int k = 0; k < 9; k++)
            fprintf(stderr, " %6lld", (long long)(tl[r][k][1] - tl[r][0][1]));
        fprintf(stderr, "\n");
    }
}
#endif

template <typename T, int HD, int C, int W>
int fa2d_launch_cluster(const orin_exec *ex, orin_dtype dt, const fa2d_config *cfg,
                        fa2d_params P, int units)
{
    P.splits = C;
    P.prefetch_steps = fa2d_prefetch_steps(cfg);
    orin_cu_launch_cluster(ex, true, C, fa2d_cluster_mma<T, HD, C, W>, dim3(C, (unsigned)units),
                           dim3(W * 32), sizeof(fa2d_cluster_smem<HD, W>), P);
#if FA2D_TIMELINE
    fa2d_dump_timeline(ex, C);
#endif
    return orin_cu_launched(FA2D_LABEL, dt, "cluster of %d x %d warps, heads %d, head_dim %d, "
                            "units %d, max_kv_len %d", C, W, P.heads, HD, units, P.max_kv_len);
}

template <typename T, int HD, int W>
int fa2d_launch_cluster_w(const orin_exec *ex, orin_dtype dt, const fa2d_config *cfg,
                          fa2d_params P, int units, int c)
{
    switch (c) {
    case 16: return fa2d_launch_cluster<T, HD, 16, W>(ex, dt, cfg, P, units);
    case 14: return fa2d_launch_cluster<T, HD, 14, W>(ex, dt, cfg, P, units);
    case 12: return fa2d_launch_cluster<T, HD, 12, W>(ex, dt, cfg, P, units);
    default: return fa2d_launch_cluster<T, HD, 8, W>(ex, dt, cfg, P, units);
    }
}

template <typename T, int HD>
int fa2d_try_cluster(const orin_exec *ex, orin_dtype dt, const fa2d_config *cfg, fa2d_params P,
                     int units, int32_t max_kv_len, bool *launched)
{
    const fa2d_cluster_shape shape = fa2d_cluster_size<T, HD>(ex, cfg, units, max_kv_len);
    *launched = shape.c != 0;
    if (!shape.c)
        return 0;
    return shape.w == 8 ? fa2d_launch_cluster_w<T, HD, 8>(ex, dt, cfg, P, units, shape.c)
                        : fa2d_launch_cluster_w<T, HD, 16>(ex, dt, cfg, P, units, shape.c);
}

template <typename T>
int fa2d_launch(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt,
                const fa2d_config *cfg, fa2d_params P)
{
    const int hd = P.head_dim, kv_heads = a->cache.n_kv_heads;
    const size_t esize = sizeof(T);
    const bool vec16 = orin_cu_aligned16(a->cache.k) && orin_cu_aligned16(a->cache.v) &&
                       (a->cache.pos_stride * (int64_t)esize) % 16 == 0 &&
                       (a->cache.head_stride * (int64_t)esize) % 16 == 0;
    const bool mma = sizeof(T) == 2 && vec16 && !cfg->simt && fa2d_has_mma(ex);

    // Query rows per block: the whole group where it fits.
    int rows;
    if (mma)
        rows = FA2D_MMA_ROWS;
    else
        rows = P.group >= 3 ? FA2D_SIMT_ROWS : P.group;
    P.row_chunks = (P.group + rows - 1) / rows;
    const int units = kv_heads * P.row_chunks;
    if (units > 65535)
        return orin_error_set("%s: %d kv heads x %d row chunks: more than 65535 blocks a split",
                              FA2D_LABEL, kv_heads, P.row_chunks);
    if (sizeof(T) == 2)
        P.scale = a->scale * 1.4426950408889634f; // log2(e): the exp2 kernels' units
    if constexpr (sizeof(T) == 2) {
        if (mma) {
            bool launched;
            const int rc = hd == 64
                ? fa2d_try_cluster<T, 64>(ex, dt, cfg, P, units, a->max_kv_len, &launched)
                : fa2d_try_cluster<T, 128>(ex, dt, cfg, P, units, a->max_kv_len, &launched);
            if (launched)
                return rc;
        }
    }

    size_t smem = 0; // dynamic: the cp.async kernel's rings
    const int tiles = mma && cfg->cp ? fa2d_cp_tiles(cfg->cp, hd) : 0;
    fa2d_kernel kernel = tiles ? fa2d_pick_cp<T>(hd, tiles, &smem)
                         : mma ? fa2d_pick_mma<T>(hd)
                               : (hd == 64 ? fa2d_pick_simt<T, 64>(rows, vec16)
                                           : fa2d_pick_simt<T, 128>(rows, vec16));
    // Asked even under "bps=N": the first ask also readies the kernel's shared memory.
    const int occupancy = fa2d_blocks_per_sm(ex, kernel, smem);
    const int bps = cfg->bps ? cfg->bps : occupancy;
    P.splits = fa2d_splits(orin_cu_sm_count(ex), bps, units, a->max_kv_len);
    P.prefetch_steps = tiles ? fa2d_prefetch_steps(cfg) : 0;
    P.partial_o = (float *)ex->workspace;
    P.partial_lse = P.partial_o + (size_t)P.splits * P.heads * hd;
    P.slab = cfg->combine == FA2D_COMBINE_FUSED && units <= FA2D_SLAB_COUNTERS
                 ? fa2d_stream_slab(ex) : -1;

    orin_cu_launch(ex, true, kernel, dim3((unsigned)P.splits, (unsigned)units),
                   dim3(FA2D_THREADS), smem, P);
    if (orin_cu_launched(FA2D_LABEL, dt, "%s %s, cp.async tiles %d, heads %d/%d, head_dim %d, "
                         "max_kv_len %d, splits %d", mma ? "mma" : "simt",
                         P.slab >= 0 ? "fused" : "two-kernel", tiles, P.heads, kv_heads, hd,
                         a->max_kv_len, P.splits))
        return -1;
    if (P.slab >= 0)
        return 0;
    orin_cu_launch(ex, true, fa2d_combine<T>, dim3((unsigned)P.heads), dim3(FA2D_THREADS), 0, P);
    return orin_cu_launched(FA2D_LABEL, dt, "combine, heads %d, head_dim %d, splits %d", P.heads,
                            hd, P.splits);
}

} // namespace

extern "C" size_t fa2_cuda_decode_workspace_size(const orin_attention_args *a)
{
    if (!a || a->q.ndim != 3 || a->q.shape[1] < 1 || a->q.shape[2] < 1 || a->max_kv_len < 1)
        return 0; // run() reports the bad call
    return (size_t)fa2d_max_splits(a->max_kv_len) * (size_t)a->q.shape[1] *
           ((size_t)a->q.shape[2] + 1) * sizeof(float);
}

extern "C" int fa2_cuda_decode(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt)
{
    if (orin_check_exec(FA2D_LABEL, ex, ORIN_DEVICE_CUDA) ||
        orin_check_attention(FA2D_LABEL, a, ORIN_DEVICE_CUDA, dt, true))
        return -1;
    const int64_t hd = a->q.shape[2];
    if (hd != 64 && hd != 128)
        return orin_error_set("%s: head_dim %lld (the cuda kernels take 64 and 128)", FA2D_LABEL,
                              (long long)hd);
    const size_t need = fa2_cuda_decode_workspace_size(a);
    if (!ex->workspace || ex->workspace_size < need)
        return orin_error_set("%s: workspace of %zu bytes, the call needs %zu", FA2D_LABEL,
                              ex->workspace ? ex->workspace_size : 0, need);
    if (!orin_cu_aligned16(ex->workspace)) // the combine reads it as float4
        return orin_error_set("%s: workspace at %p is not 16-byte aligned", FA2D_LABEL,
                              ex->workspace);
    fa2d_config cfg;
    if (fa2d_parse_config(&cfg))
        return -1;
    const fa2d_params P = {
        .q = a->q.data,
        .out = a->out.data,
        .positions = (const int32_t *)a->positions.data,
        .cache = a->cache,
        .scale = a->scale,
        .max_kv_len = a->max_kv_len,
        .heads = (int)a->q.shape[1],
        .head_dim = (int)hd,
        .group = (int)(a->q.shape[1] / a->cache.n_kv_heads),
        .row_chunks = 0, // the rest: fa2d_launch, once it has picked the kernel
        .splits = 0,
        .partial_o = NULL,
        .partial_lse = NULL,
        .slab = -1,
        .prefetch_steps = 0, // fa2d_launch, for the kernel it picks
    };
    ORIN_CU_DISPATCH(dt, FA2D_LABEL, T, return fa2d_launch<T>(ex, a, dt, &cfg, P));
    return 0;
}
