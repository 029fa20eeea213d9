/* Image input (core/src/vision) against transformers: the files, configs and
 * references of tests/data/vision, written by scripts/gen_vl_image_refs.py
 * (see there for what each holds).
 *
 *   test_vision GROUP DATA_DIR REFS_BIN
 * GROUP: cases (pixel_values and grid_thw of every case), decode (the RGB
 * the processor starts from), smart_resize, config, errors.
 *
 * Tolerances. PNG: exact to float32 rounding (max abs diff 1e-6) resized or
 * not, since the resize is torch's integer arithmetic reproduced step by step
 * and the normalisation the same float32 operations. JPEG: the reference is
 * PIL decoding the same file with its own libjpeg-turbo build; orin uses the
 * system's. Both run libjpeg's default accurate integer IDCT and fancy
 * upsampling, which libjpeg-turbo computes bit-exactly across versions and
 * SIMD paths, so equality is expected; but a decoder is only held by the
 * JPEG conformance test (ISO/IEC 10918-2) to within 1 of the reference IDCT
 * per sample, and colour conversion and chroma upsampling may each round once
 * more, so a sample may differ by up to JPEG_TOL = 2 levels from PIL's
 * without either decoder being wrong. A JPEG case passes with every value
 * within 2 levels and a mean abs diff of at most 1e-2; the figures measured
 * are printed. */
#include "test_util.h"

#include "orin/error.h"
#include "orin/image.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define JPEG_TOL 2         /* levels; see the top of the file */
#define EXACT_TOL 1e-6     /* float32 rounding */
#define MEAN_TOL 1e-2      /* mean abs diff allowed for JPEG cases */

static const char *data_dir;
static cJSON *refs;
static uint8_t *blob;
static size_t blob_len;

static bool is_jpeg(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".jpg") == 0;
}

static int num(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key)->valueint;
}

static const char *str(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key)->valuestring;
}

