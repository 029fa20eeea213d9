/* ops_common on CUDA: embedding, rmsnorm, rope, swiglu, add, argmax and kv_write
 * (the matmul is cuBLASLt's, in cuda_matmul.cu).
 *
 * Each op runs the same checks as its CPU twin (cpu.c), on ORIN_DEVICE_CUDA,
 * then launches on the exec's stream. Every kernel computes in f32 whatever the
 * dtype and rounds once on the way out, as the CPU does. Kernels loop over their
 * work (grid-stride), so grids are capped at ORIN_CU_GRID_BLOCKS_PER_SM blocks a
 * multiprocessor, and depend on shapes and the device only, never on values in
 * device memory: everything here may be captured into a CUDA graph. */
#include "cuda.h"
#include "cuda_rope.cuh"

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/op_check.h"

#include <limits.h>
#include <math.h>

#define CUDA ORIN_DEVICE_CUDA

/* Threads of the elementwise, embedding and kv_write blocks. */
#define COPY_THREADS 256
/* rmsnorm: rows up to this long take a warp each, longer ones a block of
 * RMSNORM_BLOCK_THREADS. */
#define RMSNORM_WARP_DIM 256
#define RMSNORM_BLOCK_THREADS 256
#define RMSNORM_WARPS_PER_BLOCK 8
/* rope: the inverse frequencies of the first ROPE_TABLE pairs travel in the
 * launch parameters (1 KiB, cuda_rope.cuh), computed on the host exactly as
 * cpu.c does; the token's cos and sin sit in shared memory, so head_dim is
 * bounded. */
#define ROPE_MAX_HEAD_DIM 8192
#define ROPE_THREADS 128
#define ARGMAX_THREADS 1024

/* 16-byte accesses work for a run of rows when every pointer is 16-byte aligned
 * and a row is a whole number of 16-byte vectors (so every row start is). */
static bool rows_vectorisable(int64_t row_elems, size_t elem_size, const void *p0,
                              const void *p1, const void *p2)
{
    return (row_elems * (int64_t)elem_size) % 16 == 0 && orin_cu_aligned16(p0) &&
           orin_cu_aligned16(p1) && orin_cu_aligned16(p2);
}

template <typename T> __device__ __forceinline__ T nan_of()
{
    return orin_cu_from_f32<T>(__int_as_float(0x7fc00000));
}

/* ---- embedding ---- */

/* out[i, :] = table[ids[i], :]. An id outside 0..vocab-1 (device memory: the
 * host cannot check it) gives a NaN row, never a read outside the table.
 * Launch: grid min(n, 32 * SMs), a row per block per turn; block 256; no shared
 * memory. VEC: 16-byte copies (every row start aligned), else one element a
 * thread. Bound by memory bandwidth (a row copy). */
template <typename T, bool VEC>
__global__ void embedding_kernel(const T *__restrict__ table, const int32_t *__restrict__ ids,
                                 T *__restrict__ out, int64_t n, int64_t vocab, int64_t d)
{
    constexpr int N = VEC ? orin_cu_vec<T>::n : 1;
    const int64_t units = d / N;
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const int32_t id = ids[i];
        const bool in_vocab = id >= 0 && id < vocab;
        const T *src = table + (in_vocab ? (int64_t)id : 0) * d;
        T *dst = out + i * d;
        for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
            if constexpr (VEC) {
                uint4 raw;
                if (in_vocab) {
                    raw = reinterpret_cast<const uint4 *>(src)[u];
                } else {
                    T *e = reinterpret_cast<T *>(&raw);
#pragma unroll
                    for (int k = 0; k < N; k++)
                        e[k] = nan_of<T>();
                }
                reinterpret_cast<uint4 *>(dst)[u] = raw;
            } else {
                dst[u] = in_vocab ? src[u] : nan_of<T>();
            }
        }
    }
}

