// attention_fa2's CUDA prefill on Hopper's warpgroup MMA (wgmma, sm_90a): the
// causal FlashAttention-2 forward of cuda_prefill_mma.cuh at head_dim 128,
// f16 and bf16, with S = Q K^T and O += P V issued by warpgroups of 4 warps
// (wgmma.mma_async) instead of warps (mma.sync). ORIN_FA2_PREFILL_CONFIG=wgmma
// (or wgmma-qreg, wgmma-sync) picks it, never the default; the host side
// (cuda_prefill.cu) runs it only on a compute capability 9 device, in a build
// with the sm_90a target, at head_dim 128 with 16-byte aligned rows, and runs
// the mma.sync kernel's q128k64w4 tiles (the same 128-row Q tiles) everywhere
// else.
//
// attention.full at head_dim 64 and 72 (Qwen3-VL's vision towers) has a
// wgmma kernel of its own, fa2_full_wgmma_kernel (the default there on the
// same devices and builds; ORIN_FA2_FULL_CONFIG=mma runs the mma.sync one):
// the same pieces (descriptors, fences, the softmax, the pipelined loop
// fa2w_pipeline) on 32-byte-swizzled tiles of 16-dim column blocks, without
// the causal mask, within the segments of cu_seqlens.
//
// What the PTX ISA fixes, and what this file relies on (ISA 9.7.15):
//  - wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}: a warpgroup (4
//    consecutive warps, the first a multiple of 4) computes D (64 x N, f32) +=
//    A (64 x 16) B (16 x N). A from shared memory (a descriptor) or from
//    registers; B from shared memory. Asynchronous: wgmma.fence before it
//    whenever its registers (D, or A) were touched by other instructions,
//    wgmma.commit_group after a batch, wgmma.wait_group N before the registers
//    are read (or A's rewritten).
//  - Register fragments (m64nNk16; warp w of the warpgroup owns rows 16w..16w+15,
//    g = lane / 4, t = lane % 4): D's f32 element 4j + 2h + e is row g + 8h,
//    column 8j + 2t + e; A's four .b32 registers are (row g, k 2t..2t+1),
//    (row g + 8, k 2t..), (row g, k 2t+8..), (row g + 8, k 2t+8..), the lower k
//    in the low half: per warp, mma.m16n8k16's C and A layouts. So S's 8-key
//    column blocks 2kk and 2kk + 1, rounded to f16/bf16 pairs, are P's A
//    registers for k-step kk of P V, as in the mma.sync kernel.
//  - Descriptor (64 bits): bits 0-13 start address >> 4, 16-29 leading
//    dimension byte offset (LBO) >> 4, 32-45 stride dimension byte offset (SBO)
//    >> 4, 49-51 base offset (0: every tile here starts on a 1024-byte
//    boundary, where the 128-byte swizzle pattern repeats), 62-63 swizzle mode
//    (1 = 128-byte swizzle).
//  - 128-byte swizzle: the 16-byte chunk c (0..7) of the 128-byte row r of an
//    8-row, 1024-byte atom lies at chunk c ^ (r & 7), i.e. address bits 4-6
//    XOR bits 7-9 (Swizzle<3,4,3> in the ISA's canonical layouts).
//    K-major (imm-trans 0; Q as A and K as B of S = Q K^T: rows of 64 halves
//    along k): canonical ((8,m),(T,2k)):((8T,SBO),(1,T)), T = 8 halves: rows
//    128 bytes apart, SBO between 8-row groups (1024 here), LBO unused
//    ("assumed 1"). A k-step of 16 halves is 32 bytes inside the 128-byte row:
//    it advances the start address by 32 bytes (bits 7-9 unchanged, so the
//    hardware's XOR still sees the row). Head dims 64..127 are a second
//    column block of the tile, ROWS * 128 bytes on.
//    MN-major (imm-trans-b 1; V as B of P V: keys are k, head dims n,
//    contiguous): canonical ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): 64 n
//    contiguous in a 128-byte row, 8 k-rows 128 bytes apart, SBO between
//    8-key groups (1024), LBO between 64-dim column blocks (BKV * 128 here).
//    So K and V tiles share one layout: [dim block 2][key][64 halves], rows
//    swizzled; Q likewise with its 128 rows.
//  - Shared memory written by the generic proxy (cp.async, st.shared) is read
//    by wgmma through the async proxy: each thread's fence.proxy.async after
//    its copies land, then the barrier, orders them.
#ifndef ORIN_ATTENTION_FA2_CUDA_PREFILL_WGMMA_CUH
#define ORIN_ATTENTION_FA2_CUDA_PREFILL_WGMMA_CUH

#include "cuda_prefill_mma.cuh"

#include <type_traits>

// wgmma needs the "a" target (sm_90a): other targets (sm_80, sm_87, a plain
// sm_90) compile the kernel as a trap, and the host never launches it there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FA2W_ARCH 1
#else
#define FA2W_ARCH 0
#endif

// ---- the tile shape ----

// BQ 128 rows a block: 2 warpgroups (256 threads) of 64 rows; K/V tiles of BKV
// keys; head_dim 128. PIPE: the softmax of tile t + 1 runs while P V of tile t
// is on the tensor cores (3 K/V stages); else every product is waited for at
// once (2 stages).
template <int BKV, bool PIPE> struct fa2w_shape {
    static constexpr int HD = 128, BQ = 128, WARPS = 8, THREADS = WARPS * 32;
    static constexpr int STAGES = PIPE ? 3 : 2;
    static constexpr int Q_BYTES = BQ * HD * 2;      // 32 KB
    static constexpr int KV_BYTES = BKV * HD * 2;    // one K or V tile
    static constexpr int STAGE_BYTES = 2 * KV_BYTES; // K tile, then V tile
    static constexpr int Q_OFFSET = 0, KV_OFFSET = Q_BYTES;
    // + 1024: the dynamic smem's start is rounded up to 1024 bytes at run time
    static constexpr int SMEM = Q_BYTES + STAGES * STAGE_BYTES + 1024;
    static_assert(BKV == 64, "S is one m64n64k16 column (P V's k-steps: BKV / 16)");
    static_assert(BKV % 16 == 0 && BQ % 16 == 0, "copy passes of 16 rows");
};

// Byte offset of 16-byte chunk c (0..15: head dims 8c..8c+7) of row r in a
// tile of ROWS rows: two column blocks (dims 0-63, 64-127) of ROWS rows of
// 128 bytes, chunks 128-byte swizzled. A warp's 16-byte copies (2 rows x 16
// chunks) fill 4 whole 128-byte rows: no bank conflicts.
template <int ROWS> __device__ __forceinline__ uint32_t fa2w_offset(int r, int c)
{
    return (uint32_t)((c >> 3) * ROWS * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// Byte offset of 16-byte chunk c (head dims 8c..8c+7) of row r in a tile of
// ROWS rows in 32-byte-swizzled column blocks (attention.full at head_dim 64
// and 72): block c / 2 (dims 16b..16b+15, one k-step of S) holds ROWS rows of
// 32 bytes, chunk c & 1 of row r at (c & 1) ^ ((r >> 2) & 1). A warp's 8-lane
// phases (4 rows x 2 chunks of one block) fill 128 contiguous bytes.
template <int ROWS> __device__ __forceinline__ uint32_t fa2w_offset32(int r, int c)
{
    return (uint32_t)((c >> 1) * ROWS * 32 + r * 32 + (((c & 1) ^ ((r >> 2) & 1)) << 4));
}

// Descriptor swizzle modes (bits 62-63).
enum { FA2W_SW128 = 1, FA2W_SW32 = 3 };

// The matrix descriptor of an operand at shared address addr, swizzled
// `mode` (128 bytes unless told).
__device__ __forceinline__ uint64_t fa2w_desc(uint32_t addr, uint32_t lbo, uint32_t sbo,
                                              uint32_t mode = FA2W_SW128)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFFu) >> 4) << 32) | ((uint64_t)mode << 62);
}

