/* vl.*: the language side of Qwen3-VL against the transformers references of
 * tests/data/models/qwen3vl-tiny and qwen3vl-tiny-tied (README-vl.md).
 *
 *   config     both config.json layouts, the text-only configs unchanged, one
 *              error line naming the key for each bad VL field
 *   prompt     chats with images rendered through the folder's template
 *              (message parts and the JSON context), tokenized and expanded:
 *              the references' prompt text and input ids
 *   positions  M-RoPE position ids and rope_delta of every reference, and
 *              the errors of expansion and positions
 *   tables     which row each frequency follows; cos/sin against a double
 *              computation here; equal rows against 1-D RoPE */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orin/chat_template.h"
#include "orin/error.h"
#include "orin/model_config.h"
#include "orin/rope.h"
#include "orin/tokenizer.h"
#include "orin/vl_prompt.h"
#include "test_util.h"

static const char *const models[] = {"qwen3vl-tiny", "qwen3vl-tiny-tied"};
static const char *const refs[] = {"ref_image", "ref_two_images", "ref_text", "ref_vl_generate"};
#define N_MODELS (sizeof models / sizeof models[0])
#define N_REFS (sizeof refs / sizeof refs[0])

static char *model_path(const char *model, const char *file)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/models/%s%s%s", ORIN_TEST_DATA, model, file ? "/" : "",
             file ? file : "");
    return path;
}

static cJSON *load_ref(const char *model, const char *ref)
{
    char file[64];
    snprintf(file, sizeof file, "%s.json", ref);
    return test_load_json(model_path(model, file));
}

/* An int array of a JSON list; *n its length. */
static int32_t *int_list(const cJSON *list, size_t *n)
{
    *n = (size_t)cJSON_GetArraySize(list);
    int32_t *v = calloc(*n ? *n : 1, sizeof *v);
    for (size_t i = 0; i < *n; i++)
        v[i] = (int32_t)cJSON_GetArrayItem(list, (int)i)->valuedouble;
    return v;
}

static orin_vl_grid *ref_grids(const cJSON *ref, size_t *n)
{
    const cJSON *g = cJSON_GetObjectItem(ref, "image_grid_thw");
    *n = (size_t)cJSON_GetArraySize(g);
    orin_vl_grid *grids = calloc(*n ? *n : 1, sizeof *grids);
    for (size_t k = 0; k < *n; k++) {
        size_t three;
        int32_t *v = int_list(cJSON_GetArrayItem(g, (int)k), &three);
        grids[k] = (orin_vl_grid){.t = v[0], .h = v[1], .w = v[2]};
        free(v);
    }
    return grids;
}

static const int32_t *ref_ids(const cJSON *ref, size_t *n, int32_t **owned)
{
    const cJSON *ids = cJSON_GetObjectItem(ref, "ids");
    *owned = int_list(ids ? ids : cJSON_GetObjectItem(ref, "prompt_ids"), n);
    return *owned;
}

static int load_config(const char *model, orin_model_config *c)
{
    int rc = orin_model_config_load(model_path(model, NULL), c);
    CHECK(rc == 0, "%s: %s", model, orin_error());
    return rc;
}

/* ---- config ---- */

static void test_config_fixtures(void)
{
    orin_model_config c;
    if (load_config("qwen3vl-tiny", &c) == 0) {
        CHECK(c.vl.is_vl && c.arch == ORIN_ARCH_QWEN3 &&
              !strcmp(c.architecture, "Qwen3VLForConditionalGeneration"), "%s", c.architecture);
        CHECK(c.hidden_size == 64 && c.intermediate_size == 192 && c.num_hidden_layers == 3 &&
              c.num_attention_heads == 4 && c.num_key_value_heads == 2 && c.head_dim == 32 &&
              c.vocab_size == 3072 && c.max_position_embeddings == 4096);
        CHECK(c.rms_norm_eps == 1e-6 && c.rope_theta == 5e6, "theta %g", c.rope_theta);
        CHECK(!c.tie_word_embeddings && !c.attention_bias && c.qk_norm);
        CHECK(c.torch_dtype == ORIN_BF16 && c.bos_token_id == 3000 && c.n_eos == 1 &&
              c.eos_token_ids[0] == 3002);
        CHECK(c.vl.image_token_id == 3012 && c.vl.video_token_id == 3013 &&
              c.vl.vision_start_token_id == 3009 && c.vl.vision_end_token_id == 3010);
        CHECK(c.vl.mrope_section[0] == 6 && c.vl.mrope_section[1] == 5 &&
              c.vl.mrope_section[2] == 5 && c.vl.mrope_interleaved && c.vl.spatial_merge_size == 2);
        CHECK(c.quant.method == ORIN_QUANT_NONE);
    }
    /* The published layout: rope_theta + rope_scaling, torch_dtype, tying. */
    if (load_config("qwen3vl-tiny-tied", &c) == 0) {
        CHECK(c.vl.is_vl && c.hidden_size == 64 && c.intermediate_size == 128 &&
              c.num_hidden_layers == 4 && c.head_dim == 16 && c.rope_theta == 10000.0);
        CHECK(c.tie_word_embeddings && c.torch_dtype == ORIN_F16);
        CHECK(c.vl.mrope_section[0] == 4 && c.vl.mrope_section[1] == 2 &&
              c.vl.mrope_section[2] == 2 && c.vl.mrope_interleaved && c.vl.spatial_merge_size == 2);
        CHECK(c.vl.image_token_id == 3012 && c.vl.vision_end_token_id == 3010);
    }
    /* A text model has no VL part at all. */
    if (load_config("qwen3-tiny", &c) == 0) {
        orin_vl_config zero = {0};
        CHECK(!memcmp(&c.vl, &zero, sizeof zero) && !strcmp(c.architecture, "Qwen3ForCausalLM"));
    }
}

