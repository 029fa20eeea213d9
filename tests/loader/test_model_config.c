/* config.json parsing: real Qwen2 / Qwen3 configs (as published, and as written
 * by transformers 5 into tests/data/loader by scripts/gen_loader_fixtures.py),
 * the transformers defaults for absent fields, and one error per bad field. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orin/error.h"
#include "orin/model_config.h"
#include "orin/rope.h"
#include "rope_scaling_ref.h"
#include "test_util.h"

/* As published on the Hugging Face hub (Qwen2.5-0.5B-Instruct, Qwen3-0.6B). */
static const char *qwen25_config =
    "{\n"
    "  \"architectures\": [\"Qwen2ForCausalLM\"],\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 151643,\n"
    "  \"eos_token_id\": 151645,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 896,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 4864,\n"
    "  \"max_position_embeddings\": 32768,\n"
    "  \"max_window_layers\": 21,\n"
    "  \"model_type\": \"qwen2\",\n"
    "  \"num_attention_heads\": 14,\n"
    "  \"num_hidden_layers\": 24,\n"
    "  \"num_key_value_heads\": 2,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 1000000.0,\n"
    "  \"sliding_window\": 32768,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.43.1\",\n"
    "  \"use_cache\": true,\n"
    "  \"use_sliding_window\": false,\n"
    "  \"vocab_size\": 151936\n"
    "}\n";

static const char *qwen3_config =
    "{\n"
    "  \"architectures\": [\"Qwen3ForCausalLM\"],\n"
    "  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 151643,\n"
    "  \"eos_token_id\": 151645,\n"
    "  \"head_dim\": 128,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 1024,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 3072,\n"
    "  \"max_position_embeddings\": 40960,\n"
    "  \"max_window_layers\": 28,\n"
    "  \"model_type\": \"qwen3\",\n"
    "  \"num_attention_heads\": 16,\n"
    "  \"num_hidden_layers\": 28,\n"
    "  \"num_key_value_heads\": 8,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 1000000,\n"
    "  \"sliding_window\": null,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.51.0\",\n"
    "  \"use_cache\": true,\n"
    "  \"use_sliding_window\": false,\n"
    "  \"vocab_size\": 151936\n"
    "}\n";

#define LABEL "/models/x/config.json"

/* `base` with `edits` applied: {"key": value} replaces or adds, {"key": "<delete>"} removes. */
static char *edit(const char *base, const char *edits)
{
    cJSON *root = cJSON_Parse(base), *e = cJSON_Parse(edits), *item;
    if (!root || !e) {
        fprintf(stderr, "bad test JSON: %s\n", edits);
        exit(2);
    }
    cJSON_ArrayForEach(item, e) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, item->string);
        if (cJSON_IsString(item) && strcmp(item->valuestring, "<delete>") == 0)
            continue;
        cJSON_AddItemToObject(root, item->string, cJSON_Duplicate(item, 1));
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    cJSON_Delete(e);
    return s;
}

static int parse_edit(const char *base, const char *edits, orin_model_config *cfg)
{
    char *s = edit(base, edits);
    orin_error_clear();
    int rc = orin_model_config_parse(s, strlen(s), LABEL, cfg);
    free(s);
    return rc;
}

/* The edit must fail with an error naming the file and every given fragment. */
static void expect_error(const char *base, const char *edits, const char *frag1, const char *frag2)
{
    orin_model_config cfg;
    int rc = parse_edit(base, edits, &cfg);
    const char *msg = orin_error();
    if (getenv("ORIN_TEST_VERBOSE")) /* to read the messages */
        printf("error: %s\n", msg);
    CHECK(rc == -1, "%s: expected an error", edits);
    CHECK(strstr(msg, LABEL) != NULL, "%s: error lacks the file: %s", edits, msg);
    CHECK(strstr(msg, frag1) != NULL, "%s: error lacks '%s': %s", edits, frag1, msg);
    if (frag2)
        CHECK(strstr(msg, frag2) != NULL, "%s: error lacks '%s': %s", edits, frag2, msg);
}

