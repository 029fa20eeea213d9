// attention_fa2's CUDA decode, part 2 of 4, included by cuda_decode.cu only: the
// tensor-core split kernels (f16, bf16): fa2d_split_mma, K and V from registers,
// and fa2d_split_cp, the same steps on K and V staged through shared memory; the
// warp's mma state and steps here are the cluster kernel's too.
#ifndef ORIN_ATTENTION_FA2_CUDA_DECODE_MMA_CUH
#define ORIN_ATTENTION_FA2_CUDA_DECODE_MMA_CUH

#include "cuda_decode_common.cuh"

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

// One 16-position step's math on its K and V fragments: S = K Q^T (positions
// masked by ok0 / ok1), the online softmax, O += P V.
template <typename T, int HD>
__device__ __forceinline__ void
fa2d_mma_tile(const uint4 (&ka)[HD / 32], const uint4 (&kb)[HD / 32], const uint4 (&va)[HD / 64],
              const uint4 (&vb)[HD / 64], const uint4 (&vc)[HD / 64], const uint4 (&vd)[HD / 64],
              const uint4 (&qf)[HD / 32], float scale, bool ok0, bool ok1, fa2d_mma_state<HD> &st)
{
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    fa2d_mma_scores<T, HD>(ka, kb, qf, scale, ok0, ok1, s);
    uint32_t b0, b1;
    fa2d_mma_softmax<T, HD>(s, st, &b0, &b1);
    fa2d_mma_pv<T, HD>(va, vb, vc, vd, b0, b1, st);
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

    fa2d_mma_tile<T, HD>(ka, kb, va, vb, vc, vd, qf, scale, ok_k0, ok_k1, st);
}

// A first-step hook of fa2d_mma_warp_range that takes no step (the default).
struct fa2d_no_first_step {
    template <typename T, int HD>
    __device__ __forceinline__ bool step(const orin_kv_view &, int, int64_t, int64_t,
                                         const uint4 (&)[HD / 32], float,
                                         fa2d_mma_state<HD> &) const
    {
        return false;
    }
};

// The warp's share of positions [begin, end) of kv head kvh for query rows
// head0 .. head0 + rows - 1 (zero rows pad them to 8): steps of 16 positions,
// the W warps of the block interleaved. st starts fresh; an empty share leaves
// m = -inf, l = 0, O = 0. Ends with l summed over the lanes that share a row.
// first.step may take the warp's first step from elsewhere (returning true:
// fa2d_early_first_step, from tiles staged before the PDL wait).
template <typename T, int HD, int W, typename First = fa2d_no_first_step>
__device__ __forceinline__ void fa2d_mma_warp_range(const fa2d_params &P, int kvh, int head0,
                                                    int rows, int64_t begin, int64_t end,
                                                    fa2d_mma_state<HD> &st, First first = {})
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
        else if (first.template step<T, HD>(cache, kvh, base, end, qf, P.scale, st))
            base += 16 * W;
        if constexpr (!std::is_same<First, fa2d_no_first_step>::value) {
            // after an early step (the cluster kernel, mostly short pieces):
            // one loop of masked steps, so that a warp whose piece the early
            // step covered jumps once, over one copy of a step, not twice
            // (over the loop and the last masked step: ~4 and ~6 KB). H200,
            // Qwen3-8B at 512: AWQ -0.002 to -0.006 ms, int8 -0.004 to -0.007
            // (bench/notes/fa2-decode.md, seventeenth session).
            for (; base < end; base += 16 * W) // warp-uniform
                fa2d_mma_step<T, HD, true>(cache, kvh, base, end, qf, P.scale, st);
        } else {
            for (; base + 16 <= end; base += 16 * W)
                fa2d_mma_step<T, HD, false>(cache, kvh, base, end, qf, P.scale, st);
            if (base < end) // warp-uniform
                fa2d_mma_step<T, HD, true>(cache, kvh, base, end, qf, P.scale, st);
        }
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
    // columns d and d + 1 of each row as one 8-byte store (d even, and even
    // where fa2d_o_col puts it; rows 2t and 2t + 1 share the swizzle)
