/* The Qwen3-VL vision encoder (qwen3_vl_vision.h).
 *
 * Per call, over the n patches of all images (x the residual stream [n, d]):
 *   x = pixels . Wpatch^T + b + pos            (pos_interp: the table resampled)
 *   per block: h = LN1(x); q, k, v = h.Wq + bq, h.Wk + bk, h.Wv + bv
 *              rope.table(q), rope.table(k)     (2-D angles from the host)
 *              x += attention.full(q, k, v) . Wo + bo    (one segment an image)
 *              h = LN2(x); x += gelu(h.W1 + b1) . W2 + b2
 *              after block deepstack[j]: deep_j = merger_j(x), norm after the
 *              2x2 shuffle
 *   embeds = merger(x), norm before the shuffle.
 * The 2x2 shuffle is a view: pixel_values' rows come in merge-window order, so
 * the four patches of a merged token are four consecutive rows, and [n, d]
 * read as [n/4, 4d] is the shuffled tensor.
 *
 * The encoder is one graph of ops; with a trace its stages (embedding, each
 * block, the merger) run as they are built, so that the residual stream can be
 * copied back after each. */
#include "qwen3_vl_vision.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/op_check.h"
#include "orin/file.h"
#include "orin/graph.h"
#include "orin/safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX_BYTES (16u << 20)
#define PREFIX "model.visual."

typedef struct vision_block {
    orin_tensor norm1_w, norm1_b, norm2_w, norm2_b;
    orin_tensor qkv_w, qkv_b;             /* [3d, d], [3d]: q, k, v are row views */
    orin_tensor proj_w, proj_b, fc1_w, fc1_b, fc2_w, fc2_b;
} vision_block;

typedef struct vision_merger {
    orin_tensor norm_w, norm_b, fc1_w, fc1_b, fc2_w, fc2_b;
} vision_merger;

typedef struct vision_ops {
    const orin_op_impl *matmul, *add, *layernorm, *gelu, *rope_table, *attention, *pos_interp;
    /* optional (NULL: the sequence runs): a product with its GELU, with the residual add */
    const orin_op_impl *matmul_gelu, *matmul_add;
} vision_ops;

struct orin_vision_encoder {
    orin_vision_config cfg;
    orin_device *dev;
    orin_dtype dtype;
    vision_ops op;
    orin_tensor patch_w, patch_b;         /* [d, C*T*P*P] (the Conv3d weight flattened), [d] */
    orin_tensor pos_table;                /* [side * side, d] */
    vision_block *blocks;
    vision_merger merger;
    vision_merger deepstack[ORIN_VISION_MAX_DEEPSTACK];
    void **allocs;                        /* the weights' device buffers */
    size_t n_allocs, cap_allocs;
    /* A call's activations and the ops' workspace, kept for the next call
     * (grown when an image needs more): an image of a size seen before
     * allocates nothing, and no cudaFree stalls the stream. */
    void *arena, *workspace;
    size_t arena_size, workspace_size;
    orin_profile *profile;                /* --profile: ops timed one by one */
};

/* ---- config.json ---- */

/* vision_config.key, an integer >= min; `fallback` when absent and fallback >= 0. */
static int config_int(const cJSON *vc, const char *path, const char *key, int32_t fallback,
                      int32_t min, int32_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(vc, key);
    if (!v && fallback >= 0) {
        *out = fallback;
        return 0;
    }
    if (!v)
        return orin_error_set("%s: missing field 'vision_config.%s'", path, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < min ||
        v->valuedouble > 1 << 24)
        return orin_error_set("%s: vision_config.%s is not an integer >= %d", path, key, min);
    *out = (int32_t)v->valuedouble;
    return 0;
}

static int config_act(const cJSON *vc, const char *path, orin_gelu_kind *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(vc, "hidden_act");
    const char *name = v ? cJSON_GetStringValue(v) : "gelu_pytorch_tanh";
    /* transformers' ACT2FN: "gelu" is the erf form; the tanh form under both
     * of its names */
    if (name && strcmp(name, "gelu") == 0)
        *out = ORIN_GELU_ERF;
    else if (name && (strcmp(name, "gelu_pytorch_tanh") == 0 || strcmp(name, "gelu_new") == 0))
        *out = ORIN_GELU_TANH;
    else
        return orin_error_set("%s: vision_config.hidden_act = %s: expected \"gelu\", "
                              "\"gelu_pytorch_tanh\" or \"gelu_new\"", path,
                              name ? name : "(not a string)");
    return 0;
}

/* rope_parameters.rope_theta (transformers 5), else 10000 (the published
 * configs have no key). */
static int config_theta(const cJSON *vc, const char *path, double *out)
{
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(vc, "rope_parameters");
    const cJSON *v = rp ? cJSON_GetObjectItemCaseSensitive(rp, "rope_theta") : NULL;
    *out = 10000.0;
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble))
        return orin_error_set("%s: vision_config.rope_parameters.rope_theta is not a positive "
                              "number", path);
    *out = v->valuedouble;
    return 0;
}

static int config_deepstack(const cJSON *vc, const char *path, orin_vision_config *c)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(vc, "deepstack_visual_indexes");
    c->n_deepstack = 0;
    if (!list)
        return 0;
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) > ORIN_VISION_MAX_DEEPSTACK)
        return orin_error_set("%s: vision_config.deepstack_visual_indexes is not a list of at "
                              "most %d block numbers", path, ORIN_VISION_MAX_DEEPSTACK);
    const cJSON *v;
    cJSON_ArrayForEach(v, list) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
            v->valuedouble < 0 || v->valuedouble >= c->depth)
            return orin_error_set("%s: vision_config.deepstack_visual_indexes[%d] is not a "
                                  "block number below depth %d", path, c->n_deepstack, c->depth);
        c->deepstack[c->n_deepstack++] = (int32_t)v->valuedouble;
    }
    return 0;
}