static void test_qwen25(void)
{
    orin_model_config c;
    int rc = orin_model_config_parse(qwen25_config, strlen(qwen25_config), LABEL, &c);
    CHECK(rc == 0, "%s", orin_error());
    CHECK(c.arch == ORIN_ARCH_QWEN2);
    CHECK(strcmp(c.architecture, "Qwen2ForCausalLM") == 0, "%s", c.architecture);
    CHECK(c.hidden_size == 896 && c.intermediate_size == 4864 && c.num_hidden_layers == 24);
    CHECK(c.num_attention_heads == 14 && c.num_key_value_heads == 2);
    CHECK(c.head_dim == 64, "%d", c.head_dim);
    CHECK(c.vocab_size == 151936 && c.max_position_embeddings == 32768);
    CHECK(c.rms_norm_eps == 1e-6 && c.rope_theta == 1e6, "%g %g", c.rms_norm_eps, c.rope_theta);
    CHECK(c.tie_word_embeddings && c.attention_bias && !c.qk_norm);
    CHECK(c.torch_dtype == ORIN_BF16);
    CHECK(c.bos_token_id == 151643 && c.n_eos == 1 && c.eos_token_ids[0] == 151645);
}

static void test_qwen3(void)
{
    orin_model_config c;
    int rc = orin_model_config_parse(qwen3_config, strlen(qwen3_config), LABEL, &c);
    CHECK(rc == 0, "%s", orin_error());
    CHECK(c.arch == ORIN_ARCH_QWEN3);
    CHECK(strcmp(c.architecture, "Qwen3ForCausalLM") == 0);
    CHECK(c.hidden_size == 1024 && c.intermediate_size == 3072 && c.num_hidden_layers == 28);
    CHECK(c.num_attention_heads == 16 && c.num_key_value_heads == 8);
    CHECK(c.head_dim == 128, "head_dim is decoupled from hidden/heads = 64: %d", c.head_dim);
    CHECK(c.vocab_size == 151936 && c.max_position_embeddings == 40960);
    CHECK(c.rope_theta == 1e6 && c.rms_norm_eps == 1e-6);
    CHECK(c.tie_word_embeddings && !c.attention_bias && c.qk_norm);
    CHECK(c.torch_dtype == ORIN_BF16);
    CHECK(c.bos_token_id == 151643 && c.n_eos == 1 && c.eos_token_ids[0] == 151645);
}

/* Configs written by transformers 5: "dtype", rope_parameters, layer_types, no
 * "architectures" (a bare config), bos null, eos a list. */
static void test_transformers_written(void)
{
    char path[1024];
    size_t len;
    orin_model_config c;

    snprintf(path, sizeof path, "%s/loader/qwen2_tf_config.json", ORIN_TEST_DATA);
    char *text = test_read_file(path, &len);
    CHECK(text != NULL, "%s missing", path);
    if (text) {
        CHECK(orin_model_config_parse(text, len, path, &c) == 0, "%s", orin_error());
        CHECK(c.arch == ORIN_ARCH_QWEN2 && strcmp(c.architecture, "Qwen2ForCausalLM") == 0);
        CHECK(c.hidden_size == 64 && c.intermediate_size == 160 && c.num_hidden_layers == 3);
        CHECK(c.num_attention_heads == 8 && c.num_key_value_heads == 2 && c.head_dim == 8);
        CHECK(c.vocab_size == 320 && c.max_position_embeddings == 2048);
        CHECK(c.rms_norm_eps == 1e-5 && c.rope_theta == 500000.0, "%g", c.rope_theta);
        CHECK(c.tie_word_embeddings && c.attention_bias && !c.qk_norm);
        CHECK(c.torch_dtype == ORIN_BF16);
        CHECK(c.bos_token_id == -1 && c.n_eos == 2 && c.eos_token_ids[0] == 5 &&
              c.eos_token_ids[1] == 7);
        free(text);
    }

    snprintf(path, sizeof path, "%s/loader/qwen3_tf_config.json", ORIN_TEST_DATA);
    text = test_read_file(path, &len);
    CHECK(text != NULL, "%s missing", path);
    if (text) {
        CHECK(orin_model_config_parse(text, len, path, &c) == 0, "%s", orin_error());
        CHECK(c.arch == ORIN_ARCH_QWEN3 && strcmp(c.architecture, "Qwen3ForCausalLM") == 0);
        CHECK(c.num_attention_heads == 8 && c.num_key_value_heads == 2 && c.head_dim == 16);
        CHECK(c.rope_theta == 1e6 && !c.tie_word_embeddings && c.attention_bias && c.qk_norm);
        CHECK(c.torch_dtype == ORIN_F16);
        CHECK(c.bos_token_id == -1 && c.n_eos == 2);
        free(text);
    }
}

