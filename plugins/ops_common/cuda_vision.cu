/* ops_common on CUDA: the ops of the vision encoders (layernorm, gelu,
 * rope.table, pos_interp), the twins of cpu_vision.c.
 *
 * As in cuda.cu: each op runs the checks of its CPU twin on ORIN_DEVICE_CUDA,
 * then launches on the exec's stream; kernels compute in f32 whatever the dtype
 * and round once on the way out; grids are capped at ORIN_CU_GRID_BLOCKS_PER_SM blocks a
 * multiprocessor (grid-stride loops cover the rest) and are sized from shapes
 * only, so everything here may be captured into a CUDA graph. The CPU computes
 * in double; where plain f32 formulas would lose digits to cancellation (the
 * mean of a row far from zero, GELU's left tail) the kernels use forms that do
 * not, so that f32 stays within 1e-5 of the double reference. */
#include "cuda.h"
#include "cuda_rope.cuh"

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/op_check.h"

#include <limits.h>
#include <type_traits>
#include <math.h>

#define CUDA ORIN_DEVICE_CUDA

/* Threads of the gelu blocks. */
#define GELU_THREADS 256
/* layernorm: rows of up to LAYERNORM_WARP_UNITS units a lane (a unit: a 16-byte
 * vector, or an element) run a warp a row, the row in registers; longer ones a
 * block a row, of up to LAYERNORM_MAX_THREADS threads (fewer for short rows, so
 * that more rows are in flight), rows up to LAYERNORM_STAGED_DIM staged in
 * shared memory as f32 (32 KiB, under the 48 KiB a block gets without opting
 * in), longer ones read x again from global memory. */
#define LAYERNORM_WARP_UNITS 6
#define LAYERNORM_WARP_ROWS 4
#define LAYERNORM_MAX_THREADS 256
#define LAYERNORM_STAGED_DIM 8192
/* rope.table: a token a block (rope_table_kernel), or pairs of pairs over the
 * whole tensor (rope_table_flat_kernel), ROPE_FLAT_THREADS a block. */
#define ROPE_TABLE_THREADS 128
#define ROPE_FLAT_THREADS 256
/* pos_interp: a patch a block. */
#define POS_INTERP_THREADS 128

/* A unit of work: a 16-byte vector (VEC) or one element. */
template <typename T, bool VEC> struct unit_of {
    static constexpr int n = VEC ? orin_cu_vec<T>::n : 1;
};

template <typename T, bool VEC>
__device__ __forceinline__ void load_unit(const T *p, int64_t u, float (&f)[unit_of<T, VEC>::n])
{
    if constexpr (VEC)
        orin_cu_load16(p + u * orin_cu_vec<T>::n, f);
    else
        f[0] = orin_cu_f32(p[u]);
}

template <typename T, bool VEC>
__device__ __forceinline__ void store_unit(T *p, int64_t u, const float (&f)[unit_of<T, VEC>::n])
{
    if constexpr (VEC)
        orin_cu_store16(p + u * orin_cu_vec<T>::n, f);
    else
        p[u] = orin_cu_from_f32<T>(f[0]);
}

/* ---- layernorm ---- */

/* Unit u of the row: from the staging (e * units + u, see below) or from x. */
template <typename T, bool VEC, bool STAGED>
__device__ __forceinline__ void row_unit(const T *xr, const float *staged, int64_t units,
                                         int64_t u, float (&f)[unit_of<T, VEC>::n])
{
    if constexpr (STAGED) {
#pragma unroll
        for (int e = 0; e < unit_of<T, VEC>::n; e++)
            f[e] = staged[e * units + u];
    } else {
        load_unit<T, VEC>(xr, u, f);
    }
}