/* The sizes that must agree with each other. */
static int config_consistent(const char *path, orin_vision_config *c)
{
    if (c->hidden % c->heads != 0)
        return orin_error_set("%s: vision_config.hidden_size %d is not a multiple of num_heads "
                              "%d", path, c->hidden, c->heads);
    c->head_dim = c->hidden / c->heads;
    /* the 2-D rotary embedding gives a quarter of each head to rows, a quarter
     * to columns, and rotates halves */
    if (c->head_dim % 4 != 0)
        return orin_error_set("%s: vision_config: head dim %d (hidden_size / num_heads) is not "
                              "a multiple of 4", path, c->head_dim);
    c->side = (int32_t)lround(sqrt((double)c->num_position_embeddings));
    if (c->side * c->side != c->num_position_embeddings)
        return orin_error_set("%s: vision_config.num_position_embeddings %d is not a square",
                              path, c->num_position_embeddings);
    return 0;
}

static int parse_vision_config(const char *dir, orin_vision_config *c)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path)
        return orin_error_set("%s: path too long", dir);
    char *text = orin_read_file(path, CONFIG_MAX_BYTES, NULL);
    if (!text)
        return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root)
        return orin_error_set("%s: not valid JSON", path);
    const cJSON *vc = cJSON_GetObjectItemCaseSensitive(root, "vision_config");
    int rc = 0;
    memset(c, 0, sizeof *c);
    c->eps = 1e-6;
    if (!cJSON_IsObject(vc))
        rc = orin_error_set("%s: missing field 'vision_config' (not a Qwen3-VL folder?)", path);
    if (rc == 0)
        rc = config_int(vc, path, "depth", -1, 1, &c->depth) ||
             config_int(vc, path, "hidden_size", -1, 1, &c->hidden) ||
             config_int(vc, path, "intermediate_size", -1, 1, &c->intermediate) ||
             config_int(vc, path, "num_heads", -1, 1, &c->heads) ||
             config_int(vc, path, "in_channels", 3, 1, &c->in_channels) ||
             config_int(vc, path, "patch_size", -1, 1, &c->patch) ||
             config_int(vc, path, "temporal_patch_size", -1, 1, &c->temporal_patch) ||
             config_int(vc, path, "spatial_merge_size", -1, 1, &c->merge) ||
             config_int(vc, path, "num_position_embeddings", -1, 1,
                        &c->num_position_embeddings) ||
             config_int(vc, path, "out_hidden_size", -1, 1, &c->out_hidden) ||
             config_act(vc, path, &c->act) || config_theta(vc, path, &c->rope_theta) ||
             config_deepstack(vc, path, c) || config_consistent(path, c)
                 ? -1
                 : 0;
    cJSON_Delete(root);
    return rc;
}

/* ---- weights ---- */

static void *enc_alloc(orin_vision_encoder *e, size_t bytes, const char *what)
{
    if (e->n_allocs == e->cap_allocs) {
        size_t cap = e->cap_allocs ? 2 * e->cap_allocs : 64;
        void **a = realloc(e->allocs, cap * sizeof *a);
        if (!a) {
            orin_error_set("%s: out of memory", what);
            return NULL;
        }
        e->allocs = a;
        e->cap_allocs = cap;
    }
    void *p = e->dev->ops->alloc(e->dev, bytes ? bytes : 1);
    if (!p) {
        orin_error_set("%s: cannot allocate %.1f MiB on %s", what, (double)bytes / 1048576.0,
                       e->dev->name);
        return NULL;
    }
    return e->allocs[e->n_allocs++] = p;
}

/* PREFIX + name, stored as sdims, uploaded in the compute dtype as a tensor of
 * dims[0..ndim) (the same elements: a 5-D convolution weight as its matrix). */
static int load_as(orin_vision_encoder *e, const orin_st_archive *ar, const char *dir,
                   const char *name, int sndim, const int64_t *sdims, int ndim,
                   const int64_t *dims, orin_tensor *out)
{
    char full[192];
    if ((size_t)snprintf(full, sizeof full, PREFIX "%s", name) >= sizeof full)
        return orin_error_set("%s: tensor name too long", name);
    const orin_st_tensor *st = orin_st_find_float(ar, dir, full, sndim, sdims);
    if (!st)
        return -1;
    *out = orin_tensor_make(NULL, e->dtype, e->dev->kind, ndim, dims);
    out->data = enc_alloc(e, orin_tensor_nbytes(out), full);
    if (!out->data)
        return -1;
    if (e->dev->ops->upload(e->dev, out->data, e->dtype, st->data, st->dtype,
                            (size_t)orin_tensor_numel(out)) != 0)
        return orin_error_prefix("%s: ", full);
    return 0;
}

static int load(orin_vision_encoder *e, const orin_st_archive *ar, const char *dir,
                const char *name, int ndim, const int64_t *dims, orin_tensor *out)
{
    return load_as(e, ar, dir, name, ndim, dims, ndim, dims, out);
}

/* name.weight [out, in] and name.bias [out]. */
static int load_linear(orin_vision_encoder *e, const orin_st_archive *ar, const char *dir,
                       const char *name, int64_t out, int64_t in, orin_tensor *w,
                       orin_tensor *b)
{
    char wn[160], bn[160];
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    return load(e, ar, dir, wn, 2, (int64_t[]){out, in}, w) ||
                   load(e, ar, dir, bn, 1, &out, b)
               ? -1
               : 0;
}

/* name.weight and name.bias, both [dim]: a LayerNorm. */
static int load_norm(orin_vision_encoder *e, const orin_st_archive *ar, const char *dir,
                     const char *name, int64_t dim, orin_tensor *w, orin_tensor *b)
{
    char wn[160], bn[160];
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    return load(e, ar, dir, wn, 1, &dim, w) || load(e, ar, dir, bn, 1, &dim, b) ? -1 : 0;
}

