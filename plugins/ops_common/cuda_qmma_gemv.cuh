// The quantized GEMV on tiles (one row of x): its kernel, the choice among
// its instantiations and their launch. cuda_quant.cu sets a call up
// (tiles_gemv) and calls qmma_launch<FMT>; each format's kernels are
// instantiated in a translation unit of their own (cuda_qmma_gemv_awq4.cu,
// cuda_qmma_gemv_int8.cu), so that the two compile in parallel: a format has
// 104 kernels (both norms, both modes, f16 and bf16), 35-45 s of nvcc an
// architecture where the whole file took 80 (bench/notes/quant.md,
// eighteenth session).
#ifndef ORIN_OPS_COMMON_CUDA_QMMA_GEMV_CUH
#define ORIN_OPS_COMMON_CUDA_QMMA_GEMV_CUH

#include "cuda_gemv.cuh"
#include "cuda_qmma.cuh"

#include "orin/cuda_util.cuh"
#include "orin/ops.h"

#include <type_traits>

// ---- the GEMV (one row of x) on tiles -------------------------------------------------
//
// Launch: grid = the n-tiles of every matrix (a block an n-tile), 8 warps (16
// where the grid leaves SMs idle), 3 blocks an SM; warp w takes the w-th share
// of the units (whole spans), two batches of 4 units (AWQ: 16 k-tiles; int8:
// 8) of 16-byte loads in flight a lane (a warp load is 512 contiguous bytes),
// the first one (AWQ) or two (int8) issued before the PDL wait. x and the
// block's group data (scales and offsets as f32: 128 bytes a group and
// matrix) go to shared memory first (2K + 128 groups + K / 4 bytes a matrix,
// at most QMMA_SMEM_MAX), x laid out so that a lane's inputs for a unit are
// contiguous, so that no tile waits on a global load but its weights' (x read
// from L2 a tile at a time made a 4096 x 4096 product take 14 us:
// bench/notes/quant.md), with x's sum over each span. Per k-tile a lane turns
// its word into 4 A registers (AWQ: 1 shift and 4 LOP3 in f16; int8: 4 byte
// permutes, and in bf16 a subtraction and conversion through f32) and issues
// one mma.sync; once a unit it reads its x (one or two 16-byte shared loads),
// once a span of 8 k-tiles its group entry and the span's sum of x, and adds
// scale times the span's two rows' f32 sums plus offset times that sum to its
// totals: 9.1 instructions a k-tile in the SASS (f16 AWQ, whole batches; 12.6
// before the zero point moved to the span), no chain between tiles. The
// warps' totals meet in shared memory. Bound by the weight bytes and each
// launch's fixed costs: after the PDL wait, x's loads queue behind the
// weights', and the k-tiles, which need x, run after the stream rather than
// under it (bench/knockouts.sh quant).
// Two modes, so that a decode step's q/k/v and gate/up take one launch each:
//  - QMMA_SEGMENTS: up to three matrices of one input (q, k, v) as one grid,
//    block b in matrix i when begin[i] <= b < begin[i + 1] (its n-tile, or
//    in pairs its two);
//  - QMMA_SWIGLU: gate and up, block b their n-tile b, half the warps on each;
//    the epilogue writes silu(gate) * up, each product rounded to T first.
//    Where that grid would take two waves, block b takes n-tiles 2b and 2b + 1
//    of each (NT 2, qmma_pair_tiles): a warp's batch 2 units of each n-tile,
//    one mma chain an n-tile, x read once for both.
// Warps a block: 8, or 16 where the grid (N/16 blocks) leaves SMs idle (k/v
// projections), so that each warp takes half as many units.
#define QMMA_WARPS_WIDE 8
#define QMMA_WARPS_NARROW 16
// k-tiles a batch of a lane's loads covers (AWQ 16: 4 units, int8 8: 4 units);
// a warp has two batches in flight.
// (Tunables, overridable with -D for bench/ experiments: bench/notes/quant.md.)
#ifndef QMMA_BATCH_TILES_AWQ
#define QMMA_BATCH_TILES_AWQ 16
#endif
#ifndef QMMA_BATCH_TILES_INT8
#define QMMA_BATCH_TILES_INT8 8
#endif
// Blocks of 8 warps an SM holds at least (caps their registers: 3 -> 80; the
// kernel fits them without spilling but for SPAN 1, groups under 128 inputs).
#ifndef QMMA_WIDE_MIN_BLOCKS
#define QMMA_WIDE_MIN_BLOCKS 3
#endif
// 16 warps a block where the grid has fewer blocks than this many per SM.
#ifndef QMMA_NARROW_BELOW
#define QMMA_NARROW_BELOW 1
#endif
// Batches twice as deep (2 blocks an SM, up to 128 registers) where the grid
// has at most this many blocks per SM, and each warp streams at least
// QMMA_DEEP_BATCHES of them: such a grid never holds 3 blocks an SM, so the
// registers the third would need go to loads in flight instead. H100, Qwen3-8B
// down (12,288 x 4,096: 256 blocks, 48 int8 units a warp): 21.5 -> 19.3 us;
// o (4,096 x 4,096: 16 units a warp, all in flight from the start either way):
// 6.9 -> 7.7 us, so not there (bench/notes/quant.md).
#ifndef QMMA_DEEP_UPTO
#define QMMA_DEEP_UPTO 2
#endif
#ifndef QMMA_DEEP_BATCHES
#define QMMA_DEEP_BATCHES 3
#endif
#define QMMA_SMEM_MAX ((size_t)96 << 10)
// Whole-batch kernels where they apply (0: never; bench/notes/quant.md).
#ifndef QMMA_FULL
#define QMMA_FULL 1
#endif
// Knock-outs, for bench/knockouts.sh quant only: a bit mask of the pieces of
// work after the weights' loads that the GEMV skips, to time what each costs.
// Any bit set makes the results wrong, but finite (small counts), so that a
// model's decode step still runs and can be timed.
enum { QMMA_KO_WAIT = 1, QMMA_KO_STAGE = 2, QMMA_KO_COMPUTE = 4, QMMA_KO_EPILOGUE = 8 };
#ifndef QMMA_KNOCKOUT
#define QMMA_KNOCKOUT 0
#endif
// gate/up as one wave of blocks that each take several n-tiles in turn where a
// block an n-tile would take several waves (qmma_swiglu_loop_kernel): bit 0
// AWQ, bit 1 int8 (0: not built). H200, ms a step at 512 (bench/notes/quant.md,
// twenty-first session): AWQ Qwen3-14B 3.159 -> 3.102, Qwen2.5-7B 1.797 ->
// 1.777; int8 Qwen3-14B 4.455 -> 4.476, so AWQ's only.
#ifndef QMMA_SWIGLU_LOOP
#define QMMA_SWIGLU_LOOP 1
#endif
// Batches of weight loads a warp issues before the PDL wait (0-2); the rest
// go out once x is staged. x's loads, issued after the wait, queue behind
// the SM's outstanding weight loads: fewer early batches stage x sooner and
// stream the rest later. H200, the model at 512: AWQ 2.029 -> 2.003 ms with
// 1, int8 2.580 -> 2.646 (bench/notes/quant.md). o_proj's grid issues both
// whatever the format (qmma_params.early2, set in tiles_gemv).
#ifndef QMMA_EARLY_BATCHES_AWQ
#define QMMA_EARLY_BATCHES_AWQ 1
#endif
#ifndef QMMA_EARLY_BATCHES_INT8
#define QMMA_EARLY_BATCHES_INT8 2
#endif
// Batches of a warp's weight units, after those it loads before the PDL wait,
// asked into L2 before it by one cp.async.bulk.prefetch.L2 an n-tile (sm_90),
// so that the loads after x's staging come from L2, not DRAM. Taken by AWQ's
// gate/up in pairs, two batches: H100, the model at 512, 2.271 ms with none,
// 2.243 with one, 2.212 with two. q/k/v, o and down lose by it (a warp's 2-3
// batches; so would unpaired gate/up's on small models, not measured), a
// prefetch a line instead of the bulk form loses, int8 is no faster
// (bench/notes/quant.md, ninth session). QMMA_L2_AHEAD_MODES: bit 1 the
// one-matrix grids, bit 2 gate/up of several n-tiles a block, bit 4 gate/up
// one n-tile a block.
#ifndef QMMA_L2_AHEAD_AWQ
#define QMMA_L2_AHEAD_AWQ 2
#endif
#ifndef QMMA_L2_AHEAD_INT8
#define QMMA_L2_AHEAD_INT8 0
#endif
#ifndef QMMA_L2_AHEAD_MODES
#define QMMA_L2_AHEAD_MODES 2
#endif

