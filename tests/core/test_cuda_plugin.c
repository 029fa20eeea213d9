/* The CUDA plugin path end to end: a plugin built with a .cu source loads,
 * registers a CUDA op, and its kernel runs on the CUDA device through the
 * device vtable. Skips (77) without a GPU or in a build without CUDA. */
#include "test_util.h"

#include "orin/error.h"
#include "orin/plugin.h"

#include <stdlib.h>

typedef struct probe_fill_args {
    float *out;
    int n;
    float scale;
} probe_fill_args;

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
#ifndef CORE_TEST_HAVE_CUDA
    puts("this build has no CUDA: skipped");
    return TEST_SKIP;
#endif
    if (!orin_cuda_available()) {
        puts("no GPU: skipped");
        return TEST_SKIP;
    }
    orin_registry *reg = orin_registry_create();
    orin_plugin_set *set = orin_plugin_set_create();
    CHECK(orin_plugin_load(set, reg, argv[1]) == 0, "load: %s", orin_error());
    const orin_op_impl *impl =
        orin_registry_find(reg, "test.cuda_fill", "probe", ORIN_DEVICE_CUDA, ORIN_F32);
    orin_device *dev = orin_device_open("cuda");
    CHECK(impl && dev, "impl %p, device: %s", (void *)impl, orin_error());
    if (impl && dev) {
        /* Sizes around the 256-thread block boundary. */
        const int sizes[] = {1, 255, 256, 257, 100003};
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int n = sizes[s];
            float *host = malloc((size_t)n * sizeof *host);
            float *out = dev->ops->alloc(dev, (size_t)n * sizeof *out);
            /* Poison first: 0xff bytes are NaN, so an unwritten element fails. */
            CHECK(out && dev->ops->memset(dev, out, 0xff, (size_t)n * sizeof *out) == 0);
            probe_fill_args args = {.out = out, .n = n, .scale = 0.5f};
            orin_exec ex = {.device = dev};
            CHECK(impl->run(&ex, &args) == 0, "run: %s", orin_error());
            CHECK(dev->ops->copy_d2h(dev, host, out, (size_t)n * sizeof *out) == 0);
            int bad = 0;
            for (int i = 0; i < n; i++)
                bad += host[i] != 0.5f * (float)i;
            CHECK(bad == 0, "n=%d: %d elements wrong", n, bad);
            dev->ops->free(dev, out);
            free(host);
        }
        printf("test.cuda_fill ran on %s\n", dev->name);
    }
    orin_device_close(dev);
    orin_registry_destroy(reg);
    orin_plugin_set_destroy(set);
    return test_finish();
}