// ---- PTX wrappers ----

__device__ __forceinline__ void fa2w_fence()
{
#if FA2W_ARCH
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void fa2w_commit()
{
#if FA2W_ARCH
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N> __device__ __forceinline__ void fa2w_wait()
{
#if FA2W_ARCH
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Generic-proxy writes of this thread to shared memory (cp.async landed,
// st.shared) made visible to later async-proxy reads (wgmma operands).
__device__ __forceinline__ void fa2w_fence_proxy()
{
#if FA2W_ARCH
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Pins registers in place: the compiler must neither read a wgmma's
// accumulators before the wait_group that completes it nor move writes of
// them (or of A) past the wgmma.fence that orders them before the wgmma.
template <int N> __device__ __forceinline__ void fa2w_pin(float (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(r[i])::"memory");
}

template <int N> __device__ __forceinline__ void fa2w_pin(uint32_t (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+r"(r[i])::"memory");
}

#define FA2W_D8(i)                                                                          \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),             \
        "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define FA2W_D32 FA2W_D8(0), FA2W_D8(8), FA2W_D8(16), FA2W_D8(24)
#define FA2W_D36 FA2W_D32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
#define FA2W_D40 FA2W_D32, FA2W_D8(32)
#define FA2W_D64 FA2W_D32, FA2W_D8(32), FA2W_D8(40), FA2W_D8(48), FA2W_D8(56)
#define FA2W_R32                                                                            \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
    "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FA2W_R36                                                                            \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
    "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}"
#define FA2W_R40                                                                            \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
    "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "  \
    "%36, %37, %38, %39}"
#define FA2W_R64                                                                            \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
    "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "  \
    "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "  \
    "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// d (64 x 64, f32) = A B (+ d where acc): A 64 x 16 (K-major) and B 16 x 64
// (K-major, i.e. B^T's rows: keys) from shared memory.
template <typename T>
__device__ __forceinline__ void fa2w_mma_s(float (&d)[32], uint64_t a, uint64_t b, int acc)
{
#if FA2W_ARCH
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FA2W_R32
                     ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : FA2W_D32
                     : "l"(a), "l"(b), "r"(acc));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FA2W_R32
                     ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : FA2W_D32
                     : "l"(a), "l"(b), "r"(acc));
#endif
}

// The same with A (Q) from registers (a0..a3, the fragment layout above).
template <typename T>
__device__ __forceinline__ void fa2w_mma_s_rs(float (&d)[32], uint32_t a0, uint32_t a1,
                                              uint32_t a2, uint32_t a3, uint64_t b, int acc)
{
#if FA2W_ARCH
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FA2W_R32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                     : FA2W_D32
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b), "r"(acc));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FA2W_R32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                     : FA2W_D32
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b), "r"(acc));
#endif
}

// d (64 x N, f32, NREG = N / 2 registers) += A B: A 64 x 16 from registers
// (a0..a3, the fragment layout above), B 16 x N from shared memory, MN-major
// (imm-trans-b 1). N 128 (the causal kernel at head_dim 128), 64, 72 and 80
// (attention.full at head_dim 64 and 72; wgmma's n runs 8..256 in steps of 8
// for f16/bf16).
#define FA2W_PV(NK, REGS, DOPS, AOPS)                                                       \
    if constexpr (std::is_same<T, __half>::value)                                           \
        asm volatile("wgmma.mma_async.sync.aligned." NK ".f32.f16.f16 " REGS ", " AOPS      \
                     ", 1, 1, 1, 1;\n"                                                      \
                     : DOPS                                                                 \
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b));                         \
    else                                                                                    \
        asm volatile("wgmma.mma_async.sync.aligned." NK ".f32.bf16.bf16 " REGS ", " AOPS    \
                     ", 1, 1, 1, 1;\n"                                                      \
                     : DOPS                                                                 \
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b))
template <typename T, int NREG>
__device__ __forceinline__ void fa2w_mma_pv(float (&d)[NREG], uint32_t a0, uint32_t a1,
                                            uint32_t a2, uint32_t a3, uint64_t b)
{
    static_assert(NREG == 64 || NREG == 32 || NREG == 36 || NREG == 40, "N 128, 64, 72 or 80");
#if FA2W_ARCH
    if constexpr (NREG == 64) {
        FA2W_PV("m64n128k16", FA2W_R64, FA2W_D64, "{%64, %65, %66, %67}, %68");
    } else if constexpr (NREG == 32) {
        FA2W_PV("m64n64k16", FA2W_R32, FA2W_D32, "{%32, %33, %34, %35}, %36");
    } else if constexpr (NREG == 36) {
        FA2W_PV("m64n72k16", FA2W_R36, FA2W_D36, "{%36, %37, %38, %39}, %40");
    } else {
        FA2W_PV("m64n80k16", FA2W_R40, FA2W_D40, "{%40, %41, %42, %43}, %44");
    }
#endif
}

// O += P V over a KV tile of BKV positions: P from registers (pk: BKV / 16
// k-steps of 4 registers), V from shared memory at v_desc, whose 16-row
// k-steps lie 16 * PITCH bytes apart (the tile's swizzled row pitch: 128 for
// head_dim 128, 32 for the full kernel's); issued and committed, not waited for.
template <typename T, int BKV, int PITCH, int NREG>
__device__ __forceinline__ void fa2w_issue_pv(float (&o)[NREG], uint32_t (&pk)[BKV / 4],
                                              uint64_t v_desc)
{
    fa2w_pin(o);
    fa2w_pin(pk);
    fa2w_fence();
#pragma unroll
    for (int kk = 0; kk < BKV / 16; kk++)
        fa2w_mma_pv<T>(o, pk[4 * kk], pk[4 * kk + 1], pk[4 * kk + 2], pk[4 * kk + 3],
                       v_desc + (uint64_t)((kk * 16 * PITCH) >> 4));
    fa2w_commit();
}
#undef FA2W_PV

#undef FA2W_D8
#undef FA2W_D32
#undef FA2W_D36
#undef FA2W_D40
#undef FA2W_D64
#undef FA2W_R32
#undef FA2W_R36
#undef FA2W_R40
#undef FA2W_R64

// ---- the kernel's pieces ----

// The per-thread state of one warpgroup's rows: the thread's rows are
// wrow0 + g (h 0) and wrow0 + g + 8 (h 1) of the block's tile.
struct fa2w_rows {
    float m[2];  // running max (scaled by log2 e; -inf: nothing seen)
    float l[2];  // this lane's part of the running sum
};

// 1 / l of a row at the end: the quad's 4 lanes hold its parts (each lane
// summed its own columns' weights).
__device__ __forceinline__ float fa2w_inv_l(float l)
{
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    return 1.0f / l;
}

