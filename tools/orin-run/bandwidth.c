/* The memory bandwidth decode meets on a device, measured: the floor of a
 * decode step is its bytes over this (--bench, --profile). A GPU's is its
 * device copy's (orin_device_copy_gbs), as the bench programs measure it. */
#include "engine.h"

#include "orin/cpu_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The host's bandwidth as decode uses it: every op thread streaming reads
 * through a buffer far larger than the caches. One task sums one slice. */
enum { READ_SLICES = 64 };

typedef struct read_job {
    const uint64_t *data;
    size_t words_per_slice;
    uint64_t sums[READ_SLICES];
} read_job;

static int sum_slice(void *ctx, int worker, int64_t slice)
{
    (void)worker;
    read_job *job = ctx;
    const uint64_t *p = job->data + (size_t)slice * job->words_per_slice;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* four chains: the loads, not the adds, bound it */
    for (size_t i = 0; i + 4 <= job->words_per_slice; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    job->sums[slice] = s0 + s1 + s2 + s3;
    return 0;
}

static double measure_host_bandwidth(orin_device *dev)
{
    const size_t bytes = 1u << 30;
    read_job job = {.words_per_slice = bytes / sizeof(uint64_t) / READ_SLICES};
    uint64_t *data = malloc(bytes);
    if (!data)
        return 0;
    memset(data, 1, bytes); /* touch every page before timing */
    job.data = data;
    double best = 0;
    for (int i = 0; i < 5; i++) {
        double t0 = orin_seconds();
        if (orin_cpu_parallel_for(orin_cpu_threads(dev), READ_SLICES, sum_slice, &job) != 0)
            break;
        double bw = (double)bytes / (orin_seconds() - t0);
        if (bw > best)
            best = bw;
    }
    uint64_t total = 0;
    for (int s = 0; s < READ_SLICES; s++)
        total += job.sums[s];
    free(data);
    /* memset(1) makes every word 0x0101...01: a wrong sum means a wrong read. */
    return total == 0x0101010101010101ull * (bytes / sizeof(uint64_t)) ? best / 1e9 : 0;
}

double engine_bandwidth(orin_device *dev)
{
    return dev->kind == ORIN_DEVICE_CPU ? measure_host_bandwidth(dev)
                                        : orin_device_copy_gbs(dev, ORIN_COPY_PROBE_BYTES);
}

