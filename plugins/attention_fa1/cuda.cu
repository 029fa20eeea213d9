// FlashAttention-1 on the GPU (Dao et al. 2022, Algorithm 1), on CUDA cores.
//
// A block owns one query head (prefill) or one kv head's group of query heads
// (decode) and a set of Q tiles of it. It walks the KV tiles in the outer loop,
// and for each KV tile visits its Q tiles in the inner loop:
//
//   O = 0, l = 0, m = -inf                               (workspace, "HBM")
//   for each KV tile j:                                  (outer; K_j, V_j in shared
//     for each Q tile i:                                  memory, prefetched with
//       load Q_i, O_i, m_i, l_i                           cp.async while tile j-1
//       S = scale Q_i K_j^T, masked per row by its position          is in use)
//       m' = max(m_i, rowmax(S)),  P = exp(S - m'),
//       l_i = exp(m_i - m') l_i + rowsum(P)
//       O_i = exp(m_i - m') O_i + P V_j,  m_i = m'      (store O_i, m_i, l_i)
//   out = O / l                                          (one division, at the end)
//
// O is kept unnormalised in f32 between KV tiles and divided by l once at the
// end (FA1's paper rescales by 1/l' at every step; the function is the same up
// to rounding). The loop order is the point: O_i, m_i and l_i go through memory
// at every (KV tile, Q tile) step, which FlashAttention-2's swap (Q outer, O in
// registers) removes.
//
// Work split: four warps a block; each warp owns RPW consecutive rows of a Q
// tile (RPW = 16 in prefill: 64-row Q tiles; 2 in decode: 8-row tiles, so that
// a GQA group of up to 8 query heads spreads over all four warps). Within a warp
// a lane owns two KV columns (lane, lane + 32) of S for every row, so a row's
// max and sum are warp-shuffle reductions, and head_dim / 32 consecutive
// elements of O for every row. Everything a lane keeps in the workspace (its
// O elements; m and l of row r for lane r) is read and written by that lane
// alone, so the workspace needs no barriers. Causal skipping: a warp whose rows
// all sit before the KV tile skips the step (a 16-row slice of a Q tile, finer
// than FA1's whole tile); the rows of a step are masked by their positions.
// Masked columns weigh 0 in P V, so the V rows up to the block's largest
// position must be finite (they are written before attention runs).
//
// FA1 parallelises over heads; with batch 1 that leaves most SMs idle in
// prefill, so the Q tiles of a head are dealt round-robin to G blocks (G chosen
// to fill about two blocks a multiprocessor; round-robin keeps the causal work
// balanced). Decode is one block per kv head, as FA1 has it: its parallelism
// is the number of kv heads, the weakness split-KV decoding (fa2) removes.
//
// Positions are read from device memory: a row whose position is outside
// 0..max_kv_len-1 attends nothing and its output row is NaN; the KV tiles a
// block walks end at its largest valid position, so nothing outside the cache
// is read whatever the positions hold.
#include "cuda.h"

extern "C" {
#include "cpu.h" // FA1_BLOCK_Q, FA1_BLOCK_KV, fa1_workspace_size
}

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/op_check.h"

enum { FA1_WARPS = 4, FA1_THREADS = FA1_WARPS * 32 };
enum { KV_TILE = FA1_BLOCK_KV };
enum { PREFILL_RPW = FA1_BLOCK_Q / FA1_WARPS, DECODE_RPW = 2 };
static_assert(KV_TILE == 64, "a lane owns two KV columns of a tile");
static_assert(PREFILL_RPW * FA1_WARPS == FA1_BLOCK_Q, "Q tile rows over the warps");

#define FULL_MASK 0xffffffffu

struct fa1_params {
    const void *q;
    void *out;
    const int32_t *positions;
    orin_kv_view kv;
    float *o, *m, *l;      // workspace: O [n, H, hd], m [n, H], l [n, H]
    int64_t rows;          // Q rows of a unit: n (prefill) or the group (decode)
    int64_t row_step;      // row id step between consecutive rows: H or 1
    int64_t unit_row;      // row id of row 0 of unit u is u * unit_row: 1 or group
    int pos_step;          // positions[r * pos_step]: 1, or 0 (decode: positions[0])
    int kv_div;            // kv head of unit u: u / kv_div (group, or 1)
    int q_tiles;           // Q tiles of a unit
    int max_kv_len;
    float scale;
    int vec_ok;            // q, out, K, V and the cache strides allow 16-byte accesses
};

