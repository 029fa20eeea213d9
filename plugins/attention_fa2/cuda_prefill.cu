// attention_fa2's CUDA prefill: FlashAttention-2 forward (Dao 2023).
//
// f16/bf16 run the tensor-core kernel of cuda_prefill_mma.cuh, or on Hopper
// at head_dim 128 (the default there) the wgmma kernel of
// cuda_prefill_wgmma.cuh (both instantiated in cuda_prefill_f16.cu and
// cuda_prefill_bf16.cu); attention.full likewise, with its own wgmma kernel
// at head_dim 64 and 72 on Hopper; f32 runs the CUDA-core kernel below, with
// the same loop structure and expf. This file holds the host side: the
// argument checks, the tile configuration (ORIN_FA2_PREFILL_CONFIG) and
// attention.full's kernel (ORIN_FA2_FULL_CONFIG), the 16-byte-alignment
// decision, and `supports`.
//
// Positions come from device memory and are never trusted: a row whose position
// is outside 0..max_kv_len-1 is written as NaN and reads nothing; every K/V row
// a kernel reads is at a position <= its block's largest valid one, so inside
// 0..max_kv_len-1, inside the cache (max_kv_len <= capacity is checked here).
#include "cuda.h"
#include "cuda_prefill_mma.cuh"

#include "orin/op_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Indexed by fa2_prefill_config.
static const char *const fa2_config_names[] = {
    "q128k64w4", "q128k64w8", "q64k64w4", "q128k32w4s3", "wgmma", "wgmma-qreg", "wgmma-sync",
};
static const int fa2_config_block_q[] = {128, 128, 64, 128, 128, 128, 128};
static_assert(sizeof fa2_config_names / sizeof fa2_config_names[0] == FA2_PREFILL_CONFIGS &&
                  sizeof fa2_config_block_q / sizeof fa2_config_block_q[0] == FA2_PREFILL_CONFIGS,
              "one name and one BQ per fa2_prefill_config");
// Indexed by fa2_full_config (ORIN_FA2_FULL_CONFIG).
static const char *const fa2_full_config_names[] = {"mma", "wgmma", "wgmma-q128", "wgmma-n80"};
static_assert(sizeof fa2_full_config_names / sizeof fa2_full_config_names[0] == FA2_FULL_CONFIGS,
              "one name per fa2_full_config");

// ---- f32: CUDA cores ----

enum { F32_BQ = 32, F32_BKV = 32, F32_WARPS = 8, F32_ROWS = F32_BQ / F32_WARPS };

template <int HD> struct fa2_f32_shape {
    static constexpr int K_LD = HD + 4;  // padded K rows, see the kernel comment
    static constexpr int SMEM = (F32_BQ * HD + F32_BKV * K_LD + F32_BKV * HD) * (int)sizeof(float);
};

// Copies `rows` rows of HD floats into smem rows `ld` floats apart; row r from
// src(r), or zeros where src(r) is NULL. float4 where vec16 (rows 16-byte aligned).
template <int HD, typename Src>
__device__ __forceinline__ void fa2_f32_copy_rows(float *dst, int ld, int rows, bool vec16, Src src)
{
    constexpr int CHUNKS = HD / 4;
    for (int idx = threadIdx.x; idx < rows * CHUNKS; idx += F32_WARPS * 32) {
        const int r = idx / CHUNKS, c = idx % CHUNKS;
        const float *row = src(r);
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (row && vec16)
            v = *reinterpret_cast<const float4 *>(row + 4 * c);
        else if (row)
            v = make_float4(row[4 * c], row[4 * c + 1], row[4 * c + 2], row[4 * c + 3]);
        *reinterpret_cast<float4 *>(dst + r * ld + 4 * c) = v;
    }
}

