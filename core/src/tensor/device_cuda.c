/* The CUDA device, on the CUDA runtime API (plain C; its one kernel, the dtype
 * conversion of uploads, is in convert_cuda.cu).
 *
 * Every operation runs on the device's own non-blocking stream, so that work on
 * it is ordered and nothing waits on the legacy default stream. Host-to-device
 * and device-to-host copies return only once done: the caller may reuse or read
 * its host buffer at once, and it may be pageable. Device-to-device copies and
 * memsets are queued on the stream like kernels; synchronize() waits for them.
 *
 * upload() moves weights: the host copies a chunk from the (mmap'd) source into
 * one of two pinned staging buffers while the GPU copies the previous chunk out
 * of the other, then converts it on the GPU when the dtypes differ. The staging
 * buffers are made at the first upload and kept until the device closes. */
#include "orin/cpu_util.h"
#include "orin/device.h"
#include "orin/error.h"
#include "device_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

/* Bytes of one pinned staging buffer (two of them), and of the device buffer a
 * converted chunk lands in first. */
#define STAGING_BYTES (32u << 20)

typedef struct cuda_state {
    void *pinned[2];          /* host, page-locked */
    cudaEvent_t copied[2];    /* pinned[i] may be refilled once this fires */
    void *raw;                /* device: a chunk in its source dtype, before conversion */
} cuda_state;

/* Records a failed CUDA call as "cuda:N: what: reason" and clears the runtime's
 * last error so that a later unrelated call does not report it again. */
static int cuda_fail(const orin_device *dev, const char *what, cudaError_t err)
{
    (void)cudaGetLastError();
    return orin_error_set("cuda:%d: %s: %s", dev->index, what, cudaGetErrorString(err));
}

static cudaStream_t stream_of(const orin_device *dev)
{
    return (cudaStream_t)dev->stream;
}

int orin_cuda_device_count(char *why, size_t why_cap)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        snprintf(why, why_cap, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
        (void)cudaGetLastError();
        return -1;
    }
    if (n <= 0) {
        snprintf(why, why_cap, "cudaGetDeviceCount: 0 devices");
        return 0;
    }
    return n;
}

static void *cuda_alloc(orin_device *dev, size_t bytes)
{
    void *p = NULL;
    /* The current device is per thread: make it ours before allocating. */
    cudaError_t err = cudaSetDevice(dev->index);
    if (err != cudaSuccess) {
        cuda_fail(dev, "cudaSetDevice", err);
        return NULL;
    }
    /* cudaMalloc(0) may succeed with NULL; NULL must mean failure here. */
    err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "cudaMalloc of %zu bytes", bytes);
        cuda_fail(dev, what, err);
        return NULL;
    }
    return p;
}

static void cuda_free(orin_device *dev, void *ptr)
{
    if (!ptr)
        return;
    cudaError_t err = cudaFree(ptr);
    if (err != cudaSuccess) {
        cuda_fail(dev, "cudaFree", err);
        orin_log(ORIN_LOG_WARN, "%s", orin_error());
    }
}

static int cuda_copy(orin_device *dev, void *dst, const void *src, size_t bytes,
                     enum cudaMemcpyKind kind, bool wait)
{
    if (!bytes)
        return 0;
    if (!dst || !src)
        return orin_error_set("cuda:%d: copy of %zu bytes with a NULL pointer", dev->index,
                              bytes);
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, kind, stream_of(dev));
    if (err != cudaSuccess)
        return cuda_fail(dev, "cudaMemcpyAsync", err);
    if (wait) {
        err = cudaStreamSynchronize(stream_of(dev));
        if (err != cudaSuccess)
            return cuda_fail(dev, "cudaStreamSynchronize after a copy", err);
    }
    return 0;
}

static int cuda_copy_h2d(orin_device *dev, void *dst, const void *src, size_t bytes)
{
    return cuda_copy(dev, dst, src, bytes, cudaMemcpyHostToDevice, true);
}

static int cuda_copy_d2h(orin_device *dev, void *dst, const void *src, size_t bytes)
{
    return cuda_copy(dev, dst, src, bytes, cudaMemcpyDeviceToHost, true);
}

static int cuda_copy_d2d(orin_device *dev, void *dst, const void *src, size_t bytes)
{
    return cuda_copy(dev, dst, src, bytes, cudaMemcpyDeviceToDevice, false);
}

