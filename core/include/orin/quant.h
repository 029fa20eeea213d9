/* Quantizing float weights on the host (model.quant = int8 at load), into the
 * int8 layout of orin_qweight (orin/ops.h). */
#ifndef ORIN_QUANT_H
#define ORIN_QUANT_H

#include "orin/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ORIN_INT8_GROUP 128

/* Input values per scale for rows of `in` values: ORIN_INT8_GROUP where it
 * divides in, else the whole row (one scale per output row). */
int32_t orin_int8_group_size(int64_t in);

/* Quantizes rows[rows][in] of src (f32, f16 or bf16) to int8, symmetric, per
 * group of `group` values (group divides in):
 *   scale = max|w| / 127 in f32, rounded to f16 (nearest even)
 *   q     = rint(w / scale) in f32 (ties to even), clamped to -127..127;
 *           0 for a group whose f16 scale is 0
 * into q[rows][in] and scales[rows][in / group] (f16 bits). The same
 * arithmetic as scripts/gen_quant_models.py's int8_quantize, so that its
 * references hold the same weights. Runs on up to `threads` op threads (0:
 * runtime.threads' default, every core). A non-finite weight, or one too
 * large for an f16 scale, is an error naming its row. */
int orin_quantize_int8(const void *src, orin_dtype src_dt, int64_t rows, int64_t in,
                       int32_t group, int threads, int8_t *q, uint16_t *scales);

#ifdef __cplusplus
}
#endif
#endif
