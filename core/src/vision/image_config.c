/* preprocessor_config.json (see orin/image.h). Keys mean what they mean to
 * transformers' Qwen2VLImageProcessor (models/qwen2_vl,
 * image_processing_qwen2_vl.py), the class Qwen2-VL, Qwen2.5-VL and Qwen3-VL
 * folders name:
 *   - a key left out (or null) takes the class default;
 *   - `size` replaces the default size as a whole; top-level min_pixels /
 *     max_pixels then override its shortest_edge / longest_edge; resizing
 *     needs both, non-zero (transformers raises otherwise);
 *   - image_mean / image_std: one number or one per channel.
 * Keys of other processors are ignored, as transformers ignores them; an
 * image_processor_type naming another processor family is an error. */
#include "orin/image.h"
#include "orin/error.h"
#include "orin/file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_FILE_MAX (1u << 20)
#define PIL_BICUBIC 3

void orin_image_processor_defaults(orin_image_processor *p)
{
    /* OPENAI_CLIP_MEAN / OPENAI_CLIP_STD of transformers.image_utils */
    *p = (orin_image_processor){
        .patch_size = 14,
        .temporal_patch_size = 2,
        .merge_size = 2,
        .min_pixels = 56 * 56,
        .max_pixels = 28 * 28 * 1280,
        .image_mean = {0.48145466f, 0.4578275f, 0.40821073f},
        .image_std = {0.26862954f, 0.26130258f, 0.27577711f},
        .rescale_factor = 1.0 / 255,
        .resample = PIL_BICUBIC,
        .do_resize = true,
        .do_rescale = true,
        .do_normalize = true,
        .do_convert_rgb = true,
    };
}

static bool absent(const cJSON *v)
{
    return !v || cJSON_IsNull(v);
}

static int bad_value(const char *name, const char *key, const cJSON *v, const char *why)
{
    char *s = cJSON_PrintUnformatted(v);
    char val[64];
    snprintf(val, sizeof val, "%s", s ? s : "?");
    free(s);
    return orin_error_set("%s: %s = %s: %s", name, key, val, why);
}

/* An integer >= min, left as it is when the key is absent or null. */
static int get_int(const cJSON *obj, const char *key, const char *label, const char *name,
                   int64_t min, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (absent(v))
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        fabs(v->valuedouble) > 9e15)
        return bad_value(name, label, v, "not an integer");
    if (v->valuedouble < (double)min)
        return bad_value(name, label, v, min > 0 ? "must be positive" : "must not be negative");
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int get_int32(const cJSON *obj, const char *key, const char *name, int32_t *out)
{
    int64_t v = *out;
    if (get_int(obj, key, key, name, 1, &v))
        return -1;
    if (v > 1 << 16)
        return bad_value(name, key, cJSON_GetObjectItemCaseSensitive(obj, key), "too large");
    *out = (int32_t)v;
    return 0;
}

static int get_bool(const cJSON *obj, const char *key, const char *name, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (absent(v))
        return 0;
    if (!cJSON_IsBool(v))
        return bad_value(name, key, v, "not true or false");
    *out = cJSON_IsTrue(v);
    return 0;
}

/* One number for every channel, or a list of one or three. */
static int get_channels(const cJSON *obj, const char *key, const char *name, float out[3])
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (absent(v))
        return 0;
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (!cJSON_IsNumber(v) && !(cJSON_IsArray(v) && (n == 1 || n == 3)))
        return bad_value(name, key, v, "not a number or a list of 1 or 3 numbers");
    for (int c = 0; c < 3; c++) {
        const cJSON *x = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, n == 1 ? 0 : c) : v;
        /* transformers holds them as float32: a value past its range is inf. */
        if (!cJSON_IsNumber(x) || !isfinite((float)x->valuedouble))
            return bad_value(name, key, v, "not finite as float32");
        out[c] = (float)x->valuedouble;
    }
    return 0;
}

static int check_type(const cJSON *root, const char *name)
{
    static const char family[] = "Qwen2VLImageProcessor";
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "image_processor_type");
    if (absent(v))
        return 0;
    if (!cJSON_IsString(v) || strncmp(v->valuestring, family, sizeof family - 1) != 0)
        return bad_value(name, "image_processor_type", v,
                         "orin preprocesses images as Qwen2VLImageProcessor does");
    return 0;
}

