/* The shared call checks of orin/op_check.h that no CPU op reaches: the norm in
 * front of the fused products (orin_norm_in), whose ops only CUDA registers.
 * Each bad call must fail with one line naming the tensor; a good one passes. */
#include "test_util.h"
#include "orin/error.h"
#include "orin/op_check.h"

#include <math.h>
#include <string.h>

enum { D = 64 };
static float x_buf[2 * D], res_buf[2 * D], w_buf[D], out_buf[2 * D];

static orin_tensor rows_of(float *data, int64_t rows)
{
    const int64_t dims[2] = {rows, D};
    return orin_tensor_make(data, ORIN_F32, ORIN_DEVICE_CPU, 2, dims);
}

static orin_norm_in good_norm(void)
{
    const int64_t d = D;
    return (orin_norm_in){
        .residual = rows_of(res_buf, 2),
        .weight = orin_tensor_make(w_buf, ORIN_F32, ORIN_DEVICE_CPU, 1, &d),
        .x_out = rows_of(out_buf, 2),
        .eps = 1e-6f,
    };
}

/* check(norm) fails and its message holds `needle`. */
static void expect_error(const char *what, const orin_norm_in *norm, const char *needle)
{
    const orin_tensor x = rows_of(x_buf, 2);
    orin_error_clear();
    const int rc = orin_check_norm_in("matmul.qkv", norm, &x, ORIN_DEVICE_CPU, ORIN_F32);
    CHECK(rc != 0, "%s: accepted", what);
    CHECK(rc == 0 || strstr(orin_error(), needle) != NULL, "%s: \"%s\" lacks \"%s\"", what,
          orin_error(), needle);
    CHECK(rc == 0 || strchr(orin_error(), '\n') == NULL, "%s: more than one line", what);
}

int main(void)
{
    const orin_tensor x = rows_of(x_buf, 2);
    orin_norm_in norm = good_norm();
    CHECK(orin_check_norm_in("matmul.qkv", &norm, &x, ORIN_DEVICE_CPU, ORIN_F32) == 0,
          "a good norm: %s", orin_error());
    norm.residual = (orin_tensor){0};
    CHECK(orin_check_norm_in("matmul.qkv", &norm, &x, ORIN_DEVICE_CPU, ORIN_F32) == 0,
          "no residual: %s", orin_error());
    const orin_norm_in none = {0}; /* no norm: nothing to check */
    CHECK(orin_check_norm_in("matmul.qkv", &none, &x, ORIN_DEVICE_CPU, ORIN_F32) == 0,
          "no norm: %s", orin_error());

    norm = good_norm();
    const int64_t short_d = D - 1;
    norm.weight.shape[0] = short_d;
    expect_error("weight of the wrong width", &norm, "norm.weight");
    norm = good_norm();
    norm.x_out = rows_of(out_buf, 1);
    expect_error("x_out of other rows", &norm, "norm.x_out");
    norm = good_norm();
    norm.x_out = rows_of(x_buf, 2);
    expect_error("x_out over x", &norm, "norm.x_out");
    norm = good_norm();
    norm.x_out = rows_of(res_buf, 2);
    expect_error("x_out over the residual", &norm, "norm.residual");
    norm = good_norm();
    norm.residual = rows_of(res_buf, 1);
    expect_error("residual of other rows", &norm, "norm.residual");
    norm = good_norm();
    norm.residual.dtype = ORIN_F16;
    expect_error("residual of another dtype", &norm, "norm.residual");
    norm = good_norm();
    norm.eps = -1.0f;
    expect_error("negative eps", &norm, "norm.eps");
    norm = good_norm();
    norm.eps = NAN;
    expect_error("NaN eps", &norm, "norm.eps");
    norm = good_norm();
    norm.x_out.data = NULL;
    expect_error("no x_out", &norm, "norm.x_out");
    return test_finish();
}
