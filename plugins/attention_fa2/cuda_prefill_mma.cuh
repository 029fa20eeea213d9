// attention_fa2's CUDA prefill, internals shared by cuda_prefill.cu (host side,
// f32 kernel) and cuda_prefill_{f16,bf16}.cu (the tensor-core kernel, one file
// per dtype so that the two compile in parallel).
//
// The tensor-core kernel (f16, bf16) is FlashAttention-2 on mma.sync.m16n8k16:
// one block per (Q tile, query head); its warps split the Q tile's rows (each
// warp owns 16 * MT rows and their m, l, O: no cross-warp reduction); K/V tiles
// stream through a cp.async ring of STAGES buffers; S = Q K^T and O += P V run
// on tensor cores with f32 accumulators, P staying in registers between them.
#ifndef ORIN_ATTENTION_FA2_CUDA_PREFILL_MMA_CUH
#define ORIN_ATTENTION_FA2_CUDA_PREFILL_MMA_CUH

#include "orin/cuda_util.cuh"
#include "orin/ops.h"

#include <limits.h>

// ---- what the host side hands a launcher ----

// The tile configurations, side by side (bench/notes/fa2-prefill.md says what
// each is for); ORIN_FA2_PREFILL_CONFIG picks one by name for tuning runs.
enum fa2_prefill_config {
    FA2_Q128_K64_W4,  // 128 rows, 4 warps of 32 rows (MT 2), KV tiles of 64
    FA2_Q128_K64_W8,  // 128 rows, 8 warps of 16 rows (MT 1), KV tiles of 64
    FA2_Q64_K64_W4,   // 64 rows, 4 warps of 16 rows (MT 1): twice the blocks
    FA2_Q128_K32_W4,  // 128 rows, 4 warps of 32 rows, KV tiles of 32, 3 stages
    // Hopper (sm_90a) at head_dim 128 (cuda_prefill_wgmma.cuh): 128 rows, 2
    // warpgroups of 64 rows on wgmma, KV tiles of 64; elsewhere q128k64w4.
    FA2_WGMMA,        // softmax of tile t + 1 under P V of tile t, 3 stages
    FA2_WGMMA_QREG,   // the same with Q in registers (S's A operand)
    FA2_WGMMA_SYNC,   // every product waited for at once, 2 stages
    FA2_PREFILL_CONFIGS
};

// attention.full's kernels (fa2_prefill_launch.config of a full launch);
// ORIN_FA2_FULL_CONFIG picks one by name. The wgmma ones run on a compute
// capability 9 GPU in a build with the sm_90a target at head_dim 64 and 72
// with 16-byte aligned rows (cuda_prefill_wgmma.cuh); elsewhere the host
// picks the mma.sync kernel.
enum fa2_full_config {
    FA2_FULL_MMA,         // the mma.sync kernel (fa2_launch_full): every GPU, head_dim 64/72/128
    FA2_FULL_WGMMA,       // 3 warpgroups of 64 rows (192-row Q tiles), P V at n = head_dim
    FA2_FULL_WGMMA_Q128,  // 2 warpgroups (128-row Q tiles)
    FA2_FULL_WGMMA_N80,   // 3 warpgroups, P V at n 80 at head_dim 72 (zero-filled dims 72-79)
    FA2_FULL_CONFIGS
};

struct fa2_prefill_params {
    const void *q;            // [n, H, hd]
    void *out;                // [n, H, hd]
    const int32_t *positions; // [n], device memory (causal prefill)
    const int32_t *cu_seqlens; // [segments + 1], device memory (attention.full)
    int32_t segments;
    orin_kv_view cache;       // attention.full: k, v [n, Hkv, hd] seen as a cache
    int32_t n, heads, group;  // group = H / Hkv
    int32_t max_kv_len;
    float scale;              // f32 kernel: s = q.k * scale, expf
    float scale_log2;         // tensor-core kernel: scale * log2(e), exp2
    int32_t vec16;            // q, out, and every K/V row start 16-byte aligned
};

struct fa2_prefill_launch {
    fa2_prefill_params p;
    int head_dim;             // 64 or 128; attention.full also 72
    bool full;                // attention.full: bidirectional within segments
    int config;               // fa2_prefill_config (full: fa2_full_config)
    int device;               // CUDA ordinal (per-device smem attribute)
    cudaStream_t stream;
    const char *label;
};

// Launch the tensor-core kernel of l->config for one dtype: 0, or -1 with an
// error (a failed cudaFuncSetAttribute; launch errors are for the caller's
// orin_cu_launched).
int fa2_prefill_mma_f16(const fa2_prefill_launch *l);
int fa2_prefill_mma_bf16(const fa2_prefill_launch *l);

// The head dims of attention.full's tensor-core kernel (Qwen3-VL's vision
// towers have 64 and 72).
static inline bool fa2_full_head_dim_ok(int64_t hd)
{
    return hd == 64 || hd == 72 || hd == 128;
}

