/* A decoded image into pixel_values and image_grid_thw, as transformers'
 * Qwen2VLImageProcessor (torchvision backend) computes them: smart_resize,
 * the uint8 bicubic resize (image_resize.c), rescale and normalise, then the
 * patches in the order of its patchify. See orin/image.h. */
#include "orin/image.h"
#include "orin/cpu_util.h"
#include "orin/error.h"
#include "vision_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ASPECT_RATIO 200.0

int orin_image_smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                            int64_t max_pixels, int64_t *out_height, int64_t *out_width)
{
    if (height <= 0 || width <= 0 || factor <= 0 || height > INT32_MAX || width > INT32_MAX)
        return orin_error_set("image %lldx%lld: no size to resize from", (long long)width,
                              (long long)height);
    double ratio = (double)(height > width ? height : width) / (double)(height < width ? height
                                                                                        : width);
    if (ratio > MAX_ASPECT_RATIO)
        return orin_error_set("image %lldx%lld: absolute aspect ratio must be smaller than %g, "
                              "got %g", (long long)width, (long long)height, MAX_ASPECT_RATIO,
                              ratio);
    /* Python's round() rounds halves to even, as rint() does by default. */
    int64_t h = (int64_t)rint((double)height / factor) * factor;
    int64_t w = (int64_t)rint((double)width / factor) * factor;
    if (h * w > max_pixels) {
        double beta = sqrt((double)(height * width) / (double)max_pixels);
        h = (int64_t)floor((double)height / beta / (double)factor) * factor;
        w = (int64_t)floor((double)width / beta / (double)factor) * factor;
        h = h > factor ? h : factor;
        w = w > factor ? w : factor;
    } else if (h * w < min_pixels) {
        double beta = sqrt((double)min_pixels / (double)(height * width));
        h = (int64_t)ceil((double)height * beta / (double)factor) * factor;
        w = (int64_t)ceil((double)width * beta / (double)factor) * factor;
    }
    if (h <= 0 || w <= 0 || (double)h * (double)w > (double)ORIN_IMAGE_MAX_PIXELS)
        return orin_error_set("image %lldx%lld: resizing to %lldx%lld is out of range",
                              (long long)width, (long long)height, (long long)w, (long long)h);
    *out_height = h;
    *out_width = w;
    return 0;
}

/* The value of each 8-bit level of each channel. transformers fuses rescale
 * and normalise into (x - mean / rescale) / (std / rescale), the mean and std
 * float32 tensors scaled in float32; alone, each is one float32 operation. */
static void level_table(const orin_image_processor *p, float table[3][256])
{
    float k = (float)(1.0 / p->rescale_factor);
    for (int c = 0; c < 3; c++) {
        float mean = p->image_mean[c], std = p->image_std[c];
        if (p->do_rescale && p->do_normalize) {
            mean = mean * k;
            std = std * k;
        }
        for (int v = 0; v < 256; v++) {
            float x = (float)v;
            if (p->do_normalize)
                x = (x - mean) / std;
            else if (p->do_rescale)
                x = x * (float)p->rescale_factor;
            table[c][v] = x;
        }
    }
}

/* patchify: patch (py, px) of the image is row
 * ((py / m * (grid_w / m) + px / m) * m + py % m) * m + px % m, i.e. windows
 * of m x m patches row-major, the patches of a window row-major; within a row
 * [channel][temporal][y][x], the temporal copies identical. */
typedef struct patchify_job {
    const orin_image_processor *p;
    const uint8_t *rgb;
    int32_t width;
    const float (*table)[256];
    orin_image_patches *out;
} patchify_job;

/* One row of merge windows (task = its index): m patch rows of the image. */
static int patchify_window_row(void *ctx, int worker, int64_t by)
{
    const patchify_job *job = ctx;
    const orin_image_processor *p = job->p;
    const orin_image_patches *out = job->out;
    const int32_t ps = p->patch_size, m = p->merge_size, t_n = p->temporal_patch_size;
    const int32_t windows_wide = out->grid_w / m;
    const size_t plane = (size_t)ps * ps;
    float *row = out->pixel_values + (size_t)by * windows_wide * m * m * out->patch_dim;
    (void)worker;
    for (int32_t bx = 0; bx < windows_wide; bx++)
        for (int32_t my = 0; my < m; my++)
            for (int32_t mx = 0; mx < m; mx++, row += out->patch_dim) {
                size_t y0 = (size_t)(by * m + my) * ps, x0 = (size_t)(bx * m + mx) * ps;
                for (int c = 0; c < 3; c++) {
                    float *dst = row + (size_t)c * t_n * plane;
                    for (int32_t y = 0; y < ps; y++) {
                        const uint8_t *src = job->rgb + ((y0 + y) * job->width + x0) * 3 + c;
                        for (int32_t x = 0; x < ps; x++)
                            dst[(size_t)y * ps + x] = job->table[c][src[3 * x]];
                    }
                    for (int32_t t = 1; t < t_n; t++)
                        memcpy(dst + t * plane, dst, plane * sizeof *dst);
                }
            }
    return 0;
}