static int load_block(orin_vision_encoder *e, const orin_st_archive *ar, const char *dir, int i)
{
    const orin_vision_config *c = &e->cfg;
    vision_block *B = &e->blocks[i];
    char n[7][64];
    const char *parts[7] = {"norm1", "norm2", "attn.qkv", "attn.proj", "mlp.linear_fc1",
                            "mlp.linear_fc2", ""};
    for (int p = 0; p < 6; p++)
        snprintf(n[p], sizeof n[p], "blocks.%d.%s", i, parts[p]);
    const int64_t d = c->hidden, f = c->intermediate;
    return load_norm(e, ar, dir, n[0], d, &B->norm1_w, &B->norm1_b) ||
                   load_norm(e, ar, dir, n[1], d, &B->norm2_w, &B->norm2_b) ||
                   load_linear(e, ar, dir, n[2], 3 * d, d, &B->qkv_w, &B->qkv_b) ||
                   load_linear(e, ar, dir, n[3], d, d, &B->proj_w, &B->proj_b) ||
                   load_linear(e, ar, dir, n[4], f, d, &B->fc1_w, &B->fc1_b) ||
                   load_linear(e, ar, dir, n[5], d, f, &B->fc2_w, &B->fc2_b)
               ? -1
               : 0;
}

/* prefix.norm over norm_dim (d before the shuffle, 4d after), fc1 4d -> 4d,
 * fc2 4d -> out_hidden. */
static int load_merger(orin_vision_encoder *e, const orin_st_archive *ar, const char *dir,
                       const char *prefix, int64_t norm_dim, vision_merger *M)
{
    const orin_vision_config *c = &e->cfg;
    const int64_t D = (int64_t)c->hidden * c->merge * c->merge;
    char norm[96], fc1[96], fc2[96];
    snprintf(norm, sizeof norm, "%s.norm", prefix);
    snprintf(fc1, sizeof fc1, "%s.linear_fc1", prefix);
    snprintf(fc2, sizeof fc2, "%s.linear_fc2", prefix);
    return load_norm(e, ar, dir, norm, norm_dim, &M->norm_w, &M->norm_b) ||
                   load_linear(e, ar, dir, fc1, D, D, &M->fc1_w, &M->fc1_b) ||
                   load_linear(e, ar, dir, fc2, c->out_hidden, D, &M->fc2_w, &M->fc2_b)
               ? -1
               : 0;
}

static int load_weights(orin_vision_encoder *e, const char *dir)
{
    const orin_vision_config *c = &e->cfg;
    orin_st_archive *ar = NULL;
    if (orin_st_open_dir(dir, &ar) != 0)
        return -1;
    const int64_t d = c->hidden, D = d * c->merge * c->merge;
    const int64_t k = (int64_t)c->in_channels * c->temporal_patch * c->patch * c->patch;
    const int64_t conv[5] = {d, c->in_channels, c->temporal_patch, c->patch, c->patch};
    int rc = load_as(e, ar, dir, "patch_embed.proj.weight", 5, conv, 2, (int64_t[]){d, k},
                     &e->patch_w) ||
             load(e, ar, dir, "patch_embed.proj.bias", 1, &d, &e->patch_b) ||
             load(e, ar, dir, "pos_embed.weight", 2,
                  (int64_t[]){c->num_position_embeddings, d}, &e->pos_table) ||
             load_merger(e, ar, dir, "merger", d, &e->merger);
    for (int i = 0; rc == 0 && i < c->depth; i++)
        rc = load_block(e, ar, dir, i);
    for (int j = 0; rc == 0 && j < c->n_deepstack; j++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "deepstack_merger_list.%d", j);
        rc = load_merger(e, ar, dir, prefix, D, &e->deepstack[j]);
    }
    orin_st_close(ar);
    return rc ? -1 : 0;
}

int orin_vision_config_read(const char *dir, orin_vision_config *out)
{
    return parse_vision_config(dir, out);
}

/* Mirrors load_weights. */
double orin_vision_weight_bytes(const orin_vision_config *c, orin_dtype dt)
{
    const double d = c->hidden, f = c->intermediate, D = d * c->merge * c->merge;
    const double k = (double)c->in_channels * c->temporal_patch * c->patch * c->patch;
    const double block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (f * d + f) + (d * f + d);
    const double merger = (D * D + D) + (c->out_hidden * D + c->out_hidden);
    const double elems = d * k + d + (double)c->num_position_embeddings * d +
                         c->depth * block + (2 * d + merger) +
                         c->n_deepstack * (2 * D + merger);
    return elems * (double)orin_dtype_size(dt);
}

/* ---- ops ---- */

/* A call struct shaped like the encoder's attention calls (no data), for the
 * attention provider's `supports` (fa2 on cuda runs some head_dims only). */
static orin_attention_full_args attention_probe(const orin_vision_encoder *e)
{
    const int64_t dims[3] = {1, e->cfg.heads, e->cfg.head_dim}, cu_len = 2;
    const orin_tensor t = orin_tensor_make(NULL, e->dtype, e->dev->kind, 3, dims);
    return (orin_attention_full_args){
        .q = t, .k = t, .v = t, .out = t,
        .cu_seqlens = orin_tensor_make(NULL, ORIN_I32, e->dev->kind, 1, &cu_len),
        .scale = (float)(1.0 / sqrt((double)e->cfg.head_dim)),
    };
}

/* The common ops from whoever has them (the reference first); attention.full
 * from the attention provider the language model uses, where it has one. */
