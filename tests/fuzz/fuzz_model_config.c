/* config.json: cJSON plus our field checks. A config that parses must hold
 * what the loader relies on (positive sizes, heads divisible by kv heads, an
 * even head_dim, positive eps and theta, at most ORIN_MAX_EOS eos ids, a
 * quantization_config orin runs). */
#include "fuzz_util.h"

#include "orin/error.h"
#include "orin/model_config.h"
#include "orin/rope.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    orin_model_config c;
    if (orin_model_config_parse((const char *)data, size, "config.json", &c) != 0) {
        fuzz_check_error(orin_error());
        return 0;
    }
    FUZZ_ASSERT(c.arch == ORIN_ARCH_QWEN2 || c.arch == ORIN_ARCH_QWEN3, "arch %d", c.arch);
    FUZZ_ASSERT(c.hidden_size > 0 && c.intermediate_size > 0 && c.num_hidden_layers > 0 &&
                    c.num_attention_heads > 0 && c.num_key_value_heads > 0 && c.vocab_size > 0 &&
                    c.max_position_embeddings > 0 && c.head_dim > 0,
                "a size is not positive");
    FUZZ_ASSERT(c.num_attention_heads % c.num_key_value_heads == 0, "heads %% kv heads");
    FUZZ_ASSERT(c.head_dim % 2 == 0, "odd head_dim %d", c.head_dim);
    FUZZ_ASSERT(c.rms_norm_eps > 0 && isfinite(c.rms_norm_eps), "rms_norm_eps %g", c.rms_norm_eps);
    FUZZ_ASSERT(c.rope_theta > 0 && isfinite(c.rope_theta), "rope_theta %g", c.rope_theta);
    FUZZ_ASSERT(c.n_eos >= 0 && c.n_eos <= ORIN_MAX_EOS, "n_eos %d", c.n_eos);
    for (int i = 0; i < c.n_eos; i++)
        FUZZ_ASSERT(c.eos_token_ids[i] >= 0, "eos id %d", c.eos_token_ids[i]);
    FUZZ_ASSERT(c.bos_token_id >= -1, "bos id %d", c.bos_token_id);
    FUZZ_ASSERT(memchr(c.architecture, '\0', sizeof c.architecture), "architecture unterminated");
    /* Qwen3-VL: ids inside the vocabulary, sections that cover head_dim/2. */
    if (c.vl.is_vl) {
        const int32_t ids[] = {c.vl.image_token_id, c.vl.video_token_id,
                               c.vl.vision_start_token_id, c.vl.vision_end_token_id};
        for (int i = 0; i < 4; i++)
            FUZZ_ASSERT(ids[i] >= 0 && ids[i] < c.vocab_size, "vl token id %d", ids[i]);
        FUZZ_ASSERT(c.vl.mrope_section[0] >= 0 && c.vl.mrope_section[1] >= 0 &&
                        c.vl.mrope_section[2] >= 0 &&
                        (int64_t)c.vl.mrope_section[0] + c.vl.mrope_section[1] +
                                c.vl.mrope_section[2] == c.head_dim / 2,
                    "mrope_section");
        FUZZ_ASSERT(c.vl.spatial_merge_size >= 1 && c.vl.mrope_interleaved, "vl merge / interleave");
    }
    /* RoPE scaling: the frequencies of any config that parses are finite and
     * not negative, or a one-line error (head_dim bounded here only to keep the
     * buffer on the stack) */
    FUZZ_ASSERT(c.rope.type >= ORIN_ROPE_DEFAULT && c.rope.type <= ORIN_ROPE_YARN, "rope type %d",
                c.rope.type);
    if (c.head_dim <= 4096) {
        float inv[2048], factor;
        if (orin_rope_scaling_inv_freq(&c, inv, &factor) != 0) {
            fuzz_check_error(orin_error());
        } else {
            FUZZ_ASSERT(factor > 0 && isfinite(factor), "attention factor %g", factor);
            for (int j = 0; j < c.head_dim / 2; j++)
                FUZZ_ASSERT(inv[j] >= 0 && isfinite(inv[j]), "inv_freq[%d] = %g", j, inv[j]);
        }
    }
    /* quantization_config: AWQ 4-bit or none, a group size >= 0 (0: the whole
     * row), module names terminated and non-empty */
    FUZZ_ASSERT(c.quant.method == ORIN_QUANT_NONE || c.quant.method == ORIN_QUANT_AWQ,
                "quant method %d", c.quant.method);
    if (c.quant.method == ORIN_QUANT_AWQ)
        FUZZ_ASSERT(c.quant.bits == 4 && c.quant.group_size >= 0, "bits %d, group %d",
                    c.quant.bits, c.quant.group_size);
    FUZZ_ASSERT(c.quant.n_skip >= 0 && c.quant.n_skip <= ORIN_QUANT_MAX_SKIP, "n_skip %d",
                c.quant.n_skip);
    for (int i = 0; i < c.quant.n_skip; i++)
        FUZZ_ASSERT(c.quant.skip[i][0] && memchr(c.quant.skip[i], '\0', ORIN_QUANT_SKIP_LEN),
                    "skip[%d] empty or unterminated", i);
    return 0;
}
