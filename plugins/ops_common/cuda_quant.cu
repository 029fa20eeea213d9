// ops_common's matmuls over quantized weights on CUDA: matmul.int8 and
// matmul.awq4 (orin_qweight in orin/ops.h), for f32, f16 and bf16 activations.
//
// At load, prepare (orin_op_impl.prepare) rearranges an f16/bf16 model's
// weights in place into the tile layout (layout 1, cuda_qmma.cuh), where each lane's
// 16-byte load is its share of mma.sync's A operand for a strip of 16 outputs:
//  - one row of x (a decode step) is bound by reading the weights once, so the
//    GEMV streams them in whole 512-byte warp loads, turns each nibble or byte
//    into an exact f16/bf16 value by a mask or byte permute alone (5
//    instructions for a lane's 8 AWQ weights of a k-tile, 4 for int8's; the
//    zero point and any base come off once a span: tile_type) and lets the
//    tensor cores do the multiply-adds with f32 accumulators, x being the B
//    operand. The CUDA-core GEMVs this replaced spent ~3 instructions a weight
//    on the arithmetic and were issue-bound at 42 % of the bandwidth
//    (bench/notes/quant.md). The fused matmul.qkv.* and matmul.swiglu.* run
//    the same GEMV over two or three matrices in one launch.
//  - more rows (prefill) are bound by the tensor cores: a slice of outputs at a
//    time is dequantized into the workspace in the compute dtype and multiplied
//    by cuBLASLt (cuda_lt_gemm). That moves the slice's bytes through L2 once
//    more, a few percent of the product's time at prefill sizes; the weights
//    are rounded to the compute dtype first, as transformers' and vLLM's AWQ
//    paths do (in f32 they stay exact).
// Weights prepare leaves as stored (f32 compute; shapes the tiles do not fit:
// outputs not a multiple of 16, inputs not a multiple of the tile unit, groups
// not a multiple of 16) run the dequantize-and-multiply path at every n:
// correct, not fast.
//
// The sums are f32 of exact products (a nibble or byte, as an f16 subnormal
// or a bf16 integer, times an f16 or bf16 x); the scale multiplies each span's
// sum once, and the offset (scale times zero point and base) its sum of x.
// The GEMV's kernel and launch are in cuda_qmma_gemv.cuh, instantiated a
// format a file (cuda_qmma_gemv_awq4.cu, cuda_qmma_gemv_int8.cu); this file
// sets its calls up (tiles_gemv).
#include "cuda.h"
#include "cuda_fused.h"
#include "cuda_gemv.cuh"
#include "cuda_qmma.cuh"
#include "cuda_qmma_gemv.cuh"

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/op_check.h"

#include <type_traits>


#define CUDA ORIN_DEVICE_CUDA

// Bytes of dequantized weights a prefill slice holds: small enough to stay in
// L2 between the dequantize and the product that reads it.
#define SLICE_BYTES ((size_t)16 << 20)
#define SLICE_ALIGN 256

// orin_qweight.layout values of this file.
#define LAYOUT_STORED 0u
#define LAYOUT_TILES 1u

// 2^23 as f32: its low mantissa bits are an integer's, so OR-ing a small
// unsigned integer q into them gives the float 2^23 + q exactly.
#define MAGIC_BITS 0x4B000000u
#define MAGIC 8388608.0f

// Column (0..7) of nibble i of an AWQ word: AWQ's interleaved order 0 2 4 6 1 3 5 7.
__host__ __device__ __forceinline__ int awq_column_of_nibble(int i)
{
    return ((i & 3) << 1) | (i >> 2);
}

// The 4 signed bytes of w as f32, exactly: each byte biased to unsigned
// (xor 0x80), placed in the mantissa of 2^23 by a byte permute, less 2^23 + 128.
// Two instructions a byte instead of a quarter-rate integer conversion.
__device__ __forceinline__ void int8x4_to_f32(uint32_t w, float (&f)[4])
{
    const uint32_t u = w ^ 0x80808080u;
#pragma unroll
    for (int i = 0; i < 4; i++)
        f[i] = __int_as_float(__byte_perm(u, MAGIC_BITS, 0x7540 | i)) - (MAGIC + 128.0f);
}

// The 16 signed bytes of raw as f32, exactly.
__device__ __forceinline__ void int8x16_to_f32(uint4 raw, float (&q)[16])
{
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float f[4];
        int8x4_to_f32(words[j], f);
#pragma unroll
        for (int i = 0; i < 4; i++)
            q[4 * j + i] = f[i];
    }
}

// The tile layout (layout 1) and its k-tile arithmetic: cuda_qmma.cuh.

static orin_weight_format weight_format(quant_fmt fmt)
{
    return fmt == FMT_AWQ4 ? ORIN_WEIGHT_AWQ4 : ORIN_WEIGHT_INT8;
}


// ---- prepare: the stored layout into tiles ------------------------------------------

// Copies of the stored tensors in, the tensors' own memory out. qweight is
// packed for n-tiles [j0, j0 + tiles): AWQ at once (an n-tile's nibbles are
// spread over every stored row), int8 in chunks of rows (an n-tile's bytes are
// its 16 stored rows, src_q holding those of the chunk).
struct pack_params {
    const void *src_q;
    const uint16_t *src_s;
    const uint32_t *src_z;
    uint4 *q;
    uint32_t *s;
    uint8_t *z;
    int n, k, groups, group;
    int j0, tiles;
};

// Value (row, input) of the stored weight: AWQ's nibble, or int8's byte + 128.
template <int FMT>
__device__ __forceinline__ uint32_t stored_value(const pack_params &p, int row, int k)
{
    if (FMT == FMT_AWQ4) {
        const uint32_t word = ((const uint32_t *)p.src_q)[(size_t)k * (p.n / 8) + row / 8];
        return (word >> orin_awq_shift(row % 8)) & 15u;
    }
    const int8_t *src = (const int8_t *)p.src_q;
    return (uint32_t)(src[(size_t)(row - 16 * p.j0) * p.k + k] + 128);
}