// The online softmax of one tile: S (the thread's BKV / 2 scores of keys j0..)
// masked where MASK (key j0 + 8j + 2t + e attends iff <= the row's last key,
// last_sm[row], and with FULL also >= its first, lo_sm[row]), new maxima (the
// quad's 4 lanes by shuffles), P = exp2(s * scale_log2 - m) packed to T pairs
// in the A-register order of P V (pk[2j + h]: row h, keys 8j + 2t, +1), alpha
// = the rescale of the old O and l per row. Returns whether some lane of the
// warp moved a maximum (alpha != 1). S is only read: the masked scores are new
// values, so that no instruction writes a wgmma accumulator register while the
// other product (P V) is in flight (ptxas would serialize the wgmmas: C7515).
template <typename T, int BKV, bool MASK, bool FULL>
__device__ __forceinline__ bool fa2w_softmax_tile(const float (&s)[BKV / 2],
                                                  uint32_t (&pk)[BKV / 4], float (&alpha)[2],
                                                  fa2w_rows &st, const int *last_sm,
                                                  const int *lo_sm, int row0, int j0, float sl2)
{
    constexpr int NT = BKV / 8;
    const int t4 = (threadIdx.x & 31) & 3;
    bool moved = false;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float x[2 * NT];
        const int last = MASK ? last_sm[row0 + 8 * h] - j0 - 2 * t4 : 0;
        const int first = MASK && FULL ? lo_sm[row0 + 8 * h] - j0 - 2 * t4 : 0;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const bool out0 = j * 8 > last || (FULL && j * 8 < first);
            const bool out1 = j * 8 + 1 > last || (FULL && j * 8 + 1 < first);
            x[2 * j] = MASK && out0 ? -INFINITY : s[4 * j + 2 * h];
            x[2 * j + 1] = MASK && out1 ? -INFINITY : s[4 * j + 2 * h + 1];
        }
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < NT; j++)
            mx = fmaxf(mx, fmaxf(x[2 * j], x[2 * j + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(st.m[h], mx * sl2);
        // a row that has seen only masked keys keeps m = -inf: use 0 so that
        // exp2(-inf - 0) = 0 instead of exp2(-inf + inf) = NaN
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        alpha[h] = fa2_exp2(st.m[h] - m_use);
        moved |= alpha[h] != 1.0f;
        st.m[h] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const float p0 = fa2_exp2(fmaf(x[2 * j], sl2, -m_use));
            const float p1 = fa2_exp2(fmaf(x[2 * j + 1], sl2, -m_use));
            sum += p0 + p1;
            pk[2 * j + h] = fa2_pack<T>(p0, p1);
        }
        st.l[h] = st.l[h] * alpha[h] + sum;
    }
    return __any_sync(0xffffffffu, moved);
}

// The softmax of the tile at key j0, masked only where `mask` (the caller's
// warp-uniform test: the tile crosses some row's last key, or with FULL its
// first): the two instantiations keep the unmasked tiles free of the mask's
// compares.
template <typename T, int BKV, bool FULL>
__device__ __forceinline__ bool fa2w_softmax(const float (&s)[BKV / 2], uint32_t (&pk)[BKV / 4],
                                             float (&alpha)[2], fa2w_rows &st, const int *last_sm,
                                             const int *lo_sm, int row0, int j0, bool mask,
                                             float sl2)
{
    if (mask)
        return fa2w_softmax_tile<T, BKV, true, FULL>(s, pk, alpha, st, last_sm, lo_sm, row0, j0,
                                                     sl2);
    return fa2w_softmax_tile<T, BKV, false, FULL>(s, pk, alpha, st, last_sm, lo_sm, row0, j0,
                                                  sl2);
}

// O's rows h scaled by alpha[h] (element 4d + 2h + e is row h, dim 8d + 2t + e).
template <int NO>
__device__ __forceinline__ void fa2w_rescale(float (&o)[NO], const float (&alpha)[2])
{
#pragma unroll
    for (int d = 0; d < NO / 4; d++) {
        o[4 * d] *= alpha[0];
        o[4 * d + 1] *= alpha[0];
        o[4 * d + 2] *= alpha[1];
        o[4 * d + 3] *= alpha[1];
    }
}

// The pipelined KV loop of a warpgroup (the causal kernel's PIPE configs, the
// full kernel), with the block's K/V tiles [0, tiles) streaming through a
// cp.async ring of 3 stages: on entry tiles 0 and 1 are in flight (a commit
// group each; issue_kv(t) copies tile t into stage t % 3), tile 0 has landed
// and is visible (the caller waited, fenced, and passed a barrier). The
// warpgroup computes tiles [t0, t1) (FROM0: t0 is 0, known at compile time).
//
// The first tile's S and softmax come before (t0 = 0) or in the iteration
// before it; iteration t issues S(t + 1) and P V(t), runs the softmax of
// t + 1 while P V(t) is on the tensor cores, then rescales O once P V(t) is
// done. Every iteration starts with tile + 1 landed and visible (this
// thread's copies, fenced for the async proxy, then everyone's after the
// barrier), every warpgroup done with tile - 1 (its P V was waited for), whose
// stage takes tile + 2.
//
// issue_s(s, t) and issue_pv(pk, t) issue and commit a product (not waited
// for); softmax(s, pk, alpha, t) is the tile's online softmax (returns
// whether a maximum moved).
template <int BKV, bool FROM0, int NO, class IssueKV, class IssueS, class IssuePV, class Softmax>
__device__ __forceinline__ void fa2w_pipeline(float (&o)[NO], int tiles, int t0, int t1,
                                              IssueKV issue_kv, IssueS issue_s, IssuePV issue_pv,
                                              Softmax softmax)
{
    if (FROM0)
        t0 = 0;
    uint32_t pk[BKV / 4];
    if (t0 == 0 && t1 > 0) {
        float s[BKV / 2];
        issue_s(s, 0);
        fa2w_wait<0>();
        fa2w_pin(s);
        float alpha[2];
        (void)softmax(s, pk, alpha, 0);
        // O is 0: no rescale
    }
    for (int tile = 0; tile < tiles; tile++) {
        orin_cu_cp_async_wait<0>();
        fa2w_fence_proxy();
        __syncthreads();
        if (tile + 2 < tiles)
            issue_kv(tile + 2);
        orin_cu_cp_async_commit();
        const bool cur = (FROM0 || tile >= t0) && tile < t1;        // P V(tile)
        const bool next = (FROM0 || tile + 1 >= t0) && tile + 1 < t1; // S(tile + 1)
        float s[BKV / 2];
        if (cur) {
            if (next)
                issue_s(s, tile + 1);
            issue_pv(pk, tile);
            if (next) {
                fa2w_wait<1>();  // S(tile + 1) done; P V(tile) may still run
                fa2w_pin(s);
                uint32_t pk_next[BKV / 4];
                float alpha[2];
                const bool moved = softmax(s, pk_next, alpha, tile + 1);
                fa2w_wait<0>();
                fa2w_pin(o);
                fa2w_pin(pk);
                if (moved)
                    fa2w_rescale(o, alpha);
#pragma unroll
                for (int i = 0; i < BKV / 4; i++)
                    pk[i] = pk_next[i];
            } else {
                fa2w_wait<0>();
                fa2w_pin(o);
            }
        } else if (!FROM0 && next) {
            // the warpgroup's first tile is tile + 1 > 0: its S and softmax
            // (O is 0: no rescale). A path of its own, so that ptxas sees
            // every wait before the reads it orders (else C7514: it
            // serializes every wgmma).
            issue_s(s, tile + 1);
            fa2w_wait<0>();
            fa2w_pin(s);
            float alpha[2];
            (void)softmax(s, pk, alpha, tile + 1);
        }
    }
}

