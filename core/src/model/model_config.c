/* config.json of the Hugging Face Qwen2 / Qwen3 causal LMs.
 *
 * Defaults follow transformers (models/qwen2, models/qwen3 configuration and
 * modeling code), so that a config which leaves a field out means what it means
 * to transformers:
 *   - num_key_value_heads absent is the dataclass default 32; null is
 *     num_attention_heads (the __post_init__ rule).
 *   - head_dim absent: Qwen2 uses hidden/heads (getattr fallback in the attention
 *     module), Qwen3 the dataclass default 128.
 *   - Qwen2 attention always has q/k/v biases (bias=True is hard-coded; an
 *     "attention_bias" key in the config is ignored by transformers, so here too).
 *   - RoPE: rope_scaling (old) or rope_parameters (new); rope_theta inside that
 *     dict wins over the top-level key; default 10000.
 *   - Sliding window attention only exists when use_sliding_window is true, a
 *     sliding_window is set and some layer >= max_window_layers (or listed in
 *     layer_types) is a sliding layer. Only then is it rejected.
 *   - Qwen3-VL (Qwen3VLForConditionalGeneration, model_type qwen3_vl): the
 *     language model is a Qwen3 described by text_config; tie_word_embeddings,
 *     dtype and quantization_config stay top-level keys, as transformers reads
 *     them. Qwen3VLConfig's defaults for the multimodal keys (token ids,
 *     mrope_section, spatial_merge_size) and Qwen3VLTextConfig's rope theta.
 *   - quantization_config: AwqConfig's defaults (bits 4, group_size 128,
 *     zero_point true, format/version gemm); modules_to_not_convert matched
 *     as substrings of the full module name. Other methods and AWQ variants
 *     are rejected, naming the key.
 */
#include "orin/model_config.h"
#include "orin/error.h"
#include "orin/file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The transformers defaults for fields a config may leave out. */
#define QWEN_DEFAULT_KV_HEADS 32
#define QWEN3_DEFAULT_HEAD_DIM 128
#define QWEN_DEFAULT_MAX_POS 32768
#define QWEN_DEFAULT_RMS_EPS 1e-6
#define QWEN_DEFAULT_ROPE_THETA 10000.0
#define QWEN_DEFAULT_MAX_WINDOW_LAYERS 28
/* Qwen3VLTextConfig.default_theta in transformers 5.23 (4.57 said 5e6; the
 * published folders all set the key, so only hand-written configs see this). */
#define QWEN3_VL_DEFAULT_ROPE_THETA 500000.0
#define QWEN3_VL_DEFAULT_MERGE 2

static const cJSON *field(const cJSON *root, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(root, key);
}

/* A JSON value rendered for an error message ("yarn", 3.5, [1,2], ...). */
static void describe(const cJSON *v, char *buf, size_t cap)
{
    char *s = cJSON_PrintUnformatted(v);
    snprintf(buf, cap, "%s", s ? s : "?");
    if (strlen(buf) == cap - 1 && cap > 4)
        memcpy(buf + cap - 4, "...", 4);
    free(s);
}

static int bad_value(const char *name, const char *key, const cJSON *v, const char *why)
{
    char val[96];
    describe(v, val, sizeof val);
    return orin_error_set("%s: %s = %s: %s", name, key, val, why);
}

static bool is_null_or_absent(const cJSON *v)
{
    return !v || cJSON_IsNull(v);
}