template <typename T>
static void launch_embedding(const orin_exec *ex, const orin_embedding_args *a, int64_t n,
                             int64_t vocab, int64_t d)
{
    const T *table = (const T *)a->table.data;
    T *out = (T *)a->out.data;
    unsigned grid = orin_cu_grid_for(ex, n, 1);
    cudaStream_t stream = orin_cu_stream(ex);
    if (rows_vectorisable(d, sizeof(T), table, out, out))
        embedding_kernel<T, true><<<grid, COPY_THREADS, 0, stream>>>(
            table, (const int32_t *)a->ids.data, out, n, vocab, d);
    else
        embedding_kernel<T, false><<<grid, COPY_THREADS, 0, stream>>>(
            table, (const int32_t *)a->ids.data, out, n, vocab, d);
}

extern "C" int cuda_embedding(const orin_exec *ex, const orin_embedding_args *a, orin_dtype dt)
{
    const char *label = "embedding (common)";
    if (orin_check_embedding(label, ex, a, CUDA, dt))
        return -1;
    int64_t n = a->ids.shape[0], vocab = a->table.shape[0], d = a->table.shape[1];
    ORIN_CU_DISPATCH(dt, label, T, launch_embedding<T>(ex, a, n, vocab, d));
    return orin_cu_launched(label, dt, "ids [%lld], table [%lld, %lld]", (long long)n,
                            (long long)vocab, (long long)d);
}

/* ---- rmsnorm ---- */

/* The formula of cpu.c's rmsnorm_row: inv = 1 / sqrtf(mean_sq + eps), then
 * out = w * (x * inv), each step an IEEE f32 operation (no fast math). The sum
 * of squares is f32 here (double on the CPU); its order differs too. */
__device__ __forceinline__ float inv_rms(float sum_sq, int64_t dim, float eps)
{
    float mean_sq = sum_sq / (float)dim;
    return 1.0f / sqrtf(mean_sq + eps);
}

/* Sum of squares of the row elements (or 16-byte vectors, VEC) lane, lane +
 * lanes, ... */
template <typename T, bool VEC>
__device__ __forceinline__ float sum_squares(const T *x, int64_t dim, int lane, int lanes)
{
    float sum = 0.0f;
    if constexpr (VEC) {
        constexpr int N = orin_cu_vec<T>::n;
        for (int64_t v = lane; v < dim / N; v += lanes) {
            float f[N];
            orin_cu_load16(x + v * N, f);
#pragma unroll
            for (int e = 0; e < N; e++)
                sum += f[e] * f[e];
        }
    } else {
        for (int64_t j = lane; j < dim; j += lanes) {
            float f = orin_cu_f32(x[j]);
            sum += f * f;
        }
    }
    return sum;
}

/* out = w * (x * inv) over the same elements as sum_squares; out may be x
 * (each element is read and written by the same thread). */
template <typename T, bool VEC>
__device__ __forceinline__ void scale_row(const T *x, const T *__restrict__ w, T *out,
                                          int64_t dim, float inv, int lane, int lanes)
{
    if constexpr (VEC) {
        constexpr int N = orin_cu_vec<T>::n;
        for (int64_t v = lane; v < dim / N; v += lanes) {
            float f[N], g[N];
            orin_cu_load16(x + v * N, f);
            orin_cu_load16(w + v * N, g);
#pragma unroll
            for (int e = 0; e < N; e++)
                f[e] = g[e] * (f[e] * inv);
            orin_cu_store16(out + v * N, f);
        }
    } else {
        for (int64_t j = lane; j < dim; j += lanes)
            out[j] = orin_cu_from_f32<T>(orin_cu_f32(w[j]) * (orin_cu_f32(x[j]) * inv));
    }
}

/* A warp a row, for short rows (dim <= RMSNORM_WARP_DIM: Qwen3's q/k norms over
 * rows = n * heads of head_dim). Launch: grid min(ceil(rows / 8), 32 * SMs),
 * block 256 = 8 warps, 8 rows a block per turn; no shared memory (shuffles).
 * Bandwidth-bound; the second pass over the row hits L1. */
template <typename T, bool VEC>
__global__ void rmsnorm_warp_kernel(const T *x, const T *__restrict__ w, T *out, int64_t rows,
                                    int64_t dim, float eps)
{
    const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    /* r depends on the warp only: the shuffles see all 32 lanes */
    for (int64_t r = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); r < rows;
         r += (int64_t)gridDim.x * warps) {
        float sum = orin_cu_warp_sum(sum_squares<T, VEC>(x + r * dim, dim, lane, 32));
        scale_row<T, VEC>(x + r * dim, w, out + r * dim, dim, inv_rms(sum, dim, eps), lane, 32);
    }
}