/* Sets (or, with value NULL, deletes) the member at a dotted path. */
static void json_edit(cJSON *root, const char *path, const char *value)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    cJSON *obj = root;
    char *key = buf, *dot;
    while ((dot = strchr(key, '.'))) {
        *dot = '\0';
        obj = cJSON_GetObjectItem(obj, key);
        key = dot + 1;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
    if (value)
        cJSON_AddItemToObject(obj, key, cJSON_Parse(value));
}

/* The fixture's config.json with edits ("path", "value" pairs, NULL ends). */
static int parse_edited(const char *model, orin_model_config *c, const char *const *edits)
{
    cJSON *root = test_load_json(model_path(model, "config.json"));
    for (size_t i = 0; edits[i]; i += 2)
        json_edit(root, edits[i], edits[i + 1]);
    char *text = cJSON_PrintUnformatted(root);
    int rc = orin_model_config_parse(text, strlen(text), "vl/config.json", c);
    free(text);
    cJSON_Delete(root);
    return rc;
}

static void test_config_defaults(void)
{
    orin_model_config c;
    /* The transformers defaults: Qwen3VLTextConfig's theta, Qwen3VLConfig's
     * mrope_section (with head_dim 128 it sums to 64) and published ids on a
     * vocabulary that holds them, a merge of 2; model_type alone suffices. */
    const char *const edits[] = {
        "architectures", NULL, "model_type", "\"qwen3_vl\"",
        "text_config.rope_parameters", NULL, "text_config.head_dim", "128",
        "text_config.vocab_size", "151936", "image_token_id", NULL, "video_token_id", NULL,
        "vision_start_token_id", NULL, "vision_end_token_id", NULL,
        "vision_config.spatial_merge_size", NULL, NULL,
    };
    CHECK(parse_edited("qwen3vl-tiny", &c, edits) == 0, "%s", orin_error());
    CHECK(c.vl.is_vl && !strcmp(c.architecture, "Qwen3VLForConditionalGeneration"));
    CHECK(c.rope_theta == 500000.0, "theta %g", c.rope_theta);
    CHECK(c.vl.mrope_section[0] == 24 && c.vl.mrope_section[1] == 20 &&
          c.vl.mrope_section[2] == 20 && c.vl.mrope_interleaved);
    CHECK(c.vl.image_token_id == 151655 && c.vl.video_token_id == 151656 &&
          c.vl.vision_start_token_id == 151652 && c.vl.vision_end_token_id == 151653);
    CHECK(c.vl.spatial_merge_size == 2);

    /* Qwen2-VL's published rope type "mrope" means default. */
    const char *const mrope[] = {"text_config.rope_parameters.rope_type", "\"mrope\"", NULL};
    CHECK(parse_edited("qwen3vl-tiny", &c, mrope) == 0, "%s", orin_error());
    CHECK(c.rope.type == ORIN_ROPE_DEFAULT);
    /* yarn beside the mrope keys, as Qwen3-VL's model cards give it for 1M tokens */
    const char *const yarn[] = {"text_config.rope_parameters.rope_type", "\"yarn\"",
                                "text_config.rope_parameters.factor", "3.0",
                                "text_config.rope_parameters.original_max_position_embeddings",
                                "512", NULL};
    CHECK(parse_edited("qwen3vl-tiny", &c, yarn) == 0, "%s", orin_error());
    CHECK(c.rope.type == ORIN_ROPE_YARN && c.rope.factor == 3.0 && c.rope.original_max_pos == 512 &&
          c.vl.mrope_interleaved);
}

