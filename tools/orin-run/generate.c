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
    if (!g->sampler || !g->cached)
        return orin_error_set("generate: out of memory");
    return 0;
}

void generator_free(generator *g)
{
    orin_chat_template_free(g->tpl);
    orin_sampler_free(g->sampler);
    free(g->cached);
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

/* Prefills the part of ids the cache does not hold: the cache keeps its
 * longest common prefix with ids (at least one token is always recomputed, for
 * its logits). */
static int prefill_new(generator *g, const int32_t *ids, int32_t n, reply *r)
{
    int32_t keep = 0;
    while (keep < g->n_cached && keep < n - 1 && g->cached[keep] == ids[keep])
        keep++;
    r->prefilled = n - keep;
    if (orin_model_prefill_on_device(g->model, ids + keep, n - keep, keep) != 0)
        return -1;
    memcpy(g->cached, ids, (size_t)n * sizeof *ids);
    g->n_cached = n;
    return 0;
}

int generator_reply(generator *g, const int32_t *ids, size_t n_ids,
                    volatile sig_atomic_t *stop_flag, reply *r)
{
    memset(r, 0, sizeof *r);
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
    if (prefill_new(g, ids, (int32_t)n_ids, r) != 0)
        goto out;
    r->prefill_s = orin_seconds() - t0;

    r->stop = STOP_MAX_TOKENS;
    double t_first = 0;
    while (r->generated < g->max_tokens) {
        if (*stop_flag) {
            r->stop = STOP_INTERRUPT;
            break;
        }
        int32_t id = orin_model_sample(g->model, g->sampler, g->cached, g->n_cached);
        if (id < 0)
            goto out;
        if (r->generated == 0) {
            t_first = orin_seconds();
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
        if (orin_model_decode(g->model, id, g->n_cached, NULL) != 0)
            goto out;
        g->cached[g->n_cached++] = id;
    }
    const char *tail;
    size_t tail_len;
    if (orin_detokenizer_flush(dt, &tail, &tail_len) != 0 ||
        reply_append(r, tail, tail_len, g->stream) != 0)
        goto out;
    r->decode_s = r->generated > 1 ? orin_seconds() - t_first : 0;
    rc = 0;
out:
    orin_detokenizer_free(dt);
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

void generator_print_stats(const generator *g, const reply *r, bool json)
{
    double prefill_tps = r->prefill_s > 0 ? r->prefilled / r->prefill_s : 0;
    /* Decode speed counts the tokens decoded after the first one was sampled. */
    double decode_tps = r->decode_s > 0 ? (r->generated - 1) / r->decode_s : 0;
    if (json) {
        fprintf(stderr,
                "{\"prompt_tokens\": %d, \"prefilled_tokens\": %d, \"prefill_tok_s\": %.2f, "
                "\"ttft_ms\": %.2f, \"generated_tokens\": %d, \"decode_tok_s\": %.2f, "
                "\"stop\": \"%s\"}\n",
                r->prompt_tokens, r->prefilled, prefill_tps, r->first_token_s * 1e3, r->generated,
                decode_tps, stop_name(r->stop));
    } else {
        fprintf(stderr,
                "[prompt %d tokens (%d new), prefill %.1f tok/s, first token %.1f ms, "
                "generated %d tokens, decode %.1f tok/s, stop: %s]\n",
                r->prompt_tokens, r->prefilled, prefill_tps, r->first_token_s * 1e3, r->generated,
                decode_tps, stop_name(r->stop));
    }
    (void)g;
}
