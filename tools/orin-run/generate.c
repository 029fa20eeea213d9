/* The token loop (see generate.h). */
#include "generate.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/generation_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- setup ------------------------------------------------------------------- */

static void add_stop_id(generator *g, int32_t id)
{
    if (id < 0 || g->n_stop == (int)(sizeof g->stop_ids / sizeof g->stop_ids[0]))
        return;
    for (int i = 0; i < g->n_stop; i++)
        if (g->stop_ids[i] == id)
            return;
    g->stop_ids[g->n_stop++] = id;
}

static bool is_stop_id(const generator *g, int32_t id)
{
    for (int i = 0; i < g->n_stop; i++)
        if (g->stop_ids[i] == id)
            return true;
    return false;
}

/* The INI value when the user set it, else generation_config.json's, else the
 * INI default; says which on the debug log (-v). */
static double pick(const orin_config *cfg, const char *key, double ini, double model)
{
    bool from_ini = orin_config_is_set(cfg, "generate", key) || model < 0;
    double v = from_ini ? ini : model;
    orin_log(ORIN_LOG_DEBUG, "sampling: %s = %g (%s)", key, v,
             orin_config_is_set(cfg, "generate", key) ? "set by the user"
             : from_ini                               ? "orin's default"
                                                      : "generation_config.json");
    return v;
}

static void sampling_settings(const orin_config *cfg, const orin_generation_config *gc,
                              orin_sampler_params *p)
{
    *p = (orin_sampler_params){
        .temperature = (float)pick(cfg, "temperature", cfg->generate.temperature, gc->temperature),
        .top_k = (int32_t)pick(cfg, "top_k", cfg->generate.top_k, gc->top_k),
        .top_p = (float)pick(cfg, "top_p", cfg->generate.top_p, gc->top_p),
        .min_p = (float)pick(cfg, "min_p", cfg->generate.min_p, gc->min_p),
        .repetition_penalty = (float)pick(cfg, "repetition_penalty",
                                          cfg->generate.repetition_penalty, gc->repetition_penalty),
        .presence_penalty = cfg->generate.presence_penalty,
        .seed = cfg->generate.seed,
    };
    /* do_sample = false in the model folder means greedy, unless the user asked
     * for a temperature. */
    if (gc->do_sample == 0 && !orin_config_is_set(cfg, "generate", "temperature"))
        p->temperature = 0;
}

int generator_init(generator *g, orin_engine *e, const orin_cli *cli)
{
    const orin_config *cfg = &cli->cfg;
    const orin_model_config *mc = orin_model_get_config(e->model);
    orin_generation_config gc;
    memset(g, 0, sizeof *g);
    g->model = e->model;
    g->tok = e->tokenizer;
    g->context = orin_model_context(e->model);
    g->vocab = mc->vocab_size;
    g->max_tokens = cfg->generate.max_tokens;
    g->chat = cfg->generate.chat;
    g->stream = cfg->generate.stream;
    g->verbose_prompt = cli->verbose_prompt;
    if (orin_generation_config_load(cfg->model.path, &gc) != 0)
        return -1;

    /* Stop at every end token the folder names: generation_config.json,
     * config.json and tokenizer_config.json's eos_token. */
    for (int i = 0; i < gc.n_eos; i++)
        add_stop_id(g, gc.eos_token_ids[i]);
    for (int i = 0; i < mc->n_eos; i++)
        add_stop_id(g, mc->eos_token_ids[i]);
    add_stop_id(g, orin_tokenizer_eos_id(g->tok));

    if (g->chat) {
        g->tpl = orin_chat_template_open(cfg->model.path);
        if (!g->tpl)
            return orin_error_prefix("generate.chat = true, but ");
    }
    orin_sampler_params sp;
    sampling_settings(cfg, &gc, &sp);
    g->sampler = orin_sampler_create(&sp);
    g->cached = malloc((size_t)g->context * sizeof *g->cached);
    g->cached_image = malloc((size_t)g->context * sizeof *g->cached_image);
    g->vl = mc->vl.is_vl ? &mc->vl : NULL;
    if (!g->sampler || !g->cached || !g->cached_image)
        return orin_error_set("generate: out of memory");
    return 0;
}

void generator_free(generator *g)
{
    orin_chat_template_free(g->tpl);
    orin_sampler_free(g->sampler);
    free(g->cached);
    free(g->cached_image);
    memset(g, 0, sizeof *g);
}

void generator_forget(generator *g)
{
    g->n_cached = 0;
}

