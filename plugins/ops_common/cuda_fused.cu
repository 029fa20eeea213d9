// ops_common's fused CUDA ops, and the batch-1 GEMV the decode step streams its
// weights through (the matmul takes it for one row of f16/bf16/f32 x).
//
// A decode step of an 8B model reads ~15 GB of weights and does little else:
// its floor is those bytes over the memory bandwidth. Two things stand between
// a plain implementation and that floor: matrix-vector products that do not
// stream at the bandwidth (cuBLAS's GEMV reaches 60-80 % at these shapes), and
// hundreds of small kernels whose launch gaps add up (a CUDA graph removes the
// CPU side, not the gaps). So: one GEMV built to stream, used for q/k/v at once
// and for gate/up with the SwiGLU in its epilogue, and the small ops between
// the products fused (residual add + rmsnorm; q/k norms + RoPE + cache write).
// For more than one row (prefill) the fused products fall back to cuBLASLt.
#include "cuda.h"
#include "cuda_fused.h"
#include "cuda_gemv.cuh"
#include "cuda_rope.cuh"

#include "orin/cuda_util.cuh"
#include "orin/op_check.h"

#include <math.h>
#include <string.h>

#define CUDA ORIN_DEVICE_CUDA

// ---- the GEMV ---------------------------------------------------------------------

// Up to three weight matrices read as one (q, k, v): global row g belongs to
// segment s when begin[s] <= g < begin[s + 1].
struct gemv_segments {
    const void *w[3];
    const void *bias[3];  // NULL: none
    void *y[3];
    int begin[4];         // begin[count] = total rows
    int count;
};

// seg's fields at a segment index known only at run time, without indexing
// the parameter space (which copies it to local memory).
// (With that copy, 96 bytes a thread, a Qwen3-8B f16 step measured 5.7 ms on
// an H200; without it 4.87, in another run: bench/notes/decode.md.)
#define SEG_PICK(seg, field, s)                                                     \
    ((s) == 0 ? (seg).field[0] : (s) == 1 ? (seg).field[1] : (seg).field[2])
__device__ __forceinline__ int begin_of(const gemv_segments &seg, int s)
{
    return s == 0 ? 0 : s == 1 ? seg.begin[1] : seg.begin[2];
}
// begin[count]: the rows of every segment.
__device__ __forceinline__ int total_rows(const gemv_segments &seg)
{
    return seg.count == 1 ? seg.begin[1] : seg.count == 2 ? seg.begin[2] : seg.begin[3];
}
// The segment global row g is in.
__device__ __forceinline__ int segment_of(const gemv_segments &seg, int g)
{
    return (seg.count > 1 && g >= seg.begin[1]) + (seg.count > 2 && g >= seg.begin[2]);
}

#define GEMV_UNROLL 2


template <typename T>
__device__ __forceinline__ float dot16(uint4 raw, const float (&x)[orin_cu_vec<T>::n])
{
    const T *e = reinterpret_cast<const T *>(&raw);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < orin_cu_vec<T>::n; i++)
        s = fmaf(orin_cu_f32(e[i]), x[i], s);
    return s;
}

// bf16 to f32 is the 16 bits moved to the top: one shift or one mask an
// element, in the generic loop's order (so the same sums bit for bit). The
// generic conversion compiled to ~2 instructions an element (PRMT + IMAD /
// SHF), and bf16's narrow products ran ~0.6 us slower than f16's on an H200
// (matmul_bench: qkv 14.51 against 13.90 us, o 10.37 against 9.78).
template <>
__device__ __forceinline__ float dot16<__nv_bfloat16>(uint4 raw, const float (&x)[8])
{
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        s = fmaf(__uint_as_float(w[i] << 16), x[2 * i], s);
        s = fmaf(__uint_as_float(w[i] & 0xffff0000u), x[2 * i + 1], s);
    }
    return s;
}

// The PDL prologue of a GEMV block (orin/cuda_util.cuh): lets the next kernel
// launch, then waits for the previous one, whose output x is.
__device__ __forceinline__ void gemv_prologue()
{
    orin_cu_allow_next();
    orin_cu_wait_prior();
}

// GEMV_UNROLL chunks of every row from chunk c on.
template <typename T, int ROWS>
__device__ __forceinline__ void gemv_load_batch(uint4 (&raw)[GEMV_UNROLL][ROWS],
                                                const T *const (&w)[ROWS], int c)
{
    constexpr int V = orin_cu_vec<T>::n;
#pragma unroll
    for (int u = 0; u < GEMV_UNROLL; u++)
#pragma unroll
        for (int r = 0; r < ROWS; r++)
            raw[u][r] = load_weights16(w[r] + (size_t)(c + u * GEMV_THREADS) * V);
}

// acc[r] += W_r . x for the ROWS rows given, each of `in` elements; every
// thread takes the 16-byte chunks tid, tid + 256, ... (VEC: rows 16-byte
// aligned, in a multiple of the vector) or single elements (otherwise).
// Runs the PDL prologue itself: no kernel writes the weights, so the first
// batch of a thread's weight loads (for a 4096-wide row, all of them) goes out
// before the wait, and streams while the kernels before finish. (Into
// registers: prefetching them into L2 instead was measured slower,
// bench/notes/decode.md.)
template <typename T, int ROWS, bool VEC>
__device__ __forceinline__ void gemv_rows(const T *const (&w)[ROWS], const T *__restrict__ x,
                                          int in, float (&acc)[ROWS])
{
    if (VEC) {
        constexpr int V = orin_cu_vec<T>::n;
        const int chunks = in / V;
        int c = threadIdx.x;
        uint4 raw[GEMV_UNROLL][ROWS];
        bool preloaded = c + (GEMV_UNROLL - 1) * GEMV_THREADS < chunks;
        if (preloaded)
            gemv_load_batch<T, ROWS>(raw, w, c);
        gemv_prologue();
        // GEMV_UNROLL chunks of every row in flight before the first FMA
        for (; c + (GEMV_UNROLL - 1) * GEMV_THREADS < chunks; c += GEMV_UNROLL * GEMV_THREADS) {
            float xv[GEMV_UNROLL][V];
            if (!preloaded)
                gemv_load_batch<T, ROWS>(raw, w, c);
            preloaded = false;
#pragma unroll
            for (int u = 0; u < GEMV_UNROLL; u++)
                orin_cu_load16(x + (size_t)(c + u * GEMV_THREADS) * V, xv[u]);
#pragma unroll
            for (int u = 0; u < GEMV_UNROLL; u++)
#pragma unroll
                for (int r = 0; r < ROWS; r++)
                    acc[r] += dot16<T>(raw[u][r], xv[u]);
        }
        for (; c < chunks; c += GEMV_THREADS) {
            float xv[V];
            orin_cu_load16(x + (size_t)c * V, xv);
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                acc[r] += dot16<T>(load_weights16(w[r] + (size_t)c * V), xv);
        }
    } else {
        gemv_prologue();
        for (int k = threadIdx.x; k < in; k += GEMV_THREADS) {
            float xk = orin_cu_f32(x[k]);
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                acc[r] = fmaf(orin_cu_f32(w[r][k]), xk, acc[r]);
        }
    }
}


// y = W x (+ bias) over the segments' rows, one x row.
// Launch: grid ceil(total rows / R), 256 threads; block b owns rows bR..bR+R-1
// (each row finds its segment). Per thread R * GEMV_UNROLL 16-byte weight loads
// in flight; bound by the weight bytes (R is chosen so that the grid holds >= 3
// blocks per SM: 8 rows, 2 blocks an SM resident at 113 registers, else 4 rows,
// enough loads in flight to cover the memory latency).
template <typename T, int R, bool VEC>
__global__ void __launch_bounds__(GEMV_THREADS, R >= 8 ? 2 : 1)
    gemv_kernel(gemv_segments seg, const T *__restrict__ x, int in)
{
    const int total = total_rows(seg);
    const int row0 = blockIdx.x * R;
    const T *w[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int g = min(row0 + r, total - 1); // past the end: a real row, result dropped
        const int s = segment_of(seg, g);
        w[r] = (const T *)SEG_PICK(seg, w, s) + (size_t)(g - begin_of(seg, s)) * in;
    }
    float acc[R] = {};
    gemv_rows<T, R, VEC>(w, x, in, acc);
    float sum = gemv_block_sum<R>(acc);
    const int g = row0 + (int)threadIdx.x;
    if ((int)threadIdx.x < R && g < total) {
        const int s = segment_of(seg, g), local = g - begin_of(seg, s);
        const T *bias = (const T *)SEG_PICK(seg, bias, s);
        if (bias)
            sum += orin_cu_f32(bias[local]);
        ((T *)SEG_PICK(seg, y, s))[local] = orin_cu_from_f32<T>(sum);
    }
}

