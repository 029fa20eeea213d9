/* sample.candidates on CUDA: penalties and the top_k selection over the
 * vocabulary on the GPU, the same values, ids and count as cpu_sample.c, bit
 * for bit (see sample.h and orin/ops.h for the contract).
 *
 * Two kernels, no host sync, launch shapes from V and max alone (graph-safe):
 *
 *   select  one block per slice of SLICE logits: marks the slice's history
 *           tokens in shared memory, penalises them, finds the slice's top_k-th
 *           largest value t_b (a radix select, or a max when top_k is 1) and
 *           writes every value > t_b and the ties at t_b (up to max + 1 of
 *           them) with their ids to its region of the workspace.
 *   merge   one block: LB = max t_b is a lower bound of the global top_k-th
 *           value (slice b alone has top_k values >= t_b); every value >= the
 *           global top_k-th is in a region and >= LB, so the regions' entries
 *           >= LB hold the answer. A radix select over them gives the global
 *           top_k-th, the entries >= it are gathered, ranked (descending, ties
 *           by lower id) and written, or count = max + 1 when more than max.
 *
 * A region truncated at max + 1 ties loses nothing that matters: if its t_b
 * is the global top_k-th, that slice alone has more than max candidates and
 * the answer is "do not fit"; otherwise the lost ties are below the answer.
 *
 * Values are compared through order_key: an unsigned key whose order is the
 * float order, -0 folded onto +0 (they tie, as float comparison says) and NaN
 * mapped to 0, "absent". Penalties use _rn intrinsics so that nothing is
 * contracted into an FMA: the same roundings as the host's x / rep, x * rep,
 * x - presence.
 *
 * Values only the GPU sees: n_history is clamped to 0..history's length, and
 * history ids outside 0..V-1 are ignored, so no value in device memory makes
 * a kernel read or write out of bounds. Nothing is kept in the workspace
 * between calls; every byte of it that is read was written earlier in the
 * same call. */
#include "sample.h"

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/op_check.h"

#include <math.h>
#include <stdint.h>

#define CUDA ORIN_DEVICE_CUDA

/* select: SELECT_THREADS threads, SELECT_PER_THREAD logits each (element
 * e * SELECT_THREADS + thread of the slice, coalesced); 38 blocks for V =
 * 151,936. The history is read HISTORY_BATCH loads (of 4 ids when aligned) at
 * a time per thread, to keep that many in flight. */
#define SELECT_THREADS 512
#define SELECT_PER_THREAD 8
#define SLICE (SELECT_THREADS * SELECT_PER_THREAD)
#define HISTORY_BATCH 8
/* merge: one block; entries >= LB up to MERGE_SHARED are staged in shared
 * memory (more are read from the workspace at every pass instead). */
#define MERGE_THREADS 1024
#define MERGE_SHARED 4096

#define FULL_MASK 0xffffffffu

/* A candidate in a region of the workspace. */
struct __align__(8) sample_entry {
    float value;
    int32_t id;
};

/* A slice's result: its top_k-th key (0: fewer than top_k numbers, every
 * number taken) and how many entries its region holds. */
struct __align__(8) slice_result {
    uint32_t kth;
    int32_t n;
};

/* ---- keys, penalties ---- */

/* Unsigned key with the order of the floats: larger value, larger key. -0
 * maps to +0's key (they tie) and NaN to 0, which no number has (-inf is
 * 0x007fffff). */