static void test_load_from_dir(void)
{
    char *dir = test_tmpdir("loader-cfg");
    char path[512];
    orin_model_config c;
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(test_write_file(path, qwen3_config, strlen(qwen3_config)) == 0);
    CHECK(orin_model_config_load(dir, &c) == 0, "%s", orin_error());
    CHECK(c.arch == ORIN_ARCH_QWEN3 && c.head_dim == 128);
    remove(path);

    CHECK(orin_model_config_load(dir, &c) == -1);
    CHECK(strstr(orin_error(), path) != NULL, "missing file not named: %s", orin_error());
    remove(dir);
    free(dir);
}

static void test_rope(void)
{
    orin_model_config c;
    /* New transformers: theta inside rope_parameters. */
    CHECK(parse_edit(qwen25_config, "{\"rope_theta\": \"<delete>\", \"rope_parameters\": "
                     "{\"rope_type\": \"default\", \"rope_theta\": 250000}}", &c) == 0,
          "%s", orin_error());
    CHECK(c.rope_theta == 250000.0, "%g", c.rope_theta);
    /* Both: rope_parameters wins, as in transformers' convert_rope_params_to_dict. */
    CHECK(parse_edit(qwen25_config, "{\"rope_theta\": 7, \"rope_parameters\": "
                     "{\"rope_theta\": 123456}}", &c) == 0, "%s", orin_error());
    CHECK(c.rope_theta == 123456.0, "%g", c.rope_theta);
    /* rope_parameters without a theta: the top-level key. */
    CHECK(parse_edit(qwen25_config, "{\"rope_theta\": 4321, \"rope_parameters\": "
                     "{\"rope_type\": \"default\"}}", &c) == 0, "%s", orin_error());
    CHECK(c.rope_theta == 4321.0, "%g", c.rope_theta);
    /* Neither: transformers' default_theta. */
    CHECK(parse_edit(qwen25_config, "{\"rope_theta\": \"<delete>\"}", &c) == 0);
    CHECK(c.rope_theta == 10000.0, "%g", c.rope_theta);
    /* Nested per layer type. */
    CHECK(parse_edit(qwen25_config, "{\"rope_parameters\": {\"full_attention\": "
                     "{\"rope_type\": \"default\", \"rope_theta\": 99}}}", &c) == 0,
          "%s", orin_error());
    CHECK(c.rope_theta == 99.0, "%g", c.rope_theta);
    /* An empty rope_scaling is no scaling. */
    CHECK(parse_edit(qwen25_config, "{\"rope_scaling\": {}}", &c) == 0, "%s", orin_error());
    CHECK(c.rope_theta == 1e6);
    CHECK(parse_edit(qwen25_config, "{\"rope_scaling\": {\"rope_type\": \"default\"}}", &c) == 0,
          "%s", orin_error());

    expect_error(qwen25_config, "{\"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2}}",
                 "unsupported rope type 'dynamic' (default, linear, yarn)", "rope_scaling.rope_type");
    expect_error(qwen3_config, "{\"rope_parameters\": {\"rope_type\": \"longrope\", "
                 "\"rope_theta\": 1000000}}", "unsupported rope type 'longrope'",
                 "rope_parameters.rope_type");
    expect_error(qwen3_config, "{\"rope_parameters\": {\"rope_type\": \"default\", "
                 "\"partial_rotary_factor\": 0.5}}", "partial_rotary_factor", "0.5");
    expect_error(qwen3_config, "{\"rope_theta\": -5}", "rope_theta", "-5");
    expect_error(qwen3_config, "{\"rope_theta\": 1e-50}", "rope_theta = 1e-50", "float32");
    expect_error(qwen3_config, "{\"rope_theta\": 1e40}", "rope_theta = 1e+40", "float32");
    expect_error(qwen3_config, "{\"rope_theta\": \"big\"}", "rope_theta", "\"big\"");
    expect_error(qwen3_config, "{\"rope_scaling\": 3}", "rope_scaling", "not an object");
}