static const cJSON *item(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* refs.bin bytes at an offset, or NULL (and a failure) past its end. */
static const uint8_t *blob_at(size_t offset, size_t n)
{
    CHECK(offset + n <= blob_len, "refs.bin: %zu bytes at %zu are past its end (%zu)", n, offset,
          blob_len);
    return offset + n <= blob_len ? blob + offset : NULL;
}

/* The per-config table: value of level v in channel c is t[c * 256 + v]. */
static const float *table(const char *config, float out[768])
{
    const cJSON *at = item(item(refs, "tables"), config);
    const uint8_t *p = at ? blob_at((size_t)at->valuedouble, 768 * 4) : NULL;
    if (!p)
        return NULL;
    memcpy(out, p, 768 * 4); /* little-endian float32, as on the machines orin runs on */
    return out;
}

/* ---- cases ---- */

typedef struct diff {
    double max, sum;
    size_t n, differ;
} diff;

static void compare_case(const cJSON *c, const orin_image_patches *out, const float *t, diff *d)
{
    const uint8_t *lv = blob_at((size_t)item(c, "offset")->valuedouble,
                                (size_t)out->n_patches * out->patch_dim);
    if (!lv)
        return;
    size_t per_channel = (size_t)out->patch_dim / 3;
    for (size_t r = 0; r < (size_t)out->n_patches; r++) {
        for (size_t k = 0; k < (size_t)out->patch_dim; k++) {
            size_t i = r * out->patch_dim + k;
            double e = fabs((double)out->pixel_values[i] - t[(k / per_channel) * 256 + lv[i]]);
            d->max = e > d->max ? e : d->max;
            d->sum += e;
            d->differ += e > 0;
            d->n++;
        }
    }
}

/* The largest distance between two neighbouring levels: JPEG_TOL levels of it
 * bound a JPEG value's error. */
static double level_step(const float *t)
{
    double step = 0;
    for (int c = 0; c < 3; c++)
        for (int v = 1; v < 256; v++)
            step = fmax(step, fabs((double)t[c * 256 + v] - t[c * 256 + v - 1]));
    return step;
}

static void check_case(const cJSON *c)
{
    const char *image = str(c, "image"), *config = str(c, "config");
    const cJSON *grid = item(c, "grid_thw"), *shape = item(c, "shape"),
                *hw = item(c, "resized_hw");
    char dir[1024], path[1024];
    float t[768];
    snprintf(dir, sizeof dir, "%s/%s", data_dir, config);
    snprintf(path, sizeof path, "%s/images/%s", data_dir, image);
    orin_image_processor proc;
    orin_image_patches out;
    if (!table(config, t))
        return;
    int rc = orin_image_processor_load(dir, &proc);
    CHECK(rc == 0, "%s: %s", config, orin_error());
    if (rc)
        return;
    rc = orin_image_load(&proc, path, num(c, "max_pixels"), &out);
    CHECK(rc == 0, "%s [%s]: %s", image, config, orin_error());
    if (rc)
        return;
    bool same = out.grid_t == cJSON_GetArrayItem(grid, 0)->valueint &&
                out.grid_h == cJSON_GetArrayItem(grid, 1)->valueint &&
                out.grid_w == cJSON_GetArrayItem(grid, 2)->valueint &&
                out.n_patches == cJSON_GetArrayItem(shape, 0)->valueint &&
                out.patch_dim == cJSON_GetArrayItem(shape, 1)->valueint &&
                out.resized_height == cJSON_GetArrayItem(hw, 0)->valueint &&
                out.resized_width == cJSON_GetArrayItem(hw, 1)->valueint;
    CHECK(same, "%s [%s]: grid %d %d %d, pixel_values [%lld, %d], resized %dx%d differ from "
          "transformers'", image, config, out.grid_t, out.grid_h, out.grid_w,
          (long long)out.n_patches, out.patch_dim, out.resized_width, out.resized_height);
    diff d = {0};
    if (same)
        compare_case(c, &out, t, &d);
    bool jpeg = is_jpeg(image), resized = cJSON_IsTrue(item(c, "was_resized"));
    double mean = d.n ? d.sum / d.n : 0;
    printf("%-30s %-9s %s grid %dx%d, pixel_values [%lld, %d]: max abs diff %.3g, mean abs "
           "diff %.3g (%zu of %zu differ)\n", image, config, resized ? "resized  " : "unresized",
           out.grid_h, out.grid_w, (long long)out.n_patches, out.patch_dim, d.max, mean,
           d.differ, d.n);
    if (jpeg) {
        double tol = JPEG_TOL * level_step(t) * (1 + 1e-6);
        CHECK(d.max <= tol && mean <= MEAN_TOL, "%s [%s]: max abs diff %g (allowed %g), mean %g "
              "(allowed %g)", image, config, d.max, tol, mean, MEAN_TOL);
    } else {
        CHECK(d.max <= EXACT_TOL, "%s [%s]: max abs diff %g, allowed %g", image, config, d.max,
              EXACT_TOL);
    }
    orin_image_patches_free(&out);
}

static void test_cases(void)
{
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, item(refs, "cases"))
    {
        check_case(c);
        n++;
    }
    CHECK(n >= 20, "only %d cases in refs.json", n);
}

/* ---- decode ---- */

static void check_decoded(const char *name, const cJSON *d)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/images/%s", data_dir, name);
    orin_image img;
    int rc = orin_image_decode(path, &img);
    CHECK(rc == 0, "%s", orin_error());
    if (rc)
        return;
    int w = num(d, "width"), h = num(d, "height");
    CHECK(img.width == w && img.height == h, "%s: %dx%d, PIL %dx%d", name, img.width, img.height,
          w, h);
    const uint8_t *ref = blob_at((size_t)item(d, "offset")->valuedouble, (size_t)w * h * 3);
    if (ref && img.width == w && img.height == h) {
        size_t n = (size_t)w * h * 3, differ = 0;
        int max = 0;
        for (size_t i = 0; i < n; i++) {
            int e = abs((int)img.rgb[i] - ref[i]);
            max = e > max ? e : max;
            differ += e != 0;
        }
        printf("%-30s %dx%d: max diff %d levels, %zu of %zu samples differ from PIL\n", name, w,
               h, max, differ, n);
        CHECK(max <= (is_jpeg(name) ? JPEG_TOL : 0), "%s: a sample %d levels from PIL's", name,
              max);
    }
    orin_image_free(&img);
}

static void test_decode(void)
{
    const cJSON *d, *m;
    cJSON_ArrayForEach(d, item(refs, "decoded"))
        check_decoded(d->string, d);
    /* Which files count as plain RGB (do_convert_rgb = false takes only those). */
    cJSON_ArrayForEach(m, item(refs, "images"))
    {
        char path[1024];
        orin_image img;
        snprintf(path, sizeof path, "%s/images/%s", data_dir, m->string);
        if (orin_image_decode(path, &img)) {
            CHECK(0, "%s", orin_error());
            continue;
        }
        CHECK(img.was_rgb == cJSON_IsTrue(item(m, "was_rgb")), "%s: was_rgb %d, PIL mode %s",
              m->string, img.was_rgb, str(m, "mode"));
        orin_image_free(&img);
    }
}