// Grid of both kernels: x = query head, y = Q tile counted from the last. The
// hardware issues blocks x fastest, so the heaviest tiles (the latest rows: the
// longest causal spans) go first for every head, and a GQA group's query heads,
// which read the same K/V, run side by side (shared in L2).
static inline dim3 fa2_prefill_grid(int heads, int n, int block_q)
{
    return dim3((unsigned)heads, (unsigned)((n + block_q - 1) / block_q), 1);
}

// Sets the dynamic shared memory limit of `kernel` to `bytes` once per device
// (a function-local static per instantiation keeps the flags).
static inline int fa2_smem_limit(const void *kernel, int bytes, int device, bool *done,
                                 const char *label)
{
    if (bytes <= 48 * 1024 || (device >= 0 && device < 16 && done[device]))
        return 0;
    if (orin_cu_call(label, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)",
                     cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          bytes)))
        return -1;
    if (device >= 0 && device < 16)
        done[device] = true;
    return 0;
}

// ---- the rows of one block ----

// The block's query rows and their positions, read once from device memory.
// A row past n, or whose position is outside 0..max_kv_len-1, gets -1: it
// attends nothing, reads nothing, and (if < n) is written as NaN. Nothing here
// trusts a position: every K/V address later comes from a position <= the
// block's largest valid one, < max_kv_len <= capacity.
template <int BQ, int THREADS>
__device__ __forceinline__ void fa2_load_positions(const fa2_prefill_params &p, int i0, int *pos_sm)
{
    for (int r = threadIdx.x; r < BQ; r += THREADS) {
        int pos = -1;
        if (i0 + r < p.n) {
            pos = p.positions[i0 + r];
            if (pos < 0 || pos >= p.max_kv_len)
                pos = -1;
        }
        pos_sm[r] = pos;
    }
}

// attention.full: row i0 + r attends the keys [lo, hi) of its segment, found
// by a binary search of cu_seqlens (device memory, never trusted): last_sm[r]
// = hi - 1 and lo_sm[r] = lo, or both -1 for a row past n or one the values
// found do not frame inside 0..n (it reads nothing and is written as NaN).
template <int BQ, int THREADS>
__device__ __forceinline__ void fa2_load_segments(const fa2_prefill_params &p, int i0, int *last_sm,
                                                  int *lo_sm)
{
    for (int r = threadIdx.x; r < BQ; r += THREADS) {
        const int row = i0 + r;
        int lo = -1, hi = -1;
        if (row < p.n) {
            int a = 0, b = p.segments - 1;
            while (a < b) {
                const int mid = (a + b + 1) / 2;
                if (p.cu_seqlens[mid] <= row)
                    a = mid;
                else
                    b = mid - 1;
            }
            lo = p.cu_seqlens[a];
            hi = p.cu_seqlens[a + 1];
            if (lo < 0 || lo > row || row >= hi || hi > p.n)
                lo = hi = -1;
        }
        last_sm[r] = hi < 0 ? -1 : hi - 1;
        lo_sm[r] = lo;
    }
}

// Largest and smallest valid position over rows [row0, row0 + rows) of pos_sm,
// reduced over the warp: max -1 and min INT_MAX when none is valid.
__device__ __forceinline__ void fa2_warp_span(const int *pos_sm, int row0, int rows, int *max_out,
                                              int *min_out)
{
    int mx = -1, mn = INT_MAX;
    for (int r = threadIdx.x & 31; r < rows; r += 32) {
        int pos = pos_sm[row0 + r];
        if (pos >= 0) {
            mx = max(mx, pos);
            mn = min(mn, pos);
        }
    }
    *max_out = __reduce_max_sync(0xffffffffu, mx);
    *min_out = __reduce_min_sync(0xffffffffu, mn);
}

// ---- PTX wrappers ----

