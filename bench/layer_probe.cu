// layer_probe's kernels: a decode layer's four AWQ products (q/k/v, o,
// gate/up, down at Qwen3-8B's shapes, group 128) as ONE persistent kernel,
// the shape bench/notes/quant.md named as the one left that could take the
// per-kernel chains (PDL wait, x's L2 round trip, the k-tiles, the reduction:
// ~2-3 us each, six kernels a layer) off the weight stream. What it found
// (bench/notes/quant.md, 2026-11-27 third): no variant beats the chain.
//
// The flat kernel (lp_layer_kernel). Launch: cooperative, one block an SM
// (its ~200 KB of shared memory sees to that), WARPS consumer warps + 1
// producer warp.
//  - The producer (one thread) streams the block's weights, product after
//    product and layer after layer, into a ring of `stages` slots by
//    cp.async.bulk, each slot one 16 KB chunk of an n-tile's qweight (32
//    units, 128 k-tiles) with its 16 groups' scales and zeros, completing on
//    the slot's `full` mbarrier. It waits only for a slot to be released,
//    never for a grid barrier: the stream runs on through the barriers, the
//    x round trips and the attention's stand-in, as deep as the ring.
//  - The consumers take the block's range of whole n-tiles of each product
//    (the block with most reads 0.7 % above the mean): per product, a grid
//    barrier (the previous product's outputs are complete: the real
//    kernel's dependency), x staged into shared memory from global
//    (qmma_stage_x, as the GEMV does), then per slot: a warp's UW units and
//    its groups' entries out of the slot, the slot released (its `empty`
//    mbarrier), the k-tiles (the GEMV's qmma_batch, or lp_spans); per tile
//    the warps' sums meet in shared memory and 16 threads write the outputs.
// The cluster kernel (lp_cluster_kernel): see its section below.
// Bound, if the shape works, by the weight bytes; it measures how much of a
// layer's ~17 us of chains over its ~34 us of bytes (H100) a ring hides.
#include "layer_probe.h"

#include "../plugins/ops_common/cuda_qmma.cuh"
#include "orin/cuda_util.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

// The probe's kernels need sm_90 (bulk copies, mbarrier transaction counts,
// clusters): below it their bodies compile to nothing, and the host never
// launches them there (layer_probe exits 77 first).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define LP_SM90 0
#else
#define LP_SM90 1
#endif

#define LP_PRODUCTS 4
#define LP_CHUNK_UNITS 32 // units a slot (4 k-tiles a unit: 128 k-tiles)
#define LP_CHUNK_BYTES (LP_CHUNK_UNITS * 512)
#define LP_GROUP_TILES 8 // group 128
#define LP_SPAN 8
#define LP_CHUNK_GROUPS (LP_CHUNK_UNITS * 4 / LP_GROUP_TILES)
#define LP_SLOT_BYTES (LP_CHUNK_BYTES + LP_CHUNK_GROUPS * 8 * 4 + LP_CHUNK_GROUPS * 8)
#define LP_MAX_K 12288
#define LP_MAX_STAGES 16
#define LP_CLUSTER 8 // the cluster kernel: a control block and 7 streamers
#define LP_STREAMERS (LP_CLUSTER - 1)

// One product's weights (layer 0's; layer l at + l times the stride) and its
// input and output.
struct lp_product {
    const uint4 *q;
    const uint32_t *s;
    const uint8_t *z;
    size_t q_stride, s_stride, z_stride; // elements a layer
    const __half *x;
    const unsigned char *xst; // x staged as the consumers read it, then its spans' sums
    __half *y;
    int tiles, units, groups;
};

struct lp_params {
    lp_product p[LP_PRODUCTS];
    int layers, weight_layers, stages, barriers, compute, stream, math, late, wait_one, multicast;
    long long attention_ns;
    unsigned *barrier; // grid barrier's counter, 0 at launch
    long long *trace;  // NULL, or [blocks][LP_PRODUCTS][LP_TRACE] for layer trace_layer
    int trace_layer;
};

// A block's stamps (%globaltimer, ns) of a product in the traced layer:
// consumer thread 0's at the barrier before it, past it, x staged, the first
// chunk there, the last output written; the producer's at its first and last
// chunk issued, and how many of its chunks found no free slot at first.
// Then warp 0's clock cycles over the layer's items: waiting for a slot,
// taking its words and group entries, the k-tiles.
enum {
    LP_T_BARRIER,
    LP_T_PAST,
    LP_T_STAGED,
    LP_T_FIRST,
    LP_T_DONE,
    LP_T_ISSUE0,
    LP_T_ISSUE1,
    LP_T_FULL,
    LP_T_WAITC,
    LP_T_TAKEC,
    LP_T_MATHC,
    LP_TRACE
};

struct layer_probe_setup {
    lp_product p[LP_PRODUCTS];
    int weight_layers;
    unsigned *barrier;
    long long *trace; // [SMs][LP_PRODUCTS][LP_TRACE]
    void *buffers[LP_PRODUCTS * 6];
};

// Qwen3-8B: q/k/v 4,096 -> 6,144, o 4,096 -> 4,096, gate/up 4,096 -> 2 x
// 12,288, down 12,288 -> 4,096.
static const int lp_shape[LP_PRODUCTS][2] = {
    {6144, 4096}, {4096, 4096}, {24576, 4096}, {4096, 12288}};

__device__ __forceinline__ lp_product lp_pick(const lp_params &p, int i)
{
    return i == 0 ? p.p[0] : i == 1 ? p.p[1] : i == 2 ? p.p[2] : p.p[3];
}

__device__ __forceinline__ void lp_mbar_init(uint64_t *bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(orin_cu_smem_addr(bar)), "r"(count)
                 : "memory");
}

__device__ __forceinline__ void lp_mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(orin_cu_smem_addr(bar))
                 : "memory");
}

// The consumer warps' barrier (the producer warp never takes part).
template <int WARPS> __device__ __forceinline__ void lp_consumers_sync()
{
    asm volatile("bar.sync 1, %0;" ::"n"(32 * WARPS) : "memory");
}

__device__ __forceinline__ bool lp_mbar_done(uint64_t *bar, uint32_t parity)
{
    uint32_t done;
    asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; "
                 "selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(orin_cu_smem_addr(bar)), "r"(parity)
                 : "memory");
    return done;
}

__device__ __forceinline__ unsigned lp_load_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// A grid barrier's middle, by thread 0 once its block has met: it releases
// the block's writes (ordered before it by the block barrier) with the count
// and spins until `target` blocks have counted.
__device__ __forceinline__ void lp_grid_arrive_wait(unsigned *counter, unsigned target)
{
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(counter, 1u);
        while (lp_load_acquire(counter) < target)
            ;
    }
}

// Every block's consumers here, and what they wrote visible (the flat kernel;
// its producer warp never takes part).
template <int WARPS> __device__ void lp_grid_sync(unsigned *counter, unsigned target)
{
    lp_consumers_sync<WARPS>();
    lp_grid_arrive_wait(counter, target);
    lp_consumers_sync<WARPS>();
}