/* ---- smart_resize ---- */

static void test_smart_resize(void)
{
    const cJSON *row;
    int n = 0;
    cJSON_ArrayForEach(row, item(refs, "smart_resize"))
    {
        int64_t v[7];
        for (int i = 0; i < 7; i++)
            v[i] = (int64_t)cJSON_GetArrayItem(row, i)->valuedouble;
        int64_t h = 0, w = 0;
        orin_error_clear();
        int rc = orin_image_smart_resize(v[0], v[1], v[2], v[3], v[4], &h, &w);
        if (v[5] < 0)
            CHECK(rc == -1 && strstr(orin_error(), "aspect ratio"), "%lldx%lld: %s",
                  (long long)v[1], (long long)v[0], rc ? orin_error() : "no error");
        else
            CHECK(rc == 0 && h == v[5] && w == v[6], "smart_resize(%lld, %lld, %lld, %lld, %lld) "
                  "= %lld, %lld; transformers %lld, %lld (%s)", (long long)v[0], (long long)v[1],
                  (long long)v[2], (long long)v[3], (long long)v[4], (long long)h, (long long)w,
                  (long long)v[5], (long long)v[6], rc ? orin_error() : "");
        n++;
    }
    CHECK(n > 50, "only %d smart_resize rows", n);
}

/* ---- config ---- */

static int parse(const char *json, orin_image_processor *p)
{
    orin_error_clear();
    return orin_image_processor_parse(json, strlen(json), "test.json", p);
}

static void expect_config_error(const char *json, const char *want)
{
    orin_image_processor p;
    int rc = parse(json, &p);
    CHECK(rc == -1 && strstr(orin_error(), want) && strstr(orin_error(), "test.json"),
          "%s: rc %d, error \"%s\" lacks \"%s\"", json, rc, orin_error(), want);
}

static void load_dir(const char *sub, orin_image_processor *p)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", data_dir, sub);
    CHECK(orin_image_processor_load(dir, p) == 0, "%s: %s", sub, orin_error());
}

static void test_config_values(void)
{
    orin_image_processor p;
    orin_image_processor_defaults(&p);
    CHECK(p.patch_size == 14 && p.merge_size == 2 && p.temporal_patch_size == 2 &&
          p.min_pixels == 3136 && p.max_pixels == 1003520 && p.resample == 3 && p.do_resize &&
          p.do_rescale && p.do_normalize && p.do_convert_rgb && p.image_std[1] == 0.26130258f,
          "defaults");
    load_dir("qwen3vl", &p);
    CHECK(p.patch_size == 16 && p.merge_size == 2 && p.temporal_patch_size == 2 &&
          p.min_pixels == 65536 && p.max_pixels == 16777216 && p.image_mean[2] == 0.5f &&
          p.image_std[0] == 0.5f && p.rescale_factor == 1.0 / 255, "Qwen3-VL's file");
    load_dir("minmax", &p);
    CHECK(p.patch_size == 14 && p.min_pixels == 3136 && p.max_pixels == 20000 &&
          p.image_mean[0] == 0.48145466f, "min_pixels / max_pixels");
    load_dir("rescale", &p);
    CHECK(!p.do_normalize && p.do_rescale && p.rescale_factor == 0.00390625 &&
          p.max_pixels == 200000, "processor_config.json's image_processor");
    CHECK(parse("{\"size\": {\"shortest_edge\": 100, \"longest_edge\": 200}, \"min_pixels\": 50}",
                &p) == 0 && p.min_pixels == 50 && p.max_pixels == 200,
          "min_pixels over size: %s", orin_error());
    CHECK(parse("{\"size\": null, \"max_pixels\": null}", &p) == 0 && p.min_pixels == 3136 &&
          p.max_pixels == 1003520, "null keys keep the defaults: %s", orin_error());
    CHECK(parse("{\"image_mean\": 0.25, \"image_std\": [2]}", &p) == 0 &&
          p.image_mean[0] == 0.25f && p.image_mean[2] == 0.25f && p.image_std[1] == 2.0f,
          "one number for every channel: %s", orin_error());
    CHECK(parse("{\"do_resize\": false, \"size\": {\"shortest_edge\": 1}}", &p) == 0 &&
          !p.do_resize, "no bounds needed without resizing: %s", orin_error());
    CHECK(parse("{\"image_processor_type\": \"Qwen2VLImageProcessorPil\", \"crop_size\": 3}",
                &p) == 0, "the family's other names, other processors' keys: %s",
          orin_error());
}