// Four 8x8 b16 matrices; lanes 8j..8j+7 give the row addresses of matrix j,
// and each lane receives, in register j, row lane/4, columns 2(lane%4)..+1 of
// matrix j (with .trans: column lane/4, rows 2(lane%4)..+1).
__device__ __forceinline__ void fa2_ldsm_x4(uint32_t addr, uint32_t (&r)[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void fa2_ldsm_x4_trans(uint32_t addr, uint32_t (&r)[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Two f32 rounded to T (nearest even) in one register, `lo` in the low half:
// the element order of an mma operand register.
template <typename T> __device__ __forceinline__ uint32_t fa2_pack(float lo, float hi);

template <> __device__ __forceinline__ uint32_t fa2_pack<__half>(float lo, float hi)
{
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

template <> __device__ __forceinline__ uint32_t fa2_pack<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

// 2^x on the SFU (2 ulp; -inf gives +0; subnormal results flush to 0, far below
// what a half-precision P keeps).
__device__ __forceinline__ float fa2_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// ---- the tensor-core kernel ----

// HD is the smem row width (64 or 128: the swizzle's whole 128-byte periods),
// HDV <= HD the data's head_dim (a multiple of 8): rows are loaded HDV wide
// and zero-filled to the next multiple of 16, the width the products run on
// (KSTEPS k-steps of S = Q K^T, 2 * KSTEPS d-tiles of O); the rest of a row
// is never read.
template <int HD, int BQ, int BKV, int WARPS, int STAGES, int HDV = HD> struct fa2_mma_shape {
    static constexpr int THREADS = WARPS * 32;
    static constexpr int MT = BQ / (16 * WARPS);  // 16-row m-tiles per warp
    static constexpr int CHUNKS = HD / 8;         // 16-byte chunks per smem row
    static constexpr int VCHUNKS = HDV / 8;       // of them, chunks of data
    static constexpr int KSTEPS = (HDV + 15) / 16;
    static constexpr int ROW_BYTES = HD * 2;
    static constexpr int ROW_STEP = THREADS / CHUNKS; // rows one pass of the block copies
    // Q fragments stay in registers when they take at most 32 of them; else
    // they are re-read from shared memory every KV tile.
    static constexpr bool Q_IN_REGS = MT * KSTEPS * 16 <= 128;
    static constexpr int STAGE_BYTES = 2 * BKV * ROW_BYTES; // K tile, then V tile
    static constexpr int Q_BYTES = BQ * ROW_BYTES;
    // Q in registers: its tile is dead after the prologue, so it borrows the
    // last stage's buffer (first written at tile 0, after a barrier).
    static constexpr bool Q_ALIASED = Q_IN_REGS && Q_BYTES <= STAGE_BYTES;
    static constexpr int Q_OFFSET = Q_ALIASED ? (STAGES - 1) * STAGE_BYTES : 0;
    static constexpr int KV_OFFSET = Q_ALIASED ? 0 : Q_BYTES;
    static constexpr int SMEM = KV_OFFSET + STAGES * STAGE_BYTES;

    static_assert(HD == 64 || HD == 128, "smem rows of 64 or 128 halves");
    static_assert(HDV % 8 == 0 && HDV <= HD && HDV > 0, "data head_dim a multiple of 8, <= HD");
    static_assert(MT >= 1 && BQ == MT * 16 * WARPS, "BQ = 16 * MT * WARPS");
    static_assert(BKV % 16 == 0, "BKV a multiple of 16");
    static_assert(THREADS % CHUNKS == 0 && ROW_STEP % 8 == 0,
                  "a copy pass covers whole rows, 8 at a time (the swizzle period)");
    static_assert(BKV % ROW_STEP == 0 && BQ % ROW_STEP == 0, "tiles are whole copy passes");
    static_assert(STAGES >= 2, "at least double buffering");
};

// Shared memory layout: every tile (Q, K, V) is rows of HD halves, ROW_BYTES
// apart, and the 16-byte chunk c of row r sits at chunk c ^ (r & 7) (XOR
// swizzle). An ldmatrix phase reads 8 consecutive rows at one logical chunk:
// after the swizzle they are 8 different chunks of an aligned 128 bytes, i.e.
// all 32 banks once, so ldmatrix (plain and .trans), the cp.async writes (8
// threads fill one row's 8 chunks) and the epilogue's 4-byte writes are all
// free of bank conflicts, with no padding: tiles stay dense, and the smem per
// block (what sets blocks per SM) stays at its minimum.
__device__ __forceinline__ uint32_t fa2_swizzle(int row, int chunk, int row_bytes)
{
    return (uint32_t)(row * row_bytes + ((chunk ^ (row & 7)) << 4));
}

// The thread's part of a tile copy: chunk `chunk` of rows r0, r0 + ROW_STEP, ...
// (ROW_STEP a multiple of 8, so all its rows share r & 7 and one swizzle).
template <int CHUNKS> struct fa2_copy_slot {
    int chunk, r0, swz;
    __device__ __forceinline__ fa2_copy_slot()
        : chunk(threadIdx.x % CHUNKS), r0(threadIdx.x / CHUNKS),
          swz((chunk ^ (r0 & 7)) << 4) {}
};

// A plain element-wise copy of 16 bytes into shared memory, for views whose
// rows are not 16-byte aligned (cp.async needs aligned addresses).
template <typename T>
__device__ __forceinline__ void fa2_copy16_slow(char *dst, const T *src)
{
    uint4 v;
    T *e = reinterpret_cast<T *>(&v);
#pragma unroll
    for (int i = 0; i < 8; i++)
        e[i] = src[i];
    *reinterpret_cast<uint4 *>(dst) = v;
}

// Copies the Q tile's rows into shared memory at `dst` (swizzled); rows past
// n are zero. 16-byte cp.async where vec16, else element-wise; both are
// complete after cp.async.wait_group and a barrier.
template <typename T, int BQ, int CHUNKS, int ROW_STEP, int VCHUNKS = CHUNKS>
__device__ __forceinline__ void fa2_copy_q(char *smem, uint32_t smem_base, int dst, bool vec16,
                                           const T *q_head, int64_t q_ld, int i0, int n)
{
    const fa2_copy_slot<CHUNKS> c;
#pragma unroll
    for (int pass = 0; pass < BQ / ROW_STEP; pass++) {
        const int r = c.r0 + pass * ROW_STEP;
        const int off = dst + r * CHUNKS * 16 + c.swz;
        if (i0 + r >= n || (VCHUNKS < CHUNKS && c.chunk >= VCHUNKS)) {
            *reinterpret_cast<uint4 *>(smem + off) = make_uint4(0, 0, 0, 0);
            continue;
        }
        const T *src = q_head + (int64_t)(i0 + r) * q_ld + c.chunk * 8;
        if (vec16)
            orin_cu_cp_async16(smem_base + off, src, 16);
        else
            fa2_copy16_slow(smem + off, src);
    }
}

// Copies K and V rows of cache positions j0 .. j0 + BKV - 1 into shared memory
// at k_dst, v_dst (swizzled). Positions >= kv_end are zero-filled, never read
// (they may hold NaN, or lie past the cache). Addresses come from
// orin_kv_offset, one call per row for K and V alike.
template <typename T, int BKV, int CHUNKS, int ROW_STEP, int VCHUNKS = CHUNKS>
__device__ __forceinline__ void fa2_copy_kv(char *smem, uint32_t smem_base, int k_dst, int v_dst,
                                            bool vec16, const orin_kv_view &kv, int kv_head,
                                            int j0, int kv_end)
{
    const fa2_copy_slot<CHUNKS> c;
    // A chunk past the data is zero-filled like a row past kv_end (from the
    // base address, which is valid).
    const bool data = VCHUNKS == CHUNKS || c.chunk < VCHUNKS;
    const T *k = static_cast<const T *>(kv.k) + (data ? c.chunk * 8 : 0);
    const T *v = static_cast<const T *>(kv.v) + (data ? c.chunk * 8 : 0);
    if (vec16) {
#pragma unroll
        for (int pass = 0; pass < BKV / ROW_STEP; pass++) {
            const int r = c.r0 + pass * ROW_STEP;
            const int off = r * CHUNKS * 16 + c.swz;
            int pos = j0 + r;
            // Opaque to the optimiser: otherwise it hoists every pass's
            // r * pos_stride out of the KV loop, 2 registers each, and the
            // MT 2 kernels spill. One multiply-add per row here is cheaper.
            asm volatile("" : "+r"(pos));
            const bool live = pos < kv_end && data;
            const int64_t e = live ? orin_kv_offset(&kv, pos, kv_head) : 0;
            // src-size 0: zero-fill, nothing read (the base address is valid anyway)
            orin_cu_cp_async16(smem_base + k_dst + off, k + e, live ? 16 : 0);
            orin_cu_cp_async16(smem_base + v_dst + off, v + e, live ? 16 : 0);
        }
    } else {
#pragma unroll 1
        for (int r = c.r0; r < BKV; r += ROW_STEP) {
            const int off = r * CHUNKS * 16 + c.swz;
            if (j0 + r < kv_end && data) {
                const int64_t e = orin_kv_offset(&kv, j0 + r, kv_head);
                fa2_copy16_slow(smem + k_dst + off, k + e);
                fa2_copy16_slow(smem + v_dst + off, v + e);
            } else {
                *reinterpret_cast<uint4 *>(smem + k_dst + off) = make_uint4(0, 0, 0, 0);
                *reinterpret_cast<uint4 *>(smem + v_dst + off) = make_uint4(0, 0, 0, 0);
            }
        }
    }
}

// Blocks per SM asked of ptxas (__launch_bounds__), per target: the register
// cap is 65536 / (threads * blocks). Hopper has 228 KB of smem an SM, Ampere
// and Orin 164 KB, so a count that smem rules out on one is not asked there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FA2_MIN_BLOCKS(hopper, ampere) (hopper)
#else
#define FA2_MIN_BLOCKS(hopper, ampere) (ampere)
#endif

// FlashAttention-2 forward, f16/bf16 on tensor cores.
//
// Launch: grid (H, ceil(n / BQ)) (fa2_prefill_grid: heaviest Q tiles first),
// block WARPS * 32 threads, dynamic smem fa2_mma_shape::SMEM (Q tile + STAGES
// K/V tile pairs, Q sharing the last stage when it lives in registers), plus
// BQ + WARPS ints static.
//
// Per KV tile a warp computes S = Q K^T (16*MT x BKV) with mma.m16n8k16,
// masks it where the tile crosses its rows' positions, updates the running
// max/sum with exp2 (log2(e) folded into the scale), rescales O, and adds
// P V with P's accumulator registers repacked as the A operand (no smem
// round trip). Fragment layouts (PTX ISA, mma.m16n8k16 .f16/.bf16; g = lane/4,
// t = lane%4):
//   A (16x16, row): reg0 = (g, 2t..2t+1), reg1 = (g+8, 2t..), reg2 = (g, 2t+8..),
//                   reg3 = (g+8, 2t+8..)
//   B (16x8, col):  reg0 = (k 2t..2t+1, n g), reg1 = (k 2t+8.., n g)
//   C (16x8, f32):  c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1)
// so S's n-tiles 2kk and 2kk+1 (keys 16kk..16kk+15) are exactly the A operand
// of P.V's k-step kk: {pack(S[2kk].c0,c1), pack(S[2kk].c2,c3),
// pack(S[2kk+1].c0,c1), pack(S[2kk+1].c2,c3)}. K rows (keys, dims contiguous)
// are B's columns: plain ldmatrix; V rows are B's rows: ldmatrix.trans.
// Smem tiles are dense and XOR-swizzled (fa2_swizzle): no bank conflicts
// without padding.
//
// Bounds: in the main loop, tensor-core issue rate and shared-memory
// bandwidth (every ldmatrix byte of K and V feeds 16 * MT rows: MT 2 halves
// the smem traffic per flop), then the exp/max/rescale ALU work between the
// two products. Global traffic is K/V once per (Q tile, head), from L2.
//
// Positions: row i attends keys 0..positions[i]. The block bounds its KV loop
// by its largest valid position (tiles past it are never visited, so their
// K/V are never read); each warp skips tiles past its own rows' largest
// position and masks only tiles that cross its rows' smallest one. K/V rows
// past the block's bound inside the last tile are zero-filled, not loaded:
// the cache may hold NaN there and P = 0 must not meet it.
//
// FULL (attention.full): row i attends the keys [lo, hi) of its segment
// (fa2_load_segments), K/V being the call's k, v seen as a cache. The KV loop
// runs from the block's smallest lo to its largest hi - 1 (a Q tile that
// straddles two segments visits both), warps skip tiles outside their rows'
// spans, and the mask also drops keys before a row's lo. HDV < HD: see
// fa2_mma_shape.
template <typename T, int HD, int BQ, int BKV, int WARPS, int STAGES, int MB_HOPPER, int MB_AMPERE,
          int HDV = HD, bool FULL = false>
__global__ void __launch_bounds__(WARPS * 32, FA2_MIN_BLOCKS(MB_HOPPER, MB_AMPERE))
    fa2_prefill_mma_kernel(const __grid_constant__ fa2_prefill_params p)
{
    typedef fa2_mma_shape<HD, BQ, BKV, WARPS, STAGES, HDV> S;
    constexpr int MT = S::MT, NT = BKV / 8, KSTEPS = S::KSTEPS, DT = 2 * KSTEPS,
                  RB = S::ROW_BYTES;

    extern __shared__ __align__(128) char smem[];
    __shared__ int pos_sm[BQ];            // the row's last key (FULL: hi - 1)
    __shared__ int lo_sm[FULL ? BQ : 1];  // FULL: the row's first key
    __shared__ int warp_max_sm[WARPS];
    __shared__ int warp_lo_sm[FULL ? WARPS : 1];

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t4 = lane % 4;
    const int head = blockIdx.x;
    const int i0 = (gridDim.y - 1 - blockIdx.y) * BQ;
    const int kv_head = head / p.group;
    const int wrow0 = warp * MT * 16;  // this warp's first row in the tile
    const uint32_t smem_base = orin_cu_smem_addr(smem);
    const orin_kv_view kv = p.cache;

    // -- positions: the block's KV bounds, the warp's span
    if constexpr (FULL)
        fa2_load_segments<BQ, S::THREADS>(p, i0, pos_sm, lo_sm);
    else
        fa2_load_positions<BQ, S::THREADS>(p, i0, pos_sm);
    __syncthreads();
    int warp_max, warp_min, warp_lo_max = 0, warp_lo_min = 0;
    fa2_warp_span(pos_sm, wrow0, MT * 16, &warp_max, &warp_min);
    if constexpr (FULL)
        fa2_warp_span(lo_sm, wrow0, MT * 16, &warp_lo_max, &warp_lo_min);
    if (lane == 0) {
        warp_max_sm[warp] = warp_max;
        if constexpr (FULL)
            warp_lo_sm[warp] = warp_lo_min;
    }
    __syncthreads();
    int block_max = -1, kv_begin = 0;
#pragma unroll
    for (int w = 0; w < WARPS; w++)
        block_max = max(block_max, warp_max_sm[w]);
    if constexpr (FULL) {
        kv_begin = INT_MAX;
#pragma unroll
        for (int w = 0; w < WARPS; w++)
            kv_begin = min(kv_begin, warp_lo_sm[w]);
    }
    const int kv_end = block_max + 1;            // keys [kv_begin, kv_end) are read
    const int tiles = kv_end > kv_begin ? (kv_end - kv_begin + BKV - 1) / BKV : 0;

    // -- copies into shared memory
    const bool vec16 = p.vec16 != 0;
    const T *q_head = static_cast<const T *>(p.q) + (int64_t)head * HDV;
    const int64_t q_ld = (int64_t)p.heads * HDV;
    auto issue_kv = [&](int tile) {
        const int k_dst = S::KV_OFFSET + (tile % STAGES) * S::STAGE_BYTES;
        fa2_copy_kv<T, BKV, S::CHUNKS, S::ROW_STEP, S::VCHUNKS>(
            smem, smem_base, k_dst, k_dst + BKV * RB, vec16, kv, kv_head, kv_begin + tile * BKV,
            kv_end);
    };

    // -- prologue: Q with tile 0 (group 0), tiles 1..STAGES-2 (a group each)
    fa2_copy_q<T, BQ, S::CHUNKS, S::ROW_STEP, S::VCHUNKS>(smem, smem_base, S::Q_OFFSET, vec16,
                                                         q_head, q_ld, i0, p.n);
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < tiles)
            issue_kv(s);
        orin_cu_cp_async_commit();
    }

    // Per-lane ldmatrix offsets inside a tile, before the per-step XOR
    // (derivation: the chunk (2k + b) ^ (row & 7) with b in {0, 1} equals
    // 2k ^ (b ^ (row & 7)), i.e. the lane's constant XOR the step's 2k):
    //  Q (A, plain):   row  16mt + (lane & 15),          chunk 2kk + (lane >> 4)
    //  K (B, plain):   key  16np + (lane & 7) + 8(lane >> 4), chunk 2kk + ((lane >> 3) & 1)
    //  V (B, .trans):  key  16kk + (lane & 15),           chunk 2dp + (lane >> 4)
    const uint32_t sw_a = (uint32_t)((lane >> 4) ^ (lane & 7));
    const uint32_t sw_k = (uint32_t)(((lane >> 3) & 1) ^ (lane & 7));
    const uint32_t q_lane = (uint32_t)((wrow0 + (lane & 15)) * RB) | (sw_a << 4);
    const uint32_t k_lane = (uint32_t)(((lane & 7) + 8 * (lane >> 4)) * RB) | (sw_k << 4);
    const uint32_t v_lane = (uint32_t)((lane & 15) * RB) | (sw_a << 4);
    const uint32_t q_base = smem_base + S::Q_OFFSET;

    // Q in registers: read once, after the prologue lands. The loop's first
    // barrier then orders these reads before tile STAGES-1 overwrites the
    // aliased buffer.
    uint32_t q_frag[S::Q_IN_REGS ? MT : 1][S::Q_IN_REGS ? KSTEPS : 1][4];
    if constexpr (S::Q_IN_REGS) {
        orin_cu_cp_async_wait<STAGES - 2>();
        __syncthreads();
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int kk = 0; kk < KSTEPS; kk++)
                fa2_ldsm_x4(q_base + (q_lane ^ (kk << 5)) + mt * 16 * RB, q_frag[mt][kk]);
    }

    float o[MT][DT][4];
    float row_m[MT][2], row_l[MT][2];  // running max (scaled by log2 e) and partial sum
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[mt][dt][e] = 0.0f;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            row_m[mt][h] = -INFINITY;
            row_l[mt][h] = 0.0f;
        }
    }
    const float sl2 = p.scale_log2;

    for (int tile = 0; tile < tiles; tile++) {
        // Tile `tile` has landed (this thread's copies), and after the
        // barrier everyone's are visible and everyone is done with tile - 1,
        // whose buffer the next issue reuses.
        orin_cu_cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (tile + STAGES - 1 < tiles)
            issue_kv(tile + STAGES - 1);
        orin_cu_cp_async_commit();

        const int j0 = kv_begin + tile * BKV;
        if (j0 > warp_max)
            continue;  // every row of this warp ends before this tile
        if (FULL && j0 + BKV <= warp_lo_min)
            continue;  // or starts after it
        const uint32_t k_base = smem_base + S::KV_OFFSET + (tile % STAGES) * S::STAGE_BYTES;
        const uint32_t v_base = k_base + BKV * RB;
        // Opaque copies of the lane offsets: the optimiser would otherwise
        // keep every (offset ^ step) of the tile in its own register across
        // the loop (24 of them at hd 128); one LOP per ldmatrix is cheaper.
        uint32_t ql = q_lane, kl = k_lane, vl = v_lane;
        asm volatile("" : "+r"(ql), "+r"(kl), "+r"(vl));

        // S = Q K^T
        float s[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[mt][nt][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; kk++) {
            uint32_t qa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                if constexpr (S::Q_IN_REGS) {
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        qa[mt][e] = q_frag[mt][kk][e];
                } else {
                    fa2_ldsm_x4(q_base + (ql ^ (kk << 5)) + mt * 16 * RB, qa[mt]);
                }
            }
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t b[4];  // n-tile 2np: b[0], b[1]; n-tile 2np + 1: b[2], b[3]
                fa2_ldsm_x4(k_base + (kl ^ (kk << 5)) + np * 16 * RB, b);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    orin_cu_mma16816<T>(s[mt][2 * np], qa[mt][0], qa[mt][1], qa[mt][2], qa[mt][3], b[0], b[1]);
                    orin_cu_mma16816<T>(s[mt][2 * np + 1], qa[mt][0], qa[mt][1], qa[mt][2], qa[mt][3], b[2], b[3]);
                }
            }
        }

        // Mask keys past each row's position, where the tile crosses one (the
        // positions are re-read from smem here, rather than held in registers
        // across the loop for the few tiles that need them).
        if (j0 + BKV - 1 > warp_min || (FULL && j0 < warp_lo_max)) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int row = wrow0 + mt * 16 + g + 8 * h;
                    const int last = pos_sm[row] - j0 - 2 * t4;
                    const int first = FULL ? lo_sm[row] - j0 - 2 * t4 : INT_MIN;
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) {
                        // key j0 + 8nt + 2t4 + e attends iff first <= 8nt + e <= last
                        if (nt * 8 > last || nt * 8 < first)
                            s[mt][nt][2 * h] = -INFINITY;
                        if (nt * 8 + 1 > last || nt * 8 + 1 < first)
                            s[mt][nt][2 * h + 1] = -INFINITY;
                    }
                }
            }
        }

        // Online softmax: rows g (h 0: c0, c1) and g + 8 (h 1: c2, c3); a row's
        // 4 lanes (same g) combine their maxima with two shuffles. P leaves as
        // T pairs at once (p[mt][nt][h] = row g + 8h, keys 2t, 2t + 1 of n-tile
        // nt), which halves the registers it holds during P V.
        uint32_t pk[MT][NT][2];
        float alpha[MT][2];
        bool moved = false;
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float mx = -INFINITY;
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_new = fmaxf(row_m[mt][h], mx * sl2);
                // A row that has seen only masked keys keeps m = -inf: use 0 so
                // that exp2(-inf - 0) = 0 instead of exp2(-inf + inf) = NaN.
                const float m_use = m_new == -INFINITY ? 0.0f : m_new;
                alpha[mt][h] = fa2_exp2(row_m[mt][h] - m_use);
                moved |= alpha[mt][h] != 1.0f;
                row_m[mt][h] = m_new;
                float sum = 0.0f;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const float p0 = fa2_exp2(fmaf(s[mt][nt][2 * h], sl2, -m_use));
                    const float p1 = fa2_exp2(fmaf(s[mt][nt][2 * h + 1], sl2, -m_use));
                    sum += p0 + p1;
                    pk[mt][nt][h] = fa2_pack<T>(p0, p1);
                }
                row_l[mt][h] = row_l[mt][h] * alpha[mt][h] + sum;
            }
        }
        // Rescale O only where a row's max moved. Past the first tiles most
        // tiles move none of the warp's 16 * MT maxima (a tile holds a row's
        // new maximum with probability ~ 1 / tiles seen): alpha is then exactly
        // 1 in every lane, and the 4 * MT * DT multiplies are skipped (exact).
        if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int dt = 0; dt < DT; dt++) {
                    o[mt][dt][0] *= alpha[mt][0];
                    o[mt][dt][1] *= alpha[mt][0];
                    o[mt][dt][2] *= alpha[mt][1];
                    o[mt][dt][3] *= alpha[mt][1];
                }
        }

        // O += P V: P's n-tiles 2kk, 2kk + 1 are the A operand of k-step kk
        // (A reg0 = row g keys 2t.., reg1 = row g + 8, reg2/reg3 the same 8 keys on).
