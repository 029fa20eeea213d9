/* Helpers for CUDA op implementations: the CUDA twin of orin/cpu_util.h.
 *
 * Include from .cu files only (CUDA C++). A plugin's kernels live in its .cu
 * files behind extern "C" entry points; its plugin.c registers them for
 * ORIN_DEVICE_CUDA where ORIN_HAVE_CUDA is defined. What is here:
 *   - dtypes: the CUDA type of each orin float dtype, conversions through f32
 *     (round to nearest even, as torch), and a dispatch macro;
 *   - 16-byte vector loads and stores that widen to / round from f32;
 *   - cp.async (global -> shared without registers, sm_80+);
 *   - warp and block reductions;
 *   - checked launches: an error naming the op, provider, dtype and shapes;
 *   - programmatic dependent launch (a kernel starting in its predecessor's tail);
 *   - the stream and multiprocessor count of the exec's device, and a slot per
 *     stream for kernels that keep counters of their own.
 * Everything is header-only (inline), so plugins link nothing of it. */
#ifndef ORIN_CUDA_UTIL_CUH
#define ORIN_CUDA_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#include "orin/error.h"
#include "orin/registry.h"
#include "orin/tensor.h"

/* ---- dtypes ---- */

/* The storage type of each float dtype. */
template <orin_dtype DT> struct orin_cu_type;
template <> struct orin_cu_type<ORIN_F32> { typedef float type; };
template <> struct orin_cu_type<ORIN_F16> { typedef __half type; };
template <> struct orin_cu_type<ORIN_BF16> { typedef __nv_bfloat16 type; };

__device__ __forceinline__ float orin_cu_f32(float x) { return x; }
__device__ __forceinline__ float orin_cu_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float orin_cu_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

/* f32 to T, round to nearest even; NaN stays NaN, overflow goes to inf. */
template <typename T> __device__ __forceinline__ T orin_cu_from_f32(float x);
template <> __device__ __forceinline__ float orin_cu_from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half orin_cu_from_f32<__half>(float x)
{
    return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 orin_cu_from_f32<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}

/* Runs the statements after `dt` with T typedef'd to its storage type; any other
 * dtype makes the enclosing function return an error naming `label`.
 *     ORIN_CU_DISPATCH(dt, label, T, return launch_rmsnorm<T>(...));            */
#define ORIN_CU_DISPATCH(dt, label, T, ...)                                         \
    switch (dt) {                                                                   \
    case ORIN_F32: {                                                                \
        typedef float T;                                                            \
        __VA_ARGS__;                                                                \
    } break;                                                                        \
    case ORIN_F16: {                                                                \
        typedef __half T;                                                           \
        __VA_ARGS__;                                                                \
    } break;                                                                        \
    case ORIN_BF16: {                                                               \
        typedef __nv_bfloat16 T;                                                    \
        __VA_ARGS__;                                                                \
    } break;                                                                        \
    default:                                                                        \
        return orin_error_set("%s: dtype %s is not supported on cuda", label,       \
                              orin_dtype_name(dt));                                 \
    }

/* ---- 16-byte vectors ---- */

/* Elements of T in one 16-byte access: 4 floats, 8 halves. */
template <typename T> struct orin_cu_vec {
    static constexpr int n = 16 / (int)sizeof(T);
};

__host__ __device__ __forceinline__ bool orin_cu_aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

/* out[0..N) = p[0..N) widened to f32, one 16-byte load (p 16-byte aligned). */
template <typename T>
__device__ __forceinline__ void orin_cu_load16(const T *p, float (&out)[orin_cu_vec<T>::n])
{
    uint4 raw = *reinterpret_cast<const uint4 *>(p);
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int i = 0; i < orin_cu_vec<T>::n; i++)
        out[i] = orin_cu_f32(e[i]);
}

/* in[0..N) rounded to T, in the 16 bytes a 16-byte store of them writes. */
template <typename T>
__device__ __forceinline__ uint4 orin_cu_pack16(const float (&in)[orin_cu_vec<T>::n])
{
    uint4 raw;
    T *e = reinterpret_cast<T *>(&raw);
#pragma unroll
    for (int i = 0; i < orin_cu_vec<T>::n; i++)
        e[i] = orin_cu_from_f32<T>(in[i]);
    return raw;
}

/* p[0..N) = in[0..N) rounded to T, one 16-byte store (p 16-byte aligned). */
template <typename T>
__device__ __forceinline__ void orin_cu_store16(T *p, const float (&in)[orin_cu_vec<T>::n])
{
    *reinterpret_cast<uint4 *>(p) = orin_cu_pack16<T>(in);
}

/* ---- asynchronous copies (sm_80+) ---- */

