/* The Qwen3-VL vision encoder on the CPU against transformers' float64
 * intermediates (scripts/gen_vl_models.py; the math in
 * tests/data/models/README-vl.md):
 *
 *   test_vision_encoder MODEL_DIR DTYPE TOL
 *
 * runs image1 and image2 (the processor's pixel_values, grids from
 * tests/data/vision/pixel_values.json) one at a time with every stage traced,
 * and then both in one call (two attention segments), and compares every
 * tensor of ref_tensors.json the run produces: patch embedding, interpolated
 * position embedding, block inputs and outputs, merger, DeepStack features.
 * The error of a tensor is max |got - ref| / max |ref|; each is printed, and
 * each must be within TOL. In f32 it also checks the one-line errors for
 * inputs that do not fit the config. */
#include "qwen3_vl_vision.h"

#include "orin/error.h"
#include "orin/plugin.h"
#include "orin/safetensors.h"
#include "test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *model_dir;
static double tol;

typedef struct image {
    const char *name;
    float *pixels;
    int64_t rows, cols;
    orin_vision_grid grid;
} image;

/* pixel_values.json's entry for `name`: the grid, the shape, the .f32 file. */
static bool load_image(const cJSON *index, const char *name, image *im)
{
    const cJSON *e = cJSON_GetObjectItem(cJSON_GetObjectItem(index, "images"), name);
    const cJSON *g = cJSON_GetObjectItem(e, "image_grid_thw");
    const cJSON *shape = cJSON_GetObjectItem(e, "shape");
    const char *file = cJSON_GetStringValue(cJSON_GetObjectItem(e, "pixel_values"));
    if (!e || cJSON_GetArraySize(g) != 3 || cJSON_GetArraySize(shape) != 2 || !file) {
        CHECK(false, "pixel_values.json: no usable entry for %s", name);
        return false;
    }
    im->name = name;
    im->grid = (orin_vision_grid){cJSON_GetArrayItem(g, 0)->valueint,
                                  cJSON_GetArrayItem(g, 1)->valueint,
                                  cJSON_GetArrayItem(g, 2)->valueint};
    im->rows = cJSON_GetArrayItem(shape, 0)->valueint;
    im->cols = cJSON_GetArrayItem(shape, 1)->valueint;
    char path[1024];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/vision/%s", ORIN_TEST_DATA, file);
    im->pixels = (float *)test_read_file(path, &len);
    CHECK(im->pixels && len == (size_t)(im->rows * im->cols) * sizeof(float),
          "%s: %zu bytes, expected %lld floats", path, len, (long long)(im->rows * im->cols));
    return im->pixels != NULL;
}

/* The float64 reference `name` of ref_tensors.json, its element count in *n;
 * NULL when the index has no such tensor. */
static double *load_ref(const cJSON *index, const char *name, int64_t *n)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(index, "tensors")) {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(t, "name")), name) != 0)
            continue;
        char path[1024];
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", model_dir,
                 cJSON_GetStringValue(cJSON_GetObjectItem(t, "file")));
        double *data = (double *)test_read_file(path, &len);
        *n = 1;
        const cJSON *d;
        cJSON_ArrayForEach(d, cJSON_GetObjectItem(t, "shape")) *n *= d->valueint;
        CHECK(data && len == (size_t)*n * sizeof(double), "%s: %zu bytes for %lld values", path,
              len, (long long)*n);
        return data;
    }
    return NULL;
}

/* max |got - ref| / max |ref| over n values, printed, within tol. */
static void compare(const char *what, const float *got, const double *ref, int64_t n)
{
    double err = 0, mag = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        err = isnan(got[i]) || d > err ? (isnan(got[i]) ? INFINITY : d) : err;
        mag = fabs(ref[i]) > mag ? fabs(ref[i]) : mag;
    }
    const double rel = err / mag;
    printf("  %-22s %8lld values, max |ref| %8.4f, error %.3g\n", what, (long long)n, mag, rel);
    CHECK(rel <= tol, "%s: relative error %.3g above %.3g", what, rel, tol);
}