// Shared memory of one block: per warp its Q rows in f32 (reused for its P rows
// once S is made), then two stages of the K tile (rows padded by 16 bytes, so
// that lanes reading different rows hit different banks) and of the V tile.
template <typename T, int HD, int RPW> struct fa1_shape {
    static constexpr int VEC = orin_cu_vec<T>::n;
    static constexpr int BQ = RPW * FA1_WARPS;
    static constexpr int K_LD = HD + VEC;
    static constexpr size_t qp_bytes = (size_t)BQ * HD * sizeof(float);
    static constexpr size_t k_bytes = (size_t)KV_TILE * K_LD * sizeof(T);
    static constexpr size_t v_bytes = (size_t)KV_TILE * HD * sizeof(T);
    static constexpr size_t smem = qp_bytes + 2 * (k_bytes + v_bytes);
    static_assert(HD % 32 == 0 && HD % VEC == 0 && HD >= KV_TILE, "P rows fit in Q rows");
};

// ---- small helpers ----

__device__ __forceinline__ float fa1_nan_max(float a, float b)
{
    return (b > a || b != b) ? b : a; // a NaN wins, as in orin_cu_warp_max
}

__device__ __forceinline__ int fa1_warp_max_int(int v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        v = max(v, __shfl_xor_sync(FULL_MASK, v, off));
    return v;
}

template <int BYTES> struct fa1_raw;
template <> struct fa1_raw<4> { typedef uint32_t type; };
template <> struct fa1_raw<8> { typedef uint2 type; };
template <> struct fa1_raw<16> { typedef uint4 type; };

// out[0..N) = src[0..N) widened, one access of N * sizeof(T) bytes (aligned to it).
template <typename T, int N>
__device__ __forceinline__ void fa1_load(const T *src, float (&out)[N])
{
    typedef typename fa1_raw<N * sizeof(T)>::type raw_t;
    raw_t raw = *reinterpret_cast<const raw_t *>(src);
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int i = 0; i < N; i++)
        out[i] = orin_cu_f32(e[i]);
}

// dst[0..N) = in[0..N) rounded to T, one access (aligned to it).
template <typename T, int N>
__device__ __forceinline__ void fa1_store(T *dst, const float (&in)[N])
{
    typedef typename fa1_raw<N * sizeof(T)>::type raw_t;
    raw_t raw;
    T *e = reinterpret_cast<T *>(&raw);
#pragma unroll
    for (int i = 0; i < N; i++)
        e[i] = orin_cu_from_f32<T>(in[i]);
    *reinterpret_cast<raw_t *>(dst) = raw;
}

// The position of row r of the unit, or -1 when there is no such row or its
// position is outside 0..max_kv_len-1.
__device__ __forceinline__ int fa1_row_pos(const fa1_params &p, int64_t r)
{
    if (r >= p.rows)
        return -1;
    int pos = p.positions[r * p.pos_step];
    return pos >= 0 && pos < p.max_kv_len ? pos : -1;
}

__device__ __forceinline__ int64_t fa1_row_id(const fa1_params &p, int64_t unit_row, int64_t r)
{
    return unit_row + r * p.row_step;
}

// ---- the pieces of a block ----

