/* Qwen3-VL prompts on the language side: placeholder expansion (what
 * Qwen3VLProcessor does to the text), M-RoPE positions (get_rope_index) and
 * the interleaved M-RoPE tables (Qwen3VLTextRotaryEmbedding). See
 * orin/vl_prompt.h and tests/data/models/README-vl.md, sections 8 to 10. */
#include "orin/vl_prompt.h"
#include "orin/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t orin_vl_image_tokens(const orin_vl_grid *g, int32_t merge)
{
    if (merge < 1)
        return orin_error_set("spatial_merge_size = %d: must be positive", merge);
    if (g->t < 1 || g->h < 1 || g->w < 1)
        return orin_error_set("image grid [%d, %d, %d]: not positive", g->t, g->h, g->w);
    if (g->h % merge || g->w % merge)
        return orin_error_set("image grid [%d, %d, %d]: h and w must be multiples of "
                              "spatial_merge_size = %d", g->t, g->h, g->w, merge);
    int64_t n = (int64_t)g->t * (g->h / merge) * (g->w / merge);
    if (n > INT32_MAX)
        return orin_error_set("image grid [%d, %d, %d]: %lld tokens, too many", g->t, g->h, g->w,
                              (long long)n);
    return n;
}

/* How long the expanded sequence is; -1 when the pads and grids disagree. */
static int64_t expanded_length(const orin_vl_config *vl, const int32_t *ids, size_t n,
                               const orin_vl_grid *grids, size_t n_grids)
{
    int64_t len = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] != vl->image_token_id) {
            len++;
            continue;
        }
        if (k == n_grids)
            return orin_error_set("prompt: more <|image_pad|> tokens than the %zu image%s given",
                                  n_grids, n_grids == 1 ? "" : "s");
        int64_t m = orin_vl_image_tokens(&grids[k], vl->spatial_merge_size);
        if (m < 0)
            return orin_error_prefix("image %zu: ", k);
        len += m;
        k++;
        if (len > INT32_MAX)
            return orin_error_set("prompt: more than %d tokens after expanding the images",
                                  INT32_MAX);
    }
    if (k != n_grids)
        return orin_error_set("prompt: %zu <|image_pad|> token%s for %zu images", k,
                              k == 1 ? "" : "s", n_grids);
    return len;
}

int orin_vl_expand_image_pads(const orin_vl_config *vl, const int32_t *ids, size_t n,
                              const orin_vl_grid *grids, size_t n_grids, int32_t **out,
                              size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    int64_t len = expanded_length(vl, ids, n, grids, n_grids);
    if (len < 0)
        return -1;
    int32_t *buf = malloc((size_t)(len ? len : 1) * sizeof *buf);
    if (!buf)
        return orin_error_set("prompt: out of memory expanding %lld tokens", (long long)len);
    size_t j = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] != vl->image_token_id) {
            buf[j++] = ids[i];
            continue;
        }
        /* Validated above, so this cannot fail. */
        int64_t m = orin_vl_image_tokens(&grids[k++], vl->spatial_merge_size);
        for (int64_t c = 0; c < m; c++)
            buf[j++] = vl->image_token_id;
    }
    *out = buf;
    *n_out = j;
    return 0;
}

/* Image k's run of pads starting at ids[i]: its positions from P, and the
 * position after it. Returns the run length, or -1. */
static int64_t image_positions(const orin_vl_config *vl, const int32_t *ids, size_t n, size_t i,
                               const orin_vl_grid *g, size_t k, int32_t *pos, int64_t *p)
{
    int32_t merge = vl->spatial_merge_size;
    int64_t want = orin_vl_image_tokens(g, merge);
    if (want < 0)
        return orin_error_prefix("image %zu: ", k);
    if (g->t != 1)
        return orin_error_set("image %zu: grid t = %d: an image has one temporal patch", k, g->t);
    size_t run = 0;
    while (i + run < n && ids[i + run] == vl->image_token_id)
        run++;
    /* transformers takes a whole run of pads as one image, so a run must be
     * exactly one image: two images side by side would be misread. */
    if ((int64_t)run != want)
        return orin_error_set("image %zu: a run of %zu <|image_pad|> tokens at %zu, its grid "
                              "[%d, %d, %d] needs %lld", k, run, i, g->t, g->h, g->w,
                              (long long)want);
    int32_t lh = g->h / merge, lw = g->w / merge;
    if (*p + (lh > lw ? lh : lw) > INT32_MAX)
        return orin_error_set("prompt: positions past %d", INT32_MAX);
    for (int32_t r = 0; r < lh; r++) {
        for (int32_t c = 0; c < lw; c++, i++) {
            pos[i] = (int32_t)*p;
            pos[n + i] = (int32_t)(*p + r);
            pos[2 * n + i] = (int32_t)(*p + c);
        }
    }
    *p += lh > lw ? lh : lw;
    return (int64_t)run;
}

