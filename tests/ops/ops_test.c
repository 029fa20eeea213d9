#include "ops_test.h"

#include "orin/device.h"
#include "orin/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static orin_registry *registry;
static orin_plugin_set *plugins;

/* ---- the target device ---- */

static orin_device *gpu; /* NULL: the target is the host */

/* A host range and the device copy standing for it. */
typedef struct ops_mapping {
    char *host;
    size_t bytes;
    char *dev;
} ops_mapping;

enum { MAX_MAPPINGS = 512 };
static ops_mapping mappings[MAX_MAPPINGS];
static int n_mappings;
static void *host_workspaces[MAX_MAPPINGS]; /* ops_workspace on the host */
static int n_host_workspaces;

static void die(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, orin_error());
    exit(1);
}

void ops_test_init(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--device") != 0 || strcmp(argv[i + 1], "cuda") != 0)
            continue;
        if (!orin_cuda_available()) {
            printf("skipped: no CUDA device\n");
            exit(TEST_SKIP);
        }
        gpu = orin_device_open("cuda");
        if (!gpu)
            die("open cuda");
    }
}

bool ops_test_quick(void)
{
    const char *v = getenv("ORIN_TEST_QUICK");
    return v && *v && strcmp(v, "0") != 0;
}

bool ops_test_selected(const char *what)
{
    const char *only = getenv("ORIN_TEST_ONLY");
    if (only && *only && !strstr(what, only))
        return false;
    const char *verbose = getenv("ORIN_TEST_VERBOSE");
    if (verbose && *verbose && strcmp(verbose, "0") != 0) {
        fprintf(stderr, "case: %s\n", what);
        fflush(stderr);
    }
    return true;
}

orin_device_kind ops_target(void)
{
    return gpu ? ORIN_DEVICE_CUDA : ORIN_DEVICE_CPU;
}

bool ops_on_gpu(void)
{
    return gpu != NULL;
}

static void drop_mapping(int i)
{
    gpu->ops->free(gpu, mappings[i].dev);
    mappings[i] = mappings[--n_mappings];
}

void *ops_dev(void *host, size_t bytes)
{
    if (!gpu || !host)
        return host;
    char *h = host;
    for (int i = 0; i < n_mappings; i++) {
        ops_mapping *m = &mappings[i];
        if (h >= m->host && h + bytes <= m->host + m->bytes) {
            char *d = m->dev + (h - m->host);
            if (gpu->ops->copy_h2d(gpu, d, h, bytes) != 0)
                die("upload");
            return d;
        }
    }
    /* A range that partly overlaps an old one: the old host buffer was freed
     * and its address reused; its copy is stale. */
    for (int i = n_mappings - 1; i >= 0; i--)
        if (h < mappings[i].host + mappings[i].bytes && mappings[i].host < h + bytes)
            drop_mapping(i);
    if (n_mappings == MAX_MAPPINGS) {
        fprintf(stderr, "ops_dev: more than %d device copies (call ops_release)\n", MAX_MAPPINGS);
        exit(1);
    }
    char *d = gpu->ops->alloc(gpu, bytes);
    if (!d || gpu->ops->copy_h2d(gpu, d, h, bytes) != 0)
        die("device copy");
    mappings[n_mappings++] = (ops_mapping){.host = h, .bytes = bytes, .dev = d};
    return d;
}

void ops_fetch(void *host, size_t bytes)
{
    if (!gpu)
        return;
    char *h = host;
    if (gpu->ops->synchronize(gpu) != 0)
        die("synchronize");
    for (int i = 0; i < n_mappings; i++) {
        ops_mapping *m = &mappings[i];
        if (h >= m->host && h + bytes <= m->host + m->bytes) {
            if (gpu->ops->copy_d2h(gpu, h, m->dev + (h - m->host), bytes) != 0)
                die("download");
            return;
        }
    }
    fprintf(stderr, "ops_fetch: %p has no device copy\n", host);
    exit(1);
}

