/* The ops: their names and call structs.
 *
 * This is the contract between models and plugins. A model fills a call struct
 * and hands it to the `run` of the implementation the registry bound; a plugin
 * reads it. Every tensor lives on the exec device. Float tensors have the
 * implementation's dtype (the compute dtype) unless said otherwise; ids and
 * positions are i32.
 *
 * Positions are always read from device memory (`positions`, one per token), never
 * passed by value, so that a captured CUDA graph can be replayed at every decode
 * step after the host writes the next position into that buffer. Where a kernel
 * needs a host-side bound to size its launch it gets `max_kv_len`: an upper bound
 * on positions[last] + 1 (the exact value when eager, the cache capacity when the
 * call is captured into a graph).
 *
 * Weights (matmul and norm weights, biases, quantized weights and their scales)
 * are never written by a kernel: an implementation may read them before the
 * kernels queued ahead of it have finished (CUDA: before the programmatic
 * dependent launch's wait), so a caller that rewrites one on the device
 * synchronises first.
 *
 * Shapes: n = tokens in the call, d = hidden size, H = query heads, Hkv = kv heads,
 * hd = head dim, V = vocab. Contiguous row-major unless a stride says otherwise. */
#ifndef ORIN_OPS_H
#define ORIN_OPS_H

#include "orin/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ORIN_OP_EMBEDDING          "embedding"
#define ORIN_OP_RMSNORM            "rmsnorm"
#define ORIN_OP_ROPE               "rope"
#define ORIN_OP_MATMUL             "matmul"
#define ORIN_OP_SWIGLU             "swiglu"
#define ORIN_OP_ADD                "add"
#define ORIN_OP_ARGMAX             "argmax"
#define ORIN_OP_KV_WRITE           "kv_write"
#define ORIN_OP_ATTENTION_PREFILL  "attention.prefill"
#define ORIN_OP_ATTENTION_DECODE   "attention.decode"

/* The vision encoders' ops (Qwen3-VL): LayerNorm, GELU, rotary embedding from
 * tables the caller computes, attention without a cache or a mask, and the
 * learned position embedding resampled to an image's patch grid. */
#define ORIN_OP_LAYERNORM          "layernorm"
#define ORIN_OP_GELU               "gelu"
#define ORIN_OP_ROPE_TABLE         "rope.table"
#define ORIN_OP_ATTENTION_FULL     "attention.full"
#define ORIN_OP_POS_INTERP         "pos_interp"

/* Fused ops: each computes what a sequence of the ops above computes, in fewer
 * passes over memory and fewer launches. A model uses one where the registry
 * has it for its device and dtype, else the sequence; the tests hold each
 * against its sequence. */
#define ORIN_OP_ADD_RMSNORM        "add_rmsnorm"
#define ORIN_OP_MATMUL_QKV         "matmul.qkv"
#define ORIN_OP_MATMUL_SWIGLU      "matmul.swiglu"
#define ORIN_OP_ROPE_KV_WRITE      "rope_kv_write"
#define ORIN_OP_MATMUL_GELU        "matmul.gelu"
#define ORIN_OP_MATMUL_ADD         "matmul.add"
#define ORIN_OP_MATMUL_ARGMAX      "matmul.argmax"

/* The sampler's first steps on the device, so that a decode step copies back a
 * few candidates instead of the whole vocabulary's logits. */
#define ORIN_OP_SAMPLE_CANDIDATES  "sample.candidates"

/* Matmuls over quantized weights (see orin_matmul_quant_args): one op per
 * weight format, so that a plugin offers the formats it has kernels for and
 * a model whose weights are in a format the device lacks fails to bind with
 * the registry's line naming the op, device and dtype. */
#define ORIN_OP_MATMUL_AWQ4        "matmul.awq4"
#define ORIN_OP_MATMUL_INT8        "matmul.int8"
/* matmul.qkv and matmul.swiglu over quantized weights (orin_matmul_qkv_quant_args,
 * orin_matmul_swiglu_quant_args): fused ops like the float ones above. */
