/* A Qwen model's op graphs: the graph of a prefill chunk or a decode step
 * (every op bound at load, the fused ones where bound), and running it,
 * eagerly or, for decode steps, captured once as a device graph and replayed
 * (qwen.c says what the model is; qwen_internal.h what the files share). */
#include "qwen_internal.h"

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
    orin_rope_args rq = {.x = q, .positions = rope_pos, .theta = theta,
                         .scaling = m->rope_scaling};
    orin_rope_args rk = {.x = k, .positions = rope_pos, .theta = theta,
                         .scaling = m->rope_scaling};
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
                                     .theta = (float)c->rope_theta,
                                     .scaling = m->rope_scaling, .cache = *cache};
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
int qwen_build_graph(orin_model *m, orin_graph *g, int64_t n, bool decode, int32_t max_kv_len,
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
void qwen_decode_steps_release(orin_model *m, bool graphs)
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
int qwen_reserve_bytes(orin_model *m, size_t need)
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
    qwen_decode_steps_release(m, false); /* they point at the old workspace: capture again */
    return 0;
}

static int reserve_workspace(orin_model *m, const orin_graph *g)
{
    return qwen_reserve_bytes(m, orin_graph_workspace_size(g));
}

/* The exec every op of the model runs with: its device and its workspace. */
orin_exec qwen_model_exec(const orin_model *m)
{
    return (orin_exec){.device = m->dev, .workspace = m->workspace,
                       .workspace_size = m->workspace_size};
}

static int run_graph(orin_model *m, const orin_graph *g)
{
    if (reserve_workspace(m, g) != 0)
        return -1;
    orin_exec ex = qwen_model_exec(m);
    return orin_graph_run(g, &ex);
}

/* A prefill chunk's graph, op by op and timed under --profile. */
int qwen_run_prefill_graph(orin_model *m)
{
    if (!m->prefill_profile)
        return run_graph(m, m->prefill);
    if (reserve_workspace(m, m->prefill) != 0)
        return -1;
    orin_exec ex = qwen_model_exec(m);
    return orin_graph_run_profiled(m->prefill, &ex, m->prefill_profile, 0);
}

static int queue_decode(void *ctx)
{
    const decode_step *step = ctx;
    orin_exec ex = qwen_model_exec(step->m);
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
int qwen_run_decode(orin_model *m, decode_step *step, int32_t pos)
{
    if (m->profile) {
        if (reserve_workspace(m, step->graph) != 0)
            return -1;
        orin_exec ex = qwen_model_exec(m);
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
int qwen_build_decode_steps(orin_model *m, const orin_model_options *opt)
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
                qwen_build_graph(m, step->graph, 1, true, m->decode_span[s], 1,
                                 i == DECODE_GREEDY) != 0)
                return -1;
            step->replayable = decode_replayable(m, step->graph, opt->cuda_graph);
        }
    return 0;
}

/* Decode step `kind` for a token at pos: the shortest span above pos (the
 * last for a pos past the cache, which check_tokens turns away). */
decode_step *qwen_decode_step_at(orin_model *m, int kind, int32_t pos)
{
    int s = 0;
    while (s + 1 < m->decode_spans && pos >= m->decode_span[s])
        s++;
    return &m->decode[s][kind];
}

