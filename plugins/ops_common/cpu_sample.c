/* sample.candidates on the CPU: the reference (see orin/ops.h for the
 * contract, sample.h for what both implementations share).
 *
 * The steps are the host sampler's (core/src/model/sampler.c), written again
 * here over the op's tensors: widen the logits to f32, apply the penalties
 * once per distinct history token, find the top_k-th largest with a size-k
 * min-heap, then collect every logit >= it and sort those by value
 * (descending), ties by lower id. */
#include "sample.h"

#include "orin/cpu_util.h"
#include "orin/error.h"
#include "orin/op_check.h"
#include "orin/sampler.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A candidate as the op writes it. */
struct sample_entry {
    float value;
    int32_t id;
};

/* ---- checks, shared with cuda_sample.cu ---- */

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

int sample_candidates_check(const char *label, const orin_exec *ex,
                            const orin_sample_candidates_args *a, orin_device_kind device,
                            orin_dtype dt, size_t workspace_need)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "logits", &a->logits, device, dt, 1, 1) ||
        orin_check_tensor(label, "history", &a->history, device, ORIN_I32, 1, 1) ||
        orin_check_tensor(label, "n_history", &a->n_history, device, ORIN_I32, 1, 1) ||
        orin_check_dim(label, "n_history", &a->n_history, 0, 1) ||
        orin_check_tensor(label, "values", &a->values, device, ORIN_F32, 1, 1) ||
        orin_check_tensor(label, "ids", &a->ids, device, ORIN_I32, 1, 1) ||
        orin_check_dim(label, "ids", &a->ids, 0, a->values.shape[0]) ||
        orin_check_tensor(label, "count", &a->count, device, ORIN_I32, 1, 1) ||
        orin_check_dim(label, "count", &a->count, 0, 1))
        return -1;
    const char *out_names[3] = {"values", "ids", "count"};
    const orin_tensor *outs[3] = {&a->values, &a->ids, &a->count};
    const char *in_names[3] = {"logits", "history", "n_history"};
    const orin_tensor *ins[3] = {&a->logits, &a->history, &a->n_history};
    for (int o = 0; o < 3; o++) {
        for (int i = 0; i < 3; i++)
            if (orin_check_alias(label, out_names[o], outs[o], in_names[i], ins[i], false))
                return -1;
        for (int p = o + 1; p < 3; p++)
            if (orin_check_alias(label, out_names[o], outs[o], out_names[p], outs[p], false))
                return -1;
    }
    int64_t vocab = a->logits.shape[0], max = a->values.shape[0];
    if (vocab > INT32_MAX)
        return orin_error_set("%s: logits: %lld tokens do not fit an i32 id", label,
                              (long long)vocab);
    if (max >= INT32_MAX)
        return orin_error_set("%s: values: %lld candidates: max + 1 does not fit the i32 count",
                              label, (long long)max);
    if (a->top_k < 1 || a->top_k > max)
        return orin_error_set("%s: top_k %d is not in 1..%lld (the length of values)", label,
                              a->top_k, (long long)max);
    if (!(a->repetition_penalty > 0.0f) || isinf(a->repetition_penalty))
        return orin_error_set("%s: repetition_penalty %g must be > 0 and finite", label,
                              (double)a->repetition_penalty);
    if (!isfinite(a->presence_penalty))
        return orin_error_set("%s: presence_penalty %g must be finite", label,
                              (double)a->presence_penalty);
    if (!ex->workspace || ex->workspace_size < workspace_need || ((uintptr_t)ex->workspace & 7))
        return orin_error_set("%s: workspace: %zu bytes at %p, needs %zu, 8-byte aligned", label,
                              ex->workspace_size, ex->workspace, workspace_need);
    return 0;
}

/* ---- the reference ---- */

/* Workspace: the penalised logits [V] f32, their marks [V] bytes, the heap
 * [top_k <= max] f32, the candidates [max] entries. */