enum qmma_mode { QMMA_SEGMENTS, QMMA_SWIGLU };

// Matrices a block reads in a mode: gate and up, or its segment's one.
__host__ __device__ constexpr int qmma_mats(int mode) { return mode == QMMA_SWIGLU ? 2 : 1; }

// Units a warp's batch of loads covers (a lane's 16-byte loads in flight per
// buffer), DEPTH times the tunable's.
template <int FMT> __host__ __device__ constexpr int qmma_batch_units(int depth)
{
    return (FMT == FMT_AWQ4 ? QMMA_BATCH_TILES_AWQ : QMMA_BATCH_TILES_INT8) /
           tiles_of<FMT>::UNIT_TILES * depth;
}

// One matrix in tiles (layout 1) and its output.
struct qmma_matrix {
    const uint4 *q;
    const uint32_t *s;
    const uint8_t *z;
    const void *bias; // [out] or NULL
    void *y;          // [out]
};

struct qmma_params {
    qmma_matrix m[3];
    // the add + rmsnorm in front (orin_norm_in; weight NULL: none), as
    // gemv_norm<T>'s fields
    const void *norm_residual, *norm_weight;
    void *norm_x_out;
    float norm_eps;
    int begin[4]; // SEGMENTS: matrix i's blocks are [begin[i], begin[i + 1]); SWIGLU: begin[1] n-tiles
    int count;    // matrices (SWIGLU: 2, m[0] the gate)
    int early2;   // both weight batches before the PDL wait whatever the format's default (see tiles_gemv)
    const void *x;
    int units, groups, group_tiles; // alike for every matrix
};

// p.m[i] without indexing the parameter space at run time (which would copy
// it to local memory).
__device__ __forceinline__ qmma_matrix qmma_pick(const qmma_params &p, int i)
{
    return i == 0 ? p.m[0] : i == 1 ? p.m[1] : p.m[2];
}


// Units [u, u + B / NT) of NT n-tiles (n-tile nt's at q + nt tile_stride),
// those below u_end, into buf[b NT + nt] (qmma_batch's order).
template <int B, int NT = 1>
__device__ __forceinline__ void load_units(uint4 (&buf)[B], const uint4 *q, int u, int u_end,
                                           size_t tile_stride = 0)
{
#pragma unroll
    for (int b = 0; b < B / NT; b++)
        if (u + b < u_end)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                buf[b * NT + nt] = load_weights16(q + nt * tile_stride + (size_t)(u + b) * 32);
}


