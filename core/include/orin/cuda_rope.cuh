// RoPE's arithmetic on CUDA, shared by ops_common's rope op and its fused
// rope_kv_write, and by attention_fa2's decode, which runs rope_kv_write as its
// prologue (orin_attention_args.rope): so that all of them give bit for bit
// what the CPU's rope gives (ops_common cpu.c: rope_inv_freq, rope_row): at
// positions of thousands one ulp of angle moves cos by 1e-4, so every
// rounding is the CPU's. The rope_kv_write kernel itself is here too, for
// both plugins (attention_fa2 launches it where its own kernel cannot take
// the prologue).
#ifndef ORIN_CUDA_ROPE_CUH
#define ORIN_CUDA_ROPE_CUH

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/ops.h"

#include <math.h>

// The inverse frequencies of the first ROPE_TABLE pairs travel in the kernel's
// parameters (computed on the host with glibc's pow, as the CPU does); pairs
// past them (head_dim > 512, which no Qwen has) are computed on the device.
#define ROPE_TABLE 256

typedef struct rope_table {
    float inv_freq[ROPE_TABLE];
} rope_table;

// cpu.c's rope_inv_freq, on the host: f32 exponent, pow in double rounded to
// f32, then the f32 reciprocal.
static inline void rope_table_fill(rope_table *t, int half, int hd, float theta)
{
    for (int j = 0; j < half && j < ROPE_TABLE; j++) {
        float exponent = (float)(2 * j) / (float)hd;
        float power = (float)pow((double)theta, (double)exponent);
        t->inv_freq[j] = 1.0f / power;
    }
}

// The same on the device, for pairs past the table: CUDA's double pow is
// within 2 ulp of glibc's, so the f32 result is the same but for a double
// landing within 2 ulp of an f32 rounding boundary.
__device__ __forceinline__ float rope_inv_freq_at(int j, int hd, float theta)
{
    float exponent = __fdiv_rn((float)(2 * j), (float)hd);
    float power = (float)pow((double)theta, (double)exponent);
    return __fdiv_rn(1.0f, power);
}

// cos and sin of the angle at `pos` of a pair of inverse frequency inv, and
// (rope_cos_sin) of pair j's: angle = (float)pos * inv_freq[j], an
// f32 product; cos and sin of it in double, rounded to f32. A negative position
// (device memory: the host cannot check it) gives NaN, so the row shows it.
__device__ __forceinline__ void rope_cos_sin_inv(int32_t pos, float inv, float *c, float *s)
{
    float angle = __fmul_rn((float)pos, inv);
    double sd, cd;
    sincos((double)angle, &sd, &cd);
    *c = pos >= 0 ? (float)cd : __int_as_float(0x7fc00000);
    *s = pos >= 0 ? (float)sd : __int_as_float(0x7fc00000);
}

__device__ __forceinline__ void rope_cos_sin(int32_t pos, int j, int hd, float theta,
                                             const rope_table &table, float *c, float *s)
{
    rope_cos_sin_inv(pos, j < ROPE_TABLE ? table.inv_freq[j] : rope_inv_freq_at(j, hd, theta), c,
                     s);
}

