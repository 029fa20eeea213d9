// int8's GEMV kernels on tiles, in a translation unit of their own
// (cuda_qmma_gemv.cuh says why).
#include "cuda_qmma_gemv.cuh"

template void qmma_launch<FMT_INT8>(const orin_exec *, orin_dtype, qmma_mode, const qmma_params &,
                                  unsigned, size_t, int);
template int qmma_allow_smem_of<FMT_INT8>(const char *);
