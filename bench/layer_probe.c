/* Whether a decode layer's AWQ products, run as one persistent kernel that
 * streams the weights through a shared-memory ring (layer_probe.cu), reach
 * the weight stream's floor where the model's separate kernels do not
 * (bench/notes/quant.md: AWQ's step is ~52 us a layer on an H100 against
 * ~34 us of bytes; the four products alone ~42 us, the attention and
 * rope_kv_write ~9). Qwen3-8B's shapes, random weights in the GEMV's tile
 * layout, `--layers` layers a launch over `WEIGHT_LAYERS` distinct layers of
 * weights (more than L2 holds), timed between CUDA events.
 *
 *   layer_probe [--warps 8,16] [--stages N,...] [--attention-us US,...]
 *               [--layers N] [--math 0-3,...] [--late-sums 0,1]
 *               [--cluster [--multicast]]
 *               [--no-barriers] [--no-compute] [--no-stream] [--wait-one] [--trace]
 *   layer_probe --reduce
 *
 * What it found (bench/notes/quant.md, 2026-11-27 third): no variant beats
 * the chain of kernels; the figures there come from this program.
 *
 * First a check: one launch of two layers, each product's outputs against
 * a plain f32 dequantize-and-multiply of the tile layout's values (exit 1
 * where any is off by more than 1e-2 of its largest). Then a line a
 * configuration: microseconds a layer (best and median of REPS launches),
 * GB/s of weights and the fraction of the copy bandwidth
 * (orin_device_copy_gbs, as every floor in bench/ is measured).
 * --attention-us puts a spin of that long (the attention's stand-in) between
 * q/k/v and o; --no-barriers drops the grid barriers (the ring's own rate);
 * --cluster runs the cluster kernel: clusters of 8 blocks, a control block
 * that alone reads x and meets the others at the grid barriers, and 7 that
 * only stream and compute (layer_probe.cu says why);
 * --math picks the consumers' k-tile code: 0 the GEMV's qmma_batch (its spans'
 * chains one after the other, the group entries through shared memory), 1
 * every span's chains at once, each lane's entries in registers (lp_spans);
 * 2 and 3 are timing-only knock-outs of 1 (no check: wrong sums): 2 the
 * tensor cores fed normal f16 values instead of the fold's subnormals, 3 no
 * mma at all;
 * --late-sums 1 has the warps add each tile's sums into the block's with
 * shared atomics and meet once a product (0: once a tile, as the GEMV's
 * block does);
 * --multicast (with --cluster) sends x to the streamers by one multicast
 * bulk copy from global memory, where it is staged once, instead of the
 * control's copy into each;
 * --reduce, instead of the layer: what adding partial vectors into one costs,
 * as a product split over its inputs would (4,096 floats from 132, 264 and
 * 768 blocks: red a float, red.v4, and plain stores of the same bytes), with
 * the adds' result checked;
 * --wait-one has one lane a warp wait for a slot (the others follow it);
 * --no-stream copies no weights (each slot is taken as it is: the
 * consumers' own rate; timing only);
 * --no-compute skips the k-tiles (the outputs are then wrong: timing only);
 * --trace prints, after each configuration's row, when each block reached
 * each point of each product in the middle layer (layer_probe_print_trace).
 * Needs sm_90 (the bulk copy); exits 77 without it. */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "layer_probe.h"
#include "bench_util.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEIGHT_LAYERS 8
#define REPS 7
#define MAX_LIST 8

/* "a,b,c" into at most MAX_LIST numbers; the count, or -1. */
static int parse_list(const char *arg, double *out)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        const double v = strtod(tok, &end);
        if (n == MAX_LIST || end == tok || *end != '\0' || v < 0.0)
            return -1;
        out[n++] = v;
    }
    return n;
}

/* --reduce: a line a grid size, microseconds a launch of each way. Returns the
 * exit status. */
