// attention_fa2's CUDA decode, part 3 of 4, included by cuda_decode.cu only: the
// cluster kernel (sm_90), whose blocks merge over distributed shared memory.
#ifndef ORIN_ATTENTION_FA2_CUDA_DECODE_CLUSTER_CUH
#define ORIN_ATTENTION_FA2_CUDA_DECODE_CLUSTER_CUH

#include "cuda_decode_mma.cuh"

// ---- the cluster kernel (sm_90: f16, bf16): one launch, no workspace ----

// Per block: its warps' results and each row's weights for them, then the
// block's merged rows, which the other blocks of the cluster read through
// distributed shared memory.
template <int HD, int W> struct fa2d_cluster_smem {
    float o[W][FA2D_MMA_ROWS][HD]; // each warp's O, unnormalised
    float m[W][FA2D_MMA_ROWS];
    float l[W][FA2D_MMA_ROWS];
    float block_o[FA2D_MMA_ROWS][HD]; // the block's O relative to block_m
    float block_m[FA2D_MMA_ROWS];
    float block_l[FA2D_MMA_ROWS];
    float4 weight[FA2D_MMA_ROWS][W / 4]; // row r's exp2(m - block_m) of each warp
};

// A row's weights in the block merge: thread i < R W takes warp w = i % W of
// row r = i / W, given that warp's (m, l) of the row (m = -inf for none):
// returns exp2(m - M), M the row's max over the W warps, and sets *M and *L
// (the row's sum of weight times l).
template <int W>
__device__ __forceinline__ float fa2d_row_weight(float m, float l, float *M, float *L)
{
    static_assert(W <= 32 && (W & (W - 1)) == 0, "a row's warps within a warp's lanes");
    float mx = m;
#pragma unroll
    for (int o = 1; o < W; o <<= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float e = m == -INFINITY ? 0.0f : exp2f(m - mx);
    float sum = e * l;
#pragma unroll
    for (int o = 1; o < W; o <<= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    *M = mx;
    *L = sum;
    return e;
}

// The dynamic shared memory a block takes: the larger of the merge space and
// the early tiles (a K and a V tile a warp, warp w's at 2 w tiles from the
// start), since the tiles are read only during the steps and the
// merge space is written only after them (a block barrier between). At hd 128
// and 8 warps: 64 KB, so that two blocks an SM still fit the 132 KB
// shared-memory configuration the quantized GEMVs run in: a launch needing a
// larger one (101 KB a block, tiles after the merge space) made the SMs
// change configuration around every attention and cost 0.078 ms a step
// (bench/notes/fa2-decode.md, bench/carveout.sh).
template <int HD, int W> __host__ __device__ constexpr size_t fa2d_cluster_smem_bytes()
{
    return (size_t)W * 2 * fa2d_tile_bytes<HD>() > sizeof(fa2d_cluster_smem<HD, W>)
               ? (size_t)W * 2 * fa2d_tile_bytes<HD>()
               : sizeof(fa2d_cluster_smem<HD, W>);
}

// Launch: grid (C, Hkv * row chunks) in clusters of C (8 to 16) blocks along
// x, one cluster a (kv head, row chunk) unit; W x 32 threads (W = 16 warps:
// dynamic shared memory fa2d_cluster_smem_bytes 128 KB at hd 128 (the early
// tiles; the merge space 71.2 KB), one block an SM; W = 8: 64 KB (37.7 KB), up to
// two an SM, so that a cluster of 16 fits in a GPC with fewer than 16 free
// SMs); 128 registers. Block rank r takes piece r of the
// p + 1 positions (fa2d_range with splits = C); its warps run the mma
// kernel's steps (fa2d_mma_step), merge in shared memory, then, after a
// cluster barrier, each block combines a 1/C share of the unit's rows x hd
// outputs from all C blocks' merged rows over distributed shared memory
// (mapa + ld.shared::cluster, ~200 cycles a round trip against ~1 us for the
// split kernel's partials through global memory and a second launch; a warp
// reads C / W of the blocks, then the warps meet), and a second barrier
// keeps every block's shared memory alive until all have read it.
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
    const int warp = threadIdx.x >> 5;
    const int kvh = unit / P.row_chunks, chunk = unit % P.row_chunks;
    FA2D_MARK(0, 0.0f);
    orin_cu_allow_next(); // PDL, as in fa2d_split_mma
    // Each warp's first step is staged before the wait from p0, the position
    // read there (a hint, as the prefetch reads it; testing: P.skew moves it).
    // After the wait the steps run once over p0's piece, the first from the
    // tiles; where the kernel before moved p after all (block-uniform), they
    // run again over p's piece, from global memory. One copy of the steps in
    // a loop of at most two passes, so that the steps and the merge after them
    // are contiguous code: with the rerun as a second copy, the last step
    // jumped ~22 KB to the merge, and that layout cost AWQ 0.011 ms a step and
    // int8 0.005 (H200; bench/notes/fa2-decode.md, seventeenth session).
    constexpr bool KO_INPUTS = FA2D_KNOCKOUT & FA2D_KO_INPUTS;
    const int32_t p0 = KO_INPUTS ? P.max_kv_len - 1
                                 : *(const volatile int32_t *)P.positions - P.skew;
    unsigned char *tiles = fa2d_dynamic_smem + warp * 2 * fa2d_tile_bytes<HD>();
    int64_t begin, end;
    fa2d_range_at(P, p0, rank, &begin, &end);
    if (!(FA2D_KNOCKOUT & FA2D_KO_STEPS) && begin + 16 * warp < end) // warp-uniform
        fa2d_early_issue<T, HD>(P.cache, kvh, begin + 16 * warp, min(end, (int64_t)p0),
                                orin_cu_smem_addr(tiles));
    if constexpr (!(FA2D_KNOCKOUT & FA2D_KO_WAIT))
        orin_cu_wait_prior();
    FA2D_MARK(1, 0.0f);

    const int head0 = kvh * P.group + chunk * R;
    const int rows = min(R, P.group - chunk * R);

    fa2d_mma_state<HD> st;
    const int32_t p = KO_INPUTS ? p0 : P.positions[0]; // out beside q's loads
    for (const unsigned char *first = tiles;; first = nullptr) {
        fa2d_mma_warp_range<T, HD, W>(P, kvh, head0, rows, begin, end, st,
                                      fa2d_early_first_step{first, p0});
        if (p == p0 || !first) // block-uniform
            break;
        fa2d_range_at(P, p, rank, &begin, &end);
    }
    const bool valid = fa2d_valid_at(P, p);
    FA2D_MARK(2, end);
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
    __syncthreads(); // every warp's tiles read before the states overwrite them
    fa2d_mma_store_warp<HD>(st, sm.o[warp], sm.m[warp], sm.l[warp]);
    __syncthreads();
    FA2D_MARK(4, 0.0f);

    // The block's rows from its warps (a warp without positions weighs 0):
    // each row's W weights once (R W threads, whole warps), then each output
    // is their dot product with the warps' values, its weights two or four
    // float4 broadcasts. Computing the max and weights again for each of a
    // row's outputs (16 broadcast loads and 8 exp2 an output) cost 0.015 ms a
    // step (H200, Qwen3-8B AWQ at 512; bench/notes/fa2-decode.md, fifteenth).
    static_assert(R * W % 32 == 0 && W % 4 == 0, "whole warps, float4 weights");
    if (threadIdx.x < R * W) {
        const int r = threadIdx.x / W, w = threadIdx.x % W;
        float M, L;
        const float e = fa2d_row_weight<W>(sm.m[w][r], sm.l[w][r], &M, &L);
        reinterpret_cast<float *>(sm.weight[r])[w] = e;
        if (w == 0) {
            sm.block_m[r] = M;
            sm.block_l[r] = L;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < rows * HD; i += THREADS) {
        const int r = i / HD, c = fa2d_o_col<HD>(r, i % HD);
        float O = 0.0f;
#pragma unroll
        for (int q = 0; q < W / 4; q++) {
            const float4 e = sm.weight[r][q];
            O += e.x * sm.o[4 * q][r][c];
            O += e.y * sm.o[4 * q + 1][r][c];
            O += e.z * sm.o[4 * q + 2][r][c];
            O += e.w * sm.o[4 * q + 3][r][c];
        }
        sm.block_o[r][i % HD] = O;
    }
    FA2D_MARK(5, sm.block_l[0]);
    cluster.sync(); // release this block's rows, acquire the others'
    FA2D_MARK(6, 0.0f);

    // This block's share of the unit's outputs, merged over the cluster. An
    // invalid p left every piece empty: every weight is 0 and the row NaN.
    const int items = rows * HD, share = (items + C - 1) / C;
    // Warp w reads source blocks w, w + W, ... for 32 of the share's outputs
    // (a lane an output), so that each remote load is one block's 32
    // neighbouring values (lanes spread over the blocks made each load 8
    // transactions and the step 0.07 ms slower; one thread an output over all
    // C blocks, 3 C loads in a row, 0.002-0.005 ms slower: bench/notes/
    // fa2-decode.md, fourteenth session). The warps' partial (M, L, O) meet in
    // this block's warp area, free since the block merge; warp 0 merges them.
    constexpr int SRC = (C + W - 1) / W;
    static_assert(3 * 32 <= R * HD, "the warps' partials fit their warp's O rows");
    float *part = &sm.o[0][0][0]; // [3][W][32]
    const int lane = threadIdx.x & 31;
    for (int base = 0; base < share; base += 32) { // block-uniform
        const int i = base + lane, item = rank * share + i;
        const bool active = i < share && item < items;
        const int r = active ? item / HD : 0, d = active ? item % HD : 0;
        float mj[SRC], lj[SRC], oj[SRC];
#pragma unroll
        for (int s = 0; s < SRC; s++) {
            const int j = warp + W * s;
            mj[s] = -INFINITY;
            lj[s] = oj[s] = 0.0f;
            if (active && j < C) {
                const fa2d_cluster_smem<HD, W> *other = cluster.map_shared_rank(&sm, (unsigned)j);
                mj[s] = other->block_m[r];
                lj[s] = other->block_l[r];
                oj[s] = other->block_o[r][d];
            }
        }
        float M = mj[0];
#pragma unroll
        for (int s = 1; s < SRC; s++)
            M = fmaxf(M, mj[s]);
        float L = 0.0f, O = 0.0f;
#pragma unroll
        for (int s = 0; s < SRC; s++) {
            const float e = mj[s] == -INFINITY ? 0.0f : exp2f(mj[s] - M);
            L += e * lj[s];
            O += e * oj[s];
        }
        part[(0 * W + warp) * 32 + lane] = M;
        part[(1 * W + warp) * 32 + lane] = L;
        part[(2 * W + warp) * 32 + lane] = O;
        __syncthreads();
        if (warp == 0 && active) {
            float Mb = -INFINITY;
#pragma unroll
            for (int w = 0; w < W; w++)
                Mb = fmaxf(Mb, part[w * 32 + lane]);
            float Lb = 0.0f, Ob = 0.0f;
#pragma unroll
            for (int w = 0; w < W; w++) {
                const float mw = part[w * 32 + lane], e = mw == -INFINITY ? 0.0f : exp2f(mw - Mb);
                Lb += e * part[(W + w) * 32 + lane];
                Ob += e * part[(2 * W + w) * 32 + lane];
            }
            ((T *)P.out)[(int64_t)(head0 + r) * HD + d] =
                orin_cu_from_f32<T>(valid ? Ob / Lb : fa2d_nan());
        }
        __syncthreads(); // part is written again by the next pass
    }
    FA2D_MARK(7, 0.0f);
    // No block exits while another may still read its rows. Nothing is read
    // after this barrier, so its arrive needs no release (which would first wait
    // for the output stores above to be acknowledged; the remote loads it guards
    // are complete, their values stored): H200, the Qwen3-8B steps at 512 0.01
    // ms shorter (bench/notes/fa2-decode.md, fourteenth session).
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
    asm volatile("barrier.cluster.wait;" ::: "memory");
    FA2D_MARK(8, 0.0f);
#endif
}

#endif