#pragma unroll
        for (int kk = 0; kk < BKV / 16; kk++) {
#pragma unroll
            for (int dp = 0; dp < KSTEPS; dp++) {
                uint32_t b[4];  // d-tile 2dp: b[0], b[1]; d-tile 2dp + 1: b[2], b[3]
                fa2_ldsm_x4_trans(v_base + (vl ^ (dp << 5)) + kk * 16 * RB, b);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const uint32_t pa[4] = {pk[mt][2 * kk][0], pk[mt][2 * kk][1],
                                            pk[mt][2 * kk + 1][0], pk[mt][2 * kk + 1][1]};
                    orin_cu_mma16816<T>(o[mt][2 * dp], pa[0], pa[1], pa[2], pa[3], b[0], b[1]);
                    orin_cu_mma16816<T>(o[mt][2 * dp + 1], pa[0], pa[1], pa[2], pa[3], b[2], b[3]);
                }
            }
        }
    }

    // -- epilogue: O / l rounded to T, staged through the Q tile's smem (free
    // once every copy has landed and every warp is past its last ldmatrix),
    // then 16-byte row stores.
    orin_cu_cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float l = row_l[mt][h];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            // l >= 1 for a valid row (its max key contributes exp2(0)); an
            // invalid row's l may be 0 and is overwritten with NaN below.
            const float inv_l = 1.0f / l;
            const int row = wrow0 + mt * 16 + g + 8 * h;
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                const uint32_t v = fa2_pack<T>(o[mt][dt][2 * h] * inv_l, o[mt][dt][2 * h + 1] * inv_l);
                *reinterpret_cast<uint32_t *>(smem + S::Q_OFFSET + fa2_swizzle(row, dt, RB) + 4 * t4) = v;
            }
        }
    }
    __syncwarp();  // each warp stores only the rows it wrote

    T *out_head = static_cast<T *>(p.out) + (int64_t)head * HDV;
    for (int idx = lane; idx < MT * 16 * S::VCHUNKS; idx += 32) {
        const int row = wrow0 + idx / S::VCHUNKS, chunk = idx % S::VCHUNKS;
        if (i0 + row >= p.n)
            break;  // rows only grow with idx
        T *dst = out_head + (int64_t)(i0 + row) * q_ld + chunk * 8;
        uint4 v = *reinterpret_cast<const uint4 *>(smem + S::Q_OFFSET + fa2_swizzle(row, chunk, RB));
        if (pos_sm[row] < 0) {
            T *e = reinterpret_cast<T *>(&v);
#pragma unroll
            for (int i = 0; i < 8; i++)
                e[i] = orin_cu_from_f32<T>(NAN);
        }
        if (vec16) {
            *reinterpret_cast<uint4 *>(dst) = v;
        } else {
            const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
            for (int i = 0; i < 8; i++)
                dst[i] = e[i];
        }
    }
}