__device__ __forceinline__ uint32_t order_key(float x)
{
    uint32_t u = __float_as_uint(x);
    if ((u << 1) == 0)
        u = 0;
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* sampler.c's apply_penalties on one logit, same roundings. */
__device__ __forceinline__ float penalised(float x, float rep, float presence)
{
    if (rep != 1.0f)
        x = x > 0.0f ? __fdiv_rn(x, rep) : __fmul_rn(x, rep);
    return __fsub_rn(x, presence);
}

/* ---- block-wide pieces ---- */

/* A slot in an array grown by `counter` (shared memory) for each lane whose
 * pred holds: one atomic a warp. Every lane of the warp must call it. */
__device__ __forceinline__ uint32_t warp_slot(bool pred, uint32_t *counter)
{
    const uint32_t lane = threadIdx.x & 31;
    const uint32_t ballot = __ballot_sync(FULL_MASK, pred);
    uint32_t base = 0;
    if (lane == 0 && ballot)
        base = atomicAdd(counter, (uint32_t)__popc(ballot));
    base = __shfl_sync(FULL_MASK, base, 0);
    return base + (uint32_t)__popc(ballot & ((1u << lane) - 1u));
}

/* Max over the block (blockDim.x a multiple of 32); every thread gets it.
 * scratch: 32 words of shared memory; ends with a barrier. */
__device__ __forceinline__ uint32_t block_max_u32(uint32_t v, uint32_t *scratch)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = (int)(blockDim.x >> 5);
    v = __reduce_max_sync(FULL_MASK, v);
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0u;
    v = __reduce_max_sync(FULL_MASK, v);
    __syncthreads();
    return v;
}

/* Warp 0's part of a radix pass: digits from 255 down, lane l owning
 * 255 - 8l .. 248 - 8l; finds the digit holding the want-th largest key and
 * how many of its keys are still wanted: pick = {digit, want left}, or
 * {256, 0} when fewer than `want` keys were counted. */
__device__ __forceinline__ void pick_digit(const uint32_t *hist, uint32_t want, uint32_t *pick)
{
    const int lane = threadIdx.x & 31;
    uint32_t c[8], sum = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        c[i] = hist[255 - 8 * lane - i];
        sum += c[i];
    }
    uint32_t incl = sum;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        uint32_t o = __shfl_up_sync(FULL_MASK, incl, off);
        if (lane >= off)
            incl += o;
    }
    const uint32_t total = __shfl_sync(FULL_MASK, incl, 31);
    if (total < want) {
        if (lane == 0) {
            pick[0] = 256;
            pick[1] = 0;
        }
        return;
    }
    uint32_t above = incl - sum; /* keys in higher digits than this lane's */
#pragma unroll
    for (int i = 0; i < 8; i++) {
        if (above < want && above + c[i] >= want) {
            pick[0] = (uint32_t)(255 - 8 * lane - i);
            pick[1] = want - above;
        }
        above += c[i];
    }
}

/* The k-th largest key (k >= 1, with multiplicity) of what `each` visits,
 * or 0 when it visits fewer than k numbers. each(f) calls f(ok, value, id)
 * for every candidate, with whole warps (lanes without one pass ok = false).
 * MSB-first radix select, 8 bits a pass, over a 256-bin shared histogram
 * (hist), one atomic per distinct digit a warp. All threads of the block
 * call it; it ends with a barrier (hist and pick, 2 words, reusable). */
template <class Each>
__device__ uint32_t kth_largest_key(const Each &each, uint32_t k, uint32_t *hist, uint32_t *pick)
{
    const int lane = threadIdx.x & 31;
    uint32_t prefix = 0, want = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        const uint32_t high = shift == 24 ? 0u : ~0u << (shift + 8);
        for (int i = threadIdx.x; i < 256; i += blockDim.x)
            hist[i] = 0;
        __syncthreads();
        each([&](bool ok, float value, int32_t) {
            const uint32_t key = ok ? order_key(value) : 0u;
            const bool in = key != 0 && (key & high) == prefix;
            const uint32_t digit = (key >> shift) & 255u;
            const uint32_t peers = __match_any_sync(FULL_MASK, in ? digit : 256u);
            if (in && lane == __ffs(peers) - 1)
                atomicAdd(&hist[digit], (uint32_t)__popc(peers));
        });
        __syncthreads();
        if (threadIdx.x < 32)
            pick_digit(hist, want, pick);
        __syncthreads();
        const uint32_t digit = pick[0];
        if (digit > 255) { /* first pass only: fewer than k numbers */
            __syncthreads();
            return 0;
        }
        want = pick[1];
        prefix |= digit << shift;
        /* hist is cleared next pass only after warp 0 read it (barrier above);
         * pick is rewritten only after the next pass's barriers. */
    }
    __syncthreads();
    return prefix;
}