/* A block a row (dim > RMSNORM_WARP_DIM: the hidden-state norms). Launch: grid
 * min(rows, 32 * SMs), block 256; shared memory 32 floats (the block sum, which
 * ends in a barrier, so the next row may reuse it). Bandwidth-bound. */
template <typename T, bool VEC>
__global__ void rmsnorm_block_kernel(const T *x, const T *__restrict__ w, T *out, int64_t rows,
                                     int64_t dim, float eps)
{
    __shared__ float scratch[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float sum = orin_cu_block_sum(
            sum_squares<T, VEC>(x + r * dim, dim, threadIdx.x, blockDim.x), scratch);
        scale_row<T, VEC>(x + r * dim, w, out + r * dim, dim, inv_rms(sum, dim, eps),
                          threadIdx.x, blockDim.x);
    }
}

template <typename T, bool VEC>
static void launch_rmsnorm_as(const orin_exec *ex, const T *x, const T *w, T *out,
                              int64_t rows, int64_t dim, float eps)
{
    cudaStream_t stream = orin_cu_stream(ex);
    if (dim <= RMSNORM_WARP_DIM) {
        unsigned grid = orin_cu_grid_for(ex, rows, RMSNORM_WARPS_PER_BLOCK);
        rmsnorm_warp_kernel<T, VEC><<<grid, 32 * RMSNORM_WARPS_PER_BLOCK, 0, stream>>>(
            x, w, out, rows, dim, eps);
    } else {
        unsigned grid = orin_cu_grid_for(ex, rows, 1);
        rmsnorm_block_kernel<T, VEC><<<grid, RMSNORM_BLOCK_THREADS, 0, stream>>>(x, w, out, rows,
                                                                                 dim, eps);
    }
}

template <typename T>
static void launch_rmsnorm(const orin_exec *ex, const orin_rmsnorm_args *a, int64_t rows,
                           int64_t dim)
{
    const T *x = (const T *)a->x.data, *w = (const T *)a->weight.data;
    T *out = (T *)a->out.data;
    if (rows_vectorisable(dim, sizeof(T), x, w, out))
        launch_rmsnorm_as<T, true>(ex, x, w, out, rows, dim, a->eps);
    else
        launch_rmsnorm_as<T, false>(ex, x, w, out, rows, dim, a->eps);
}

extern "C" int cuda_rmsnorm(const orin_exec *ex, const orin_rmsnorm_args *a, orin_dtype dt)
{
    const char *label = "rmsnorm (common)";
    if (orin_check_rmsnorm(label, ex, a, CUDA, dt))
        return -1;
    int64_t dim = a->x.shape[a->x.ndim - 1], rows = orin_tensor_rows(&a->x);
    ORIN_CU_DISPATCH(dt, label, T, launch_rmsnorm<T>(ex, a, rows, dim));
    return orin_cu_launched(label, dt, "%lld rows of %lld", (long long)rows, (long long)dim);
}

/* ---- rope ---- */

/* In place, Hugging Face's rotate-half: for pair (j, j + half) of every head of
 * token i, angle = (float)positions[i] * inv_freq[j] (an f32 product), cos and
 * sin of it in double rounded to f32, then x1' = x1 c - x2 s, x2' = x2 c + x1 s
 * with each product rounded to f32 first (__fmul_rn: never fused into an FMA),
 * exactly cpu.c's rope_row. A negative position (device memory: the host cannot
 * check it) gives the token a NaN row.
 * Launch: grid min(n, 32 * SMs), a token per block per turn; block 128; dynamic
 * shared memory 2 * half floats (the token's cos and sin, computed once and
 * shared by its heads). Latency-bound at decode (one block), bandwidth-bound in
 * prefill. */
