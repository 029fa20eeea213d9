/* Bad model folders and bad calls: each is a clear error naming the thing, and
 * nothing crashes. Works on copies of the bundled tiny model in a temp folder. */
#include "test_util.h"
#include "model.h"

#include "orin/error.h"
#include "orin/plugin.h"

#include <stdlib.h>
#include <string.h>

static orin_registry *reg;

static int copy_model(const char *dst)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s/models/qwen3-tiny' '%s'", dst,
             ORIN_TEST_DATA, dst);
    return system(cmd);
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
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0);
    free(tmp);
    orin_registry_destroy(reg);
    orin_plugin_set_destroy(plugins);
    return test_finish();
}
