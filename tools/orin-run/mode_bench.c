/* --bench: prefill and decode throughput of the configured model and device.
 *
 * Prefill: bench.prompt_tokens tokens in one call (chunked by
 * runtime.prefill_chunk). Decode: bench.gen_tokens single-token steps after it,
 * each feeding back the argmax. Each figure is the median of bench.repeats runs,
 * after one untimed warm-up run.
 *
 * Decode is memory bound: a step must read every weight once (the input
 * embedding only one row; quantized layers at their packed size, scales and
 * zeros included) and the K and V of every cached position. Those bytes
 * over the device's memory bandwidth are the step's floor; the report gives the
 * measured step time as a fraction of it ("roofline"). The bandwidth is measured
 * here, as decode would meet it: on the host, all op threads reading a 1 GiB
 * buffer; on a GPU, a 1 GiB device-to-device copy (bytes read + written), which
 * reaches about 90 % of the datasheet peak that is printed beside it. */
#include "cli.h"
#include "engine.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/sampler.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct bench_result {
    double prefill_s, decode_s; /* medians */
} bench_result;

/* One run as generation does it: the prompt tokens[0..P) prefilled, then G
 * steps each sampling greedily where the logits are (orin_model_sample: on a
 * GPU only the token comes back) and decoding it; tokens grows to P + G. */
static int one_run(orin_model *m, orin_sampler *greedy, int32_t *tokens, int32_t P, int32_t G,
                   double *prefill_s, double *decode_s)
{
    double t0 = orin_seconds();
    if (orin_model_prefill_on_device(m, tokens, P, 0) != 0)
        return -1;
    double t1 = orin_seconds();
    for (int32_t i = 0; i < G; i++) {
        int32_t next = orin_model_sample(m, greedy, tokens, P + i);
        if (next < 0 || orin_model_decode(m, next, P + i, NULL) != 0)
            return -1;
        tokens[P + i] = next;
    }
    *prefill_s = t1 - t0;
    *decode_s = orin_seconds() - t1;
    return 0;
}

static int run_bench(orin_model *m, const orin_config *cfg, orin_profile *profile,
                     bench_result *res)
{
    const int32_t P = cfg->bench.prompt_tokens, G = cfg->bench.gen_tokens;
    const int32_t R = cfg->bench.repeats > 0 ? cfg->bench.repeats : 1;
    const int32_t V = orin_model_get_config(m)->vocab_size;
    int32_t *tokens = malloc((size_t)(P + G) * sizeof *tokens);
    double *pre = calloc((size_t)R, sizeof *pre), *dec = calloc((size_t)R, sizeof *dec);
    orin_sampler_params greedy_params = ORIN_SAMPLER_PARAMS_DEFAULT;
    greedy_params.temperature = 0.0f;
    orin_sampler *greedy = orin_sampler_create(&greedy_params);
    int rc = -1;
    if (!tokens || !pre || !dec || !greedy) {
        orin_error_set("bench: out of memory");
        goto out;
    }
    /* Fixed pseudo-random prompt ids: same work every run, no tokenizer needed. */
    uint32_t state = 12345;
    for (int32_t i = 0; i < P; i++) {
        state = state * 1664525u + 1013904223u;
        tokens[i] = (int32_t)((state >> 8) % (uint32_t)V);
    }
    /* Warm-up, untimed: the first decode steps build what later ones reuse
     * (handles, algorithm choices, the captured CUDA graph). */
    double warm_p, warm_d;
    if (one_run(m, greedy, tokens, P, G < 3 ? G : 3, &warm_p, &warm_d) != 0)
        goto out;
    for (int32_t r = 0; r < R; r++)
        if (one_run(m, greedy, tokens, P, G, &pre[r], &dec[r]) != 0)
            goto out;
    res->prefill_s = median(pre, R);
    res->decode_s = median(dec, R);
    rc = 0;
    if (profile) { /* one more run, op by op, for --profile (its times stay out of res) */
        double unused_p, unused_d;
        orin_model_set_profile(m, profile);
        rc = one_run(m, greedy, tokens, P, G, &unused_p, &unused_d);
        orin_model_set_profile(m, NULL);
    }
out:
    orin_sampler_free(greedy);
    free(tokens);
    free(pre);
    free(dec);
    return rc;
}