template <typename T>
__global__ void rope_kernel(T *x, const int32_t *__restrict__ positions, int64_t n, int heads,
                            int half, float theta, rope_table table)
{
    extern __shared__ float trig[];
    float *cos_t = trig, *sin_t = trig + half;
    const int hd = 2 * half;
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const int32_t pos = positions[i];
        for (int j = threadIdx.x; j < half; j += blockDim.x)
            rope_cos_sin(pos, j, hd, theta, table, &cos_t[j], &sin_t[j]);
        __syncthreads();
        T *token = x + i * heads * hd;
        for (int p = threadIdx.x; p < heads * half; p += blockDim.x) {
            int h = p / half, j = p - h * half;
            T *row = token + (int64_t)h * hd;
            float x1 = orin_cu_f32(row[j]), x2 = orin_cu_f32(row[j + half]);
            float y1, y2;
            rope_rotate(x1, x2, cos_t[j], sin_t[j], &y1, &y2);
            row[j] = orin_cu_from_f32<T>(y1);
            row[j + half] = orin_cu_from_f32<T>(y2);
        }
        __syncthreads(); /* the next token rewrites the table */
    }
}

template <typename T>
static void launch_rope(const orin_exec *ex, const orin_rope_args *a, int64_t n, int heads,
                        int half, const rope_table *table)
{
    size_t shared = 2 * (size_t)half * sizeof(float);
    rope_kernel<T><<<orin_cu_grid_for(ex, n, 1), ROPE_THREADS, shared, orin_cu_stream(ex)>>>(
        (T *)a->x.data, (const int32_t *)a->positions.data, n, heads, half, a->theta, *table);
}

extern "C" int cuda_rope(const orin_exec *ex, const orin_rope_args *a, orin_dtype dt)
{
    const char *label = "rope (common)";
    if (orin_check_rope(label, ex, a, CUDA, dt))
        return -1;
    int64_t n = a->x.shape[0], heads = a->x.shape[1], hd = a->x.shape[2];
    if (hd > ROPE_MAX_HEAD_DIM || heads * hd > INT_MAX)
        return orin_error_set("%s: x: %lld heads of %lld (cuda runs head_dim up to %d)", label,
                              (long long)heads, (long long)hd, ROPE_MAX_HEAD_DIM);

    rope_table table;
    if (!rope_table_fill(&table, (int)(hd / 2), (int)hd, a->theta, &a->scaling))
        return orin_error_set("%s: x: head_dim %lld with a scaled rope (cuda scales head_dim "
                              "up to %d)", label, (long long)hd, 2 * ROPE_TABLE);
    ORIN_CU_DISPATCH(dt, label, T, launch_rope<T>(ex, a, n, (int)heads, (int)(hd / 2), &table));
    return orin_cu_launched(label, dt, "x [%lld, %lld, %lld]", (long long)n, (long long)heads,
                            (long long)hd);
}

/* ---- elementwise: swiglu, add ---- */

/* silu(g) * u as cpu.c's swiglu_chunk: expf (not __expf) and an IEEE divide. */
struct swiglu_fn {
    __device__ __forceinline__ float operator()(float g, float u) const
    {
        return g / (1.0f + expf(-g)) * u;
    }
};

