/* Argument checks shared by op implementations: see orin/op_check.h. */
#include "orin/op_check.h"
#include "orin/error.h"

#include <math.h>
#include <stdio.h>

/* Bytes above which a tensor is surely a corrupted shape, not a real one; keeps
 * every size computation below far away from int64 overflow. */
#define MAX_TENSOR_BYTES (INT64_C(1) << 62)

int orin_check_exec(const char *label, const orin_exec *ex, orin_device_kind device)
{
    if (!ex || !ex->device)
        return orin_error_set("%s: no exec device", label);
    if (ex->device->kind != device)
        return orin_error_set("%s: exec device is %s, this implementation runs on %s", label,
                              orin_device_kind_name(ex->device->kind),
                              orin_device_kind_name(device));
    return 0;
}

int orin_check_tensor(const char *label, const char *name, const orin_tensor *t,
                      orin_device_kind device, orin_dtype dt, int min_ndim, int max_ndim)
{
    if (!t->data)
        return orin_error_set("%s: %s: no data (NULL pointer)", label, name);
    if (t->device != device)
        return orin_error_set("%s: %s: on %s, expected %s", label, name,
                              orin_device_kind_name(t->device), orin_device_kind_name(device));
    if (t->dtype != dt)
        return orin_error_set("%s: %s: dtype %s, expected %s", label, name,
                              orin_dtype_name(t->dtype), orin_dtype_name(dt));
    if (t->ndim < min_ndim || t->ndim > max_ndim || t->ndim > ORIN_MAX_DIMS) {
        if (min_ndim == max_ndim)
            return orin_error_set("%s: %s: %d dimensions, expected %d", label, name, t->ndim,
                                  min_ndim);
        return orin_error_set("%s: %s: %d dimensions, expected %d to %d", label, name, t->ndim,
                              min_ndim, max_ndim);
    }
    int64_t bytes = (int64_t)orin_dtype_size(dt);
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 1)
            return orin_error_set("%s: %s: dimension %d is %lld", label, name, i,
                                  (long long)t->shape[i]);
        if (t->shape[i] > MAX_TENSOR_BYTES / bytes)
            return orin_error_set("%s: %s: too large", label, name);
        bytes *= t->shape[i];
    }
    if (!orin_tensor_is_contiguous(t))
        return orin_error_set("%s: %s: not contiguous (strides do not match the shape)", label,
                              name);
    return 0;
}

int orin_check_dim(const char *label, const char *name, const orin_tensor *t, int dim,
                   int64_t want)
{
    int d = dim < 0 ? t->ndim + dim : dim;
    if (d < 0 || d >= t->ndim)
        return orin_error_set("%s: %s: has no dimension %d", label, name, dim);
    if (t->shape[d] != want)
        return orin_error_set("%s: %s: dimension %d is %lld, expected %lld", label, name, d,
                              (long long)t->shape[d], (long long)want);
    return 0;
}

int orin_check_same_shape(const char *label, const char *a_name, const orin_tensor *a,
                          const char *b_name, const orin_tensor *b)
{
    if (a->ndim != b->ndim)
        return orin_error_set("%s: %s has %d dimensions, %s has %d", label, b_name, b->ndim,
                              a_name, a->ndim);
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] != b->shape[i])
            return orin_error_set("%s: %s: dimension %d is %lld, %s has %lld", label, b_name, i,
                                  (long long)b->shape[i], a_name, (long long)a->shape[i]);
    }
    return 0;
}

int orin_check_alias(const char *label, const char *out_name, const orin_tensor *out,
                     const char *in_name, const orin_tensor *in, bool may_alias)
{
    uintptr_t o = (uintptr_t)out->data, i = (uintptr_t)in->data;
    size_t on = orin_tensor_nbytes(out), in_bytes = orin_tensor_nbytes(in);
    if (o + on <= i || i + in_bytes <= o)
        return 0;
    if (may_alias && o == i && on == in_bytes)
        return 0;
    if (may_alias)
        return orin_error_set("%s: %s partly overlaps %s (only the same memory may be shared)",
                              label, out_name, in_name);
    return orin_error_set("%s: %s overlaps %s", label, out_name, in_name);
}