static int cuda_memset(orin_device *dev, void *dst, int value, size_t bytes)
{
    if (!bytes)
        return 0;
    if (!dst)
        return orin_error_set("cuda:%d: memset of %zu bytes at NULL", dev->index, bytes);
    cudaError_t err = cudaMemsetAsync(dst, value, bytes, stream_of(dev));
    if (err != cudaSuccess)
        return cuda_fail(dev, "cudaMemsetAsync", err);
    return 0;
}

static int cuda_synchronize(orin_device *dev)
{
    cudaError_t err = cudaStreamSynchronize(stream_of(dev));
    if (err != cudaSuccess)
        return cuda_fail(dev, "cudaStreamSynchronize", err);
    return 0;
}

/* ---- uploads ---- */

static void staging_free(cuda_state *st)
{
    if (!st)
        return;
    for (int i = 0; i < 2; i++) {
        if (st->pinned[i] && cudaFreeHost(st->pinned[i]) != cudaSuccess)
            (void)cudaGetLastError();
        if (st->copied[i] && cudaEventDestroy(st->copied[i]) != cudaSuccess)
            (void)cudaGetLastError();
    }
    if (st->raw && cudaFree(st->raw) != cudaSuccess)
        (void)cudaGetLastError();
    free(st);
}

static cuda_state *staging(orin_device *dev)
{
    if (dev->impl)
        return dev->impl;
    cuda_state *st = calloc(1, sizeof *st);
    if (!st) {
        orin_error_set("cuda:%d: out of memory", dev->index);
        return NULL;
    }
    cudaError_t err = cudaSuccess;
    for (int i = 0; i < 2 && err == cudaSuccess; i++) {
        err = cudaHostAlloc(&st->pinned[i], STAGING_BYTES, cudaHostAllocDefault);
        if (err == cudaSuccess)
            err = cudaEventCreateWithFlags(&st->copied[i], cudaEventDisableTiming);
    }
    if (err == cudaSuccess)
        err = cudaMalloc(&st->raw, STAGING_BYTES);
    if (err != cudaSuccess) {
        cuda_fail(dev, "staging buffers for uploads", err);
        staging_free(st);
        return NULL;
    }
    dev->impl = st;
    return st;
}

/* memcpy into a staging buffer on the host's cores: one thread copies pageable
 * memory at some 6-10 GB/s, below what the bus takes, and would bound every
 * upload (weights at load, an image's pixels). */
typedef struct copy_job {
    char *dst;
    const char *src;
    size_t bytes;
} copy_job;

enum { COPY_SLICE = 1u << 20, COPY_PARALLEL_MIN = 4u << 20 };

static int copy_slice(void *ctx, int worker, int64_t task)
{
    const copy_job *job = ctx;
    const size_t at = (size_t)task * COPY_SLICE;
    (void)worker;
    const size_t len = job->bytes - at < COPY_SLICE ? job->bytes - at : COPY_SLICE;
    memcpy(job->dst + at, job->src + at, len);
    return 0;
}

static int staged_copy(const orin_device *dev, void *dst, const void *src, size_t bytes)
{
    if (bytes < COPY_PARALLEL_MIN) {
        memcpy(dst, src, bytes);
        return 0;
    }
    copy_job job = {.dst = dst, .src = src, .bytes = bytes};
    const int64_t slices = (int64_t)((bytes + COPY_SLICE - 1) / COPY_SLICE);
    return orin_cpu_parallel_for(orin_cpu_threads(dev), slices, copy_slice, &job);
}