// FlashAttention-2 forward in f32 on CUDA cores (exact f32: fmaf, expf).
//
// Launch: grid (H, ceil(n / 32)) (fa2_prefill_grid), block 256 threads (8
// warps of 4 rows), dynamic smem fa2_f32_shape::SMEM (Q 32 x HD, K 32 x
// (HD + 4), V 32 x HD floats: 25 KB at hd 64, 49 KB at hd 128).
//
// Per KV tile of 32 keys: lane j computes the scores of key j against the
// warp's 4 rows (K row j as float4: with rows HD + 4 floats apart, 8 lanes'
// 16-byte reads cover all 32 banks; Q rows are broadcasts), the warp runs the
// online softmax with shuffles, then each lane accumulates output columns
// lane + 32 i of its 4 rows, taking p_j from lane j by shuffle and V row j
// from smem (consecutive lanes, consecutive banks). Bound by smem and FMA
// issue; f32 is for checking the half-precision paths, not for speed.
template <int HD>
__global__ void __launch_bounds__(F32_WARPS * 32)
    fa2_prefill_f32_kernel(const __grid_constant__ fa2_prefill_params p)
{
    typedef fa2_f32_shape<HD> S;
    constexpr int COLS = HD / 32;  // output columns per lane

    extern __shared__ __align__(16) float fsmem[];
    float *q_sm = fsmem, *k_sm = q_sm + F32_BQ * HD, *v_sm = k_sm + F32_BKV * S::K_LD;
    __shared__ int pos_sm[F32_BQ];
    __shared__ int warp_max_sm[F32_WARPS];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int head = blockIdx.x;
    const int i0 = (gridDim.y - 1 - blockIdx.y) * F32_BQ;
    const int kv_head = head / p.group;
    const int row0 = warp * F32_ROWS;
    const orin_kv_view kv = p.cache;
    const bool vec16 = p.vec16 != 0;
    const int64_t ld = (int64_t)p.heads * HD;

    fa2_load_positions<F32_BQ, F32_WARPS * 32>(p, i0, pos_sm);
    const float *q_head = static_cast<const float *>(p.q) + (int64_t)head * HD;
    fa2_f32_copy_rows<HD>(q_sm, HD, F32_BQ, vec16, [&](int r) -> const float * {
        return i0 + r < p.n ? q_head + (int64_t)(i0 + r) * ld : nullptr;
    });
    __syncthreads();
    int warp_max, warp_min;
    fa2_warp_span(pos_sm, row0, F32_ROWS, &warp_max, &warp_min);
    if (lane == 0)
        warp_max_sm[warp] = warp_max;
    __syncthreads();
    int block_max = -1;
#pragma unroll
    for (int w = 0; w < F32_WARPS; w++)
        block_max = max(block_max, warp_max_sm[w]);
    const int kv_end = block_max + 1;
    const int tiles = (kv_end + F32_BKV - 1) / F32_BKV;

    int row_pos[F32_ROWS];
    float o[F32_ROWS][COLS], row_m[F32_ROWS], row_l[F32_ROWS];  // l: this lane's part
#pragma unroll
    for (int r = 0; r < F32_ROWS; r++) {
        row_pos[r] = pos_sm[row0 + r];
        row_m[r] = -INFINITY;
        row_l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < COLS; c++)
            o[r][c] = 0.0f;
    }

    for (int tile = 0; tile < tiles; tile++) {
        const int j0 = tile * F32_BKV;
        __syncthreads();  // everyone is done with the previous tile
        // Keys past kv_end: zero rows (never read: may be NaN or past capacity).
        fa2_f32_copy_rows<HD>(k_sm, S::K_LD, F32_BKV, vec16, [&](int r) -> const float * {
            return j0 + r < kv_end ? static_cast<const float *>(kv.k) + orin_kv_offset(&kv, j0 + r, kv_head) : nullptr;
        });
        fa2_f32_copy_rows<HD>(v_sm, HD, F32_BKV, vec16, [&](int r) -> const float * {
            return j0 + r < kv_end ? static_cast<const float *>(kv.v) + orin_kv_offset(&kv, j0 + r, kv_head) : nullptr;
        });
        __syncthreads();
        if (j0 > warp_max)
            continue;  // every row of this warp ends before this tile

        // scores of key j0 + lane
        float s[F32_ROWS];
#pragma unroll
        for (int r = 0; r < F32_ROWS; r++)
            s[r] = 0.0f;
#pragma unroll 8
        for (int d = 0; d < HD; d += 4) {
            const float4 k4 = *reinterpret_cast<const float4 *>(k_sm + lane * S::K_LD + d);
#pragma unroll
            for (int r = 0; r < F32_ROWS; r++) {
                const float4 q4 = *reinterpret_cast<const float4 *>(q_sm + (row0 + r) * HD + d);
                s[r] = fmaf(q4.x, k4.x, s[r]);
                s[r] = fmaf(q4.y, k4.y, s[r]);
                s[r] = fmaf(q4.z, k4.z, s[r]);
                s[r] = fmaf(q4.w, k4.w, s[r]);
            }
        }

        // online softmax (the same as the CPU: scores * scale, expf)
        const int key = j0 + lane;
#pragma unroll
        for (int r = 0; r < F32_ROWS; r++) {
            const float x = key <= row_pos[r] ? s[r] * p.scale : -INFINITY;
            const float m_new = fmaxf(row_m[r], orin_cu_warp_max(x));
            // a row that has seen only masked keys: exp(-inf - 0) = 0, not NaN
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;
            const float alpha = expf(row_m[r] - m_use);
            s[r] = expf(x - m_use);
            row_m[r] = m_new;
            row_l[r] = row_l[r] * alpha + s[r];
#pragma unroll
            for (int c = 0; c < COLS; c++)
                o[r][c] *= alpha;
        }

        // O += P V
#pragma unroll 4
        for (int j = 0; j < F32_BKV; j++) {
            float v[COLS];
#pragma unroll
            for (int c = 0; c < COLS; c++)
                v[c] = v_sm[j * HD + lane + 32 * c];
#pragma unroll
            for (int r = 0; r < F32_ROWS; r++) {
                const float pj = __shfl_sync(0xffffffffu, s[r], j);
#pragma unroll
                for (int c = 0; c < COLS; c++)
                    o[r][c] = fmaf(pj, v[c], o[r][c]);
            }
        }
    }

    float *out_head = static_cast<float *>(p.out) + (int64_t)head * HD;
