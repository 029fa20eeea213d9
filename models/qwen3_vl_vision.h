/* The Qwen3-VL vision encoder: pixel_values of one or more images in, the
 * merged image embeddings and the DeepStack features out (f32, on the host).
 *
 * The function of transformers' Qwen3VLVisionModel, step by step in
 * tests/data/models/README-vl.md: patch embedding (a matmul), the learned
 * position table interpolated to each image's grid, 2-D rotary embedding,
 * `depth` pre-norm blocks (LayerNorm, bidirectional attention within each
 * image, MLP with the configured GELU), the patch merger and the DeepStack
 * mergers. The ops come from the registry for the device and dtype, as for
 * the language models; what depends only on the grid (the interpolated
 * position embedding, the rotary tables, the segment bounds) is computed on
 * the host in double. */
#ifndef ORIN_QWEN3_VL_VISION_H
#define ORIN_QWEN3_VL_VISION_H

#include "orin/device.h"
#include "orin/graph.h"
#include "orin/ops.h"
#include "orin/registry.h"

#include <stdbool.h>
#include <stdint.h>

#define ORIN_VISION_MAX_DEEPSTACK 16

/* config.json's vision_config, with transformers' defaults. */
typedef struct orin_vision_config {
    int32_t depth, hidden, intermediate, heads, head_dim;
    int32_t in_channels, patch, temporal_patch, merge;
    int32_t num_position_embeddings, side; /* side * side == num_position_embeddings */
    int32_t out_hidden;                    /* the language model's hidden size */
    int32_t n_deepstack;
    int32_t deepstack[ORIN_VISION_MAX_DEEPSTACK]; /* deepstack_visual_indexes */
    orin_gelu_kind act;                    /* hidden_act of the blocks' MLP */
    double rope_theta;                     /* rope_parameters.rope_theta, else 10000 */
    double eps;                            /* LayerNorm eps: 1e-6, as transformers fixes it */
} orin_vision_config;

typedef struct orin_vision_options {
    const char *path;                      /* a Qwen3-VL model folder */
    orin_dtype dtype;                      /* compute dtype */
    orin_device *device;
    const orin_registry *registry;
    bool strict;                           /* a fallback binding is an error */
    const char *attention;                 /* attention.full's provider (attention.backend);
                                              NULL: the reference */
    bool fused_ops;                        /* matmul.gelu and matmul.add where the registry
                                              has them (runtime.fused_ops) */
} orin_vision_options;

/* An image's grid in patches (image_grid_thw): t temporal patches (1 for an
 * image), h x w patches, h and w multiples of the merge size. */
typedef struct orin_vision_grid {
    int32_t t, h, w;
} orin_vision_grid;

/* What orin_vision_encode returns, f32 host arrays (orin_vision_output_free). */
typedef struct orin_vision_output {
    int64_t tokens;       /* merged tokens, sum of t*h*w / merge^2, images in order */
    int32_t out_hidden;
    float *embeds;        /* [tokens, out_hidden]: the image-pad rows of the LM input */
    int32_t n_deepstack;
    float *deepstack[ORIN_VISION_MAX_DEEPSTACK]; /* each [tokens, out_hidden] */
    /* With trace: the stages, [patches, hidden] each, rows in merge-window
     * order (as pixel_values); else NULL. */
    int64_t patches;
    float *patch_embed, *pos_embed, *embed;
    int32_t n_blocks;
    float **blocks;       /* n_blocks (= depth) arrays: each block's output */
} orin_vision_output;

typedef struct orin_vision_encoder orin_vision_encoder;

/* Reads config.json's vision_config and the model.visual.* weights of
 * opt->path, binds the ops. Errors name the key or the tensor. */
int orin_vision_load(const orin_vision_options *opt, orin_vision_encoder **out);
/* Only config.json's vision_config of the folder `dir`. */
int orin_vision_config_read(const char *dir, orin_vision_config *out);
/* Bytes the encoder's weights take on the device in dtype `dt` (the memory
 * plan counts them before anything is loaded). */
double orin_vision_weight_bytes(const orin_vision_config *c, orin_dtype dt);
void orin_vision_free(orin_vision_encoder *enc);
const orin_vision_config *orin_vision_get_config(const orin_vision_encoder *enc);
/* With p, every later call runs its ops one by one, each timed into p
 * (--profile); NULL runs them plainly again. */
void orin_vision_set_profile(orin_vision_encoder *enc, orin_profile *p);

/* Encodes n_images images whose pixel_values [rows, cols] (f32, the
 * preprocessor's layout: orin/image.h) are concatenated in order; each image
 * attends only within itself (each frame, for t > 1). rows must be the sum of
 * t*h*w and cols in_channels * temporal_patch * patch^2. trace also returns
 * every stage. On failure *out is left empty. */
int orin_vision_encode(orin_vision_encoder *enc, const float *pixel_values, int64_t rows,
                       int64_t cols, const orin_vision_grid *grids, int n_images, bool trace,
                       orin_vision_output *out);
void orin_vision_output_free(orin_vision_output *out);

/* The device tensors orin_vision_encode_device writes: each [tokens,
 * out_hidden] in the encoder's dtype on its device (tokens: sum of t*h*w /
 * merge^2), n_deepstack of them as the config has. */
typedef struct orin_vision_device_output {
    orin_tensor embeds;
    int32_t n_deepstack;
    orin_tensor deepstack[ORIN_VISION_MAX_DEEPSTACK];
} orin_vision_device_output;

/* orin_vision_encode, its results left where the language model reads them
 * (no copy to the host and back). Returns with the device idle. */
int orin_vision_encode_device(orin_vision_encoder *e, const float *pixel_values, int64_t rows,
                              int64_t cols, const orin_vision_grid *grids, int n_images,
                              const orin_vision_device_output *outputs);

#endif
