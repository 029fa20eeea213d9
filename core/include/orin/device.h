/* Devices: where tensors live and ops run.
 *
 * A small vtable in the style of sqlite3_vfs: `ops` is a versioned struct of function
 * pointers; members are only ever appended. The host device is built into the core;
 * a CUDA device is compiled in where the CUDA toolkit is found. All functions return
 * 0 on success and -1 on failure (with orin_error_set() called). */
#ifndef ORIN_DEVICE_H
#define ORIN_DEVICE_H

#include "orin/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orin_device orin_device;

typedef struct orin_device_ops {
    int version; /* ORIN_DEVICE_OPS_VERSION */
    void *(*alloc)(orin_device *dev, size_t bytes);       /* NULL on failure */
    void (*free)(orin_device *dev, void *ptr);
    int (*copy_h2d)(orin_device *dev, void *dst, const void *src, size_t bytes);
    int (*copy_d2h)(orin_device *dev, void *dst, const void *src, size_t bytes);
    int (*copy_d2d)(orin_device *dev, void *dst, const void *src, size_t bytes);
    int (*memset)(orin_device *dev, void *dst, int value, size_t bytes);
    int (*synchronize)(orin_device *dev);
    void (*destroy)(orin_device *dev);
    /* ---- version 2 ---- */
    /* dst[0..n) (device, dst_dt) = src[0..n) (host, src_dt) converted, f32, f16
     * and bf16 in any pair (round to nearest even, as torch). Returns once done,
     * so src may be unmapped at once. The weights' way onto the device. */
    int (*upload)(orin_device *dev, void *dst, orin_dtype dst_dt, const void *src,
                  orin_dtype src_dt, size_t n);
    /* Free and total bytes of the device's memory; NULL when the device cannot
     * tell (the host: the page cache and mmap'd weights make "free" moot). */
    int (*mem_info)(orin_device *dev, size_t *free_bytes, size_t *total_bytes);
    /* Records the work fn(ctx) queues on the device's stream, without running it,
     * into a graph that graph_launch replays as a whole (a CUDA graph: one launch
     * for a decode step's hundreds of kernels). fn must only queue work: no
     * synchronisation, no allocation. NULL where the device has no graphs. */
    int (*graph_capture)(orin_device *dev, int (*fn)(void *ctx), void *ctx, void **graph);
    int (*graph_launch)(orin_device *dev, void *graph);
    void (*graph_destroy)(orin_device *dev, void *graph);
    /* Timers on the stream (CUDA events), for profiles: a mark records the
     * point the stream has reached; elapsed waits for `to` and gives the
     * seconds between two marks. NULL where ops are synchronous (the host:
     * the wall clock times them). */
    void *(*mark_create)(orin_device *dev);
    int (*mark_record)(orin_device *dev, void *mark);
    int (*mark_elapsed)(orin_device *dev, void *from, void *to, double *seconds);
    void (*mark_destroy)(orin_device *dev, void *mark);
    /* ---- version 3 ---- */
    /* Pinned host memory: the device copies into it without staging, so that a
     * queued copy lands there while the host goes on. NULL where the device
     * has none (the host). */
    void *(*host_alloc)(orin_device *dev, size_t bytes);
    void (*host_free)(orin_device *dev, void *ptr);
    /* Queues a copy of bytes from device src into dst (from host_alloc) behind
     * the stream's work and returns at once: dst holds them once a mark
     * recorded after the copy has been reached (mark_wait). */
    int (*copy_d2h_queued)(orin_device *dev, void *dst, const void *src, size_t bytes);
    /* Waits until the stream has reached the mark. */
    int (*mark_wait)(orin_device *dev, void *mark);
} orin_device_ops;

#define ORIN_DEVICE_OPS_VERSION 3

struct orin_device {
    const orin_device_ops *ops;
    orin_device_kind kind;
    int index;          /* ordinal among devices of this kind */
    char name[64];      /* "cpu", "cuda:0 (NVIDIA H100 80GB HBM3)" */
    void *stream;       /* the stream ops run on (cudaStream_t on CUDA; NULL on the host) */
    int threads;        /* host threads ops may use (runtime.threads); 0 = all cores */
    double mem_bandwidth_gbs; /* peak memory bandwidth for roofline figures, 0 if unknown */
    void *impl;         /* device-private state */
};

/* The host device (a process-wide singleton; never destroyed). */
orin_device *orin_device_cpu(void);

/* Opens a device by name: "cpu", "cuda", "auto" (cuda when a GPU is present, else cpu).
 * Returns NULL with orin_error_set() when the device cannot be opened. */
orin_device *orin_device_open(const char *name);
void orin_device_close(orin_device *dev);

/* Bytes read + written a second by a device-to-device copy of `bytes` on dev,
 * best of 5 after a warm-up, in GB/s; with ORIN_COPY_PROBE_BYTES (20 times the
 * largest L2), the bandwidth every decode floor is measured against
 * (orin-run --bench, the bench programs). Timed between marks where the
 * device has them, else by the wall clock around a synchronised copy. 0 when
 * it cannot be measured (2 x bytes not free). */
#define ORIN_COPY_PROBE_BYTES ((size_t)1 << 30)
double orin_device_copy_gbs(orin_device *dev, size_t bytes);

/* True when this build has CUDA support and a GPU is visible. */
bool orin_cuda_available(void);

#ifdef __cplusplus
}
#endif
#endif
