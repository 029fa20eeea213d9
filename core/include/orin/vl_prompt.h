/* The language side of Qwen3-VL: image placeholders in a prompt's token ids,
 * the 3-row M-RoPE positions of such a sequence, and the cos/sin tables of
 * interleaved M-RoPE. Pure host functions, exact against transformers 5.23
 * (tests/data/models/README-vl.md, sections 8 to 10).
 *
 * A prompt goes: render the chat (orin_chat_message.parts, an image part
 * becomes <|vision_start|><|image_pad|><|vision_end|>), tokenize, expand each
 * <|image_pad|> to the image's token count (orin_vl_expand_image_pads), then
 * compute positions (orin_vl_rope_index) and, per position, the rotary
 * tables (orin_mrope_tables). */
#ifndef ORIN_VL_PROMPT_H
#define ORIN_VL_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "orin/model_config.h"
#include "orin/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An image's grid in patches, as the processor's image_grid_thw gives it
 * (t = 1 for an image). The language model sees t * h * w / merge^2 tokens,
 * row-major over the merged (h / merge) x (w / merge) grid. */
typedef struct orin_vl_grid {
    int32_t t, h, w;
} orin_vl_grid;

/* The number of <|image_pad|> tokens one image takes, or -1 with
 * orin_error_set() when the grid is not positive, a side is not a multiple of
 * `merge`, or the count does not fit an int32. */
int64_t orin_vl_image_tokens(const orin_vl_grid *grid, int32_t merge);

/* Replaces the k-th <|image_pad|> (vl->image_token_id) of ids[0..n) by
 * orin_vl_image_tokens(&grids[k], vl->spatial_merge_size) copies of itself,
 * as Qwen3VLProcessor does in the text before tokenizing (the same ids,
 * since <|image_pad|> is an added token). The number of pads must equal
 * n_grids. *out is malloc'd (non-NULL even when empty; the caller frees).
 * Returns 0, or -1 with orin_error_set() and *out = NULL. */
int orin_vl_expand_image_pads(const orin_vl_config *vl, const int32_t *ids, size_t n,
                              const orin_vl_grid *grids, size_t n_grids, int32_t **out,
                              size_t *n_out);

/* M-RoPE positions of an expanded sequence, as transformers' get_rope_index:
 * text tokens (vision start/end included) take the running position P on all
 * three rows, P += 1; the run of pads of image k (grids[k], merged grid
 * lh x lw, row-major) takes t = P, h = P + row, w = P + col, then P +=
 * max(lh, lw). pos is [3][n] row-major (pos[0..n) t, pos[n..2n) h,
 * pos[2n..3n) w). *rope_delta = max position + 1 - n: a token decoded later
 * at sequence index i has position i + rope_delta on all three rows.
 * Each run of pads must hold exactly its image's tokens, every grid must be
 * used and t must be 1 (video is not handled: a <|video_pad|> is an error).
 * Returns 0, or -1 with orin_error_set(). */
int orin_vl_rope_index(const orin_vl_config *vl, const int32_t *ids, size_t n,
                       const orin_vl_grid *grids, size_t n_grids, int32_t *pos,
                       int32_t *rope_delta);

/* Interleaved M-RoPE of the text model: frequency j (of head_dim/2, inverse
 * frequency theta^(-2j/head_dim)) rotates by the h row when j % 3 == 1 and
 * j < 3 * section[1], by the w row when j % 3 == 2 and j < 3 * section[2],
 * else by the t row. */
typedef struct orin_mrope {
    int32_t head_dim;
    double theta;
    int32_t section[3]; /* t, h, w; sums to head_dim / 2 */
    /* rope_scaling yarn or linear: the rope ops' scaled frequencies and
     * factor (orin/ops.h), used instead of theta's; zeroed: theta's */
    orin_rope_scaling scaling;
} orin_mrope;

/* The text model's M-RoPE from a parsed Qwen3-VL config. */
static inline orin_mrope orin_mrope_from_config(const orin_model_config *c)
{
    return (orin_mrope){.head_dim = c->head_dim, .theta = c->rope_theta,
                        .section = {c->vl.mrope_section[0], c->vl.mrope_section[1],
                                    c->vl.mrope_section[2]}};
}

/* The position row (0 t, 1 h, 2 w) that frequency j follows. */
int orin_mrope_axis(const orin_mrope *m, int32_t j);

/* cos and sin [n][head_dim/2] of the angles pos[axis(j)][i] * inv_freq[j],
 * pos as orin_vl_rope_index writes it; computed in double and rounded once
 * (scaled: then times scaling.attention_factor in float32, as transformers scales
 * its float32 cos and sin).
 * The full head_dim table of rotate-half RoPE is [cos, cos] (and [sin, sin]).
 * With equal rows this is ordinary 1-D RoPE. Returns 0, or -1 with
 * orin_error_set() for an odd head_dim, a bad theta or sections that do
 * not sum to head_dim / 2. */
int orin_mrope_tables(const orin_mrope *m, const int32_t *pos, size_t n, float *cos_out,
                      float *sin_out);

#ifdef __cplusplus
}
#endif
#endif