__device__ __forceinline__ long long lp_now_ns()
{
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Where block b's stamps of product pi go, in the traced layer only (else NULL).
__device__ __forceinline__ long long *lp_trace_of(const lp_params &p, int l, int pi)
{
    return p.trace && l == p.trace_layer
               ? p.trace + ((size_t)blockIdx.x * LP_PRODUCTS + pi) * LP_TRACE
               : NULL;
}

// The items (16 KB chunks: tile = item / chunks, chunk = item % chunks) of
// product P a block takes, [*i0, *i1). Flat kernel: whole tiles, block b the
// b-th of gridDim.x ranges. Cluster kernel: the cluster c of NC takes the c-th
// range of whole tiles, and its streamer s (rank s + 1) the s-th of
// LP_STREAMERS ranges of those tiles' chunks.
__device__ __forceinline__ void lp_items(const lp_product &P, bool cluster, int *i0, int *i1)
{
    const int chunks = P.units / LP_CHUNK_UNITS;
    if (!cluster) {
        *i0 = (int)((long long)P.tiles * blockIdx.x / gridDim.x) * chunks;
        *i1 = (int)((long long)P.tiles * (blockIdx.x + 1) / gridDim.x) * chunks;
        return;
    }
    const int nc = gridDim.x / LP_CLUSTER, c = blockIdx.x / LP_CLUSTER;
    const int s = blockIdx.x % LP_CLUSTER - 1;
    const int t0 = (int)((long long)P.tiles * c / nc),
              t1 = (int)((long long)P.tiles * (c + 1) / nc);
    const int items = (t1 - t0) * chunks;
    *i0 = t0 * chunks + items * s / LP_STREAMERS;
    *i1 = t0 * chunks + items * (s + 1) / LP_STREAMERS;
}

// A position in the ring: the slot, and the parity of its phase (a slot's
// full and empty barriers each complete once a round). Kept by counting, not
// by dividing an item index: the producer is one thread, and a division
// sequence an item was most of what bounded its rate (bench/notes/quant.md).
struct lp_ring {
    int slot;
    uint32_t round; // rounds begun before this one (parity: round & 1)

    __device__ __forceinline__ void next(int stages)
    {
        if (++slot == stages) {
            slot = 0;
            round++;
        }
    }
};

// The producer: every chunk of the block's items, in the consumers' order.
// A product's items are contiguous in the tile layout (item k's chunk at
// qweight + k 16 KB, its groups' entries at scales and zeros + k 16 x 8), so
// each source is a pointer stepped by a constant.
__device__ void lp_produce(const lp_params &p, bool cluster, unsigned char *slots, uint64_t *full,
                           uint64_t *empty)
{
#if LP_SM90
    lp_ring r = {0, 0};
    for (int l = 0; l < p.layers; l++) {
        const int wl = l % p.weight_layers;
#pragma unroll 1
        for (int pi = 0; pi < LP_PRODUCTS; pi++) {
            const lp_product P = lp_pick(p, pi);
            long long *tr = lp_trace_of(p, l, pi);
            int i0, i1, full_waits = 0;
            lp_items(P, cluster, &i0, &i1);
            const uint4 *q = P.q + wl * P.q_stride + (size_t)i0 * LP_CHUNK_UNITS * 32;
            const uint32_t *sc = P.s + wl * P.s_stride + (size_t)i0 * LP_CHUNK_GROUPS * 8;
            const uint8_t *z = P.z + wl * P.z_stride + (size_t)i0 * LP_CHUNK_GROUPS * 8;
            for (int item = i0; item < i1; item++, r.next(p.stages)) {
                if (r.round > 0) { // the slot's previous chunk taken by every warp
                    const uint32_t parity = (r.round - 1) & 1;
                    if (tr && !lp_mbar_done(&empty[r.slot], parity))
                        full_waits++;
                    orin_cu_mbar_wait(&empty[r.slot], parity);
                }
                if (tr) {
                    if (item == i0)
                        tr[LP_T_ISSUE0] = lp_now_ns();
                    if (item == i1 - 1)
                        tr[LP_T_ISSUE1] = lp_now_ns();
                }
                if (!p.stream) { // timing only: the slot as it is, at once
                    lp_mbar_arrive(&full[r.slot]);
                    continue;
                }
                unsigned char *dst = slots + r.slot * LP_SLOT_BYTES;
                uint64_t *bar = &full[r.slot];
                orin_cu_bulk_expect(bar, LP_SLOT_BYTES);
                orin_cu_bulk_copy(dst, q, LP_CHUNK_BYTES, bar);
                orin_cu_bulk_copy(dst + LP_CHUNK_BYTES, sc, LP_CHUNK_GROUPS * 8 * 4, bar);
                orin_cu_bulk_copy(dst + LP_CHUNK_BYTES + LP_CHUNK_GROUPS * 8 * 4, z,
                                  LP_CHUNK_GROUPS * 8, bar);
                q += LP_CHUNK_UNITS * 32;
                sc += LP_CHUNK_GROUPS * 8;
                z += LP_CHUNK_GROUPS * 8;
            }
            if (tr)
                tr[LP_T_FULL] = full_waits;
        }
    }
#endif
}

// A block's shared memory: the ring's mbarriers, the ring, x staged (and its
// spans' sums), the warps' group entries, the tile sums; the cluster
// kernel's x_ready and done mbarriers and its control's sums.
struct lp_smem {
    uint64_t *full, *empty, *x_ready, *done;
    unsigned char *slots;
    uint4 *xs;
    float *xsum;
    lane_group *scratch;
    float *red, *late, *sums;
};

// Tiles a block's items of one product may touch (late sums: one row of 16
// sums each).
#define LP_BLOCK_TILES 32
#define LP_MAX_SUMS 2048 // a cluster's outputs of a product: gate/up's at 12 clusters or more

static __host__ __device__ size_t lp_smem_bytes(int warps, int stages)
{
    return (2 * LP_MAX_STAGES + 2) * sizeof(uint64_t) + (size_t)stages * LP_SLOT_BYTES +
           LP_MAX_K * 2 + LP_MAX_K / 128 * 4 + (size_t)warps * 32 * sizeof(lane_group) +
           (2 * (size_t)warps + LP_BLOCK_TILES) * 16 * 4 + LP_MAX_SUMS * 4;
}

__device__ __forceinline__ lp_smem lp_carve(unsigned char *smem, int warps, int stages)
{
    lp_smem m;
    m.full = (uint64_t *)smem;
    m.empty = m.full + LP_MAX_STAGES;
    m.x_ready = m.empty + LP_MAX_STAGES;
    m.done = m.x_ready + 1;
    m.slots = (unsigned char *)(m.done + 1);
    m.xs = (uint4 *)(m.slots + (size_t)stages * LP_SLOT_BYTES);
    m.xsum = (float *)(m.xs + LP_MAX_K * 2 / 16);
    m.scratch = (lane_group *)(m.xsum + LP_MAX_K / 128);
    m.red = (float *)(m.scratch + warps * 32);
    m.late = m.red + 2 * warps * 16;
    m.sums = m.late + LP_BLOCK_TILES * 16;
    return m;
}

// The k-tiles of a warp's UW units (math 1): every span's two mma chains in
// flight together (their own accumulators: 2 UW / 2 chains of at most 4
// mmas, where qmma_batch's spans share theirs), then per span its group
// entry, made from the lane's own scale pair and zero byte, and the scaling
// into the totals, as qmma_batch's span end does.
// Timing-only variants (wrong sums): V 2 ORs an exponent into the A
// registers, so that the tensor cores see normal f16 values instead of the
// fold's subnormals; V 3 replaces each mma by an XOR of its operands into the
// accumulator (no tensor core at all).
template <int UW, int V = 1>
__device__ __forceinline__ void lp_spans(const uint4 (&raw)[UW], int u, const uint4 *xs,
                                         const float *xsum, const uint32_t *pairs,
                                         const uint32_t *zbs, int t, qmma_lane &st)
{
    constexpr int SPANS = UW * 4 / LP_SPAN;
    float acc[SPANS][2][4] = {};
#pragma unroll
    for (int b = 0; b < UW; b++) {
        uint2 xv[4];
        load_x<FMT_AWQ4>(xs, u + b, t, xv);
        const uint32_t w[4] = {raw[b].x, raw[b].y, raw[b].z, raw[b].w};
#pragma unroll
        for (int tt = 0; tt < 4; tt++) {
            const int i = b * 4 + tt;
            uint32_t a[4];
            tile_fragments<__half, FMT_AWQ4>(w, tt, a);
            if (V == 2)
                for (int r = 0; r < 4; r++)
                    a[r] |= 0x3C003C00u;
            if (V == 3) {
                float &c = acc[i / LP_SPAN][i & 1][0];
                c = __uint_as_float(__float_as_uint(c) ^ a[0] ^ a[1] ^ a[2] ^ a[3] ^ xv[tt].x ^
                                    xv[tt].y);
                continue;
            }
            orin_cu_mma16816<__half>(acc[i / LP_SPAN][i & 1], a[0], a[1], a[2], a[3], xv[tt].x,
                                     xv[tt].y);
        }
    }
#pragma unroll
    for (int sp = 0; sp < SPANS; sp++) {
        const lane_group lg = make_lane_group<__half, FMT_AWQ4>(pairs[sp], zbs[sp]);
        const float sx = xsum[u * 4 / LP_SPAN + sp];
        st.tot[0] += fmaf(lg.s0, acc[sp][0][0] + acc[sp][1][0], lg.c0 * sx);
        st.tot[1] += fmaf(lg.s1, acc[sp][0][2] + acc[sp][1][2], lg.c1 * sx);
    }
}

// A consumer warp's share of the ring's next slot (chunk c of its tile), r
// stepped past it: its UW units and its groups' entries out of the slot, the
// slot released, then the k-tiles into st (math 0: the GEMV's qmma_batch, 1-3:
// lp_spans). With tr, warp 0's cycles waiting, taking and computing go to cyc.
template <int WARPS>
__device__ __forceinline__ void lp_consume(const lp_params &p, const lp_smem &m, lp_ring &r, int c,
                                           qmma_lane &st, long long *tr, long long (&cyc)[3])
{
    constexpr int UW = LP_CHUNK_UNITS / WARPS;  // units a warp of a chunk
    constexpr int WG = UW * 4 / LP_GROUP_TILES; // groups a warp of a chunk
    static_assert(WG >= 1 && UW * WARPS == LP_CHUNK_UNITS, "whole groups a warp");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int slot = r.slot;
    long long c0 = tr ? clock64() : 0;
    if (!p.wait_one || lane == 0)
        orin_cu_mbar_wait(&m.full[slot], r.round & 1);
    r.next(p.stages);
    if (p.wait_one)
        __syncwarp(); // lane 0's acquire, then the warp's order
    if (tr) {
        const long long c1 = clock64();
        cyc[0] += c1 - c0;
        c0 = c1;
    }
    const unsigned char *src = m.slots + (size_t)slot * LP_SLOT_BYTES;
    const uint32_t *scales = (const uint32_t *)(src + LP_CHUNK_BYTES);
    const uint8_t *zeros = src + LP_CHUNK_BYTES + LP_CHUNK_GROUPS * 8 * 4;
    uint4 raw[UW];
#pragma unroll
    for (int b = 0; b < UW; b++)
        raw[b] = ((const uint4 *)src)[(warp * UW + b) * 32 + lane];
    const int u = c * LP_CHUNK_UNITS + warp * UW;
    if (p.math >= 1) { // each lane its own group entries, into registers
        uint32_t pairs[WG], zbs[WG];
#pragma unroll
        for (int sp = 0; sp < WG; sp++) {
            pairs[sp] = scales[(warp * WG + sp) * 8 + g];
            zbs[sp] = zeros[(warp * WG + sp) * 8 + g];
        }
        __syncwarp();
        if (lane == 0)
            lp_mbar_arrive(&m.empty[slot]);
        if (tr) {
            const long long c1 = clock64();
            cyc[1] += c1 - c0;
            c0 = c1;
        }
        if (!p.compute) // timing only: the slot's words, not the k-tiles
            st.tot[0] += (float)(raw[0].x ^ raw[UW - 1].w ^ pairs[0] ^ zbs[0]);
        else if (p.math == 2)
            lp_spans<UW, 2>(raw, u, m.xs, m.xsum, pairs, zbs, t, st);
        else if (p.math == 3)
            lp_spans<UW, 3>(raw, u, m.xs, m.xsum, pairs, zbs, t, st);
        else
            lp_spans<UW>(raw, u, m.xs, m.xsum, pairs, zbs, t, st);
    } else { // the GEMV's qmma_batch, its group entries through shared memory
        __syncwarp();
        lane_group *mine = m.scratch + warp * 32;
        if (lane < WG * 8)
            mine[lane] = make_lane_group<__half, FMT_AWQ4>(scales[warp * WG * 8 + lane],
                                                           zeros[warp * WG * 8 + lane]);
        __syncwarp();
        if (lane == 0)
            lp_mbar_arrive(&m.empty[slot]);
        st.gi = -1;
        st.left = 0;
        st.span_sum = m.xsum + u * 4 / LP_SPAN;
        if (tr) {
            const long long c1 = clock64();
            cyc[1] += c1 - c0;
            c0 = c1;
        }
        if (p.compute)
            qmma_batch<__half, FMT_AWQ4, LP_SPAN, UW, true>(raw, u, u + UW, m.xs, mine, g, t,
                                                            LP_GROUP_TILES, st);
        else // timing only: the slot's words, not the k-tiles
            st.tot[0] += (float)(raw[0].x ^ raw[UW - 1].w);
    }
    if (tr) { // the sums' values taken, so that the clock counts the k-tiles
        asm volatile("" ::"f"(st.tot[0]), "f"(st.tot[1]));
        cyc[2] += clock64() - c0;
    }
}

__device__ __forceinline__ void lp_spin(long long ns)
{
    const long long end = lp_now_ns() + ns;
    while (lp_now_ns() < end)
        ;
}

// A warp's sums of a tile (or of its share of one) added into a block's row
// of 16 in shared memory, by the lanes that hold them (t == 0).
__device__ __forceinline__ void lp_add_late(float *row, const qmma_lane &st, int g, int t)
{
    if (t == 0) {
        atomicAdd(&row[g], st.tot[0]);
        atomicAdd(&row[g + 8], st.tot[1]);
    }
}

// The consumer warps' sums of a tile meet: the lanes that hold them (t == 0)
// put them in one of two alternating rows of red (so that the next tile's
// puts need no second barrier), the warps meet, and thread r < 16 gets row
// r's total (the others 0).
template <int WARPS>
__device__ __forceinline__ float lp_meet_tile(const lp_smem &m, int &tiles_done,
                                              const qmma_lane &st)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
    float *r = m.red + (tiles_done++ & 1) * WARPS * 16;
    if ((lane & 3) == 0) {
        r[warp * 16 + g] = st.tot[0];
        r[warp * 16 + g + 8] = st.tot[1];
    }
    lp_consumers_sync<WARPS>();
    float sum = 0.0f;
    if (threadIdx.x < 16)
#pragma unroll
        for (int w = 0; w < WARPS; w++)
            sum += r[w * 16 + threadIdx.x];
    return sum;
}

