// PLACEHOLDER (being written): fa2 CUDA decode. Replaced before any commit.
#include "cuda.h"
#include "orin/error.h"
extern "C" int fa2_cuda_decode(const orin_exec *, const orin_attention_args *, orin_dtype)
{
    return orin_error_set("attention.decode (fa2): cuda kernel not built yet");
}
extern "C" size_t fa2_cuda_decode_workspace_size(const orin_attention_args *) { return 0; }