// x1' = x1 c - x2 s, x2' = x2 c + x1 s, each product rounded to f32 first
// (__fmul_rn: never fused into an FMA), as cpu.c's rope_row.
__device__ __forceinline__ void rope_rotate(float x1, float x2, float c, float s, float *y1,
                                            float *y2)
{
    *y1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    *y2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

// One rotated pair (x1, x2) = (x[j], x[j + hd/2]) of a q or k head as
// rope_kv_write leaves it: with a norm, rmsnorm'ed by the head's sum of squares
// ss (rounded to T as the unfused rmsnorm stores it, with the norm weights n1,
// n2 of the pair), then rotated by (c, s) and rounded to T.
template <typename T>
__device__ __forceinline__ void rope_norm_rotate(float x1, float x2, bool norm, float ss, int hd,
                                                 float eps, float n1, float n2, float c, float s,
                                                 T *y1, T *y2)
{
    if (norm) {
        const float inv = 1.0f / sqrtf(ss / (float)hd + eps);
        x1 = orin_cu_f32(orin_cu_from_f32<T>(n1 * (x1 * inv)));
        x2 = orin_cu_f32(orin_cu_from_f32<T>(n2 * (x2 * inv)));
    }
    float r1, r2;
    rope_rotate(x1, x2, c, s, &r1, &r2);
    *y1 = orin_cu_from_f32<T>(r1);
    *y2 = orin_cu_from_f32<T>(r2);
}

// ---- rope_kv_write ------------------------------------------------------------------

// Per (token, head slot): slots 0..H-1 are q heads, H..H+Hkv-1 k heads,
// then Hkv v heads. A q/k head is loaded, rmsnorm'ed over hd when its norm
// weight is given (rounded to T as the unfused rmsnorm stores it), rotated as
// ops_common's rope does it (the CPU's roundings), and stored; k and v heads
// also go to the cache at the token's position (a position outside 0..capacity-1 is skipped; a
// negative rotary position leaves NaN in q and k, as rope does). The rotation
// is at rope_positions[token] (the caller passes positions when they agree).
// Launch: grid (H + 2 Hkv, n), hd / 2 threads rounded up to whole warps (a
// thread per rotated pair; the norm's block reduction wants whole warps);
// bound by latency at decode sizes (a few KB per token).
template <typename T>
__global__ void rope_kv_write_kernel(T *__restrict__ q, T *__restrict__ k, const T *__restrict__ v,
                                     const T *__restrict__ q_norm, const T *__restrict__ k_norm,
                                     const int32_t *__restrict__ positions,
                                     const int32_t *__restrict__ rope_positions, int heads,
                                     int kv_heads, int hd, float eps, float theta,
                                     orin_kv_view cache, rope_table table)
{
    __shared__ float scratch[32];
    const int slot = blockIdx.x, token = blockIdx.y, half = hd / 2, j = threadIdx.x;
    const bool live = j < half; // the last warp's spare threads add 0, write nothing
    const bool is_q = slot < heads;
    const T *norm = slot >= heads + kv_heads ? nullptr : is_q ? q_norm : k_norm;
    // the norm weights are never written by a kernel: loaded before the PDL wait
    const float n1 = norm && live ? orin_cu_f32(norm[j]) : 0.0f;
    const float n2 = norm && live ? orin_cu_f32(norm[j + half]) : 0.0f;
    orin_cu_allow_next();
    orin_cu_wait_prior();
    const int32_t pos = positions[token];
    const bool in_cache = pos >= 0 && pos < cache.capacity;
    // the rotary position goes out with the position and the row: one round trip
    const int32_t rope_pos = slot < heads + kv_heads ? rope_positions[token] : 0;
    if (slot >= heads + kv_heads) { // a v head: copy into the cache
        int h = slot - heads - kv_heads;
        const T *src = v + ((size_t)token * kv_heads + h) * hd;
        if (in_cache && live) {
            T *dst = (T *)cache.v + orin_kv_offset(&cache, pos, h);
            dst[j] = src[j];
            dst[j + half] = src[j + half];
        }
        return;
    }
    const int h = is_q ? slot : slot - heads;
    T *row = is_q ? q + ((size_t)token * heads + h) * hd : k + ((size_t)token * kv_heads + h) * hd;
    float x1 = live ? orin_cu_f32(row[j]) : 0.0f, x2 = live ? orin_cu_f32(row[j + half]) : 0.0f;
    // the angle's double sincos before the norm's reduction, not after it
    float c = 0.0f, s = 0.0f;
    if (live)
        rope_cos_sin(rope_pos, j, hd, theta, table, &c, &s);
    // the norm's sum of squares: pair j's term, the block's warps in order
    const float ss = norm ? orin_cu_block_sum(fmaf(x1, x1, x2 * x2), scratch) : 0.0f;
    if (!live)
        return;
    T y1, y2;
    rope_norm_rotate<T>(x1, x2, norm != nullptr, ss, hd, eps, n1, n2, c, s, &y1, &y2);
    row[j] = y1;
    row[j + half] = y2;
    if (!is_q && in_cache) {
        T *dst = (T *)cache.k + orin_kv_offset(&cache, pos, h);
        dst[j] = y1;
        dst[j + half] = y2;
    }
}

// A thread per rotated pair: any even head_dim up to 2048 (a block of 1024).
static inline bool rope_kv_write_fits(int64_t hd)
{
    return hd > 0 && hd % 2 == 0 && hd <= 2048;
}

// Launches rope_kv_write_kernel for a call orin_check_rope_kv_write accepted
// (PDL on); returns orin_cu_launched's status, or -1 for a head_dim or a
// token count the kernel cannot take.
template <typename T>
int rope_kv_write_launch(const orin_exec *ex, const orin_rope_kv_write_args *a, orin_dtype dt,
                         const char *label)
{
    const int64_t n = a->q.shape[0], heads = a->q.shape[1], hd = a->q.shape[2];
    if (!rope_kv_write_fits(hd))
        return orin_error_set("%s: head_dim %lld (runs even ones up to 2048)", label,
                              (long long)hd);
    if (n > 65535)
        return orin_error_set("%s: %lld tokens in one call (at most 65535)", label, (long long)n);
    const void *rope_positions = a->rope_positions.data ? a->rope_positions.data
                                                        : a->positions.data;
    const dim3 grid((unsigned)(heads + 2 * a->k.shape[1]), (unsigned)n);
    rope_table table;
    rope_table_fill(&table, (int)(hd / 2), (int)hd, a->theta);
    orin_cu_launch(ex, true, rope_kv_write_kernel<T>, grid,
                   dim3((unsigned)((hd / 2 + 31) / 32 * 32)), 0, (T *)a->q.data, (T *)a->k.data,
                   (const T *)a->v.data, (const T *)a->q_norm.data, (const T *)a->k_norm.data,
                   (const int32_t *)a->positions.data, (const int32_t *)rope_positions,
                   (int)heads, (int)a->k.shape[1], (int)hd, a->eps, a->theta, a->cache, table);
    return orin_cu_launched(label, dt, "q [%lld, %lld, %lld], k/v [%lld, %lld, %lld]",
                            (long long)n, (long long)heads, (long long)hd, (long long)n,
                            (long long)a->k.shape[1], (long long)hd);
}

#endif