/* An integer in [min, INT32_MAX]; `fallback` when absent or null (if allowed). */
static int get_int(const cJSON *root, const char *key, const char *name, bool required,
                   int32_t fallback, int32_t min, int32_t *out)
{
    const cJSON *v = field(root, key);
    if (is_null_or_absent(v)) {
        if (required)
            return orin_error_set("%s: missing field '%s'", name, key);
        *out = fallback;
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return bad_value(name, key, v, "not an integer");
    if (v->valuedouble > INT32_MAX)
        return bad_value(name, key, v, "too large");
    if (v->valuedouble < min)
        return bad_value(name, key, v, min > 0 ? "must be positive" : "must not be negative");
    *out = (int32_t)v->valuedouble;
    return 0;
}

static int get_positive_double(const cJSON *v, const char *key, const char *name, double fallback,
                               double *out)
{
    if (is_null_or_absent(v)) {
        *out = fallback;
        return 0;
    }
    if (!cJSON_IsNumber(v))
        return bad_value(name, key, v, "not a number");
    if (!(v->valuedouble > 0) || !isfinite(v->valuedouble))
        return bad_value(name, key, v, "must be positive");
    *out = v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *root, const char *key, const char *name, bool fallback, bool *out)
{
    const cJSON *v = field(root, key);
    if (is_null_or_absent(v)) {
        *out = fallback;
        return 0;
    }
    if (!cJSON_IsBool(v))
        return bad_value(name, key, v, "not true or false");
    *out = cJSON_IsTrue(v);
    return 0;
}

static int parse_arch(const cJSON *root, const char *name, orin_model_config *cfg)
{
    static const struct {
        const char *architecture, *model_type;
        orin_arch arch;
        bool vl;
    } known[] = {
        {"Qwen2ForCausalLM", "qwen2", ORIN_ARCH_QWEN2, false},
        {"Qwen3ForCausalLM", "qwen3", ORIN_ARCH_QWEN3, false},
        {"Qwen3VLForConditionalGeneration", "qwen3_vl", ORIN_ARCH_QWEN3, true},
    };
    const cJSON *archs = field(root, "architectures");
    const cJSON *type = field(root, "model_type");
    const char *want = NULL, *key;

    if (cJSON_IsArray(archs) && cJSON_GetArraySize(archs) > 0) {
        const cJSON *first = cJSON_GetArrayItem(archs, 0);
        if (!cJSON_IsString(first))
            return bad_value(name, "architectures[0]", first, "not a string");
        want = first->valuestring;
        key = "architectures[0]";
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (strcmp(want, known[i].architecture) == 0) {
                cfg->arch = known[i].arch;
                cfg->vl.is_vl = known[i].vl;
                snprintf(cfg->architecture, sizeof cfg->architecture, "%s", want);
                return 0;
            }
        }
    } else if (!is_null_or_absent(archs) && !cJSON_IsArray(archs)) {
        return bad_value(name, "architectures", archs, "not a list");
    } else if (cJSON_IsString(type)) {
        want = type->valuestring;
        key = "model_type";
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (strcmp(want, known[i].model_type) == 0) {
                cfg->arch = known[i].arch;
                cfg->vl.is_vl = known[i].vl;
                snprintf(cfg->architecture, sizeof cfg->architecture, "%s", known[i].architecture);
                return 0;
            }
        }
    } else {
        return orin_error_set("%s: missing field 'architectures' (and no 'model_type')", name);
    }
    return orin_error_set("%s: %s: unsupported architecture '%s' (orin runs Qwen2ForCausalLM, "
                          "Qwen3ForCausalLM, Qwen3VLForConditionalGeneration)", name, key, want);
}

/* The RoPE dict: rope_scaling when set (transformers gives it priority), else
 * rope_parameters; possibly nested per layer type ({"full_attention": {...}}).
 * NULL when there is none (*dict_key still names one); -1 when it is not an
 * object. */
static int rope_dict(const cJSON *root, const char *name, const cJSON **out, const char **out_key)
{
    const char *dict_key = "rope_scaling";
    const cJSON *dict = field(root, dict_key);
    if (is_null_or_absent(dict) || (cJSON_IsObject(dict) && !dict->child)) {
        dict_key = "rope_parameters";
        dict = field(root, dict_key);
    }
    if (!is_null_or_absent(dict) && !cJSON_IsObject(dict))
        return bad_value(name, dict_key, dict, "not an object");
    if (cJSON_IsObject(field(dict, "full_attention"))) {
        dict = field(dict, "full_attention");
        dict_key = "rope_parameters.full_attention";
    }
    *out = cJSON_IsObject(dict) ? dict : NULL;
    *out_key = dict_key;
    return 0;
}

/* Whether v is positive and finite once rounded to float32, as the rope ops
 * and the frequencies' arithmetic take it. */
static bool positive_f32(double v)
{
    return (float)v > 0 && isfinite((float)v);
}

