/* Tensor basics: dtype names and sizes, shapes, strides, contiguity. */
#include "test_util.h"
#include "orin/tensor.h"

#include <string.h>

static void test_dtypes(void)
{
    static const struct {
        const char *name;
        orin_dtype dt;
        size_t size;
    } canon[] = {
        {"f32", ORIN_F32, 4}, {"f16", ORIN_F16, 2}, {"bf16", ORIN_BF16, 2},
        {"i32", ORIN_I32, 4}, {"i8", ORIN_I8, 1},   {"u8", ORIN_U8, 1},
    };
    for (size_t i = 0; i < sizeof canon / sizeof canon[0]; i++) {
        orin_dtype dt = ORIN_DTYPE_COUNT;
        CHECK(strcmp(orin_dtype_name(canon[i].dt), canon[i].name) == 0, "name of %s",
              canon[i].name);
        CHECK(orin_dtype_size(canon[i].dt) == canon[i].size, "size of %s", canon[i].name);
        CHECK(orin_dtype_from_name(canon[i].name, &dt) == 0 && dt == canon[i].dt, "parse %s",
              canon[i].name);
    }
    static const struct {
        const char *name;
        orin_dtype dt;
    } aliases[] = {
        {"fp32", ORIN_F32},    {"float32", ORIN_F32},  {"fp16", ORIN_F16},
        {"float16", ORIN_F16}, {"bfloat16", ORIN_BF16},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        orin_dtype dt = ORIN_DTYPE_COUNT;
        CHECK(orin_dtype_from_name(aliases[i].name, &dt) == 0 && dt == aliases[i].dt,
              "parse %s", aliases[i].name);
    }
    orin_dtype dt = ORIN_I8;
    CHECK(orin_dtype_from_name("fp64", &dt) == -1 && dt == ORIN_I8, "fp64 is unknown");
    CHECK(orin_dtype_from_name("F32", &dt) == -1, "names are case-sensitive");
    CHECK(orin_dtype_from_name(NULL, &dt) == -1, "NULL name");
    CHECK(orin_dtype_size(ORIN_DTYPE_COUNT) == 0, "size of an invalid dtype");
    CHECK(strcmp(orin_dtype_name(ORIN_DTYPE_COUNT), "?") == 0, "name of an invalid dtype");
    CHECK(strcmp(orin_device_kind_name(ORIN_DEVICE_CPU), "cpu") == 0);
    CHECK(strcmp(orin_device_kind_name(ORIN_DEVICE_CUDA), "cuda") == 0);
}

static void test_shapes(void)
{
    float buf[24];
    const int64_t dims[] = {2, 3, 4};
    orin_tensor t = orin_tensor_make(buf, ORIN_F32, ORIN_DEVICE_CPU, 3, dims);
    CHECK(t.data == buf && t.ndim == 3 && t.dtype == ORIN_F32);
    CHECK(t.shape[0] == 2 && t.shape[1] == 3 && t.shape[2] == 4);
    CHECK(t.stride[0] == 12 && t.stride[1] == 4 && t.stride[2] == 1, "strides %lld %lld %lld",
          (long long)t.stride[0], (long long)t.stride[1], (long long)t.stride[2]);
    CHECK(orin_tensor_numel(&t) == 24);
    CHECK(orin_tensor_nbytes(&t) == 96);
    CHECK(orin_tensor_is_contiguous(&t));

    /* A column slice [2, 3, 2] of it is not contiguous. */
    orin_tensor slice = t;
    slice.shape[2] = 2;
    CHECK(!orin_tensor_is_contiguous(&slice), "a slice of the last dim");
    /* A size-1 dimension may carry any stride. */
    const int64_t dims1[] = {3, 1, 4};
    orin_tensor one = orin_tensor_make(buf, ORIN_BF16, ORIN_DEVICE_CPU, 3, dims1);
    one.stride[1] = 999;
    CHECK(orin_tensor_is_contiguous(&one));
    CHECK(orin_tensor_nbytes(&one) == 24);

    orin_tensor scalar = orin_tensor_make(buf, ORIN_I32, ORIN_DEVICE_CPU, 0, NULL);
    CHECK(orin_tensor_numel(&scalar) == 1 && orin_tensor_nbytes(&scalar) == 4, "rank 0");

    const int64_t dims5[] = {1, 1, 1, 1, 1};
    orin_tensor bad = orin_tensor_make(buf, ORIN_F32, ORIN_DEVICE_CPU, 5, dims5);
    CHECK(bad.data == NULL, "rank 5 gives no data");

    const int64_t empty_dims[] = {0, 8};
    orin_tensor empty = orin_tensor_make(buf, ORIN_F16, ORIN_DEVICE_CPU, 2, empty_dims);
    CHECK(orin_tensor_numel(&empty) == 0 && orin_tensor_nbytes(&empty) == 0, "empty tensor");
}

int main(void)
{
    test_dtypes();
    test_shapes();
    return test_finish();
}
