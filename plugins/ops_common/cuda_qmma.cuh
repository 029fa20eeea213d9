// The quantized weights' tile layout (layout 1) and the arithmetic of its
// k-tiles on the tensor cores, shared by the GEMV that streams them
// (cuda_qmma_gemv.cuh) and bench/layer_probe.cu, which runs the same k-tiles
// from a shared-memory ring. Device code only; the layout's packing is in
// cuda_quant.cu.
#ifndef ORIN_OPS_COMMON_CUDA_QMMA_CUH
#define ORIN_OPS_COMMON_CUDA_QMMA_CUH

#include "cuda_gemv.cuh"
#include "orin/cuda_util.cuh"

#include <stdint.h>
#include <type_traits>

// ---- layout 1: tiles for mma.sync ---------------------------------------------------
//
// w [N][K] (N outputs, K inputs) as tiles of 16 outputs x 16 inputs, tile (j, kt)
// being the A operand of one mma.sync.m16n8k16 (orin_cu_mma16816). Lane l of a
// warp (g = l / 4, t = l % 4) holds 8 values of a tile: value i (0..7) is
//     row 16j + g + 8 (i & 1),  input 16kt + 4t + 2 ((i >> 1) & 1) + (i >> 2),
// and A register r (0..3) is the pair (value r, value r + 4). mma's columns
// 2t, 2t+1, 2t+8, 2t+9 are thus inputs 4t .. 4t+3 of the tile, a permutation of
// k the B operand (x) follows too, so that a lane's x is one 8-byte load.
//   AWQ:  one 32-bit word a tile, value i in nibble i (bits 4i..4i+3): the word
//         shifted by 4r and masked with 0x000F000F is register r's pair.
//   int8: two words a tile, value i biased to q + 128 in byte 2 (i & 1) + (i >> 2)
//         of word (i & 3) / 2: register r's pair is bytes 2 (r & 1) and
//         2 (r & 1) + 1 of word r / 2, one byte permute away.
// A unit is a lane's 16 bytes: UNIT_TILES consecutive k-tiles (AWQ 4, int8 2).
//   qweight [N/16][K/UNIT_K][32 lanes][16 bytes]: a warp's load of one unit is
//           512 contiguous bytes;
//   scales  [N/16][groups][8] of (s[16j + g], s[16j + g + 8]) f16 pairs;
//   zeros   [N/16][groups][8] bytes z[16j + g] | z[16j + g + 8] << 4 (AWQ).
// Each is the stored tensor's size exactly (N % 16 == 0, K % UNIT_K == 0), so
// prepare rewrites the bytes where they are.
enum quant_fmt { FMT_AWQ4, FMT_INT8 };

template <int FMT> struct tiles_of {
    static constexpr int UNIT_TILES = FMT == FMT_AWQ4 ? 4 : 2;
    static constexpr int UNIT_K = 16 * UNIT_TILES;
};

// Row (within the 16) and input (within the tile) of value i of lane (g, t).
__host__ __device__ __forceinline__ int tile_row(int g, int i) { return g + 8 * (i & 1); }
__host__ __device__ __forceinline__ int tile_col(int t, int i)
{
    return 4 * t + 2 * ((i >> 1) & 1) + (i >> 2);
}

// Where value i of a lane's tile tt sits in the lane's 16 bytes: word and bit.
template <int FMT> __host__ __device__ __forceinline__ int tile_word(int tt, int i)
{
    return FMT == FMT_AWQ4 ? tt : 2 * tt + ((i & 3) >> 1);
}
template <int FMT> __host__ __device__ __forceinline__ int tile_shift(int i)
{
    return FMT == FMT_AWQ4 ? 4 * i : 8 * (2 * (i & 1) + (i >> 2));
}