// Launch: grid-stride over tiles x units x 32 lanes, 256 threads; a thread
// gathers its lane's 16 bytes (stored reads scattered, once, at load).
template <int FMT> __global__ void pack_weights_kernel(pack_params p)
{
    constexpr int UT = tiles_of<FMT>::UNIT_TILES;
    const int units = p.k / tiles_of<FMT>::UNIT_K;
    const int64_t total = (int64_t)p.tiles * units * 32;
    for (int64_t item = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; item < total;
         item += (int64_t)gridDim.x * blockDim.x) {
        const int lane = (int)(item % 32), u = (int)(item / 32 % units);
        const int j = p.j0 + (int)(item / 32 / units), g = lane >> 2, t = lane & 3;
        uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
        for (int tt = 0; tt < UT; tt++)
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint32_t v = stored_value<FMT>(p, 16 * j + tile_row(g, i),
                                                     16 * (u * UT + tt) + tile_col(t, i));
                w[tile_word<FMT>(tt, i)] |= v << tile_shift<FMT>(i);
            }
        p.q[((size_t)j * units + u) * 32 + lane] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

// Launch: grid-stride over N/16 x groups x 8, 256 threads: one scale pair (and
// zero byte) a thread.
template <int FMT> __global__ void pack_groups_kernel(pack_params p)
{
    const int64_t total = (int64_t)(p.n / 16) * p.groups * 8;
    for (int64_t item = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; item < total;
         item += (int64_t)gridDim.x * blockDim.x) {
        const int g = (int)(item % 8), gi = (int)(item / 8 % p.groups);
        const int r0 = 16 * (int)(item / 8 / p.groups) + g, r1 = r0 + 8;
        if (FMT == FMT_AWQ4) {
            p.s[item] = p.src_s[(size_t)gi * p.n + r0] | (uint32_t)p.src_s[(size_t)gi * p.n + r1] << 16;
            const uint32_t *zrow = p.src_z + (size_t)gi * (p.n / 8);
            const uint32_t z0 = (zrow[r0 / 8] >> orin_awq_shift(r0 % 8)) & 15u;
            const uint32_t z1 = (zrow[r1 / 8] >> orin_awq_shift(r1 % 8)) & 15u;
            p.z[item] = (uint8_t)(z0 | z1 << 4);
        } else {
            p.s[item] = p.src_s[(size_t)r0 * p.groups + gi] |
                        (uint32_t)p.src_s[(size_t)r1 * p.groups + gi] << 16;
        }
    }
}


// ---- dequantizing a slice (prefill) ---------------------------------------------------

// dst[0..N) = v rounded to T, in 16-byte stores (dst 16-byte aligned, N x
// sizeof(T) a multiple of 16).
template <typename T, int N>
__device__ __forceinline__ void store_floats(T *dst, const float (&v)[N])
{
    constexpr int V = orin_cu_vec<T>::n;
#pragma unroll
    for (int h = 0; h < N / V; h++) {
        float part[V];
#pragma unroll
        for (int i = 0; i < V; i++)
            part[i] = v[h * V + i];
        orin_cu_store16(dst + h * V, part);
    }
}

// wt[r][k] = w[16 j0 + r][k] for the slice's rows r < rows (its n-tiles
// [j0, j0 + ceil(rows / 16))), from the tiles: [out][in] order. Launch:
// grid-stride over rows x k/8 chunks, 256 threads; a thread writes 8
// consecutive inputs of a row (one 16-byte store for f16: a warp stores 512
// contiguous bytes), read from the two lanes (t = 2m, 2m + 1) of its row's
// group that hold them: a word each (AWQ) or two bytes pairs' words (int8).
// Bound by the bytes written.
template <typename T, int FMT>
__global__ void tiles_dequant_kernel(const uint4 *__restrict__ q, const uint32_t *__restrict__ s,
                                     const uint8_t *__restrict__ z, T *__restrict__ wt, int k,
                                     int groups, int group_tiles, int j0, int rows)
{
    constexpr int UT = tiles_of<FMT>::UNIT_TILES;
    constexpr uint32_t MASK = FMT == FMT_AWQ4 ? 15u : 255u;
    const int units = k / tiles_of<FMT>::UNIT_K, chunks = k / 8;
    const uint32_t *qw = (const uint32_t *)q;
    const int64_t total = (int64_t)rows * chunks;
    for (int64_t item = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; item < total;
         item += (int64_t)gridDim.x * blockDim.x) {
        const int row = (int)(item / chunks), c = (int)(item % chunks);
        const int j = j0 + row / 16, r = row % 16, g = r & 7, h = r >> 3;
        const int kt = c / 2, m = c % 2, u = kt / UT, tt = kt % UT; // inputs 16kt + 8m ..
        const size_t e = ((size_t)j * groups + kt / group_tiles) * 8 + g;
        const uint32_t pair = s[e];
        const float sc = __half2float(__ushort_as_half((unsigned short)(h ? pair >> 16 : pair & 0xFFFFu)));
        const int zero = FMT == FMT_AWQ4 ? (int)(h ? z[e] >> 4 : z[e] & 15u) : 128;
        // lane 4g + t's 16 bytes are words [((j units + u) 32 + 4g + t) 4 ..]
        const uint32_t *lanes = qw + (((size_t)j * units + u) * 32 + 4 * g + 2 * m) * 4;
        float v[8];
#pragma unroll
        for (int tl = 0; tl < 2; tl++) { // t = 2m + tl: inputs 4t .. 4t + 3 of the tile
#pragma unroll
            for (int i = 0; i < 8; i++) {
                if ((i & 1) != h)
                    continue;
                const uint32_t word = lanes[tl * 4 + tile_word<FMT>(tt, i)];
                v[4 * tl + tile_col(0, i)] =
                    (float)((int)((word >> tile_shift<FMT>(i)) & MASK) - zero) * sc;
            }
        }
        store_floats<T>(wt + (size_t)row * k + 8 * c, v);
    }
}

// wt[k][c] = w[c0 + c][k] for c < cols (a multiple of 8): the AWQ slice in its
// own k-major order. Launch: grid-stride over in x cols/8 words, 256 threads;
// a thread reads one word, its zero word and 8 scales, and writes 8 outputs
// (16 or 32 contiguous bytes). Bound by the bytes written.
template <typename T>
__global__ void awq_dequant_kernel(const uint32_t *__restrict__ qweight,
                                   const uint32_t *__restrict__ zeros,
                                   const __half *__restrict__ scales, T *__restrict__ wt, int in,
                                   int out, int group, int c0, int cols)
{
    const int words = out / 8, slice_words = cols / 8;
    const int64_t total = (int64_t)in * slice_words;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int k = (int)(t / slice_words), j = (int)(t % slice_words), g = k / group;
        const uint32_t q = qweight[(size_t)k * words + c0 / 8 + j];
        const uint32_t z = zeros[(size_t)g * words + c0 / 8 + j];
        // the 8 scales in one 16-byte load (out and c0 are multiples of 8)
        const uint4 s16 = *reinterpret_cast<const uint4 *>(scales + (size_t)g * out + c0 + 8 * j);
        const __half *s = reinterpret_cast<const __half *>(&s16);
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[awq_column_of_nibble(i)] =
                (float)((int)((q >> (4 * i)) & 15u) - (int)((z >> (4 * i)) & 15u)) *
                __half2float(s[awq_column_of_nibble(i)]);
        store_floats<T>(wt + (size_t)k * cols + 8 * j, v);
    }
}

