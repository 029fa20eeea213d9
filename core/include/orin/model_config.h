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
} orin_model_config;

/* Parses config.json text; `name` labels error messages (usually the path).
 * Unsupported architectures, rope types (rope_scaling / rope_parameters.rope_type
 * other than default) and missing or out-of-range fields are errors naming the
 * field. Returns 0 or -1 with orin_error_set(). */
int orin_model_config_parse(const char *json, size_t len, const char *name, orin_model_config *out);
/* Reads and parses model_dir/config.json. */
int orin_model_config_load(const char *model_dir, orin_model_config *out);

#ifdef __cplusplus
}
#endif
#endif