#define ORIN_OP_MATMUL_QKV_AWQ4    "matmul.qkv.awq4"
#define ORIN_OP_MATMUL_QKV_INT8    "matmul.qkv.int8"
#define ORIN_OP_MATMUL_SWIGLU_AWQ4 "matmul.swiglu.awq4"
#define ORIN_OP_MATMUL_SWIGLU_INT8 "matmul.swiglu.int8"

/* out[i, :] = table[ids[i], :]      table [V, d], ids i32 [n], out [n, d] */
typedef struct orin_embedding_args {
    orin_tensor table;
    orin_tensor ids;
    orin_tensor out;
} orin_embedding_args;

/* out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight
 * x, out [rows, dim] (out may alias x), weight [dim]. Qwen3's q/k norms are this
 * op over rows = n * heads, dim = hd. Accumulates in f32 whatever the dtype. */
typedef struct orin_rmsnorm_args {
    orin_tensor x;
    orin_tensor weight;
    orin_tensor out;
    float eps;
} orin_rmsnorm_args;

/* RoPE's frequencies where config.json's rope_scaling changes them (linear,
 * yarn): inv_freq [hd/2] f32 in host memory, as transformers computes them
 * (orin_rope_scaling_inv_freq, orin/rope.h), and attention_factor,
 * which multiplies cos and sin (yarn's; 1 for linear). inv_freq NULL (a zeroed
 * struct): theta^(-2j/hd), and no factor. The caller keeps the table alive as
 * long as the call may run (a captured graph: the model's life). */
typedef struct orin_rope_scaling {
    const float *inv_freq;
    float attention_factor;
} orin_rope_scaling;

/* Rotary embedding in place, Hugging Face's rotate-half layout: for pair
 * (j, j + hd/2), j < hd/2, angle = positions[i] * inv_freq[j], inv_freq[j] =
 * theta^(-2j/hd) or scaling's:
 *   x1' = x1 cos - x2 sin,  x2' = x2 cos + x1 sin
 * (cos and sin times scaling.attention_factor where set).
 * x [n, heads, hd], positions i32 [n]. */
typedef struct orin_rope_args {
    orin_tensor x;
    orin_tensor positions;
    float theta;
    orin_rope_scaling scaling;
} orin_rope_args;

/* y = x . w^T (+ bias)      x [n, in], w [out, in] (Hugging Face layout),
 * bias [out] or bias.data == NULL, y [n, out]. */
typedef struct orin_matmul_args {
    orin_tensor x;
    orin_tensor w;
    orin_tensor bias;
    orin_tensor y;
} orin_matmul_args;

/* out = silu(gate) * up, all [n, f]; out may alias gate or up. */
typedef struct orin_swiglu_args {
    orin_tensor gate;
    orin_tensor up;
    orin_tensor out;
} orin_swiglu_args;

/* out = a + b, same shape; out may alias a or b. */
typedef struct orin_add_args {
    orin_tensor a;
    orin_tensor b;
    orin_tensor out;
} orin_add_args;

/* out[i] = argmax_j x[i, j] (lowest j on ties)      x [n, V], out i32 [n].
 * NaN counts as larger than any number (the first NaN's index), as in
 * torch.argmax, so that a broken model shows instead of emitting plausible ids. */
typedef struct orin_argmax_args {
    orin_tensor x;
    orin_tensor out;
} orin_argmax_args;

/* One layer's KV cache as attention sees it: element (pos, head, i) of K is at
 * k[pos * pos_stride + head * head_stride + i], the same for V. Today the layout
 * is [capacity, Hkv, hd]; the strides are here so that other layouts need no new
 * call structs. */
typedef struct orin_kv_view {
    void *k;
    void *v;
    orin_dtype dtype;
    int32_t n_kv_heads;
    int32_t head_dim;
    int64_t pos_stride;   /* elements */
    int64_t head_stride;  /* elements */
    int32_t capacity;     /* positions the cache holds */
} orin_kv_view;

/* Element offset of (pos, head, 0) in K (and V) of a cache view. Every kernel,
 * host or CUDA, computes K/V addresses through this one function, so that a
 * paged layout changes only here. */
