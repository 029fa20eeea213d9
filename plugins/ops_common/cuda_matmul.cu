/* matmul on CUDA: y = x . w^T (+ bias) through cuBLASLt.
 *
 * The column-major mapping. cuBLASLt reads matrices column-major, and a
 * row-major [r, c] matrix (row stride c) is, read column-major, the [c, r]
 * matrix with leading dimension c: its transpose. So with n rows of x,
 *   x [n, in]   row-major  is  X = x^T, column-major [in, n],   ld in
 *   w [out, in] row-major  is  W = w^T, column-major [in, out], ld in
 *   y [n, out]  row-major  is  Y = y^T, column-major [out, n],  ld out
 * and y = x w^T  <=>  y^T = w x^T  <=>  Y = W^T X. cuBLASLt computes
 * D = alpha op(A) op(B) + beta C, plus the epilogue's bias, one value per row
 * of D. So A = W with op T (m = out, k = in), B = X with op N (k = in, n
 * columns), C = D = Y ([out, n], ld out), and the bias vector is bias[out]:
 * Y[o, i] += bias[o], which is y[i, o] += bias[o].
 *
 * Numerics: compute type CUBLAS_COMPUTE_32F and f32 alpha and beta for every
 * dtype: f32 stays true f32 (no TF32: that is CUBLAS_COMPUTE_32F_FAST_TF32,
 * never asked for), f16 and bf16 multiply on tensor cores and accumulate in f32,
 * and the epilogue adds the bias in f32 before D is rounded once, as the CPU's
 * sgemm does.
 *
 * Costs kept off the per-call path: one cuBLASLt handle per device ordinal,
 * made at its first matmul; the heuristic's choice (tens of microseconds a query)
 * cached per (device, dtype, n, in, out, bias, alignments, workspace) in a small
 * table; descriptors initialised in place on the stack (no allocation). Every
 * call runs on orin_cu_stream(ex) with the caller's workspace and never waits
 * for the GPU, so it can be captured into a CUDA graph. */
#include "cuda.h"
#include "cuda_fused.h"

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/op_check.h"

#include <cublasLt.h>
#include <pthread.h>

#define CUDA ORIN_DEVICE_CUDA

/* The workspace declared for every matmul: cuBLASLt's fast Hopper kernels
 * (split-K, stream-K) want a few MiB; more than this is never offered. */
#define MATMUL_WORKSPACE ((size_t)32 << 20)
/* cuBLASLt wants its workspace 256-byte aligned. */
#define WORKSPACE_ALIGN 256
#define MAX_DEVICES 64
/* The algorithm cache: open addressing, ALGO_PROBES slots tried from the
 * key's hash; when all are taken the first is replaced. A model has a few
 * dozen distinct shapes (decode n = 1, prefill chunks). */
#define ALGO_SLOTS 256
#define ALGO_PROBES 8
#define BIAS_THREADS 256

typedef struct algo_key {
    int device;
    orin_dtype dt;
    int64_t n, in, out;
    int64_t ldw, ldy;                   /* leading dimensions of w and y */
    bool w_kmajor;                      /* w stored [in][out] (see cuda_lt_gemm) */
    uint32_t align_x, align_w, align_y; /* bytes: the largest power of two, at most 256 */
    uint32_t align_bias;                /* 0: no bias */
    size_t workspace;                   /* bytes offered */
    bool gelu;                          /* the GELU (tanh) asked of the epilogue */
} algo_key;

typedef struct algo_slot {
    bool used;
    bool bias_fused; /* the bias rides in the epilogue; else y is preloaded with it */
    bool gelu_fused; /* the GELU rides in the epilogue; else a pass over y follows */
    algo_key key;
    cublasLtMatmulAlgo_t algo;
} algo_slot;

/* Guards the handles and the cache. A lookup holds it for a hash probe; a miss
 * holds it through the heuristic query (once per shape). */
