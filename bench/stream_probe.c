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
 * With --side, chains of links that each stand for a short-context decode
 * layer's latency-bound kernel and the product after it: a spin of US
 * microseconds (probe_spin_launch), then a full read kernel; timed without
 * and with each read's bytes asked of L2 by a kernel on a side branch of the
 * graph, forked as the spin starts, joined only at the chain's end (and, to
 * tell a fetch that misses from one that lands late, the same kernel in line,
 * before the spin; each also asking for a region no read takes soon, the
 * control: the same traffic, no use): whether bytes fetched while the memory
 * is idle make the product after it shorter.
 *
 * With --x-latency, chains of a product's stand-in (probe_x_launch) that
 * after the PDL wait load x, 8 KB the kernel before wrote, as the quantized
 * GEMV stages it: how long x's round trip takes with the block's weights in
 * flight in registers (as the GEMV's early batches), by a bulk copy into
 * shared memory, or with nothing in flight, the question behind "x's loads
 * queue behind the weights'" (bench/notes/quant.md). Prints, a variant and
 * size, the link's time and the mean and median over the chain's blocks of
 * x staged and of the weights in, in us since the wait (clock64 at the
 * device's clock rate). --x-prefetch BYTES adds a row, "reg+next": the
 * registers' kernel that, once x is staged, asks L2 for the first BYTES (up
 * to 32 KB) of the next kernel's slab of each block, so that the memory
 * streams the next product's first bytes during this one's tail. --x-flags
 * adds "none+flag" and "reg+flag": nothing and registers with each kernel
 * waiting not for the one before to end (griddepcontrol.wait) but for its
 * blocks to have counted themselves in on a counter (fence, atomic add) once
 * their x is written.
 *
 *   stream_probe [--sizes MB,MB,...] [--no-pdl] [--x-latency [--x-prefetch BYTES] [--x-flags]]
 *                [--side US,US,... [--prefetch-blocks N] [--prefetch-chunk BYTES]
 *                 [--prefetch-priority]]
 *
 * (--prefetch-chunk 0: the side kernel loads the bytes (ld.global.cg)
 * instead of asking by cp.async.bulk.prefetch.L2; 1: loads slab by slab as
 * the read kernel's blocks take them; 2: the same in reverse order.
 * --prefetch-priority: the side stream at the device's greatest priority and
 * the graph run by its nodes' priorities, so that the side kernel's blocks
 * are placed before the read kernel's, launched early by PDL, waiting ones.)
 *
 * Prints one line a variant and size (with --side: one a spin and size).
 * Needs sm_90 (the bulk copy). */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "stream_probe.h"
#include "bench_util.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAIN 32
#define REPLAYS 10
#define BUFFER_BYTES ((size_t)1 << 30)
#define X_BYTES 8192
#define LAT_BLOCKS 2048 /* blocks a --x-latency kernel at most (64 MB) */

static int check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "stream_probe: %s: %s\n", what, cudaGetErrorString(e));
    return -1;
}

/* What a captured chain reads and runs (see build_chain). */
struct chain {
    const char *buf;
    size_t bytes;       /* a read kernel's bytes */
    uint32_t *out;
    cudaStream_t s;
    cudaStream_t side;  /* where the L2 prefetches go */
    cudaEvent_t fork, join;
    probe_variant v;
    int pdl;
    int hot;            /* every read kernel over the same region (L2) */
    double spin_us;     /* > 0: a spin kernel before each read kernel */
    int reads;          /* 0: spins only */
    int side_prefetch;  /* each read's region asked of L2 as its spin starts: 1 on
                         * the side branch, 2 in line (on the chain, before it) */
    int prefetch_other; /* the prefetch asks for a region no read takes soon: the
                         * same traffic, no use (the control) */
    unsigned pf_blocks;
    uint32_t pf_chunk;
    int node_priority;  /* instantiate with the nodes' priorities (the side
                         * stream's, copied at capture) */
    int x_mode;         /* >= 0: the --x-latency chain, PROBE_X_* */
    char *x;            /* its two x buffers, 8 KB each */
    long long *lat;     /* its clock spans: [CHAIN][blocks][2] */
    uint32_t x_next_bytes; /* PROBE_X_NEXT: bytes of each next slab asked of L2 */
    unsigned *flags;    /* --x-flags: a counter a kernel (reset at the chain's start) */
};