#if defined(__CUDACC__)
#define ORIN_HOST_DEVICE __host__ __device__
#else
#define ORIN_HOST_DEVICE
#endif
static inline ORIN_HOST_DEVICE int64_t orin_kv_offset(const orin_kv_view *kv, int64_t pos,
                                                      int64_t head)
{
    return pos * kv->pos_stride + head * kv->head_stride;
}

/* cache[positions[i]] = k[i], v[i]      k, v [n, Hkv, hd]. */
typedef struct orin_kv_write_args {
    orin_tensor k;
    orin_tensor v;
    orin_tensor positions;
    orin_kv_view cache;
} orin_kv_write_args;

/* Causal attention over the cache, with grouped-query heads (query head h reads
 * kv head h / (H / Hkv)). Query row i attends cache positions 0..positions[i]
 * inclusive, which the caller has already written (kv_write runs first).
 *   q [n, H, hd], out [n, H, hd], positions i32 [n].
 * attention.prefill: any n. attention.decode: n == 1, graph-safe where the
 * implementation says so (ORIN_OP_GRAPH_SAFE). */
typedef struct orin_attention_args {
    orin_tensor q;
    orin_tensor out;
    orin_tensor positions;
    orin_kv_view cache;
    float scale;          /* usually 1/sqrt(hd) */
    int32_t max_kv_len;   /* see the top of this file */
} orin_attention_args;

/* ---- vision encoder ops ---- */

/* out[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias, with the
 * biased variance (mean of squared deviations), as torch.nn.LayerNorm.
 * x, out [rows, dim] (out may alias x), weight and bias [dim]. Accumulates in
 * f32 (the CPU in double) whatever the dtype. */
typedef struct orin_layernorm_args {
    orin_tensor x;
    orin_tensor weight;
    orin_tensor bias;
    orin_tensor out;
    float eps;
} orin_layernorm_args;

/* Which GELU: torch's nn.GELU() (erf, exact) or approximate="tanh"
 * (transformers' gelu_pytorch_tanh). */
typedef enum orin_gelu_kind {
    ORIN_GELU_ERF = 0,  /* 0.5 x (1 + erf(x / sqrt(2))) */
    ORIN_GELU_TANH,     /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
} orin_gelu_kind;

/* out = gelu(x) elementwise, any shape; out may alias x. */
typedef struct orin_gelu_args {
    orin_tensor x;
    orin_tensor out;
    orin_gelu_kind kind;
} orin_gelu_args;

/* Rotary embedding in place from angle tables the caller computed, Hugging
 * Face's rotate-half layout: for pair (j, j + hd/2), j < hd/2,
 *   x1' = x1 cos[i, j] - x2 sin[i, j],  x2' = x2 cos[i, j] + x1 sin[i, j].
 * x [n, heads, hd], cos and sin f32 [n, hd/2] whatever the dtype (the angles
 * depend on more than a position: Qwen3-VL's 2-D vision positions, M-RoPE). */
typedef struct orin_rope_table_args {
    orin_tensor x;
    orin_tensor cos;
    orin_tensor sin;
} orin_rope_table_args;

/* Bidirectional attention within segments, no cache, no mask: the tokens
 * cu_seqlens[s] .. cu_seqlens[s+1]-1 attend to each other and to nothing else
 * (one segment per image, or per video frame). Grouped-query heads as in
 * orin_attention_args (query head h reads kv head h / (H / Hkv)).
 *   q, out [n, H, hd], k, v [n, Hkv, hd], cu_seqlens i32 [segments + 1] with
 *   cu_seqlens[0] == 0, non-decreasing, cu_seqlens[segments] == n (in device
 *   memory like positions; the CPU checks them). */
typedef struct orin_attention_full_args {
    orin_tensor q;
    orin_tensor k;
    orin_tensor v;
    orin_tensor out;
    orin_tensor cu_seqlens;
    float scale;          /* usually 1/sqrt(hd) */
} orin_attention_full_args;

