/* Qwen2 / Qwen2.5 / Qwen3 decoder-only models.
 *
 * The two architectures share one decoder block; they differ only in what
 * config.json says:
 *   Qwen2: q/k/v projections carry biases (attention_bias), head_dim = hidden / heads.
 *   Qwen3: RMSNorm over each head of q and k before RoPE (qk_norm), optional biases
 *          on q/k/v/o, head_dim decoupled from hidden / heads.
 *
 * Per layer, over n tokens (x is the residual stream [n, d]):
 *   h = rmsnorm(x);  q, k, v = h.Wq(+b), h.Wk(+b), h.Wv(+b)
 *   [Qwen3] q, k = rmsnorm per head
 *   rope(q), rope(k);  kv_write(k, v);  a = attention(q, cache)
 *   x += a.Wo;  h = rmsnorm(x);  x += (silu(h.Wg) * h.Wu).Wd
 * then logits = rmsnorm(x).Wlm.
 *
 * The model names no plugin: each op is bound through the registry for the
 * model's device and dtype, attention from the provider the user chose.
 *
 * Linear layers (q/k/v/o, gate/up/down, and lm_head) are stored in one of the
 * formats of orin_weight_format: the compute dtype; AWQ int4 as the folder has
 * it (config.json's quantization_config; the layers of modules_to_not_convert,
 * the embeddings and lm_head stay float); or int8, quantized at load from a
 * float folder (model.quant = int8, lm_head too with model.quant_lm_head).
 * Each runs through the matmul of its format (matmul, matmul.awq4,
 * matmul.int8); the fused matmul.qkv and matmul.swiglu only where every
 * weight they take is float. */
#include "model.h"
#include "qwen3_vl_vision.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/graph.h"
#include "orin/kv_cache.h"
#include "orin/ops.h"
#include "orin/quant.h"
#include "orin/safetensors.h"
#include "orin/sampler.h"
#include "orin/vl_prompt.h"

#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A linear layer, y = x . w^T (+ bias): its weight in the compute dtype
 * (matmul), or packed (matmul.awq4, matmul.int8; orin_qweight in orin/ops.h). */
typedef struct qwen_linear {
    orin_weight_format fmt;
    orin_tensor w;                        /* ORIN_WEIGHT_FLOAT: [out, in] */
    orin_qweight q;                       /* the quantized formats */
    orin_tensor bias;                     /* [out], or data NULL */
} qwen_linear;

typedef struct qwen_layer {
    orin_tensor attn_norm, q_norm, k_norm, mlp_norm;
    qwen_linear q, k, v, o, gate, up, down;
} qwen_layer;

/* The ops the model runs, bound once at load. */
typedef struct qwen_ops {
    const orin_op_impl *embedding, *rmsnorm, *rope, *matmul, *swiglu, *add, *kv_write;
    const orin_op_impl *rope_table;       /* Qwen3-VL: M-RoPE from host tables */
    const orin_op_impl *attn_prefill, *attn_decode;
    /* The fused ops (orin/ops.h), NULL where no plugin has them for the model's
     * device and dtype or runtime.fused_ops is off: the graph then runs the
     * sequence each one stands for. */
    const orin_op_impl *add_rmsnorm, *matmul_qkv, *matmul_swiglu, *rope_kv_write;
    const orin_op_impl *matmul_argmax;    /* final norm + lm_head + greedy pick */
    const orin_op_impl *sample;           /* sample.candidates, off the host only */
    /* By orin_weight_format: the quantized matmuls, bound where a layer is in
     * their format, and their fused q/k/v and gate/up+SwiGLU (optional, from
     * the provider of the matmul, whose prepare laid the weights out). */
    const orin_op_impl *matmul_quant[3], *matmul_qkv_quant[3], *matmul_swiglu_quant[3];
} qwen_ops;

/* A decode step's graph, run eagerly once (ops create their handles, pick their
 * algorithms and size the workspace then, none of which a graph may do), then
 * captured once and replayed ever after where `replayable`. */
typedef struct decode_step {
    orin_model *m;                        /* for the capture's callback */
    orin_graph *graph;
    bool replayable;                      /* runtime.cuda_graph, the device, the ops allow it */
    bool warm;                            /* it has run eagerly */
    void *replay;                         /* the captured step (a CUDA graph) */
} decode_step;

/* The decode steps a model has: the one ending in the logits, always; the one
 * ending in the greedy pick where matmul.argmax is bound. */
enum { DECODE_LOGITS, DECODE_GREEDY, DECODE_STEPS };

/* Each decode step is built for DECODE_SPANS spans of cache positions, the
 * context halved, halved again and so on (40,960: 5,120, 10,240, 20,480 and
 * 40,960), a step at position p running the shortest span's graph above p:
 * its attention is called with that span as max_kv_len, so that at short
 * positions it runs the kernel it picks for a short cache (fa2: one cluster
 * launch up to 8k) and not the one the whole context asks for (H100,
 * Qwen3-8B at 512 with a context of 32,768: int8 3.45 ms a token through
 * fa2's split kernel, 3.32 through its cluster kernel; f16 5.92 and 5.40:
 * bench/notes/fa2-decode.md). */
#define DECODE_SPANS 4

/* The candidates sample.candidates may return to the host (a top_k of 20 asks
 * for 40: orin_sampler_candidates_top_k). */
#define SAMPLE_MAX 256

/* sample.candidates' outputs, one device block so that one copy brings them
 * back: count, then ids[SAMPLE_MAX], then values[SAMPLE_MAX]. */
typedef struct sample_block {
    int32_t count;
    int32_t ids[SAMPLE_MAX];
    float values[SAMPLE_MAX];
} sample_block;


/* The images of one orin_model_prefill_images call, as the graph of each of
 * its chunks reads them. Sequence index i of the call is an image token when
 * feature[i] >= 0: its input row is embeds[feature[i]] and DeepStack feature
 * j adds deepstack[j][feature[i]] after decoder layer j. */
typedef struct vl_images {
    const int32_t *feature;               /* host [n]: feature row, or -1 */
    orin_tensor embeds;                   /* device [T, d]: the merger's output */
    orin_tensor index;                    /* device i32 [T]: 0..T-1, the ids that pick
                                             embeds' rows through the embedding op */
    orin_tensor *deepstack;               /* n_deepstack device [T, d] */
    int32_t n_deepstack;
    int64_t tokens;                       /* T */
    int32_t chunk0;                       /* sequence index of the chunk's first row */
} vl_images;

/* Greedy decode one step ahead (decode_ahead): the step at `pos` queued behind
 * the one before, before the host has seen that one's pick, reading the pick
 * (`id` once it is back) from the device and its position from `positions`. */
typedef struct decode_ahead_state {
    bool on;                              /* the device and the model allow it */
    bool queued;                          /* a step at pos is queued */
    int32_t pos, id;
    int32_t *pick;                        /* pinned host i32: the pick copied back */
    void *picked;                         /* a mark recorded after that copy */
    orin_tensor positions;                /* device i32 [context]: 0, 1, 2, ... */
} decode_ahead_state;

/* Device activation buffers, sized for `rows` tokens (one prefill chunk). */
typedef struct qwen_buffers {
    int32_t rows;
    orin_tensor ids, pos;                 /* i32 [rows] */
    orin_tensor x, h, o;                  /* [rows, d] */
    orin_tensor x_alt;                    /* [1, d]: where a decode step's residual
                                             stream goes when a product's norm writes it
                                             (orin_norm_in: not over x, which it reads) */
    orin_tensor q, attn;                  /* [rows, H*hd] */
    orin_tensor k, v;                     /* [rows, Hkv*hd] */
    orin_tensor gate, up;                 /* [rows, F] */
    orin_tensor logits;                   /* [rows, V] */
} qwen_buffers;

struct orin_model {
    orin_model_config cfg;
    const char *prefix;                   /* of the language model's tensors: "model."
                                             or, in a Qwen3-VL folder, "model.language_model." */
    orin_device *dev;
    orin_dtype dtype;
    int32_t context;

    orin_tensor embed, final_norm;
    qwen_linear lm_head;                  /* FLOAT and tied: the embedding table */
    qwen_layer *layers;
    bool int8;                            /* model.quant = int8 on a float folder */
    bool int8_lm_head;                    /* ... and model.quant_lm_head */
    bool uses_format[3];                  /* by orin_weight_format: some layer is in it */
    void **allocs;                        /* every device buffer we own */
    size_t n_allocs, cap_allocs;

    qwen_ops op;
    qwen_buffers buf;
    orin_kv_cache *kv;
    size_t weight_bytes;                  /* of the weights on the device (packed
                                             formats at their size) */

    orin_graph *prefill;                  /* rebuilt per chunk */
    /* The decode steps, built once per span of positions (DECODE_SPANS) and
     * run every step in it: ending in the logits (for orin_model_sample), or,
     * where matmul.argmax is bound, a second one ending in the greedy pick
     * (orin_model_decode_sample). */
    decode_step decode[DECODE_SPANS][DECODE_STEPS];
    int32_t decode_span[DECODE_SPANS];    /* the spans' max_kv_len, ascending */
    int decode_spans;
    orin_tensor greedy_id;                /* device: i32 [1], the greedy step's pick */
    decode_ahead_state ahead;
    orin_profile *profile;                /* --profile: decode steps run op by op, timed */
    orin_profile *prefill_profile;        /* --profile: prefill chunks' ops, timed */

    /* Sampling where the logits are (orin_model_sample), where a plugin has
     * sample.candidates for the device (not the host: its logits are at hand). */
    orin_tensor history, history_n;       /* device: i32 [context], i32 [1] */
    int32_t *history_mirror;              /* host: what history holds */
    int32_t history_len;
    void *sample_dev;                     /* device: a sample_block */
    void *sample_host;                    /* host: a sample_block */
    float *host_logits;                   /* [V]: the whole-vocabulary fallback */
    void *workspace;
    size_t workspace_size;
    void *staging;                        /* host buffer for non-f32 logits */
    int32_t *host_pos;                    /* host positions of one chunk, [rows] */

    /* Qwen3-VL (cfg.vl.is_vl). The rotary position of a token is not its cache
     * position: M-RoPE gives image tokens 2-D positions, and the text after an
     * image continues from the image's largest position + 1 (README-vl.md,
     * section 9). Prefill with images rotates by host tables (rope.table);
     * text and decode steps by rope at cache position + rope_delta, all three
     * position rows being equal there. */
    orin_vision_encoder *vision;
    double vision_bytes;                  /* its weights on the device (the memory plan) */
    int32_t rope_delta;                   /* of the sequence in the cache */
    double vision_s;                      /* the last prefill's vision encoder, seconds */
    orin_tensor rope_pos;                 /* i32 [rows]: cache position + rope_delta */
    orin_tensor rope_cos, rope_sin;       /* f32 [rows, head_dim/2]: a chunk's tables */
    int32_t *host_rope_pos;               /* [rows] */
    vl_images *img;                       /* during orin_model_prefill_images */
    const float *host_cos, *host_sin;     /* ... its tables, [n, head_dim/2] */
};

/* ---- device memory ---------------------------------------------------------- */

static void *model_alloc(orin_model *m, size_t bytes, const char *what)
{
    if (m->n_allocs == m->cap_allocs) {
        size_t cap = m->cap_allocs ? m->cap_allocs * 2 : 256;
        void **a = realloc(m->allocs, cap * sizeof *a);
        if (!a) {
            orin_error_set("out of memory");
            return NULL;
        }
        m->allocs = a;
        m->cap_allocs = cap;
    }
    void *p = m->dev->ops->alloc(m->dev, bytes ? bytes : 1);
    if (!p) {
        orin_error_set("%s: cannot allocate %.1f MiB on %s", what, (double)bytes / 1048576.0,
                       m->dev->name);
        return NULL;
    }
    m->allocs[m->n_allocs++] = p;
    return p;
}

static int alloc_tensor(orin_model *m, orin_tensor *t, orin_dtype dt, int ndim,
                        const int64_t *dims, const char *what)
{
    *t = orin_tensor_make(NULL, dt, m->dev->kind, ndim, dims);
    t->data = model_alloc(m, orin_tensor_nbytes(t), what);
    return t->data ? 0 : -1;
}

/* ---- weights ------------------------------------------------------------------ */

/* Uploads `src` converted to the compute dtype into a new device tensor (on a
 * GPU the conversion runs there, after a pinned-buffer copy of the raw bytes). */
static int upload_converted(orin_model *m, const orin_st_tensor *src, orin_tensor *out)
{
    if (alloc_tensor(m, out, m->dtype, src->ndim, src->shape, src->name) != 0)
        return -1;
    m->weight_bytes += orin_tensor_nbytes(out);
    size_t n = (size_t)orin_tensor_numel(out);
    if (m->dev->ops->upload(m->dev, out->data, m->dtype, src->data, src->dtype, n) != 0)
        return orin_error_prefix("%s: ", src->name);
    return 0;
}

/* Finds `name`, checks its shape against what config.json implies and its
 * dtype, then uploads it in the compute dtype. */
static int load_weight(orin_model *m, const orin_st_archive *ar, const char *model_dir,
                       const char *name, int ndim, const int64_t *dims, orin_tensor *out)
{
    const orin_st_tensor *st = orin_st_find_float(ar, model_dir, name, ndim, dims);
    return st ? upload_converted(m, st, out) : -1;
}

/* A packed tensor (AWQ's i32 words, f16 scales) of dtype dt, copied as it is. */
static int load_packed(orin_model *m, const orin_st_archive *ar, const char *model_dir,
                       const char *name, orin_dtype dt, const int64_t dims[2], orin_tensor *out)
{
    const orin_st_tensor *st = orin_st_find_shaped(ar, model_dir, name, 2, dims);
    if (!st)
        return -1;
    if (!st->dtype_known || st->dtype != dt)
        return orin_error_set("%s: tensor '%s' has dtype %s; expected %s", st->file, name,
                              st->dtype_name, dt == ORIN_I32 ? "I32" : "F16");
    if (alloc_tensor(m, out, dt, 2, dims, name) != 0)
        return -1;
    m->weight_bytes += orin_tensor_nbytes(out);
    if (m->dev->ops->copy_h2d(m->dev, out->data, st->data, orin_tensor_nbytes(out)) != 0)
        return orin_error_prefix("%s: ", name);
    return 0;
}

