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

#ifdef __cplusplus
}
#endif
#endif
