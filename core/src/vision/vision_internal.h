/* Private to core/src/vision: the resampler that image_preprocess.c calls. */
#ifndef ORIN_VISION_INTERNAL_H
#define ORIN_VISION_INTERNAL_H

#include <stdint.h>

/* Resizes an 8-bit RGB image (rows of width R, G, B bytes) from width x
 * height to out_width x out_height into out, as torchvision's resize of a
 * uint8 tensor with bicubic interpolation and antialias on does on the CPU
 * (see image_resize.c). Returns 0, or -1 when out of memory (error set). */
int vision_resize_bicubic(const uint8_t *src, int32_t width, int32_t height, uint8_t *out,
                          int32_t out_width, int32_t out_height);

#endif