// out[j] = silu(gate_j . x) * (up_j . x), each product rounded to T first (as
// the unfused matmuls store them). Launch: grid ceil(f / R), 256 threads; a
// block reads R rows of each of the two matrices: 2R rows in flight.
template <typename T, int R, bool VEC>
__global__ void __launch_bounds__(GEMV_THREADS)
    gemv_swiglu_kernel(const T *__restrict__ wg, const T *__restrict__ wu, const T *__restrict__ x,
                       T *__restrict__ out, int in, int f)
{
    const int row0 = blockIdx.x * R;
    const T *w[2 * R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        int j = min(row0 + r, f - 1);
        w[r] = wg + (size_t)j * in;
        w[R + r] = wu + (size_t)j * in;
    }
    float acc[2 * R] = {};
    gemv_rows<T, 2 * R, VEC>(w, x, in, acc);
    __shared__ float both[2 * R];
    float sum = gemv_block_sum<2 * R>(acc);
    if (threadIdx.x < 2 * R)
        both[threadIdx.x] = orin_cu_f32(orin_cu_from_f32<T>(sum)); // rounded as stored
    __syncthreads();
    const int r = threadIdx.x;
    if (r < R && row0 + r < f) {
        float g = both[r], u = both[R + r];
        out[row0 + r] = orin_cu_from_f32<T>(g / (1.0f + expf(-g)) * u);
    }
}

// Whether every row of every matrix starts 16-byte aligned and x too.
static bool gemv_vectorizable(const void *const *w, int count, const void *x, int in,
                              orin_dtype dt)
{
    size_t row_bytes = (size_t)in * orin_dtype_size(dt);
    if (row_bytes % 16 != 0 || !orin_cu_aligned16(x))
        return false;
    for (int i = 0; i < count; i++)
        if (!orin_cu_aligned16(w[i]))
            return false;
    return true;
}

template <typename T, int R>
static void launch_gemv(const orin_exec *ex, const gemv_segments &seg, const void *x, int in,
                        bool vec)
{
    int blocks = (seg.begin[seg.count] + R - 1) / R;
    orin_cu_launch(ex, true, vec ? gemv_kernel<T, R, true> : gemv_kernel<T, R, false>,
                   dim3(blocks), dim3(GEMV_THREADS), 0, seg, (const T *)x, in);
}

template <typename T>
static void gemv_dispatch(const orin_exec *ex, const gemv_segments &seg, const void *x, int in,
                          orin_dtype dt)
{
    int rows = seg.begin[seg.count];
    bool vec = gemv_vectorizable(seg.w, seg.count, x, in, dt);
    switch (gemv_rows_per_block(ex, rows, GEMV_ROWS_MAX)) {
    case 8: launch_gemv<T, 8>(ex, seg, x, in, vec); break;
    case 4: launch_gemv<T, 4>(ex, seg, x, in, vec); break;
    case 2: launch_gemv<T, 2>(ex, seg, x, in, vec); break;
    default: launch_gemv<T, 1>(ex, seg, x, in, vec); break;
    }
}

static int run_gemv(const char *label, const orin_exec *ex, const gemv_segments &seg,
                    const void *x, int in, orin_dtype dt)
{
    ORIN_CU_DISPATCH(dt, label, T, gemv_dispatch<T>(ex, seg, x, in, dt));
    return orin_cu_launched(label, dt, "gemv: x [1, %d], %d rows in %d matrices", in,
                            seg.begin[seg.count], seg.count);
}

extern "C" bool cuda_gemv_fits(const orin_matmul_args *a)
{
    return orin_tensor_rows(&a->x) == 1 && a->w.shape[0] <= INT32_MAX &&
           a->w.shape[1] <= INT32_MAX;
}

extern "C" int cuda_gemv(const orin_exec *ex, const orin_matmul_args *a, orin_dtype dt)
{
    gemv_segments seg = {};
    seg.w[0] = a->w.data;
    seg.bias[0] = a->bias.data;
    seg.y[0] = a->y.data;
    seg.begin[0] = 0;
    seg.begin[1] = (int)a->w.shape[0];
    seg.count = 1;
    return run_gemv("matmul (common)", ex, seg, a->x.data, (int)a->w.shape[1], dt);
}

// ---- the resident GEMV: the float products with the norm folded in -------------------
//
// The GEMV above runs a block per 8 rows, thousands of blocks in many waves:
// a norm folded into it was paid once per block, 4.11 -> 5.05 ms a Qwen3-8B
// step (bench/notes/decode.md). This one keeps 2 blocks an SM resident, each
// normalising x once into shared memory (gemv_norm_row) and then looping over
// groups of rows, the next group's weights in flight while the current one is
// summed. matmul.qkv, matmul.swiglu and matmul.argmax take it for one row of
// f16/bf16 x of whole aligned vectors up to 256 x 8 x 2 wide (4,096: Qwen3-8B,
// Qwen2.5-7B) when their call carries a norm in front. Measured (H100,
// Qwen3-8B f16 at 512, the norms of q/k/v and gate/up folded): 5.475 -> 5.423
// ms a step (bench/notes/decode.md).
//
// Launch: grid min(groups, 2 x SMs, RES_MAX_BLOCKS), 256 threads, dynamic shared memory
// gemv_norm_smem(in) (16 KB at 4,096 f16). A group is RES_ROWS rows (q/k/v:
// consecutive rows across the segments; gate/up: RES_ROWS / 2 outputs, their
// gate rows then their up rows). Thread t takes chunks t and t + 256 of every
// row (U of them): per group U x RES_ROWS 16-byte loads, two groups in flight
// (2 x 2 x 4 x 16 = 256 bytes a thread, 128 KB an SM). x: the thread's U
// chunks in registers, read once from the normalised row. A group's sums meet
// in shared memory (one barrier a group; the partials alternate between two
// buffers so that the next group's writes wait for no one). Bound by the
// weight bytes, and by the one norm a block (an L2 round trip and a block
// reduction) after the PDL wait, overlapped by the first groups' loads.
// RES_ARGMAX (matmul.argmax): the rows of one segment, each group's 4 sums
// rounded to T and reduced by the greedy rule into thread 0's running best,
// which the block writes as one (value, index) pair after its last group.
#define RES_ROWS 4
#define RES_MAX_U 2

enum gemv_res_mode { RES_SEGMENTS, RES_SWIGLU, RES_ARGMAX };

struct gemv_res_params {
    gemv_segments seg;   // RES_SEGMENTS, RES_ARGMAX (one segment, no y)
    const void *wg, *wu; // RES_SWIGLU: [f, in] each
    void *out;           // RES_SWIGLU: [f]
    float *best_v;       // RES_ARGMAX: a block's best value and index [gridDim]
    int *best_j;
    int f;
    const void *x;
    int in;
    int groups;
};

// Row r (0..RES_ROWS-1) of group g: its weights.
template <typename T, int MODE>
__device__ __forceinline__ const T *res_row(const gemv_res_params &p, int g, int r)
{
    if (MODE == RES_SWIGLU) {
        constexpr int H = RES_ROWS / 2;
        const int j = min(g * H + r % H, p.f - 1); // past the end: a real row, dropped
        return (const T *)(r < H ? p.wg : p.wu) + (size_t)j * p.in;
    }
    const int g_row = min(g * RES_ROWS + r, total_rows(p.seg) - 1);
    const int s = segment_of(p.seg, g_row);
    return (const T *)SEG_PICK(p.seg, w, s) + (size_t)(g_row - begin_of(p.seg, s)) * p.in;
}

template <typename T, int MODE, int U>
__device__ __forceinline__ void res_load(uint4 (&buf)[U][RES_ROWS], const gemv_res_params &p,
                                         int g, int chunks)
{
    constexpr int V = orin_cu_vec<T>::n;
#pragma unroll
    for (int r = 0; r < RES_ROWS; r++) {
        const T *w = res_row<T, MODE>(p, g, r);
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = (int)threadIdx.x + u * GEMV_THREADS;
            buf[u][r] = c < chunks ? load_weights16(w + (size_t)c * V) : make_uint4(0, 0, 0, 0);
        }
    }
}

// Greedy decoding's rule (orin/sampler.h): whether (v, j) beats the best so far
// (bv, bj): the larger value, the lower index on ties; j < 0 stands for
// "nothing" (no value yet, or a NaN, which is never picked).
__device__ __forceinline__ bool greedy_beats(float v, int j, float bv, int bj)
{
    if (j < 0)
        return false;
    return bj < 0 || v > bv || (v == bv && j < bj);
}

__device__ __forceinline__ void greedy_take(float v, int j, float &bv, int &bj)
{
    if (greedy_beats(v, j, bv, bj)) {
        bv = v;
        bj = j;
    }
}

