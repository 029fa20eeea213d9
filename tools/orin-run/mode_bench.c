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
 * reaches about 90 % of the datasheet peak that is printed beside it.
 *
 * With --image (a Qwen3-VL folder): the prompt is the images, each between
 * <|vision_start|> and <|vision_end|> with its pads, then the prompt tokens;
 * every run decodes and preprocesses the files again and prefills through the
 * vision encoder, and the report adds the medians of the image preprocessing,
 * the encoder and the time to the first token (preprocessing included). */
#include "cli.h"
#include "engine.h"
#include "images.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/sampler.h"
#include "orin/vl_prompt.h"

#include <stddef.h>
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

/* One run's times; the report takes the medians. */
typedef struct run_times {
    double prep_s;       /* the images' decode and preprocessing */
    double vision_s;     /* the vision encoder */
    double prefill_s;    /* the language model's prefill */
    double first_s;      /* prep, encoder, prefill and the first token's sample */
    double decode_s;     /* the G decode steps */
} run_times;

/* --bench's images (NULL paths: none). */
typedef struct bench_images {
    image_loader loader;
    const char *const *paths;
    int n;
    run_image loaded[ORIN_MODEL_MAX_IMAGES];
    orin_model_image model[ORIN_MODEL_MAX_IMAGES];
    int code;            /* image_loader_load's exit code when a load failed */
} bench_images;

static void bench_images_release(bench_images *bi)
{
    for (int k = 0; k < bi->n; k++)
        run_image_free(&bi->loaded[k]);
}

/* Decodes and preprocesses the images again (each run pays for it, as a
 * prompt with a new image does); *prep_s gets the time. */
static int bench_images_load(bench_images *bi, double *prep_s)
{
    bench_images_release(bi);
    double t0 = orin_seconds();
    for (int k = 0; k < bi->n; k++) {
        if ((bi->code = image_loader_load(&bi->loader, bi->paths[k], &bi->loaded[k])) !=
            ORIN_EXIT_OK)
            return -1;
        const orin_image_patches *p = &bi->loaded[k].patches;
        bi->model[k] = (orin_model_image){
            .pixel_values = p->pixel_values, .rows = p->n_patches, .cols = p->patch_dim,
            .grid = {.t = p->grid_t, .h = p->grid_h, .w = p->grid_w}};
    }
    *prep_s = orin_seconds() - t0;
    return 0;
}

/* One run as generation does it: the prompt tokens[0..P) prefilled (through
 * the vision encoder when bi has images), its next token sampled greedily,
 * then G steps each decoding the last token and picking the next
 * (orin_model_decode_sample: on a GPU the step ends in the greedy pick and
 * only the token comes back), the last of them saying that none follows, so
 * that decode ahead queues no step past the G timed; tokens grows to P + G. */
static int one_run(orin_model *m, orin_sampler *greedy, bench_images *bi, int32_t *tokens,
                   int32_t P, int32_t G, run_times *t)
{
    *t = (run_times){0};
    double t0 = orin_seconds();
    if (bi->n > 0 && bench_images_load(bi, &t->prep_s) != 0)
        return -1;
    double t1 = orin_seconds();
    int rc = bi->n > 0 ? orin_model_prefill_images(m, tokens, P, 0, bi->model, bi->n, NULL, false)
                       : orin_model_prefill_on_device(m, tokens, P, 0);
    if (rc != 0)
        return -1;
    double t2 = orin_seconds();
    t->vision_s = bi->n > 0 ? orin_model_vision_seconds(m) : 0;
    t->prefill_s = t2 - t1 - t->vision_s;
    int32_t next = orin_model_sample(m, greedy, tokens, P);
    t->first_s = orin_seconds() - t0;
    for (int32_t i = 0; i < G; i++) {
        if (next < 0)
            return -1;
        tokens[P + i] = next;
        if (i + 1 < G)
            next = orin_model_decode_sample(m, greedy, next, P + i, tokens, P + i + 1, i + 2 < G);
        else if (orin_model_decode(m, next, P + i, NULL) != 0) /* the last: cached only */
            return -1;
    }
    t->decode_s = orin_seconds() - t2;
    return 0;
}

/* A text token of the random prompt: none of a VL model's special ids (a
 * stray <|image_pad|> would be taken for an image's). */
static bool vl_special(const orin_vl_config *vl, int32_t id)
{
    return vl->is_vl && (id == vl->image_token_id || id == vl->video_token_id ||
                         id == vl->vision_start_token_id || id == vl->vision_end_token_id);
}

/* The prompt: each image's <|vision_start|> <|image_pad|>... <|vision_end|>,
 * then P fixed pseudo-random ids (same work every run, no tokenizer needed);
 * room for G more. *n gets the prompt's length. */
