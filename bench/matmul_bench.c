/* A decode step's products on the GPU, one op at a time, at Qwen3-8B's shapes
 * (hidden 4096, intermediate 12288, 32 + 8 + 8 heads of 128, vocabulary
 * 151,936), one row of x, for float weights (the compute dtype) and AWQ int4
 * and int8 ones (groups of 128), through the registry as the model calls them:
 *
 *   qkv      matmul.qkv     / matmul.qkv.awq4     / matmul.qkv.int8      q, k, v: 6144 x 4096
 *   o        matmul         / matmul.awq4         / matmul.int8          4096 x 4096
 *   gate_up  matmul.swiglu  / matmul.swiglu.awq4  / matmul.swiglu.int8   2 x 12288 x 4096
 *   down     matmul         / matmul.awq4         / matmul.int8          4096 x 12288
 *   lm_head  matmul (float only, as in the models)                       151936 x 4096
 *
 * Each product's weights are in enough copies (at least 4x the L2, at least 2)
 * that the calls rotate through, as a model's layers do: no call finds its
 * weights in L2, and x (a few KB, just written in a model) does. Quantized
 * weights are random words and bytes (every nibble and byte is a valid
 * value) with random f16 scales, passed through their matmul's `prepare` as
 * the model loads them. Per row: microseconds per call, eagerly (between
 * marks; each call's launch included when the GPU outruns the host) and in a
 * CUDA graph of one call per copy (the decode path, programmatic dependent
 * launch between the calls as in a model), and the bytes the call must read
 * (weights, scales, zeros) per second as a fraction of the copy bandwidth
 * measured in the same process. bench/notes/decode.md and quant.md say what
 * the figures meant so far; `--plugins DIR` times a plugin built with other
 * -D tunables beside the default one; `--norm` gives qkv and gate_up the
 * residual add + rmsnorm in front that a decode step folds into them
 * (orin_norm_in), so that its cost shows beside the plain product.
 *
 * usage: matmul_bench [--json] [--dtypes f16,bf16] [--formats float,awq,int8]
 *                     [--products qkv,o,gate_up,down,lm_head] [--runs N] [--plugins DIR]
 *                     [--norm]
 * Exit 77 without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"

#include "orin/error.h"
#include "orin/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ORIN_PLUGIN_DIR
#define ORIN_PLUGIN_DIR "plugins"
#endif

enum { GROUP = 128, MAX_PARTS = 3, MAX_COPIES = 64 };

typedef struct product {
    const char *name;
    int parts;                /* matrices the op reads */
    int64_t out[MAX_PARTS];   /* outputs of each */
    int64_t in;
    bool swiglu;              /* gate and up into one output */
    bool float_only;
} product;

static const product products[] = {
    {"qkv", 3, {4096, 1024, 1024}, 4096, false, false},
    {"o", 1, {4096}, 4096, false, false},
    {"gate_up", 2, {12288, 12288}, 4096, true, false},
    {"down", 1, {4096}, 12288, false, false},
    {"lm_head", 1, {151936}, 4096, false, true},
};

typedef enum format { FLOAT, AWQ, INT8 } format;
static const char *const format_names[] = {"float", "awq", "int8"};

/* One call's struct, whichever op (each starts at the union's start). */
typedef union call_args {
    orin_matmul_args mm;
    orin_matmul_qkv_args qkv;
    orin_matmul_swiglu_args sw;
    orin_matmul_qkv_quant_args qqkv;
    orin_matmul_swiglu_quant_args qsw;
    orin_matmul_quant_args qm;
} call_args;

typedef struct row {
    const product *p;
    format fmt;
    orin_dtype dt;
    bool norm;             /* --norm: the add + rmsnorm in front (qkv, gate_up) */
    const char *op;
    int copies;
    double bytes;          /* read a call: weights, scales, zeros */
    char status[200];
    double seconds, graph_seconds;
} row;

