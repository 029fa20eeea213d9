/* Attention on the GPU: the mha, fa1 and fa2 providers through the registry, at
 * Qwen3-8B's attention shape (32 query heads, 8 kv heads, head_dim 128).
 *
 *   prefill  causal from position 0, S = 512, 2048, 8192, 16384:
 *            ms per call and TFLOP/s with FLOPs = 2 S^2 hd H (the causal half
 *            of Q.K^T and P.V);
 *   decode   one query row against L = 1024, 8192, 32768 cached positions:
 *            us per call, and the K and V bytes read (2 L Hkv hd dtype-size)
 *            per second as a fraction of the device-to-device copy bandwidth
 *            (bytes read + written by a 1 GiB copy, best of 5, this run).
 *
 * Timing: random inputs (uniform in [-1, 1): never zeros), warm-up calls, CUDA
 * events (the device's marks) around every call, the median of the runs. Decode
 * rotates through layer caches, as a model does, with enough of them that
 * their K and V are four times the L2 (at least 8): no call finds its cache in
 * L2. Two decode figures: "eager" times each call as the host issues it (its
 * launch overhead included when the GPU outruns the host), "graph" replays a
 * CUDA graph of one call per layer cache and divides (the engine's decode path,
 * runtime.cuda_graph); only providers flagged graph-safe get the second.
 *
 * usage: attention_bench [--json] [--mode prefill|decode|all] [--providers mha,fa1,fa2]
 *                        [--dtypes f16,bf16] [--runs N] [--plugins DIR]
 *                        [--fa2-configs A,B] [--fa2-prefill-configs A,B]
 *                        [--fa2-decode-configs A,B] [--kv-layout position|head]
 *                        [--lens N,N] [--decode-lens N,N]
 * --fa2-configs sets both lists: each value runs fa2 once with
 * ORIN_FA2_PREFILL_CONFIG (prefill rows) or ORIN_FA2_DECODE_CONFIG (decode rows)
 * set to it, as its own row ("default": the variable unset). The prefill
 * kernels read their variable once per process: give one prefill config per
 * run (bench/attention.sh runs a process per config). A row that cannot
 * run says why (skipped (workspace), failed: ...) and the others go on.
 * --lens: only these of the lengths above (S or L), e.g. for a profiler.
 * --decode-lens: decode at these cache lengths instead (any, up to 1,048,576),
 * e.g. to split a call's fixed cost from its per-byte cost.
 * --kv-layout: the cache's layout, "position" ([position][kv head][hd], the
 * engine's, default) or "head" ([kv head][position][hd]: each head's rows
 * contiguous, as torch's [B, H, L, D]); the kernels take either through the
 * cache view's strides.
 * Prints a table; with --json one JSON line per row instead. Exit 77 without a
 * GPU. */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"

#include "orin/error.h"
#include "orin/ops.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ORIN_PLUGIN_DIR
#define ORIN_PLUGIN_DIR "plugins"
#endif

enum { HEADS = 32, KV_HEADS = 8, HEAD_DIM = 128 };

static const int prefill_lens[] = {512, 2048, 8192, 16384};
static bool kv_head_major; /* --kv-layout head */

/* The cache view of `capacity` positions in the --kv-layout. */
static orin_kv_view kv_view(orin_dtype dt, int capacity)
{
    return (orin_kv_view){
        .dtype = dt, .n_kv_heads = KV_HEADS, .head_dim = HEAD_DIM, .capacity = capacity,
        .pos_stride = kv_head_major ? HEAD_DIM : KV_HEADS * HEAD_DIM,
        .head_stride = kv_head_major ? (int64_t)capacity * HEAD_DIM : HEAD_DIM,
    };
}
static const int default_decode_lens[] = {1024, 8192, 32768};
enum { MAX_DECODE_LENS = 16, MAX_DECODE_LEN = 1 << 20 };

