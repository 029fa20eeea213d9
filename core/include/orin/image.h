/* Image input for the vision-language models (Qwen2-VL, Qwen2.5-VL, Qwen3-VL):
 * an image file becomes the `pixel_values` and `image_grid_thw` that
 * transformers' image processor for these models gives.
 *
 * The reference is transformers' default image processor class for Qwen3-VL,
 * Qwen2VLImageProcessor on its torchvision backend (AutoImageProcessor picks it
 * whenever torchvision is installed), called on the PIL image of the file:
 *
 *   - decoding as PIL (Image.open) and the processor's RGB conversion
 *     (transformers.image_transforms.convert_to_rgb): an image with an alpha
 *     channel or a tRNS transparency is composited onto white, every other
 *     mode converted as PIL's convert("RGB") does it, PIL's quirks included
 *     (16-bit grey is clipped to 255, other 16-bit samples keep their high
 *     byte). EXIF orientation is not applied: the processor does not apply it
 *     to a PIL image either.
 *   - smart_resize to multiples of patch_size * merge_size within the pixel
 *     bounds, then torchvision's resize of the uint8 image: antialiased
 *     bicubic (Keys a = -0.5), separable, horizontal pass first, in torch's
 *     fixed-point arithmetic, so that the resized pixels are the same bytes.
 *   - rescale and normalise fused as transformers fuses them, in float:
 *     (x - mean / rescale_factor) / (std / rescale_factor).
 *   - the patches in the processor's order: windows of merge_size x merge_size
 *     patches, row-major, each patch flattened as [channel][temporal][y][x]
 *     with the still image repeated temporal_patch_size times.
 *
 * Files: JPEG (baseline, progressive; grey or colour) and PNG (every colour
 * type and bit depth, interlaced or not). Errors are one line naming the file
 * (orin_error_set) and -1; nothing is left allocated. */
#ifndef ORIN_IMAGE_H
#define ORIN_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Larger images are refused before their pixels are allocated: PIL's own
 * limit (Image.MAX_IMAGE_PIXELS * 2, where it raises DecompressionBombError). */
#define ORIN_IMAGE_MAX_PIXELS 178956970LL

/* A decoded image, converted to 8-bit RGB. */
typedef struct orin_image {
    int32_t width, height;
    uint8_t *rgb;  /* height rows of width R, G, B bytes, top row first */
    /* The file held plain RGB (no alpha, no transparency), so the RGB
     * conversion changed nothing: a processor with do_convert_rgb = false
     * accepts only these (transformers would keep 1, 2 or 4 channels). */
    bool was_rgb;
} orin_image;

/* Decodes a JPEG or PNG file (recognised by its signature, not its name).
 * On failure *out is left empty and the error names the file: missing or
 * unreadable file, neither JPEG nor PNG, a truncated or corrupt file, a zero
 * width or height, more than ORIN_IMAGE_MAX_PIXELS pixels, or a JPEG colour
 * space PIL would not give as RGB (CMYK, YCCK). */
int orin_image_decode(const char *path, orin_image *out);
/* The same from memory; `name` labels errors. max_pixels > 0 lowers the
 * pixel cap (a service that wants smaller images, a fuzzer). */
int orin_image_decode_mem(const void *data, size_t len, const char *name, int64_t max_pixels,
                          orin_image *out);
void orin_image_free(orin_image *img);

/* A model folder's image processor settings, with transformers' meaning. */
typedef struct orin_image_processor {
    int32_t patch_size;          /* pixels per patch side */
    int32_t temporal_patch_size; /* frames per patch: a still image is repeated */
    int32_t merge_size;          /* patches per side merged into one LLM token */
    int64_t min_pixels;          /* size.shortest_edge (or min_pixels) */
    int64_t max_pixels;          /* size.longest_edge (or max_pixels) */
    float image_mean[3], image_std[3];
    double rescale_factor;
    int32_t resample;            /* PIL's code; 3 (bicubic) is the one supported */
    bool do_resize, do_rescale, do_normalize, do_convert_rgb;
} orin_image_processor;

/* Qwen2VLImageProcessor's class defaults: what a key left out of the file
 * means (patch 14, merge 2, temporal 2, pixels 56*56 .. 28*28*1280, CLIP
 * mean and std, rescale 1/255, bicubic, every step on). */
void orin_image_processor_defaults(orin_image_processor *p);

/* Reads the processor settings of a model folder: processor_config.json's
 * "image_processor" object where there is one, else preprocessor_config.json
 * (transformers' order). The pixel bounds are `size` {shortest_edge,
 * longest_edge}, each overridden by a top-level min_pixels / max_pixels; both
 * must then be set. Errors name the file and the key. */
int orin_image_processor_load(const char *model_dir, orin_image_processor *out);
/* The same from a JSON object's text; `name` labels errors. */
int orin_image_processor_parse(const char *json, size_t len, const char *name,
                               orin_image_processor *out);

/* transformers' smart_resize: the size (multiples of factor) that an image of
 * height x width is resized to. -1 with an error when the aspect ratio is
 * more than 200, as in Python. */
int orin_image_smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                            int64_t max_pixels, int64_t *out_height, int64_t *out_width);

/* The processor's output for one image. */
typedef struct orin_image_patches {
    /* pixel_values [n_patches, patch_dim], row-major: patch_dim =
     * 3 * temporal_patch_size * patch_size^2, n_patches = grid_t * grid_h *
     * grid_w. The LLM sees n_patches / merge_size^2 image tokens. */
    float *pixel_values;
    int64_t n_patches;
    int32_t patch_dim;
    int32_t grid_t, grid_h, grid_w; /* image_grid_thw; grid_t is 1 for an image */
    int32_t resized_width, resized_height;
} orin_image_patches;

/* Preprocesses a decoded image. max_pixels > 0 lowers the processor's
 * max_pixels for this call (a caller's cap, as --max-pixels); 0 keeps it.
 * Errors: an aspect ratio of more than 200, do_resize = false with a size that
 * is not a multiple of patch_size * merge_size, do_convert_rgb = false with an
 * image that was not RGB, an output too large to allocate. */
int orin_image_preprocess(const orin_image_processor *p, const orin_image *img, int64_t max_pixels,
                          orin_image_patches *out);
void orin_image_patches_free(orin_image_patches *patches);

/* Decode and preprocess in one call; every error names the file. */
int orin_image_load(const orin_image_processor *p, const char *path, int64_t max_pixels,
                    orin_image_patches *out);

#ifdef __cplusplus
}
#endif
#endif