/* ---- select: one block per slice ---- */

/* Marks the slice's tokens among history[0..n_history) in marks (SLICE bits,
 * cleared). n_history comes from device memory: clamped to 0..cap. */
__device__ __forceinline__ void mark_one(uint32_t *marks, int32_t t, int64_t base, int64_t end)
{
    if (t >= base && t < end) {
        const uint32_t r = (uint32_t)(t - base);
        atomicOr(&marks[r >> 5], 1u << (r & 31));
    }
}

__device__ void mark_history(uint32_t *marks, const int32_t *__restrict__ history, int64_t cap,
                             const int32_t *__restrict__ n_history, bool vectors, int64_t base,
                             int64_t end)
{
    int64_t n = *n_history;
    n = n < 0 ? 0 : n > cap ? cap : n;
    int64_t scalar_from = 0;
    if (vectors) { /* history 16-byte aligned: 4 ids a load */
        const int4 *hv = reinterpret_cast<const int4 *>(history);
        const int64_t nv = n >> 2;
        for (int64_t i0 = 0; i0 < nv; i0 += (int64_t)HISTORY_BATCH * SELECT_THREADS) {
            int4 t[HISTORY_BATCH];
#pragma unroll
            for (int u = 0; u < HISTORY_BATCH; u++) {
                const int64_t i = i0 + (int64_t)u * SELECT_THREADS + threadIdx.x;
                t[u] = i < nv ? __ldg(hv + i) : make_int4(-1, -1, -1, -1);
            }
#pragma unroll
            for (int u = 0; u < HISTORY_BATCH; u++) {
                mark_one(marks, t[u].x, base, end);
                mark_one(marks, t[u].y, base, end);
                mark_one(marks, t[u].z, base, end);
                mark_one(marks, t[u].w, base, end);
            }
        }
        scalar_from = nv << 2;
    }
    for (int64_t i0 = scalar_from; i0 < n; i0 += (int64_t)HISTORY_BATCH * SELECT_THREADS) {
        int32_t t[HISTORY_BATCH];
#pragma unroll
        for (int u = 0; u < HISTORY_BATCH; u++) {
            const int64_t i = i0 + (int64_t)u * SELECT_THREADS + threadIdx.x;
            t[u] = i < n ? __ldg(history + i) : -1;
        }
#pragma unroll
        for (int u = 0; u < HISTORY_BATCH; u++)
            mark_one(marks, t[u], base, end);
    }
}

/* Launch: grid ceil(V / SLICE) (38 for V = 151,936), block SELECT_THREADS;
 * shared memory SLICE bits of marks + a 256-word histogram (~1.7 KiB);
 * registers hold the slice (8 values a thread). Latency-bound: one read of
 * the slice, history / SELECT_THREADS loads a thread when penalising, four
 * radix passes (one max when top_k is 1). Writes region [max + 1] entries and
 * the slice's result. */