#pragma unroll
    for (int r = 0; r < F32_ROWS; r++) {
        const float l = orin_cu_warp_sum(row_l[r]);
        if (i0 + row0 + r >= p.n)
            continue;
        float *dst = out_head + (int64_t)(i0 + row0 + r) * ld;
        // l >= 1 for a valid row; an invalid one is NaN whatever l is
        const float inv_l = row_pos[r] < 0 ? NAN : 1.0f / l;
#pragma unroll
        for (int c = 0; c < COLS; c++)
            dst[lane + 32 * c] = o[r][c] * inv_l;
    }
}

template <int HD> static int fa2_launch_f32(const fa2_prefill_launch *l)
{
    typedef fa2_f32_shape<HD> S;
    static bool smem_set[16];
    auto kernel = fa2_prefill_f32_kernel<HD>;
    if (fa2_smem_limit((const void *)kernel, S::SMEM, l->device, smem_set, l->label))
        return -1;
    kernel<<<fa2_prefill_grid(l->p.heads, l->p.n, F32_BQ), F32_WARPS * 32, S::SMEM, l->stream>>>(
        l->p);
    return 0;
}

// ---- host side ----

static bool fa2_head_dim_ok(int64_t hd)
{
    return hd == 64 || hd == 128;
}

extern "C" bool fa2_cuda_supports(const void *args, char *why, size_t why_cap)
{
    const orin_attention_args *a = (const orin_attention_args *)args;
    if (!a || a->q.ndim != 3)
        return true;  // run's checks report the bad call
    if (fa2_head_dim_ok(a->q.shape[2]))
        return true;
    if (why && why_cap)
        snprintf(why, why_cap, "head_dim %lld (fa2 on cuda runs 64 and 128)",
                 (long long)a->q.shape[2]);
    return false;
}