static pthread_mutex_t lt_lock = PTHREAD_MUTEX_INITIALIZER;
/* Never destroyed: a handle is a little host memory, and cublasLtDestroy from
 * an exit handler would race the CUDA runtime's own teardown. The process's
 * end frees them. */
static cublasLtHandle_t lt_handles[MAX_DEVICES];
static algo_slot algo_slots[ALGO_SLOTS];

/* The matmul descriptor and the three layouts (C is D's), initialised in place. */
typedef struct matmul_plan {
    cublasLtMatmulDescOpaque_t desc;
    cublasLtMatrixLayoutOpaque_t a, b, d;
} matmul_plan;

static int lt_fail(const char *label, orin_dtype dt, const char *what, cublasStatus_t st,
                   const algo_key *k)
{
    return orin_error_set("%s %s: %s: %s (x [%lld, %lld], w [%lld, %lld]%s)", label,
                          orin_dtype_name(dt), what, cublasLtGetStatusString(st),
                          (long long)k->n, (long long)k->in, (long long)k->out, (long long)k->in,
                          k->align_bias ? ", bias" : "");
}

static uint32_t alignment_of(const void *p)
{
    uintptr_t addr = (uintptr_t)p;
    uint32_t align = 256;
    while (align > 1 && (addr & (align - 1)) != 0)
        align >>= 1;
    return align;
}

static cudaDataType_t cuda_type(orin_dtype dt)
{
    return dt == ORIN_F32 ? CUDA_R_32F : dt == ORIN_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* The descriptors of the mapping at the top; fused_bias: the bias in the
 * epilogue (NULL: none), gelu: the GELU (tanh) there too. The bias type is left
 * at its default, D's type. A k-major w ([in][out] row-major, ld ldw) is, read
 * column-major, W^T itself: A = w with op N (m = out, k = in). */
static cublasStatus_t plan_init(matmul_plan *p, const algo_key *k, const void *fused_bias,
                                bool gelu)
{
    const cudaDataType_t type = cuda_type(k->dt);
    const int64_t n = k->n, in = k->in, out = k->out;
    const int32_t trans_a = k->w_kmajor ? CUBLAS_OP_N : CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    const uint32_t epilogue = gelu ? (fused_bias ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                 : CUBLASLT_EPILOGUE_GELU)
                                   : CUBLASLT_EPILOGUE_BIAS;
    cublasStatus_t st;
    if ((st = cublasLtMatmulDescInit(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) !=
            CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatmulDescSetAttribute(&p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                             sizeof trans_a)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatmulDescSetAttribute(&p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                             sizeof trans_b)) != CUBLAS_STATUS_SUCCESS)
        return st;
    if ((fused_bias || gelu) &&
        (st = cublasLtMatmulDescSetAttribute(&p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                             sizeof epilogue)) != CUBLAS_STATUS_SUCCESS)
        return st;
    if (fused_bias &&
        (st = cublasLtMatmulDescSetAttribute(&p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                             &fused_bias, sizeof fused_bias)) !=
            CUBLAS_STATUS_SUCCESS)
        return st;
    if ((st = k->w_kmajor
                  ? cublasLtMatrixLayoutInit(&p->a, type, (uint64_t)out, (uint64_t)in, k->ldw)
                  : cublasLtMatrixLayoutInit(&p->a, type, (uint64_t)in, (uint64_t)out, k->ldw)) !=
            CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatrixLayoutInit(&p->b, type, (uint64_t)in, (uint64_t)n, in)) !=
            CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatrixLayoutInit(&p->d, type, (uint64_t)out, (uint64_t)n, k->ldy)) !=
            CUBLAS_STATUS_SUCCESS)
        return st;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- the handles and the algorithm cache (lt_lock held) ---- */