// Group g's sums from buf, met over the block in part (this group's partial
// buffer), written by threads 0..RES_ROWS-1 (RES_ARGMAX: taken into thread 0's
// best_v / best_j).
template <typename T, int MODE, int U>
__device__ __forceinline__ void res_finish(const uint4 (&buf)[U][RES_ROWS],
                                           const float (&xr)[U][orin_cu_vec<T>::n],
                                           const gemv_res_params &p, int g,
                                           float (&part)[GEMV_THREADS / 32][RES_ROWS],
                                           float &best_v, int &best_j)
{
    float acc[RES_ROWS];
#pragma unroll
    for (int r = 0; r < RES_ROWS; r++) {
        acc[r] = 0.0f;
#pragma unroll
        for (int u = 0; u < U; u++)
            acc[r] += dot16<T>(buf[u][r], xr[u]);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < RES_ROWS; r++) {
        const float v = orin_cu_warp_sum(acc[r]);
        if (lane == 0)
            part[warp][r] = v;
    }
    __syncthreads();
    if (threadIdx.x >= RES_ROWS)
        return;
    float sum = 0.0f;
    for (int w = 0; w < GEMV_THREADS / 32; w++)
        sum += part[w][threadIdx.x];
    if (MODE == RES_SWIGLU) {
        constexpr int H = RES_ROWS / 2;
        // thread r < H has gate row r's sum; its up row's is thread r + H's
        const float up = __shfl_down_sync(0x0000000Fu, sum, H);
        const int j = g * H + (int)threadIdx.x;
        if ((int)threadIdx.x < H && j < p.f) {
            const float gate = orin_cu_f32(orin_cu_from_f32<T>(sum)); // rounded as stored
            const float u = orin_cu_f32(orin_cu_from_f32<T>(up));
            ((T *)p.out)[j] = orin_cu_from_f32<T>(gate / (1.0f + expf(-gate)) * u);
        }
        return;
    }
    const int g_row = g * RES_ROWS + (int)threadIdx.x;
    if (MODE == RES_ARGMAX) { // the logit as matmul stores it, then the 4 rows' best
        float v = orin_cu_f32(orin_cu_from_f32<T>(sum));
        int j = g_row < total_rows(p.seg) && !isnan(v) ? g_row : -1;
#pragma unroll
        for (int off = 1; off < RES_ROWS; off <<= 1)
            greedy_take(__shfl_xor_sync(0x0000000Fu, v, off),
                        __shfl_xor_sync(0x0000000Fu, j, off), v, j);
        if (threadIdx.x == 0)
            greedy_take(v, j, best_v, best_j);
        return;
    }
    if (g_row < total_rows(p.seg)) {
        const int s = segment_of(p.seg, g_row), local = g_row - begin_of(p.seg, s);
        const T *bias = (const T *)SEG_PICK(p.seg, bias, s);
        if (bias)
            sum += orin_cu_f32(bias[local]);
        ((T *)SEG_PICK(p.seg, y, s))[local] = orin_cu_from_f32<T>(sum);
    }
}

template <typename T, int MODE, int U>
__global__ void __launch_bounds__(GEMV_THREADS, 2)
    gemv_resident_kernel(const gemv_res_params p, const gemv_norm<T> norm)
{
    constexpr int V = orin_cu_vec<T>::n;
    extern __shared__ uint4 res_smem[];
    __shared__ float scratch[32];
    __shared__ float part[2][GEMV_THREADS / 32][RES_ROWS];
    const int chunks = p.in / V;
    uint4 a[U][RES_ROWS], b[U][RES_ROWS];
    int g = blockIdx.x;
    res_load<T, MODE, U>(a, p, g, chunks); // the weights: before the PDL wait
    T *hs = reinterpret_cast<T *>(res_smem);
    gemv_norm_fetch_weight<T>(norm, p.in, hs + p.in);
    gemv_prologue();
    // each thread reads back below the chunks it normalised itself: no barrier
    gemv_norm_row<T>(norm, (const T *)p.x, p.in, hs, hs + p.in, scratch,
                     gemv_norm_put_row<T>{hs});
    float xr[U][V];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int c = (int)threadIdx.x + u * GEMV_THREADS;
        if (c < chunks)
            orin_cu_load16(hs + (size_t)c * V, xr[u]);
        else
#pragma unroll
            for (int e = 0; e < V; e++)
                xr[u][e] = 0.0f;
    }
    // groups in pairs: a's while b's load, then b's while a's load (no moves)
    float best_v = 0.0f; // RES_ARGMAX, thread 0
    int best_j = -1;
    for (;;) {
        const int g2 = g + (int)gridDim.x;
        if (g2 < p.groups)
            res_load<T, MODE, U>(b, p, g2, chunks);
        res_finish<T, MODE, U>(a, xr, p, g, part[0], best_v, best_j);
        if (g2 >= p.groups)
            break;
        const int g3 = g2 + (int)gridDim.x;
        if (g3 < p.groups)
            res_load<T, MODE, U>(a, p, g3, chunks);
        res_finish<T, MODE, U>(b, xr, p, g2, part[1], best_v, best_j);
        if (g3 >= p.groups)
            break;
        g = g3;
    }
    if (MODE == RES_ARGMAX && threadIdx.x == 0) {
        p.best_v[blockIdx.x] = best_v;
        p.best_j[blockIdx.x] = best_j;
    }
}

// Whether the resident GEMV takes a product of `in`-wide rows with this norm in
// front: one row of f16/bf16 x (at most RES_MAX_U chunks a thread), the norm
// foldable (cuda_norm_in_folds: aligned whole vectors), the weights' rows
// aligned too.
static bool resident_fits(const orin_norm_in *norm, const orin_tensor *x, const void *const *w,
                          int count, orin_dtype dt)
{
    if ((dt != ORIN_F16 && dt != ORIN_BF16) || !cuda_norm_in_folds(norm, x))
        return false;
    const int64_t in = x->shape[x->ndim - 1];
    if (in > (int64_t)GEMV_THREADS * 8 * RES_MAX_U)
        return false;
    return gemv_vectorizable(w, count, x->data, (int)in, dt);
}

// The resident GEMV's grid: 2 blocks an SM, at most RES_MAX_BLOCKS (the
// argmax's partials are sized by it without knowing the device).
#define RES_MAX_BLOCKS 1024
static int resident_blocks(const orin_exec *ex, int groups)
{
    return min(min(groups, 2 * orin_cu_sm_count(ex)), RES_MAX_BLOCKS);
}

template <typename T, int MODE>
static void launch_resident(const orin_exec *ex, gemv_res_params p, int rows,
                            const orin_norm_in *norm)
{
    constexpr int V = orin_cu_vec<T>::n;
    p.groups = (rows + RES_ROWS - 1) / RES_ROWS;
    const int blocks = resident_blocks(ex, p.groups);
    const gemv_norm<T> np = {(const T *)norm->residual.data, (const T *)norm->weight.data,
                             (T *)norm->x_out.data, norm->eps};
    const size_t smem = gemv_norm_smem(p.in, sizeof(T));
    if (p.in / V > GEMV_THREADS)
        orin_cu_launch(ex, true, gemv_resident_kernel<T, MODE, 2>, dim3(blocks),
                       dim3(GEMV_THREADS), smem, p, np);
    else
        orin_cu_launch(ex, true, gemv_resident_kernel<T, MODE, 1>, dim3(blocks),
                       dim3(GEMV_THREADS), smem, p, np);
}

// ---- the float products' norm in front -----------------------------------------------

// A float product's norm in front (orin_norm_in), run apart: add_rmsnorm into
// the workspace first (cuda_norm_in_apart), *a then the call over its rows
// without the norm (in *normed) and *ex the workspace after them. Folded into
// the float GEMV the norm cost more than its kernel: each of the GEMV's
// thousands of blocks paid its latency (bench/notes/decode.md).
template <typename Args>
static int norm_apart(const orin_exec **ex, orin_exec *rest, const Args **a, Args *normed,
                      orin_dtype dt, const char *label)
{
    if (!(*a)->norm.weight.data)
        return 0;
    *normed = **a;
    normed->norm = (orin_norm_in){};
    if (cuda_norm_in_apart(*ex, &(*a)->norm, &normed->x, rest, dt, label) != 0)
        return -1;
    *a = normed;
    *ex = rest;
    return 0;
}

// ---- matmul.qkv ---------------------------------------------------------------------

