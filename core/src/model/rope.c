/* RoPE's frequencies (orin/rope.h): the plain power every rope op uses, and
 * the inverse frequencies for config.json's rope type, in float32 step by step
 * as transformers 5.23's
 * modeling_rope_utils computes them, so that the angles pos * inv_freq the
 * rope ops form are its floats (at position 1000 one ulp of angle moves cos by
 * ~1e-4). Each tensor operation there rounds to float32 once; each line here
 * is one such operation (C11 without extensions: no contraction into FMAs).
 * The ramp's bounds are Python floats there: doubles here. */
#include "orin/rope.h"
#include "orin/error.h"
#include "orin/model_config.h"

#include <math.h>

#define PI 3.141592653589793 /* Python's math.pi */

float orin_rope_power(float theta, int j, int hd)
{
    float exponent = (float)(2 * j) / (float)hd;
    return (float)pow((double)theta, (double)exponent);
}

/* find_correction_dim: the dimension whose wavelength turns num_rotations
 * times over max_pos positions. */
static double correction_dim(double num_rotations, int dim, double base, double max_pos)
{
    return (dim * log(max_pos / (num_rotations * 2 * PI))) / (2 * log(base));
}

static void yarn_inv_freq(const orin_model_config *cfg, int dim, float *inv_freq)
{
    const orin_rope_config *r = &cfg->rope;
    double low = correction_dim(r->beta_fast, dim, cfg->rope_theta, r->original_max_pos);
    double high = correction_dim(r->beta_slow, dim, cfg->rope_theta, r->original_max_pos);
    if (r->truncate) {
        low = floor(low);
        high = ceil(high);
    }
    low = fmax(low, 0.0);
    high = fmin(high, (double)(dim - 1));
    if (low == high)
        high += 0.001; /* transformers' guard against a zero-width ramp */
    const float span = (float)(high - low), factor = (float)r->factor;
    for (int j = 0; j < dim / 2; j++) {
        float p = orin_rope_power((float)cfg->rope_theta, j, dim);
        float extrapolation = 1.0f / p;
        float scaled = factor * p;
        float interpolation = 1.0f / scaled;
        /* the ramp, clamped to [0, 1]; extrapolation's weight is 1 - ramp */
        float ramp = ((float)j - (float)low) / span;
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        float weight = 1.0f - ramp;
        float keep = 1.0f - weight;
        float a = interpolation * keep;
        float b = extrapolation * weight;
        inv_freq[j] = a + b;
    }
}

static void plain_inv_freq(const orin_model_config *cfg, int dim, float *inv_freq)
{
    for (int j = 0; j < dim / 2; j++) {
        float p = orin_rope_power((float)cfg->rope_theta, j, dim);
        inv_freq[j] = 1.0f / p;
        if (cfg->rope.type == ORIN_ROPE_LINEAR)
            inv_freq[j] = inv_freq[j] / (float)cfg->rope.factor;
    }
}

int orin_rope_scaling_inv_freq(const orin_model_config *cfg, float *inv_freq,
                               float *attention_factor)
{
    const int dim = cfg->head_dim;
    *attention_factor = 1.0f;
    if (cfg->rope.type == ORIN_ROPE_YARN) {
        yarn_inv_freq(cfg, dim, inv_freq);
        *attention_factor = (float)cfg->rope.attention_factor;
    } else {
        plain_inv_freq(cfg, dim, inv_freq);
    }
    /* extreme keys (a factor near float32's smallest, a theta near its
     * largest) can leave float32's range where transformers would compute
     * inf or NaN too */
    for (int j = 0; j < dim / 2; j++)
        if (!(inv_freq[j] >= 0.0f) || !isfinite(inv_freq[j]))
            return orin_error_set("RoPE frequency %d of %d is %g for rope_theta %g, factor %g: "
                                  "out of float32's range", j, dim / 2, (double)inv_freq[j],
                                  cfg->rope_theta, cfg->rope.factor);
    return 0;
}