/* The op that runs the product in the format. */
static const char *op_of(const product *p, format f)
{
    if (p->parts == 3)
        return f == FLOAT ? ORIN_OP_MATMUL_QKV : f == AWQ ? ORIN_OP_MATMUL_QKV_AWQ4
                                                          : ORIN_OP_MATMUL_QKV_INT8;
    if (p->swiglu)
        return f == FLOAT ? ORIN_OP_MATMUL_SWIGLU : f == AWQ ? ORIN_OP_MATMUL_SWIGLU_AWQ4
                                                             : ORIN_OP_MATMUL_SWIGLU_INT8;
    return f == FLOAT ? ORIN_OP_MATMUL : f == AWQ ? ORIN_OP_MATMUL_AWQ4 : ORIN_OP_MATMUL_INT8;
}

/* Bytes of one matrix of `out` rows in the format. */
static double matrix_bytes(int64_t out, int64_t in, format f, orin_dtype dt)
{
    const double n = (double)out * (double)in, groups = (double)(in / GROUP);
    if (f == FLOAT)
        return n * (double)orin_dtype_size(dt);
    const double scales = 2.0 * groups * (double)out;
    return f == AWQ ? n / 2 + scales + scales / 4 /* zeros: a nibble a scale */ : n + scales;
}

/* The device memory rows allocate, freed together. */
typedef struct pool {
    void *p[MAX_COPIES * MAX_PARTS * 3 + 8];
    int n;
} pool;

static void *pool_keep(pool *pl, void *p)
{
    if (p && pl->n < (int)(sizeof pl->p / sizeof pl->p[0]))
        pl->p[pl->n++] = p;
    return p;
}

static void pool_free(bench *b, pool *pl)
{
    for (int i = 0; i < pl->n; i++)
        bench_device_free(b, pl->p[i]);
    pl->n = 0;
}

/* `bytes` of random bits on the device (splitmix64 from seed). */
static void *device_bits(bench *b, row *r, pool *pl, size_t bytes, uint64_t seed)
{
    void *d = pool_keep(pl, b->dev->ops->alloc(b->dev, bytes));
    uint64_t *h = malloc((bytes + 7) / 8 * 8);
    if (!d || !h) {
        snprintf(r->status, sizeof r->status, "skipped (memory: %zu bytes)", bytes);
        free(h);
        return NULL;
    }
    uint64_t s = seed;
    for (size_t i = 0; i < (bytes + 7) / 8; i++) {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        h[i] = z ^ (z >> 31);
    }
    const int rc = b->dev->ops->copy_h2d(b->dev, d, h, bytes);
    free(h);
    if (rc != 0) {
        snprintf(r->status, sizeof r->status, "failed: upload: %s", orin_error());
        return NULL;
    }
    return d;
}

static void *device_noise(bench *b, row *r, pool *pl, orin_dtype dt, size_t n, size_t offset)
{
    return pool_keep(pl, bench_device_random(b, r->status, sizeof r->status, dt, n, offset));
}

static orin_tensor cuda_tensor(void *data, orin_dtype dt, int64_t d0, int64_t d1)
{
    const int64_t dims[2] = {d0, d1};
    return orin_tensor_make(data, dt, ORIN_DEVICE_CUDA, 2, dims);
}

/* A quantized matrix [out, in] in the stored layout of orin/ops.h, then through
 * the format's matmul's prepare; false with the status set. */
