/* Bad model folders and bad calls: each is a clear error naming the thing, and
 * nothing crashes. Works on copies of the bundled tiny model in a temp folder. */
#include "test_util.h"
#include "model.h"

#include "orin/error.h"
#include "orin/plugin.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

static orin_registry *reg;

static int copy_folder(const char *dst, const char *model)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s/models/%s' '%s'", dst, ORIN_TEST_DATA,
             model, dst);
    return system(cmd);
}

static int copy_model(const char *dst)
{
    return copy_folder(dst, "qwen3-tiny");
}

/* Replaces the first occurrence of `from` by `to` in dir/file. */
static int edit_file(const char *dir, const char *file, const char *from, const char *to)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t len;
    char *text = test_read_file(path, &len);
    if (!text)
        return -1;
    char *at = strstr(text, from);
    if (!at) {
        free(text);
        return -1;
    }
    size_t head = (size_t)(at - text), flen = strlen(from), tlen = strlen(to);
    char *out = malloc(len - flen + tlen + 1);
    memcpy(out, text, head);
    memcpy(out + head, to, tlen);
    memcpy(out + head + tlen, at + flen, len - head - flen + 1);
    int rc = test_write_file(path, out, len - flen + tlen);
    free(out);
    free(text);
    return rc;
}

static int try_load(const char *dir, int32_t max_context, orin_model **m)
{
    orin_model_options opt = {
        .path = dir,
        .dtype = ORIN_F32,
        .device = orin_device_cpu(),
        .registry = reg,
        .attention = "fa2",
        .max_context = max_context,
        .prefill_chunk = 16,
    };
    orin_error_clear();
    return orin_model_load(&opt, m);
}

static void expect_load_error(const char *dir, const char *what, const char *needle1,
                              const char *needle2)
{
    orin_model *m = NULL;
    int rc = try_load(dir, 64, &m);
    CHECK(rc != 0 && m == NULL, "%s: loaded anyway", what);
    CHECK(strstr(orin_error(), needle1) && strstr(orin_error(), needle2),
          "%s: error '%s' lacks '%s' / '%s'", what, orin_error(), needle1, needle2);
    orin_model_free(m);
}

/* ---- quantized folders ---- */

/* The shard of dir holding `tensor` (by the index), its header parsed. */
typedef struct shard {
    char path[1024];
    char *bytes;             /* the whole file */
    size_t len;
    uint64_t header_len;
    cJSON *header;
    cJSON *entry;            /* the tensor's */
} shard;

static void shard_free(shard *sh)
{
    free(sh->bytes);
    cJSON_Delete(sh->header);
}

static int shard_open(const char *dir, const char *tensor, shard *sh)
{
    memset(sh, 0, sizeof *sh);
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    char *text = test_read_file(path, &len);
    cJSON *index = text ? cJSON_Parse(text) : NULL;
    const cJSON *file = cJSON_GetObjectItem(cJSON_GetObjectItem(index, "weight_map"), tensor);
    if (cJSON_IsString(file))
        snprintf(sh->path, sizeof sh->path, "%s/%s", dir, file->valuestring);
    cJSON_Delete(index);
    free(text);
    sh->bytes = sh->path[0] ? test_read_file(sh->path, &sh->len) : NULL;
    if (!sh->bytes || sh->len < 8)
        return -1;
    memcpy(&sh->header_len, sh->bytes, 8); /* little-endian, as the host */
    sh->header = cJSON_ParseWithLength(sh->bytes + 8, (size_t)sh->header_len);
    sh->entry = cJSON_GetObjectItem(sh->header, tensor);
    return sh->entry ? 0 : -1;
}

/* Where the tensor's bytes begin in the file, and how many there are. */
static size_t shard_data(const shard *sh, size_t *nbytes)
{
    const cJSON *off = cJSON_GetObjectItem(sh->entry, "data_offsets");
    size_t begin = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble;
    *nbytes = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble - begin;
    return 8 + (size_t)sh->header_len + begin;
}

/* Rewrites the tensor's header entry: its shape (JSON text) and dtype (NULL:
 * kept), the data unchanged (the new shape must hold as many bytes). */
