// attention_fa2's CUDA decode, part 4 of 4, included by cuda_decode.cu only: the
// CUDA-core split kernel (every dtype, any cache alignment).
#ifndef ORIN_ATTENTION_FA2_CUDA_DECODE_SIMT_CUH
#define ORIN_ATTENTION_FA2_CUDA_DECODE_SIMT_CUH

#include "cuda_decode_common.cuh"

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
                sm.merge.o[warp][r][fa2d_o_col<HD>(r, sub * VEC + i)] = acc[r][i];
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

#endif