// Units [first, min(u1, first + n)) of each of nt n-tiles (tile_stride uint4
// apart from q) asked into L2 by lanes 0..nt-1 of a warp: a hint, which
// nothing waits on (sm_90: a no-op below).
__device__ __forceinline__ void qmma_l2_ahead(const uint4 *q, size_t tile_stride, int nt,
                                              int first, int u1, int n, int lane)
{
    const int units = min(u1, first + n) - first;
    if (units > 0 && lane < nt)
        orin_cu_prefetch_l2_bulk(q + lane * tile_stride + (size_t)first * 32,
                                 (uint32_t)units * 512);
}

// Units a warp takes: a team-th of them, whole spans of span_units (units
// are whole groups); warp w takes [w per, (w + 1) per) of those that exist.
__host__ __device__ __forceinline__ int qmma_warp_share(int units, int team, int span_units)
{
    return ((units + team - 1) / team + span_units - 1) / span_units * span_units;
}

// Whether every warp's units (per of them, the last warp's the rest) are whole
// batches of b: the kernels without end tests (FULL).
__host__ __device__ __forceinline__ bool qmma_whole_batches(int units, int per, int b)
{
    return per % b == 0 && units % per % b == 0;
}

// Whether TEAM warps a matrix, each taking its share of spans of 8 k-tiles,
// all stream whole batches of DEPTH (the host's pick of the FULL kernels).
template <int FMT, int TEAM, int DEPTH = 1> bool qmma_full_batches(int units)
{
    const int per = qmma_warp_share(units, TEAM, 8 / tiles_of<FMT>::UNIT_TILES);
    return qmma_whole_batches(units, per, qmma_batch_units<FMT>(DEPTH));
}

// A lane's state at its warp's first unit u0: the group it begins in, that
// group's k-tiles left, its first span's sum of x, no totals yet.
template <int NT, int UT, int SPAN>
__device__ __forceinline__ void qmma_lanes_start(qmma_lanes<NT> &st, int u0, int group_tiles,
                                                 const float *xsum)
{
    st.gi = u0 * UT / group_tiles;
    st.left = group_tiles - u0 * UT % group_tiles;
    st.span_sum = xsum + u0 * UT / SPAN;
#pragma unroll
    for (int i = 0; i < 2 * NT; i++)
        st.tot[i] = 0.0f;
}

// SwiGLU of a row's gate and up sums, each rounded to T as the unfused
// products store them: silu(gate) * up into y[row].
template <typename T>
__device__ __forceinline__ void qmma_swiglu_store(T *y, int row, float gate, float up)
{
    gate = orin_cu_f32(orin_cu_from_f32<T>(gate));
    up = orin_cu_f32(orin_cu_from_f32<T>(up));
    y[row] = orin_cu_from_f32<T>(gate / (1.0f + expf(-gate)) * up);
}

// FULL: every warp's units are whole batches (the host's pick, from
// qmma_warp_share), so that the main loop tests no unit against the end.
// NT: n-tiles a block takes of each matrix (2 where the grid would otherwise
// run in two waves, qmma_pair_tiles; SEGMENTS: of its segment), each warp all
// NT of its matrix over its units, loading x once for them.
// NORM: an add + rmsnorm in front (p.norm_weight set). A template argument,
// not a test of p.norm_weight after the PDL wait, so that the code after the
// wait is one straight path: as a run-time test, each kernel jumped ~5-6 KB
// over the path it did not take, right after the wait (ncu's executed counts,
// bench/notes/quant.md, seventeenth session), and a taken jump that far costs
// an instruction fetch from DRAM on the chain (bench/notes/fa2-decode.md).
template <typename T, int FMT, int SPAN, int WARPS, int MODE, int DEPTH = 1, bool FULL = false,
          int NT = 1, bool NORM = false>