/* A number of the RoPE dict: `fallback` when absent or null (*present false). */
static int rope_number(const cJSON *dict, const char *dict_key, const char *k, const char *name,
                       double fallback, double *out, bool *present)
{
    const cJSON *v = field(dict, k);
    char key[96];
    snprintf(key, sizeof key, "%s.%s", dict_key, k);
    *present = !is_null_or_absent(v);
    if (!*present) {
        *out = fallback;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return bad_value(name, key, v, "not a number");
    *out = v->valuedouble;
    return 0;
}

/* YaRN's keys, as _compute_yarn_parameters reads them: factor is required
 * (null: max_position_embeddings / original_max_position_embeddings);
 * original_max_position_embeddings from the top level first (transformers'
 * standardize_rope_params), then the dict, then max_position_embeddings;
 * attention_factor, else 0.1 ln(factor) + 1 (the mscale form where mscale and
 * mscale_all_dim are both set and nonzero), 1 for factor <= 1; beta_fast and
 * beta_slow 32 and 1 where absent, null or 0; truncate true. */
static int parse_yarn(const cJSON *root, const cJSON *dict, const char *dict_key,
                      const char *name, orin_model_config *cfg)
{
    orin_rope_config *r = &cfg->rope;
    char key[96];
    bool has_factor, has_af, has_ms, has_msa, present;
    double mscale, mscale_all;
    int32_t orig = cfg->max_position_embeddings;
    if (field(root, "original_max_position_embeddings")) {
        if (get_int(root, "original_max_position_embeddings", name, false, orig, 1, &orig))
            return -1;
    } else if (field(dict, "original_max_position_embeddings") &&
               get_int(dict, "original_max_position_embeddings", name, false, orig, 1, &orig)) {
        return -1;
    }
    r->original_max_pos = orig;
    if (!field(dict, "factor"))
        return orin_error_set("%s: missing field '%s.factor' (rope type yarn)", name, dict_key);
    if (rope_number(dict, dict_key, "factor", name, 0.0, &r->factor, &has_factor) ||
        rope_number(dict, dict_key, "attention_factor", name, 0.0, &r->attention_factor,
                    &has_af) ||
        rope_number(dict, dict_key, "mscale", name, 0.0, &mscale, &has_ms) ||
        rope_number(dict, dict_key, "mscale_all_dim", name, 0.0, &mscale_all, &has_msa) ||
        rope_number(dict, dict_key, "beta_fast", name, 32.0, &r->beta_fast, &present) ||
        rope_number(dict, dict_key, "beta_slow", name, 1.0, &r->beta_slow, &present))
        return -1;
    if (!has_factor)
        r->factor = (double)cfg->max_position_embeddings / (double)orig;
    snprintf(key, sizeof key, "%s.factor", dict_key);
    if (!positive_f32(r->factor))
        return bad_value(name, key, field(dict, "factor"), "must be a positive float32");
    if (r->beta_fast == 0)
        r->beta_fast = 32.0;
    if (r->beta_slow == 0)
        r->beta_slow = 1.0;
    /* their logarithms (and theta's, a divisor) bound the ramp: transformers
     * fails on these too */
    snprintf(key, sizeof key, "%s.beta_fast", dict_key);
    if (r->beta_fast < 0)
        return bad_value(name, key, field(dict, "beta_fast"), "must not be negative");
    snprintf(key, sizeof key, "%s.beta_slow", dict_key);
    if (r->beta_slow < 0)
        return bad_value(name, key, field(dict, "beta_slow"), "must not be negative");
    if (get_bool(dict, "truncate", name, true, &r->truncate))
        return -1;
    if (!has_af) {
        /* get_mscale(scale, m) = 0.1 m ln(scale) + 1 for scale > 1, else 1 */
        double f = r->factor, ln = log(f);
        if (has_ms && has_msa && mscale != 0 && mscale_all != 0)
            r->attention_factor =
                f <= 1 ? 1.0 : (0.1 * mscale * ln + 1.0) / (0.1 * mscale_all * ln + 1.0);
        else
            r->attention_factor = f <= 1 ? 1.0 : 0.1 * ln + 1.0;
    }
    snprintf(key, sizeof key, "%s.attention_factor", dict_key);
    if (!positive_f32(r->attention_factor))
        return bad_value(name, key, field(dict, "attention_factor"), "must be a positive float32");
    return 0;
}

/* rope_type (or type) `t`: default, linear, yarn; a Qwen3-VL folder's "mrope"
 * (Qwen2-VL's published name) means default. */
static int rope_type(const cJSON *t, const char *key, const char *name, orin_model_config *cfg)
{
    if (!cJSON_IsString(t))
        return bad_value(name, key, t, "not a string");
    const char *s = t->valuestring;
    if (!strcmp(s, "linear"))
        cfg->rope.type = ORIN_ROPE_LINEAR;
    else if (!strcmp(s, "yarn"))
        cfg->rope.type = ORIN_ROPE_YARN;
    else if (strcmp(s, "default") != 0 && !(cfg->vl.is_vl && !strcmp(s, "mrope")))
        return orin_error_set("%s: %s: unsupported rope type '%s' (default, linear, yarn%s)",
                              name, key, s, cfg->vl.is_vl ? ", mrope" : "");
    return 0;
}

/* Linear scaling's one key: factor, required (transformers divides by it). */
static int parse_linear(const cJSON *dict, const char *dict_key, const char *name,
                        orin_model_config *cfg)
{
    char key[96];
    bool present;
    snprintf(key, sizeof key, "%s.factor", dict_key);
    if (!field(dict, "factor"))
        return orin_error_set("%s: missing field '%s' (rope type linear)", name, key);
    if (rope_number(dict, dict_key, "factor", name, 0.0, &cfg->rope.factor, &present))
        return -1;
    if (!positive_f32(cfg->rope.factor))
        return bad_value(name, key, field(dict, "factor"), "must be a positive float32");
    return 0;
}

/* Plain RoPE, or scaled (rope type linear or yarn); for Qwen3-VL the same
 * rotations with positions from three rows (M-RoPE), whose dict may say
 * rope_type "default" or, as Qwen2-VL's published files do, "mrope"
 * (transformers reads both as default), or a scaled type beside the mrope keys. */
static int parse_rope(const cJSON *root, const char *name, double default_theta,
                      orin_model_config *cfg)
{
    const cJSON *dict;
    const char *dict_key;
    if (rope_dict(root, name, &dict, &dict_key))
        return -1;
    char key[64];

    const cJSON *type = field(dict, "rope_type");
    const char *type_key = "rope_type";
    if (is_null_or_absent(type)) {
        type = field(dict, "type");
        type_key = "type";
    }
    snprintf(key, sizeof key, "%s.%s", dict_key, type_key);
    cfg->rope = (orin_rope_config){.type = ORIN_ROPE_DEFAULT, .factor = 1.0,
                                   .attention_factor = 1.0};
    if (!is_null_or_absent(type) && rope_type(type, key, name, cfg))
        return -1;
    if ((cfg->rope.type == ORIN_ROPE_LINEAR && parse_linear(dict, dict_key, name, cfg)) ||
        (cfg->rope.type == ORIN_ROPE_YARN && parse_yarn(root, dict, dict_key, name, cfg)))
        return -1;

    const cJSON *prf = field(dict, "partial_rotary_factor");
    const char *prf_key = "partial_rotary_factor";
    if (is_null_or_absent(prf))
        prf = field(root, "partial_rotary_factor");
    else
        prf_key = "rope_parameters.partial_rotary_factor";
    if (!is_null_or_absent(prf) && !(cJSON_IsNumber(prf) && prf->valuedouble == 1.0))
        return bad_value(name, prf_key, prf, "partial rotary embeddings are not supported");

    const cJSON *theta = field(dict, "rope_theta");
    snprintf(key, sizeof key, "%s.rope_theta", dict_key);
    if (is_null_or_absent(theta)) {
        theta = field(root, "rope_theta");
        snprintf(key, sizeof key, "rope_theta");
    }
    if (get_positive_double(theta, key, name, default_theta, &cfg->rope_theta))
        return -1;
    if (!positive_f32(cfg->rope_theta)) /* the rope ops take it in float32 */
        return bad_value(name, key, theta, "must be a positive float32");
    if (cfg->rope.type == ORIN_ROPE_YARN && cfg->rope_theta == 1.0) /* yarn divides by ln theta */
        return bad_value(name, key, theta, "must not be 1 with rope type yarn");
    return 0;
}

static int parse_sliding_window(const cJSON *root, const char *name, const orin_model_config *cfg)
{
    bool use = false;
    if (get_bool(root, "use_sliding_window", name, false, &use))
        return -1;
    const cJSON *window = field(root, "sliding_window");
    bool has_window = use && !is_null_or_absent(window);

    const cJSON *types = field(root, "layer_types");
    if (!is_null_or_absent(types)) {
        if (!cJSON_IsArray(types))
            return bad_value(name, "layer_types", types, "not a list");
        int i = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, types) {
            if (!cJSON_IsString(t) || strcmp(t->valuestring, "full_attention") != 0) {
                char key[48];
                snprintf(key, sizeof key, "layer_types[%d]", i);
                return bad_value(name, key, t, "only full_attention layers are supported");
            }
            i++;
        }
        return 0;
    }
    if (!has_window)
        return 0;
    int32_t max_window_layers;
    if (get_int(root, "max_window_layers", name, false, QWEN_DEFAULT_MAX_WINDOW_LAYERS, 0,
                &max_window_layers))
        return -1;
    if (max_window_layers < cfg->num_hidden_layers)
        return orin_error_set("%s: use_sliding_window = true: sliding window attention is not "
                              "supported (layers %d..%d would use it; max_window_layers = %d)",
                              name, max_window_layers, cfg->num_hidden_layers - 1,
                              max_window_layers);
    return 0;
}