int64_t orin_tensor_rows(const orin_tensor *t)
{
    if (t->ndim < 1 || t->shape[t->ndim - 1] < 1)
        return 0;
    return orin_tensor_numel(t) / t->shape[t->ndim - 1];
}

/* Rows of head_dim elements at p * pos_stride + h * head_stride must not overlap.
 * Order the two dimensions by stride: the one with the smaller stride steps over
 * whole rows, the larger one steps over all of the smaller one's rows. */
static bool kv_rows_disjoint(const orin_kv_view *kv)
{
    bool pos_inner = kv->pos_stride <= kv->head_stride;
    double inner_stride = (double)(pos_inner ? kv->pos_stride : kv->head_stride);
    double outer_stride = (double)(pos_inner ? kv->head_stride : kv->pos_stride);
    int64_t inner_count = pos_inner ? kv->capacity : kv->n_kv_heads;
    int64_t outer_count = pos_inner ? kv->n_kv_heads : kv->capacity;

    if (inner_count > 1 && inner_stride < kv->head_dim)
        return false;
    if (outer_count > 1 && outer_stride < inner_stride * (double)(inner_count - 1) + kv->head_dim)
        return false;
    return true;
}

/* The largest element offset the view addresses stays far below int64 overflow. */
static bool kv_extent_ok(const orin_kv_view *kv)
{
    double last = (double)(kv->capacity - 1) * (double)kv->pos_stride +
                  (double)(kv->n_kv_heads - 1) * (double)kv->head_stride + kv->head_dim;
    return last < (double)MAX_TENSOR_BYTES / 8;
}

int orin_check_kv_view(const char *label, const orin_kv_view *kv, orin_dtype dt,
                       int64_t head_dim)
{
    if (!kv->k || !kv->v)
        return orin_error_set("%s: kv cache: no data (NULL pointer)", label);
    if (kv->dtype != dt)
        return orin_error_set("%s: kv cache: dtype %s, expected %s", label,
                              orin_dtype_name(kv->dtype), orin_dtype_name(dt));
    if (kv->n_kv_heads < 1 || kv->capacity < 1)
        return orin_error_set("%s: kv cache: %d kv heads, capacity %d", label, kv->n_kv_heads,
                              kv->capacity);
    if (kv->head_dim != head_dim)
        return orin_error_set("%s: kv cache: head_dim %d, the call has %lld", label,
                              kv->head_dim, (long long)head_dim);
    if (kv->pos_stride < 1 || kv->head_stride < 1)
        return orin_error_set("%s: kv cache: strides must be positive (pos %lld, head %lld)",
                              label, (long long)kv->pos_stride, (long long)kv->head_stride);
    if (!kv_rows_disjoint(kv))
        return orin_error_set("%s: kv cache: strides (pos %lld, head %lld) make rows of %d "
                              "elements overlap", label, (long long)kv->pos_stride,
                              (long long)kv->head_stride, kv->head_dim);
    if (!kv_extent_ok(kv))
        return orin_error_set("%s: kv cache: too large", label);
    return 0;
}