static void test_config_errors(void)
{
    expect_config_error("[]", "not a JSON object");
    expect_config_error("{\"patch_size\": 0}", "patch_size = 0: must be positive");
    expect_config_error("{\"merge_size\": 1.5}", "merge_size = 1.5: not an integer");
    expect_config_error("{\"temporal_patch_size\": \"2\"}", "temporal_patch_size");
    expect_config_error("{\"size\": 448}", "size = 448");
    expect_config_error("{\"size\": {\"shortest_edge\": 3136}}", "longest_edge");
    expect_config_error("{\"size\": {\"min_pixels\": 3136, \"max_pixels\": 20000}}",
                        "shortest_edge");
    expect_config_error("{\"max_pixels\": 0}", "both positive");
    expect_config_error("{\"min_pixels\": -5}", "must not be negative");
    expect_config_error("{\"image_mean\": [0.5, 0.5]}", "image_mean");
    expect_config_error("{\"image_std\": 0}", "image_std holds a zero");
    expect_config_error("{\"resample\": 2}", "resample = 2: only 3 (bicubic)");
    expect_config_error("{\"do_rescale\": \"yes\"}", "do_rescale = \"yes\": not true or false");
    expect_config_error("{\"rescale_factor\": 0}", "rescale_factor = 0: not a non-zero number");
    expect_config_error("{\"rescale_factor\": 1e-300}", "rescale_factor = 1e-300");
    expect_config_error("{\"image_mean\": [1, 2, 1e39]}", "not finite as float32");
    expect_config_error("{\"image_processor_type\": \"CLIPImageProcessor\"}",
                        "image_processor_type = \"CLIPImageProcessor\"");
    expect_config_error("{\"image_processor\": {\"patch_size\": -1}}", "patch_size = -1");

    /* Files: a folder without one, a processor_config.json that is not JSON. */
    char *tmp = test_tmpdir("vision-config");
    orin_image_processor p;
    orin_error_clear();
    CHECK(orin_image_processor_load(tmp, &p) == -1 &&
              strstr(orin_error(), "preprocessor_config.json"),
          "a folder without a config: %s", orin_error());
    char path[1024];
    snprintf(path, sizeof path, "%s/processor_config.json", tmp);
    test_write_file(path, "{oops", 5);
    orin_error_clear();
    CHECK(orin_image_processor_load(tmp, &p) == -1 && strstr(orin_error(), path),
          "a broken processor_config.json: %s", orin_error());
    remove(path);
    remove(tmp);
    free(tmp);
}

static void test_config(void)
{
    test_config_values();
    test_config_errors();
}

/* ---- errors ---- */

/* stderr goes to a file while a call runs: the error must be the one line of
 * orin_error(), not library chatter. */
static int saved_stderr = -1;
static char stderr_path[1024];

static void stderr_to_file(void)
{
    fflush(stderr);
    saved_stderr = dup(2);
    int fd = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
}

static long stderr_restore(void)
{
    struct stat st;
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    return stat(stderr_path, &st) == 0 ? (long)st.st_size : -1;
}

static void expect_one_line(const char *what, int rc, long chatter, const char *file,
                            const char *want)
{
    const char *msg = orin_error();
    CHECK(rc == -1, "%s: rc %d", what, rc);
    CHECK(strstr(msg, file) && strstr(msg, want), "%s: error \"%s\" lacks \"%s\" or \"%s\"",
          what, msg, file, want);
    CHECK(!strchr(msg, '\n'), "%s: the error is not one line", what);
    CHECK(chatter == 0, "%s: %ld bytes written to stderr", what, chatter);
    printf("%-32s %s\n", what, msg);
}

static void expect_decode_error(const char *sub, const char *name, const char *want)
{
    char path[1024];
    orin_image img = {.width = 7, .rgb = (uint8_t *)1};
    orin_image_processor proc;
    orin_image_patches out = {.n_patches = 7, .pixel_values = (float *)1};
    orin_image_processor_defaults(&proc);
    snprintf(path, sizeof path, "%s/%s/%s", data_dir, sub, name);
    orin_error_clear();
    stderr_to_file();
    int rc = orin_image_decode(path, &img);
    long chatter = stderr_restore();
    expect_one_line(name, rc, chatter, path, want);
    CHECK(img.rgb == NULL && img.width == 0, "%s: an image handed out on failure", name);
    /* The same through the one-call path. */
    orin_error_clear();
    stderr_to_file();
    rc = orin_image_load(&proc, path, 0, &out);
    chatter = stderr_restore();
    CHECK(rc == -1 && strstr(orin_error(), path) && strstr(orin_error(), want) && chatter == 0,
          "orin_image_load %s: %s", name, orin_error());
    CHECK(out.pixel_values == NULL && out.n_patches == 0, "%s: patches handed out", name);
}