/* The shared-memory address cp.async and ldmatrix take. */
__device__ __forceinline__ uint32_t orin_cu_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared without a stop in L1 (.cg); src_bytes 0 fills the
 * 16 bytes with zeros and reads nothing (a row past the end of a tile). Both
 * addresses 16-byte aligned. */
__device__ __forceinline__ void orin_cu_cp_async16(uint32_t smem_dst, const void *src,
                                                   uint32_t src_bytes = 16)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void orin_cu_cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most N of this thread's committed groups are in flight. */
template <int N> __device__ __forceinline__ void orin_cu_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ---- bulk copies on an mbarrier (sm_90; no-ops below) ----
 * One thread initialises the barrier (count 1) and makes that visible to the
 * block before anyone waits; the thread that copies declares the bytes and
 * issues the copies (orin_cu_bulk_expect, then orin_cu_bulk_copy, 16-byte
 * aligned addresses and sizes); every waiter spins on the phase's parity. */
__device__ __forceinline__ void orin_cu_mbar_init(uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(orin_cu_smem_addr(bar))
                 : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

__device__ __forceinline__ void orin_cu_bulk_expect(uint64_t *bar, uint32_t bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                     orin_cu_smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
#endif
}

__device__ __forceinline__ void orin_cu_bulk_copy(void *dst, const void *src, uint32_t bytes,
                                                  uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];" ::"r"(orin_cu_smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(orin_cu_smem_addr(bar))
                 : "memory");
#endif
}

__device__ __forceinline__ void orin_cu_mbar_wait(uint64_t *bar, uint32_t parity)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                     "selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(orin_cu_smem_addr(bar)), "r"(parity)
                     : "memory");
#endif
}

/* ---- tensor cores (sm_80+) ---- */

/* c += A B for one m16n8k16 tile, f32 accumulators, T __half or __nv_bfloat16.
 * PTX's fragment layouts: lane (g = lane / 4, t = lane % 4) holds
 *   a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9],
 *   a3 = A[g+8][2t+8, 2t+9] (A 16x16 row-major), b0 = B[2t, 2t+1][g],
 *   b1 = B[2t+8, 2t+9][g] (B 16x8), c = C[g][2t, 2t+1], C[g+8][2t, 2t+1];
 * a register holds two elements, the first in its low half. */
template <typename T>
__device__ __forceinline__ void orin_cu_mma16816(float (&c)[4], uint32_t a0, uint32_t a1,
                                                 uint32_t a2, uint32_t a3, uint32_t b0,
                                                 uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (sizeof(T) == 2 && std::is_same<T, __half>::value)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    __trap(); /* the host picks a tensor-core kernel only on sm_80 and later */
#endif
}

/* ---- reductions ---- */

__device__ __forceinline__ float orin_cu_warp_sum(float v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* Max over the warp; NaN wins (fmaxf would drop it), as orin's argmax and
 * softmax want a NaN to show rather than vanish. */
__device__ __forceinline__ float orin_cu_warp_max(float v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = (o > v || o != o) ? o : v;
    }
    return v;
}

/* Sum over a block of blockDim.x threads (a multiple of 32, at most 1024);
 * every thread gets the result. `scratch` is 32 floats of shared memory; the
 * call ends with a barrier, so scratch may be reused right after. */
__device__ __forceinline__ float orin_cu_block_sum(float v, float *scratch)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = (int)(blockDim.x >> 5);
    v = orin_cu_warp_sum(v);
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.0f;
    v = orin_cu_warp_sum(v);
    __syncthreads();
    return v;
}

/* Max over the block, NaN-propagating; same contract as orin_cu_block_sum. */
__device__ __forceinline__ float orin_cu_block_max(float v, float *scratch)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = (int)(blockDim.x >> 5);
    v = orin_cu_warp_max(v);
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : -INFINITY;
    v = orin_cu_warp_max(v);
    __syncthreads();
    return v;
}

/* ---- the exec's device ---- */

static inline cudaStream_t orin_cu_stream(const orin_exec *ex)
{
    return (cudaStream_t)ex->device->stream;
}

/* Multiprocessors of the exec's GPU (cached per ordinal; 1 if unknown). */
static inline int orin_cu_sm_count(const orin_exec *ex)
{
    static int cached[16];
    int index = ex->device->index;
    if (index >= 0 && index < 16 && cached[index] > 0)
        return cached[index];
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, index) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 1;
    }
    if (index >= 0 && index < 16)
        cached[index] = n;
    return n;
}

/* Blocks a multiprocessor gets at most from orin_cu_grid_for: enough to hide
 * latency; a grid-stride loop covers the rest of the work. */
#define ORIN_CU_GRID_BLOCKS_PER_SM 32

