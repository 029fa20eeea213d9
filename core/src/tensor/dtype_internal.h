/* Branch-free widening of 8 f16 or bf16 values to f32 in vector registers: the
 * blocks behind orin_convert's f16/bf16 -> f32 loop and orin_cpu_dot. Each lane
 * gives the same bits as orin_f16_to_f32 / orin_bf16_to_f32, whatever the FPU's
 * rounding mode or flush-to-zero (the one float product is exact and normal). */
#ifndef ORIN_DTYPE_INTERNAL_H
#define ORIN_DTYPE_INTERNAL_H

#include <stdint.h>
#include <string.h>

#define F32_EXP_MASK 0x7f800000u
#define F32_MANT_MASK 0x007fffffu
#define F32_QUIET_BIT 0x00400000u

#define ORIN_WIDEN_BLOCK 8

/* Loops built on these blocks are compiled twice on x86-64, for the baseline
 * (SSE2: 4 lanes) and for AVX2 (8 lanes, ORIN_TARGET_AVX2), and each call takes
 * the one the CPU runs (orin_cpu_avx2). Only the vector width differs: both use
 * the same operations in the same order (ISO C mode leaves fused multiply-adds
 * off), so results do not depend on the machine. (Not target_clones: its ifunc
 * resolvers run while the library is relocated, before a sanitizer runtime such
 * as ThreadSanitizer's is up, and crash there.) */
#if defined(__x86_64__) && defined(__GNUC__)
#define ORIN_AVX2_PATH 1
#define ORIN_TARGET_AVX2 __attribute__((target("avx2")))
/* True when the CPU has AVX2 and the environment does not set ORIN_CPU_NO_AVX2
 * (to a value other than 0): the tests run the baseline path that way too.
 * Decided on the first call (cpu_util.c). */
int orin_cpu_avx2(void);
#else
#define ORIN_AVX2_PATH 0
#endif

/* Eight lanes as GCC/clang vector types: on the baseline they become two SSE2
 * registers each, in an AVX2 clone one register; either way the lanes stay in
 * registers (an 8-element array bounced through the stack instead, and its
 * stores and wider reloads stalled the AVX2 clone). The helpers are always
 * inlined and hand vectors back through pointers: a 32-byte vector passed by
 * value between code built for different targets has no agreed ABI. */
typedef uint16_t orin_v8u16 __attribute__((vector_size(16)));
typedef uint32_t orin_v8u32 __attribute__((vector_size(32)));
typedef int32_t orin_v8i32 __attribute__((vector_size(32)));
typedef float orin_v8f32 __attribute__((vector_size(32)));

#define ORIN_WIDEN_INLINE inline __attribute__((always_inline))

static ORIN_WIDEN_INLINE void orin_load_v8u16(orin_v8u32 *out, const uint16_t *src)
{
    orin_v8u16 h;
    memcpy(&h, src, sizeof h);
    *out = __builtin_convertvector(h, orin_v8u32);
}

/* bf16 is the top half of an f32; a NaN is made quiet. (A vector comparison
 * gives all-ones lanes where true.) */
static ORIN_WIDEN_INLINE void orin_widen_bf16_v8(orin_v8f32 *out, const uint16_t *src)
{
    orin_v8u32 x;
    orin_load_v8u16(&x, src);
    x <<= 16;
    orin_v8u32 is_nan = (orin_v8u32)((x & 0x7fffffffu) > F32_EXP_MASK);
    *out = (orin_v8f32)(x | (is_nan & F32_QUIET_BIT));
}

/* The exponent and mantissa move up 13 bits and the bias from 15 to 127; the two
 * edge exponents are selected with masks rather than branched on: 31 (inf/NaN)
 * gets the f32 all-ones exponent and a quiet bit for NaN, 0 (zero and
 * subnormals) is exactly mant * 2^-24, which an int-to-float conversion and one
 * product give. */
static ORIN_WIDEN_INLINE void orin_widen_f16_v8(orin_v8f32 *out, const uint16_t *src)
{
    const uint32_t rebias = (127u - 15u) << 23, exp_field = 0x1fu << 23;
    orin_v8u32 h;
    orin_load_v8u16(&h, src);
    orin_v8u32 sign = (h & 0x8000u) << 16, mag = (h & 0x7fffu) << 13;
    orin_v8u32 exp = mag & exp_field;
    orin_v8u32 normal = mag + rebias;
    orin_v8u32 is_nan_payload = (orin_v8u32)((mag & F32_MANT_MASK) != 0);
    orin_v8u32 special = (normal + rebias) | (is_nan_payload & F32_QUIET_BIT);
    orin_v8f32 small_value =
        __builtin_convertvector((orin_v8i32)(mag >> 13), orin_v8f32) * 0x1p-24f;
    orin_v8u32 small = (orin_v8u32)small_value;
    orin_v8u32 is_special = (orin_v8u32)(exp == exp_field), is_small = (orin_v8u32)(exp == 0);
    *out = (orin_v8f32)(sign | (special & is_special) | (small & is_small) |
                        (normal & ~(is_special | is_small)));
}

static ORIN_WIDEN_INLINE void orin_widen_bf16_block(float *dst, const uint16_t *src)
{
    orin_v8f32 v;
    orin_widen_bf16_v8(&v, src);
    memcpy(dst, &v, sizeof v);
}

static ORIN_WIDEN_INLINE void orin_widen_f16_block(float *dst, const uint16_t *src)
{
    orin_v8f32 v;
    orin_widen_f16_v8(&v, src);
    memcpy(dst, &v, sizeof v);
}

#endif