int orin_check_attention(const char *label, const orin_attention_args *a,
                         orin_device_kind device, orin_dtype dt, bool decode)
{
    if (!a)
        return orin_error_set("%s: no arguments", label);
    if (orin_check_tensor(label, "q", &a->q, device, dt, 3, 3) ||
        orin_check_tensor(label, "out", &a->out, device, dt, 3, 3) ||
        orin_check_same_shape(label, "q", &a->q, "out", &a->out) ||
        orin_check_tensor(label, "positions", &a->positions, device, ORIN_I32, 1, 1) ||
        orin_check_dim(label, "positions", &a->positions, 0, a->q.shape[0]))
        return -1;
    if (decode && a->q.shape[0] != 1)
        return orin_error_set("%s: q: %lld tokens, decode takes 1", label,
                              (long long)a->q.shape[0]);
    if (orin_check_kv_view(label, &a->cache, dt, a->q.shape[2]))
        return -1;
    if (a->q.shape[1] % a->cache.n_kv_heads != 0)
        return orin_error_set("%s: %lld query heads are not a multiple of %d kv heads", label,
                              (long long)a->q.shape[1], a->cache.n_kv_heads);
    if (!isfinite(a->scale) || a->scale <= 0.0f)
        return orin_error_set("%s: scale %g is not a positive number", label, a->scale);
    if (a->max_kv_len < 1 || a->max_kv_len > a->cache.capacity)
        return orin_error_set("%s: max_kv_len %d is not in 1..%d (the cache capacity)", label,
                              a->max_kv_len, a->cache.capacity);
    return orin_check_alias(label, "out", &a->out, "q", &a->q, false);
}

/* ---- whole calls ---- */

int orin_check_embedding(const char *label, const orin_exec *ex, const orin_embedding_args *a,
                         orin_device_kind device, orin_dtype dt)
{
    return orin_check_exec(label, ex, device) ||
                   orin_check_tensor(label, "table", &a->table, device, dt, 2, 2) ||
                   orin_check_tensor(label, "ids", &a->ids, device, ORIN_I32, 1, 1) ||
                   orin_check_tensor(label, "out", &a->out, device, dt, 2, 2) ||
                   orin_check_dim(label, "out", &a->out, 0, a->ids.shape[0]) ||
                   orin_check_dim(label, "out", &a->out, 1, a->table.shape[1]) ||
                   orin_check_alias(label, "out", &a->out, "table", &a->table, false)
               ? -1
               : 0;
}

int orin_check_rmsnorm(const char *label, const orin_exec *ex, const orin_rmsnorm_args *a,
                       orin_device_kind device, orin_dtype dt)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "x", &a->x, device, dt, 1, ORIN_MAX_DIMS) ||
        orin_check_tensor(label, "weight", &a->weight, device, dt, 1, 1) ||
        orin_check_tensor(label, "out", &a->out, device, dt, 1, ORIN_MAX_DIMS) ||
        orin_check_same_shape(label, "x", &a->x, "out", &a->out) ||
        orin_check_dim(label, "weight", &a->weight, 0, a->x.shape[a->x.ndim - 1]) ||
        orin_check_alias(label, "out", &a->out, "x", &a->x, true) ||
        orin_check_alias(label, "out", &a->out, "weight", &a->weight, false))
        return -1;
    if (!isfinite(a->eps) || a->eps < 0.0f)
        return orin_error_set("%s: eps %g is not a non-negative number", label, a->eps);
    return 0;
}

int orin_check_norm_in(const char *label, const orin_norm_in *norm, const orin_tensor *x,
                       orin_device_kind device, orin_dtype dt)
{
    if (!norm->weight.data)
        return 0;
    if (orin_check_tensor(label, "norm.weight", &norm->weight, device, dt, 1, 1) ||
        orin_check_dim(label, "norm.weight", &norm->weight, 0, x->shape[x->ndim - 1]) ||
        orin_check_tensor(label, "norm.x_out", &norm->x_out, device, dt, 1, ORIN_MAX_DIMS) ||
        orin_check_same_shape(label, "x", x, "norm.x_out", &norm->x_out) ||
        orin_check_alias(label, "norm.x_out", &norm->x_out, "x", x, false))
        return -1;
    if (norm->residual.data &&
        (orin_check_tensor(label, "norm.residual", &norm->residual, device, dt, 1,
                           ORIN_MAX_DIMS) ||
         orin_check_same_shape(label, "x", x, "norm.residual", &norm->residual) ||
         orin_check_alias(label, "norm.x_out", &norm->x_out, "norm.residual", &norm->residual,
                          false)))
        return -1;
    if (!isfinite(norm->eps) || norm->eps < 0.0f)
        return orin_error_set("%s: norm.eps %g is not a non-negative number", label, norm->eps);
    return 0;
}

