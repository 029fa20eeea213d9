/* Allocation failure at the Nth allocation: for N = 1, 2, ... each loader is
 * run with its Nth allocation (counted across the process: liborin, cJSON,
 * PCRE2, glibc) failing, until a run never reaches N. Every run that hit the
 * failure must fail cleanly (a one-line error, no result) or, where the code
 * has a fallback, succeed; either way it must crash nothing and leave nothing
 * allocated once its result is freed.
 *
 *   test_fault_alloc WHAT [FIRST [LAST]]
 * WHAT: model (orin_model_load of tests/data/models/qwen3-tiny; model_awq: of
 * qwen3-tiny-awq; model_int8: qwen3-tiny quantized to int8 at load), tokenizer
 * (orin_tokenizer_load of the same folder), chat (orin_chat_template_open and
 * one render), config (orin_config_load of an INI with --set overrides),
 * plugins (orin_plugin_load_dir of the build's plugins into a new registry),
 * vision (an image processor config, then PNG and JPEG files decoded and
 * preprocessed, resized and not, under tests/data/vision). */
#include "alloc_fail.h"
#include "test_util.h"
#include "model.h"

#include "orin/chat_template.h"
#include "orin/config.h"
#include "orin/error.h"
#include "orin/image.h"
#include "orin/plugin.h"
#include "orin/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#define MODEL_DIR ORIN_TEST_DATA "/models/qwen3-tiny"

static orin_registry *reg;
static char ini_path[600];

/* Each attempt frees what it made, so that a run leaves nothing behind. */
static int load_model_at(const char *dir, orin_weight_format quant)
{
    orin_model_options opt = {
        .path = dir,
        .dtype = ORIN_F32,
        .device = orin_device_cpu(),
        .registry = reg,
        .attention = "fa2",
        .max_context = 64,
        .prefill_chunk = 16,
        .quant = quant,
        .quant_lm_head = true,
    };
    orin_model *m = NULL;
    int rc = orin_model_load(&opt, &m);
    if (rc == 0 && !m)
        return orin_error_set("orin_model_load returned 0 without a model");
    if (rc != 0 && m)
        return orin_error_set("orin_model_load failed but handed out a model");
    orin_model_free(m);
    return rc;
}

static int load_model(void)
{
    return load_model_at(MODEL_DIR, ORIN_WEIGHT_FLOAT);
}

/* The quantized loads: an AWQ folder, and int8 at load (lm_head too). */
static int load_model_awq(void)
{
    return load_model_at(ORIN_TEST_DATA "/models/qwen3-tiny-awq", ORIN_WEIGHT_FLOAT);
}

static int load_model_int8(void)
{
    return load_model_at(MODEL_DIR, ORIN_WEIGHT_INT8);
}

static int load_tokenizer(void)
{
    orin_tokenizer *tok = orin_tokenizer_load(MODEL_DIR);
    if (!tok)
        return -1;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = orin_tokenizer_encode(tok, "Hello, world!", 13, &ids, &n);
    free(ids);
    orin_tokenizer_free(tok);
    return rc;
}

static int open_chat(void)
{
    orin_chat_template *tpl = orin_chat_template_open(MODEL_DIR);
    if (!tpl)
        return -1;
    const orin_chat_message msgs[] = {
        {.role = "system", .content = "Be brief."},
        {.role = "user", .content = "Hi"},
    };
    char *out = NULL;
    int rc = orin_chat_template_render(tpl, msgs, 2, NULL, &out);
    if (rc == 0 && !out)
        rc = orin_error_set("render returned 0 without text");
    free(out);
    orin_chat_template_free(tpl);
    return rc;
}

static int load_config(void)
{
    static orin_config cfg;
    const char *const sets[] = {"generate.prompt=hi\\nthere", "runtime.threads=2",
                                "model.path=rel/dir"};
    return orin_config_load(&cfg, ini_path, sets, 3);
}

static int load_plugins(void)
{
    orin_registry *r = orin_registry_create();
    orin_plugin_set *set = orin_plugin_set_create();
    int rc = r && set ? orin_plugin_load_dir(set, r, ORIN_PLUGIN_DIR) : -1;
    if (rc == 0 && orin_registry_count(r) == 0)
        rc = orin_error_set("plugins: loaded, but nothing registered");
    if ((!r || !set) && !orin_error()[0])
        orin_error_set("plugins: out of memory (create)");
    orin_registry_destroy(r);
    orin_plugin_set_destroy(set);
    return rc;
}

/* Interlaced PNG with a colour key, RGBA, a progressive and a baseline JPEG;
 * resized down, resized up and unresized. */