/* `root`'s dtype or torch_dtype; `inner` (text_config) is asked when the top
 * level has neither. */
static int parse_dtype(const cJSON *root, const cJSON *inner, const char *name,
                       orin_model_config *cfg)
{
    static const struct {
        const char *name;
        orin_dtype dtype;
    } known[] = {
        {"float32", ORIN_F32}, {"float16", ORIN_F16}, {"bfloat16", ORIN_BF16},
    };
    const char *key = "dtype";
    const cJSON *v = field(root, key);
    if (is_null_or_absent(v)) {
        key = "torch_dtype";
        v = field(root, key);
    }
    if (is_null_or_absent(v) && inner != root) {
        key = "text_config.dtype";
        v = field(inner, "dtype");
    }
    cfg->torch_dtype = ORIN_F32; /* transformers loads float32 when none is given */
    if (is_null_or_absent(v))
        return 0;
    if (!cJSON_IsString(v))
        return bad_value(name, key, v, "not a string");
    const char *s = v->valuestring;
    if (strncmp(s, "torch.", 6) == 0)
        s += 6;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(s, known[i].name) == 0) {
            cfg->torch_dtype = known[i].dtype;
            return 0;
        }
    }
    return bad_value(name, key, v, "unsupported dtype (float32, float16, bfloat16)");
}