__global__ void __launch_bounds__(32 * WARPS, DEPTH == 2                  ? 2
                                              : WARPS == QMMA_WARPS_WIDE ? QMMA_WIDE_MIN_BLOCKS
                                                                         : 1)
    qmma_gemv_kernel(qmma_params p)
{
    constexpr int UT = tiles_of<FMT>::UNIT_TILES;
    constexpr int B = qmma_batch_units<FMT>(DEPTH), BU = B / NT; // loads, units a batch
    constexpr int MATS = qmma_mats(MODE);
    constexpr int TEAM = WARPS / MATS;                 // warps on one matrix
    // x [k], then the group data [MATS][groups][8], then with a norm in front
    // the normalised row and its weight [2][k], then the spans' sums of x
    // [k / 16 SPAN] (qmma_smem_bytes)
    extern __shared__ uint4 smem[];
    __shared__ float red[WARPS][16 * NT];
    __shared__ float scratch[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    // the block's matrix (SEGMENTS) or the warp's (SWIGLU), and the n-tile
    int seg = 0;
    if (MODE == QMMA_SEGMENTS)
        while (seg + 1 < p.count && (int)blockIdx.x >= p.begin[seg + 1])
            seg++;
    const int j = ((int)blockIdx.x - p.begin[seg]) * NT; // the block's first n-tile
    const int mine = MODE == QMMA_SWIGLU ? warp / TEAM : 0;
    const qmma_matrix mat = qmma_pick(p, MODE == QMMA_SWIGLU ? mine : seg);
    // the warp's units: a TEAM-th of them, whole spans (units are whole groups)
    constexpr int SPAN_UNITS = SPAN > UT ? SPAN / UT : 1;
    const int per = qmma_warp_share(p.units, TEAM, SPAN_UNITS);
    const int u0 = min(p.units, warp % TEAM * per), u1 = min(p.units, u0 + per);
    const size_t tile_stride = (size_t)p.units * 32; // uint4 an n-tile
    const uint4 *q = mat.q + (size_t)j * tile_stride + lane;
    const int k = p.units * tiles_of<FMT>::UNIT_K;
    uint4 *xs = smem;
    lane_group *groups = (lane_group *)(xs + k * sizeof(T) / 16);
    // The weights are never written by a kernel: EARLY batches of loads go out
    // before the PDL wait (an earlier version: 2 against 0, 4.26 against 4.65
    // ms an AWQ step), the rest once x is staged.
    constexpr int EARLY = FMT == FMT_AWQ4 ? QMMA_EARLY_BATCHES_AWQ : QMMA_EARLY_BATCHES_INT8;
    uint4 cur[B], nxt[B];
    if constexpr (EARLY >= 1)
        load_units<B, NT>(cur, q, u0, u1, tile_stride);
    const bool early2 = EARLY >= 2 || (DEPTH == 1 && p.early2); // deep batches: not (down)
    if (early2)
        load_units<B, NT>(nxt, q, u0 + BU, u1, tile_stride);
    // x and the group data to shared memory. The group data is never written
    // by a kernel either: a thread's first PRELOAD entries are loaded before
    // the wait, so that after it only x's round trip (from L2) remains.
    // Entry i is matrix i / ngm's entry i % ngm (an n-tile's ng entries after
    // another's: the stored order).
    const int ng = p.groups * 8, ngm = NT * ng;
    // the block's group data: of its matrix (SEGMENTS), of gate then up (SWIGLU)
    const uint32_t *s0 = (MODE == QMMA_SWIGLU ? p.m[0] : mat).s + (size_t)j * ng;
    const uint8_t *z0 = (MODE == QMMA_SWIGLU ? p.m[0] : mat).z + (size_t)j * ng;
    const uint32_t *s1 = p.m[1].s + (size_t)j * ng - ngm; // entries ngm.. of the block
    const uint8_t *z1 = p.m[1].z + (size_t)j * ng - ngm;
    constexpr int PRELOAD = 4, THREADS = 32 * WARPS;
    uint32_t pair[PRELOAD], zb[PRELOAD];
#pragma unroll
    for (int r = 0; r < PRELOAD; r++) {
        const int i = threadIdx.x + r * THREADS;
        const bool in = i < MATS * ngm;
        pair[r] = in ? (i < ngm ? s0 : s1)[i] : 0;
        zb[r] = FMT == FMT_AWQ4 && in ? (i < ngm ? z0 : z1)[i] : 0;
    }
    // with a norm in front, x_out's scratch and the norm's weight (fetched now)
    T *hs = (T *)(groups + MATS * ngm);
    const gemv_norm<T> np = {(const T *)p.norm_residual, (const T *)p.norm_weight,
                             (T *)p.norm_x_out, p.norm_eps};
    if constexpr (NORM)
        gemv_norm_fetch_weight<T>(np, k, hs + k);
    const qmma_staging<T, FMT, SPAN> staging = {(uint2 *)xs,
                                                 (float *)(hs + (NORM ? 2 * k : 0))};
    // the next batches into L2 (QMMA_L2_AHEAD_*)
    constexpr int KIND = MODE == QMMA_SWIGLU ? (NT >= 2 ? 2 : 4) : 1; // QMMA_L2_AHEAD_MODES' bits
    constexpr int AHEAD = (QMMA_L2_AHEAD_MODES & KIND) == 0 ? 0
                          : FMT == FMT_AWQ4 ? QMMA_L2_AHEAD_AWQ
                                            : QMMA_L2_AHEAD_INT8;
    if constexpr (AHEAD > 0)
        qmma_l2_ahead(mat.q + (size_t)j * tile_stride, tile_stride, NT,
                      u0 + (early2 ? 2 : EARLY) * BU, u1, AHEAD * BU, lane);
    // PDL prologue (orin/cuda_util.cuh): the previous kernel wrote x.
    orin_cu_allow_next();
    if constexpr (!(QMMA_KNOCKOUT & QMMA_KO_WAIT))
        orin_cu_wait_prior();
    constexpr bool stage = !(QMMA_KNOCKOUT & QMMA_KO_STAGE);
    if constexpr (stage && NORM) // x + residual, normalised, straight into the staged x
        gemv_norm_row<T, 2>(np, (const T *)p.x, k, hs, hs + k, scratch, staging);
    else if constexpr (stage)
        qmma_stage_x(staging, (const uint4 *)p.x, k, THREADS);
#pragma unroll
    for (int r = 0; r < PRELOAD; r++) {
        const int i = threadIdx.x + r * THREADS;
        if (i < MATS * ngm)
            groups[i] = make_lane_group<T, FMT>(pair[r], zb[r]);
    }
    // (not unrolled: where PRELOAD covers every entry, Qwen3-8B's, the jump
    // over this loop stays short; unrolled, gate/up's was 2.5 KB)
#pragma unroll 1
    for (int i = threadIdx.x + PRELOAD * THREADS; i < MATS * ngm; i += THREADS)
        groups[i] = make_lane_group<T, FMT>((i < ngm ? s0 : s1)[i],
                                            FMT == FMT_AWQ4 ? (i < ngm ? z0 : z1)[i] : 0);
    __syncthreads();
    const lane_group *my_groups = groups + mine * ngm;
    if constexpr (EARLY < 1)
        load_units<B, NT>(cur, q, u0, u1, tile_stride);
    if (!early2)
        load_units<B, NT>(nxt, q, u0 + BU, u1, tile_stride);

    qmma_lanes<NT> st = {};
    qmma_lanes_start<NT, UT, SPAN>(st, u0, p.group_tiles, staging.xsum);
    // batch u in cur while the next is in flight, then the other way round:
    // no register moves between the two buffers
    auto batch = [&](const uint4(&raw)[B], int u) {
        if constexpr (QMMA_KNOCKOUT & QMMA_KO_COMPUTE)
            for (int b = 0; b < BU && u + b < u1; b++) // keeps the loads, not the k-tiles
                for (int nt = 0; nt < NT; nt++)
                    st.tot[0] += (float)((raw[b * NT + nt].x ^ raw[b * NT + nt].y ^
                                          raw[b * NT + nt].z ^ raw[b * NT + nt].w) &
                                         1u); // small, so that a model step stays finite
        else
            qmma_batch<T, FMT, SPAN, B, FULL, NT>(raw, u, u1, xs, my_groups, g, t,
                                                  p.group_tiles, st, ng);
    };
    for (int u = u0; u < u1; u += 2 * BU) {
        batch(cur, u);
        load_units<B, NT>(cur, q, u + 2 * BU, u1, tile_stride);
        if (u + BU >= u1)
            break;
        batch(nxt, u + BU);
        load_units<B, NT>(nxt, q, u + 3 * BU, u1, tile_stride);
    }
    if constexpr (QMMA_KNOCKOUT & QMMA_KO_EPILOGUE) { // each warp's rows, unsummed
        // every n-tile's totals in the value, so that none of them, nor the
        // k-tiles and loads behind them, is dead code for ptxas to drop
        float any = 0.0f;
#pragma unroll
        for (int i = 0; i < 2 * NT; i++)
            any += st.tot[i];
        if (lane == 0)
            ((T *)mat.y)[16 * j + warp] = orin_cu_from_f32<T>(any);
        return;
    }
    if (t == 0) {
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            red[warp][16 * nt + g] = st.tot[2 * nt];
            red[warp][16 * nt + g + 8] = st.tot[2 * nt + 1];
        }
    }
    __syncthreads();
    if (threadIdx.x >= 16 * NT) // thread r: the block's row 16 j + r
        return;
    float sum[MATS];
#pragma unroll
    for (int m = 0; m < MATS; m++) {
        sum[m] = 0.0f;
#pragma unroll
        for (int wp = 0; wp < TEAM; wp++)
            sum[m] += red[m * TEAM + wp][threadIdx.x];
    }
    const int row = 16 * j + threadIdx.x;
    if (MODE == QMMA_SWIGLU) {
        qmma_swiglu_store((T *)p.m[0].y, row, sum[0], sum[MATS - 1]);
        return;
    }
    if (mat.bias)
        sum[0] += orin_cu_f32(((const T *)mat.bias)[row]);
    ((T *)mat.y)[row] = orin_cu_from_f32<T>(sum[0]);
}