static int load_images(void)
{
    static const char *const files[] = {"rgb_trns_interlaced_84x84.png", "rgba_84x56.png",
                                        "progressive_120x90.jpg", "baseline_160x96.jpg",
                                        "palette_200x120.png"};
    orin_image_processor proc;
    if (orin_image_processor_load(ORIN_TEST_DATA "/vision/minmax", &proc))
        return -1;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        orin_image_patches out;
        snprintf(path, sizeof path, "%s/vision/images/%s", ORIN_TEST_DATA, files[i]);
        int rc = orin_image_load(&proc, path, 0, &out);
        if (rc == 0 && !out.pixel_values)
            rc = orin_error_set("%s: orin_image_load returned 0 without pixel_values", path);
        orin_image_patches_free(&out);
        if (rc)
            return rc;
    }
    return 0;
}

typedef struct scenario {
    const char *name;
    int (*attempt)(void);
} scenario;

static const scenario scenarios[] = {
    {"model", load_model},
    {"model_awq", load_model_awq},
    {"model_int8", load_model_int8},
    {"tokenizer", load_tokenizer},
    {"chat", open_chat},
    {"config", load_config},
    {"plugins", load_plugins},
    {"vision", load_images},
};

static size_t absorbed; /* runs that hit the failure and still succeeded */

/* One run with allocation `n` failing (0: none); returns whether it reached n. */
static bool run_once(const scenario *s, size_t n, size_t *total)
{
    char where[256];
    orin_error_clear();
    alloc_window_begin(n);
    int rc = s->attempt();
    alloc_window_stats st = alloc_window_end();
    const char *err = orin_error();
    *total = st.allocations;
    if (n == 0 || !st.failed) {
        CHECK(rc == 0, "%s: failed without an injected failure (n=%zu): %s", s->name, n, err);
    } else if (rc != 0) {
        CHECK(err[0] != '\0', "%s: allocation %zu failed: no error message", s->name, n);
        CHECK(strchr(err, '\n') == NULL, "%s: allocation %zu: message of several lines: %s",
              s->name, n, err);
    } else {
        absorbed++;
        printf("%s: allocation %zu (from %s) failed and the call succeeded\n", s->name, n,
               alloc_describe(st.failed_caller, where, sizeof where));
    }
    CHECK(st.live == 0, "%s: allocation %zu failed: %zu blocks (%zu bytes) leaked, the first "
          "from %s", s->name, n, st.live, st.live_bytes,
          alloc_describe(st.first_live_caller, where, sizeof where));
    return n && st.failed;
}

static int write_ini(void)
{
    char *tmp = test_tmpdir("fault-alloc");
    if (!tmp)
        return -1;
    snprintf(ini_path, sizeof ini_path, "%s/orin.ini", tmp);
    free(tmp);
    const char *text = "; fault injection\n[model]\npath = model\ndtype = bf16\n"
                       "[generate]\nprompt = a\\tb\nsystem = You are terse.\ntop_k = 5\n"
                       "[attention]\nbackend = fa1\n";
    return test_write_file(ini_path, text, strlen(text));
}

int main(int argc, char **argv)
{
    const scenario *s = NULL;
    for (size_t i = 0; argc > 1 && i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (strcmp(argv[1], scenarios[i].name) == 0)
            s = &scenarios[i];
    if (!s) {
        fprintf(stderr, "usage: %s model|model_awq|model_int8|tokenizer|chat|config|plugins|vision "
                        "[FIRST [LAST]]\n", argv[0]);
        return 2;
    }
    size_t first = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    size_t last = argc > 3 ? strtoull(argv[3], NULL, 10) : SIZE_MAX;

    orin_log_set_level(ORIN_LOG_ERROR);
    reg = orin_registry_create();
    orin_plugin_set *plugins = orin_plugin_set_create();
    if (!reg || !plugins || orin_plugin_load_dir(plugins, reg, ORIN_PLUGIN_DIR) != 0 ||
        write_ini() != 0) {
        fprintf(stderr, "setup: %s\n", orin_error());
        return 1;
    }

    /* Twice without failures: the first run pays for one-time allocations
     * (stdio buffers, thread pools, lazily built tables) that later runs reuse,
     * the second must then leave nothing behind. */
    size_t total = 0;
    s->attempt();
    run_once(s, 0, &total);
    printf("%s: %zu allocations per run\n", s->name, total);

    size_t n = first, runs = 0;
    for (; n <= last && run_once(s, n, &total); n++) {
        runs++;
        if (test_failed > 20) {
            fprintf(stderr, "%s: stopping after 20 failures\n", s->name);
            break;
        }
    }
    printf("%s: failed allocations %zu..%zu, %zu runs, %zu of them succeeded anyway\n", s->name,
           first, n - 1, runs, absorbed);
    CHECK(runs > 0 || first > 1, "%s: no run reached its failing allocation", s->name);

    orin_registry_destroy(reg);
    orin_plugin_set_destroy(plugins);
    char *dir = strdup(ini_path);
    *strrchr(dir, '/') = '\0';
    remove(ini_path);
    remove(dir);
    free(dir);
    return test_finish();
}