/* torch's LayerNorm of each row, mean and biased variance in f32 over two
 * passes, then a third that writes. Launch: grid min(rows, 32 * SMs), a row per
 * block per turn; block layernorm_threads (32 to 256); shared memory 32 floats,
 * plus dim floats when STAGED (the row as f32, which passes 2 and 3 read instead
 * of x). Thread t owns units t, t + blockDim.x, ... in every pass, and stages
 * unit u's element e at e * units + u (consecutive threads, consecutive banks),
 * so it reads back only what it wrote: the block sums' barriers are the only
 * ones. out may be x: a row is written only after its last sum. Bound by memory
 * bandwidth (x read once when staged, out written once). */
template <typename T, bool VEC, bool STAGED>
__global__ void layernorm_kernel(const T *x, const T *__restrict__ w, const T *__restrict__ b,
                                 T *out, int64_t rows, int64_t dim, float eps)
{
    extern __shared__ float staged[];
    __shared__ float scratch[32];
    constexpr int N = unit_of<T, VEC>::n;
    const int64_t units = dim / N;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * dim;
        float sum = 0.0f;
        for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
            float f[N];
            load_unit<T, VEC>(xr, u, f);
#pragma unroll
            for (int e = 0; e < N; e++) {
                sum += f[e];
                if constexpr (STAGED)
                    staged[e * units + u] = f[e];
            }
        }
        const float m = orin_cu_block_sum(sum, scratch) / (float)dim;

        /* d = x - m, with its mean md correcting m's rounding: for a row far
         * from zero (mean 100, spread 3) m is off by up to half an ulp of 100,
         * which x - m alone would pass to every output as an error of 1e-6 of
         * the spread, too much for f32; d itself is exact there (x and m
         * within a factor of two of each other). var = mean(d^2) - md^2. */
        float dsum = 0.0f, dsq = 0.0f;
        for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
            float f[N];
            row_unit<T, VEC, STAGED>(xr, staged, units, u, f);
#pragma unroll
            for (int e = 0; e < N; e++) {
                const float d = f[e] - m;
                dsum += d;
                dsq += d * d;
            }
        }
        const float md = orin_cu_block_sum(dsum, scratch) / (float)dim;
        const float msq = orin_cu_block_sum(dsq, scratch) / (float)dim;
        /* >= 0 in exact arithmetic; rounding may take a constant row below */
        const float inv = rsqrtf(fmaxf(msq - md * md, 0.0f) + eps);

        T *outr = out + r * dim;
        for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
            float f[N], g[N], c[N];
            row_unit<T, VEC, STAGED>(xr, staged, units, u, f);
            load_unit<T, VEC>(w, u, g);
            load_unit<T, VEC>(b, u, c);
#pragma unroll
            for (int e = 0; e < N; e++) {
                const float d = f[e] - m;
                f[e] = (d - md) * inv * g[e] + c[e];
            }
            store_unit<T, VEC>(outr, u, f);
        }
    }
}

/* The same LayerNorm (and the same f32 formulas) with a warp a row: lane l
 * holds units l, l + 32, ... (at most LAYERNORM_WARP_UNITS) in registers, and
 * the three sums are warp shuffles, no barrier. Launch: grid min(ceil(rows /
 * 4), 32 * SMs), block 4 warps, a row a warp per turn; no shared memory. The
 * block kernel above spends its time in three block-wide reductions a row
 * (Qwen3-VL's vision rows of 1152: 11 us for 3,072 of them on an H200, 7 MB
 * read and 7 MB written); here a row's loads are all in flight at once and
 * its sums cost shuffles. Bound by memory bandwidth. */
