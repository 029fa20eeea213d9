// compute-sanitizer racecheck probe (bench/notes/fa2-prefill.md): does racecheck
// handle a plain block reduction (orin_cu_block_sum), launched plainly and with
// programmatic dependent launch (any argument), outside orin's plugins?
//   nvcc -gencode=arch=compute_90a,code=sm_90a -lineinfo -O2 -I core/include \
//     scripts/racecheck_probe.cu -o /tmp/probe && compute-sanitizer --tool racecheck /tmp/probe [pdl]
#include "orin/cuda_util.cuh"
#include <cstdio>

__global__ void __launch_bounds__(256) probe_sum(const float *x, float *out, int n)
{
    __shared__ float scratch[32];
    orin_cu_allow_next();
    orin_cu_wait_prior();
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        v += x[(size_t)blockIdx.x * n + i];
    v = orin_cu_block_sum(v, scratch);
    if (threadIdx.x == 0)
        out[blockIdx.x] = v;
}

int main(int argc, char **argv)
{
    const bool pdl = argc > 1;
    const int rows = 7, n = 1000;
    float *x, *out;
    cudaMalloc(&x, rows * n * sizeof(float));
    cudaMalloc(&out, rows * sizeof(float));
    cudaMemset(x, 0, rows * n * sizeof(float));
    for (int rep = 0; rep < 3; rep++) {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr = {};
        cfg.gridDim = dim3(rows);
        cfg.blockDim = dim3(256);
        if (pdl) {
            attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr.val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = &attr;
            cfg.numAttrs = 1;
        }
        cudaLaunchKernelEx(&cfg, probe_sum, (const float *)x, out, n);
    }
    cudaError_t e = cudaDeviceSynchronize();
    printf("probe (%s): %s\n", pdl ? "pdl" : "plain", cudaGetErrorString(e));
    return e != cudaSuccess;
}