typedef void (*qmma_kernel_fn)(qmma_params);

#if QMMA_SWIGLU_LOOP
// gate/up where a block an n-tile would take several waves (Qwen3-14B's 1,088
// n-tiles: 2.75 waves of 396 blocks on 132 SMs; Qwen2.5-7B's 1,184: 2.99),
// as one wave: block b takes n-tiles b, b + G, b + 2G, ... (G blocks, all
// resident) in turn. x (and the norm) is staged once a block, and each warp's
// loads are one stream over its n-tiles: the batches two ahead of the one
// being summed, so that the next n-tile's first two batches are in flight
// while a tile's sums meet. A tile ends in two barriers: (A) the warps' sums
// are in `red`, then threads 0-15 write the tile's SwiGLU while every thread
// turns the next tile's group data (cp.async'd during the tile, raw) into
// entries; (B) the entries are ready and `red` is free. Taken (the host's
// pick) with groups of whole spans of 8 k-tiles and the group data 16-byte
// aligned; FULL where every warp's units are whole batches (else a warp's
// last batch of a tile is partial, tested against the end as the unlooped
// kernel's are). What the waves cost the unlooped kernel: bench/notes/quant.md,
// twentieth session (gate/up 7-8 us a layer over its bytes against 3 for one
// wave); what the loop buys, twenty-first (~1.4 us a layer on Qwen3-14B).
template <typename T, int FMT, bool NORM, bool FULL>
__global__ void __launch_bounds__(32 * QMMA_WARPS_WIDE, QMMA_WIDE_MIN_BLOCKS)
    qmma_swiglu_loop_kernel(qmma_params p)
{
    constexpr int UT = tiles_of<FMT>::UNIT_TILES, SPAN = 8, WARPS = QMMA_WARPS_WIDE;
    constexpr int B = qmma_batch_units<FMT>(1), MATS = 2, TEAM = WARPS / MATS;
    constexpr int THREADS = 32 * WARPS;
    constexpr int EARLY = FMT == FMT_AWQ4 ? QMMA_EARLY_BATCHES_AWQ : QMMA_EARLY_BATCHES_INT8;
    // x, the entries [MATS][ng], with a norm its row and weight [2][k], the
    // spans' sums of x [k / 16], then the raw group data of two tiles:
    // scale pairs [2][MATS][ng] and (AWQ) zero bytes [2][MATS][ng]
    extern __shared__ uint4 smem[];
    __shared__ float red[WARPS][16];
    __shared__ float scratch[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3, mine = warp / TEAM;
    const int G = (int)gridDim.x, j0 = (int)blockIdx.x;
    const int my_tiles = (p.begin[1] - j0 + G - 1) / G;
    const qmma_matrix mat = qmma_pick(p, mine);
    const int per = qmma_warp_share(p.units, TEAM, SPAN / UT);
    const int u0 = min(p.units, warp % TEAM * per), u1 = min(p.units, u0 + per);
    const int nb = (u1 - u0 + (FULL ? 0 : B - 1)) / B; // batches a tile
    const size_t tile_stride = (size_t)p.units * 32;
    const int k = p.units * tiles_of<FMT>::UNIT_K, ng = p.groups * 8;
    uint4 *xs = smem;
    lane_group *groups = (lane_group *)(xs + k * sizeof(T) / 16);
    T *hs = (T *)(groups + MATS * ng);
    const qmma_staging<T, FMT, SPAN> staging = {(uint2 *)xs,
                                                 (float *)(hs + (NORM ? 2 * k : 0))};
    uint32_t *raw_s = (uint32_t *)(((uintptr_t)(staging.xsum + k / 16) + 15) & ~(uintptr_t)15);
    uint8_t *raw_z = (uint8_t *)(raw_s + 2 * MATS * ng);

    // the next batch to load, as (tile, batch): one stream over the tiles
    int lt = 0, lb = 0;
    auto load_next = [&](uint4(&buf)[B]) {
        if (lt >= my_tiles)
            return;
        load_units<B>(buf, mat.q + (size_t)(j0 + lt * G) * tile_stride + lane, u0 + lb * B, u1);
        if (++lb == nb) {
            lb = 0;
            lt++;
        }
    };
    // tile ti's group data, raw, into buffer ti & 1 (16-byte copies)
    auto fetch_groups = [&](int ti) {
        const size_t j = (size_t)(j0 + ti * G);
        uint32_t *ds = raw_s + (ti & 1) * MATS * ng;
        for (int c = threadIdx.x; c < MATS * ng / 4; c += THREADS) {
            const int m = c / (ng / 4), i = c % (ng / 4) * 4;
            orin_cu_cp_async16(orin_cu_smem_addr(ds + m * ng + i),
                               (m == 0 ? p.m[0].s : p.m[1].s) + j * ng + i);
        }
        if constexpr (FMT == FMT_AWQ4) {
            uint8_t *dz = raw_z + (ti & 1) * MATS * ng;
            for (int c = threadIdx.x; c < MATS * ng / 16; c += THREADS) {
                const int m = c / (ng / 16), i = c % (ng / 16) * 16;
                orin_cu_cp_async16(orin_cu_smem_addr(dz + m * ng + i),
                                   (m == 0 ? p.m[0].z : p.m[1].z) + j * ng + i);
            }
        }
        orin_cu_cp_async_commit();
    };
    // tile ti's entries from its raw group data (the copies waited for)
    auto make_groups = [&](int ti) {
        const uint32_t *rs = raw_s + (ti & 1) * MATS * ng;
        const uint8_t *rz = raw_z + (ti & 1) * MATS * ng;
        for (int i = threadIdx.x; i < MATS * ng; i += THREADS)
            groups[i] = make_lane_group<T, FMT>(rs[i], FMT == FMT_AWQ4 ? rz[i] : 0u);
    };

    // Before the PDL wait: the first batches, tile 0's group data, the norm's
    // weight (none of them written by a kernel).
    uint4 cur[B], nxt[B];
    if (nb > 0) {
        load_next(cur);
        if constexpr (EARLY >= 2)
            load_next(nxt);
    }
    fetch_groups(0);
    const gemv_norm<T> np = {(const T *)p.norm_residual, (const T *)p.norm_weight,
                             (T *)p.norm_x_out, p.norm_eps};
    if constexpr (NORM)
        gemv_norm_fetch_weight<T>(np, k, hs + k);
    orin_cu_allow_next();
    orin_cu_wait_prior();
    if constexpr (NORM)
        gemv_norm_row<T, 2>(np, (const T *)p.x, k, hs, hs + k, scratch, staging);
    else
        qmma_stage_x(staging, (const uint4 *)p.x, k, THREADS);
    orin_cu_cp_async_wait<0>();
    __syncthreads(); // x staged, tile 0's raw group data in
    make_groups(0);
    if (my_tiles > 1)
        fetch_groups(1);
    __syncthreads();
    if (EARLY < 2 && nb > 0)
        load_next(nxt);

    const lane_group *my_groups = groups + mine * ng;
    qmma_lane st = {};
    int f = 0; // batches summed: even ones from cur, odd from nxt
    for (int ti = 0; ti < my_tiles; ti++) {
        qmma_lanes_start<1, UT, SPAN>(st, u0, p.group_tiles, staging.xsum);
        for (int b = 0; b < nb; b++, f++) {
            if (f & 1) {
                qmma_batch<T, FMT, SPAN, B, FULL>(nxt, u0 + b * B, u1, xs, my_groups, g, t,
                                                  p.group_tiles, st);
                load_next(nxt);
            } else {
                qmma_batch<T, FMT, SPAN, B, FULL>(cur, u0 + b * B, u1, xs, my_groups, g, t,
                                                  p.group_tiles, st);
                load_next(cur);
            }
        }
        if (t == 0) {
            red[warp][g] = st.tot[0];
            red[warp][g + 8] = st.tot[1];
        }
        orin_cu_cp_async_wait<0>(); // the next tile's raw group data (this thread's copies)
        __syncthreads();            // (A)
        if (threadIdx.x < 16) {
            float gate = 0.0f, up = 0.0f;
#pragma unroll
            for (int wp = 0; wp < TEAM; wp++) {
                gate += red[wp][threadIdx.x];
                up += red[TEAM + wp][threadIdx.x];
            }
            qmma_swiglu_store((T *)p.m[0].y, 16 * (j0 + ti * G) + threadIdx.x, gate, up);
        }
        if (ti + 1 < my_tiles) {
            make_groups(ti + 1);
            if (ti + 2 < my_tiles)
                fetch_groups(ti + 2); // into the buffer tile ti's entries came from
        }
        __syncthreads(); // (B)
    }
}

#endif

// The raw group data's shared memory the loop kernel adds to the GEMV's (and
// 16 bytes to align it).
__host__ __forceinline__ size_t qmma_loop_raw_bytes(int groups)
{
    return (size_t)2 * 2 * groups * 8 * (sizeof(uint32_t) + 1) + 16;
}

// Whether a gate/up call of `blocks` n-tiles takes the loop kernel: more
// n-tiles than one wave of blocks, spans of 8 k-tiles, the group data's rows
// whole 16-byte copies from 16-byte aligned tensors, and the shared memory
// within QMMA_SMEM_MAX.
template <int FMT>
bool qmma_loop_fits(const qmma_params &p, unsigned blocks, int sms, size_t smem)
{
    bool aligned = true;
    for (int m = 0; m < 2; m++)
        aligned = aligned && (uintptr_t)p.m[m].s % 16 == 0 &&
                  (FMT != FMT_AWQ4 || (uintptr_t)p.m[m].z % 16 == 0);
    return (int)blocks > QMMA_WIDE_MIN_BLOCKS * sms && p.group_tiles % 8 == 0 &&
           p.groups % 2 == 0 && aligned &&
           smem + qmma_loop_raw_bytes(p.groups) <= QMMA_SMEM_MAX;
}

// Whether format FMT's gate/up may take the loop kernel (QMMA_SWIGLU_LOOP's
// bit for it).
template <int FMT> constexpr bool qmma_loops()
{
    return (QMMA_SWIGLU_LOOP >> (FMT == FMT_AWQ4 ? 0 : 1)) & 1;
}

// The loop kernel for a call's norm and whole batches (FULL); NULL where the
// format takes none.
template <typename T, int FMT> qmma_kernel_fn qmma_loop_kernel(bool norm, bool full)
{
#if QMMA_SWIGLU_LOOP
    if constexpr (qmma_loops<FMT>())
        return norm ? (full ? qmma_swiglu_loop_kernel<T, FMT, true, true>
                            : qmma_swiglu_loop_kernel<T, FMT, true, false>)
                    : (full ? qmma_swiglu_loop_kernel<T, FMT, false, true>
                            : qmma_swiglu_loop_kernel<T, FMT, false, false>);
#endif
    return NULL;
}

// ---- choosing and launching the kernel ----------------------------------------------

// A paired grid's span (qmma_pair_tiles): a batch's units of one n-tile, B / 2
// (AWQ 2 units, 8 k-tiles; int8 2 units, 4 k-tiles).
template <int FMT> constexpr int qmma_pair_span()
{
    return qmma_batch_units<FMT>(1) / 2 * tiles_of<FMT>::UNIT_TILES;
}

// The kernel for a call's norm (qmma_gemv_kernel's NORM): both are built.
template <typename T, int FMT, int SPAN, int WARPS, int MODE, int DEPTH = 1, bool FULL = false,
          int NT = 1>
qmma_kernel_fn qmma_kernel(bool norm)
{
    return norm ? qmma_gemv_kernel<T, FMT, SPAN, WARPS, MODE, DEPTH, FULL, NT, true>
                : qmma_gemv_kernel<T, FMT, SPAN, WARPS, MODE, DEPTH, FULL, NT, false>;
}

// The paired grid's kernel (qmma_pair_tiles): 8-warp blocks, whole batches.
template <typename T, int FMT, int MODE> qmma_kernel_fn qmma_pair_kernel(bool norm)
{
    return qmma_kernel<T, FMT, qmma_pair_span<FMT>(), QMMA_WARPS_WIDE, MODE, 1, true, 2>(norm);
}

template <typename T, int FMT, int MODE>
int allow_smem(const char *label, bool norm)
{
    constexpr int UT = tiles_of<FMT>::UNIT_TILES;
    const qmma_kernel_fn kernels[] = {
        qmma_kernel<T, FMT, 1, QMMA_WARPS_WIDE, MODE>(norm),
        qmma_kernel<T, FMT, UT, QMMA_WARPS_WIDE, MODE>(norm),
        qmma_kernel<T, FMT, 8, QMMA_WARPS_WIDE, MODE>(norm),
        qmma_kernel<T, FMT, 1, QMMA_WARPS_WIDE, MODE, 2>(norm),
        qmma_kernel<T, FMT, UT, QMMA_WARPS_WIDE, MODE, 2>(norm),
        qmma_kernel<T, FMT, 8, QMMA_WARPS_WIDE, MODE, 2>(norm),
        qmma_kernel<T, FMT, 1, QMMA_WARPS_NARROW, MODE>(norm),
        qmma_kernel<T, FMT, UT, QMMA_WARPS_NARROW, MODE>(norm),
        qmma_kernel<T, FMT, 8, QMMA_WARPS_NARROW, MODE>(norm),
        qmma_kernel<T, FMT, 8, QMMA_WARPS_WIDE, MODE, 1, true>(norm),
        qmma_kernel<T, FMT, 8, QMMA_WARPS_WIDE, MODE, 2, true>(norm),
        qmma_kernel<T, FMT, 8, QMMA_WARPS_NARROW, MODE, 1, true>(norm),
        qmma_pair_kernel<T, FMT, MODE>(norm),
        qmma_loop_kernel<T, FMT>(norm, false),
        qmma_loop_kernel<T, FMT>(norm, true),
    };
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i] && orin_cu_call(label, "shared memory of the quantized GEMV",
                         cudaFuncSetAttribute((const void *)kernels[i],
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              (int)QMMA_SMEM_MAX)) != 0)
            return -1;
    return 0;
}