/* name = module.suffix ("model.layers.3.mlp.up_proj" "qweight"). */
static int tensor_name(char name[192], const char *module, const char *suffix)
{
    if ((size_t)snprintf(name, 192, "%s.%s", module, suffix) >= 192)
        return orin_error_set("%s.%s: tensor name too long", module, suffix);
    return 0;
}

/* The input values per scale of a linear layer of `in` inputs stored as fmt:
 * quantization_config's group_size for AWQ (0: the whole width), 128 (or the
 * width) for int8. */
static int32_t group_of(const orin_model *m, orin_weight_format fmt, int64_t in)
{
    if (fmt == ORIN_WEIGHT_AWQ4)
        return m->cfg.quant.group_size ? m->cfg.quant.group_size : (int32_t)in;
    return orin_int8_group_size(in);
}

/* Hands a quantized layer, once loaded, to its matmul's prepare, which may
 * rearrange it in place for its kernels (orin_op_impl.prepare). */
static int prepare_qweight(orin_model *m, orin_weight_format fmt, const char *name, int64_t out,
                           int64_t in, orin_qweight *q)
{
    const orin_op_impl *impl = m->op.matmul_quant[fmt];
    if (!impl || !impl->prepare)
        return 0;
    orin_matmul_quant_args a = {
        .x = orin_tensor_make(NULL, m->dtype, m->dev->kind, 2, (int64_t[]){1, in}),
        .w = *q,
        .y = orin_tensor_make(NULL, m->dtype, m->dev->kind, 2, (int64_t[]){1, out}),
    };
    const orin_exec ex = {.device = m->dev};
    if (impl->prepare(&ex, &a) != 0)
        return orin_error_prefix("%s: ", name);
    *q = a.w;
    return 0;
}

/* An AWQ layer as published: module.qweight, .qzeros and .scales (orin/ops.h). */
static int load_awq4(orin_model *m, const orin_st_archive *ar, const char *model_dir,
                     const char *module, int64_t out, int64_t in, orin_qweight *q)
{
    char name[192];
    if (tensor_name(name, module, "qweight") != 0)
        return -1;
    const int32_t group = group_of(m, ORIN_WEIGHT_AWQ4, in);
    if (in % group != 0)
        return orin_error_set("%s: tensor '%s': quantization_config.group_size = %d does not "
                              "divide the layer's input width %lld", model_dir, name, group,
                              (long long)in);
    if (out % 8 != 0)
        return orin_error_set("%s: tensor '%s': %lld outputs are not a multiple of 8 (AWQ "
                              "packs 8 a word)", model_dir, name, (long long)out);
    const int64_t groups = in / group;
    const struct {
        const char *suffix;
        orin_tensor *dst;
        orin_dtype dt;
        int64_t dims[2];
    } parts[3] = {
        {"qweight", &q->qweight, ORIN_I32, {in, out / 8}},
        {"qzeros", &q->zeros, ORIN_I32, {groups, out / 8}},
        {"scales", &q->scales, ORIN_F16, {groups, out}},
    };
    q->group_size = group;
    for (size_t i = 0; i < 3; i++) {
        if (tensor_name(name, module, parts[i].suffix) != 0 ||
            load_packed(m, ar, model_dir, name, parts[i].dt, parts[i].dims, parts[i].dst) != 0)
            return -1;
    }
    return prepare_qweight(m, ORIN_WEIGHT_AWQ4, module, out, in, q);
}

/* Rows quantized per pass on the host before they are copied over. */
#define INT8_CHUNK_BYTES ((int64_t)16 << 20)

/* The float weight `name` [out, in], quantized to int8 on the host a chunk of
 * rows at a time (orin_quantize_int8) and copied to the device. */
static int load_int8(orin_model *m, const orin_st_archive *ar, const char *model_dir,
                     const char *name, int64_t out, int64_t in, orin_qweight *q)
{
    const int64_t dims[2] = {out, in};
    const orin_st_tensor *st = orin_st_find_float(ar, model_dir, name, 2, dims);
    if (!st)
        return -1;
    const int32_t group = orin_int8_group_size(in);
    const int64_t groups = in / group;
    const int64_t sdims[2] = {out, groups};
    q->group_size = group;
    if (alloc_tensor(m, &q->qweight, ORIN_I8, 2, dims, name) != 0 ||
        alloc_tensor(m, &q->scales, ORIN_F16, 2, sdims, name) != 0)
        return -1;
    m->weight_bytes += orin_tensor_nbytes(&q->qweight) + orin_tensor_nbytes(&q->scales);

    int64_t chunk = INT8_CHUNK_BYTES / in;
    chunk = chunk < 1 ? 1 : chunk > out ? out : chunk;
    int8_t *qbuf = malloc((size_t)(chunk * in));
    uint16_t *sbuf = malloc((size_t)(chunk * groups) * sizeof *sbuf);
    int rc = qbuf && sbuf ? 0 : orin_error_set("%s: out of memory quantizing to int8", name);
    const size_t src_size = orin_dtype_size(st->dtype);
    for (int64_t r0 = 0; rc == 0 && r0 < out; r0 += chunk) {
        int64_t rows = out - r0 < chunk ? out - r0 : chunk;
        if (orin_quantize_int8((const char *)st->data + (size_t)(r0 * in) * src_size, st->dtype,
                               rows, in, group, m->dev->threads, qbuf, sbuf) != 0) {
            rc = orin_error_prefix("%s: tensor '%s' (rows from %lld): ", st->file, name,
                                   (long long)r0);
            break;
        }
        if (m->dev->ops->copy_h2d(m->dev, (int8_t *)q->qweight.data + r0 * in, qbuf,
                                  (size_t)(rows * in)) != 0 ||
            m->dev->ops->copy_h2d(m->dev, (uint16_t *)q->scales.data + r0 * groups, sbuf,
                                  (size_t)(rows * groups) * sizeof *sbuf) != 0)
            rc = orin_error_prefix("%s: ", name);
    }
    free(qbuf);
    free(sbuf);
    return rc == 0 ? prepare_qweight(m, ORIN_WEIGHT_INT8, name, out, in, q) : rc;
}

/* A linear layer in its format, and its bias. */
static int load_linear(orin_model *m, const orin_st_archive *ar, const char *model_dir,
                       const char *module, int64_t out, int64_t in, bool bias, qwen_linear *L)
{
    char name[192];
    const int64_t dims[2] = {out, in};
    if (tensor_name(name, module, "weight") != 0)
        return -1;
    int rc = L->fmt == ORIN_WEIGHT_AWQ4   ? load_awq4(m, ar, model_dir, module, out, in, &L->q)
             : L->fmt == ORIN_WEIGHT_INT8 ? load_int8(m, ar, model_dir, name, out, in, &L->q)
                                          : load_weight(m, ar, model_dir, name, 2, dims, &L->w);
    if (rc == 0 && bias)
        rc = tensor_name(name, module, "bias") != 0 ||
                     load_weight(m, ar, model_dir, name, 1, &out, &L->bias) != 0
                 ? -1
                 : 0;
    return rc;
}

/* Device bytes of a linear layer of out x in stored as fmt, its bias included. */
static double linear_bytes(const orin_model *m, orin_weight_format fmt, int64_t out, int64_t in,
                           bool bias)
{
    const double dsize = (double)orin_dtype_size(m->dtype);
    const double groups = fmt == ORIN_WEIGHT_FLOAT ? 0 : (double)in / group_of(m, fmt, in);
    const double o = (double)out, i = (double)in;
    double bytes = bias ? o * dsize : 0;
    if (fmt == ORIN_WEIGHT_AWQ4) /* nibbles, zeros (nibbles too), f16 scales */
        return bytes + o * i / 2 + groups * o / 2 + groups * o * 2;
    if (fmt == ORIN_WEIGHT_INT8) /* bytes, f16 scales */
        return bytes + o * i + o * groups * 2;
    return bytes + o * i * dsize;
}

/* The linear layers and the norms of a decoder layer: their names after
 * "model.layers.N.", where they go, and their shapes as config.json implies
 * them; the one list that the formats, the memory plan and the loader walk. */
typedef struct layer_linear {
    const char *module;
    qwen_linear *dst;
    int64_t out, in;
    bool bias;
} layer_linear;

typedef struct layer_norm {
    const char *name;
    orin_tensor *dst;
    int64_t dim;
    bool present;
} layer_norm;

enum { LAYER_LINEARS = 7, LAYER_NORMS = 4 };

static void layer_linears(const orin_model_config *c, qwen_layer *L,
                          layer_linear out[LAYER_LINEARS])
{
    const int64_t d = c->hidden_size, f = c->intermediate_size, hd = c->head_dim;
    const int64_t qd = (int64_t)c->num_attention_heads * hd;
    const int64_t kvd = (int64_t)c->num_key_value_heads * hd;
    const bool qkv_bias = c->attention_bias;
    /* Qwen2 never biases o_proj; Qwen3 biases all four when attention_bias. */
    const bool o_bias = c->attention_bias && c->arch == ORIN_ARCH_QWEN3;
    const layer_linear table[LAYER_LINEARS] = {
        {"self_attn.q_proj", &L->q, qd, d, qkv_bias},
        {"self_attn.k_proj", &L->k, kvd, d, qkv_bias},
        {"self_attn.v_proj", &L->v, kvd, d, qkv_bias},
        {"self_attn.o_proj", &L->o, d, qd, o_bias},
        {"mlp.gate_proj", &L->gate, f, d, false},
        {"mlp.up_proj", &L->up, f, d, false},
        {"mlp.down_proj", &L->down, d, f, false},
    };
    memcpy(out, table, sizeof table);
}

static void layer_norms(const orin_model_config *c, qwen_layer *L, layer_norm out[LAYER_NORMS])
{
    const layer_norm table[LAYER_NORMS] = {
        {"input_layernorm.weight", &L->attn_norm, c->hidden_size, true},
        {"self_attn.q_norm.weight", &L->q_norm, c->head_dim, c->qk_norm},
        {"self_attn.k_norm.weight", &L->k_norm, c->head_dim, c->qk_norm},
        {"post_attention_layernorm.weight", &L->mlp_norm, c->hidden_size, true},
    };
    memcpy(out, table, sizeof table);
}

/* The format a linear layer (its full module name) is stored in on the
 * device: the folder's (AWQ where quantization_config covers the layer), else
 * int8 where model.quant = int8 asks for it, else the compute dtype. */
static orin_weight_format layer_format(const orin_model *m, const char *module)
{
    if (m->cfg.quant.method == ORIN_QUANT_AWQ)
        return orin_quant_covers(&m->cfg.quant, module) ? ORIN_WEIGHT_AWQ4 : ORIN_WEIGHT_FLOAT;
    return m->int8 ? ORIN_WEIGHT_INT8 : ORIN_WEIGHT_FLOAT;
}

/* Decides every linear layer's format before anything is bound or loaded
 * (the ops to bind and the memory plan depend on them). */
static void assign_formats(orin_model *m)
{
    for (int32_t i = 0; i < m->cfg.num_hidden_layers; i++) {
        layer_linear table[LAYER_LINEARS];
        layer_linears(&m->cfg, &m->layers[i], table);
        for (size_t t = 0; t < LAYER_LINEARS; t++) {
            char module[160];
            snprintf(module, sizeof module, "%slayers.%d.%s", m->prefix, i, table[t].module);
            table[t].dst->fmt = layer_format(m, module);
            m->uses_format[table[t].dst->fmt] = true;
        }
    }
    m->lm_head.fmt = m->int8 && m->int8_lm_head ? ORIN_WEIGHT_INT8 : ORIN_WEIGHT_FLOAT;
    m->uses_format[m->lm_head.fmt] = true;
}

/* Uploads `src` converted to the compute dtype into `dst`, which the caller
 * made (a part of a stacked buffer). */
static int upload_into(orin_model *m, const orin_st_tensor *src, const orin_tensor *dst)
{
    size_t n = (size_t)orin_tensor_numel(dst);
    if (m->dev->ops->upload(m->dev, dst->data, m->dtype, src->data, src->dtype, n) != 0)
        return orin_error_prefix("%s: ", src->name);
    return 0;
}

/* Linears of one input in float, `count` of them from linears[0]: one device
 * buffer of their weights stacked, [out_0 + out_1 + ..., in], each layer's
 * tensor a row view of it (and their biases likewise), so that a prefill can
 * run the products as one wide GEMM (matmul.qkv for q, k and v, where k and v
 * alone leave SMs idle; matmul.swiglu for gate and up). */
static int load_stacked(orin_model *m, const orin_st_archive *ar, const char *dir, int32_t i,
                        const layer_linear *linears, int count)
{
    const int64_t in = linears[0].in;
    int64_t total = 0;
    for (int t = 0; t < count; t++)
        total += linears[t].out;
    const bool bias = linears[0].bias;
    orin_tensor w, b = {0};
    char name[192];
    snprintf(name, sizeof name, "%slayers.%d.%s and %d more (stacked)", m->prefix, i,
             linears[0].module, count - 1);
    if (alloc_tensor(m, &w, m->dtype, 2, (int64_t[]){total, in}, name) != 0 ||
        (bias && alloc_tensor(m, &b, m->dtype, 1, &total, name) != 0))
        return -1;
    m->weight_bytes += orin_tensor_nbytes(&w) + (bias ? orin_tensor_nbytes(&b) : 0);
    const size_t elem = orin_dtype_size(m->dtype);
    for (int t = 0, row = 0; t < count; row += (int)linears[t].out, t++) {
        qwen_linear *L = linears[t].dst;
        const int64_t out = linears[t].out, dims[2] = {out, in};
        L->w = orin_tensor_make((char *)w.data + (size_t)row * (size_t)in * elem, m->dtype,
                                m->dev->kind, 2, dims);
        L->bias = bias ? orin_tensor_make((char *)b.data + (size_t)row * elem, m->dtype,
                                          m->dev->kind, 1, &out)
                       : (orin_tensor){0};
        snprintf(name, sizeof name, "%slayers.%d.%s.weight", m->prefix, i, linears[t].module);
        const orin_st_tensor *st = orin_st_find_float(ar, dir, name, 2, dims);
        if (!st || upload_into(m, st, &L->w) != 0)
            return -1;
        if (!bias)
            continue;
        snprintf(name, sizeof name, "%slayers.%d.%s.bias", m->prefix, i, linears[t].module);
        st = orin_st_find_float(ar, dir, name, 1, &out);
        if (!st || upload_into(m, st, &L->bias) != 0)
            return -1;
    }
    return 0;
}

