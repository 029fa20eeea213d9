/* The engine's model half: the tokenizer and the model of model.path, opened
 * after the plugins (engine.c) so that the model can bind its ops. */
#include "engine.h"

#include "orin/error.h"
#include "orin/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int load_failed(orin_engine *e)
{
    fprintf(stderr, "orin-run: %s\n", orin_error());
    engine_close(e);
    return ORIN_EXIT_LOAD;
}

int engine_open_model(orin_engine *e, const orin_cli *cli)
{
    const orin_config *cfg = &cli->cfg;
    if (!cfg->model.path[0]) {
        fprintf(stderr, "orin-run: model.path is not set: give --config FILE or "
                        "--set model.path=DIR (a Hugging Face model folder)\n");
        return ORIN_EXIT_USAGE;
    }
    int code = engine_open_plugins(e, cli);
    if (code != ORIN_EXIT_OK)
        return code;
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
    };
    if (orin_model_load(&opt, &e->model) != 0) {
        orin_error_prefix("%s: ", cfg->model.path);
        return load_failed(e);
    }
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
