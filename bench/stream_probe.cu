// stream_probe's kernels: how fast a decode product's weight bytes can stream
// when each kernel of a chain only reads them (no arithmetic beyond an XOR to
// keep the loads alive), launched back to back with PDL as a decode step's
// products are. Two ways of keeping bytes in flight, each block reading one
// 32 KB slab (an AWQ n-tile of a 4,096-wide product):
//  - PROBE_FULL: as the quantized GEMV does (cuda_qmma_gemv.cuh): each of 256
//    threads issues its 8 16-byte loads into registers before the PDL wait,
//    and the block takes a third of an SM (the GEMV by its 80 registers, the
//    probe by shared memory it does not use), so that the next kernel's
//    blocks find no room until this one's drain;
//  - PROBE_REGISTERS: the same kernel at its own 40 registers, so that the
//    next kernel's blocks fit beside it;
//  - PROBE_BULK: one thread issues a cp.async.bulk of the slab into shared
//    memory before the PDL wait, completing on an mbarrier the block waits on
//    after it; a block needs ~30 registers a thread, so the next kernel's
//    blocks fit beside it (7 slabs an SM by shared memory).
// Bound by the bytes; what differs is the fixed cost a kernel adds in a chain
// (ramp and tail), the figure bench/notes/quant.md asks about.
#include "stream_probe.h"

#include "orin/cuda_util.cuh"

#include <stdint.h>

#define PROBE_THREADS 256
#define PROBE_SLAB 32768
#define PROBE_VECS (PROBE_SLAB / 16 / PROBE_THREADS) // 16-byte loads a thread
// PROBE_FULL's unused shared memory: 3 blocks an SM (228 KB) and no fourth
#define PROBE_BALLAST (72 << 10)

// The block's XOR of its vectors, one word a warp to out.
__device__ __forceinline__ void probe_finish(uint32_t acc, uint32_t *out)
{
    for (int off = 16; off > 0; off >>= 1)
        acc ^= __shfl_xor_sync(0xFFFFFFFFu, acc, off);
    if ((threadIdx.x & 31) == 0)
        out[blockIdx.x * (PROBE_THREADS / 32) + (threadIdx.x >> 5)] = acc;
}

// Launch: grid = bytes / 32 KB, 256 threads, 3 blocks an SM.
__global__ void __launch_bounds__(PROBE_THREADS, 3)
    probe_registers_kernel(const uint4 *__restrict__ src, uint32_t *out)
{
    const uint4 *slab = src + (size_t)blockIdx.x * (PROBE_SLAB / 16);
    uint4 v[PROBE_VECS];
#pragma unroll
    for (int i = 0; i < PROBE_VECS; i++) {
        const uint4 *p = slab + threadIdx.x + i * PROBE_THREADS;
        asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v[i].x), "=r"(v[i].y), "=r"(v[i].z), "=r"(v[i].w)
            : "l"(p));
    }
    orin_cu_allow_next();
    orin_cu_wait_prior();
    uint32_t acc = 0;
#pragma unroll
    for (int i = 0; i < PROBE_VECS; i++)
        acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
    probe_finish(acc, out);
}

// Launch: grid = bytes / 32 KB, 256 threads, 32 KB of dynamic shared memory.
__global__ void __launch_bounds__(PROBE_THREADS)
    probe_bulk_kernel(const uint4 *__restrict__ src, uint32_t *out)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) uint4 slab_smem[];
    __shared__ __align__(8) uint64_t bar;
    if (threadIdx.x == 0) {
        orin_cu_mbar_init(&bar);
        orin_cu_bulk_expect(&bar, (uint32_t)PROBE_SLAB);
        orin_cu_bulk_copy(slab_smem, src + (size_t)blockIdx.x * (PROBE_SLAB / 16),
                          (uint32_t)PROBE_SLAB, &bar);
    }
    __syncthreads(); // the barrier's initialisation, before anyone waits on it
    orin_cu_allow_next();
    orin_cu_wait_prior();
    orin_cu_mbar_wait(&bar, 0);
    uint32_t acc = 0;
#pragma unroll
    for (int i = 0; i < PROBE_VECS; i++) {
        const uint4 w = slab_smem[threadIdx.x + i * PROBE_THREADS];
        acc ^= w.x ^ w.y ^ w.z ^ w.w;
    }
    probe_finish(acc, out);
#endif
}

