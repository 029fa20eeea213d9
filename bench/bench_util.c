/* See bench_util.h. */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"

#include "orin/error.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_split_list(bench_list *l, char *text)
{
    l->n = 0;
    for (char *tok = strtok(text, ","); tok && l->n < BENCH_MAX_LIST; tok = strtok(NULL, ","))
        l->item[l->n++] = tok;
}

bool bench_listed(const bench_list *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->item[i], name) == 0)
            return true;
    return false;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* splitmix64 -> uniform [-1, 1) */
static void fill_noise(float *v, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        v[i] = (float)((double)(z >> 11) / 4503599627370496.0 - 1.0);
    }
}

void *bench_device_random(bench *b, char *status, size_t status_cap, orin_dtype dt, size_t n,
                          size_t offset)
{
    void *p = b->dev->ops->alloc(b->dev, n * orin_dtype_size(dt));
    if (!p) {
        snprintf(status, status_cap, "skipped (memory: %.2f GiB)",
                 (double)n * orin_dtype_size(dt) / 1073741824.0);
        return NULL;
    }
    for (size_t done = 0; done < n;) {
        size_t start = (offset + done * 7919) % (b->noise_n / 2);
        size_t chunk = n - done < b->noise_n / 2 ? n - done : b->noise_n / 2;
        if (b->dev->ops->upload(b->dev, (char *)p + done * orin_dtype_size(dt), dt,
                                b->noise + start, ORIN_F32, chunk) != 0) {
            snprintf(status, status_cap, "failed: upload: %s", orin_error());
            b->dev->ops->free(b->dev, p);
            return NULL;
        }
        done += chunk;
    }
    return p;
}

void bench_device_free(bench *b, void *p)
{
    if (p)
        b->dev->ops->free(b->dev, p);
}

size_t bench_free_bytes(bench *b)
{
    size_t fr = 0, total = 0;
    if (!b->dev->ops->mem_info || b->dev->ops->mem_info(b->dev, &fr, &total) != 0)
        return (size_t)-1;
    return fr;
}

int bench_probe_open(const char *prog, char *name, size_t cap, double *copy_gbs)
{
    int count = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 ||
        cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "%s: no CUDA device\n", prog);
        return 77;
    }
    if (prop.major < 9) {
        fprintf(stderr, "%s: %s is sm_%d%d; the bulk copy needs sm_90\n", prog, prop.name,
                prop.major, prop.minor);
        return 77;
    }
    snprintf(name, cap, "%s", prop.name);
    orin_error_clear();
    orin_device *dev = orin_device_open("cuda");
    *copy_gbs = dev ? orin_device_copy_gbs(dev, ORIN_COPY_PROBE_BYTES) : 0.0;
    orin_device_close(dev);
    if (*copy_gbs <= 0.0) { /* the open or the copy's allocation said why */
        fprintf(stderr, "%s: no copy bandwidth measured: %s\n", prog, orin_error());
        return 2;
    }
    return 0;
}

int bench_open(bench *b, const char *prog, const char *plugin_dir)
{
    *b = (bench){.json = b->json, .runs = b->runs}; /* the caller's options stay */
    if (!orin_cuda_available()) {
        fprintf(stderr, "%s: no CUDA device\n", prog);
        return 77;
    }
    b->dev = orin_device_open("cuda");
    b->reg = orin_registry_create();
    b->plugins = orin_plugin_set_create();
    if (!b->dev || !b->reg || !b->plugins ||
        orin_plugin_load_dir(b->plugins, b->reg, plugin_dir)) {
        fprintf(stderr, "%s: %s\n", prog, orin_error());
        goto fail;
    }
    if (!b->dev->ops->mark_create || !b->dev->ops->upload) {
        fprintf(stderr, "%s: the cuda device has no marks or upload\n", prog);
        goto fail;
    }
    int l2 = 0;
    if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, b->dev->index) != cudaSuccess ||
        l2 <= 0)
        l2 = 64 << 20;
    b->l2_bytes = (size_t)l2;
    b->noise_n = (size_t)1 << 25; /* 32 Mi floats; tensors upload from offsets into it */
    b->noise = malloc(b->noise_n * sizeof *b->noise);
    if (!b->noise) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto fail;
    }
    fill_noise(b->noise, b->noise_n, 0x5eed);
    b->copy_gbs = orin_device_copy_gbs(b->dev, ORIN_COPY_PROBE_BYTES);
    return 0;