/* Blocks for a grid-stride loop over `units`, `per_block` units a block,
 * capped at ORIN_CU_GRID_BLOCKS_PER_SM a multiprocessor; at least 1. */
static inline unsigned orin_cu_grid_for(const orin_exec *ex, int64_t units, int64_t per_block)
{
    int64_t blocks = (units + per_block - 1) / per_block;
    int64_t cap = (int64_t)orin_cu_sm_count(ex) * ORIN_CU_GRID_BLOCKS_PER_SM;
    if (blocks > cap)
        blocks = cap;
    return blocks < 1 ? 1u : (unsigned)blocks;
}

/* The compute capability's major number of the exec's GPU (cached per ordinal;
 * 0 if unknown): 8 for Ampere and Orin, 9 for Hopper. */
static inline int orin_cu_cc_major(const orin_exec *ex)
{
    static int cached[16]; /* major + 1; 0: not asked yet */
    const int index = ex->device->index;
    if (index >= 0 && index < 16 && cached[index])
        return cached[index] - 1;
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index) != cudaSuccess) {
        (void)cudaGetLastError();
        major = 0;
    }
    if (index >= 0 && index < 16)
        cached[index] = major + 1;
    return major;
}

/* Slots per (device, stream), for kernels that keep device counters of their
 * own (a "last block" ticket per output strip, say): a kernel's counters are
 * slab[slot], so that two streams never share one. A table per module, zero-
 * initialised with ORIN_CU_STREAM_SLOTS_INIT; a stream that goes away keeps its
 * slot (its counters are left zero), reused if a stream with the same handle
 * comes. -1 when all `count` (at most ORIN_CU_MAX_STREAM_SLOTS) are taken. */
#define ORIN_CU_MAX_STREAM_SLOTS 16
typedef struct orin_cu_stream_slots {
    pthread_mutex_t lock;
    int used;
    struct {
        int device;
        void *stream;
    } owner[ORIN_CU_MAX_STREAM_SLOTS];
} orin_cu_stream_slots;
#define ORIN_CU_STREAM_SLOTS_INIT {PTHREAD_MUTEX_INITIALIZER, 0, {}}

static inline int orin_cu_stream_slot(orin_cu_stream_slots *t, const orin_exec *ex, int count)
{
    int slot = -1;
    count = count < ORIN_CU_MAX_STREAM_SLOTS ? count : ORIN_CU_MAX_STREAM_SLOTS;
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->used && slot < 0; i++)
        if (t->owner[i].device == ex->device->index && t->owner[i].stream == ex->device->stream)
            slot = i;
    if (slot < 0 && t->used < count) {
        t->owner[t->used].device = ex->device->index;
        t->owner[t->used].stream = ex->device->stream;
        slot = t->used++;
    }
    pthread_mutex_unlock(&t->lock);
    return slot;
}

/* ---- programmatic dependent launch (sm_90+) ----
 *
 * A batch-1 decode step is hundreds of short kernels, and each one's start
 * (launch, ramp-up) and end (the last blocks draining) leave the memory idle.
 * A kernel launched with orin_cu_launch(ex, pdl = true) may start while the one
 * before it on the stream is still running, once every block of that one has
 * called orin_cu_allow_next() (or exited). Such a kernel must call
 * orin_cu_wait_prior() before it reads anything an earlier kernel wrote or
 * writes anything an earlier kernel may still read; what it does before (its
 * index arithmetic) overlaps the previous kernel, and its launch and block
 * scheduling overlap that kernel's drain. The wait returns when the previous
 * kernel has finished and its writes are visible, and that kernel waited on its
 * own predecessor, so the order of the whole stream holds. Before sm_90, or
 * with ORIN_PDL=0 in the environment, the launch is an ordinary one and both
 * calls do nothing. (Measured on Qwen3-8B f16 decode, H100: -0.1 ms a token;
 * GEMVs prefetching their first weights into L2 before the wait made it
 * 0.6 ms slower: bench/notes/decode.md.) */
