/* Devices: the host device, opening by name, and (with --cuda, on a machine
 * with a GPU) the CUDA device. Without --cuda it checks what a machine without
 * a GPU must do; with --cuda it exits 77 (skipped) when there is no GPU. */
#include "test_util.h"
#include "orin/device.h"
#include "orin/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_host(void)
{
    orin_device *cpu = orin_device_cpu();
    CHECK(cpu && cpu == orin_device_cpu(), "a singleton");
    CHECK(cpu->kind == ORIN_DEVICE_CPU && strcmp(cpu->name, "cpu") == 0);
    CHECK(cpu->ops && cpu->ops->version == ORIN_DEVICE_OPS_VERSION && cpu->stream == NULL);
    CHECK(cpu->ops->upload && cpu->ops->mem_info == NULL, "host: upload, no mem_info");
    CHECK(orin_device_open("cpu") == cpu, "open(\"cpu\") is the singleton");

    const size_t sizes[] = {0, 1, 63, 64, 65, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *p = cpu->ops->alloc(cpu, sizes[i]);
        CHECK(p && (uintptr_t)p % 64 == 0, "alloc %zu aligned", sizes[i]);
        if (p && sizes[i]) {
            CHECK(cpu->ops->memset(cpu, p, 0xab, sizes[i]) == 0);
            CHECK(p[0] == 0xab && p[sizes[i] - 1] == 0xab);
        }
        cpu->ops->free(cpu, p);
    }
    CHECK(cpu->ops->alloc(cpu, SIZE_MAX - 8) == NULL && strstr(orin_error(), "cpu"),
          "huge alloc fails with a message: %s", orin_error());

    float src[4] = {1, 2, 3, 4}, dev[4], back[4] = {0};
    CHECK(cpu->ops->copy_h2d(cpu, dev, src, sizeof src) == 0);
    CHECK(cpu->ops->copy_d2d(cpu, dev + 1, dev, 3 * sizeof(float)) == 0, "overlapping d2d");
    CHECK(cpu->ops->copy_d2h(cpu, back, dev, sizeof back) == 0);
    CHECK(back[0] == 1 && back[1] == 1 && back[2] == 2 && back[3] == 3);
    CHECK(cpu->ops->synchronize(cpu) == 0);
    /* the copy bandwidth, by the wall clock (the host has no marks) */
    const double host_gbs = orin_device_copy_gbs(cpu, (size_t)16 << 20);
    CHECK(host_gbs > 0.1 && host_gbs < 1e5, "host copy: %g GB/s", host_gbs);
    orin_device_close(cpu); /* the singleton survives */
    CHECK(orin_device_cpu()->ops == cpu->ops);
    orin_device_close(NULL);
}

/* Source values of dtype dt for the upload tests: every bit pattern of the
 * 16-bit dtypes in turn (NaNs, infinities and subnormals among them), random
 * bits for f32, with some f32 values that overflow f16 or sit on rounding ties. */
static void fill_patterns(void *src, orin_dtype dt, size_t n)
{
    uint64_t state = 99;
    for (size_t i = 0; i < n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        if (dt == ORIN_F32) {
            uint32_t bits = (uint32_t)(state >> 32);
            if (i % 7 == 0) /* a value f16 and bf16 must round: a tie or near one */
                bits = (bits & 0xc7ffe000u) | 0x00001000u;
            memcpy((float *)src + i, &bits, 4);
        } else {
            ((uint16_t *)src)[i] = (uint16_t)(i * 40503u);
        }
    }
}

/* dst as written by dev->ops->upload equals orin_convert of the same source,
 * bit for bit (any NaN for a NaN). */