static int token_id(const cJSON *v, const char *key, const char *name, int32_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
        v->valuedouble > INT32_MAX)
        return bad_value(name, key, v, "not a token id");
    *out = (int32_t)v->valuedouble;
    return 0;
}

static int parse_special_tokens(const cJSON *root, const char *name, orin_model_config *cfg)
{
    const cJSON *bos = field(root, "bos_token_id");
    cfg->bos_token_id = -1;
    if (!is_null_or_absent(bos) && token_id(bos, "bos_token_id", name, &cfg->bos_token_id))
        return -1;

    const cJSON *eos = field(root, "eos_token_id");
    cfg->n_eos = 0;
    if (is_null_or_absent(eos))
        return 0;
    if (!cJSON_IsArray(eos))
        return token_id(eos, "eos_token_id", name, &cfg->eos_token_ids[cfg->n_eos++]);
    if (cJSON_GetArraySize(eos) > ORIN_MAX_EOS)
        return orin_error_set("%s: eos_token_id: %d ids, at most %d are supported", name,
                              cJSON_GetArraySize(eos), ORIN_MAX_EOS);
    const cJSON *id;
    cJSON_ArrayForEach(id, eos) {
        if (token_id(id, "eos_token_id", name, &cfg->eos_token_ids[cfg->n_eos++]))
            return -1;
    }
    return 0;
}

