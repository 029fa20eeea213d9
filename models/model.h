/* A loaded model: weights on the device, the bound ops, the KV cache, and the
 * forward passes over them. Qwen2 and Qwen3 share one decoder block (qwen.c). */
#ifndef ORIN_MODEL_H
#define ORIN_MODEL_H

#include "orin/device.h"
#include "orin/graph.h"
#include "orin/sampler.h"
#include "orin/registry.h"
#include "orin/model_config.h"
#include "orin/ops.h"
#include "orin/vl_prompt.h"

typedef struct orin_model orin_model;

/* The KV cache capacity when the user sets none: real models allow 32k-128k
 * positions, whose cache would not fit a small machine. */
#define ORIN_DEFAULT_CONTEXT 4096
#define ORIN_CONTEXT_AUTO (-1)

typedef struct orin_model_options {
    const char *path;             /* Hugging Face model folder */
    orin_dtype dtype;             /* compute dtype: weights are converted to it at load */
    orin_device *device;
    const orin_registry *registry;
    const char *attention;        /* provider for attention.* ("mha", "fa1", "fa2", ...) */
    bool strict;                  /* a fallback binding is an error */
    int32_t max_context;          /* KV cache capacity; 0 = the model's
                                     max_position_embeddings; ORIN_CONTEXT_AUTO (-1) =
                                     ORIN_DEFAULT_CONTEXT, or the model's limit if smaller */
    int32_t prefill_chunk;        /* tokens per prefill pass; 0: the device's default */
    bool progress;                /* show loading progress (on a terminal) */
    bool cuda_graph;              /* replay the decode step as one device graph where the
                                     device has graphs and every decode op is graph-safe */
    bool fused_ops;               /* use the fused ops (orin/ops.h) the registry has */
    orin_weight_format quant;     /* ORIN_WEIGHT_INT8: quantize the linear layers of a float
                                     folder at load (model.quant); a quantized folder (AWQ)
                                     is used as it is, with a line saying so */
    bool quant_lm_head;           /* with quant: lm_head too (model.quant_lm_head) */
} orin_model_options;

int orin_model_load(const orin_model_options *opt, orin_model **out);

/* The ops a model binds (NULL-terminated): a device can run the model when the
 * registry has each of them there, and orin_model_quant_op's. */
extern const char *const orin_model_ops[];
/* And those a Qwen3-VL model binds besides (M-RoPE, the vision encoder). */
extern const char *const orin_model_vl_ops[];
/* The quantized matmul a model of config c needs (quantization_config, or
 * load_quant = the options' quant), or NULL for float weights. */
const char *orin_model_quant_op(const orin_model_config *c, orin_weight_format load_quant);
void orin_model_free(orin_model *m);

const orin_model_config *orin_model_get_config(const orin_model *m);
int32_t orin_model_context(const orin_model *m);  /* KV cache capacity in tokens */
/* Prompt tokens one prefill pass takes (orin_model_options.prefill_chunk, or
 * when that is 0 the device's default below, at most the context). */
int32_t orin_model_prefill_chunk(const orin_model *m);
#define ORIN_PREFILL_CHUNK_CPU 512
#define ORIN_PREFILL_CHUNK_GPU 2048
size_t orin_model_weight_bytes(const orin_model *m); /* weights on the device */
/* The weight bytes a decode step reads: all of them but the input embedding
 * table (one row), unless that table is also the lm_head. */
size_t orin_model_step_weight_bytes(const orin_model *m);
/* How the linear layers are stored: "awq4", "int8" (some layers may stay
 * float: modules_to_not_convert) or "float". */
const char *orin_model_quant_name(const orin_model *m);
orin_dtype orin_model_dtype(const orin_model *m);
orin_device *orin_model_device(const orin_model *m);

/* Runs ids[0..n) at positions start_pos..start_pos+n-1 through the prefill path,
 * filling the KV cache. `logits` (may be NULL) receives f32 logits: [n, V] when
 * all_logits, else the last row [V]. Fails before any work when the tokens do
 * not fit the cache. */