static int bind_ops(orin_vision_encoder *e, const orin_vision_options *opt)
{
    const orin_attention_full_args probe = attention_probe(e);
    const struct {
        const char *op;
        const orin_op_impl **dst;
    } table[] = {
        {ORIN_OP_MATMUL, &e->op.matmul},         {ORIN_OP_ADD, &e->op.add},
        {ORIN_OP_LAYERNORM, &e->op.layernorm},   {ORIN_OP_GELU, &e->op.gelu},
        {ORIN_OP_ROPE_TABLE, &e->op.rope_table}, {ORIN_OP_ATTENTION_FULL, &e->op.attention},
        {ORIN_OP_POS_INTERP, &e->op.pos_interp},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const bool attention = table[i].dst == &e->op.attention;
        orin_bind_request req = {.op = table[i].op, .device = e->dev->kind, .dtype = e->dtype,
                                 .strict = opt->strict,
                                 .provider = attention ? opt->attention : NULL,
                                 .args = attention ? &probe : NULL};
        *table[i].dst = orin_registry_bind(opt->registry, &req);
        if (!*table[i].dst)
            return orin_error_prefix("vision encoder: ");
    }
    if (!opt->fused_ops)
        return 0;
    const struct {
        const char *op;
        const orin_op_impl **dst;
    } fused[] = {{ORIN_OP_MATMUL_GELU, &e->op.matmul_gelu}, {ORIN_OP_MATMUL_ADD, &e->op.matmul_add}};
    for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) {
        orin_bind_request req = {.op = fused[i].op, .device = e->dev->kind, .dtype = e->dtype};
        *fused[i].dst = orin_registry_bind(opt->registry, &req); /* none: no error */
    }
    orin_error_clear();
    return 0;
}

int orin_vision_load(const orin_vision_options *opt, orin_vision_encoder **out)
{
    *out = NULL;
    if (!opt || !opt->path || !opt->device || !opt->registry)
        return orin_error_set("vision encoder: path, device and registry are required");
    orin_vision_encoder *e = calloc(1, sizeof *e);
    if (!e)
        return orin_error_set("vision encoder: out of memory");
    e->dev = opt->device;
    e->dtype = opt->dtype;
    int rc = parse_vision_config(opt->path, &e->cfg);
    if (rc == 0) {
        e->blocks = calloc((size_t)e->cfg.depth, sizeof *e->blocks);
        rc = e->blocks ? 0 : orin_error_set("vision encoder: out of memory");
    }
    if (rc == 0)
        rc = bind_ops(e, opt) || load_weights(e, opt->path) ? -1 : 0;
    if (rc != 0) {
        orin_vision_free(e);
        return -1;
    }
    *out = e;
    return 0;
}

void orin_vision_free(orin_vision_encoder *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n_allocs; i++)
        e->dev->ops->free(e->dev, e->allocs[i]);
    if (e->arena)
        e->dev->ops->free(e->dev, e->arena);
    if (e->workspace)
        e->dev->ops->free(e->dev, e->workspace);
    free(e->allocs);
    free(e->blocks);
    free(e);
}

const orin_vision_config *orin_vision_get_config(const orin_vision_encoder *e)
{
    return &e->cfg;
}

void orin_vision_set_profile(orin_vision_encoder *e, orin_profile *p)
{
    e->profile = p;
}

/* ---- what depends only on the grids (host, double) ---- */

/* One frame's rotary tables [h*w, hd/2]: frequency j < hd/4 turns with the
 * patch's row, the next hd/4 with its column; inv_freq[j] =
 * theta^(-2j / (hd/2)) (Qwen3VLVisionRotaryEmbedding over hd/2). An angle
 * depends only on (row or column, j mod hd/4): those are computed once (the
 * pow, cos and sin of every entry took some 6 ms a 1024 x 768 image). */
static int frame_rope(const orin_vision_config *c, const orin_vision_grid *g, float *cos_t,
                      float *sin_t)
{
    const int64_t half = c->head_dim / 2, quarter = half / 2;
    const int64_t lines = g->h > g->w ? g->h : g->w;
    float *cs = malloc((size_t)(2 * lines * quarter) * sizeof *cs), *sn = cs + lines * quarter;
    if (!cs)
        return orin_error_set("vision encoder: out of memory for the rotary tables");
    for (int64_t j = 0; j < quarter; j++) {
        const double inv = pow(c->rope_theta, -(double)(2 * j) / (double)half);
        for (int64_t r = 0; r < lines; r++) {
            cs[r * quarter + j] = (float)cos((double)r * inv);
            sn[r * quarter + j] = (float)sin((double)r * inv);
        }
    }
    for (int64_t k = 0; k < (int64_t)g->h * g->w; k++) {
        int32_t rc[2];
        orin_patch_rc(k, g->w, c->merge, &rc[0], &rc[1]);
        for (int64_t j = 0; j < half; j++) {
            const int64_t at = rc[j / quarter] * quarter + j % quarter;
            cos_t[k * half + j] = cs[at];
            sin_t[k * half + j] = sn[at];
        }
    }
    free(cs);
    return 0;
}

/* The host side of a call: cos and sin [n, hd/2], cu_seqlens [frames + 1]
 * (one attention segment a frame). */
typedef struct host_tables {
    float *cos, *sin;
    int32_t *cu;
    int64_t frames;
} host_tables;

static void host_tables_free(host_tables *t)
{
    free(t->cos);
    free(t->sin);
    free(t->cu);
}