int orin_vl_rope_index(const orin_vl_config *vl, const int32_t *ids, size_t n,
                       const orin_vl_grid *grids, size_t n_grids, int32_t *pos,
                       int32_t *rope_delta)
{
    if (n == 0 || n > INT32_MAX)
        return orin_error_set("prompt: %zu tokens: no positions to compute", n);
    int64_t p = 0;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (ids[i] == vl->video_token_id)
            return orin_error_set("prompt: a <|video_pad|> token at %zu: video is not supported",
                                  i);
        if (ids[i] != vl->image_token_id) {
            pos[i] = pos[n + i] = pos[2 * n + i] = (int32_t)p++;
            i++;
            continue;
        }
        if (k == n_grids)
            return orin_error_set("prompt: image tokens at %zu, but only %zu image%s given", i,
                                  n_grids, n_grids == 1 ? "" : "s");
        int64_t run = image_positions(vl, ids, n, i, &grids[k], k, pos, &p);
        if (run < 0)
            return -1;
        i += (size_t)run;
        k++;
    }
    if (k != n_grids)
        return orin_error_set("prompt: %zu images given, %zu in the tokens", n_grids, k);
    /* Positions never decrease and an image's largest one is its start +
     * max(lh, lw) - 1, so the largest of all is the running position - 1. */
    *rope_delta = (int32_t)(p - (int64_t)n);
    return 0;
}

int orin_mrope_axis(const orin_mrope *m, int32_t j)
{
    if (j % 3 == 1 && j < 3 * m->section[1])
        return 1;
    if (j % 3 == 2 && j < 3 * m->section[2])
        return 2;
    return 0;
}

int orin_mrope_tables(const orin_mrope *m, const int32_t *pos, size_t n, float *cos_out,
                      float *sin_out)
{
    if (m->head_dim < 2 || m->head_dim % 2)
        return orin_error_set("M-RoPE: head_dim = %d: must be even and positive", m->head_dim);
    if (!(m->theta > 0) || !isfinite(m->theta))
        return orin_error_set("M-RoPE: rope_theta = %g: must be positive", m->theta);
    int32_t half = m->head_dim / 2;
    if (m->section[0] < 0 || m->section[1] < 0 || m->section[2] < 0 ||
        (int64_t)m->section[0] + m->section[1] + m->section[2] != half)
        return orin_error_set("M-RoPE: mrope_section [%d, %d, %d] does not sum to head_dim / 2 = "
                              "%d", m->section[0], m->section[1], m->section[2], half);
    const float *scaled = m->scaling.inv_freq;
    const float factor = scaled ? m->scaling.attention_factor : 1.0f; /* times 1: exact */
    for (int32_t j = 0; j < half; j++) {
        /* As transformers: inv_freq = 1 / theta^(2j/d) (or the scaled table's),
         * the angle one product. */
        double inv_freq = scaled ? (double)scaled[j]
                                 : 1.0 / pow(m->theta, (double)(2 * j) / m->head_dim);
        const int32_t *row = pos + (size_t)orin_mrope_axis(m, j) * n;
        for (size_t i = 0; i < n; i++) {
            double angle = (double)row[i] * inv_freq;
            cos_out[i * half + j] = (float)cos(angle) * factor;
            sin_out[i * half + j] = (float)sin(angle) * factor;
        }
    }
    return 0;
}