struct add_fn {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

/* out = fn(a, b) elementwise over `total` elements; out may be a or b exactly
 * (each element is read and written by one thread). VEC: 16-byte vectors while
 * whole ones last (all three pointers aligned), then the tail one element a
 * thread. Launch: grid min(ceil(units / 256), 32 * SMs), units being vectors or
 * elements; block 256; no shared memory. Bandwidth-bound. */
template <typename T, typename Fn, bool VEC>
__global__ void binary_kernel(const T *a, const T *b, T *out, int64_t total)
{
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    Fn fn;
    int64_t done = 0;
    if constexpr (VEC) {
        constexpr int N = orin_cu_vec<T>::n;
        const int64_t vecs = total / N;
        for (int64_t v = first; v < vecs; v += stride) {
            float fa[N], fb[N];
            orin_cu_load16(a + v * N, fa);
            orin_cu_load16(b + v * N, fb);
#pragma unroll
            for (int e = 0; e < N; e++)
                fa[e] = fn(fa[e], fb[e]);
            orin_cu_store16(out + v * N, fa);
        }
        done = vecs * N;
    }
    for (int64_t j = done + first; j < total; j += stride)
        out[j] = orin_cu_from_f32<T>(fn(orin_cu_f32(a[j]), orin_cu_f32(b[j])));
}

template <typename T, typename Fn>
static void launch_binary(const orin_exec *ex, const void *a, const void *b, void *out,
                          int64_t total)
{
    cudaStream_t stream = orin_cu_stream(ex);
    if (orin_cu_aligned16(a) && orin_cu_aligned16(b) && orin_cu_aligned16(out)) {
        int64_t vecs = total / orin_cu_vec<T>::n;
        binary_kernel<T, Fn, true><<<orin_cu_grid_for(ex, vecs, COPY_THREADS), COPY_THREADS, 0, stream>>>(
            (const T *)a, (const T *)b, (T *)out, total);
    } else {
        binary_kernel<T, Fn, false><<<orin_cu_grid_for(ex, total, COPY_THREADS), COPY_THREADS, 0,
                                      stream>>>((const T *)a, (const T *)b, (T *)out, total);
    }
}

template <typename Fn>
static int elementwise(const orin_exec *ex, const char *label, const char *a_name,
                       const orin_tensor *a, const char *b_name, const orin_tensor *b,
                       const orin_tensor *out, orin_dtype dt)
{
    if (orin_check_binary(label, ex, a_name, a, b_name, b, out, CUDA, dt))
        return -1;
    int64_t total = orin_tensor_numel(a);
    ORIN_CU_DISPATCH(dt, label, T, launch_binary<T, Fn>(ex, a->data, b->data, out->data, total));
    return orin_cu_launched(label, dt, "%lld elements", (long long)total);
}

extern "C" int cuda_swiglu(const orin_exec *ex, const orin_swiglu_args *a, orin_dtype dt)
{
    return elementwise<swiglu_fn>(ex, "swiglu (common)", "gate", &a->gate, "up", &a->up, &a->out,
                                  dt);
}

extern "C" int cuda_add(const orin_exec *ex, const orin_add_args *a, orin_dtype dt)
{
    return elementwise<add_fn>(ex, "add (common)", "a", &a->a, "b", &a->b, &a->out, dt);
}

/* out[r, j] = swiglu(wide[r, j], wide[r, f + j]): the SwiGLU of a stacked
 * gate/up product [n, 2f] into out [n, f], as swiglu computes it. Launch: grid
 * min(ceil(units / 256), 32 * SMs), block 256, a unit (a 16-byte vector of N
 * elements where f is a multiple of N and the pointers aligned, else an
 * element) a thread per turn; no shared memory. Bandwidth-bound. */
template <typename T, int N>
__global__ void swiglu_rows_kernel(const T *__restrict__ wide, T *__restrict__ out, int64_t n,
                                   int64_t f)
{
    const int64_t row_units = f / N, units = n * row_units;
    swiglu_fn fn;
    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < units;
         u += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = u / row_units, j = (u - r * row_units) * N;
        const T *g = wide + r * 2 * f + j;
        if constexpr (N > 1) {
            float fg[N], fu[N];
            orin_cu_load16(g, fg);
            orin_cu_load16(g + f, fu);
#pragma unroll
            for (int e = 0; e < N; e++)
                fg[e] = fn(fg[e], fu[e]);
            orin_cu_store16(out + r * f + j, fg);
        } else {
            out[r * f + j] = orin_cu_from_f32<T>(fn(orin_cu_f32(g[0]), orin_cu_f32(g[f])));
        }
    }
}

template <typename T>
static void launch_swiglu_rows(const orin_exec *ex, const void *wide, void *out, int64_t n,
                               int64_t f)
{
    constexpr int N = orin_cu_vec<T>::n;
    cudaStream_t stream = orin_cu_stream(ex);
    if (f % N == 0 && orin_cu_aligned16(wide) && orin_cu_aligned16(out))
        swiglu_rows_kernel<T, N><<<orin_cu_grid_for(ex, n * (f / N), COPY_THREADS), COPY_THREADS,
                                   0, stream>>>((const T *)wide, (T *)out, n, f);
    else
        swiglu_rows_kernel<T, 1><<<orin_cu_grid_for(ex, n * f, COPY_THREADS), COPY_THREADS, 0,
                                   stream>>>((const T *)wide, (T *)out, n, f);
}