int orin_check_norm_out(const char *label, const orin_norm_in *norm, const char *name,
                        const orin_tensor *out)
{
    if (!norm->weight.data)
        return 0;
    return orin_check_alias(label, name, out, "norm.x_out", &norm->x_out, false);
}

int orin_check_rope(const char *label, const orin_exec *ex, const orin_rope_args *a,
                    orin_device_kind device, orin_dtype dt)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "x", &a->x, device, dt, 3, 3) ||
        orin_check_tensor(label, "positions", &a->positions, device, ORIN_I32, 1, 1) ||
        orin_check_dim(label, "positions", &a->positions, 0, a->x.shape[0]) ||
        orin_check_alias(label, "x", &a->x, "positions", &a->positions, false))
        return -1;
    if (a->x.shape[2] % 2 != 0)
        return orin_error_set("%s: x: head_dim %lld is odd", label, (long long)a->x.shape[2]);
    if (!isfinite(a->theta) || a->theta <= 0.0f)
        return orin_error_set("%s: theta %g is not a positive number", label, a->theta);
    return orin_check_rope_scaling(label, &a->scaling);
}

int orin_check_rope_scaling(const char *label, const orin_rope_scaling *s)
{
    if (s->inv_freq && !(isfinite(s->attention_factor) && s->attention_factor > 0.0f))
        return orin_error_set("%s: scaling.attention_factor %g is not a positive number", label,
                              s->attention_factor);
    return 0;
}

/* A matmul's optional bias [out] (apart from y) and y with x's rows. */
static int check_bias_and_rows(const char *label, const orin_tensor *x, const orin_tensor *bias,
                               const orin_tensor *y, int64_t out, orin_device_kind device,
                               orin_dtype dt)
{
    if (bias->data && (orin_check_tensor(label, "bias", bias, device, dt, 1, 1) ||
                       orin_check_dim(label, "bias", bias, 0, out) ||
                       orin_check_alias(label, "y", y, "bias", bias, false)))
        return -1;
    if (orin_tensor_rows(y) != orin_tensor_rows(x))
        return orin_error_set("%s: y has %lld rows, x has %lld", label,
                              (long long)orin_tensor_rows(y), (long long)orin_tensor_rows(x));
    return 0;
}

int orin_check_matmul(const char *label, const orin_exec *ex, const orin_matmul_args *a,
                      orin_device_kind device, orin_dtype dt)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "x", &a->x, device, dt, 1, ORIN_MAX_DIMS) ||
        orin_check_tensor(label, "w", &a->w, device, dt, 2, 2) ||
        orin_check_tensor(label, "y", &a->y, device, dt, 1, ORIN_MAX_DIMS) ||
        orin_check_dim(label, "w", &a->w, 1, a->x.shape[a->x.ndim - 1]) ||
        orin_check_dim(label, "y", &a->y, -1, a->w.shape[0]) ||
        orin_check_alias(label, "y", &a->y, "x", &a->x, false) ||
        orin_check_alias(label, "y", &a->y, "w", &a->w, false))
        return -1;
    return check_bias_and_rows(label, &a->x, &a->bias, &a->y, a->w.shape[0], device, dt);
}