static int parse_sizes(const cJSON *root, const char *name, orin_model_config *cfg)
{
    if (get_int(root, "hidden_size", name, true, 0, 1, &cfg->hidden_size) ||
        get_int(root, "intermediate_size", name, true, 0, 1, &cfg->intermediate_size) ||
        get_int(root, "num_hidden_layers", name, true, 0, 1, &cfg->num_hidden_layers) ||
        get_int(root, "num_attention_heads", name, true, 0, 1, &cfg->num_attention_heads) ||
        get_int(root, "vocab_size", name, true, 0, 1, &cfg->vocab_size) ||
        get_int(root, "max_position_embeddings", name, false, QWEN_DEFAULT_MAX_POS, 1,
                &cfg->max_position_embeddings))
        return -1;

    /* Absent: the dataclass default; null: __post_init__ copies the head count. */
    const cJSON *kv = field(root, "num_key_value_heads");
    int32_t kv_default = kv ? cfg->num_attention_heads : QWEN_DEFAULT_KV_HEADS;
    if (get_int(root, "num_key_value_heads", name, false, kv_default, 1, &cfg->num_key_value_heads))
        return -1;
    if (cfg->num_attention_heads % cfg->num_key_value_heads != 0)
        return orin_error_set("%s: num_key_value_heads = %d%s does not divide num_attention_heads = %d",
                              name, cfg->num_key_value_heads,
                              kv ? "" : " (absent: the transformers default)",
                              cfg->num_attention_heads);

    const cJSON *hd = field(root, "head_dim");
    if (cfg->arch == ORIN_ARCH_QWEN3 && !hd) {
        cfg->head_dim = QWEN3_DEFAULT_HEAD_DIM;
    } else if (is_null_or_absent(hd)) {
        if (cfg->hidden_size % cfg->num_attention_heads != 0)
            return orin_error_set("%s: hidden_size = %d is not divisible by num_attention_heads = %d "
                                  "(and no head_dim)", name, cfg->hidden_size,
                                  cfg->num_attention_heads);
        cfg->head_dim = cfg->hidden_size / cfg->num_attention_heads;
    } else if (get_int(root, "head_dim", name, true, 0, 1, &cfg->head_dim)) {
        return -1;
    }
    /* RoPE rotates pairs (i, i + head_dim/2). */
    if (cfg->head_dim % 2 != 0)
        return orin_error_set("%s: head_dim = %d: must be even for rotary embeddings", name,
                              cfg->head_dim);
    return 0;
}

/* ---- quantization_config ----
 * transformers' AwqConfig defaults for keys left out: bits 4, group_size 128,
 * zero_point true, format gemm ("version", the older key, wins when set, in
 * any case). Keys orin has no use for (backend, do_fuse, ...) are ignored. */
#define AWQ_DEFAULT_GROUP 128

static int quant_error(const char *name, const char *sub, const cJSON *v, const char *why)
{
    char key[64];
    snprintf(key, sizeof key, "quantization_config.%s", sub);
    return bad_value(name, key, v, why);
}

static int parse_quant_ints(const cJSON *qc, const char *name, orin_quant_config *q)
{
    const cJSON *bits = field(qc, "bits"), *group = field(qc, "group_size");
    q->bits = 4;
    if (!is_null_or_absent(bits)) {
        if (!cJSON_IsNumber(bits) || bits->valuedouble != 4)
            return quant_error(name, "bits", bits, "orin runs 4-bit AWQ");
    }
    q->group_size = AWQ_DEFAULT_GROUP;
    if (is_null_or_absent(group))
        return 0;
    if (!cJSON_IsNumber(group) || group->valuedouble != floor(group->valuedouble) ||
        (group->valuedouble < 1 && group->valuedouble != -1) || group->valuedouble > INT32_MAX)
        return quant_error(name, "group_size", group,
                           "not a positive integer (or -1: one group per row)");
    q->group_size = group->valuedouble == -1 ? 0 : (int32_t)group->valuedouble;
    return 0;
}

static int parse_quant_variant(const cJSON *qc, const char *name)
{
    const cJSON *zero = field(qc, "zero_point");
    if (!is_null_or_absent(zero) && !cJSON_IsTrue(zero))
        return quant_error(name, "zero_point", zero,
                           "orin runs AWQ with zero points (zero_point true)");
    const char *sub = "version";
    const cJSON *format = field(qc, sub);
    if (is_null_or_absent(format)) {
        sub = "format";
        format = field(qc, sub);
    }
    if (is_null_or_absent(format))
        return 0;
    if (!cJSON_IsString(format) || strcasecmp(format->valuestring, "gemm") != 0)
        return quant_error(name, sub, format,
                           "unsupported AWQ layout (orin runs gemm, as AutoAWQ writes it)");
    return 0;
}

static int parse_quant_skip(const cJSON *qc, const char *name, orin_quant_config *q)
{
    const cJSON *list = field(qc, "modules_to_not_convert");
    if (is_null_or_absent(list))
        return 0;
    if (!cJSON_IsArray(list))
        return quant_error(name, "modules_to_not_convert", list, "not a list of module names");
    if (cJSON_GetArraySize(list) > ORIN_QUANT_MAX_SKIP)
        return quant_error(name, "modules_to_not_convert", list, "more names than orin keeps (32)");
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
        if (!cJSON_IsString(item) || !item->valuestring[0] ||
            strlen(item->valuestring) >= ORIN_QUANT_SKIP_LEN)
            return quant_error(name, "modules_to_not_convert", item,
                               "not a module name (1 to 127 characters)");
        memcpy(q->skip[q->n_skip++], item->valuestring, strlen(item->valuestring) + 1);
    }
    return 0;
}