// K and V rows j0..j0+63 of kv_head into shared memory (asynchronously where
// vec_ok); rows at or past kv_end are zero and are never read from memory.
template <typename T, int HD>
__device__ void fa1_load_kv_tile(const fa1_params &p, int kv_head, int j0, int kv_end, T *ks,
                                 T *vs)
{
    constexpr int VEC = orin_cu_vec<T>::n, CHUNKS = HD / VEC, K_LD = HD + VEC;
    const T *k = (const T *)p.kv.k, *v = (const T *)p.kv.v;
    for (int i = threadIdx.x; i < KV_TILE * CHUNKS; i += FA1_THREADS) {
        const int c = i / CHUNKS, x = (i % CHUNKS) * VEC;
        T *kd = ks + c * K_LD + x, *vd = vs + c * HD + x;
        if (j0 + c < kv_end) {
            const int64_t off = orin_kv_offset(&p.kv, j0 + c, kv_head) + x;
            if (p.vec_ok) {
                orin_cu_cp_async16(orin_cu_smem_addr(kd), k + off);
                orin_cu_cp_async16(orin_cu_smem_addr(vd), v + off);
            } else {
#pragma unroll
                for (int e = 0; e < VEC; e++) {
                    kd[e] = k[off + e];
                    vd[e] = v[off + e];
                }
            }
        } else {
            *reinterpret_cast<uint4 *>(kd) = make_uint4(0, 0, 0, 0);
            *reinterpret_cast<uint4 *>(vd) = make_uint4(0, 0, 0, 0);
        }
    }
}

// O = 0, m = -inf, l = 0 for the warp's rows r0..r0+RPW-1 (lane r: m and l of row r0+r).
template <int HD, int RPW>
__device__ void fa1_init_rows(const fa1_params &p, int64_t unit_row, int64_t r0, int lane)
{
    constexpr int DPL = HD / 32;
    const float zero[DPL] = {};
    for (int i = 0; i < RPW && r0 + i < p.rows; i++)
        fa1_store<float, DPL>(p.o + fa1_row_id(p, unit_row, r0 + i) * HD + lane * DPL, zero);
    if (lane < RPW && r0 + lane < p.rows) {
        const int64_t id = fa1_row_id(p, unit_row, r0 + lane);
        p.m[id] = -INFINITY;
        p.l[id] = 0.0f;
    }
}

// The warp's Q rows into qs as f32 (rows past the unit's last: zeros).
template <typename T, int HD, int RPW>
__device__ void fa1_load_q(const fa1_params &p, int64_t unit_row, int64_t r0, float *qs, int lane)
{
    constexpr int VEC = orin_cu_vec<T>::n, CHUNKS = HD / VEC;
    const T *q = (const T *)p.q;
    for (int i = lane; i < RPW * CHUNKS; i += 32) {
        const int r = i / CHUNKS, x = (i % CHUNKS) * VEC;
        float f[VEC];
        if (r0 + r < p.rows) {
            const T *src = q + fa1_row_id(p, unit_row, r0 + r) * HD + x;
            if (p.vec_ok) {
                orin_cu_load16(src, f);
            } else {
#pragma unroll
                for (int e = 0; e < VEC; e++)
                    f[e] = orin_cu_f32(src[e]);
            }
        } else {
#pragma unroll
            for (int e = 0; e < VEC; e++)
                f[e] = 0.0f;
        }
        float *dst = qs + r * HD + x;
#pragma unroll
        for (int e = 0; e < VEC; e += 4)
            *reinterpret_cast<float4 *>(dst + e) = make_float4(f[e], f[e + 1], f[e + 2], f[e + 3]);
    }
}

// s[i][0], s[i][1] = Q row i . K rows lane and lane + 32 (unscaled, unmasked).
// Q is read as broadcasts; the K rows through 16-byte loads.
template <typename T, int HD, int RPW>
__device__ __forceinline__ void fa1_scores(const float *qs, const T *ks, int lane,
                                           float (&s)[RPW][2])
{
    constexpr int VEC = orin_cu_vec<T>::n, K_LD = HD + VEC;
    const T *k0 = ks + lane * K_LD, *k1 = ks + (lane + 32) * K_LD;
#pragma unroll
    for (int i = 0; i < RPW; i++)
        s[i][0] = s[i][1] = 0.0f;
#pragma unroll 2
    for (int x = 0; x < HD; x += VEC) {
        float ka[VEC], kb[VEC];
        orin_cu_load16(k0 + x, ka);
        orin_cu_load16(k1 + x, kb);
#pragma unroll
        for (int i = 0; i < RPW; i++) {
#pragma unroll
            for (int e = 0; e < VEC; e += 4) {
                const float4 q4 = *reinterpret_cast<const float4 *>(qs + i * HD + x + e);
                s[i][0] += q4.x * ka[e] + q4.y * ka[e + 1] + q4.z * ka[e + 2] + q4.w * ka[e + 3];
                s[i][1] += q4.x * kb[e] + q4.y * kb[e + 1] + q4.z * kb[e + 2] + q4.w * kb[e + 3];
            }
        }
    }
}