// A kernel choice from the environment: the index of getenv(var) in
// names[0..count) (logged as `what`), -1 when unset or empty, -2 when it names
// none (fa2_env_unknown says so). The pickers read each variable once.
static int fa2_env_choice(const char *var, const char *const *names, int count, const char *what)
{
    const char *name = getenv(var);
    if (!name || !*name)
        return -1;
    for (int c = 0; c < count; c++) {
        if (strcmp(name, names[c]) == 0) {
            orin_log(ORIN_LOG_INFO, "fa2 %s %s (%s)", what, name, var);
            return c;
        }
    }
    return -2;
}

// The error of a variable that names no choice, with the names it takes.
static int fa2_env_unknown(const char *label, const char *var, const char *const *names,
                           int count, const char *what)
{
    char list[128] = "";
    for (int c = 0; c < count; c++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", c ? ", " : "",
                 names[c]);
    return orin_error_set("%s: %s=%s names no %s (%s)", label, var, getenv(var), what, list);
}

// The tile configuration of a half-precision call: the environment's, or the
// default, the fastest measured (bench/notes/fa2-prefill.md): on Hopper at hd
// 128 the wgmma kernel with Q in registers (H200, 8k/16k: 435/454 TFLOP/s in
// f16 against 376/359 for the mma.sync tiles; fa2_wgmma_ok falls back to
// q128k64w4 where the call or the build cannot run it); else warps of 32 rows
// (MT 2: half the smem traffic per flop of 16-row warps) in 2 blocks an SM:
// 128 x 64 tiles double-buffered (96 KB) on Hopper (228 KB of smem an SM) and
// 128 x 32 tiles, 3 stages (80 KB) on Ampere/Orin (164 KB). 64-row tiles when
// 128-row ones would leave SMs without a block.
static int fa2_pick_config(const orin_exec *ex, int64_t n, int64_t heads, int head_dim,
                           const char *label)
{
    static const int env = fa2_env_choice("ORIN_FA2_PREFILL_CONFIG", fa2_config_names,
                                          FA2_PREFILL_CONFIGS, "prefill: tile config");
    if (env == -2)
        return fa2_env_unknown(label, "ORIN_FA2_PREFILL_CONFIG", fa2_config_names,
                               FA2_PREFILL_CONFIGS, "tile config");
    if (env >= 0)
        return env;
    const int major = orin_cu_cc_major(ex) ? orin_cu_cc_major(ex) : 8; // unknown: Ampere's tiles
    int config = major >= 9 || head_dim == 64 ? FA2_Q128_K64_W4 : FA2_Q128_K32_W4;
    if (major == 9 && head_dim == 128)
        config = FA2_WGMMA_QREG;
    if ((n + 127) / 128 * heads < orin_cu_sm_count(ex))
        config = FA2_Q64_K64_W4;
    return config;
}

// Whether a wgmma kernel (cuda_prefill_wgmma.cuh) can run on this device: a
// Hopper GPU (compute capability 9: the sm_90a code; later majors have no
// wgmma) in a build with the sm_90a target (FA2_HAVE_SM90A, from CMake: a
// plain sm_90 build has no wgmma).
static bool fa2_wgmma_device_ok(const orin_exec *ex)
{
#ifdef FA2_HAVE_SM90A
    return orin_cu_cc_major(ex) == 9;
#else
    (void)ex;
    return false;
#endif
}

// Whether the causal wgmma kernel runs this call: the device (above), head_dim
// 128, 16-byte aligned rows (cp.async and the 16-byte stores). Where not, the
// wgmma configs run the mma.sync q128k64w4 tiles.
static bool fa2_wgmma_ok(const orin_exec *ex, int64_t hd, bool vec16)
{
    return fa2_wgmma_device_ok(ex) && hd == 128 && vec16;
}

// 16-byte accesses need every row start 16-byte aligned: q and out rows are
// hd elements (a multiple of 16 bytes) from an aligned base; K/V rows start at
// k + (pos * pos_stride + head * head_stride) elements.
static bool fa2_vec16_ok(const orin_attention_args *a, size_t elem)
{
    const orin_kv_view *kv = &a->cache;
    return orin_cu_aligned16(a->q.data) && orin_cu_aligned16(a->out.data) &&
           orin_cu_aligned16(kv->k) && orin_cu_aligned16(kv->v) &&
           ((uint64_t)kv->pos_stride * elem) % 16 == 0 &&
           ((uint64_t)kv->head_stride * elem) % 16 == 0;
}