// A scale multiplies the sums of 8 k-tiles at once where groups are whole
// multiples of 8 (128 inputs), else of a unit's tiles, else of one tile (the
// SPAN of qmma_batch); a grid of fewer blocks than QMMA_NARROW_BELOW per SM
// takes 16 warps a block, one of at most QMMA_DEEP_UPTO whose warps stream
// QMMA_DEEP_BATCHES deep batches or more takes them (DEPTH 2). With spans of
// 8 (groups of 128: the published checkpoints') where every warp's units are
// whole batches, the kernel that tests no unit against the end (FULL).
template <typename T, int FMT, int MODE, int WARPS, int DEPTH = 1>
void launch_qmma_warps(const orin_exec *ex, const qmma_params &p, unsigned blocks,
                              size_t smem)
{
    constexpr int UT = tiles_of<FMT>::UNIT_TILES;
    constexpr int TEAM = WARPS / qmma_mats(MODE);
    const bool full = QMMA_FULL && qmma_full_batches<FMT, TEAM, DEPTH>(p.units);
    const bool norm = p.norm_weight != NULL;
    orin_cu_launch(ex, true,
                   p.group_tiles % 8 == 0
                       ? (full ? qmma_kernel<T, FMT, 8, WARPS, MODE, DEPTH, true>(norm)
                               : qmma_kernel<T, FMT, 8, WARPS, MODE, DEPTH>(norm))
                   : p.group_tiles % UT == 0 ? qmma_kernel<T, FMT, UT, WARPS, MODE, DEPTH>(norm)
                                             : qmma_kernel<T, FMT, 1, WARPS, MODE, DEPTH>(norm),
                   dim3(blocks), dim3(32 * WARPS), smem, p);
}