/* Absent or null: float weights. */
static int parse_quant(const cJSON *root, const char *name, orin_quant_config *q)
{
    memset(q, 0, sizeof *q);
    const cJSON *qc = field(root, "quantization_config");
    if (is_null_or_absent(qc))
        return 0;
    if (!cJSON_IsObject(qc))
        return bad_value(name, "quantization_config", qc, "not an object");
    const cJSON *method = field(qc, "quant_method");
    if (is_null_or_absent(method))
        return orin_error_set("%s: missing field 'quantization_config.quant_method'", name);
    if (!cJSON_IsString(method) || strcasecmp(method->valuestring, "awq") != 0)
        return quant_error(name, "quant_method", method,
                           "unsupported quantization method (orin runs awq)");
    if (parse_quant_ints(qc, name, q) || parse_quant_variant(qc, name) ||
        parse_quant_skip(qc, name, q))
        return -1;
    q->method = ORIN_QUANT_AWQ;
    return 0;
}

bool orin_quant_covers(const orin_quant_config *q, const char *module)
{
    if (q->method == ORIN_QUANT_NONE)
        return false;
    for (int32_t i = 0; i < q->n_skip; i++)
        if (strstr(module, q->skip[i]))
            return false;
    return true;
}

/* ---- Qwen3-VL ---- */

/* The special token ids of the top level: Qwen3VLConfig's defaults (the
 * published ids) when absent; each must be inside the text vocabulary and
 * differ from the others, or placeholders and text could not be told apart. */
static int parse_vl_tokens(const cJSON *root, const char *name, orin_model_config *cfg)
{
    orin_vl_config *vl = &cfg->vl;
    const struct {
        const char *key;
        int32_t fallback, *out;
    } ids[] = {
        {"image_token_id", 151655, &vl->image_token_id},
        {"video_token_id", 151656, &vl->video_token_id},
        {"vision_start_token_id", 151652, &vl->vision_start_token_id},
        {"vision_end_token_id", 151653, &vl->vision_end_token_id},
    };
    const size_t n = sizeof ids / sizeof ids[0];
    for (size_t i = 0; i < n; i++) {
        if (get_int(root, ids[i].key, name, false, ids[i].fallback, 0, ids[i].out))
            return -1;
        if (*ids[i].out >= cfg->vocab_size)
            return orin_error_set("%s: %s = %d%s: not below text_config.vocab_size = %d", name,
                                  ids[i].key, *ids[i].out,
                                  field(root, ids[i].key) ? "" : " (absent: the default)",
                                  cfg->vocab_size);
        for (size_t j = 0; j < i; j++)
            if (*ids[i].out == *ids[j].out)
                return orin_error_set("%s: %s = %d: the same id as %s", name, ids[i].key,
                                      *ids[i].out, ids[j].key);
    }
    return 0;
}

/* text_config's rope dict: mrope_section, three counts of frequencies that
 * sum to head_dim/2, and mrope_interleaved. transformers 5 ignores the flag
 * and always interleaves; a file that says false describes some other
 * layout, so it is refused rather than silently run interleaved. */
static int parse_mrope(const cJSON *text, const char *name, orin_model_config *cfg)
{
    const cJSON *dict;
    const char *dict_key;
    char key[80];
    if (rope_dict(text, name, &dict, &dict_key))
        return -1;
    const cJSON *sec = field(dict, "mrope_section");
    int32_t *out = cfg->vl.mrope_section;
    snprintf(key, sizeof key, "%s.mrope_section", dict_key);
    if (is_null_or_absent(sec)) {
        out[0] = 24, out[1] = 20, out[2] = 20;
    } else if (!cJSON_IsArray(sec) || cJSON_GetArraySize(sec) != 3) {
        return bad_value(name, key, sec, "not a list of three integers");
    } else {
        for (int i = 0; i < 3; i++) {
            const cJSON *v = cJSON_GetArrayItem(sec, i);
            if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
                v->valuedouble < 0 || v->valuedouble > INT32_MAX)
                return bad_value(name, key, sec, "not a list of three non-negative integers");
            out[i] = (int32_t)v->valuedouble;
        }
    }
    if ((int64_t)out[0] + out[1] + out[2] != cfg->head_dim / 2)
        return orin_error_set("%s: %s = [%d, %d, %d]%s: must sum to head_dim / 2 = %d", name, key,
                              out[0], out[1], out[2],
                              is_null_or_absent(sec) ? " (absent: the default)" : "",
                              cfg->head_dim / 2);

    snprintf(key, sizeof key, "%s.mrope_interleaved", dict_key);
    const cJSON *il = field(dict, "mrope_interleaved");
    if (!is_null_or_absent(il) && !cJSON_IsTrue(il))
        return bad_value(name, key, il, "Qwen3-VL interleaves M-RoPE (only true)");
    cfg->vl.mrope_interleaved = true;
    return 0;
}

