/* The engine's model half: the tokenizer and the model of model.path, opened
 * after the plugins (engine.c) so that the model can bind its ops. */
#include "engine.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/file.h"
#include "orin/model_config.h"
#include "orin/ops.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int load_failed(orin_engine *e)
{
    fprintf(stderr, "orin-run: %s\n", orin_error());
    engine_close(e);
    return ORIN_EXIT_LOAD;
}

static bool is_attention(const orin_op_impl *impl)
{
    return strcmp(impl->op, ORIN_OP_ATTENTION_PREFILL) == 0 ||
           strcmp(impl->op, ORIN_OP_ATTENTION_DECODE) == 0;
}

/* Whether entry i is the first attention entry of its provider (for listing each once). */
static bool first_of_provider(const orin_registry *reg, size_t i)
{
    const char *provider = orin_registry_at(reg, i)->provider;
    for (size_t j = 0; j < i; j++) {
        const orin_op_impl *earlier = orin_registry_at(reg, j);
        if (is_attention(earlier) && strcmp(earlier->provider, provider) == 0)
            return false;
    }
    return true;
}

/* attention.backend must name a provider some loaded plugin registers for an
 * attention op. A provider that lacks only the device or dtype falls back (or
 * fails, with attention.strict) when the model binds its ops; a name nobody
 * provides is a typo or a missing plugin, and silently running the reference
 * instead would hide it. */
static int check_attention_backend(const orin_registry *reg, const char *backend)
{
    if (orin_registry_provides(reg, ORIN_OP_ATTENTION_PREFILL, backend) ||
        orin_registry_provides(reg, ORIN_OP_ATTENTION_DECODE, backend))
        return 0;
    size_t n = orin_registry_count(reg);
    char providers[256] = "none";
    size_t len = 0;
    for (size_t i = 0; i < n && len < sizeof providers; i++) {
        const orin_op_impl *impl = orin_registry_at(reg, i);
        if (is_attention(impl) && first_of_provider(reg, i))
            len += (size_t)snprintf(providers + len, sizeof providers - len, "%s%s",
                                    len ? ", " : "", impl->provider);
    }
    fprintf(stderr, "orin-run: attention.backend = '%s': no loaded plugin provides it "
                    "(attention providers: %s)\n", backend, providers);
    return -1;
}

/* The folder itself first: otherwise its absence surfaces as whichever file
 * inside it happens to be opened first. */
static int check_model_dir(const char *path)
{
    struct stat st;
    const char *why = stat(path, &st) != 0 ? strerror(errno)
                      : !S_ISDIR(st.st_mode) ? "not a folder (give the Hugging Face model folder)"
                                             : NULL;
    if (why)
        fprintf(stderr, "orin-run: model.path = '%s': %s\n", path, why);
    return why ? -1 : 0;
}

int engine_open_model(orin_engine *e, const orin_cli *cli)
{
    const orin_config *cfg = &cli->cfg;
    if (!cfg->model.path[0]) {
        fprintf(stderr, "orin-run: model.path is not set: give --config FILE or "
                        "--set model.path=DIR (a Hugging Face model folder)\n");
        return ORIN_EXIT_USAGE;
    }
    if (check_model_dir(cfg->model.path))
        return ORIN_EXIT_LOAD;
    int code = engine_open_plugins(e, cli);
    if (code != ORIN_EXIT_OK)
        return code;
    if (check_attention_backend(e->registry, cfg->attention.backend)) {
        engine_close(e);
        return ORIN_EXIT_USAGE;
    }
    e->tokenizer = orin_tokenizer_load(cfg->model.path);
    if (!e->tokenizer)
        return load_failed(e);
    orin_model_options opt = {
        .path = cfg->model.path,
        .dtype = cfg->model.dtype,
        .device = e->device,
        .registry = e->registry,
        .attention = cfg->attention.backend,
        .strict = cfg->attention.strict,
        .max_context = orin_config_is_set(cfg, "runtime", "max_context")
                           ? cfg->runtime.max_context : ORIN_CONTEXT_AUTO,
        .prefill_chunk = cfg->runtime.prefill_chunk,
        .progress = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO),
        .cuda_graph = cfg->runtime.cuda_graph,
        .fused_ops = cfg->runtime.fused_ops,
        .quant = cfg->model.quant == ORIN_LOAD_QUANT_INT8 ? ORIN_WEIGHT_INT8 : ORIN_WEIGHT_FLOAT,
        .quant_lm_head = cfg->model.quant_lm_head,
    };
    double t0 = orin_seconds();
    if (orin_model_load(&opt, &e->model) != 0)
        return load_failed(e); /* its errors name the file, or the key to change */
    double seconds = orin_seconds() - t0;
    e->load_seconds = seconds;
    double gib = (double)orin_model_weight_bytes(e->model) / 1073741824.0;
    orin_log(ORIN_LOG_DEBUG, "model: %s loaded in %.2f s (%.2f GiB of %s weights on %s, "
             "%.2f GiB/s)", cfg->model.path, seconds, gib,
             orin_dtype_name(orin_model_dtype(e->model)), e->device->name,
             seconds > 0 ? gib / seconds : 0.0);
    return ORIN_EXIT_OK;
}

int engine_encode_file(orin_engine *e, const char *path, int32_t **ids, size_t *n_ids)
{
    size_t len;
    char *text = orin_read_file(path, ORIN_RUN_MAX_TEXT_BYTES, &len);
    if (!text)
        return -1;
    int rc = orin_tokenizer_encode(e->tokenizer, text, len, ids, n_ids);
    free(text);
    return rc;
}