static int shard_retype(const char *dir, const char *tensor, const char *shape,
                        const char *dtype)
{
    shard sh;
    int rc = shard_open(dir, tensor, &sh);
    if (rc == 0) {
        cJSON_ReplaceItemInObject(sh.entry, "shape", cJSON_Parse(shape));
        if (dtype)
            cJSON_ReplaceItemInObject(sh.entry, "dtype", cJSON_CreateString(dtype));
        char *header = cJSON_PrintUnformatted(sh.header);
        uint64_t hlen = strlen(header);
        size_t data = 8 + (size_t)sh.header_len, rest = sh.len - data;
        char *out = malloc(8 + hlen + rest);
        memcpy(out, &hlen, 8);
        memcpy(out + 8, header, hlen);
        memcpy(out + 8 + hlen, sh.bytes + data, rest);
        rc = test_write_file(sh.path, out, 8 + hlen + rest);
        free(out);
        free(header);
    }
    shard_free(&sh);
    return rc;
}

/* Cuts the shard holding `tensor` in the middle of the tensor's bytes. */
static int shard_truncate_in(const char *dir, const char *tensor)
{
    shard sh;
    size_t nbytes = 0;
    int rc = shard_open(dir, tensor, &sh);
    if (rc == 0)
        rc = test_write_file(sh.path, sh.bytes, shard_data(&sh, &nbytes) + nbytes / 2);
    shard_free(&sh);
    return rc;
}

/* Overwrites the tensor's first element (f16 or bf16) with a NaN (0x7fc0 is
 * one in both). */
static int shard_poison_half(const char *dir, const char *tensor)
{
    shard sh;
    size_t nbytes = 0;
    int rc = shard_open(dir, tensor, &sh);
    if (rc == 0) {
        size_t at = shard_data(&sh, &nbytes);
        const uint16_t nan = 0x7fc0;
        memcpy(sh.bytes + at, &nan, sizeof nan);
        rc = test_write_file(sh.path, sh.bytes, sh.len);
    }
    shard_free(&sh);
    return rc;
}

/* A registry with every entry of `reg` but the f32 implementations of `op`:
 * the op exists, for other dtypes, but not where the model runs (as a
 * quantized matmul on CUDA today). */
static orin_registry *registry_without(const char *op)
{
    orin_registry *r = orin_registry_create();
    for (size_t i = 0; r && i < orin_registry_count(reg); i++) {
        const orin_op_impl *impl = orin_registry_at(reg, i);
        bool drop = strcmp(impl->op, op) == 0 && impl->dtype == ORIN_F32;
        if (!drop && orin_registry_add(r, impl) != 0) {
            orin_registry_destroy(r);
            return NULL;
        }
    }
    return r;
}

static orin_model *load_quant(const char *dir, const orin_registry *r, orin_weight_format quant)
{
    orin_model_options opt = {.path = dir, .dtype = ORIN_F32, .device = orin_device_cpu(),
                              .registry = r, .attention = "fa2", .max_context = 32,
                              .prefill_chunk = 16, .quant = quant, .quant_lm_head = true};
    orin_model *m = NULL;
    orin_error_clear();
    if (orin_model_load(&opt, &m) != 0)
        return NULL;
    return m;
}