void reply_free(reply *r)
{
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* ---- the loop ------------------------------------------------------------------- */

static int reply_append(reply *r, const char *s, size_t n, bool stream)
{
    if (n == 0)
        return 0;
    char *text = realloc(r->text, r->len + n + 1);
    if (!text)
        return orin_error_set("generate: out of memory");
    memcpy(text + r->len, s, n);
    r->text = text;
    r->len += n;
    r->text[r->len] = '\0';
    if (stream) {
        fwrite(s, 1, n, stdout);
        fflush(stdout);
    }
    return 0;
}

/* How many leading tokens of ids (image serials in image[], NULL: text only)
 * the cache holds already: the longest common prefix, tokens and images both
 * (the pads of two images are the same id), leaving at least one token to
 * recompute for its logits. The model keeps one rope_delta, that of the whole
 * cached sequence: continuing after the prefix is right only when no image
 * of the cache lies past it, else everything is prefilled again. */
static int32_t reusable_prefix(const generator *g, const int32_t *ids, const int32_t *image,
                               int32_t n)
{
    int32_t keep = 0;
    while (keep < g->n_cached && keep < n - 1 && g->cached[keep] == ids[keep] &&
           g->cached_image[keep] == (image ? image[keep] : 0))
        keep++;
    for (int32_t i = keep; i < g->n_cached; i++)
        if (g->cached_image[i])
            return 0;
    /* The vision encoder takes whole images: never start inside a run. */
    if (image && keep > 0 && image[keep] && image[keep] == image[keep - 1])
        return 0;
    return keep;
}

/* Prefills the part of ids the cache does not hold, with the images whose
 * pads lie in it. */
static int prefill_new(generator *g, const int32_t *ids, const int32_t *image, int32_t n,
                       const prompt_images *pi, reply *r)
{
    int32_t keep = reusable_prefix(g, ids, image, n);
    int first = 0; /* the first image whose pads are not in the kept prefix */
    while (pi && keep > 0 && first < pi->n) {
        int32_t i = 0;
        while (i < keep && image[i] != pi->serials[first])
            i++;
        if (i == keep)
            break;
        first++;
    }
    r->prefilled = n - keep;
    int n_images = pi ? pi->n - first : 0;
    int rc = n_images > 0 ? orin_model_prefill_images(g->model, ids + keep, n - keep, keep,
                                                      pi->images + first, n_images, NULL, false)
                          : orin_model_prefill_on_device(g->model, ids + keep, n - keep, keep);
    if (rc != 0)
        return -1;
    r->vision_s = n_images > 0 ? orin_model_vision_seconds(g->model) : 0;
    memcpy(g->cached, ids, (size_t)n * sizeof *ids);
    for (int32_t i = 0; i < n; i++)
        g->cached_image[i] = image ? image[i] : 0;
    g->n_cached = n;
    return 0;
}

/* Expands the pads of the prompt's images (each to its token count) and
 * marks every pad with its image's serial. */
static int expand_images(const generator *g, const int32_t *ids, size_t n_ids,
                         const prompt_images *pi, int32_t **out, size_t *n_out, int32_t **image)
{
    orin_vl_grid grids[ORIN_MODEL_MAX_IMAGES];
    if (!g->vl)
        return orin_error_set("images need a vision-language model");
    if (pi->n > ORIN_MODEL_MAX_IMAGES)
        return orin_error_set("%d images in one prompt (at most %d)", pi->n,
                              ORIN_MODEL_MAX_IMAGES);
    for (int k = 0; k < pi->n; k++)
        grids[k] = pi->images[k].grid;
    if (orin_vl_expand_image_pads(g->vl, ids, n_ids, grids, (size_t)pi->n, out, n_out) != 0)
        return -1;
    *image = malloc((*n_out ? *n_out : 1) * sizeof **image);
    if (!*image)
        return orin_error_set("generate: out of memory");
    /* The expansion checked that the pads are exactly the images' tokens. */
    int k = -1;
    int64_t left = 0; /* pads of image k still to come */
    for (size_t i = 0; i < *n_out; i++) {
        bool pad = (*out)[i] == g->vl->image_token_id;
        if (pad && left == 0)
            left = orin_vl_image_tokens(&grids[++k], g->vl->spatial_merge_size);
        left -= pad;
        (*image)[i] = pad ? pi->serials[k] : 0;
    }
    return 0;
}

static int reply_tokens(generator *g, const int32_t *ids, size_t n_ids, const int32_t *image,
                        const prompt_images *pi, volatile sig_atomic_t *stop_flag, reply *r)
{
    r->text = calloc(1, 1);
    orin_detokenizer *dt = orin_detokenizer_new(g->tok, ORIN_DECODE_SKIP_SPECIAL);
    if (!r->text || !dt) {
        orin_detokenizer_free(dt);
        return orin_error_set("generate: out of memory");
    }
    int rc = -1;
    if (n_ids == 0) {
        orin_error_set("the prompt encodes to no tokens");
        goto out;
    }
    if ((int64_t)n_ids >= g->context) {
        orin_error_set("the prompt has %zu tokens; the context holds %d (runtime.max_context)",
                       n_ids, g->context);
        goto out;
    }
    r->prompt_tokens = (int32_t)n_ids;
    double t0 = orin_seconds();
    if (prefill_new(g, ids, image, (int32_t)n_ids, pi, r) != 0)
        goto out;
    r->prefill_s = orin_seconds() - t0 - r->vision_s;

    r->stop = STOP_MAX_TOKENS;
    /* Decode speed: the steps between the first token's sample and the last
     * one's (each a decode and a sample), not the decode that follows the last
     * token so that the cache holds it. */
    double t_first = 0, t_last = 0;
    int32_t id = -1; /* the token after the cache: sampled, or from the last step */
    while (r->generated < g->max_tokens) {
        if (*stop_flag) {
            r->stop = STOP_INTERRUPT;
            break;
        }
        if (id < 0 && (id = orin_model_sample(g->model, g->sampler, g->cached, g->n_cached)) < 0)
            goto out;
        t_last = orin_seconds();
        if (r->generated == 0) {
            t_first = t_last;
            r->first_token_s = t_first - t0;
        }
        r->generated++;
        if (is_stop_id(g, id)) {
            r->stop = STOP_EOS;
            break;
        }
        const char *piece;
        size_t len;
        if (orin_detokenizer_push(dt, id, &piece, &len) != 0 ||
            reply_append(r, piece, len, g->stream) != 0)
            goto out;
        if (g->n_cached >= g->context) {
            r->stop = STOP_CONTEXT;
            break;
        }
        /* the step that caches id, and the next token from it where one
         * follows (orin_model_decode_sample: on a GPU, greedy, only the id
         * comes back, and the step after it starts early unless the next
         * token is the last); id counts as cached once its step has run */
        const int32_t pos = g->n_cached;
        g->cached_image[pos] = 0;
        g->cached[pos] = id;
        if (r->generated < g->max_tokens && !*stop_flag) {
            const bool more = r->generated + 1 < g->max_tokens;
            if ((id = orin_model_decode_sample(g->model, g->sampler, id, pos, g->cached,
                                               pos + 1, more)) < 0)
                goto out;
        } else if (orin_model_decode(g->model, id, pos, NULL) != 0) {
            goto out;
        }
        g->n_cached = pos + 1;
    }
    const char *tail;
    size_t tail_len;
    if (orin_detokenizer_flush(dt, &tail, &tail_len) != 0 ||
        reply_append(r, tail, tail_len, g->stream) != 0)
        goto out;
    r->decode_s = r->generated > 1 ? t_last - t_first : 0;
    rc = 0;
out:
    orin_detokenizer_free(dt);
    return rc;
}

int generator_reply(generator *g, const int32_t *ids, size_t n_ids, const prompt_images *pi,
                    volatile sig_atomic_t *stop_flag, reply *r)
{
    memset(r, 0, sizeof *r);
    int32_t *expanded = NULL, *image = NULL;
    if (pi && pi->n > 0) {
        if (expand_images(g, ids, n_ids, pi, &expanded, &n_ids, &image) != 0) {
            free(expanded);
            return -1;
        }
        ids = expanded;
    } else {
        pi = NULL;
    }
    int rc = reply_tokens(g, ids, n_ids, image, pi, stop_flag, r);
    free(expanded);
    free(image);
    return rc;
}

static const char *stop_name(stop_reason s)
{
    switch (s) {
    case STOP_EOS: return "eos";
    case STOP_MAX_TOKENS: return "max_tokens";
    case STOP_CONTEXT: return "context";
    case STOP_INTERRUPT: return "interrupted";
    }
    return "?";
}

/* The image part of the stats line, "" for a turn without images. */
static void image_stats(const reply *r, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (r->images > 0)
        snprintf(buf, cap, ", %d image%s: preprocess %.1f ms, vision encoder %.1f ms",
                 r->images, r->images == 1 ? "" : "s", r->prep_s * 1e3, r->vision_s * 1e3);
}

void generator_print_stats(const generator *g, const reply *r, bool json)
{
    double prefill_tps = r->prefill_s > 0 ? r->prefilled / r->prefill_s : 0;
    /* Decode speed: the steps from the first sampled token to the last (above). */
    double decode_tps = r->decode_s > 0 ? (r->generated - 1) / r->decode_s : 0;
    if (json) {
        fprintf(stderr,
                "{\"prompt_tokens\": %d, \"prefilled_tokens\": %d, \"prefill_tok_s\": %.2f, "
                "\"ttft_ms\": %.2f, \"generated_tokens\": %d, \"decode_tok_s\": %.2f, "
                "\"stop\": \"%s\", \"images\": %d, \"image_preprocess_ms\": %.2f, "
                "\"vision_ms\": %.2f, \"vision_prefill_ms\": %.2f}\n",
                r->prompt_tokens, r->prefilled, prefill_tps, r->first_token_s * 1e3, r->generated,
                decode_tps, stop_name(r->stop), r->images, r->prep_s * 1e3, r->vision_s * 1e3,
                (r->vision_s + r->prefill_s) * 1e3);
    } else {
        char images[128];
        image_stats(r, images, sizeof images);
        fprintf(stderr,
                "[prompt %d tokens (%d new)%s, prefill %.1f tok/s, first token %.1f ms, "
                "generated %d tokens, decode %.1f tok/s, stop: %s]\n",
                r->prompt_tokens, r->prefilled, images, prefill_tps, r->first_token_s * 1e3,
                r->generated, decode_tps, stop_name(r->stop));
    }
    (void)g;
}