// O rows of the warp = alpha O + P V (P [RPW][64] in shared memory), in the
// workspace: the lane's DPL consecutive elements of each row.
template <typename T, int HD, int RPW>
__device__ __forceinline__ void fa1_pv(const fa1_params &p, int64_t unit_row, int64_t r0,
                                       const float (&alpha)[RPW], const float *ps, const T *vs,
                                       int lane)
{
    constexpr int DPL = HD / 32;
    const int d0 = lane * DPL;
    float o[RPW][DPL];
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        if (r0 + i < p.rows) {
            fa1_load<float, DPL>(p.o + fa1_row_id(p, unit_row, r0 + i) * HD + d0, o[i]);
#pragma unroll
            for (int e = 0; e < DPL; e++)
                o[i][e] *= alpha[i];
        } else {
#pragma unroll
            for (int e = 0; e < DPL; e++)
                o[i][e] = 0.0f;
        }
    }
#pragma unroll 2
    for (int c = 0; c < KV_TILE; c += 4) {
        float v[4][DPL];
#pragma unroll
        for (int u = 0; u < 4; u++)
            fa1_load<T, DPL>(vs + (c + u) * HD + d0, v[u]);
#pragma unroll
        for (int i = 0; i < RPW; i++) {
            const float4 p4 = *reinterpret_cast<const float4 *>(ps + i * KV_TILE + c);
#pragma unroll
            for (int e = 0; e < DPL; e++)
                o[i][e] += p4.x * v[0][e] + p4.y * v[1][e] + p4.z * v[2][e] + p4.w * v[3][e];
        }
    }
#pragma unroll
    for (int i = 0; i < RPW; i++)
        if (r0 + i < p.rows)
            fa1_store<float, DPL>(p.o + fa1_row_id(p, unit_row, r0 + i) * HD + d0, o[i]);
}

// One (KV tile, Q tile) step for the warp's rows r0..r0+RPW-1: Algorithm 1's
// inner loop body. qp is the warp's shared Q/P region.
template <typename T, int HD, int RPW>
__device__ void fa1_step(const fa1_params &p, int64_t unit_row, int64_t r0, int j0, const T *ks,
                         const T *vs, float *qp, int lane)
{
    // lane i < RPW holds row r0+i's position, running max and running sum
    const int my_pos = lane < RPW ? fa1_row_pos(p, r0 + lane) : -1;
    if (fa1_warp_max_int(my_pos) < j0)
        return; // every row sits before this KV tile (or has no valid position)
    const int64_t my_id = fa1_row_id(p, unit_row, r0 + lane);
    float my_m = -INFINITY, my_l = 0.0f;
    if (lane < RPW && r0 + lane < p.rows) {
        my_m = p.m[my_id];
        my_l = p.l[my_id];
    }

    fa1_load_q<T, HD, RPW>(p, unit_row, r0, qp, lane);
    __syncwarp();
    float s[RPW][2];
    fa1_scores<T, HD, RPW>(qp, ks, lane, s);
    __syncwarp(); // every lane is done with Q: P takes its place

    float alpha[RPW];
    float *ps = qp; // [RPW][KV_TILE]
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        const int pos = __shfl_sync(FULL_MASK, my_pos, i);
        const float m_old = __shfl_sync(FULL_MASK, my_m, i);
        const float l_old = __shfl_sync(FULL_MASK, my_l, i);
        const float a = j0 + lane <= pos ? s[i][0] * p.scale : -INFINITY;
        const float b = j0 + lane + 32 <= pos ? s[i][1] * p.scale : -INFINITY;
        const float m_tile = orin_cu_warp_max(fa1_nan_max(a, b));
        float pa = 0.0f, pb = 0.0f, al = 1.0f;
        if (m_tile != -INFINITY) { // warp-uniform; -inf: the row sees nothing here
            const float m_new = fa1_nan_max(m_old, m_tile);
            pa = expf(a - m_new);
            pb = expf(b - m_new);
            al = expf(m_old - m_new); // 0 on the row's first tile (m_old = -inf)
            const float l_tile = orin_cu_warp_sum(pa + pb);
            if (lane == i) {
                my_m = m_new;
                my_l = al * l_old + l_tile;
            }
        }
        alpha[i] = al;
        ps[i * KV_TILE + lane] = pa;
        ps[i * KV_TILE + lane + 32] = pb;
    }
    if (lane < RPW && r0 + lane < p.rows) {
        p.m[my_id] = my_m;
        p.l[my_id] = my_l;
    }
    __syncwarp(); // P complete

    fa1_pv<T, HD, RPW>(p, unit_row, r0, alpha, ps, vs, lane);
    __syncwarp(); // P read: the next step may load Q over it
}

