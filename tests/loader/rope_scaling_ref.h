/* Written by scripts/gen_rope_scaling_refs.py (transformers 5.23.0): do not edit. */
#ifndef ROPE_SCALING_REF_H
#define ROPE_SCALING_REF_H

#include <stdint.h>

typedef struct rope_scaling_ref {
    const char *what;
    const char *config;          /* config.json */
    int half;                    /* head_dim / 2 */
    uint32_t attention_factor;   /* float32 bits of attention_scaling */
    uint32_t inv_freq[64];       /* float32 bits */
} rope_scaling_ref;

static const rope_scaling_ref rope_scaling_refs[] = {
    {
        "qwen3-8b yarn (model card)",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 4096, \"intermediate_size\": 12288, \"num_hidden_layers\": 36, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, \"vocab_size\": 151936, \"max_position_embeddings\": 40960, \"rope_theta\": 1000000.0, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32768}}",
        64, 0x3f91be9cu,
        {0x3f800000u, 0x3f4e4badu, 0x3f263de0u, 0x3f05f6efu, 0x3ed7e89bu, 0x3eadfcffu, 0x3e8c3504u, 0x3e61f835u, 0x3e361887u, 0x3e12bd91u, 0x3dec7fd6u, 0x3dbe94c6u, 0x3d99940du, 0x3d778513u, 0x3d47763fu, 0x3d20bc1du, 0x3d0186e3u, 0x3cd0c1a8u, 0x3ca8398bu, 0x3c879008u, 0x3c5a7bf2u, 0x3c301052u, 0x3c0de12du, 0x3be4aa46u, 0x3bb02377u, 0x3b876388u, 0x3b4fa550u, 0x3b1ed248u, 0x3af241dfu, 0x3ab82bc0u, 0x3a8b8207u, 0x3a527db8u, 0x3a1e0eb2u, 0x39ec1968u, 0x39af3d02u, 0x39811c3eu, 0x393c93beu, 0x39083e38u, 0x38c23e9au, 0x38881d0au, 0x383a7753u, 0x38164324u, 0x37f22ce2u, 0x37c327b5u, 0x379d43a4u, 0x377d75d4u, 0x374c3fbeu, 0x372497abu, 0x3704a2b2u, 0x36d5c441u, 0x36ac431du, 0x368ad0edu, 0x365fba4fu, 0x36344a0eu, 0x361148e3u, 0x35ea2732u, 0x35bcb0c1u, 0x35980e02u, 0x35751070u, 0x35457babu, 0x351f23e4u, 0x35003decu, 0x34ceaf79u, 0x34a68e4cu},
    },
    {
        "qwen2.5-7b yarn, 'type' (model card)",
        "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 3584, \"intermediate_size\": 18944, \"num_hidden_layers\": 28, \"num_attention_heads\": 28, \"num_key_value_heads\": 4, \"vocab_size\": 152064, \"max_position_embeddings\": 32768, \"rope_theta\": 1000000.0, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32768}}",
        64, 0x3f91be9cu,
        {0x3f800000u, 0x3f4e4badu, 0x3f263de0u, 0x3f05f6efu, 0x3ed7e89bu, 0x3eadfcffu, 0x3e8c3504u, 0x3e61f835u, 0x3e361887u, 0x3e12bd91u, 0x3dec7fd6u, 0x3dbe94c6u, 0x3d99940du, 0x3d778513u, 0x3d47763fu, 0x3d20bc1du, 0x3d0186e3u, 0x3cd0c1a8u, 0x3ca8398bu, 0x3c879008u, 0x3c5a7bf2u, 0x3c301052u, 0x3c0de12du, 0x3be4aa46u, 0x3bb02377u, 0x3b876388u, 0x3b4fa550u, 0x3b1ed248u, 0x3af241dfu, 0x3ab82bc0u, 0x3a8b8207u, 0x3a527db8u, 0x3a1e0eb2u, 0x39ec1968u, 0x39af3d02u, 0x39811c3eu, 0x393c93beu, 0x39083e38u, 0x38c23e9au, 0x38881d0au, 0x383a7753u, 0x38164324u, 0x37f22ce2u, 0x37c327b5u, 0x379d43a4u, 0x377d75d4u, 0x374c3fbeu, 0x372497abu, 0x3704a2b2u, 0x36d5c441u, 0x36ac431du, 0x368ad0edu, 0x365fba4fu, 0x36344a0eu, 0x361148e3u, 0x35ea2732u, 0x35bcb0c1u, 0x35980e02u, 0x35751070u, 0x35457babu, 0x351f23e4u, 0x35003decu, 0x34ceaf79u, 0x34a68e4cu},
    },
    {
        "qwen3 yarn in rope_parameters with its theta",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 4096, \"intermediate_size\": 12288, \"num_hidden_layers\": 36, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, \"vocab_size\": 151936, \"max_position_embeddings\": 40960, \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32768, \"rope_theta\": 5000000.0}}",
        64, 0x3f91be9cu,
        {0x3f800000u, 0x3f492c28u, 0x3f1e165du, 0x3ef875a7u, 0x3ec33f3au, 0x3e996e52u, 0x3e712429u, 0x3e3d7efcu, 0x3e14e963u, 0x3dea09dbu, 0x3db7ea1au, 0x3d908687u, 0x3d63251bu, 0x3d327f50u, 0x3d0c44bfu, 0x3cdc7456u, 0x3cad3d5eu, 0x3c88230fu, 0x3c55f605u, 0x3c282311u, 0x3c042088u, 0x3bcfa8a9u, 0x3b9b067bu, 0x3b66d2d5u, 0x3b2b4f9au, 0x3afd679fu, 0x3abaafeeu, 0x3a88ec94u, 0x3a47d3aeu, 0x3a10f362u, 0x39d0d42cu, 0x39952f76u, 0x39530598u, 0x391366ecu, 0x38cab529u, 0x38888999u, 0x3832d34fu, 0x380c86c1u, 0x37dcdc14u, 0x37ad8ee4u, 0x37886320u, 0x37565ab5u, 0x37287230u, 0x37045eb6u, 0x36d00a62u, 0x36a37c09u, 0x36807896u, 0x3649e9abu, 0x361eab4bu, 0x35f95fb6u, 0x35c3f72au, 0x3599fedcu, 0x35720755u, 0x353e3180u, 0x351575abu, 0x34eae655u, 0x34b8975du, 0x34910eaeu, 0x3463fb18u, 0x34332777u, 0x340cc8e3u, 0x33dd4405u, 0x33ade091u, 0x3388a34fu},
    },
    {
        "yarn without original: max_position_embeddings",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 4096, \"intermediate_size\": 12288, \"num_hidden_layers\": 36, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, \"vocab_size\": 151936, \"max_position_embeddings\": 40960, \"rope_theta\": 1000000.0, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 2.0}}",
        64, 0x3f88df4eu,
        {0x3f800000u, 0x3f4e4badu, 0x3f263de0u, 0x3f05f6efu, 0x3ed7e89bu, 0x3eadfcffu, 0x3e8c3504u, 0x3e61f835u, 0x3e361887u, 0x3e12bd91u, 0x3dec7fd6u, 0x3dbe94c6u, 0x3d99940du, 0x3d778513u, 0x3d47763fu, 0x3d20bc1du, 0x3d0186e3u, 0x3cd0c1a8u, 0x3ca8398bu, 0x3c879008u, 0x3c5a7bf2u, 0x3c301052u, 0x3c0de12du, 0x3be4aa46u, 0x3bb8449cu, 0x3b901fa2u, 0x3b613e2cu, 0x3b2fd686u, 0x3b092075u, 0x3ad5a363u, 0x3aa638e2u, 0x3a812a3cu, 0x3a48768cu, 0x3a1b5416u, 0x39f053abu, 0x39b99899u, 0x398f0efau, 0x395c15beu, 0x3928e886u, 0x39014ecau, 0x38c56f48u, 0x38964324u, 0x38722ce2u, 0x384327b5u, 0x381d43a4u, 0x37fd75d4u, 0x37cc3fbeu, 0x37a497abu, 0x3784a2b2u, 0x3755c441u, 0x372c431du, 0x370ad0edu, 0x36dfba4fu, 0x36b44a0eu, 0x369148e3u, 0x366a2732u, 0x363cb0c1u, 0x36180e02u, 0x35f51070u, 0x35c57babu, 0x359f23e4u, 0x35803decu, 0x354eaf79u, 0x35268e4cu},
    },
    {
        "yarn factor null: max / original",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 4096, \"intermediate_size\": 12288, \"num_hidden_layers\": 36, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, \"vocab_size\": 151936, \"max_position_embeddings\": 131072, \"rope_theta\": 1000000.0, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": null, \"original_max_position_embeddings\": 32768}}",
        64, 0x3f91be9cu,
        {0x3f800000u, 0x3f4e4badu, 0x3f263de0u, 0x3f05f6efu, 0x3ed7e89bu, 0x3eadfcffu, 0x3e8c3504u, 0x3e61f835u, 0x3e361887u, 0x3e12bd91u, 0x3dec7fd6u, 0x3dbe94c6u, 0x3d99940du, 0x3d778513u, 0x3d47763fu, 0x3d20bc1du, 0x3d0186e3u, 0x3cd0c1a8u, 0x3ca8398bu, 0x3c879008u, 0x3c5a7bf2u, 0x3c301052u, 0x3c0de12du, 0x3be4aa46u, 0x3bb02377u, 0x3b876388u, 0x3b4fa550u, 0x3b1ed248u, 0x3af241dfu, 0x3ab82bc0u, 0x3a8b8207u, 0x3a527db8u, 0x3a1e0eb2u, 0x39ec1968u, 0x39af3d02u, 0x39811c3eu, 0x393c93beu, 0x39083e38u, 0x38c23e9au, 0x38881d0au, 0x383a7753u, 0x38164324u, 0x37f22ce2u, 0x37c327b5u, 0x379d43a4u, 0x377d75d4u, 0x374c3fbeu, 0x372497abu, 0x3704a2b2u, 0x36d5c441u, 0x36ac431du, 0x368ad0edu, 0x365fba4fu, 0x36344a0eu, 0x361148e3u, 0x35ea2732u, 0x35bcb0c1u, 0x35980e02u, 0x35751070u, 0x35457babu, 0x351f23e4u, 0x35003decu, 0x34ceaf79u, 0x34a68e4cu},
    },
    {
        "yarn betas, attention_factor, truncate false",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 4096, \"intermediate_size\": 12288, \"num_hidden_layers\": 36, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, \"vocab_size\": 151936, \"max_position_embeddings\": 40960, \"rope_theta\": 1000000.0, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32768, \"beta_fast\": 16, \"beta_slow\": 2, \"attention_factor\": 1.25, \"truncate\": false}}",
        64, 0x3fa00000u,
        {0x3f800000u, 0x3f4e4badu, 0x3f263de0u, 0x3f05f6efu, 0x3ed7e89bu, 0x3eadfcffu, 0x3e8c3504u, 0x3e61f835u, 0x3e361887u, 0x3e12bd91u, 0x3dec7fd6u, 0x3dbe94c6u, 0x3d99940du, 0x3d778513u, 0x3d47763fu, 0x3d20bc1du, 0x3d0186e3u, 0x3cd0c1a8u, 0x3ca8398bu, 0x3c879008u, 0x3c5a7bf2u, 0x3c301052u, 0x3c0de12du, 0x3be4aa46u, 0x3bb8449cu, 0x3b947daeu, 0x3b6f520eu, 0x3b3df4a6u, 0x3b0cf971u, 0x3acfb47au, 0x3a97a99eu, 0x3a5b1ad2u, 0x3a1c2768u, 0x39dac6c7u, 0x3995caaau, 0x3946b1e3u, 0x38fb610au, 0x38b229fbu, 0x388f9272u, 0x38676492u, 0x383a7753u, 0x38164324u, 0x37f22ce2u, 0x37c327b5u, 0x379d43a4u, 0x377d75d4u, 0x374c3fbeu, 0x372497abu, 0x3704a2b2u, 0x36d5c441u, 0x36ac431du, 0x368ad0edu, 0x365fba4fu, 0x36344a0eu, 0x361148e3u, 0x35ea2732u, 0x35bcb0c1u, 0x35980e02u, 0x35751070u, 0x35457babu, 0x351f23e4u, 0x35003decu, 0x34ceaf79u, 0x34a68e4cu},
    },
    {
        "yarn mscale and mscale_all_dim",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 4096, \"intermediate_size\": 12288, \"num_hidden_layers\": 36, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, \"vocab_size\": 151936, \"max_position_embeddings\": 40960, \"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 40.0, \"original_max_position_embeddings\": 4096, \"mscale\": 1.0, \"mscale_all_dim\": 0.707}}",
        64, 0x3f8af915u,
        {0x3f800000u, 0x3f5dafd7u, 0x3f3ff911u, 0x3f263de0u, 0x3f0ff59au, 0x3ef953cfu, 0x3ed7e89bu, 0x3ebaf81bu, 0x3ea1e89bu, 0x3e8c3504u, 0x3e72d423u, 0x3e5247edu, 0x3e361887u, 0x3e1db040u, 0x3e088d77u, 0x3dec7fd6u, 0x3dcccccdu, 0x3db15978u, 0x3d99940du, 0x3d84fe4du, 0x3d6655c2u, 0x3d3ffb69u, 0x3d1fc5bau, 0x3d04bf83u, 0x3cdc321bu, 0x3cb644ebu, 0x3c968dc3u, 0x3c7821acu, 0x3c4bf283u, 0x3c272658u, 0x3c088d77u, 0x3bde4f34u, 0x3bb43959u, 0x3b916d35u, 0x3b697066u, 0x3b3a30d2u, 0x3b136a16u, 0x3ae76035u, 0x3ab3a2cdu, 0x3a899bfbu, 0x3a4f3e37u, 0x3a188b9au, 0x39d99312u, 0x399409afu, 0x393a7753u, 0x38c9d762u, 0x380bd471u, 0x37f22ce4u, 0x37d1b717u, 0x37b59b1bu, 0x379d43a3u, 0x37882f69u, 0x376bdcf0u, 0x374c3fbcu, 0x3730df51u, 0x37192a46u, 0x3704a2b3u, 0x36e5b71du, 0x36c6ecddu, 0x36ac431du, 0x36952c42u, 0x36812dabu, 0x365fba4fu, 0x3641bd81u},
    },
    {
        "yarn, original at the top level wins",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 4096, \"intermediate_size\": 12288, \"num_hidden_layers\": 36, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, \"vocab_size\": 151936, \"max_position_embeddings\": 40960, \"rope_theta\": 1000000.0, \"original_max_position_embeddings\": 8192, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32768}}",
        64, 0x3f91be9cu,
        {0x3f800000u, 0x3f4e4badu, 0x3f263de0u, 0x3f05f6efu, 0x3ed7e89bu, 0x3eadfcffu, 0x3e8c3504u, 0x3e61f835u, 0x3e361887u, 0x3e12bd91u, 0x3dec7fd6u, 0x3dbe94c6u, 0x3d99940du, 0x3d778513u, 0x3d47763fu, 0x3d20bc1du, 0x3d0186e3u, 0x3cd0c1a8u, 0x3ca0cd98u, 0x3c7733d3u, 0x3c3d9130u, 0x3c10fe62u, 0x3bdd2a4du, 0x3ba822d9u, 0x3b7eb931u, 0x3b402a2du, 0x3b104bd3u, 0x3ad78b18u, 0x3a9ffb33u, 0x3a6bbd1eu, 0x3a2c28a1u, 0x39f8c320u, 0x39b1552cu, 0x3978868au, 0x392a3b44u, 0x39092e02u, 0x38dd1725u, 0x38b229fbu, 0x388f9272u, 0x38676492u, 0x383a7753u, 0x38164324u, 0x37f22ce2u, 0x37c327b5u, 0x379d43a4u, 0x377d75d4u, 0x374c3fbeu, 0x372497abu, 0x3704a2b2u, 0x36d5c441u, 0x36ac431du, 0x368ad0edu, 0x365fba4fu, 0x36344a0eu, 0x361148e3u, 0x35ea2732u, 0x35bcb0c1u, 0x35980e02u, 0x35751070u, 0x35457babu, 0x351f23e4u, 0x35003decu, 0x34ceaf79u, 0x34a68e4cu},
    },
    {
        "yarn, a ramp below zero (original 16 positions)",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 4096, \"intermediate_size\": 12288, \"num_hidden_layers\": 36, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, \"vocab_size\": 151936, \"max_position_embeddings\": 40960, \"rope_theta\": 1000000.0, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 16}}",
        64, 0x3f91be9cu,
        {0x3f800000u, 0x3f2f59ecu, 0x3ee8bd07u, 0x3e935c6du, 0x3e2cba16u, 0x3dadfcffu, 0x3d8c3504u, 0x3d61f835u, 0x3d361887u, 0x3d12bd91u, 0x3cec7fd6u, 0x3cbe94c6u, 0x3c99940du, 0x3c778513u, 0x3c47763fu, 0x3c20bc1du, 0x3c0186e3u, 0x3bd0c1a8u, 0x3ba8398bu, 0x3b879008u, 0x3b5a7bf2u, 0x3b301052u, 0x3b0de12du, 0x3ae4aa46u, 0x3ab8449cu, 0x3a947daeu, 0x3a6f520eu, 0x3a40dac5u, 0x3a1b690du, 0x39fa78f0u, 0x39c9d75cu, 0x39a2a6f7u, 0x3983126fu, 0x39533f28u, 0x392a3b44u, 0x39092e02u, 0x38dd1725u, 0x38b229fbu, 0x388f9272u, 0x38676492u, 0x383a7753u, 0x38164324u, 0x37f22ce2u, 0x37c327b5u, 0x379d43a4u, 0x377d75d4u, 0x374c3fbeu, 0x372497abu, 0x3704a2b2u, 0x36d5c441u, 0x36ac431du, 0x368ad0edu, 0x365fba4fu, 0x36344a0eu, 0x361148e3u, 0x35ea2732u, 0x35bcb0c1u, 0x35980e02u, 0x35751070u, 0x35457babu, 0x351f23e4u, 0x35003decu, 0x34ceaf79u, 0x34a68e4cu},
    },
    {
        "yarn factor below 1",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 4096, \"intermediate_size\": 12288, \"num_hidden_layers\": 36, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, \"vocab_size\": 151936, \"max_position_embeddings\": 40960, \"rope_theta\": 1000000.0, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 0.5, \"original_max_position_embeddings\": 32768}}",
        64, 0x3f800000u,
        {0x3f800000u, 0x3f4e4badu, 0x3f263de0u, 0x3f05f6efu, 0x3ed7e89bu, 0x3eadfcffu, 0x3e8c3504u, 0x3e61f835u, 0x3e361887u, 0x3e12bd91u, 0x3dec7fd6u, 0x3dbe94c6u, 0x3d99940du, 0x3d778513u, 0x3d47763fu, 0x3d20bc1du, 0x3d0186e3u, 0x3cd0c1a8u, 0x3ca8398bu, 0x3c879008u, 0x3c5a7bf2u, 0x3c301052u, 0x3c0de12du, 0x3be4aa46u, 0x3bc31b78u, 0x3ba5f5e0u, 0x3b8cc6dbu, 0x3b6e3b6cu, 0x3b491e8au, 0x3b296feeu, 0x3b0e79e7u, 0x3aef31c6u, 0x3ac8768cu, 0x3aa7c136u, 0x3a8c30cfu, 0x3a6a0330u, 0x3a43146cu, 0x3a227192u, 0x3a07206bu, 0x39e09652u, 0x39ba7753u, 0x39964324u, 0x39722ce2u, 0x394327b5u, 0x391d43a4u, 0x38fd75d4u, 0x38cc3fbeu, 0x38a497abu, 0x3884a2b2u, 0x3855c441u, 0x382c431du, 0x380ad0edu, 0x37dfba4fu, 0x37b44a0eu, 0x379148e3u, 0x376a2732u, 0x373cb0c1u, 0x37180e02u, 0x36f51070u, 0x36c57babu, 0x369f23e4u, 0x36803decu, 0x364eaf79u, 0x36268e4cu},
    },
    {
        "qwen2.5 linear",
        "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 3584, \"intermediate_size\": 18944, \"num_hidden_layers\": 28, \"num_attention_heads\": 28, \"num_key_value_heads\": 4, \"vocab_size\": 152064, \"max_position_embeddings\": 32768, \"rope_theta\": 1000000.0, \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.5}}",
        64, 0x3f800000u,
        {0x3ecccccdu, 0x3ea50957u, 0x3e84fe4du, 0x3e5657e5u, 0x3e2cba16u, 0x3e0b30ccu, 0x3de054d3u, 0x3db4c691u, 0x3d91ad39u, 0x3d6ac8e8u, 0x3d3d3312u, 0x3d187705u, 0x3cf5b9aeu, 0x3cc6040fu, 0x3c9f91ccu, 0x3c80967eu, 0x3c4f3e38u, 0x3c270153u, 0x3c06946fu, 0x3bd8e673u, 0x3baec98eu, 0x3b8cd9dbu, 0x3b6301e2u, 0x3b36ee9eu, 0x3b136a16u, 0x3aed95e3u, 0x3abf74d8u, 0x3a9a489eu, 0x3a78a815u, 0x3a4860c0u, 0x3a217916u, 0x3a021f2cu, 0x39d1b718u, 0x39a8ff53u, 0x39882f6au, 0x395b7cd0u, 0x3930df51u, 0x390e87fcu, 0x38e5b71du, 0x38b91d42u, 0x38952c42u, 0x38706b6du, 0x3841bd82u, 0x381c1fc4u, 0x37fb9f6du, 0x37cac4aau, 0x37a36632u, 0x3783ac89u, 0x37543783u, 0x372b0367u, 0x3709cf4au, 0x36de1b15u, 0x36b2fb72u, 0x36903b3eu, 0x3668749eu, 0x363b528eu, 0x3616f3ceu, 0x35f3499du, 0x35c40d26u, 0x359dfc89u, 0x357e9fd3u, 0x354d2fe0u, 0x3525592eu, 0x35053ea3u},
    },
    {
        "qwen3 linear, head_dim 64",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 4096, \"intermediate_size\": 12288, \"num_hidden_layers\": 36, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 64, \"vocab_size\": 151936, \"max_position_embeddings\": 40960, \"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 3.0}}",
        32, 0x3f800000u,
        {0x3eaaaaabu, 0x3e7ff6c1u, 0x3e3ff223u, 0x3e0ff067u, 0x3dd7e0cfu, 0x3da1e2c2u, 0x3d72cb5fu, 0x3d3611f4u, 0x3d088889u, 0x3cccc567u, 0x3c998e81u, 0x3c664d71u, 0x3c2cb3d9u, 0x3c018235u, 0x3bc23c4cu, 0x3b91a7f7u, 0x3b5a740du, 0x3b23d120u, 0x3af5b0d0u, 0x3ab83df4u, 0x3a8a297bu, 0x3a4f36bcu, 0x3a1b6370u, 0x39e90cbdu, 0x39aec33fu, 0x39830db3u, 0x39448d73u, 0x391364c3u, 0x38dd0f2bu, 0x38a5c563u, 0x38789f19u, 0x383a7098u},
    },
};

#endif