/* The packed tensors of an AWQ weight of in x out. */
static int check_awq4_weight(const char *label, const orin_qweight *w, int64_t in, int64_t out,
                             int64_t groups, orin_device_kind device)
{
    if (out % 8 != 0)
        return orin_error_set("%s: y: %lld outputs, AWQ packs 8 a word (a multiple of 8)",
                              label, (long long)out);
    return orin_check_tensor(label, "qweight", &w->qweight, device, ORIN_I32, 2, 2) ||
                   orin_check_dim(label, "qweight", &w->qweight, 0, in) ||
                   orin_check_dim(label, "qweight", &w->qweight, 1, out / 8) ||
                   orin_check_tensor(label, "zeros", &w->zeros, device, ORIN_I32, 2, 2) ||
                   orin_check_dim(label, "zeros", &w->zeros, 0, groups) ||
                   orin_check_dim(label, "zeros", &w->zeros, 1, out / 8) ||
                   orin_check_tensor(label, "scales", &w->scales, device, ORIN_F16, 2, 2) ||
                   orin_check_dim(label, "scales", &w->scales, 0, groups) ||
                   orin_check_dim(label, "scales", &w->scales, 1, out)
               ? -1
               : 0;
}

/* The tensors of an int8 weight of in x out (no zeros: symmetric). */
static int check_int8_weight(const char *label, const orin_qweight *w, int64_t in, int64_t out,
                             int64_t groups, orin_device_kind device)
{
    if (w->zeros.data)
        return orin_error_set("%s: zeros: int8 weights are symmetric and have none", label);
    return orin_check_tensor(label, "qweight", &w->qweight, device, ORIN_I8, 2, 2) ||
                   orin_check_dim(label, "qweight", &w->qweight, 0, out) ||
                   orin_check_dim(label, "qweight", &w->qweight, 1, in) ||
                   orin_check_tensor(label, "scales", &w->scales, device, ORIN_F16, 2, 2) ||
                   orin_check_dim(label, "scales", &w->scales, 0, out) ||
                   orin_check_dim(label, "scales", &w->scales, 1, groups)
               ? -1
               : 0;
}

int orin_check_matmul_quant(const char *label, const orin_exec *ex,
                            const orin_matmul_quant_args *a, orin_weight_format fmt,
                            orin_device_kind device, orin_dtype dt)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "x", &a->x, device, dt, 1, ORIN_MAX_DIMS) ||
        orin_check_tensor(label, "y", &a->y, device, dt, 1, ORIN_MAX_DIMS))
        return -1;
    const int64_t in = a->x.shape[a->x.ndim - 1], out = a->y.shape[a->y.ndim - 1];
    const int32_t group = a->w.group_size;
    if (group < 1 || in % group != 0)
        return orin_error_set("%s: group_size %d does not divide the input width %lld", label,
                              group, (long long)in);
    const int64_t groups = in / group;
    if (fmt == ORIN_WEIGHT_AWQ4) {
        if (check_awq4_weight(label, &a->w, in, out, groups, device))
            return -1;
    } else if (fmt == ORIN_WEIGHT_INT8) {
        if (check_int8_weight(label, &a->w, in, out, groups, device))
            return -1;
    } else {
        return orin_error_set("%s: weight format %d is not a quantized one", label, (int)fmt);
    }
    if (check_bias_and_rows(label, &a->x, &a->bias, &a->y, out, device, dt))
        return -1;
    if (orin_check_alias(label, "y", &a->y, "x", &a->x, false) ||
        orin_check_alias(label, "y", &a->y, "qweight", &a->w.qweight, false) ||
        orin_check_alias(label, "y", &a->y, "scales", &a->w.scales, false) ||
        (a->w.zeros.data && orin_check_alias(label, "y", &a->y, "zeros", &a->w.zeros, false)))
        return -1;
    return 0;
}

/* One part of a fused quantized call, checked as a matmul.awq4 / .int8 call, its
 * errors prefixed with the part's name. */
static int check_quant_part(const char *label, const char *part, const orin_exec *ex,
                            const orin_matmul_quant_args *a, orin_weight_format fmt,
                            orin_device_kind device, orin_dtype dt)
{
    char what[160];
    snprintf(what, sizeof what, "%s %s", label, part);
    return orin_check_matmul_quant(what, ex, a, fmt, device, dt);
}