static int count_upload_mismatches(const void *want, const void *got, orin_dtype dt, size_t n)
{
    int bad = 0;
    size_t size = orin_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        const char *w = (const char *)want + i * size, *g = (const char *)got + i * size;
        if (memcmp(w, g, size) == 0)
            continue;
        float wf, gf;
        orin_convert(&wf, ORIN_F32, w, dt, 1);
        orin_convert(&gf, ORIN_F32, g, dt, 1);
        if (!(wf != wf && gf != gf) && bad++ < 3)
            fprintf(stderr, "element %zu: got %g, want %g\n", i, gf, wf);
    }
    return bad;
}

/* Every (source, destination) pair of f32, f16 and bf16, over more elements
 * than one staging buffer holds (so chunks and both buffers are used). */
static void test_upload(orin_device *dev, size_t n)
{
    static const orin_dtype dts[] = {ORIN_F32, ORIN_F16, ORIN_BF16};
    void *src = malloc(n * 4), *want = malloc(n * 4), *got = malloc(n * 4);
    void *on_dev = dev->ops->alloc(dev, n * 4);
    CHECK(src && want && got && on_dev, "allocs: %s", orin_error());
    for (int s = 0; s < 3 && on_dev; s++) {
        fill_patterns(src, dts[s], n);
        for (int d = 0; d < 3; d++) {
            size_t bytes = n * orin_dtype_size(dts[d]);
            CHECK(orin_convert(want, dts[d], src, dts[s], n) == 0);
            memset(got, 0x11, bytes);
            CHECK(dev->ops->upload(dev, on_dev, dts[d], src, dts[s], n) == 0, "%s", orin_error());
            CHECK(dev->ops->copy_d2h(dev, got, on_dev, bytes) == 0, "%s", orin_error());
            int bad = count_upload_mismatches(want, got, dts[d], n);
            CHECK(bad == 0, "%s upload %s -> %s: %d of %zu elements differ from orin_convert",
                  dev->name, orin_dtype_name(dts[s]), orin_dtype_name(dts[d]), bad, n);
        }
    }
    CHECK(dev->ops->upload(dev, on_dev, ORIN_F16, NULL, ORIN_F32, 4) == -1 &&
          strstr(orin_error(), "NULL"), "upload from NULL: %s", orin_error());
    dev->ops->free(dev, on_dev);
    free(src);
    free(want);
    free(got);
}

static void test_open_errors(void)
{
    CHECK(orin_device_open("tpu") == NULL);
    CHECK(strstr(orin_error(), "\"tpu\"") && strstr(orin_error(), "unknown device"),
          "unknown: %s", orin_error());
    CHECK(orin_device_open("cuda:x") == NULL && strstr(orin_error(), "cuda:x"), "%s",
          orin_error());
    CHECK(orin_device_open(NULL) == NULL);
}

/* On a machine without a GPU (or a build without CUDA): auto is the cpu, and
 * "cuda" says why it cannot be had. */
static void test_no_gpu(void)
{
    orin_device *dev = orin_device_open("auto");
    CHECK(dev == orin_device_cpu(), "auto without a GPU is the cpu");
    CHECK(orin_device_open("cuda") == NULL);
#ifdef CORE_TEST_HAVE_CUDA
    CHECK(strstr(orin_error(), "cuda: no CUDA device found (cudaGetDeviceCount:"),
          "no GPU: %s", orin_error());
#else
    CHECK(strstr(orin_error(), "this build has no CUDA support"), "no CUDA: %s", orin_error());
#endif
    printf("ok: %s\n", orin_error());
}