// w[r][k] = q[r0 + r][k] * s[r0 + r][k / group] for r < rows: the int8 slice
// in its own [out][in] order. Launch: grid-stride, 256 threads; VEC (in and
// group multiples of 16, q 16-byte aligned): 16 weights a thread, one 16-byte
// load and 16 x sizeof(T) bytes of stores; else one weight a thread. Bound by
// the bytes written.
template <typename T, bool VEC>
__global__ void int8_dequant_kernel(const int8_t *__restrict__ q, const __half *__restrict__ scales,
                                    T *__restrict__ w, int in, int group, int r0, int rows)
{
    const int groups = in / group;
    const int per = VEC ? 16 : 1;
    const int64_t total = (int64_t)rows * in / per;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = r0 + t * per / in;
        const int k = (int)(t * per % in);
        const float sc = __half2float(scales[r * groups + k / group]);
        if (!VEC) {
            w[t] = orin_cu_from_f32<T>((float)q[r * in + k] * sc);
            continue;
        }
        float v[16];
        int8x16_to_f32(*reinterpret_cast<const uint4 *>(q + r * in + k), v);
#pragma unroll
        for (int i = 0; i < 16; i++)
            v[i] *= sc;
        store_floats<T>(w + t * 16, v);
    }
}

static unsigned grid_for(const orin_exec *ex, int64_t items)
{
    int64_t blocks = (items + GEMV_THREADS - 1) / GEMV_THREADS;
    int64_t cap = (int64_t)orin_cu_sm_count(ex) * 16;
    return (unsigned)(blocks < cap ? blocks : cap);
}

// Outputs a slice holds: as many as SLICE_BYTES of dequantized weights take
// (a multiple of 64 where it can, of 16 at least: whole n-tiles), at most out.
static int64_t slice_outputs(int64_t in, int64_t out, orin_dtype dt)
{
    int64_t cols = (int64_t)(SLICE_BYTES / ((size_t)in * orin_dtype_size(dt)));
    cols = cols >= 64 ? cols / 64 * 64 : 16;
    return cols < out ? cols : out;
}