ops_buf ops_buf_copy(const ops_buf *b)
{
    ops_buf c = ops_buf_nan(b->dt, b->n);
    memcpy(c.data, b->data, b->n * orin_dtype_size(b->dt));
    ops_buf_read(&c);
    return c;
}

void ops_check_bitwise(const char *what, ops_buf *got, ops_buf *want)
{
    ops_buf_fetch(got);
    ops_buf_fetch(want);
    CHECK(memcmp(got->data, want->data, got->n * orin_dtype_size(got->dt)) == 0,
          "%s: differs bit for bit from the reference run", what);
}

void ops_buf_fetch(ops_buf *b)
{
    ops_fetch(b->data, b->n * orin_dtype_size(b->dt));
    ops_buf_read(b);
}

void *ops_workspace(size_t bytes)
{
    void *host = malloc(bytes ? bytes : 1);
    if (!host)
        die("workspace");
    memset(host, 0xff, bytes);
    if (!gpu) {
        if (n_host_workspaces == MAX_MAPPINGS) {
            fprintf(stderr, "ops_workspace: too many (call ops_release)\n");
            exit(1);
        }
        return host_workspaces[n_host_workspaces++] = host;
    }
    void *d = ops_dev(host, bytes);
    /* the device copy outlives the host buffer: forget the host side */
    for (int i = 0; i < n_mappings; i++)
        if (mappings[i].dev == d)
            mappings[i].host = NULL, mappings[i].bytes = 0;
    free(host);
    return d;
}

void ops_release(void)
{
    if (gpu && gpu->ops->synchronize(gpu) != 0)
        die("synchronize");
    while (gpu && n_mappings)
        drop_mapping(n_mappings - 1);
    while (n_host_workspaces)
        free(host_workspaces[--n_host_workspaces]);
}

/* The build's plugins, or those of the folder ORIN_TEST_PLUGIN_DIR names: a
 * kernel variant's, which bench/ab_variants.sh builds beside the build, so
 * that the suites check a variant before it is timed. */
orin_registry *ops_test_registry(void)
{
    if (registry)
        return registry;
    const char *dir = getenv("ORIN_TEST_PLUGIN_DIR");
    if (!dir || !*dir)
        dir = ORIN_PLUGIN_DIR;
    registry = orin_registry_create();
    plugins = orin_plugin_set_create();
    if (!registry || !plugins || orin_plugin_load_dir(plugins, registry, dir)) {
        fprintf(stderr, "cannot load the plugins from %s: %s\n", dir, orin_error());
        exit(1);
    }
    return registry;
}

void ops_test_registry_free(void)
{
    orin_registry_destroy(registry);
    orin_plugin_set_destroy(plugins);
    registry = NULL;
    plugins = NULL;
}

const orin_op_impl *ops_test_impl(const char *op, const char *provider, orin_dtype dt)
{
    const orin_op_impl *impl =
        orin_registry_find(ops_test_registry(), op, provider, ops_target(), dt);
    CHECK(impl != NULL, "no implementation of %s by %s for %s %s", op, provider,
          orin_device_kind_name(ops_target()), orin_dtype_name(dt));
    return impl;
}

orin_exec ops_test_exec(int threads)
{
    if (gpu)
        return (orin_exec){.device = gpu};
    /* A private copy of the host device, so that each test picks its threads. */
    static orin_device devices[8];
    static int next;
    orin_device *dev = &devices[next++ % 8];
    *dev = *orin_device_cpu();
    dev->threads = threads;
    return (orin_exec){.device = dev};
}

uint64_t ops_rng_next(ops_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double ops_rng_uniform(ops_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(ops_rng_next(r) >> 11) / 9007199254740992.0);
}

