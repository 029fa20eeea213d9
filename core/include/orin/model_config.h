/* A Hugging Face model's config.json, for the architectures orin runs. */
#ifndef ORIN_MODEL_CONFIG_H
#define ORIN_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "orin/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum orin_arch { ORIN_ARCH_QWEN2 = 0, ORIN_ARCH_QWEN3 } orin_arch;

#define ORIN_MAX_EOS 8

/* config.json's quantization_config: how the folder's linear layers are
 * stored. orin runs AWQ (4 bits, zero point, GEMM layout; see orin_qweight in
 * orin/ops.h); any other method or variant is an error naming the key. */
typedef enum orin_quant_method { ORIN_QUANT_NONE = 0, ORIN_QUANT_AWQ } orin_quant_method;

#define ORIN_QUANT_MAX_SKIP 32
#define ORIN_QUANT_SKIP_LEN 128

typedef struct orin_quant_config {
    orin_quant_method method;   /* NONE: no quantization_config (or null) */
    int32_t bits;               /* 4 */
    int32_t group_size;         /* input values per scale and zero; 0 = the whole
                                   input width (group_size -1 in the file) */
    int32_t n_skip;
    /* modules_to_not_convert: a linear layer stays float when one of these is
     * a substring of its name ("model.layers.3.mlp.down_proj"), as transformers
     * decides it. lm_head and the embeddings are never quantized. */
    char skip[ORIN_QUANT_MAX_SKIP][ORIN_QUANT_SKIP_LEN];
} orin_quant_config;

/* The multimodal part of a Qwen3-VL config.json (model_type qwen3_vl). Its
 * language model is a Qwen3 whose keys live in text_config; those fill the
 * ordinary fields of orin_model_config. Absent keys take Qwen3VLConfig's
 * defaults (the published Qwen3-VL ids, mrope_section [24, 20, 20],
 * spatial_merge_size 2). */
typedef struct orin_vl_config {
    bool is_vl;                     /* false: a text-only Qwen2/Qwen3; the rest is zero */
    int32_t image_token_id;         /* <|image_pad|> */
    int32_t video_token_id;         /* <|video_pad|> */
    int32_t vision_start_token_id;  /* <|vision_start|> */
    int32_t vision_end_token_id;    /* <|vision_end|> */
    /* How many of the head_dim/2 rotary frequencies follow the t, h and w
     * position rows (sums to head_dim/2; see orin/vl_prompt.h for the rule). */
    int32_t mrope_section[3];
    bool mrope_interleaved;         /* always true: Qwen3-VL interleaves */
    int32_t spatial_merge_size;     /* vision_config: patches merged per side into one token */
} orin_vl_config;

/* RoPE's kind: config.json's rope_scaling (or rope_parameters) rope_type. */
typedef enum orin_rope_type {
    ORIN_ROPE_DEFAULT = 0, /* theta^(-2j/hd) ("default", Qwen3-VL's "mrope") */
    ORIN_ROPE_LINEAR,      /* the default's frequencies divided by factor */
    ORIN_ROPE_YARN,        /* YaRN, static (as transformers and vLLM apply it) */
} orin_rope_type;

/* The scaling's keys, as transformers 5.23 reads them (modeling_rope_utils:
 * _compute_linear_scaling_rope_parameters, _compute_yarn_parameters), absent
 * ones at their defaults. orin_rope_scaling_inv_freq (orin/rope.h) turns them
 * into the frequencies the rope ops take. */
typedef struct orin_rope_config {
    orin_rope_type type;
    double factor;                /* linear, yarn; yarn's null: max_pos / original */
    int32_t original_max_pos;     /* yarn: original_max_position_embeddings (the
                                     top-level key first, then the dict's, then
                                     max_position_embeddings) */
    double attention_factor;      /* yarn: the key, else from factor (mscale,
                                     mscale_all_dim); others 1 */
    double beta_fast, beta_slow;  /* yarn: 32 and 1 when absent, null or 0 */
    bool truncate;                /* yarn: true when absent */
} orin_rope_config;

typedef struct orin_model_config {
    orin_arch arch;              /* Qwen3-VL: QWEN3 (its language model) */
    char architecture[64];       /* "Qwen3ForCausalLM", "Qwen3VLForConditionalGeneration" */
    int32_t hidden_size;
    int32_t intermediate_size;
    int32_t num_hidden_layers;
    int32_t num_attention_heads;
    int32_t num_key_value_heads; /* absent = 32 (the transformers default), null = heads */
    int32_t head_dim;            /* absent: Qwen2 hidden/heads, Qwen3 128; null = hidden/heads */
    int32_t vocab_size;
    int32_t max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;           /* rope_theta or rope_parameters.rope_theta */
    orin_rope_config rope;       /* rope_scaling's type and keys (linear, yarn) */
    bool tie_word_embeddings;
    bool attention_bias;         /* q/k/v projections have biases (Qwen2: true) */
    bool qk_norm;                /* per-head RMSNorm on q and k (Qwen3) */
    orin_dtype torch_dtype;      /* the dtype the weights were saved in (informative) */
    int32_t bos_token_id;        /* -1 when absent */
    int32_t eos_token_ids[ORIN_MAX_EOS];
    int32_t n_eos;
    orin_quant_config quant;
    orin_vl_config vl;
} orin_model_config;

/* Parses config.json text; `name` labels error messages (usually the path).
 * A Qwen3-VL config's text model keys are read from text_config (errors name
 * "text_config" then the key), its tie_word_embeddings, dtype and
 * quantization_config from the top level, as transformers reads them.
 * Unsupported architectures, rope types (rope_scaling / rope_parameters.rope_type
 * other than default, linear and yarn; Qwen3-VL's mrope means default),
 * quantization methods other than AWQ int4 GEMM with a zero point, and missing or
 * out-of-range fields are errors naming the field.
 * Returns 0 or -1 with orin_error_set(). */
int orin_model_config_parse(const char *json, size_t len, const char *name, orin_model_config *out);
/* Reads and parses model_dir/config.json. */
int orin_model_config_load(const char *model_dir, orin_model_config *out);


/* Whether the linear layer `module` ("model.layers.0.self_attn.q_proj") is
 * stored quantized in the folder: AWQ and not in modules_to_not_convert. */
bool orin_quant_covers(const orin_quant_config *q, const char *module);

#ifdef __cplusplus
}
#endif
#endif