static int32_t *bench_prompt(const orin_model *m, const bench_images *bi, int32_t P, int32_t G,
                             int32_t *n)
{
    const orin_model_config *mc = orin_model_get_config(m);
    const orin_vl_config *vl = &mc->vl;
    const size_t head = 3 * (size_t)bi->n;
    int32_t *ids = malloc((head + (size_t)P) * sizeof *ids);
    if (!ids) {
        orin_error_set("bench: out of memory");
        return NULL;
    }
    for (int k = 0; k < bi->n; k++) {
        ids[3 * k] = vl->vision_start_token_id;
        ids[3 * k + 1] = vl->image_token_id;
        ids[3 * k + 2] = vl->vision_end_token_id;
    }
    uint32_t state = 12345;
    for (int32_t i = 0; i < P; i++) {
        int32_t id;
        do {
            state = state * 1664525u + 1013904223u;
            id = (int32_t)((state >> 8) % (uint32_t)mc->vocab_size);
        } while (vl_special(vl, id));
        ids[head + (size_t)i] = id;
    }
    orin_vl_grid grids[ORIN_MODEL_MAX_IMAGES];
    for (int k = 0; k < bi->n; k++)
        grids[k] = bi->model[k].grid;
    int32_t *expanded = NULL;
    size_t total = head + (size_t)P;
    if (bi->n > 0 && orin_vl_expand_image_pads(vl, ids, total, grids, (size_t)bi->n, &expanded,
                                               &total) != 0) {
        free(ids);
        return NULL;
    }
    if (expanded) {
        free(ids);
        ids = expanded;
    }
    int32_t *out = realloc(ids, (total + (size_t)G) * sizeof *out);
    if (!out) {
        free(ids);
        orin_error_set("bench: out of memory");
        return NULL;
    }
    *n = (int32_t)total;
    return out;
}

typedef struct bench_result {
    int32_t prompt;      /* prompt tokens, image pads included */
    run_times med;       /* medians */
} bench_result;

/* The median of one field of the runs (scratch: R doubles). */
static double median_of(const run_times *runs, int32_t R, size_t field, double *scratch)
{
    for (int32_t r = 0; r < R; r++)
        scratch[r] = *(const double *)((const char *)&runs[r] + field);
    return median(scratch, R);
}