// out = O / l for the warp's rows; NaN for a row without a valid position.
template <typename T, int HD, int RPW>
__device__ void fa1_finish_rows(const fa1_params &p, int64_t unit_row, int64_t r0, int lane)
{
    constexpr int DPL = HD / 32;
    const int d0 = lane * DPL;
    const int my_pos = lane < RPW ? fa1_row_pos(p, r0 + lane) : -1;
    const float my_l = my_pos >= 0 ? p.l[fa1_row_id(p, unit_row, r0 + lane)] : 0.0f;
    for (int i = 0; i < RPW && r0 + i < p.rows; i++) {
        const int pos = __shfl_sync(FULL_MASK, my_pos, i);
        const float l = __shfl_sync(FULL_MASK, my_l, i);
        const int64_t id = fa1_row_id(p, unit_row, r0 + i);
        float o[DPL];
        if (pos >= 0) {
            fa1_load<float, DPL>(p.o + id * HD + d0, o);
#pragma unroll
            for (int e = 0; e < DPL; e++)
                o[e] = o[e] / l;
        } else {
#pragma unroll
            for (int e = 0; e < DPL; e++)
                o[e] = __int_as_float(0x7fc00000);
        }
        T *dst = (T *)p.out + id * HD + d0;
        if (p.vec_ok) {
            fa1_store<T, DPL>(dst, o);
        } else {
#pragma unroll
            for (int e = 0; e < DPL; e++)
                dst[e] = orin_cu_from_f32<T>(o[e]);
        }
    }
}

