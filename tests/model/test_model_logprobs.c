/* The models against Hugging Face transformers: for each tiny model, attention
 * backend and score path, the log-probability of every token of the reference
 * texts (computed by transformers in float64 from the same saved weights) must
 * agree within 1e-3, with the same argmax at every position.
 *
 * usage: test_model_logprobs MODEL_DIR REF_JSON BACKEND PATH(prefill|decode) [DTYPE] [TOL] */
#include "test_util.h"
#include "model.h"

#include "orin/error.h"
#include "orin/plugin.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct reference {
    int32_t *ids;
    double *logprobs; /* [n - 1] */
    int32_t *argmax;  /* [n] */
    int n;
} reference;

static int read_int_array(const cJSON *arr, int32_t *out, int n)
{
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr)
    {
        if (i >= n || !cJSON_IsNumber(v))
            return -1;
        out[i++] = (int32_t)v->valuedouble;
    }
    return i == n ? 0 : -1;
}

static int load_reference(const char *path, reference *ref)
{
    size_t len;
    char *text = test_read_file(path, &len);
    if (!text)
        return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *ids = cJSON_GetObjectItem(root, "ids");
    const cJSON *lps = cJSON_GetObjectItem(root, "logprobs");
    const cJSON *am = cJSON_GetObjectItem(root, "argmax");
    int rc = -1;
    if (!root || !cJSON_IsArray(ids) || !cJSON_IsArray(lps) || !cJSON_IsArray(am))
        goto out;
    ref->n = cJSON_GetArraySize(ids);
    if (ref->n < 2 || cJSON_GetArraySize(lps) != ref->n - 1 || cJSON_GetArraySize(am) != ref->n)
        goto out;
    ref->ids = calloc((size_t)ref->n, sizeof *ref->ids);
    ref->argmax = calloc((size_t)ref->n, sizeof *ref->argmax);
    ref->logprobs = calloc((size_t)ref->n, sizeof *ref->logprobs);
    if (!ref->ids || !ref->argmax || !ref->logprobs ||
        read_int_array(ids, ref->ids, ref->n) || read_int_array(am, ref->argmax, ref->n))
        goto out;
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, lps) ref->logprobs[i++] = v->valuedouble;
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

/* log_softmax(row)[id] in double, and the row's argmax (lowest index on ties). */
static double logprob_of(const float *row, int32_t V, int32_t id, int32_t *argmax)
{
    int32_t best = 0;
    for (int32_t j = 1; j < V; j++)
        if (row[j] > row[best])
            best = j;
    double sum = 0;
    for (int32_t j = 0; j < V; j++)
        sum += exp((double)row[j] - (double)row[best]);
    *argmax = best;
    return (double)row[id] - (double)row[best] - log(sum);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL_DIR REF_JSON BACKEND prefill|decode [DTYPE] [TOL]\n",
                argv[0]);
        return 2;
    }
    const char *model_dir = argv[1], *ref_path = argv[2], *backend = argv[3], *path = argv[4];
    orin_dtype dtype = ORIN_F32;
    if (argc > 5 && orin_dtype_from_name(argv[5], &dtype) != 0)
        return 2;
    double tol = argc > 6 ? atof(argv[6]) : 1e-3;
    bool decode = strcmp(path, "decode") == 0;

    reference ref = {0};
    if (load_reference(ref_path, &ref) != 0) {
        fprintf(stderr, "cannot read reference %s\n", ref_path);
        return 1;
    }
    orin_registry *reg = orin_registry_create();
    orin_plugin_set *plugins = orin_plugin_set_create();
    if (orin_plugin_load_dir(plugins, reg, ORIN_PLUGIN_DIR) != 0) {
        fprintf(stderr, "plugins: %s\n", orin_error());
        return 1;
    }
    orin_model_options opt = {
        .path = model_dir,
        .dtype = dtype,
        .device = orin_device_cpu(),
        .registry = reg,
        .attention = backend,
        .strict = true,
        .max_context = ref.n + 8,
        .prefill_chunk = 200, /* several chunks over the long text */
    };
    orin_model *m = NULL;
    if (orin_model_load(&opt, &m) != 0) {
        fprintf(stderr, "load: %s\n", orin_error());
        return 1;
    }
    const int32_t V = orin_model_get_config(m)->vocab_size;
    float *logits = malloc((size_t)ref.n * (size_t)V * sizeof *logits);
    int rc = 0;
    if (decode) {
        for (int32_t i = 0; i < ref.n && rc == 0; i++)
            rc = orin_model_decode(m, ref.ids[i], i, logits + (size_t)i * V);
    } else {
        rc = orin_model_prefill(m, ref.ids, ref.n, 0, logits, true);
    }
    CHECK(rc == 0, "forward: %s", orin_error());

    double worst = 0;
    int argmax_mismatches = 0;
    for (int32_t i = 0; rc == 0 && i < ref.n; i++) {
        int32_t am;
        const float *row = logits + (size_t)i * V;
        double lp = logprob_of(row, V, i + 1 < ref.n ? ref.ids[i + 1] : 0, &am);
        if (i + 1 < ref.n) {
            double err = fabs(lp - ref.logprobs[i]);
            if (!(err <= worst))
                worst = err; /* also catches NaN */
        }
        if (am != ref.argmax[i] && argmax_mismatches++ < 5)
            fprintf(stderr, "position %d: argmax %d, reference %d\n", i, am, ref.argmax[i]);
    }
    printf("%s %s %s %s: %d tokens, max |logprob - reference| = %.3g\n", model_dir, backend, path,
           orin_dtype_name(dtype), ref.n, worst);
    CHECK(worst < tol, "max |logprob - reference| = %g >= %g", worst, tol);
    /* f32 must pick the reference's argmax everywhere (the references keep every
     * top-2 gap well above f32 error); f16/bf16 round the weights and
     * activations again, so near ties may flip: at most 5% of positions. */
    int allowed = dtype == ORIN_F32 ? 0 : ref.n / 20;
    CHECK(argmax_mismatches <= allowed, "%d positions with a different argmax (allowed %d)",
          argmax_mismatches, allowed);

    free(logits);
    orin_model_free(m);
    orin_registry_destroy(reg);
    orin_plugin_set_destroy(plugins);
    free(ref.ids);
    free(ref.logprobs);
    free(ref.argmax);
    return test_finish();
}
