/* Private to core/src/vision: the resampler that image_preprocess.c calls,
 * and the allocator of the large buffers. */
#ifndef ORIN_VISION_INTERNAL_H
#define ORIN_VISION_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* malloc for a buffer that is written in full right after: decoded pixels,
 * pixel_values (19 MB for a 1,024 x 768 image). A fresh buffer costs a page
 * fault per 4 KiB at its first touch, 5-10 ms for those 19 MB on a VM: more
 * than the work that fills them. Past 2 MiB the buffer is advised
 * MADV_HUGEPAGE, so that it faults once per 2 MiB wherever the kernel has
 * transparent huge pages (enabled = always or madvise); see image_alloc.c.
 * free() releases it; NULL when out of memory. */
void *vision_alloc(size_t n);

/* A PNG's image data, inflated with libdeflate and unfiltered: `data` is the
 * first IDAT chunk's data, just past its length and type (where
 * png_read_info leaves the file), `len` the bytes from there to the end of
 * the file. Non-interlaced images of 8 or 16-bit samples: height rows of
 * rowbytes bytes, bpp bytes a pixel. Returns the rows, packed from the
 * buffer's start (a vision_alloc buffer of height * (rowbytes + 1) bytes),
 * or NULL where libpng must read the file instead: a file it might judge
 * differently, or no memory (see image_png_inflate.c). Sets no error. */
uint8_t *vision_png_inflate(const uint8_t *data, size_t len, uint32_t height, size_t rowbytes,
                            size_t bpp);

/* Resizes an 8-bit RGB image (rows of width R, G, B bytes) from width x
 * height to out_width x out_height into out, as torchvision's resize of a
 * uint8 tensor with bicubic interpolation and antialias on does on the CPU
 * (see image_resize.c). Returns 0, or -1 when out of memory (error set). */
int vision_resize_bicubic(const uint8_t *src, int32_t width, int32_t height, uint8_t *out,
                          int32_t out_width, int32_t out_height);

#endif