/* The handle of device `index`, made with that device current (then restored). */
static int lt_handle(const char *label, int index, cublasLtHandle_t *handle)
{
    if (index < 0 || index >= MAX_DEVICES)
        return orin_error_set("%s: cuda device %d is past the %d this plugin handles", label,
                              index, MAX_DEVICES);
    if (!lt_handles[index]) {
        int current = -1;
        if (orin_cu_call(label, "cudaGetDevice", cudaGetDevice(&current)))
            return -1;
        if (current != index && orin_cu_call(label, "cudaSetDevice", cudaSetDevice(index)))
            return -1;
        cublasStatus_t st = cublasLtCreate(&lt_handles[index]);
        if (current != index && cudaSetDevice(current) != cudaSuccess)
            (void)cudaGetLastError();
        if (st != CUBLAS_STATUS_SUCCESS) {
            lt_handles[index] = NULL;
            return orin_error_set("%s: cublasLtCreate on cuda:%d: %s", label, index,
                                  cublasLtGetStatusString(st));
        }
    }
    *handle = lt_handles[index];
    return 0;
}

static uint64_t key_hash(const algo_key *k)
{
    const uint64_t fields[] = {
        (uint64_t)k->device, (uint64_t)k->dt,      (uint64_t)k->n,       (uint64_t)k->in,
        (uint64_t)k->out,    (uint64_t)k->align_x, (uint64_t)k->align_w, (uint64_t)k->align_y,
        (uint64_t)k->align_bias, (uint64_t)k->workspace, (uint64_t)k->ldw,
        (uint64_t)k->ldy, (uint64_t)k->w_kmajor, (uint64_t)k->gelu,
    };
    uint64_t h = 14695981039346656037ull; /* FNV-1a over the fields */
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        h ^= fields[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static bool key_equal(const algo_key *a, const algo_key *b)
{
    return a->device == b->device && a->dt == b->dt && a->n == b->n && a->in == b->in &&
           a->out == b->out && a->align_x == b->align_x && a->align_w == b->align_w &&
           a->align_y == b->align_y && a->align_bias == b->align_bias &&
           a->workspace == b->workspace && a->ldw == b->ldw && a->ldy == b->ldy &&
           a->w_kmajor == b->w_kmajor && a->gelu == b->gelu;
}

static algo_slot *slot_find(const algo_key *k)
{
    uint64_t h = key_hash(k);
    for (int p = 0; p < ALGO_PROBES; p++) {
        algo_slot *s = &algo_slots[(h + (uint64_t)p) % ALGO_SLOTS];
        if (s->used && key_equal(&s->key, k))
            return s;
    }
    return NULL;
}

static algo_slot *slot_to_fill(const algo_key *k)
{
    uint64_t h = key_hash(k);
    for (int p = 0; p < ALGO_PROBES; p++) {
        algo_slot *s = &algo_slots[(h + (uint64_t)p) % ALGO_SLOTS];
        if (!s->used)
            return s;
    }
    return &algo_slots[h % ALGO_SLOTS];
}

/* cuBLASLt's best algorithm for the key's call, with the bias (fused_bias) and
 * the GELU (gelu) in the epilogue or without; *found false when it has none.
 * The alignments are the actual pointers' (sub-views may be 2-byte aligned)
 * and the workspace the one offered. */
static int heuristic(const char *label, cublasLtHandle_t handle, const algo_key *k,
                     const void *fused_bias, bool gelu, cublasLtMatmulAlgo_t *algo, bool *found)
{
    matmul_plan plan;
    cublasLtMatmulPreferenceOpaque_t pref;
    const uint64_t workspace = k->workspace;
    cublasStatus_t st = plan_init(&plan, k, fused_bias, gelu);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceInit(&pref);
    const struct {
        cublasLtMatmulPreferenceAttributes_t attr;
        uint32_t bytes;
    } aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k->align_w},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k->align_x},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k->align_y},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k->align_y},
    };
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &workspace, sizeof workspace);
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0] && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(&pref, aligns[i].attr, &aligns[i].bytes,
                                                  sizeof aligns[i].bytes);
    if (st != CUBLAS_STATUS_SUCCESS)
        return lt_fail(label, k->dt, "descriptors", st, k);

    cublasLtMatmulHeuristicResult_t result;
    int count = 0;
    st = cublasLtMatmulAlgoGetHeuristic(handle, &plan.desc, &plan.a, &plan.b, &plan.d, &plan.d,
                                        &pref, 1, &result, &count);
    *found = st == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
        return lt_fail(label, k->dt, "cublasLtMatmulAlgoGetHeuristic", st, k);
    if (*found)
        *algo = result.algo;
    return 0;
}