/* Each edit breaks one key; the error is one line holding both fragments. */
static void test_config_errors(void)
{
    static const struct {
        const char *model, *path, *value, *frag1, *frag2;
    } cases[] = {
        {"qwen3vl-tiny", "text_config", NULL, "missing field 'text_config'", "vl/config.json"},
        {"qwen3vl-tiny", "text_config", "[1]", "text_config = [1]", "not an object"},
        {"qwen3vl-tiny", "text_config.hidden_size", NULL, "text_config: missing", "hidden_size"},
        {"qwen3vl-tiny", "text_config.num_key_value_heads", "3", "text_config", "num_key_value_heads"},
        {"qwen3vl-tiny", "text_config.rms_norm_eps", "-1", "text_config: rms_norm_eps", "positive"},
        {"qwen3vl-tiny", "text_config.rope_parameters.rope_type", "\"dynamic\"", "text_config",
         "rope_parameters.rope_type"},
        {"qwen3vl-tiny", "text_config.rope_parameters.rope_type", "\"yarn\"", "text_config",
         "missing field 'rope_parameters.factor'"},
        {"qwen3vl-tiny", "text_config.rope_parameters.mrope_section", "[6, 5, 4]",
         "text_config: rope_parameters.mrope_section = [6, 5, 4]", "head_dim / 2 = 16"},
        {"qwen3vl-tiny", "text_config.rope_parameters.mrope_section", "[8, 8]",
         "rope_parameters.mrope_section", "three integers"},
        {"qwen3vl-tiny", "text_config.rope_parameters.mrope_section", "[6, 5.5, 5]",
         "rope_parameters.mrope_section", "non-negative integers"},
        {"qwen3vl-tiny", "text_config.rope_parameters.mrope_interleaved", "false",
         "rope_parameters.mrope_interleaved = false", "interleaves"},
        {"qwen3vl-tiny-tied", "text_config.rope_scaling.mrope_section", "[4, 4, 4]",
         "rope_scaling.mrope_section", "head_dim / 2 = 8"},
        {"qwen3vl-tiny-tied", "text_config.rope_scaling.mrope_interleaved", "0",
         "rope_scaling.mrope_interleaved", "only true"},
        {"qwen3vl-tiny-tied", "text_config.rope_theta", "\"x\"", "text_config: rope_theta",
         "not a number"},
        {"qwen3vl-tiny", "text_config.eos_token_id", "\"a\"", "text_config: eos_token_id",
         "token id"},
        {"qwen3vl-tiny", "image_token_id", "3072", "image_token_id = 3072", "vocab_size = 3072"},
        {"qwen3vl-tiny", "image_token_id", "-1", "image_token_id", "negative"},
        {"qwen3vl-tiny", "video_token_id", "3012", "video_token_id = 3012", "image_token_id"},
        {"qwen3vl-tiny", "vision_start_token_id", "\"<|vision_start|>\"", "vision_start_token_id",
         "not an integer"},
        {"qwen3vl-tiny", "vision_end_token_id", NULL, "vision_end_token_id = 151653 (absent",
         "vocab_size"},
        {"qwen3vl-tiny", "vision_config", NULL, "missing field 'vision_config'", "vl/config.json"},
        {"qwen3vl-tiny", "vision_config", "true", "vision_config = true", "not an object"},
        {"qwen3vl-tiny", "vision_config.spatial_merge_size", "0",
         "vision_config: spatial_merge_size = 0", "positive"},
        {"qwen3vl-tiny", "architectures", "[\"Qwen2VLForConditionalGeneration\"]",
         "Qwen2VLForConditionalGeneration", "Qwen3VLForConditionalGeneration"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        orin_model_config c;
        const char *const edits[] = {cases[i].path, cases[i].value, NULL};
        int rc = parse_edited(cases[i].model, &c, edits);
        const char *e = orin_error();
        CHECK(rc == -1 && strstr(e, cases[i].frag1) && strstr(e, cases[i].frag2) &&
              !strchr(e, '\n'), "%s = %s: '%s'", cases[i].path,
              cases[i].value ? cases[i].value : "(deleted)", rc ? e : "(parsed)");
    }
}

static void test_config(void)
{
    test_config_fixtures();
    test_config_defaults();
    test_config_errors();
}

/* ---- prompt ---- */

/* The reference's messages as orin_chat_message, content lists as parts.
 * Everything points into `ref`; free the messages' parts and the array. */
static orin_chat_message *ref_messages(const cJSON *ref, size_t *n)
{
    const cJSON *msgs = cJSON_GetObjectItem(ref, "messages");
    *n = (size_t)cJSON_GetArraySize(msgs);
    orin_chat_message *m = calloc(*n, sizeof *m);
    for (size_t i = 0; i < *n; i++) {
        const cJSON *msg = cJSON_GetArrayItem(msgs, (int)i);
        const cJSON *content = cJSON_GetObjectItem(msg, "content");
        m[i].role = cJSON_GetObjectItem(msg, "role")->valuestring;
        if (cJSON_IsString(content)) {
            m[i].content = content->valuestring;
            continue;
        }
        size_t np = (size_t)cJSON_GetArraySize(content);
        orin_chat_part *parts = calloc(np ? np : 1, sizeof *parts);
        for (size_t k = 0; k < np; k++) {
            const cJSON *item = cJSON_GetArrayItem(content, (int)k);
            const char *type = cJSON_GetObjectItem(item, "type")->valuestring;
            parts[k] = !strcmp(type, "image")
                           ? (orin_chat_part){.type = ORIN_CHAT_PART_IMAGE}
                           : (orin_chat_part){.type = ORIN_CHAT_PART_TEXT,
                                              .text = cJSON_GetObjectItem(item, "text")->valuestring};
        }
        m[i].parts = parts;
        m[i].n_parts = np;
    }
    return m;
}

static void free_messages(orin_chat_message *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free((void *)m[i].parts);
    free(m);
}

/* The generation reference has no reply: it ends with the assistant header. */
static bool wants_generation_prompt(const char *ref)
{
    return !strcmp(ref, "ref_vl_generate");
}

static void check_render(const orin_chat_template *tpl, const char *label, const cJSON *ref,
                         bool gen)
{
    const char *want = cJSON_GetObjectItem(ref, "prompt")->valuestring;
    size_t n;
    orin_chat_message *m = ref_messages(ref, &n);
    orin_chat_options opt = ORIN_CHAT_OPTIONS_DEFAULT;
    opt.add_generation_prompt = gen;
    char *got = NULL;
    CHECK(orin_chat_template_render(tpl, m, n, &opt, &got) == 0, "%s: %s", label, orin_error());
    CHECK(got && !strcmp(got, want), "%s: parts render\n  want %s\n  got  %s", label, want,
          got ? got : "(null)");
    free(got);
    free_messages(m, n);

    /* The same messages as a JSON context (image items carry an "image" key
     * there, as in transformers' own call). */
    cJSON *ctx = cJSON_CreateObject();
    cJSON_AddItemToObject(ctx, "messages",
                          cJSON_Duplicate(cJSON_GetObjectItem(ref, "messages"), 1));
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", gen);
    char *text = cJSON_PrintUnformatted(ctx);
    CHECK(orin_chat_template_render_json(tpl, text, &got) == 0, "%s: %s", label, orin_error());
    CHECK(got && !strcmp(got, want), "%s: JSON render differs: %s", label, got ? got : "(null)");
    free(got);
    free(text);
    cJSON_Delete(ctx);
}

/* prompt text -> ids -> expanded ids, against the reference's ids. */
static void check_expand(const orin_tokenizer *tok, const orin_vl_config *vl, const char *label,
                         const cJSON *ref)
{
    const char *prompt = cJSON_GetObjectItem(ref, "prompt")->valuestring;
    int32_t *ids = NULL, *want_owned, *got = NULL;
    size_t n_ids = 0, n_want, n_grids, n_got = 0;
    const int32_t *want = ref_ids(ref, &n_want, &want_owned);
    orin_vl_grid *grids = ref_grids(ref, &n_grids);
    CHECK(orin_tokenizer_encode(tok, prompt, strlen(prompt), &ids, &n_ids) == 0, "%s: %s", label,
          orin_error());
    size_t pads = 0;
    for (size_t i = 0; i < n_ids; i++)
        pads += ids[i] == vl->image_token_id;
    CHECK(pads == n_grids, "%s: %zu pads in the prompt for %zu images", label, pads, n_grids);
    CHECK(orin_vl_expand_image_pads(vl, ids, n_ids, grids, n_grids, &got, &n_got) == 0, "%s: %s",
          label, orin_error());
    CHECK(n_got == n_want && got && !memcmp(got, want, n_want * sizeof *want),
          "%s: expanded ids differ (%zu ids, want %zu)", label, n_got, n_want);
    free(got);
    free(ids);
    free(grids);
    free(want_owned);
}

static void test_prompt(void)
{
    for (size_t mi = 0; mi < N_MODELS; mi++) {
        orin_model_config cfg;
        orin_chat_template *tpl = orin_chat_template_open(model_path(models[mi], NULL));
        orin_tokenizer *tok = orin_tokenizer_load(model_path(models[mi], NULL));
        CHECK(tpl && tok, "%s: %s", models[mi], orin_error());
        if (!tpl || !tok || load_config(models[mi], &cfg)) {
            orin_chat_template_free(tpl);
            orin_tokenizer_free(tok);
            continue;
        }
        for (size_t ri = 0; ri < N_REFS; ri++) {
            char label[128];
            snprintf(label, sizeof label, "%s/%s", models[mi], refs[ri]);
            cJSON *ref = load_ref(models[mi], refs[ri]);
            if (!ref)
                continue;
            check_render(tpl, label, ref, wants_generation_prompt(refs[ri]));
            check_expand(tok, &cfg.vl, label, ref);
            cJSON_Delete(ref);
        }
        orin_chat_template_free(tpl);
        orin_tokenizer_free(tok);
    }
}

static void test_prompt_errors(void)
{
    orin_chat_template *tpl = orin_chat_template_open(model_path("qwen3vl-tiny", NULL));
    CHECK(tpl != NULL, "%s", orin_error());
    if (!tpl)
        return;
    char *out = NULL;
    orin_chat_part image = {.type = ORIN_CHAT_PART_IMAGE};
    orin_chat_part no_text = {.type = ORIN_CHAT_PART_TEXT};
    orin_chat_part bad_utf8 = {.type = ORIN_CHAT_PART_TEXT, .text = "a\xff"};
    orin_chat_part odd = {.type = (orin_chat_part_type)7};
    const struct {
        orin_chat_message m;
        const char *frag;
    } cases[] = {
        {{.role = "user", .content = "x", .parts = &image, .n_parts = 1}, "both content and parts"},
        {{.role = "user", .parts = &no_text, .n_parts = 1}, "part 0: a text part without text"},
        {{.role = "user", .parts = &bad_utf8, .n_parts = 1}, "not valid UTF-8"},
        {{.role = "user", .parts = &odd, .n_parts = 1}, "part 0: unknown type 7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = orin_chat_template_render(tpl, &cases[i].m, 1, NULL, &out);
        CHECK(rc == -1 && !out && strstr(orin_error(), cases[i].frag), "case %zu: '%s'", i,
              rc ? orin_error() : "(rendered)");
    }
    /* An empty list is a list: the template renders no content. */
    orin_chat_message empty = {.role = "user", .parts = &image, .n_parts = 0};
    CHECK(orin_chat_template_render(tpl, &empty, 1, NULL, &out) == 0 && out &&
          !strcmp(out, "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n"), "'%s' %s",
          out ? out : "", orin_error());
    free(out);
    orin_chat_template_free(tpl);
}

/* ---- positions ---- */

static void check_positions(const orin_vl_config *vl, const char *label, const cJSON *ref)
{
    int32_t *owned, delta = 12345;
    size_t n, n_grids;
    const int32_t *ids = ref_ids(ref, &n, &owned);
    orin_vl_grid *grids = ref_grids(ref, &n_grids);
    int32_t *pos = calloc(3 * n, sizeof *pos);
    CHECK(orin_vl_rope_index(vl, ids, n, grids, n_grids, pos, &delta) == 0, "%s: %s", label,
          orin_error());
    const cJSON *rows = cJSON_GetObjectItem(ref, "position_ids");
    for (int r = 0; r < 3; r++) {
        size_t m;
        int32_t *want = int_list(cJSON_GetArrayItem(rows, r), &m);
        CHECK(m == n && !memcmp(want, pos + r * n, n * sizeof *pos), "%s: row %d differs", label,
              r);
        free(want);
    }
    int want_delta = cJSON_GetObjectItem(ref, "rope_delta")->valueint;
    CHECK(delta == want_delta, "%s: rope_delta %d, want %d", label, delta, want_delta);
    free(pos);
    free(grids);
    free(owned);
}

static void expect_index_error(const orin_vl_config *vl, const int32_t *ids, size_t n,
                               const orin_vl_grid *grids, size_t n_grids, const char *frag)
{
    int32_t pos[3 * 64], delta;
    int rc = orin_vl_rope_index(vl, ids, n, grids, n_grids, pos, &delta);
    CHECK(rc == -1 && strstr(orin_error(), frag), "want '%s', got '%s'", frag,
          rc ? orin_error() : "(ok)");
}

static void expect_expand_error(const orin_vl_config *vl, const int32_t *ids, size_t n,
                                const orin_vl_grid *grids, size_t n_grids, const char *frag)
{
    int32_t *out = (int32_t *)&out;
    size_t n_out = 7;
    int rc = orin_vl_expand_image_pads(vl, ids, n, grids, n_grids, &out, &n_out);
    CHECK(rc == -1 && !out && !n_out && strstr(orin_error(), frag), "want '%s', got '%s'", frag,
          rc ? orin_error() : "(ok)");
}

static void test_position_errors(void)
{
    const orin_vl_config vl = {.is_vl = true, .image_token_id = 9, .video_token_id = 8,
                               .vision_start_token_id = 5, .vision_end_token_id = 6,
                               .spatial_merge_size = 2};
    const orin_vl_grid g24 = {1, 2, 4}, bad_side = {1, 3, 4}, t2 = {2, 2, 2}, zero = {1, 0, 2};
    const orin_vl_grid two[] = {{1, 2, 2}, {1, 2, 2}};
    const int32_t one_pad[] = {1, 5, 9, 6, 2}, two_pads[] = {5, 9, 6, 5, 9, 6};
    const int32_t run2[] = {5, 9, 9, 6}, adjacent[] = {5, 9, 9, 6}, video[] = {1, 8, 2};

    expect_expand_error(&vl, one_pad, 5, NULL, 0, "more <|image_pad|> tokens than the 0 images");
    expect_expand_error(&vl, two_pads, 6, two, 1, "more <|image_pad|> tokens than the 1 image");
    expect_expand_error(&vl, one_pad, 5, two, 2, "1 <|image_pad|> token for 2 images");
    expect_expand_error(&vl, one_pad, 5, &bad_side, 1, "image 0: image grid [1, 3, 4]");
    expect_expand_error(&vl, one_pad, 5, &zero, 1, "not positive");

    /* The expansion of one pad with grid 1 x 2 x 4: two tokens; t counts. */
    int32_t *out = NULL;
    size_t n_out = 0;
    CHECK(orin_vl_expand_image_pads(&vl, one_pad, 5, &g24, 1, &out, &n_out) == 0 && n_out == 6 &&
          out[2] == 9 && out[3] == 9 && out[4] == 6, "%s", orin_error());
    free(out);
    CHECK(orin_vl_image_tokens(&t2, 2) == 2 && orin_vl_image_tokens(&g24, 1) == 8);
    CHECK(orin_vl_expand_image_pads(&vl, NULL, 0, NULL, 0, &out, &n_out) == 0 && out &&
          n_out == 0);
    free(out);

    expect_index_error(&vl, run2, 4, NULL, 0, "only 0 images given");
    expect_index_error(&vl, one_pad, 5, &g24, 1, "a run of 1 <|image_pad|> tokens at 2");
    /* Two 1-token images side by side read as one run of 2. */
    expect_index_error(&vl, adjacent, 4, (const orin_vl_grid[]){{1, 2, 2}, {1, 2, 2}}, 2,
                       "a run of 2");
    expect_index_error(&vl, run2, 4, &t2, 1, "one temporal patch");
    expect_index_error(&vl, video, 3, NULL, 0, "<|video_pad|> token at 1");
    expect_index_error(&vl, one_pad, 5, two, 2, "2 images given, 1 in the tokens");
    expect_index_error(&vl, one_pad, 0, NULL, 0, "0 tokens");

    /* A 2 x 4 merged grid of 1 x 4 x 8 patches: P advances by max(2, 4). */
    const int32_t seq[] = {1, 9, 9, 9, 9, 9, 9, 9, 9, 2};
    const orin_vl_grid g48 = {1, 4, 8};
    int32_t pos[30], delta;
    const int32_t want[30] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 5,  0, 1, 1, 1, 1, 2, 2, 2, 2, 5,
                              0, 1, 2, 3, 4, 1, 2, 3, 4, 5};
    CHECK(orin_vl_rope_index(&vl, seq, 10, &g48, 1, pos, &delta) == 0 &&
          !memcmp(pos, want, sizeof want) && delta == -4, "%s delta %d", orin_error(), delta);
}

static void test_positions(void)
{
    for (size_t mi = 0; mi < N_MODELS; mi++) {
        orin_model_config cfg;
        if (load_config(models[mi], &cfg))
            continue;
        for (size_t ri = 0; ri < N_REFS; ri++) {
            char label[128];
            snprintf(label, sizeof label, "%s/%s", models[mi], refs[ri]);
            cJSON *ref = load_ref(models[mi], refs[ri]);
            if (!ref)
                continue;
            check_positions(&cfg.vl, label, ref);
            cJSON_Delete(ref);
        }
    }
    test_position_errors();
}

/* ---- tables ---- */

/* README-vl.md section 10's lists: which frequencies follow h and w. */
static void check_axes(const orin_mrope *m, const int32_t *h, size_t nh, const int32_t *w,
                       size_t nw)
{
    int want[64] = {0};
    for (size_t k = 0; k < nh; k++)
        want[h[k]] = 1;
    for (size_t k = 0; k < nw; k++)
        want[w[k]] = 2;
    for (int32_t j = 0; j < m->head_dim / 2; j++)
        CHECK(orin_mrope_axis(m, j) == want[j], "section [%d, %d, %d]: frequency %d follows %d, "
              "want %d", m->section[0], m->section[1], m->section[2], j, orin_mrope_axis(m, j),
              want[j]);
}

static void test_axes(void)
{
    const orin_mrope published = {.head_dim = 128, .theta = 5e6, .section = {24, 20, 20}}, tiny = {.head_dim = 32, .theta = 5e6, .section = {6, 5, 5}},
                     tied = {.head_dim = 16, .theta = 1e4, .section = {4, 2, 2}};
    int32_t h[20], w[20];
    for (int k = 0; k < 20; k++)
        h[k] = 3 * k + 1, w[k] = 3 * k + 2; /* h 1, 4, ..., 58; w 2, 5, ..., 59 */
    check_axes(&published, h, 20, w, 20);
    check_axes(&tiny, (const int32_t[]){1, 4, 7, 10, 13}, 5, (const int32_t[]){2, 5, 8, 11, 14}, 5);
    check_axes(&tied, (const int32_t[]){1, 4}, 2, (const int32_t[]){2, 5}, 2);
}

/* The tables against a double computation here: angle = position of the
 * frequency's row times theta^(-2j/d); the float must be the double rounded
 * (within half an ulp of values at most 1: 2^-25, plus the difference
 * between two ways of writing the power). */
static void check_tables(const orin_mrope *m, const int32_t *pos, size_t n, const char *label)
{
    size_t half = (size_t)m->head_dim / 2;
    float *c = malloc(n * half * sizeof *c), *s = malloc(n * half * sizeof *s);
    CHECK(orin_mrope_tables(m, pos, n, c, s) == 0, "%s: %s", label, orin_error());
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < half; j++) {
            /* h: j = 1 mod 3 within the first 3*section[1]; w likewise. */
            size_t row = (j % 3 == 1 && j < 3 * (size_t)m->section[1])   ? 1
                         : (j % 3 == 2 && j < 3 * (size_t)m->section[2]) ? 2
                                                                         : 0;
            double angle = pos[row * n + i] * pow(m->theta, -2.0 * (double)j / m->head_dim);
            double dc = fabs(c[i * half + j] - cos(angle)), ds = fabs(s[i * half + j] - sin(angle));
            worst = fmax(worst, fmax(dc, ds));
        }
    }
    CHECK(worst <= 3.0e-8 + 1e-12, "%s: largest difference %g", label, worst);
    free(c);
    free(s);
}