// Launches one configuration: sets the smem limit once per device, then the grid.
template <typename T, int HD, int BQ, int BKV, int WARPS, int STAGES, int MB_HOPPER, int MB_AMPERE,
          int HDV = HD, bool FULL = false>
static int fa2_launch_mma(const fa2_prefill_launch *l)
{
    typedef fa2_mma_shape<HD, BQ, BKV, WARPS, STAGES, HDV> S;
    static bool smem_set[16];
    auto kernel =
        fa2_prefill_mma_kernel<T, HD, BQ, BKV, WARPS, STAGES, MB_HOPPER, MB_AMPERE, HDV, FULL>;
    if (fa2_smem_limit((const void *)kernel, S::SMEM, l->device, smem_set, l->label))
        return -1;
    kernel<<<fa2_prefill_grid(l->p.heads, l->p.n, BQ), S::THREADS, S::SMEM, l->stream>>>(l->p);
    return 0;
}

// The configurations of one dtype and head dim. The last two arguments are
// the blocks per SM asked of ptxas on Hopper and on Ampere/Orin (see
// FA2_MIN_BLOCKS): q64k64w4 at hd 128 asks 3 x 128 threads on Hopper (168
// registers; 3 x 64 KB of smem fit in 228 KB, not in 164), the hd 64 MT 1
// configs 128 registers (16 warps an SM); the others leave ptxas free.
template <typename T, int HD> static int fa2_launch_mma_hd(const fa2_prefill_launch *l)
{
    constexpr bool hd64 = HD == 64;
    switch (l->config) {
    case FA2_Q128_K64_W4:
    case FA2_WGMMA:       // where wgmma does not apply: the same 128-row Q tiles
    case FA2_WGMMA_QREG:
    case FA2_WGMMA_SYNC:
        return fa2_launch_mma<T, HD, 128, 64, 4, 2, 1, 1>(l);
    case FA2_Q128_K64_W8:
        return fa2_launch_mma<T, HD, 128, 64, 8, 2, hd64 ? 2 : 1, hd64 ? 2 : 1>(l);
    case FA2_Q64_K64_W4:
        return fa2_launch_mma<T, HD, 64, 64, 4, 2, hd64 ? 4 : 3, hd64 ? 4 : 2>(l);
    case FA2_Q128_K32_W4:
        return fa2_launch_mma<T, HD, 128, 32, 4, 3, 1, 1>(l);
    }
    return orin_error_set("%s: no tile configuration %d", l->label, l->config);
}