/* One result row: what it measured, or why not (status). */
typedef struct row {
    const char *op, *provider, *config;
    orin_dtype dt;
    int len;             /* prefill: S; decode: L */
    char status[200];    /* "ok", "skipped (...)", "failed: ..." */
    double seconds;      /* median per call (eager) */
    double graph_seconds; /* decode: per call in a graph replay; 0 when none */
} row;

static void *device_random(bench *b, row *r, orin_dtype dt, size_t n, size_t offset)
{
    return bench_device_random(b, r->status, sizeof r->status, dt, n, offset);
}

/* ---- rows ---- */

static const char *config_name(const char *config)
{
    return config && *config ? config : "default";
}

static void print_row(const bench *b, const row *r)
{
    const double kv = 2.0 * r->len * KV_HEADS * HEAD_DIM * orin_dtype_size(r->dt);
    const bool ok = strcmp(r->status, "ok") == 0, decode = strcmp(r->op, "decode") == 0;
    if (b->json) {
        char config[256], status[512];
        printf("{\"engine\": \"orin\", \"op\": \"%s\", \"provider\": \"%s\", \"config\": \"%s\", "
               "\"dtype\": \"%s\", \"%s\": %d, \"heads\": %d, \"kv_heads\": %d, "
               "\"head_dim\": %d, \"status\": \"%s\", \"copy_gbs\": %.1f",
               r->op, r->provider, bench_json_text(config_name(r->config), config, sizeof config),
               orin_dtype_name(r->dt), decode ? "kv_len" : "seq", r->len, HEADS, KV_HEADS,
               HEAD_DIM, bench_json_text(r->status, status, sizeof status), b->copy_gbs);
        if (ok && decode) {
            printf(", \"us\": %.3f, \"kv_bytes\": %.0f, \"gbs\": %.1f, \"frac\": %.4f", r->seconds * 1e6,
                   kv, kv / r->seconds / 1e9, kv / r->seconds / 1e9 / b->copy_gbs);
            if (r->graph_seconds > 0)
                printf(", \"graph_us\": %.3f, \"graph_frac\": %.4f", r->graph_seconds * 1e6,
                       kv / r->graph_seconds / 1e9 / b->copy_gbs);
        } else if (ok) {
            const double flops = 2.0 * r->len * (double)r->len * HEAD_DIM * HEADS;
            printf(", \"ms\": %.4f, \"flops\": %.4g, \"tflops\": %.2f", r->seconds * 1e3, flops,
                   flops / r->seconds / 1e12);
        }
        printf("}\n");
    } else if (!ok) {
        printf("%-7s %-4s %-18s %-5s %6d  %s\n", r->op, r->provider, config_name(r->config),
               orin_dtype_name(r->dt), r->len, r->status);
    } else if (decode) {
        printf("%-7s %-4s %-18s %-5s %6d  %9.2f us  %7.1f GB/s  %5.1f %%", r->op, r->provider,
               config_name(r->config), orin_dtype_name(r->dt), r->len, r->seconds * 1e6,
               kv / r->seconds / 1e9, 100.0 * kv / r->seconds / 1e9 / b->copy_gbs);
        if (r->graph_seconds > 0)
            printf("   graph %9.2f us  %5.1f %%", r->graph_seconds * 1e6,
                   100.0 * kv / r->graph_seconds / 1e9 / b->copy_gbs);
        printf("\n");
    } else {
        const double flops = 2.0 * r->len * (double)r->len * HEAD_DIM * HEADS;
        printf("%-7s %-4s %-18s %-5s %6d  %9.3f ms  %7.1f TFLOP/s\n", r->op, r->provider,
               config_name(r->config), orin_dtype_name(r->dt), r->len, r->seconds * 1e3,
               flops / r->seconds / 1e12);
    }
    fflush(stdout);
}

/* The implementation for the row, checked against the call's shape; NULL with
 * the status set. */