static void test_tables_refs(void)
{
    for (size_t mi = 0; mi < N_MODELS; mi++) {
        orin_model_config cfg;
        if (load_config(models[mi], &cfg))
            continue;
        orin_mrope m = orin_mrope_from_config(&cfg);
        cJSON *ref = load_ref(models[mi], "ref_two_images");
        if (!ref)
            continue;
        int32_t *owned, delta;
        size_t n, n_grids;
        orin_vl_grid *grids = ref_grids(ref, &n_grids);
        const int32_t *ids = ref_ids(ref, &n, &owned);
        int32_t *pos = malloc(3 * n * sizeof *pos);
        if (orin_vl_rope_index(&cfg.vl, ids, n, grids, n_grids, pos, &delta) == 0)
            check_tables(&m, pos, n, models[mi]);
        free(pos);
        free(grids);
        free(owned);
        cJSON_Delete(ref);
    }
}

/* Rows far apart, so that a frequency reading the wrong row shows. */
static void test_tables_spread(void)
{
    const orin_mrope m = {.head_dim = 32, .theta = 5e6, .section = {6, 5, 5}};
    enum { N = 8 };
    int32_t pos[3 * N];
    for (int i = 0; i < N; i++) {
        pos[i] = 7 * i;
        pos[N + i] = 100000 + 13 * i;
        pos[2 * N + i] = 3000000 + 29 * i;
    }
    check_tables(&m, pos, N, "spread rows");
    /* The t row of the last frequency of [24, 20, 20] at d = 128 (j = 60..63). */
    const orin_mrope pub = {.head_dim = 128, .theta = 1e6, .section = {24, 20, 20}};
    check_tables(&pub, pos, N, "published sections");
    /* h and w sections of different lengths (h up to j = 19, w up to 11). */
    const orin_mrope uneven = {.head_dim = 32, .theta = 1e4, .section = {5, 7, 4}};
    check_tables(&uneven, pos, N, "uneven sections");
}