// ---- the flat kernel: every block streams and computes -----------------------------

template <int WARPS>
__global__ void __launch_bounds__(32 * (WARPS + 1), 1) lp_layer_kernel(lp_params p)
{
#if LP_SM90
    extern __shared__ __align__(128) unsigned char smem[];
    const lp_smem m = lp_carve(smem, WARPS, p.stages);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (threadIdx.x == 0) {
        for (int s = 0; s < p.stages; s++) {
            lp_mbar_init(&m.full[s], 1);
            lp_mbar_init(&m.empty[s], WARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    for (int e = threadIdx.x; e < LP_BLOCK_TILES * 16; e += blockDim.x)
        m.late[e] = 0.0f;
    __syncthreads();
    if (warp == WARPS) {
        if (lane == 0)
            lp_produce(p, false, m.slots, m.full, m.empty);
        return;
    }
    unsigned target = 0;
    auto grid_sync = [&]() {
        target += gridDim.x;
        if (p.barriers)
            lp_grid_sync<WARPS>(p.barrier, target);
    };
    lp_ring ring = {0, 0};
    int tiles_done = 0;
    for (int l = 0; l < p.layers; l++) {
#pragma unroll 1
        for (int pi = 0; pi < LP_PRODUCTS; pi++) {
            const lp_product P = lp_pick(p, pi);
            long long *tr = threadIdx.x == 0 ? lp_trace_of(p, l, pi) : NULL;
            long long cyc[3] = {0, 0, 0};        // warp 0's cycles (tr), flushed at the end
            if (pi == 1 && p.attention_ns > 0) { // the attention's stand-in
                grid_sync();
                if (threadIdx.x == 0)
                    lp_spin(p.attention_ns);
            }
            if (tr)
                tr[LP_T_BARRIER] = lp_now_ns();
            grid_sync();
            if (tr)
                tr[LP_T_PAST] = lp_now_ns();
            const int k = P.units * 64, chunks = P.units / LP_CHUNK_UNITS;
            const qmma_staging<__half, FMT_AWQ4, LP_SPAN> staging = {(uint2 *)m.xs, m.xsum};
            qmma_stage_x(staging, (const uint4 *)P.x, k, 32 * WARPS);
            lp_consumers_sync<WARPS>();
            if (tr)
                tr[LP_T_STAGED] = lp_now_ns();
            int i0, i1;
            lp_items(P, false, &i0, &i1);
            for (int j0 = i0; j0 < i1; j0 += chunks) {
                qmma_lane st = {};
                for (int c = 0; c < chunks; c++) {
                    lp_consume<WARPS>(p, m, ring, c, st, tr, cyc);
                    if (tr && j0 == i0 && c == 0)
                        tr[LP_T_FIRST] = lp_now_ns();
                }
                if (p.late) { // into the block's sums; the warps meet once a product
                    lp_add_late(m.late + (j0 - i0) / chunks * 16, st, g, t);
                    continue;
                }
                const float sum = lp_meet_tile<WARPS>(m, tiles_done, st);
                if (threadIdx.x < 16)
                    P.y[16 * (j0 / chunks) + threadIdx.x] = __float2half(sum);
            }
            if (p.late) {
                lp_consumers_sync<WARPS>();
                for (int e = threadIdx.x; e < (i1 - i0) / chunks * 16; e += 32 * WARPS) {
                    P.y[16 * (i0 / chunks) + e] = __float2half(m.late[e]);
                    m.late[e] = 0.0f;
                }
            }
            if (tr) {
                tr[LP_T_DONE] = lp_now_ns();
                for (int e = 0; e < 3; e++)
                    tr[LP_T_WAITC + e] = cyc[e];
            }
        }
    }
#endif
}

// ---- the cluster kernel: a control block and LP_STREAMERS streamers ---------------
//
// Launch: clusters of LP_CLUSTER blocks, one block an SM. Rank 0 (control)
// streams nothing: it is the only block that touches global memory on a
// product's critical path, so that its loads and atomics never queue behind a
// ring's bulk copies (the flat kernel's trace: a grid barrier costs the
// bytes in flight over the SM's share of the bandwidth, 1.4-6 us). Per product
// the control waits for its streamers' `done` arrivals, writes the cluster's
// outputs (their partial sums, added into its shared memory by the
// streamers' red.shared::cluster), meets the other controls at a grid
// barrier, stages the next product's x and bulk-copies it (with its spans'
// sums) into each streamer's shared memory, completing on the streamer's
// `x_ready` (with `multicast`: one multicast bulk copy of x staged once in
// global memory). Streamers (ranks 1..) stream their ring without pause; per
// product they wait for x_ready, take their items, meet their warps' sums of
// each tile (or share of one) and add them into the control's `sums` (one
// remote add a row: adds from every warp were served one at a time, 123-173
// us a layer).

__device__ __forceinline__ uint32_t lp_map(const void *local, unsigned rank)
{
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(remote)
                 : "r"(orin_cu_smem_addr(local)), "r"(rank));
    return remote;
}

__device__ __forceinline__ void lp_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::
                     : "memory");
}