static void expect_preprocess_error(const orin_image_processor *p, const char *name,
                                    const char *want)
{
    char path[1024], what[128];
    orin_image_patches out;
    snprintf(path, sizeof path, "%s/images/%s", data_dir, name);
    snprintf(what, sizeof what, "%s (preprocess)", name);
    orin_error_clear();
    stderr_to_file();
    int rc = orin_image_load(p, path, 0, &out);
    long chatter = stderr_restore();
    expect_one_line(what, rc, chatter, path, want);
    CHECK(out.pixel_values == NULL, "%s: patches handed out on failure", name);
}

static void test_errors(void)
{
    char *tmp = test_tmpdir("vision-errors");
    snprintf(stderr_path, sizeof stderr_path, "%s/stderr", tmp);
    expect_decode_error("bad", "truncated.jpg", "truncated");
    expect_decode_error("bad", "truncated.png", "truncated");
    expect_decode_error("bad", "bad_crc.png", "CRC");
    expect_decode_error("bad", "bad_zlib.png", "PNG: ");
    expect_decode_error("bad", "zero_width.png", "empty (0x4)");
    expect_decode_error("bad", "zero_height.jpg", "Empty JPEG image");
    expect_decode_error("bad", "huge_20000x20000.png", "20000x20000 is more than 178956970 pixels");
    expect_decode_error("bad", "huge_20000x20000.jpg", "20000x20000 is more than 178956970 pixels");
    expect_decode_error("bad", "cmyk.jpg", "CMYK JPEG images are not supported");
    expect_decode_error("bad", "empty.png", "the file is empty");
    expect_decode_error("bad", "text.png", "not a JPEG or PNG image");
    expect_decode_error("bad", "image.gif", "a GIF image: only JPEG and PNG are supported");
    expect_decode_error("bad", "missing.png", "No such file");

    orin_image_processor p;
    orin_image_processor_defaults(&p);
    expect_preprocess_error(&p, "wide_250x1.png", "absolute aspect ratio must be smaller than "
                            "200, got 250");
    p.do_convert_rgb = false;
    expect_preprocess_error(&p, "rgba_84x56.png", "not an RGB image, and do_convert_rgb is false");
    expect_preprocess_error(&p, "rgb_trns_interlaced_84x84.png", "do_convert_rgb is false");
    p.do_convert_rgb = true;
    p.do_resize = false;
    expect_preprocess_error(&p, "rgb16_150x100.png", "not a multiple of patch_size * merge_size");
    remove(stderr_path);
    remove(tmp);
    free(tmp);
}

static int load_refs(const char *refs_bin)
{
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/refs.json", data_dir);
    char *text = test_read_file(path, &len);
    refs = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    blob = (uint8_t *)test_read_file(refs_bin, &blob_len);
    if (!refs || !blob) {
        fprintf(stderr, "cannot read %s or %s\n", path, refs_bin);
        return -1;
    }
    if ((double)blob_len != item(refs, "blob_bytes")->valuedouble) {
        fprintf(stderr, "%s: %zu bytes, refs.json says %g\n", refs_bin, blob_len,
                item(refs, "blob_bytes")->valuedouble);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } groups[] = {
        {"cases", test_cases},           {"decode", test_decode}, {"smart_resize", test_smart_resize},
        {"config", test_config},         {"errors", test_errors},
    };
    if (argc != 4) {
        fprintf(stderr, "usage: %s cases|decode|smart_resize|config|errors DATA_DIR REFS_BIN\n",
                argv[0]);
        return 2;
    }
    data_dir = argv[2];
    if (load_refs(argv[3]))
        return 1;
    int rc = 2;
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        if (strcmp(argv[1], groups[i].name) == 0) {
            groups[i].run();
            rc = test_finish();
        }
    }
    if (rc == 2)
        fprintf(stderr, "unknown group %s\n", argv[1]);
    cJSON_Delete(refs);
    free(blob);
    return rc;
}
