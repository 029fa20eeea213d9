/* The engine's model half: the tokenizer and the model of model.path, opened
 * after the plugins (engine.c) so that the model can bind its ops. */
#include "engine.h"

#include "orin/error.h"

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
    FILE *f = fopen(path, "rb");
    if (!f)
        return orin_error_set("%s: cannot open: %m", path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (cap - len < 65536) {
            cap = cap ? cap * 2 : 1 << 20;
            char *grown = realloc(text, cap);
            if (!grown) {
                rc = orin_error_set("%s: out of memory", path);
                break;
            }
            text = grown;
        }
        size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                rc = orin_error_set("%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (rc == 0)
        rc = orin_tokenizer_encode(e->tokenizer, text ? text : "", len, ids, n_ids);
    free(text);
    return rc;
}