// The kernel. Launch: grid (G, units), FA1_THREADS threads (4 warps), dynamic
// shared memory fa1_shape::smem (f16 hd 128 prefill: 98 KiB, two blocks a
// multiprocessor; f32: 162 KiB, one). Tiles: Q 64 (prefill) or 8 (decode) rows
// by KV 64 positions. Unit u is query head u (prefill) or kv head u (decode);
// block (g, u) owns the unit's Q tiles g, g + G, g + 2G, ...
// Bound by the CUDA cores' f32 FMA rate in prefill (plus the O round trips of
// FA1's loop order), by memory latency in decode (one block per kv head).
template <typename T, int HD, int RPW>
__global__ void __launch_bounds__(FA1_THREADS) fa1_kernel(const fa1_params p)
{
    typedef fa1_shape<T, HD, RPW> shape;
    extern __shared__ __align__(16) unsigned char fa1_smem[];
    __shared__ int warp_last[FA1_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int unit = blockIdx.y, first_tile = blockIdx.x, tile_step = gridDim.x;
    const int kv_head = unit / p.kv_div;
    const int64_t unit_row = (int64_t)unit * p.unit_row;
    float *qp = reinterpret_cast<float *>(fa1_smem) + warp * RPW * HD;
    T *k_s = reinterpret_cast<T *>(fa1_smem + shape::qp_bytes);
    T *v_s = reinterpret_cast<T *>(fa1_smem + shape::qp_bytes + 2 * shape::k_bytes);
    constexpr int K_STAGE = KV_TILE * shape::K_LD, V_STAGE = KV_TILE * HD;

    // Algorithm 1, line 2: O, l, m initialised; and the block's last position.
    int last = -1;
    for (int t = first_tile; t < p.q_tiles; t += tile_step) {
        const int64_t r0 = (int64_t)t * shape::BQ + warp * RPW;
        fa1_init_rows<HD, RPW>(p, unit_row, r0, lane);
        if (lane < RPW)
            last = max(last, fa1_row_pos(p, r0 + lane));
    }
    last = fa1_warp_max_int(last);
    if (lane == 0)
        warp_last[warp] = last;
    __syncthreads();
    for (int w = 0; w < FA1_WARPS; w++)
        last = max(last, warp_last[w]);
    const int kv_end = last + 1; // positions 0..last; 0 when no row is valid
    const int kv_tiles = (kv_end + KV_TILE - 1) / KV_TILE;

    // The outer loop over KV tiles; tile jt + 1 loads while tile jt is used.
    if (kv_tiles > 0)
        fa1_load_kv_tile<T, HD>(p, kv_head, 0, kv_end, k_s, v_s);
    orin_cu_cp_async_commit();
    for (int jt = 0; jt < kv_tiles; jt++) {
        const int stage = jt & 1;
        if (jt + 1 < kv_tiles) {
            fa1_load_kv_tile<T, HD>(p, kv_head, (jt + 1) * KV_TILE, kv_end,
                                    k_s + (stage ^ 1) * K_STAGE, v_s + (stage ^ 1) * V_STAGE);
            orin_cu_cp_async_commit();
            orin_cu_cp_async_wait<1>();
        } else {
            orin_cu_cp_async_wait<0>();
        }
        __syncthreads(); // tile jt is in shared memory for every warp
        for (int t = first_tile; t < p.q_tiles; t += tile_step)
            fa1_step<T, HD, RPW>(p, unit_row, (int64_t)t * shape::BQ + warp * RPW,
                                 jt * KV_TILE, k_s + stage * K_STAGE, v_s + stage * V_STAGE, qp,
                                 lane);
        __syncthreads(); // every warp is done with stage `stage` before it is refilled
    }

    for (int t = first_tile; t < p.q_tiles; t += tile_step)
        fa1_finish_rows<T, HD, RPW>(p, unit_row, (int64_t)t * shape::BQ + warp * RPW, lane);
}

// ---- host side ----

template <typename T, int HD, int RPW>
static int fa1_launch(const char *label, const orin_exec *ex, const fa1_params *p, dim3 grid)
{
    const size_t smem = fa1_shape<T, HD, RPW>::smem;
    if (orin_cu_call(label, "cudaFuncSetAttribute (shared memory)",
                     cudaFuncSetAttribute(fa1_kernel<T, HD, RPW>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)smem)))
        return -1;
    fa1_kernel<T, HD, RPW><<<grid, FA1_THREADS, smem, orin_cu_stream(ex)>>>(*p);
    return 0;
}

template <typename T>
static int fa1_launch_dt(const char *label, const orin_exec *ex, const fa1_params *p, dim3 grid,
                         int64_t hd, bool decode)
{
    if (hd == 64)
        return decode ? fa1_launch<T, 64, DECODE_RPW>(label, ex, p, grid)
                      : fa1_launch<T, 64, PREFILL_RPW>(label, ex, p, grid);
    return decode ? fa1_launch<T, 128, DECODE_RPW>(label, ex, p, grid)
                  : fa1_launch<T, 128, PREFILL_RPW>(label, ex, p, grid);
}

extern "C" bool fa1_cuda_supports(const void *args, char *why, size_t why_cap)
{
    const orin_attention_args *a = (const orin_attention_args *)args;
    if (!a || a->q.ndim != 3)
        return true; // run() reports the bad call
    int64_t hd = a->q.shape[2];
    if (hd == 64 || hd == 128)
        return true;
    if (why && why_cap)
        snprintf(why, why_cap, "head_dim %lld (fa1 runs 64 and 128 on cuda)", (long long)hd);
    return false;
}