static int host_tables_make(const orin_vision_encoder *e, const orin_vision_grid *grids,
                            int n_images, int64_t n, host_tables *t)
{
    const orin_vision_config *c = &e->cfg;
    const int64_t half = c->head_dim / 2;
    memset(t, 0, sizeof *t);
    for (int i = 0; i < n_images; i++)
        t->frames += grids[i].t;
    t->cos = malloc((size_t)(n * half) * sizeof(float));
    t->sin = malloc((size_t)(n * half) * sizeof(float));
    t->cu = malloc((size_t)(t->frames + 1) * sizeof(int32_t));
    if (!t->cos || !t->sin || !t->cu) {
        host_tables_free(t);
        return orin_error_set("vision encoder: out of memory for the rotary tables");
    }
    int64_t row = 0, frame = 0;
    t->cu[0] = 0;
    for (int i = 0; i < n_images; i++) {
        const int64_t area = (int64_t)grids[i].h * grids[i].w;
        /* every frame of an image has the same positions */
        for (int32_t f = 0; f < grids[i].t; f++, row += area) {
            if (frame_rope(c, &grids[i], t->cos + row * half, t->sin + row * half) != 0) {
                host_tables_free(t);
                return -1;
            }
            t->cu[++frame] = (int32_t)(row + area);
        }
    }
    return 0;
}

/* ---- the call ---- */

/* The device buffers of one call, n patches, n / merge^2 merged tokens, laid
 * out in the encoder's arena. */
typedef struct run_bufs {
    int64_t n, merged;
    orin_tensor pixels, x, h, q, k, v, attn, o, f, pos, cos, sin, cu;
    orin_tensor m1, m2;                   /* [merged, D] */
    orin_tensor embeds;                   /* [merged, out_hidden] */
    orin_tensor deep[ORIN_VISION_MAX_DEEPSTACK]; /* embeds and these: the caller's, or
                                                    in the arena too */
    char *base;                           /* NULL while measuring the layout */
    size_t used;
} run_bufs;

/* The next [rows, cols] (cols 0: [rows]) tensor of the layout, 256-byte aligned. */
static void buf_take(const orin_vision_encoder *e, run_bufs *b, orin_tensor *t, orin_dtype dt,
                     int64_t rows, int64_t cols)
{
    const int64_t dims[2] = {rows, cols};
    *t = orin_tensor_make(b->base ? b->base + b->used : NULL, dt, e->dev->kind, cols ? 2 : 1,
                          dims);
    b->used += (orin_tensor_nbytes(t) + 255) & ~(size_t)255;
}

/* Grows a kept device buffer to at least `bytes` (its contents are not kept). */
static int grow(orin_vision_encoder *e, void **buf, size_t *size, size_t bytes, const char *what)
{
    if (bytes <= *size)
        return 0;
    if (*buf)
        e->dev->ops->free(e->dev, *buf);
    *buf = e->dev->ops->alloc(e->dev, bytes);
    *size = *buf ? bytes : 0;
    if (!*buf)
        return orin_error_set("vision encoder: %s: cannot allocate %.1f MiB on %s", what,
                              (double)bytes / 1048576.0, e->dev->name);
    return 0;
}

/* The caller's output tensors: device, the encoder's dtype, [merged, out_hidden]. */
static int check_outputs(orin_vision_encoder *e, run_bufs *b, const orin_vision_device_output *o)
{
    const orin_vision_config *c = &e->cfg;
    const char *label = "vision encoder";
    if (o->n_deepstack != c->n_deepstack)
        return orin_error_set("%s: %d deepstack outputs given, the config has %d", label,
                              o->n_deepstack, c->n_deepstack);
    for (int j = -1; j < c->n_deepstack; j++) {
        const orin_tensor *t = j < 0 ? &o->embeds : &o->deepstack[j];
        if (orin_check_tensor(label, j < 0 ? "embeds" : "deepstack", t, e->dev->kind, e->dtype,
                              2, 2) ||
            orin_check_dim(label, "output", t, 0, b->merged) ||
            orin_check_dim(label, "output", t, 1, c->out_hidden))
            return -1;
        *(j < 0 ? &b->embeds : &b->deep[j]) = *t;
    }
    return 0;
}

/* The call's tensors at b->base (NULL: only b->used, the bytes they take). */
static void run_bufs_layout(const orin_vision_encoder *e, run_bufs *b, int64_t cols,
                            int64_t frames, bool outputs_given)
{
    const orin_vision_config *c = &e->cfg;
    const orin_dtype dt = e->dtype;
    const int64_t n = b->n, d = c->hidden, D = d * c->merge * c->merge;
    orin_tensor *const acts[] = {&b->x, &b->h, &b->q, &b->k, &b->v, &b->attn, &b->o, &b->pos};
    b->used = 0;
    buf_take(e, b, &b->pixels, dt, n, cols);
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        buf_take(e, b, acts[i], dt, n, d);
    buf_take(e, b, &b->f, dt, n, c->intermediate);
    buf_take(e, b, &b->cos, ORIN_F32, n, c->head_dim / 2);
    buf_take(e, b, &b->sin, ORIN_F32, n, c->head_dim / 2);
    buf_take(e, b, &b->cu, ORIN_I32, frames + 1, 0);
    buf_take(e, b, &b->m1, dt, b->merged, D);
    buf_take(e, b, &b->m2, dt, b->merged, D);
    if (outputs_given)
        return;
    buf_take(e, b, &b->embeds, dt, b->merged, c->out_hidden);
    for (int j = 0; j < c->n_deepstack; j++)
        buf_take(e, b, &b->deep[j], dt, b->merged, c->out_hidden);
}

/* outputs: the caller's embeds and deepstack tensors, or NULL to put them in
 * the arena too. */
static int run_bufs_make(orin_vision_encoder *e, run_bufs *b, int64_t n, int64_t cols,
                         int64_t frames, const orin_vision_device_output *outputs)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->merged = n / ((int64_t)e->cfg.merge * e->cfg.merge);
    run_bufs_layout(e, b, cols, frames, outputs != NULL);
    if (grow(e, &e->arena, &e->arena_size, b->used, "activations"))
        return -1;
    b->base = e->arena;
    run_bufs_layout(e, b, cols, frames, outputs != NULL);
    return outputs ? check_outputs(e, b, outputs) : 0;
}