/* rope_scaling linear and yarn: every case of tests/loader/rope_scaling_ref.h
 * (scripts/gen_rope_scaling_refs.py: transformers' own rotary module on the same
 * config.json) gives its float32 frequencies within 2 ulps and its factor bit
 * for bit; then the keys' errors. The ulps: theta ** (2j / hd) is torch's
 * float32 pow (a vectorised powf within an ulp, not correctly rounded), ours
 * the double pow rounded to float32 (glibc's powf gives the same), and the two
 * part by an ulp at a pair or two of 64 (Qwen3's theta 1e6: pair 37, 5e6: pair
 * 19); yarn's blend of two values from that power can make it 2. Every other
 * pair is transformers' float exactly. */
static void test_rope_scaling(void)
{
    for (size_t i = 0; i < sizeof rope_scaling_refs / sizeof rope_scaling_refs[0]; i++) {
        const rope_scaling_ref *r = &rope_scaling_refs[i];
        orin_model_config c;
        orin_error_clear();
        int rc = orin_model_config_parse(r->config, strlen(r->config), LABEL, &c);
        CHECK(rc == 0, "%s: %s", r->what, orin_error());
        if (rc != 0)
            continue;
        CHECK(c.head_dim / 2 == r->half, "%s: head_dim %d", r->what, c.head_dim);
        float inv[64], factor;
        CHECK(orin_rope_scaling_inv_freq(&c, inv, &factor) == 0, "%s: %s", r->what, orin_error());
        uint32_t fb;
        memcpy(&fb, &factor, 4);
        CHECK(fb == r->attention_factor, "%s: attention factor %.9g (bits %08x, want %08x)",
              r->what, factor, fb, r->attention_factor);
        int wrong = 0, off = 0;
        for (int j = 0; j < r->half; j++) {
            uint32_t b;
            memcpy(&b, &inv[j], 4);
            int64_t ulps = (int64_t)b - (int64_t)r->inv_freq[j]; /* positive floats */
            off += ulps != 0;
            if ((ulps > 2 || ulps < -2) && wrong++ < 3)
                fprintf(stderr, "  %s: inv_freq[%d] = %.9g (bits %08x, want %08x)\n", r->what, j,
                        inv[j], b, r->inv_freq[j]);
        }
        CHECK(wrong == 0, "%s: %d of %d frequencies more than 2 ulps from transformers'", r->what,
              wrong, r->half);
        CHECK(off <= 2, "%s: %d of %d frequencies not transformers' exactly (2 expected at most)",
              r->what, off, r->half);
    }

    orin_model_config c;
    CHECK(parse_edit(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                     "\"original_max_position_embeddings\": 32768}}", &c) == 0, "%s", orin_error());
    CHECK(c.rope.type == ORIN_ROPE_YARN && c.rope.factor == 4.0 &&
          c.rope.original_max_pos == 32768 && c.rope.beta_fast == 32 && c.rope.beta_slow == 1 &&
          c.rope.truncate && fabs(c.rope.attention_factor - (0.1 * log(4.0) + 1)) < 1e-15);
    /* a plain config: no scaling */
    CHECK(parse_edit(qwen3_config, "{}", &c) == 0 && c.rope.type == ORIN_ROPE_DEFAULT);

    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"yarn\"}}",
                 "missing field 'rope_scaling.factor'", "yarn");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"linear\"}}",
                 "missing field 'rope_scaling.factor'", "linear");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": null}}",
                 "rope_scaling.factor", "must be a positive float32");
    expect_error(qwen25_config, "{\"rope_scaling\": {\"type\": \"yarn\", \"factor\": -2}}",
                 "rope_scaling.factor = -2", "must be a positive float32");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": \"4\"}}",
                 "rope_scaling.factor", "not a number");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
                 "\"attention_factor\": 0}}", "rope_scaling.attention_factor", "must be a positive float32");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
                 "\"beta_fast\": [1]}}", "rope_scaling.beta_fast", "not a number");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
                 "\"truncate\": 1}}", "truncate", "not true or false");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
                 "\"original_max_position_embeddings\": 0}}", "original_max_position_embeddings",
                 "must be positive");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 1e-300}}",
                 "rope_scaling.factor = 1e-300", "positive float32");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 1e39}}",
                 "rope_scaling.factor", "positive float32");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
                 "\"beta_slow\": -1}}", "rope_scaling.beta_slow = -1", "must not be negative");
    expect_error(qwen3_config, "{\"rope_theta\": 1, \"rope_scaling\": {\"rope_type\": \"yarn\", "
                 "\"factor\": 4}}", "rope_theta = 1", "must not be 1 with rope type yarn");
    expect_error(qwen3_config, "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
                 "\"rope_theta\": 1}}", "rope_scaling.rope_theta = 1", "yarn");
    /* linear with theta 1 is plain: every frequency 1 / factor */
    CHECK(parse_edit(qwen3_config, "{\"rope_theta\": 1, \"rope_scaling\": {\"rope_type\": "
                     "\"linear\", \"factor\": 2}}", &c) == 0, "%s", orin_error());
    float inv[64], factor;
    CHECK(orin_rope_scaling_inv_freq(&c, inv, &factor) == 0 && inv[0] == 0.5f && inv[63] == 0.5f);
    /* keys at float32's extremes: frequencies out of its range are an error */
    CHECK(parse_edit(qwen3_config, "{\"rope_theta\": 1e-30, \"rope_scaling\": {\"rope_type\": "
                     "\"yarn\", \"factor\": 1e-30}}", &c) == 0, "%s", orin_error());
    CHECK(orin_rope_scaling_inv_freq(&c, inv, &factor) == -1 &&
              strstr(orin_error(), "out of float32's range"), "%s", orin_error());
}

