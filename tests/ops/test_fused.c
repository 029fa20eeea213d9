/* The fused ops against the sequences of plain ops they stand for (orin/ops.h),
 * on fresh random inputs with poisoned outputs, both run by the same provider
 * on the target device, and the products against a double reference too.
 * Only CUDA registers fused ops: on the host the suite has nothing to test and
 * says so (ctest runs it as ops.fused.cuda, label gpu).
 *
 * usage: test_ops_fused --device cuda */
#include "ops_test.h"

#include "orin/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const orin_dtype float_dtypes[] = {ORIN_F32, ORIN_F16, ORIN_BF16};

static const orin_op_impl *impl_of(const char *op, orin_dtype dt)
{
    return ops_test_impl(op, "common", dt);
}

static orin_exec exec_with_workspace(const orin_op_impl *impl, const void *args)
{
    orin_exec ex = ops_test_exec(0);
    size_t ws = impl && impl->workspace_size ? impl->workspace_size(args) : 0;
    ex.workspace = ws ? ops_workspace(ws) : NULL;
    ex.workspace_size = ws;
    return ex;
}

static int run(const orin_op_impl *impl, const void *args)
{
    if (!impl)
        return -1;
    orin_exec ex = exec_with_workspace(impl, args);
    orin_error_clear();
    int rc = impl->run(&ex, args);
    CHECK(rc == 0, "%s %s: %s", impl->op, orin_dtype_name(impl->dtype), orin_error());
    return rc;
}

/* got within tol of want, both as read back. The error scale of an element is
 * |want| plus the tensor's mean magnitude: these outputs (norms, rotations)
 * are computed from inputs of that magnitude, and a rotated pair can cancel
 * to far below it (x1 c - x2 s), where rounding is relative to the inputs. */
static void check_same(const char *what, ops_buf *got, const ops_buf *want, double tol)
{
    double *ref = malloc(want->n * sizeof(double)), *scale = malloc(want->n * sizeof(double));
    double mean_abs = 0;
    for (size_t i = 0; i < want->n; i++)
        mean_abs += fabs(want->value[i]) / (double)want->n;
    for (size_t i = 0; i < want->n; i++) {
        ref[i] = want->value[i];
        scale[i] = fabs(want->value[i]) + mean_abs;
    }
    ops_check_close(what, got, ref, scale, tol, 0);
    free(ref);
    free(scale);
}

/* ---- add_rmsnorm ---- */

static void add_rmsnorm_case(orin_dtype dt, int64_t rows, int64_t d, bool residual)
{
    ops_rng rng = {.state = 10 + (uint64_t)(rows * d)};
    ops_buf x1 = ops_buf_random(&rng, dt, rows * d, -3, 3), x2 = ops_buf_copy(&x1);
    ops_buf r = ops_buf_random(&rng, dt, rows * d, -3, 3);
    ops_buf w = ops_buf_random(&rng, dt, d, -2, 2);
    ops_buf out1 = ops_buf_nan(dt, rows * d), out2 = ops_buf_nan(dt, rows * d);
    const int64_t dims[2] = {rows, d};
    orin_add_rmsnorm_args fused = {
        .x = ops_tensor(x1.data, dt, 2, dims),
        .residual = residual ? ops_tensor(r.data, dt, 2, dims) : (orin_tensor){0},
        .weight = ops_tensor(w.data, dt, 1, &d),
        .out = ops_tensor(out1.data, dt, 2, dims),
        .eps = 1e-6f,
    };
    orin_add_args add = {.a = ops_tensor(x2.data, dt, 2, dims), .b = ops_tensor(r.data, dt, 2, dims)};
    add.out = add.a;
    orin_rmsnorm_args norm = {.x = add.a, .weight = fused.weight,
                              .out = ops_tensor(out2.data, dt, 2, dims), .eps = 1e-6f};
    char what[128];
    snprintf(what, sizeof what, "add_rmsnorm %s [%lld, %lld]%s", orin_dtype_name(dt),
             (long long)rows, (long long)d, residual ? " + residual" : "");
    if (ops_test_selected(what) && run(impl_of(ORIN_OP_ADD_RMSNORM, dt), &fused) == 0 &&
        (!residual || run(impl_of(ORIN_OP_ADD, dt), &add) == 0) &&
        run(impl_of(ORIN_OP_RMSNORM, dt), &norm) == 0) {
        ops_buf_fetch(&x1);
        ops_buf_fetch(&x2);
        ops_buf_fetch(&out1);
        ops_buf_fetch(&out2);
        CHECK(memcmp(x1.data, x2.data, x1.n * orin_dtype_size(dt)) == 0,
              "%s: x after the add differs from add's", what);
        check_same(what, &out1, &out2, ops_tol(dt));
    }
    ops_release();
    ops_buf_free(&x1);
    ops_buf_free(&x2);
    ops_buf_free(&r);
    ops_buf_free(&w);
    ops_buf_free(&out1);
    ops_buf_free(&out2);
}

/* ---- matmul.qkv ---- */

/* y = x . w^T + b in double, and its error scale sum |x w| + |b|. */
static void matmul_reference(const ops_buf *x, const ops_buf *w, const ops_buf *b, int64_t n,
                             int64_t in, int64_t out, double *ref, double *scale)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
            double sum = b ? b->value[o] : 0, mag = b ? fabs(b->value[o]) : 0;
            for (int64_t k = 0; k < in; k++) {
                double p = x->value[i * in + k] * w->value[o * in + k];
                sum += p;
                mag += fabs(p);
            }
            ref[i * out + o] = sum;
            scale[i * out + o] = mag;
        }
}

/* Rows [row0, row0 + rows) of a [*, width] buffer, as a buffer of its own
 * (not to be freed). */
static ops_buf rows_view(const ops_buf *all, int64_t row0, int64_t rows, int64_t width)
{
    const size_t at = (size_t)(row0 * width);
    return (ops_buf){.dt = all->dt, .n = (size_t)(rows * width),
                     .data = (char *)all->data + at * orin_dtype_size(all->dt),
                     .value = all->value + at};
}