template <typename T, int FMT, int MODE>
void launch_qmma_gemv(const orin_exec *ex, const qmma_params &p, unsigned blocks,
                             size_t smem, int nt)
{
    constexpr int DEEP_B = qmma_batch_units<FMT>(2);
    constexpr int TEAM = QMMA_WARPS_WIDE / qmma_mats(MODE);
    const int sms = orin_cu_sm_count(ex), warp_units = (p.units + TEAM - 1) / TEAM;
    if (nt == 2)
        return orin_cu_launch(ex, true, qmma_pair_kernel<T, FMT, MODE>(p.norm_weight != NULL),
                              dim3(blocks), dim3(32 * QMMA_WARPS_WIDE), smem, p);
    if constexpr (MODE == QMMA_SWIGLU && qmma_loops<FMT>())
        if (qmma_loop_fits<FMT>(p, blocks, sms, smem))
            return orin_cu_launch(
                ex, true,
                qmma_loop_kernel<T, FMT>(p.norm_weight != NULL,
                                         qmma_full_batches<FMT, TEAM>(p.units)),
                dim3(QMMA_WIDE_MIN_BLOCKS * sms), dim3(32 * QMMA_WARPS_WIDE),
                smem + qmma_loop_raw_bytes(p.groups), p);
    if ((int)blocks < QMMA_NARROW_BELOW * sms)
        launch_qmma_warps<T, FMT, MODE, QMMA_WARPS_NARROW>(ex, p, blocks, smem);
    else if ((int)blocks <= QMMA_DEEP_UPTO * sms && warp_units >= QMMA_DEEP_BATCHES * DEEP_B)
        launch_qmma_warps<T, FMT, MODE, QMMA_WARPS_WIDE, 2>(ex, p, blocks, smem);
    else
        launch_qmma_warps<T, FMT, MODE, QMMA_WARPS_WIDE>(ex, p, blocks, smem);
}