int mode_bench(const orin_cli *cli)
{
    const orin_config *cfg = &cli->cfg;
    orin_engine e = {0};
    int code = engine_open_model(&e, cli);
    if (code != ORIN_EXIT_OK)
        return code;
    const orin_model_config *mc = orin_model_get_config(e.model);
    const int32_t P = cfg->bench.prompt_tokens, G = cfg->bench.gen_tokens;
    if (P < 1 || G < 1 || (int64_t)P + G > orin_model_context(e.model)) {
        fprintf(stderr, "orin-run: bench: %d prompt + %d generated tokens must be >= 1 each and "
                        "fit the context of %d (runtime.max_context)\n",
                P, G, orin_model_context(e.model));
        engine_close(&e);
        return ORIN_EXIT_USAGE;
    }
    bench_result res;
    orin_profile *profile = cli->profile ? orin_profile_create(e.device) : NULL;
    if ((cli->profile && !profile) || run_bench(e.model, cfg, profile, &res) != 0) {
        fprintf(stderr, "orin-run: %s\n", orin_error());
        orin_profile_free(profile);
        engine_close(&e);
        return ORIN_EXIT_RUNTIME;
    }

    /* The floor of one decode step (see the top of the file), averaged over the
     * positions the steps ran at. */
    const double dsize = (double)orin_dtype_size(orin_model_dtype(e.model));
    /* every weight at its stored size (packed ones packed), but the input
     * embedding: one row per step */
    double weights = (double)orin_model_step_weight_bytes(e.model);
    double kv_per_pos = 2.0 * mc->num_hidden_layers * mc->num_key_value_heads * mc->head_dim * dsize;
    double avg_positions = P + (G + 1) / 2.0;
    double step_bytes = weights + kv_per_pos * avg_positions;
    orin_device *dev = orin_model_device(e.model);
    double bw = engine_bandwidth(dev);
    double step_s = res.decode_s / G;
    double floor_s = bw > 0 ? step_bytes / (bw * 1e9) : 0;

    const char *weights_fmt = orin_model_quant_name(e.model);
    if (cli->json) {
        printf("{\"model\": \"%s\", \"device\": \"%s\", \"dtype\": \"%s\", "
               "\"weights\": \"%s\", \"attention\": \"%s\", "
               "\"prompt_tokens\": %d, \"gen_tokens\": %d, \"prefill_tok_s\": %.2f, "
               "\"decode_tok_s\": %.2f, \"decode_step_ms\": %.4f, \"decode_bytes_per_step\": %.0f, "
               "\"bandwidth_gbs\": %.1f, \"peak_bandwidth_gbs\": %.1f, \"decode_floor_ms\": %.4f, "
               "\"decode_roofline_fraction\": %.4f, \"load_s\": %.3f}\n",
               mc->architecture, dev->name, orin_dtype_name(orin_model_dtype(e.model)),
               weights_fmt, cfg->attention.backend, P, G, P / res.prefill_s, G / res.decode_s, step_s * 1e3,
               step_bytes, bw, dev->mem_bandwidth_gbs, floor_s * 1e3,
               floor_s > 0 ? floor_s / step_s : 0, e.load_seconds);
    } else {
        printf("model     %s on %s, %s, weights %s, attention %s\n", mc->architecture,
               dev->name, orin_dtype_name(orin_model_dtype(e.model)), weights_fmt,
               cfg->attention.backend);
        printf("prefill   %d tokens: %.1f tok/s\n", P, P / res.prefill_s);
        printf("decode    %d tokens: %.1f tok/s (%.3f ms/token)\n", G, G / res.decode_s,
               step_s * 1e3);
        printf("roofline  %.2f MB read per token at %.1f GB/s (measured%s): floor %.3f ms/token, "
               "decode reaches %.1f%% of it\n",
               step_bytes / 1e6, bw, dev->kind == ORIN_DEVICE_CPU ? ", reads" : ", copy",
               floor_s * 1e3, floor_s > 0 ? 100.0 * floor_s / step_s : 0);
        if (dev->mem_bandwidth_gbs > 0)
            printf("device    datasheet peak %.1f GB/s; load %.2f s\n", dev->mem_bandwidth_gbs,
                   e.load_seconds);
    }
    if (profile) {
        fflush(stdout); /* the table follows the figures */
        orin_profile_print(profile, stderr, bw);
    }
    orin_profile_free(profile);
    engine_close(&e);
    if (cli_flush_stdout() != 0) {
        fprintf(stderr, "orin-run: %s\n", orin_error());
        return ORIN_EXIT_RUNTIME;
    }
    return ORIN_EXIT_OK;
}