static void test_awq_errors(const char *dir)
{
    const char *q0 = "model.layers.0.self_attn.q_proj";
    char name[128];

    /* The folder as shipped loads, and says what it is. */
    CHECK(copy_folder(dir, "qwen3-tiny-awq") == 0);
    orin_model *m = load_quant(dir, reg, ORIN_WEIGHT_FLOAT);
    CHECK(m && !strcmp(orin_model_quant_name(m), "awq4"), "awq load: %s", orin_error());
    orin_model_free(m);
    /* model.quant = int8 on it: ignored (a line says so), still AWQ. */
    m = load_quant(dir, reg, ORIN_WEIGHT_INT8);
    CHECK(m && !strcmp(orin_model_quant_name(m), "awq4"), "awq + int8: %s", orin_error());
    orin_model_free(m);

    /* A qweight cut short: the file ends inside it. */
    snprintf(name, sizeof name, "%s.qweight", q0);
    CHECK(shard_truncate_in(dir, name) == 0);
    expect_load_error(dir, "truncated qweight", name, "past the end");

    /* scales of the wrong shape (the same bytes: [2, 256] as [4, 128]). */
    CHECK(copy_folder(dir, "qwen3-tiny-awq") == 0);
    snprintf(name, sizeof name, "%s.scales", q0);
    CHECK(shard_retype(dir, name, "[4, 128]", NULL) == 0);
    expect_load_error(dir, "scales shape", name,
                      "has shape [4, 128], config.json implies [2, 256]");

    /* qzeros saved as another dtype of the same size. */
    CHECK(copy_folder(dir, "qwen3-tiny-awq") == 0);
    snprintf(name, sizeof name, "%s.qzeros", q0);
    CHECK(shard_retype(dir, name, "[2, 32]", "F32") == 0);
    expect_load_error(dir, "qzeros dtype", name, "dtype F32; expected I32");

    /* A group size that does not divide a layer's width (hidden 64). */
    CHECK(copy_folder(dir, "qwen3-tiny-awq") == 0 &&
          edit_file(dir, "config.json", "\"group_size\": 32", "\"group_size\": 48") == 0);
    snprintf(name, sizeof name, "%s.qweight", q0);
    expect_load_error(dir, "group not dividing", name,
                      "quantization_config.group_size = 48 does not divide the layer's input "
                      "width 64");

    /* A layout orin has no kernel for: one line naming the key. */
    CHECK(copy_folder(dir, "qwen3-tiny-awq") == 0 &&
          edit_file(dir, "config.json", "\"gemm\"", "\"gemv\"") == 0);
    expect_load_error(dir, "gemv", "quantization_config.version = \"gemv\"", "orin runs gemm");

    /* A layer left float by modules_to_not_convert must then be float in the files. */
    CHECK(copy_folder(dir, "qwen3-tiny-awq") == 0 &&
          edit_file(dir, "config.json", "\"modules_to_not_convert\": null",
                    "\"modules_to_not_convert\": [\"layers.2.mlp\"]") == 0);
    expect_load_error(dir, "not converted", "missing tensor",
                      "model.layers.2.mlp.gate_proj.weight");

    /* A device whose plugins lack matmul.awq4 (CUDA today): an error at load,
     * naming the op, not a crash at the first step. */
    CHECK(copy_folder(dir, "qwen3-tiny-awq") == 0);
    orin_registry *r = registry_without(ORIN_OP_MATMUL_AWQ4);
    CHECK(r && !load_quant(dir, r, ORIN_WEIGHT_FLOAT) &&
              strstr(orin_error(), "AWQ int4 weights") &&
              strstr(orin_error(), "matmul.awq4: no implementation at cpu/f32"),
          "no awq4: %s", orin_error());
    orin_registry_destroy(r);

    /* int8 at load: a registry without matmul.int8, and a weight that is NaN. */
    CHECK(copy_model(dir) == 0);
    r = registry_without(ORIN_OP_MATMUL_INT8);
    CHECK(r && !load_quant(dir, r, ORIN_WEIGHT_INT8) &&
              strstr(orin_error(), "model.quant = int8: matmul.int8: no implementation at cpu/f32"),
          "no int8: %s", orin_error());
    orin_registry_destroy(r);
    m = load_quant(dir, reg, ORIN_WEIGHT_INT8);
    CHECK(m && !strcmp(orin_model_quant_name(m), "int8"), "int8 load: %s", orin_error());
    orin_model_free(m);
    CHECK(shard_poison_half(dir, "model.layers.1.mlp.up_proj.weight") == 0);
    CHECK(!load_quant(dir, reg, ORIN_WEIGHT_INT8) &&
              strstr(orin_error(), "model.layers.1.mlp.up_proj.weight") &&
              strstr(orin_error(), "row 0: a weight that is not finite"),
          "NaN weight: %s", orin_error());
}

/* A host device that reports `fake_free` bytes of free memory: the memory plan
 * of a GPU, exercised on the host. */
static size_t fake_free;

static int fake_mem_info(orin_device *dev, size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = fake_free;
    *total_bytes = 2 * fake_free;
    return 0;
}