static int cuda_upload(orin_device *dev, void *dst, orin_dtype dst_dt, const void *src,
                       orin_dtype src_dt, size_t n)
{
    if (!n)
        return 0;
    if (!dst || !src)
        return orin_error_set("cuda:%d: upload of %zu elements with a NULL pointer", dev->index, n);
    cuda_state *st = staging(dev);
    if (!st)
        return -1;
    const size_t src_size = orin_dtype_size(src_dt), dst_size = orin_dtype_size(dst_dt);
    const size_t chunk = STAGING_BYTES / src_size; /* elements per chunk */
    const bool convert = src_dt != dst_dt;
    cudaStream_t stream = stream_of(dev);
    cudaError_t err = cudaSuccess;
    int rc = 0;
    for (size_t done = 0, i = 0; done < n && rc == 0; done += chunk, i ^= 1) {
        size_t count = n - done < chunk ? n - done : chunk;
        /* pinned[i] was last used two chunks ago: wait until the GPU read it */
        err = cudaEventSynchronize(st->copied[i]);
        if (err != cudaSuccess)
            break;
        if (staged_copy(dev, st->pinned[i], (const char *)src + done * src_size,
                        count * src_size) != 0) {
            rc = -1;
            break;
        }
        void *to = convert ? st->raw : (char *)dst + done * dst_size;
        err = cudaMemcpyAsync(to, st->pinned[i], count * src_size, cudaMemcpyHostToDevice, stream);
        if (err == cudaSuccess)
            err = cudaEventRecord(st->copied[i], stream);
        if (err != cudaSuccess)
            break;
        if (convert)
            rc = orin_cuda_convert((char *)dst + done * dst_size, dst_dt, st->raw, src_dt, count,
                                   stream);
    }
    if (rc != 0)
        return orin_error_prefix("cuda:%d: upload: ", dev->index);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess)
        return cuda_fail(dev, "upload", err);
    return 0;
}

static int cuda_mem_info(orin_device *dev, size_t *free_bytes, size_t *total_bytes)
{
    cudaError_t err = cudaSetDevice(dev->index);
    if (err == cudaSuccess)
        err = cudaMemGetInfo(free_bytes, total_bytes);
    if (err != cudaSuccess)
        return cuda_fail(dev, "cudaMemGetInfo", err);
    return 0;
}

/* ---- graphs ---- */

static int cuda_graph_capture(orin_device *dev, int (*fn)(void *ctx), void *ctx, void **out)
{
    cudaStream_t stream = stream_of(dev);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    *out = NULL;
    /* ThreadLocal: other threads' CUDA calls (none today) may go on meanwhile. */
    cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (err != cudaSuccess)
        return cuda_fail(dev, "cudaStreamBeginCapture", err);
    int rc = fn(ctx);
    err = cudaStreamEndCapture(stream, &graph);
    if (rc != 0) {
        if (graph)
            (void)cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        return orin_error_prefix("cuda:%d: while capturing a graph: ", dev->index);
    }
    if (err != cudaSuccess)
        return cuda_fail(dev, "cudaStreamEndCapture (an op did something a graph cannot hold)",
                         err);
    err = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    if (err != cudaSuccess)
        return cuda_fail(dev, "cudaGraphInstantiate", err);
    *out = exec;
    return 0;
}

static int cuda_graph_launch(orin_device *dev, void *graph)
{
    cudaError_t err = cudaGraphLaunch((cudaGraphExec_t)graph, stream_of(dev));
    if (err != cudaSuccess)
        return cuda_fail(dev, "cudaGraphLaunch", err);
    return 0;
}

static void cuda_graph_destroy(orin_device *dev, void *graph)
{
    if (graph && cudaGraphExecDestroy((cudaGraphExec_t)graph) != cudaSuccess) {
        (void)cudaGetLastError();
        orin_log(ORIN_LOG_WARN, "cuda:%d: cudaGraphExecDestroy failed", dev->index);
    }
}

/* ---- marks (events) ---- */

static void *cuda_mark_create(orin_device *dev)
{
    cudaEvent_t ev = NULL;
    cudaError_t err = cudaEventCreate(&ev);
    if (err != cudaSuccess) {
        cuda_fail(dev, "cudaEventCreate", err);
        return NULL;
    }
    return ev;
}

static int cuda_mark_record(orin_device *dev, void *mark)
{
    cudaError_t err = cudaEventRecord((cudaEvent_t)mark, stream_of(dev));
    return err == cudaSuccess ? 0 : cuda_fail(dev, "cudaEventRecord", err);
}

static int cuda_mark_elapsed(orin_device *dev, void *from, void *to, double *seconds)
{
    float ms = 0;
    cudaError_t err = cudaEventSynchronize((cudaEvent_t)to);
    if (err == cudaSuccess)
        err = cudaEventElapsedTime(&ms, (cudaEvent_t)from, (cudaEvent_t)to);
    if (err != cudaSuccess)
        return cuda_fail(dev, "cudaEventElapsedTime", err);
    *seconds = ms * 1e-3;
    return 0;
}

static void cuda_mark_destroy(orin_device *dev, void *mark)
{
    if (mark && cudaEventDestroy((cudaEvent_t)mark) != cudaSuccess)
        (void)cudaGetLastError();
}