// attention.full: 128-row Q tiles of 4 warps (MT 2), double-buffered KV tiles
// (no tile is skipped by a causal mask, so large tiles pay). head_dim 72 runs
// in smem rows of 128 with Q re-read from smem (its 5 k-steps x MT 2 take more
// registers than the 32 kept): at KV tiles of 64 that is 96 KB a block, 2
// blocks an SM, and Qwen3-VL's 16 heads x 24 tiles of a 3,072-patch image ran
// in 1.45 waves on 132 SMs (216 us a call, H200). KV tiles of 32 take 64 KB,
// 3 blocks an SM (ptxas held to 168 registers): one wave
// (FA2_FULL72_BKV / FA2_FULL72_MIN_BLOCKS: the A/B's knobs, notes/fa2-prefill.md).
// On Hopper (sm_90a build) head_dim 64 and 72 run fa2_full_wgmma_kernel instead
// (cuda_prefill_wgmma.cuh; config FA2_FULL_MMA, ORIN_FA2_FULL_CONFIG=mma, runs
// this one there).
#ifndef FA2_FULL72_BKV
#define FA2_FULL72_BKV 32
#endif
#ifndef FA2_FULL72_MIN_BLOCKS
#define FA2_FULL72_MIN_BLOCKS 3
#endif
template <typename T> static int fa2_launch_full(const fa2_prefill_launch *l)
{
    switch (l->head_dim) {
    case 64:
        return fa2_launch_mma<T, 64, 128, 64, 4, 2, 1, 1, 64, true>(l);
    case 72:
        return fa2_launch_mma<T, 128, 128, FA2_FULL72_BKV, 4, 2, FA2_FULL72_MIN_BLOCKS, 1, 72,
                              true>(l);
    case 128:
        return fa2_launch_mma<T, 128, 128, 64, 4, 2, 1, 1, 128, true>(l);
    }
    return orin_error_set("%s: head_dim %d (fa2's attention.full on cuda runs 64, 72 and 128)",
                          l->label, l->head_dim);
}

template <typename T> static int fa2_launch_mma_dt(const fa2_prefill_launch *l)
{
    if (l->full)
        return fa2_launch_full<T>(l);
    if (l->head_dim == 64)
        return fa2_launch_mma_hd<T, 64>(l);
    if (l->head_dim == 128)
        return fa2_launch_mma_hd<T, 128>(l);
    return orin_error_set("%s: head_dim %d (fa2 on cuda runs 64 and 128)", l->label, l->head_dim);
}

#endif