int orin_check_matmul_qkv_quant(const char *label, const orin_exec *ex,
                                const orin_matmul_qkv_quant_args *a, orin_weight_format fmt,
                                orin_device_kind device, orin_dtype dt)
{
    static const char *const parts[3] = {"w[0]", "w[1]", "w[2]"};
    static const char *const outs[3] = {"y[0]", "y[1]", "y[2]"};
    if (orin_check_tensor(label, "x", &a->x, device, dt, 2, 2))
        return -1;
    for (int i = 0; i < 3; i++) {
        const orin_matmul_quant_args part = {.x = a->x, .w = a->w[i], .bias = a->bias[i],
                                             .y = a->y[i]};
        if (check_quant_part(label, parts[i], ex, &part, fmt, device, dt) ||
            orin_check_tensor(label, outs[i], &a->y[i], device, dt, 2, 2))
            return -1;
        for (int j = 0; j < i; j++)
            if (orin_check_alias(label, outs[i], &a->y[i], outs[j], &a->y[j], false))
                return -1;
        if (orin_check_norm_out(label, &a->norm, outs[i], &a->y[i]))
            return -1;
    }
    return orin_check_norm_in(label, &a->norm, &a->x, device, dt);
}

int orin_check_matmul_swiglu_quant(const char *label, const orin_exec *ex,
                                   const orin_matmul_swiglu_quant_args *a, orin_weight_format fmt,
                                   orin_device_kind device, orin_dtype dt)
{
    const orin_matmul_quant_args gate = {.x = a->x, .w = a->w_gate, .y = a->out};
    const orin_matmul_quant_args up = {.x = a->x, .w = a->w_up, .y = a->out};
    if (orin_check_tensor(label, "x", &a->x, device, dt, 2, 2) ||
        orin_check_tensor(label, "out", &a->out, device, dt, 2, 2) ||
        check_quant_part(label, "w_gate", ex, &gate, fmt, device, dt) ||
        check_quant_part(label, "w_up", ex, &up, fmt, device, dt) ||
        orin_check_norm_in(label, &a->norm, &a->x, device, dt) ||
        orin_check_norm_out(label, &a->norm, "out", &a->out))
        return -1;
    return 0;
}

int orin_check_binary(const char *label, const orin_exec *ex, const char *a_name,
                      const orin_tensor *a, const char *b_name, const orin_tensor *b,
                      const orin_tensor *out, orin_device_kind device, orin_dtype dt)
{
    return orin_check_exec(label, ex, device) ||
                   orin_check_tensor(label, a_name, a, device, dt, 1, ORIN_MAX_DIMS) ||
                   orin_check_tensor(label, b_name, b, device, dt, 1, ORIN_MAX_DIMS) ||
                   orin_check_tensor(label, "out", out, device, dt, 1, ORIN_MAX_DIMS) ||
                   orin_check_same_shape(label, a_name, a, b_name, b) ||
                   orin_check_same_shape(label, a_name, a, "out", out) ||
                   orin_check_alias(label, "out", out, a_name, a, true) ||
                   orin_check_alias(label, "out", out, b_name, b, true)
               ? -1
               : 0;
}

int orin_check_argmax(const char *label, const orin_exec *ex, const orin_argmax_args *a,
                      orin_device_kind device, orin_dtype dt)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "x", &a->x, device, dt, 2, 2) ||
        orin_check_tensor(label, "out", &a->out, device, ORIN_I32, 1, 1) ||
        orin_check_dim(label, "out", &a->out, 0, a->x.shape[0]) ||
        orin_check_alias(label, "out", &a->out, "x", &a->x, false))
        return -1;
    if (a->x.shape[1] >= INT32_MAX)
        return orin_error_set("%s: x: %lld columns do not fit an i32 index", label,
                              (long long)a->x.shape[1]);
    return 0;
}