/* The cached choice for the key, or a fresh one (cached). The bias goes into
 * the epilogue when it is 16-byte aligned and cuBLASLt has an algorithm for
 * that: the heuristic is meant to read the bias pointer's alignment, but some
 * versions pick kernels that assume 16 bytes of it regardless. Otherwise y is
 * preloaded with the bias and cuBLASLt adds to it (beta 1), which rounds the
 * same way: the sum is f32 and D rounded once. A GELU asked for goes into the
 * epilogue with the bias (or alone, without one) where cuBLASLt has that;
 * never with a preloaded bias (it would have to follow the beta term). */
static int algo_choose(const char *label, cublasLtHandle_t handle, const algo_key *k,
                       const void *bias, algo_slot *chosen)
{
    const algo_slot *hit = slot_find(k);
    if (hit) {
        *chosen = *hit;
        return 0;
    }
    algo_slot fresh = {.used = true, .bias_fused = false, .gelu_fused = false, .key = *k,
                       .algo = {}};
    bool found = false;
    const bool bias_fusable = bias && k->align_bias >= 16;
    if (k->gelu && (bias_fusable || !bias)) {
        if (heuristic(label, handle, k, bias, true, &fresh.algo, &found))
            return -1;
        fresh.gelu_fused = found;
        fresh.bias_fused = found && bias;
    }
    if (!found && bias_fusable) {
        if (heuristic(label, handle, k, bias, false, &fresh.algo, &found))
            return -1;
        fresh.bias_fused = found;
    }
    if (!found && heuristic(label, handle, k, NULL, false, &fresh.algo, &found))
        return -1;
    if (!found)
        return lt_fail(label, k->dt, "no cuBLASLt algorithm", CUBLAS_STATUS_NOT_SUPPORTED, k);
    *slot_to_fill(k) = fresh;
    *chosen = fresh;
    return 0;
}

/* ---- the unfused bias ---- */

/* y[i, :] = bias (ADD: y[i, :] += bias, rounded to T: then the product is
 * added with one more rounding), for a cuBLASLt call with beta 1 to add
 * x . w^T to. Launch: grid min(ceil(n * out / 256), 32 * SMs), block 256; no
 * shared memory. Bandwidth-bound; runs only where the epilogue cannot take the
 * bias. */
template <typename T, bool ADD>
__global__ void bias_rows_kernel(T *__restrict__ y, const T *__restrict__ bias, int64_t n,
                                 int64_t out, int64_t ldy)
{
    const int64_t total = n * out;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        T *e = &y[t / out * ldy + t % out];
        *e = ADD ? orin_cu_from_f32<T>(orin_cu_f32(*e) + orin_cu_f32(bias[t % out]))
                 : bias[t % out];
    }
}

template <typename T>
static void launch_bias_rows(const orin_exec *ex, void *y, const void *bias, int64_t n,
                             int64_t out, int64_t ldy, bool add)
{
    int64_t blocks = (n * out + BIAS_THREADS - 1) / BIAS_THREADS;
    int64_t cap = (int64_t)orin_cu_sm_count(ex) * 32;
    const unsigned grid = (unsigned)(blocks < cap ? blocks : cap);
    if (add)
        bias_rows_kernel<T, true><<<grid, BIAS_THREADS, 0, orin_cu_stream(ex)>>>(
            (T *)y, (const T *)bias, n, out, ldy);
    else
        bias_rows_kernel<T, false><<<grid, BIAS_THREADS, 0, orin_cu_stream(ex)>>>(
            (T *)y, (const T *)bias, n, out, ldy);
}