__device__ __forceinline__ void lp_mbar_wait_cluster(uint64_t *bar, uint32_t parity)
{
    uint32_t done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; "
                     "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 "
                     "p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(orin_cu_smem_addr(bar)), "r"(parity)
                     : "memory");
}

// The bytes of x and of its spans' sums a product's streamers receive.
__device__ __forceinline__ uint32_t lp_x_bytes(const lp_product &P)
{
    return (uint32_t)(P.units * 64 * 2 + P.units * 64 / 128 * 4);
}

// v added into the float at shared::cluster address `at` (another block's).
__device__ __forceinline__ void lp_red_cluster(uint32_t at, float v)
{
    asm volatile("red.relaxed.cluster.shared::cluster.add.f32 [%0], %1;" ::"r"(at), "f"(v)
                 : "memory");
}

// bytes from global memory into the same offset of every streamer's shared
// memory (ranks 1.. of the cluster), each completing on its own copy of bar.
__device__ __forceinline__ void lp_multicast(void *dst, const void *src, uint32_t bytes,
                                             uint64_t *bar)
{
    const uint16_t streamers = (uint16_t)(((1u << LP_CLUSTER) - 1) & ~1u);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes."
                 "multicast::cluster [%0], [%1], %2, [%3], %4;" ::"r"(orin_cu_smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(orin_cu_smem_addr(bar)), "h"(streamers)
                 : "memory");
}