/* stacked: w[0..2] (and the biases) back to back in one buffer, as the models
 * load them: the prefill's one-product path. */
static void qkv_case(orin_dtype dt, int64_t n, int64_t in, const int64_t outs[3], bool bias,
                     bool stacked)
{
    ops_rng rng = {.state = 20 + (uint64_t)(n * in + outs[0])};
    ops_buf x = ops_buf_random(&rng, dt, n * in, -1, 1);
    ops_buf w[3], b[3], y[3], y_seq[3];
    const int64_t total = outs[0] + outs[1] + outs[2];
    ops_buf w_all = ops_buf_random(&rng, dt, stacked ? total * in : 1, -1, 1);
    ops_buf b_all = ops_buf_random(&rng, dt, stacked ? total : 1, -1, 1);
    orin_matmul_qkv_args fused = {.x = ops_tensor(x.data, dt, 2, (int64_t[]){n, in})};
    for (int i = 0, row = 0; i < 3; row += (int)outs[i], i++) {
        w[i] = stacked ? rows_view(&w_all, row, outs[i], in)
                       : ops_buf_random(&rng, dt, outs[i] * in, -1, 1);
        b[i] = stacked ? rows_view(&b_all, row, outs[i], 1) : ops_buf_random(&rng, dt, outs[i], -1, 1);
        y[i] = ops_buf_nan(dt, n * outs[i]);
        y_seq[i] = ops_buf_nan(dt, n * outs[i]);
        fused.w[i] = ops_tensor(w[i].data, dt, 2, (int64_t[]){outs[i], in});
        if (bias)
            fused.bias[i] = ops_tensor(b[i].data, dt, 1, &outs[i]);
        fused.y[i] = ops_tensor(y[i].data, dt, 2, (int64_t[]){n, outs[i]});
    }
    char what[160];
    snprintf(what, sizeof what, "matmul.qkv %s x [%lld, %lld], outs %lld/%lld/%lld%s%s",
             orin_dtype_name(dt), (long long)n, (long long)in, (long long)outs[0],
             (long long)outs[1], (long long)outs[2], bias ? " + bias" : "",
             stacked ? ", stacked" : "");
    if (run(impl_of(ORIN_OP_MATMUL_QKV, dt), &fused) == 0) {
        for (int i = 0; i < 3; i++) {
            orin_matmul_args m = {.x = fused.x, .w = fused.w[i], .bias = fused.bias[i],
                                  .y = ops_tensor(y_seq[i].data, dt, 2, (int64_t[]){n, outs[i]})};
            if (run(impl_of(ORIN_OP_MATMUL, dt), &m) != 0)
                break;
            ops_buf_fetch(&y[i]);
            ops_buf_fetch(&y_seq[i]);
            double *ref = malloc(y[i].n * sizeof(double)), *scale = malloc(y[i].n * sizeof(double));
            matmul_reference(&x, &w[i], bias ? &b[i] : NULL, n, in, outs[i], ref, scale);
            char part[200];
            snprintf(part, sizeof part, "%s: y[%d] vs double", what, i);
            ops_check_close(part, &y[i], ref, scale, ops_tol(dt), ops_atol(dt));
            snprintf(part, sizeof part, "%s: y[%d] vs matmul", what, i);
            ops_check_close(part, &y[i], y_seq[i].value, scale, ops_tol(dt), ops_atol(dt));
            free(ref);
            free(scale);
        }
    }
    ops_release();
    ops_buf_free(&x);
    for (int i = 0; i < 3; i++) {
        if (!stacked) {
            ops_buf_free(&w[i]);
            ops_buf_free(&b[i]);
        }
        ops_buf_free(&y[i]);
        ops_buf_free(&y_seq[i]);
    }
    ops_buf_free(&w_all);
    ops_buf_free(&b_all);
}

/* ---- matmul.swiglu ---- */

/* stacked: w_up right after w_gate in one buffer, as the models load them (the
 * prefill's one-product path). */
static void swiglu_case(orin_dtype dt, int64_t n, int64_t in, int64_t f, bool stacked)
{
    ops_rng rng = {.state = 30 + (uint64_t)(n * in + f)};
    ops_buf x = ops_buf_random(&rng, dt, n * in, -1, 1);
    ops_buf w_all = ops_buf_random(&rng, dt, stacked ? 2 * f * in : 1, -1, 1);
    ops_buf wg = stacked ? rows_view(&w_all, 0, f, in) : ops_buf_random(&rng, dt, f * in, -1, 1);
    ops_buf wu = stacked ? rows_view(&w_all, f, f, in) : ops_buf_random(&rng, dt, f * in, -1, 1);
    ops_buf out = ops_buf_nan(dt, n * f), gate = ops_buf_nan(dt, n * f), up = ops_buf_nan(dt, n * f);
    const int64_t xd[2] = {n, in}, wd[2] = {f, in}, od[2] = {n, f};
    orin_matmul_swiglu_args fused = {
        .x = ops_tensor(x.data, dt, 2, xd),
        .w_gate = ops_tensor(wg.data, dt, 2, wd),
        .w_up = ops_tensor(wu.data, dt, 2, wd),
        .out = ops_tensor(out.data, dt, 2, od),
    };
    orin_matmul_args g = {.x = fused.x, .w = fused.w_gate, .y = ops_tensor(gate.data, dt, 2, od)};
    orin_matmul_args u = {.x = fused.x, .w = fused.w_up, .y = ops_tensor(up.data, dt, 2, od)};
    orin_swiglu_args s = {.gate = g.y, .up = u.y, .out = g.y};
    char what[128];
    snprintf(what, sizeof what, "matmul.swiglu %s x [%lld, %lld], f %lld%s", orin_dtype_name(dt),
             (long long)n, (long long)in, (long long)f, stacked ? ", stacked" : "");
    if (run(impl_of(ORIN_OP_MATMUL_SWIGLU, dt), &fused) == 0 &&
        run(impl_of(ORIN_OP_MATMUL, dt), &g) == 0 && run(impl_of(ORIN_OP_MATMUL, dt), &u) == 0 &&
        run(impl_of(ORIN_OP_SWIGLU, dt), &s) == 0) {
        ops_buf_fetch(&out);
        ops_buf_fetch(&gate);
        check_same(what, &out, &gate, ops_tol(dt));
    }
    ops_release();
    ops_buf_free(&x);
    if (!stacked) {
        ops_buf_free(&wg);
        ops_buf_free(&wu);
    }
    ops_buf_free(&w_all);
    ops_buf_free(&out);
    ops_buf_free(&gate);
    ops_buf_free(&up);
}

