/* dtype conversions: f32 <-> f16 <-> bf16.
 *
 * Three kinds of truth, none of them our own conversion code:
 *  - edge values with bit patterns hard-coded from numpy 2.x (astype(np.float16))
 *    and torch 2.x (.to(torch.bfloat16)), checked by hand against IEEE 754;
 *  - every f16 and bf16 bit pattern decoded and compared with the value the
 *    format's definition gives (sign * mantissa * 2^exponent, computed in double);
 *  - a large sample of f32 values rounded by a slow reference: find the two
 *    neighbouring representable values and take the nearer, ties to the even
 *    bit pattern. */
#include "test_util.h"
#include "orin/tensor.h"
#include "orin/error.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* f32 input bits -> expected f16 bits; expected values from numpy
 * np.array([x], np.float32).astype(np.float16).view(np.uint16). */
static const struct {
    uint32_t in;
    uint16_t out;
    const char *what;
} f16_cases[] = {
    {0x477fe000, 0x7bff, "65504, the f16 maximum"},
    {0x477fefff, 0x7bff, "just below 65520 rounds down to the maximum"},
    {0x477ff000, 0x7c00, "65520, halfway to 2^16: ties to even = inf"},
    {0x47c35000, 0x7c00, "1e5 overflows to inf"},
    {0x7f7fffff, 0x7c00, "f32 max overflows to inf"},
    {0xff7fffff, 0xfc00, "-f32 max overflows to -inf"},
    {0x7f800000, 0x7c00, "inf"},
    {0xff800000, 0xfc00, "-inf"},
    {0x00000000, 0x0000, "+0"},
    {0x80000000, 0x8000, "-0 keeps its sign"},
    {0x3f800000, 0x3c00, "1"},
    {0xc0200000, 0xc100, "-2.5"},
    {0x3dcccccd, 0x2e66, "0.1"},
    {0x3f801000, 0x3c00, "1 + 2^-11: tie, to even (down)"},
    {0x3f803000, 0x3c02, "1 + 3*2^-11: tie, to even (up)"},
    {0x3f801001, 0x3c01, "just above the tie rounds up"},
    {0x38800000, 0x0400, "2^-14, the smallest normal"},
    {0x387fc000, 0x03ff, "1023*2^-24, the largest subnormal"},
    {0x387fe000, 0x0400, "1023.5*2^-24: tie, to even = smallest normal"},
    {0x387fdfff, 0x03ff, "just below it stays subnormal"},
    {0x33800000, 0x0001, "2^-24, the smallest subnormal"},
    {0x33000000, 0x0000, "2^-25: tie between 0 and 2^-24, to even = 0"},
    {0x33000001, 0x0001, "just above 2^-25 rounds up to 2^-24"},
    {0xb3000000, 0x8000, "-2^-25 rounds to -0"},
    {0x33c00000, 0x0002, "3*2^-25 = 1.5 units: tie, to even = 2 units"},
    {0x34200000, 0x0002, "5*2^-25 = 2.5 units: tie, to even = 2 units"},
    {0x00000001, 0x0000, "the smallest f32 subnormal underflows to 0"},
};

/* f32 bits -> bf16 bits; expected values from torch
 * torch.tensor([x]).to(torch.bfloat16).view(torch.int16) & 0xffff. */
static const struct {
    uint32_t in;
    uint16_t out;
    const char *what;
} bf16_cases[] = {
    {0x3f800000, 0x3f80, "1"},
    {0x3f808000, 0x3f80, "1 + 2^-8: tie, to even (down)"},
    {0x3f818000, 0x3f82, "1 + 3*2^-8: tie, to even (up)"},
    {0x3f808001, 0x3f81, "just above the tie rounds up"},
    {0x3dcccccd, 0x3dcd, "0.1"},
    {0xc0200000, 0xc020, "-2.5"},
    {0x7f7f0000, 0x7f7f, "the bf16 maximum"},
    {0x7f7f7fff, 0x7f7f, "just below halfway to 2^128 rounds down"},
    {0x7f7f8000, 0x7f80, "halfway above the maximum: ties to even = inf"},
    {0x7f7fffff, 0x7f80, "f32 max rounds to inf"},
    {0x7f800000, 0x7f80, "inf"},
    {0xff800000, 0xff80, "-inf"},
    {0x80000000, 0x8000, "-0"},
    {0x00012345, 0x0001, "an f32 subnormal stays a bf16 subnormal"},
    {0x00008000, 0x0000, "subnormal tie, to even (0)"},
    {0x00018000, 0x0002, "subnormal tie, to even (2)"},
    {0x00000001, 0x0000, "the smallest f32 subnormal rounds to 0"},
    {0x80400000, 0x8040, "a negative subnormal"},
};