template <int WARPS> __device__ void lp_control(const lp_params &p, const lp_smem &m)
{
    const int nc = gridDim.x / LP_CLUSTER, c = blockIdx.x / LP_CLUSTER;
    const int threads = 32 * (WARPS + 1);
    unsigned target = 0;
    auto grid_sync = [&]() { // the controls alone: every thread of theirs takes part
        target += nc;
        __syncthreads();
        lp_grid_arrive_wait(p.barrier, target);
        __syncthreads();
    };
    // x of product P staged here and copied into every streamer
    auto send_x = [&](const lp_product &P) {
        const int k = P.units * 64;
        if (p.multicast) { // x staged in global memory, one copy into every streamer
            if (threadIdx.x == 0) {
                asm volatile("fence.acq_rel.cluster;" ::: "memory");
                lp_multicast(m.xs, P.xst, k * 2, m.x_ready);
                lp_multicast(m.xsum, P.xst + k * 2, k / 128 * 4, m.x_ready);
            }
            return;
        }
        const qmma_staging<__half, FMT_AWQ4, LP_SPAN> staging = {(uint2 *)m.xs, m.xsum};
        qmma_stage_x(staging, (const uint4 *)P.x, k, threads);
        __syncthreads();
        if (threadIdx.x < LP_STREAMERS) {
            const unsigned r = threadIdx.x + 1;
            // the sums zeroed before any streamer can add to them again, x
            // written before the copy engine reads it
            asm volatile("fence.acq_rel.cluster;" ::: "memory");
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            const uint32_t bar = lp_map(m.x_ready, r);
            asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::"
                         "complete_tx::bytes "
                         "[%0], [%1], %2, [%3];" ::"r"(lp_map(m.xs, r)),
                         "r"(orin_cu_smem_addr(m.xs)), "r"(k * 2), "r"(bar)
                         : "memory");
            asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::"
                         "complete_tx::bytes "
                         "[%0], [%1], %2, [%3];" ::"r"(lp_map(m.xsum, r)),
                         "r"(orin_cu_smem_addr(m.xsum)), "r"(k / 128 * 4), "r"(bar)
                         : "memory");
        }
    };
    for (int i = threadIdx.x; i < LP_MAX_SUMS; i += threads)
        m.sums[i] = 0.0f;
    __syncthreads();
    send_x(p.p[0]);
    int n = 0; // products done
    for (int l = 0; l < p.layers; l++) {
#pragma unroll 1
        for (int pi = 0; pi < LP_PRODUCTS; pi++, n++) {
            const lp_product P = lp_pick(p, pi);
            long long *tr = threadIdx.x == 0 ? lp_trace_of(p, l, pi) : NULL;
            lp_mbar_wait_cluster(m.done, n & 1);
            if (tr)
                tr[LP_T_BARRIER] = lp_now_ns();
            const int t0 = (int)((long long)P.tiles * c / nc);
            const int outs = ((int)((long long)P.tiles * (c + 1) / nc) - t0) * 16;
            for (int i = threadIdx.x; i < outs; i += threads) {
                P.y[16 * t0 + i] = __float2half(m.sums[i]);
                m.sums[i] = 0.0f;
            }
            if (l == p.layers - 1 && pi == LP_PRODUCTS - 1)
                break;
            if (p.barriers)
                grid_sync();
            if (tr)
                tr[LP_T_PAST] = lp_now_ns();
            if (pi == 0 && p.attention_ns > 0) { // the attention's stand-in
                if (threadIdx.x == 0)
                    lp_spin(p.attention_ns);
                if (p.barriers)
                    grid_sync();
            }
            send_x(lp_pick(p, (pi + 1) % LP_PRODUCTS));
            if (tr)
                tr[LP_T_STAGED] = lp_now_ns();
        }
    }
}

template <int WARPS> __device__ void lp_stream(const lp_params &p, const lp_smem &m)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const uint32_t sums = lp_map(m.sums, 0), done = lp_map(m.done, 0);
    lp_ring ring = {0, 0};
    int n = 0, tiles_done = 0;
    for (int l = 0; l < p.layers; l++) {
#pragma unroll 1
        for (int pi = 0; pi < LP_PRODUCTS; pi++, n++) {
            const lp_product P = lp_pick(p, pi);
            long long *tr = threadIdx.x == 0 ? lp_trace_of(p, l, pi) : NULL;
            long long cyc[3] = {0, 0, 0}; // warp 0's cycles (tr), flushed at the end
            lp_mbar_wait_cluster(m.x_ready, n & 1);
            if (tr)
                tr[LP_T_STAGED] = lp_now_ns();
            const int chunks = P.units / LP_CHUNK_UNITS;
            const int t0 =
                (int)((long long)P.tiles * (blockIdx.x / LP_CLUSTER) / (gridDim.x / LP_CLUSTER));
            int i0, i1;
            lp_items(P, true, &i0, &i1);
            qmma_lane st = {};
            const int tile0 = i0 / chunks; // the first tile the items touch
            for (int item = i0; item < i1; item++) {
                lp_consume<WARPS>(p, m, ring, item % chunks, st, tr, cyc);
                if (tr && item == i0)
                    tr[LP_T_FIRST] = lp_now_ns();
                if (item + 1 < i1 && (item + 1) % chunks != 0)
                    continue; // the tile goes on in the next item
                if (p.late) { // into the block's sums, sent once a product
                    lp_add_late(m.late + (item / chunks - tile0) * 16, st, g, t);
                    st = qmma_lane{};
                    continue;
                }
                // the tile's (or its share's) sums: the warps' met here, then
                // 16 adds into the control's
                const float sum = lp_meet_tile<WARPS>(m, tiles_done, st);
                st = qmma_lane{};
                if (threadIdx.x < 16)
                    lp_red_cluster(sums + ((item / chunks - t0) * 16 + threadIdx.x) * 4, sum);
            }
            if (p.late && i1 > i0) {
                lp_consumers_sync<WARPS>();
                const int rows = ((i1 - 1) / chunks - tile0 + 1) * 16;
                for (int e = threadIdx.x; e < rows; e += 32 * WARPS) {
                    lp_red_cluster(sums + ((tile0 - t0) * 16 + e) * 4, m.late[e]);
                    m.late[e] = 0.0f;
                }
            }
            // x of the next product: expected before this one is reported done
            if (threadIdx.x == 0 && !(l == p.layers - 1 && pi == LP_PRODUCTS - 1))
                orin_cu_bulk_expect(m.x_ready, lp_x_bytes(lp_pick(p, (pi + 1) % LP_PRODUCTS)));
            __syncwarp();
            if (lane == 0)
                asm volatile(
                    "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(done)
                    : "memory");
            if (tr) {
                tr[LP_T_DONE] = lp_now_ns();
                for (int e = 0; e < 3; e++)
                    tr[LP_T_WAITC + e] = cyc[e];
            }
        }
    }
}