int orin_check_kv_write(const char *label, const orin_exec *ex, const orin_kv_write_args *a,
                        orin_device_kind device, orin_dtype dt)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "k", &a->k, device, dt, 3, 3) ||
        orin_check_tensor(label, "v", &a->v, device, dt, 3, 3) ||
        orin_check_same_shape(label, "k", &a->k, "v", &a->v) ||
        orin_check_tensor(label, "positions", &a->positions, device, ORIN_I32, 1, 1) ||
        orin_check_dim(label, "positions", &a->positions, 0, a->k.shape[0]) ||
        orin_check_kv_view(label, &a->cache, dt, a->k.shape[2]))
        return -1;
    if (a->k.shape[1] != a->cache.n_kv_heads)
        return orin_error_set("%s: k: %lld heads, the cache has %d", label,
                              (long long)a->k.shape[1], a->cache.n_kv_heads);
    return 0;
}

/* ---- vision encoder ops ---- */

int orin_check_layernorm(const char *label, const orin_exec *ex, const orin_layernorm_args *a,
                         orin_device_kind device, orin_dtype dt)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "x", &a->x, device, dt, 1, ORIN_MAX_DIMS) ||
        orin_check_tensor(label, "weight", &a->weight, device, dt, 1, 1) ||
        orin_check_tensor(label, "bias", &a->bias, device, dt, 1, 1) ||
        orin_check_tensor(label, "out", &a->out, device, dt, 1, ORIN_MAX_DIMS) ||
        orin_check_same_shape(label, "x", &a->x, "out", &a->out) ||
        orin_check_dim(label, "weight", &a->weight, 0, a->x.shape[a->x.ndim - 1]) ||
        orin_check_dim(label, "bias", &a->bias, 0, a->x.shape[a->x.ndim - 1]) ||
        orin_check_alias(label, "out", &a->out, "x", &a->x, true) ||
        orin_check_alias(label, "out", &a->out, "weight", &a->weight, false) ||
        orin_check_alias(label, "out", &a->out, "bias", &a->bias, false))
        return -1;
    if (!isfinite(a->eps) || a->eps < 0.0f)
        return orin_error_set("%s: eps %g is not a non-negative number", label, a->eps);
    return 0;
}

int orin_check_gelu(const char *label, const orin_exec *ex, const orin_gelu_args *a,
                    orin_device_kind device, orin_dtype dt)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "x", &a->x, device, dt, 1, ORIN_MAX_DIMS) ||
        orin_check_tensor(label, "out", &a->out, device, dt, 1, ORIN_MAX_DIMS) ||
        orin_check_same_shape(label, "x", &a->x, "out", &a->out) ||
        orin_check_alias(label, "out", &a->out, "x", &a->x, true))
        return -1;
    if (a->kind != ORIN_GELU_ERF && a->kind != ORIN_GELU_TANH)
        return orin_error_set("%s: kind %d is neither erf (0) nor tanh (1)", label,
                              (int)a->kind);
    return 0;
}

int orin_check_rope_table(const char *label, const orin_exec *ex,
                          const orin_rope_table_args *a, orin_device_kind device, orin_dtype dt)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "x", &a->x, device, dt, 3, 3))
        return -1;
    if (a->x.shape[2] % 2 != 0)
        return orin_error_set("%s: x: head_dim %lld is odd", label, (long long)a->x.shape[2]);
    const int64_t n = a->x.shape[0], half = a->x.shape[2] / 2;
    return orin_check_tensor(label, "cos", &a->cos, device, ORIN_F32, 2, 2) ||
                   orin_check_dim(label, "cos", &a->cos, 0, n) ||
                   orin_check_dim(label, "cos", &a->cos, 1, half) ||
                   orin_check_tensor(label, "sin", &a->sin, device, ORIN_F32, 2, 2) ||
                   orin_check_dim(label, "sin", &a->sin, 0, n) ||
                   orin_check_dim(label, "sin", &a->sin, 1, half) ||
                   orin_check_alias(label, "x", &a->x, "cos", &a->cos, false) ||
                   orin_check_alias(label, "x", &a->x, "sin", &a->sin, false)
               ? -1
               : 0;
}

