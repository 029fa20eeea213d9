// PLACEHOLDER (being written): fa2 CUDA prefill. Replaced before any commit.
#include "cuda.h"
#include "orin/error.h"
extern "C" int fa2_cuda_prefill(const orin_exec *, const orin_attention_args *, orin_dtype)
{
    return orin_error_set("attention.prefill (fa2): cuda kernel not built yet");
}
extern "C" bool fa2_cuda_supports(const void *, char *, size_t) { return true; }