static size_t slice_bytes(int64_t in, int64_t out, orin_dtype dt)
{
    size_t b = (size_t)slice_outputs(in, out, dt) * (size_t)in * orin_dtype_size(dt);
    return (b + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
}


// ---- the ops ------------------------------------------------------------------------

struct quant_call {
    const char *label;
    quant_fmt fmt;
    orin_dtype dt;
    int64_t n, in, out;
};

// Bytes of shared memory a GEMV block takes: x (f16/bf16) and the group data
// of its 16 outputs in each of the `mats` matrices it reads, with a norm in
// front the row twice more (gemv_norm_smem), and the spans' sums of x (a float
// a k-tile at most: SPAN 1).
static size_t qmma_smem_bytes(int64_t in, int64_t groups, int mats, bool norm = false)
{
    return (size_t)in * 2 + (size_t)mats * (size_t)groups * 8 * sizeof(lane_group) +
           (norm ? gemv_norm_smem(in, 2) : 0) + (size_t)in / 16 * sizeof(float);
}

// Lets every GEMV instantiation take QMMA_SMEM_MAX of dynamic shared memory
// (beyond the default 48 KiB); once a process, from prepare.
static int qmma_allow_smem(const char *label)
{
    static int done = 0;
    if (done)
        return 0;
    if ((qmma_allow_smem_of<FMT_AWQ4>(label) | qmma_allow_smem_of<FMT_INT8>(label)) != 0)
        return -1;
    done = 1;
    return 0;
}

// Whether prepare puts a weight into tiles: f16/bf16 on sm_80+, whole tiles
// and units, groups of whole k-tiles, a GEMV block's x and group data within
// QMMA_SMEM_MAX.
static bool tiles_fit(const orin_exec *ex, quant_fmt fmt, orin_dtype dt, int64_t in, int64_t out,
                      int32_t group)
{
    const int64_t unit_k = fmt == FMT_AWQ4 ? tiles_of<FMT_AWQ4>::UNIT_K : tiles_of<FMT_INT8>::UNIT_K;
    return (dt == ORIN_F16 || dt == ORIN_BF16) && orin_cu_cc_major(ex) >= 8 && out % 16 == 0 &&
           in % unit_k == 0 && group > 0 && group % 16 == 0 && in % group == 0 &&
           in <= INT32_MAX && out <= INT32_MAX &&
           qmma_smem_bytes(in, in / group, 1) <= QMMA_SMEM_MAX;
}

// The slice's weights, rows [o0, o0 + rows), dequantized into `slice` in the
// compute dtype: [rows][in], or [in][rows] (*kmajor) for stored AWQ.
static int dequant_slice(const orin_exec *ex, const orin_matmul_quant_args *a,
                         const quant_call *c, int64_t o0, int64_t rows, void *slice, bool *kmajor)
{
    const orin_qweight *w = &a->w;
    cudaStream_t stream = orin_cu_stream(ex);
    const int in = (int)c->in, group = w->group_size;
    *kmajor = false;
    if (w->layout == LAYOUT_TILES) {
        const unsigned blocks = grid_for(ex, rows * (c->in / 8));
        const int groups = (int)(c->in / group), gt = group / 16, j0 = (int)(o0 / 16);
        const uint4 *q = (const uint4 *)w->qweight.data;
        const uint32_t *s = (const uint32_t *)w->scales.data;
        const uint8_t *z = (const uint8_t *)w->zeros.data;
        if (c->fmt == FMT_AWQ4) {
            ORIN_CU_DISPATCH(c->dt, c->label, T,
                             (tiles_dequant_kernel<T, FMT_AWQ4><<<blocks, GEMV_THREADS, 0, stream>>>(
                                 q, s, z, (T *)slice, in, groups, gt, j0, (int)rows)));
        } else {
            ORIN_CU_DISPATCH(c->dt, c->label, T,
                             (tiles_dequant_kernel<T, FMT_INT8><<<blocks, GEMV_THREADS, 0, stream>>>(
                                 q, s, z, (T *)slice, in, groups, gt, j0, (int)rows)));
        }
    } else if (c->fmt == FMT_AWQ4) {
        *kmajor = true;
        const unsigned blocks = grid_for(ex, c->in * rows / 8);
        ORIN_CU_DISPATCH(c->dt, c->label, T,
                         awq_dequant_kernel<T><<<blocks, GEMV_THREADS, 0, stream>>>(
                             (const uint32_t *)w->qweight.data, (const uint32_t *)w->zeros.data,
                             (const __half *)w->scales.data, (T *)slice, in, (int)c->out, group,
                             (int)o0, (int)rows));
    } else if (c->in % 16 == 0 && group % 16 == 0 && orin_cu_aligned16(w->qweight.data)) {
        const unsigned blocks = grid_for(ex, c->in * rows / 16);
        ORIN_CU_DISPATCH(c->dt, c->label, T,
                         (int8_dequant_kernel<T, true><<<blocks, GEMV_THREADS, 0, stream>>>(
                             (const int8_t *)w->qweight.data, (const __half *)w->scales.data,
                             (T *)slice, in, group, (int)o0, (int)rows)));
    } else {
        const unsigned blocks = grid_for(ex, c->in * rows);
        ORIN_CU_DISPATCH(c->dt, c->label, T,
                         (int8_dequant_kernel<T, false><<<blocks, GEMV_THREADS, 0, stream>>>(
                             (const int8_t *)w->qweight.data, (const __half *)w->scales.data,
                             (T *)slice, in, group, (int)o0, (int)rows)));
    }
    return orin_cu_launched(c->label, c->dt, "dequantize w [%lld, %lld] rows %lld..%lld (layout %u)",
                            (long long)c->out, (long long)c->in, (long long)o0,
                            (long long)(o0 + rows), w->layout);
}

// Dequantize a slice of outputs, multiply, next slice: prefill, and decode of
// weights left as stored. The workspace holds the slice, then cuBLASLt's own.
static int quant_sliced(const orin_exec *ex, const orin_matmul_quant_args *a,
                        const quant_call *c)
{
    const size_t need = slice_bytes(c->in, c->out, c->dt);
    const uintptr_t base = ((uintptr_t)ex->workspace + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
    const size_t pad = base - (uintptr_t)ex->workspace;
    if (!ex->workspace || ex->workspace_size < pad + need)
        return orin_error_set("%s: workspace of %zu bytes, %zu needed", c->label,
                              ex->workspace_size, pad + need);
    void *slice = (void *)base, *lt_ws;
    size_t lt_bytes = cuda_matmul_usable_workspace((char *)slice + need,
                                                   ex->workspace_size - pad - need, &lt_ws);
    const int64_t cols = slice_outputs(c->in, c->out, c->dt);
    const size_t elem = orin_dtype_size(c->dt);
    for (int64_t o0 = 0; o0 < c->out; o0 += cols) {
        const int64_t rows = c->out - o0 < cols ? c->out - o0 : cols;
        bool kmajor;
        if (dequant_slice(ex, a, c, o0, rows, slice, &kmajor) != 0)
            return -1;
        const cuda_gemm g = {
            .n = c->n, .in = c->in, .out = rows,
            .x = a->x.data, .w = slice,
            .bias = a->bias.data ? (const char *)a->bias.data + (size_t)o0 * elem : NULL,
            .y = (char *)a->y.data + (size_t)o0 * elem,
            .w_kmajor = kmajor, .ldw = kmajor ? rows : c->in, .ldy = c->out,
            .accumulate = false, .gelu_tanh = false,
        };
        if (cuda_lt_gemm(ex, c->label, c->dt, &g, lt_ws, lt_bytes) != 0)
            return -1;
    }
    return 0;
}

// n-tiles a block takes of each matrix (the kernel's NT): 2 for gate/up where
// a block an n-tile pair would need two waves of 8-warp blocks and pairs fit
// one (Qwen3-8B: 768 n-tiles, 396 blocks resident on 132 SMs), so that a
// block's fixed cost (x staged through the norm, its group data, the warps'
// reduction) is paid once an SM slot instead of twice, and each unit's x is
// loaded once for two n-tiles. Where pairs would take more than one wave,
// their last wave's idle SMs cost more than the fixed costs save: Qwen2.5-7B
// (1,184 n-tiles: 2.99 waves, paired 1.49) ran int8 0.114 ms slower on the
// H200, AWQ 0.016 faster. A batch holds half as many units of each n-tile, so
// a span is a batch's units (qmma_pair_span: int8's 4 k-tiles instead of its
// usual 8, 2 FMAs more an n-tile every 4 k-tiles); groups of whole 8 k-tiles
// (128 inputs), every warp's share whole batches (FULL). Measured
// (bench/notes/quant.md, seventh session of 2026-11-27), Qwen3-8B's step at
// 512:
//   AWQ:  H200 1.947 -> 1.888 ms (gate/up alone 18.1 -> 15.8 us), H100 2.270
//         -> 2.263 (21.2 -> 20.2 us): paired on every GPU;
//   int8: H200 2.520 -> 2.495 (27.8 -> 27.0 us), but H100 3.201 -> 3.237
//         (36.6 -> 37.2 us): paired only where an SM's share of the memory
//         bandwidth is at least QMMA_PAIR_INT8_GBS_PER_SM (H200 36 GB/s, H100
//         SXM 25), i.e. where a block's fixed cost weighs most against its
//         stream, which is what pairing halves.
// QMMA_PAIR_TILES: bit 0 AWQ, bit 1 int8 (0: never).
#ifndef QMMA_PAIR_TILES
#define QMMA_PAIR_TILES 3
#endif
// Waves of paired blocks a grid may take. More than one trades the fixed
// costs of half the blocks against the last wave's idle SMs: at 2, on the
// H200, Qwen2.5-7B's AWQ step 0.04 ms shorter, Qwen3-14B's 0.01 longer (their
// gate/up; bench/notes/quant.md, twentieth session), so 1 until a rule that
// predicts both is found.
#ifndef QMMA_PAIR_MAX_WAVES
#define QMMA_PAIR_MAX_WAVES 1
#endif
#ifndef QMMA_PAIR_INT8_GBS_PER_SM
#define QMMA_PAIR_INT8_GBS_PER_SM 30.0
#endif
// The SEGMENTS grids (q/k/v, one-matrix products) in pairs too: bit 0 AWQ,
// bit 1 int8 (0: gate/up only).
#ifndef QMMA_PAIR_SEGMENTS
#define QMMA_PAIR_SEGMENTS 1
#endif
// SEGMENTS (q/k/v; one matrix) are paired the same way where every
// segment's n-tiles are even (even: false otherwise), a block two n-tiles of
// its segment. Qwen3-14B's q/k/v (448 n-tiles), AWQ step at 512: H200 3.332
// -> 3.245 ms, H100 -0.075 ms (bench/notes/quant.md, tenth session).
// Not int8's (bit 1 off): on the H200, the only GPU whose bandwidth rule
// pairs int8, its paired q/k/v are correct (the op suite passes with
// QMMA_PAIR_SEGMENTS=3) but slower, Qwen3-14B's int8 step 4.526 -> 4.551 ms
// (bench/notes/quant.md, eleventh session).
// Not measured apart: one-matrix products of 397-792 n-tiles (Qwen2.5-72B's
// o and down, 512, would be paired; no model measured has one).
static int qmma_pair_tiles(const orin_exec *ex, const quant_call *c, qmma_mode mode, int tiles,
                           bool even, int units, int group_tiles, int64_t groups, bool norm)
{
    const bool awq = c->fmt == FMT_AWQ4;
    // units of an n-tile a paired batch holds, which is also the paired
    // kernel's span in units (qmma_pair_span)
    const int bu = (awq ? qmma_batch_units<FMT_AWQ4>(1) : qmma_batch_units<FMT_INT8>(1)) / 2;
    const int mats = qmma_mats(mode);
    const int sms = orin_cu_sm_count(ex), slots = QMMA_WIDE_MIN_BLOCKS * sms;
    if (!((QMMA_PAIR_TILES >> (awq ? 0 : 1)) & 1) || !QMMA_FULL || !even ||
        (mode == QMMA_SEGMENTS && !((QMMA_PAIR_SEGMENTS >> (awq ? 0 : 1)) & 1)) ||
        group_tiles % 8 != 0 || tiles <= slots || tiles > 2 * QMMA_PAIR_MAX_WAVES * slots)
        return 1;
    if (!awq && ex->device->mem_bandwidth_gbs < QMMA_PAIR_INT8_GBS_PER_SM * sms)
        return 1;
    const int per = qmma_warp_share(units, QMMA_WARPS_WIDE / mats, bu);
    if (!qmma_whole_batches(units, per, bu))
        return 1;
    return qmma_smem_bytes(c->in, groups, mats * 2, norm) <= QMMA_SMEM_MAX ? 2 : 1;
}

// One matrix of a GEMV on tiles: its weight, bias (data NULL: none) and output.
struct qmma_part {
    const orin_qweight *w;
    const orin_tensor *bias;
    const orin_tensor *y;
};

// Whether the parts can run as one GEMV on tiles: one row of x 16-byte
// aligned, every weight in tiles with one group size, a block's shared memory
// within QMMA_SMEM_MAX; norm (or NULL): a norm in front that folds in
// (cuda_norm_in_folds), its rows counted.
static bool tiles_gemv_fits(const quant_call *c, const qmma_part *parts, int count,
                            qmma_mode mode, const void *x, const orin_norm_in *norm = NULL)
{
    if (c->n != 1 || !orin_cu_aligned16(x))
        return false;
    for (int i = 0; i < count; i++)
        if (parts[i].w->layout != LAYOUT_TILES ||
            parts[i].w->group_size != parts[0].w->group_size)
            return false;
    const int64_t groups = c->in / parts[0].w->group_size;
    return qmma_smem_bytes(c->in, groups, qmma_mats(mode), norm != NULL) <=
           QMMA_SMEM_MAX;
}

// The parts (tiles_gemv_fits, with the same norm) as one launch.
static int tiles_gemv(const orin_exec *ex, const quant_call *c, const qmma_part *parts, int count,
                      qmma_mode mode, const void *x, const orin_norm_in *norm = NULL)
{
    const int32_t group = parts[0].w->group_size;
    qmma_params p = {};
    bool even = true; // every matrix's n-tiles
    p.count = count;
    p.x = x;
    if (norm) {
        p.norm_residual = norm->residual.data;
        p.norm_weight = norm->weight.data;
        p.norm_x_out = norm->x_out.data;
        p.norm_eps = norm->eps;
    }
    p.units = (int)(c->in / (c->fmt == FMT_AWQ4 ? tiles_of<FMT_AWQ4>::UNIT_K
                                                : tiles_of<FMT_INT8>::UNIT_K));
    p.groups = (int)(c->in / group);
    p.group_tiles = group / 16;
    for (int i = 0; i < count; i++) {
        const orin_qweight *w = parts[i].w;
        p.m[i] = (qmma_matrix){
            .q = (const uint4 *)w->qweight.data,
            .s = (const uint32_t *)w->scales.data,
            .z = (const uint8_t *)w->zeros.data,
            .bias = parts[i].bias ? parts[i].bias->data : NULL,
            .y = parts[i].y->data,
        };
        const int tiles = (int)(parts[i].y->shape[parts[i].y->ndim - 1] / 16);
        if (mode == QMMA_SEGMENTS)
            p.begin[i + 1] = p.begin[i] + tiles;
        else
            p.begin[1] = tiles; // gate and up alike
        even = even && tiles % 2 == 0;
    }
    const int tiles = mode == QMMA_SWIGLU ? p.begin[1] : p.begin[count];
    const int nt = qmma_pair_tiles(ex, c, mode, tiles, even, p.units, p.group_tiles, p.groups,
                                   norm != NULL);
    for (int i = 1; mode == QMMA_SEGMENTS && i <= count; i++) // in blocks
        p.begin[i] /= nt;
    const unsigned blocks = (unsigned)(tiles / nt);
    // A one-matrix grid of <= 2 blocks an SM (o_proj) finds the SMs nearly
    // empty beside the attention, so its blocks can put both weight batches
    // in flight before the wait (H100: AWQ o 5.46 -> 4.63 us in a graph; the
    // kernel keeps deep batches, down's, at the format's default).
    p.early2 = count == 1 && !norm && (int)blocks <= 2 * orin_cu_sm_count(ex);
    const size_t smem =
        qmma_smem_bytes(c->in, p.groups, qmma_mats(mode) * nt, norm != NULL);
    if (c->fmt == FMT_AWQ4)
        qmma_launch<FMT_AWQ4>(ex, c->dt, mode, p, blocks, smem, nt);
    else
        qmma_launch<FMT_INT8>(ex, c->dt, mode, p, blocks, smem, nt);
    return orin_cu_launched(c->label, c->dt, "gemv on tiles: x [1, %lld], %d matrices of %d "
                            "n-tiles, group %d", (long long)c->in, count, tiles, group);
}

// The weight's layout is one this file makes for its shape, or the stored one.
static int check_layout(const orin_exec *ex, const quant_call *c, const orin_qweight *w,
                        int64_t out)
{
    if (w->layout == LAYOUT_STORED ||
        (w->layout == LAYOUT_TILES && tiles_fit(ex, c->fmt, c->dt, c->in, out, w->group_size)))
        return 0;
    return orin_error_set("%s: w.layout %u is not one this implementation's prepare makes "
                          "for w [%lld, %lld], group %d", c->label, w->layout, (long long)out,
                          (long long)c->in, w->group_size);
}

static quant_call quant_call_of(const char *label, quant_fmt fmt, orin_dtype dt,
                                const orin_tensor *x, const orin_tensor *y)
{
    return (quant_call){
        .label = label, .fmt = fmt, .dt = dt,
        .n = orin_tensor_rows(x),
        .in = x->shape[x->ndim - 1],
        .out = y->shape[y->ndim - 1],
    };
}

static int check_dtype_and_dims(const quant_call *c)
{
    if (c->dt != ORIN_F32 && c->dt != ORIN_F16 && c->dt != ORIN_BF16)
        return orin_error_set("%s: dtype %s is not supported on cuda", c->label,
                              orin_dtype_name(c->dt));
    if (c->in > INT32_MAX || c->out > INT32_MAX)
        return orin_error_set("%s: dimensions beyond 2^31 (w [%lld, %lld])", c->label,
                              (long long)c->out, (long long)c->in);
    return 0;
}

// A checked call: one GEMV on tiles, or dequantized slices and cuBLASLt.
static int run_matmul_quant(const orin_exec *ex, const orin_matmul_quant_args *a,
                            const quant_call *c)
{
    if (check_dtype_and_dims(c) || check_layout(ex, c, &a->w, c->out))
        return -1;
    const qmma_part part = {&a->w, &a->bias, &a->y};
    if (tiles_gemv_fits(c, &part, 1, QMMA_SEGMENTS, a->x.data))
        return tiles_gemv(ex, c, &part, 1, QMMA_SEGMENTS, a->x.data);
    return quant_sliced(ex, a, c);
}

static int matmul_quant(const orin_exec *ex, const orin_matmul_quant_args *a, quant_fmt fmt,
                        orin_dtype dt, const char *label)
{
    if (orin_check_matmul_quant(label, ex, a, weight_format(fmt), CUDA, dt))
        return -1;
    const quant_call c = quant_call_of(label, fmt, dt, &a->x, &a->y);
    return run_matmul_quant(ex, a, &c);
}

extern "C" int cuda_matmul_awq4(const orin_exec *ex, const orin_matmul_quant_args *a,
                                orin_dtype dt)
{
    return matmul_quant(ex, a, FMT_AWQ4, dt, "matmul.awq4 (common)");
}

extern "C" int cuda_matmul_int8(const orin_exec *ex, const orin_matmul_quant_args *a,
                                orin_dtype dt)
{
    return matmul_quant(ex, a, FMT_INT8, dt, "matmul.int8 (common)");
}

// The prefill's slice, then cuBLASLt's workspace, for the widest call the args
// describe (the GEMV on tiles needs none).
extern "C" size_t cuda_matmul_quant_workspace_size(const void *args)
{
    const orin_matmul_quant_args *a = (const orin_matmul_quant_args *)args;
    if (!a || a->x.ndim < 1 || a->y.ndim < 1)
        return 0;
    const int64_t in = a->x.shape[a->x.ndim - 1], out = a->y.shape[a->y.ndim - 1];
    if (in < 1 || out < 1)
        return 0;
    return SLICE_ALIGN + slice_bytes(in, out, a->x.dtype) + cuda_matmul_workspace_size(args);
}

// ---- matmul.qkv.* and matmul.swiglu.* ----------------------------------------------
//
// Decode (one row, weights in tiles): one GEMV launch for q, k and v, and one
// for gate and up with the SwiGLU in its epilogue. Otherwise the sequence
// they stand for, each product as matmul.awq4 / .int8 runs it.

// A norm in front (orin_norm_in) that the GEMV on tiles folds in, or NULL
// after running it apart into the workspace (x then points there, ex at the
// workspace after it: cuda_norm_in_apart).
static int quant_norm_in(const orin_exec **ex, orin_exec *rest, const orin_norm_in *norm,
                         orin_tensor *x, const quant_call *c, const qmma_part *parts, int count,
                         qmma_mode mode, const orin_norm_in **folded)
{
    *folded = NULL;
    if (!norm->weight.data)
        return 0;
    if (cuda_norm_in_folds(norm, x) && tiles_gemv_fits(c, parts, count, mode, x->data, norm)) {
        *folded = norm;
        return 0;
    }
    if (cuda_norm_in_apart(*ex, norm, x, rest, c->dt, c->label) != 0)
        return -1;
    *ex = rest;
    return 0;
}

static int matmul_qkv_quant(const orin_exec *ex, const orin_matmul_qkv_quant_args *a,
                            quant_fmt fmt, orin_dtype dt, const char *label)
{
    if (orin_check_matmul_qkv_quant(label, ex, a, weight_format(fmt), CUDA, dt))
        return -1;
    quant_call c[3];
    qmma_part parts[3];
    for (int i = 0; i < 3; i++) {
        c[i] = quant_call_of(label, fmt, dt, &a->x, &a->y[i]);
        if (check_dtype_and_dims(&c[i]) || check_layout(ex, &c[i], &a->w[i], c[i].out))
            return -1;
        parts[i] = (qmma_part){&a->w[i], &a->bias[i], &a->y[i]};
    }
    orin_tensor x = a->x;
    orin_exec rest;
    const orin_norm_in *folded;
    if (quant_norm_in(&ex, &rest, &a->norm, &x, &c[0], parts, 3, QMMA_SEGMENTS, &folded) != 0)
        return -1;
    if (tiles_gemv_fits(&c[0], parts, 3, QMMA_SEGMENTS, x.data, folded))
        return tiles_gemv(ex, &c[0], parts, 3, QMMA_SEGMENTS, x.data, folded);
    for (int i = 0; i < 3; i++) {
        const orin_matmul_quant_args m = {.x = x, .w = a->w[i], .bias = a->bias[i],
                                          .y = a->y[i]};
        if (run_matmul_quant(ex, &m, &c[i]) != 0)
            return -1;
    }
    return 0;
}

// The unfused path's scratch: the up projection [n, f], 256-byte aligned.
static size_t swiglu_quant_up_bytes(const orin_matmul_swiglu_quant_args *a)
{
    const size_t bytes = (size_t)orin_tensor_rows(&a->x) *
                         (size_t)a->out.shape[a->out.ndim - 1] * orin_dtype_size(a->x.dtype);
    return (bytes + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
}

static size_t quant_workspace_of(const orin_tensor &x, const orin_tensor &y)
{
    orin_matmul_quant_args probe = {};
    probe.x = x;
    probe.y = y;
    return cuda_matmul_quant_workspace_size(&probe);
}

static int matmul_swiglu_quant(const orin_exec *ex, const orin_matmul_swiglu_quant_args *a,
                               quant_fmt fmt, orin_dtype dt, const char *label)
{
    if (orin_check_matmul_swiglu_quant(label, ex, a, weight_format(fmt), CUDA, dt))
        return -1;
    const quant_call c = quant_call_of(label, fmt, dt, &a->x, &a->out);
    if (check_dtype_and_dims(&c) || check_layout(ex, &c, &a->w_gate, c.out) ||
        check_layout(ex, &c, &a->w_up, c.out))
        return -1;
    const orin_tensor none = {};
    const qmma_part parts[2] = {{&a->w_gate, &none, &a->out}, {&a->w_up, &none, &a->out}};
    orin_tensor x = a->x;
    orin_exec normed_rest;
    const orin_norm_in *folded;
    if (quant_norm_in(&ex, &normed_rest, &a->norm, &x, &c, parts, 2, QMMA_SWIGLU, &folded) != 0)
        return -1;
    if (tiles_gemv_fits(&c, parts, 2, QMMA_SWIGLU, x.data, folded))
        return tiles_gemv(ex, &c, parts, 2, QMMA_SWIGLU, x.data, folded);
    // gate into out, up into the workspace, then the SwiGLU
    const size_t up_bytes = swiglu_quant_up_bytes(a);
    if (!ex->workspace || ex->workspace_size < up_bytes)
        return orin_error_set("%s: workspace of %zu bytes, %zu needed", label,
                              ex->workspace_size, up_bytes);
    const orin_tensor up = orin_tensor_make(ex->workspace, dt, CUDA, a->out.ndim, a->out.shape);
    orin_exec rest = *ex;
    rest.workspace = (char *)ex->workspace + up_bytes;
    rest.workspace_size = ex->workspace_size - up_bytes;
    const orin_matmul_quant_args gate = {.x = x, .w = a->w_gate, .bias = {}, .y = a->out};
    const orin_matmul_quant_args upm = {.x = x, .w = a->w_up, .bias = {}, .y = up};
    const orin_swiglu_args sw = {.gate = a->out, .up = up, .out = a->out};
    if (run_matmul_quant(&rest, &gate, &c) != 0 || run_matmul_quant(&rest, &upm, &c) != 0)
        return -1;
    return cuda_swiglu(ex, &sw, dt);
}

extern "C" int cuda_matmul_qkv_awq4(const orin_exec *ex, const orin_matmul_qkv_quant_args *a,
                                    orin_dtype dt)
{
    return matmul_qkv_quant(ex, a, FMT_AWQ4, dt, "matmul.qkv.awq4 (common)");
}

extern "C" int cuda_matmul_qkv_int8(const orin_exec *ex, const orin_matmul_qkv_quant_args *a,
                                    orin_dtype dt)
{
    return matmul_qkv_quant(ex, a, FMT_INT8, dt, "matmul.qkv.int8 (common)");
}

extern "C" int cuda_matmul_swiglu_awq4(const orin_exec *ex,
                                       const orin_matmul_swiglu_quant_args *a, orin_dtype dt)
{
    return matmul_swiglu_quant(ex, a, FMT_AWQ4, dt, "matmul.swiglu.awq4 (common)");
}

extern "C" int cuda_matmul_swiglu_int8(const orin_exec *ex,
                                       const orin_matmul_swiglu_quant_args *a, orin_dtype dt)
{
    return matmul_swiglu_quant(ex, a, FMT_INT8, dt, "matmul.swiglu.int8 (common)");
}

// The widest of the three products' (the unfused path runs them one by one).
extern "C" size_t cuda_matmul_qkv_quant_workspace_size(const void *args)
{
    const orin_matmul_qkv_quant_args *a = (const orin_matmul_qkv_quant_args *)args;
    size_t need = 0;
    for (int i = 0; a && i < 3; i++) {
        const size_t got = quant_workspace_of(a->x, a->y[i]);
        need = got > need ? got : need;
    }
    return (a ? cuda_norm_in_bytes(&a->norm, &a->x) : 0) + need;
}

// The up projection's scratch, then a product's workspace.
extern "C" size_t cuda_matmul_swiglu_quant_workspace_size(const void *args)
{
    const orin_matmul_swiglu_quant_args *a = (const orin_matmul_swiglu_quant_args *)args;
    if (!a || a->x.ndim < 1 || a->out.ndim < 1)
        return 0;
    return cuda_norm_in_bytes(&a->norm, &a->x) + swiglu_quant_up_bytes(a) +
           quant_workspace_of(a->x, a->out);
}

// ---- prepare ------------------------------------------------------------------------

// `bytes` of device memory at src copied to a new buffer (*copy), on the stream.
static int device_copy(orin_device *dev, const char *label, const void *src, size_t bytes,
                       void **copy)
{
    *copy = dev->ops->alloc(dev, bytes);
    if (!*copy)
        return orin_error_set("%s: prepare: cannot allocate a copy of %zu bytes on %s", label,
                              bytes, dev->name);
    return dev->ops->copy_d2d(dev, *copy, src, bytes);
}

static int check_bytes(const char *label, const char *what, const orin_tensor *t, size_t want)
{
    if (t->device != CUDA || !t->data)
        return orin_error_set("%s: prepare: %s is not on cuda", label, what);
    if (orin_tensor_nbytes(t) != want)
        return orin_error_set("%s: prepare: %s holds %zu bytes, %zu expected", label, what,
                              orin_tensor_nbytes(t), want);
    return 0;
}

// Rows of int8 weights packed a pass (their copy is the pass's scratch).
#define PACK_CHUNK_BYTES ((size_t)64 << 20)

// The stored tensors rewritten as tiles, in place, where tiles_fit; else left
// as they are (layout 0).
static int quant_prepare(const orin_exec *ex, void *args, quant_fmt fmt, const char *label)
{
    orin_matmul_quant_args *a = (orin_matmul_quant_args *)args;
    if (a->x.ndim < 1 || a->y.ndim < 1)
        return orin_error_set("%s: prepare: x and y describe no call", label);
    if (a->w.layout != LAYOUT_STORED)
        return orin_error_set("%s: prepare: the weight is in layout %u already", label,
                              a->w.layout);
    const int64_t in = a->x.shape[a->x.ndim - 1], out = a->y.shape[a->y.ndim - 1];
    const int32_t group = a->w.group_size;
    if (!tiles_fit(ex, fmt, a->x.dtype, in, out, group))
        return 0;
    if (qmma_allow_smem(label) != 0)
        return -1;
    const int64_t groups = in / group;
    const bool awq = fmt == FMT_AWQ4;
    const size_t qbytes = (size_t)(out * in) / (awq ? 2 : 1), sbytes = (size_t)(out * groups) * 2;
    if (check_bytes(label, "qweight", &a->w.qweight, qbytes) ||
        check_bytes(label, "scales", &a->w.scales, sbytes) ||
        (awq && check_bytes(label, "zeros", &a->w.zeros, sbytes / 4)))
        return -1;

    orin_device *dev = ex->device;
    cudaStream_t stream = orin_cu_stream(ex);
    void *src_q = NULL, *src_s = NULL, *src_z = NULL;
    pack_params p = {
        .src_q = NULL, .src_s = NULL, .src_z = NULL,
        .q = (uint4 *)a->w.qweight.data, .s = (uint32_t *)a->w.scales.data,
        .z = (uint8_t *)a->w.zeros.data,
        .n = (int)out, .k = (int)in, .groups = (int)groups, .group = group,
        .j0 = 0, .tiles = (int)(out / 16),
    };
    // int8: chunks of whole n-tiles; AWQ: all at once
    const int64_t tile_bytes = 16 * in / (awq ? 2 : 1);
    int64_t chunk_tiles = awq ? out / 16 : (int64_t)(PACK_CHUNK_BYTES / (size_t)tile_bytes);
    chunk_tiles = chunk_tiles < 1 ? 1 : chunk_tiles > out / 16 ? out / 16 : chunk_tiles;
    int rc = device_copy(dev, label, a->w.scales.data, sbytes, &src_s) ||
                     (awq && device_copy(dev, label, a->w.zeros.data, sbytes / 4, &src_z)) ||
                     device_copy(dev, label, a->w.qweight.data, (size_t)(chunk_tiles * tile_bytes),
                                 &src_q)
                 ? -1
                 : 0;
    p.src_s = (const uint16_t *)src_s;
    p.src_z = (const uint32_t *)src_z;
    p.src_q = src_q;
    if (rc == 0) {
        const unsigned blocks = grid_for(ex, out / 16 * groups * 8);
        if (awq)
            pack_groups_kernel<FMT_AWQ4><<<blocks, GEMV_THREADS, 0, stream>>>(p);
        else
            pack_groups_kernel<FMT_INT8><<<blocks, GEMV_THREADS, 0, stream>>>(p);
        rc = orin_cu_launched(label, a->x.dtype, "prepare: scales of w [%lld, %lld]",
                              (long long)out, (long long)in);
    }
    for (int64_t j0 = 0; rc == 0 && j0 < out / 16; j0 += chunk_tiles) {
        p.j0 = (int)j0;
        p.tiles = (int)(out / 16 - j0 < chunk_tiles ? out / 16 - j0 : chunk_tiles);
        if (j0 > 0 && dev->ops->copy_d2d(dev, src_q, (char *)a->w.qweight.data + j0 * tile_bytes,
                                         (size_t)(p.tiles * tile_bytes)) != 0) {
            rc = -1;
            break;
        }
        const unsigned blocks = grid_for(ex, (int64_t)p.tiles * tile_bytes / 16);
        if (awq)
            pack_weights_kernel<FMT_AWQ4><<<blocks, GEMV_THREADS, 0, stream>>>(p);
        else
            pack_weights_kernel<FMT_INT8><<<blocks, GEMV_THREADS, 0, stream>>>(p);
        rc = orin_cu_launched(label, a->x.dtype, "prepare: w [%lld, %lld] tiles from %lld",
                              (long long)out, (long long)in, (long long)j0);
    }
    if (dev->ops->synchronize(dev) != 0)
        rc = -1;
    dev->ops->free(dev, src_q);
    dev->ops->free(dev, src_s);
    dev->ops->free(dev, src_z);
    if (rc == 0)
        a->w.layout = LAYOUT_TILES;
    return rc;
}

extern "C" int cuda_matmul_awq4_prepare(const orin_exec *ex, void *args)
{
    return quant_prepare(ex, args, FMT_AWQ4, "matmul.awq4 (common)");
}

extern "C" int cuda_matmul_int8_prepare(const orin_exec *ex, void *args)
{
    return quant_prepare(ex, args, FMT_INT8, "matmul.int8 (common)");
}