// FlashAttention-2 forward (causal prefill), f16/bf16, head_dim 128, on wgmma.
//
// Launch: grid (H, ceil(n / 128)) (fa2_prefill_grid: heaviest Q tiles first),
// block 256 threads = 2 warpgroups of 64 Q rows each (warp w owns rows
// 16w..16w+15 of the tile, a warpgroup's 4 warps its 64), dynamic smem
// fa2w_shape::SMEM: Q tile 32 KB + STAGES x (K, V tiles of 64 keys: 16 KB
// each) + 1 KB for rounding the start up to 1024 bytes = 97 KB (wgmma-sync,
// 2 stages) or 129 KB (wgmma, wgmma-qreg: 3 stages), plus 1 KB static: one
// block an SM (8 warps), what registers allow anyway: O 64 + S 32 + P 16 (x2
// in flight) f32/b32 a thread (+ Q's 32 with QREG); ptxas (nvcc 13.0, sm_90a,
// f16 = bf16): 155 (wgmma-sync), 198 (wgmma), 229 (wgmma-qreg), no spills
// (__launch_bounds__(256, 1) lets it use 255).
//
// Per KV tile each warpgroup issues S = Q K^T as 8 wgmma m64n64k16 (k-steps
// over head_dim; Q and K from 128-byte-swizzled shared memory), masks and
// exponentiates S in registers (scale_log2, ex2.approx, quad shuffles, the
// rescale of O skipped when no max of the warp moved: exact), and issues
// O += P V as 4 wgmma m64n128k16 with P from registers and V MN-major from
// shared memory. K/V tiles stream through cp.async (16 bytes a thread a row
// chunk, zero-fill past the block's last key) as in the mma.sync kernel, one
// block barrier a tile; a warpgroup skips tiles past its rows' largest
// position, a warp masks only tiles crossing its rows' smallest.
//
// PIPE (config wgmma): S of tile t + 1 is issued before P V of tile t, and the
// softmax of t + 1 runs while P V of t is on the tensor cores (its rescale of O
// waits for it): K/V need 3 stages (tile t + 2 loads while t + 1's K and t's V
// are read). !PIPE (wgmma-sync): each product is waited for before the next
// step; only the other warpgroup's work overlaps it.
//
// QREG (config wgmma-qreg): Q's A fragments are loaded once into registers
// (ldmatrix) and S takes A from them.
//
// Bounds: tensor-core time is 2 x 64 x 64 x 128 x 2 flop per warpgroup-tile =
// 256 + 256 cycles at Hopper's ~4096 dense flop/clk/SM; the softmax's 4096
// ex2 a warpgroup-tile take 256 cycles of MUFU (16/clk/SM) and ~6 FP32/ALU ops
// a score; S's operands (Q and K, 2 KB + 2 KB per m64n64k16 of 32 cycles) take
// 128 B/clk, all of the SM's shared-memory bandwidth while S runs (64 B/clk
// with QREG). Global traffic: K/V once per (Q tile, head), from L2.
//
// Positions, NaN rows and zero-filled K/V rows: exactly as fa2_prefill_mma_kernel.
template <typename T, int BKV, bool PIPE, bool QREG>
__global__ void __launch_bounds__(256, 1)
    fa2_prefill_wgmma_kernel(const __grid_constant__ fa2_prefill_params p)
{
#if FA2W_ARCH
    typedef fa2w_shape<BKV, PIPE> S;
    constexpr int BQ = S::BQ, STAGES = S::STAGES;

    extern __shared__ __align__(1024) char smem_raw[];
    __shared__ int pos_sm[BQ];
    __shared__ int warp_max_sm[S::WARPS];

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4;
    const int g = lane / 4, t4 = lane % 4;
    const int head = blockIdx.x;
    const int i0 = (gridDim.y - 1 - blockIdx.y) * BQ;
    const int kv_head = head / p.group;
    const int wrow0 = warp * 16;  // this warp's first row in the tile
    // Tiles start on 1024-byte boundaries (the swizzle's period; descriptors'
    // base offset 0), whatever the dynamic smem's start.
    const uint32_t raw_base = orin_cu_smem_addr(smem_raw);
    const uint32_t base = (raw_base + 1023u) & ~1023u;
    char *smem = smem_raw + (base - raw_base);
    const orin_kv_view kv = p.cache;

    // -- positions: the block's KV bound, the warpgroup's, the warp's span
    fa2_load_positions<BQ, S::THREADS>(p, i0, pos_sm);
    __syncthreads();
    int warp_max, warp_min;
    fa2_warp_span(pos_sm, wrow0, 16, &warp_max, &warp_min);
    if (lane == 0)
        warp_max_sm[warp] = warp_max;
    __syncthreads();
    int block_max = -1, wg_max = -1;
#pragma unroll
    for (int w = 0; w < S::WARPS; w++) {
        block_max = max(block_max, warp_max_sm[w]);
        if (w / 4 == wg)
            wg_max = max(wg_max, warp_max_sm[w]);
    }
    const int kv_end = block_max + 1;          // keys [0, kv_end) are read
    const int tiles = (kv_end + BKV - 1) / BKV;
    const int wg_tiles = (wg_max + BKV) / BKV; // tiles this warpgroup computes

    // -- copies: thread tid moves chunk tid % 16 of rows tid / 16 + 16 i
    const int cc = tid % 16, cr = tid / 16;
    const T *q_head = static_cast<const T *>(p.q) + (int64_t)head * S::HD;
    const int64_t q_ld = (int64_t)p.heads * S::HD;
#pragma unroll
    for (int pass = 0; pass < BQ / 16; pass++) {
        const int r = cr + 16 * pass;
        const uint32_t off = S::Q_OFFSET + fa2w_offset<BQ>(r, cc);
        if (i0 + r < p.n)
            orin_cu_cp_async16(base + off, q_head + (int64_t)(i0 + r) * q_ld + cc * 8);
        else
            *reinterpret_cast<uint4 *>(smem + off) = make_uint4(0, 0, 0, 0);
    }
    const T *k_src = static_cast<const T *>(kv.k) + cc * 8;
    const T *v_src = static_cast<const T *>(kv.v) + cc * 8;
    auto issue_kv = [&](int tile) {
        const uint32_t dst = base + S::KV_OFFSET + (tile % STAGES) * S::STAGE_BYTES;
#pragma unroll
        for (int pass = 0; pass < BKV / 16; pass++) {
            const int r = cr + 16 * pass;
            int pos = tile * BKV + r;
            asm volatile("" : "+r"(pos));  // one multiply-add a row here, not hoisted registers
            const bool live = pos < kv_end;
            const int64_t e = live ? orin_kv_offset(&kv, pos, kv_head) : 0;
            const uint32_t off = fa2w_offset<BKV>(r, cc);
            // src-size 0: zero-fill, nothing read (the base address is valid anyway)
            orin_cu_cp_async16(dst + off, k_src + e, live ? 16 : 0);
            orin_cu_cp_async16(dst + S::KV_BYTES + off, v_src + e, live ? 16 : 0);
        }
    };
    // prologue: Q with tile 0 (group 0), tiles 1..STAGES-2 (a group each)
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < tiles)
            issue_kv(s);
        orin_cu_cp_async_commit();
    }

    // -- descriptors: Q rows 64 wg.., k-steps of 32 bytes in a 128-byte row,
    // the second column block 128 (Q) or BKV (K) rows on; V: 16 keys a k-step
    // (2048 bytes), dim blocks BKV rows apart (LBO)
    const uint64_t q_desc = fa2w_desc(base + S::Q_OFFSET + wg * 64 * 128, 16, 1024);
    const uint64_t kv_desc0 = fa2w_desc(base + S::KV_OFFSET, 16, 1024);
    const uint64_t v_desc0 = fa2w_desc(base + S::KV_OFFSET + S::KV_BYTES, BKV * 128, 1024);
    // descriptor + bytes: the start address field counts 16-byte units
    auto q_step = [](int kk) { return (uint64_t)(((kk >> 2) * BQ * 128 + (kk & 3) * 32) >> 4); };
    auto k_step = [](int kk) { return (uint64_t)(((kk >> 2) * BKV * 128 + (kk & 3) * 32) >> 4); };
    auto stage_step = [](int tile) { return (uint64_t)(((tile % STAGES) * S::STAGE_BYTES) >> 4); };

    float o[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        o[i] = 0.0f;
    fa2w_rows st;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        st.m[h] = -INFINITY;
        st.l[h] = 0.0f;
    }
    const float sl2 = p.scale_log2;
    const int row0 = wrow0 + g;  // the thread's first row (the second is row0 + 8)

    // QREG: the warp's 16 Q rows as wgmma A fragments (= mma.m16n8k16's A:
    // ldmatrix.x4, lanes 0-15 rows 0-15 at chunk 2kk, lanes 16-31 at 2kk + 1),
    // read once after Q lands (q_load).
    uint32_t q_frag[QREG ? S::HD / 16 : 1][4];
    auto q_load = [&]() {
        if constexpr (QREG) {
#pragma unroll
            for (int kk = 0; kk < S::HD / 16; kk++)
                fa2_ldsm_x4(base + S::Q_OFFSET + fa2w_offset<BQ>(wrow0 + (lane & 15),
                                                                 2 * kk + (lane >> 4)),
                            q_frag[kk]);
        }
    };

    // S = Q K^T of `tile` (issued, committed, not waited for)
    auto issue_s = [&](float (&s)[BKV / 2], int tile) {
        const uint64_t k_desc = kv_desc0 + stage_step(tile);
        fa2w_pin(s);
        fa2w_fence();
#pragma unroll
        for (int kk = 0; kk < S::HD / 16; kk++) {
            if constexpr (QREG)
                fa2w_mma_s_rs<T>(s, q_frag[kk][0], q_frag[kk][1], q_frag[kk][2], q_frag[kk][3],
                                 k_desc + k_step(kk), kk > 0);
            else
                fa2w_mma_s<T>(s, q_desc + q_step(kk), k_desc + k_step(kk), kk > 0);
        }
        fa2w_commit();
    };
    // O += P V of `tile` (issued, committed, not waited for)
    auto issue_pv = [&](uint32_t (&pk)[BKV / 4], int tile) {
        fa2w_issue_pv<T, BKV, 128>(o, pk, v_desc0 + stage_step(tile));
    };

    // the online softmax of `tile` (masked where it crosses the smallest
    // position of the warp's rows)
    auto softmax = [&](const float (&s)[BKV / 2], uint32_t (&pk)[BKV / 4], float (&alpha)[2],
                       int tile) {
        const int j0 = tile * BKV;
        return fa2w_softmax<T, BKV, false>(s, pk, alpha, st, pos_sm, nullptr, row0, j0,
                                           j0 + BKV - 1 > warp_min, sl2);
    };

    if constexpr (!PIPE) {
        if constexpr (QREG) {
            orin_cu_cp_async_wait<STAGES - 2>();  // Q (with tile 0)
            __syncthreads();
            q_load();
        }
        for (int tile = 0; tile < tiles; tile++) {
            // Tile `tile` has landed (this thread's copies; fenced for wgmma),
            // and after the barrier everyone's are, and every warpgroup is
            // done with tile - 1, whose buffer the next issue reuses.
            orin_cu_cp_async_wait<STAGES - 2>();
            fa2w_fence_proxy();
            __syncthreads();
            if (tile + STAGES - 1 < tiles)
                issue_kv(tile + STAGES - 1);
            orin_cu_cp_async_commit();
            if (tile >= wg_tiles)
                continue;  // every row of this warpgroup ends before this tile

            float s[BKV / 2];
            issue_s(s, tile);
            fa2w_wait<0>();
            fa2w_pin(s);
            uint32_t pk[BKV / 4];
            float alpha[2];
            if (softmax(s, pk, alpha, tile))
                fa2w_rescale(o, alpha);
            issue_pv(pk, tile);
            fa2w_wait<0>();
            fa2w_pin(o);
        }
    } else {
        orin_cu_cp_async_wait<STAGES - 2>();  // Q and tile 0
        fa2w_fence_proxy();
        __syncthreads();
        q_load();
        fa2w_pipeline<BKV, true>(o, tiles, 0, wg_tiles, issue_kv, issue_s, issue_pv, softmax);
    }

    // -- epilogue: O / l rounded to T, staged through the Q tile's smem (free:
    // every copy has landed, every wgmma is complete, and after the barrier
    // every warpgroup is), then 16-byte row stores. Staging layout: rows of
    // 256 bytes, chunk c at c ^ (row & 7) (fa2_swizzle): conflict-free 4-byte
    // writes and 16-byte reads.
    orin_cu_cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; h++) {
        // l >= 1 for a valid row (its max key contributes exp2(0)); an invalid
        // row's l may be 0 and is overwritten with NaN below.
        const float inv_l = fa2w_inv_l(st.l[h]);
        const int row = row0 + 8 * h;
#pragma unroll
        for (int d = 0; d < 16; d++) {
            const uint32_t v = fa2_pack<T>(o[4 * d + 2 * h] * inv_l, o[4 * d + 2 * h + 1] * inv_l);
            *reinterpret_cast<uint32_t *>(smem + S::Q_OFFSET + fa2_swizzle(row, d, 256) + 4 * t4) =
                v;
        }
    }
    __syncwarp();  // each warp stores only the rows it wrote

    T *out_head = static_cast<T *>(p.out) + (int64_t)head * S::HD;
    for (int idx = lane; idx < 16 * 16; idx += 32) {
        const int row = wrow0 + idx / 16, chunk = idx % 16;
        if (i0 + row >= p.n)
            break;  // rows only grow with idx
        uint4 v =
            *reinterpret_cast<const uint4 *>(smem + S::Q_OFFSET + fa2_swizzle(row, chunk, 256));
        if (pos_sm[row] < 0) {
            T *e = reinterpret_cast<T *>(&v);
#pragma unroll
            for (int i = 0; i < 8; i++)
                e[i] = orin_cu_from_f32<T>(NAN);
        }
        // vec16: the host runs this kernel only on 16-byte aligned rows
        *reinterpret_cast<uint4 *>(out_head + (int64_t)(i0 + row) * q_ld + chunk * 8) = v;
    }