template <typename T>
__global__ void __launch_bounds__(SELECT_THREADS)
    sample_select_kernel(const T *__restrict__ logits, int64_t vocab,
                         const int32_t *__restrict__ history, int64_t cap,
                         const int32_t *__restrict__ n_history, bool history_vectors,
                         bool penalties, float rep, float presence, uint32_t k,
                         uint32_t region_len, slice_result *__restrict__ results,
                         sample_entry *__restrict__ regions)
{
    __shared__ uint32_t marks[SLICE / 32];
    __shared__ uint32_t hist[256];
    __shared__ uint32_t pick[2];
    __shared__ uint32_t scratch[32];
    __shared__ uint32_t n_above, n_ties;

    const int64_t base = (int64_t)blockIdx.x * SLICE;
    const int64_t end = base + SLICE < vocab ? base + SLICE : vocab;
    if (threadIdx.x == 0)
        n_above = n_ties = 0;
    if (penalties) {
        for (int i = threadIdx.x; i < SLICE / 32; i += blockDim.x)
            marks[i] = 0;
        __syncthreads();
        mark_history(marks, history, cap, n_history, history_vectors, base, end);
    }
    __syncthreads();

    float x[SELECT_PER_THREAD];
    uint32_t key[SELECT_PER_THREAD];
#pragma unroll
    for (int e = 0; e < SELECT_PER_THREAD; e++) {
        const uint32_t r = (uint32_t)(e * SELECT_THREADS + threadIdx.x);
        float v = __int_as_float(0x7fc00000); /* past the end: NaN, absent */
        if (base + r < end) {
            v = orin_cu_f32(logits[base + r]);
            if (penalties && ((marks[r >> 5] >> (r & 31)) & 1u))
                v = penalised(v, rep, presence);
        }
        x[e] = v;
        key[e] = order_key(v);
    }

    uint32_t kth;
    if (k == 1) {
        uint32_t m = 0;
#pragma unroll
        for (int e = 0; e < SELECT_PER_THREAD; e++)
            m = key[e] > m ? key[e] : m;
        kth = block_max_u32(m, scratch);
    } else {
        kth = kth_largest_key(
            [&](auto f) {
#pragma unroll
                for (int e = 0; e < SELECT_PER_THREAD; e++)
                    f(true, x[e], 0);
            },
            k, hist, pick);
    }

    /* Everything above kth first (fewer than k, or every number when kth is
     * 0), then the ties at kth while the region has room. */
    sample_entry *region = regions + (int64_t)blockIdx.x * region_len;
#pragma unroll
    for (int e = 0; e < SELECT_PER_THREAD; e++) {
        const bool above = key[e] != 0 && key[e] > kth;
        const uint32_t slot = warp_slot(above, &n_above);
        if (above)
            region[slot] = {x[e], (int32_t)(base + e * SELECT_THREADS + threadIdx.x)};
    }
    __syncthreads();
    const uint32_t first_tie = n_above;
#pragma unroll
    for (int e = 0; e < SELECT_PER_THREAD; e++) {
        const bool tie = key[e] != 0 && key[e] == kth;
        const uint32_t slot = first_tie + warp_slot(tie, &n_ties);
        if (tie && slot < region_len)
            region[slot] = {x[e], (int32_t)(base + e * SELECT_THREADS + threadIdx.x)};
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const uint32_t n = first_tie + n_ties;
        results[blockIdx.x] = {kth, (int32_t)(n < region_len ? n : region_len)};
    }
}

/* ---- merge: one block ---- */

/* The regions' entries >= lb, read from the workspace: a warp per region. */
struct region_entries {
    const slice_result *results;
    const sample_entry *regions;
    int slices;
    uint32_t region_len;
    uint32_t lb;

    template <class F> __device__ __forceinline__ void operator()(F f) const
    {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int warps = (int)(blockDim.x >> 5);
        for (int b = warp; b < slices; b += warps) {
            const int n = results[b].n;
            const sample_entry *r = regions + (int64_t)b * region_len;
            for (int j0 = 0; j0 < n; j0 += 32) {
                const int j = j0 + lane;
                const sample_entry e = j < n ? r[j] : sample_entry{0.0f, -1};
                const uint32_t key = j < n ? order_key(e.value) : 0u;
                f(key != 0 && key >= lb, e.value, e.id);
            }
        }
    }
};

/* The same entries once staged in shared memory. */
struct staged_entries {
    const float *value;
    const int32_t *id;
    uint32_t n;

    template <class F> __device__ __forceinline__ void operator()(F f) const
    {
        for (uint32_t i0 = 0; i0 < n; i0 += blockDim.x) {
            const uint32_t i = i0 + threadIdx.x;
            const bool ok = i < n;
            f(ok, ok ? value[i] : 0.0f, ok ? id[i] : -1);
        }
    }
};