static int check_qkv(const char *label, const orin_exec *ex, const orin_matmul_qkv_args *a,
                     orin_dtype dt)
{
    static const char *const w_names[3] = {"w[0]", "w[1]", "w[2]"};
    static const char *const b_names[3] = {"bias[0]", "bias[1]", "bias[2]"};
    static const char *const y_names[3] = {"y[0]", "y[1]", "y[2]"};
    if (orin_check_exec(label, ex, CUDA) ||
        orin_check_tensor(label, "x", &a->x, CUDA, dt, 2, 2))
        return -1;
    const int64_t n = a->x.shape[0], in = a->x.shape[1];
    for (int i = 0; i < 3; i++) {
        const orin_tensor *w = &a->w[i], *b = &a->bias[i], *y = &a->y[i];
        if (orin_check_tensor(label, w_names[i], w, CUDA, dt, 2, 2) ||
            orin_check_dim(label, w_names[i], w, 1, in) ||
            orin_check_tensor(label, y_names[i], y, CUDA, dt, 2, 2) ||
            orin_check_dim(label, y_names[i], y, 0, n) ||
            orin_check_dim(label, y_names[i], y, 1, w->shape[0]) ||
            orin_check_alias(label, y_names[i], y, "x", &a->x, false) ||
            orin_check_norm_out(label, &a->norm, y_names[i], y))
            return -1;
        if (b->data && (orin_check_tensor(label, b_names[i], b, CUDA, dt, 1, 1) ||
                        orin_check_dim(label, b_names[i], b, 0, w->shape[0])))
            return -1;
    }
    if (in > INT32_MAX || a->w[0].shape[0] + a->w[1].shape[0] + a->w[2].shape[0] > INT32_MAX)
        return orin_error_set("%s: dimensions beyond 2^31", label);
    return orin_check_norm_in(label, &a->norm, &a->x, CUDA, dt);
}

// Whether w[0..2] (and the biases, all or none) lie back to back in memory, as
// one [out0 + out1 + out2, in] matrix: the model stacks them at load.
static bool qkv_stacked(const orin_matmul_qkv_args *a, size_t elem)
{
    const int64_t in = a->x.shape[1];
    const bool bias = a->bias[0].data != NULL;
    for (int i = 1; i < 3; i++) {
        const char *w_end = (const char *)a->w[i - 1].data + (size_t)(a->w[i - 1].shape[0] * in) * elem;
        const char *b_end = bias ? (const char *)a->bias[i - 1].data +
                                       (size_t)a->w[i - 1].shape[0] * elem
                                 : NULL;
        if ((const char *)a->w[i].data != w_end || (a->bias[i].data != NULL) != bias ||
            (bias && (const char *)a->bias[i].data != b_end))
            return false;
    }
    return true;
}

// Bytes of the stacked product's [n, out0 + out1 + out2] result in the workspace
// (256-aligned: the matmul's own workspace follows it).
static size_t qkv_stacked_bytes(const orin_matmul_qkv_args *a, size_t elem)
{
    const int64_t total = a->w[0].shape[0] + a->w[1].shape[0] + a->w[2].shape[0];
    return ((size_t)(a->x.shape[0] * total) * elem + 255) & ~(size_t)255;
}

// y[p][r, :] = wide[r, begin[p] .. begin[p + 1]): the stacked product's columns
// into q, k and v. Launch: grid min(ceil(units / 256), 32 * SMs), block 256, a
// 16-byte vector a thread per turn (N elements; every width a multiple of N)
// or an element (N 1); no shared memory. Bound by memory bandwidth (a prefill chunk of
// Qwen3-8B: 2 x 12 MB at n = 1024).
template <typename T, int N>
__global__ void qkv_split_kernel(const T *__restrict__ wide, T *y0, T *y1, T *y2, int64_t n,
                                 int out0, int out1, int out2)
{
    const int total = out0 + out1 + out2, row_units = total / N;
    const int64_t units = n * row_units;
    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < units;
         u += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = u / row_units;
        const int c = (int)(u - r * row_units) * N;
        T *dst = c < out0 ? y0 + r * out0 + c
                 : c < out0 + out1 ? y1 + r * out1 + (c - out0)
                                   : y2 + r * out2 + (c - out0 - out1);
        const T *src = wide + r * total + c;
        if constexpr (N > 1)
            *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
        else
            *dst = *src;
    }
}

// Prefill over stacked weights: one cuBLASLt product into the workspace, then
// the split. Qwen3-8B at 782 rows: q, k, v as three products ran at 361
// TFLOP/s (k and v, 1,024 columns each, fill 56 of 132 SMs), as one 6,144
// columns wide the products run like o_proj's (~700).
template <typename T>
static int qkv_prefill_stacked(const orin_exec *ex, const orin_matmul_qkv_args *a, orin_dtype dt,
                               const char *label)
{
    const size_t elem = sizeof(T), wide_bytes = qkv_stacked_bytes(a, elem);
    const int64_t n = a->x.shape[0], in = a->x.shape[1];
    const int out0 = (int)a->w[0].shape[0], out1 = (int)a->w[1].shape[0];
    const int out2 = (int)a->w[2].shape[0], total = out0 + out1 + out2;
    if (!ex->workspace || ex->workspace_size < wide_bytes)
        return orin_error_set("%s: workspace of %zu bytes, needs %zu", label, ex->workspace_size,
                              cuda_matmul_qkv_workspace_size(a));
    void *wide = ex->workspace;
    void *ws;
    const size_t ws_bytes = cuda_matmul_usable_workspace((char *)ex->workspace + wide_bytes,
                                                         ex->workspace_size - wide_bytes, &ws);
    const cuda_gemm g = {
        .n = n, .in = in, .out = total,
        .x = a->x.data, .w = a->w[0].data, .bias = a->bias[0].data, .y = wide,
        .w_kmajor = false, .ldw = in, .ldy = total, .accumulate = false, .gelu_tanh = false,
    };
    if (cuda_lt_gemm(ex, label, dt, &g, ws, ws_bytes) != 0)
        return -1;
    constexpr int N = orin_cu_vec<T>::n;
    const bool vec = out0 % N == 0 && out1 % N == 0 && out2 % N == 0 &&
                     orin_cu_aligned16(wide) && orin_cu_aligned16(a->y[0].data) &&
                     orin_cu_aligned16(a->y[1].data) && orin_cu_aligned16(a->y[2].data);
    const int64_t units = n * (vec ? total / N : total);
    const unsigned grid = orin_cu_grid_for(ex, units, 256);
    T *y0 = (T *)a->y[0].data, *y1 = (T *)a->y[1].data, *y2 = (T *)a->y[2].data;
    if (vec)
        qkv_split_kernel<T, N><<<grid, 256, 0, orin_cu_stream(ex)>>>((const T *)wide, y0, y1, y2,
                                                                    n, out0, out1, out2);
    else
        qkv_split_kernel<T, 1><<<grid, 256, 0, orin_cu_stream(ex)>>>((const T *)wide, y0, y1, y2,
                                                                    n, out0, out1, out2);
    return orin_cu_launched(label, dt, "split of [%lld, %d]", (long long)n, total);
}

extern "C" int cuda_matmul_qkv(const orin_exec *ex, const orin_matmul_qkv_args *a, orin_dtype dt)
{
    const char *label = "matmul.qkv (common)";
    if (check_qkv(label, ex, a, dt))
        return -1;
    const void *w3[3] = {a->w[0].data, a->w[1].data, a->w[2].data};
    if (a->norm.weight.data && resident_fits(&a->norm, &a->x, w3, 3, dt)) {
        gemv_res_params p = {};
        p.seg.count = 3;
        for (int i = 0; i < 3; i++) {
            p.seg.w[i] = a->w[i].data;
            p.seg.bias[i] = a->bias[i].data;
            p.seg.y[i] = a->y[i].data;
            p.seg.begin[i + 1] = p.seg.begin[i] + (int)a->w[i].shape[0];
        }
        p.x = a->x.data;
        p.in = (int)a->x.shape[1];
        ORIN_CU_DISPATCH(dt, label, T,
                         launch_resident<T, RES_SEGMENTS>(ex, p, p.seg.begin[3], &a->norm));
        return orin_cu_launched(label, dt, "resident gemv, norm in front: x [1, %d], %d rows",
                                p.in, p.seg.begin[3]);
    }
    orin_matmul_qkv_args normed;
    orin_exec rest;
    if (norm_apart(&ex, &rest, &a, &normed, dt, label) != 0)
        return -1;
    if (a->x.shape[0] > 1 && qkv_stacked(a, orin_dtype_size(dt))) {
        int rc = -1;
        ORIN_CU_DISPATCH(dt, label, T, rc = qkv_prefill_stacked<T>(ex, a, dt, label));
        return rc;
    }
    if (a->x.shape[0] > 1) { // prefill: three cuBLASLt products
        for (int i = 0; i < 3; i++) {
            orin_matmul_args m = {.x = a->x, .w = a->w[i], .bias = a->bias[i], .y = a->y[i]};
            if (cuda_matmul(ex, &m, dt) != 0)
                return -1;
        }
        return 0;
    }
    gemv_segments seg = {};
    seg.count = 3;
    for (int i = 0; i < 3; i++) {
        seg.w[i] = a->w[i].data;
        seg.bias[i] = a->bias[i].data;
        seg.y[i] = a->y[i].data;
        seg.begin[i + 1] = seg.begin[i] + (int)a->w[i].shape[0];
    }
    return run_gemv(label, ex, seg, a->x.data, (int)a->x.shape[1], dt);
}