static const orin_op_impl *find_impl(bench *b, row *r, const char *op,
                                     const orin_attention_args *a)
{
    const orin_op_impl *impl = orin_registry_find(b->reg, op, r->provider, ORIN_DEVICE_CUDA, r->dt);
    if (!impl) {
        snprintf(r->status, sizeof r->status, "skipped (no cuda implementation)");
        return NULL;
    }
    char why[160] = "";
    if (impl->supports && !impl->supports(a, why, sizeof why)) {
        snprintf(r->status, sizeof r->status, "skipped (%s)", why);
        return NULL;
    }
    return impl;
}

/* Device workspace for the call, or NULL with the status set ("skipped
 * (workspace)" when it cannot fit). *ws_bytes 0: none needed. */
static void *alloc_workspace(bench *b, row *r, const orin_op_impl *impl,
                             const orin_attention_args *a, size_t *ws_bytes, bool *failed)
{
    *ws_bytes = impl->workspace_size ? impl->workspace_size(a) : 0;
    *failed = false;
    if (!*ws_bytes)
        return NULL;
    void *ws = NULL;
    const size_t fr = bench_free_bytes(b), headroom = (size_t)512 << 20;
    if (fr > headroom && *ws_bytes < fr - headroom)
        ws = b->dev->ops->alloc(b->dev, *ws_bytes);
    if (!ws) {
        snprintf(r->status, sizeof r->status, "skipped (workspace: %.1f GiB)",
                 (double)*ws_bytes / 1073741824.0);
        *failed = true;
    }
    return ws;
}

static void set_config(const char *var, const char *config)
{
    if (config && *config && strcmp(config, "default") != 0)
        setenv(var, config, 1);
    else
        unsetenv(var);
}

static void run_prefill(bench *b, const char *provider, const char *config, orin_dtype dt, int S)
{
    row r = {.op = "prefill", .provider = provider, .config = config, .dt = dt, .len = S,
             .status = "ok"};
    const size_t q_n = (size_t)S * HEADS * HEAD_DIM, kv_n = (size_t)S * KV_HEADS * HEAD_DIM;
    void *q = NULL, *out = NULL, *k = NULL, *v = NULL, *pos = NULL, *ws = NULL;
    int32_t *host_pos = malloc((size_t)S * sizeof *host_pos);
    const int64_t qdims[3] = {S, HEADS, HEAD_DIM}, pdims[1] = {S};
    orin_attention_args a = {
        .q = orin_tensor_make(NULL, dt, ORIN_DEVICE_CUDA, 3, qdims),
        .out = orin_tensor_make(NULL, dt, ORIN_DEVICE_CUDA, 3, qdims),
        .positions = orin_tensor_make(NULL, ORIN_I32, ORIN_DEVICE_CUDA, 1, pdims),
        .cache = kv_view(dt, S),
        .scale = (float)(1.0 / sqrt((double)HEAD_DIM)),
        .max_kv_len = S,
    };
    set_config("ORIN_FA2_PREFILL_CONFIG", config);
    const orin_op_impl *impl = find_impl(b, &r, ORIN_OP_ATTENTION_PREFILL, &a);
    size_t ws_bytes = 0;
    bool ws_failed = false;
    if (!impl || !host_pos)
        goto done;
    ws = alloc_workspace(b, &r, impl, &a, &ws_bytes, &ws_failed);
    if (ws_failed || !(q = device_random(b, &r, dt, q_n, 11)) ||
        !(k = device_random(b, &r, dt, kv_n, 22)) || !(v = device_random(b, &r, dt, kv_n, 33)))
        goto done;
    out = b->dev->ops->alloc(b->dev, q_n * orin_dtype_size(dt));
    pos = b->dev->ops->alloc(b->dev, (size_t)S * sizeof(int32_t));
    for (int i = 0; i < S; i++)
        host_pos[i] = i;
    if (!out || !pos || b->dev->ops->copy_h2d(b->dev, pos, host_pos, S * sizeof(int32_t))) {
        snprintf(r.status, sizeof r.status, "skipped (memory)");
        goto done;
    }
    a.q.data = q;
    a.out.data = out;
    a.positions.data = pos;
    a.cache.k = k;
    a.cache.v = v;
    bench_calls t = {.impl = impl, .ex = {.device = b->dev, .workspace = ws,
                                          .workspace_size = ws_bytes},
                     .args = &a, .args_size = sizeof a, .n_args = 1};
    double s = 0;
    int rc = bench_call_next(&t) || bench_call_next(&t) ||
             b->dev->ops->synchronize(b->dev); /* warm-up */
    if (rc == 0)
        rc = bench_time_eager(b, &t, b->runs, &s);
    if (rc)
        snprintf(r.status, sizeof r.status, "failed: %s", orin_error());
    r.seconds = s;
done:
    print_row(b, &r);
    unsetenv("ORIN_FA2_PREFILL_CONFIG");
    bench_device_free(b, q);
    bench_device_free(b, out);
    bench_device_free(b, k);
    bench_device_free(b, v);
    bench_device_free(b, pos);
    bench_device_free(b, ws);
    free(host_pos);
}