extern "C" int fa2_cuda_prefill(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt)
{
    const char *label = "attention.prefill (fa2)";
    if (orin_check_exec(label, ex, ORIN_DEVICE_CUDA) ||
        orin_check_attention(label, a, ORIN_DEVICE_CUDA, dt, false))
        return -1;
    const int64_t n = a->q.shape[0], heads = a->q.shape[1], hd = a->q.shape[2];
    if (!fa2_head_dim_ok(hd))
        return orin_error_set("%s: head_dim %lld (fa2 on cuda runs 64 and 128)", label,
                              (long long)hd);

    int config = -1, block_q = F32_BQ;
    if (dt != ORIN_F32) {
        if ((config = fa2_pick_config(ex, n, heads, (int)hd, label)) < 0)
            return -1;
        block_q = fa2_config_block_q[config];
    }
    if ((n + block_q - 1) / block_q > 65535 || heads > INT_MAX)
        return orin_error_set("%s: %lld tokens x %lld heads is past one launch's grid", label,
                              (long long)n, (long long)heads);
    const bool vec16 = fa2_vec16_ok(a, orin_dtype_size(dt));
    if ((config == FA2_WGMMA || config == FA2_WGMMA_QREG || config == FA2_WGMMA_SYNC) &&
        !fa2_wgmma_ok(ex, hd, vec16))
        config = FA2_Q128_K64_W4;  // the same BQ: the grid check above holds

    fa2_prefill_launch l = {
        .p =
            {
                .q = a->q.data,
                .out = a->out.data,
                .positions = (const int32_t *)a->positions.data,
                .cu_seqlens = NULL,
                .segments = 0,
                .cache = a->cache,
                .n = (int32_t)n,
                .heads = (int32_t)heads,
                .group = (int32_t)(heads / a->cache.n_kv_heads),
                .max_kv_len = a->max_kv_len,
                .scale = a->scale,
                .scale_log2 = a->scale * 1.44269504088896341f,
                .vec16 = vec16,
            },
        .head_dim = (int)hd,
        .full = false,
        .config = config,
        .device = ex->device->index,
        .stream = orin_cu_stream(ex),
        .label = label,
    };
    int rc;
    switch (dt) {
    case ORIN_F32:
        rc = hd == 64 ? fa2_launch_f32<64>(&l) : fa2_launch_f32<128>(&l);
        break;
    case ORIN_F16:
        rc = fa2_prefill_mma_f16(&l);
        break;
    case ORIN_BF16:
        rc = fa2_prefill_mma_bf16(&l);
        break;
    default:
        return orin_error_set("%s: dtype %s is not supported on cuda", label,
                              orin_dtype_name(dt));
    }
    if (rc)
        return rc;
    return orin_cu_launched(label, dt, "n %lld, heads %lld/%d, head_dim %lld, max_kv_len %d, %s",
                            (long long)n, (long long)heads, a->cache.n_kv_heads, (long long)hd,
                            a->max_kv_len, config >= 0 ? fa2_config_names[config] : "f32 tiles");
}

// ---- attention.full: the tensor-core kernel without the causal mask ----

extern "C" bool fa2_cuda_full_supports(const void *args, char *why, size_t why_cap)
{
    const orin_attention_full_args *a = (const orin_attention_full_args *)args;
    if (!a || a->q.ndim != 3 || fa2_full_head_dim_ok(a->q.shape[2]))
        return true;  // a bad call: run's checks report it
    if (why && why_cap)
        snprintf(why, why_cap, "head_dim %lld (fa2's attention.full on cuda runs 64, 72 and 128)",
                 (long long)a->q.shape[2]);
    return false;
}

