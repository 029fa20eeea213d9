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

typedef struct orin_model_config {
    orin_arch arch;
    char architecture[64];       /* "Qwen3ForCausalLM" */
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
    bool tie_word_embeddings;
    bool attention_bias;         /* q/k/v projections have biases (Qwen2: true) */
    bool qk_norm;                /* per-head RMSNorm on q and k (Qwen3) */
    orin_dtype torch_dtype;      /* the dtype the weights were saved in (informative) */
    int32_t bos_token_id;        /* -1 when absent */
    int32_t eos_token_ids[ORIN_MAX_EOS];
    int32_t n_eos;
    orin_quant_config quant;
} orin_model_config;

/* Parses config.json text; `name` labels error messages (usually the path).
 * Unsupported architectures, rope types (rope_scaling / rope_parameters.rope_type
 * other than default), quantization methods other than AWQ int4 GEMM with a
 * zero point, and missing or out-of-range fields are errors naming the field.
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