fail: /* one cleanup path: bench_close takes what was opened (NULL-safe) */
    bench_close(b);
    *b = (bench){0};
    return 2;
}

void bench_close(bench *b)
{
    free(b->noise);
    orin_registry_destroy(b->reg);
    orin_plugin_set_destroy(b->plugins);
    orin_device_close(b->dev);
}

/* ---- timing ---- */

int bench_call_next(bench_calls *t)
{
    const void *a = (const char *)t->args + (size_t)t->next * t->args_size;
    t->next = (t->next + 1) % t->n_args;
    return t->impl->run(&t->ex, a);
}

int bench_call_all(bench_calls *t)
{
    for (int i = 0; i < t->n_args; i++)
        if (bench_call_next(t) != 0)
            return -1;
    return 0;
}

int bench_time_eager(bench *b, bench_calls *t, int runs, double *seconds)
{
    void **marks = calloc((size_t)runs + 1, sizeof *marks);
    double *each = calloc((size_t)runs, sizeof *each);
    int rc = marks && each ? 0 : orin_error_set("out of memory");
    for (int i = 0; rc == 0 && i <= runs; i++)
        if (!(marks[i] = b->dev->ops->mark_create(b->dev)))
            rc = -1;
    /* back to back: call i runs between marks i and i + 1 */
    for (int i = 0; rc == 0 && i < runs; i++) {
        if (i == 0)
            rc = b->dev->ops->mark_record(b->dev, marks[0]);
        if (rc == 0)
            rc = bench_call_next(t);
        if (rc == 0)
            rc = b->dev->ops->mark_record(b->dev, marks[i + 1]);
    }
    for (int i = 0; rc == 0 && i < runs; i++)
        rc = b->dev->ops->mark_elapsed(b->dev, marks[i], marks[i + 1], &each[i]);
    if (rc == 0)
        *seconds = bench_median(each, runs);
    for (int i = 0; marks && i <= runs; i++)
        if (marks[i])
            b->dev->ops->mark_destroy(b->dev, marks[i]);
    free(marks);
    free(each);
    return rc;
}

static int queue_calls(void *ctx)
{
    return bench_call_all(ctx);
}

int bench_time_graph(bench *b, bench_calls *t, double *seconds)
{
    void *graph = NULL, *m0 = NULL, *m1 = NULL;
    double each[5];
    t->next = 0;
    int rc = b->dev->ops->graph_capture(b->dev, queue_calls, t, &graph);
    if (rc == 0 && (!(m0 = b->dev->ops->mark_create(b->dev)) ||
                    !(m1 = b->dev->ops->mark_create(b->dev))))
        rc = -1;
    if (rc == 0)
        rc = b->dev->ops->graph_launch(b->dev, graph); /* warm-up */
    for (int i = 0; rc == 0 && i < 5; i++) {
        rc = b->dev->ops->mark_record(b->dev, m0);
        if (rc == 0)
            rc = b->dev->ops->graph_launch(b->dev, graph);
        if (rc == 0)
            rc = b->dev->ops->mark_record(b->dev, m1);
        if (rc == 0)
            rc = b->dev->ops->mark_elapsed(b->dev, m0, m1, &each[i]);
        each[i] /= t->n_args;
    }
    if (rc == 0)
        *seconds = bench_median(each, 5);
    if (m0)
        b->dev->ops->mark_destroy(b->dev, m0);
    if (m1)
        b->dev->ops->mark_destroy(b->dev, m1);
    if (graph)
        b->dev->ops->graph_destroy(b->dev, graph);
    return rc;
}

const char *bench_json_text(const char *s, char *buf, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(buf + o, cap - o, "\\%c", c);
        else if (c < 0x20)
            o += (size_t)snprintf(buf + o, cap - o, "\\u%04x", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = '\0';
    return buf;
}

void bench_print_copy(const bench *b, const char *what)
{
    char name[160];
    if (b->json)
        printf("{\"engine\": \"orin\", \"op\": \"copy\", \"device\": \"%s\", \"copy_gbs\": %.1f, "
               "\"peak_gbs\": %.1f, \"l2_bytes\": %zu}\n",
               bench_json_text(b->dev->name, name, sizeof name), b->copy_gbs,
               b->dev->mem_bandwidth_gbs, b->l2_bytes);
    else
        printf("%s: copy %.1f GB/s (read + written; datasheet %.1f GB/s), L2 %.0f MiB; %s\n",
               b->dev->name, b->copy_gbs, b->dev->mem_bandwidth_gbs, b->l2_bytes / 1048576.0,
               what);
}