double ops_value(orin_dtype dt, const void *data, size_t i)
{
    switch (dt) {
    case ORIN_F32:
        return ((const float *)data)[i];
    case ORIN_F16:
        return orin_f16_to_f32(((const uint16_t *)data)[i]);
    case ORIN_BF16:
        return orin_bf16_to_f32(((const uint16_t *)data)[i]);
    case ORIN_I32:
        return ((const int32_t *)data)[i];
    default:
        return NAN;
    }
}

void ops_store(orin_dtype dt, void *data, size_t i, double v)
{
    switch (dt) {
    case ORIN_F32:
        ((float *)data)[i] = (float)v;
        break;
    case ORIN_F16:
        ((uint16_t *)data)[i] = orin_f32_to_f16((float)v);
        break;
    case ORIN_BF16:
        ((uint16_t *)data)[i] = orin_f32_to_bf16((float)v);
        break;
    case ORIN_I32:
        ((int32_t *)data)[i] = (int32_t)v;
        break;
    default:
        break;
    }
}

static ops_buf buf_alloc(orin_dtype dt, size_t n)
{
    ops_buf b = {.dt = dt, .n = n};
    b.data = malloc((n ? n : 1) * orin_dtype_size(dt));
    b.value = malloc((n ? n : 1) * sizeof(double));
    if (!b.data || !b.value) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return b;
}

void ops_buf_read(ops_buf *b)
{
    for (size_t i = 0; i < b->n; i++)
        b->value[i] = ops_value(b->dt, b->data, i);
}

ops_buf ops_buf_random(ops_rng *r, orin_dtype dt, size_t n, double lo, double hi)
{
    ops_buf b = buf_alloc(dt, n);
    for (size_t i = 0; i < n; i++)
        ops_store(dt, b.data, i, ops_rng_uniform(r, lo, hi));
    ops_buf_read(&b);
    return b;
}

ops_buf ops_buf_nan(orin_dtype dt, size_t n)
{
    ops_buf b = buf_alloc(dt, n);
    for (size_t i = 0; i < n; i++)
        ops_store(dt, b.data, i, NAN);
    ops_buf_read(&b);
    return b;
}

void ops_buf_free(ops_buf *b)
{
    free(b->data);
    free(b->value);
    b->data = NULL;
    b->value = NULL;
}

orin_tensor ops_tensor(void *data, orin_dtype dt, int ndim, const int64_t *dims)
{
    orin_tensor t = orin_tensor_make(data, dt, ops_target(), ndim, dims);
    if (gpu && data)
        t.data = ops_dev(data, orin_tensor_nbytes(&t));
    return t;
}

double ops_check_close(const char *what, const ops_buf *got, const double *ref,
                       const double *scale, double tol, double atol)
{
    double worst = 0.0;
    size_t worst_i = 0, unwritten = 0;
    for (size_t i = 0; i < got->n; i++) {
        double g = ops_value(got->dt, got->data, i);
        if (!isfinite(g)) {
            if (unwritten++ == 0)
                worst_i = i;
            worst = INFINITY;
            continue;
        }
        double s = scale ? scale[i] : fabs(ref[i]);
        double ratio = fabs(g - ref[i]) / (tol * s + atol);
        if (fabs(g - ref[i]) == 0.0)
            ratio = 0.0;
        if (ratio > worst && !unwritten) {
            worst = ratio;
            worst_i = i;
        }
    }
    CHECK(worst <= 1.0, "%s: %zu elements not finite; worst element %zu: got %.9g, want %.9g "
          "(scale %.3g, tol %.1g): %.3g x the tolerance",
          what, unwritten, worst_i, ops_value(got->dt, got->data, worst_i), ref[worst_i],
          scale ? scale[worst_i] : fabs(ref[worst_i]), tol, worst);
    return worst;
}

double ops_tol(orin_dtype dt)
{
    return dt == ORIN_F32 ? 1e-5 : 1e-2;
}