extern "C" int cuda_swiglu_rows(const orin_exec *ex, const void *wide, void *out, int64_t n,
                                int64_t f, orin_dtype dt)
{
    const char *label = "matmul.swiglu (common)";
    ORIN_CU_DISPATCH(dt, label, T, launch_swiglu_rows<T>(ex, wide, out, n, f));
    return orin_cu_launched(label, dt, "swiglu of [%lld, 2 x %lld]", (long long)n, (long long)f);
}

/* ---- argmax ---- */

/* Whether (v, j) beats the best so far (bv, bj), under cpu.c's argmax_row: a
 * NaN beats every number, and the lowest index wins among NaNs and among equal
 * values. The order is total on distinct indices, so the scan and reduction
 * order do not matter. (-inf, INT32_MAX) stands for "nothing yet": any element
 * beats it, a -inf by its lower index. */
__device__ __forceinline__ bool argmax_beats(float v, int32_t j, float bv, int32_t bj)
{
    if (isnan(bv))
        return isnan(v) && j < bj;
    if (isnan(v))
        return true;
    return v > bv || (v == bv && j < bj);
}

__device__ __forceinline__ void argmax_take(float v, int32_t j, float &bv, int32_t &bj)
{
    if (argmax_beats(v, j, bv, bj)) {
        bv = v;
        bj = j;
    }
}

__device__ __forceinline__ void argmax_warp(float &bv, int32_t &bj)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        int32_t oj = __shfl_xor_sync(0xffffffffu, bj, off);
        argmax_take(ov, oj, bv, bj);
    }
}

/* out[r] = the argmax of row r. A row need not start 16-byte aligned (len can
 * be odd), so each thread scans the elements before the row's first 16-byte
 * boundary, then whole 16-byte vectors, then the tail, keeping its best; warps
 * and then the block reduce under argmax_beats.
 * Launch: grid min(rows, 32 * SMs), a row per block per turn; block 1024;
 * shared memory 32 floats + 32 ints. Bandwidth-bound (one block streams the
 * row: the logits of a decode step are one row). */
template <typename T>
__global__ void __launch_bounds__(ARGMAX_THREADS)
    argmax_kernel(const T *__restrict__ x, int32_t *__restrict__ out, int64_t rows, int64_t len)
{
    __shared__ float warp_v[32];
    __shared__ int32_t warp_j[32];
    constexpr int N = orin_cu_vec<T>::n;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *row = x + r * len;
        int64_t head = (int64_t)(((16 - ((uintptr_t)row & 15)) & 15) / sizeof(T));
        if (head > len)
            head = len;
        const int64_t vecs = (len - head) / N, tail = head + vecs * N;
        float bv = -INFINITY;
        int32_t bj = INT32_MAX;
        for (int64_t j = threadIdx.x; j < head; j += blockDim.x)
            argmax_take(orin_cu_f32(row[j]), (int32_t)j, bv, bj);
        for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
            float f[N];
            orin_cu_load16(row + head + v * N, f);
#pragma unroll
            for (int e = 0; e < N; e++)
                argmax_take(f[e], (int32_t)(head + v * N + e), bv, bj);
        }
        for (int64_t j = tail + threadIdx.x; j < len; j += blockDim.x)
            argmax_take(orin_cu_f32(row[j]), (int32_t)j, bv, bj);

        argmax_warp(bv, bj);
        if (lane == 0) {
            warp_v[warp] = bv;
            warp_j[warp] = bj;
        }
        __syncthreads();
        if (warp == 0) {
            bv = lane < warps ? warp_v[lane] : -INFINITY;
            bj = lane < warps ? warp_j[lane] : INT32_MAX;
            argmax_warp(bv, bj);
            if (lane == 0)
                out[r] = bj;
        }
        __syncthreads(); /* warp_v and warp_j are rewritten for the next row */
    }
}

template <typename T>
static void launch_argmax(const orin_exec *ex, const orin_argmax_args *a, int64_t rows,
                          int64_t len)
{
    argmax_kernel<T><<<orin_cu_grid_for(ex, rows, 1), ARGMAX_THREADS, 0, orin_cu_stream(ex)>>>(
        (const T *)a->x.data, (int32_t *)a->out.data, rows, len);
}

