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
#include "qwen_internal.h"

#include "orin/rope.h"

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

int qwen_alloc_tensor(orin_model *m, orin_tensor *t, orin_dtype dt, int ndim,
                      const int64_t *dims, const char *what)
{
    *t = orin_tensor_make(NULL, dt, m->dev->kind, ndim, dims);
    t->data = model_alloc(m, orin_tensor_nbytes(t), what);
    return t->data ? 0 : -1;
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
    if (qwen_alloc_tensor(m, &m->rope_pos, ORIN_I32, 1, pd, "rope positions") != 0 ||
        qwen_alloc_tensor(m, &m->rope_cos, ORIN_F32, 2, td, "M-RoPE tables") != 0 ||
        qwen_alloc_tensor(m, &m->rope_sin, ORIN_F32, 2, td, "M-RoPE tables") != 0)
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
    int rc = qwen_alloc_tensor(m, &a->positions, ORIN_I32, 1, &(int64_t){m->context}, "positions");
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
        if (qwen_alloc_tensor(m, table[i].t, table[i].dt, table[i].cols ? 2 : 1, dims,
                              table[i].what))
            return -1;
    }
    m->host_pos = malloc((size_t)rows * sizeof *m->host_pos);
    m->host_logits = malloc((size_t)m->cfg.vocab_size * sizeof *m->host_logits);
    if (!m->host_pos || !m->host_logits)
        return orin_error_set("positions and logits: out of memory");
    if (m->op.sample) { /* the device history and the candidates' block */
        const int64_t one = 1;
        if (qwen_alloc_tensor(m, &m->history, ORIN_I32, 1, &(int64_t){m->context}, "history") ||
            qwen_alloc_tensor(m, &m->history_n, ORIN_I32, 1, &one, "history") ||
            !(m->sample_dev = model_alloc(m, sizeof(sample_block), "sampling")))
            return -1;
        m->history_mirror = malloc((size_t)m->context * sizeof *m->history_mirror);
        m->sample_host = malloc(sizeof(sample_block));
        if (!m->history_mirror || !m->sample_host)
            return orin_error_set("sampling: out of memory");
    }
    if (m->op.matmul_argmax &&
        qwen_alloc_tensor(m, &m->greedy_id, ORIN_I32, 1, &(int64_t){1}, "greedy pick") != 0)
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
    return qwen_weight_bytes_planned(m) + *kv + buffer_bytes_planned(m, rows) +
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
    double weights = qwen_weight_bytes_planned(m);
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

/* ---- load / free ------------------------------------------------------------------ */

void orin_model_free(orin_model *m)
{
    if (!m)
        return;
    /* A step decode_ahead queued (after a reply's last pick, an EOS) may still
     * run on the graphs and buffers freed below: let it finish first. */
    if (m->ahead.queued && m->dev->ops->synchronize(m->dev) != 0)
        orin_log(ORIN_LOG_WARN, "%s", orin_error());
    qwen_decode_steps_release(m, true);
    if (m->ahead.picked)
        m->dev->ops->mark_destroy(m->dev, m->ahead.picked);
    if (m->ahead.pick)
        m->dev->ops->host_free(m->dev, m->ahead.pick);
    orin_graph_free(m->prefill);
    orin_vision_free(m->vision);
    free(m->host_rope_pos);
    free(m->rope_inv_freq);
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

/* The positions the model is made for: max_position_embeddings, or with yarn
 * factor x original_max_position_embeddings where that is more (Qwen3's cards:
 * 4 x 32,768 = 131,072 over a config.json that says 40,960). */
static int32_t model_positions(const orin_model_config *c)
{
    double n = c->max_position_embeddings;
    if (c->rope.type == ORIN_ROPE_YARN && c->rope.factor * c->rope.original_max_pos > n)
        n = c->rope.factor * c->rope.original_max_pos;
    return n < INT32_MAX ? (int32_t)n : INT32_MAX;
}

static int32_t choose_context(const orin_model_options *opt, const orin_model_config *c)
{
    int32_t ctx = opt->max_context, positions = model_positions(c);
    if (ctx == 0)
        return positions;
    if (ctx < 0)
        return positions < ORIN_DEFAULT_CONTEXT ? positions : ORIN_DEFAULT_CONTEXT;
    if (ctx > positions)
        orin_log(ORIN_LOG_WARN,
                 "runtime.max_context %d exceeds the model's %d positions "
                 "(max_position_embeddings, or yarn's factor x original)", ctx, positions);
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

/* The scaled RoPE frequencies the rope calls point at, where config.json's
 * rope type scales them (linear, yarn); plain RoPE leaves the calls' scaling
 * zeroed, so the ops compute theta's frequencies themselves (the same floats:
 * computed here too, they are checked to be in float32's range). */
static int init_rope_scaling(orin_model *m, const char *path)
{
    m->rope_inv_freq = malloc((size_t)(m->cfg.head_dim / 2) * sizeof(float));
    if (!m->rope_inv_freq)
        return orin_error_set("out of memory for the rope frequencies");
    float factor;
    if (orin_rope_scaling_inv_freq(&m->cfg, m->rope_inv_freq, &factor) != 0)
        return orin_error_prefix("%s/config.json: ", path);
    if (m->cfg.rope.type != ORIN_ROPE_DEFAULT)
        m->rope_scaling = (orin_rope_scaling){.inv_freq = m->rope_inv_freq,
                                              .attention_factor = factor};
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
    qwen_assign_formats(m);
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
        init_rope_scaling(m, opt->path) != 0 ||
        qwen_load_weights(m, opt->path, opt->progress) != 0)
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

    if (!(m->prefill = orin_graph_create()) || qwen_build_decode_steps(m, opt) != 0)
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
            qwen_build_graph(m, m->prefill, len, false, start_pos + done + len, logits_rows,
                             false) != 0 ||
            qwen_run_prefill_graph(m) != 0)
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
    orin_mrope mr = orin_mrope_from_config(&m->cfg);
    mr.scaling = m->rope_scaling; /* yarn, linear: the rope ops' table */
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
    return qwen_run_decode(m, step, pos);
}

