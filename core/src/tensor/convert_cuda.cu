// dtype conversion on the GPU, for weights uploaded in one dtype and computed in
// another (device_cuda.c's upload). f16 and bf16 widen to f32 exactly, so going
// through f32 rounds once: the result equals torch's tensor.to(dtype).
#include "orin/cuda_util.cuh"

#include "device_internal.h"

// dst[i] = src[i] converted, grid-stride. Launch: 256-thread blocks, at most
// 4 * 132 * 8 blocks; one element a thread a pass, bound by memory bandwidth
// (it runs once per weight at load, a few GB in all).
template <typename D, typename S>
__global__ void convert_kernel(D *__restrict__ dst, const S *__restrict__ src, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = orin_cu_from_f32<D>(orin_cu_f32(src[i]));
}

template <typename D, typename S>
static int launch(void *dst, const void *src, size_t n, cudaStream_t stream)
{
    const int threads = 256;
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 4224)
        blocks = 4224;
    convert_kernel<D, S><<<(unsigned)blocks, threads, 0, stream>>>((D *)dst, (const S *)src, n);
    return 0;
}

template <typename D>
static int launch_from(orin_dtype src_dt, void *dst, const void *src, size_t n,
                       cudaStream_t stream)
{
    ORIN_CU_DISPATCH(src_dt, "convert", S, return launch<D, S>(dst, src, n, stream));
    return 0;
}

extern "C" int orin_cuda_convert(void *dst, orin_dtype dst_dt, const void *src, orin_dtype src_dt,
                                 size_t n, void *stream)
{
    if (!n)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (dst_dt == src_dt)
        return orin_cu_call("convert", "cudaMemcpyAsync",
                            cudaMemcpyAsync(dst, src, n * orin_dtype_size(dst_dt),
                                            cudaMemcpyDeviceToDevice, s));
    int rc;
    ORIN_CU_DISPATCH(dst_dt, "convert", D, rc = launch_from<D>(src_dt, dst, src, n, s));
    if (rc != 0)
        return rc;
    return orin_cu_launched("convert", dst_dt, "%zu elements from %s", n,
                            orin_dtype_name(src_dt));
}
