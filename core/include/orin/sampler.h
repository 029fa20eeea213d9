/* Token sampling on the host: f32 logits [V] -> a token id.
 *
 * The order of operations is the one Hugging Face's generate() applies for a
 * Qwen generation_config (do_sample with temperature, top_k, top_p, min_p and
 * repetition_penalty; transformers/generation/utils.py _get_logits_processor):
 *
 *   1. repetition penalty  every distinct token of `history` (prompt and
 *                          generated tokens, as HF's input_ids): logit / p
 *                          when the logit is > 0, logit * p otherwise (once
 *                          per token however often it occurs)
 *   2. presence penalty    every distinct token of `history`: logit - p
 *                          (not in HF; OpenAI/vLLM semantics, after 1)
 *   3. temperature         logit / T; T = 0 (or top_k = 1) means greedy:
 *                          the argmax of the penalised logits (the lowest id
 *                          on ties), and steps 4-6 do not apply
 *   4. top_k               keep the tokens whose scaled logit is >= the k-th
 *                          largest (ties at the boundary are all kept, as HF)
 *   5. top_p               over the softmax of what is left, in descending
 *                          order, keep a token while the mass of the tokens
 *                          ranked above it is < top_p (the first token always)
 *   6. min_p               drop the tokens whose probability is below
 *                          min_p * (the largest probability)
 *   7. draw                from the softmax of what is left
 *
 * History ids outside [0, V) are ignored (HF clamps and drops ids >= V).
 * Logits of -inf are masked tokens and NaN ones are skipped; when some logits
 * are +inf the draw is uniform over those. No usable logit at all is an error.
 *
 * Cost per token: a pass over V (two with top_k: a size-k heap for the
 * threshold, then collecting the tokens above it); top_p sorts only what it
 * keeps (a heap over the candidates, popped in order). Nothing sorts all of V.
 *
 * Randomness: xoshiro256** (Blackman and Vigna), its state seeded from the
 * 64-bit seed with splitmix64; a draw is a double in [0, 1) from the top 53
 * bits of one output. The same seed, parameters and logits give the same
 * tokens on every machine. */
#ifndef ORIN_SAMPLER_H
#define ORIN_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orin_sampler_params {
    float temperature;        /* >= 0; 0: greedy */
    int32_t top_k;            /* >= 0; 0: off */
    float top_p;              /* (0, 1]; 1: off */
    float min_p;              /* [0, 1]; 0: off */
    float repetition_penalty; /* > 0; 1: off */
    float presence_penalty;   /* finite; 0: off */
    uint64_t seed;
} orin_sampler_params;

/* Plain sampling from the softmax: temperature 1, every filter off, seed 0. */
#define ORIN_SAMPLER_PARAMS_DEFAULT                                                         \
    ((orin_sampler_params){.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,   \
                           .repetition_penalty = 1.0f, .presence_penalty = 0.0f, .seed = 0})

typedef struct orin_sampler orin_sampler;

/* Checks the parameters. NULL with orin_error_set() ("sampler: top_p 1.5 is
 * not in (0, 1]") on a bad one, or when out of memory. Working memory grows to
 * the largest vocabulary seen, on the first call. */
orin_sampler *orin_sampler_create(const orin_sampler_params *p);
void orin_sampler_free(orin_sampler *s);

/* Steps 1 and 2 alone, in place: every distinct token of history[0..n) in
 * [0, vocab) penalised once. `seen` is vocab bytes of zeros, left zero. Shared
 * with the sample.candidates op's host implementation. */
void orin_sampler_penalize(float *logits, int32_t vocab, const int32_t *history, int32_t n,
                           float repetition, float presence, uint8_t *seen);

/* The parameters the sampler was created with. */
const orin_sampler_params *orin_sampler_get_params(const orin_sampler *s);

/* Whether the sampler is greedy with no penalty: its token is then the lowest
 * id of the largest logit, NaN skipped, whatever the history (what the
 * matmul.argmax op computes on the device). */
bool orin_sampler_plain_greedy(const orin_sampler *s);

/* Restarts the random sequence as if the sampler had been created with `seed`. */
void orin_sampler_seed(orin_sampler *s, uint64_t seed);

/* Picks the next token from logits[0..vocab), which it uses as scratch (the
 * penalties are applied in place). history[0..n_history) are the tokens so
 * far, for the penalties (NULL when n_history is 0). Returns the token id, or
 * -1 with orin_error_set() (vocab < 1, out of memory, no usable logit). */
int32_t orin_sampler_sample(orin_sampler *s, float *logits, int32_t vocab, const int32_t *history,
                            int32_t n_history);

/* The distribution orin_sampler_sample draws from, without drawing (for
 * tests): probs[0..vocab) gets the final probabilities, 0 for removed tokens,
 * one-hot at the argmax when greedy. Same arguments; returns 0 or -1. */
int orin_sampler_distribution(orin_sampler *s, float *logits, int32_t vocab,
                              const int32_t *history, int32_t n_history, double *probs);

/* ---- finishing on the device's candidates ----
 *
 * The sample.candidates op (orin/ops.h) runs steps 1-2 and the selection of
 * step 4 where the logits are: the penalised logits >= the top_k-th largest,
 * in descending order. From those the host finishes with the same code as
 * orin_sampler_sample, and gets the token that orin_sampler_sample would give
 * on the whole vocabulary, drawing the same random number, or learns that the
 * candidates cannot decide it.
 *
 * Why "cannot" happens: step 4 keeps the tokens whose logit / T ties the k-th
 * largest's, and a logit an ulp below the k-th may divide to the same value.
 * Asked for exactly top_k, the op cannot show those; asked for more (see
 * orin_sampler_candidates_top_k), the candidates nearly always settle it. */

/* What sample.candidates wrote, and how it was called. */
typedef struct orin_sampler_candidates {
    const float *values;  /* [count] penalised logits, descending */
    const int32_t *ids;   /* [count] their token ids */
    int32_t count;        /* the op's count (max + 1: the ties did not fit) */
    int32_t max;          /* the length of values and ids */
    int32_t top_k;        /* the top_k the op ran with */
    int32_t vocab;        /* the vocabulary size V */
} orin_sampler_candidates;

/* orin_sampler_finish's answer when the candidates cannot decide the token:
 * nothing was drawn; call orin_sampler_sample on the whole logits instead. */
#define ORIN_SAMPLER_NEED_LOGITS (-2)

/* The top_k to run sample.candidates with for this sampler, `max` being the
 * length of its outputs: 1 when greedy, else top_k plus a margin (up to
 * top_k more, leaving room for ties); 0 when the op cannot serve the sampler
 * (top_k 0 or larger than max: the host needs every logit). */
int32_t orin_sampler_candidates_top_k(const orin_sampler *s, int32_t max);

/* Steps 3-7 on the candidates: the token orin_sampler_sample would return for
 * the whole logits and the same history (whose penalties the op applied), with
 * the same advance of the random state. ORIN_SAMPLER_NEED_LOGITS when the
 * candidates do not decide it (the ties did not fit, or see above); -1 with
 * orin_error_set() on an error orin_sampler_sample would also report (no
 * usable logit) or on candidates the op cannot have written. */
int32_t orin_sampler_finish(orin_sampler *s, const orin_sampler_candidates *c);

#ifdef __cplusplus
}
#endif
#endif