int orin_model_decode(orin_model *m, int32_t id, int32_t pos, float *logits)
{
    if (decode_token(m, qwen_decode_step_at(m, DECODE_LOGITS, pos), id, pos) != 0)
        return -1;
    if (logits && fetch_logits(m, 1, logits) != 0)
        return -1;
    return m->dev->ops->synchronize(m->dev);
}

/* Queues the greedy step at pos behind the one before, its id that step's pick
 * on the device, where its graph is captured (the steps before it ran it). */
static int queue_ahead(orin_model *m, int32_t pos)
{
    decode_step *step = pos < m->context ? qwen_decode_step_at(m, DECODE_GREEDY, pos) : NULL;
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
 * which the next step's overwrites. Where the caller asks for no token after
 * this one (more false: the last of a generation), nothing is queued: the
 * step would only delay what the device runs next (a bench's count of steps,
 * a chat's next prefill). */
static int32_t decode_ahead(orin_model *m, int32_t id, int32_t pos, bool more)
{
    decode_ahead_state *a = &m->ahead;
    const orin_device_ops *d = m->dev->ops;
    /* A queued step's id is a pick (in the vocabulary unless -1, every logit
     * NaN) and its position below the context (queue_ahead): check_tokens's
     * checks hold for it; any other step goes through them (decode_token). */
    const bool ready = a->queued && a->pos == pos && a->id == id && id >= 0;
    if (!ready && decode_token(m, qwen_decode_step_at(m, DECODE_GREEDY, pos), id, pos) != 0)
        return -1;
    a->queued = false;
    if (d->copy_d2h_queued(m->dev, a->pick, m->greedy_id.data, sizeof *a->pick) != 0 ||
        d->mark_record(m->dev, a->picked) != 0 || (more && queue_ahead(m, pos + 1) != 0) ||
        d->mark_wait(m->dev, a->picked) != 0)
        return -1;
    a->id = *a->pick;
    return a->id >= 0 ? a->id : orin_error_set("sampler: every logit is NaN");
}

int32_t orin_model_decode_sample(orin_model *m, orin_sampler *s, int32_t id, int32_t pos,
                                 const int32_t *history, int32_t n, bool more)
{
    if (!m->decode[0][DECODE_GREEDY].graph || !orin_sampler_plain_greedy(s))
        return orin_model_decode(m, id, pos, NULL) != 0 ? -1
                                                        : orin_model_sample(m, s, history, n);
    if (m->ahead.on && !m->profile)
        return decode_ahead(m, id, pos, more);
    int32_t next;
    if (decode_token(m, qwen_decode_step_at(m, DECODE_GREEDY, pos), id, pos) != 0 ||
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
    if (qwen_reserve_bytes(m, ws) != 0 || sync_history(m, history, n) != 0)
        return -1;
    orin_exec ex = qwen_model_exec(m);
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

