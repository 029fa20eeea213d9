/* Devices: the host device built into the core, and opening a device by name. */
#include "orin/device.h"
#include "orin/cpu_util.h"
#include "orin/error.h"
#include "device_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the host device ---- */

/* 64 bytes: a cache line, and enough for the widest SIMD loads (AVX-512). */
#define HOST_ALIGN 64

static void *host_alloc(orin_device *dev, size_t bytes)
{
    /* Round up to the alignment (aligned_alloc wants a multiple of it), and
     * give zero-byte requests a real block so that NULL always means failure. */
    if (bytes > SIZE_MAX - HOST_ALIGN) {
        orin_error_set("cpu: cannot allocate %zu bytes: too large", bytes);
        return NULL;
    }
    size_t rounded = bytes ? (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN : HOST_ALIGN;
    void *p = aligned_alloc(HOST_ALIGN, rounded);
    if (!p)
        orin_error_set("cpu: cannot allocate %zu bytes: out of memory", bytes);
    return p;
}

static void host_free(orin_device *dev, void *ptr)
{
    free(ptr);
}

static int host_copy(orin_device *dev, void *dst, const void *src, size_t bytes)
{
    if (bytes && (!dst || !src))
        return orin_error_set("cpu: copy of %zu bytes with a NULL pointer", bytes);
    /* memmove: a device-to-device copy within one buffer may overlap. */
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

static int host_memset(orin_device *dev, void *dst, int value, size_t bytes)
{
    if (bytes && !dst)
        return orin_error_set("cpu: memset of %zu bytes at NULL", bytes);
    if (bytes)
        memset(dst, value, bytes);
    return 0;
}

static int host_synchronize(orin_device *dev)
{
    return 0; /* host ops run to completion before they return */
}

static int host_upload(orin_device *dev, void *dst, orin_dtype dst_dt, const void *src,
                       orin_dtype src_dt, size_t n)
{
    if (n && (!dst || !src))
        return orin_error_set("cpu: upload of %zu elements with a NULL pointer", n);
    if (orin_convert(dst, dst_dt, src, src_dt, n) != 0)
        return orin_error_set("cpu: cannot convert %s to %s", orin_dtype_name(src_dt),
                              orin_dtype_name(dst_dt));
    return 0;
}

static const orin_device_ops host_ops = {
    .version = ORIN_DEVICE_OPS_VERSION,
    .alloc = host_alloc,
    .free = host_free,
    .copy_h2d = host_copy,
    .copy_d2h = host_copy,
    .copy_d2d = host_copy,
    .memset = host_memset,
    .synchronize = host_synchronize,
    .destroy = NULL, /* the singleton lives as long as the process */
    .upload = host_upload,
    .mem_info = NULL,
    .graph_capture = NULL, /* host ops run as they are called */
    .graph_launch = NULL,
    .graph_destroy = NULL,
    .mark_create = NULL,
    .mark_record = NULL,
    .mark_elapsed = NULL,
    .mark_destroy = NULL,
    .host_alloc = NULL, /* host memory is the device's: nothing is queued */
    .host_free = NULL,
    .copy_d2h_queued = NULL,
    .mark_wait = NULL,
};

static orin_device host_device = {
    .ops = &host_ops,
    .kind = ORIN_DEVICE_CPU,
    .index = 0,
    .name = "cpu",
    .stream = NULL,
    .threads = 0,
    .mem_bandwidth_gbs = 0.0,
    .impl = NULL,
};

orin_device *orin_device_cpu(void)
{
    return &host_device;
}

/* ---- CUDA, where built ---- */

#ifdef ORIN_HAVE_CUDA

bool orin_cuda_available(void)
{
    char why[256];
    return orin_cuda_device_count(why, sizeof why) > 0;
}

static orin_device *open_cuda(int index)
{
    char why[256];
    int n = orin_cuda_device_count(why, sizeof why);
    if (n <= 0) {
        orin_error_set("cuda: no CUDA device found (%s)", why);
        return NULL;
    }
    if (index >= n) {
        orin_error_set("cuda:%d: no such device (%d CUDA device%s found)", index, n,
                       n == 1 ? "" : "s");
        return NULL;
    }
    return orin_cuda_device_open(index);
}

#else

bool orin_cuda_available(void)
{
    return false;
}

static orin_device *open_cuda(int index)
{
    orin_error_set("cuda: this build has no CUDA support (rebuild where nvcc is found)");
    return NULL;
}

#endif

/* "cuda" is GPU 0; "cuda:N" picks one. Returns the index, or -1 when the text
 * after "cuda:" is not a small non-negative integer. */
static int parse_cuda_index(const char *name)
{
    if (name[4] == '\0')
        return 0;
    const char *digits = name + 5;
    if (name[4] != ':' || *digits < '0' || *digits > '9')
        return -1;
    char *end;
    errno = 0;
    long index = strtol(digits, &end, 10);
    if (errno || *end || index > INT_MAX)
        return -1;
    return (int)index;
}

orin_device *orin_device_open(const char *name)
{
    if (!name) {
        orin_error_set("device: no name given (expected cpu, cuda or auto)");
        return NULL;
    }
    if (strcmp(name, "cpu") == 0)
        return orin_device_cpu();
    if (strcmp(name, "auto") == 0) {
        if (orin_cuda_available())
            return open_cuda(0);
        orin_log(ORIN_LOG_DEBUG, "device auto: no CUDA device, using the cpu");
        return orin_device_cpu();
    }
    if (strncmp(name, "cuda", 4) == 0) {
        int index = parse_cuda_index(name);
        if (index >= 0)
            return open_cuda(index);
    }
    orin_error_set("device \"%s\": unknown device (expected cpu, cuda, cuda:N or auto)", name);
    return NULL;
}

void orin_device_close(orin_device *dev)
{
    if (!dev || dev == &host_device)
        return;
    if (dev->ops && dev->ops->destroy)
        dev->ops->destroy(dev);
}

/* One timed copy of bytes: between marks where the device has them (only the
 * copy's own time), else by the wall clock around the synchronised copy. */
static int time_copy(orin_device *dev, void *dst, const void *src, size_t bytes, void *m0,
                     void *m1, double *seconds)
{
    if (m0 && m1) {
        if (dev->ops->mark_record(dev, m0) || dev->ops->copy_d2d(dev, dst, src, bytes) ||
            dev->ops->mark_record(dev, m1))
            return -1;
        return dev->ops->mark_elapsed(dev, m0, m1, seconds);
    }
    const double t0 = orin_seconds();
    if (dev->ops->copy_d2d(dev, dst, src, bytes) || dev->ops->synchronize(dev))
        return -1;
    *seconds = orin_seconds() - t0;
    return 0;
}

double orin_device_copy_gbs(orin_device *dev, size_t bytes)
{
    const bool marks = dev->ops->mark_create != NULL;
    void *src = dev->ops->alloc(dev, bytes), *dst = dev->ops->alloc(dev, bytes);
    void *m0 = marks ? dev->ops->mark_create(dev) : NULL;
    void *m1 = marks ? dev->ops->mark_create(dev) : NULL;
    double best = 0;
    if (src && dst && (!marks || (m0 && m1)) && dev->ops->memset(dev, src, 1, bytes) == 0) {
        for (int i = 0; i < 6; i++) { /* the first warms up */
            double s;
            if (time_copy(dev, dst, src, bytes, m0, m1, &s) != 0 || s <= 0)
                break;
            if (i > 0 && 2.0 * (double)bytes / s > best)
                best = 2.0 * (double)bytes / s;
        }
    }
    if (m0)
        dev->ops->mark_destroy(dev, m0);
    if (m1)
        dev->ops->mark_destroy(dev, m1);
    if (src)
        dev->ops->free(dev, src);
    if (dst)
        dev->ops->free(dev, dst);
    return best / 1e9;
}
