/* preprocessor_config.json: a file that parses holds sizes the processor can
 * use; any other fails with one error line. */
#include "fuzz_util.h"

#include "orin/error.h"
#include "orin/image.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    orin_image_processor p;
    if (orin_image_processor_parse((const char *)data, size, "preprocessor_config.json", &p)) {
        fuzz_check_error(orin_error());
        return 0;
    }
    FUZZ_ASSERT(p.patch_size > 0 && p.merge_size > 0 && p.temporal_patch_size > 0, "sizes");
    FUZZ_ASSERT(!p.do_resize || (p.min_pixels > 0 && p.max_pixels > 0 && p.resample == 3),
                "bounds %lld %lld, resample %d", (long long)p.min_pixels,
                (long long)p.max_pixels, p.resample);
    for (int c = 0; c < 3; c++)
        FUZZ_ASSERT(isfinite(p.image_mean[c]) && (!p.do_normalize || p.image_std[c] != 0),
                    "mean/std");
    FUZZ_ASSERT(!p.do_rescale || (isfinite((float)p.rescale_factor) &&
                                   (float)p.rescale_factor != 0 &&
                                   isfinite((float)(1.0 / p.rescale_factor))),
                "rescale_factor %g", p.rescale_factor);
    return 0;
}
