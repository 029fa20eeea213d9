/* Image files (JPEG, PNG): any bytes decode to an RGB image or fail with one
 * error line, and a decoded image goes through a small image processor
 * (patch 4, 64 to 1024 pixels, though smart_resize keeps one side at least
 * a window wide whatever the bound) the same way. The pixel cap is lowered to 1 M
 * so that a tiny file claiming a huge image stays within the fuzzer's memory
 * (what the cap refuses is the check under test, not the allocation). */
#include "fuzz_util.h"

#include "orin/error.h"
#include "orin/image.h"

#define FUZZ_MAX_PIXELS (1 << 20)

static void preprocess(const orin_image *img)
{
    orin_image_processor p;
    orin_image_patches out;
    orin_image_processor_defaults(&p);
    p.patch_size = 4;
    p.min_pixels = 64;
    p.max_pixels = 1024;
    if (orin_image_preprocess(&p, img, 0, &out) != 0) {
        fuzz_check_error(orin_error());
        FUZZ_ASSERT(out.pixel_values == NULL, "patches handed out on failure");
        return;
    }
    FUZZ_ASSERT(out.grid_t == 1 && out.grid_h > 0 && out.grid_w > 0 && out.grid_h % 2 == 0 &&
                out.grid_w % 2 == 0, "grid %d %d %d", out.grid_t, out.grid_h, out.grid_w);
    FUZZ_ASSERT(out.n_patches == (int64_t)out.grid_h * out.grid_w && out.patch_dim == 96 &&
                out.resized_width == out.grid_w * 4 && out.resized_height == out.grid_h * 4,
                "shape");
    for (int64_t i = 0; i < out.n_patches * out.patch_dim; i++)
        FUZZ_ASSERT(out.pixel_values[i] >= -2.0f && out.pixel_values[i] <= 2.2f,
                    "value %g out of the normalised range", out.pixel_values[i]);
    orin_image_patches_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    orin_image img;
    if (orin_image_decode_mem(data, size, "image", FUZZ_MAX_PIXELS, &img) != 0) {
        fuzz_check_error(orin_error());
        FUZZ_ASSERT(img.rgb == NULL && img.width == 0 && img.height == 0, "image on failure");
        return 0;
    }
    FUZZ_ASSERT(img.width > 0 && img.height > 0 &&
                (int64_t)img.width * img.height <= FUZZ_MAX_PIXELS && img.rgb,
                "decoded %dx%d", img.width, img.height);
    preprocess(&img);
    orin_image_free(&img);
    return 0;
}