// Stands in for a latency-bound kernel of a decode step (the attention at a
// short context): each block takes half an SM's shared memory, as the cluster
// attention's blocks take half its registers, so one PROBE_FULL block fits
// beside it; thread 0 spins `ns` after the PDL wait. Launch: 128 blocks x 256.
__global__ void __launch_bounds__(PROBE_THREADS) probe_spin_kernel(long long ns, uint32_t *out)
{
    extern __shared__ uint32_t spin_ballast[];
    orin_cu_allow_next();
    orin_cu_wait_prior();
    if (threadIdx.x == 0) {
        long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        while (t - t0 < ns);
        spin_ballast[0] = (uint32_t)t;
        out[blockIdx.x] = spin_ballast[0];
    }
    __syncthreads();
}

// Asks L2 for [src, src + bytes) and nothing else: each of 32 threads a block
// issues cp.async.bulk.prefetch.L2 of `chunk` bytes (the last one cut at the
// range's end) at a stride of the grid. No completion to wait for: a hint the
// memory system serves in its own time.
__global__ void probe_l2_prefetch_kernel(const char *src, size_t bytes, uint32_t chunk)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const size_t stride = (size_t)gridDim.x * blockDim.x * chunk;
    for (size_t off = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * chunk; off < bytes;
         off += stride) {
        const uint32_t n = bytes - off < chunk ? (uint32_t)((bytes - off) & ~(size_t)15) : chunk;
        if (n)
            orin_cu_prefetch_l2_bulk(src + off, n);
    }
#endif
}

// The same bytes by loads that land in L2 (ld.global.cg; the values XOR-ed
// into one word a warp): a fetch that surely allocates, where the prefetch
// above is a hint. 256 threads, 4 16-byte loads in flight each.
__global__ void __launch_bounds__(PROBE_THREADS)
    probe_l2_touch_kernel(const uint4 *src, size_t vecs, uint32_t *out)
{
    uint32_t acc = 0;
    const size_t stride = (size_t)gridDim.x * PROBE_THREADS;
    for (size_t i = (size_t)blockIdx.x * PROBE_THREADS + threadIdx.x; i < vecs; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            v[j] = make_uint4(0, 0, 0, 0);
            if (i + j * stride < vecs)
                asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w)
                             : "l"(src + i + j * stride));
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
            acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    }
    probe_finish(acc, out);
}

// The same loads slab by slab, as the read kernel's blocks take them: block b
// loads slab b, or slab N - 1 - b where `reversed` (each slab then fetched
// from an SM other than the one the read kernel is likely to put it on).
// Launch: grid = bytes / 32 KB, 256 threads.
__global__ void __launch_bounds__(PROBE_THREADS)
    probe_l2_touch_slab_kernel(const uint4 *src, int reversed, uint32_t *out)
{
    const unsigned b = reversed ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const uint4 *slab = src + (size_t)b * (PROBE_SLAB / 16);
    uint32_t acc = 0;
#pragma unroll
    for (int i = 0; i < PROBE_VECS; i++) {
        uint4 v;
        asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(slab + threadIdx.x + i * PROBE_THREADS));
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    probe_finish(acc, out);
}

// x's round trip after the PDL wait, with the block's weights in flight or
// not (--x-latency). Each kernel of the chain is a product's stand-in: before
// the wait its block asks for its 32 KB slab (X_NONE: nothing; X_REGISTERS:
// 8 16-byte loads a thread into registers, as the quantized GEMV's early
// batches; X_BULK: one cp.async.bulk into shared memory); after it, every
// thread loads its two 16-byte pieces of x (8 KB: a 4,096-wide f16 row, which
// the kernel before wrote, 32 bytes a block, as a GEMV's 16 outputs) with the
// GEMV's plain loads, stores them to shared memory, and the block meets at a
// barrier, as qmma_stage_x's staging does. Thread 0 stamps clock64 after the
// wait (t0), after that barrier (t1: x staged) and once the slab's bytes are
// in (t2), to lat[2 b] = t1 - t0 and lat[2 b + 1] = t2 - t0. Every mode
// takes 3 blocks an SM (ballast), as the GEMV's 80-register blocks do.
// X_NEXT is X_REGISTERS whose block, once x is staged, asks L2 for the
// first next_bytes of the next kernel's slab of its index (one
// cp.async.bulk.prefetch.L2 a warp), so that the memory streams the next
// product's first bytes during this one's tail (--x-prefetch). With flags
// (--x-flags), a kernel does not wait for the one before to end
// (griddepcontrol.wait: its grid's completion and memory flush) but for each
// of its blocks to have counted itself in (a fence, then an atomic add, once
// its x is written): what a handoff between two products costs without the
// grid's end on the chain. Launch: grid = bytes / 32 KB, 256 threads.
enum {
    X_NONE = PROBE_X_NONE,
    X_REGISTERS = PROBE_X_REGISTERS,
    X_BULK = PROBE_X_BULK,
    X_NEXT = PROBE_X_NEXT
};
#define X_VECS 512 // 16-byte pieces of x

