/* The shared call checks of orin/op_check.h that no CPU op reaches: the norm in
 * front of the fused products (orin_norm_in) and their outputs against it,
 * whose ops only CUDA registers.
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

/* The bad calls: each a good norm with one thing broken. */
static void weight_width(orin_norm_in *n) { n->weight.shape[0] = D - 1; }
static void x_out_rows(orin_norm_in *n) { n->x_out = rows_of(out_buf, 1); }
static void x_out_over_x(orin_norm_in *n) { n->x_out = rows_of(x_buf, 2); }
static void x_out_over_residual(orin_norm_in *n) { n->x_out = rows_of(res_buf, 2); }
static void residual_rows(orin_norm_in *n) { n->residual = rows_of(res_buf, 1); }
static void residual_dtype(orin_norm_in *n) { n->residual.dtype = ORIN_F16; }
static void eps_negative(orin_norm_in *n) { n->eps = -1.0f; }
static void eps_nan(orin_norm_in *n) { n->eps = NAN; }
static void x_out_missing(orin_norm_in *n) { n->x_out.data = NULL; }

static const struct {
    const char *what, *needle;
    void (*breaks)(orin_norm_in *);
} bad_calls[] = {
    {"weight of the wrong width", "norm.weight", weight_width},
    {"x_out of other rows", "norm.x_out", x_out_rows},
    {"x_out over x", "norm.x_out", x_out_over_x},
    {"x_out over the residual", "norm.residual", x_out_over_residual},
    {"residual of other rows", "norm.residual", residual_rows},
    {"residual of another dtype", "norm.residual", residual_dtype},
    {"negative eps", "norm.eps", eps_negative},
    {"NaN eps", "norm.eps", eps_nan},
    {"no x_out", "norm.x_out", x_out_missing},
};

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
    for (size_t i = 0; i < sizeof bad_calls / sizeof bad_calls[0]; i++) {
        norm = good_norm();
        bad_calls[i].breaks(&norm);
        expect_error(bad_calls[i].what, &norm, bad_calls[i].needle);
    }

    /* a product's output: apart from norm.x_out (half of it overlapping too) */
    norm = good_norm();
    const orin_tensor y = rows_of(x_buf, 2), y_over = rows_of(out_buf + D, 1);
    CHECK(orin_check_norm_out("matmul.qkv", &norm, "y[0]", &y) == 0, "y apart: %s",
          orin_error());
    CHECK(orin_check_norm_out("matmul.qkv", &none, "y[0]", &y_over) == 0, "no norm: %s",
          orin_error());
    orin_error_clear();
    CHECK(orin_check_norm_out("matmul.qkv", &norm, "y[0]", &y_over) != 0 &&
              strstr(orin_error(), "y[0]") && strstr(orin_error(), "norm.x_out"),
          "y over norm.x_out: \"%s\"", orin_error());
    return test_finish();
}
