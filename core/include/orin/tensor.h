/* Tensors: a typed view of memory on some device.
 *
 * A tensor does not own its memory; whoever allocated `data` frees it. Shapes are
 * row-major with the last dimension fastest; `stride` is in elements, so a
 * contiguous [n, d] tensor has stride {d, 1}. */
#ifndef ORIN_TENSOR_H
#define ORIN_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum orin_dtype {
    ORIN_F32 = 0,
    ORIN_F16,
    ORIN_BF16,
    ORIN_I32,
    ORIN_I8,
    ORIN_U8,
    ORIN_DTYPE_COUNT
} orin_dtype;

typedef enum orin_device_kind {
    ORIN_DEVICE_CPU = 0,
    ORIN_DEVICE_CUDA,
    ORIN_DEVICE_KIND_COUNT
} orin_device_kind;

#define ORIN_MAX_DIMS 4

typedef struct orin_tensor {
    void *data;
    orin_dtype dtype;
    orin_device_kind device;
    int ndim;
    int64_t shape[ORIN_MAX_DIMS];
    int64_t stride[ORIN_MAX_DIMS]; /* elements */
} orin_tensor;

/* "f32", "f16", "bf16", "i32", "i8", "u8". */
const char *orin_dtype_name(orin_dtype dt);
/* Parses the names above plus the INI spellings "fp32", "fp16", "float32",
 * "float16", "bfloat16". Returns -1 for an unknown name. */
int orin_dtype_from_name(const char *name, orin_dtype *out);
size_t orin_dtype_size(orin_dtype dt);

const char *orin_device_kind_name(orin_device_kind kind); /* "cpu", "cuda" */

/* A contiguous tensor view over `data` with shape dims[0..ndim). */
orin_tensor orin_tensor_make(void *data, orin_dtype dt, orin_device_kind dev, int ndim,
                             const int64_t *dims);
int64_t orin_tensor_numel(const orin_tensor *t);
size_t orin_tensor_nbytes(const orin_tensor *t);
bool orin_tensor_is_contiguous(const orin_tensor *t);
/* "[4, 128]": dims[0..ndim) written into buf (truncated to cap); returns buf.
 * For error messages; orin_shape_str(buf, cap, t->ndim, t->shape) for a tensor. */
const char *orin_shape_str(char *buf, size_t cap, int ndim, const int64_t *dims);

/* Scalar conversions, round-to-nearest-even, NaN stays NaN (quiet), overflow
 * goes to inf, subnormals are kept. */
uint16_t orin_f32_to_f16(float f);
float orin_f16_to_f32(uint16_t h);
uint16_t orin_f32_to_bf16(float f);
float orin_bf16_to_f32(uint16_t b);

/* Converts n elements between any two of f32, f16, bf16 (host memory).
 * Returns 0, or -1 for an unsupported pair. */
int orin_convert(void *dst, orin_dtype dst_dt, const void *src, orin_dtype src_dt, size_t n);

#ifdef __cplusplus
}
#endif
#endif
