/* Shared pieces of the ops tests: the real plugins loaded through the registry,
 * seeded random data, buffers of any float dtype, and tolerance checks. */
#ifndef ORIN_OPS_TEST_H
#define ORIN_OPS_TEST_H

#include "orin/ops.h"
#include "orin/plugin.h"
#include "orin/registry.h"
#include "test_util.h"

#include <stdint.h>

struct ops_buf;

/* ---- the target device ----
 * A suite runs its ops on the host, or with `--device cuda` on the GPU (the
 * ctest entries *.cuda, label gpu). ops_test_init reads that flag and exits 77
 * (skipped) when no GPU can be opened. Tests are written once over host
 * buffers: ops_tensor() gives a tensor on the target over a host buffer (on
 * CUDA a device copy of its contents, made at that call), ops_fetch() copies
 * an output back into its host buffer, ops_release() frees the device copies.
 * Two tensors over one host buffer share one device copy, so aliasing is kept;
 * pointers written into a call struct by hand stay host pointers. */
void ops_test_init(int argc, char **argv);
/* True when ORIN_TEST_QUICK is set (to anything but 0): suites leave out their
 * largest cases, for runs under compute-sanitizer (10-100x slower). */
bool ops_test_quick(void);
orin_device_kind ops_target(void);
/* Whether a case runs: ORIN_TEST_ONLY unset or empty, or `what` contains it
 * (one case alone, e.g. under a sanitizer). With ORIN_TEST_VERBOSE set, each
 * selected case's line goes to stderr first, flushed: a run that dies in a
 * kernel names its case. */
bool ops_test_selected(const char *what);
bool ops_on_gpu(void);
/* The device pointer standing for host[0..bytes) (uploaded now), or host on the CPU. */
void *ops_dev(void *host, size_t bytes);
/* Copies the target's copy of host[0..bytes) back into host (after a sync). */
void ops_fetch(void *host, size_t bytes);
/* ops_fetch of a whole buffer, then ops_buf_read. */
void ops_buf_fetch(struct ops_buf *b);
/* Target memory of `bytes`, every byte 0xff (NaN floats), freed by ops_release. */
void *ops_workspace(size_t bytes);
/* Frees every device copy and workspace (call at the end of each case). */
void ops_release(void);

/* The registry with every plugin of the build's plugins folder loaded. Exits
 * the test (failed) when loading fails: nothing else can run. */
orin_registry *ops_test_registry(void);
void ops_test_registry_free(void);

/* The implementation for (op, provider, target device, dt); a CHECK failure when absent. */
const orin_op_impl *ops_test_impl(const char *op, const char *provider, orin_dtype dt);

/* An exec on the target device (on the host with `threads` threads, 0 = all
 * cores) and no workspace. */
orin_exec ops_test_exec(int threads);

/* Seeded generator (splitmix64): the same stream on every machine. */
typedef struct ops_rng {
    uint64_t state;
} ops_rng;
uint64_t ops_rng_next(ops_rng *r);
double ops_rng_uniform(ops_rng *r, double lo, double hi);

/* A float buffer of dtype dt holding `n` values, and the same values read back
 * as double (after rounding to dt), which is what references compute from. */
typedef struct ops_buf {
    orin_dtype dt;
    size_t n;
    void *data;     /* n elements of dt */
    double *value;  /* n doubles: data as read back */
} ops_buf;

/* Uniform in [lo, hi), rounded to dt. */
ops_buf ops_buf_random(ops_rng *r, orin_dtype dt, size_t n, double lo, double hi);
/* Every element NaN (poison for outputs). */
ops_buf ops_buf_nan(orin_dtype dt, size_t n);
/* A new buffer holding b's values. */
ops_buf ops_buf_copy(const ops_buf *b);
/* Refreshes b->value from b->data (after an op wrote it). */
void ops_buf_read(ops_buf *b);
void ops_buf_free(ops_buf *b);
double ops_value(orin_dtype dt, const void *data, size_t i);
void ops_store(orin_dtype dt, void *data, size_t i, double v);

/* A contiguous tensor on the target over host `data` (see the top). */
orin_tensor ops_tensor(void *data, orin_dtype dt, int ndim, const int64_t *dims);

/* Checks got (as read back) against ref: every element finite (the op wrote it)
 * and |got - ref| <= tol * scale[i] + atol, with scale the error scale of each
 * element (|ref|, or the sum of magnitudes that cancel in it); NULL scale means
 * |ref|. One CHECK for the whole tensor; prints the worst element on failure.
 * Returns the largest error / (tol * scale + atol) seen. */
double ops_check_close(const char *what, const ops_buf *got, const double *ref,
                       const double *scale, double tol, double atol);

/* got and want fetched from the target and equal bit for bit (one CHECK). */
void ops_check_bitwise(const char *what, ops_buf *got, ops_buf *want);

/* The tolerance of a dtype: 1e-5 for f32, 1e-2 for f16 and bf16; and the absolute
 * floor (f16 subnormals). */
double ops_tol(orin_dtype dt);
double ops_atol(orin_dtype dt);

/* A fused product's norm in front (orin_norm_in) and its reference, for x
 * [n, d] (an ops_buf the caller made): a random residual (when asked) and
 * weight; add_rmsnorm of ops_common run on a copy of x gives the sum (x_ref)
 * and the normalised rows (h, as a tensor in h_t) that the product without
 * the norm then reads. Make it before any other tensor of the case (its
 * reference runs at once). */
typedef struct ops_norm_fixture {
    ops_buf x_before, x_ref, residual, weight, x_out, h;
    orin_norm_in norm; /* for the fused call over x */
    orin_tensor h_t;
} ops_norm_fixture;
int ops_norm_fixture_make(ops_norm_fixture *f, const ops_buf *x, int64_t n, int64_t d,
                          bool residual, uint64_t seed);
/* After the fused call: x_out equals the reference's sum bit for bit, and x is
 * as it was. */
void ops_norm_fixture_check(ops_norm_fixture *f, ops_buf *x, const char *what);
void ops_norm_fixture_free(ops_norm_fixture *f);

/* Runs impl->run and CHECKs that it fails with a message containing `needle`. */
/* A scaled rope's table (orin_rope_scaling) for the op tests: theta's
 * frequencies bent by up to 4x, so that no formula of theta gives them, into
 * inv [hd / 2], and yarn's cos/sin factor for a factor of 4. */
orin_rope_scaling ops_rope_scaled_table(float *inv, int64_t hd, double theta);

void ops_expect_error(const char *what, const orin_op_impl *impl, const orin_exec *ex,
                      const void *args, const char *needle);

#endif