/* f16 bits -> f32 bits, from numpy .view(np.float16).astype(np.float32). */
static const struct {
    uint16_t in;
    uint32_t out;
} f16_widen_cases[] = {
    {0x0001, 0x33800000}, {0x03ff, 0x387fc000}, {0x0400, 0x38800000},
    {0x7bff, 0x477fe000}, {0x7c00, 0x7f800000}, {0xfc00, 0xff800000},
    {0x8000, 0x80000000}, {0x3c00, 0x3f800000}, {0xc000, 0xc0000000},
    {0x3555, 0x3eaaa000},
};

static void test_edges(void)
{
    for (size_t i = 0; i < sizeof f16_cases / sizeof f16_cases[0]; i++) {
        uint16_t got = orin_f32_to_f16(f32_from_bits(f16_cases[i].in));
        CHECK(got == f16_cases[i].out, "f16 of %08x (%s): got %04x, want %04x",
              f16_cases[i].in, f16_cases[i].what, got, f16_cases[i].out);
    }
    for (size_t i = 0; i < sizeof bf16_cases / sizeof bf16_cases[0]; i++) {
        uint16_t got = orin_f32_to_bf16(f32_from_bits(bf16_cases[i].in));
        CHECK(got == bf16_cases[i].out, "bf16 of %08x (%s): got %04x, want %04x",
              bf16_cases[i].in, bf16_cases[i].what, got, bf16_cases[i].out);
    }
    for (size_t i = 0; i < sizeof f16_widen_cases / sizeof f16_widen_cases[0]; i++) {
        uint32_t got = f32_bits(orin_f16_to_f32(f16_widen_cases[i].in));
        CHECK(got == f16_widen_cases[i].out, "f32 of f16 %04x: got %08x, want %08x",
              f16_widen_cases[i].in, got, f16_widen_cases[i].out);
    }
}

static void test_nan(void)
{
    /* A quiet NaN, a signalling NaN (payload 1) and negative ones: each stays a
     * NaN of the same sign with the quiet bit set. */
    const uint32_t nans[] = {0x7fc00000, 0x7f800001, 0xffc00000, 0xff800001, 0x7fffffff};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = orin_f32_to_f16(f32_from_bits(nans[i]));
        CHECK((h & 0x7c00) == 0x7c00 && (h & 0x0200), "f16 of NaN %08x: %04x", nans[i], h);
        CHECK((h & 0x8000) == ((nans[i] >> 16) & 0x8000), "f16 NaN sign of %08x", nans[i]);
        uint16_t b = orin_f32_to_bf16(f32_from_bits(nans[i]));
        CHECK((b & 0x7f80) == 0x7f80 && (b & 0x0040), "bf16 of NaN %08x: %04x", nans[i], b);
        CHECK((b & 0x8000) == ((nans[i] >> 16) & 0x8000), "bf16 NaN sign of %08x", nans[i]);
    }
    CHECK(orin_f32_to_f16(f32_from_bits(0x7fc00000)) == 0x7e00, "canonical NaN -> 7e00");
    CHECK(orin_f32_to_bf16(f32_from_bits(0x7fc00000)) == 0x7fc0, "canonical NaN -> 7fc0");
    /* Signalling NaNs come back quiet when widened too. */
    uint32_t w = f32_bits(orin_f16_to_f32(0x7c01));
    CHECK((w & 0x7f800000) == 0x7f800000 && (w & 0x00400000), "f32 of f16 sNaN: %08x", w);
    w = f32_bits(orin_bf16_to_f32(0xff81));
    CHECK(w == 0xffc10000, "f32 of bf16 sNaN ff81: %08x", w);
}

/* The value an f16 bit pattern means, from the format's definition. */
static double f16_value(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v = exp ? ldexp(1024 + mant, exp - 25) : ldexp(mant, -24);
    return sign ? -v : v;
}