/* Launches CHAIN links on c->s (being captured); 0 or -1. */
static int build_chain(const struct chain *c)
{
    const size_t regions = c->hot ? 1 : BUFFER_BYTES / c->bytes;
    int rc = 0;
    for (int i = 0; i < CHAIN && rc == 0; i++) {
        const char *region = c->buf + (size_t)(i % regions) * c->bytes;
        const char *asked = c->prefetch_other
                                ? c->buf + (size_t)((i + CHAIN) % regions) * c->bytes
                                : region;
        if (c->side_prefetch == 2)
            rc |= probe_prefetch_launch(asked, c->bytes, c->pf_blocks, c->pf_chunk,
                                        c->out + (1u << 20), c->s);
        if (c->side_prefetch == 1) { /* forked off the last read: runs beside the spin */
            rc |= check(cudaEventRecord(c->fork, c->s), "fork");
            rc |= check(cudaStreamWaitEvent(c->side, c->fork, 0), "fork's wait");
            rc |= probe_prefetch_launch(asked, c->bytes, c->pf_blocks, c->pf_chunk,
                                        c->out + (1u << 20), c->side);
        }
        if (c->spin_us > 0.0)
            rc |= probe_spin_launch(c->spin_us, c->out, c->s);
        if (c->x_mode >= 0) { /* x ping-pongs between the two buffers */
            const size_t blocks = c->bytes / probe_slab_bytes();
            if (i == 0 && c->flags)
                rc |= check(cudaMemsetAsync(c->flags, 0, CHAIN * sizeof *c->flags, c->s),
                            "flags' reset");
            const probe_x_args a = {
                .src = region, .x_in = c->x + (i % 2) * X_BYTES,
                .x_out = c->x + (1 - i % 2) * X_BYTES, .lat = c->lat + (size_t)i * 2 * blocks,
                .out = c->out, .next = c->buf + (size_t)((i + 1) % regions) * c->bytes,
                .next_bytes = c->x_next_bytes,
                .flag_wait = c->flags && i > 0 ? c->flags + i - 1 : NULL,
                .flag_post = c->flags ? c->flags + i : NULL, .blocks_before = (unsigned)blocks};
            rc |= probe_x_launch(c->x_mode, c->bytes, a, c->s);
        } else if (c->reads)
            rc |= probe_launch(c->v, region, c->bytes, c->out, c->s, c->pdl);
    }
    if (c->side_prefetch == 1) { /* a capture must end with its forks joined */
        rc |= check(cudaEventRecord(c->join, c->side), "join");
        rc |= check(cudaStreamWaitEvent(c->s, c->join, 0), "join's wait");
    }
    if (rc != 0)
        fprintf(stderr, "stream_probe: launching a chain over %zu bytes: %s\n", c->bytes,
                cudaGetErrorString(cudaGetLastError()));
    return rc;
}

/* Seconds a link of the chain takes, the chain captured in a graph and
 * replayed REPLAYS times. */
static int time_chain(const struct chain *c, double *seconds)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (check(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeGlobal), "capture"))
        return -1;
    const int built = build_chain(c);
    if (check(cudaStreamEndCapture(c->s, &graph), "end capture") || built != 0 ||
        check(cudaGraphInstantiateWithFlags(&exec, graph,
                                            c->node_priority
                                                ? cudaGraphInstantiateFlagUseNodePriority
                                                : 0),
              "instantiate")) {
        if (graph)
            cudaGraphDestroy(graph);
        return -1;
    }
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaGraphLaunch(exec, c->s); /* warm-up */
    cudaEventRecord(a, c->s);
    for (int r = 0; r < REPLAYS; r++)
        cudaGraphLaunch(exec, c->s);
    cudaEventRecord(b, c->s);
    int rc = check(cudaEventSynchronize(b), "replay");
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, a, b);
    *seconds = ms * 1e-3 / (REPLAYS * CHAIN);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    return rc;
}