// How a weight reaches the tensor cores: a nibble q masked into a register of
// T reads BASE + q UNIT (row g's registers) or BASE + q UNIT_HIGH (row g + 8's)
// and the mma sums those times x as they are; the span's epilogue then takes
// the base and the zero point off once, as c times the span's sum of x
// (make_lane_group, qmma_batch). f16 masks the nibbles with no base, so a
// nibble reads as the subnormal q 2^-24 (2^-20 one nibble up, in place):
// exact, and the sums stay as small as (q - z)'s, so the offset's
// cancellation costs a few bits at most. (This needs the tensor cores to take
// f16 subnormals as they are: test_quant's cases check it on the GPU they run
// on; run there on H100 and H200, not yet on sm_80/sm_87.) bf16's subnormals
// would make the products f32 subnormals, so there the nibble goes into the
// mantissa of 128 (whose last bit is worth 1) and the high one shifts down
// first.
template <typename T> struct tile_type;
template <> struct tile_type<__half> {
    static constexpr uint32_t BASE2 = 0; // ORed into both halves
    static constexpr float BASE = 0.0f, UNIT = 0x1p-24f, UNIT_HIGH = 0x1p-20f;
    static constexpr bool HIGH_IN_PLACE = true; // row g + 8: mask 0x00F000F0
};
template <> struct tile_type<__nv_bfloat16> {
    static constexpr uint32_t BASE2 = 0x43004300u; // 128 in both halves
    static constexpr float BASE = 128.0f, UNIT = 1.0f, UNIT_HIGH = 1.0f;
    static constexpr bool HIGH_IN_PLACE = false;
};
// int8: byte b = q + 128 under a zero high byte reads the f16 subnormal
// b 2^-24. bf16 (no fold): under the high byte 0x64 it reads the f16
// 1024 + b, less 1152 the exact q, converted (b needs 8 significant bits
// and 1024 + b 11: no bf16 base holds it).
#define INT8_OFFSET 128.0f
#define INT8_BASE2 0x64806480u // f16 1152 = 1024 + 128 in both halves

// Whether the tensor cores take the weights with base and zero point in
// (the fold): every AWQ tile, and int8 in f16.
template <typename T, int FMT> struct qmma_fold {
    static constexpr bool on = FMT == FMT_AWQ4 || std::is_same<T, __half>::value;
};

// (a & MASK) | c in one LOP3.
template <uint32_t MASK>
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t c)
{
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "n"(MASK), "r"(c));
    return d;
}

// int8 in bf16 (no fold): the f16 pair 1024 + b less 1152, exact, as bf16.
__device__ __forceinline__ uint32_t int8_pair_bf16(uint32_t h)
{
    const uint32_t base = INT8_BASE2;
    const __half2 d = __hsub2(*reinterpret_cast<const __half2 *>(&h),
                              *reinterpret_cast<const __half2 *>(&base));
    const float2 f = __half22float2(d);
    __nv_bfloat162 r = __floats2bfloat162_rn(f.x, f.y);
    return *reinterpret_cast<uint32_t *>(&r);
}

// The A registers of k-tile tt of a lane's unit w (tile_type). AWQ: registers
// 0 and 2 (row g) the nibble pairs at mask 0x000F000F of the word and of the
// word >> 8; registers 1 and 3 (row g + 8) in f16 the pairs at mask 0x00F000F0
// in place, in bf16 shifted down by 4: f16 1 shift and 4 LOP3 a tile. int8: 4
// byte permutes (and in bf16 the subtraction and conversion).
template <typename T, int FMT>
__device__ __forceinline__ void tile_fragments(const uint32_t (&w)[4], int tt, uint32_t (&a)[4])
{
    if constexpr (FMT == FMT_AWQ4) {
        const uint32_t lo = w[tt], hi = w[tt] >> 8, base = tile_type<T>::BASE2;
        a[0] = and_or<0x000F000Fu>(lo, base);
        a[2] = and_or<0x000F000Fu>(hi, base);
        if constexpr (tile_type<T>::HIGH_IN_PLACE) {
            a[1] = and_or<0x00F000F0u>(lo, base);
            a[3] = and_or<0x00F000F0u>(hi, base);
        } else {
            a[1] = and_or<0x000F000Fu>(lo >> 4, base);
            a[3] = and_or<0x000F000Fu>(hi >> 4, base);
        }
    } else {
        constexpr bool fold = qmma_fold<T, FMT>::on;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const uint32_t h = __byte_perm(w[2 * tt + (r >> 1)], fold ? 0u : 0x64646464u,
                                           (r & 1) ? 0x4342u : 0x4140u);
            a[r] = fold ? h : int8_pair_bf16(h);
        }
    }
}

// A lane's group data, as the GEMV keeps it in shared memory ([groups][8],
// entry g for the lane rows g and g + 8): the rows' scales s0, s1 over the
// unit their sums are in (so s acc is scale times the sum of (BASE / UNIT +
// q) x), and where the weights are folded the rows' offsets c0, c1 =
// -scale (BASE / UNIT + z): a span adds s acc + c xsum (qmma_batch). One
// 16-byte load.
struct lane_group {
    float s0, s1, c0, c1;
};

