/* Host-side weight quantization: see orin/quant.h. */
#include "orin/quant.h"
#include "orin/cpu_util.h"
#include "orin/error.h"

#include <math.h>
#include <stdlib.h>

/* Rows per task handed to the op threads. */
#define QUANT_TASK_ROWS 16

int32_t orin_int8_group_size(int64_t in)
{
    return in % ORIN_INT8_GROUP == 0 ? ORIN_INT8_GROUP : (int32_t)in;
}

struct quant_job {
    const void *src;
    orin_dtype src_dt;
    int64_t rows, in;
    int32_t group;
    int8_t *q;
    uint16_t *scales;
    float *scratch;          /* `in` floats per worker */
};

/* One group of values: its f16 scale and its integers. Returns -1 (no error
 * set) when a value is not finite or the scale overflows f16. */
static int quantize_group(const float *w, int32_t n, int8_t *q, uint16_t *scale_out)
{
    float amax = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        if (!isfinite(w[i]))
            return -1;
        amax = fmaxf(amax, fabsf(w[i]));
    }
    uint16_t bits = orin_f32_to_f16(amax / 127.0f);
    float scale = orin_f16_to_f32(bits);
    if (isinf(scale))
        return -1;
    *scale_out = bits;
    for (int32_t i = 0; i < n; i++) {
        float v = scale > 0.0f ? rintf(w[i] / scale) : 0.0f;
        q[i] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
    }
    return 0;
}

static int quantize_rows(void *ctx, int worker, int64_t task)
{
    const struct quant_job *job = ctx;
    float *row = job->scratch + (size_t)worker * (size_t)job->in;
    int64_t groups = job->in / job->group, r0 = task * QUANT_TASK_ROWS;
    int64_t r1 = r0 + QUANT_TASK_ROWS < job->rows ? r0 + QUANT_TASK_ROWS : job->rows;
    for (int64_t r = r0; r < r1; r++) {
        orin_cpu_load_f32(row, orin_cpu_elem(job->src, job->src_dt, r * job->in), job->src_dt,
                          (size_t)job->in);
        for (int64_t g = 0; g < groups; g++) {
            if (quantize_group(row + g * job->group, job->group,
                               job->q + r * job->in + g * job->group,
                               job->scales + r * groups + g) != 0)
                return orin_error_set("row %lld: a weight that is not finite or too large for "
                                      "int8 with f16 scales", (long long)r);
        }
    }
    return 0;
}

int orin_quantize_int8(const void *src, orin_dtype src_dt, int64_t rows, int64_t in,
                       int32_t group, int threads, int8_t *q, uint16_t *scales)
{
    if (src_dt != ORIN_F32 && src_dt != ORIN_F16 && src_dt != ORIN_BF16)
        return orin_error_set("int8 quantization of %s weights: f32, f16 or bf16 only",
                              orin_dtype_name(src_dt));
    if (rows < 1 || in < 1 || group < 1 || in % group != 0)
        return orin_error_set("int8 quantization: %lld x %lld weights in groups of %d",
                              (long long)rows, (long long)in, group);
    if (threads <= 0 || threads > ORIN_CPU_MAX_THREADS)
        threads = orin_cpu_threads(NULL);
    int64_t tasks = (rows + QUANT_TASK_ROWS - 1) / QUANT_TASK_ROWS;
    int workers = tasks < threads ? (int)tasks : threads;
    struct quant_job job = {.src = src, .src_dt = src_dt, .rows = rows, .in = in,
                            .group = group, .q = q, .scales = scales};
    job.scratch = malloc((size_t)workers * (size_t)in * sizeof(float));
    if (!job.scratch)
        return orin_error_set("int8 quantization: out of memory for %lld floats",
                              (long long)workers * (long long)in);
    int rc = orin_cpu_parallel_for(workers, tasks, quantize_rows, &job);
    free(job.scratch);
    return rc;
}