static void test_all_f16(void)
{
    int bad_value = 0, bad_trip = 0;
    for (uint32_t i = 0; i <= 0xffff; i++) {
        uint16_t h = (uint16_t)i;
        float f = orin_f16_to_f32(h);
        uint16_t back = orin_f32_to_f16(f);
        bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan) {
            /* Same sign and payload, made quiet. */
            bad_trip += !(isnan(f) && back == (h | 0x0200));
            continue;
        }
        if ((h & 0x7fff) == 0x7c00)
            bad_value += !(isinf(f) && (signbit(f) != 0) == (h >> 15));
        else
            bad_value += !((double)f == f16_value(h) && (signbit(f) != 0) == (h >> 15));
        bad_trip += back != h;
    }
    CHECK(bad_value == 0, "%d f16 patterns decode to the wrong value", bad_value);
    CHECK(bad_trip == 0, "%d f16 patterns do not survive f16 -> f32 -> f16", bad_trip);
}

static void test_all_bf16(void)
{
    int bad_value = 0, bad_trip = 0;
    for (uint32_t i = 0; i <= 0xffff; i++) {
        uint16_t b = (uint16_t)i;
        float f = orin_bf16_to_f32(b);
        uint16_t back = orin_f32_to_bf16(f);
        bool is_nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f);
        if (is_nan) {
            bad_trip += !(isnan(f) && back == (b | 0x0040));
            continue;
        }
        /* bf16 is by definition the top half of an f32. */
        bad_value += f32_bits(f) != (uint32_t)b << 16;
        bad_trip += back != b;
    }
    CHECK(bad_value == 0, "%d bf16 patterns decode to the wrong value", bad_value);
    CHECK(bad_trip == 0, "%d bf16 patterns do not survive bf16 -> f32 -> bf16", bad_trip);
}

/* Slow reference rounding of a finite, non-negative x to f16: the two
 * neighbouring patterns in 0..0x7c00 (0x7c00 counted as 2^16, which is where
 * IEEE rounding with an unbounded exponent would land before overflowing). */
static uint16_t ref_f16(double x)
{
    uint16_t lo = 0, hi = 0x7c00;
    double hi_v = 65536.0;
    if (x >= hi_v)
        return 0x7c00;
    while (hi - lo > 1) { /* invariant: value(lo) <= x < value(hi) */
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (f16_value(mid) <= x)
            lo = mid;
        else
            hi = mid, hi_v = f16_value(mid);
    }
    double dlo = x - f16_value(lo), dhi = hi_v - x;
    if (dlo < dhi)
        return lo;
    if (dhi < dlo)
        return hi;
    return (lo & 1) ? hi : lo;
}

static uint16_t ref_bf16(uint32_t bits)
{
    uint32_t mag = bits & 0x7fffffff;
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
    uint16_t lo = (uint16_t)(mag >> 16), hi = lo + 1;
    double x = f32_from_bits(mag);
    double vlo = f32_from_bits((uint32_t)lo << 16);
    /* hi may be 0x7f80 (inf): its rounding value is 2^128. */
    double vhi = hi == 0x7f80 ? ldexp(1, 128) : (double)f32_from_bits((uint32_t)hi << 16);
    double dlo = x - vlo, dhi = vhi - x;
    uint16_t r = dlo < dhi ? lo : dhi < dlo ? hi : (lo & 1) ? hi : lo;
    return sign | r;
}

static void test_rounding_sample(void)
{
    int bad16 = 0, badbf = 0;
    /* A prime stride walks every exponent and many mantissa bit patterns;
     * the extra offsets hit exact ties and their neighbours. */
    for (uint64_t base = 0; base < 0x7f800000u; base += 4099) {
        for (uint32_t off = 0; off < 3; off++) {
            uint32_t mag = (uint32_t)base;
            if (off == 1)
                mag = (mag & ~0x1fffu) | 0x1000u; /* an f16 normal-range tie */
            if (off == 2)
                mag = (mag & ~0xffffu) | 0x8000u; /* a bf16 tie */
            for (uint32_t sign = 0; sign < 2; sign++) {
                uint32_t bits = mag | (sign << 31);
                float f = f32_from_bits(bits);
                uint16_t want = ref_f16(fabs((double)f)) | (uint16_t)(sign << 15);
                bad16 += orin_f32_to_f16(f) != want;
                badbf += orin_f32_to_bf16(f) != ref_bf16(bits);
            }
        }
    }
    CHECK(bad16 == 0, "%d sampled f32 values round to the wrong f16", bad16);
    CHECK(badbf == 0, "%d sampled f32 values round to the wrong bf16", badbf);
}