template <typename T, bool VEC>
__global__ void layernorm_warp_kernel(const T *x, const T *__restrict__ w,
                                      const T *__restrict__ b, T *out, int64_t rows,
                                      int64_t dim, float eps)
{
    constexpr int N = unit_of<T, VEC>::n, U = LAYERNORM_WARP_UNITS;
    const int64_t units = dim / N;
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * LAYERNORM_WARP_ROWS;
    for (int64_t r = (int64_t)blockIdx.x * LAYERNORM_WARP_ROWS + threadIdx.x / 32; r < rows;
         r += warps) {
        const T *xr = x + r * dim;
        float f[U][N];
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < U; i++) {
            const int64_t u = lane + 32 * i;
            if (u < units) {
                load_unit<T, VEC>(xr, u, f[i]);
#pragma unroll
                for (int e = 0; e < N; e++)
                    sum += f[i][e];
            }
        }
        const float m = orin_cu_warp_sum(sum) / (float)dim;
        /* d = x - m with its mean md correcting m's rounding: as layernorm_kernel */
        float dsum = 0.0f, dsq = 0.0f;
#pragma unroll
        for (int i = 0; i < U; i++)
            if (lane + 32 * i < units)
#pragma unroll
                for (int e = 0; e < N; e++) {
                    const float d = f[i][e] - m;
                    dsum += d;
                    dsq += d * d;
                }
        const float md = orin_cu_warp_sum(dsum) / (float)dim;
        const float msq = orin_cu_warp_sum(dsq) / (float)dim;
        const float inv = rsqrtf(fmaxf(msq - md * md, 0.0f) + eps);
        T *outr = out + r * dim;
#pragma unroll
        for (int i = 0; i < U; i++) {
            const int64_t u = lane + 32 * i;
            if (u >= units)
                continue;
            float g[N], c[N];
            load_unit<T, VEC>(w, u, g);
            load_unit<T, VEC>(b, u, c);
#pragma unroll
            for (int e = 0; e < N; e++)
                f[i][e] = (f[i][e] - m - md) * inv * g[e] + c[e];
            store_unit<T, VEC>(outr, u, f[i]);
        }
    }
}

/* Threads for rows of `units` units: one a unit, in whole warps, 32 to 256. */
static unsigned layernorm_threads(int64_t units)
{
    int64_t threads = (units + 31) / 32 * 32;
    if (threads > LAYERNORM_MAX_THREADS)
        threads = LAYERNORM_MAX_THREADS;
    return threads < 32 ? 32u : (unsigned)threads;
}

template <typename T, bool VEC>
static void launch_layernorm_as(const orin_exec *ex, const orin_layernorm_args *a, int64_t rows,
                                int64_t dim)
{
    const T *x = (const T *)a->x.data, *w = (const T *)a->weight.data;
    const T *b = (const T *)a->bias.data;
    T *out = (T *)a->out.data;
    const int64_t units = dim / unit_of<T, VEC>::n;
    cudaStream_t stream = orin_cu_stream(ex);
    if (units <= 32 * LAYERNORM_WARP_UNITS) {
        layernorm_warp_kernel<T, VEC><<<orin_cu_grid_for(ex, rows, LAYERNORM_WARP_ROWS),
                                        32 * LAYERNORM_WARP_ROWS, 0, stream>>>(
            x, w, b, out, rows, dim, a->eps);
        return;
    }
    const unsigned grid = orin_cu_grid_for(ex, rows, 1);
    const unsigned threads = layernorm_threads(units);
    if (dim <= LAYERNORM_STAGED_DIM)
        layernorm_kernel<T, VEC, true><<<grid, threads, (size_t)dim * sizeof(float), stream>>>(
            x, w, b, out, rows, dim, a->eps);
    else
        layernorm_kernel<T, VEC, false><<<grid, threads, 0, stream>>>(x, w, b, out, rows, dim,
                                                                       a->eps);
}

/* 16-byte units when a row is a whole number of them and all four pointers are
 * 16-byte aligned (so every row start is). */
template <typename T>
static void launch_layernorm(const orin_exec *ex, const orin_layernorm_args *a, int64_t rows,
                             int64_t dim)
{
    if ((dim * (int64_t)sizeof(T)) % 16 == 0 && orin_cu_aligned16(a->x.data) &&
        orin_cu_aligned16(a->weight.data) && orin_cu_aligned16(a->bias.data) &&
        orin_cu_aligned16(a->out.data))
        launch_layernorm_as<T, true>(ex, a, rows, dim);
    else
        launch_layernorm_as<T, false>(ex, a, rows, dim);
}