/* ---- the op ---- */

extern "C" size_t cuda_matmul_usable_workspace(void *workspace, size_t size, void **ws)
{
    uintptr_t base = (uintptr_t)workspace;
    size_t pad = (WORKSPACE_ALIGN - base % WORKSPACE_ALIGN) % WORKSPACE_ALIGN;
    if (!workspace || size <= pad) {
        *ws = NULL;
        return 0;
    }
    *ws = (void *)(base + pad);
    size_t bytes = size - pad;
    return bytes < MATMUL_WORKSPACE ? bytes : MATMUL_WORKSPACE;
}

extern "C" size_t cuda_matmul_workspace_size(const void *args)
{
    (void)args;
    return MATMUL_WORKSPACE;
}

extern "C" int cuda_lt_gemm(const orin_exec *ex, const char *label, orin_dtype dt,
                            const cuda_gemm *g, void *ws, size_t ws_bytes)
{
    const int64_t n = g->n, in = g->in, out = g->out;
    const algo_key key = {
        .device = ex->device->index,
        .dt = dt,
        .n = n,
        .in = in,
        .out = out,
        .ldw = g->ldw,
        .ldy = g->ldy,
        .w_kmajor = g->w_kmajor,
        .align_x = alignment_of(g->x),
        .align_w = alignment_of(g->w),
        .align_y = alignment_of(g->y),
        .align_bias = g->bias ? alignment_of(g->bias) : 0,
        .workspace = ws_bytes,
        .gelu = g->gelu_tanh,
    };
    if (g->gelu_tanh && (g->accumulate || g->ldy != out))
        return orin_error_set("%s: a GELU epilogue needs a dense y and no accumulation", label);
    cublasLtHandle_t handle = NULL;
    algo_slot chosen;
    pthread_mutex_lock(&lt_lock);
    int rc = lt_handle(label, key.device, &handle);
    if (rc == 0)
        rc = algo_choose(label, handle, &key, g->bias, &chosen);
    pthread_mutex_unlock(&lt_lock);
    if (rc != 0)
        return -1;

    matmul_plan plan;
    cublasStatus_t st = plan_init(&plan, &key, chosen.bias_fused ? g->bias : NULL,
                                  chosen.gelu_fused);
    if (st != CUBLAS_STATUS_SUCCESS)
        return lt_fail(label, dt, "descriptors", st, &key);
    const bool preload_bias = g->bias && !chosen.bias_fused;
    const float alpha = 1.0f, beta = preload_bias || g->accumulate ? 1.0f : 0.0f;
    if (preload_bias) {
        ORIN_CU_DISPATCH(dt, label, T,
                         launch_bias_rows<T>(ex, g->y, g->bias, n, out, g->ldy, g->accumulate));
        if (orin_cu_launched(label, dt, "bias rows: y [%lld, %lld]", (long long)n,
                             (long long)out))
            return -1;
    }
    st = cublasLtMatmul(handle, &plan.desc, &alpha, g->w, &plan.a, g->x, &plan.b, &beta, g->y,
                        &plan.d, g->y, &plan.d, &chosen.algo, ws, ws_bytes, orin_cu_stream(ex));
    if (st != CUBLAS_STATUS_SUCCESS)
        return lt_fail(label, dt, "cublasLtMatmul", st, &key);
    if (orin_cu_launched(label, dt, "x [%lld, %lld], w [%lld, %lld]%s", (long long)n,
                         (long long)in, (long long)out, (long long)in, g->bias ? ", bias" : ""))
        return -1;
    if (!g->gelu_tanh || chosen.gelu_fused)
        return 0;
    const int64_t dims[2] = {n, out};
    const orin_tensor y = orin_tensor_make(g->y, dt, CUDA, 2, dims);
    const orin_gelu_args gelu = {.x = y, .out = y, .kind = ORIN_GELU_TANH};
    return cuda_gelu(ex, &gelu, dt);
}

