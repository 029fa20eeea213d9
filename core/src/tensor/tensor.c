/* Tensors: dtype names and sizes, shapes, and the f32/f16/bf16 conversions.
 *
 * The conversions work on the bit patterns with integer arithmetic only, so that
 * the result does not depend on the FPU's rounding mode or on flush-to-zero. */
#include "orin/tensor.h"
#include "orin/error.h"
#include "dtype_internal.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_info[ORIN_DTYPE_COUNT] = {
    [ORIN_F32] = {"f32", 4},
    [ORIN_F16] = {"f16", 2},
    [ORIN_BF16] = {"bf16", 2},
    [ORIN_I32] = {"i32", 4},
    [ORIN_I8] = {"i8", 1},
    [ORIN_U8] = {"u8", 1},
};

/* The longer spellings an INI file or a config.json may use. */
static const struct {
    const char *name;
    orin_dtype dtype;
} dtype_aliases[] = {
    {"fp32", ORIN_F32},     {"float32", ORIN_F32}, {"fp16", ORIN_F16},
    {"float16", ORIN_F16},  {"bfloat16", ORIN_BF16},
};

static bool dtype_valid(orin_dtype dt)
{
    return (int)dt >= 0 && dt < ORIN_DTYPE_COUNT;
}

const char *orin_dtype_name(orin_dtype dt)
{
    return dtype_valid(dt) ? dtype_info[dt].name : "?";
}

int orin_dtype_from_name(const char *name, orin_dtype *out)
{
    if (!name)
        return -1;
    for (int i = 0; i < ORIN_DTYPE_COUNT; i++) {
        if (strcmp(name, dtype_info[i].name) == 0) {
            if (out)
                *out = (orin_dtype)i;
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++) {
        if (strcmp(name, dtype_aliases[i].name) == 0) {
            if (out)
                *out = dtype_aliases[i].dtype;
            return 0;
        }
    }
    return -1;
}

size_t orin_dtype_size(orin_dtype dt)
{
    return dtype_valid(dt) ? dtype_info[dt].size : 0;
}

const char *orin_device_kind_name(orin_device_kind kind)
{
    switch (kind) {
    case ORIN_DEVICE_CPU:
        return "cpu";
    case ORIN_DEVICE_CUDA:
        return "cuda";
    default:
        return "?";
    }
}

orin_tensor orin_tensor_make(void *data, orin_dtype dt, orin_device_kind dev, int ndim,
                             const int64_t *dims)
{
    orin_tensor t = {.data = data, .dtype = dt, .device = dev, .ndim = ndim};

    /* No way to return an error here: a bad rank gives a tensor with no data,
     * which every op rejects, and the reason in orin_error(). */
    if (ndim < 0 || ndim > ORIN_MAX_DIMS || (ndim > 0 && !dims)) {
        orin_error_set("tensor: rank %d is not in 0..%d", ndim, ORIN_MAX_DIMS);
        t.data = NULL;
        t.ndim = 0;
        return t;
    }
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t.shape[i] = dims[i];
        t.stride[i] = stride;
        stride *= dims[i];
    }
    return t;
}

int64_t orin_tensor_numel(const orin_tensor *t)
{
    if (!t || t->ndim < 0 || t->ndim > ORIN_MAX_DIMS)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

size_t orin_tensor_nbytes(const orin_tensor *t)
{
    int64_t n = orin_tensor_numel(t);
    return n > 0 ? (size_t)n * orin_dtype_size(t->dtype) : 0;
}

/* Row-major with no gaps. A dimension of size 1 may carry any stride: it is
 * never stepped over. */
const char *orin_shape_str(char *buf, size_t cap, int ndim, const int64_t *dims)
{
    if (!cap)
        return buf;
    size_t off = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (off < cap)
        snprintf(buf + off, cap - off, "]");
    return buf;
}

bool orin_tensor_is_contiguous(const orin_tensor *t)
{
    if (!t || t->ndim < 0 || t->ndim > ORIN_MAX_DIMS)
        return false;
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != expected)
            return false;
        expected *= t->shape[i];
    }
    return true;
}

/* ---- scalar conversions ---- */

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Shifts `value` right by `shift` (1..31) rounding to nearest, ties to even. */
static uint32_t shift_round_even(uint32_t value, unsigned shift)
{
    uint32_t kept = value >> shift;
    uint32_t rest = value & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1)))
        kept++;
    return kept;
}

uint16_t orin_f32_to_f16(float f)
{
    uint32_t x = float_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t mag = x & 0x7fffffffu;

    if (mag > F32_EXP_MASK) /* NaN: keep the top payload bits, set the quiet bit */
        return sign | 0x7e00u | (uint16_t)((mag & F32_MANT_MASK) >> 13);
    /* 65520 = 0x477ff000 lies halfway between 65504 (odd mantissa) and 2^16:
     * it and everything above round to inf, as does inf itself. */
    if (mag >= 0x477ff000u)
        return sign | 0x7c00u;
    if (mag >= 0x38800000u) { /* >= 2^-14: a normal f16 */
        /* Rebias the exponent (127 -> 15) in place and round the mantissa away;
         * a mantissa carry moves into the exponent, which is still right. */
        uint32_t rebiased = mag - ((127u - 15u) << 23);
        return sign | (uint16_t)shift_round_even(rebiased, 13);
    }
    /* 2^-25 is halfway between 0 and the smallest subnormal 2^-24 (odd): ties
     * go to 0, so everything up to and including it is a signed zero. */
    if (mag <= 0x33000000u)
        return sign;
    /* A subnormal f16: the value in units of 2^-24 is mant * 2^(exp - 126),
     * exp in 102..112 here, so the shift is 14..24. The largest values round up
     * to 0x0400, the smallest normal, which is the right bit pattern. */
    uint32_t exp = mag >> 23;
    uint32_t mant = (mag & F32_MANT_MASK) | 0x00800000u;
    return sign | (uint16_t)shift_round_even(mant, 126u - exp);
}