/* The side-prefetch rows for one size: the read from L2 (every read over one
 * region); then for each spin length in spins (us, comma-separated) the spin
 * alone and the link (spin, read) without and with a fetch into L2 of the
 * read's region or of another (the control, nan where the buffer holds too
 * few regions), on the side branch or in line. */
static int side_rows(struct chain c, const char *spins, double copy)
{
    double sec = 0.0;
    c.v = PROBE_FULL;
    c.hot = 1;
    if (time_chain(&c, &sec) != 0)
        return -1;
    printf("read, L2 hot   %7.2f MB  %8.2f us  %7.1f GB/s\n", c.bytes / 1e6, sec * 1e6,
           c.bytes / sec / 1e9);
    c.hot = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", spins);
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        static const struct {
            int reads, side_prefetch, prefetch_other;
        } variants[6] = {
            {0, 0, 0}, /* the spin alone */
            {1, 0, 0}, /* the link: spin, read */
            {1, 1, 0}, /* + the read's region asked for on the side branch */
            {1, 1, 1}, /* + another region asked for there (the control) */
            {1, 2, 0}, /* the read's region asked for in line, before the spin */
            {1, 2, 1}, /* another region in line */
        };
        double t[6];
        c.spin_us = atof(tok);
        for (int i = 0; i < 6; i++) {
            t[i] = NAN; /* the control needs regions no read of the chain takes */
            if (variants[i].prefetch_other && BUFFER_BYTES / c.bytes <= 2 * CHAIN)
                continue;
            c.reads = variants[i].reads;
            c.side_prefetch = variants[i].side_prefetch;
            c.prefetch_other = variants[i].prefetch_other;
            if (time_chain(&c, &t[i]) != 0)
                return -1;
        }
        printf("spin %5.2f us + read %6.2f MB (floor %5.2f us): spin alone %6.2f, link %6.2f, "
               "side prefetch %6.2f (other region %6.2f), in line %6.2f (other region %6.2f) "
               "us\n",
               c.spin_us, c.bytes / 1e6, c.bytes / (copy * 1e9) * 1e6, t[0] * 1e6, t[1] * 1e6,
               t[2] * 1e6, t[3] * 1e6, t[4] * 1e6, t[5] * 1e6);
    }
    return 0;
}

/* Mean and median of n values (sorted in place by bench_median). */
static void mean_median(double *v, size_t n, double *mean, double *median)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    *mean = sum / n;
    *median = bench_median(v, (int)n);
}

/* The --x-latency rows for one size: each PROBE_X_* mode's link time (with
 * --x-flags, nothing and registers once more with the flag handoff), and
 * over the blocks of kernels 1..CHAIN-1 of the last replay (kernel 0's
 * predecessor is in another graph launch, no PDL edge) x staged and the
 * weights in, us since the wait. */
