// attention_fa2's tensor-core prefill for bf16: every tile configuration at
// head_dim 64 and 128, attention.full's kernels (the mma.sync kernel is in
// cuda_prefill_mma.cuh, the Hopper wgmma kernels in cuda_prefill_wgmma.cuh).
#include "cuda_prefill_wgmma.cuh"

int fa2_prefill_mma_bf16(const fa2_prefill_launch *l)
{
    return fa2_launch_prefill_dt<__nv_bfloat16>(l);
}