template <int WARPS>
__global__ void __launch_bounds__(32 * (WARPS + 1), 1) lp_cluster_kernel(lp_params p)
{
#if LP_SM90
    extern __shared__ __align__(128) unsigned char smem[];
    const lp_smem m = lp_carve(smem, WARPS, p.stages);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const bool control = blockIdx.x % LP_CLUSTER == 0;
    if (threadIdx.x == 0) {
        for (int s = 0; s < p.stages; s++) {
            lp_mbar_init(&m.full[s], 1);
            lp_mbar_init(&m.empty[s], WARPS);
        }
        lp_mbar_init(m.x_ready, 1);
        lp_mbar_init(m.done, LP_STREAMERS * WARPS);
        if (!control)
            orin_cu_bulk_expect(m.x_ready, lp_x_bytes(p.p[0]));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    for (int e = threadIdx.x; e < LP_BLOCK_TILES * 16; e += blockDim.x)
        m.late[e] = 0.0f;
    lp_cluster_sync(); // every block's barriers ready before any remote use
    if (control)
        lp_control<WARPS>(p, m);
    else if (warp == WARPS && lane == 0)
        lp_produce(p, true, m.slots, m.full, m.empty);
    else if (warp < WARPS)
        lp_stream<WARPS>(p, m);
    __syncwarp();
    lp_cluster_sync(); // no block leaves while a peer may still reach its memory
#endif
}

static size_t lp_trace_bytes(int sms)
{
    return (size_t)sms * LP_PRODUCTS * LP_TRACE * sizeof(long long);
}

// ---- setup: random weights in the tile layout ------------------------------------

__device__ __forceinline__ uint32_t lp_hash(uint64_t i)
{
    i += 0x9E3779B97F4A7C15ull;
    i = (i ^ (i >> 30)) * 0xBF58476D1CE4E5B9ull;
    i = (i ^ (i >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(i ^ (i >> 31));
}

// kind 0: random words; 1: scale pairs in [0.002, 0.01); 2: f16 in [-1, 1).
__global__ void lp_fill_kernel(uint32_t *dst, size_t words, uint64_t seed, int kind)
{
    for (size_t w = (size_t)blockIdx.x * blockDim.x + threadIdx.x; w < words;
         w += (size_t)gridDim.x * blockDim.x) {
        const uint32_t h = lp_hash(seed * 0x100000001B3ull + w);
        if (kind == 0) {
            dst[w] = h;
        } else {
            const float a = (float)(h & 0xFFFFu) / 65536.0f, b = (float)(h >> 16) / 65536.0f;
            const float lo = kind == 1 ? 0.002f + 0.008f * a : 2.0f * a - 1.0f;
            const float hi = kind == 1 ? 0.002f + 0.008f * b : 2.0f * b - 1.0f;
            dst[w] = (uint32_t)__half_as_ushort(__float2half(lo)) |
                     (uint32_t)__half_as_ushort(__float2half(hi)) << 16;
        }
    }
}

// x [k] staged once, in global memory, as a block stages it in shared memory
// (the multicast's source). Launch: one block of 256 threads.
__global__ void lp_stage_kernel(const uint4 *x, unsigned char *xst, int k)
{
    const qmma_staging<__half, FMT_AWQ4, LP_SPAN> staging = {(uint2 *)xst, (float *)(xst + k * 2)};
    qmma_stage_x(staging, x, k, blockDim.x);
}

static int lp_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "layer_probe: %s: %s\n", what, cudaGetErrorString(e));
    return -1;
}

static int lp_fill(void *dst, size_t bytes, uint64_t seed, int kind)
{
    lp_fill_kernel<<<1024, 256>>>((uint32_t *)dst, bytes / 4, seed, kind);
    return lp_check(cudaGetLastError(), "fill");
}

extern "C" layer_probe_setup *layer_probe_create(int weight_layers)
{
    layer_probe_setup *s = (layer_probe_setup *)calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->weight_layers = weight_layers;
    int b = 0;
    int sms = 0;
    bool ok = !lp_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SMs") &&
              !lp_check(cudaMalloc((void **)&s->barrier, sizeof(unsigned)), "barrier") &&
              !lp_check(cudaMalloc((void **)&s->trace, lp_trace_bytes(sms)), "trace");
    for (int pi = 0; ok && pi < LP_PRODUCTS; pi++) {
        lp_product &P = s->p[pi];
        const int n = lp_shape[pi][0], k = lp_shape[pi][1];
        P.tiles = n / 16;
        P.units = k / 64;
        P.groups = k / 128;
        P.q_stride = (size_t)P.tiles * P.units * 32;
        P.s_stride = (size_t)P.tiles * P.groups * 8;
        P.z_stride = P.s_stride;
        const size_t bytes[5] = {P.q_stride * 16 * weight_layers, P.s_stride * 4 * weight_layers,
                                 P.z_stride * weight_layers, (size_t)k * 2, (size_t)n * 2};
        for (int a = 0; ok && a < 5; a++)
            ok = !lp_check(cudaMalloc(&s->buffers[b + a], bytes[a]), "weights") &&
                 !lp_fill(s->buffers[b + a], bytes[a], 100 * pi + a,
                          a == 1   ? 1
                          : a == 3 ? 2
                                   : 0);
        P.q = (const uint4 *)s->buffers[b];
        P.s = (const uint32_t *)s->buffers[b + 1];
        P.z = (const uint8_t *)s->buffers[b + 2];
        P.x = (const __half *)s->buffers[b + 3];
        P.y = (__half *)s->buffers[b + 4];
        ok = ok &&
             !lp_check(cudaMalloc(&s->buffers[b + 5], (size_t)k * 2 + k / 128 * 4), "staged x");
        if (ok) {
            lp_stage_kernel<<<1, 256>>>((const uint4 *)P.x, (unsigned char *)s->buffers[b + 5], k);
            ok = !lp_check(cudaGetLastError(), "staging x");
        }
        P.xst = (const unsigned char *)s->buffers[b + 5];
        b += 6;
    }
    if (ok)
        ok = !lp_check(cudaDeviceSynchronize(), "setup");
    if (!ok) {
        layer_probe_destroy(s);
        return NULL;
    }
    return s;
}

extern "C" void layer_probe_destroy(layer_probe_setup *s)
{
    if (!s)
        return;
    for (int b = 0; b < LP_PRODUCTS * 6; b++)
        cudaFree(s->buffers[b]);
    cudaFree(s->barrier);
    cudaFree(s->trace);
    free(s);
}

extern "C" double layer_probe_layer_bytes(const layer_probe_setup *s)
{
    double total = 0.0;
    for (int pi = 0; pi < LP_PRODUCTS; pi++)
        total += (double)s->p[pi].q_stride * 16 + (double)s->p[pi].s_stride * 4 +
                 (double)s->p[pi].z_stride;
    return total;
}

template <int WARPS> static int lp_launch(layer_probe_setup *s, const layer_probe_config *cfg)
{
    lp_params p = {};
    for (int pi = 0; pi < LP_PRODUCTS; pi++)
        p.p[pi] = s->p[pi];
    p.layers = cfg->layers;
    p.weight_layers = s->weight_layers;
    p.stages = cfg->stages;
    p.barriers = cfg->barriers;
    p.compute = !cfg->no_compute;
    p.stream = !cfg->no_stream;
    p.math = cfg->math;
    p.late = cfg->late_sums;
    p.wait_one = cfg->wait_one;
    p.multicast = cfg->multicast;
    p.attention_ns = (long long)(cfg->attention_us * 1000.0);
    p.barrier = s->barrier;
    p.trace = cfg->trace_layer >= 0 && cfg->trace_layer < cfg->layers ? s->trace : NULL;
    p.trace_layer = cfg->trace_layer;
    const size_t smem = lp_smem_bytes(WARPS, cfg->stages);
    const void *kernel = cfg->cluster ? (const void *)lp_cluster_kernel<WARPS>
                                      : (const void *)lp_layer_kernel<WARPS>;
    int sms = 0;
    if (lp_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SMs") ||
        lp_check(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
            "shared memory") ||
        lp_check(cudaMemsetAsync(s->barrier, 0, sizeof(unsigned)), "barrier reset") ||
        (p.trace && lp_check(cudaMemsetAsync(s->trace, 0, lp_trace_bytes(sms)), "trace reset")))
        return -1;
    void *args[] = {&p};
    if (!cfg->cluster)
        return lp_check(
            cudaLaunchCooperativeKernel(kernel, dim3(sms), dim3(32 * (WARPS + 1)), args, smem),
            "cooperative launch");
    // Clusters of LP_CLUSTER, as many as are resident at once (the controls'
    // grid barrier needs every one of them there).
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = LP_CLUSTER;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    lc.blockDim = dim3(32 * (WARPS + 1));
    lc.gridDim = dim3(sms / LP_CLUSTER * LP_CLUSTER);
    lc.dynamicSmemBytes = smem;
    lc.attrs = &attr;
    lc.numAttrs = 1;
    int clusters = 0;
    if (lp_check(cudaOccupancyMaxActiveClusters(&clusters, lp_cluster_kernel<WARPS>, &lc),
                 "cluster occupancy"))
        return -1;
    clusters = std::min(clusters, sms / LP_CLUSTER);
    int most = 0; // the most outputs a control sums
    for (int pi = 0; pi < LP_PRODUCTS; pi++)
        most = std::max(most, (s->p[pi].tiles + clusters - 1) / std::max(clusters, 1) * 16);
    if (clusters < 1 || most > LP_MAX_SUMS) {
        fprintf(stderr, "layer_probe: %d clusters of %d blocks resident: too few\n", clusters,
                LP_CLUSTER);
        return -1;
    }
    static int told;
    if (!told++)
        printf("cluster kernel: %d clusters of %d blocks resident (%d SMs)\n", clusters, LP_CLUSTER,
               sms);
    lc.gridDim = dim3(clusters * LP_CLUSTER);
    return lp_check(cudaLaunchKernelEx(&lc, lp_cluster_kernel<WARPS>, p), "cluster launch");
}

static int lp_run(layer_probe_setup *s, const layer_probe_config *cfg)
{
    if (cfg->stages < 2 || cfg->stages > LP_MAX_STAGES ||
        lp_smem_bytes(cfg->warps, cfg->stages) > 227 * 1024) {
        fprintf(stderr, "layer_probe: %d stages do not fit (2-%d, 227 KB)\n", cfg->stages,
                LP_MAX_STAGES);
        return -1;
    }
    if (cfg->warps == 8)
        return lp_launch<8>(s, cfg);
    if (cfg->warps == 16)
        return lp_launch<16>(s, cfg);
    fprintf(stderr, "layer_probe: %d warps: 8 or 16\n", cfg->warps);
    return -1;
}

extern "C" int layer_probe_time(layer_probe_setup *s, const layer_probe_config *cfg, int reps,
                                double *best_us, double *median_us)
{
    cudaEvent_t a = NULL, b = NULL;
    std::vector<double> us;
    int rc = -1;
    if (lp_check(cudaEventCreate(&a), "event") || lp_check(cudaEventCreate(&b), "event") ||
        lp_run(s, cfg) || lp_check(cudaDeviceSynchronize(), "warm-up run"))
        goto done;
    for (int r = 0; r < reps; r++) {
        float ms = 0.0f;
        if (lp_check(cudaEventRecord(a), "record") || lp_run(s, cfg) ||
            lp_check(cudaEventRecord(b), "record") || lp_check(cudaEventSynchronize(b), "run") ||
            lp_check(cudaEventElapsedTime(&ms, a, b), "elapsed"))
            goto done;
        us.push_back(1000.0 * ms);
    }
    std::sort(us.begin(), us.end());
    *best_us = us[0];
    *median_us = us[us.size() / 2];
    rc = 0;
done:
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    return rc;
}

// ---- the check: a plain f32 dequantize-and-multiply from the tile layout ----------

// Launch: a thread an output row, 128 threads. Value (row, k) of the tiles
// found from the layout's definition (cuda_qmma.cuh), not from its fragments.
__global__ void lp_reference_kernel(lp_product P, int wl, float *out)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= P.tiles * 16)
        return;
    const int j = n / 16, g = n % 8, hi = n % 16 / 8;
    const uint4 *q = P.q + wl * P.q_stride;
    const uint32_t *s = P.s + wl * P.s_stride;
    const uint8_t *z = P.z + wl * P.z_stride;
    float acc = 0.0f;
    for (int k = 0; k < P.units * 64; k++) {
        const int kt = k / 16, col = k % 16, tq = col / 4, rem = col % 4;
        const int i = (rem & 1) * 4 + (rem >> 1) * 2 + hi; // tile_col(tq, i) == col
        const uint4 w = q[((size_t)j * P.units + kt / 4) * 32 + g * 4 + tq];
        const uint32_t word = kt % 4 == 0 ? w.x : kt % 4 == 1 ? w.y : kt % 4 == 2 ? w.z : w.w;
        const int qv = (word >> (4 * i)) & 15;
        const size_t e = ((size_t)j * P.groups + k / 128) * 8 + g;
        const float sc = __half2float(__ushort_as_half((unsigned short)(hi ? s[e] >> 16 : s[e])));
        const int zv = hi ? z[e] >> 4 : z[e] & 15;
        acc += (float)(qv - zv) * sc * __half2float(P.x[k]);
    }
    out[n] = acc;
}