static void test_memory_plan(const char *dir)
{
    orin_device_ops ops = *orin_device_cpu()->ops;
    ops.mem_info = fake_mem_info;
    orin_device small = *orin_device_cpu();
    small.ops = &ops;
    snprintf(small.name, sizeof small.name, "small");
    orin_model_options opt = {.path = dir, .dtype = ORIN_F32, .device = &small, .registry = reg,
                              .attention = "mha", .max_context = 40000, .prefill_chunk = 16};
    /* 256 MiB of headroom is kept free; 8 MiB more than that leaves room for the
     * tiny model (2.6 MB of f32 weights) and a cache of some hundreds of positions
     * (qwen3-tiny: 2 * 3 layers * 2 kv heads * 64 * 4 bytes = 3 KiB a position). */
    fake_free = (size_t)264 << 20;
    orin_model *m = NULL;
    orin_error_clear();
    CHECK(orin_model_load(&opt, &m) != 0 && m == NULL, "40000 positions fit 2 MiB?");
    const char *err = orin_error();
    const char *hint = strstr(err, "runtime.max_context = ");
    CHECK(strstr(err, "needs") && strstr(err, "on small") && strstr(err, "KV cache") &&
          strstr(err, "40000 positions") && strstr(err, "GiB are free") && hint,
          "memory error: %s", err);
    int fits = hint ? atoi(hint + strlen("runtime.max_context = ")) : 0;
    CHECK(fits > 100 && fits < 40000, "hint %d", fits);
    /* the hinted context loads; one more position does not */
    opt.max_context = fits;
    CHECK(orin_model_load(&opt, &m) == 0, "hinted context %d: %s", fits, orin_error());
    orin_model_free(m);
    m = NULL;
    opt.max_context = fits + 1;
    CHECK(orin_model_load(&opt, &m) != 0, "one past the hint loads");
    /* nothing fits: the weights alone */
    fake_free = (size_t)257 << 20;
    opt.max_context = 64;
    CHECK(orin_model_load(&opt, &m) != 0 && strstr(orin_error(), "weights alone"),
          "no room: %s", orin_error());
}

/* ---- Qwen3-VL folders and images ---- */

/* A VL folder's tensors are named with their own prefix; a text model or a
 * prompt whose pads do not match takes no images. */
static void test_vl_errors(const char *dir)
{
    CHECK(copy_folder(dir, "qwen3vl-tiny") == 0 &&
          shard_retype(dir, "model.language_model.layers.1.mlp.up_proj.weight", "[64, 192]",
                       NULL) == 0);
    expect_load_error(dir, "VL language tensor", "model.language_model.layers.1.mlp.up_proj",
                      "[64, 192]");
    CHECK(copy_folder(dir, "qwen3vl-tiny") == 0 &&
          shard_retype(dir, "model.visual.blocks.1.mlp.linear_fc1.weight", "[64, 128]",
                       NULL) == 0);
    expect_load_error(dir, "VL vision tensor", "model.visual.blocks.1.mlp.linear_fc1", "");

    /* one 2 x 2 image: 1 token */
    float *pixels = calloc(4 * 1536, sizeof *pixels);
    const orin_model_image image = {.pixel_values = pixels, .rows = 4, .cols = 1536,
                                    .grid = {1, 2, 2}};
    int32_t ids[4] = {3009, 3012, 3010, 5};
    float *logits = malloc(sizeof(float) * 3072);
    orin_model *m = NULL;
    CHECK(copy_model(dir) == 0 && try_load(dir, 32, &m) == 0, "load: %s", orin_error());
    CHECK(m && orin_model_prefill_images(m, ids, 4, 0, &image, 1, logits, false) != 0 &&
              strstr(orin_error(), "not a vision-language model"),
          "text model with an image: %s", orin_error());
    orin_model_free(m);
    m = NULL;
    CHECK(copy_folder(dir, "qwen3vl-tiny") == 0 && try_load(dir, 32, &m) == 0, "load: %s",
          orin_error());
    ids[1] = 5; /* no pad left */
    CHECK(m && orin_model_prefill_images(m, ids, 4, 0, &image, 1, logits, false) != 0,
          "an image without its pads");
    ids[1] = 3012;
    CHECK(m && orin_model_prefill_images(m, ids, 4, 0, &image, 1, logits, false) == 0,
          "still usable: %s", orin_error());
    orin_model_free(m);
    free(logits);
    free(pixels);
}