static void run_decode(bench *b, const char *provider, const char *config, orin_dtype dt, int L)
{
    row r = {.op = "decode", .provider = provider, .config = config, .dt = dt, .len = L,
             .status = "ok"};
    const size_t kv_n = (size_t)L * KV_HEADS * HEAD_DIM;
    const size_t layer_bytes = 2 * kv_n * orin_dtype_size(dt);
    int layers = (int)((4 * b->l2_bytes + layer_bytes - 1) / layer_bytes);
    layers = layers < 8 ? 8 : layers;
    void **caches = calloc(2 * (size_t)layers, sizeof *caches);
    orin_attention_args *args = calloc((size_t)layers, sizeof *args);
    void *q = NULL, *out = NULL, *pos = NULL, *ws = NULL;
    const int64_t qdims[3] = {1, HEADS, HEAD_DIM}, pdims[1] = {1};
    const orin_attention_args probe = {
        .q = orin_tensor_make(NULL, dt, ORIN_DEVICE_CUDA, 3, qdims),
        .out = orin_tensor_make(NULL, dt, ORIN_DEVICE_CUDA, 3, qdims),
        .positions = orin_tensor_make(NULL, ORIN_I32, ORIN_DEVICE_CUDA, 1, pdims),
        .cache = kv_view(dt, L),
        .scale = (float)(1.0 / sqrt((double)HEAD_DIM)),
        .max_kv_len = L,
    };
    set_config("ORIN_FA2_DECODE_CONFIG", config);
    const orin_op_impl *impl = find_impl(b, &r, ORIN_OP_ATTENTION_DECODE, &probe);
    size_t ws_bytes = 0;
    bool ws_failed = false;
    if (impl)
        ws = alloc_workspace(b, &r, impl, &probe, &ws_bytes, &ws_failed);
    if (impl && !ws_failed && caches && args) {
        const int32_t last = L - 1;
        if (!(q = device_random(b, &r, dt, (size_t)HEADS * HEAD_DIM, 44)))
            goto done;
        out = b->dev->ops->alloc(b->dev, (size_t)HEADS * HEAD_DIM * orin_dtype_size(dt));
        pos = b->dev->ops->alloc(b->dev, sizeof(int32_t));
        if (!out || !pos || b->dev->ops->copy_h2d(b->dev, pos, &last, sizeof last)) {
            snprintf(r.status, sizeof r.status, "skipped (memory)");
            goto done;
        }
        for (int i = 0; i < layers; i++) {
            if (!(caches[2 * i] = device_random(b, &r, dt, kv_n, 1000 + 2 * i)) ||
                !(caches[2 * i + 1] = device_random(b, &r, dt, kv_n, 1001 + 2 * i)))
                goto done;
            args[i] = probe;
            args[i].q.data = q;
            args[i].out.data = out;
            args[i].positions.data = pos;
            args[i].cache.k = caches[2 * i];
            args[i].cache.v = caches[2 * i + 1];
        }
        bench_calls t = {.impl = impl, .ex = {.device = b->dev, .workspace = ws,
                                              .workspace_size = ws_bytes},
                         .args = args, .args_size = sizeof *args, .n_args = layers};
        double s = 0, gs = 0;
        int rc = bench_call_all(&t) || b->dev->ops->synchronize(b->dev); /* warm-up: every layer */
        if (rc == 0)
            rc = bench_time_eager(b, &t, b->runs > layers ? b->runs : layers, &s);
        if (rc == 0 && (impl->flags & ORIN_OP_GRAPH_SAFE) && b->dev->ops->graph_capture &&
            bench_time_graph(b, &t, &gs) != 0) {
            fprintf(stderr, "attention_bench: decode %s %s %d: graph: %s\n", provider,
                    orin_dtype_name(dt), L, orin_error());
            gs = 0;
        }
        if (rc)
            snprintf(r.status, sizeof r.status, "failed: %s", orin_error());
        r.seconds = s;
        r.graph_seconds = gs;
    }
done:
    print_row(b, &r);
    unsetenv("ORIN_FA2_DECODE_CONFIG");
    for (int i = 0; caches && i < 2 * layers; i++)
        bench_device_free(b, caches[i]);
    bench_device_free(b, q);
    bench_device_free(b, out);
    bench_device_free(b, pos);
    bench_device_free(b, ws);
    free(caches);
    free(args);
}

