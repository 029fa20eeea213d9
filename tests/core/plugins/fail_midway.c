/* Adds two ops, then fails: neither may stay registered. */
#include "orin/plugin.h"
#include "orin/error.h"

static int run(const orin_exec *ex, const void *args) { return 0; }

static int register_ops(orin_registry *reg)
{
    const orin_op_impl f32 = {
        .op = "test.midway", .provider = "m", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F32,
        .run = run,
    };
    const orin_op_impl f16 = {
        .op = "test.midway", .provider = "m", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F16,
        .run = run,
    };
    if (orin_registry_add(reg, &f32) || orin_registry_add(reg, &f16))
        return -1;
    return orin_error_set("midway: kernel table for sm_00 is missing");
}

ORIN_PLUGIN_DEFINE("test_fail_midway", "1.0", "fails after two adds", register_ops)
