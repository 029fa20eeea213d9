/* stream_probe's kernels (stream_probe.cu), behind a C interface. */
#ifndef ORIN_BENCH_STREAM_PROBE_H
#define ORIN_BENCH_STREAM_PROBE_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PROBE_FULL: the registers' kernel with shared memory it does not use, so
 * that an SM holds 3 of its blocks and nothing beside them, as the quantized
 * GEMV's 80-register blocks fill an SM's registers. */
typedef enum probe_variant { PROBE_FULL, PROBE_REGISTERS, PROBE_BULK } probe_variant;

/* Bytes a block reads: a launch's bytes must be a multiple. */
size_t probe_slab_bytes(void);

/* One kernel reading src [bytes] (16-byte aligned) on stream, with the
 * programmatic-serialisation attribute where pdl; out holds 8 words a block.
 * Returns 0, or -1 where the launch failed. */
int probe_launch(probe_variant variant, const void *src, size_t bytes, uint32_t *out,
                 cudaStream_t stream, int pdl);

/* A latency-bound stand-in (128 blocks of half an SM's shared memory, one
 * thread spinning `us` after the PDL wait), launched with PDL. */
int probe_spin_launch(double us, uint32_t *out, cudaStream_t stream);

/* [src, src + bytes) into L2 by cp.async.bulk.prefetch.L2, chunk bytes (a
 * multiple of 16) a request, `blocks` blocks of 32 threads; with chunk 0 by
 * loads (ld.global.cg, `blocks` blocks of 256 threads, one word a
 * warp to out); with chunk 1 by loads slab by slab as probe_launch's blocks
 * take them (block b slab b), with 2 in reverse (block b slab N - 1 - b);
 * no PDL. */
int probe_prefetch_launch(const void *src, size_t bytes, unsigned blocks, uint32_t chunk,
                          uint32_t *out, cudaStream_t stream);

/* probe_x_launch's modes: what a block has in flight when it loads x. */
enum { PROBE_X_NONE, PROBE_X_REGISTERS, PROBE_X_BULK, PROBE_X_NEXT };

/* One kernel of the --x-latency chain (stream_probe.cu's probe_x_kernel):
 * each 32 KB block of src [bytes] asks for its slab before the PDL wait as
 * mode says, then loads x_in (8 KB, the kernel before's output) and writes
 * its 32 bytes of x_out; lat gets two clock64 spans a block (x staged, slab
 * in, each since the wait). PROBE_X_NEXT: PROBE_X_REGISTERS that, once x is
 * staged, asks L2 for the first next_bytes (at most 32 KB) of each block's
 * slab of next, the next kernel's region. With flag_post set, each block
 * adds 1 to it once its x is written, and reads x past L1; with flag_wait
 * set, the kernel waits for it to reach blocks_before instead of the PDL
 * wait. Launched with PDL. Returns 0, or -1 where the launch failed. */
typedef struct probe_x_args {
    const void *src, *x_in;
    void *x_out;
    long long *lat;
    uint32_t *out;
    const void *next;
    uint32_t next_bytes;
    unsigned *flag_wait, *flag_post;
    unsigned blocks_before;
} probe_x_args;

int probe_x_launch(int mode, size_t bytes, probe_x_args args, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