extern "C" int cuda_layernorm(const orin_exec *ex, const orin_layernorm_args *a, orin_dtype dt)
{
    const char *label = "layernorm (common)";
    if (orin_check_layernorm(label, ex, a, CUDA, dt))
        return -1;
    int64_t dim = a->x.shape[a->x.ndim - 1], rows = orin_tensor_rows(&a->x);
    ORIN_CU_DISPATCH(dt, label, T, launch_layernorm<T>(ex, a, rows, dim));
    return orin_cu_launched(label, dt, "%lld rows of %lld", (long long)rows, (long long)dim);
}

/* ---- gelu ---- */

/* 0.5 v (1 + erf(v / sqrt(2))) through erfc of |t|, t = v / sqrt(2): 1 + erf(t)
 * is erfc(|t|) left of zero and 2 - erfc(|t|) right of it. As written, 1 + erff(t)
 * cancels left of zero (erff is -1 + 2e-9 at v = -6) and loses the tail's
 * digits; erfc of a positive argument keeps them. One call, no divergence. */
struct gelu_erf_fn {
    __device__ __forceinline__ float operator()(float v) const
    {
        const float c = erfcf(fabsf(v * 0.70710678118654752440f)); /* 1 / sqrt(2) */
        return 0.5f * v * (v >= 0.0f ? 2.0f - c : c);
    }
};

/* 0.5 v (1 + tanh(u)), u = sqrt(2 / pi) (v + 0.044715 v^3), computed as the equal
 * v / (1 + exp(-2u)): 1 + tanh(u) cancels left of zero (2e-3 at v = -3, from a
 * tanhf of -0.998), the sigmoid form does not. expf, not __expf, whose error
 * grows with its argument (2 + 1.2 |x| ulp). */
struct gelu_tanh_fn {
    __device__ __forceinline__ float operator()(float v) const
    {
        const float u = 0.79788456080286535588f * (v + 0.044715f * v * v * v); /* sqrt(2/pi) */
        return v / (1.0f + expf(-2.0f * u));
    }
};

/* out = fn(x) elementwise over `total` elements; out may be x exactly (each
 * element is read and written by one thread). VEC: 16-byte vectors while whole
 * ones last (both pointers aligned), then the tail one element a thread.
 * Launch: grid min(ceil(units / 256), 32 * SMs), units being vectors or
 * elements; block 256; no shared memory. Bound by memory bandwidth for the
 * tanh form (some 25 instructions an element); the erf form's erfcf takes about
 * 60, which at 2-byte dtypes may make it issue-bound instead (an estimate from
 * the PTX: the vision blocks' GELU is tanh, erf is the mergers' one call). */
template <typename T, typename Fn, bool VEC>
__global__ void unary_kernel(const T *x, T *out, int64_t total)
{
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    Fn fn;
    int64_t done = 0;
    if constexpr (VEC) {
        constexpr int N = orin_cu_vec<T>::n;
        const int64_t vecs = total / N;
        for (int64_t v = first; v < vecs; v += stride) {
            float f[N];
            orin_cu_load16(x + v * N, f);
#pragma unroll
            for (int e = 0; e < N; e++)
                f[e] = fn(f[e]);
            orin_cu_store16(out + v * N, f);
        }
        done = vecs * N;
    }
    for (int64_t j = done + first; j < total; j += stride)
        out[j] = orin_cu_from_f32<T>(fn(orin_cu_f32(x[j])));
}

