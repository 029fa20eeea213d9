/* Antialiased bicubic resampling of 8-bit RGB images, the same bytes as
 * torchvision's resize of a uint8 tensor (bicubic, antialias=True) on the
 * CPU. torch resizes uint8 images natively there, in fixed point, with the
 * scheme of Pillow's resampler (so that tensors and PIL images resize alike):
 *
 *   - separable: the horizontal pass first, into an 8-bit image, then the
 *     vertical pass; an axis whose size does not change is left alone.
 *   - per axis, in double: scale = in / out; the cubic (Keys, a = -0.5) is
 *     stretched by scale when shrinking (the antialias), so its support is
 *     2 * max(scale, 1). Output i is centred on scale * (i + 0.5); its taps
 *     start at max((int)(centre - support + 0.5), 0) and end before
 *     min((int)(centre + support + 0.5), in); tap j weighs
 *     cubic((j - centre + 0.5) / max(scale, 1)), the weights divided by their
 *     sum.
 *   - the weights become int16 at one precision p per axis: the largest
 *     p <= 22 for which (int)(0.5 + 2 * max weight * 2^p) stays below 2^15;
 *     a weight w is (int)(w * 2^p + 0.5) (- 0.5 when negative).
 *   - each output is (2^(p-1) + sum of sample * weight) >> p, clamped to
 *     0..255.
 *
 * Every step is reproduced with the same operations in the same order, so
 * that the double weights round to the same integers. */
#include "vision_internal.h"
#include "orin/cpu_util.h"
#include "orin/error.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define CUBIC_A (-0.5)
#define CUBIC_SUPPORT 2.0
#define MAX_PRECISION 22

/* One axis: for each output, its first tap, its number of taps and (kmax
 * apart) its int16 weights. */
typedef struct axis_plan {
    int32_t kmax;
    int32_t *first, *count;
    int16_t *weight;
    unsigned precision;
    bool sums_fit_int32; /* every output's sum, whatever the samples */
} axis_plan;

static double cubic(double x)
{
    x = fabs(x);
    if (x < 1.0)
        return ((CUBIC_A + 2) * x - (CUBIC_A + 3)) * x * x + 1;
    if (x < 2.0)
        return ((CUBIC_A * x - 5 * CUBIC_A) * x + 8 * CUBIC_A) * x - 4 * CUBIC_A;
    return 0.0;
}

/* The double weights of output i into w[0..kmax); returns their largest. */
static double tap_weights(int64_t i, int64_t in, double scale, double support, int32_t kmax,
                          double *w, int32_t *first, int32_t *count)
{
    double centre = scale * (i + 0.5);
    double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    int64_t lo = (int64_t)(centre - support + 0.5);
    int64_t hi = (int64_t)(centre + support + 0.5);
    if (lo < 0)
        lo = 0;
    if (hi > in)
        hi = in;
    /* Rounding can give one tap more than kmax: torch clips it. */
    int64_t n = hi - lo < 0 ? 0 : hi - lo > kmax ? kmax : hi - lo;
    double total = 0.0, max = 0.0;
    for (int64_t j = 0; j < n; j++) {
        w[j] = cubic((j + lo - centre + 0.5) * invscale);
        total += w[j];
    }
    for (int64_t j = 0; j < n && total != 0.0; j++) {
        w[j] /= total;
        if (w[j] > max)
            max = w[j];
    }
    for (int64_t j = n; j < kmax; j++)
        w[j] = 0.0;
    *first = (int32_t)lo;
    *count = (int32_t)n;
    return max;
}

static void plan_free(axis_plan *p)
{
    free(p->first);
    free(p->count);
    free(p->weight);
    memset(p, 0, sizeof *p);
}

/* Whether sums of 8-bit samples times these weights stay within int32, as
 * torch's int64 ones then do: the largest magnitude an output can reach is
 * 255 times its weights' absolute sum, plus the rounding term. (About 1.25e9
 * at most for these weights: they add up to 2^precision <= 2^22, their
 * magnitudes to a little more.) */