#else
    __trap();  // the host picks this kernel only where sm_90a code was built
#endif
}

// Launches the wgmma kernel: sets the smem limit once per device, then the grid.
template <typename T, bool PIPE, bool QREG>
static int fa2_launch_wgmma(const fa2_prefill_launch *l)
{
    typedef fa2w_shape<64, PIPE> S;
    static bool smem_set[16];
    auto kernel = fa2_prefill_wgmma_kernel<T, 64, PIPE, QREG>;
    if (fa2_smem_limit((const void *)kernel, S::SMEM, l->device, smem_set, l->label))
        return -1;
    kernel<<<fa2_prefill_grid(l->p.heads, l->p.n, S::BQ), S::THREADS, S::SMEM, l->stream>>>(l->p);
    return 0;
}

// ---- attention.full at head_dim 64 and 72 ----

// NWG warpgroups of 64 Q rows (BQ = 64 NWG), K/V tiles of 64 keys through 3
// stages (fa2w_pipeline), head_dim HDV (64 or 72) zero-padded to KSTEPS k-steps
// of 16 for S = Q K^T; P V runs at N = PV_N (HDV, or 80 at head_dim 72: V's
// zero-filled dims 72-79 too). Every tile (Q, K, V) is KSTEPS column blocks of
// 16 dims, rows of 32 bytes, 32-byte swizzled (fa2w_offset32); see the kernel.
template <int HDV, int NWG, int PV_N> struct fa2w_full_shape {
    static constexpr int BQ = 64 * NWG, BKV = 64, WARPS = 4 * NWG, THREADS = WARPS * 32;
    static constexpr int STAGES = 3;                 // fa2w_pipeline's ring
    static constexpr int KSTEPS = (HDV + 15) / 16;   // S's k-steps = 32-byte column blocks
    static constexpr int VCHUNKS = HDV / 8;          // 16-byte chunks of data a row
    static constexpr int Q_BYTES = BQ * KSTEPS * 32;
    static constexpr int KV_BYTES = BKV * KSTEPS * 32; // one K or V tile
    static constexpr int STAGE_BYTES = 2 * KV_BYTES;   // K tile, then V tile
    static constexpr int Q_OFFSET = 0, KV_OFFSET = Q_BYTES;
    // + 1024: the dynamic smem's start rounded up (the 32-byte swizzle repeats
    // every 256 bytes; tiles and k-step blocks start on multiples of 256)
    static constexpr int SMEM = Q_BYTES + STAGES * STAGE_BYTES + 1024;
    // K/V chunks a tile copies: VCHUNKS / 2 whole column blocks (FULL_UNITS),
    // then at head_dim 72 the data half of the last block (dims 64-71; its
    // zero half, dims 72-79, is written once for every stage)
    static constexpr int FULL_UNITS = (VCHUNKS / 2) * 2 * BKV;
    static constexpr int KV_UNITS = VCHUNKS * BKV;
    static constexpr int KV_PASSES = (KV_UNITS + THREADS - 1) / THREADS;
    // the epilogue's staging rows (VCHUNKS * 16 bytes, dense) fit in Q's tile
    static constexpr int OUT_ROW_BYTES = VCHUNKS * 16;
    static_assert(HDV == 64 || HDV == 72, "head_dim 64 or 72");
    static_assert(PV_N % 8 == 0 && PV_N >= HDV && PV_N <= KSTEPS * 16, "P V's n covers the data");
    static_assert(NWG >= 1 && THREADS % (2 * BKV) == 0, "a copy pass is whole column blocks");
    static_assert(BQ * OUT_ROW_BYTES <= Q_BYTES, "O staged in Q's tile");
    static_assert((BQ * KSTEPS * 2) % THREADS == 0, "Q's copy is whole passes");
    static_assert(KV_BYTES <= 0x10000 && BKV <= 256, "kv_unit's packing");
};