int main(void)
{
    reg = orin_registry_create();
    orin_plugin_set *plugins = orin_plugin_set_create();
    if (orin_plugin_load_dir(plugins, reg, ORIN_PLUGIN_DIR) != 0) {
        fprintf(stderr, "plugins: %s\n", orin_error());
        return 1;
    }
    char *tmp = test_tmpdir("model");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/m", tmp);

    /* config.json disagrees with the weights: the tensor and both shapes are named. */
    CHECK(copy_model(dir) == 0 &&
          edit_file(dir, "config.json", "\"intermediate_size\": 192", "\"intermediate_size\": 200") == 0);
    expect_load_error(dir, "shape mismatch", "mlp.gate_proj.weight", "[200, 64]");

    /* A shard is missing. */
    CHECK(copy_model(dir) == 0);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm '%s'/model-00002-of-*.safetensors", dir);
    CHECK(system(cmd) == 0);
    expect_load_error(dir, "missing shard", "model-00002-of", "");

    /* A tensor the config needs is absent from the weight map. */
    CHECK(copy_model(dir) == 0 && edit_file(dir, "config.json", "\"attention_bias\": false",
                                            "\"attention_bias\": true") == 0);
    expect_load_error(dir, "missing tensor", "missing tensor", "q_proj.bias");

    /* A rope theta whose frequencies leave float32's range (1e-40 is a positive
     * float32, a subnormal: 1 / theta^(62/64) overflows): config.json named. */
    CHECK(copy_model(dir) == 0 && edit_file(dir, "config.json", "\"rope_theta\": 1000000.0",
                                            "\"rope_theta\": 1e-40") == 0);
    expect_load_error(dir, "rope frequencies", "config.json: RoPE frequency",
                      "out of float32's range");

    /* An unsupported architecture. */
    CHECK(copy_model(dir) == 0 &&
          edit_file(dir, "config.json", "Qwen3ForCausalLM", "LlamaForCausalLM") == 0);
    expect_load_error(dir, "architecture", "LlamaForCausalLM", "");

    /* An attention provider nobody registers, strict: an error naming it. */
    CHECK(copy_model(dir) == 0);
    {
        orin_model_options opt = {.path = dir, .dtype = ORIN_F32, .device = orin_device_cpu(),
                                  .registry = reg, .attention = "fa9", .strict = true,
                                  .max_context = 16};
        orin_model *m = NULL;
        CHECK(orin_model_load(&opt, &m) != 0 && strstr(orin_error(), "fa9"), "strict: %s",
              orin_error());
        orin_model_free(m);
    }

    test_memory_plan(dir);
    test_awq_errors(dir);
    test_vl_errors(dir);
    CHECK(copy_model(dir) == 0);

    /* Calls that do not fit: errors before any work, and the model stays usable. */
    orin_model *m = NULL;
    CHECK(try_load(dir, 32, &m) == 0, "load: %s", orin_error());
    if (m) {
        int32_t ids[40] = {0};
        float *logits = malloc(sizeof(float) * 3072);
        CHECK(orin_model_prefill(m, ids, 33, 0, logits, false) != 0 &&
                  strstr(orin_error(), "context of 32"),
              "too long: %s", orin_error());
        CHECK(orin_model_prefill(m, ids, 10, 30, logits, false) != 0, "past the end");
        CHECK(orin_model_decode(m, 5, 32, logits) != 0, "decode past the end");
        ids[3] = 3072;
        CHECK(orin_model_prefill(m, ids, 5, 0, logits, false) != 0 &&
                  strstr(orin_error(), "3072"),
              "bad id: %s", orin_error());
        ids[3] = -1;
        CHECK(orin_model_decode(m, -1, 0, logits) != 0, "negative id");
        CHECK(orin_model_prefill(m, ids, 3, 0, logits, false) == 0, "still usable: %s",
              orin_error());
        free(logits);
        orin_model_free(m);
    }
    CHECK(test_tmpdir_remove(tmp));
    orin_registry_destroy(reg);
    orin_plugin_set_destroy(plugins);
    return test_finish();
}