// The matmul's, plus room for a stacked prefill's wide result (any call may be
// one), plus the normalised x where a norm in front is asked for.
extern "C" size_t cuda_matmul_qkv_workspace_size(const void *args)
{
    const orin_matmul_qkv_args *a = (const orin_matmul_qkv_args *)args;
    size_t wide = 0;
    if (a && a->x.ndim == 2 && a->x.shape[0] > 1)
        wide = qkv_stacked_bytes(a, orin_dtype_size(a->x.dtype));
    return (a ? cuda_norm_in_bytes(&a->norm, &a->x) : 0) + wide +
           cuda_matmul_workspace_size(args);
}

// ---- matmul.swiglu ------------------------------------------------------------------

static int check_swiglu(const char *label, const orin_exec *ex, const orin_matmul_swiglu_args *a,
                        orin_dtype dt)
{
    if (orin_check_exec(label, ex, CUDA) ||
        orin_check_tensor(label, "x", &a->x, CUDA, dt, 2, 2) ||
        orin_check_tensor(label, "w_gate", &a->w_gate, CUDA, dt, 2, 2) ||
        orin_check_same_shape(label, "w_gate", &a->w_gate, "w_up", &a->w_up) ||
        orin_check_tensor(label, "w_up", &a->w_up, CUDA, dt, 2, 2) ||
        orin_check_dim(label, "w_gate", &a->w_gate, 1, a->x.shape[1]) ||
        orin_check_tensor(label, "out", &a->out, CUDA, dt, 2, 2) ||
        orin_check_dim(label, "out", &a->out, 0, a->x.shape[0]) ||
        orin_check_dim(label, "out", &a->out, 1, a->w_gate.shape[0]) ||
        orin_check_alias(label, "out", &a->out, "x", &a->x, false) ||
        orin_check_norm_in(label, &a->norm, &a->x, CUDA, dt) ||
        orin_check_norm_out(label, &a->norm, "out", &a->out))
        return -1;
    if (a->x.shape[1] > INT32_MAX || a->w_gate.shape[0] > INT32_MAX)
        return orin_error_set("%s: dimensions beyond 2^31", label);
    return 0;
}

// Whether w_up follows w_gate in memory, one [2f, in] matrix (the model
// stacks them at load): a prefill then runs one GEMM 2f wide.
static bool swiglu_stacked(const orin_matmul_swiglu_args *a)
{
    const size_t bytes = (size_t)(a->w_gate.shape[0] * a->w_gate.shape[1]) *
                         orin_dtype_size(a->x.dtype);
    return (const char *)a->w_up.data == (const char *)a->w_gate.data + bytes;
}

// The prefill's products in the workspace: gate and up [n, 2f] over stacked
// weights, else up [n, f]; sized for the stacked case whatever the pointers,
// so that the size follows the shapes alone (the model's memory plan asks
// with calls that have no data); 256-aligned, the matmul's workspace follows.
static size_t swiglu_up_bytes(const orin_matmul_swiglu_args *a)
{
    size_t bytes = 2 * (size_t)a->x.shape[0] * (size_t)a->w_up.shape[0] *
                   orin_dtype_size(a->x.dtype);
    return (bytes + 255) / 256 * 256;
}

extern "C" size_t cuda_matmul_swiglu_workspace_size(const void *args)
{
    const orin_matmul_swiglu_args *a = (const orin_matmul_swiglu_args *)args;
    return cuda_norm_in_bytes(&a->norm, &a->x) + swiglu_up_bytes(a) +
           cuda_matmul_workspace_size(args);
}

template <typename T>
static void swiglu_dispatch(const orin_exec *ex, const orin_matmul_swiglu_args *a, int in, int f)
{
    int R = gemv_rows_per_block(ex, f, 4); // 2R rows a block
    const void *w[2] = {a->w_gate.data, a->w_up.data};
    bool vec = gemv_vectorizable(w, 2, a->x.data, in, a->x.dtype);
    const T *wg = (const T *)a->w_gate.data, *wu = (const T *)a->w_up.data;
    const T *x = (const T *)a->x.data;
    T *out = (T *)a->out.data;
#define SWIGLU_LAUNCH(RR)                                                                   \
    orin_cu_launch(ex, true,                                                                \
                   vec ? gemv_swiglu_kernel<T, RR, true> : gemv_swiglu_kernel<T, RR, false>, \
                   dim3((f + RR - 1) / RR), dim3(GEMV_THREADS), 0, wg, wu, x, out, in, f)
    if (R == 4)
        SWIGLU_LAUNCH(4);
    else if (R == 2)
        SWIGLU_LAUNCH(2);
    else
        SWIGLU_LAUNCH(1);
#undef SWIGLU_LAUNCH
}

extern "C" int cuda_matmul_swiglu(const orin_exec *ex, const orin_matmul_swiglu_args *a,
                                  orin_dtype dt)
{
    const char *label = "matmul.swiglu (common)";
    if (check_swiglu(label, ex, a, dt))
        return -1;
    const void *w2[2] = {a->w_gate.data, a->w_up.data};
    if (a->norm.weight.data && resident_fits(&a->norm, &a->x, w2, 2, dt)) {
        gemv_res_params p = {};
        p.wg = a->w_gate.data;
        p.wu = a->w_up.data;
        p.out = a->out.data;
        p.f = (int)a->w_gate.shape[0];
        p.x = a->x.data;
        p.in = (int)a->x.shape[1];
        // RES_ROWS / 2 outputs a group
        ORIN_CU_DISPATCH(dt, label, T,
                         launch_resident<T, RES_SWIGLU>(ex, p, 2 * p.f, &a->norm));
        return orin_cu_launched(label, dt, "resident gemv, norm in front: x [1, %d], f %d",
                                p.in, p.f);
    }
    orin_matmul_swiglu_args normed;
    orin_exec rest;
    if (norm_apart(&ex, &rest, &a, &normed, dt, label) != 0)
        return -1;
    const int64_t n = a->x.shape[0], in = a->x.shape[1], f = a->w_gate.shape[0];
    if (n > 1) { // prefill: one GEMM over stacked weights, or gate into out and up
                 // into the workspace; then the SwiGLU
        size_t up_bytes = swiglu_up_bytes(a);
        if (!ex->workspace || ex->workspace_size < cuda_matmul_swiglu_workspace_size(a))
            return orin_error_set("%s: workspace of %zu bytes, needs %zu", label,
                                  ex->workspace_size, cuda_matmul_swiglu_workspace_size(a));
        const int64_t dims[2] = {n, f};
        orin_tensor up = orin_tensor_make(ex->workspace, dt, CUDA, 2, dims);
        orin_exec rest = *ex;
        rest.workspace = (char *)ex->workspace + up_bytes;
        rest.workspace_size = ex->workspace_size - up_bytes;
        if (swiglu_stacked(a)) { // gate and up as one GEMM into [n, 2f], then the SwiGLU
            void *ws;
            const size_t ws_bytes = cuda_matmul_usable_workspace(rest.workspace,
                                                                 rest.workspace_size, &ws);
            const cuda_gemm wide = {
                .n = n, .in = in, .out = 2 * f,
                .x = a->x.data, .w = a->w_gate.data, .bias = NULL, .y = ex->workspace,
                .w_kmajor = false, .ldw = in, .ldy = 2 * f, .accumulate = false,
                .gelu_tanh = false,
            };
            if (cuda_lt_gemm(ex, label, dt, &wide, ws, ws_bytes) != 0)
                return -1;
            return cuda_swiglu_rows(ex, ex->workspace, a->out.data, n, f, dt);
        }
        orin_matmul_args g = {.x = a->x, .w = a->w_gate, .bias = {}, .y = a->out};
        orin_matmul_args u = {.x = a->x, .w = a->w_up, .bias = {}, .y = up};
        orin_swiglu_args s = {.gate = a->out, .up = up, .out = a->out};
        if (cuda_matmul(&rest, &g, dt) != 0 || cuda_matmul(&rest, &u, dt) != 0 ||
            cuda_swiglu(ex, &s, dt) != 0)
            return -1;
        return 0;
    }
    ORIN_CU_DISPATCH(dt, label, T, swiglu_dispatch<T>(ex, a, (int)in, (int)f));
    return orin_cu_launched(label, dt, "x [1, %lld], w_gate/w_up [%lld, %lld]", (long long)in,
                            (long long)f, (long long)in);
}

// ---- matmul.argmax ------------------------------------------------------------------