// An entry from its packed scale pair and (AWQ) zero byte. Every product is
// exact in f32 (an f16 scale times a power of two, or times at most 8 bits).
template <typename T, int FMT>
__device__ __forceinline__ lane_group make_lane_group(uint32_t pair, uint32_t zb)
{
    const float s0 = __half2float(__ushort_as_half((unsigned short)(pair & 0xFFFFu)));
    const float s1 = __half2float(__ushort_as_half((unsigned short)(pair >> 16)));
    if constexpr (FMT == FMT_INT8) {
        if constexpr (!qmma_fold<T, FMT>::on)
            return {s0, s1, 0.0f, 0.0f};
        constexpr float unit = tile_type<T>::UNIT;
        return {s0 / unit, s1 / unit, -INT8_OFFSET * s0, -INT8_OFFSET * s1};
    }
    constexpr float base = tile_type<T>::BASE, unit = tile_type<T>::UNIT,
                    unit_high = tile_type<T>::UNIT_HIGH;
    return {s0 / unit, s1 / unit_high, -s0 * (base / unit + (float)(zb & 15u)),
            -s1 * (base / unit_high + (float)(zb >> 4))};
}

// A lane's x for unit u: its 4 inputs of each of the unit's UNIT_TILES k-tiles,
// 8 bytes a tile, contiguous in shared memory (qmma_stage_x): AWQ's 4 tiles two
// 16-byte loads, int8's 2 tiles one.
template <int FMT>
__device__ __forceinline__ void load_x(const uint4 *xs, int u, int t,
                                       uint2 (&xv)[tiles_of<FMT>::UNIT_TILES])
{
    constexpr int UT = tiles_of<FMT>::UNIT_TILES, V = UT / 2; // 16-byte loads
    const uint4 *p = xs + (size_t)(u * 4 + t) * V;
#pragma unroll
    for (int v = 0; v < V; v++) {
        const uint4 pair = p[v];
        xv[2 * v] = make_uint2(pair.x, pair.y);
        xv[2 * v + 1] = make_uint2(pair.z, pair.w);
    }
}

// x [k] into shared memory as load_x reads it: [units][4 lanes t][UNIT_TILES]
// [4 values], input 16 kt + 4 t + i of k-tile kt = u UNIT_TILES + tt at
// ((u 4 + t) UNIT_TILES + tt) 4 + i; and where the weights are folded
// (qmma_fold), xsum [k / 16 SPAN]: the sum of x over each span of SPAN k-tiles,
// in f32 of the values as staged. A thread moves 16 bytes (8 inputs: two
// lanes' 4) at a time: chunk c is 8 inputs, and both callers give chunk c to
// lane c % 32, so a span's 2 SPAN chunks are in 2 SPAN neighbouring lanes
// (k is whole spans: all of them or none stage it) and meet by shuffles.
template <typename T, int FMT, int SPAN> struct qmma_staging {
    uint2 *xs;
    float *xsum;

    __device__ __forceinline__ void chunk(int c, uint4 v) const
    {
        constexpr int UT = tiles_of<FMT>::UNIT_TILES;
        static_assert(sizeof(T) == 2, "4 values of T in 8 bytes");
        const int kt = c / 2, t0 = 2 * (c % 2), u = kt / UT, tt = kt % UT;
        xs[(u * 4 + t0) * UT + tt] = make_uint2(v.x, v.y);
        xs[(u * 4 + t0 + 1) * UT + tt] = make_uint2(v.z, v.w);
        if constexpr (qmma_fold<T, FMT>::on)
            sum_span(c, v);
    }

    __device__ __forceinline__ void sum_span(int c, uint4 v) const
    {
        constexpr unsigned G = 2 * SPAN; // chunks a span
        static_assert(G <= 32 && (G & (G - 1)) == 0, "a span's chunks within a warp");
        const T *e = reinterpret_cast<const T *>(&v);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++)
            s += orin_cu_f32(e[i]);
        const unsigned lane = threadIdx.x & 31u;
        const unsigned mask = G == 32 ? 0xFFFFFFFFu : ((1u << G) - 1u) << (lane & ~(G - 1u));
#pragma unroll
        for (unsigned o = 1; o < G; o <<= 1)
            s += __shfl_xor_sync(mask, s, o);
        if (c % G == 0)
            xsum[c / G] = s;
    }

    // gemv_norm_row's put: the normalised row's 16-byte vector c (8 inputs)
    // straight into the staged layout, without a pass over the row in between.
    __device__ __forceinline__ void operator()(int c, const float (&v)[8]) const
    {
        chunk(c, orin_cu_pack16<T>(v));
    }
};

// x from global memory (no norm in front). A thread's chunks go out BATCH at a
// time, so that staging x costs one L2 round trip up to BATCH x threads chunks
// (4,096 inputs in 2 a thread; the plain loop the compiler unrolled by 4 ran 2
// or 3 single loads one after the other for 4,096 and 12,288 inputs).
template <typename T, int FMT, int SPAN, int BATCH = 4>
__device__ __forceinline__ void qmma_stage_x(const qmma_staging<T, FMT, SPAN> &st,
                                             const uint4 *__restrict__ x, int k, int threads)
{
    const int chunks = k / 8;
    for (int c0 = threadIdx.x; c0 < chunks; c0 += BATCH * threads) {
        uint4 v[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; b++)
            if (c0 + b * threads < chunks / GEMV_KO_X_DIV)
                v[b] = x[c0 + b * threads];
            else if constexpr (GEMV_KO_X_DIV != 1)
                v[b] = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int b = 0; b < BATCH; b++)
            if (c0 + b * threads < chunks)
                st.chunk(c0 + b * threads, v[b]);
    }
}

