/* Argument checks shared by op implementations (any device).
 *
 * Every op validates its call struct before touching memory, so that a bad call
 * is an error and never a crash. Each check returns 0, or -1 with an error of the
 * form "<label>: <tensor>: <reason>", where label names the op and provider, e.g.
 *   "rmsnorm (common): weight: dtype f16, expected f32"
 * Checks that read tensor contents (ids, positions) live in orin/cpu_util.h: on a
 * GPU those values are in device memory. */
#ifndef ORIN_OP_CHECK_H
#define ORIN_OP_CHECK_H

#include "orin/ops.h"
#include "orin/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ex and ex->device are set and the device is of kind `device`. */
int orin_check_exec(const char *label, const orin_exec *ex, orin_device_kind device);

/* t has data, lives on `device`, has dtype dt, min_ndim <= ndim <= max_ndim, every
 * dimension >= 1, fewer than 2^62 bytes, and is contiguous (ops take contiguous
 * tensors; strided data goes through orin_kv_view). */
int orin_check_tensor(const char *label, const char *name, const orin_tensor *t,
                      orin_device_kind device, orin_dtype dt, int min_ndim, int max_ndim);

/* t->shape[dim] == want (dim < 0 counts from the end). */
int orin_check_dim(const char *label, const char *name, const orin_tensor *t, int dim,
                   int64_t want);

/* a and b have the same rank and shape. */
int orin_check_same_shape(const char *label, const char *a_name, const orin_tensor *a,
                          const char *b_name, const orin_tensor *b);

/* Overlap rules between an output and an input: their bytes are disjoint, or,
 * where may_alias, the very same tensor memory (same data, same size). */
int orin_check_alias(const char *label, const char *out_name, const orin_tensor *out,
                     const char *in_name, const orin_tensor *in, bool may_alias);

/* Rows of a tensor seen as [rows, last dim]: numel / shape[ndim - 1]. */
int64_t orin_tensor_rows(const orin_tensor *t);

/* The cache view: non-NULL k and v of dtype dt, n_kv_heads >= 1, head_dim ==
 * the query's head_dim, capacity >= 1, positive strides under which no two
 * (position, head) rows of head_dim elements overlap. */
int orin_check_kv_view(const char *label, const orin_kv_view *kv, orin_dtype dt,
                       int64_t head_dim);

/* The whole attention call: q and out [n, H, hd] of dtype dt, positions i32 [n],
 * n == 1 for decode, H a multiple of the cache's n_kv_heads, a finite positive
 * scale, 1 <= max_kv_len <= capacity, and a valid cache view. */
int orin_check_attention(const char *label, const orin_attention_args *a,
                         orin_device_kind device, orin_dtype dt, bool decode);

#ifdef __cplusplus
}
#endif
#endif