/* Uploads the call's inputs: pixel_values (converted) and the tables. */
static int run_bufs_fill(orin_vision_encoder *e, run_bufs *b, const float *pixels,
                         const host_tables *t)
{
    orin_device *dev = e->dev;
    return dev->ops->upload(dev, b->pixels.data, e->dtype, pixels, ORIN_F32,
                            (size_t)orin_tensor_numel(&b->pixels)) ||
                   dev->ops->copy_h2d(dev, b->cos.data, t->cos, orin_tensor_nbytes(&b->cos)) ||
                   dev->ops->copy_h2d(dev, b->sin.data, t->sin, orin_tensor_nbytes(&b->sin)) ||
                   dev->ops->copy_h2d(dev, b->cu.data, t->cu, orin_tensor_nbytes(&b->cu))
               ? orin_error_prefix("vision encoder: uploading the inputs: ")
               : 0;
}

/* t seen with another shape of the same elements. */
static orin_tensor reshaped(const orin_tensor *t, int ndim, const int64_t *dims)
{
    return orin_tensor_make(t->data, t->dtype, t->device, ndim, dims);
}

/* Rows row0..row0+rows-1 of a [R, C] or [R] tensor. */
static orin_tensor rows_of(const orin_tensor *t, int64_t row0, int64_t rows)
{
    int64_t dims[2] = {rows, t->ndim == 2 ? t->shape[1] : 0};
    int64_t width = t->ndim == 2 ? t->shape[1] : 1;
    void *data = (char *)t->data + row0 * width * (int64_t)orin_dtype_size(t->dtype);
    return orin_tensor_make(data, t->dtype, t->device, t->ndim, dims);
}

typedef struct builder {
    orin_graph *g;
    int rc;
} builder;

#define ADD(B, IMPL, ARGS, LABEL)                                                        \
    do {                                                                                 \
        if ((B)->rc == 0)                                                                \
            (B)->rc = orin_graph_add((B)->g, IMPL, &(ARGS), sizeof(ARGS), LABEL,         \
                                     (orin_node_bytes){0});                              \
    } while (0)

static void add_linear(const orin_vision_encoder *e, builder *b, orin_tensor x, orin_tensor w,
                       orin_tensor bias, orin_tensor y, const char *label)
{
    orin_matmul_args a = {.x = x, .w = w, .bias = bias, .y = y};
    ADD(b, e->op.matmul, a, label);
}

static void add_norm(const orin_vision_encoder *e, builder *b, orin_tensor x, orin_tensor w,
                     orin_tensor bias, orin_tensor out, const char *label)
{
    orin_layernorm_args a = {.x = x, .weight = w, .bias = bias, .out = out,
                             .eps = (float)e->cfg.eps};
    ADD(b, e->op.layernorm, a, label);
}

static void add_gelu(const orin_vision_encoder *e, builder *b, orin_tensor x, orin_gelu_kind kind,
                     const char *label)
{
    orin_gelu_args a = {.x = x, .out = x, .kind = kind};
    ADD(b, e->op.gelu, a, label);
}

static void add_residual(const orin_vision_encoder *e, builder *b, orin_tensor x, orin_tensor y,
                         const char *label)
{
    orin_add_args a = {.a = x, .b = y, .out = x};
    ADD(b, e->op.add, a, label);
}

/* y = gelu(x . w^T + bias): one op where bound, else the matmul then the gelu. */
static void add_linear_gelu(const orin_vision_encoder *e, builder *b, orin_tensor x,
                            orin_tensor w, orin_tensor bias, orin_tensor y, orin_gelu_kind kind,
                            const char *label)
{
    if (e->op.matmul_gelu) {
        orin_matmul_gelu_args a = {.x = x, .w = w, .bias = bias, .y = y, .kind = kind};
        ADD(b, e->op.matmul_gelu, a, label);
        return;
    }
    add_linear(e, b, x, w, bias, y, label);
    add_gelu(e, b, y, kind, label);
}

/* x += h . w^T + bias: one op where bound, else the matmul into tmp then the add. */
static void add_linear_residual(const orin_vision_encoder *e, builder *b, orin_tensor h,
                                orin_tensor w, orin_tensor bias, orin_tensor x, orin_tensor tmp,
                                const char *label)
{
    if (e->op.matmul_add) {
        orin_matmul_args a = {.x = h, .w = w, .bias = bias, .y = x};
        ADD(b, e->op.matmul_add, a, label);
        return;
    }
    add_linear(e, b, h, w, bias, tmp, label);
    add_residual(e, b, x, tmp, label);
}

static void add_block(const orin_vision_encoder *e, builder *b, const run_bufs *r, int i)
{
    const orin_vision_config *c = &e->cfg;
    const vision_block *B = &e->blocks[i];
    const int64_t n = r->n, d = c->hidden;
    const int64_t heads[3] = {n, c->heads, c->head_dim};
    const orin_tensor *qkv[3] = {&r->q, &r->k, &r->v};
    static const char *const qkv_names[3] = {"q", "k", "v"};
    char label[48];
#define LABEL(name) (snprintf(label, sizeof label, "block %d %s", i, name), label)

    add_norm(e, b, r->x, B->norm1_w, B->norm1_b, r->h, LABEL("norm1"));
    for (int p = 0; p < 3; p++)
        add_linear(e, b, r->h, rows_of(&B->qkv_w, p * d, d), rows_of(&B->qkv_b, p * d, d),
                   *qkv[p], LABEL(qkv_names[p]));
    for (int p = 0; p < 2; p++) {
        orin_rope_table_args a = {.x = reshaped(qkv[p], 3, heads), .cos = r->cos, .sin = r->sin};
        ADD(b, e->op.rope_table, a, LABEL(p == 0 ? "rope q" : "rope k"));
    }
    orin_attention_full_args at = {
        .q = reshaped(&r->q, 3, heads),
        .k = reshaped(&r->k, 3, heads),
        .v = reshaped(&r->v, 3, heads),
        .out = reshaped(&r->attn, 3, heads),
        .cu_seqlens = r->cu,
        .scale = (float)(1.0 / sqrt((double)c->head_dim)),
    };
    ADD(b, e->op.attention, at, LABEL("attention"));
    add_linear_residual(e, b, r->attn, B->proj_w, B->proj_b, r->x, r->o, LABEL("attn proj"));
    add_norm(e, b, r->x, B->norm2_w, B->norm2_b, r->h, LABEL("norm2"));
    add_linear_gelu(e, b, r->h, B->fc1_w, B->fc1_b, r->f, c->act, LABEL("fc1"));
    add_linear_residual(e, b, r->f, B->fc2_w, B->fc2_b, r->x, r->o, LABEL("fc2"));
#undef LABEL
}