/* ---- the norm in front of matmul.qkv and matmul.swiglu (orin_norm_in) ---- */

/* Outputs of the fused call with the norm and of the same op without it over
 * add_rmsnorm's rows: equal bit for bit (the float products run the norm
 * apart first, into their workspace; test_quant.c has the GEMV that folds it). */
static void qkv_norm_case(orin_dtype dt, int64_t n, int64_t in, const int64_t outs[3],
                          bool residual)
{
    ops_rng rng = {.state = 60 + (uint64_t)(n * in + outs[0])};
    ops_buf x = ops_buf_random(&rng, dt, (size_t)(n * in), -3, 3);
    ops_norm_fixture f;
    if (ops_norm_fixture_make(&f, &x, n, in, residual, 61 + (uint64_t)in) != 0) {
        ops_buf_free(&x);
        ops_norm_fixture_free(&f);
        return;
    }
    ops_buf w[3], y[3], y_ref[3];
    orin_matmul_qkv_args fused = {.x = ops_tensor(x.data, dt, 2, (int64_t[]){n, in}),
                                  .norm = f.norm};
    orin_matmul_qkv_args plain = {.x = f.h_t};
    for (int i = 0; i < 3; i++) {
        w[i] = ops_buf_random(&rng, dt, (size_t)(outs[i] * in), -1, 1);
        y[i] = ops_buf_nan(dt, (size_t)(n * outs[i]));
        y_ref[i] = ops_buf_nan(dt, (size_t)(n * outs[i]));
        fused.w[i] = plain.w[i] = ops_tensor(w[i].data, dt, 2, (int64_t[]){outs[i], in});
        fused.y[i] = ops_tensor(y[i].data, dt, 2, (int64_t[]){n, outs[i]});
        plain.y[i] = ops_tensor(y_ref[i].data, dt, 2, (int64_t[]){n, outs[i]});
    }
    char what[160];
    snprintf(what, sizeof what, "matmul.qkv %s + norm%s, x [%lld, %lld], outs %lld/%lld/%lld",
             orin_dtype_name(dt), residual ? " + residual" : "", (long long)n, (long long)in,
             (long long)outs[0], (long long)outs[1], (long long)outs[2]);
    const orin_op_impl *impl = impl_of(ORIN_OP_MATMUL_QKV, dt);
    if (run(impl, &fused) == 0 && run(impl, &plain) == 0) {
        ops_norm_fixture_check(&f, &x, what);
        for (int i = 0; i < 3; i++) {
            char part[200];
            snprintf(part, sizeof part, "%s: y[%d]", what, i);
            ops_check_bitwise(part, &y[i], &y_ref[i]);
        }
    }
    ops_release();
    ops_norm_fixture_free(&f);
    ops_buf_free(&x);
    for (int i = 0; i < 3; i++) {
        ops_buf_free(&w[i]);
        ops_buf_free(&y[i]);
        ops_buf_free(&y_ref[i]);
    }
}

static void swiglu_norm_case(orin_dtype dt, int64_t n, int64_t in, int64_t f_out, bool residual)
{
    ops_rng rng = {.state = 70 + (uint64_t)(n * in + f_out)};
    ops_buf x = ops_buf_random(&rng, dt, (size_t)(n * in), -3, 3);
    ops_norm_fixture f;
    if (ops_norm_fixture_make(&f, &x, n, in, residual, 71 + (uint64_t)in) != 0) {
        ops_buf_free(&x);
        ops_norm_fixture_free(&f);
        return;
    }
    const int64_t xd[2] = {n, in}, wd[2] = {f_out, in}, od[2] = {n, f_out};
    ops_buf wg = ops_buf_random(&rng, dt, (size_t)(f_out * in), -1, 1);
    ops_buf wu = ops_buf_random(&rng, dt, (size_t)(f_out * in), -1, 1);
    ops_buf out = ops_buf_nan(dt, (size_t)(n * f_out)), ref = ops_buf_nan(dt, (size_t)(n * f_out));
    orin_matmul_swiglu_args fused = {
        .x = ops_tensor(x.data, dt, 2, xd),
        .norm = f.norm,
        .w_gate = ops_tensor(wg.data, dt, 2, wd),
        .w_up = ops_tensor(wu.data, dt, 2, wd),
        .out = ops_tensor(out.data, dt, 2, od),
    };
    orin_matmul_swiglu_args plain = {.x = f.h_t, .w_gate = fused.w_gate, .w_up = fused.w_up,
                                     .out = ops_tensor(ref.data, dt, 2, od)};
    char what[160];
    snprintf(what, sizeof what, "matmul.swiglu %s + norm%s, x [%lld, %lld], f %lld",
             orin_dtype_name(dt), residual ? " + residual" : "", (long long)n, (long long)in,
             (long long)f_out);
    const orin_op_impl *impl = impl_of(ORIN_OP_MATMUL_SWIGLU, dt);
    if (run(impl, &fused) == 0 && run(impl, &plain) == 0) {
        ops_norm_fixture_check(&f, &x, what);
        ops_check_bitwise(what, &out, &ref);
    }
    ops_release();
    ops_norm_fixture_free(&f);
    ops_buf_free(&x);
    ops_buf_free(&wg);
    ops_buf_free(&wu);
    ops_buf_free(&out);
    ops_buf_free(&ref);
}