static void test_head_dim_and_kv_defaults(void)
{
    orin_model_config c;
    /* Qwen2: absent or null = hidden / heads. */
    CHECK(parse_edit(qwen25_config, "{\"head_dim\": null}", &c) == 0 && c.head_dim == 64);
    CHECK(parse_edit(qwen25_config, "{\"head_dim\": 32}", &c) == 0 && c.head_dim == 32);
    /* Qwen3: absent = the Qwen3Config default 128, whatever hidden/heads is. */
    CHECK(parse_edit(qwen3_config, "{\"head_dim\": \"<delete>\", \"hidden_size\": 512}", &c) == 0);
    CHECK(c.head_dim == 128, "%d", c.head_dim);
    CHECK(parse_edit(qwen3_config, "{\"head_dim\": null, \"hidden_size\": 512}", &c) == 0);
    CHECK(c.head_dim == 32, "%d", c.head_dim);
    CHECK(parse_edit(qwen3_config, "{\"head_dim\": 64}", &c) == 0 && c.head_dim == 64);

    /* num_key_value_heads absent: the dataclass default 32; null: = heads. */
    CHECK(parse_edit(qwen25_config, "{\"num_key_value_heads\": \"<delete>\", "
                     "\"num_attention_heads\": 64, \"hidden_size\": 4096}", &c) == 0,
          "%s", orin_error());
    CHECK(c.num_key_value_heads == 32, "%d", c.num_key_value_heads);
    CHECK(parse_edit(qwen25_config, "{\"num_key_value_heads\": null}", &c) == 0);
    CHECK(c.num_key_value_heads == 14, "%d", c.num_key_value_heads);
    expect_error(qwen25_config, "{\"num_key_value_heads\": \"<delete>\"}", "num_key_value_heads",
                 "32");

    /* Optional fields take transformers' defaults. */
    CHECK(parse_edit(qwen25_config, "{\"max_position_embeddings\": \"<delete>\", "
                     "\"rms_norm_eps\": \"<delete>\", \"tie_word_embeddings\": \"<delete>\", "
                     "\"torch_dtype\": \"<delete>\", \"bos_token_id\": \"<delete>\", "
                     "\"eos_token_id\": \"<delete>\"}", &c) == 0, "%s", orin_error());
    CHECK(c.max_position_embeddings == 32768 && c.rms_norm_eps == 1e-6);
    CHECK(!c.tie_word_embeddings && c.torch_dtype == ORIN_F32);
    CHECK(c.bos_token_id == -1 && c.n_eos == 0);
}