static bool len_listed(const bench_list *lens, int len)
{
    char text[16];
    snprintf(text, sizeof text, "%d", len);
    return bench_listed(lens, text);
}

/* "N,N,...": at most MAX_DECODE_LENS lengths of 1 .. MAX_DECODE_LEN. */
static int parse_lens(const char *text, int *lens, int *n)
{
    *n = 0;
    for (const char *p = text; *p;) {
        char *end;
        const long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > MAX_DECODE_LEN || *n == MAX_DECODE_LENS ||
            (*end != ',' && *end != '\0'))
            return -1;
        lens[(*n)++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    return *n > 0 ? 0 : -1;
}

static int usage(const char *prog)
{
    fprintf(stderr, "usage: %s [--json] [--mode prefill|decode|all] [--providers mha,fa1,fa2] "
                    "[--dtypes f16,bf16] [--runs N] [--plugins DIR] [--fa2-configs A,B] "
                    "[--fa2-prefill-configs A,B] [--fa2-decode-configs A,B] "
                    "[--kv-layout position|head] [--lens N,N] [--decode-lens N,N]\n", prog);
    return 1;
}

int main(int argc, char **argv)
{
    bench b = {.runs = 30};
    const char *mode = "all", *plugins = ORIN_PLUGIN_DIR;
    char providers_text[256] = "mha,fa1,fa2", dtypes_text[64] = "f16,bf16";
    char prefill_cfg_text[512] = "default", decode_cfg_text[512] = "default";
    char lens_text[128] = "512,1024,2048,8192,16384,32768";
    int decode_lens[MAX_DECODE_LENS];
    int n_decode_lens = (int)(sizeof default_decode_lens / sizeof *default_decode_lens);
    bool decode_lens_given = false; /* --decode-lens: not filtered by --lens */
    memcpy(decode_lens, default_decode_lens, sizeof default_decode_lens);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--json") == 0) {
            b.json = true;
        } else if (!val) {
            return usage(argv[0]);
        } else if (strcmp(arg, "--mode") == 0) {
            mode = val, i++;
        } else if (strcmp(arg, "--providers") == 0) {
            snprintf(providers_text, sizeof providers_text, "%s", val), i++;
        } else if (strcmp(arg, "--dtypes") == 0) {
            snprintf(dtypes_text, sizeof dtypes_text, "%s", val), i++;
        } else if (strcmp(arg, "--runs") == 0) {
            b.runs = atoi(val), i++;
        } else if (strcmp(arg, "--plugins") == 0) {
            plugins = val, i++;
        } else if (strcmp(arg, "--fa2-configs") == 0) {
            snprintf(prefill_cfg_text, sizeof prefill_cfg_text, "%s", val);
            snprintf(decode_cfg_text, sizeof decode_cfg_text, "%s", val), i++;
        } else if (strcmp(arg, "--fa2-prefill-configs") == 0) {
            snprintf(prefill_cfg_text, sizeof prefill_cfg_text, "%s", val), i++;
        } else if (strcmp(arg, "--fa2-decode-configs") == 0) {
            snprintf(decode_cfg_text, sizeof decode_cfg_text, "%s", val), i++;
        } else if (strcmp(arg, "--lens") == 0) {
            snprintf(lens_text, sizeof lens_text, "%s", val), i++;
        } else if (strcmp(arg, "--decode-lens") == 0) {
            if (parse_lens(val, decode_lens, &n_decode_lens) != 0)
                return usage(argv[0]);
            decode_lens_given = true, i++;
        } else if (strcmp(arg, "--kv-layout") == 0 &&
                   (strcmp(val, "position") == 0 || strcmp(val, "head") == 0)) {
            kv_head_major = strcmp(val, "head") == 0, i++;
        } else {
            return usage(argv[0]);
        }
    }
    if (b.runs < 20)
        b.runs = 20; /* the median of at least 20 */
    bench_list providers, dtypes, prefill_cfgs, decode_cfgs, lens;
    bench_split_list(&providers, providers_text);
    bench_split_list(&dtypes, dtypes_text);
    bench_split_list(&prefill_cfgs, prefill_cfg_text);
    bench_split_list(&decode_cfgs, decode_cfg_text);
    bench_split_list(&lens, lens_text);
    const bool do_prefill = strcmp(mode, "decode") != 0, do_decode = strcmp(mode, "prefill") != 0;
    const int opened = bench_open(&b, "attention_bench", plugins);
    if (opened != 0)
        return opened;

    char what[96];
    snprintf(what, sizeof what, "Qwen3-8B attention: %d/%d heads, head_dim %d, cache %s-major",
             HEADS, KV_HEADS, HEAD_DIM, kv_head_major ? "head" : "position");
    bench_print_copy(&b, what);

    static const char *const all_providers[] = {"mha", "fa1", "fa2"};
    static const orin_dtype all_dtypes[] = {ORIN_F16, ORIN_BF16};
    for (int d = 0; d < 2; d++) {
        if (!bench_listed(&dtypes, orin_dtype_name(all_dtypes[d])))
            continue;
        for (int p = 0; p < 3; p++) {
            const char *provider = all_providers[p];
            if (!bench_listed(&providers, provider))
                continue;
            const bool fa2 = strcmp(provider, "fa2") == 0;
            for (int c = 0; do_prefill && c < (fa2 ? prefill_cfgs.n : 1); c++)
                for (size_t i = 0; i < sizeof prefill_lens / sizeof *prefill_lens; i++)
                    if (len_listed(&lens, prefill_lens[i]))
                        run_prefill(&b, provider, fa2 ? prefill_cfgs.item[c] : NULL,
                                    all_dtypes[d], prefill_lens[i]);
            for (int c = 0; do_decode && c < (fa2 ? decode_cfgs.n : 1); c++)
                for (int i = 0; i < n_decode_lens; i++)
                    if (decode_lens_given || len_listed(&lens, decode_lens[i]))
                        run_decode(&b, provider, fa2 ? decode_cfgs.item[c] : NULL,
                                   all_dtypes[d], decode_lens[i]);
        }
    }
    bench_close(&b);
    return 0;
}
