/* A plugin with a CUDA kernel, to prove the CUDA build path of plugins (the
 * gencode targets, cudart, ORIN_HAVE_CUDA) and the device vtable end to end:
 * "test.cuda_fill" writes out[i] = scale * i on the CUDA device. Built without
 * CUDA, it registers nothing. */
#include "orin/plugin.h"

typedef struct probe_fill_args {
    float *out;
    int n;
    float scale;
} probe_fill_args;

#ifdef ORIN_HAVE_CUDA
int probe_fill_launch(float *out, int n, float scale, void *stream); /* cuda_probe.cu */

static int fill(const orin_exec *ex, const void *args)
{
    const probe_fill_args *a = args;
    return probe_fill_launch(a->out, a->n, a->scale, ex->device->stream);
}

static const orin_op_impl impls[] = {
    {.op = "test.cuda_fill", .provider = "probe", .device = ORIN_DEVICE_CUDA, .dtype = ORIN_F32,
     .run = fill, .flags = ORIN_OP_GRAPH_SAFE},
};

static int register_ops(orin_registry *reg)
{
    return orin_registry_add_all(reg, impls, sizeof impls / sizeof impls[0]);
}
#else
static int register_ops(orin_registry *reg)
{
    return 0;
}
#endif

ORIN_PLUGIN_DEFINE("test_cuda_probe", "1.0", "CUDA build probe", register_ops)