static bool make_qweight(bench *b, row *r, pool *pl, format f, int64_t out, int64_t in,
                         uint64_t seed, orin_qweight *w)
{
    const int64_t groups = in / GROUP;
    *w = (orin_qweight){.group_size = GROUP};
    void *q = device_bits(b, r, pl, (size_t)(f == AWQ ? out * in / 2 : out * in), seed);
    void *s = q ? device_noise(b, r, pl, ORIN_F16, (size_t)(groups * out), (size_t)seed) : NULL;
    void *z = s && f == AWQ ? device_bits(b, r, pl, (size_t)(groups * out / 2), seed + 1) : NULL;
    if (!s || (f == AWQ && !z))
        return false;
    if (f == AWQ) {
        w->qweight = cuda_tensor(q, ORIN_I32, in, out / 8);
        w->zeros = cuda_tensor(z, ORIN_I32, groups, out / 8);
        w->scales = cuda_tensor(s, ORIN_F16, groups, out);
    } else {
        w->qweight = cuda_tensor(q, ORIN_I8, out, in);
        w->scales = cuda_tensor(s, ORIN_F16, out, groups);
    }
    const orin_op_impl *mm = orin_registry_find(b->reg, f == AWQ ? ORIN_OP_MATMUL_AWQ4
                                                                 : ORIN_OP_MATMUL_INT8,
                                                "common", ORIN_DEVICE_CUDA, r->dt);
    if (!mm) {
        snprintf(r->status, sizeof r->status, "skipped (no common %s on cuda)",
                 f == AWQ ? ORIN_OP_MATMUL_AWQ4 : ORIN_OP_MATMUL_INT8);
        return false;
    }
    orin_matmul_quant_args a = {.x = cuda_tensor(NULL, r->dt, 1, in), .w = *w,
                                .y = cuda_tensor(NULL, r->dt, 1, out)};
    const orin_exec ex = {.device = b->dev};
    if (mm->prepare && mm->prepare(&ex, &a) != 0) {
        snprintf(r->status, sizeof r->status, "failed: prepare: %s", orin_error());
        return false;
    }
    *w = a.w;
    return true;
}

/* Copy c's call struct over x and the outputs y[part]; with r->norm, the
 * add + rmsnorm in front as a decode step folds it (orin_norm_in over nb:
 * residual, weight, x_out). */
static bool make_call(bench *b, row *r, pool *pl, int c, void *x, void *const *y,
                      void *const *nb, call_args *a)
{
    const product *p = r->p;
    const orin_tensor xt = cuda_tensor(x, r->dt, 1, p->in);
    orin_tensor w[MAX_PARTS];
    orin_qweight q[MAX_PARTS];
    for (int i = 0; i < p->parts; i++) {
        const uint64_t seed = 1000u * (uint64_t)c + 10u * (uint64_t)i + 1;
        if (r->fmt == FLOAT) {
            void *d = device_noise(b, r, pl, r->dt, (size_t)(p->out[i] * p->in), (size_t)seed);
            if (!d)
                return false;
            w[i] = cuda_tensor(d, r->dt, p->out[i], p->in);
        } else if (!make_qweight(b, r, pl, r->fmt, p->out[i], p->in, seed, &q[i])) {
            return false;
        }
    }
    memset(a, 0, sizeof *a);
    const orin_tensor y0 = cuda_tensor(y[0], r->dt, 1, p->out[0]);
    if (p->parts == 3) {
        for (int i = 0; i < 3; i++) {
            const orin_tensor yi = cuda_tensor(y[i], r->dt, 1, p->out[i]);
            if (r->fmt == FLOAT)
                a->qkv.w[i] = w[i], a->qkv.y[i] = yi;
            else
                a->qqkv.w[i] = q[i], a->qqkv.y[i] = yi;
        }
        if (r->fmt == FLOAT)
            a->qkv.x = xt;
        else
            a->qqkv.x = xt;
    } else if (p->swiglu) {
        if (r->fmt == FLOAT)
            a->sw = (orin_matmul_swiglu_args){.x = xt, .w_gate = w[0], .w_up = w[1], .out = y0};
        else
            a->qsw = (orin_matmul_swiglu_quant_args){.x = xt, .w_gate = q[0], .w_up = q[1],
                                                     .out = y0};
    } else if (r->fmt == FLOAT) {
        a->mm = (orin_matmul_args){.x = xt, .w = w[0], .y = y0};
    } else {
        a->qm = (orin_matmul_quant_args){.x = xt, .w = q[0], .y = y0};
    }
    if (r->norm) {
        const orin_norm_in norm = {.residual = cuda_tensor(nb[0], r->dt, 1, p->in),
                                   .weight = orin_tensor_make(nb[1], r->dt, ORIN_DEVICE_CUDA,
                                                              1, &p->in),
                                   .x_out = cuda_tensor(nb[2], r->dt, 1, p->in),
                                   .eps = 1e-6f};
        orin_norm_in *dst = p->parts == 3 ? (r->fmt == FLOAT ? &a->qkv.norm : &a->qqkv.norm)
                                          : (r->fmt == FLOAT ? &a->sw.norm : &a->qsw.norm);
        *dst = norm;
    }
    return true;
}