static int x_rows(struct chain c, unsigned *flags, double copy, double ghz)
{
    static const struct {
        const char *name;
        int mode, flags;
    } rows[] = {
        {"nothing", PROBE_X_NONE, 0},     {"registers", PROBE_X_REGISTERS, 0},
        {"bulk", PROBE_X_BULK, 0},        {"reg+next", PROBE_X_NEXT, 0},
        {"none+flag", PROBE_X_NONE, 1},   {"reg+flag", PROBE_X_REGISTERS, 1},
    };
    const size_t blocks = c.bytes / probe_slab_bytes(), n = (CHAIN - 1) * blocks;
    long long *host = malloc(CHAIN * blocks * 2 * sizeof *host);
    double *xs = malloc(n * sizeof *xs), *ws = malloc(n * sizeof *ws);
    int rc = host && xs && ws ? 0 : -1;
    for (size_t r = 0; rc == 0 && r < sizeof rows / sizeof rows[0]; r++) {
        if ((rows[r].mode == PROBE_X_NEXT && !c.x_next_bytes) || (rows[r].flags && !flags))
            continue;
        double sec = 0.0, xm, xmed, wm, wmed;
        c.x_mode = rows[r].mode;
        c.flags = rows[r].flags ? flags : NULL;
        rc = time_chain(&c, &sec) ||
             check(cudaMemcpy(host, c.lat, CHAIN * blocks * 2 * sizeof *host,
                              cudaMemcpyDeviceToHost),
                   "clock spans");
        if (rc != 0)
            break;
        for (size_t i = 0; i < n; i++) {
            xs[i] = host[2 * (blocks + i)] / (ghz * 1e3);
            ws[i] = host[2 * (blocks + i) + 1] / (ghz * 1e3);
        }
        mean_median(xs, n, &xm, &xmed);
        mean_median(ws, n, &wm, &wmed);
        printf("x after the wait, weights in flight: %-9s %7.2f MB  link %6.2f us (floor %5.2f)"
               "  x staged: mean %5.2f median %5.2f us  weights in: mean %5.2f median %5.2f us\n",
               rows[r].name, c.bytes / 1e6, sec * 1e6, c.bytes / (copy * 1e9) * 1e6, xm, xmed,
               wm, wmed);
    }
    if (rc != 0 && !(host && xs && ws))
        fprintf(stderr, "stream_probe: out of host memory\n");
    free(host);
    free(xs);
    free(ws);
    return rc;
}

