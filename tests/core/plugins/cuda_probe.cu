// The CUDA half of the probe plugin (cuda_probe.c).
#include <cuda_runtime.h>

#include "orin/error.h"

// out[i] = scale * i. Launch: 1-D grid of 256-thread blocks covering n; one
// element a thread, bound by the store bandwidth (it is a probe, not a kernel
// anyone times).
__global__ void probe_fill_kernel(float *out, int n, float scale)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = scale * (float)i;
}

extern "C" int probe_fill_launch(float *out, int n, float scale, void *stream)
{
    const int threads = 256;
    probe_fill_kernel<<<(n + threads - 1) / threads, threads, 0, (cudaStream_t)stream>>>(out, n,
                                                                                          scale);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return orin_error_set("test.cuda_fill: launch failed: %s", cudaGetErrorString(err));
    return 0;
}