// Offset of chunk c (0..VCHUNKS-1) of row r in the epilogue's staging rows:
// dense rows of VCHUNKS chunks; at an odd count (9) the 8 rows of a 4-byte
// write (same chunk) already fall on 8 different 16-byte bank groups, at 8
// the chunks are XOR-swizzled (fa2_swizzle).
template <int VCHUNKS> __device__ __forceinline__ uint32_t fa2w_stage_offset(int r, int c)
{
    if constexpr (VCHUNKS % 2)
        return (uint32_t)((r * VCHUNKS + c) * 16);
    else
        return fa2_swizzle(r, c, VCHUNKS * 16);
}

// FlashAttention-2 forward, attention.full (bidirectional within segments),
// f16/bf16, head_dim 64 or 72, on wgmma.
//
// Launch: grid (H, ceil(n / BQ)) (fa2_prefill_grid), block NWG warpgroups of
// 64 Q rows (warp w owns rows 16w..16w+15), dynamic smem fa2w_full_shape::SMEM
// (Q tile + 3 stages of K, V tiles of 64 keys + 1 KB of alignment: at head_dim
// 72, 91 KB for NWG 3, 81 KB for NWG 2), plus 2 (BQ + WARPS) ints static; one
// block an SM (registers). Q's A fragments sit in registers for the whole
// loop (ldmatrix once), as in wgmma-qreg.
//
// Shared-memory layout, from the ISA's canonical layouts (9.7.15.5.1): the
// data are KSTEPS k-steps of 16 dims = 32-byte rows, so the tiles use the
// 32-byte swizzle (descriptor mode 3, Swizzle<1,4,3>: address bit 4 ^= bit 7,
// i.e. chunk (c & 1) ^ ((r >> 2) & 1) of a 32-byte row r), in column blocks of
// 16 dims: [block][row][32 bytes] (fa2w_offset32). No 128-byte atom is
// wasted on 80 columns (64 + a 16-wide remainder would take a second
// 128-byte column block, 75 % of it padding, for K, V and Q), and all of S's
// k-steps and P V's one descriptor shape are the same:
//  - K as B of S (K-major, imm-trans-b 0): ((8,n),(T,2)):((2T,SBO),(1,T)),
//    T = 8 halves: key rows 32 bytes apart, SBO = 256 between 8-key groups,
//    LBO unused; k-step kk is column block kk, BKV * 32 bytes on.
//  - V as B of P V (MN-major, imm-trans-b 1): ((T,2,n),(8,k)):((1,T,LBO),
//    (2T,SBO)): 16 dims contiguous in a 32-byte row, LBO = BKV * 32 between
//    16-dim column blocks, SBO = 256 between 8-key groups; k-step kk (16 keys)
//    512 bytes on. So K and V share one layout, as in the causal kernel.
//  - Q (A of S, from registers): ldmatrix of rows (lane & 15), chunk
//    2kk + (lane >> 4), conflict-free (8 rows of one chunk: 8 bank groups).
// At head_dim 72, dims 72-79 (chunk 9: the second half of block 4) are zero
// in Q and K (S's fifth k-step adds 0), written once: Q's with its copy, K's
// and V's in every stage before the loop (no copy ever writes them). P V at
// N = 72 reads dims 0-71 of V only; N = 80 (config wgmma-n80) reads the
// zeros too and drops O's columns 72-79.
//
// Segments: row i0 + r attends the keys [lo, hi) of its segment
// (fa2_load_segments: last_sm = hi - 1, lo_sm = lo, -1 for a row past n or
// of a segment that frames nothing: it reads nothing and is written NaN). The
// block's K/V tiles run from its smallest lo to its largest hi - 1 (keys past
// it in the last tile zero-filled), a warpgroup computes the tiles meeting its
// rows' span [t0, t1), a warp masks the tiles crossing its rows' smallest last
// key or largest first key. The loop, the softmax (scale_log2, ex2.approx,
// quad shuffles, P rounded to T, the rescale skipped when no maximum of the
// warp moved) and the epilogue are the causal kernel's.
template <typename T, int HDV, int NWG, int PV_N>
__global__ void __launch_bounds__(NWG * 128, 1)
    fa2_full_wgmma_kernel(const __grid_constant__ fa2_prefill_params p)
{
#if FA2W_ARCH
    typedef fa2w_full_shape<HDV, NWG, PV_N> S;
    constexpr int BQ = S::BQ, BKV = S::BKV, STAGES = S::STAGES, KSTEPS = S::KSTEPS,
                  VCHUNKS = S::VCHUNKS, THREADS = S::THREADS;

    extern __shared__ __align__(1024) char smem_raw[];
    __shared__ int last_sm[BQ], lo_sm[BQ];
    __shared__ int warp_max_sm[S::WARPS], warp_lo_sm[S::WARPS];

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4;
    const int g = lane / 4, t4 = lane % 4;
    const int head = blockIdx.x;
    const int i0 = (gridDim.y - 1 - blockIdx.y) * BQ;
    const int kv_head = head / p.group;
    const int wrow0 = warp * 16;
    const uint32_t raw_base = orin_cu_smem_addr(smem_raw);
    const uint32_t base = (raw_base + 1023u) & ~1023u;
    char *smem = smem_raw + (base - raw_base);
    const orin_kv_view kv = p.cache;

    // -- segments: the block's key range, the warpgroup's tiles, the warp's span
    fa2_load_segments<BQ, THREADS>(p, i0, last_sm, lo_sm);
    __syncthreads();
    int warp_max, warp_min, warp_lo_max, warp_lo_min;
    fa2_warp_span(last_sm, wrow0, 16, &warp_max, &warp_min);
    fa2_warp_span(lo_sm, wrow0, 16, &warp_lo_max, &warp_lo_min);
    if (lane == 0) {
        warp_max_sm[warp] = warp_max;
        warp_lo_sm[warp] = warp_lo_min;
    }
    __syncthreads();
    int block_max = -1, kv_begin = INT_MAX, wg_max = -1, wg_lo = INT_MAX;
#pragma unroll
    for (int w = 0; w < S::WARPS; w++) {
        block_max = max(block_max, warp_max_sm[w]);
        kv_begin = min(kv_begin, warp_lo_sm[w]);
        if (w / 4 == wg) {
            wg_max = max(wg_max, warp_max_sm[w]);
            wg_lo = min(wg_lo, warp_lo_sm[w]);
        }
    }
    const int kv_end = block_max + 1;  // keys [kv_begin, kv_end) are read
    const int tiles = kv_end > kv_begin ? (kv_end - kv_begin + BKV - 1) / BKV : 0;
    // the tiles of keys [wg_lo, wg_max] (none for a warpgroup of invalid rows)
    const int t0 = wg_max >= 0 ? (wg_lo - kv_begin) / BKV : 0;
    const int t1 = wg_max >= 0 ? (wg_max - kv_begin) / BKV + 1 : 0;

    // -- copies. Q: every chunk of the tile, data (cp.async) or zeros.
    const T *q_head = static_cast<const T *>(p.q) + (int64_t)head * HDV;
    const int64_t q_ld = (int64_t)p.heads * HDV;
#pragma unroll
    for (int pass = 0; pass < BQ * KSTEPS * 2 / THREADS; pass++) {
        const int u = tid + pass * THREADS;
        const int r = (u >> 1) % BQ, c = 2 * (u / (2 * BQ)) + (u & 1);
        const uint32_t off = S::Q_OFFSET + fa2w_offset32<BQ>(r, c);
        if (c < VCHUNKS && i0 + r < p.n)
            orin_cu_cp_async16(base + off, q_head + (int64_t)(i0 + r) * q_ld + c * 8);
        else
            *reinterpret_cast<uint4 *>(smem + off) = make_uint4(0, 0, 0, 0);
    }
    // K and V's dims 72-79 (head_dim 72), every stage, once
    if constexpr (VCHUNKS % 2) {
        for (int u = tid; u < STAGES * 2 * BKV; u += THREADS)
            *reinterpret_cast<uint4 *>(smem + S::KV_OFFSET + (u / BKV) * S::KV_BYTES +
                                       fa2w_offset32<BKV>(u % BKV, VCHUNKS)) =
                make_uint4(0, 0, 0, 0);
    }
    // K/V: unit u < FULL_UNITS is chunk 2 (u / 2BKV) + (u & 1) of key (u / 2) %
    // BKV; the rest, chunk VCHUNKS - 1 of key u - FULL_UNITS. A thread's units
    // are u = tid + pass * THREADS, the same every tile: its keys, chunks and
    // smem offsets are worked out once, packed in one register a pass (offset
    // | key << 16 | chunk << 24; none: ~0, warp-uniform as THREADS is a
    // multiple of 2 BKV). Keys past kv_end are zero-filled, nothing read.
    uint32_t kv_unit[S::KV_PASSES];
#pragma unroll
    for (int pass = 0; pass < S::KV_PASSES; pass++) {
        const int u = tid + pass * THREADS;
        const bool whole = u < S::FULL_UNITS;
        const int r = whole ? (u >> 1) % BKV : u - S::FULL_UNITS;
        const int c = whole ? 2 * (u / (2 * BKV)) + (u & 1) : VCHUNKS - 1;
        kv_unit[pass] = u < S::KV_UNITS
                            ? fa2w_offset32<BKV>(r, c) | (uint32_t)r << 16 | (uint32_t)c << 24
                            : ~0u;
    }
    const T *k_src = static_cast<const T *>(kv.k);
    const T *v_src = static_cast<const T *>(kv.v);
    auto issue_kv = [&](int tile) {
        const uint32_t dst = base + S::KV_OFFSET + (tile % STAGES) * S::STAGE_BYTES;
        const int j0 = kv_begin + tile * BKV;
#pragma unroll
        for (int pass = 0; pass < S::KV_PASSES; pass++) {
            const uint32_t unit = kv_unit[pass];
            if (S::KV_UNITS % THREADS != 0 && unit == ~0u)
                break;
            int r = (unit >> 16) & 0xff, c = unit >> 24;
            const uint32_t off = unit & 0xffffu;
            // opaque: one multiply-add a row here, not hoisted 64-bit registers
            asm volatile("" : "+r"(r), "+r"(c));
            const int pos = j0 + r;
            const bool live = pos < kv_end;
            const int64_t e = live ? orin_kv_offset(&kv, pos, kv_head) + c * 8 : 0;
            // src-size 0: zero-fill, nothing read (the base address is valid anyway)
            orin_cu_cp_async16(dst + off, k_src + e, live ? 16 : 0);
            orin_cu_cp_async16(dst + S::KV_BYTES + off, v_src + e, live ? 16 : 0);
        }
    };
    // prologue: Q with tile 0 (group 0), tile 1 (group 1)
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < tiles)
            issue_kv(s);
        orin_cu_cp_async_commit();
    }

    // -- descriptors (32-byte swizzle): K k-step kk at column block kk; V's
    // 16-dim blocks BKV * 32 bytes apart (LBO), k-step kk 16 keys on
    const uint64_t k_desc0 = fa2w_desc(base + S::KV_OFFSET, 16, 256, FA2W_SW32);
    const uint64_t v_desc0 = fa2w_desc(base + S::KV_OFFSET + S::KV_BYTES, BKV * 32, 256, FA2W_SW32);
    auto stage_step = [](int tile) { return (uint64_t)(((tile % STAGES) * S::STAGE_BYTES) >> 4); };

    float o[PV_N / 2];