/* On the host's cores (a 1024 x 768 image writes 19 MB of pixel_values). */
static int patchify(const orin_image_processor *p, const uint8_t *rgb, int32_t width,
                    const float table[3][256], orin_image_patches *out)
{
    patchify_job job = {.p = p, .rgb = rgb, .width = width, .table = table, .out = out};
    return orin_cpu_parallel_for(orin_cpu_threads(NULL), out->grid_h / p->merge_size,
                                 patchify_window_row, &job);
}

/* The resized size, or the image's own when do_resize is off (patchify then
 * needs whole merge windows). */
static int target_size(const orin_image_processor *p, const orin_image *img, int64_t cap,
                       int64_t *h, int64_t *w)
{
    int64_t factor = (int64_t)p->patch_size * p->merge_size;
    if (!p->do_resize) {
        *h = img->height;
        *w = img->width;
        if (*h % factor || *w % factor)
            return orin_error_set("image %dx%d: do_resize is false and the size is not a "
                                  "multiple of patch_size * merge_size = %lld", img->width,
                                  img->height, (long long)factor);
        return 0;
    }
    int64_t max_pixels = cap > 0 && cap < p->max_pixels ? cap : p->max_pixels;
    return orin_image_smart_resize(img->height, img->width, factor, p->min_pixels, max_pixels, h,
                                   w);
}

static int check_processor(const orin_image_processor *p)
{
    if (p->patch_size <= 0 || p->merge_size <= 0 || p->temporal_patch_size <= 0 ||
        p->patch_size > 1 << 16 || p->merge_size > 1 << 16 || p->temporal_patch_size > 1 << 16)
        return orin_error_set("image processor: patch_size %d, merge_size %d, "
                              "temporal_patch_size %d: each must be in 1..65536", p->patch_size,
                              p->merge_size, p->temporal_patch_size);
    return 0;
}

static int alloc_patches(const orin_image_processor *p, int64_t h, int64_t w,
                         orin_image_patches *out)
{
    out->resized_height = (int32_t)h;
    out->resized_width = (int32_t)w;
    out->grid_t = 1;
    out->grid_h = (int32_t)(h / p->patch_size);
    out->grid_w = (int32_t)(w / p->patch_size);
    out->n_patches = (int64_t)out->grid_h * out->grid_w;
    uint64_t dim = 3ull * (uint64_t)p->temporal_patch_size * (uint64_t)p->patch_size *
                   (uint64_t)p->patch_size;
    if (dim > INT32_MAX || (uint64_t)out->n_patches > SIZE_MAX / sizeof(float) / dim)
        return orin_error_set("image %lldx%lld: pixel_values too large", (long long)w,
                              (long long)h);
    out->patch_dim = (int32_t)dim;
    out->pixel_values = vision_alloc((size_t)out->n_patches * dim * sizeof(float));
    if (!out->pixel_values)
        return orin_error_set("image %lldx%lld: out of memory for pixel_values [%lld, %d]",
                              (long long)w, (long long)h, (long long)out->n_patches,
                              out->patch_dim);
    return 0;
}

int orin_image_preprocess(const orin_image_processor *p, const orin_image *img, int64_t max_pixels,
                          orin_image_patches *out)
{
    int64_t h, w;
    uint8_t *resized = NULL;
    float table[3][256];
    memset(out, 0, sizeof *out);
    if (check_processor(p))
        return -1;
    if (!p->do_convert_rgb && !img->was_rgb)
        return orin_error_set("image %dx%d: not an RGB image, and do_convert_rgb is false",
                              img->width, img->height);
    if (target_size(p, img, max_pixels, &h, &w))
        return -1;
    if (h != img->height || w != img->width) {
        resized = vision_alloc((size_t)h * (size_t)w * 3);
        if (!resized)
            return orin_error_set("image %dx%d: out of memory resizing to %lldx%lld", img->width,
                                  img->height, (long long)w, (long long)h);
        if (vision_resize_bicubic(img->rgb, img->width, img->height, resized, (int32_t)w,
                                  (int32_t)h))
            goto fail;
    }
    if (alloc_patches(p, h, w, out))
        goto fail;
    level_table(p, table);
    if (patchify(p, resized ? resized : img->rgb, (int32_t)w, table, out))
        goto fail;
    free(resized);
    return 0;
fail:
    free(resized);
    orin_image_patches_free(out);
    return -1;
}

void orin_image_patches_free(orin_image_patches *patches)
{
    if (!patches)
        return;
    free(patches->pixel_values);
    memset(patches, 0, sizeof *patches);
}

int orin_image_load(const orin_image_processor *p, const char *path, int64_t max_pixels,
                    orin_image_patches *out)
{
    orin_image img;
    memset(out, 0, sizeof *out);
    if (orin_image_decode(path, &img))
        return -1;
    int rc = orin_image_preprocess(p, &img, max_pixels, out);
    orin_image_free(&img);
    if (rc)
        orin_error_prefix("%s: ", path);
    return rc;
}