/* A merger on the residual stream x [n, d] into out [merged, out_hidden]:
 * postshuffle (DeepStack) normalises [merged, D], the main merger [n, d]. */
static void add_merger(const orin_vision_encoder *e, builder *b, const run_bufs *r,
                       const vision_merger *M, bool postshuffle, orin_tensor out)
{
    const int64_t D = r->m1.shape[1], shuffled[2] = {r->merged, D};
    if (postshuffle)
        add_norm(e, b, reshaped(&r->x, 2, shuffled), M->norm_w, M->norm_b, r->m1, "merger norm");
    else
        add_norm(e, b, r->x, M->norm_w, M->norm_b, reshaped(&r->m1, 2, r->x.shape), "merger norm");
    add_linear(e, b, r->m1, M->fc1_w, M->fc1_b, r->m2, "merger fc1");
    /* the mergers' GELU is nn.GELU(): the erf form, whatever hidden_act says */
    add_gelu(e, b, r->m2, ORIN_GELU_ERF, "merger act");
    add_linear(e, b, r->m2, M->fc2_w, M->fc2_b, out, "merger fc2");
}

/* pos [n, d]: each image's frames get the position table resampled to its grid. */
static void add_pos_interp(const orin_vision_encoder *e, builder *b, const run_bufs *r,
                           const orin_vision_grid *grids, int n_images)
{
    const orin_vision_config *c = &e->cfg;
    int64_t row = 0;
    for (int i = 0; i < n_images; i++) {
        const int64_t rows = (int64_t)grids[i].t * grids[i].h * grids[i].w;
        orin_pos_interp_args a = {.table = e->pos_table, .out = rows_of(&r->pos, row, rows),
                                  .side = c->side, .h = grids[i].h, .w = grids[i].w,
                                  .merge = c->merge};
        ADD(b, e->op.pos_interp, a, "pos_interp");
        row += rows;
    }
}

/* dst[0..numel) = t as f32 (a fresh array), or NULL with the error set. */
static float *fetch(orin_vision_encoder *e, const orin_tensor *t)
{
    const size_t n = (size_t)orin_tensor_numel(t), bytes = orin_tensor_nbytes(t);
    float *out = malloc(n * sizeof(float));
    void *raw = t->dtype == ORIN_F32 ? (void *)out : malloc(bytes);
    if (!out || !raw || e->dev->ops->synchronize(e->dev) != 0 ||
        e->dev->ops->copy_d2h(e->dev, raw, t->data, bytes) != 0 ||
        (raw != out && orin_convert(out, ORIN_F32, raw, t->dtype, n) != 0)) {
        if (raw != out)
            free(raw);
        free(out);
        orin_error_set("vision encoder: cannot copy a result back");
        return NULL;
    }
    if (raw != out)
        free(raw);
    return out;
}

/* Runs the nodes g holds, then empties it for the next stage (with a
 * profile: one run of it). A failure (building or running) is prefixed with
 * the encoder's name. */
static int run_stage(orin_vision_encoder *e, run_bufs *r, builder *b)
{
    if (b->rc != 0)
        return orin_error_prefix("vision encoder: ");
    if (grow(e, &e->workspace, &e->workspace_size, orin_graph_workspace_size(b->g), "workspace"))
        return -1;
    orin_exec ex = {.device = e->dev, .workspace = e->workspace,
                    .workspace_size = e->workspace_size};
    int rc = e->profile ? orin_graph_run_profiled(b->g, &ex, e->profile, 0)
                        : orin_graph_run(b->g, &ex);
    orin_graph_reset(b->g);
    return rc ? orin_error_prefix("vision encoder: ") : 0;
}

/* The nodes built so far run now with trace, so that their output can be
 * copied back; else they wait, and the whole encoder runs as one graph. */
static int stage_end(orin_vision_encoder *e, run_bufs *r, builder *b, bool trace)
{
    if (trace)
        return run_stage(e, r, b);
    return b->rc ? orin_error_prefix("vision encoder: ") : 0;
}

/* The stages in order; with trace each one's output is copied back, and the
 * results are unless the caller gave their device tensors (out NULL). */