#pragma unroll
    for (int i = 0; i < PV_N / 2; i++)
        o[i] = 0.0f;
    fa2w_rows st;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        st.m[h] = -INFINITY;
        st.l[h] = 0.0f;
    }
    const float sl2 = p.scale_log2;
    const int row0 = wrow0 + g;

    uint32_t q_frag[KSTEPS][4];
    auto issue_s = [&](float (&s)[BKV / 2], int tile) {
        const uint64_t k_desc = k_desc0 + stage_step(tile);
        fa2w_pin(s);
        fa2w_fence();
#pragma unroll
        for (int kk = 0; kk < KSTEPS; kk++)
            fa2w_mma_s_rs<T>(s, q_frag[kk][0], q_frag[kk][1], q_frag[kk][2], q_frag[kk][3],
                             k_desc + (uint64_t)((kk * BKV * 32) >> 4), kk > 0);
        fa2w_commit();
    };
    auto issue_pv = [&](uint32_t (&pk)[BKV / 4], int tile) {
        fa2w_issue_pv<T, BKV, 32>(o, pk, v_desc0 + stage_step(tile));
    };
    auto softmax = [&](const float (&s)[BKV / 2], uint32_t (&pk)[BKV / 4], float (&alpha)[2],
                       int tile) {
        const int j0 = kv_begin + tile * BKV;
        return fa2w_softmax<T, BKV, true>(s, pk, alpha, st, last_sm, lo_sm, row0, j0,
                                          j0 + BKV - 1 > warp_min || j0 < warp_lo_max, sl2);
    };

    orin_cu_cp_async_wait<STAGES - 2>();  // Q and tile 0 (and this thread's zeros)
    fa2w_fence_proxy();
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < KSTEPS; kk++) {
        const int r = wrow0 + (lane & 15), c = 2 * kk + (lane >> 4);
        fa2_ldsm_x4(base + S::Q_OFFSET + fa2w_offset32<BQ>(r, c), q_frag[kk]);
    }
    fa2w_pipeline<BKV, false>(o, tiles, t0, t1, issue_kv, issue_s, issue_pv, softmax);

    // -- epilogue: O / l rounded to T, staged through Q's tile (dead since the
    // ldmatrix; every copy has landed, every wgmma is complete, and after the
    // barrier every warpgroup is), then 16-byte row stores; O's columns past
    // HDV (PV_N 80) are dropped.
    orin_cu_cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; h++) {
        // l >= 1 for a valid row; an invalid row's may be 0: written NaN below
        const float inv_l = fa2w_inv_l(st.l[h]);
        const int row = row0 + 8 * h;
#pragma unroll
        for (int d = 0; d < VCHUNKS; d++) {
            const uint32_t v = fa2_pack<T>(o[4 * d + 2 * h] * inv_l, o[4 * d + 2 * h + 1] * inv_l);
            *reinterpret_cast<uint32_t *>(smem + S::Q_OFFSET + fa2w_stage_offset<VCHUNKS>(row, d) +
                                          4 * t4) = v;
        }
    }
    __syncwarp();  // each warp stores only the rows it wrote

    T *out_head = static_cast<T *>(p.out) + (int64_t)head * HDV;
    for (int idx = lane; idx < 16 * VCHUNKS; idx += 32) {
        const int row = wrow0 + idx / VCHUNKS, chunk = idx % VCHUNKS;
        if (i0 + row >= p.n)
            break;  // rows only grow with idx
        uint4 v = *reinterpret_cast<const uint4 *>(smem + S::Q_OFFSET +
                                                   fa2w_stage_offset<VCHUNKS>(row, chunk));
        if (last_sm[row] < 0) {
            T *e = reinterpret_cast<T *>(&v);
#pragma unroll
            for (int i = 0; i < 8; i++)
                e[i] = orin_cu_from_f32<T>(NAN);
        }
        // vec16: the host runs this kernel only on 16-byte aligned rows
        *reinterpret_cast<uint4 *>(out_head + (int64_t)(i0 + row) * q_ld + chunk * 8) = v;
    }