/* Text only: all rows equal, and the table is 1-D RoPE's cos(i * f_j). */
static void test_tables_1d(void)
{
    const orin_mrope m = {.head_dim = 16, .theta = 1e4, .section = {4, 2, 2}};
    enum { N = 50 };
    int32_t pos[3 * N];
    for (int i = 0; i < N; i++)
        pos[i] = pos[N + i] = pos[2 * N + i] = i;
    float c[N * 8], s[N * 8];
    CHECK(orin_mrope_tables(&m, pos, N, c, s) == 0, "%s", orin_error());
    int bad = 0;
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 8; j++) {
            double f = 1.0 / pow(1e4, j / 8.0);
            bad += c[i * 8 + j] != (float)cos(i * f) || s[i * 8 + j] != (float)sin(i * f);
        }
    }
    CHECK(bad == 0, "%d entries differ from 1-D RoPE", bad);

    const orin_mrope odd = {.head_dim = 15, .theta = 1e4, .section = {4, 2, 2}}, sum = {.head_dim = 16, .theta = 1e4, .section = {4, 2, 1}},
                     theta = {.head_dim = 16, .theta = 0, .section = {4, 2, 2}};
    CHECK(orin_mrope_tables(&odd, pos, 1, c, s) == -1 && strstr(orin_error(), "head_dim = 15"));
    CHECK(orin_mrope_tables(&sum, pos, 1, c, s) == -1 && strstr(orin_error(), "[4, 2, 1]"));
    CHECK(orin_mrope_tables(&theta, pos, 1, c, s) == -1 && strstr(orin_error(), "rope_theta"));
}