template <typename T, typename Fn>
static void launch_unary(const orin_exec *ex, const void *x, void *out, int64_t total)
{
    cudaStream_t stream = orin_cu_stream(ex);
    if (orin_cu_aligned16(x) && orin_cu_aligned16(out)) {
        int64_t vecs = total / orin_cu_vec<T>::n;
        unary_kernel<T, Fn, true><<<orin_cu_grid_for(ex, vecs, GELU_THREADS), GELU_THREADS, 0, stream>>>(
            (const T *)x, (T *)out, total);
    } else {
        unary_kernel<T, Fn, false><<<orin_cu_grid_for(ex, total, GELU_THREADS), GELU_THREADS, 0,
                                     stream>>>((const T *)x, (T *)out, total);
    }
}

template <typename T>
static void launch_gelu(const orin_exec *ex, const orin_gelu_args *a, int64_t total)
{
    if (a->kind == ORIN_GELU_TANH)
        launch_unary<T, gelu_tanh_fn>(ex, a->x.data, a->out.data, total);
    else
        launch_unary<T, gelu_erf_fn>(ex, a->x.data, a->out.data, total);
}

extern "C" int cuda_gelu(const orin_exec *ex, const orin_gelu_args *a, orin_dtype dt)
{
    const char *label = "gelu (common)";
    if (orin_check_gelu(label, ex, a, CUDA, dt))
        return -1;
    int64_t total = orin_tensor_numel(&a->x);
    ORIN_CU_DISPATCH(dt, label, T, launch_gelu<T>(ex, a, total));
    return orin_cu_launched(label, dt, "%lld elements, %s", (long long)total,
                            a->kind == ORIN_GELU_TANH ? "tanh" : "erf");
}

/* ---- rope.table ---- */

/* In place, rotate-half with the caller's tables: for pair (j, j + half) of
 * every head of token i, c = cos[i, j], s = sin[i, j], then rope_rotate (each
 * product rounded to f32 first, as cpu.c's cpu_rope_token).
 * Launch: grid min(n, 32 * SMs), a token per block per turn; block 128 over
 * the token's heads * half pairs; no shared memory (the token's half cos and
 * half sin floats are read by every head, from L1). Bound by memory bandwidth.
 * Elements, not vectors: Qwen3-VL's vision heads are 72 wide, and a half of 36
 * f16/bf16 elements is no whole number of 16-byte vectors; a warp's 2-byte
 * accesses to consecutive j are coalesced all the same. */
template <typename T>
__global__ void rope_table_kernel(T *x, const float *__restrict__ cos_t,
                                  const float *__restrict__ sin_t, int64_t n, int heads,
                                  int half)
{
    const int hd = 2 * half, pairs = heads * half;
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        T *token = x + i * heads * hd;
        const float *ci = cos_t + i * half, *si = sin_t + i * half;
        for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
            const int h = p / half, j = p - h * half;
            T *row = token + (int64_t)h * hd;
            float y1, y2;
            rope_rotate(orin_cu_f32(row[j]), orin_cu_f32(row[j + half]), ci[j], si[j], &y1,
                        &y2);
            row[j] = orin_cu_from_f32<T>(y1);
            row[j + half] = orin_cu_from_f32<T>(y2);
        }
    }
}

/* Two elements of T in one load (4 bytes for f16/bf16, 8 for f32). */
template <typename T> struct rope_pair2 {
    typedef typename std::conditional<sizeof(T) == 2, uint32_t, uint2>::type word;
};

/* The same rotation with every thread on two adjacent pairs (j, j + 1 and
 * their partners j + half, j + half + 1: 2-element loads of x, float2 of the
 * tables), the work flattened over (token, head, j / 2), so that a thread's
 * loads are its only ones and all are in flight at once. The token-a-block
 * kernel above walks a token's pairs in 4-5 dependent rounds a thread
 * (Qwen3-VL's 16 heads x 36 pairs over 128 threads): 11.5 us for 3,072
 * tokens on an H200, 7 MB read and written. Launch: grid min(ceil(total /
 * 256), 32 * SMs), block 256, no shared memory; total = n * heads * half / 2
 * < 2^31 (32-bit index arithmetic). Needs half even, x aligned to two
 * elements and the tables to 8 bytes. Bound by memory bandwidth. */