static int check_matmul_argmax(const char *label, const orin_exec *ex,
                               const orin_matmul_argmax_args *a, orin_dtype dt)
{
    if (orin_check_exec(label, ex, CUDA) ||
        orin_check_tensor(label, "x", &a->x, CUDA, dt, 2, 2) ||
        orin_check_dim(label, "x", &a->x, 0, 1) ||
        orin_check_tensor(label, "w", &a->w, CUDA, dt, 2, 2) ||
        orin_check_dim(label, "w", &a->w, 1, a->x.shape[1]) ||
        orin_check_tensor(label, "id", &a->id, CUDA, ORIN_I32, 1, 1) ||
        orin_check_dim(label, "id", &a->id, 0, 1) ||
        orin_check_alias(label, "id", &a->id, "x", &a->x, false) ||
        orin_check_alias(label, "id", &a->id, "w", &a->w, false) ||
        orin_check_norm_in(label, &a->norm, &a->x, CUDA, dt) ||
        orin_check_norm_out(label, &a->norm, "id", &a->id))
        return -1;
    if (a->x.shape[1] > INT32_MAX || a->w.shape[0] > INT32_MAX)
        return orin_error_set("%s: dimensions beyond 2^31", label);
    return 0;
}

// The workspace: the norm's row where it runs apart, then the resident
// blocks' (value, index) pairs (RES_MAX_BLOCKS of each), then, where the
// resident GEMV does not fit, the logits [V] of the plain GEMV.
static size_t argmax_pairs_bytes(void)
{
    return (size_t)RES_MAX_BLOCKS * (sizeof(float) + sizeof(int));
}

extern "C" size_t cuda_matmul_argmax_workspace_size(const void *args)
{
    const orin_matmul_argmax_args *a = (const orin_matmul_argmax_args *)args;
    const size_t logits = (size_t)a->w.shape[0] * orin_dtype_size(a->x.dtype);
    return cuda_norm_in_bytes(&a->norm, &a->x) + argmax_pairs_bytes() + (logits + 255) / 256 * 256;
}

// id[0] by the greedy rule over n candidates: logits [n] of T (the plain
// GEMV's), or n (value, index) pairs (the resident GEMV's blocks). Launch: one
// block of PICK_THREADS; thread t scans t, t + PICK_THREADS, ..., then the
// warps and the block reduce by greedy_beats (a total order on distinct
// indices, so neither order changes the pick). Latency-bound: a few hundred
// pairs, or 151,936 logits (148 a thread) on the plain path.
#define PICK_THREADS 1024
template <typename T>
__global__ void __launch_bounds__(PICK_THREADS)
    greedy_pick_kernel(const T *logits, const float *pair_v, const int *pair_j, int n, int32_t *id)
{
    __shared__ float warp_v[PICK_THREADS / 32];
    __shared__ int warp_j[PICK_THREADS / 32];
    orin_cu_allow_next();
    orin_cu_wait_prior();
    float v = 0.0f;
    int j = -1;
    for (int i = (int)threadIdx.x; i < n; i += PICK_THREADS) {
        if (logits) {
            const float x = orin_cu_f32(logits[i]);
            greedy_take(x, isnan(x) ? -1 : i, v, j);
        } else {
            greedy_take(pair_v[i], pair_j[i], v, j);
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        greedy_take(__shfl_xor_sync(0xffffffffu, v, off), __shfl_xor_sync(0xffffffffu, j, off),
                    v, j);
    if (lane == 0) {
        warp_v[warp] = v;
        warp_j[warp] = j;
    }
    __syncthreads();
    if (warp != 0)
        return;
    v = warp_v[lane];
    j = warp_j[lane];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        greedy_take(__shfl_xor_sync(0xffffffffu, v, off), __shfl_xor_sync(0xffffffffu, j, off),
                    v, j);
    if (lane == 0)
        *id = j;
}

// Final norm + lm_head + the greedy pick. Where the resident GEMV takes the
// row (a norm in front, f16/bf16, aligned, in <= 4,096), it normalises x once
// a block, streams the rows and keeps each block's best: no logits are
// written, and one small kernel picks among the blocks. Elsewhere: the norm
// apart, the plain GEMV into the workspace, the pick over its logits. Both:
// the logits rounded to T as matmul stores them, so the same id as the
// sequence.
extern "C" int cuda_matmul_argmax(const orin_exec *ex, const orin_matmul_argmax_args *a,
                                  orin_dtype dt)
{
    const char *label = "matmul.argmax (common)";
    if (check_matmul_argmax(label, ex, a, dt))
        return -1;
    const size_t need = cuda_matmul_argmax_workspace_size(a);
    if (!ex->workspace || ex->workspace_size < need || !orin_cu_aligned16(ex->workspace))
        return orin_error_set("%s: workspace of %zu bytes, needs %zu, 16-byte aligned", label,
                              ex->workspace_size, need);
    const int V = (int)a->w.shape[0], in = (int)a->x.shape[1];
    int32_t *id = (int32_t *)a->id.data;
    const void *w1[1] = {a->w.data};
    if (a->norm.weight.data && resident_fits(&a->norm, &a->x, w1, 1, dt)) {
        gemv_res_params p = {};
        p.seg.count = 1;
        p.seg.w[0] = a->w.data;
        p.seg.begin[1] = V;
        p.x = a->x.data;
        p.in = in;
        p.best_v = (float *)ex->workspace;
        p.best_j = (int *)(p.best_v + RES_MAX_BLOCKS);
        const int blocks = resident_blocks(ex, (V + RES_ROWS - 1) / RES_ROWS);
        ORIN_CU_DISPATCH(dt, label, T, {
            launch_resident<T, RES_ARGMAX>(ex, p, V, &a->norm);
            orin_cu_launch(ex, true, greedy_pick_kernel<T>, dim3(1), dim3(PICK_THREADS), 0,
                           (const T *)NULL, (const float *)p.best_v, (const int *)p.best_j,
                           blocks, id);
        });
        return orin_cu_launched(label, dt, "resident gemv, norm in front: x [1, %d], %d rows, "
                                "%d blocks, then the pick", in, V, blocks);
    }
    orin_matmul_argmax_args normed;
    orin_exec rest;
    if (norm_apart(&ex, &rest, &a, &normed, dt, label) != 0)
        return -1;
    void *logits = (char *)ex->workspace + argmax_pairs_bytes();
    gemv_segments seg = {};
    seg.w[0] = a->w.data;
    seg.y[0] = logits;
    seg.begin[1] = V;
    seg.count = 1;
    if (run_gemv(label, ex, seg, a->x.data, in, dt) != 0)
        return -1;
    ORIN_CU_DISPATCH(dt, label, T,
                     orin_cu_launch(ex, true, greedy_pick_kernel<T>, dim3(1), dim3(PICK_THREADS),
                                    0, (const T *)logits, (const float *)NULL, (const int *)NULL,
                                    V, id));
    return orin_cu_launched(label, dt, "gemv into the workspace: x [1, %d], %d rows, then the "
                            "pick", in, V);
}

// ---- add_rmsnorm --------------------------------------------------------------------

// Row blockIdx.x of the add_rmsnorm kernels' operands; `write`: x_out gets the
// sum (a residual), or the copy (x_out apart from x).
template <typename T> struct norm_row {
    const T *x;
    T *x_out;
    const T *residual;
    bool write;
};

template <typename T>
__device__ __forceinline__ norm_row<T> norm_row_of(const T *xin, T *xout, const T *residual, int d)
{
    const size_t off = (size_t)blockIdx.x * d;
    return {xin + off, xout + off, residual ? residual + off : nullptr,
            residual != nullptr || xout != xin};
}

// xout[row] = round(xin + residual); out[row] = w * (xout * 1/sqrt(mean(xout^2)
// + eps)), the sum of squares over the rounded sum in f32, as add then rmsnorm
// compute it. xout is xin (the op: in place; nothing written without a
// residual) or apart from it (a fused product's norm run apart: the sum, or
// the copy, written there). Launch: one block of 256 threads per row; the row
// is read twice (the second time from L1/L2); bound by launch latency at
// decode sizes (d = 4096: 8 KB).
template <typename T>
__global__ void __launch_bounds__(256)
    add_rmsnorm_kernel(const T *xin, T *xout, const T *__restrict__ residual,
                       const T *__restrict__ weight, T *__restrict__ out, int d, float eps)
{
    __shared__ float scratch[32];
    orin_cu_allow_next();
    orin_cu_wait_prior();
    const norm_row<T> row = norm_row_of(xin, xout, residual, d);
    const T *xr = row.x, *rr = row.residual;
    T *xw = row.x_out;
    const bool write = row.write;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float v = orin_cu_f32(xr[j]);
        if (rr)
            v = orin_cu_f32(orin_cu_from_f32<T>(v + orin_cu_f32(rr[j])));
        if (write)
            xw[j] = orin_cu_from_f32<T>(v);
        ss = fmaf(v, v, ss);
    }
    ss = orin_cu_block_sum(ss, scratch);
    const float inv = 1.0f / sqrtf(ss / (float)d + eps);
    T *orow = out + (size_t)blockIdx.x * d;
    const T *sum = write ? xw : xr; // this thread's own elements, written above
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        orow[j] = orin_cu_from_f32<T>(orin_cu_f32(weight[j]) * (orin_cu_f32(sum[j]) * inv));
}

// The same with 16-byte vectors, the row kept in registers between the sum and
// the writes (V vectors a thread at most: d <= V * 256 * 8 in f16/bf16), for
// rows that are whole vectors with every pointer 16-byte aligned. The scalar
// kernel's 2-byte accesses, a dependent load and store per element and a
// second read of the row, took 18-27 us a call over a 782-row prefill chunk of
// Qwen3-8B (6.4 MB a tensor) on an H200. Same launch, same roundings; the sum of
// squares adds in another order (f32, within its rounding).
// (gemv_norm_row, cuda_gemv.cuh, adds in this order too: a fused product's
// norm is this kernel's bit for bit.)
template <typename T, int V>
__global__ void __launch_bounds__(256)
    add_rmsnorm_vec_kernel(const T *xin, T *xout, const T *__restrict__ residual,
                           const T *__restrict__ weight, T *__restrict__ out, int d, float eps)
{
    constexpr int N = orin_cu_vec<T>::n;
    __shared__ float scratch[32];
    const int units = d / N;
    // the weight is never written by a kernel: its loads go out before the
    // PDL wait, taking an L2 round trip off the critical path after it
    uint4 wraw[V];
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int u = threadIdx.x + 256 * i;
        if (u < units)
            wraw[i] = *reinterpret_cast<const uint4 *>(weight + u * N);
    }
    orin_cu_allow_next();
    orin_cu_wait_prior();
    const norm_row<T> row = norm_row_of(xin, xout, residual, d);
    const T *xr = row.x, *rr = row.residual;
    T *xw = row.x_out;
    const bool write = row.write;
    float v[V][N];
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int u = threadIdx.x + 256 * i;
        if (u >= units)
            break;
        orin_cu_load16(xr + u * N, v[i]);
        if (rr) {
            float r[N];
            orin_cu_load16(rr + u * N, r);
#pragma unroll
            for (int e = 0; e < N; e++) /* the sum as add stores it */
                v[i][e] = orin_cu_f32(orin_cu_from_f32<T>(v[i][e] + r[e]));
        }
        if (write)
            orin_cu_store16(xw + u * N, v[i]);
#pragma unroll
        for (int e = 0; e < N; e++)
            ss = fmaf(v[i][e], v[i][e], ss);
    }
    ss = orin_cu_block_sum(ss, scratch);
    const float inv = 1.0f / sqrtf(ss / (float)d + eps);
    T *orow = out + (size_t)blockIdx.x * d;
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int u = threadIdx.x + 256 * i;
        if (u >= units)
            break;
        const T *w = reinterpret_cast<const T *>(&wraw[i]);
