/* Private to the core: the hooks device.c uses to reach the CUDA device, which is
 * compiled only where the CUDA toolkit was found (ORIN_HAVE_CUDA). */
#ifndef ORIN_DEVICE_INTERNAL_H
#define ORIN_DEVICE_INTERNAL_H

#include "orin/device.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef ORIN_HAVE_CUDA
/* Number of visible GPUs. When there are none it returns 0 or -1 and writes
 * the reason ("cudaGetDeviceCount: no CUDA-capable device is detected") into
 * `why`; it never touches the current error, since asking is not failing. */
int orin_cuda_device_count(char *why, size_t why_cap);
/* Opens GPU `index` with its own non-blocking stream; NULL with an error. */
orin_device *orin_cuda_device_open(int index);
/* dst (dst_dt) = src (src_dt), n elements, both in device memory, queued on
 * `stream` (a cudaStream_t); f32, f16, bf16 in any pair (convert_cuda.cu). */
int orin_cuda_convert(void *dst, orin_dtype dst_dt, const void *src, orin_dtype src_dt, size_t n,
                      void *stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
