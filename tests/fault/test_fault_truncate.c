/* A model folder whose shard is cut short: the 8-byte length, inside the JSON
 * header, at its end, and at every 4 KiB boundary of the data (and one byte
 * before the end). Each cut must make orin_model_load fail with one line that
 * names the shard, never crash or read past the file (run it in the
 * sanitizer tree for the latter).
 *
 *   test_fault_truncate MODEL_DIR    (a sharded model: qwen3-tiny) */
#include "test_util.h"
#include "model.h"

#include "orin/error.h"
#include "orin/plugin.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static orin_registry *reg;

static int try_load(const char *dir)
{
    orin_model_options opt = {
        .path = dir,
        .dtype = ORIN_F32,
        .device = orin_device_cpu(),
        .registry = reg,
        .attention = "mha",
        .max_context = 32,
        .prefill_chunk = 8,
    };
    orin_model *m = NULL;
    orin_error_clear();
    int rc = orin_model_load(&opt, &m);
    CHECK(rc != 0 || m != NULL, "load returned 0 without a model");
    orin_model_free(m);
    return rc;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The lengths to cut `path` (of len bytes, header ending at hdr_end) to. */
static size_t cut_points(size_t len, size_t hdr_end, size_t *out, size_t cap)
{
    size_t n = 0;
    const size_t fixed[] = {0, 1, 7, 8, 9, hdr_end / 2, hdr_end - 1, hdr_end, len - 1};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && n < cap; i++)
        if (fixed[i] < len)
            out[n++] = fixed[i];
    for (size_t at = 4096; at < len && n < cap; at += 4096)
        out[n++] = at;
    qsort(out, n, sizeof *out, cmp_size);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || out[k - 1] != out[i])
            out[k++] = out[i];
    return k;
}

static void truncate_shard(const char *dir, const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t len = 0;
    unsigned char *orig = (unsigned char *)test_read_file(path, &len);
    CHECK(orig && len > 8, "%s: cannot read", path);
    if (!orig || len <= 8) {
        free(orig);
        return;
    }
    uint64_t hdr = 0;
    for (int i = 7; i >= 0; i--)
        hdr = hdr << 8 | orig[i];
    size_t hdr_end = 8 + (size_t)hdr;
    size_t cuts[1024];
    size_t n = cut_points(len, hdr_end, cuts, sizeof cuts / sizeof cuts[0]);
    size_t clean = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(test_write_file(path, orig, cuts[i]) == 0, "%s: cannot write", path);
        int rc = try_load(dir);
        const char *err = orin_error();
        bool ok = rc != 0 && strstr(err, file) && !strchr(err, '\n');
        CHECK(ok, "%s cut to %zu of %zu bytes: rc %d, error '%s'", file, cuts[i], len, rc, err);
        clean += ok;
    }
    printf("%s: %zu bytes (header %zu), %zu cuts, %zu clean errors, e.g. '%s'\n", file, len,
           hdr_end, n, clean, orin_error());
    CHECK(test_write_file(path, orig, len) == 0);
    CHECK(try_load(dir) == 0, "%s restored: %s", file, orin_error());
    free(orig);
}

static int is_shard(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return n > 12 && strcmp(e->d_name + n - 12, ".safetensors") == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
        return 2;
    }
    orin_log_set_level(ORIN_LOG_ERROR);
    reg = orin_registry_create();
    orin_plugin_set *plugins = orin_plugin_set_create();
    if (orin_plugin_load_dir(plugins, reg, ORIN_PLUGIN_DIR) != 0) {
        fprintf(stderr, "plugins: %s\n", orin_error());
        return 1;
    }
    char *tmp = test_tmpdir("fault-truncate");
    char dir[600], cmd[2048];
    snprintf(dir, sizeof dir, "%s/m", tmp);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", argv[1], dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    CHECK(try_load(dir) == 0, "the intact copy: %s", orin_error());

    struct dirent **shards = NULL;
    int n = scandir(dir, &shards, is_shard, alphasort);
    CHECK(n >= 2, "%s: expected a sharded model, found %d shards", dir, n);
    for (int i = 0; i < n; i++) {
        truncate_shard(dir, shards[i]->d_name);
        free(shards[i]);
    }
    free(shards);

    CHECK(test_tmpdir_remove(tmp));
    orin_registry_destroy(reg);
    orin_plugin_set_destroy(plugins);
    return test_finish();
}