extern "C" int cuda_argmax(const orin_exec *ex, const orin_argmax_args *a, orin_dtype dt)
{
    const char *label = "argmax (common)";
    if (orin_check_argmax(label, ex, a, CUDA, dt))
        return -1;
    int64_t rows = a->x.shape[0], len = a->x.shape[1];
    ORIN_CU_DISPATCH(dt, label, T, launch_argmax<T>(ex, a, rows, len));
    return orin_cu_launched(label, dt, "x [%lld, %lld]", (long long)rows, (long long)len);
}

/* ---- kv_write ---- */

/* cache[positions[i]] = k[i], v[i], head by head, through orin_kv_offset. A
 * position outside 0..capacity-1 (device memory: the host cannot check it) is
 * skipped: that token writes nothing. Work items are (token, head, piece of the
 * row): 16-byte vectors (VEC: every source and cache row start aligned) or
 * elements. Launch: grid min(ceil(items / 256), 32 * SMs), block 256; no shared
 * memory. Bandwidth-bound (a decode step writes 2 * Hkv * hd elements a layer:
 * latency, really). */
template <typename T, bool VEC>
__global__ void kv_write_kernel(const T *k, const T *v, const int32_t *__restrict__ positions,
                                orin_kv_view cache, int64_t n, int heads, int hd)
{
    constexpr int N = VEC ? orin_cu_vec<T>::n : 1;
    const int per_row = hd / N;
    const int64_t items = n * heads * per_row;
    T *cache_k = (T *)cache.k, *cache_v = (T *)cache.v;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < items;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = t / per_row; /* token * heads + head */
        const int e = (int)(t - row * per_row) * N;
        const int64_t i = row / heads;
        const int h = (int)(row - i * heads);
        const int32_t pos = positions[i];
        if (pos < 0 || pos >= cache.capacity)
            continue;
        const int64_t dst = orin_kv_offset(&cache, pos, h) + e, src = row * hd + e;
        if constexpr (VEC) {
            *reinterpret_cast<uint4 *>(cache_k + dst) = *reinterpret_cast<const uint4 *>(k + src);
            *reinterpret_cast<uint4 *>(cache_v + dst) = *reinterpret_cast<const uint4 *>(v + src);
        } else {
            cache_k[dst] = k[src];
            cache_v[dst] = v[src];
        }
    }
}

template <typename T>
static void launch_kv_write(const orin_exec *ex, const orin_kv_write_args *a, int64_t n,
                            int heads, int hd)
{
    const orin_kv_view *c = &a->cache;
    const T *k = (const T *)a->k.data, *v = (const T *)a->v.data;
    const int32_t *pos = (const int32_t *)a->positions.data;
    const int64_t strides_bytes[2] = {c->pos_stride * (int64_t)sizeof(T),
                                      c->head_stride * (int64_t)sizeof(T)};
    cudaStream_t stream = orin_cu_stream(ex);
    if (rows_vectorisable(hd, sizeof(T), k, v, c->k) && orin_cu_aligned16(c->v) &&
        strides_bytes[0] % 16 == 0 && strides_bytes[1] % 16 == 0) {
        int64_t items = n * heads * (hd / orin_cu_vec<T>::n);
        kv_write_kernel<T, true><<<orin_cu_grid_for(ex, items, COPY_THREADS), COPY_THREADS, 0, stream>>>(
            k, v, pos, *c, n, heads, hd);
    } else {
        int64_t items = n * heads * hd;
        kv_write_kernel<T, false><<<orin_cu_grid_for(ex, items, COPY_THREADS), COPY_THREADS, 0, stream>>>(
            k, v, pos, *c, n, heads, hd);
    }
}

extern "C" int cuda_kv_write(const orin_exec *ex, const orin_kv_write_args *a, orin_dtype dt)
{
    const char *label = "kv_write (common)";
    if (orin_check_kv_write(label, ex, a, CUDA, dt))
        return -1;
    /* n_kv_heads and head_dim are int32 in the view, so these casts are exact */
    int64_t n = a->k.shape[0];
    int heads = (int)a->k.shape[1], hd = (int)a->k.shape[2];
    ORIN_CU_DISPATCH(dt, label, T, launch_kv_write<T>(ex, a, n, heads, hd));
    return orin_cu_launched(label, dt, "k, v [%lld, %d, %d], cache capacity %d", (long long)n,
                            heads, hd, a->cache.capacity);
}