int main(int argc, char **argv)
{
    char sizes_arg[256] = "8.4,12.6,25.2,50.3";
    char spins[256] = "";
    int pdl = 1, x_latency = 0, x_flags = 0;
    uint32_t x_next_bytes = 0;
    unsigned pf_blocks = 132;
    int high_priority = 0;
    uint32_t pf_chunk = 4096;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
            snprintf(sizes_arg, sizeof sizes_arg, "%s", argv[++i]);
        else if (strcmp(argv[i], "--side") == 0 && i + 1 < argc)
            snprintf(spins, sizeof spins, "%s", argv[++i]);
        else if (strcmp(argv[i], "--prefetch-blocks") == 0 && i + 1 < argc)
            pf_blocks = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--prefetch-chunk") == 0 && i + 1 < argc)
            pf_chunk = (uint32_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--prefetch-priority") == 0)
            high_priority = 1;
        else if (strcmp(argv[i], "--no-pdl") == 0)
            pdl = 0;
        else if (strcmp(argv[i], "--x-latency") == 0)
            x_latency = 1;
        else if (strcmp(argv[i], "--x-prefetch") == 0 && i + 1 < argc) {
            char *end = NULL;
            const unsigned long n = strtoul(argv[++i], &end, 10);
            if (*end || n < 16 || n > 32768) {
                fprintf(stderr, "stream_probe: --x-prefetch %s: bytes from 16 to 32768\n",
                        argv[i]);
                return 2;
            }
            x_next_bytes = (uint32_t)n;
        }
        else if (strcmp(argv[i], "--x-flags") == 0)
            x_flags = 1;
        else {
            fprintf(stderr, "usage: stream_probe [--sizes MB,MB,...] [--no-pdl] [--x-latency "
                            "[--x-prefetch BYTES] [--x-flags]] "
                            "[--side US,US,... [--prefetch-blocks N] [--prefetch-chunk BYTES] "
                            "[--prefetch-priority]]\n");
            return 2;
        }
    }
    if ((x_next_bytes || x_flags) && !x_latency) {
        fprintf(stderr, "stream_probe: --x-prefetch and --x-flags go with --x-latency\n");
        return 2;
    }
    if (pf_blocks == 0 || pf_blocks > 4096 || (pf_chunk > 2 && pf_chunk % 16 != 0)) {
        fprintf(stderr, "stream_probe: --prefetch-blocks must be 1-4096 and --prefetch-chunk "
                        "0, 1, 2 or a multiple of 16\n");
        return 2;
    }
    char name[256];
    double copy = 0.0;
    const int opened = bench_probe_open("stream_probe", name, sizeof name, &copy);
    if (opened)
        return opened;
    void *buf = NULL;
    uint32_t *out = NULL;
    char *x = NULL;
    long long *lat = NULL;
    unsigned *flags = NULL;
    int clock_khz = 0;
    cudaStream_t s = NULL, side = NULL;
    cudaEvent_t fork = NULL, join = NULL;
    int least = 0, greatest = 0, rc = 2;
    if (check(cudaMalloc(&buf, BUFFER_BYTES), "buffer") ||
        check(cudaMalloc((void **)&out, (size_t)1 << 24), "out") ||
        check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream") ||
        check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "priorities") ||
        check(cudaStreamCreateWithPriority(&side, cudaStreamNonBlocking,
                                           high_priority ? greatest : least),
              "side stream") ||
        check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "fork event") ||
        check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "join event") ||
        check(cudaMemset(buf, 0x5A, BUFFER_BYTES), "buffer's fill") ||
        check(cudaMalloc((void **)&x, 2 * X_BYTES), "x") ||
        check(cudaMemset(x, 0, 2 * X_BYTES), "x's fill") ||
        check(cudaMalloc((void **)&lat, (size_t)CHAIN * LAT_BLOCKS * 2 * sizeof *lat),
              "clock spans") ||
        check(cudaMalloc((void **)&flags, CHAIN * sizeof *flags), "flags") ||
        check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "clock rate"))
        goto done;
    printf("device %s, copy %.1f GB/s (read + written), chains of %d, pdl %d\n", name, copy,
           CHAIN, pdl);
    const char *names[] = {"full", "registers", "bulk"};
    const size_t slab = probe_slab_bytes();
    char *save = NULL;
    for (char *tok = strtok_r(sizes_arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t bytes = (size_t)(atof(tok) * 1e6) / slab * slab;
        const size_t most = x_latency ? LAT_BLOCKS * slab : BUFFER_BYTES;
        if (bytes == 0 || bytes > most || bytes / slab > (1u << 24) / 32) {
            fprintf(stderr, "stream_probe: size %s MB: not between one slab (%zu bytes) and "
                            "%zu bytes\n", tok, slab, most);
            goto done;
        }
        struct chain c = {.buf = buf, .bytes = bytes, .out = out, .s = s, .side = side,
                          .fork = fork, .join = join, .pdl = pdl, .reads = 1,
                          .pf_blocks = pf_blocks, .pf_chunk = pf_chunk,
                          .node_priority = high_priority, .x_mode = -1, .x = x,
                          .lat = lat, .x_next_bytes = x_next_bytes};
        if (x_latency) {
            if (x_rows(c, x_flags ? flags : NULL, copy, clock_khz / 1e6) != 0)
                goto done;
            continue;
        }
        if (spins[0]) {
            if (side_rows(c, spins, copy) != 0)
                goto done;
            continue;
        }
        for (int v = PROBE_FULL; v <= PROBE_BULK; v++) {
            double sec = 0.0;
            c.v = (probe_variant)v;
            if (time_chain(&c, &sec) != 0)
                goto done;
            const double gbs = (double)bytes / sec / 1e9;
            printf("%-9s %7.2f MB  %8.2f us  floor %7.2f us  %7.1f GB/s  %5.1f %%\n", names[v],
                   bytes / 1e6, sec * 1e6, bytes / (copy * 1e9) * 1e6, gbs, 100.0 * gbs / copy);
        }
    }
    rc = 0;
done: /* one cleanup path */
    if (fork)
        cudaEventDestroy(fork);
    if (join)
        cudaEventDestroy(join);
    if (side)
        cudaStreamDestroy(side);
    if (s)
        cudaStreamDestroy(s);
    cudaFree(buf);
    cudaFree(out);
    cudaFree(x);
    cudaFree(lat);
    cudaFree(flags);
    return rc;
}