#else
    __trap();  // the host picks this kernel only where sm_90a code was built
#endif
}

template <typename T, int HDV, int NWG, int PV_N>
static int fa2_launch_full_wgmma(const fa2_prefill_launch *l)
{
    typedef fa2w_full_shape<HDV, NWG, PV_N> S;
    static bool smem_set[16];
    auto kernel = fa2_full_wgmma_kernel<T, HDV, NWG, PV_N>;
    if (fa2_smem_limit((const void *)kernel, S::SMEM, l->device, smem_set, l->label))
        return -1;
    kernel<<<fa2_prefill_grid(l->p.heads, l->p.n, S::BQ), S::THREADS, S::SMEM, l->stream>>>(l->p);
    return 0;
}

// attention.full's wgmma configs (the host picked them: compute capability 9,
// the sm_90a build, head_dim 64 or 72, vec16); 0 where the call is not theirs.
template <typename T> static int fa2_launch_full_wgmma_dt(const fa2_prefill_launch *l, bool *done)
{
    *done = true;
    const bool hd72 = l->head_dim == 72;
    switch (l->config) {
    case FA2_FULL_WGMMA:
        return hd72 ? fa2_launch_full_wgmma<T, 72, 3, 72>(l)
                    : fa2_launch_full_wgmma<T, 64, 3, 64>(l);
    case FA2_FULL_WGMMA_Q128:
        return hd72 ? fa2_launch_full_wgmma<T, 72, 2, 72>(l)
                    : fa2_launch_full_wgmma<T, 64, 2, 64>(l);
    case FA2_FULL_WGMMA_N80:  // head_dim 64: n is 64 already
        return hd72 ? fa2_launch_full_wgmma<T, 72, 3, 80>(l)
                    : fa2_launch_full_wgmma<T, 64, 3, 64>(l);
    }
    *done = false;
    return 0;
}

// The wgmma configs where the host picked them (it checks the device, head_dim
// 128, vec16 and !full; attention.full: head_dim 64 or 72, vec16), else the
// mma.sync kernels.
template <typename T> static int fa2_launch_prefill_dt(const fa2_prefill_launch *l)
{
    if (l->full && (l->head_dim == 64 || l->head_dim == 72) && l->p.vec16) {
        bool done;
        const int rc = fa2_launch_full_wgmma_dt<T>(l, &done);
        if (done)
            return rc;
    }
    if (!l->full && l->head_dim == 128 && l->p.vec16) {
        if (l->config == FA2_WGMMA)
            return fa2_launch_wgmma<T, true, false>(l);
        if (l->config == FA2_WGMMA_QREG)
            return fa2_launch_wgmma<T, true, true>(l);
        if (l->config == FA2_WGMMA_SYNC)
            return fa2_launch_wgmma<T, false, false>(l);
    }
    return fa2_launch_mma_dt<T>(l);
}

#endif
