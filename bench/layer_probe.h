/* layer_probe's kernel (layer_probe.cu), behind a C interface: one decode
 * layer's four AWQ products as one persistent kernel fed by a shared-memory
 * ring (see layer_probe.c for what it asks). */
#ifndef ORIN_BENCH_LAYER_PROBE_H
#define ORIN_BENCH_LAYER_PROBE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct layer_probe_config {
    int warps;           /* consumer warps a block: 8 or 16 */
    int stages;          /* ring slots a block (16 KB of weights each) */
    int layers;          /* layers a launch runs */
    int weight_layers;   /* distinct layers of weights (layer l reads l % this) */
    double attention_us; /* > 0: a spin of this long between q/k/v and o (the
                          * attention's stand-in), between two more grid barriers */
    int barriers;        /* 0: no grid barrier at all (the ring's own rate) */
    int math;            /* 0: the GEMV's qmma_batch; 1: every span's chains at once,
                          * group entries in registers (layer_probe.cu, lp_spans) */
    int late_sums;       /* 1: warps add their tile sums into the block's with shared
                          * atomics and meet once a product, not once a tile */
    int wait_one;        /* 1: one lane a warp waits for a slot, the warp follows */
    int multicast;       /* cluster kernel: x into the streamers by one multicast bulk
                          * copy from global memory (staged there once) */
    int cluster;         /* 1: the cluster kernel (a control block and 7 streamers) */
    int no_compute;      /* 1: the consumers skip the k-tiles (timing only) */
    int no_stream;       /* 1: the producer copies nothing, a slot is full at once
                          * (the consumers' own rate; timing only) */
    int trace_layer;     /* >= 0: stamp this layer's events (layer_probe_print_trace)
                          */
} layer_probe_config;

typedef struct layer_probe_setup layer_probe_setup;

/* Allocates and fills `weight_layers` layers of random AWQ weights in the
 * tile layout (Qwen3-8B's shapes, group 128) and the inputs. NULL with a line
 * on stderr where it fails. */
layer_probe_setup *layer_probe_create(int weight_layers);
void layer_probe_destroy(layer_probe_setup *s);

/* Bytes of weights (qweight, scales, zeros) a layer reads. */
double layer_probe_layer_bytes(const layer_probe_setup *s);

/* Runs the kernel `reps` times; best and median microseconds a launch.
 * Returns 0, or -1 with a line on stderr. */
int layer_probe_time(layer_probe_setup *s, const layer_probe_config *cfg, int reps, double *best_us,
                     double *median_us);

/* One launch of cfg (layers as given), then each product's outputs against a
 * plain f32 dequantize-and-multiply of the last layer's weights; the worst
 * |error| over max |reference| of any product. Returns 0, or -1. */
int layer_probe_check(layer_probe_setup *s, const layer_probe_config *cfg, double *worst);

/* One launch of cfg with its middle layer (or cfg's trace_layer) stamped, and
 * a table of the stamps on stdout: a row a product, each event's median and
 * latest time over the blocks. Returns 0, or -1. */
int layer_probe_print_trace(layer_probe_setup *s, const layer_probe_config *cfg);

/* `launches` launches of `blocks` blocks each adding a vector of n floats
 * into one (mode 0: red.global a float, 1: red.v4.f32 four) or storing it to
 * its own (2): microseconds a launch, and element 0 of the result after the
 * timed launches (modes 0 and 1: launches x the sum of every block's value).
 * Returns 0, or -1 with a line on stderr. */
int layer_probe_reduce(int mode, int blocks, int n, int launches, double *us, double *sum0);

#ifdef __cplusplus
}
#endif
#endif
