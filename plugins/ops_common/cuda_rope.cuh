// RoPE's arithmetic on CUDA, shared by the rope op (cuda.cu) and the fused
// rope_kv_write (cuda_fused.cu), so that both give bit for bit what the CPU's
// rope gives (cpu.c: rope_inv_freq, rope_row): at positions of thousands one
// ulp of angle moves cos by 1e-4, so every rounding is the CPU's.
#ifndef ORIN_OPS_COMMON_CUDA_ROPE_CUH
#define ORIN_OPS_COMMON_CUDA_ROPE_CUH

#include "orin/cuda_util.cuh"
#include "orin/ops.h"
#include "orin/rope.h"

#include <math.h>

// The inverse frequencies of the first ROPE_TABLE pairs travel in the kernel's
// parameters (computed on the host with glibc's pow, as the CPU does, or the
// call's scaled ones), with the factor cos and sin are multiplied by (1: none);
// pairs past them (head_dim > 512, which no Qwen has) are computed on the
// device, unscaled only.
#define ROPE_TABLE 256

typedef struct rope_table {
    float inv_freq[ROPE_TABLE];
    float factor;
} rope_table;

// cpu.c's rope_inv_freq, on the host: 1 over orin_rope_power (orin/rope.h),
// in f32; or the call's scaling (orin_rope_scaling), whose table must cover
// every pair: false where it cannot.
static inline bool rope_table_fill(rope_table *t, int half, int hd, float theta,
                                   const orin_rope_scaling *scaling)
{
    t->factor = 1.0f;
    if (scaling->inv_freq) {
        if (half > ROPE_TABLE)
            return false;
        for (int j = 0; j < half; j++)
            t->inv_freq[j] = scaling->inv_freq[j];
        t->factor = scaling->attention_factor;
        return true;
    }
    for (int j = 0; j < half && j < ROPE_TABLE; j++)
        t->inv_freq[j] = 1.0f / orin_rope_power(theta, j, hd);
    return true;
}

// The same on the device, for pairs past the table: CUDA's double pow is
// within 2 ulp of glibc's, so the f32 result is the same but for a double
// landing within 2 ulp of an f32 rounding boundary.
__device__ __forceinline__ float rope_inv_freq_at(int j, int hd, float theta)
{
    float exponent = __fdiv_rn((float)(2 * j), (float)hd);
    float power = (float)pow((double)theta, (double)exponent);
    return __fdiv_rn(1.0f, power);
}

// cos and sin of pair j's angle at `pos`: angle = (float)pos * inv_freq[j], an
// f32 product; cos and sin of it in double, rounded to f32, then times the
// table's factor (an f32 product, as transformers scales them; times 1 they
// stay as they are). A negative position (device memory: the host cannot
// check it) gives NaN, so the row shows it.
__device__ __forceinline__ void rope_cos_sin(int32_t pos, int j, int hd, float theta,
                                             const rope_table &table, float *c, float *s)
{
    float inv = j < ROPE_TABLE ? table.inv_freq[j] : rope_inv_freq_at(j, hd, theta);
    float angle = __fmul_rn((float)pos, inv);
    double sd, cd;
    sincos((double)angle, &sd, &cd);
    *c = pos >= 0 ? __fmul_rn((float)cd, table.factor) : __int_as_float(0x7fc00000);
    *s = pos >= 0 ? __fmul_rn((float)sd, table.factor) : __int_as_float(0x7fc00000);
}

// x1' = x1 c - x2 s, x2' = x2 c + x1 s, each product rounded to f32 first
// (__fmul_rn: never fused into an FMA), as cpu.c's rope_row.
__device__ __forceinline__ void rope_rotate(float x1, float x2, float c, float s, float *y1,
                                            float *y2)
{
    *y1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    *y2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

#endif