template <typename T>
__global__ void rope_table_flat_kernel(T *x, const float *__restrict__ cos_t,
                                       const float *__restrict__ sin_t, uint32_t total,
                                       uint32_t heads, uint32_t quads, int half)
{
    typedef typename rope_pair2<T>::word word;
    for (uint32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += gridDim.x * blockDim.x) {
        const uint32_t row = t / quads, j = 2 * (t - row * quads); /* row: token * heads + head */
        const uint32_t token = row / heads;
        word *p1 = reinterpret_cast<word *>(x + (size_t)row * 2 * half + j);
        word *p2 = reinterpret_cast<word *>(x + (size_t)row * 2 * half + j + half);
        const float2 c = *reinterpret_cast<const float2 *>(cos_t + (size_t)token * half + j);
        const float2 s = *reinterpret_cast<const float2 *>(sin_t + (size_t)token * half + j);
        word w1 = *p1, w2 = *p2;
        T *a = reinterpret_cast<T *>(&w1), *b = reinterpret_cast<T *>(&w2);
        float y1, y2;
        rope_rotate(orin_cu_f32(a[0]), orin_cu_f32(b[0]), c.x, s.x, &y1, &y2);
        a[0] = orin_cu_from_f32<T>(y1);
        b[0] = orin_cu_from_f32<T>(y2);
        rope_rotate(orin_cu_f32(a[1]), orin_cu_f32(b[1]), c.y, s.y, &y1, &y2);
        a[1] = orin_cu_from_f32<T>(y1);
        b[1] = orin_cu_from_f32<T>(y2);
        *p1 = w1;
        *p2 = w2;
    }
}

template <typename T>
static void launch_rope_table(const orin_exec *ex, const orin_rope_table_args *a, int64_t n,
                              int heads, int half)
{
    const int64_t total = n * heads * (half / 2);
    const uintptr_t xa = (uintptr_t)a->x.data;
    if (half % 2 == 0 && total < INT_MAX && xa % (2 * sizeof(T)) == 0 &&
        (uintptr_t)a->cos.data % 8 == 0 && (uintptr_t)a->sin.data % 8 == 0) {
        rope_table_flat_kernel<T><<<orin_cu_grid_for(ex, total, ROPE_FLAT_THREADS),
                                    ROPE_FLAT_THREADS, 0, orin_cu_stream(ex)>>>(
            (T *)a->x.data, (const float *)a->cos.data, (const float *)a->sin.data,
            (uint32_t)total, (uint32_t)heads, (uint32_t)(half / 2), half);
        return;
    }
    rope_table_kernel<T><<<orin_cu_grid_for(ex, n, 1), ROPE_TABLE_THREADS, 0, orin_cu_stream(ex)>>>(
        (T *)a->x.data, (const float *)a->cos.data, (const float *)a->sin.data, n, heads, half);
}

extern "C" int cuda_rope_table(const orin_exec *ex, const orin_rope_table_args *a, orin_dtype dt)
{
    const char *label = "rope.table (common)";
    if (orin_check_rope_table(label, ex, a, CUDA, dt))
        return -1;
    int64_t n = a->x.shape[0], heads = a->x.shape[1], hd = a->x.shape[2];
    /* a token's pairs are counted in int */
    if (heads * hd > INT_MAX)
        return orin_error_set("%s: x: %lld heads of %lld (cuda runs up to %d elements a token)",
                              label, (long long)heads, (long long)hd, INT_MAX);
    ORIN_CU_DISPATCH(dt, label, T, launch_rope_table<T>(ex, a, n, (int)heads, (int)(hd / 2)));
    return orin_cu_launched(label, dt, "x [%lld, %lld, %lld]", (long long)n, (long long)heads,
                            (long long)hd);
}

/* ---- pos_interp ---- */