#pragma unroll
        for (int e = 0; e < N; e++)
            v[i][e] = orin_cu_f32(w[e]) * (v[i][e] * inv);
        orin_cu_store16(orow + u * N, v[i]);
    }
}

// rows of xin (+ r) into xout (xin itself: in place) and out (rmsnorm * w).
template <typename T>
static void launch_add_rmsnorm(const orin_exec *ex, const void *xin, void *xout, const void *r,
                               const void *w, void *out, float eps, int64_t rows, int d)
{
    constexpr int N = orin_cu_vec<T>::n;
    const bool vec = d % N == 0 && orin_cu_aligned16(xin) && orin_cu_aligned16(xout) &&
                     orin_cu_aligned16(out) && orin_cu_aligned16(w) &&
                     (!r || orin_cu_aligned16(r));
    const dim3 grid((unsigned)rows), block(256);
    const T *xi = (const T *)xin, *rr = (const T *)r, *ww = (const T *)w;
    T *xo = (T *)xout, *o = (T *)out;
    if (vec && d <= 256 * N * 2)
        orin_cu_launch(ex, true, add_rmsnorm_vec_kernel<T, 2>, grid, block, 0, xi, xo, rr, ww, o,
                       d, eps);
    else if (vec && d <= 256 * N * 8)
        orin_cu_launch(ex, true, add_rmsnorm_vec_kernel<T, 8>, grid, block, 0, xi, xo, rr, ww, o,
                       d, eps);
    else
        orin_cu_launch(ex, true, add_rmsnorm_kernel<T>, grid, block, 0, xi, xo, rr, ww, o, d, eps);
}

extern "C" int cuda_add_rmsnorm(const orin_exec *ex, const orin_add_rmsnorm_args *a, orin_dtype dt)
{
    const char *label = "add_rmsnorm (common)";
    /* rmsnorm's call, with out apart from x (x is rewritten first), and the
     * residual shaped like x and apart from both */
    const orin_rmsnorm_args norm = {.x = a->x, .weight = a->weight, .out = a->out, .eps = a->eps};
    if (orin_check_rmsnorm(label, ex, &norm, CUDA, dt) ||
        orin_check_alias(label, "out", &a->out, "x", &a->x, false))
        return -1;
    if (a->residual.data &&
        (orin_check_tensor(label, "residual", &a->residual, CUDA, dt, 1, ORIN_MAX_DIMS) ||
         orin_check_same_shape(label, "x", &a->x, "residual", &a->residual) ||
         orin_check_alias(label, "x", &a->x, "residual", &a->residual, false) ||
         orin_check_alias(label, "out", &a->out, "residual", &a->residual, false)))
        return -1;
    const int64_t d = a->x.shape[a->x.ndim - 1], rows = orin_tensor_rows(&a->x);
    if (d > INT32_MAX || rows > INT32_MAX)
        return orin_error_set("%s: dimensions beyond 2^31", label);
    ORIN_CU_DISPATCH(dt, label, T,
                     launch_add_rmsnorm<T>(ex, a->x.data, a->x.data, a->residual.data,
                                           a->weight.data, a->out.data, a->eps, rows, (int)d));
    return orin_cu_launched(label, dt, "x [%lld, %lld]%s", (long long)rows, (long long)d,
                            a->residual.data ? " + residual" : "");
}

// ---- a fused product's add + rmsnorm (orin_norm_in) -----------------------------------

extern "C" bool cuda_norm_in_folds(const orin_norm_in *norm, const orin_tensor *x)
{
    const size_t elem = orin_dtype_size(x->dtype);
    const int64_t d = x->shape[x->ndim - 1];
    return norm->weight.data && orin_tensor_rows(x) == 1 && (d * (int64_t)elem) % 16 == 0 &&
           gemv_norm_smem(d, elem) <= GEMV_NORM_SMEM_MAX && orin_cu_aligned16(x->data) &&
           orin_cu_aligned16(norm->weight.data) && orin_cu_aligned16(norm->x_out.data) &&
           (!norm->residual.data || orin_cu_aligned16(norm->residual.data));
}

extern "C" size_t cuda_norm_in_bytes(const orin_norm_in *norm, const orin_tensor *x)
{
    if (!norm->weight.data)
        return 0;
    return ((size_t)orin_tensor_numel(x) * orin_dtype_size(x->dtype) + 255) & ~(size_t)255;
}

extern "C" int cuda_norm_in_apart(const orin_exec *ex, const orin_norm_in *norm, orin_tensor *x,
                                  orin_exec *rest, orin_dtype dt, const char *label)
{
    const size_t bytes = cuda_norm_in_bytes(norm, x);
    if (!ex->workspace || ex->workspace_size < bytes)
        return orin_error_set("%s: workspace of %zu bytes, the norm in front needs %zu", label,
                              ex->workspace_size, bytes);
    const int64_t d = x->shape[x->ndim - 1], rows = orin_tensor_rows(x);
    if (d > INT32_MAX || rows > INT32_MAX)
        return orin_error_set("%s: dimensions beyond 2^31", label);
    ORIN_CU_DISPATCH(dt, label, T,
                     launch_add_rmsnorm<T>(ex, x->data, norm->x_out.data, norm->residual.data,
                                           norm->weight.data, ex->workspace, norm->eps, rows,
                                           (int)d));
    if (orin_cu_launched(label, dt, "norm in front, x [%lld, %lld]", (long long)rows,
                         (long long)d) != 0)
        return -1;
    x->data = ex->workspace;
    *rest = *ex;
    rest->workspace = (char *)ex->workspace + bytes;
    rest->workspace_size = ex->workspace_size - bytes;
    return 0;
}

// ---- rope_kv_write ------------------------------------------------------------------