size_t cpu_sample_candidates_workspace_size(const void *args)
{
    const orin_sample_candidates_args *a = args;
    if (!a || a->logits.ndim < 1 || a->values.ndim < 1 || a->logits.shape[0] < 0 ||
        a->values.shape[0] < 0)
        return 0;
    size_t vocab = (size_t)a->logits.shape[0], max = (size_t)a->values.shape[0];
    return align8(vocab * sizeof(float)) + align8(vocab) + align8(max * sizeof(float)) +
           max * sizeof(struct sample_entry);
}

/* Min-heap of floats: h[0] is the smallest. */
static void heap_down(float *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, top = i;
        if (l < n && h[l] < h[top])
            top = l;
        if (r < n && h[r] < h[top])
            top = r;
        if (top == i)
            return;
        float t = h[i];
        h[i] = h[top];
        h[top] = t;
        i = top;
    }
}

static void heap_up(float *h, int32_t i)
{
    while (i > 0 && h[i] < h[(i - 1) / 2]) {
        float t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* The k-th largest of x[0..vocab), NaN skipped, into *kth; false when fewer
 * than k are numbers (then every number is a candidate). */
static bool kth_largest(const float *x, int64_t vocab, int32_t k, float *heap, float *kth)
{
    int32_t n = 0;
    for (int64_t i = 0; i < vocab; i++) {
        if (isnan(x[i]))
            continue;
        if (n < k) {
            heap[n] = x[i];
            heap_up(heap, n++);
        } else if (x[i] > heap[0]) {
            heap[0] = x[i];
            heap_down(heap, n, 0);
        }
    }
    *kth = heap[0];
    return n == k;
}

/* Descending value, ties (-0 and +0 too) by lower id. */
static int entry_order(const void *pa, const void *pb)
{
    const struct sample_entry *a = pa, *b = pb;
    if (a->value != b->value)
        return a->value < b->value ? 1 : -1;
    return (a->id > b->id) - (a->id < b->id);
}

int cpu_sample_candidates(const orin_exec *ex, const orin_sample_candidates_args *a,
                          orin_dtype dt)
{
    const char *label = "sample.candidates (common)";
    if (sample_candidates_check(label, ex, a, ORIN_DEVICE_CPU, dt,
                                cpu_sample_candidates_workspace_size(a)))
        return -1;
    int64_t vocab = a->logits.shape[0], cap = a->history.shape[0];
    int32_t max = (int32_t)a->values.shape[0], k = a->top_k;
    int32_t n_history = *(const int32_t *)a->n_history.data;
    if (n_history < 0 || n_history > cap)
        return orin_error_set("%s: n_history %d is outside 0..%lld (the length of history)",
                              label, n_history, (long long)cap);

    char *ws = ex->workspace;
    float *x = (float *)ws;
    uint8_t *seen = (uint8_t *)(ws + align8((size_t)vocab * sizeof(float)));
    float *heap = (float *)((char *)seen + align8((size_t)vocab));
    struct sample_entry *picked =
        (struct sample_entry *)((char *)heap + align8((size_t)max * sizeof(float)));

    orin_cpu_load_f32(x, a->logits.data, dt, (size_t)vocab);
    memset(seen, 0, (size_t)vocab);
    /* the sampler's own steps 1 and 2 (orin/sampler.h) */
    orin_sampler_penalize(x, (int32_t)vocab, a->history.data, n_history, a->repetition_penalty,
                          a->presence_penalty, seen);
    float kth = 0.0f;
    bool cut = kth_largest(x, vocab, k, heap, &kth);

    int64_t count = 0;
    for (int64_t i = 0; i < vocab; i++) {
        if (isnan(x[i]) || (cut && !(x[i] >= kth)))
            continue;
        if (count < max)
            picked[count] = (struct sample_entry){.value = x[i], .id = (int32_t)i};
        count++;
    }
    int32_t *count_out = a->count.data;
    if (count > max) {
        *count_out = max + 1; /* the ties do not fit: nothing else written */
        return 0;
    }
    qsort(picked, (size_t)count, sizeof *picked, entry_order);
    float *values = a->values.data;
    int32_t *ids = a->ids.data;
    for (int64_t i = 0; i < count; i++) {
        values[i] = picked[i].value;
        ids[i] = picked[i].id;
    }
    *count_out = (int32_t)count;
    return 0;
}