/* out[f * area + k, :] for every frame f = the bilinear blend of the four table
 * rows around patch k (orin_patch_rc, orin_pos_interp_tap: the CPU's helpers),
 * weights in f32, summed in f32. Launch: grid min(area, 32 * SMs), a patch per
 * block per turn; block 128 over the row's units (16-byte vectors where d
 * allows, else elements); no shared memory. The table (5.3 MB for Qwen3-VL's
 * 48 x 48 x 1152 in f16) stays in L2, so the writes bound it: 7 MB a 1,024 x
 * 768 image, a few microseconds, where the host took ~1.5 ms and the upload of
 * its f32 result ~1 ms. */
template <typename T, bool VEC>
__global__ void pos_interp_kernel(const T *__restrict__ table, T *out, int64_t area,
                                  int64_t frames, int64_t units, int32_t side, int32_t h,
                                  int32_t w, int32_t merge)
{
    constexpr int N = unit_of<T, VEC>::n;
    for (int64_t k = blockIdx.x; k < area; k += gridDim.x) {
        int32_t row, col;
        double fh, fw;
        orin_patch_rc(k, w, merge, &row, &col);
        const int32_t h0 = orin_pos_interp_tap(row, h, side, &fh);
        const int32_t w0 = orin_pos_interp_tap(col, w, side, &fw);
        const int32_t h1 = min(h0 + 1, side - 1), w1 = min(w0 + 1, side - 1);
        const T *tap[4] = {table + ((int64_t)h0 * side + w0) * units * N,
                           table + ((int64_t)h0 * side + w1) * units * N,
                           table + ((int64_t)h1 * side + w0) * units * N,
                           table + ((int64_t)h1 * side + w1) * units * N};
        const float wt[4] = {(float)((1 - fh) * (1 - fw)), (float)((1 - fh) * fw),
                             (float)(fh * (1 - fw)), (float)(fh * fw)};
        for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
            float acc[N] = {}, f[N];
#pragma unroll
            for (int t = 0; t < 4; t++) {
                load_unit<T, VEC>(tap[t], u, f);
#pragma unroll
                for (int e = 0; e < N; e++)
                    acc[e] = fmaf(wt[t], f[e], acc[e]);
            }
            for (int64_t fr = 0; fr < frames; fr++)
                store_unit<T, VEC>(out + (fr * area + k) * units * N, u, acc);
        }
    }
}

template <typename T>
static void launch_pos_interp(const orin_exec *ex, const orin_pos_interp_args *a)
{
    const int64_t d = a->table.shape[1], area = (int64_t)a->h * a->w;
    const int64_t frames = a->out.shape[0] / area;
    const unsigned grid = orin_cu_grid_for(ex, area, 1);
    cudaStream_t stream = orin_cu_stream(ex);
    if (d % orin_cu_vec<T>::n == 0 && orin_cu_aligned16(a->table.data) &&
        orin_cu_aligned16(a->out.data))
        pos_interp_kernel<T, true><<<grid, POS_INTERP_THREADS, 0, stream>>>(
            (const T *)a->table.data, (T *)a->out.data, area, frames, d / orin_cu_vec<T>::n,
            a->side, a->h, a->w, a->merge);
    else
        pos_interp_kernel<T, false><<<grid, POS_INTERP_THREADS, 0, stream>>>(
            (const T *)a->table.data, (T *)a->out.data, area, frames, d, a->side, a->h, a->w,
            a->merge);
}

extern "C" int cuda_pos_interp(const orin_exec *ex, const orin_pos_interp_args *a, orin_dtype dt)
{
    const char *label = "pos_interp (common)";
    if (orin_check_pos_interp(label, ex, a, CUDA, dt))
        return -1;
    ORIN_CU_DISPATCH(dt, label, T, launch_pos_interp<T>(ex, a));
    return orin_cu_launched(label, dt, "table [%lld, %lld], grid %d x %d", (long long)a->table.shape[0],
                            (long long)a->table.shape[1], a->h, a->w);
}
