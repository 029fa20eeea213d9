/* RoPE's frequencies, one definition for the core (the scaled tables a model
 * hands its rope calls: orin_rope_scaling in orin/ops.h) and for the rope ops
 * (the plain ones they compute from theta), so that every path rotates by
 * the same floats. */
#ifndef ORIN_ROPE_H
#define ORIN_ROPE_H

#ifdef __cplusplus
extern "C" {
#endif

struct orin_model_config;

/* theta ** (2j / hd) as transformers' base ** (arange(0, hd, 2).float() / hd):
 * the exponent in float32, the power in double rounded to float32 (glibc's
 * powf gives the same floats; torch's vectorised float32 pow parts from it by
 * an ulp at a pair or two of 64). Pair j's plain frequency is 1 over it. */
float orin_rope_power(float theta, int j, int hd);

/* RoPE's inverse frequencies inv_freq [head_dim / 2] and the factor that
 * multiplies cos and sin, for cfg's rope type, in float32 as transformers
 * computes them (so that the angles pos * inv_freq are its floats): the
 * default 1 / orin_rope_power; linear that over factor; yarn the blend of the
 * two by its ramp over [low, high]. Returns 0, or -1 with orin_error_set()
 * where a frequency leaves float32's range (keys at its extremes). */
int orin_rope_scaling_inv_freq(const struct orin_model_config *cfg, float *inv_freq,
                               float *attention_factor);

#ifdef __cplusplus
}
#endif
#endif