// attention.full's kernel: the environment's, or by default on a Hopper GPU
// of the sm_90a build at head_dim 64 and 72 with 16-byte aligned rows the
// wgmma kernel of 3 warpgroups (cuda_prefill_wgmma.cuh,
// bench/notes/fa2-prefill.md); everywhere else (and for the wgmma names where
// they cannot run) the mma.sync kernel.
static int fa2_pick_full_config(const orin_exec *ex, int64_t hd, bool vec16, const char *label)
{
    static const int env = fa2_env_choice("ORIN_FA2_FULL_CONFIG", fa2_full_config_names,
                                          FA2_FULL_CONFIGS, "attention.full: kernel");
    if (env == -2)
        return fa2_env_unknown(label, "ORIN_FA2_FULL_CONFIG", fa2_full_config_names,
                               FA2_FULL_CONFIGS, "kernel");
    const int config = env >= 0 ? env : FA2_FULL_WGMMA;
    if (config != FA2_FULL_MMA && !(fa2_wgmma_device_ok(ex) && (hd == 64 || hd == 72) && vec16))
        return FA2_FULL_MMA;
    return config;
}

// k and v [n, Hkv, hd] are read through a cache view of them (pos = token),
// so that the kernel keeps its one K/V address function.
extern "C" int fa2_cuda_attention_full(const orin_exec *ex, const orin_attention_full_args *a,
                                       orin_dtype dt)
{
    const char *label = "attention.full (fa2)";
    if (orin_check_attention_full(label, ex, a, ORIN_DEVICE_CUDA, dt))
        return -1;
    const int64_t n = a->q.shape[0], heads = a->q.shape[1], hd = a->q.shape[2];
    const int64_t kv_heads = a->k.shape[1], segments = a->cu_seqlens.shape[0] - 1;
    if (!fa2_full_head_dim_ok(hd))
        return orin_error_set("%s: head_dim %lld (fa2's attention.full on cuda runs 64, 72 and "
                              "128)", label, (long long)hd);
    if (dt != ORIN_F16 && dt != ORIN_BF16)
        return orin_error_set("%s: dtype %s (the tensor-core kernel runs f16 and bf16)", label,
                              orin_dtype_name(dt));
    if ((n + 127) / 128 > 65535 || heads > INT_MAX || segments > INT_MAX)
        return orin_error_set("%s: %lld tokens x %lld heads is past one launch's grid", label,
                              (long long)n, (long long)heads);
    if (n == 0)
        return 0;
    const size_t elem = orin_dtype_size(dt);
    const bool vec16 = orin_cu_aligned16(a->q.data) && orin_cu_aligned16(a->out.data) &&
                       orin_cu_aligned16(a->k.data) && orin_cu_aligned16(a->v.data) &&
                       (hd * elem) % 16 == 0;
    const int config = fa2_pick_full_config(ex, hd, vec16, label);
    if (config < 0)
        return -1;
    fa2_prefill_launch l = {
        .p =
            {
                .q = a->q.data,
                .out = a->out.data,
                .positions = NULL,
                .cu_seqlens = (const int32_t *)a->cu_seqlens.data,
                .segments = (int32_t)segments,
                .cache = {.k = a->k.data, .v = a->v.data, .dtype = dt,
                          .n_kv_heads = (int32_t)kv_heads, .head_dim = (int32_t)hd,
                          .pos_stride = kv_heads * hd, .head_stride = hd,
                          .capacity = (int32_t)n},
                .n = (int32_t)n,
                .heads = (int32_t)heads,
                .group = (int32_t)(heads / kv_heads),
                .max_kv_len = (int32_t)n,
                .scale = a->scale,
                .scale_log2 = a->scale * 1.44269504088896341f,
                .vec16 = vec16,
            },
        .head_dim = (int)hd,
        .full = true,
        .config = config,
        .device = ex->device->index,
        .stream = orin_cu_stream(ex),
        .label = label,
    };
    int rc = dt == ORIN_F16 ? fa2_prefill_mma_f16(&l) : fa2_prefill_mma_bf16(&l);
    if (rc)
        return rc;
    return orin_cu_launched(label, dt,
                            "n %lld, heads %lld/%lld, head_dim %lld, %lld segments, %s kernel",
                            (long long)n, (long long)heads, (long long)kv_heads, (long long)hd,
                            (long long)segments, fa2_full_config_names[config]);
}