__device__ __forceinline__ void orin_cu_wait_prior(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void orin_cu_allow_next(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Whether launches on the exec's GPU take the programmatic attribute: compute
 * capability 9 or later, and ORIN_PDL not "0" (read once). */
static inline bool orin_cu_pdl(const orin_exec *ex)
{
    static int env_off = -1;
    if (env_off < 0) {
        const char *env = getenv("ORIN_PDL");
        env_off = env && strcmp(env, "0") == 0;
    }
    return !env_off && orin_cu_cc_major(ex) >= 9;
}

/* A line of global memory into L2, as a hint (no register waits on it). */
__device__ __forceinline__ void orin_cu_prefetch_l2(const void *p)
{
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

/* [p, p + bytes) into L2 by one bulk request (p 16-byte aligned, bytes a
 * multiple of 16), as a hint nothing waits on; sm_90, a no-op below. */
__device__ __forceinline__ void orin_cu_prefetch_l2_bulk(const void *p, uint32_t bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

/* A measuring aid, never needed for results: ORIN_CU_CARVEOUT (read once)
 * makes kernels launched through orin_cu_launch* ask for a shared-memory
 * carveout (a percentage of the largest shared memory; the SM's L1 takes the
 * rest), so that bench/carveout.sh can price kernels that need different
 * L1/shared splits side by side: an SM changes its split only when idle, so a
 * kernel's early (PDL) blocks cannot join a neighbour of another split
 * (bench/notes/fa2-decode.md). "N": every kernel; "N@name,M@other": the kernels
 * whose symbol contains name, other. Unset, the driver picks each kernel's
 * split. Set, each launch also pays a cudaFuncSetAttribute call. */
static inline void orin_cu_apply_carveout(const void *kernel)
{
    static const char *spec;
    static bool read;
    if (!read) {
        spec = getenv("ORIN_CU_CARVEOUT");
        read = true;
    }
    if (!spec || !*spec)
        return;
    const char *name = NULL;
    for (const char *p = spec; *p;) {
        const size_t len = strcspn(p, ",");
        char item[96];
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        p += len + (p[len] == ',');
        char *at = strchr(item, '@');
        if (at) {
            *at = '\0';
            if (!name && cudaFuncGetName(&name, kernel) != cudaSuccess)
                name = "";
            if (!strstr(name, at + 1))
                continue;
        }
        (void)cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                   atoi(item));
        return;
    }
}

/* kernel<<<grid, block, smem, the exec's stream>>>(args...), with the
 * programmatic attribute when pdl and orin_cu_pdl(ex): the kernel then follows
 * the contract above; and in thread-block clusters of cluster_x blocks along x
 * when cluster_x > 0 (sm_90+; a size above 8 needs the kernel's
 * cudaFuncAttributeNonPortableClusterSizeAllowed). Errors are left for
 * orin_cu_launched, like <<<>>>'s. */
template <typename... Params, typename... Args>
static inline void orin_cu_launch_cluster(const orin_exec *ex, bool pdl, unsigned cluster_x,
                                          void (*kernel)(Params...), dim3 grid, dim3 block,
                                          size_t smem, Args... args)
{
    cudaLaunchAttribute attrs[2] = {};
    unsigned n = 0;
    if (pdl && orin_cu_pdl(ex)) {
        attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attrs[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster_x > 0) {
        attrs[n].id = cudaLaunchAttributeClusterDimension;
        attrs[n].val.clusterDim.x = cluster_x;
        attrs[n].val.clusterDim.y = 1;
        attrs[n++].val.clusterDim.z = 1;
    }
    orin_cu_apply_carveout((const void *)kernel);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = orin_cu_stream(ex);
    cfg.attrs = attrs;
    cfg.numAttrs = n;
    (void)cudaLaunchKernelEx(&cfg, kernel, ((Params)args)...);
}

/* The same without clusters. */
template <typename... Params, typename... Args>
static inline void orin_cu_launch(const orin_exec *ex, bool pdl, void (*kernel)(Params...),
                                  dim3 grid, dim3 block, size_t smem, Args... args)
{
    orin_cu_launch_cluster(ex, pdl, 0, kernel, grid, block, smem, args...);
}

/* ---- checked launches ---- */

/* Call right after a launch (or a run of launches): 0, or -1 with
 *   "<label> <dtype>: launch failed: <reason> (<shapes>)"
 * where label names the op and provider ("rmsnorm (common)") and the shapes are
 * printf-formatted by the caller. */
static inline int orin_cu_launched(const char *label, orin_dtype dt, const char *shapes_fmt,
                                   ...) ORIN_PRINTF(3, 4);
static inline int orin_cu_launched(const char *label, orin_dtype dt, const char *shapes_fmt, ...)
{
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        return 0;
    char shapes[256];
    va_list ap;
    va_start(ap, shapes_fmt);
    vsnprintf(shapes, sizeof shapes, shapes_fmt, ap);
    va_end(ap);
    return orin_error_set("%s %s: launch failed: %s (%s)", label, orin_dtype_name(dt),
                          cudaGetErrorString(err), shapes);
}

/* A CUDA runtime call inside an op: 0, or -1 with "<label>: <what>: <reason>". */
static inline int orin_cu_call(const char *label, const char *what, cudaError_t err)
{
    if (err == cudaSuccess)
        return 0;
    (void)cudaGetLastError();
    return orin_error_set("%s: %s: %s", label, what, cudaGetErrorString(err));
}

#endif