float orin_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) /* inf, or NaN made quiet with its payload kept */
        return bits_float(sign | F32_EXP_MASK | (mant << 13) | (mant ? F32_QUIET_BIT : 0));
    if (exp != 0)
        return bits_float(sign | ((exp + 127u - 15u) << 23) | (mant << 13));
    if (mant == 0)
        return bits_float(sign);
    /* Subnormal: mant * 2^-24. Normalise so that the leading 1 is bit 10. */
    int e = 127 - 15 + 1;
    while (!(mant & 0x400u)) {
        mant <<= 1;
        e--;
    }
    return bits_float(sign | ((uint32_t)e << 23) | ((mant & 0x3ffu) << 13));
}

uint16_t orin_f32_to_bf16(float f)
{
    uint32_t x = float_bits(f);

    if ((x & 0x7fffffffu) > F32_EXP_MASK)
        return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN, top payload kept */
    /* Rounding the low half away works across the whole range: a carry moves
     * into the exponent, values from halfway above the bf16 maximum reach the
     * inf pattern, and f32 subnormals become bf16 subnormals. */
    return (uint16_t)shift_round_even(x, 16);
}

float orin_bf16_to_f32(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    if ((x & 0x7fffffffu) > F32_EXP_MASK)
        x |= F32_QUIET_BIT;
    return bits_float(x);
}

/* ---- array conversion ---- */

static bool is_float_dtype(orin_dtype dt)
{
    return dt == ORIN_F32 || dt == ORIN_F16 || dt == ORIN_BF16;
}

static float load_float(const void *src, orin_dtype dt, size_t i)
{
    switch (dt) {
    case ORIN_F16:
        return orin_f16_to_f32(((const uint16_t *)src)[i]);
    case ORIN_BF16:
        return orin_bf16_to_f32(((const uint16_t *)src)[i]);
    default:
        return ((const float *)src)[i];
    }
}

static void store_float(void *dst, orin_dtype dt, size_t i, float v)
{
    switch (dt) {
    case ORIN_F16:
        ((uint16_t *)dst)[i] = orin_f32_to_f16(v);
        break;
    case ORIN_BF16:
        ((uint16_t *)dst)[i] = orin_f32_to_bf16(v);
        break;
    default:
        ((float *)dst)[i] = v;
        break;
    }
}

/* Widening f16/bf16 arrays is the inner loop of the CPU's f16/bf16 prefill
 * matmul, so it gets a loop of its own, built on the branch-free blocks of
 * dtype_internal.h. Each element gives the same bits as orin_f16_to_f32 /
 * orin_bf16_to_f32 (test_dtype checks all 65536 patterns of both). */
static ORIN_WIDEN_INLINE void widen_any(float *restrict dst, const uint16_t *restrict src,
                                         orin_dtype src_dt, size_t n)
{
    size_t i = 0;
    if (src_dt == ORIN_BF16) {
        for (; i + ORIN_WIDEN_BLOCK <= n; i += ORIN_WIDEN_BLOCK)
            orin_widen_bf16_block(dst + i, src + i);
    } else {
        for (; i + ORIN_WIDEN_BLOCK <= n; i += ORIN_WIDEN_BLOCK)
            orin_widen_f16_block(dst + i, src + i);
    }
    for (; i < n; i++)
        dst[i] = load_float(src, src_dt, i);
}

#if ORIN_AVX2_PATH
ORIN_TARGET_AVX2 static void widen_avx2(float *restrict dst, const uint16_t *restrict src,
                                        orin_dtype src_dt, size_t n)
{
    widen_any(dst, src, src_dt, n);
}
#endif

static void widen_to_f32(float *restrict dst, const uint16_t *restrict src, orin_dtype src_dt,
                         size_t n)
{
#if ORIN_AVX2_PATH
    if (orin_cpu_avx2()) {
        widen_avx2(dst, src, src_dt, n);
        return;
    }
#endif
    widen_any(dst, src, src_dt, n);
}

int orin_convert(void *dst, orin_dtype dst_dt, const void *src, orin_dtype src_dt, size_t n)
{
    if (!dtype_valid(dst_dt) || !dtype_valid(src_dt))
        return orin_error_set("convert: invalid dtype (%d -> %d)", (int)src_dt, (int)dst_dt);
    if (n && (!dst || !src))
        return orin_error_set("convert: NULL buffer");
    if (src_dt == dst_dt) {
        memmove(dst, src, n * orin_dtype_size(src_dt));
        return 0;
    }
    if (!is_float_dtype(src_dt) || !is_float_dtype(dst_dt))
        return orin_error_set("convert: unsupported pair %s -> %s", orin_dtype_name(src_dt),
                              orin_dtype_name(dst_dt));
    if (dst_dt == ORIN_F32) { /* from f16 or bf16 */
        widen_to_f32(dst, src, src_dt, n);
        return 0;
    }
    /* f16 and bf16 widen to f32 exactly, so going through f32 rounds once. */
    for (size_t i = 0; i < n; i++)
        store_float(dst, dst_dt, i, load_float(src, src_dt, i));
    return 0;
}