/* The cuBLASLt call of a matmul's arguments (y dense: [n, out]). */
static cuda_gemm gemm_of(const orin_tensor *x, const orin_tensor *w, const orin_tensor *bias,
                         const orin_tensor *y)
{
    const int64_t in = w->shape[1];
    return (cuda_gemm){
        .n = orin_tensor_rows(x), .in = in, .out = w->shape[0],
        .x = x->data, .w = w->data, .bias = bias->data, .y = y->data,
        .w_kmajor = false, .ldw = in, .ldy = w->shape[0],
        .accumulate = false, .gelu_tanh = false,
    };
}

static int dtype_ok(const char *label, orin_dtype dt)
{
    if (dt != ORIN_F32 && dt != ORIN_F16 && dt != ORIN_BF16)
        return orin_error_set("%s: dtype %s is not supported on cuda", label,
                              orin_dtype_name(dt));
    return 0;
}

/* g through cuBLASLt with the usable part of the exec's workspace. */
static int lt_gemm_ws(const orin_exec *ex, const char *label, orin_dtype dt, const cuda_gemm *g)
{
    void *ws;
    size_t ws_bytes = cuda_matmul_usable_workspace(ex->workspace, ex->workspace_size, &ws);
    return cuda_lt_gemm(ex, label, dt, g, ws, ws_bytes);
}

extern "C" int cuda_matmul(const orin_exec *ex, const orin_matmul_args *a, orin_dtype dt)
{
    const char *label = "matmul (common)";
    if (orin_check_matmul(label, ex, a, CUDA, dt) || dtype_ok(label, dt))
        return -1;
    /* One row (a decode step): our GEMV streams the weights faster than
     * cuBLASLt does at n = 1 (cuda_fused.cu). */
    if (cuda_gemv_fits(a))
        return cuda_gemv(ex, a, dt);
    const cuda_gemm g = gemm_of(&a->x, &a->w, &a->bias, &a->y);
    return lt_gemm_ws(ex, label, dt, &g);
}

/* ---- the fused epilogues ---- */

/* matmul.gelu: the tanh GELU in cuBLASLt's epilogue (applied to the f32 sum,
 * rounded once). cuBLASLt has no erf form, and its tanh is not held to f32's
 * 1e-5 here: erf, and f32, run the matmul and then the gelu op. Any n goes
 * through cuBLASLt (the GEMV has no epilogue; this op is for prefill-sized
 * products). */
extern "C" int cuda_matmul_gelu(const orin_exec *ex, const orin_matmul_gelu_args *a,
                                orin_dtype dt)
{
    const char *label = "matmul.gelu (common)";
    if (orin_check_matmul_gelu(label, ex, a, CUDA, dt) || dtype_ok(label, dt))
        return -1;
    cuda_gemm g = gemm_of(&a->x, &a->w, &a->bias, &a->y);
    g.gelu_tanh = a->kind == ORIN_GELU_TANH && dt != ORIN_F32;
    if (lt_gemm_ws(ex, label, dt, &g) != 0)
        return -1;
    if (g.gelu_tanh)
        return 0;
    const orin_gelu_args gelu = {.x = a->y, .out = a->y, .kind = a->kind};
    return cuda_gelu(ex, &gelu, dt);
}

/* matmul.add: y += x . w^T + bias as cuBLASLt's beta term, C = D = y (one
 * rounding where the sequence has two). */
extern "C" int cuda_matmul_add(const orin_exec *ex, const orin_matmul_args *a, orin_dtype dt)
{
    const char *label = "matmul.add (common)";
    if (orin_check_matmul(label, ex, a, CUDA, dt) || dtype_ok(label, dt))
        return -1;
    cuda_gemm g = gemm_of(&a->x, &a->w, &a->bias, &a->y);
    g.accumulate = true;
    return lt_gemm_ws(ex, label, dt, &g);
}
