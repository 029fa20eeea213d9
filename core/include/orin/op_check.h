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

/* ---- whole calls ----
 * Each op's complete argument check, the same on every device, so that the
 * CPU and CUDA implementations of an op accept exactly the same calls. They
 * check shapes, dtypes, aliasing and scalars, never tensor contents (ids and
 * positions may be in device memory; the CPU ops check those after these). */

/* embedding: table [V, d], ids i32 [n], out [n, d], out apart from the table. */
int orin_check_embedding(const char *label, const orin_exec *ex, const orin_embedding_args *a,
                         orin_device_kind device, orin_dtype dt);
/* rmsnorm: x and out alike (out may be x), weight [last dim], eps >= 0. */
int orin_check_rmsnorm(const char *label, const orin_exec *ex, const orin_rmsnorm_args *a,
                       orin_device_kind device, orin_dtype dt);
/* A fused product's optional add + rmsnorm in front (orin_norm_in; nothing to
 * check when norm->weight.data is NULL): weight [d] for x [.., d], x_out shaped
 * like x and overlapping neither x nor the residual, the residual (data NULL:
 * none) shaped like x, eps a non-negative number. */
int orin_check_norm_in(const char *label, const orin_norm_in *norm, const orin_tensor *x,
                       orin_device_kind device, orin_dtype dt);
/* An output `name` of a product with that norm in front: apart from norm.x_out,
 * which the product writes too (nothing to check without a norm). */
int orin_check_norm_out(const char *label, const orin_norm_in *norm, const char *name,
                        const orin_tensor *out);
/* rope: x [n, heads, hd] with hd even, positions i32 [n], theta > 0. */
int orin_check_rope(const char *label, const orin_exec *ex, const orin_rope_args *a,
                    orin_device_kind device, orin_dtype dt);
/* rope's and rope_kv_write's scaling: where inv_freq is set, attention_factor
 * finite and positive (the table's hd/2 entries are the caller's to give). */
int orin_check_rope_scaling(const char *label, const orin_rope_scaling *s);
/* matmul: x [.., in], w [out, in], y [.., out] with x's rows, bias [out] or
 * none, y apart from x, w and bias. */
int orin_check_matmul(const char *label, const orin_exec *ex, const orin_matmul_args *a,
                      orin_device_kind device, orin_dtype dt);
/* matmul.awq4 and matmul.int8 (fmt): x [.., in] and y [.., out] with x's rows,
 * group_size dividing in, the packed tensors of orin_qweight in their dtypes
 * and shapes (AWQ: out a multiple of 8), bias [out] or none, y apart from
 * every input. */
int orin_check_matmul_quant(const char *label, const orin_exec *ex,
                            const orin_matmul_quant_args *a, orin_weight_format fmt,
                            orin_device_kind device, orin_dtype dt);
/* matmul.qkv.* and matmul.swiglu.*: each part as matmul.awq4 / .int8 checks it
 * (errors name the part: "w[1]", "w_up"), x [n, in] two-dimensional, no output
 * overlapping another. */
int orin_check_matmul_qkv_quant(const char *label, const orin_exec *ex,
                                const orin_matmul_qkv_quant_args *a, orin_weight_format fmt,
                                orin_device_kind device, orin_dtype dt);
int orin_check_matmul_swiglu_quant(const char *label, const orin_exec *ex,
                                   const orin_matmul_swiglu_quant_args *a, orin_weight_format fmt,
                                   orin_device_kind device, orin_dtype dt);
/* swiglu and add: out = f(a, b) over three tensors of one shape; out may be
 * a or b exactly. */
int orin_check_binary(const char *label, const orin_exec *ex, const char *a_name,
                      const orin_tensor *a, const char *b_name, const orin_tensor *b,
                      const orin_tensor *out, orin_device_kind device, orin_dtype dt);
/* argmax: x [rows, V], out i32 [rows], V below 2^31. */
int orin_check_argmax(const char *label, const orin_exec *ex, const orin_argmax_args *a,
                      orin_device_kind device, orin_dtype dt);
/* kv_write: k and v [n, Hkv, hd] with the cache's Hkv and hd, positions i32 [n]. */
int orin_check_kv_write(const char *label, const orin_exec *ex, const orin_kv_write_args *a,
                        orin_device_kind device, orin_dtype dt);
/* layernorm: x and out alike (out may be x), weight and bias [last dim], eps >= 0. */
int orin_check_layernorm(const char *label, const orin_exec *ex, const orin_layernorm_args *a,
                         orin_device_kind device, orin_dtype dt);
/* gelu: x and out alike (out may be x), a known kind. */
int orin_check_gelu(const char *label, const orin_exec *ex, const orin_gelu_args *a,
                    orin_device_kind device, orin_dtype dt);
/* rope.table: x [n, heads, hd] with hd even, cos and sin f32 [n, hd/2], x apart
 * from both. */
int orin_check_rope_table(const char *label, const orin_exec *ex,
                          const orin_rope_table_args *a, orin_device_kind device, orin_dtype dt);
/* matmul.gelu: as matmul, and kind erf or tanh. (matmul.add checks as matmul.) */
int orin_check_matmul_gelu(const char *label, const orin_exec *ex,
                           const orin_matmul_gelu_args *a, orin_device_kind device,
                           orin_dtype dt);
/* pos_interp: table [side * side, d] with side >= 1, out [frames * h * w, d]
 * apart from it, h and w positive multiples of merge >= 1. */
int orin_check_pos_interp(const char *label, const orin_exec *ex,
                          const orin_pos_interp_args *a, orin_device_kind device, orin_dtype dt);
/* attention.full: q and out [n, H, hd], k and v [n, Hkv, hd] with H a multiple
 * of Hkv, cu_seqlens i32 [segments + 1] (at least 2 entries), a finite
 * positive scale, out apart from q, k and v. The values of cu_seqlens are the
 * implementation's to check (they may be in device memory). A NULL call
 * struct is "<label>: no arguments". */
int orin_check_attention_full(const char *label, const orin_exec *ex,
                              const orin_attention_full_args *a, orin_device_kind device,
                              orin_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