static void print_row(const bench *b, const row *r)
{
    const bool ok = strcmp(r->status, "ok") == 0;
    const double gbs = ok && r->graph_seconds > 0 ? r->bytes / r->graph_seconds / 1e9 : 0;
    if (b->json) {
        char status[512];
        printf("{\"engine\": \"orin\", \"product\": \"%s\", \"format\": \"%s\", \"dtype\": \"%s\", "
               "\"op\": \"%s\", \"in\": %lld, \"norm\": %s, \"copies\": %d, \"bytes\": %.0f, "
               "\"status\": \"%s\", \"copy_gbs\": %.1f",
               r->p->name, format_names[r->fmt], orin_dtype_name(r->dt), r->op,
               (long long)r->p->in, r->norm ? "true" : "false", r->copies, r->bytes,
               bench_json_text(r->status, status, sizeof status), b->copy_gbs);
        if (ok)
            printf(", \"us\": %.3f, \"graph_us\": %.3f, \"graph_gbs\": %.1f, \"graph_frac\": %.4f",
                   r->seconds * 1e6, r->graph_seconds * 1e6, gbs, gbs / b->copy_gbs);
        printf("}\n");
    } else if (!ok) {
        printf("%-8s %-5s %-5s %-20s %s\n", r->p->name, format_names[r->fmt],
               orin_dtype_name(r->dt), r->op, r->status);
    } else {
        printf("%-8s %-5s %-5s %-20s %8.2f MB  eager %8.2f us   graph %8.2f us  %7.1f GB/s  "
               "%5.1f %%%s\n",
               r->p->name, format_names[r->fmt], orin_dtype_name(r->dt), r->op, r->bytes / 1e6,
               r->seconds * 1e6, r->graph_seconds * 1e6, gbs, 100.0 * gbs / b->copy_gbs,
               r->norm ? "  (norm in front)" : "");
    }
    fflush(stdout);
}

static void run_product(bench *b, const product *p, format f, orin_dtype dt, bool norm)
{
    row r = {.p = p, .fmt = f, .dt = dt, .op = op_of(p, f), .status = "ok",
             .norm = norm && (p->parts == 3 || p->swiglu)};
    pool pl = {0};
    call_args *args = NULL;
    void *ws = NULL;
    for (int i = 0; i < p->parts; i++)
        r.bytes += matrix_bytes(p->out[i], p->in, f, dt);
    const double l2 = (double)b->l2_bytes;
    r.copies = (int)((4 * l2 + r.bytes - 1) / r.bytes);
    r.copies = r.copies < 2 ? 2 : r.copies > MAX_COPIES ? MAX_COPIES : r.copies;
    const orin_op_impl *impl = orin_registry_find(b->reg, r.op, "common", ORIN_DEVICE_CUDA, dt);
    if (!impl) {
        snprintf(r.status, sizeof r.status, "skipped (no common %s on cuda)", r.op);
        goto done;
    }
    if (r.copies * r.bytes > 0.8 * (double)bench_free_bytes(b)) {
        snprintf(r.status, sizeof r.status, "skipped (memory: %d copies of %.0f MB)", r.copies,
                 r.bytes / 1e6);
        goto done;
    }
    void *x = device_noise(b, &r, &pl, dt, (size_t)p->in, 7), *y[MAX_PARTS] = {0};
    void *nb[3] = {NULL}; /* --norm: residual, weight, x_out */
    for (int i = 0; x && i < p->parts; i++)
        y[i] = pool_keep(&pl, b->dev->ops->alloc(b->dev, (size_t)p->out[i] * orin_dtype_size(dt)));
    for (int i = 0; r.norm && x && i < 3; i++)
        nb[i] = i < 2 ? device_noise(b, &r, &pl, dt, (size_t)p->in, (size_t)(11 + i))
                      : pool_keep(&pl, b->dev->ops->alloc(b->dev, (size_t)p->in * orin_dtype_size(dt)));
    args = calloc((size_t)r.copies, sizeof *args);
    if (!x || !y[p->parts - 1] || (r.norm && (!nb[0] || !nb[1] || !nb[2])) || !args) {
        if (strcmp(r.status, "ok") == 0)
            snprintf(r.status, sizeof r.status, "skipped (memory)");
        goto done;
    }
    for (int c = 0; c < r.copies; c++)
        if (!make_call(b, &r, &pl, c, x, y, nb, &args[c]))
            goto done;
    const size_t ws_bytes = impl->workspace_size ? impl->workspace_size(&args[0]) : 0;
    if (ws_bytes && !(ws = b->dev->ops->alloc(b->dev, ws_bytes))) {
        snprintf(r.status, sizeof r.status, "skipped (workspace: %zu bytes)", ws_bytes);
        goto done;
    }
    bench_calls t = {.impl = impl, .ex = {.device = b->dev, .workspace = ws,
                                          .workspace_size = ws_bytes},
                     .args = args, .args_size = sizeof *args, .n_args = r.copies};
    int rc = bench_call_all(&t) || b->dev->ops->synchronize(b->dev); /* warm-up: every copy */
    if (rc == 0)
        rc = bench_time_eager(b, &t, b->runs > r.copies ? b->runs : r.copies, &r.seconds);
    if (rc == 0 && (impl->flags & ORIN_OP_GRAPH_SAFE) && b->dev->ops->graph_capture)
        rc = bench_time_graph(b, &t, &r.graph_seconds);
    if (rc != 0)
        snprintf(r.status, sizeof r.status, "failed: %s", orin_error());
done:
    print_row(b, &r);
    bench_device_free(b, ws);
    pool_free(b, &pl);
    free(args);
}