static int load_layer(orin_model *m, const orin_st_archive *ar, const char *dir, int32_t i,
                      qwen_layer *L)
{
    layer_norm norms[LAYER_NORMS];
    layer_linear linears[LAYER_LINEARS];
    layer_norms(&m->cfg, L, norms);
    layer_linears(&m->cfg, L, linears);
    char name[192];
    for (size_t t = 0; t < LAYER_NORMS; t++) {
        memset(norms[t].dst, 0, sizeof *norms[t].dst); /* absent: data NULL */
        if (!norms[t].present)
            continue;
        snprintf(name, sizeof name, "%slayers.%d.%s", m->prefix, i, norms[t].name);
        if (load_weight(m, ar, dir, name, 1, &norms[t].dim, norms[t].dst) != 0)
            return -1;
    }
    /* linears[0..2] are q, k, v, [4..5] gate and up (layer_linears) */
    const bool stack_qkv = L->q.fmt == ORIN_WEIGHT_FLOAT && L->k.fmt == ORIN_WEIGHT_FLOAT &&
                           L->v.fmt == ORIN_WEIGHT_FLOAT;
    const bool stack_mlp = L->gate.fmt == ORIN_WEIGHT_FLOAT && L->up.fmt == ORIN_WEIGHT_FLOAT;
    if ((stack_qkv && load_stacked(m, ar, dir, i, &linears[0], 3) != 0) ||
        (stack_mlp && load_stacked(m, ar, dir, i, &linears[4], 2) != 0))
        return -1;
    for (size_t t = 0; t < LAYER_LINEARS; t++) {
        if ((stack_qkv && t < 3) || (stack_mlp && (t == 4 || t == 5)))
            continue;
        snprintf(name, sizeof name, "%slayers.%d.%s", m->prefix, i, linears[t].module);
        if (load_linear(m, ar, dir, name, linears[t].out, linears[t].in, linears[t].bias,
                        linears[t].dst) != 0)
            return -1;
    }
    return 0;
}

/* Bytes the weights take on the device: the compute dtype, or the packed
 * formats at their size. */
static double weight_bytes_planned(const orin_model *m)
{
    const orin_model_config *c = &m->cfg;
    const double dsize = (double)orin_dtype_size(m->dtype);
    const int64_t V = c->vocab_size, d = c->hidden_size;
    double bytes = 0;
    for (int32_t i = 0; i < c->num_hidden_layers; i++) {
        layer_norm norms[LAYER_NORMS];
        layer_linear linears[LAYER_LINEARS];
        layer_norms(c, &m->layers[i], norms);
        layer_linears(c, &m->layers[i], linears);
        for (size_t t = 0; t < LAYER_NORMS; t++)
            bytes += norms[t].present ? (double)norms[t].dim * dsize : 0;
        for (size_t t = 0; t < LAYER_LINEARS; t++)
            bytes += linear_bytes(m, linears[t].dst->fmt, linears[t].out, linears[t].in,
                                  linears[t].bias);
    }
    const bool head_is_embed = c->tie_word_embeddings && m->lm_head.fmt == ORIN_WEIGHT_FLOAT;
    bytes += (double)V * d * dsize + (double)d * dsize; /* embeddings, final norm */
    bytes += m->vision_bytes;
    return bytes + (head_is_embed ? 0 : linear_bytes(m, m->lm_head.fmt, V, d, false));
}

/* Weights of a layer config.json does not have: the config belongs to another
 * model (fewer layers would silently run a truncated network). */
static int check_layer_count(const orin_st_archive *ar, const char *prefix, int32_t n_layers)
{
    const size_t plen = strlen(prefix);
    for (size_t i = 0; i < orin_st_count(ar); i++) {
        const orin_st_tensor *t = orin_st_at(ar, i);
        long layer;
        int used = 0;
        if (strncmp(t->name, prefix, plen) == 0 &&
            sscanf(t->name + plen, "layers.%ld.%n", &layer, &used) == 1 && used > 0 &&
            layer >= n_layers)
            return orin_error_set("%s: tensor '%s' is beyond config.json's num_hidden_layers "
                                  "= %d", t->file, t->name, n_layers);
    }
    return 0;
}