template <int MODE>
__global__ void __launch_bounds__(PROBE_THREADS, 3) probe_x_kernel(probe_x_args a)
{
    extern __shared__ __align__(128) uint4 slab_smem[]; // X_BULK's slab, else ballast
    __shared__ uint4 xs[X_VECS];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ __align__(8) uint64_t bar; // X_BULK's copy
#endif
    const uint4 *slab = (const uint4 *)a.src + (size_t)blockIdx.x * (PROBE_SLAB / 16);
    const uint4 *x_in = (const uint4 *)a.x_in;
    uint4 v[PROBE_VECS];
    if constexpr (MODE == X_REGISTERS || MODE == X_NEXT) {
#pragma unroll
        for (int i = 0; i < PROBE_VECS; i++)
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v[i].x), "=r"(v[i].y), "=r"(v[i].z), "=r"(v[i].w)
                         : "l"(slab + threadIdx.x + i * PROBE_THREADS));
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (MODE == X_BULK) {
        if (threadIdx.x == 0) {
            orin_cu_mbar_init(&bar);
            orin_cu_bulk_expect(&bar, (uint32_t)PROBE_SLAB);
            orin_cu_bulk_copy(slab_smem, slab, (uint32_t)PROBE_SLAB, &bar);
        }
        __syncthreads();
    }
#endif
    orin_cu_allow_next();
    uint4 xa, xb;
    if (a.flag_wait) { // the kernel before's blocks all counted in, not its grid's end
        if (threadIdx.x == 0) {
            unsigned seen;
            do
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                             : "=r"(seen)
                             : "l"(a.flag_wait)
                             : "memory");
            while (seen < a.blocks_before);
        }
        __syncthreads();
    } else {
        orin_cu_wait_prior();
    }
    const long long t0 = clock64();
    if (a.flag_post) { // past L1, which may hold an older x of this SM's
        xa = __ldcg(x_in + threadIdx.x);
        xb = __ldcg(x_in + threadIdx.x + PROBE_THREADS);
    } else {
        xa = x_in[threadIdx.x];
        xb = x_in[threadIdx.x + PROBE_THREADS];
    }
    xs[threadIdx.x] = xa;
    xs[threadIdx.x + PROBE_THREADS] = xb;
    __syncthreads();
    const long long t1 = clock64();
    if constexpr (MODE == X_NEXT) { // a warp's share of the next slab's first bytes
        const uint32_t share = a.next_bytes / (PROBE_THREADS / 32) & ~15u;
        if ((threadIdx.x & 31) == 0 && share)
            orin_cu_prefetch_l2_bulk((const char *)a.next + (size_t)blockIdx.x * PROBE_SLAB +
                                         (threadIdx.x >> 5) * share,
                                     share);
    }
    uint32_t acc = 0;
    if constexpr (MODE == X_REGISTERS || MODE == X_NEXT) {
#pragma unroll
        for (int i = 0; i < PROBE_VECS; i++)
            acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (MODE == X_BULK) {
        orin_cu_mbar_wait(&bar, 0);
#pragma unroll
        for (int i = 0; i < PROBE_VECS; i++) {
            const uint4 w = slab_smem[threadIdx.x + i * PROBE_THREADS];
            acc ^= w.x ^ w.y ^ w.z ^ w.w;
        }
    }
#endif
    acc = __reduce_xor_sync(0xFFFFFFFFu, acc); // every lane's bytes in before t2
    const long long t2 = clock64();
    // the next kernel's x: 32 bytes a block (the first X_VECS / 2 blocks)
    if (threadIdx.x < 2 && blockIdx.x < X_VECS / 2) {
        uint4 o = xs[(blockIdx.x * 2 + threadIdx.x) % X_VECS];
        o.x ^= acc;
        ((uint4 *)a.x_out)[blockIdx.x * 2 + threadIdx.x] = o;
    }
    if (threadIdx.x == 0) {
        a.lat[2 * blockIdx.x] = t1 - t0;
        a.lat[2 * blockIdx.x + 1] = t2 - t0;
    }
    probe_finish(acc, a.out);
    if (a.flag_post) { // this block's x written: counted in for the next kernel
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(a.flag_post, 1u);
        }
    }
}