/* yarn beside the mrope keys: the tables rotate by the scaled frequencies of
 * the config (orin_rope_scaling_inv_freq, checked against transformers in
 * loader.model_config) and multiply cos and sin by its factor; with all rows
 * equal they are the rope op's cos and sin, to the rounding of the angle
 * (double here, float32 there). */
static void test_tables_scaled(void)
{
    orin_model_config cfg;
    const char *const yarn[] = {"text_config.rope_parameters.rope_type", "\"yarn\"",
                                "text_config.rope_parameters.factor", "3.0",
                                "text_config.rope_parameters.original_max_position_embeddings",
                                "512", NULL};
    if (parse_edited("qwen3vl-tiny", &cfg, yarn) != 0) {
        CHECK(0, "%s", orin_error());
        return;
    }
    enum { N = 8, HALF_MAX = 64 };
    const int half = cfg.head_dim / 2;
    float inv[HALF_MAX], factor;
    CHECK(half <= HALF_MAX && orin_rope_scaling_inv_freq(&cfg, inv, &factor) == 0, "%s",
          orin_error());
    CHECK(factor > 1.05f && factor < 1.2f, "yarn's factor for 3: %g", factor);
    orin_mrope m = orin_mrope_from_config(&cfg);
    m.scaling = (orin_rope_scaling){.inv_freq = inv, .attention_factor = factor};
    int32_t pos[3 * N];
    for (int i = 0; i < N; i++) {
        pos[i] = 7 * i;
        pos[N + i] = 1000 + 13 * i;
        pos[2 * N + i] = 30000 + 29 * i;
    }
    float c[N * HALF_MAX], s[N * HALF_MAX];
    CHECK(orin_mrope_tables(&m, pos, N, c, s) == 0, "%s", orin_error());
    double worst = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < half; j++) {
            double angle = pos[orin_mrope_axis(&m, j) * N + i] * (double)inv[j];
            worst = fmax(worst, fabs(c[i * half + j] - cos(angle) * factor));
            worst = fmax(worst, fabs(s[i * half + j] - sin(angle) * factor));
        }
    CHECK(worst <= 1.5e-7, "scaled tables: largest difference %g", worst);
    /* unscaled, the same positions give other numbers: the table is used */
    orin_mrope plain = orin_mrope_from_config(&cfg);
    float c0[N * HALF_MAX], s0[N * HALF_MAX];
    CHECK(orin_mrope_tables(&plain, pos, N, c0, s0) == 0);
    CHECK(memcmp(c, c0, sizeof(float) * N * half) != 0, "the scaled table changed nothing");
}

static void test_tables(void)
{
    test_axes();
    test_tables_refs();
    test_tables_spread();
    test_tables_1d();
    test_tables_scaled();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    bool all = !strcmp(mode, "all");
    if (all || !strcmp(mode, "config"))
        test_config();
    if (all || !strcmp(mode, "prompt")) {
        test_prompt();
        test_prompt_errors();
    }
    if (all || !strcmp(mode, "positions"))
        test_positions();
    if (all || !strcmp(mode, "tables"))
        test_tables();
    return test_finish();
}