static int run_bench(orin_model *m, const orin_config *cfg, bench_images *bi,
                     orin_profile *profile, bench_result *res)
{
    const int32_t G = cfg->bench.gen_tokens;
    const int32_t R = cfg->bench.repeats > 0 ? cfg->bench.repeats : 1;
    run_times *runs = calloc((size_t)R, sizeof *runs), spare;
    double *scratch = calloc((size_t)R, sizeof *scratch);
    orin_sampler_params greedy_params = ORIN_SAMPLER_PARAMS_DEFAULT;
    greedy_params.temperature = 0.0f;
    orin_sampler *greedy = orin_sampler_create(&greedy_params);
    int32_t *tokens = NULL, P = 0;
    int rc = -1;
    if (!runs || !scratch || !greedy) {
        orin_error_set("bench: out of memory");
        goto out;
    }
    /* The images once first: their grids make the prompt. */
    if (bi->n > 0 && bench_images_load(bi, &spare.prep_s) != 0)
        goto out;
    if (!(tokens = bench_prompt(m, bi, cfg->bench.prompt_tokens, G, &P)))
        goto out;
    if ((int64_t)P + G > orin_model_context(m)) {
        orin_error_set("bench: %d prompt tokens (the images' included) + %d generated do not fit "
                       "the context of %d (runtime.max_context)", P, G, orin_model_context(m));
        goto out;
    }
    /* Warm-up, untimed: the first decode steps build what later ones reuse
     * (handles, algorithm choices, the captured CUDA graph). */
    if (one_run(m, greedy, bi, tokens, P, G < 3 ? G : 3, &spare) != 0)
        goto out;
    for (int32_t r = 0; r < R; r++)
        if (one_run(m, greedy, bi, tokens, P, G, &runs[r]) != 0)
            goto out;
    res->prompt = P;
    res->med = (run_times){
        .prep_s = median_of(runs, R, offsetof(run_times, prep_s), scratch),
        .vision_s = median_of(runs, R, offsetof(run_times, vision_s), scratch),
        .prefill_s = median_of(runs, R, offsetof(run_times, prefill_s), scratch),
        .first_s = median_of(runs, R, offsetof(run_times, first_s), scratch),
        .decode_s = median_of(runs, R, offsetof(run_times, decode_s), scratch),
    };
    rc = 0;
    if (profile) { /* one more run, op by op, for --profile (its times stay out of res) */
        orin_model_set_profile(m, profile);
        rc = one_run(m, greedy, bi, tokens, P, G, &spare);
        orin_model_set_profile(m, NULL);
    }
out:
    orin_sampler_free(greedy);
    free(tokens);
    free(runs);
    free(scratch);
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
    if (cli->n_images > ORIN_MODEL_MAX_IMAGES) {
        fprintf(stderr, "orin-run: bench: %d images (at most %d)\n", cli->n_images,
                ORIN_MODEL_MAX_IMAGES);
        engine_close(&e);
        return ORIN_EXIT_USAGE;
    }
    bench_images *bi = calloc(1, sizeof *bi);
    if (!bi) {
        fprintf(stderr, "orin-run: out of memory\n");
        engine_close(&e);
        return ORIN_EXIT_RUNTIME;
    }
    bi->paths = cli->images;
    bi->n = cli->n_images;
    image_loader_init(&bi->loader, cfg->model.path, cfg->generate.max_pixels);
    bench_result res;
    orin_profile *profile = cli->profile ? orin_profile_create(e.device) : NULL;
    if ((cli->profile && !profile) || run_bench(e.model, cfg, bi, profile, &res) != 0) {
        fprintf(stderr, "orin-run: %s\n", orin_error());
        code = bi->code != ORIN_EXIT_OK ? bi->code : ORIN_EXIT_RUNTIME;
        bench_images_release(bi);
        free(bi);
        orin_profile_free(profile);
        engine_close(&e);
        return code;
    }
    bench_images_release(bi);
    free(bi);
    const int32_t prompt = res.prompt;
    const double prefill_s = res.med.prefill_s, decode_s = res.med.decode_s;

    /* The floor of one decode step (see the top of the file), averaged over the
     * positions the steps ran at. */
    const double dsize = (double)orin_dtype_size(orin_model_dtype(e.model));
    /* every weight at its stored size (packed ones packed), but the input
     * embedding: one row per step */
    double weights = (double)orin_model_step_weight_bytes(e.model);
    double kv_per_pos = 2.0 * mc->num_hidden_layers * mc->num_key_value_heads * mc->head_dim * dsize;
    double avg_positions = prompt + (G + 1) / 2.0;
    double step_bytes = weights + kv_per_pos * avg_positions;
    orin_device *dev = orin_model_device(e.model);
    double bw = engine_bandwidth(dev);
    double step_s = decode_s / G;
    double floor_s = bw > 0 ? step_bytes / (bw * 1e9) : 0;

    const char *weights_fmt = orin_model_quant_name(e.model);
    const int images = cli->n_images;
    const run_times *md = &res.med;
    if (cli->json) {
        printf("{\"model\": \"%s\", \"device\": \"%s\", \"dtype\": \"%s\", "
               "\"weights\": \"%s\", \"attention\": \"%s\", "
               "\"prompt_tokens\": %d, \"gen_tokens\": %d, \"prefill_tok_s\": %.2f, "
               "\"decode_tok_s\": %.2f, \"decode_step_ms\": %.4f, \"decode_bytes_per_step\": %.0f, "
               "\"bandwidth_gbs\": %.1f, \"peak_bandwidth_gbs\": %.1f, \"decode_floor_ms\": %.4f, "
               "\"decode_roofline_fraction\": %.4f, \"load_s\": %.3f, \"images\": %d, "
               "\"image_preprocess_ms\": %.2f, \"vision_ms\": %.2f, \"ttft_ms\": %.2f}\n",
               mc->architecture, dev->name, orin_dtype_name(orin_model_dtype(e.model)),
               weights_fmt, cfg->attention.backend, prompt, G, prompt / prefill_s, G / decode_s,
               step_s * 1e3, step_bytes, bw, dev->mem_bandwidth_gbs, floor_s * 1e3,
               floor_s > 0 ? floor_s / step_s : 0, e.load_seconds, images, md->prep_s * 1e3,
               md->vision_s * 1e3, md->first_s * 1e3);
    } else {
        printf("model     %s on %s, %s, weights %s, attention %s\n", mc->architecture,
               dev->name, orin_dtype_name(orin_model_dtype(e.model)), weights_fmt,
               cfg->attention.backend);
        if (images > 0)
            printf("images    %d: preprocess %.1f ms, vision encoder %.1f ms; first token "
                   "%.1f ms after the files were opened\n", images, md->prep_s * 1e3,
                   md->vision_s * 1e3, md->first_s * 1e3);
        printf("prefill   %d tokens: %.1f tok/s\n", prompt, prompt / prefill_s);
        printf("decode    %d tokens: %.1f tok/s (%.3f ms/token)\n", G, G / decode_s,
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