/* out[i] goes to rank (key descending, id ascending) among out[0..n): n <= 1024
 * ranked by counting, `per` threads an entry (a power of two dividing 32). */
__device__ void write_ranked(const float *out_value, const int32_t *out_id, uint32_t n,
                             float *__restrict__ values, int32_t *__restrict__ ids)
{
    uint32_t per = 1;
    while (per < 32 && per * 2 * n <= blockDim.x)
        per *= 2;
    const uint32_t i = threadIdx.x / per, sub = threadIdx.x % per;
    uint32_t rank = 0;
    if (i < n) {
        const uint32_t ki = order_key(out_value[i]);
        const int32_t idi = out_id[i];
        for (uint32_t j = sub; j < n; j += per) {
            const uint32_t kj = order_key(out_value[j]);
            rank += kj > ki || (kj == ki && out_id[j] < idi);
        }
    }
    for (uint32_t off = per / 2; off > 0; off >>= 1)
        rank += __shfl_xor_sync(FULL_MASK, rank, off);
    if (i < n && sub == 0) {
        values[rank] = out_value[i];
        ids[rank] = out_id[i];
    }
}

/* Launch: grid 1, block MERGE_THREADS; shared memory MERGE_SHARED staged
 * entries (32 KiB) + CUDA_SAMPLE_MAX_CANDIDATES output entries (8 KiB) + a
 * 256-word histogram (~42 KiB, static). Latency-bound: one read of the
 * regions' entries >= LB (a few hundred for top_k 20-64), four radix passes
 * over them in shared memory (none for top_k 1), the ranking. */
__global__ void __launch_bounds__(MERGE_THREADS)
    sample_merge_kernel(const slice_result *__restrict__ results,
                        const sample_entry *__restrict__ regions, int slices,
                        uint32_t region_len, uint32_t k, uint32_t max,
                        float *__restrict__ values, int32_t *__restrict__ ids,
                        int32_t *__restrict__ count)
{
    __shared__ float stage_value[MERGE_SHARED];
    __shared__ int32_t stage_id[MERGE_SHARED];
    __shared__ float out_value[CUDA_SAMPLE_MAX_CANDIDATES];
    __shared__ int32_t out_id[CUDA_SAMPLE_MAX_CANDIDATES];
    __shared__ uint32_t hist[256];
    __shared__ uint32_t pick[2];
    __shared__ uint32_t scratch[32];
    __shared__ uint32_t n_staged, n_out;

    if (threadIdx.x == 0)
        n_staged = n_out = 0;
    uint32_t lb = 0;
    for (int b = threadIdx.x; b < slices; b += blockDim.x)
        lb = results[b].kth > lb ? results[b].kth : lb;
    lb = block_max_u32(lb, scratch); /* its barriers also publish the zeroed counters */

    const region_entries all = {results, regions, slices, region_len, lb};
    all([&](bool ok, float value, int32_t id) {
        const uint32_t slot = warp_slot(ok, &n_staged);
        if (ok && slot < MERGE_SHARED) {
            stage_value[slot] = value;
            stage_id[slot] = id;
        }
    });
    __syncthreads();
    const uint32_t staged_n = n_staged;
    const bool in_shared = staged_n <= MERGE_SHARED;
    const staged_entries staged = {stage_value, stage_id, staged_n};

    /* top_k 1: LB is the largest key of all (0: every logit is NaN). */
    uint32_t kth = lb;
    if (k > 1)
        kth = in_shared ? kth_largest_key(staged, k, hist, pick)
                        : kth_largest_key(all, k, hist, pick);

    auto gather = [&](bool ok, float value, int32_t id) {
        const bool take = ok && order_key(value) >= kth;
        const uint32_t slot = warp_slot(take, &n_out);
        if (take && slot < max) {
            out_value[slot] = value;
            out_id[slot] = id;
        }
    };
    if (in_shared)
        staged(gather);
    else
        all(gather);
    __syncthreads();
    const uint32_t n = n_out;
    if (n > max) { /* the ties do not fit: nothing else written */
        if (threadIdx.x == 0)
            *count = (int32_t)(max + 1);
        return;
    }
    write_ranked(out_value, out_id, n, values, ids);
    if (threadIdx.x == 0)
        *count = (int32_t)n;
}