/* Qwen3-VL's learned position embedding resampled to a frame's patch grid:
 * bilinear with align_corners over a side x side table, as transformers'
 * fast_pos_embed_interpolate. Patch k of a frame sits at (row, col) of its
 * h x w grid (orin_patch_rc: merge-window order); out[k, :] is the blend of the
 * four table rows around (row (side-1)/(h-1), col (side-1)/(w-1)), weights
 * from orin_pos_interp_tap. out holds one or more frames, all alike.
 *   table [side * side, d], out [frames * h * w, d]; h and w multiples of merge. */
typedef struct orin_pos_interp_args {
    orin_tensor table;
    orin_tensor out;
    int32_t side;         /* the table's grid: side x side learned positions */
    int32_t h, w;         /* the frame's patch grid */
    int32_t merge;        /* the spatial merge size: it orders the patches */
} orin_pos_interp_args;

/* Row and column of patch k of a frame w patches wide whose patches come in
 * merge-window order: windows of merge x merge patches in row-major order,
 * row-major within a window (the 2x2 shuffle is then four consecutive rows). */
static inline ORIN_HOST_DEVICE void orin_patch_rc(int64_t k, int32_t w, int32_t merge,
                                                  int32_t *row, int32_t *col)
{
    const int64_t windows_wide = w / merge, window = k / ((int64_t)merge * merge);
    const int32_t in_window = (int32_t)(k % ((int64_t)merge * merge));
    *row = (int32_t)(window / windows_wide) * merge + in_window / merge;
    *col = (int32_t)(window % windows_wide) * merge + in_window % merge;
}

/* One axis of the bilinear resampling with align_corners: target i of n maps to
 * source i (side-1) / (n-1); returns the lower tap (the upper is that + 1,
 * clamped to side - 1) and sets *frac, the upper tap's weight. */
static inline ORIN_HOST_DEVICE int32_t orin_pos_interp_tap(int32_t i, int32_t n, int32_t side,
                                                           double *frac)
{
    const double src = (double)i * (side - 1) / (double)(n > 1 ? n - 1 : 1);
    const int32_t lo = (int32_t)src; /* src >= 0: truncation is floor */
    *frac = src - lo;
    return lo;
}

/* ---- fused ops ---- */

/* x += residual (skipped when residual.data is NULL), then out = rmsnorm(x) *
 * weight: add then rmsnorm in one pass. x [rows, d] is updated in place and
 * its sum rounded to the dtype before the norm reads it, as the sequence does.
 * out [rows, d] must not overlap x or residual. */
typedef struct orin_add_rmsnorm_args {
    orin_tensor x;
    orin_tensor residual;
    orin_tensor weight;
    orin_tensor out;
    float eps;
} orin_add_rmsnorm_args;

/* A residual add + rmsnorm in front of a product (the fused matmul.qkv and
 * matmul.swiglu ops, float and quantized, and matmul.argmax; none when
 * weight.data is NULL):
 *   x_out = x + residual (x itself when residual.data is NULL), rounded to the
 *           dtype, then the product reads rmsnorm(x_out) * weight (eps) in place
 *           of x:
 * add_rmsnorm(x -> x_out, residual, weight) then the product, bit for bit. At
 * decode this takes the norm's kernel off the step: each block of the product
 * normalises the row itself. x_out [n, in] must not overlap x or residual (the
 * blocks that read them run while one writes the sum): a model alternates its
 * residual stream between two buffers. */
typedef struct orin_norm_in {
    orin_tensor residual;
    orin_tensor weight;
    orin_tensor x_out;
    float eps;
} orin_norm_in;

/* The three projections of one input, one pass over x:
 *   y[i] = x . w[i]^T (+ bias[i])      i = 0, 1, 2 (q, k, v)
 * x [n, in], w[i] [out_i, in], bias[i] [out_i] or data NULL, y[i] [n, out_i];
 * norm: an optional add + rmsnorm of x first (orin_norm_in). */
typedef struct orin_matmul_qkv_args {
    orin_tensor x;
    orin_norm_in norm;
    orin_tensor w[3];
    orin_tensor bias[3];
    orin_tensor y[3];
} orin_matmul_qkv_args;

/* out = silu(x . w_gate^T) * (x . w_up^T): the MLP's two projections and its
 * activation. The two products are rounded to the dtype before the SwiGLU, as
 * the sequence (matmul, matmul, swiglu) rounds them.
 * x [n, in], w_gate and w_up [f, in], out [n, f]. */