static bool sums_fit_int32(const axis_plan *p, int32_t out)
{
    for (int32_t i = 0; i < out; i++) {
        int64_t sum = (int64_t)1 << (p->precision - 1);
        for (int32_t j = 0; j < p->count[i]; j++)
            sum += 255 * (int64_t)abs(p->weight[(size_t)i * p->kmax + j]);
        if (sum > INT32_MAX)
            return false;
    }
    return true;
}

static int plan_axis(axis_plan *p, int32_t in, int32_t out)
{
    double scale = (double)in / out;
    double support = scale >= 1.0 ? CUBIC_SUPPORT * scale : CUBIC_SUPPORT;
    memset(p, 0, sizeof *p);
    p->kmax = (int32_t)ceil(support) * 2 + 1;
    size_t n = (size_t)out * (size_t)p->kmax;
    double *w = malloc(n * sizeof *w);
    p->first = malloc((size_t)out * sizeof *p->first);
    p->count = malloc((size_t)out * sizeof *p->count);
    p->weight = malloc(n * sizeof *p->weight);
    if (!w || !p->first || !p->count || !p->weight) {
        free(w);
        plan_free(p);
        return orin_error_set("image resize %d -> %d: out of memory", in, out);
    }
    double max = 0.0;
    for (int32_t i = 0; i < out; i++) {
        double m = tap_weights(i, in, scale, support, p->kmax, w + (size_t)i * p->kmax,
                               &p->first[i], &p->count[i]);
        if (m > max)
            max = m;
    }
    for (p->precision = 0; p->precision < MAX_PRECISION; p->precision++)
        if ((int)(0.5 + max * (1 << (p->precision + 1))) >= (1 << 15))
            break;
    for (size_t k = 0; k < n; k++) {
        double v = w[k] * (1 << p->precision);
        p->weight[k] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
    }
    free(w);
    p->sums_fit_int32 = sums_fit_int32(p, out);
    return 0;
}