double ops_atol(orin_dtype dt)
{
    return dt == ORIN_F16 ? 1e-6 : 0.0;
}

void ops_expect_error(const char *what, const orin_op_impl *impl, const orin_exec *ex,
                      const void *args, const char *needle)
{
    if (!impl)
        return;
    orin_error_clear();
    int rc = impl->run(ex, args);
    const char *msg = orin_error();
    CHECK(rc == -1 && strstr(msg, needle) != NULL, "%s (%s %s %s): rc %d, error \"%s\", want "
          "one containing \"%s\"", what, impl->op, impl->provider, orin_dtype_name(impl->dtype),
          rc, rc ? msg : "", needle);
}

/* ---- a fused product's norm in front ---- */

int ops_norm_fixture_make(ops_norm_fixture *f, const ops_buf *x, int64_t n, int64_t d,
                          bool residual, uint64_t seed)
{
    const orin_dtype dt = x->dt;
    ops_rng rng = {.state = seed};
    const int64_t dims[2] = {n, d};
    *f = (ops_norm_fixture){0};
    f->x_before = ops_buf_copy(x);
    f->x_ref = ops_buf_copy(x);
    f->residual = ops_buf_random(&rng, dt, residual ? (size_t)(n * d) : 1, -1, 1);
    f->weight = ops_buf_random(&rng, dt, (size_t)d, -2, 2);
    f->x_out = ops_buf_nan(dt, (size_t)(n * d));
    f->h = ops_buf_nan(dt, (size_t)(n * d));
    f->norm = (orin_norm_in){
        .residual = residual ? ops_tensor(f->residual.data, dt, 2, dims) : (orin_tensor){0},
        .weight = ops_tensor(f->weight.data, dt, 1, &d),
        .x_out = ops_tensor(f->x_out.data, dt, 2, dims),
        .eps = 1e-6f,
    };
    f->h_t = ops_tensor(f->h.data, dt, 2, dims);
    const orin_add_rmsnorm_args ref = {.x = ops_tensor(f->x_ref.data, dt, 2, dims),
                                       .residual = f->norm.residual,
                                       .weight = f->norm.weight,
                                       .out = f->h_t,
                                       .eps = f->norm.eps};
    const orin_op_impl *impl = ops_test_impl(ORIN_OP_ADD_RMSNORM, "common", dt);
    orin_exec ex = ops_test_exec(0);
    orin_error_clear();
    const int rc = impl ? impl->run(&ex, &ref) : -1;
    CHECK(rc == 0, "norm reference (add_rmsnorm %s): %s", orin_dtype_name(dt), orin_error());
    return rc;
}

void ops_norm_fixture_check(ops_norm_fixture *f, ops_buf *x, const char *what)
{
    const size_t bytes = x->n * orin_dtype_size(x->dt);
    ops_buf_fetch(&f->x_out);
    ops_buf_fetch(&f->x_ref);
    ops_buf_fetch(x);
    CHECK(memcmp(f->x_out.data, f->x_ref.data, bytes) == 0,
          "%s: norm.x_out differs from add_rmsnorm's sum", what);
    CHECK(memcmp(x->data, f->x_before.data, bytes) == 0, "%s: x was written", what);
}

void ops_norm_fixture_free(ops_norm_fixture *f)
{
    ops_buf_free(&f->x_before);
    ops_buf_free(&f->x_ref);
    ops_buf_free(&f->residual);
    ops_buf_free(&f->weight);
    ops_buf_free(&f->x_out);
    ops_buf_free(&f->h);
}

orin_rope_scaling ops_rope_scaled_table(float *inv, int64_t hd, double theta)
{
    for (int64_t j = 0; j < hd / 2; j++)
        inv[j] = (float)pow(theta, -2.0 * (double)j / (double)hd) / (1.0f + (float)(j % 7) / 2);
    return (orin_rope_scaling){.inv_freq = inv, .attention_factor = 1.1386294f};
}
