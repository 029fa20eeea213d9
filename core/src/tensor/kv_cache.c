/* The KV cache (see orin/kv_cache.h). One allocation per layer and tensor, so
 * that a large cache does not need one huge contiguous block. */
#include "orin/kv_cache.h"
#include "orin/error.h"

#include <stdlib.h>

struct orin_kv_cache {
    orin_device *dev;
    orin_kv_cache_shape shape;
    size_t layer_bytes;   /* bytes of one layer's K (or V) */
    void **k, **v;        /* [n_layers] */
};

void orin_kv_cache_free(orin_kv_cache *kv)
{
    if (!kv)
        return;
    for (int32_t l = 0; l < kv->shape.n_layers; l++) {
        if (kv->k && kv->k[l])
            kv->dev->ops->free(kv->dev, kv->k[l]);
        if (kv->v && kv->v[l])
            kv->dev->ops->free(kv->dev, kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv);
}

int orin_kv_cache_create(orin_device *dev, const orin_kv_cache_shape *shape, orin_kv_cache **out)
{
    *out = NULL;
    if (shape->n_layers <= 0 || shape->capacity <= 0 || shape->n_kv_heads <= 0 ||
        shape->head_dim <= 0)
        return orin_error_set("kv cache: bad shape (%d layers, %d positions, %d heads, dim %d)",
                              shape->n_layers, shape->capacity, shape->n_kv_heads, shape->head_dim);
    orin_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv)
        return orin_error_set("kv cache: out of memory");
    kv->dev = dev;
    kv->shape = *shape;
    kv->layer_bytes = (size_t)shape->capacity * (size_t)shape->n_kv_heads *
                      (size_t)shape->head_dim * orin_dtype_size(shape->dtype);
    kv->k = calloc((size_t)shape->n_layers, sizeof *kv->k);
    kv->v = calloc((size_t)shape->n_layers, sizeof *kv->v);
    if (!kv->k || !kv->v)
        goto oom;
    for (int32_t l = 0; l < shape->n_layers; l++) {
        kv->k[l] = dev->ops->alloc(dev, kv->layer_bytes);
        kv->v[l] = dev->ops->alloc(dev, kv->layer_bytes);
        if (!kv->k[l] || !kv->v[l])
            goto oom;
    }
    *out = kv;
    return 0;
oom: {
    double mib = 2.0 * (double)shape->n_layers * (double)kv->layer_bytes / 1048576.0;
    orin_kv_cache_free(kv);
    return orin_error_set("kv cache: cannot allocate %.1f MiB on %s for %d positions "
                          "(lower runtime.max_context)",
                          mib, dev->name, shape->capacity);
}
}

orin_kv_view orin_kv_cache_view(const orin_kv_cache *kv, int32_t layer)
{
    const orin_kv_cache_shape *s = &kv->shape;
    return (orin_kv_view){
        .k = kv->k[layer],
        .v = kv->v[layer],
        .dtype = s->dtype,
        .n_kv_heads = s->n_kv_heads,
        .head_dim = s->head_dim,
        .pos_stride = (int64_t)s->n_kv_heads * s->head_dim,
        .head_stride = s->head_dim,
        .capacity = s->capacity,
    };
}

size_t orin_kv_cache_bytes(const orin_kv_cache *kv)
{
    return 2 * (size_t)kv->shape.n_layers * kv->layer_bytes;
}

int32_t orin_kv_cache_capacity(const orin_kv_cache *kv)
{
    return kv->shape.capacity;
}