/* Compares `got` with reference `name` (n values), if the references have it. */
static void compare_named(const cJSON *refs, const char *name, const float *got, int64_t n,
                          int *compared)
{
    int64_t rn = 0;
    double *ref = load_ref(refs, name, &rn);
    if (!ref)
        return;
    CHECK(rn == n, "%s: %lld values, the reference has %lld", name, (long long)n,
          (long long)rn);
    if (rn == n)
        compare(name, got, ref, n);
    (*compared)++;
    free(ref);
}

/* One image alone, every stage traced. */
static void test_one(orin_vision_encoder *enc, const cJSON *refs, const image *im)
{
    const orin_vision_config *c = orin_vision_get_config(enc);
    orin_vision_output out;
    printf("%s (grid %d x %d x %d):\n", im->name, im->grid.t, im->grid.h, im->grid.w);
    int rc = orin_vision_encode(enc, im->pixels, im->rows, im->cols, &im->grid, 1, true, &out);
    CHECK(rc == 0, "%s: %s", im->name, orin_error());
    if (rc != 0)
        return;
    const int64_t stage = out.patches * c->hidden, merged = out.tokens * out.out_hidden;
    CHECK(out.tokens == im->rows / (c->merge * c->merge), "%s: %lld tokens", im->name,
          (long long)out.tokens);
    char name[64];
    int compared = 0;
    const struct {
        const char *suffix;
        const float *got;
        int64_t n;
    } stages[] = {
        {"patch_embed", out.patch_embed, stage},
        {"pos_embed", out.pos_embed, stage},
        {"embed", out.embed, stage},
        {"merger", out.embeds, merged},
    };
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        snprintf(name, sizeof name, "%s.%s", im->name, stages[i].suffix);
        compare_named(refs, name, stages[i].got, stages[i].n, &compared);
    }
    for (int i = 0; i < out.n_blocks; i++) {
        snprintf(name, sizeof name, "%s.block%d", im->name, i);
        compare_named(refs, name, out.blocks[i], stage, &compared);
    }
    for (int j = 0; j < out.n_deepstack; j++) {
        snprintf(name, sizeof name, "%s.deepstack%d", im->name, j);
        compare_named(refs, name, out.deepstack[j], merged, &compared);
    }
    /* image1 has every stage; image2 at least its positions and outputs */
    CHECK(compared >= 2 + out.n_deepstack, "%s: only %d reference tensors compared", im->name,
          compared);
    orin_vision_output_free(&out);
}

/* Two references of one name pattern, image1's rows then image2's. */
static double *concat_refs(const cJSON *refs, const char *suffix, int64_t *n)
{
    char a[64], b[64];
    int64_t na = 0, nb = 0;
    snprintf(a, sizeof a, "image1.%s", suffix);
    snprintf(b, sizeof b, "image2.%s", suffix);
    double *ra = load_ref(refs, a, &na), *rb = load_ref(refs, b, &nb);
    double *all = ra && rb ? realloc(ra, (size_t)(na + nb) * sizeof(double)) : NULL;
    if (all)
        memcpy(all + na, rb, (size_t)nb * sizeof(double));
    else
        free(ra);
    free(rb);
    *n = na + nb;
    return all;
}

/* Both images in one call: each attends only within itself, so the outputs
 * are the two single-image outputs, concatenated. */