int orin_model_prefill(orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos,
                       float *logits, bool all_logits);

/* An image of a Qwen3-VL prompt: its pixel_values [rows, cols] (f32, the
 * preprocessor's layout: orin/image.h) and its grid in patches. */
typedef struct orin_model_image {
    const float *pixel_values;
    int64_t rows, cols;           /* rows = t * h * w */
    orin_vl_grid grid;
} orin_model_image;

#define ORIN_MODEL_MAX_IMAGES 256 /* per orin_model_prefill_images call */

/* orin_model_prefill for a Qwen3-VL model with images: ids already hold each
 * image's <|image_pad|> run (orin_vl_expand_image_pads), the images in the
 * order of their runs. The vision encoder runs on them; the pad rows of the
 * input become the image embeddings, the DeepStack features are added after
 * the first decoder layers, and q/k rotate by the M-RoPE positions of the
 * sequence (orin_vl_rope_index) while the KV cache takes start_pos.. as
 * always. The model then keeps the sequence's rope_delta: later prefills and
 * decode steps rotate at cache position + rope_delta, and a prefill at
 * start_pos 0 starts a new sequence (rope_delta 0). logits as for
 * orin_model_prefill; NULL keeps the last row's on the device for
 * orin_model_sample. No images: orin_model_prefill. A model without a vision
 * encoder given images fails with one line. */
int orin_model_prefill_images(orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos,
                              const orin_model_image *images, int n_images, float *logits,
                              bool all_logits);

/* The rope position minus the cache position of the tokens that follow the
 * sequence in the cache (0 but after images, README-vl.md section 9). */
int32_t orin_model_rope_delta(const orin_model *m);
/* Seconds the last orin_model_prefill_images spent in the vision encoder
 * (its results on the device included), 0 without images. */
double orin_model_vision_seconds(const orin_model *m);

/* One token at position pos through the decode path; logits [V] (may be NULL:
 * they stay on the device for orin_model_sample). */
int orin_model_decode(orin_model *m, int32_t id, int32_t pos, float *logits);

/* orin_model_prefill for generation: the last row's logits are computed into
 * the device buffer and not copied back, for orin_model_sample. */
int orin_model_prefill_on_device(orin_model *m, const int32_t *ids, int32_t n, int32_t start_pos);

/* The next token from the logits of the last prefill or decode step, as
 * orin_sampler_sample(s, logits, V, history, n) would pick it: on a GPU the
 * vocabulary-wide steps (penalties, top-k) run there (sample.candidates) and
 * the host finishes on the candidates; the logits come back only where those
 * cannot decide (top_k 0, or a near-tie at the top-k boundary). history is
 * the prompt and the tokens generated so far. The id, or -1 with the error. */
int32_t orin_model_sample(orin_model *m, orin_sampler *s, const int32_t *history, int32_t n);

/* orin_model_decode(m, id, pos, NULL), then orin_model_sample(m, s, history,
 * n) (history holding id at pos): the next token. Where s is greedy without
 * penalties and the device has matmul.argmax, the step ends in that op (the
 * final norm, lm_head and the greedy pick, no logits written), and only the id
 * comes back. more: the caller means to decode the returned token next, at
 * pos + 1, by this call; on a GPU with graphs the step for it then starts
 * before this call returns (decode ahead), and false spares that step where
 * none follows (the last token of a generation). The id, or -1 with the
 * error. */
int32_t orin_model_decode_sample(orin_model *m, orin_sampler *s, int32_t id, int32_t pos,
                                 const int32_t *history, int32_t n, bool more);

/* Times every op of the decode steps that follow into p (NULL: stop): the
 * steps then run eagerly, op by op (orin_graph_run_profiled), for --profile. */
void orin_model_set_profile(orin_model *m, orin_profile *p);
/* The same for the vision encoder's runs (one run an encoder call); nothing
 * for a model without one. */
void orin_model_set_vision_profile(orin_model *m, orin_profile *p);
/* The same for the prefill's chunks (one run a chunk). */
void orin_model_set_prefill_profile(orin_model *m, orin_profile *p);

#endif
