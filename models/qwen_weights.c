/* A Qwen model's weights: which format each linear layer is in (float, AWQ
 * int4 as the folder has it, int8 at load), their bytes for the memory plan,
 * and loading them from the folder's safetensors onto the device (qwen.c
 * says what the model is; qwen_internal.h what the files share). */
#include "qwen_internal.h"

/* ---- weights ------------------------------------------------------------------ */

/* Uploads `src` converted to the compute dtype into a new device tensor (on a
 * GPU the conversion runs there, after a pinned-buffer copy of the raw bytes). */
static int upload_converted(orin_model *m, const orin_st_tensor *src, orin_tensor *out)
{
    if (qwen_alloc_tensor(m, out, m->dtype, src->ndim, src->shape, src->name) != 0)
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
    if (qwen_alloc_tensor(m, out, dt, 2, dims, name) != 0)
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
    if (qwen_alloc_tensor(m, &q->qweight, ORIN_I8, 2, dims, name) != 0 ||
        qwen_alloc_tensor(m, &q->scales, ORIN_F16, 2, sdims, name) != 0)
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
void qwen_assign_formats(orin_model *m)
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
    if (qwen_alloc_tensor(m, &w, m->dtype, 2, (int64_t[]){total, in}, name) != 0 ||
        (bias && qwen_alloc_tensor(m, &b, m->dtype, 1, &total, name) != 0))
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
double qwen_weight_bytes_planned(const orin_model *m)
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

int qwen_load_weights(orin_model *m, const char *dir, bool progress)
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