static uint8_t clamp8(int64_t v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One output sample from `count` inputs `stride` bytes apart. */
static uint8_t tap(const uint8_t *src, size_t stride, const int16_t *w, int32_t count,
                   unsigned precision)
{
    int64_t acc = (int64_t)1 << (precision - 1);
    for (int32_t j = 0; j < count; j++)
        acc += (int64_t)src[(size_t)j * stride] * w[j];
    return clamp8(acc >> precision);
}

/* Output rows y0..y1 of the horizontal pass (each from the same input row):
 * the three channels of a pixel summed together, over the same taps. */
static void horizontal_rows(const axis_plan *p, const uint8_t *src, int32_t width, uint8_t *dst,
                            int32_t out_width, int32_t y0, int32_t y1)
{
    const int64_t bias = (int64_t)1 << (p->precision - 1);
    for (int32_t y = y0; y < y1; y++) {
        const uint8_t *row = src + (size_t)y * width * 3;
        uint8_t *o = dst + (size_t)y * out_width * 3;
        for (int32_t x = 0; x < out_width; x++, o += 3) {
            const int16_t *w = p->weight + (size_t)x * p->kmax;
            const uint8_t *in = row + (size_t)p->first[x] * 3;
            int64_t r = bias, g = bias, b = bias;
            for (int32_t j = 0; j < p->count[x]; j++, in += 3) {
                r += in[0] * w[j];
                g += in[1] * w[j];
                b += in[2] * w[j];
            }
            o[0] = clamp8(r >> p->precision);
            o[1] = clamp8(g >> p->precision);
            o[2] = clamp8(b >> p->precision);
        }
    }
}

/* Output rows y0..y1 of the vertical pass: a row is a weighted sum of input
 * rows, summed along the rows a chunk at a time (in int32, where the plan
 * allows it) rather than a sample at a time down the columns. A whole chunk
 * has a constant length, so that the compiler vectorises its loops at -O2. */
#define VERTICAL_CHUNK 256

static void sum_chunk(const uint8_t *restrict in, size_t stride, const int16_t *w, int32_t count,
                      unsigned precision, uint8_t *restrict out)
{
    int32_t acc[VERTICAL_CHUNK];
    for (size_t k = 0; k < VERTICAL_CHUNK; k++)
        acc[k] = (int32_t)1 << (precision - 1);
    for (int32_t j = 0; j < count; j++) {
        const uint8_t *restrict row = in + (size_t)j * stride;
        int32_t wj = w[j];
        for (size_t k = 0; k < VERTICAL_CHUNK; k++)
            acc[k] += row[k] * wj;
    }
    for (size_t k = 0; k < VERTICAL_CHUNK; k++)
        out[k] = clamp8(acc[k] >> precision);
}

static void vertical_rows(const axis_plan *p, const uint8_t *src, int32_t width, uint8_t *dst,
                          int32_t y0, int32_t y1)
{
    size_t stride = (size_t)width * 3, whole = stride / VERTICAL_CHUNK * VERTICAL_CHUNK;
    if (!p->sums_fit_int32)
        whole = 0;
    for (int32_t y = y0; y < y1; y++) {
        const int16_t *w = p->weight + (size_t)y * p->kmax;
        const uint8_t *col = src + (size_t)p->first[y] * stride;
        uint8_t *o = dst + (size_t)y * stride;
        for (size_t k = 0; k < whole; k += VERTICAL_CHUNK)
            sum_chunk(col + k, stride, w, p->count[y], p->precision, o + k);
        for (size_t k = whole; k < stride; k++)
            o[k] = tap(col + k, stride, w, p->count[y], p->precision);
    }
}

/* One pass over the host's cores: every output row depends on the input
 * alone, so rows in blocks of PASS_ROWS are independent tasks, and the bytes
 * are those of one thread. (Resizing a 2,000 x 1,500 photo took 70 ms on
 * one core.) */
#define PASS_ROWS 16

typedef struct pass_job {
    const axis_plan *p;
    const uint8_t *src;
    uint8_t *dst;
    int32_t width, out_width, rows; /* vertical: width is the row's, out_width unused */
    bool vertical;
} pass_job;

static int pass_block(void *ctx, int worker, int64_t block)
{
    const pass_job *j = ctx;
    int32_t y0 = (int32_t)block * PASS_ROWS;
    int32_t y1 = j->rows - y0 < PASS_ROWS ? j->rows : y0 + PASS_ROWS;
    (void)worker;
    if (j->vertical)
        vertical_rows(j->p, j->src, j->width, j->dst, y0, y1);
    else
        horizontal_rows(j->p, j->src, j->width, j->dst, j->out_width, y0, y1);
    return 0;
}

static void run_pass(const pass_job *j)
{
    (void)orin_cpu_parallel_for(orin_cpu_threads(NULL), (j->rows + PASS_ROWS - 1) / PASS_ROWS,
                                pass_block, (void *)j);
}

static void pass_horizontal(const axis_plan *p, const uint8_t *src, int32_t width, int32_t height,
                            uint8_t *dst, int32_t out_width)
{
    run_pass(&(pass_job){.p = p, .src = src, .dst = dst, .width = width,
                         .out_width = out_width, .rows = height});
}

static void pass_vertical(const axis_plan *p, const uint8_t *src, int32_t width, uint8_t *dst,
                          int32_t out_height)
{
    run_pass(&(pass_job){.p = p, .src = src, .dst = dst, .width = width, .rows = out_height,
                         .vertical = true});
}

int vision_resize_bicubic(const uint8_t *src, int32_t width, int32_t height, uint8_t *out,
                          int32_t out_width, int32_t out_height)
{
    axis_plan ph = {0}, pv = {0};
    uint8_t *mid = NULL;
    int rc = -1;
    if (width == out_width && height == out_height) {
        memcpy(out, src, (size_t)width * height * 3);
        return 0;
    }
    if (width != out_width && plan_axis(&ph, width, out_width))
        goto done;
    if (height != out_height && plan_axis(&pv, height, out_height))
        goto done;
    /* Both axes: the horizontal pass goes to an intermediate image. */
    if (width != out_width && height != out_height) {
        mid = vision_alloc((size_t)out_width * height * 3);
        if (!mid) {
            orin_error_set("image resize %dx%d -> %dx%d: out of memory", width, height, out_width,
                           out_height);
            goto done;
        }
    }
    if (width != out_width)
        pass_horizontal(&ph, src, width, height, mid ? mid : out, out_width);
    if (height != out_height)
        pass_vertical(&pv, mid ? mid : src, out_width, out, out_height);
    rc = 0;
done:
    free(mid);
    plan_free(&ph);
    plan_free(&pv);
    return rc;
}