#define SPIN_BLOCKS 128
#define SPIN_BALLAST (114 << 10)
// probe_x_kernel's dynamic shared memory: the slab (X_BULK) or as much
// ballast, which with x's 8 KB keeps 3 blocks an SM and no fourth
#define PROBE_X_SMEM (64 << 10)
// probe_x_kernel by mode (PROBE_X_*)
static_assert(X_NONE == 0 && X_REGISTERS == 1 && X_BULK == 2 && X_NEXT == 3,
              "probe_x_kernels is indexed by mode");
static void (*const probe_x_kernels[])(probe_x_args) = {
    probe_x_kernel<X_NONE>, probe_x_kernel<X_REGISTERS>, probe_x_kernel<X_BULK>,
    probe_x_kernel<X_NEXT>};

// The kernels' shared memory above the default 48 KB, allowed at the first launch.
static void probe_allow_smem(void)
{
    static bool done = false;
    if (done)
        return;
    cudaFuncSetAttribute(probe_bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         PROBE_SLAB);
    cudaFuncSetAttribute(probe_registers_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         PROBE_BALLAST);
    cudaFuncSetAttribute(probe_spin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         SPIN_BALLAST);
    for (size_t i = 0; i < sizeof probe_x_kernels / sizeof probe_x_kernels[0]; i++)
        cudaFuncSetAttribute(probe_x_kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                             PROBE_X_SMEM);
    done = true;
}

// grid x PROBE_THREADS with smem bytes of dynamic shared memory on stream, with
// the programmatic-serialisation attribute (*attr, the caller's) where pdl.
static cudaLaunchConfig_t probe_config(unsigned grid, size_t smem, cudaStream_t stream, int pdl,
                                       cudaLaunchAttribute *attr)
{
    probe_allow_smem();
    *attr = {};
    attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr->val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(PROBE_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = pdl ? attr : NULL;
    cfg.numAttrs = pdl ? 1 : 0;
    return cfg;
}

extern "C" int probe_spin_launch(double us, uint32_t *out, cudaStream_t stream)
{
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = probe_config(SPIN_BLOCKS, SPIN_BALLAST, stream, 1, &attr);
    return cudaLaunchKernelEx(&cfg, probe_spin_kernel, (long long)(us * 1e3), out) == cudaSuccess
               ? 0
               : -1;
}

extern "C" int probe_prefetch_launch(const void *src, size_t bytes, unsigned blocks,
                                     uint32_t chunk, uint32_t *out, cudaStream_t stream)
{
    if (chunk == 1 || chunk == 2) /* loads slab by slab, as the reads take them */
        probe_l2_touch_slab_kernel<<<(unsigned)(bytes / PROBE_SLAB), PROBE_THREADS, 0, stream>>>(
            (const uint4 *)src, chunk == 2, out);
    else if (chunk == 0) /* loads, not the prefetch hint */
        probe_l2_touch_kernel<<<blocks, PROBE_THREADS, 0, stream>>>((const uint4 *)src,
                                                                    bytes / 16, out);
    else
        probe_l2_prefetch_kernel<<<blocks, 32, 0, stream>>>((const char *)src, bytes, chunk);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" size_t probe_slab_bytes(void)
{
    return PROBE_SLAB;
}

extern "C" int probe_launch(probe_variant variant, const void *src, size_t bytes, uint32_t *out,
                            cudaStream_t stream, int pdl)
{
    const unsigned grid = (unsigned)(bytes / PROBE_SLAB);
    const uint4 *s = (const uint4 *)src;
    cudaLaunchAttribute attr;
    if (variant == PROBE_BULK) {
        const cudaLaunchConfig_t cfg = probe_config(grid, PROBE_SLAB, stream, pdl, &attr);
        return cudaLaunchKernelEx(&cfg, probe_bulk_kernel, s, out) == cudaSuccess ? 0 : -1;
    }
    const size_t smem = variant == PROBE_FULL ? PROBE_BALLAST : 0;
    const cudaLaunchConfig_t cfg = probe_config(grid, smem, stream, pdl, &attr);
    return cudaLaunchKernelEx(&cfg, probe_registers_kernel, s, out) == cudaSuccess ? 0 : -1;
}

extern "C" int probe_x_launch(int mode, size_t bytes, probe_x_args args, cudaStream_t stream)
{
    const unsigned grid = (unsigned)(bytes / PROBE_SLAB);
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = probe_config(grid, PROBE_X_SMEM, stream, 1, &attr);
    if (args.next_bytes > PROBE_SLAB)
        args.next_bytes = PROBE_SLAB;
    if (mode < 0 || mode >= (int)(sizeof probe_x_kernels / sizeof probe_x_kernels[0]))
        return -1;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, probe_x_kernels[mode], args);
    return e == cudaSuccess ? 0 : -1;
}