static void test_tokens_and_flags(void)
{
    orin_model_config c;
    CHECK(parse_edit(qwen3_config, "{\"eos_token_id\": [151645, 151643], \"bos_token_id\": null}",
                     &c) == 0);
    CHECK(c.n_eos == 2 && c.eos_token_ids[0] == 151645 && c.eos_token_ids[1] == 151643);
    CHECK(c.bos_token_id == -1);
    CHECK(parse_edit(qwen3_config, "{\"eos_token_id\": []}", &c) == 0 && c.n_eos == 0);
    expect_error(qwen3_config, "{\"eos_token_id\": [1,2,3,4,5,6,7,8,9]}", "eos_token_id", "9 ids");
    expect_error(qwen3_config, "{\"eos_token_id\": \"</s>\"}", "eos_token_id", "\"</s>\"");
    expect_error(qwen3_config, "{\"eos_token_id\": [1, -2]}", "eos_token_id", "-2");
    expect_error(qwen3_config, "{\"bos_token_id\": 1.5}", "bos_token_id", "1.5");

    /* Qwen3 bias from the config; Qwen2 always has q/k/v biases (hard-coded in
     * transformers' Qwen2Attention, which ignores attention_bias). */
    CHECK(parse_edit(qwen3_config, "{\"attention_bias\": true}", &c) == 0 && c.attention_bias);
    CHECK(parse_edit(qwen3_config, "{\"attention_bias\": \"<delete>\"}", &c) == 0 &&
          !c.attention_bias);
    CHECK(parse_edit(qwen25_config, "{\"attention_bias\": false}", &c) == 0 && c.attention_bias);
    expect_error(qwen3_config, "{\"attention_bias\": 1}", "attention_bias", "1");
    expect_error(qwen3_config, "{\"tie_word_embeddings\": \"yes\"}", "tie_word_embeddings",
                 "\"yes\"");

    /* dtype: the new key wins; old one read when alone. */
    CHECK(parse_edit(qwen3_config, "{\"dtype\": \"float16\"}", &c) == 0 &&
          c.torch_dtype == ORIN_F16);
    CHECK(parse_edit(qwen3_config, "{\"torch_dtype\": \"float32\"}", &c) == 0 &&
          c.torch_dtype == ORIN_F32);
    expect_error(qwen3_config, "{\"torch_dtype\": \"float64\"}", "torch_dtype", "float64");
}

static void test_architecture(void)
{
    orin_model_config c;
    expect_error(qwen25_config, "{\"architectures\": [\"LlamaForCausalLM\"]}",
                 "unsupported architecture 'LlamaForCausalLM'", "architectures[0]");
    expect_error(qwen25_config, "{\"architectures\": [\"Qwen2MoeForCausalLM\"], "
                 "\"model_type\": \"qwen2_moe\"}", "'Qwen2MoeForCausalLM'", NULL);
    /* No architectures: model_type decides. */
    CHECK(parse_edit(qwen3_config, "{\"architectures\": \"<delete>\"}", &c) == 0 &&
          c.arch == ORIN_ARCH_QWEN3 && strcmp(c.architecture, "Qwen3ForCausalLM") == 0);
    CHECK(parse_edit(qwen3_config, "{\"architectures\": [], \"model_type\": \"qwen2\"}", &c) == 0 &&
          c.arch == ORIN_ARCH_QWEN2);
    expect_error(qwen3_config, "{\"architectures\": null, \"model_type\": \"llama\"}",
                 "unsupported architecture 'llama'", "model_type");
    expect_error(qwen3_config, "{\"architectures\": \"<delete>\", \"model_type\": \"<delete>\"}",
                 "architectures", NULL);
    expect_error(qwen3_config, "{\"architectures\": [7]}", "architectures[0]", "7");
}