static void test_cuda(void)
{
    orin_device *dev = orin_device_open("cuda");
    CHECK(dev != NULL, "open cuda: %s", orin_error());
    if (!dev)
        return;
    printf("device: %s, %.0f GB/s peak\n", dev->name, dev->mem_bandwidth_gbs);
    CHECK(dev->kind == ORIN_DEVICE_CUDA && dev->index == 0 && dev->stream != NULL);
    CHECK(strncmp(dev->name, "cuda:0 (", 8) == 0, "name %s", dev->name);
    CHECK(dev->mem_bandwidth_gbs > 100, "bandwidth %f", dev->mem_bandwidth_gbs);

    orin_device *autodev = orin_device_open("auto");
    CHECK(autodev && autodev->kind == ORIN_DEVICE_CUDA, "auto with a GPU: %s", orin_error());
    orin_device_close(autodev);

    enum { N = 1 << 20 };
    uint32_t *host = malloc(N * sizeof *host), *back = malloc(N * sizeof *back);
    uint32_t *a = dev->ops->alloc(dev, N * sizeof *a), *b = dev->ops->alloc(dev, N * sizeof *b);
    CHECK(host && back && a && b, "allocs: %s", orin_error());
    if (host && back && a && b) {
        for (uint32_t i = 0; i < N; i++)
            host[i] = i * 2654435761u;
        CHECK(dev->ops->copy_h2d(dev, a, host, N * sizeof *a) == 0, "%s", orin_error());
        CHECK(dev->ops->memset(dev, b, 0x5a, N * sizeof *b) == 0, "%s", orin_error());
        CHECK(dev->ops->copy_d2d(dev, b, a, (N / 2) * sizeof *a) == 0, "%s", orin_error());
        CHECK(dev->ops->synchronize(dev) == 0, "%s", orin_error());
        CHECK(dev->ops->copy_d2h(dev, back, b, N * sizeof *b) == 0, "%s", orin_error());
        int bad = 0;
        for (uint32_t i = 0; i < N; i++)
            bad += back[i] != (i < N / 2 ? host[i] : 0x5a5a5a5au);
        CHECK(bad == 0, "%d words wrong after h2d, memset, d2d, d2h", bad);
    }
    dev->ops->free(dev, a);
    dev->ops->free(dev, b);
    free(host);
    free(back);

    /* 32 MiB staging buffers: 8 Mi f32 per chunk; 2.5 chunks of f32 */
    test_upload(dev, (size_t)20 << 20 | 12345);
    size_t free_b = 0, total_b = 0;
    CHECK(dev->ops->mem_info && dev->ops->mem_info(dev, &free_b, &total_b) == 0 && free_b > 0 &&
              free_b <= total_b, "mem_info: %zu free of %zu: %s", free_b, total_b, orin_error());

    /* the copy bandwidth the decode floors use, between marks: a GPU's is tens
     * to thousands of GB/s (a Jetson's ~100, an H200's ~4,300) */
    const double gbs = orin_device_copy_gbs(dev, ORIN_COPY_PROBE_BYTES);
    CHECK(gbs > 20 && gbs < 20000, "copy: %g GB/s", gbs);
    CHECK(orin_device_copy_gbs(dev, (size_t)1 << 50) == 0, "a copy that cannot be allocated");

    /* Asking for far more than any GPU has fails with a message, not a crash. */
    void *huge = dev->ops->alloc(dev, (size_t)1 << 50);
    CHECK(huge == NULL && strstr(orin_error(), "cudaMalloc"), "huge: %s", orin_error());
    /* ... and the device still works afterwards. */
    void *small = dev->ops->alloc(dev, 256);
    CHECK(small != NULL && dev->ops->memset(dev, small, 0, 256) == 0 &&
          dev->ops->synchronize(dev) == 0, "after a failed alloc: %s", orin_error());
    dev->ops->free(dev, small);

    CHECK(orin_device_open("cuda:99") == NULL && strstr(orin_error(), "cuda:99"), "%s",
          orin_error());
    orin_device_close(dev);
}

int main(int argc, char **argv)
{
    bool cuda = argc > 1 && strcmp(argv[1], "--cuda") == 0;
    if (cuda) {
        if (!orin_cuda_available()) {
            printf("skipped: no CUDA device\n");
            return TEST_SKIP;
        }
        test_cuda();
        return test_finish();
    }
    test_host();
    test_upload(orin_device_cpu(), 70001);
    test_open_errors();
    if (orin_cuda_available())
        printf("a GPU is visible: the no-GPU checks are skipped (run with --cuda)\n");
    else
        test_no_gpu();
    return test_finish();
}