/* vision_config must be there (a VL folder without a vision tower is not one);
 * only the merge size matters to the language side. */
static int parse_vision(const cJSON *root, const char *name, orin_model_config *cfg)
{
    const cJSON *vc = field(root, "vision_config");
    if (is_null_or_absent(vc))
        return orin_error_set("%s: missing field 'vision_config'", name);
    if (!cJSON_IsObject(vc))
        return bad_value(name, "vision_config", vc, "not an object");
    char vname[4200];
    snprintf(vname, sizeof vname, "%s: vision_config", name);
    return get_int(vc, "spatial_merge_size", vname, false, QWEN3_VL_DEFAULT_MERGE, 1,
                   &cfg->vl.spatial_merge_size);
}

static bool only_spaces(const char *p, const char *end)
{
    for (; p < end; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0')
            return false;
    return true;
}

int orin_model_config_parse(const char *json, size_t len, const char *name, orin_model_config *out)
{
    int rc = -1;
    orin_model_config cfg = {0};
    if (!name)
        name = "config.json";
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root || !only_spaces(end, json + len)) {
        orin_error_set("%s: not valid JSON", name);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        orin_error_set("%s: not a JSON object", name);
        goto out;
    }
    if (parse_arch(root, name, &cfg))
        goto out;
    /* The text model's keys: the top level, or a VL config's text_config
     * (errors then say "NAME: text_config: key"). */
    const cJSON *text = root;
    const char *tname = name;
    char tname_buf[4200];
    if (cfg.vl.is_vl) {
        text = field(root, "text_config");
        if (is_null_or_absent(text)) {
            orin_error_set("%s: missing field 'text_config'", name);
            goto out;
        }
        if (!cJSON_IsObject(text)) {
            bad_value(name, "text_config", text, "not an object");
            goto out;
        }
        snprintf(tname_buf, sizeof tname_buf, "%s: text_config", name);
        tname = tname_buf;
    }
    double theta = cfg.vl.is_vl ? QWEN3_VL_DEFAULT_ROPE_THETA : QWEN_DEFAULT_ROPE_THETA;
    if (parse_sizes(text, tname, &cfg) ||
        get_positive_double(field(text, "rms_norm_eps"), "rms_norm_eps", tname,
                            QWEN_DEFAULT_RMS_EPS, &cfg.rms_norm_eps) ||
        parse_rope(text, tname, theta, &cfg) || parse_sliding_window(text, tname, &cfg) ||
        get_bool(root, "tie_word_embeddings", name, false, &cfg.tie_word_embeddings) ||
        parse_dtype(root, text, name, &cfg) || parse_special_tokens(text, tname, &cfg) ||
        parse_quant(root, name, &cfg.quant))
        goto out;
    if (cfg.vl.is_vl && (parse_vl_tokens(root, name, &cfg) || parse_mrope(text, tname, &cfg) ||
                         parse_vision(root, name, &cfg)))
        goto out;

    if (cfg.arch == ORIN_ARCH_QWEN2) {
        cfg.attention_bias = true;
        cfg.qk_norm = false;
    } else {
        if (get_bool(text, "attention_bias", tname, false, &cfg.attention_bias))
            goto out;
        cfg.qk_norm = true;
    }
    *out = cfg;
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

int orin_model_config_load(const char *model_dir, orin_model_config *out)
{
    char path[4096];
    size_t len;
    if (snprintf(path, sizeof path, "%s/config.json", model_dir) >= (int)sizeof path)
        return orin_error_set("%s: path too long", model_dir);
    /* A config.json is a few KB; anything huge is not one. */
    char *buf = orin_read_file(path, 16u << 20, &len);
    if (!buf)
        return -1;
    int rc = orin_model_config_parse(buf, len, path, out);
    free(buf);
    return rc;
}