static void test_sliding_window(void)
{
    orin_model_config c;
    /* Real configs: a window that is switched off, or covers no layer. */
    CHECK(parse_edit(qwen25_config, "{\"use_sliding_window\": true, \"max_window_layers\": 24}",
                     &c) == 0, "%s", orin_error());
    CHECK(parse_edit(qwen25_config, "{\"use_sliding_window\": true, \"sliding_window\": null, "
                     "\"max_window_layers\": 0}", &c) == 0, "%s", orin_error());
    CHECK(parse_edit(qwen25_config, "{\"use_sliding_window\": true, \"max_window_layers\": 0, "
                     "\"layer_types\": [\"full_attention\", \"full_attention\"]}", &c) == 0,
          "%s", orin_error());
    expect_error(qwen25_config, "{\"use_sliding_window\": true}", "use_sliding_window",
                 "max_window_layers = 21");
    expect_error(qwen3_config, "{\"use_sliding_window\": true, \"sliding_window\": 4096, "
                 "\"max_window_layers\": \"<delete>\", \"num_hidden_layers\": 36}", "use_sliding_window",
                 "layers 28..35");
    expect_error(qwen25_config, "{\"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
                 "layer_types[1]", "sliding_attention");
}

/* quantization_config: AWQ as Qwen publishes it (Qwen3-8B-AWQ's keys), the
 * AwqConfig defaults, modules_to_not_convert, and one error per variant orin
 * does not run. */
static void test_quantization(void)
{
    orin_model_config c;
    CHECK(parse_edit(qwen3_config, "{}", &c) == 0 && c.quant.method == ORIN_QUANT_NONE);
    CHECK(parse_edit(qwen3_config, "{\"quantization_config\": null}", &c) == 0 &&
          c.quant.method == ORIN_QUANT_NONE);
    CHECK(!orin_quant_covers(&c.quant, "model.layers.0.mlp.up_proj"));
    const char *published = "{\"torch_dtype\": \"float16\", \"quantization_config\": "
                            "{\"bits\": 4, \"group_size\": 128, \"modules_to_not_convert\": "
                            "null, \"quant_method\": \"awq\", \"version\": \"gemm\", "
                            "\"zero_point\": true}}";
    CHECK(parse_edit(qwen3_config, published, &c) == 0, "%s", orin_error());
    CHECK(c.quant.method == ORIN_QUANT_AWQ && c.quant.bits == 4 && c.quant.group_size == 128 &&
          c.quant.n_skip == 0 && c.torch_dtype == ORIN_F16);
    CHECK(orin_quant_covers(&c.quant, "model.layers.0.mlp.up_proj"));
    /* transformers' defaults; "format" (transformers 5) for "version"; case */
    CHECK(parse_edit(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"AWQ\", "
                                   "\"format\": \"GEMM\", \"backend\": \"autoawq\"}}", &c) == 0 &&
              c.quant.method == ORIN_QUANT_AWQ && c.quant.group_size == 128 && c.quant.bits == 4,
          "%s", orin_error());
    /* -1: one group over the whole width */
    CHECK(parse_edit(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"awq\", "
                                   "\"group_size\": -1}}", &c) == 0 && c.quant.group_size == 0);
    CHECK(parse_edit(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"awq\", "
                                   "\"group_size\": 32, \"modules_to_not_convert\": "
                                   "[\"lm_head\", \"layers.3.mlp\"]}}", &c) == 0 &&
              c.quant.group_size == 32 && c.quant.n_skip == 2,
          "%s", orin_error());
    CHECK(orin_quant_covers(&c.quant, "model.layers.3.self_attn.q_proj") &&
          !orin_quant_covers(&c.quant, "model.layers.3.mlp.down_proj") &&
          orin_quant_covers(&c.quant, "model.layers.13.mlp.down_proj") &&
          orin_quant_covers(&c.quant, "model.layers.4.mlp.down_proj"));

    expect_error(qwen3_config, "{\"quantization_config\": [1]}", "quantization_config = [1]",
                 "not an object");
    expect_error(qwen3_config, "{\"quantization_config\": {\"bits\": 4}}",
                 "missing field 'quantization_config.quant_method'", NULL);
    expect_error(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"gptq\"}}",
                 "quantization_config.quant_method = \"gptq\"", "orin runs awq");
    expect_error(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"awq\", "
                               "\"bits\": 8}}", "quantization_config.bits = 8", "4-bit");
    expect_error(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"awq\", "
                               "\"version\": \"gemv\"}}", "quantization_config.version = \"gemv\"",
                 "orin runs gemm");
    expect_error(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"awq\", "
                               "\"format\": \"gemv_fast\"}}",
                 "quantization_config.format = \"gemv_fast\"", "orin runs gemm");
    expect_error(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"awq\", "
                               "\"zero_point\": false}}", "quantization_config.zero_point = false",
                 "zero points");
    expect_error(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"awq\", "
                               "\"group_size\": 0}}", "quantization_config.group_size = 0",
                 "not a positive integer");
    expect_error(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"awq\", "
                               "\"group_size\": 12.5}}", "quantization_config.group_size = 12.5",
                 NULL);
    expect_error(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"awq\", "
                               "\"modules_to_not_convert\": \"lm_head\"}}",
                 "quantization_config.modules_to_not_convert = \"lm_head\"", "not a list");
    expect_error(qwen3_config, "{\"quantization_config\": {\"quant_method\": \"awq\", "
                               "\"modules_to_not_convert\": [\"a\", 3]}}",
                 "quantization_config.modules_to_not_convert = 3", "not a module name");
}