typedef struct orin_matmul_swiglu_args {
    orin_tensor x;
    orin_norm_in norm; /* optional, as matmul.qkv's */
    orin_tensor w_gate;
    orin_tensor w_up;
    orin_tensor out;
} orin_matmul_swiglu_args;

/* Greedy decoding's last step, the final norm + lm_head + the greedy pick,
 * with no logit written:
 *   id[0] = the lowest j of the largest y[j], y = x . w^T rounded to the dtype
 *           (the logits matmul would store); NaN never picked, -1 when every
 *           y[j] is NaN
 * x [1, in], w [V, in], id i32 [1]; norm: optional, as matmul.qkv's. The
 * sequence it stands for is add_rmsnorm, matmul, then orin/sampler.h's greedy
 * rule on the logits (not the argmax op's, where NaN wins): the token a greedy
 * sampler without penalties draws. */
typedef struct orin_matmul_argmax_args {
    orin_tensor x;
    orin_norm_in norm;
    orin_tensor w;
    orin_tensor id;
} orin_matmul_argmax_args;

/* The attention prologue of a Qwen layer: q and k each rmsnorm'ed per head with
 * q_norm / k_norm [hd] (Qwen3; skipped when their data is NULL), then rotated
 * (rope: theta, scaling) at rope_positions, then k and v written into the cache at
 * positions:
 *   q [n, H, hd] in place, k [n, Hkv, hd] in place, v [n, Hkv, hd].
 * rope_positions i32 [n] with NULL data means positions (Qwen3-VL rotates the
 * tokens after an image at cache position + rope_delta).
 * The same function as rmsnorm, rmsnorm, rope, rope, kv_write. */
typedef struct orin_rope_kv_write_args {
    orin_tensor q;
    orin_tensor k;
    orin_tensor v;
    orin_tensor q_norm;
    orin_tensor k_norm;
    orin_tensor positions;
    orin_tensor rope_positions;
    float eps;
    float theta;
    orin_rope_scaling scaling;
    orin_kv_view cache;
} orin_rope_kv_write_args;

/* y = gelu(x . w^T + bias): matmul then gelu (a vision MLP's first product and
 * its activation), shapes as orin_matmul_args. */
typedef struct orin_matmul_gelu_args {
    orin_tensor x;
    orin_tensor w;
    orin_tensor bias;
    orin_tensor y;
    orin_gelu_kind kind;
} orin_matmul_gelu_args;

/* ORIN_OP_MATMUL_ADD takes orin_matmul_args and computes y += x . w^T + bias:
 * matmul into a temporary, then add it to y (a residual stream updated by the
 * product that ends a block); y holds the residual on entry. */

/* ---- quantized weights ---- */

/* How a linear layer's weight is stored. */
typedef enum orin_weight_format {
    ORIN_WEIGHT_FLOAT = 0, /* the compute dtype, [out, in]: matmul */
    ORIN_WEIGHT_AWQ4,      /* AWQ int4, GEMM layout: matmul.awq4 */
    ORIN_WEIGHT_INT8,      /* int8, symmetric: matmul.int8 */
} orin_weight_format;

/* A quantized weight w [out, in] (in: input width, out: outputs), group =
 * group_size input values sharing a scale (and a zero), groups = in / group:
 *
 * AWQ int4, the GEMM layout AutoAWQ writes and the published Qwen AWQ
 * checkpoints ship (loaded as they are):
 *   qweight i32 [in, out/8]: word (k, j) holds q[k][8j + c], c = 0..7, in its
 *                bits orin_awq_shift(c)..+3 (AWQ's interleaved order)
 *   zeros   i32 [groups, out/8]: z[g][n], packed the same way
 *   scales  f16 [groups, out]
 *   w[n][k] = (q[k][n] - z[k / group][n]) * scales[k / group][n],  q, z in 0..15
 * int8, quantized at load (model.quant = int8):
 *   qweight i8  [out, in] (the float weight's layout), q in -127..127
 *   zeros   none (data NULL): symmetric
 *   scales  f16 [out, groups]
 *   w[n][k] = q[n][k] * scales[n][k / group]
 * Both products are exact in f32 (an integer below 2^5 or 2^8 times an f16),
 * so every implementation dequantizes to the same f32 weights. Scales stay
 * f16 whatever the compute dtype. */