/* ---- matmul.gelu, matmul.add ---- */

/* bias_offset: the bias a view that many elements into its buffer (off 16-byte
 * alignment at 1: the epilogue cannot take it, the paths around it run). */
static void matmul_gelu_case(orin_dtype dt, int64_t n, int64_t in, int64_t out, bool bias,
                             int64_t bias_offset, orin_gelu_kind kind)
{
    ops_rng rng = {.state = 50 + (uint64_t)(n * in + out + bias_offset + kind)};
    ops_buf x = ops_buf_random(&rng, dt, n * in, -1, 1);
    ops_buf w = ops_buf_random(&rng, dt, out * in, -0.5, 0.5);
    ops_buf b = ops_buf_random(&rng, dt, out + bias_offset, -1, 1);
    ops_buf y = ops_buf_nan(dt, n * out), y_seq = ops_buf_nan(dt, n * out);
    const int64_t xd[2] = {n, in}, wd[2] = {out, in}, yd[2] = {n, out};
    const orin_tensor bt =
        bias ? ops_tensor((char *)b.data + bias_offset * orin_dtype_size(dt), dt, 1, &out)
             : (orin_tensor){0};
    orin_matmul_gelu_args fused = {
        .x = ops_tensor(x.data, dt, 2, xd), .w = ops_tensor(w.data, dt, 2, wd), .bias = bt,
        .y = ops_tensor(y.data, dt, 2, yd), .kind = kind,
    };
    orin_matmul_args m = {.x = fused.x, .w = fused.w, .bias = bt,
                          .y = ops_tensor(y_seq.data, dt, 2, yd)};
    orin_gelu_args g = {.x = m.y, .out = m.y, .kind = kind};
    char what[160];
    snprintf(what, sizeof what, "matmul.gelu %s x [%lld, %lld], out %lld%s%s, %s",
             orin_dtype_name(dt), (long long)n, (long long)in, (long long)out,
             bias ? " + bias" : "", bias_offset ? " (unaligned)" : "",
             kind == ORIN_GELU_TANH ? "tanh" : "erf");
    if (run(impl_of(ORIN_OP_MATMUL_GELU, dt), &fused) == 0 &&
        run(impl_of(ORIN_OP_MATMUL, dt), &m) == 0 && run(impl_of(ORIN_OP_GELU, dt), &g) == 0) {
        ops_buf_fetch(&y);
        ops_buf_fetch(&y_seq);
        check_same(what, &y, &y_seq, ops_tol(dt));
    }
    ops_release();
    ops_buf_free(&x);
    ops_buf_free(&w);
    ops_buf_free(&b);
    ops_buf_free(&y);
    ops_buf_free(&y_seq);
}

static void matmul_add_case(orin_dtype dt, int64_t n, int64_t in, int64_t out, bool bias,
                            int64_t bias_offset)
{
    ops_rng rng = {.state = 60 + (uint64_t)(n * in + out + bias_offset)};
    ops_buf x = ops_buf_random(&rng, dt, n * in, -1, 1);
    ops_buf w = ops_buf_random(&rng, dt, out * in, -0.5, 0.5);
    ops_buf b = ops_buf_random(&rng, dt, out + bias_offset, -1, 1);
    ops_buf r = ops_buf_random(&rng, dt, n * out, -4, 4), r_seq = ops_buf_copy(&r);
    ops_buf tmp = ops_buf_nan(dt, n * out);
    const int64_t xd[2] = {n, in}, wd[2] = {out, in}, yd[2] = {n, out};
    const orin_tensor bt =
        bias ? ops_tensor((char *)b.data + bias_offset * orin_dtype_size(dt), dt, 1, &out)
             : (orin_tensor){0};
    orin_matmul_args fused = {.x = ops_tensor(x.data, dt, 2, xd),
                              .w = ops_tensor(w.data, dt, 2, wd), .bias = bt,
                              .y = ops_tensor(r.data, dt, 2, yd)};
    orin_matmul_args m = {.x = fused.x, .w = fused.w, .bias = bt,
                          .y = ops_tensor(tmp.data, dt, 2, yd)};
    orin_add_args add = {.a = ops_tensor(r_seq.data, dt, 2, yd), .b = m.y};
    add.out = add.a;
    char what[160];
    snprintf(what, sizeof what, "matmul.add %s x [%lld, %lld], out %lld%s%s",
             orin_dtype_name(dt), (long long)n, (long long)in, (long long)out,
             bias ? " + bias" : "", bias_offset ? " (unaligned)" : "");
    if (run(impl_of(ORIN_OP_MATMUL_ADD, dt), &fused) == 0 &&
        run(impl_of(ORIN_OP_MATMUL, dt), &m) == 0 && run(impl_of(ORIN_OP_ADD, dt), &add) == 0) {
        ops_buf_fetch(&r);
        ops_buf_fetch(&r_seq);
        check_same(what, &r, &r_seq, ops_tol(dt));
    }
    ops_release();
    ops_buf_free(&x);
    ops_buf_free(&w);
    ops_buf_free(&b);
    ops_buf_free(&r);
    ops_buf_free(&r_seq);
    ops_buf_free(&tmp);
}

/* ---- rope_kv_write ---- */

/* rope_shift != 0: rotary positions apart from the cache positions (Qwen3-VL's
 * rope_delta), given as rope_positions; sc: a scaled rope (rope_scaling linear,
 * yarn) in both the fused call and the plain ones. */