static void test_convert_arrays(void)
{
    const float src[] = {1.0f, -2.5f, 65520.0f, 0x1p-25f, 0.1f};
    uint16_t h[5], b[5], hb[5];
    float back[5];

    CHECK(orin_convert(h, ORIN_F16, src, ORIN_F32, 5) == 0);
    CHECK(h[0] == 0x3c00 && h[1] == 0xc100 && h[2] == 0x7c00 && h[3] == 0 && h[4] == 0x2e66,
          "f32 -> f16 array");
    CHECK(orin_convert(b, ORIN_BF16, src, ORIN_F32, 5) == 0);
    CHECK(b[0] == 0x3f80 && b[1] == 0xc020 && b[4] == 0x3dcd, "f32 -> bf16 array");
    CHECK(orin_convert(back, ORIN_F32, h, ORIN_F16, 5) == 0);
    CHECK(back[0] == 1.0f && back[1] == -2.5f && isinf(back[2]), "f16 -> f32 array");
    /* f16 -> bf16 rounds once: 0.1 as f16 is 0x2e66 = 0.0999755859375, which
     * as bf16 (torch) is 0x3dcd. */
    CHECK(orin_convert(hb, ORIN_BF16, h, ORIN_F16, 5) == 0);
    CHECK(hb[0] == 0x3f80 && hb[1] == 0xc020 && hb[2] == 0x7f80 && hb[4] == 0x3dcd,
          "f16 -> bf16 array: %04x %04x %04x %04x", hb[0], hb[1], hb[2], hb[4]);
    /* bf16 -> f16: 1.0 (0x3f80) and 0x3dcd = 0.10009765625 -> f16 0x2e68 (numpy). */
    uint16_t bh[5];
    CHECK(orin_convert(bh, ORIN_F16, b, ORIN_BF16, 5) == 0);
    CHECK(bh[0] == 0x3c00 && bh[4] == 0x2e68, "bf16 -> f16 array: %04x %04x", bh[0], bh[4]);
    /* Same dtype copies; other pairs are refused with a message. */
    int32_t ia[3] = {1, 2, 3}, ib[3] = {0};
    CHECK(orin_convert(ib, ORIN_I32, ia, ORIN_I32, 3) == 0 && ib[2] == 3, "i32 copy");
    CHECK(orin_convert(ib, ORIN_I32, src, ORIN_F32, 3) == -1, "f32 -> i32 refused");
    CHECK(strstr(orin_error(), "f32 -> i32") != NULL, "message: %s", orin_error());
    CHECK(orin_convert(h, ORIN_F16, src, ORIN_F32, 0) == 0, "n = 0");
}

/* The array path widens f16/bf16 with loops of its own (vectorised blocks and a
 * scalar tail): every pattern must give the bits of the scalar conversions,
 * which test_all_f16/test_all_bf16 check against the formats' definitions. The
 * patterns start one element in and end mid-block, so that unaligned loads,
 * whole blocks and the tail all run. */
static void test_widen_arrays_all_patterns(void)
{
    enum { PATTERNS = 0x10000, SKEW = 1, TAIL = 5 };
    static uint16_t src[SKEW + PATTERNS + TAIL];
    static float dst[SKEW + PATTERNS + TAIL];
    for (uint32_t i = 0; i < SKEW + PATTERNS + TAIL; i++)
        src[i] = (uint16_t)(i - SKEW); /* wraps: the tail repeats 0..4 */

    const struct {
        orin_dtype dt;
        float (*scalar)(uint16_t);
        const char *name;
    } kinds[] = {{ORIN_F16, orin_f16_to_f32, "f16"}, {ORIN_BF16, orin_bf16_to_f32, "bf16"}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t n = PATTERNS + TAIL;
        CHECK(orin_convert(dst + SKEW, ORIN_F32, src + SKEW, kinds[k].dt, n) == 0);
        int bad = 0, first_bad = -1;
        for (size_t i = SKEW; i < SKEW + n; i++) {
            if (f32_bits(dst[i]) != f32_bits(kinds[k].scalar(src[i]))) {
                bad++;
                if (first_bad < 0)
                    first_bad = src[i];
            }
        }
        CHECK(bad == 0, "%s -> f32 array: %d patterns differ from the scalar conversion "
              "(first %04x)", kinds[k].name, bad, first_bad);
    }
}

int main(void)
{
    test_edges();
    test_nan();
    test_all_f16();
    test_all_bf16();
    test_rounding_sample();
    test_convert_arrays();
    test_widen_arrays_all_patterns();
    return test_finish();
}
