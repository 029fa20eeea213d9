/* Private to the core: the hooks device.c uses to reach the CUDA device, which is
 * compiled only where the CUDA toolkit was found (ORIN_HAVE_CUDA). */
#ifndef ORIN_DEVICE_INTERNAL_H
#define ORIN_DEVICE_INTERNAL_H

#include "orin/device.h"

#ifdef ORIN_HAVE_CUDA
/* Number of visible GPUs. When there are none it returns 0 or -1 and writes
 * the reason ("cudaGetDeviceCount: no CUDA-capable device is detected") into
 * `why`; it never touches the current error, since asking is not failing. */
int orin_cuda_device_count(char *why, size_t why_cap);
/* Opens GPU `index` with its own non-blocking stream; NULL with an error. */
orin_device *orin_cuda_device_open(int index);
#endif

#endif