static void rope_cache_case_scaled(orin_dtype dt, int64_t n, int64_t heads, int64_t kv_heads,
                                   int64_t hd, bool norms, int32_t pos0, int32_t rope_shift,
                                   const orin_rope_scaling *sc)
{
    enum { SPARE = 5 };
    ops_rng rng = {.state = 40 + (uint64_t)(n * hd + heads)};
    const int64_t cap = pos0 + n + SPARE, row = kv_heads * hd;
    ops_buf q1 = ops_buf_random(&rng, dt, n * heads * hd, -2, 2), q2 = ops_buf_copy(&q1);
    ops_buf k1 = ops_buf_random(&rng, dt, n * row, -2, 2), k2 = ops_buf_copy(&k1);
    ops_buf v = ops_buf_random(&rng, dt, n * row, -2, 2);
    ops_buf qn = ops_buf_random(&rng, dt, hd, -2, 2), kn = ops_buf_random(&rng, dt, hd, -2, 2);
    ops_buf ck1 = ops_buf_random(&rng, dt, cap * row, 5, 6), cv1 = ops_buf_random(&rng, dt, cap * row, 5, 6);
    ops_buf ck2 = ops_buf_copy(&ck1), cv2 = ops_buf_copy(&cv1);
    int32_t *pos = malloc(n * sizeof *pos), *rpos = malloc(n * sizeof *rpos);
    for (int64_t i = 0; i < n; i++) { /* distinct, unordered positions (n prime to 7) */
        pos[i] = pos0 + (int32_t)((i * 7) % n);
        rpos[i] = pos[i] + rope_shift;
    }
    orin_kv_view view = {.dtype = dt, .n_kv_heads = (int32_t)kv_heads, .head_dim = (int32_t)hd,
                         .pos_stride = row, .head_stride = hd, .capacity = (int32_t)cap};
    orin_kv_view view1 = view, view2 = view;
    view1.k = ops_dev(ck1.data, cap * row * orin_dtype_size(dt));
    view1.v = ops_dev(cv1.data, cap * row * orin_dtype_size(dt));
    view2.k = ops_dev(ck2.data, cap * row * orin_dtype_size(dt));
    view2.v = ops_dev(cv2.data, cap * row * orin_dtype_size(dt));
    const int64_t qd[3] = {n, heads, hd}, kd[3] = {n, kv_heads, hd};
    orin_tensor positions = ops_tensor(pos, ORIN_I32, 1, &n);
    orin_tensor rope_positions = rope_shift ? ops_tensor(rpos, ORIN_I32, 1, &n) : positions;
    orin_rope_kv_write_args fused = {
        .q = ops_tensor(q1.data, dt, 3, qd), .k = ops_tensor(k1.data, dt, 3, kd),
        .v = ops_tensor(v.data, dt, 3, kd), .positions = positions, .eps = 1e-6f,
        .theta = 1e6f, .cache = view1,
    };
    if (rope_shift)
        fused.rope_positions = rope_positions;
    if (sc)
        fused.scaling = *sc;
    if (norms) {
        fused.q_norm = ops_tensor(qn.data, dt, 1, &hd);
        fused.k_norm = ops_tensor(kn.data, dt, 1, &hd);
    }
    orin_tensor q2t = ops_tensor(q2.data, dt, 3, qd), k2t = ops_tensor(k2.data, dt, 3, kd);
    orin_rmsnorm_args nq = {.x = ops_tensor(q2.data, dt, 2, (int64_t[]){n * heads, hd}),
                            .weight = fused.q_norm, .eps = 1e-6f};
    orin_rmsnorm_args nk = {.x = ops_tensor(k2.data, dt, 2, (int64_t[]){n * kv_heads, hd}),
                            .weight = fused.k_norm, .eps = 1e-6f};
    nq.out = nq.x;
    nk.out = nk.x;
    orin_rope_args rq = {.x = q2t, .positions = rope_positions, .theta = 1e6f,
                         .scaling = fused.scaling};
    orin_rope_args rk = {.x = k2t, .positions = rope_positions, .theta = 1e6f,
                         .scaling = fused.scaling};
    orin_kv_write_args kw = {.k = k2t, .v = fused.v, .positions = positions, .cache = view2};
    char what[160];
    snprintf(what, sizeof what, "rope_kv_write %s n %lld heads %lld/%lld hd %lld%s from %d, "
             "rotated %+d%s", orin_dtype_name(dt), (long long)n, (long long)heads,
             (long long)kv_heads, (long long)hd, norms ? " with q/k norms" : "", pos0, rope_shift,
             sc ? ", scaled" : "");
    bool ok = run(impl_of(ORIN_OP_ROPE_KV_WRITE, dt), &fused) == 0;
    if (ok && norms)
        ok = run(impl_of(ORIN_OP_RMSNORM, dt), &nq) == 0 && run(impl_of(ORIN_OP_RMSNORM, dt), &nk) == 0;
    if (ok)
        ok = run(impl_of(ORIN_OP_ROPE, dt), &rq) == 0 && run(impl_of(ORIN_OP_ROPE, dt), &rk) == 0 &&
             run(impl_of(ORIN_OP_KV_WRITE, dt), &kw) == 0;
    if (ok) {
        ops_buf *pairs[4][2] = {{&q1, &q2}, {&k1, &k2}, {&ck1, &ck2}, {&cv1, &cv2}};
        const char *names[4] = {"q", "k", "cache k", "cache v"};
        for (int i = 0; i < 4; i++) {
            ops_buf_fetch(pairs[i][0]);
            ops_buf_fetch(pairs[i][1]);
            char part[200];
            snprintf(part, sizeof part, "%s: %s", what, names[i]);
            check_same(part, pairs[i][0], pairs[i][1], ops_tol(dt));
        }
    }
    ops_release();
    free(pos);
    free(rpos);
    ops_buf *all[] = {&q1, &q2, &k1, &k2, &v, &qn, &kn, &ck1, &cv1, &ck2, &cv2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ops_buf_free(all[i]);
}

static void rope_cache_case(orin_dtype dt, int64_t n, int64_t heads, int64_t kv_heads, int64_t hd,
                            bool norms, int32_t pos0, int32_t rope_shift)
{
    rope_cache_case_scaled(dt, n, heads, kv_heads, hd, norms, pos0, rope_shift, NULL);
}

/* A scaled rope through rope_kv_write: frequencies of no formula and a cos/sin
 * factor, the same in the plain ops it must equal. */
static void rope_cache_scaled_case(orin_dtype dt, int64_t n, int64_t heads, int64_t kv_heads,
                                   int64_t hd, int32_t pos0, int32_t rope_shift)
{
    float inv[256];
    const orin_rope_scaling sc = ops_rope_scaled_table(inv, hd, 1e6);
    rope_cache_case_scaled(dt, n, heads, kv_heads, hd, true, pos0, rope_shift, &sc);
}

/* ---- the batch-1 GEMV behind the matmul, at model sizes ---- */

static void gemv_case(orin_dtype dt, int64_t in, int64_t out, int64_t x_offset)
{
    ops_rng rng = {.state = 50 + (uint64_t)(in + out)};
    ops_buf x = ops_buf_random(&rng, dt, in + x_offset, -1, 1);
    ops_buf w = ops_buf_random(&rng, dt, out * in, -1, 1), y = ops_buf_nan(dt, out);
    /* x_offset shifts x off its 16-byte alignment: the scalar path */
    orin_tensor xt = ops_tensor(x.data, dt, 2, (int64_t[]){1, in + x_offset});
    xt.data = (char *)xt.data + x_offset * (int64_t)orin_dtype_size(dt);
    xt.shape[1] = in;
    xt.stride[0] = in;
    orin_matmul_args a = {.x = xt, .w = ops_tensor(w.data, dt, 2, (int64_t[]){out, in}),
                          .y = ops_tensor(y.data, dt, 2, (int64_t[]){1, out})};
    char what[128];
    snprintf(what, sizeof what, "matmul (gemv) %s [1, %lld] . [%lld, %lld]^T%s",
             orin_dtype_name(dt), (long long)in, (long long)out, (long long)in,
             x_offset ? ", x unaligned" : "");
    if (run(impl_of(ORIN_OP_MATMUL, dt), &a) == 0) {
        ops_buf_fetch(&y);
        double *ref = malloc(out * sizeof(double)), *scale = malloc(out * sizeof(double));
        ops_buf xs = ops_buf_nan(dt, in);
        memcpy(xs.value, x.value + x_offset, in * sizeof(double));
        matmul_reference(&xs, &w, NULL, 1, in, out, ref, scale);
        ops_check_close(what, &y, ref, scale, ops_tol(dt), ops_atol(dt));
        free(ref);
        free(scale);
        ops_buf_free(&xs);
    }
    ops_release();
    ops_buf_free(&x);
    ops_buf_free(&w);
    ops_buf_free(&y);
}

/* ---- matmul.argmax ---- */

/* orin/sampler.h's greedy rule on logits read back: the lowest index of the
 * largest, NaN skipped; -1 when every one is NaN. */
static int32_t greedy_pick(const ops_buf *logits)
{
    int32_t best = -1;
    for (size_t j = 0; j < logits->n; j++)
        if (!isnan(logits->value[j]) && (best < 0 || logits->value[j] > logits->value[best]))
            best = (int32_t)j;
    return best;
}

enum argmax_weights {
    ARGMAX_RANDOM,
    ARGMAX_TIES,    /* row j = row j % 7: the largest logit at many indices, across blocks */
    ARGMAX_NANS,    /* every third row NaN: those logits NaN, never picked */
    ARGMAX_LAST,    /* the last row twice the largest row: the pick at V - 1 */
    ARGMAX_ALL_NAN, /* every row NaN: -1 */
};

static void argmax_weights_shape(ops_buf *w, const ops_buf *h, int64_t in, int64_t V,
                                 enum argmax_weights kind)
{
    for (int64_t j = 0; j < V; j++)
        for (int64_t k = 0; k < in; k++) {
            const size_t e = (size_t)(j * in + k);
            if (kind == ARGMAX_TIES && j >= 7)
                ops_store(w->dt, w->data, e, w->value[(size_t)((j % 7) * in + k)]);
            if ((kind == ARGMAX_NANS && j % 3 == 1) || kind == ARGMAX_ALL_NAN)
                ops_store(w->dt, w->data, e, NAN);
        }
    if (kind == ARGMAX_LAST) { /* the largest row by the double reference, doubled */
        double *ref = malloc(V * sizeof(double)), *scale = malloc(V * sizeof(double));
        matmul_reference(h, w, NULL, 1, in, V, ref, scale);
        int64_t m = 0;
        for (int64_t j = 1; j < V; j++)
            m = ref[j] > ref[m] ? j : m;
        for (int64_t k = 0; k < in; k++)
            ops_store(w->dt, w->data, (size_t)((V - 1) * in + k), 2 * w->value[m * in + k]);
        free(ref);
        free(scale);
    }
    ops_buf_read(w);
}

/* matmul.argmax against its sequence on the same device: (add_rmsnorm,)
 * matmul into poisoned logits, then the greedy rule on the logits read back;
 * the same index, exactly. */
static void argmax_case(orin_dtype dt, int64_t in, int64_t V, bool norm, bool residual,
                        enum argmax_weights kind)
{
    static const char *const kinds[] = {"random", "ties", "NaN rows", "largest last",
                                        "all NaN"};
    ops_rng rng = {.state = 80 + (uint64_t)(in * 7 + V + kind)};
    ops_buf x = ops_buf_random(&rng, dt, (size_t)in, -3, 3);
    ops_norm_fixture f;
    memset(&f, 0, sizeof f);
    if (norm && ops_norm_fixture_make(&f, &x, 1, in, residual, 81 + (uint64_t)in) != 0) {
        ops_buf_free(&x);
        ops_norm_fixture_free(&f);
        return;
    }
    ops_buf w = ops_buf_random(&rng, dt, (size_t)(V * in), -1, 1);
    if (norm)
        ops_buf_fetch(&f.h); /* the normalised row, for ARGMAX_LAST */
    argmax_weights_shape(&w, norm ? &f.h : &x, in, V, kind);
    ops_buf logits = ops_buf_nan(dt, (size_t)V);
    int32_t id = INT32_MIN + 7; /* poison */
    const int64_t xd[2] = {1, in}, wd[2] = {V, in}, ld[2] = {1, V}, one = 1;
    orin_matmul_argmax_args fused = {
        .x = ops_tensor(x.data, dt, 2, xd),
        .norm = norm ? f.norm : (orin_norm_in){.eps = 0},
        .w = ops_tensor(w.data, dt, 2, wd),
        .id = ops_tensor(&id, ORIN_I32, 1, &one),
    };
    orin_matmul_args plain = {.x = norm ? f.h_t : fused.x, .w = fused.w,
                              .y = ops_tensor(logits.data, dt, 2, ld)};
    char what[160];
    snprintf(what, sizeof what, "matmul.argmax %s%s, x [1, %lld], w [%lld, %lld], %s",
             orin_dtype_name(dt), norm ? (residual ? " + norm + residual" : " + norm") : "",
             (long long)in, (long long)V, (long long)in, kinds[kind]);
    if (ops_test_selected(what) && run(impl_of(ORIN_OP_MATMUL_ARGMAX, dt), &fused) == 0 &&
        run(impl_of(ORIN_OP_MATMUL, dt), &plain) == 0) {
        if (norm)
            ops_norm_fixture_check(&f, &x, what);
        ops_fetch(&id, sizeof id);
        ops_buf_fetch(&logits);
        const int32_t want = greedy_pick(&logits);
        CHECK(id == want, "%s: picked %d, the sequence %d", what, id, want);
        CHECK(kind != ARGMAX_ALL_NAN || want == -1, "%s: the sequence picked %d", what, want);
        CHECK(kind != ARGMAX_LAST || want == V - 1, "%s: the sequence picked %d, not the last",
              what, want);
    }
    ops_release();
    if (norm)
        ops_norm_fixture_free(&f);
    ops_buf_free(&x);
    ops_buf_free(&w);
    ops_buf_free(&logits);
}

/* matmul.argmax's bad calls: id over x, over w, over the norm's x_out, each
 * one line naming both. */
static void argmax_errors(orin_dtype dt)
{
    const orin_op_impl *impl = impl_of(ORIN_OP_MATMUL_ARGMAX, dt);
    if (!impl || !ops_test_selected("matmul.argmax errors"))
        return;
    enum { IN = 64, V = 16 };
    ops_rng rng = {.state = 97};
    ops_buf x = ops_buf_random(&rng, dt, IN, -1, 1), w = ops_buf_random(&rng, dt, V * IN, -1, 1);
    ops_norm_fixture f;
    memset(&f, 0, sizeof f);
    int32_t id = 0;
    const int64_t xd[2] = {1, IN}, wd[2] = {V, IN}, one = 1;
    if (ops_norm_fixture_make(&f, &x, 1, IN, true, 98) == 0) {
        const orin_matmul_argmax_args good = {
            .x = ops_tensor(x.data, dt, 2, xd),
            .norm = f.norm,
            .w = ops_tensor(w.data, dt, 2, wd),
            .id = ops_tensor(&id, ORIN_I32, 1, &one),
        };
        const orin_exec ex = exec_with_workspace(impl, &good);
        orin_matmul_argmax_args bad = good;
        bad.id = ops_tensor(x.data, ORIN_I32, 1, &one);
        ops_expect_error("matmul.argmax errors: id over x", impl, &ex, &bad, "id overlaps x");
        bad.id = ops_tensor(w.data, ORIN_I32, 1, &one);
        ops_expect_error("matmul.argmax errors: id over w", impl, &ex, &bad, "id overlaps w");
        bad.id = ops_tensor(f.x_out.data, ORIN_I32, 1, &one);
        ops_expect_error("matmul.argmax errors: id over norm.x_out", impl, &ex, &bad,
                         "id overlaps norm.x_out");
        ops_release();
    }
    ops_norm_fixture_free(&f);
    ops_buf_free(&x);
    ops_buf_free(&w);
}

int main(int argc, char **argv)
{
    ops_test_init(argc, argv);
    if (!ops_on_gpu()) {
        printf("skipped: the fused ops are registered for cuda only (run with --device cuda)\n");
        return TEST_SKIP;
    }
    ops_test_registry();
    const bool quick = ops_test_quick();
    for (size_t t = 0; t < sizeof float_dtypes / sizeof float_dtypes[0]; t++) {
        orin_dtype dt = float_dtypes[t];
        add_rmsnorm_case(dt, 1, 64, false);
        add_rmsnorm_case(dt, 1, 4096, true);
        add_rmsnorm_case(dt, 7, 1000, true);
        add_rmsnorm_case(dt, 33, 4097, true);
        /* Qwen3-8B's qkv (bias: Qwen2's), a Qwen2.5-0.5B-like one, odd widths */
        qkv_case(dt, 1, 4096, (int64_t[]){4096, 1024, 1024}, false, false);
        qkv_case(dt, 1, 896, (int64_t[]){896, 128, 128}, true, false);
        qkv_case(dt, 1, 67, (int64_t[]){33, 7, 9}, true, false);
        qkv_case(dt, 5, 256, (int64_t[]){256, 64, 64}, true, false);
        /* 8 rows a block (>= 24 per SM) with blocks across segment ends */
        qkv_case(dt, 1, 64, (int64_t[]){4001, 7, 9}, true, false);
        /* stacked weights: one product and the split in a prefill, the GEMV at 1 row */
        qkv_case(dt, 37, 256, (int64_t[]){256, 64, 64}, true, true);
        qkv_case(dt, 300, 512, (int64_t[]){512, 128, 128}, false, true);
        qkv_case(dt, 9, 67, (int64_t[]){33, 7, 9}, true, true);
        qkv_case(dt, 1, 256, (int64_t[]){256, 64, 64}, true, true);
        swiglu_case(dt, 1, 1024, 3072, false);
        swiglu_case(dt, 1, 67, 129, false);
        swiglu_case(dt, 3, 256, 384, false);
        if (!quick)
            swiglu_case(dt, 1, 4096, 12288, false);
        swiglu_case(dt, 37, 256, 384, true);
        swiglu_case(dt, 300, 128, 1000, true);
        swiglu_case(dt, 5, 67, 129, true);
        swiglu_case(dt, 1, 256, 384, true);
        /* the norm in front (Qwen3-8B's and Qwen2.5-7B's widths, a narrow one,
         * rows > 1, a width of odd bytes) */
        qkv_norm_case(dt, 1, 4096, (int64_t[]){4096, 1024, 1024}, true);
        qkv_norm_case(dt, 1, 3584, (int64_t[]){3584, 512, 512}, false);
        qkv_norm_case(dt, 1, 256, (int64_t[]){256, 64, 64}, true);
        qkv_norm_case(dt, 5, 256, (int64_t[]){256, 64, 64}, true);
        qkv_norm_case(dt, 1, 67, (int64_t[]){33, 7, 9}, true);
        swiglu_norm_case(dt, 1, 1024, 3072, true);
        swiglu_norm_case(dt, 1, 3584, 512, true);
        swiglu_norm_case(dt, 1, 256, 384, false);
        swiglu_norm_case(dt, 3, 256, 384, true);
        swiglu_norm_case(dt, 1, 67, 129, true);
        rope_cache_case(dt, 1, 32, 8, 128, true, 4000, 0);
        rope_cache_case(dt, 9, 4, 2, 64, true, 0, 0);
        rope_cache_case(dt, 5, 14, 2, 64, false, 1000, 0);
        rope_cache_case(dt, 1, 28, 4, 128, false, 31000, 0);
        /* Qwen3-VL after an image: rotated behind (rope_delta < 0) or ahead */
        rope_cache_case(dt, 1, 32, 8, 128, true, 900, -700);
        rope_cache_case(dt, 6, 4, 2, 64, true, 10, 333);
        /* head_dims below a warp's pairs (the tiny Qwen3-VL fixture's 32) */
        rope_cache_case(dt, 3, 4, 2, 32, true, 5, 7);
        rope_cache_case(dt, 2, 3, 1, 6, true, 0, 0);
        /* scaled (rope_scaling yarn, linear) */
        rope_cache_scaled_case(dt, 1, 32, 8, 128, 4000, 0);
        rope_cache_scaled_case(dt, 5, 4, 2, 64, 30000, 0);
        rope_cache_scaled_case(dt, 3, 4, 2, 32, 5, 7);
        /* Qwen3-VL's vision MLP and projections (fewer rows), odd widths, one row */
        matmul_gelu_case(dt, 300, 1152, 4304, true, 0, ORIN_GELU_TANH);
        matmul_gelu_case(dt, 37, 72, 136, true, 1, ORIN_GELU_TANH);
        matmul_gelu_case(dt, 5, 64, 40, false, 0, ORIN_GELU_TANH);
        matmul_gelu_case(dt, 9, 128, 96, true, 0, ORIN_GELU_ERF);
        matmul_gelu_case(dt, 1, 256, 64, true, 0, ORIN_GELU_TANH);
        matmul_add_case(dt, 300, 4304, 1152, true, 0);
        matmul_add_case(dt, 37, 72, 136, true, 1);
        matmul_add_case(dt, 7, 64, 48, false, 0);
        matmul_add_case(dt, 1, 256, 64, true, 0);
        gemv_case(dt, 4096, 1024, 0);  /* few rows: one row a block */
        gemv_case(dt, 4096, 4096, 0);
        gemv_case(dt, 1000, 8193, 1);  /* x off alignment: the scalar path */
        if (!quick)
            gemv_case(dt, 512, 151936, 0); /* lm_head's row count */
        /* lm_head's rows (Qwen3's 151,936, Qwen2.5's 152,064) at narrower
         * widths (the host reference holds every weight as a double), the
         * widths of two 16-byte vectors a thread (Qwen3-8B's 4,096, Qwen2.5-7B's
         * 3,584); narrow ones across the resident blocks; rows past the last
         * group of 4; without a norm, a width of odd bytes (the plain path) */
        if (!quick) {
            argmax_case(dt, 512, 151936, true, true, ARGMAX_RANDOM);
            argmax_case(dt, 256, 152064, true, false, ARGMAX_LAST);
            argmax_case(dt, 4096, 20000, true, true, ARGMAX_TIES);
        }
        argmax_case(dt, 3584, 3000, true, true, ARGMAX_LAST);
        argmax_case(dt, 1024, 5000, true, true, ARGMAX_RANDOM);
        argmax_case(dt, 1024, 5000, true, true, ARGMAX_TIES);
        argmax_case(dt, 512, 4001, true, false, ARGMAX_NANS);
        argmax_case(dt, 512, 4003, true, true, ARGMAX_LAST);
        argmax_case(dt, 256, 3, true, true, ARGMAX_RANDOM);
        argmax_case(dt, 256, 1, true, false, ARGMAX_RANDOM);
        argmax_case(dt, 256, 700, true, true, ARGMAX_ALL_NAN);
        argmax_case(dt, 1024, 5000, false, false, ARGMAX_TIES);
        argmax_case(dt, 67, 129, true, true, ARGMAX_LAST);
        argmax_case(dt, 67, 129, true, true, ARGMAX_NANS);
        argmax_case(dt, 64, 300, false, false, ARGMAX_ALL_NAN);
        argmax_errors(dt);
    }
    ops_test_registry_free();
    return test_finish();
}