static int run_all(orin_vision_encoder *e, run_bufs *r, const orin_vision_grid *grids,
                   int n_images, bool trace, orin_vision_output *out)
{
    const orin_vision_config *c = &e->cfg;
    builder b = {.g = orin_graph_create()};
    if (!b.g)
        return orin_error_set("vision encoder: out of memory");
    add_linear(e, &b, r->pixels, e->patch_w, e->patch_b, r->x, "patch_embed");
    add_pos_interp(e, &b, r, grids, n_images);
    int rc = stage_end(e, r, &b, trace);
    if (rc == 0 && trace)
        rc = (out->patch_embed = fetch(e, &r->x)) && (out->pos_embed = fetch(e, &r->pos)) ? 0 : -1;
    if (rc == 0) {
        add_residual(e, &b, r->x, r->pos, "pos_embed");
        rc = stage_end(e, r, &b, trace);
    }
    if (rc == 0 && trace)
        rc = (out->embed = fetch(e, &r->x)) ? 0 : -1;
    for (int i = 0; rc == 0 && i < c->depth; i++) {
        add_block(e, &b, r, i);
        for (int j = 0; j < c->n_deepstack; j++)
            if (c->deepstack[j] == i)
                add_merger(e, &b, r, &e->deepstack[j], true, r->deep[j]);
        rc = stage_end(e, r, &b, trace);
        if (rc == 0 && trace)
            rc = (out->blocks[i] = fetch(e, &r->x)) ? 0 : -1;
    }
    if (rc == 0) {
        add_merger(e, &b, r, &e->merger, false, r->embeds);
        rc = run_stage(e, r, &b);
    }
    if (rc == 0 && out)
        rc = (out->embeds = fetch(e, &r->embeds)) ? 0 : -1;
    for (int j = 0; rc == 0 && out && j < c->n_deepstack; j++)
        rc = (out->deepstack[j] = fetch(e, &r->deep[j])) ? 0 : -1;
    orin_graph_free(b.g);
    return rc;
}

/* The grids against pixel_values' shape; *n gets the patches. */
static int check_inputs(const orin_vision_config *c, const float *pixels, int64_t rows,
                        int64_t cols, const orin_vision_grid *grids, int n_images, int64_t *n)
{
    const int64_t want_cols = (int64_t)c->in_channels * c->temporal_patch * c->patch * c->patch;
    if (!pixels || !grids || n_images < 1)
        return orin_error_set("vision encoder: no images");
    if (cols != want_cols)
        return orin_error_set("vision encoder: pixel_values: %lld values a row, the config "
                              "implies %lld (channels x temporal_patch x patch^2)",
                              (long long)cols, (long long)want_cols);
    *n = 0;
    for (int i = 0; i < n_images; i++) {
        const orin_vision_grid *g = &grids[i];
        if (g->t < 1 || g->h < 1 || g->w < 1 || g->h % c->merge || g->w % c->merge)
            return orin_error_set("vision encoder: image %d: grid [%d, %d, %d]: t, h and w "
                                  "must be positive, h and w multiples of the merge size %d",
                                  i, g->t, g->h, g->w, c->merge);
        *n += (int64_t)g->t * g->h * g->w;
        if (*n > INT32_MAX / 4)
            return orin_error_set("vision encoder: too many patches");
    }
    if (rows != *n)
        return orin_error_set("vision encoder: pixel_values: %lld rows, the grids make %lld "
                              "patches", (long long)rows, (long long)*n);
    return 0;
}

int orin_vision_encode(orin_vision_encoder *e, const float *pixel_values, int64_t rows,
                       int64_t cols, const orin_vision_grid *grids, int n_images, bool trace,
                       orin_vision_output *out)
{
    const orin_vision_config *c = &e->cfg;
    int64_t n = 0;
    memset(out, 0, sizeof *out);
    if (check_inputs(c, pixel_values, rows, cols, grids, n_images, &n) != 0)
        return -1;
    host_tables t;
    if (host_tables_make(e, grids, n_images, n, &t) != 0)
        return -1;
    run_bufs r;
    int rc = run_bufs_make(e, &r, n, cols, t.frames, NULL) ||
             run_bufs_fill(e, &r, pixel_values, &t);
    out->tokens = r.merged;
    out->out_hidden = c->out_hidden;
    out->n_deepstack = c->n_deepstack;
    out->patches = n;
    if (rc == 0 && trace) {
        out->blocks = calloc((size_t)c->depth, sizeof *out->blocks);
        out->n_blocks = out->blocks ? c->depth : 0;
        rc = out->blocks ? 0 : orin_error_set("vision encoder: out of memory");
    }
    if (rc == 0)
        rc = run_all(e, &r, grids, n_images, trace, out);
    host_tables_free(&t);
    if (rc != 0) {
        orin_vision_output_free(out);
        return -1;
    }
    return 0;
}

void orin_vision_output_free(orin_vision_output *out)
{
    free(out->embeds);
    for (int j = 0; j < out->n_deepstack; j++)
        free(out->deepstack[j]);
    free(out->patch_embed);
    free(out->pos_embed);
    free(out->embed);
    for (int i = 0; out->blocks && i < out->n_blocks; i++)
        free(out->blocks[i]);
    free(out->blocks);
    memset(out, 0, sizeof *out);
}

int orin_vision_encode_device(orin_vision_encoder *e, const float *pixel_values, int64_t rows,
                              int64_t cols, const orin_vision_grid *grids, int n_images,
                              const orin_vision_device_output *outputs)
{
    int64_t n = 0;
    if (!outputs)
        return orin_error_set("vision encoder: no output tensors");
    if (check_inputs(&e->cfg, pixel_values, rows, cols, grids, n_images, &n) != 0)
        return -1;
    const double t0 = orin_seconds();
    host_tables t;
    if (host_tables_make(e, grids, n_images, n, &t) != 0)
        return -1;
    const double t1 = orin_seconds();
    run_bufs r;
    int rc = run_bufs_make(e, &r, n, cols, t.frames, outputs) ||
             run_bufs_fill(e, &r, pixel_values, &t);
    const double t2 = orin_seconds();
    if (rc == 0)
        rc = run_all(e, &r, grids, n_images, false, NULL);
    /* idle on return: the caller's timing of the encoder is whole */
    if (e->dev->ops->synchronize(e->dev) != 0 && rc == 0)
        rc = -1;
    host_tables_free(&t);
    orin_log(ORIN_LOG_DEBUG, "vision encoder: %lld patches: rotary tables %.1f ms, buffers "
             "and upload %.1f ms, blocks and mergers %.1f ms", (long long)n, (t1 - t0) * 1e3,
             (t2 - t1) * 1e3, (orin_seconds() - t2) * 1e3);
    return rc ? -1 : 0;
}