/* size, then min_pixels / max_pixels over it. */
static int get_bounds(const cJSON *root, const char *name, orin_image_processor *p)
{
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(root, "size");
    if (!absent(size)) {
        if (!cJSON_IsObject(size))
            return bad_value(name, "size", size,
                             "must be an object with shortest_edge and longest_edge");
        p->min_pixels = p->max_pixels = 0;
        if (get_int(size, "shortest_edge", "size.shortest_edge", name, 0, &p->min_pixels) ||
            get_int(size, "longest_edge", "size.longest_edge", name, 0, &p->max_pixels))
            return -1;
    }
    if (get_int(root, "min_pixels", "min_pixels", name, 0, &p->min_pixels) ||
        get_int(root, "max_pixels", "max_pixels", name, 0, &p->max_pixels))
        return -1;
    if (p->do_resize && (p->min_pixels == 0 || p->max_pixels == 0))
        return orin_error_set("%s: size needs shortest_edge and longest_edge (or min_pixels and "
                              "max_pixels), both positive", name);
    return 0;
}

static int check_values(const char *name, const orin_image_processor *p, int64_t resample)
{
    /* Used as float32, and its inverse too when fused with the normalisation. */
    float r = (float)p->rescale_factor, inverse = (float)(1.0 / p->rescale_factor);
    if (p->do_rescale && (!isfinite(r) || r == 0 || !isfinite(inverse)))
        return orin_error_set("%s: rescale_factor = %g: not a non-zero number within float32's "
                              "range", name, p->rescale_factor);
    for (int c = 0; p->do_normalize && c < 3; c++)
        if (p->image_std[c] == 0)
            return orin_error_set("%s: image_std holds a zero (division by zero)", name);
    if (p->do_resize && resample != PIL_BICUBIC)
        return orin_error_set("%s: resample = %lld: only 3 (bicubic) is supported", name,
                              (long long)resample);
    return 0;
}

static int parse_root(const cJSON *root, const char *name, orin_image_processor *p)
{
    int64_t resample = p->resample;
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "rescale_factor");
    if (!absent(rf) && !cJSON_IsNumber(rf))
        return bad_value(name, "rescale_factor", rf, "not a number");
    if (!absent(rf))
        p->rescale_factor = rf->valuedouble;
    if (check_type(root, name) || get_int32(root, "patch_size", name, &p->patch_size) ||
        get_int32(root, "temporal_patch_size", name, &p->temporal_patch_size) ||
        get_int32(root, "merge_size", name, &p->merge_size) ||
        get_bool(root, "do_resize", name, &p->do_resize) ||
        get_bool(root, "do_rescale", name, &p->do_rescale) ||
        get_bool(root, "do_normalize", name, &p->do_normalize) ||
        get_bool(root, "do_convert_rgb", name, &p->do_convert_rgb) ||
        get_channels(root, "image_mean", name, p->image_mean) ||
        get_channels(root, "image_std", name, p->image_std) ||
        get_int(root, "resample", "resample", name, 0, &resample) || get_bounds(root, name, p))
        return -1;
    if (check_values(name, p, resample))
        return -1;
    p->resample = (int32_t)resample;
    return 0;
}

/* A parsed file: its keys, or processor_config.json's nested ones. */
static int parse_doc(const cJSON *root, const char *name, orin_image_processor *out)
{
    orin_image_processor_defaults(out);
    if (!cJSON_IsObject(root))
        return orin_error_set("%s: not a JSON object", name);
    const cJSON *nested = cJSON_GetObjectItemCaseSensitive(root, "image_processor");
    return parse_root(cJSON_IsObject(nested) ? nested : root, name, out);
}

int orin_image_processor_parse(const char *json, size_t len, const char *name,
                               orin_image_processor *out)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    int rc = parse_doc(root, name, out);
    cJSON_Delete(root);
    return rc;
}

/* processor_config.json, when it has an "image_processor" object (a file
 * without one is skipped, as transformers skips it). */
static int load_nested(const char *model_dir, orin_image_processor *out, bool *found)
{
    char path[4096];
    size_t len;
    *found = false;
    snprintf(path, sizeof path, "%s/processor_config.json", model_dir);
    char *text = orin_read_file(path, CONFIG_FILE_MAX, &len);
    if (!text)
        return errno == ENOENT ? 0 : -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    *found = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "image_processor"));
    int rc = !cJSON_IsObject(root) || *found ? parse_doc(root, path, out) : 0;
    cJSON_Delete(root);
    return rc;
}

int orin_image_processor_load(const char *model_dir, orin_image_processor *out)
{
    char path[4096];
    size_t len;
    bool found;
    orin_image_processor_defaults(out);
    int rc = load_nested(model_dir, out, &found);
    if (rc || found)
        return rc;
    snprintf(path, sizeof path, "%s/preprocessor_config.json", model_dir);
    char *text = orin_read_file(path, CONFIG_FILE_MAX, &len);
    if (!text)
        return -1;
    rc = orin_image_processor_parse(text, len, path, out);
    free(text);
    return rc;
}
