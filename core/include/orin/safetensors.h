/* safetensors model weights: a single model.safetensors or shards listed by
 * model.safetensors.index.json, memory-mapped read-only.
 *
 * Every header is validated on open: JSON shape, known dtype names, shapes whose
 * byte size matches the offsets, offsets inside the file, no overlaps. Errors name
 * the file and the tensor. */
#ifndef ORIN_SAFETENSORS_H
#define ORIN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "orin/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dimensions a stored tensor may have: more than an orin_tensor's
 * (ORIN_MAX_DIMS), so that a folder holding a 5-D convolution weight (Qwen3-VL's
 * patch embedding, [hidden, 3, 2, 16, 16]) opens, and its reader views the
 * weight as the matrix it multiplies by. */
#define ORIN_ST_MAX_DIMS 8

typedef struct orin_st_tensor {
    const char *name;
    const char *file;          /* the shard it lives in (for error messages) */
    const char *dtype_name;    /* as in the file: "F32", "BF16", "I64", ... */
    int dtype_known;           /* 1 when dtype_name maps to an orin_dtype */
    orin_dtype dtype;
    int ndim;
    int64_t shape[ORIN_ST_MAX_DIMS];
    const void *data;          /* inside the mapping */
    size_t nbytes;
} orin_st_tensor;

typedef struct orin_st_archive orin_st_archive;

/* Opens model_dir/model.safetensors.index.json if present, else
 * model_dir/model.safetensors. */
int orin_st_open_dir(const char *model_dir, orin_st_archive **out);
/* Opens one .safetensors file. */
int orin_st_open_file(const char *path, orin_st_archive **out);
/* Parses a header from memory (for tests and fuzzing): `buf` is the whole file. */
int orin_st_open_buffer(const void *buf, size_t len, const char *name, orin_st_archive **out);
void orin_st_close(orin_st_archive *ar);

/* NULL when absent (no error set). */
const orin_st_tensor *orin_st_find(const orin_st_archive *ar, const char *name);
/* The tensor `name` of model folder `model_dir`, its shape checked against
 * dims[0..ndim) (what config.json implies); NULL with one error naming it when
 * it is missing or shaped otherwise. */
const orin_st_tensor *orin_st_find_shaped(const orin_st_archive *ar, const char *model_dir,
                                          const char *name, int ndim, const int64_t *dims);
/* orin_st_find_shaped, and a float dtype (F32, F16 or BF16). */
const orin_st_tensor *orin_st_find_float(const orin_st_archive *ar, const char *model_dir,
                                         const char *name, int ndim, const int64_t *dims);
size_t orin_st_count(const orin_st_archive *ar);
const orin_st_tensor *orin_st_at(const orin_st_archive *ar, size_t i);

#ifdef __cplusplus
}
#endif
#endif