extern "C" int layer_probe_check(layer_probe_setup *s, const layer_probe_config *cfg, double *worst)
{
    if (lp_run(s, cfg) || lp_check(cudaDeviceSynchronize(), "checked run"))
        return -1;
    *worst = 0.0;
    for (int pi = 0; pi < LP_PRODUCTS; pi++) {
        const lp_product &P = s->p[pi];
        const int n = P.tiles * 16;
        float *ref = NULL;
        std::vector<float> want(n);
        std::vector<__half> got(n);
        if (lp_check(cudaMalloc((void **)&ref, n * sizeof(float)), "reference"))
            return -1;
        lp_reference_kernel<<<(n + 127) / 128, 128>>>(P, (cfg->layers - 1) % s->weight_layers, ref);
        const int bad =
            lp_check(cudaGetLastError(), "reference launch") ||
            lp_check(cudaMemcpy(want.data(), ref, n * sizeof(float), cudaMemcpyDeviceToHost),
                     "reference copy") ||
            lp_check(cudaMemcpy(got.data(), P.y, n * 2, cudaMemcpyDeviceToHost), "output copy");
        cudaFree(ref);
        if (bad)
            return -1;
        double err = 0.0, top = 0.0;
        for (int r = 0; r < n; r++) {
            err = std::max(err, (double)fabsf(__half2float(got[r]) - want[r]));
            top = std::max(top, (double)fabsf(want[r]));
        }
        *worst = std::max(*worst, top > 0.0 ? err / top : err);
    }
    return 0;
}