// Whether every K/V row, q row and out row starts on 16 bytes.
static bool fa1_vec_ok(const orin_attention_args *a, orin_dtype dt)
{
    const int64_t vec = 16 / (int64_t)orin_dtype_size(dt);
    return orin_cu_aligned16(a->q.data) && orin_cu_aligned16(a->out.data) &&
           orin_cu_aligned16(a->cache.k) && orin_cu_aligned16(a->cache.v) &&
           a->cache.pos_stride % vec == 0 && a->cache.head_stride % vec == 0;
}

extern "C" int fa1_cuda_attention(const orin_exec *ex, const orin_attention_args *a,
                                  orin_dtype dt, bool decode)
{
    const char *label = decode ? "attention.decode (fa1)" : "attention.prefill (fa1)";
    if (orin_check_exec(label, ex, ORIN_DEVICE_CUDA) ||
        orin_check_attention(label, a, ORIN_DEVICE_CUDA, dt, decode))
        return -1;
    size_t need = fa1_workspace_size(a);
    if (!ex->workspace || ex->workspace_size < need)
        return orin_error_set("%s: workspace of %zu bytes, the call needs %zu", label,
                              ex->workspace ? ex->workspace_size : 0, need);
    if (!orin_cu_aligned16(ex->workspace))
        return orin_error_set("%s: workspace at %p is not 16-byte aligned", label,
                              ex->workspace);
    const int64_t n = a->q.shape[0], heads = a->q.shape[1], hd = a->q.shape[2];
    const int64_t kv_heads = a->cache.n_kv_heads, group = heads / kv_heads;
    if (hd != 64 && hd != 128)
        return orin_error_set("%s: head_dim %lld: the cuda kernel runs 64 and 128", label,
                              (long long)hd);
    if (heads > 65535 || n > (int64_t)INT32_MAX / 2)
        return orin_error_set("%s: %lld rows of %lld heads: more than one launch takes", label,
                              (long long)n, (long long)heads);

    dim3 grid;
    int q_tiles;
    if (decode) {
        // One block per kv head holds the whole group (each K/V tile loaded once
        // for it); a group above 8 rows is several Q tiles of that block.
        q_tiles = (int)((group + DECODE_RPW * FA1_WARPS - 1) / (DECODE_RPW * FA1_WARPS));
        grid = dim3(1, (unsigned)kv_heads);
    } else {
        // About two blocks a multiprocessor: G groups of Q tiles per head.
        q_tiles = (int)((n + FA1_BLOCK_Q - 1) / FA1_BLOCK_Q);
        int64_t groups = (2 * (int64_t)orin_cu_sm_count(ex) + heads - 1) / heads;
        if (groups > q_tiles)
            groups = q_tiles;
        grid = dim3((unsigned)groups, (unsigned)heads);
    }
    float *o = (float *)ex->workspace;
    const fa1_params p = {
        .q = a->q.data,
        .out = a->out.data,
        .positions = (const int32_t *)a->positions.data,
        .kv = a->cache,
        .o = o,
        .m = o + n * heads * hd,
        .l = o + n * heads * hd + n * heads,
        .rows = decode ? group : n,
        .row_step = decode ? 1 : heads,
        .unit_row = decode ? group : 1,
        .pos_step = decode ? 0 : 1,
        .kv_div = decode ? 1 : (int)group,
        .q_tiles = q_tiles,
        .max_kv_len = a->max_kv_len,
        .scale = a->scale,
        .vec_ok = fa1_vec_ok(a, dt),
    };

    int rc = 0;
    ORIN_CU_DISPATCH(dt, label, T, rc = fa1_launch_dt<T>(label, ex, &p, grid, hd, decode));
    if (rc)
        return rc;
    return orin_cu_launched(label, dt, "n %lld, heads %lld/%lld, head_dim %lld, max_kv_len %d",
                            (long long)n, (long long)heads, (long long)kv_heads, (long long)hd,
                            a->max_kv_len);
}