static void test_two(orin_vision_encoder *enc, const cJSON *refs, const image *im1,
                     const image *im2)
{
    const int64_t rows = im1->rows + im2->rows, cols = im1->cols;
    float *pixels = malloc((size_t)(rows * cols) * sizeof(float));
    memcpy(pixels, im1->pixels, (size_t)(im1->rows * cols) * sizeof(float));
    memcpy(pixels + im1->rows * cols, im2->pixels, (size_t)(im2->rows * cols) * sizeof(float));
    const orin_vision_grid grids[2] = {im1->grid, im2->grid};
    orin_vision_output out;
    printf("image1 + image2 in one call:\n");
    int rc = orin_vision_encode(enc, pixels, rows, cols, grids, 2, false, &out);
    CHECK(rc == 0, "two images: %s", orin_error());
    if (rc == 0) {
        int64_t n = 0;
        double *ref = concat_refs(refs, "merger", &n);
        CHECK(ref && n == out.tokens * out.out_hidden, "two images: merger reference");
        if (ref && n == out.tokens * out.out_hidden)
            compare("both.merger", out.embeds, ref, n);
        free(ref);
        for (int j = 0; j < out.n_deepstack; j++) {
            char suffix[32], what[32];
            snprintf(suffix, sizeof suffix, "deepstack%d", j);
            snprintf(what, sizeof what, "both.deepstack%d", j);
            ref = concat_refs(refs, suffix, &n);
            CHECK(ref && n == out.tokens * out.out_hidden, "two images: %s reference", suffix);
            if (ref && n == out.tokens * out.out_hidden)
                compare(what, out.deepstack[j], ref, n);
            free(ref);
        }
        CHECK(out.patch_embed == NULL && out.blocks == NULL, "untraced call returned stages");
        orin_vision_output_free(&out);
    }
    free(pixels);
}

static void expect_error(orin_vision_encoder *enc, const image *im, int64_t rows, int64_t cols,
                         orin_vision_grid grid, const char *needle)
{
    orin_vision_output out;
    orin_error_clear();
    int rc = orin_vision_encode(enc, im->pixels, rows, cols, &grid, 1, false, &out);
    CHECK(rc == -1 && strstr(orin_error(), needle) && !strchr(orin_error(), '\n'),
          "want an error containing \"%s\", got rc %d \"%s\"", needle, rc, orin_error());
    CHECK(out.embeds == NULL, "a failed call left an output");
}

/* The memory plan's count of the encoder's device bytes equals the folder's
 * model.visual.* tensors at the compute dtype's size. */
static void test_weight_bytes(const orin_vision_encoder *enc, orin_dtype dt)
{
    orin_st_archive *ar = NULL;
    if (orin_st_open_dir(model_dir, &ar) != 0) {
        CHECK(0, "open %s: %s", model_dir, orin_error());
        return;
    }
    double elems = 0;
    for (size_t i = 0; i < orin_st_count(ar); i++) {
        const orin_st_tensor *t = orin_st_at(ar, i);
        if (strncmp(t->name, "model.visual.", 13) != 0)
            continue;
        double n = 1;
        for (int d = 0; d < t->ndim; d++)
            n *= (double)t->shape[d];
        elems += n;
    }
    orin_st_close(ar);
    const double want = elems * (double)orin_dtype_size(dt);
    const double got = orin_vision_weight_bytes(orin_vision_get_config(enc), dt);
    CHECK(got == want, "vision weight bytes: planned %.0f, the folder's %.0f", got, want);
}

static void test_errors(orin_vision_encoder *enc, const image *im)
{
    orin_vision_grid g = im->grid;
    expect_error(enc, im, im->rows - 4, im->cols, g, "pixel_values: 20 rows, the grids make 24");
    expect_error(enc, im, im->rows, im->cols / 2, g, "pixel_values: 768 values a row");
    g.w = 3;
    expect_error(enc, im, im->rows, im->cols, g, "grid [1, 4, 3]");
    g = im->grid;
    g.t = 0;
    expect_error(enc, im, im->rows, im->cols, g, "must be positive");
}

/* A folder beside model_dir: its weights (symlinked) under a config.json
 * whose vision_config has `key` set to `value` (a JSON number), or removed
 * when value is NULL; loading it must fail with one line containing needle. */