// A lane's running state over its warp's k-tiles, for NT n-tiles (16 rows
// each) sharing the warp's x: the open span's two mma chains (NT 1: the even
// and odd tiles, so that consecutive mmas do not wait on each other; NT 2:
// one an n-tile), each n-tile's group entry, the group counters (gi, and
// `left`: the group's k-tiles not yet begun; the same for the whole warp), the
// next span's sum of x (folded weights) and the rows' totals (n-tile nt's rows
// g and g + 8 at tot[2 nt] and tot[2 nt + 1]).
template <int NT> struct qmma_lanes {
    static_assert(NT == 1 || NT == 2, "one or two n-tiles a warp");
    float acc[2][4];
    lane_group lg[NT];
    int gi, left;
    const float *span_sum;
    float tot[2 * NT];
};
using qmma_lane = qmma_lanes<1>;

// Units [u, u + B / NT) of a batch, those below u_end (FULL: all of them),
// into the lane's state: raw[b NT + nt] is n-tile nt's unit u + b, and
// groups + nt ng that n-tile's group entries. A span is SPAN consecutive
// k-tiles sharing a scale: it accumulates in the two chains, then its rows'
// sums are scaled into the totals, with (folded weights) the offset c times
// the span's sum of x, which takes the BASE + z each weight carried into the
// tensor cores off the sum (4 instructions a tile fewer than subtracting it
// from the weights, for 2 FMAs a span and n-tile; the sums then run ~1,100
// times |x| before the offset cancels them, so their f32 rounding is ~2^-24
// of that: below the output's f16 rounding). Spans start at the warp's first
// k-tile and never straddle a batch or a group (SPAN divides B / NT UNIT_TILES
// and the group; the kernel starts and ends each warp's units on span
// boundaries), so where a span begins and ends is known at compile time. Each
// unit's x is loaded once for its NT n-tiles.
template <typename T, int FMT, int SPAN, int B, bool FULL, int NT = 1>
__device__ __forceinline__ void qmma_batch(const uint4 (&raw)[B], int u, int u_end,
                                           const uint4 *xs, const lane_group *groups, int g, int t,
                                           int group_tiles, qmma_lanes<NT> &s, int ng = 0)
{
    constexpr int UT = tiles_of<FMT>::UNIT_TILES, BU = B / NT;
    static_assert(B % NT == 0 && (BU * UT) % SPAN == 0, "spans within a batch");
#pragma unroll
    for (int b = 0; b < BU; b++) {
        if (!FULL && u + b >= u_end)
            break;
        uint2 xv[UT];
        load_x<FMT>(xs, u + b, t, xv);
#pragma unroll
        for (int tt = 0; tt < UT; tt++) {
            const int i = b * UT + tt; // a compile-time constant once unrolled
            if (i % SPAN == 0) {
                const bool next = s.left == 0;
                s.gi += next;
                s.left = (next ? group_tiles : s.left) - SPAN;
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    s.lg[nt] = groups[nt * ng + s.gi * 8 + g];
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s.acc[0][e] = s.acc[1][e] = 0.0f;
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const uint4 r = raw[b * NT + nt];
                const uint32_t w[4] = {r.x, r.y, r.z, r.w};
                uint32_t a[4];
                tile_fragments<T, FMT>(w, tt, a);
                orin_cu_mma16816<T>(s.acc[NT == 1 ? i & 1 : nt], a[0], a[1], a[2], a[3], xv[tt].x,
                                    xv[tt].y);
            }
            if (i % SPAN == SPAN - 1) {
                float sx = 0.0f;
                if constexpr (qmma_fold<T, FMT>::on)
                    sx = *s.span_sum++;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const lane_group &lg = s.lg[nt];
                    float off0 = 0.0f, off1 = 0.0f;
                    if constexpr (qmma_fold<T, FMT>::on) {
                        off0 = lg.c0 * sx;
                        off1 = lg.c1 * sx;
                    }
                    const float a0 = NT == 1 ? s.acc[0][0] + s.acc[1][0] : s.acc[nt][0];
                    const float a2 = NT == 1 ? s.acc[0][2] + s.acc[1][2] : s.acc[nt][2];
                    s.tot[2 * nt] += fmaf(lg.s0, a0, off0);
                    s.tot[2 * nt + 1] += fmaf(lg.s1, a2, off1);
                }
            }
        }
    }
}

#endif