int orin_check_matmul_gelu(const char *label, const orin_exec *ex,
                           const orin_matmul_gelu_args *a, orin_device_kind device,
                           orin_dtype dt)
{
    const orin_matmul_args m = {.x = a->x, .w = a->w, .bias = a->bias, .y = a->y};
    if (orin_check_matmul(label, ex, &m, device, dt))
        return -1;
    if (a->kind != ORIN_GELU_ERF && a->kind != ORIN_GELU_TANH)
        return orin_error_set("%s: kind %d is neither erf (0) nor tanh (1)", label,
                              (int)a->kind);
    return 0;
}

int orin_check_pos_interp(const char *label, const orin_exec *ex,
                          const orin_pos_interp_args *a, orin_device_kind device, orin_dtype dt)
{
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "table", &a->table, device, dt, 2, 2) ||
        orin_check_tensor(label, "out", &a->out, device, dt, 2, 2) ||
        orin_check_dim(label, "out", &a->out, 1, a->table.shape[1]) ||
        orin_check_alias(label, "out", &a->out, "table", &a->table, false))
        return -1;
    if (a->side < 1 || a->table.shape[0] != (int64_t)a->side * a->side)
        return orin_error_set("%s: table: %lld rows for a grid of side %d (side^2 rows)", label,
                              (long long)a->table.shape[0], a->side);
    if (a->merge < 1 || a->h < 1 || a->w < 1 || a->h % a->merge || a->w % a->merge)
        return orin_error_set("%s: grid %d x %d: both must be positive multiples of the merge "
                              "size %d", label, a->h, a->w, a->merge);
    const int64_t area = (int64_t)a->h * a->w;
    if (a->out.shape[0] % area != 0)
        return orin_error_set("%s: out: %lld rows are no whole number of %d x %d frames", label,
                              (long long)a->out.shape[0], a->h, a->w);
    return 0;
}

int orin_check_attention_full(const char *label, const orin_exec *ex,
                              const orin_attention_full_args *a, orin_device_kind device,
                              orin_dtype dt)
{
    if (!a)
        return orin_error_set("%s: no arguments", label);
    if (orin_check_exec(label, ex, device) ||
        orin_check_tensor(label, "q", &a->q, device, dt, 3, 3) ||
        orin_check_tensor(label, "k", &a->k, device, dt, 3, 3) ||
        orin_check_tensor(label, "v", &a->v, device, dt, 3, 3) ||
        orin_check_tensor(label, "out", &a->out, device, dt, 3, 3) ||
        orin_check_same_shape(label, "q", &a->q, "out", &a->out) ||
        orin_check_dim(label, "k", &a->k, 0, a->q.shape[0]) ||
        orin_check_dim(label, "k", &a->k, 2, a->q.shape[2]) ||
        orin_check_same_shape(label, "k", &a->k, "v", &a->v) ||
        orin_check_tensor(label, "cu_seqlens", &a->cu_seqlens, device, ORIN_I32, 1, 1))
        return -1;
    if (a->q.shape[1] % a->k.shape[1] != 0)
        return orin_error_set("%s: %lld query heads are not a multiple of %lld kv heads", label,
                              (long long)a->q.shape[1], (long long)a->k.shape[1]);
    if (a->cu_seqlens.shape[0] < 2)
        return orin_error_set("%s: cu_seqlens: %lld entries, at least 2 (one segment)", label,
                              (long long)a->cu_seqlens.shape[0]);
    if (a->q.shape[0] > INT32_MAX)
        return orin_error_set("%s: q: %lld tokens do not fit an i32 offset", label,
                              (long long)a->q.shape[0]);
    if (!isfinite(a->scale) || a->scale <= 0.0f)
        return orin_error_set("%s: scale %g is not a positive number", label, a->scale);
    return orin_check_alias(label, "out", &a->out, "q", &a->q, false) ||
                   orin_check_alias(label, "out", &a->out, "k", &a->k, false) ||
                   orin_check_alias(label, "out", &a->out, "v", &a->v, false)
               ? -1
               : 0;
}
