/* The Qwen3-VL vision encoder on the GPU, alone: one image's grid of random
 * pixel_values through a model folder's encoder (weights as loaded by orin-run),
 * timed over warm calls (the first calls load kernels and pick cuBLASLt
 * algorithms), then once more op by op (--profile's table, a run being one call
 * of the encoder). Beside the time: the encoder's matmul and attention FLOPs
 * and the rate they make. bench/gpu_vl.sh times the whole request (TTFT);
 * this is the part bench/notes/vl.md tunes.
 *
 * usage: vision_bench MODEL_DIR [--dtype f16|bf16] [--grid HxW] [--runs N]
 *                     [--attention PROVIDER] [--plugins DIR] [--fused 0|1]
 * The grid is in patches (default 48x64: a 1,024 x 768 image at patch 16).
 * Exit 77 without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"
#include "qwen3_vl_vision.h"

#include "orin/error.h"
#include "orin/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef ORIN_PLUGIN_DIR
#define ORIN_PLUGIN_DIR "plugins"
#endif

enum { MAX_RUNS = 200 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Matmul and attention FLOPs of one call over n patches (the blocks, the
 * patch embedding and the mergers; attention at the data's head_dim). */
static void encoder_flops(const orin_vision_config *c, double n, double *mm, double *att)
{
    const double d = c->hidden, f = c->intermediate, D = d * c->merge * c->merge;
    const double k = (double)c->in_channels * c->temporal_patch * c->patch * c->patch;
    const double merged = n / (c->merge * c->merge);
    const double merger = 2 * merged * (D * D + D * c->out_hidden);
    *mm = 2 * n * d * k + c->depth * 2 * n * (4 * d * d + 2 * d * f) +
          (1 + c->n_deepstack) * merger;
    *att = c->depth * 4 * n * n * d;
}

static int usage(const char *prog)
{
    fprintf(stderr, "usage: %s MODEL_DIR [--dtype f16|bf16] [--grid HxW] [--runs N] "
                    "[--attention PROVIDER] [--plugins DIR] [--fused 0|1]\n", prog);
    return 2;
}

/* The encoder's output tensors on the device: `merged` tokens each. */
static int alloc_outputs(bench *b, const orin_vision_config *c, int64_t merged, orin_dtype dt,
                         orin_vision_device_output *o)
{
    const int64_t dims[2] = {merged, c->out_hidden};
    o->n_deepstack = c->n_deepstack;
    for (int j = -1; j < c->n_deepstack; j++) {
        orin_tensor *t = j < 0 ? &o->embeds : &o->deepstack[j];
        *t = orin_tensor_make(NULL, dt, ORIN_DEVICE_CUDA, 2, dims);
        if (!(t->data = b->dev->ops->alloc(b->dev, orin_tensor_nbytes(t))))
            return orin_error_set("cannot allocate the encoder's outputs (%.1f MiB each)",
                                  (double)orin_tensor_nbytes(t) / 1048576.0);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *attention = "fa2", *plugin_dir = ORIN_PLUGIN_DIR;
    orin_dtype dt = ORIN_F16;
    int h = 48, w = 64, runs = 20;
    bool fused = true;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-') {
            if (dir)
                return usage(argv[0]);
            dir = arg;
            continue;
        }
        const char *val = ++i < argc ? argv[i] : NULL;
        if (!val)
            return usage(argv[0]);
        if (!strcmp(arg, "--dtype")) {
            if (strcmp(val, "f16") && strcmp(val, "bf16"))
                return usage(argv[0]);
            dt = !strcmp(val, "bf16") ? ORIN_BF16 : ORIN_F16;
        } else if (!strcmp(arg, "--grid")) {
            if (sscanf(val, "%dx%d", &h, &w) != 2 || h < 1 || w < 1)
                return usage(argv[0]);
        } else if (!strcmp(arg, "--runs")) {
            runs = atoi(val);
            if (runs < 1 || runs > MAX_RUNS)
                return usage(argv[0]);
        } else if (!strcmp(arg, "--attention")) {
            attention = val;
        } else if (!strcmp(arg, "--plugins")) {
            plugin_dir = val;
        } else if (!strcmp(arg, "--fused")) {
            fused = strcmp(val, "0") != 0;
        } else {
            return usage(argv[0]);
        }
    }
    if (!dir)
        return usage(argv[0]);

    bench b = {0};
    int rc = bench_open(&b, "vision_bench", plugin_dir);
    if (rc != 0)
        return rc;
    orin_vision_encoder *enc = NULL;
    orin_vision_device_output out = {0};
    orin_profile *prof = NULL;
    const orin_vision_options opt = {.path = dir, .dtype = dt, .device = b.dev,
                                     .registry = b.reg, .attention = attention,
                                     .fused_ops = fused};
    if (orin_vision_load(&opt, &enc) != 0)
        goto fail;
    const orin_vision_config *c = orin_vision_get_config(enc);
    const orin_vision_grid grid = {1, h, w};
    const int64_t n = (int64_t)h * w;
    const int64_t cols = (int64_t)c->in_channels * c->temporal_patch * c->patch * c->patch;
    if ((size_t)(n * cols) > b.noise_n) {
        orin_error_set("grid %dx%d: more pixel values than the bench's noise", h, w);
        goto fail;
    }
    if (alloc_outputs(&b, c, n / (c->merge * c->merge), dt, &out) != 0)
        goto fail;

    double secs[MAX_RUNS];
    for (int i = -2; i < runs; i++) { /* two warm-up calls */
        const double t0 = now();
        if (orin_vision_encode_device(enc, b.noise, n, cols, &grid, 1, &out) != 0)
            goto fail;
        if (i >= 0)
            secs[i] = now() - t0;
    }
    const double median = bench_median(secs, runs);
    double mm, att;
    encoder_flops(c, (double)n, &mm, &att);
    printf("vision encoder %s, %s attention%s, grid %dx%d (%lld patches), %d blocks: "
           "%.2f ms a call (median of %d), matmuls %.2f TFLOP + attention %.2f TFLOP: "
           "%.0f TFLOP/s\n",
           orin_dtype_name(dt), attention, fused ? "" : ", fused ops off", h, w, (long long)n, c->depth, median * 1e3, runs,
           mm / 1e12, att / 1e12, (mm + att) / median / 1e12);

    if (!(prof = orin_profile_create(b.dev)))
        goto fail;
    orin_vision_set_profile(enc, prof);
    for (int i = 0; i < 3; i++)
        if (orin_vision_encode_device(enc, b.noise, n, cols, &grid, 1, &out) != 0)
            goto fail;
    orin_vision_set_profile(enc, NULL);
    orin_profile_print(prof, stdout, b.copy_gbs);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "vision_bench: %s\n", orin_error());
    rc = 2;
done:
    orin_profile_free(prof);
    for (int j = -1; j < out.n_deepstack; j++) {
        orin_tensor *t = j < 0 ? &out.embeds : &out.deepstack[j];
        if (t->data)
            b.dev->ops->free(b.dev, t->data);
    }
    orin_vision_free(enc);
    bench_close(&b);
    return rc;
}