static int reduce_table(const char *device)
{
    const int grids[] = {132, 264, 768}, n = 4096, launches = 50;
    printf("device %s; %d floats a block into one vector, us a launch (%d launches, no "
           "PDL):\n",
           device, n, launches);
    for (int g = 0; g < 3; g++) {
        double us[3], first[3];
        for (int mode = 0; mode < 3; mode++)
            if (layer_probe_reduce(mode, grids[g], n, launches, &us[mode], &first[mode]))
                return 2;
        /* element 0: launches x the sum over blocks of b 1e-3 */
        const double want = launches * 1e-3 * (double)grids[g] * (grids[g] - 1) / 2.0;
        const int ok = fabs(first[0] - want) <= 1e-3 * want && fabs(first[1] - want) <= 1e-3 * want;
        printf("reduce %4d blocks: red %7.2f us, red.v4 %7.2f us, stores %7.2f us%s\n", grids[g],
               us[0], us[1], us[2], ok ? "" : "  SUMS WRONG");
        if (!ok)
            return 1;
    }
    return 0;
}

/* Path k of the sweep (its warps, k-tile code and sums, slowest-varying
 * first) on top of base. */
static layer_probe_config path_config(const layer_probe_config *base, int k, const double *warps,
                                      const double *maths, int n_maths, const double *lates,
                                      int n_lates)
{
    layer_probe_config cfg = *base;
    cfg.warps = (int)warps[k / (n_maths * n_lates)];
    cfg.math = (int)maths[k / n_lates % n_maths];
    cfg.late_sums = (int)lates[k % n_lates];
    return cfg;
}

static int usage(void)
{
    fprintf(stderr, "usage: layer_probe [--warps 8,16] [--stages N,...] [--attention-us US,...]\n"
                    "                   [--layers N] [--math 0-3,...] [--late-sums 0,1] "
                    "[--cluster [--multicast]]\n"
                    "                   [--no-barriers] [--no-compute] [--no-stream] "
                    "[--wait-one] [--trace]\n"
                    "       layer_probe --reduce\n");
    return 2;
}