typedef struct orin_qweight {
    orin_tensor qweight;
    orin_tensor zeros;
    orin_tensor scales;
    int32_t group_size;   /* divides in */
    uint32_t layout;      /* 0: as above; else the layout the bound implementation's
                             prepare rearranged the same bytes into (orin/registry.h) */
} orin_qweight;

/* Where column c (0..7) of an AWQ word sits: nibble i holds column
 * {0, 2, 4, 6, 1, 3, 5, 7}[i], so column c is nibble {0, 4, 1, 5, 2, 6, 3, 7}[c]. */
static inline ORIN_HOST_DEVICE int orin_awq_shift(int c)
{
    return 4 * ((c & 1) * 4 + (c >> 1));
}

/* y = x . w^T (+ bias), w dequantized as above, accumulated in f32: the
 * function of orin_matmul_args with the dequantized weight.
 *   x [.., in], y [.., out] with x's rows, bias [out] or data NULL, all in the
 *   compute dtype. matmul.awq4: out a multiple of 8. */
typedef struct orin_matmul_quant_args {
    orin_tensor x;
    orin_qweight w;
    orin_tensor bias;
    orin_tensor y;
} orin_matmul_quant_args;

/* matmul.qkv's and matmul.swiglu's functions over quantized weights (fused ops:
 * matmul.qkv.awq4 / .int8 and matmul.swiglu.awq4 / .int8), each part what
 * orin_matmul_quant_args takes:
 *   y[i] = x . w[i]^T (+ bias[i])                      i = 0, 1, 2 (q, k, v)
 *   out  = silu(x . w_gate^T) * (x . w_up^T), the two products rounded to the
 *          dtype first, as the sequence (matmul, matmul, swiglu) rounds them.
 * x [n, in]; y[i] [n, out_i]; out [n, f] with w_gate and w_up [f, in] alike.
 * The weights are in the layout the same provider's matmul.awq4 / .int8
 * prepared (orin_qweight.layout): a model binds these from that provider. */
typedef struct orin_matmul_qkv_quant_args {
    orin_tensor x;
    orin_norm_in norm; /* optional, as matmul.qkv's */
    orin_qweight w[3];
    orin_tensor bias[3];
    orin_tensor y[3];
} orin_matmul_qkv_quant_args;

typedef struct orin_matmul_swiglu_quant_args {
    orin_tensor x;
    orin_norm_in norm; /* optional, as matmul.qkv's */
    orin_qweight w_gate;
    orin_qweight w_up;
    orin_tensor out;
} orin_matmul_swiglu_quant_args;

/* ---- sampling ---- */

/* orin/sampler.h's steps 1, 2 and the selection of step 4 on the device: the
 * repetition and presence penalties over the distinct tokens of
 * history[0..n_history) (n_history read from device memory), then the top_k
 * largest penalised logits (NaN skipped), with every token that ties the k-th
 * (HF keeps ties at the boundary), in descending order, ties by lower id:
 *   logits [V] (the compute dtype), history i32 [cap], n_history i32 [1],
 *   values f32 [max] and ids i32 [max] (out: penalised logits, not yet divided
 *   by the temperature), count i32 [1] (out: how many were written; max + 1
 *   when the candidates with ties do not fit, nothing else written then).
 * The host finishes with orin_sampler_finish: the same tokens as
 * orin_sampler_sample on the whole vocabulary. top_k 1 is greedy. */
typedef struct orin_sample_candidates_args {
    orin_tensor logits;
    orin_tensor history;
    orin_tensor n_history;
    orin_tensor values;
    orin_tensor ids;
    orin_tensor count;
    float repetition_penalty; /* 1: off */
    float presence_penalty;   /* 0: off */
    int32_t top_k;            /* 1 .. values' length */
} orin_sample_candidates_args;

#ifdef __cplusplus
}
#endif
#endif