// ---- the entry points, one instantiation a format -------------------------------

// The GEMV on tiles of format FMT, x in dt (f16 or bf16), as tiles_gemv set p,
// the grid and nt up.
template <int FMT>
void qmma_launch(const orin_exec *ex, orin_dtype dt, qmma_mode mode, const qmma_params &p,
                 unsigned blocks, size_t smem, int nt)
{
    if (dt == ORIN_F16)
        mode == QMMA_SWIGLU ? launch_qmma_gemv<__half, FMT, QMMA_SWIGLU>(ex, p, blocks, smem, nt)
                            : launch_qmma_gemv<__half, FMT, QMMA_SEGMENTS>(ex, p, blocks, smem, nt);
    else
        mode == QMMA_SWIGLU
            ? launch_qmma_gemv<__nv_bfloat16, FMT, QMMA_SWIGLU>(ex, p, blocks, smem, nt)
            : launch_qmma_gemv<__nv_bfloat16, FMT, QMMA_SEGMENTS>(ex, p, blocks, smem, nt);
}

// Lets each of format FMT's kernels take QMMA_SMEM_MAX of dynamic shared
// memory (beyond the default 48 KiB).
template <int FMT> int qmma_allow_smem_of(const char *label)
{
    int rc = 0;
    for (int norm = 0; norm < 2; norm++)
        rc |= allow_smem<__half, FMT, QMMA_SEGMENTS>(label, norm) |
              allow_smem<__half, FMT, QMMA_SWIGLU>(label, norm) |
              allow_smem<__nv_bfloat16, FMT, QMMA_SEGMENTS>(label, norm) |
              allow_smem<__nv_bfloat16, FMT, QMMA_SWIGLU>(label, norm);
    return rc;
}

// Instantiated in cuda_qmma_gemv_awq4.cu and cuda_qmma_gemv_int8.cu only.
extern template void qmma_launch<FMT_AWQ4>(const orin_exec *, orin_dtype, qmma_mode,
                                           const qmma_params &, unsigned, size_t, int);
extern template void qmma_launch<FMT_INT8>(const orin_exec *, orin_dtype, qmma_mode,
                                           const qmma_params &, unsigned, size_t, int);
extern template int qmma_allow_smem_of<FMT_AWQ4>(const char *);
extern template int qmma_allow_smem_of<FMT_INT8>(const char *);

#endif