int main(int argc, char **argv)
{
    double warps[MAX_LIST] = {8}, stages[MAX_LIST] = {10}, attention[MAX_LIST] = {0};
    double maths[MAX_LIST] = {0}, lates[MAX_LIST] = {0};
    int n_warps = 1, n_stages = 1, n_attention = 1, n_maths = 1, n_lates = 1, layers = 36,
        barriers = 1, trace = 0, no_compute = 0, cluster = 0, no_stream = 0, wait_one = 0,
        multicast = 0, reduce = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--warps") == 0 && i + 1 < argc)
            n_warps = parse_list(argv[++i], warps);
        else if (strcmp(argv[i], "--stages") == 0 && i + 1 < argc)
            n_stages = parse_list(argv[++i], stages);
        else if (strcmp(argv[i], "--attention-us") == 0 && i + 1 < argc)
            n_attention = parse_list(argv[++i], attention);
        else if (strcmp(argv[i], "--math") == 0 && i + 1 < argc)
            n_maths = parse_list(argv[++i], maths);
        else if (strcmp(argv[i], "--late-sums") == 0 && i + 1 < argc)
            n_lates = parse_list(argv[++i], lates);
        else if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc)
            layers = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-barriers") == 0)
            barriers = 0;
        else if (strcmp(argv[i], "--reduce") == 0)
            reduce = 1;
        else if (strcmp(argv[i], "--multicast") == 0)
            multicast = 1;
        else if (strcmp(argv[i], "--wait-one") == 0)
            wait_one = 1;
        else if (strcmp(argv[i], "--no-stream") == 0)
            no_stream = 1;
        else if (strcmp(argv[i], "--cluster") == 0)
            cluster = 1;
        else if (strcmp(argv[i], "--no-compute") == 0)
            no_compute = 1;
        else if (strcmp(argv[i], "--trace") == 0)
            trace = 1;
        else
            return usage();
        if (n_warps < 1 || n_stages < 1 || n_attention < 1 || n_maths < 1 || n_lates < 1)
            return usage();
    }
    for (int k = 0; k < n_maths; k++)
        if (maths[k] > 3) {
            fprintf(stderr, "layer_probe: --math takes 0-3\n");
            return 2;
        }
    if (multicast && !cluster) {
        fprintf(stderr, "layer_probe: --multicast is the cluster kernel's (--cluster)\n");
        return 2;
    }
    if (layers < 1 || layers > 1000) {
        fprintf(stderr, "layer_probe: --layers must be 1-1000\n");
        return 2;
    }
    char name[256];
    double copy = 0.0;
    const int opened = bench_probe_open("layer_probe", name, sizeof name, &copy);
    if (opened)
        return opened;
    if (reduce)
        return reduce_table(name);
    layer_probe_setup *s = layer_probe_create(WEIGHT_LAYERS);
    if (!s)
        return 2;
    const double bytes = layer_probe_layer_bytes(s), floor_us = bytes / copy / 1e3;
    printf("device %s, copy %.1f GB/s; a layer %.2f MB of AWQ weights, floor %.2f us\n", name, copy,
           bytes / 1e6, floor_us);
    int rc = 1;
    /* the options every run shares; a path (k < n_paths) adds its warps,
     * k-tile code and sums */
    const layer_probe_config base = {.stages = (int)stages[0],
                                     .layers = layers,
                                     .weight_layers = WEIGHT_LAYERS,
                                     .barriers = barriers,
                                     .cluster = cluster,
                                     .no_compute = no_compute,
                                     .no_stream = no_stream,
                                     .wait_one = wait_one,
                                     .multicast = multicast,
                                     .trace_layer = -1};
    const int n_paths = n_warps * n_maths * n_lates;
    /* the checks: every path, on two layers with barriers and every k-tile */
    for (int k = 0; k < n_paths; k++) {
        layer_probe_config cfg = path_config(&base, k, warps, maths, n_maths, lates, n_lates);
        cfg.layers = 2;
        cfg.barriers = 1;
        cfg.no_compute = cfg.no_stream = 0;
        double worst = 0.0;
        if (cfg.math >= 2) /* knock-outs: their sums are wrong by design */
            continue;
        if (layer_probe_check(s, &cfg, &worst))
            goto done;
        printf("check, %d warps, math %d, late sums %d: worst error %.2e of the largest "
               "output%s\n",
               cfg.warps, cfg.math, cfg.late_sums, worst, worst <= 1e-2 ? "" : "  FAILED");
        if (worst > 1e-2)
            goto done;
    }
    /* the sweep: each path at each ring depth and stand-in */
    for (int k = 0; k < n_paths * n_stages * n_attention; k++) {
        layer_probe_config cfg =
            path_config(&base, k / (n_stages * n_attention), warps, maths, n_maths, lates, n_lates);
        cfg.stages = (int)stages[k / n_attention % n_stages];
        cfg.attention_us = attention[k % n_attention];
        double best = 0.0, median = 0.0;
        if (layer_probe_time(s, &cfg, REPS, &best, &median))
            goto done;
        const double per = best / layers;
        printf("%s math %d late %d warps %2d stages %2d attention %4.1f us barriers %d%s%s%s%s: "
               "%6.2f us a layer (median %6.2f), %6.1f GB/s, %5.1f %% of copy; less the "
               "attention %5.1f %%\n",
               cluster ? "cluster" : "flat", cfg.math, cfg.late_sums, cfg.warps, cfg.stages,
               cfg.attention_us, barriers, no_compute ? " no compute" : "",
               no_stream ? " no stream" : "", wait_one ? " wait one" : "",
               multicast ? " multicast" : "", per, median / layers, bytes / per / 1e3,
               100.0 * floor_us / per, 100.0 * floor_us / (per - cfg.attention_us));
        if (trace && layer_probe_print_trace(s, &cfg))
            goto done;
    }
    rc = 0;
done:
    layer_probe_destroy(s);
    return rc;
}
