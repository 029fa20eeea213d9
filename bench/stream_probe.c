/* How much a decode product's kernel costs beyond its bytes when kernels run
 * back to back with PDL, as a decode step's do: chains of CHAIN kernels, each
 * reading its own region of a buffer larger than L2, captured in a CUDA graph
 * and replayed; per kernel: microseconds, GB/s and the fraction of the copy
 * bandwidth (orin_device_copy_gbs: bytes read + written by a 1 GiB device
 * copy, best of 5, as orin-run and every bench program measure it).
 * Variants (stream_probe.cu): weights in registers before the PDL wait,
 * blocks filling a third of an SM (full: the quantized GEMV's way) or leaving
 * room beside them (registers), and a cp.async.bulk into shared memory (bulk).
 *
 *   stream_probe [--sizes MB,MB,...] [--no-pdl]
 *
 * Prints one line a variant and size. Needs sm_90 (the bulk copy). */
#include "stream_probe.h"

#include "orin/device.h"
#include "orin/error.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAIN 32
#define REPLAYS 10
#define BUFFER_BYTES ((size_t)1 << 30)

static int check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "stream_probe: %s: %s\n", what, cudaGetErrorString(e));
    return -1;
}

/* Seconds a kernel of `bytes` takes in a replayed chain of CHAIN. */
static int time_chain(probe_variant v, const char *buf, size_t bytes, uint32_t *out,
                      cudaStream_t s, int pdl, double *seconds)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "capture"))
        return -1;
    const size_t regions = BUFFER_BYTES / bytes;
    int rc = 0;
    for (int i = 0; i < CHAIN && rc == 0; i++)
        rc = probe_launch(v, buf + (size_t)(i % regions) * bytes, bytes, out, s, pdl);
    if (rc != 0)
        fprintf(stderr, "stream_probe: launching variant %d over %zu bytes: %s\n", (int)v,
                bytes, cudaGetErrorString(cudaGetLastError()));
    if (check(cudaStreamEndCapture(s, &graph), "end capture") || rc != 0 ||
        check(cudaGraphInstantiate(&exec, graph, 0), "instantiate")) {
        if (graph)
            cudaGraphDestroy(graph);
        return -1;
    }
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaGraphLaunch(exec, s); /* warm-up */
    cudaEventRecord(a, s);
    for (int r = 0; r < REPLAYS; r++)
        cudaGraphLaunch(exec, s);
    cudaEventRecord(b, s);
    rc = check(cudaEventSynchronize(b), "replay");
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, a, b);
    *seconds = ms * 1e-3 / (REPLAYS * CHAIN);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    return rc;
}

int main(int argc, char **argv)
{
    char sizes_arg[256] = "8.4,12.6,25.2,50.3";
    int pdl = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
            snprintf(sizes_arg, sizeof sizes_arg, "%s", argv[++i]);
        else if (strcmp(argv[i], "--no-pdl") == 0)
            pdl = 0;
        else {
            fprintf(stderr, "usage: stream_probe [--sizes MB,MB,...] [--no-pdl]\n");
            return 2;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        fprintf(stderr, "stream_probe: no CUDA device\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    if (prop.major < 9) {
        fprintf(stderr, "stream_probe: %s is sm_%d%d; the bulk copy needs sm_90\n", prop.name,
                prop.major, prop.minor);
        return 77;
    }
    orin_error_clear();
    orin_device *dev = orin_device_open("cuda");
    const double copy = dev ? orin_device_copy_gbs(dev, ORIN_COPY_PROBE_BYTES) : 0.0;
    orin_device_close(dev);
    if (copy <= 0.0) { /* the open or the copy's allocation said why */
        fprintf(stderr, "stream_probe: no copy bandwidth measured: %s\n", orin_error());
        return 2;
    }
    void *buf = NULL;
    uint32_t *out = NULL;
    cudaStream_t s = NULL;
    int rc = 2;
    if (check(cudaMalloc(&buf, BUFFER_BYTES), "buffer") ||
        check(cudaMalloc((void **)&out, (size_t)1 << 24), "out") ||
        check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream") ||
        check(cudaMemset(buf, 0x5A, BUFFER_BYTES), "buffer's fill"))
        goto done;
    printf("device %s, copy %.1f GB/s (read + written), chains of %d, pdl %d\n", prop.name, copy,
           CHAIN, pdl);
    const char *names[] = {"full", "registers", "bulk"};
    const size_t slab = probe_slab_bytes();
    for (char *tok = strtok(sizes_arg, ","); tok; tok = strtok(NULL, ",")) {
        size_t bytes = (size_t)(atof(tok) * 1e6) / slab * slab;
        if (bytes == 0 || bytes > BUFFER_BYTES || bytes / slab > (1u << 24) / 32) {
            fprintf(stderr, "stream_probe: size %s MB: not between one slab (%zu bytes) and "
                            "the buffer (%zu bytes)\n", tok, slab, BUFFER_BYTES);
            goto done;
        }
        for (int v = PROBE_FULL; v <= PROBE_BULK; v++) {
            double sec = 0.0;
            if (time_chain((probe_variant)v, (const char *)buf, bytes, out, s, pdl, &sec) != 0)
                goto done;
            const double gbs = (double)bytes / sec / 1e9;
            printf("%-9s %7.2f MB  %8.2f us  floor %7.2f us  %7.1f GB/s  %5.1f %%\n", names[v],
                   bytes / 1e6, sec * 1e6, bytes / (copy * 1e9) * 1e6, gbs, 100.0 * gbs / copy);
        }
    }
    rc = 0;
done: /* one cleanup path */
    if (s)
        cudaStreamDestroy(s);
    cudaFree(buf);
    cudaFree(out);
    return rc;
}