static int usage(const char *prog)
{
    fprintf(stderr, "usage: %s [--json] [--dtypes f16,bf16] [--formats float,awq,int8] "
                    "[--products qkv,o,gate_up,down,lm_head] [--runs N] [--plugins DIR] [--norm]\n",
            prog);
    return 1;
}

int main(int argc, char **argv)
{
    bench b = {.runs = 40};
    bool norm = false;
    const char *plugins = ORIN_PLUGIN_DIR;
    char dtypes_text[64] = "f16,bf16", formats_text[64] = "float,awq,int8";
    char products_text[128] = "qkv,o,gate_up,down,lm_head";
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--json") == 0)
            b.json = true;
        else if (strcmp(arg, "--norm") == 0)
            norm = true;
        else if (!val)
            return usage(argv[0]);
        else if (strcmp(arg, "--dtypes") == 0)
            snprintf(dtypes_text, sizeof dtypes_text, "%s", val), i++;
        else if (strcmp(arg, "--formats") == 0)
            snprintf(formats_text, sizeof formats_text, "%s", val), i++;
        else if (strcmp(arg, "--products") == 0)
            snprintf(products_text, sizeof products_text, "%s", val), i++;
        else if (strcmp(arg, "--runs") == 0)
            b.runs = atoi(val), i++;
        else if (strcmp(arg, "--plugins") == 0)
            plugins = val, i++;
        else
            return usage(argv[0]);
    }
    if (b.runs < 20)
        b.runs = 20; /* the median of at least 20 */
    bench_list dtypes, formats, wanted;
    bench_split_list(&dtypes, dtypes_text);
    bench_split_list(&formats, formats_text);
    bench_split_list(&wanted, products_text);
    const int opened = bench_open(&b, "matmul_bench", plugins);
    if (opened != 0)
        return opened;
    bench_print_copy(&b, "Qwen3-8B's decode products, one row of x");
    static const orin_dtype all_dtypes[] = {ORIN_F16, ORIN_BF16};
    for (int d = 0; d < 2; d++) {
        if (!bench_listed(&dtypes, orin_dtype_name(all_dtypes[d])))
            continue;
        for (int f = FLOAT; f <= INT8; f++) {
            if (!bench_listed(&formats, format_names[f]))
                continue;
            for (size_t i = 0; i < sizeof products / sizeof products[0]; i++)
                if (bench_listed(&wanted, products[i].name) &&
                    (f == FLOAT || !products[i].float_only))
                    run_product(&b, &products[i], (format)f, all_dtypes[d], norm);
        }
    }
    bench_close(&b);
    return 0;
}