#pragma unroll
    for (int i = 0; i < HD / 16; i++) {
        const int d = fa2d_o_col<HD>(2 * t, 8 * (g + 8 * (i / 4)) + 2 * (i % 4));
        *reinterpret_cast<float2 *>(&o[2 * t][d]) = make_float2(st.o[i][0], st.o[i][2]);
        *reinterpret_cast<float2 *>(&o[2 * t + 1][d]) = make_float2(st.o[i][1], st.o[i][3]);
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

// ---- early staging (the cluster kernel) ----
//
// At short contexts each warp takes one 16-position step, and after the PDL
// wait that step waited on its K/V loads (L2, since the prefetch) behind p's
// read. Every row of the cache below p was written by an earlier step (or the
// prefill), complete before this step's first kernel started: steps are
// separate graph launches, or eager steps the host waited on for their token,
// and no programmatic edge crosses either. So a warp can copy its first
// step's K and V tiles into shared memory BEFORE the wait, from p0, the
// position read there; after it only q and row p (the token rope_kv_write has
// just written) remain. p is read again after the wait and the staged rows
// are used only where it equals p0.

// Before the PDL wait: the K and V rows [base, base + 16) below `before` (p0,
// or the piece's end) into the warp's tiles at shared address `tiles` (K,
// then V), the others zero-filled (read nothing); one commit group.
template <typename T, int HD>
__device__ __forceinline__ void fa2d_early_issue(const orin_kv_view &cache, int kvh, int64_t base,
                                                 int64_t before, uint32_t tiles)
{
    fa2d_cp_tile<T, HD, true>(cache, (const T *)cache.k, kvh, base, before, tiles);
    fa2d_cp_tile<T, HD, true>(cache, (const T *)cache.v, kvh, base, before,
                              tiles + fa2d_tile_bytes<HD>());
    orin_cu_cp_async_commit();
}

// After the wait: row p (tile row r) of K and V into the tiles, lanes 0..CPR-1
// K's chunks, CPR..2 CPR-1 V's, with the tiles' swizzle; waits for it.
template <typename T, int HD>
__device__ __forceinline__ void fa2d_early_row(const orin_kv_view &cache, int kvh, int64_t p,
                                               int r, uint32_t tiles)
{
    constexpr int CPR = HD / 8; // 16-byte chunks a row
    const int lane = threadIdx.x & 31, c = lane % CPR;
    if (lane < 2 * CPR) {
        const bool v = lane >= CPR;
        const T *src = (const T *)(v ? cache.v : cache.k) + orin_kv_offset(&cache, p, kvh) + 8 * c;
        orin_cu_cp_async16(tiles + (v ? fa2d_tile_bytes<HD>() : 0) +
                               16 * (r * CPR + (c ^ fa2d_swz(r))),
                           src);
    }
    orin_cu_cp_async_commit();
    orin_cu_cp_async_wait<0>();
    __syncwarp();
}

// fa2d_mma_warp_range's first step from the tiles fa2d_early_issue filled for
// the same piece (p0's), p = p0 the position: row p copied in first, then the
// same fragments and math as fa2d_mma_step, so the same result bit for bit.
// No tiles (the cluster kernel's rerun at a moved p): no first step here.
struct fa2d_early_first_step {
    const unsigned char *tiles;
    int64_t p;

    template <typename T, int HD>
    __device__ __forceinline__ bool step(const orin_kv_view &cache, int kvh, int64_t base,
                                         int64_t end, const uint4 (&qf)[HD / 32],
                                         float scale, fa2d_mma_state<HD> &st) const
    {
        constexpr int KJ = HD / 32;
        if (!tiles) // warp-uniform
            return false;
        const int g = (threadIdx.x & 31) >> 2;
        orin_cu_cp_async_wait<0>(); // the tiles issued before the wait
        __syncwarp();
        if (base <= p && p < base + 16) // warp-uniform
            fa2d_early_row<T, HD>(cache, kvh, p, (int)(p - base), orin_cu_smem_addr(tiles));
        uint4 ka[KJ], kb[KJ], va[HD / 64], vb[HD / 64], vc[HD / 64], vd[HD / 64];
        fa2d_lds_k<HD>(tiles, ka, kb);
        fa2d_lds_v<HD>(tiles + fa2d_tile_bytes<HD>(), va, vb, vc, vd);
        fa2d_mma_tile<T, HD>(ka, kb, va, vb, vc, vd, qf, scale, base + g < end,
                             base + g + 8 < end, st);
        return true;
    }
};

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

#endif
