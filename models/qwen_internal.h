/* The Qwen models' shared state, for the files models/qwen.c is split into:
 * the model struct with its layers, ops, buffers and decode steps, and the
 * functions one file calls in another.
 *   qwen.c          device memory, ops and buffers, the memory plan, load and
 *                   free, the forward passes, prefill with images, sampling
 *   qwen_weights.c  the weights: their formats, their bytes for the plan, loading
 *   qwen_graph.c    the op graph of a prefill chunk or a decode step, and running
 *                   it (eagerly, or captured once and replayed) */
#ifndef ORIN_MODELS_QWEN_INTERNAL_H
#define ORIN_MODELS_QWEN_INTERNAL_H

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

    /* RoPE's scaled frequencies (config.json's rope_scaling linear or yarn),
     * which every rope call of the graphs points at; zeroed: plain RoPE. */
    orin_rope_scaling rope_scaling;
    float *rope_inv_freq;                 /* [head_dim/2], what rope_scaling points at */

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

/* ---- from one file to another ---------------------------------------------------- */

/* qwen.c: a device tensor of the model's own memory (freed with the model). */
int qwen_alloc_tensor(orin_model *m, orin_tensor *t, orin_dtype dt, int ndim,
                      const int64_t *dims, const char *what);

/* qwen_weights.c */
void qwen_assign_formats(orin_model *m);
double qwen_weight_bytes_planned(const orin_model *m);
int qwen_load_weights(orin_model *m, const char *dir, bool progress);

/* qwen_graph.c */
int qwen_build_graph(orin_model *m, orin_graph *g, int64_t n, bool decode, int32_t max_kv_len,
                     int64_t logits_rows, bool greedy);
int qwen_run_prefill_graph(orin_model *m);
int qwen_build_decode_steps(orin_model *m, const orin_model_options *opt);
void qwen_decode_steps_release(orin_model *m, bool graphs);
decode_step *qwen_decode_step_at(orin_model *m, int kind, int32_t pos);
int qwen_run_decode(orin_model *m, decode_step *step, int32_t pos);
int qwen_reserve_bytes(orin_model *m, size_t need);
orin_exec qwen_model_exec(const orin_model *m);

#endif