// Per (token, head slot): slots 0..H-1 are q heads, H..H+Hkv-1 k heads,
// then Hkv v heads. A q/k head is loaded, rmsnorm'ed over hd when its norm
// weight is given (rounded to T as the unfused rmsnorm stores it), rotated as
// ops_common's rope does it (cuda_rope.cuh: the CPU's roundings), and stored; k and v heads also go to the cache at
// the token's position (a position outside 0..capacity-1 is skipped; a
// negative rotary position leaves NaN in q and k, as rope does). The rotation
// is at rope_positions[token] (the caller passes positions when they agree).
// Launch: grid (H + 2 Hkv, n), hd / 2 threads rounded up to whole warps (a
// thread per rotated pair; the norm's block reduction wants whole warps);
// bound by latency at decode sizes (a few KB per token).
template <typename T>
__global__ void rope_kv_write_kernel(T *__restrict__ q, T *__restrict__ k, const T *__restrict__ v,
                                     const T *__restrict__ q_norm, const T *__restrict__ k_norm,
                                     const int32_t *__restrict__ positions,
                                     const int32_t *__restrict__ rope_positions, int heads,
                                     int kv_heads, int hd, float eps, float theta,
                                     orin_kv_view cache, rope_table table)
{
    __shared__ float scratch[32];
    const int slot = blockIdx.x, token = blockIdx.y, half = hd / 2, j = threadIdx.x;
    const bool live = j < half; // the last warp's spare threads add 0, write nothing
    const bool is_q = slot < heads;
    const T *norm = slot >= heads + kv_heads ? nullptr : is_q ? q_norm : k_norm;
    // the norm weights are never written by a kernel: loaded before the PDL wait
    const float n1 = norm && live ? orin_cu_f32(norm[j]) : 0.0f;
    const float n2 = norm && live ? orin_cu_f32(norm[j + half]) : 0.0f;
    orin_cu_allow_next();
    orin_cu_wait_prior();
    const int32_t pos = positions[token];
    const bool in_cache = pos >= 0 && pos < cache.capacity;
    // the rotary position goes out with the position and the row: one round trip
    const int32_t rope_pos = slot < heads + kv_heads ? rope_positions[token] : 0;
    if (slot >= heads + kv_heads) { // a v head: copy into the cache
        int h = slot - heads - kv_heads;
        const T *src = v + ((size_t)token * kv_heads + h) * hd;
        if (in_cache && live) {
            T *dst = (T *)cache.v + orin_kv_offset(&cache, pos, h);
            dst[j] = src[j];
            dst[j + half] = src[j + half];
        }
        return;
    }
    const int h = is_q ? slot : slot - heads;
    T *row = is_q ? q + ((size_t)token * heads + h) * hd : k + ((size_t)token * kv_heads + h) * hd;
    float x1 = live ? orin_cu_f32(row[j]) : 0.0f, x2 = live ? orin_cu_f32(row[j + half]) : 0.0f;
    // the angle's double sincos before the norm's reduction, not after it
    float c = 0.0f, s = 0.0f;
    if (live)
        rope_cos_sin(rope_pos, j, hd, theta, table, &c, &s);
    if (norm) {
        float ss = orin_cu_block_sum(fmaf(x1, x1, x2 * x2), scratch);
        if (!live)
            return;
        float inv = 1.0f / sqrtf(ss / (float)hd + eps);
        x1 = orin_cu_f32(orin_cu_from_f32<T>(n1 * (x1 * inv)));
        x2 = orin_cu_f32(orin_cu_from_f32<T>(n2 * (x2 * inv)));
    }
    if (!live)
        return;
    float r1, r2;
    rope_rotate(x1, x2, c, s, &r1, &r2);
    T y1 = orin_cu_from_f32<T>(r1), y2 = orin_cu_from_f32<T>(r2);
    row[j] = y1;
    row[j + half] = y2;
    if (!is_q && in_cache) {
        T *dst = (T *)cache.k + orin_kv_offset(&cache, pos, h);
        dst[j] = y1;
        dst[j + half] = y2;
    }
}

// A thread per rotated pair: any even head_dim up to 2048 (a block of 1024).
static bool rope_kv_write_fits(int64_t hd)
{
    return hd > 0 && hd % 2 == 0 && hd <= 2048;
}

extern "C" bool cuda_rope_kv_write_supports(const void *args, char *why, size_t cap)
{
    const orin_rope_kv_write_args *a = (const orin_rope_kv_write_args *)args;
    if (a->q.ndim == 3 && rope_kv_write_fits(a->q.shape[2]))
        return true;
    snprintf(why, cap, "head_dim %lld (runs even ones up to 2048)",
             a->q.ndim == 3 ? (long long)a->q.shape[2] : -1LL);
    return false;
}

extern "C" int cuda_rope_kv_write(const orin_exec *ex, const orin_rope_kv_write_args *a,
                                  orin_dtype dt)
{
    const char *label = "rope_kv_write (common)";
    if (orin_check_exec(label, ex, CUDA) ||
        orin_check_tensor(label, "q", &a->q, CUDA, dt, 3, 3) ||
        orin_check_tensor(label, "k", &a->k, CUDA, dt, 3, 3) ||
        orin_check_tensor(label, "v", &a->v, CUDA, dt, 3, 3) ||
        orin_check_same_shape(label, "k", &a->k, "v", &a->v) ||
        orin_check_dim(label, "k", &a->k, 0, a->q.shape[0]) ||
        orin_check_dim(label, "k", &a->k, 2, a->q.shape[2]) ||
        orin_check_tensor(label, "positions", &a->positions, CUDA, ORIN_I32, 1, 1) ||
        orin_check_dim(label, "positions", &a->positions, 0, a->q.shape[0]) ||
        orin_check_kv_view(label, &a->cache, dt, a->k.shape[2]))
        return -1;
    if (a->rope_positions.data &&
        (orin_check_tensor(label, "rope_positions", &a->rope_positions, CUDA, ORIN_I32, 1, 1) ||
         orin_check_dim(label, "rope_positions", &a->rope_positions, 0, a->q.shape[0])))
        return -1;
    const void *rope_positions = a->rope_positions.data ? a->rope_positions.data
                                                        : a->positions.data;
    if (a->k.shape[1] != a->cache.n_kv_heads)
        return orin_error_set("%s: k: %lld heads, the cache has %d", label,
                              (long long)a->k.shape[1], a->cache.n_kv_heads);
    if ((a->q_norm.data && (orin_check_tensor(label, "q_norm", &a->q_norm, CUDA, dt, 1, 1) ||
                            orin_check_dim(label, "q_norm", &a->q_norm, 0, a->q.shape[2]))) ||
        (a->k_norm.data && (orin_check_tensor(label, "k_norm", &a->k_norm, CUDA, dt, 1, 1) ||
                            orin_check_dim(label, "k_norm", &a->k_norm, 0, a->q.shape[2]))))
        return -1;
    const int64_t n = a->q.shape[0], heads = a->q.shape[1], hd = a->q.shape[2];
    if (!rope_kv_write_fits(hd))
        return orin_error_set("%s: head_dim %lld (runs even ones up to 2048)", label,
                              (long long)hd);
    if (!isfinite(a->theta) || a->theta <= 0.0f || !isfinite(a->eps) || a->eps < 0.0f)
        return orin_error_set("%s: theta %g or eps %g out of range", label, a->theta, a->eps);
    if (orin_check_rope_scaling(label, &a->scaling))
        return -1;
    if (n > 65535)
        return orin_error_set("%s: %lld tokens in one call (at most 65535)", label, (long long)n);
    dim3 grid((unsigned)(heads + 2 * a->k.shape[1]), (unsigned)n);
    rope_table table;
    if (!rope_table_fill(&table, (int)(hd / 2), (int)hd, a->theta, &a->scaling))
        return orin_error_set("%s: head_dim %lld with a scaled rope (cuda scales head_dim up "
                              "to %d)", label, (long long)hd, 2 * ROPE_TABLE);
    ORIN_CU_DISPATCH(dt, label, T,
                     orin_cu_launch(ex, true, rope_kv_write_kernel<T>, grid,
                                    dim3((unsigned)((hd / 2 + 31) / 32 * 32)), 0, (T *)a->q.data, (T *)a->k.data,
                                    (const T *)a->v.data, (const T *)a->q_norm.data,
                                    (const T *)a->k_norm.data, (const int32_t *)a->positions.data,
                                    (const int32_t *)rope_positions, (int)heads, (int)a->k.shape[1], (int)hd, a->eps, a->theta,
                                    a->cache, table));
    return orin_cu_launched(label, dt, "q [%lld, %lld, %lld], k/v [%lld, %lld, %lld]",
                            (long long)n, (long long)heads, (long long)hd, (long long)n,
                            (long long)a->k.shape[1], (long long)hd);
}
