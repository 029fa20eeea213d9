/* The sampler: from one row of logits to the next token id, on the host.
 *
 * The steps run in the order Hugging Face's generate applies them for Qwen's
 * generation_config (logits processors, then warpers):
 *   1. repetition penalty over every token in the history (prompt and reply):
 *      a logit l becomes l / penalty when l > 0, else l * penalty; presence
 *      penalty subtracts a constant once per distinct token seen;
 *   2. temperature 0 (or top_k 1): the argmax, lowest id on ties; done;
 *   3. temperature: logits / T;
 *   4. top_k: keep the k largest (0 = off);
 *   5. top_p: keep the smallest set of most likely tokens whose probability
 *      reaches p (a token is kept while the mass strictly above it is < p);
 *   6. min_p: drop tokens whose probability is below min_p x the largest;
 *   7. draw from the renormalised distribution with xoshiro256** seeded by
 *      splitmix64(seed): the same seed gives the same tokens. */
#ifndef ORIN_SAMPLER_H
#define ORIN_SAMPLER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orin_sampler_params {
    float temperature;        /* 0 = greedy */
    int32_t top_k;            /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repetition_penalty; /* 1 = off */
    float presence_penalty;   /* 0 = off */
    uint64_t seed;
} orin_sampler_params;

typedef struct orin_sampler orin_sampler;

/* NULL with orin_error_set() when out of memory or a parameter is out of range. */
orin_sampler *orin_sampler_create(const orin_sampler_params *p);
void orin_sampler_free(orin_sampler *s);

/* Picks the next token. `logits` [vocab] is used as scratch (overwritten);
 * history[0..n_history) are the tokens so far, for the penalties. Returns the
 * id, or -1 with orin_error_set() (out of memory, vocab < 1, all logits NaN). */
int32_t orin_sampler_sample(orin_sampler *s, float *logits, int32_t vocab, const int32_t *history,
                            int32_t n_history);

/* The probabilities the draw in step 7 uses, for tests: probs[vocab] receives
 * the final distribution (0 for removed tokens). Applies steps 1-6 to logits. */
int orin_sampler_distribution(orin_sampler *s, float *logits, int32_t vocab,
                              const int32_t *history, int32_t n_history, double *probs);

#ifdef __cplusplus
}
#endif
#endif
