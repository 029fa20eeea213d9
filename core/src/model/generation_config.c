/* generation_config.json (see orin/generation_config.h). */
#include "orin/generation_config.h"
#include "orin/error.h"
#include "orin/file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A number field: its value, or -1 when absent or null. */
static int read_number(const cJSON *root, const char *name, const char *field, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, field);
    *out = -1;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0)
        return orin_error_set("%s: %s must be a non-negative number", name, field);
    *out = v->valuedouble;
    return 0;
}

/* A token id: an integer in [0, INT32_MAX] (converting anything else to
 * int32_t would be undefined). */
static bool is_token_id(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= INT32_MAX &&
           v->valuedouble == floor(v->valuedouble);
}

static int read_eos(const cJSON *root, const char *name, orin_generation_config *g)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (cJSON_IsNumber(v)) {
        if (!is_token_id(v))
            return orin_error_set("%s: eos_token_id is not a token id", name);
        g->eos_token_ids[g->n_eos++] = (int32_t)v->valuedouble;
        return 0;
    }
    if (!cJSON_IsArray(v))
        return orin_error_set("%s: eos_token_id must be an integer or a list", name);
    const cJSON *item;
    cJSON_ArrayForEach(item, v)
    {
        if (!is_token_id(item))
            return orin_error_set("%s: eos_token_id holds a non-integer", name);
        if (g->n_eos == ORIN_GEN_MAX_EOS)
            return orin_error_set("%s: more than %d eos_token_id values", name, ORIN_GEN_MAX_EOS);
        g->eos_token_ids[g->n_eos++] = (int32_t)item->valuedouble;
    }
    return 0;
}

int orin_generation_config_parse(const char *json, size_t len, const char *name,
                                 orin_generation_config *g)
{
    memset(g, 0, sizeof *g);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return orin_error_set("%s: not a JSON object", name);
    }
    g->present = true;
    double top_k = -1, do_sample;
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(root, "do_sample");
    do_sample = !ds || cJSON_IsNull(ds) ? -1 : cJSON_IsBool(ds) ? cJSON_IsTrue(ds) : -2;
    int rc = do_sample == -2 ? orin_error_set("%s: do_sample must be true or false", name) : 0;
    g->do_sample = (int)do_sample;
    if (rc == 0)
        rc = read_number(root, name, "temperature", &g->temperature);
    if (rc == 0)
        rc = read_number(root, name, "top_k", &top_k);
    if (rc == 0)
        rc = read_number(root, name, "top_p", &g->top_p);
    if (rc == 0)
        rc = read_number(root, name, "min_p", &g->min_p);
    if (rc == 0)
        rc = read_number(root, name, "repetition_penalty", &g->repetition_penalty);
    if (rc == 0)
        rc = read_eos(root, name, g);
    g->top_k = top_k > 1e9 ? 1000000000 : (int32_t)top_k;
    cJSON_Delete(root);
    return rc;
}

int orin_generation_config_load(const char *model_dir, orin_generation_config *g)
{
    char path[4096];
    size_t len;
    memset(g, 0, sizeof *g);
    g->do_sample = -1;
    g->temperature = g->top_p = g->min_p = g->repetition_penalty = -1;
    g->top_k = -1;
    snprintf(path, sizeof path, "%s/generation_config.json", model_dir);
    char *buf = orin_read_file(path, 16u << 20, &len);
    if (!buf)
        return errno == ENOENT ? 0 : -1; /* the file is optional */
    int rc = orin_generation_config_parse(buf, len, path, g);
    free(buf);
    return rc;
}
