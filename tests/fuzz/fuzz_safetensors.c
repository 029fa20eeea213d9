/* A .safetensors file from memory: the length prefix, the JSON header and
 * every tensor's dtype, shape and offsets. Each tensor a header admits must
 * lie inside the buffer, with as many bytes as its shape says (for dtypes of
 * a known size: others are only bounds-checked, by design), and be found
 * by its name; reading its first and last byte must be in bounds (ASan). */
#include "fuzz_util.h"

#include "orin/error.h"
#include "orin/safetensors.h"

static size_t elem_size(const char *dtype)
{
    static const struct { const char *name; size_t size; } sizes[] = {
        {"F64", 8}, {"I64", 8}, {"U64", 8}, {"C64", 8}, {"F32", 4}, {"I32", 4}, {"U32", 4},
        {"F16", 2}, {"BF16", 2}, {"I16", 2}, {"U16", 2}, {"I8", 1}, {"U8", 1}, {"BOOL", 1},
        {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (strcmp(sizes[i].name, dtype) == 0)
            return sizes[i].size;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    orin_st_archive *ar = NULL;
    if (orin_st_open_buffer(data, size, "fuzz.safetensors", &ar) != 0) {
        FUZZ_ASSERT(ar == NULL, "failed open handed out an archive");
        fuzz_check_error(orin_error());
        return 0;
    }
    volatile uint8_t sink = 0;
    size_t n = orin_st_count(ar);
    for (size_t i = 0; i < n; i++) {
        const orin_st_tensor *t = orin_st_at(ar, i);
        FUZZ_ASSERT(t && t->name && t->dtype_name, "tensor %zu incomplete", i);
        FUZZ_ASSERT(orin_st_find(ar, t->name) == t, "'%s' not found by name", t->name);
        const uint8_t *p = t->data;
        FUZZ_ASSERT(p >= data && t->nbytes <= size && p - data <= (ptrdiff_t)(size - t->nbytes),
                    "'%s' lies outside the buffer", t->name);
        FUZZ_ASSERT(t->ndim >= 0 && t->ndim <= ORIN_ST_MAX_DIMS, "'%s': ndim %d", t->name, t->ndim);
        /* Dtypes without a known element size (sub-byte ones, future ones)
         * are admitted for their bounds only, and marked unknown. */
        size_t want = elem_size(t->dtype_name);
        if (!want) {
            FUZZ_ASSERT(!t->dtype_known, "'%s': %s marked known", t->name, t->dtype_name);
            want = 1;
        }
        for (int d = 0; d < t->ndim; d++) {
            FUZZ_ASSERT(t->shape[d] >= 0, "'%s': negative dim", t->name);
            FUZZ_ASSERT(!__builtin_mul_overflow(want, (size_t)t->shape[d], &want),
                        "'%s': the shape's byte size overflows", t->name);
        }
        if (elem_size(t->dtype_name))
            FUZZ_ASSERT(want == t->nbytes, "'%s': %zu bytes for a shape of %zu", t->name,
                        t->nbytes, want);
        if (t->nbytes)
            sink ^= p[0] ^ p[t->nbytes - 1];
    }
    FUZZ_ASSERT(orin_st_at(ar, n) == NULL, "orin_st_at past the end");
    (void)sink;
    orin_st_close(ar);
    return 0;
}