static void expect_load_error(orin_registry *reg, const char *key, const char *value,
                              const char *needle)
{
    char *dir = test_tmpdir("vision_cfg"), *src = realpath(model_dir, NULL), cmd[4096],
         path[1024];
    snprintf(cmd, sizeof cmd, "ln -s %s/*.safetensors %s/model.safetensors.index.json %s/", src,
             src, dir);
    free(src);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    cJSON *cfg = test_load_json(path);
    cJSON *vc = cJSON_GetObjectItem(cfg, "vision_config");
    if (value)
        cJSON_ReplaceItemInObject(vc, key, cJSON_Parse(value));
    else
        cJSON_DeleteItemFromObject(vc, key);
    char *text = cJSON_Print(cfg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(test_write_file(path, text, strlen(text)) == 0, "cannot write %s", path);
    orin_vision_options opt = {.path = dir, .dtype = ORIN_F32, .device = orin_device_cpu(),
                               .registry = reg};
    orin_vision_encoder *enc = NULL;
    orin_error_clear();
    int rc = orin_vision_load(&opt, &enc);
    CHECK(rc == -1 && !enc && strstr(orin_error(), needle) && !strchr(orin_error(), '\n'),
          "vision_config.%s = %s: want an error containing \"%s\", got rc %d \"%s\"", key,
          value ? value : "(removed)", needle, rc, orin_error());
    orin_vision_free(enc);
    free(text);
    cJSON_Delete(cfg);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    free(dir);
}

/* A block the files lack, a weight of another shape, a missing key, an
 * unknown activation, a DeepStack index past the blocks. */
static void test_load_errors(orin_registry *reg, const orin_vision_config *c)
{
    char depth[16], inter[16], deep[32];
    snprintf(depth, sizeof depth, "%d", c->depth + 1);
    snprintf(inter, sizeof inter, "%d", c->intermediate + 1);
    snprintf(deep, sizeof deep, "[%d]", c->depth);
    char missing[96], shape[96];
    snprintf(missing, sizeof missing, "missing tensor 'model.visual.blocks.%d.norm1.weight'",
             c->depth);
    snprintf(shape, sizeof shape, "tensor 'model.visual.blocks.0.mlp.linear_fc1.weight' has shape");
    expect_load_error(reg, "depth", depth, missing);
    expect_load_error(reg, "intermediate_size", inter, shape);
    expect_load_error(reg, "num_heads", NULL, "missing field 'vision_config.num_heads'");
    expect_load_error(reg, "hidden_act", "\"relu\"", "vision_config.hidden_act = relu");
    expect_load_error(reg, "deepstack_visual_indexes", deep, "deepstack_visual_indexes[0]");
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL_DIR f32|f16|bf16 TOL\n", argv[0]);
        return 2;
    }
    model_dir = argv[1];
    tol = atof(argv[3]);
    orin_dtype dt;
    if (orin_dtype_from_name(argv[2], &dt) != 0) {
        fprintf(stderr, "unknown dtype %s\n", argv[2]);
        return 2;
    }
    orin_registry *reg = orin_registry_create();
    orin_plugin_set *plugins = orin_plugin_set_create();
    if (!reg || !plugins || orin_plugin_load_dir(plugins, reg, ORIN_PLUGIN_DIR) != 0) {
        fprintf(stderr, "cannot load the plugins: %s\n", orin_error());
        return 1;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/ref_tensors.json", model_dir);
    cJSON *refs = test_load_json(path);
    snprintf(path, sizeof path, "%s/vision/pixel_values.json", ORIN_TEST_DATA);
    cJSON *index = test_load_json(path);

    orin_vision_options opt = {.path = model_dir, .dtype = dt, .device = orin_device_cpu(),
                               .registry = reg, .strict = true};
    orin_vision_encoder *enc = NULL;
    int rc = orin_vision_load(&opt, &enc);
    CHECK(rc == 0, "load %s: %s", model_dir, orin_error());
    image im1 = {0}, im2 = {0};
    if (rc == 0 && refs && index && load_image(index, "image1", &im1) &&
        load_image(index, "image2", &im2)) {
        printf("%s, %s, tolerance %g (max abs error / max abs value)\n", model_dir, argv[2], tol);
        test_one(enc, refs, &im1);
        test_one(enc, refs, &im2);
        test_two(enc, refs, &im1, &im2);
        test_weight_bytes(enc, dt);
        if (dt == ORIN_F32) {
            test_errors(enc, &im1);
            test_load_errors(reg, orin_vision_get_config(enc));
        }
    }
    free(im1.pixels);
    free(im2.pixels);
    orin_vision_free(enc);
    cJSON_Delete(refs);
    cJSON_Delete(index);
    orin_registry_destroy(reg);
    orin_plugin_set_destroy(plugins);
    return test_finish();
}