/* ---- entry points ---- */

static int64_t slices_of(int64_t vocab)
{
    return (vocab + SLICE - 1) / SLICE;
}

/* Workspace: the slices' results, then their regions of max + 1 entries. */
size_t cuda_sample_candidates_workspace_size(const void *args)
{
    const orin_sample_candidates_args *a = (const orin_sample_candidates_args *)args;
    if (!a || a->logits.ndim < 1 || a->values.ndim < 1 || a->logits.shape[0] < 1 ||
        a->values.shape[0] < 0)
        return 0;
    const size_t slices = (size_t)slices_of(a->logits.shape[0]);
    const size_t region_len = (size_t)a->values.shape[0] + 1;
    return slices * sizeof(slice_result) + slices * region_len * sizeof(sample_entry);
}

bool cuda_sample_candidates_supports(const void *args, char *why, size_t why_cap)
{
    const orin_sample_candidates_args *a = (const orin_sample_candidates_args *)args;
    if (a->values.ndim >= 1 && a->values.shape[0] > CUDA_SAMPLE_MAX_CANDIDATES) {
        if (why && why_cap)
            snprintf(why, why_cap, "%lld candidates (the cuda op writes up to %d)",
                     (long long)a->values.shape[0], CUDA_SAMPLE_MAX_CANDIDATES);
        return false;
    }
    return true;
}

template <typename T>
static int launch_sample(const orin_exec *ex, const orin_sample_candidates_args *a,
                         const char *label, orin_dtype dt)
{
    const int64_t vocab = a->logits.shape[0], max = a->values.shape[0];
    const int64_t slices = slices_of(vocab);
    const uint32_t region_len = (uint32_t)max + 1;
    slice_result *results = (slice_result *)ex->workspace;
    sample_entry *regions = (sample_entry *)(results + slices);
    const bool penalties = !(a->repetition_penalty == 1.0f && a->presence_penalty == 0.0f);
    cudaStream_t stream = orin_cu_stream(ex);

    sample_select_kernel<T><<<(unsigned)slices, SELECT_THREADS, 0, stream>>>(
        (const T *)a->logits.data, vocab, (const int32_t *)a->history.data,
        a->history.shape[0], (const int32_t *)a->n_history.data,
        orin_cu_aligned16(a->history.data), penalties, a->repetition_penalty,
        a->presence_penalty, (uint32_t)a->top_k, region_len, results, regions);
    if (orin_cu_launched(label, dt, "select: logits [%lld], history [%lld], top_k %d, max %lld",
                         (long long)vocab, (long long)a->history.shape[0], a->top_k,
                         (long long)max))
        return -1;
    sample_merge_kernel<<<1, MERGE_THREADS, 0, stream>>>(
        results, regions, (int)slices, region_len, (uint32_t)a->top_k, (uint32_t)max,
        (float *)a->values.data, (int32_t *)a->ids.data, (int32_t *)a->count.data);
    return orin_cu_launched(label, dt, "merge: %lld slices, top_k %d, max %lld",
                            (long long)slices, a->top_k, (long long)max);
}

int cuda_sample_candidates(const orin_exec *ex, const orin_sample_candidates_args *a,
                           orin_dtype dt)
{
    const char *label = "sample.candidates (common)";
    if (sample_candidates_check(label, ex, a, CUDA, dt, cuda_sample_candidates_workspace_size(a)))
        return -1;
    if (a->values.shape[0] > CUDA_SAMPLE_MAX_CANDIDATES)
        return orin_error_set("%s: values: %lld candidates, the cuda op writes up to %d", label,
                              (long long)a->values.shape[0], CUDA_SAMPLE_MAX_CANDIDATES);
    ORIN_CU_DISPATCH(dt, label, T, return launch_sample<T>(ex, a, label, dt));
    return 0;
}