static void test_bad_values(void)
{
    expect_error(qwen25_config, "{\"hidden_size\": \"<delete>\"}", "missing field 'hidden_size'",
                 NULL);
    expect_error(qwen3_config, "{\"vocab_size\": \"<delete>\"}", "missing field 'vocab_size'",
                 NULL);
    expect_error(qwen3_config, "{\"num_hidden_layers\": null}", "num_hidden_layers", NULL);
    expect_error(qwen25_config, "{\"num_attention_heads\": 0}", "num_attention_heads = 0",
                 "positive");
    expect_error(qwen25_config, "{\"intermediate_size\": -4864}", "intermediate_size = -4864",
                 NULL);
    expect_error(qwen25_config, "{\"vocab_size\": 0}", "vocab_size = 0", NULL);
    expect_error(qwen25_config, "{\"hidden_size\": \"896\"}", "hidden_size = \"896\"",
                 "not an integer");
    expect_error(qwen25_config, "{\"hidden_size\": 896.5}", "hidden_size = 896.5", NULL);
    expect_error(qwen25_config, "{\"hidden_size\": 1e12}", "hidden_size", NULL);
    expect_error(qwen25_config, "{\"num_key_value_heads\": 3}", "num_key_value_heads = 3",
                 "num_attention_heads = 14");
    expect_error(qwen25_config, "{\"hidden_size\": 900}", "hidden_size = 900",
                 "num_attention_heads = 14");
    expect_error(qwen3_config, "{\"head_dim\": 0}", "head_dim = 0", NULL);
    expect_error(qwen3_config, "{\"head_dim\": 63}", "head_dim = 63", "even");
    expect_error(qwen3_config, "{\"rms_norm_eps\": 0}", "rms_norm_eps = 0", NULL);
    expect_error(qwen3_config, "{\"max_position_embeddings\": -1}", "max_position_embeddings", NULL);

    orin_model_config c;
    const char *bad[] = {"", "{", "[1, 2]", "null", "{\"a\": }", "\"qwen\"", "{} x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        orin_error_clear();
        CHECK(orin_model_config_parse(bad[i], strlen(bad[i]), LABEL, &c) == -1, "'%s'", bad[i]);
        CHECK(strstr(orin_error(), LABEL) != NULL, "'%s': %s", bad[i], orin_error());
    }
    /* Parsing respects the length: the text need not be NUL-terminated. */
    char *copy = malloc(strlen(qwen3_config) + 10);
    memcpy(copy, qwen3_config, strlen(qwen3_config));
    memcpy(copy + strlen(qwen3_config), "garbage!!", 10);
    CHECK(orin_model_config_parse(copy, strlen(qwen3_config), LABEL, &c) == 0, "%s", orin_error());
    free(copy);
}

int main(void)
{
    test_qwen25();
    test_qwen3();
    test_transformers_written();
    test_load_from_dir();
    test_rope();
    test_rope_scaling();
    test_head_dim_and_kv_defaults();
    test_tokens_and_flags();
    test_architecture();
    test_sliding_window();
    test_quantization();
    test_bad_values();
    return test_finish();
}