// ---- the trace ---------------------------------------------------------------------

extern "C" int layer_probe_print_trace(layer_probe_setup *s, const layer_probe_config *cfg)
{
    static const char *names[LP_PRODUCTS] = {"q/k/v", "o", "gate/up", "down"};
    static const char *stamps[LP_T_FULL] = {"barrier", "past",   "staged", "first",
                                            "done",    "issue0", "issue1"};
    int sms = 0;
    layer_probe_config traced = *cfg;
    if (traced.trace_layer < 0 || traced.trace_layer >= traced.layers)
        traced.trace_layer = traced.layers / 2;
    if (lp_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SMs") ||
        lp_run(s, &traced) || lp_check(cudaDeviceSynchronize(), "traced run"))
        return -1;
    std::vector<long long> tr((size_t)sms * LP_PRODUCTS * LP_TRACE);
    if (lp_check(cudaMemcpy(tr.data(), s->trace, lp_trace_bytes(sms), cudaMemcpyDeviceToHost),
                 "trace copy"))
        return -1;
    auto at = [&](int b, int pi, int e) {
        return tr[((size_t)b * LP_PRODUCTS + pi) * LP_TRACE + e];
    };
    // the earliest stamp of q/k/v's (controls: done seen; flat: the barrier)
    long long t0 = 0;
    for (int b = 0; b < sms; b++)
        for (int e = 0; e < LP_T_FULL; e++)
            if (at(b, 0, e) && (!t0 || at(b, 0, e) < t0))
                t0 = at(b, 0, e);
    printf("trace of layer %d (us since q/k/v's first stamp; median / max over "
           "the blocks that "
           "stamp it; cluster kernel: barrier = the control saw done, past = its "
           "grid barrier, "
           "staged = x sent (control) or there (streamer)):\n%-8s",
           traced.trace_layer, "");
    for (int e = 0; e < LP_T_FULL; e++)
        printf(" %13s", stamps[e]);
    printf(" %10s %28s\n", "ring full", "warp 0 cycles: wait/take/math");
    for (int pi = 0; pi < LP_PRODUCTS; pi++) {
        printf("%-8s", names[pi]);
        for (int e = 0; e < LP_T_FULL; e++) {
            std::vector<double> v; // the blocks that stamp it (controls or streamers)
            for (int b = 0; b < sms; b++)
                if (at(b, pi, e))
                    v.push_back((at(b, pi, e) - t0) / 1e3);
            std::sort(v.begin(), v.end());
            if (v.empty())
                printf(" %13s", "-");
            else
                printf(" %6.2f/%6.2f", v[v.size() / 2], v.back());
        }
        double full = 0.0;
        for (int b = 0; b < sms; b++)
            full += (double)at(b, pi, LP_T_FULL);
        double cyc[3] = {0, 0, 0};
        int busy = 0;
        for (int b = 0; b < sms; b++)
            if (at(b, pi, LP_T_MATHC)) {
                busy++;
                for (int e = 0; e < 3; e++)
                    cyc[e] += (double)at(b, pi, LP_T_WAITC + e);
            }
        printf(" %10.1f %8.0f/%8.0f/%8.0f\n", full / sms, cyc[0] / std::max(busy, 1),
               cyc[1] / std::max(busy, 1), cyc[2] / std::max(busy, 1));
    }
    return 0;
}

// ---- split-K's cost: partial vectors added into one ---------------------------------

// Whether a product split over its inputs among the blocks that made them
// (the fused MLP bench/notes/quant.md leaves for next: down's partials from
// the gate/up tiles a block just computed) can add its partial sums into the
// residual cheaply: each of gridDim.x blocks adds a vector of n floats into
// one by red.global (MODE 0: a float a red, 1: four, `red.v4.f32`) or stores
// it to a vector of its own (2: the same bytes, no adds). Launch: any grid,
// 256 threads; n a multiple of 4.
template <int MODE> __global__ void lp_reduce_kernel(float *out, int n)
{
    const float v = (float)blockIdx.x * 1e-3f;
    for (int i = threadIdx.x * 4; i < n; i += blockDim.x * 4) {
        if (MODE == 0) {
            for (int e = 0; e < 4; e++)
                atomicAdd(out + i + e, v + (float)e);
        } else if (MODE == 1) {
#if LP_SM90
            asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(out + i),
                         "f"(v), "f"(v + 1.0f), "f"(v + 2.0f), "f"(v + 3.0f)
                         : "memory");
#endif
        } else {
            *(float4 *)(out + (size_t)blockIdx.x * n + i) = make_float4(v, v + 1, v + 2, v + 3);
        }
    }
}

extern "C" int layer_probe_reduce(int mode, int blocks, int n, int launches, double *us,
                                  double *sum0)
{
    float *out = NULL;
    cudaEvent_t a = NULL, b = NULL;
    float ms = 0.0f;
    int rc = -1;
    const size_t floats = (size_t)n * (mode == 2 ? blocks : 1);
    if (lp_check(cudaMalloc((void **)&out, floats * sizeof(float)), "reduce output") ||
        lp_check(cudaMemset(out, 0, floats * sizeof(float)), "reduce zero") ||
        lp_check(cudaEventCreate(&a), "event") || lp_check(cudaEventCreate(&b), "event"))
        goto done;
    for (int r = -1; r < launches; r++) { // r -1: the untimed warm-up
        if (r == 0 && (lp_check(cudaMemset(out, 0, floats * sizeof(float)), "reduce zero") ||
                       lp_check(cudaEventRecord(a), "record")))
            goto done;
        if (mode == 0)
            lp_reduce_kernel<0><<<blocks, 256>>>(out, n);
        else if (mode == 1)
            lp_reduce_kernel<1><<<blocks, 256>>>(out, n);
        else
            lp_reduce_kernel<2><<<blocks, 256>>>(out, n);
    }
    if (lp_check(cudaGetLastError(), "reduce launch") || lp_check(cudaEventRecord(b), "record") ||
        lp_check(cudaEventSynchronize(b), "reduce") ||
        lp_check(cudaEventElapsedTime(&ms, a, b), "elapsed"))
        goto done;
    *us = 1000.0 * ms / launches;
    { // element 0 after `launches` adds of every block's value there (the adds' check)
        float first = 0.0f;
        if (lp_check(cudaMemcpy(&first, out, sizeof first, cudaMemcpyDeviceToHost), "reduce copy"))
            goto done;
        *sum0 = first;
    }
    rc = 0;
done:
    cudaFree(out);
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    return rc;
}