static void show_progress(bool on, int32_t done, int32_t total)
{
    if (!on)
        return;
    fprintf(stderr, "\rorin: loading weights: layer %d/%d", done, total);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

/* lm_head: the input embedding when tied (a quantized lm_head is then its own
 * int8 copy of the table), else lm_head.weight. */
static int load_lm_head(orin_model *m, const orin_st_archive *ar, const char *dir)
{
    const orin_model_config *c = &m->cfg;
    const int64_t vd[2] = {c->vocab_size, c->hidden_size};
    char name[192];
    snprintf(name, sizeof name, "%s%s", c->tie_word_embeddings ? m->prefix : "",
             c->tie_word_embeddings ? "embed_tokens.weight" : "lm_head.weight");
    if (m->lm_head.fmt == ORIN_WEIGHT_INT8)
        return load_int8(m, ar, dir, name, vd[0], vd[1], &m->lm_head.q);
    if (c->tie_word_embeddings) {
        m->lm_head.w = m->embed;
        return 0;
    }
    return load_weight(m, ar, dir, name, 2, vd, &m->lm_head.w);
}

static int load_weights(orin_model *m, const char *dir, bool progress)
{
    orin_st_archive *ar = NULL;
    if (orin_st_open_dir(dir, &ar) != 0)
        return -1;
    const orin_model_config *c = &m->cfg;
    const int64_t vd[2] = {c->vocab_size, c->hidden_size};
    const int64_t nd[1] = {c->hidden_size};
    char embed[192], norm[192];
    snprintf(embed, sizeof embed, "%sembed_tokens.weight", m->prefix);
    snprintf(norm, sizeof norm, "%snorm.weight", m->prefix);
    int rc = check_layer_count(ar, m->prefix, c->num_hidden_layers);
    if (rc == 0)
        rc = load_weight(m, ar, dir, embed, 2, vd, &m->embed);
    if (rc == 0)
        rc = load_weight(m, ar, dir, norm, 1, nd, &m->final_norm);
    if (rc == 0)
        rc = load_lm_head(m, ar, dir);
    for (int32_t i = 0; rc == 0 && i < c->num_hidden_layers; i++) {
        rc = load_layer(m, ar, dir, i, &m->layers[i]);
        show_progress(progress && rc == 0, i + 1, c->num_hidden_layers);
    }
    orin_st_close(ar);
    return rc;
}

/* ---- ops and buffers ---------------------------------------------------------- */

const char *const orin_model_ops[] = {
    ORIN_OP_EMBEDDING, ORIN_OP_RMSNORM, ORIN_OP_ROPE, ORIN_OP_MATMUL, ORIN_OP_SWIGLU,
    ORIN_OP_ADD, ORIN_OP_KV_WRITE, ORIN_OP_ATTENTION_PREFILL, ORIN_OP_ATTENTION_DECODE, NULL,
};

const char *const orin_model_vl_ops[] = {
    ORIN_OP_ROPE_TABLE, ORIN_OP_LAYERNORM, ORIN_OP_GELU, ORIN_OP_ATTENTION_FULL, NULL,
};

/* A call struct shaped like the model's attention calls (no data), so that a
 * provider without a kernel for this head_dim or group size can decline it at
 * bind time (orin_op_impl.supports) instead of failing at the first step. */
static orin_attention_args attention_probe(const orin_model *m, int32_t rows, int32_t kv_len)
{
    const orin_model_config *c = &m->cfg;
    const int64_t dims[3] = {rows, c->num_attention_heads, c->head_dim};
    return (orin_attention_args){
        .q = orin_tensor_make(NULL, m->dtype, m->dev->kind, 3, dims),
        .out = orin_tensor_make(NULL, m->dtype, m->dev->kind, 3, dims),
        .positions = orin_tensor_make(NULL, ORIN_I32, m->dev->kind, 1, dims),
        .cache = {.dtype = m->dtype, .n_kv_heads = c->num_key_value_heads,
                  .head_dim = c->head_dim, .pos_stride = (int64_t)c->num_key_value_heads *
                  c->head_dim, .head_stride = c->head_dim, .capacity = m->context},
        .scale = (float)(1.0 / sqrt((double)c->head_dim)),
        .max_kv_len = kv_len,
    };
}

/* The optional ops the registry has for the model's device and dtype (any
 * provider; a missing one is no error): the fused ops (the graph then runs the
 * plain sequence each stands for) where runtime.fused_ops wants them, and
 * sample.candidates off the host (else orin_model_sample copies the logits
 * back). The calls are shaped like the model's, for `supports`. */
static void bind_optional_ops(orin_model *m, const orin_model_options *opt)
{
    const orin_model_config *c = &m->cfg;
    const int64_t qd[3] = {1, c->num_attention_heads, c->head_dim};
    const int64_t kd[3] = {1, c->num_key_value_heads, c->head_dim};
    const int64_t max = SAMPLE_MAX;
    const orin_rope_kv_write_args rope_probe = {
        .q = orin_tensor_make(NULL, m->dtype, m->dev->kind, 3, qd),
        .k = orin_tensor_make(NULL, m->dtype, m->dev->kind, 3, kd),
        .v = orin_tensor_make(NULL, m->dtype, m->dev->kind, 3, kd),
    };
    const orin_sample_candidates_args sample_probe = {
        .values = orin_tensor_make(NULL, ORIN_F32, m->dev->kind, 1, &max),
        .ids = orin_tensor_make(NULL, ORIN_I32, m->dev->kind, 1, &max),
        .top_k = 1,
    };
    const bool fused = opt->fused_ops, off_host = m->dev->kind != ORIN_DEVICE_CPU;
    struct {
        const char *op;
        const orin_op_impl **dst;
        const void *args;
        bool wanted;
    } table[] = {
        {ORIN_OP_ADD_RMSNORM, &m->op.add_rmsnorm, NULL, fused},
        {ORIN_OP_MATMUL_QKV, &m->op.matmul_qkv, NULL, fused},
        {ORIN_OP_MATMUL_SWIGLU, &m->op.matmul_swiglu, NULL, fused},
        /* one positions tensor for rope and the cache: not for M-RoPE */
        {ORIN_OP_ROPE_KV_WRITE, &m->op.rope_kv_write, &rope_probe, fused},
        /* greedy decoding's head, over a float lm_head */
        {ORIN_OP_MATMUL_ARGMAX, &m->op.matmul_argmax, NULL,
         fused && m->lm_head.fmt == ORIN_WEIGHT_FLOAT},
        {ORIN_OP_SAMPLE_CANDIDATES, &m->op.sample, &sample_probe, off_host},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (!table[i].wanted)
            continue;
        orin_bind_request req = {
            .op = table[i].op,
            .device = m->dev->kind,
            .dtype = m->dtype,
            .args = table[i].args,
        };
        *table[i].dst = orin_registry_bind(opt->registry, &req);
        if (*table[i].dst)
            orin_log(ORIN_LOG_DEBUG, "optional op %s: \"%s\"", table[i].op,
                     (*table[i].dst)->provider);
    }
    orin_error_clear();
}

/* The quantized matmul of each format some layer is stored in. A device
 * whose plugins lack it fails here, at load, with the registry's line. Where
 * runtime.fused_ops wants them, the fused q/k/v and gate/up+SwiGLU of that
 * format from the same provider (the weights are in the layout its prepare
 * makes), if it has them. */
static int bind_quant_ops(orin_model *m, const orin_model_options *opt)
{
    const struct {
        orin_weight_format fmt;
        const char *op, *qkv, *swiglu;
        const char *why;
    } table[] = {
        {ORIN_WEIGHT_AWQ4, ORIN_OP_MATMUL_AWQ4, ORIN_OP_MATMUL_QKV_AWQ4, ORIN_OP_MATMUL_SWIGLU_AWQ4,
         "AWQ int4 weights (config.json's quantization_config)"},
        {ORIN_WEIGHT_INT8, ORIN_OP_MATMUL_INT8, ORIN_OP_MATMUL_QKV_INT8, ORIN_OP_MATMUL_SWIGLU_INT8,
         "model.quant = int8"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const orin_weight_format f = table[i].fmt;
        if (!m->uses_format[f])
            continue;
        orin_bind_request req = {.op = table[i].op, .device = m->dev->kind, .dtype = m->dtype,
                                 .strict = opt->strict};
        if (!(m->op.matmul_quant[f] = orin_registry_bind(opt->registry, &req)))
            return orin_error_prefix("%s: ", table[i].why);
        if (!opt->fused_ops)
            continue;
        const char *provider = m->op.matmul_quant[f]->provider;
        m->op.matmul_qkv_quant[f] = orin_registry_find(opt->registry, table[i].qkv, provider,
                                                       m->dev->kind, m->dtype);
        m->op.matmul_swiglu_quant[f] = orin_registry_find(opt->registry, table[i].swiglu,
                                                          provider, m->dev->kind, m->dtype);
    }
    return 0;
}

static int bind_ops(orin_model *m, const orin_model_options *opt)
{
    const orin_attention_args probe = attention_probe(m, 1, m->context);
    struct {
        const char *op;
        const orin_op_impl **dst;
        const char *provider;
        const void *args;
    } table[] = {
        {ORIN_OP_EMBEDDING, &m->op.embedding, NULL, NULL},
        {ORIN_OP_RMSNORM, &m->op.rmsnorm, NULL, NULL},
        {ORIN_OP_ROPE, &m->op.rope, NULL, NULL},
        {ORIN_OP_MATMUL, &m->op.matmul, NULL, NULL},
        {ORIN_OP_SWIGLU, &m->op.swiglu, NULL, NULL},
        {ORIN_OP_ADD, &m->op.add, NULL, NULL},
        {ORIN_OP_KV_WRITE, &m->op.kv_write, NULL, NULL},
        {ORIN_OP_ATTENTION_PREFILL, &m->op.attn_prefill, opt->attention, &probe},
        {ORIN_OP_ATTENTION_DECODE, &m->op.attn_decode, opt->attention, &probe},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        orin_bind_request req = {
            .op = table[i].op,
            .provider = table[i].provider,
            .device = m->dev->kind,
            .dtype = m->dtype,
            .strict = opt->strict,
            .args = table[i].args,
        };
        *table[i].dst = orin_registry_bind(opt->registry, &req);
        if (!*table[i].dst)
            return -1;
    }
    if (m->cfg.vl.is_vl) {
        orin_bind_request req = {.op = ORIN_OP_ROPE_TABLE, .device = m->dev->kind,
                                 .dtype = m->dtype, .strict = opt->strict};
        if (!(m->op.rope_table = orin_registry_bind(opt->registry, &req)))
            return orin_error_prefix("Qwen3-VL M-RoPE: ");
    }
    if (bind_quant_ops(m, opt) != 0)
        return -1;
    bind_optional_ops(m, opt);
    return 0;
}

/* Qwen3-VL: the rotary positions and tables of a chunk (struct orin_model). */
static int alloc_vl_buffers(orin_model *m, int32_t rows)
{
    const int64_t pd[1] = {rows}, td[2] = {rows, m->cfg.head_dim / 2};
    if (alloc_tensor(m, &m->rope_pos, ORIN_I32, 1, pd, "rope positions") != 0 ||
        alloc_tensor(m, &m->rope_cos, ORIN_F32, 2, td, "M-RoPE tables") != 0 ||
        alloc_tensor(m, &m->rope_sin, ORIN_F32, 2, td, "M-RoPE tables") != 0)
        return -1;
    m->host_rope_pos = malloc((size_t)rows * sizeof *m->host_rope_pos);
    return m->host_rope_pos ? 0 : orin_error_set("rope positions: out of memory");
}

/* One activation buffer: [rows, cols] of dt (cols 0: a vector of rows);
 * one_row: [1, cols] whatever the chunk (what only a decode step uses). */
typedef struct buffer_spec {
    orin_tensor *t;
    orin_dtype dt;
    int64_t cols;
    const char *what;
    bool one_row;
} buffer_spec;

enum { BUFFERS = 13 };

static void buffer_specs(const orin_model *m, qwen_buffers *b, buffer_spec out[BUFFERS])
{
    const orin_model_config *c = &m->cfg;
    const int64_t hd = c->head_dim;
    const buffer_spec table[BUFFERS] = {
        {&b->ids, ORIN_I32, 0, "token ids", false},
        {&b->pos, ORIN_I32, 0, "positions", false},
        {&b->x, m->dtype, c->hidden_size, "activations", false},
        {&b->h, m->dtype, c->hidden_size, "activations", false},
        {&b->o, m->dtype, c->hidden_size, "activations", false},
        {&b->x_alt, m->dtype, c->hidden_size, "activations", true},
        {&b->q, m->dtype, c->num_attention_heads * hd, "activations", false},
        {&b->attn, m->dtype, c->num_attention_heads * hd, "activations", false},
        {&b->k, m->dtype, c->num_key_value_heads * hd, "activations", false},
        {&b->v, m->dtype, c->num_key_value_heads * hd, "activations", false},
        {&b->gate, m->dtype, c->intermediate_size, "activations", false},
        {&b->up, m->dtype, c->intermediate_size, "activations", false},
        {&b->logits, m->dtype, c->vocab_size, "logits", false},
    };
    memcpy(out, table, sizeof table);
}

/* Device bytes of the activation buffers for `rows` tokens. */
static double buffer_bytes_planned(const orin_model *m, int32_t rows)
{
    qwen_buffers scratch;
    buffer_spec table[BUFFERS];
    buffer_specs(m, &scratch, table);
    double bytes = 0;
    for (size_t i = 0; i < BUFFERS; i++)
        bytes += (double)(table[i].one_row ? 1 : rows) * (table[i].cols ? table[i].cols : 1) *
                 (double)orin_dtype_size(table[i].dt);
    return bytes;
}

/* decode_ahead's pinned pick, mark and position table, where the device has
 * queued copies back and graphs (not for Qwen3-VL, whose rotary positions are
 * not the cache's); ORIN_DECODE_AHEAD=0 turns it off (tests, A/B runs). */
static int decode_ahead_setup(orin_model *m)
{
    decode_ahead_state *a = &m->ahead;
    const orin_device_ops *d = m->dev->ops;
    const char *env = getenv("ORIN_DECODE_AHEAD");
    if (!d->host_alloc || !d->copy_d2h_queued || !d->mark_wait || !d->mark_create ||
        !d->graph_launch || m->cfg.vl.is_vl || (env && strcmp(env, "0") == 0))
        return 0;
    int32_t *table = malloc((size_t)m->context * sizeof *table);
    if (!table)
        return orin_error_set("decode positions: out of memory");
    for (int32_t i = 0; i < m->context; i++)
        table[i] = i;
    int rc = alloc_tensor(m, &a->positions, ORIN_I32, 1, &(int64_t){m->context}, "positions");
    if (rc == 0)
        rc = d->copy_h2d(m->dev, a->positions.data, table, (size_t)m->context * sizeof *table);
    free(table);
    if (rc != 0)
        return -1;
    a->pick = d->host_alloc(m->dev, sizeof *a->pick);
    a->picked = a->pick ? d->mark_create(m->dev) : NULL;
    if (!a->picked)
        return -1;
    a->on = true;
    return 0;
}

static int alloc_buffers(orin_model *m, int32_t rows)
{
    qwen_buffers *b = &m->buf;
    buffer_spec table[BUFFERS];
    buffer_specs(m, b, table);
    b->rows = rows;
    for (size_t i = 0; i < BUFFERS; i++) {
        int64_t dims[2] = {table[i].one_row ? 1 : rows, table[i].cols};
        if (alloc_tensor(m, table[i].t, table[i].dt, table[i].cols ? 2 : 1, dims, table[i].what))
            return -1;
    }
    m->host_pos = malloc((size_t)rows * sizeof *m->host_pos);
    m->host_logits = malloc((size_t)m->cfg.vocab_size * sizeof *m->host_logits);
    if (!m->host_pos || !m->host_logits)
        return orin_error_set("positions and logits: out of memory");
    if (m->op.sample) { /* the device history and the candidates' block */
        const int64_t one = 1;
        if (alloc_tensor(m, &m->history, ORIN_I32, 1, &(int64_t){m->context}, "history") ||
            alloc_tensor(m, &m->history_n, ORIN_I32, 1, &one, "history") ||
            !(m->sample_dev = model_alloc(m, sizeof(sample_block), "sampling")))
            return -1;
        m->history_mirror = malloc((size_t)m->context * sizeof *m->history_mirror);
        m->sample_host = malloc(sizeof(sample_block));
        if (!m->history_mirror || !m->sample_host)
            return orin_error_set("sampling: out of memory");
    }
    if (m->op.matmul_argmax &&
        alloc_tensor(m, &m->greedy_id, ORIN_I32, 1, &(int64_t){1}, "greedy pick") != 0)
        return -1;
    if (m->op.matmul_argmax && decode_ahead_setup(m) != 0)
        return -1;
    if (m->dtype != ORIN_F32) {
        m->staging = malloc(orin_tensor_nbytes(&b->logits));
        if (!m->staging)
            return orin_error_set("logits: out of memory");
    }
    return 0;
}

/* ---- the memory plan ------------------------------------------------------------ */

static size_t size_max(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* The workspace impl asks for calls shaped like args (0: none, or no impl). */
static size_t workspace_of(const orin_op_impl *impl, const void *args)
{
    return impl && impl->workspace_size ? impl->workspace_size(args) : 0;
}

/* The largest workspace the bound ops ask for: attention over `rows` query rows
 * and `kv_len` cache positions, the matmuls over `rows` rows (the quantized
 * ones probed with the widest layer shapes), the fused gate/up, whose
 * prefill keeps the up projection [rows, f] in the workspace too, and the
 * greedy head (matmul.argmax: the logits of its fallback path; probed without
 * its norm, which would add one hidden_size row, well inside the headroom). */
static double workspace_planned(const orin_model *m, int32_t rows, int32_t kv_len)
{
    const orin_model_config *c = &m->cfg;
    const orin_dtype dt = m->dtype;
    const orin_device_kind dev = m->dev->kind;
    const orin_attention_args prefill = attention_probe(m, rows, kv_len);
    const orin_attention_args decode = attention_probe(m, 1, kv_len);
    const int64_t xd[2] = {rows, c->hidden_size}, wd[2] = {c->vocab_size, c->hidden_size};
    const int64_t yd[2] = {rows, c->vocab_size};
    const orin_matmul_args mm = {
        .x = orin_tensor_make(NULL, dt, dev, 2, xd),
        .w = orin_tensor_make(NULL, dt, dev, 2, wd),
        .y = orin_tensor_make(NULL, dt, dev, 2, yd),
    };
    const int64_t in = c->intermediate_size > c->hidden_size ? c->intermediate_size
                                                              : c->hidden_size;
    const int64_t qi[2] = {rows, in}, qo[2] = {rows, c->vocab_size > in ? c->vocab_size : in};
    const orin_matmul_quant_args qm = {
        .x = orin_tensor_make(NULL, dt, dev, 2, qi),
        .y = orin_tensor_make(NULL, dt, dev, 2, qo),
    };
    const int64_t gw[2] = {c->intermediate_size, c->hidden_size};
    const int64_t fd[2] = {rows, c->intermediate_size};
    const orin_matmul_swiglu_args sw = {
        .x = mm.x,
        .w_gate = orin_tensor_make(NULL, dt, dev, 2, gw),
        .w_up = orin_tensor_make(NULL, dt, dev, 2, gw),
        .out = orin_tensor_make(NULL, dt, dev, 2, fd),
    };
    const orin_matmul_swiglu_quant_args qsw = {.x = mm.x, .out = sw.out};
    const int64_t hd1[2] = {1, c->hidden_size};
    const orin_matmul_argmax_args am = {.x = orin_tensor_make(NULL, dt, dev, 2, hd1), .w = mm.w};
    size_t need = 0;
    need = size_max(need, workspace_of(m->op.attn_prefill, &prefill));
    need = size_max(need, workspace_of(m->op.attn_decode, &decode));
    need = size_max(need, workspace_of(m->op.matmul, &mm));
    need = size_max(need, workspace_of(m->op.matmul_swiglu, &sw));
    need = size_max(need, workspace_of(m->op.matmul_argmax, &am));
    for (int f = ORIN_WEIGHT_AWQ4; f <= ORIN_WEIGHT_INT8; f++) {
        need = size_max(need, workspace_of(m->op.matmul_quant[f], &qm));
        need = size_max(need, workspace_of(m->op.matmul_swiglu_quant[f], &qsw));
    }
    return (double)need;
}

/* Device bytes the model needs with a cache of `context` positions. */
static double bytes_needed(const orin_model *m, int32_t context, int32_t chunk, double *kv)
{
    const orin_model_config *c = &m->cfg;
    int32_t rows = chunk < context ? chunk : context;
    *kv = 2.0 * c->num_hidden_layers * c->num_key_value_heads * c->head_dim *
          (double)orin_dtype_size(m->dtype) * context;
    return weight_bytes_planned(m) + *kv + buffer_bytes_planned(m, rows) +
           workspace_planned(m, rows, context);
}

/* Before anything is allocated: the weights, the KV cache, the activations and
 * the workspace must fit the device's free memory, else one error with the
 * numbers and the runtime.max_context that would fit. Devices that cannot tell
 * their free memory (the host) are not checked. */
static int check_memory(const orin_model *m, int32_t chunk)
{
    size_t free_b = 0, total_b = 0;
    if (!m->dev->ops->mem_info)
        return 0;
    if (m->dev->ops->mem_info(m->dev, &free_b, &total_b) != 0)
        return -1;
    /* headroom for the upload staging buffer and the libraries' own allocations */
    const double headroom = 256.0 * 1048576.0, gib = 1073741824.0;
    const double avail = (double)free_b - headroom;
    double kv, need = bytes_needed(m, m->context, chunk, &kv);
    if (need <= avail)
        return 0;
    int32_t lo = 0, hi = m->context; /* the largest context that fits, by bisection */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        double kv_mid;
        if (bytes_needed(m, mid, chunk, &kv_mid) <= avail)
            lo = mid;
        else
            hi = mid - 1;
    }
    double weights = weight_bytes_planned(m);
    char hint[96];
    if (lo > 0)
        snprintf(hint, sizeof hint, "runtime.max_context = %d would fit", lo);
    else
        snprintf(hint, sizeof hint, "the weights alone do not fit: use a smaller model or dtype");
    return orin_error_set("the model needs %.2f GiB on %s (weights %.2f GiB, KV cache %.2f GiB "
                          "for %d positions, activations and workspace %.2f GiB) but %.2f GiB "
                          "are free; %s",
                          need / gib, m->dev->name, weights / gib, kv / gib, m->context,
                          (need - weights - kv) / gib, (double)free_b / gib, hint);
}

/* ---- graph building ------------------------------------------------------------ */

/* The first n rows of a [rows, ...] buffer, reshaped to dims. */
static orin_tensor rows_view(const orin_tensor *buf, int64_t row0, int ndim, const int64_t *dims)
{
    size_t row_bytes = orin_tensor_nbytes(buf) / (size_t)buf->shape[0];
    return orin_tensor_make((char *)buf->data + (size_t)row0 * row_bytes, buf->dtype, buf->device,
                            ndim, dims);
}

static orin_tensor rows2(const orin_tensor *buf, int64_t row0, int64_t n)
{
    int64_t dims[2] = {n, buf->shape[1]};
    return rows_view(buf, row0, 2, dims);
}

/* Elements row0..row0+n-1 of a vector. */
static orin_tensor vec_view(const orin_tensor *buf, int64_t row0, int64_t n)
{
    int64_t dims[1] = {n};
    return rows_view(buf, row0, 1, dims);
}

static orin_tensor rows1(const orin_tensor *buf, int64_t n)
{
    int64_t dims[1] = {n};
    return rows_view(buf, 0, 1, dims);
}

typedef struct graph_builder {
    orin_graph *g;
    int32_t layer;
    int rc;
    bool fold_norms; /* decode: the norms go into the products after them (norm_into) */
    orin_tensor x;   /* the residual stream: buf.x, or buf.x_alt after a folded norm */
} graph_builder;

/* Bytes of the tensors a node reads and writes (NULL-data ones count 0), for
 * the profile: bytes(3, &a.x, &a.w, &a.y). */
static double bytes_of(int count, ...)
{
    va_list ap;
    double total = 0;
    va_start(ap, count);
    for (int i = 0; i < count; i++) {
        const orin_tensor *t = va_arg(ap, const orin_tensor *);
        if (t && t->data)
            total += (double)orin_tensor_nbytes(t);
    }
    va_end(ap);
    return total;
}

/* Appends node ARGS running IMPL, labelled "layer N WHAT", moving BYTES. */
#define ADD_NODE_BYTES(B, IMPL, ARGS, WHAT, BYTES)                                        \
    do {                                                                                  \
        char label_[48];                                                                  \
        if ((B)->layer >= 0)                                                              \
            snprintf(label_, sizeof label_, "layer %d %s", (B)->layer, WHAT);            \
        else                                                                              \
            snprintf(label_, sizeof label_, "%s", WHAT);                                  \
        if ((B)->rc == 0)                                                                 \
            (B)->rc = orin_graph_add((B)->g, IMPL, &(ARGS), sizeof(ARGS), label_, BYTES); \
    } while (0)
#define ADD_NODE(B, IMPL, ARGS, WHAT, ...)                                                \
    ADD_NODE_BYTES(B, IMPL, ARGS, WHAT,                                                   \
                   ((orin_node_bytes){.fixed = bytes_of(__VA_ARGS__)}))

/* y = x . w^T (+ bias) by the matmul of the layer's format. */
static void add_matmul(orin_model *m, graph_builder *b, orin_tensor x, const qwen_linear *L,
                       orin_tensor y, const char *what)
{
    if (L->fmt == ORIN_WEIGHT_FLOAT) {
        orin_matmul_args a = {.x = x, .w = L->w, .bias = L->bias, .y = y};
        ADD_NODE(b, m->op.matmul, a, what, 4, &a.x, &a.w, &a.bias, &a.y);
        return;
    }
    orin_matmul_quant_args a = {.x = x, .w = L->q, .bias = L->bias, .y = y};
    ADD_NODE(b, m->op.matmul_quant[L->fmt], a, what, 6, &a.x, &a.w.qweight, &a.w.zeros,
             &a.w.scales, &a.bias, &a.y);
}

static void add_rmsnorm(orin_model *m, graph_builder *b, orin_tensor x, const orin_tensor *w,
                        orin_tensor out, const char *what)
{
    orin_rmsnorm_args a = {.x = x, .weight = *w, .out = out, .eps = (float)m->cfg.rms_norm_eps};
    ADD_NODE(b, m->op.rmsnorm, a, what, 3, &a.x, &a.weight, &a.out);
}

/* Residual add, then rmsnorm: x += *residual (when residual is not NULL), h =
 * rmsnorm(x) * w. One fused op where bound, else add and rmsnorm. */
static void add_residual_norm(orin_model *m, graph_builder *b, orin_tensor x,
                              const orin_tensor *residual, const orin_tensor *w, orin_tensor h,
                              const char *what)
{
    if (m->op.add_rmsnorm) {
        orin_add_rmsnorm_args a = {.x = x, .weight = *w, .out = h,
                                   .eps = (float)m->cfg.rms_norm_eps};
        if (residual)
            a.residual = *residual;
        ADD_NODE(b, m->op.add_rmsnorm, a, what, 5, &a.x, &a.residual, &a.x, &a.weight,
                 &a.out);
        return;
    }
    if (residual) {
        orin_add_args res = {.a = x, .b = *residual, .out = x};
        ADD_NODE(b, m->op.add, res, "residual", 3, &res.a, &res.b, &res.out);
    }
    add_rmsnorm(m, b, x, w, h, what);
}

/* Whether a decode step hands layer L's two norms to the products after them
 * (orin_norm_in): where both are fused ops (matmul.qkv and matmul.swiglu, or
 * their quantized forms). The GEMV on tiles normalises the row in each of its
 * few hundred blocks (Qwen3-8B AWQ: 2.325 -> 2.246 ms a step); the float ones
 * in the resident GEMV, once a block (cuda_fused.cu), or apart where that
 * does not fit (f32, rows wider than 4,096). */
static bool layer_folds_norms(const orin_model *m, const qwen_layer *L)
{
    const orin_weight_format f = L->q.fmt, g = L->gate.fmt;
    const bool qkv = L->k.fmt == f && L->v.fmt == f &&
                     (f == ORIN_WEIGHT_FLOAT ? m->op.matmul_qkv != NULL
                                             : m->op.matmul_qkv_quant[f] != NULL);
    const bool mlp = L->up.fmt == g && (g == ORIN_WEIGHT_FLOAT ? m->op.matmul_swiglu != NULL
                                                               : m->op.matmul_swiglu_quant[g] != NULL);
    return qkv && mlp;
}

/* The residual add + norm before a product, folded into it (b->fold_norms):
 * the product reads the stream x (+ residual) and normalises it itself, the
 * sum going to the other stream buffer, which becomes the stream. Returns the
 * norm for the product's call; the input it reads is b->x as it was. */
static orin_norm_in norm_into(orin_model *m, graph_builder *b, const orin_tensor *residual,
                              const orin_tensor *w, int64_t n)
{
    qwen_buffers *bf = &m->buf;
    const bool on_x = b->x.data == bf->x.data;
    orin_norm_in norm = {.weight = *w, .eps = (float)m->cfg.rms_norm_eps,
                         .x_out = rows2(on_x ? &bf->x_alt : &bf->x, 0, n)};
    if (residual)
        norm.residual = *residual;
    b->x = norm.x_out;
    return norm;
}

/* q, k and v of h; with a norm in front (norm.weight set: norm_into), of h
 * plus the residual, normalised by the product itself. */
static void add_qkv(orin_model *m, graph_builder *b, const qwen_layer *L, orin_tensor h,
                    int64_t n, orin_norm_in norm)
{
    qwen_buffers *bf = &m->buf;
    const bool all_float = L->q.fmt == ORIN_WEIGHT_FLOAT && L->k.fmt == ORIN_WEIGHT_FLOAT &&
                           L->v.fmt == ORIN_WEIGHT_FLOAT;
    if (m->op.matmul_qkv && all_float) {
        orin_matmul_qkv_args a = {
            .x = h,
            .norm = norm,
            .w = {L->q.w, L->k.w, L->v.w},
            .bias = {L->q.bias, L->k.bias, L->v.bias},
            .y = {rows2(&bf->q, 0, n), rows2(&bf->k, 0, n), rows2(&bf->v, 0, n)},
        };
        ADD_NODE(b, m->op.matmul_qkv, a, "qkv_proj", 13, &a.x, &a.w[0], &a.w[1], &a.w[2],
                 &a.bias[0], &a.bias[1], &a.bias[2], &a.y[0], &a.y[1], &a.y[2],
                 &a.norm.residual, &a.norm.weight, &a.norm.x_out);
        return;
    }
    const orin_weight_format f = L->q.fmt;
    if (f != ORIN_WEIGHT_FLOAT && L->k.fmt == f && L->v.fmt == f && m->op.matmul_qkv_quant[f]) {
        orin_matmul_qkv_quant_args a = {
            .x = h,
            .norm = norm,
            .w = {L->q.q, L->k.q, L->v.q},
            .bias = {L->q.bias, L->k.bias, L->v.bias},
            .y = {rows2(&bf->q, 0, n), rows2(&bf->k, 0, n), rows2(&bf->v, 0, n)},
        };
        ADD_NODE(b, m->op.matmul_qkv_quant[f], a, "qkv_proj", 19, &a.x, &a.w[0].qweight,
                 &a.w[0].zeros, &a.w[0].scales, &a.w[1].qweight, &a.w[1].zeros,
                 &a.w[1].scales, &a.w[2].qweight, &a.w[2].zeros, &a.w[2].scales, &a.bias[0],
                 &a.bias[1], &a.bias[2], &a.y[0], &a.y[1], &a.y[2], &a.norm.residual,
                 &a.norm.weight, &a.norm.x_out);
        return;
    }
    add_matmul(m, b, h, &L->q, rows2(&bf->q, 0, n), "q_proj");
    add_matmul(m, b, h, &L->k, rows2(&bf->k, 0, n), "k_proj");
    add_matmul(m, b, h, &L->v, rows2(&bf->v, 0, n), "v_proj");
}

/* RoPE on q and k: by the chunk's M-RoPE tables during a prefill with
 * images, else at rope_pos. */
static void add_rope(orin_model *m, graph_builder *b, orin_tensor q, orin_tensor k,
                     orin_tensor rope_pos, int64_t n)
{
    if (m->img) {
        const int64_t td[2] = {n, m->cfg.head_dim / 2};
        orin_tensor cos = rows_view(&m->rope_cos, 0, 2, td);
        orin_tensor sin = rows_view(&m->rope_sin, 0, 2, td);
        orin_rope_table_args rq = {.x = q, .cos = cos, .sin = sin};
        orin_rope_table_args rk = {.x = k, .cos = cos, .sin = sin};
        ADD_NODE(b, m->op.rope_table, rq, "mrope q", 4, &rq.x, &rq.cos, &rq.sin, &rq.x);
        ADD_NODE(b, m->op.rope_table, rk, "mrope k", 4, &rk.x, &rk.cos, &rk.sin, &rk.x);
        return;
    }
    const float theta = (float)m->cfg.rope_theta;
    orin_rope_args rq = {.x = q, .positions = rope_pos, .theta = theta};
    orin_rope_args rk = {.x = k, .positions = rope_pos, .theta = theta};
    ADD_NODE(b, m->op.rope, rq, "rope q", 2, &rq.x, &rq.x);
    ADD_NODE(b, m->op.rope, rk, "rope k", 2, &rk.x, &rk.x);
}

/* [Qwen3] q/k norms, RoPE on q and k, k and v into the cache at pos. */
static void add_rope_cache(orin_model *m, graph_builder *b, const qwen_layer *L, orin_tensor q,
                           orin_tensor k, orin_tensor v, orin_tensor pos, orin_tensor rope_pos,
                           const orin_kv_view *cache, int64_t n)
{
    const orin_model_config *c = &m->cfg;
    /* (a prefill with images rotates by its M-RoPE tables: the plain ops) */
    if (m->op.rope_kv_write && !m->img) {
        orin_rope_kv_write_args a = {.q = q, .k = k, .v = v, .positions = pos,
                                     .rope_positions = rope_pos,
                                     .eps = (float)c->rms_norm_eps,
                                     .theta = (float)c->rope_theta, .cache = *cache};
        if (c->qk_norm) {
            a.q_norm = L->q_norm;
            a.k_norm = L->k_norm;
        }
        /* q and k read and written, v read, k and v written to the cache */
        ADD_NODE(b, m->op.rope_kv_write, a, "rope_kv_write", 7, &a.q, &a.q, &a.k, &a.k, &a.k,
                 &a.v, &a.v);
        return;
    }
    if (c->qk_norm) {
        const int64_t qr[2] = {n * q.shape[1], q.shape[2]}, kr[2] = {n * k.shape[1], k.shape[2]};
        orin_tensor qf = orin_tensor_make(q.data, q.dtype, q.device, 2, qr);
        orin_tensor kf = orin_tensor_make(k.data, k.dtype, k.device, 2, kr);
        add_rmsnorm(m, b, qf, &L->q_norm, qf, "q_norm");
        add_rmsnorm(m, b, kf, &L->k_norm, kf, "k_norm");
    }
    add_rope(m, b, q, k, rope_pos, n);
    orin_kv_write_args kw = {.k = k, .v = v, .positions = pos, .cache = *cache};
    ADD_NODE(b, m->op.kv_write, kw, "kv_write", 4, &kw.k, &kw.v, &kw.k, &kw.v);
}

/* The attention half of layer l. `pending` is the previous MLP's output when
 * its residual add was deferred into this layer's first norm (NULL if none). */
static void add_attention_block(orin_model *m, graph_builder *b, int32_t l, int64_t n,
                                bool decode, int32_t max_kv_len, const orin_tensor *pending)
{
    const orin_model_config *c = &m->cfg;
    const qwen_layer *L = &m->layers[l];
    qwen_buffers *bf = &m->buf;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, hd = c->head_dim;
    orin_tensor h = rows2(&bf->h, 0, n), o = rows2(&bf->o, 0, n);
    orin_tensor pos = rows1(&bf->pos, n);

    orin_norm_in norm = {0}; /* folded: the product reads the stream, normalises it */
    if (b->fold_norms) {
        h = b->x;
        norm = norm_into(m, b, pending, &L->attn_norm, n);
    } else {
        add_residual_norm(m, b, b->x, pending, &L->attn_norm, h, "input_layernorm");
    }
    add_qkv(m, b, L, h, n, norm);

    const int64_t qh[3] = {n, H, hd}, kh[3] = {n, Hkv, hd};
    orin_tensor q = rows_view(&bf->q, 0, 3, qh), k = rows_view(&bf->k, 0, 3, kh);
    orin_tensor v = rows_view(&bf->v, 0, 3, kh);
    orin_kv_view cache = orin_kv_cache_view(m->kv, l);
    /* a Qwen3-VL model rotates by its own positions (struct orin_model) */
    orin_tensor rope_pos = m->cfg.vl.is_vl ? rows1(&m->rope_pos, n) : pos;
    add_rope_cache(m, b, L, q, k, v, pos, rope_pos, &cache, n);

    orin_attention_args at = {
        .q = q,
        .out = rows_view(&bf->attn, 0, 3, qh),
        .positions = pos,
        .cache = cache,
        .scale = (float)(1.0 / sqrt((double)hd)),
        .max_kv_len = max_kv_len,
    };
    /* q and out, then K and V of every cache position read */
    orin_node_bytes at_bytes = {
        .fixed = bytes_of(2, &at.q, &at.out),
        .per_position = 2.0 * (double)(Hkv * hd) * (double)orin_dtype_size(m->dtype),
    };
    ADD_NODE_BYTES(b, decode ? m->op.attn_decode : m->op.attn_prefill, at, "attention", at_bytes);
    add_matmul(m, b, rows2(&bf->attn, 0, n), &L->o, o, "o_proj");
}

/* The MLP half of layer l, its norm adding the attention output to x first.
 * Its own output (o) is added to x here, or, where add_rmsnorm is bound, by
 * the next norm: returns true then (the add is pending). */
static bool add_mlp_block(orin_model *m, graph_builder *b, int32_t l, int64_t n)
{
    const qwen_layer *L = &m->layers[l];
    qwen_buffers *bf = &m->buf;
    orin_tensor h = rows2(&bf->h, 0, n), o = rows2(&bf->o, 0, n);
    orin_tensor gate = rows2(&bf->gate, 0, n), up = rows2(&bf->up, 0, n);

    orin_norm_in norm = {0}; /* folded: the product reads the stream, normalises it */
    if (b->fold_norms) {
        h = b->x;
        norm = norm_into(m, b, &o, &L->mlp_norm, n);
    } else {
        add_residual_norm(m, b, b->x, &o, &L->mlp_norm, h, "post_attention_layernorm");
    }
    if (m->op.matmul_swiglu && L->gate.fmt == ORIN_WEIGHT_FLOAT &&
        L->up.fmt == ORIN_WEIGHT_FLOAT) {
        orin_matmul_swiglu_args a = {.x = h, .norm = norm, .w_gate = L->gate.w,
                                     .w_up = L->up.w, .out = gate};
        ADD_NODE(b, m->op.matmul_swiglu, a, "gate_up_swiglu", 7, &a.x, &a.w_gate, &a.w_up,
                 &a.out, &a.norm.residual, &a.norm.weight, &a.norm.x_out);
    } else if (L->gate.fmt != ORIN_WEIGHT_FLOAT && L->up.fmt == L->gate.fmt &&
               m->op.matmul_swiglu_quant[L->gate.fmt]) {
        orin_matmul_swiglu_quant_args a = {.x = h, .norm = norm, .w_gate = L->gate.q,
                                           .w_up = L->up.q, .out = gate};
        ADD_NODE(b, m->op.matmul_swiglu_quant[L->gate.fmt], a, "gate_up_swiglu", 11, &a.x,
                 &a.w_gate.qweight, &a.w_gate.zeros, &a.w_gate.scales, &a.w_up.qweight,
                 &a.w_up.zeros, &a.w_up.scales, &a.out, &a.norm.residual, &a.norm.weight,
                 &a.norm.x_out);
    } else {
        add_matmul(m, b, h, &L->gate, gate, "gate_proj");
        add_matmul(m, b, h, &L->up, up, "up_proj");
        orin_swiglu_args sw = {.gate = gate, .up = up, .out = gate};
        ADD_NODE(b, m->op.swiglu, sw, "swiglu", 3, &sw.gate, &sw.up, &sw.out);
    }
    add_matmul(m, b, gate, &L->down, o, "down_proj");
    if (m->op.add_rmsnorm)
        return true;
    orin_add_args res = {.a = b->x, .b = o, .out = b->x};
    ADD_NODE(b, m->op.add, res, "residual", 3, &res.a, &res.b, &res.out);
    return false;
}

/* During a prefill with images, over the chunk's runs of image tokens: with
 * layer -1 their input rows become the image embeddings (the embedding op
 * picking rows of the uploaded embeddings, as masked_scatter does); after
 * decoder layer `layer` < the DeepStack features, feature `layer` is added to
 * them (README-vl.md, section 7). */
static void add_image_rows(orin_model *m, graph_builder *b, int64_t n, int32_t layer)
{
    const vl_images *img = m->img;
    if (!img || layer >= img->n_deepstack)
        return;
    for (int64_t r = 0; r < n;) {
        const int32_t f0 = img->feature[img->chunk0 + r];
        int64_t len = 1;
        if (f0 < 0) {
            r++;
            continue;
        }
        while (r + len < n && img->feature[img->chunk0 + r + len] == f0 + len)
            len++;
        orin_tensor x = rows2(&m->buf.x, r, len);
        if (layer < 0) {
            orin_embedding_args e = {.table = img->embeds, .ids = vec_view(&img->index, f0, len),
                                     .out = x};
            ADD_NODE(b, m->op.embedding, e, "image embeddings", 2, &e.out, &e.out);
        } else {
            orin_add_args a = {.a = x, .b = rows2(&img->deepstack[layer], f0, len), .out = x};
            ADD_NODE(b, m->op.add, a, "deepstack", 3, &a.a, &a.b, &a.out);
        }
        r += len;
    }
}

/* The greedy decode step's head: the final norm, lm_head and the greedy pick
 * as one op (matmul.argmax) into greedy_id; no logits. */
static void add_greedy_head(orin_model *m, graph_builder *b, const orin_tensor *pending)
{
    orin_matmul_argmax_args a = {
        .x = b->x,
        .norm = norm_into(m, b, pending, &m->final_norm, 1),
        .w = m->lm_head.w,
        .id = m->greedy_id,
    };
    ADD_NODE(b, m->op.matmul_argmax, a, "lm_head", 6, &a.x, &a.norm.residual, &a.norm.weight,
             &a.norm.x_out, &a.w, &a.id);
}

/* logits_rows: 0 = none, n = all rows, 1 with n > 1 = the last row only.
 * greedy (a decode step, matmul.argmax bound): the greedy pick in place of the
 * logits. */
static int build_graph(orin_model *m, orin_graph *g, int64_t n, bool decode, int32_t max_kv_len,
                       int64_t logits_rows, bool greedy)
{
    qwen_buffers *bf = &m->buf;
    graph_builder b = {.g = g, .layer = -1, .x = rows2(&bf->x, 0, n)};
    orin_graph_reset(g);

    orin_embedding_args emb = {.table = m->embed, .ids = rows1(&bf->ids, n),
                               .out = rows2(&bf->x, 0, n)};
    /* the embedding reads one table row per id */
    orin_node_bytes emb_bytes = {
        .fixed = bytes_of(2, &emb.ids, &emb.out) * 2 - bytes_of(1, &emb.ids),
    };
    ADD_NODE_BYTES(&b, m->op.embedding, emb, "embedding", emb_bytes);
    add_image_rows(m, &b, n, -1);
    orin_tensor o = rows2(&bf->o, 0, n);
    bool pending = false; /* the last MLP output is not yet added to x */
    for (int32_t l = 0; l < m->cfg.num_hidden_layers; l++) {
        b.layer = l;
        /* a decode step's norms go into the products after them where both
         * take them (layer_folds_norms): the stream then moves to x_alt and
         * back within the layer, so it is in x at every layer's end */
        b.fold_norms = decode && n == 1 && m->op.add_rmsnorm &&
                       layer_folds_norms(m, &m->layers[l]);
        add_attention_block(m, &b, l, n, decode, max_kv_len, pending ? &o : NULL);
        pending = add_mlp_block(m, &b, l, n);
        /* x + o + feature: the pending o joins x in the next norm */
        add_image_rows(m, &b, n, l);
    }
    b.layer = -1;
    if (greedy) {
        orin_tensor o_row = rows2(&bf->o, 0, 1);
        add_greedy_head(m, &b, pending ? &o_row : NULL);
    } else if (logits_rows > 0) { /* only these rows of x live on: the others' add is skipped */
        int64_t first = n - logits_rows;
        orin_tensor h = rows2(&bf->h, first, logits_rows);
        orin_tensor o_rows = rows2(&bf->o, first, logits_rows);
        add_residual_norm(m, &b, rows2(&b.x, first, logits_rows), pending ? &o_rows : NULL,
                          &m->final_norm, h, "norm");
        add_matmul(m, &b, h, &m->lm_head, rows2(&bf->logits, 0, logits_rows), "lm_head");
    }
    if (b.rc != 0)
        return -1;
    return 0;
}

/* Destroys the captured decode steps of every span built (their next run
 * captures again); with graphs, frees the steps' graphs too. */
static void decode_steps_release(orin_model *m, bool graphs)
{
    for (int s = 0; s < m->decode_spans; s++)
        for (int i = 0; i < DECODE_STEPS; i++) {
            decode_step *step = &m->decode[s][i];
            if (step->replay)
                m->dev->ops->graph_destroy(m->dev, step->replay);
            step->replay = NULL;
            if (graphs) {
                orin_graph_free(step->graph);
                step->graph = NULL;
            }
        }
}

/* Grows the shared workspace to what graph g needs. */
static int reserve_bytes(orin_model *m, size_t need)
{
    if (need <= m->workspace_size)
        return 0;
    void *w = m->dev->ops->alloc(m->dev, need);
    if (!w)
        return orin_error_set("workspace: cannot allocate %.1f MiB on %s",
                              (double)need / 1048576.0, m->dev->name);
    if (m->workspace)
        m->dev->ops->free(m->dev, m->workspace);
    m->workspace = w;
    m->workspace_size = need;
    decode_steps_release(m, false); /* they point at the old workspace: capture again */
    return 0;
}

static int reserve_workspace(orin_model *m, const orin_graph *g)
{
    return reserve_bytes(m, orin_graph_workspace_size(g));
}

/* The exec every op of the model runs with: its device and its workspace. */
static orin_exec model_exec(const orin_model *m)
{
    return (orin_exec){.device = m->dev, .workspace = m->workspace,
                       .workspace_size = m->workspace_size};
}

static int run_graph(orin_model *m, const orin_graph *g)
{
    if (reserve_workspace(m, g) != 0)
        return -1;
    orin_exec ex = model_exec(m);
    return orin_graph_run(g, &ex);
}

/* A prefill chunk's graph, op by op and timed under --profile. */
static int run_prefill_graph(orin_model *m)
{
    if (!m->prefill_profile)
        return run_graph(m, m->prefill);
    if (reserve_workspace(m, m->prefill) != 0)
        return -1;
    orin_exec ex = model_exec(m);
    return orin_graph_run_profiled(m->prefill, &ex, m->prefill_profile, 0);
}

static int queue_decode(void *ctx)
{
    const decode_step *step = ctx;
    orin_exec ex = model_exec(step->m);
    return orin_graph_run(step->graph, &ex);
}

/* Whether a decode step can be captured once and replayed: the user wants it
 * (runtime.cuda_graph), the device has graphs, and every bound decode op is
 * graph-safe (reads its position from memory, sizes nothing by it). Says why
 * not when the user asked for it and it cannot be. */
static bool decode_replayable(const orin_model *m, const orin_graph *g, bool wanted)
{
    char first[96];
    if (!wanted || !m->dev->ops->graph_capture)
        return false;
    if (!orin_graph_replayable(g, first, sizeof first)) {
        orin_log(ORIN_LOG_INFO, "runtime.cuda_graph: %s is not graph-safe; decode runs "
                 "eagerly", first);
        return false;
    }
    return true;
}

/* One decode step (decode_step says how it runs). */
static int run_decode(orin_model *m, decode_step *step, int32_t pos)
{
    if (m->profile) {
        if (reserve_workspace(m, step->graph) != 0)
            return -1;
        orin_exec ex = model_exec(m);
        return orin_graph_run_profiled(step->graph, &ex, m->profile, pos + 1);
    }
    if (!step->replayable || !step->warm) {
        step->warm = true;
        return run_graph(m, step->graph);
    }
    if (!step->replay &&
        m->dev->ops->graph_capture(m->dev, queue_decode, step, &step->replay) != 0)
        return -1;
    return m->dev->ops->graph_launch(m->dev, step->replay);
}

/* The decode graphs read their one id and position from device memory, so each
 * is built once per span of positions (DECODE_SPANS) and run (or replayed as a
 * device graph) every step in it: the one ending in the logits, and where
 * matmul.argmax is bound (a float lm_head), the one ending in the greedy pick. */
static int build_decode_steps(orin_model *m, const orin_model_options *opt)
{
    m->decode_spans = 0;
    for (int k = DECODE_SPANS - 1; k >= 0; k--) {
        const int32_t len = (int32_t)(((int64_t)m->context + (1 << k) - 1) >> k);
        if (m->decode_spans == 0 || len > m->decode_span[m->decode_spans - 1])
            m->decode_span[m->decode_spans++] = len;
    }
    for (int s = 0; s < m->decode_spans; s++)
        for (int i = 0; i < DECODE_STEPS; i++) {
            if (i == DECODE_GREEDY && !m->op.matmul_argmax)
                break;
            decode_step *step = &m->decode[s][i];
            step->m = m;
            if (!(step->graph = orin_graph_create()) ||
                build_graph(m, step->graph, 1, true, m->decode_span[s], 1,
                            i == DECODE_GREEDY) != 0)
                return -1;
            step->replayable = decode_replayable(m, step->graph, opt->cuda_graph);
        }
    return 0;
}

/* Decode step `kind` for a token at pos: the shortest span above pos (the
 * last for a pos past the cache, which check_tokens turns away). */
static decode_step *decode_step_at(orin_model *m, int kind, int32_t pos)
{
    int s = 0;
    while (s + 1 < m->decode_spans && pos >= m->decode_span[s])
        s++;
    return &m->decode[s][kind];
}

/* ---- load / free ------------------------------------------------------------------ */

void orin_model_free(orin_model *m)
{
    if (!m)
        return;
    decode_steps_release(m, true);
    if (m->ahead.picked)
        m->dev->ops->mark_destroy(m->dev, m->ahead.picked);
    if (m->ahead.pick)
        m->dev->ops->host_free(m->dev, m->ahead.pick);
    orin_graph_free(m->prefill);
    orin_vision_free(m->vision);
    free(m->host_rope_pos);
    orin_kv_cache_free(m->kv);
    if (m->workspace)
        m->dev->ops->free(m->dev, m->workspace);
    for (size_t i = 0; i < m->n_allocs; i++)
        m->dev->ops->free(m->dev, m->allocs[i]);
    free(m->allocs);
    free(m->layers);
    free(m->staging);
    free(m->host_pos);
    free(m->host_logits);
    free(m->history_mirror);
    free(m->sample_host);
    free(m);
}

static int32_t choose_context(const orin_model_options *opt, const orin_model_config *c)
{
    int32_t ctx = opt->max_context;
    if (ctx == 0)
        return c->max_position_embeddings;
    if (ctx < 0)
        return c->max_position_embeddings < ORIN_DEFAULT_CONTEXT ? c->max_position_embeddings
                                                                 : ORIN_DEFAULT_CONTEXT;
    if (ctx > c->max_position_embeddings)
        orin_log(ORIN_LOG_WARN,
                 "runtime.max_context %d exceeds the model's max_position_embeddings %d",
                 ctx, c->max_position_embeddings);
    return ctx;
}

/* model.quant: int8 at load on a float folder; a folder that is already
 * quantized is used as it is, with a line saying so. */
static int choose_quant(orin_model *m, const orin_model_options *opt)
{
    if (opt->quant != ORIN_WEIGHT_FLOAT && opt->quant != ORIN_WEIGHT_INT8)
        return orin_error_set("model.quant: only int8 is quantized at load");
    m->int8 = opt->quant == ORIN_WEIGHT_INT8;
    if (m->int8 && m->cfg.quant.method != ORIN_QUANT_NONE) {
        orin_log(ORIN_LOG_WARN, "model.quant = int8 ignored: %s is already quantized (AWQ "
                 "int4, config.json's quantization_config)", opt->path);
        m->int8 = false;
    }
    m->int8_lm_head = m->int8 && opt->quant_lm_head;
    return 0;
}

/* The vision encoder of a Qwen3-VL folder, beside the language model; its
 * DeepStack features go into the first decoder layers, so there must be as
 * many. */
static int load_vision(orin_model *m, const orin_model_options *opt)
{
    const orin_vision_options vo = {.path = opt->path, .dtype = m->dtype, .device = m->dev,
                                    .registry = opt->registry, .strict = opt->strict,
                                    .attention = opt->attention,
                                    .fused_ops = opt->fused_ops};
    if (orin_vision_load(&vo, &m->vision) != 0)
        return -1;
    const orin_vision_config *vc = orin_vision_get_config(m->vision);
    if (vc->n_deepstack > m->cfg.num_hidden_layers)
        return orin_error_set("%s/config.json: vision_config.deepstack_visual_indexes has %d "
                              "entries, more than text_config.num_hidden_layers = %d",
                              opt->path, vc->n_deepstack, m->cfg.num_hidden_layers);
    if (vc->out_hidden != m->cfg.hidden_size)
        return orin_error_set("%s/config.json: vision_config.out_hidden_size = %d, "
                              "text_config.hidden_size = %d", opt->path, vc->out_hidden,
                              m->cfg.hidden_size);
    return 0;
}

int orin_model_load(const orin_model_options *opt, orin_model **out)
{
    *out = NULL;
    if (opt->dtype != ORIN_F32 && opt->dtype != ORIN_F16 && opt->dtype != ORIN_BF16)
        return orin_error_set("model.dtype: %s is not a compute dtype (f32, f16, bf16)",
                              orin_dtype_name(opt->dtype));
    orin_model *m = calloc(1, sizeof *m);
    if (!m)
        return orin_error_set("out of memory");
    m->dev = opt->device;
    m->dtype = opt->dtype;
    if (orin_model_config_load(opt->path, &m->cfg) != 0 || choose_quant(m, opt) != 0)
        goto fail;
    m->prefix = m->cfg.vl.is_vl ? "model.language_model." : "model.";
    m->context = choose_context(opt, &m->cfg);
    m->layers = calloc((size_t)m->cfg.num_hidden_layers, sizeof *m->layers);
    if (!m->layers) {
        orin_error_set("%s/config.json: num_hidden_layers = %d: out of memory for the layer "
                       "table", opt->path, m->cfg.num_hidden_layers);
        goto fail;
    }
    assign_formats(m);
    int32_t chunk = opt->prefill_chunk > 0                   ? opt->prefill_chunk
                    : m->dev->kind == ORIN_DEVICE_CUDA ? ORIN_PREFILL_CHUNK_GPU
                                                       : ORIN_PREFILL_CHUNK_CPU;
    if (chunk > m->context)
        chunk = m->context;
    /* Bind, then check the memory plan, before loading gigabytes: a missing op
     * or a model that does not fit are the cheaper errors. */
    if (m->cfg.vl.is_vl) {
        orin_vision_config vc;
        if (orin_vision_config_read(opt->path, &vc) != 0)
            goto fail;
        m->vision_bytes = orin_vision_weight_bytes(&vc, m->dtype);
    }
    if (bind_ops(m, opt) != 0 || check_memory(m, chunk) != 0 ||
        load_weights(m, opt->path, opt->progress) != 0)
        goto fail;

    orin_kv_cache_shape kvs = {
        .n_layers = m->cfg.num_hidden_layers,
        .capacity = m->context,
        .n_kv_heads = m->cfg.num_key_value_heads,
        .head_dim = m->cfg.head_dim,
        .dtype = m->dtype,
    };
    if (orin_kv_cache_create(m->dev, &kvs, &m->kv) != 0 || alloc_buffers(m, chunk) != 0 ||
        (m->cfg.vl.is_vl && (alloc_vl_buffers(m, chunk) != 0 || load_vision(m, opt) != 0)))
        goto fail;

    if (!(m->prefill = orin_graph_create()) || build_decode_steps(m, opt) != 0)
        goto fail;
    *out = m;
    return 0;
fail:
    orin_model_free(m);
    return -1;
}

const orin_model_config *orin_model_get_config(const orin_model *m)
{
    return &m->cfg;
}

int32_t orin_model_context(const orin_model *m)
{
    return m->context;
}

int32_t orin_model_prefill_chunk(const orin_model *m)
{
    return m->buf.rows;
}

size_t orin_model_weight_bytes(const orin_model *m)
{
    return m->weight_bytes;
}

size_t orin_model_step_weight_bytes(const orin_model *m)
{
    const bool head_is_embed = m->lm_head.fmt == ORIN_WEIGHT_FLOAT &&
                               m->lm_head.w.data == m->embed.data;
    return m->weight_bytes - (head_is_embed ? 0 : orin_tensor_nbytes(&m->embed));
}

const char *orin_model_quant_name(const orin_model *m)
{
    return m->uses_format[ORIN_WEIGHT_AWQ4]   ? "awq4"
           : m->uses_format[ORIN_WEIGHT_INT8] ? "int8"
                                              : "float";
}

const char *orin_model_quant_op(const orin_model_config *c, orin_weight_format load_quant)
{
    if (c->quant.method == ORIN_QUANT_AWQ)
        return ORIN_OP_MATMUL_AWQ4;
    return load_quant == ORIN_WEIGHT_INT8 ? ORIN_OP_MATMUL_INT8 : NULL;
}

orin_dtype orin_model_dtype(const orin_model *m)
{
    return m->dtype;
}

orin_device *orin_model_device(const orin_model *m)
{
    return m->dev;
}

/* ---- forward passes -------------------------------------------------------------- */

static int check_tokens(const orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos)
{
    if (n <= 0 || start_pos < 0)
        return orin_error_set("forward: bad token range (%d tokens at position %d)", n, start_pos);
    if ((int64_t)start_pos + n > m->context)
        return orin_error_set("%d tokens at position %d do not fit the context of %d tokens "
                              "(runtime.max_context)",
                              n, start_pos, m->context);
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return orin_error_set("token id %d at index %d is outside the vocabulary (%d)", ids[i],
                                  i, m->cfg.vocab_size);
    return 0;
}

static int upload_step(orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos)
{
    m->ahead.queued = false; /* what runs next is this, not a step decode_ahead queued */
    for (int32_t i = 0; i < n; i++)
        m->host_pos[i] = start_pos + i;
    size_t bytes = (size_t)n * sizeof(int32_t);
    if (m->dev->ops->copy_h2d(m->dev, m->buf.ids.data, ids, bytes) != 0 ||
        m->dev->ops->copy_h2d(m->dev, m->buf.pos.data, m->host_pos, bytes) != 0)
        return -1;
    if (!m->cfg.vl.is_vl)
        return 0;
    for (int32_t i = 0; i < n; i++)
        m->host_rope_pos[i] = start_pos + i + m->rope_delta;
    return m->dev->ops->copy_h2d(m->dev, m->rope_pos.data, m->host_rope_pos, bytes);
}

/* During a prefill with images: the M-RoPE tables of the chunk at sequence
 * index done (of the call), len rows. */
static int upload_tables(orin_model *m, int32_t done, int32_t len)
{
    if (!m->img)
        return 0;
    const size_t half = (size_t)m->cfg.head_dim / 2, off = (size_t)done * half;
    const size_t bytes = (size_t)len * half * sizeof(float);
    if (m->dev->ops->copy_h2d(m->dev, m->rope_cos.data, m->host_cos + off, bytes) != 0 ||
        m->dev->ops->copy_h2d(m->dev, m->rope_sin.data, m->host_sin + off, bytes) != 0)
        return -1;
    return 0;
}

/* Copies `rows` rows of device logits to host f32. */
static int fetch_logits(orin_model *m, int64_t rows, float *out)
{
    size_t n = (size_t)rows * (size_t)m->cfg.vocab_size;
    size_t bytes = n * orin_dtype_size(m->dtype);
    if (m->dtype == ORIN_F32)
        return m->dev->ops->copy_d2h(m->dev, out, m->buf.logits.data, bytes);
    if (m->dev->ops->copy_d2h(m->dev, m->staging, m->buf.logits.data, bytes) != 0)
        return -1;
    return orin_convert(out, ORIN_F32, m->staging, m->dtype, n);
}

/* Prefill in chunks; `host` receives the logits ([n, V] when all_logits, else
 * the last row); without it, `keep_last` still computes the last row's logits
 * into the device buffer, for orin_model_sample. */
static int prefill(orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos, float *host,
                   bool all_logits, bool keep_last)
{
    if (check_tokens(m, ids, n, start_pos) != 0)
        return -1;
    if (start_pos == 0) /* a new sequence */
        m->rope_delta = 0;
    const int64_t V = m->cfg.vocab_size;
    for (int32_t done = 0; done < n;) {
        int32_t len = n - done < m->buf.rows ? n - done : m->buf.rows;
        bool last = done + len == n;
        int64_t logits_rows = host && all_logits ? len : last && (host || keep_last) ? 1 : 0;
        if (m->img)
            m->img->chunk0 = done;
        if (upload_step(m, ids + done, len, start_pos + done) != 0 ||
            upload_tables(m, done, len) != 0 ||
            build_graph(m, m->prefill, len, false, start_pos + done + len, logits_rows, false) != 0 ||
            run_prefill_graph(m) != 0)
            return -1;
        if (host && logits_rows > 0 &&
            fetch_logits(m, logits_rows, all_logits ? host + (size_t)done * V : host) != 0)
            return -1;
        done += len;
    }
    return m->dev->ops->synchronize(m->dev);
}

int orin_model_prefill(orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos,
                       float *logits, bool all_logits)
{
    return prefill(m, ids, n, start_pos, logits, all_logits, false);
}

int orin_model_prefill_on_device(orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos)
{
    return prefill(m, ids, n, start_pos, NULL, false, true);
}

/* ---- prefill with images (Qwen3-VL) ------------------------------------------------ */

/* The images' pixel_values one after the other, as orin_vision_encode takes
 * them, and their grids: one image's own array, several copied into *owned. */
static int gather_pixels(const orin_model_image *images, int n_images, const float **pixels,
                         float **owned, int64_t *rows, orin_vision_grid *vg, orin_vl_grid *lg)
{
    int64_t total = 0;
    for (int i = 0; i < n_images; i++) {
        if (!images[i].pixel_values || images[i].rows <= 0 || images[i].cols != images[0].cols)
            return orin_error_set("image %d: pixel_values are missing or shaped otherwise "
                                  "([%lld, %lld])", i + 1, (long long)images[i].rows,
                                  (long long)images[i].cols);
        total += images[i].rows;
        vg[i] = (orin_vision_grid){images[i].grid.t, images[i].grid.h, images[i].grid.w};
        lg[i] = images[i].grid;
    }
    *rows = total;
    if (n_images == 1) {
        *pixels = images[0].pixel_values;
        return 0;
    }
    const size_t cols = (size_t)images[0].cols;
    *pixels = *owned = malloc((size_t)total * cols * sizeof **owned);
    if (!*owned)
        return orin_error_set("pixel_values: out of memory");
    int64_t r = 0;
    for (int i = 0; i < n_images; r += images[i].rows, i++)
        memcpy(*owned + (size_t)r * cols, images[i].pixel_values,
               (size_t)images[i].rows * cols * sizeof **owned);
    return 0;
}

/* The M-RoPE tables of ids[0..n) after start_pos, and the rope_delta the
 * sequence will have after them. */
static int vl_tables(orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos,
                     const orin_vl_grid *grids, int n_images, float *cos, float *sin,
                     int32_t *delta)
{
    int32_t *pos = malloc((size_t)n * 3 * sizeof *pos);
    if (!pos)
        return orin_error_set("M-RoPE positions: out of memory");
    const int32_t base = start_pos == 0 ? 0 : start_pos + m->rope_delta;
    const orin_mrope mr = orin_mrope_from_config(&m->cfg);
    int32_t seg_delta = 0;
    int rc = orin_vl_rope_index(&m->cfg.vl, ids, (size_t)n, grids, (size_t)n_images, pos,
                                &seg_delta);
    for (int32_t i = 0; rc == 0 && i < 3 * n; i++)
        pos[i] += base;
    if (rc == 0)
        rc = orin_mrope_tables(&mr, pos, (size_t)n, cos, sin);
    *delta = (start_pos == 0 ? 0 : m->rope_delta) + seg_delta;
    free(pos);
    return rc;
}

/* Device buffers for the encoder's output in the compute dtype (the
 * embeddings and the DeepStack features, which it writes there) and the row
 * index, one allocation in *mem; tokens = the merged patches of the grids. */
static int alloc_images(orin_model *m, const orin_vision_grid *grids, int n_images,
                        vl_images *img, orin_vision_device_output *vo, void **mem)
{
    const orin_vision_config *vc = orin_vision_get_config(m->vision);
    int64_t T = 0;
    for (int i = 0; i < n_images; i++) {
        const orin_vision_grid *g = &grids[i];
        if (g->t < 1 || g->h < 1 || g->w < 1 || g->h % vc->merge || g->w % vc->merge ||
            (int64_t)g->t * g->h * g->w > INT32_MAX / 4)
            return orin_error_set("image %d: grid [%d, %d, %d]: t, h and w must be positive, h "
                                  "and w multiples of the merge size %d", i + 1, g->t, g->h,
                                  g->w, vc->merge);
        T += (int64_t)g->t * g->h * g->w / ((int64_t)vc->merge * vc->merge);
    }
    const int64_t d = m->cfg.hidden_size, md[2] = {T, d};
    const size_t mat = (size_t)(T * d) * orin_dtype_size(m->dtype);
    *mem = m->dev->ops->alloc(m->dev, mat * (size_t)(1 + vc->n_deepstack) +
                                          (size_t)T * sizeof(int32_t));
    int32_t *index = malloc((size_t)T * sizeof *index);
    int rc = *mem && index ? 0 : orin_error_set("image embeddings: cannot allocate %.1f MiB",
                                                (double)mat * (1 + vc->n_deepstack) / 1048576.0);
    char *p = *mem;
    vo->n_deepstack = img->n_deepstack = vc->n_deepstack;
    for (int j = -1; rc == 0 && j < vc->n_deepstack; j++, p += mat) {
        orin_tensor *t = j < 0 ? &img->embeds : &img->deepstack[j];
        *t = orin_tensor_make(p, m->dtype, m->dev->kind, 2, md);
        *(j < 0 ? &vo->embeds : &vo->deepstack[j]) = *t;
    }
    for (int64_t i = 0; rc == 0 && i < T; i++)
        index[i] = (int32_t)i;
    if (rc == 0) {
        img->index = orin_tensor_make(p, ORIN_I32, m->dev->kind, 1, &T);
        rc = m->dev->ops->copy_h2d(m->dev, p, index, (size_t)T * sizeof *index);
    }
    img->tokens = T;
    free(index);
    return rc;
}

/* feature[i]: the image row of sequence index i, -1 for a text token. The
 * count must be the encoder's (orin_vl_rope_index checked the runs). */
static int map_features(const orin_model *m, const int32_t *ids, int32_t n, int64_t tokens,
                        int32_t *feature)
{
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        feature[i] = ids[i] == m->cfg.vl.image_token_id ? k++ : -1;
    if (k != tokens)
        return orin_error_set("the prompt has %d image tokens, its images %lld", k,
                              (long long)tokens);
    return 0;
}

static int prefill_images(orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos,
                          const orin_model_image *images, int n_images, float *host,
                          bool all_logits)
{
    const size_t half = (size_t)m->cfg.head_dim / 2;
    orin_vision_grid vg[ORIN_MODEL_MAX_IMAGES];
    orin_vl_grid lg[ORIN_MODEL_MAX_IMAGES];
    orin_tensor ds[ORIN_VISION_MAX_DEEPSTACK];
    vl_images img = {.deepstack = ds};
    orin_vision_device_output vo = {0};
    const float *pixels = NULL;
    float *owned = NULL, *cos = malloc((size_t)n * half * sizeof *cos);
    float *sin = malloc((size_t)n * half * sizeof *sin);
    int32_t *feature = malloc((size_t)n * sizeof *feature);
    void *mem = NULL;
    int64_t rows = 0;
    int32_t delta = 0;
    int rc = cos && sin && feature ? 0 : orin_error_set("images: out of memory");
    if (rc == 0)
        rc = check_tokens(m, ids, n, start_pos);
    if (rc == 0)
        rc = gather_pixels(images, n_images, &pixels, &owned, &rows, vg, lg);
    if (rc == 0)
        rc = vl_tables(m, ids, n, start_pos, lg, n_images, cos, sin, &delta);
    const double t0 = orin_seconds();
    if (rc == 0)
        rc = alloc_images(m, vg, n_images, &img, &vo, &mem);
    if (rc == 0)
        rc = map_features(m, ids, n, img.tokens, feature);
    if (rc == 0)
        rc = orin_vision_encode_device(m->vision, pixels, rows, images[0].cols, vg, n_images,
                                       &vo);
    /* the encoder returns with the device idle: nothing of it is in flight */
    m->vision_s = orin_seconds() - t0;
    if (rc == 0) {
        img.feature = feature;
        m->img = &img;
        m->host_cos = cos;
        m->host_sin = sin;
        rc = prefill(m, ids, n, start_pos, host, all_logits, !host);
        m->img = NULL;
        m->host_cos = m->host_sin = NULL;
    }
    if (rc == 0)
        m->rope_delta = delta;
    if (mem)
        m->dev->ops->free(m->dev, mem);
    free(owned);
    free(cos);
    free(sin);
    free(feature);
    return rc;
}

int orin_model_prefill_images(orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos,
                              const orin_model_image *images, int n_images, float *logits,
                              bool all_logits)
{
    m->vision_s = 0;
    if (n_images == 0)
        return prefill(m, ids, n, start_pos, logits, all_logits, !logits);
    if (!m->vision)
        return orin_error_set("%s is not a vision-language model: images need a Qwen3-VL "
                              "folder", m->cfg.architecture);
    if (n_images < 0 || n_images > ORIN_MODEL_MAX_IMAGES)
        return orin_error_set("%d images in one prefill (at most %d)", n_images,
                              ORIN_MODEL_MAX_IMAGES);
    return prefill_images(m, ids, n, start_pos, images, n_images, logits, all_logits);
}

double orin_model_vision_seconds(const orin_model *m)
{
    return m->vision_s;
}

int32_t orin_model_rope_delta(const orin_model *m)
{
    return m->rope_delta;
}

/* The token `id` at pos through one of the decode steps: checked, uploaded,
 * run. */
static int decode_token(orin_model *m, decode_step *step, int32_t id, int32_t pos)
{
    if (check_tokens(m, &id, 1, pos) != 0 || upload_step(m, &id, 1, pos) != 0)
        return -1;
    return run_decode(m, step, pos);
}

int orin_model_decode(orin_model *m, int32_t id, int32_t pos, float *logits)
{
    if (decode_token(m, decode_step_at(m, DECODE_LOGITS, pos), id, pos) != 0)
        return -1;
    if (logits && fetch_logits(m, 1, logits) != 0)
        return -1;
    return m->dev->ops->synchronize(m->dev);
}

/* Queues the greedy step at pos behind the one before, its id that step's pick
 * on the device, where its graph is captured (the steps before it ran it). */
static int queue_ahead(orin_model *m, int32_t pos)
{
    decode_step *step = pos < m->context ? decode_step_at(m, DECODE_GREEDY, pos) : NULL;
    if (!step || !step->replayable || !step->warm || !step->replay)
        return 0;
    const orin_device_ops *d = m->dev->ops;
    if (d->copy_d2d(m->dev, m->buf.ids.data, m->greedy_id.data, sizeof(int32_t)) != 0 ||
        d->copy_d2d(m->dev, m->buf.pos.data, (int32_t *)m->ahead.positions.data + pos,
                    sizeof(int32_t)) != 0 ||
        d->graph_launch(m->dev, step->replay) != 0)
        return -1;
    m->ahead.queued = true;
    m->ahead.pos = pos;
    return 0;
}

/* Greedy decode that keeps the device a step ahead of the host: the step at
 * pos + 1 is queued (queue_ahead) before the pick at pos has come back, so
 * that while the host takes the pick, returns it, and its caller appends it
 * and asks for pos + 1, that step already runs. Without it the device idled
 * between steps for the host's uploads, launch and copy back: ~32 us of an
 * H100's 2.32 ms a step (Qwen3-8B AWQ at 512, bench/notes/decode.md). The
 * queued step serves only the call it was queued for (the id it read, at pos +
 * 1); any other call uploads its own step first (upload_step drops it). What
 * it did is then harmless: it wrote only cache position pos + 1, which every
 * step at pos + 1 writes again before its attention reads it, and the pick,
 * which the next step's overwrites. */
static int32_t decode_ahead(orin_model *m, int32_t id, int32_t pos)
{
    decode_ahead_state *a = &m->ahead;
    const orin_device_ops *d = m->dev->ops;
    if (check_tokens(m, &id, 1, pos) != 0)
        return -1;
    if (!(a->queued && a->pos == pos && a->id == id) &&
        decode_token(m, decode_step_at(m, DECODE_GREEDY, pos), id, pos) != 0)
        return -1;
    a->queued = false;
    if (d->copy_d2h_queued(m->dev, a->pick, m->greedy_id.data, sizeof *a->pick) != 0 ||
        d->mark_record(m->dev, a->picked) != 0 || queue_ahead(m, pos + 1) != 0 ||
        d->mark_wait(m->dev, a->picked) != 0)
        return -1;
    a->id = *a->pick;
    return a->id >= 0 ? a->id : orin_error_set("sampler: every logit is NaN");
}

int32_t orin_model_decode_sample(orin_model *m, orin_sampler *s, int32_t id, int32_t pos,
                                 const int32_t *history, int32_t n)
{
    if (!m->decode[0][DECODE_GREEDY].graph || !orin_sampler_plain_greedy(s))
        return orin_model_decode(m, id, pos, NULL) != 0 ? -1
                                                        : orin_model_sample(m, s, history, n);
    if (m->ahead.on && !m->profile)
        return decode_ahead(m, id, pos);
    int32_t next;
    if (decode_token(m, decode_step_at(m, DECODE_GREEDY, pos), id, pos) != 0 ||
        m->dev->ops->copy_d2h(m->dev, &next, m->greedy_id.data, sizeof next) != 0)
        return -1;
    return next >= 0 ? next : orin_error_set("sampler: every logit is NaN");
}

void orin_model_set_profile(orin_model *m, orin_profile *p)
{
    m->profile = p;
}

void orin_model_set_vision_profile(orin_model *m, orin_profile *p)
{
    if (m->vision)
        orin_vision_set_profile(m->vision, p);
}

void orin_model_set_prefill_profile(orin_model *m, orin_profile *p)
{
    m->prefill_profile = p;
}

/* ---- sampling where the logits are ---------------------------------------------- */


/* Makes the device history equal history[0..n): uploads only what differs
 * from what it last uploaded (a decode step appends one token), then n. */
static int sync_history(orin_model *m, const int32_t *history, int32_t n)
{
    int32_t same = 0;
    while (same < n && same < m->history_len && m->history_mirror[same] == history[same])
        same++;
    size_t bytes = (size_t)(n - same) * sizeof *history;
    if (bytes && m->dev->ops->copy_h2d(m->dev, (int32_t *)m->history.data + same,
                                       history + same, bytes) != 0)
        return -1;
    memcpy(m->history_mirror + same, history + same, bytes);
    m->history_len = n;
    return m->dev->ops->copy_h2d(m->dev, m->history_n.data, &n, sizeof n);
}

/* sample.candidates over the device logits with top_k k, then the host
 * sampler's finish on what comes back. */
static int32_t sample_on_device(orin_model *m, orin_sampler *s, const int32_t *history,
                                int32_t n, int32_t k)
{
    const orin_sampler_params *p = orin_sampler_get_params(s);
    sample_block *host = m->sample_host;
    const int64_t V = m->cfg.vocab_size, max = SAMPLE_MAX, one = 1;
    char *block = m->sample_dev;
    orin_sample_candidates_args a = {
        .logits = orin_tensor_make(m->buf.logits.data, m->dtype, m->dev->kind, 1, &V),
        .history = m->history,
        .n_history = m->history_n,
        .count = orin_tensor_make(block + offsetof(sample_block, count), ORIN_I32, m->dev->kind,
                                  1, &one),
        .ids = orin_tensor_make(block + offsetof(sample_block, ids), ORIN_I32, m->dev->kind, 1,
                                &max),
        .values = orin_tensor_make(block + offsetof(sample_block, values), ORIN_F32,
                                   m->dev->kind, 1, &max),
        .repetition_penalty = p->repetition_penalty,
        .presence_penalty = p->presence_penalty,
        .top_k = k,
    };
    size_t ws = m->op.sample->workspace_size ? m->op.sample->workspace_size(&a) : 0;
    if (reserve_bytes(m, ws) != 0 || sync_history(m, history, n) != 0)
        return -1;
    orin_exec ex = model_exec(m);
    if (m->op.sample->run(&ex, &a) != 0 ||
        m->dev->ops->copy_d2h(m->dev, host, m->sample_dev, sizeof *host) != 0)
        return -1;
    orin_sampler_candidates c = {
        .values = host->values, .ids = host->ids, .count = host->count, .max = SAMPLE_MAX,
        .top_k = k, .vocab = m->cfg.vocab_size,
    };
    return orin_sampler_finish(s, &c);
}

int32_t orin_model_sample(orin_model *m, orin_sampler *s, const int32_t *history, int32_t n)
{
    int32_t k = m->op.sample ? orin_sampler_candidates_top_k(s, SAMPLE_MAX) : 0;
    if (k > 0) {
        int32_t id = sample_on_device(m, s, history, n, k);
        if (id != ORIN_SAMPLER_NEED_LOGITS)
            return id;
    }
    /* the whole vocabulary on the host: copy the logits back */
    if (fetch_logits(m, 1, m->host_logits) != 0)
        return -1;
    return orin_sampler_sample(s, m->host_logits, m->cfg.vocab_size, history, n);
}