static int cuda_mark_wait(orin_device *dev, void *mark)
{
    cudaError_t err = cudaEventSynchronize((cudaEvent_t)mark);
    return err == cudaSuccess ? 0 : cuda_fail(dev, "cudaEventSynchronize", err);
}

/* ---- pinned host memory and queued copies back ---- */

static void *cuda_host_alloc(orin_device *dev, size_t bytes)
{
    void *p = NULL;
    cudaError_t err = cudaMallocHost(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        cuda_fail(dev, "cudaMallocHost", err);
        return NULL;
    }
    return p;
}

static void cuda_host_free(orin_device *dev, void *ptr)
{
    if (ptr && cudaFreeHost(ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        orin_log(ORIN_LOG_WARN, "cuda:%d: cudaFreeHost failed", dev->index);
    }
}

static int cuda_copy_d2h_queued(orin_device *dev, void *dst, const void *src, size_t bytes)
{
    return cuda_copy(dev, dst, src, bytes, cudaMemcpyDeviceToHost, false);
}

static void cuda_destroy(orin_device *dev)
{
    cudaError_t err = cudaStreamSynchronize(stream_of(dev));
    staging_free(dev->impl);
    dev->impl = NULL;
    if (err == cudaSuccess)
        err = cudaStreamDestroy(stream_of(dev));
    if (err != cudaSuccess) {
        cuda_fail(dev, "closing the stream", err);
        orin_log(ORIN_LOG_WARN, "%s", orin_error());
    }
    free(dev);
}

static const orin_device_ops cuda_ops = {
    .version = ORIN_DEVICE_OPS_VERSION,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy_h2d = cuda_copy_h2d,
    .copy_d2h = cuda_copy_d2h,
    .copy_d2d = cuda_copy_d2d,
    .memset = cuda_memset,
    .synchronize = cuda_synchronize,
    .destroy = cuda_destroy,
    .upload = cuda_upload,
    .mem_info = cuda_mem_info,
    .graph_capture = cuda_graph_capture,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
    .mark_create = cuda_mark_create,
    .mark_record = cuda_mark_record,
    .mark_elapsed = cuda_mark_elapsed,
    .mark_destroy = cuda_mark_destroy,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .copy_d2h_queued = cuda_copy_d2h_queued,
    .mark_wait = cuda_mark_wait,
};

/* Peak bandwidth from the memory clock (kHz) and bus width (bits), both double
 * data rate: 2 * clock * width / 8 bytes per second. 0 when either is unknown. */
static double peak_bandwidth_gbs(int index)
{
    int clock_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, index) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, index) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        orin_log(ORIN_LOG_DEBUG, "cuda:%d: memory clock or bus width unknown", index);
        return 0.0;
    }
    if (clock_khz <= 0 || bus_bits <= 0)
        return 0.0;
    return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
}

orin_device *orin_cuda_device_open(int index)
{
    orin_device probe = {.index = index}; /* for error messages until dev exists */
    struct cudaDeviceProp prop;
    cudaStream_t stream = NULL;
    orin_device *dev = NULL;

    cudaError_t err = cudaSetDevice(index);
    if (err != cudaSuccess) {
        cuda_fail(&probe, "cudaSetDevice", err);
        return NULL;
    }
    err = cudaGetDeviceProperties(&prop, index);
    if (err != cudaSuccess) {
        cuda_fail(&probe, "cudaGetDeviceProperties", err);
        return NULL;
    }
    err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        cuda_fail(&probe, "cudaStreamCreateWithFlags", err);
        return NULL;
    }
    dev = calloc(1, sizeof *dev);
    if (!dev) {
        orin_error_set("cuda:%d: out of memory", index);
        goto fail;
    }
    *dev = (orin_device){
        .ops = &cuda_ops,
        .kind = ORIN_DEVICE_CUDA,
        .index = index,
        .stream = stream,
        .threads = 0,
        .mem_bandwidth_gbs = peak_bandwidth_gbs(index),
        .impl = NULL,
    };
    prop.name[sizeof prop.name - 1] = '\0';
    /* dev->name is 64 bytes; GPU names are shorter than the precision. */
    snprintf(dev->name, sizeof dev->name, "cuda:%d (%.40s)", index, prop.name);
    return dev;

fail:
    if (cudaStreamDestroy(stream) != cudaSuccess)
        (void)cudaGetLastError();
    return NULL;
}
