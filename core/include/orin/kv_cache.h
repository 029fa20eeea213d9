/* The KV cache: per layer, K and V as [capacity, n_kv_heads, head_dim] in the
 * compute dtype, on the model's device. Attention reads it through orin_kv_view
 * (pointers plus strides), so a paged layout can replace this one later without
 * changing the call structs. */
#ifndef ORIN_KV_CACHE_H
#define ORIN_KV_CACHE_H

#include "orin/device.h"
#include "orin/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orin_kv_cache orin_kv_cache;

typedef struct orin_kv_cache_shape {
    int32_t n_layers;
    int32_t capacity;     /* positions */
    int32_t n_kv_heads;
    int32_t head_dim;
    orin_dtype dtype;
} orin_kv_cache_shape;

/* Allocates the cache on dev. Fails with a message giving the bytes it needed. */
int orin_kv_cache_create(orin_device *dev, const orin_kv_cache_shape *shape, orin_kv_cache **out);
void orin_kv_cache_free(orin_kv_cache *kv);

orin_kv_view orin_kv_cache_view(const orin_kv_cache *kv, int32_t layer);
size_t orin_kv_cache_bytes(const orin_kv_cache *kv);
int32_t orin_kv_cache_capacity(const orin_kv_cache *kv);

#ifdef __cplusplus
}
#endif
#endif
