// FlashAttention-2 decode on CUDA: split-KV ("Flash-Decoding"), GQA-native.
//
// One query row (n == 1) attends cache positions 0..p, p = positions[0] read
// from device memory inside the kernels. The cache is cut into `splits` pieces;
// a block is (split, kv head, row chunk) and its rows are the query heads of
// that kv head (up to 8 of them; more go to further row chunks), so each K/V
// byte it loads serves the whole group. Each block writes its partial output,
// normalised by its own l, and lse = m + log(l) into the f32 workspace:
//     workspace = O_s [splits, H, hd], then lse_s [splits, H]
// and the combine computes lse = log(sum_s exp(lse_s)) and
//     out = sum_s exp(lse_s - lse) O_s
// over the splits that saw a position (the others write lse_s = -inf and no
// O_s; the combine counts the active ones from p and reads only those).
//
// Graph safety: the grid (splits) follows the SM count and max_kv_len only,
// never p. Inside the kernel the split length follows p: the p + 1 positions
// are cut into `splits` pieces of a multiple of 64, so a graph captured at the
// cache capacity replayed at a short position still spreads its work over
// every block (the pieces past p exit at once). run() never synchronises,
// allocates, or reads device memory.
//
// Positions: p outside 0..max_kv_len-1 (device memory, unchecked on the host)
// gives a NaN output row and reads no K/V; max_kv_len <= capacity is checked on
// the host, so no value of p leads to an out-of-bounds access. Cache slots past
// p (NaN in the tests) are never loaded: a masked position's K and V registers
// are zero and its score is -inf, so its weight is exactly 0.
//
// Two split kernels, one workspace format:
//   mma  (f16, bf16; 16-byte aligned cache rows; sm_80+): S^T = K Q^T and
//        O^T += V^T P^T on tensor cores (mma.sync m16n8k16, f32 accumulators),
//        with K and V fed to the mma straight from 16-byte global loads (the dot
//        products' dimension order is permuted consistently for K and Q; V is
//        re-paired with byte permutes). P is rounded to the cache dtype as the
//        mma operand (as every flash kernel does): the weights sum to exactly 1
//        since l sums the rounded values. Scores, softmax and accumulators f32.
//   simt (f32, any cache alignment, or ORIN_FA2_DECODE_CONFIG=simt): CUDA cores,
//        f32 throughout; lanes split head_dim in 16-byte pieces, warp-shuffle
//        sums give the scores.
// and a variant of the mma kernel, the default where the split kernel runs
// (two-kernel, fused, and AUTO where it picks two-kernel): fa2d_split_cp, the
// same math on K and V staged through shared memory with cp.async, so that a
// warp's next tiles stay in flight through its math; the same partials bit for
// bit. 32k on an H200: 40.9 -> 40.0 us (ORIN_FA2_DECODE_CONFIG "cpasync=0"
// runs fa2d_split_mma for comparison).
// Three ways to merge the pieces, chosen per call (ORIN_FA2_DECODE_CONFIG can
// force one):
//   cluster (sm_90, the mma kernel): the pieces are the blocks of one
//        thread-block cluster per (kv head, row chunk), which merge over
//        distributed shared memory: one launch, no workspace
//        (fa2d_cluster_mma, blocks of 16 warps, or of 8 up to 4k positions
//        where 16 whole SMs a cluster do not fit). Chosen where every unit's
//        cluster runs at once and either they cover >= 80 % of the SMs or
//        max_kv_len <= 8192 (fa2d_cluster_size). H200, Qwen3-8B shape, graph
//        replay: 1k 7.4 us against 10.3 two-kernel, 8k 17.1 against 18.0;
//        H100: 1k 7.9 us (16 x 8 warps) against 8.3 (8 x 16).
//   two-kernel (the rest): a second kernel, one block per query head, combines.
//   fused: the last block of a (kv head, row chunk) to finish, found
//        with an atomic counter, combines that chunk's rows: one launch. The
//        counters are this module's own device memory (zero at load), not the
//        workspace: a model shares one workspace between all its ops, so nothing
//        left there survives to the next call, and a test poisons it. One slab
//        per stream, so that two streams never share a counter; every launch
//        leaves them zero again (its last block resets its counter).
// Measured (H100, Qwen3-8B shape, graph replay, bench/attention.sh): two-kernel
// is faster than fused at every length (1k: 8.7 against 9.1 us; 8k: 20.5
// against 24.0; 32k: 53.3 against 56.9), against the prediction that the second
// launch would cost more than the counter: in a graph the launch is cheap,
// while the last block's combine serialises behind the slowest split and its
// counter fence. fused remains for comparison.
//
// Before the PDL wait, the cp.async split kernel may prefetch its first K/V
// rows into L2 (fa2d_prefetch_warp; the cluster kernel instead stages each
// warp's first step into shared memory, fa2d_early_issue), so that the first
// DRAM round trip overlaps the previous kernel's tail: by default one warp step
// where the call's piece has at least 4 steps a warp (long contexts), or where
// the call's whole K/V is at most 3 MB (short ones: the prefetch is all of it).
// H100, graph replay: 32k 53.4 -> 52.4 us, 16k 31.7 -> 29.8. Qwen3-8B in a
// model, 8 KV heads: at 513-640 positions (2-2.5 MB) AWQ, int8 and f16 each
// 0.005-0.017 ms a token faster; at 897-1,024 (3.5-4 MB) int8 and f16 faster
// but AWQ, whose q/k/v GEMV the prefetch takes bandwidth from, 0.008 slower;
// at 8k a prefetch of two steps (half the layer's K/V) cost 0.05 ms
// (bench/notes/fa2-decode.md).
//
// ORIN_FA2_DECODE_CONFIG: words joined by '+': "auto", "cluster",
// "cluster=8|12|14|16", "two-kernel" or "fused"; "mma" or "simt"; "cpasync" or
// "cpasync=2|3|4|6" (the mma split kernel through shared memory, with the
// default or that many K/V tiles in flight a warp; "cpasync=0": through
// registers, fa2d_split_mma); "bps=N" (blocks per SM the split count aims at;
// default: the kernel's occupancy); "cwarps=8|16" (the cluster kernel's warps a
// block; default: AUTO's pick); "prefetch=N" (warp steps prefetched before the
// PDL wait, 0..8; default: the rule above; the split kernels only: the
// cluster kernel stages each warp's first step instead); "skew=N" (testing:
// the cluster kernel's position read before the wait taken as p - N, so that
// every call takes its rerun at a moved p, which a graph's step otherwise
// takes only where the kernel before moved p late); "pad=N" (N KB of
// unused shared memory added to the cluster kernel's launch: a measuring aid,
// bench/carveout.sh). Unset or empty: auto+mma. An unknown word is an error.
#include "cuda.h"

#include "orin/cuda_util.cuh"
#include "orin/error.h"
#include "orin/op_check.h"

#include <cooperative_groups.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#define FA2D_LABEL "attention.decode (fa2)"

// The kernels, in four parts (each says what it holds).
#include "cuda_decode_common.cuh"
#include "cuda_decode_mma.cuh"
#include "cuda_decode_cluster.cuh"
#include "cuda_decode_simt.cuh"

// ---- host side ----

namespace {

// How a call's pieces are merged (ORIN_FA2_DECODE_CONFIG's first words).
enum fa2d_combine_mode {
    FA2D_COMBINE_AUTO,       // cluster where it fits and pays (fa2d_cluster_size), else two-kernel
    FA2D_COMBINE_CLUSTER,    // cluster wherever the GPU runs it at all
    FA2D_COMBINE_TWO_KERNEL, // split kernel + combine kernel
    FA2D_COMBINE_FUSED,      // split kernel, its last block a unit combines
};

struct fa2d_config {
    fa2d_combine_mode combine;
    int cluster; // CLUSTER: 8, 12, 14 or 16 ("cluster=N"), 0: the largest the GPU runs
    bool simt;
    int bps; // 0: the kernel's occupancy
    int cp;  // the mma split kernel: 0 fa2d_split_mma ("cpasync=0"); else fa2d_split_cp
             // with this many tiles a warp (2, 3, 4, 6; "cpasync=N"), -1 its default
    int prefetch; // warp steps prefetched before the PDL wait ("prefetch=N", 0..8), or -1:
                  // the kernel's rule from p (fa2d_prefetch_warp; graph-safe: read on the
                  // device, so a graph captured at one length replays right at any other)
    int cwarps;   // warps a block of the cluster kernel: 8 or 16 ("cwarps=N"), 0: AUTO's pick
    int skew;     // testing: the cluster kernel's early position read as p - skew ("skew=N")
    int pad_kb;   // KB of unused dynamic shared memory added to the cluster kernel ("pad=N",
                  // a measuring aid: what a larger launch costs the step, bench/carveout.sh)
};

// ORIN_FA2_DECODE_CONFIG, read at every call (the benchmark changes it between rows).
int fa2d_parse_config(fa2d_config *cfg)
{
    *cfg = fa2d_config{.combine = FA2D_COMBINE_AUTO, .cluster = 0, .simt = false, .bps = 0,
                       .cp = -1, .prefetch = -1, .cwarps = 0, .skew = 0, .pad_kb = 0};
    const char *env = getenv("ORIN_FA2_DECODE_CONFIG");
    if (!env)
        return 0;
    const char *p = env;
    while (*p) {
        size_t len = strcspn(p, "+");
        char word[32];
        if (len >= sizeof word)
            len = sizeof word - 1;
        memcpy(word, p, len);
        word[len] = '\0';
        int n = 0;
        char extra;
        if (len == 0) {
            // "a++b" or a trailing '+': nothing
        } else if (strcmp(word, "auto") == 0) {
            cfg->combine = FA2D_COMBINE_AUTO;
        } else if (strcmp(word, "cluster") == 0) {
            cfg->combine = FA2D_COMBINE_CLUSTER;
            cfg->cluster = 0;
        } else if (sscanf(word, "cluster=%d%c", &n, &extra) == 1 &&
                   (n == 8 || n == 12 || n == 14 || n == 16)) {
            cfg->combine = FA2D_COMBINE_CLUSTER;
            cfg->cluster = n;
        } else if (strcmp(word, "fused") == 0) {
            cfg->combine = FA2D_COMBINE_FUSED;
        } else if (strcmp(word, "two-kernel") == 0) {
            cfg->combine = FA2D_COMBINE_TWO_KERNEL;
        } else if (strcmp(word, "mma") == 0) {
            cfg->simt = false;
        } else if (strcmp(word, "simt") == 0) {
            cfg->simt = true;
        } else if (sscanf(word, "bps=%d%c", &n, &extra) == 1 && n >= 1 && n <= 64) {
            cfg->bps = n;
        } else if (strcmp(word, "cpasync") == 0) {
            cfg->cp = -1;
        } else if (sscanf(word, "cpasync=%d%c", &n, &extra) == 1 &&
                   (n == 0 || n == 2 || n == 3 || n == 4 || n == 6)) {
            cfg->cp = n;
        } else if (sscanf(word, "cwarps=%d%c", &n, &extra) == 1 && (n == 8 || n == 16)) {
            cfg->cwarps = n;
        } else if (sscanf(word, "prefetch=%d%c", &n, &extra) == 1 && n >= 0 && n <= 8) {
            cfg->prefetch = n;
        } else if (sscanf(word, "skew=%d%c", &n, &extra) == 1 && n >= 0 && n <= 1000000) {
            cfg->skew = n;
        } else if (sscanf(word, "pad=%d%c", &n, &extra) == 1 && n >= 0 && n <= 160) {
            cfg->pad_kb = n;
        } else {
            return orin_error_set("%s: ORIN_FA2_DECODE_CONFIG \"%s\": unknown \"%s\" (words "
                                  "joined by '+': auto, cluster, cluster=8|12|14|16, two-kernel, "
                                  "fused, mma, simt, cpasync, cpasync=0|2|3|4|6, bps=1..64, "
                                  "prefetch=0..8, cwarps=8|16, skew=0..1000000, pad=0..160)",
                                  FA2D_LABEL, env, word);
        }
        p += strcspn(p, "+");
        if (*p == '+')
            p++;
    }
    return 0;
}

// The counter slab of the exec's stream, or -1 when all are taken (the call then
// combines in a second kernel). Slabs are never given back: a stream that goes
// away leaves its slab zeroed, reused if a stream with the same handle comes.
int fa2d_stream_slab(const orin_exec *ex)
{
    static orin_cu_stream_slots slabs = ORIN_CU_STREAM_SLOTS_INIT;
    return orin_cu_stream_slot(&slabs, ex, FA2D_SLABS);
}

// Whether the exec's GPU runs mma.sync for f16/bf16 (sm_80 and later).
bool fa2d_has_mma(const orin_exec *ex)
{
    return orin_cu_cc_major(ex) >= 8;
}

typedef void (*fa2d_kernel)(const fa2d_params);

// Blocks of `kernel` one SM holds (its occupancy) at `smem` bytes of dynamic
// shared memory, cached per kernel and device; 2 if the runtime cannot tell.
// The first call for a kernel with dynamic shared memory also lets it have
// that much (needed above 48 KB) and asks for the largest shared memory
// carveout, so that the blocks counted are the blocks that run.
int fa2d_blocks_per_sm(const orin_exec *ex, fa2d_kernel kernel, size_t smem)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct {
        fa2d_kernel kernel;
        int dev, blocks;
    } cache[64];
    static int used;
    const int dev = ex->device->index;
    int blocks = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < used && !blocks; i++)
        if (cache[i].kernel == kernel && cache[i].dev == dev)
            blocks = cache[i].blocks;
    pthread_mutex_unlock(&lock);
    if (blocks)
        return blocks;
    const bool set = !smem ||
        (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) ==
             cudaSuccess &&
         cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                              cudaSharedmemCarveoutMaxShared) == cudaSuccess);
    if (!set ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, FA2D_THREADS, smem) !=
            cudaSuccess ||
        blocks < 1) {
        (void)cudaGetLastError(); // the launch reports what matters
        blocks = 2;
    }
    pthread_mutex_lock(&lock);
    if (used < 64)
        cache[used++] = {kernel, dev, blocks};
    pthread_mutex_unlock(&lock);
    return blocks;
}

// The split count any GPU may use for this max_kv_len: pieces of at least
// FA2D_ALIGN positions, at most FA2D_MAX_SPLITS. The workspace is sized for it.
int fa2d_max_splits(int32_t max_kv_len)
{
    int64_t n = ((int64_t)max_kv_len + FA2D_ALIGN - 1) / FA2D_ALIGN;
    return n < 1 ? 1 : n > FA2D_MAX_SPLITS ? FA2D_MAX_SPLITS : (int)n;
}

// One wave of blocks: SMs x blocks per SM over the (kv head, row chunk) units,
// capped by fa2d_max_splits. Depends on max_kv_len, never on the position.
int fa2d_splits(int sms, int blocks_per_sm, int units, int32_t max_kv_len)
{
    int64_t want = (int64_t)sms * blocks_per_sm / units;
    int cap = fa2d_max_splits(max_kv_len);
    return want < 1 ? 1 : want > cap ? cap : (int)want;
}

template <typename T, int HD> fa2d_kernel fa2d_pick_simt(int rows, bool vec16)
{
    if (rows == 1)
        return vec16 ? fa2d_split_simt<T, HD, 1, true> : fa2d_split_simt<T, HD, 1, false>;
    if (rows == 2)
        return vec16 ? fa2d_split_simt<T, HD, 2, true> : fa2d_split_simt<T, HD, 2, false>;
    return vec16 ? fa2d_split_simt<T, HD, 4, true> : fa2d_split_simt<T, HD, 4, false>;
}

template <typename T> fa2d_kernel fa2d_pick_mma(int hd)
{
    if constexpr (sizeof(T) == 2)
        return hd == 64 ? fa2d_split_mma<T, 64> : fa2d_split_mma<T, 128>;
    return NULL;
}

// The cp.async kernel's tiles a warp for cfg->cp at head_dim hd: the default
// is 8 KB a warp (fa2d_split_cp says why).
int fa2d_cp_tiles(int cp, int hd)
{
    return cp > 0 ? cp : hd == 64 ? 4 : 2;
}

template <typename T, int HD> fa2d_kernel fa2d_pick_cp_hd(int tiles, size_t *smem)
{
    switch (tiles) {
    case 2: *smem = fa2d_cp_smem<HD, 2>(); return fa2d_split_cp<T, HD, 2>;
    case 4: *smem = fa2d_cp_smem<HD, 4>(); return fa2d_split_cp<T, HD, 4>;
    case 6: *smem = fa2d_cp_smem<HD, 6>(); return fa2d_split_cp<T, HD, 6>;
    default: *smem = fa2d_cp_smem<HD, 3>(); return fa2d_split_cp<T, HD, 3>;
    }
}

// fa2d_split_cp for the dtype, head_dim and tile count, and its dynamic shared memory.
template <typename T> fa2d_kernel fa2d_pick_cp(int hd, int tiles, size_t *smem)
{
    if constexpr (sizeof(T) == 2)
        return hd == 64 ? fa2d_pick_cp_hd<T, 64>(tiles, smem)
                        : fa2d_pick_cp_hd<T, 128>(tiles, smem);
    return NULL;
}

// Clusters of C blocks of the cluster kernel the exec's GPU holds at once, 0
// where it runs none (before sm_90, or the runtime refuses the cluster size):
// asked once per device and kernel, after allowing its shared memory and, for
// C > 8, the non-portable cluster size.
template <typename T, int HD, int C, int W> int fa2d_cluster_capacity(const orin_exec *ex)
{
    static int cached[16]; // capacity + 1; 0: not asked yet
    const int dev = ex->device->index;
    if (dev >= 0 && dev < 16 && cached[dev])
        return cached[dev] - 1;
    int clusters = 0;
    const fa2d_kernel kernel = fa2d_cluster_mma<T, HD, C, W>;
    const int smem = (int)fa2d_cluster_smem_bytes<HD, W>();
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = C;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(C, 1);
    lc.blockDim = dim3(W * 32);
    lc.dynamicSmemBytes = (size_t)smem;
    lc.attrs = &attr;
    lc.numAttrs = 1;
    if (orin_cu_cc_major(ex) < 9 ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) !=
            cudaSuccess ||
        (C > 8 && cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                       1) != cudaSuccess) ||
        cudaOccupancyMaxActiveClusters(&clusters, kernel, &lc) != cudaSuccess)
        clusters = 0;
    (void)cudaGetLastError();
    if (dev >= 0 && dev < 16)
        cached[dev] = clusters + 1;
    return clusters;
}

// The cluster sizes the kernel is built for, largest first. Not only powers of
// two: a cluster's blocks must share a GPC, and GPCs differ in SM count (an
// H200's 132 SMs hold 7 clusters of 16 blocks of one SM each, 15 of 8), so 14
// or 12 can give every unit of a model its cluster at once where 16 cannot.
static const int fa2d_cluster_sizes[] = {16, 14, 12, 8};

template <typename T, int HD, int W> int fa2d_capacity_w(const orin_exec *ex, int c)
{
    switch (c) {
    case 16: return fa2d_cluster_capacity<T, HD, 16, W>(ex);
    case 14: return fa2d_cluster_capacity<T, HD, 14, W>(ex);
    case 12: return fa2d_cluster_capacity<T, HD, 12, W>(ex);
    default: return fa2d_cluster_capacity<T, HD, 8, W>(ex);
    }
}

template <typename T, int HD> int fa2d_capacity_of(const orin_exec *ex, int c, int w)
{
    return w == 8 ? fa2d_capacity_w<T, HD, 8>(ex, c) : fa2d_capacity_w<T, HD, 16>(ex, c);
}

// The clusters this call runs the cluster kernel with: C blocks of W warps,
// C = 0 for none.
struct fa2d_cluster_shape {
    int c, w;
};

// AUTO: the largest C whose clusters of 16-warp blocks, one a unit, all run at
// once, if they cover at least 80 % of the SMs (long contexts are
// bandwidth-bound) or the context is at most FA2D_CLUSTER_SHORT (latency-bound:
// one launch instead of two matters more there than the SMs left idle); else
// none (two-kernel). Up to FA2D_CLUSTER_TINY, where clusters of 16 such blocks
// do not all fit, clusters of 16 blocks of 8 warps first: a cluster's blocks
// must share a GPC, and half-size blocks let 16 of them fit where 16 whole SMs
// are not free; twice the blocks with half the positions each shorten the
// latency chain of a short call, but 8 warps an SM stream too few bytes for
// long ones. CLUSTER: the configured size and warps, or the largest size the
// GPU runs at all. Measured on Qwen3-8B's shape (8 units; an H100 or H200 runs
// 7 clusters of 16 16-warp blocks at once and 15 of 8) in
// bench/notes/fa2-decode.md: 16 x 8 warps up to 4k, 8 x 16 up to 8k,
// two-kernel beyond.
template <typename T, int HD>
fa2d_cluster_shape fa2d_cluster_size(const orin_exec *ex, const fa2d_config *cfg, int units,
                                     int32_t max_kv_len)
{
    const fa2d_cluster_shape none = {0, 0};
    if (cfg->combine != FA2D_COMBINE_AUTO && cfg->combine != FA2D_COMBINE_CLUSTER)
        return none;
    const int w = cfg->cwarps ? cfg->cwarps : FA2D_CLUSTER_WARPS;
    if (cfg->combine == FA2D_COMBINE_CLUSTER) {
        if (cfg->cluster)
            return fa2d_capacity_of<T, HD>(ex, cfg->cluster, w) > 0
                       ? fa2d_cluster_shape{cfg->cluster, w} : none;
        for (int c : fa2d_cluster_sizes)
            if (fa2d_capacity_of<T, HD>(ex, c, w) > 0)
                return {c, w};
        return none;
    }
    if (!cfg->cwarps && max_kv_len <= FA2D_CLUSTER_TINY &&
        fa2d_capacity_of<T, HD>(ex, 16, FA2D_CLUSTER_WARPS) < units &&
        fa2d_capacity_of<T, HD>(ex, 16, 8) >= units)
        return {16, 8};
    const int64_t sms = orin_cu_sm_count(ex);
    for (int c : fa2d_cluster_sizes) {
        if (fa2d_capacity_of<T, HD>(ex, c, w) < units)
            continue;
        const bool covers = (int64_t)units * c * 10 >= sms * 8;
        return covers || max_kv_len <= FA2D_CLUSTER_SHORT ? fa2d_cluster_shape{c, w} : none;
    }
    return none;
}

#if FA2D_TIMELINE
// Every 50th call outside a graph capture: the timeline of unit 0's blocks,
// ns since rank 0's start (globaltimer) and cycles since the block's own
// start (clock64), mark by mark.
static void fa2d_dump_timeline(const orin_exec *ex, int c)
{
    static int calls;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    cudaStream_t stream = orin_cu_stream(ex);
    if (++calls % 50 || cudaStreamIsCapturing(stream, &cap) != cudaSuccess ||
        cap != cudaStreamCaptureStatusNone)
        return;
    unsigned long long tl[16][9][2];
    if (cudaStreamSynchronize(stream) != cudaSuccess ||
        cudaMemcpyFromSymbol(tl, fa2d_tl, sizeof tl) != cudaSuccess)
        return;
    for (int r = 0; r < c && r < 16; r++) {
        fprintf(stderr, "fa2d timeline call %d rank %2d ns:", calls, r);
        for (int k = 0; k < 9; k++)
            fprintf(stderr, " %6lld", (long long)(tl[r][k][0] - tl[0][0][0]));
        fprintf(stderr, "  cycles:");
        for (int k = 0; k < 9; k++)
            fprintf(stderr, " %6lld", (long long)(tl[r][k][1] - tl[r][0][1]));
        fprintf(stderr, "\n");
    }
}
#endif

template <typename T, int HD, int C, int W>
int fa2d_launch_cluster(const orin_exec *ex, orin_dtype dt, const fa2d_config *cfg,
                        fa2d_params P, int units)
{
    P.splits = C;
    P.skew = cfg->skew;
    size_t smem = fa2d_cluster_smem_bytes<HD, W>() + (size_t)cfg->pad_kb * 1024;
    if (cfg->pad_kb)
        (void)cudaFuncSetAttribute(fa2d_cluster_mma<T, HD, C, W>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    orin_cu_launch_cluster(ex, true, C, fa2d_cluster_mma<T, HD, C, W>, dim3(C, (unsigned)units),
                           dim3(W * 32), smem, P);
#if FA2D_TIMELINE
    fa2d_dump_timeline(ex, C);
#endif
    return orin_cu_launched(FA2D_LABEL, dt, "cluster of %d x %d warps, heads %d, head_dim %d, "
                            "units %d, max_kv_len %d", C, W, P.heads, HD, units, P.max_kv_len);
}

template <typename T, int HD, int W>
int fa2d_launch_cluster_w(const orin_exec *ex, orin_dtype dt, const fa2d_config *cfg,
                          fa2d_params P, int units, int c)
{
    switch (c) {
    case 16: return fa2d_launch_cluster<T, HD, 16, W>(ex, dt, cfg, P, units);
    case 14: return fa2d_launch_cluster<T, HD, 14, W>(ex, dt, cfg, P, units);
    case 12: return fa2d_launch_cluster<T, HD, 12, W>(ex, dt, cfg, P, units);
    default: return fa2d_launch_cluster<T, HD, 8, W>(ex, dt, cfg, P, units);
    }
}

template <typename T, int HD>
int fa2d_try_cluster(const orin_exec *ex, orin_dtype dt, const fa2d_config *cfg, fa2d_params P,
                     int units, int32_t max_kv_len, bool *launched)
{
    const fa2d_cluster_shape shape = fa2d_cluster_size<T, HD>(ex, cfg, units, max_kv_len);
    *launched = shape.c != 0;
    if (!shape.c)
        return 0;
    return shape.w == 8 ? fa2d_launch_cluster_w<T, HD, 8>(ex, dt, cfg, P, units, shape.c)
                        : fa2d_launch_cluster_w<T, HD, 16>(ex, dt, cfg, P, units, shape.c);
}

template <typename T>
int fa2d_launch(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt,
                const fa2d_config *cfg, fa2d_params P)
{
    const int hd = P.head_dim, kv_heads = a->cache.n_kv_heads;
    const size_t esize = sizeof(T);
    const bool vec16 = orin_cu_aligned16(a->cache.k) && orin_cu_aligned16(a->cache.v) &&
                       (a->cache.pos_stride * (int64_t)esize) % 16 == 0 &&
                       (a->cache.head_stride * (int64_t)esize) % 16 == 0;
    const bool mma = sizeof(T) == 2 && vec16 && !cfg->simt && fa2d_has_mma(ex);

    // Query rows per block: the whole group where it fits.
    int rows;
    if (mma)
        rows = FA2D_MMA_ROWS;
    else
        rows = P.group >= 3 ? FA2D_SIMT_ROWS : P.group;
    P.row_chunks = (P.group + rows - 1) / rows;
    const int units = kv_heads * P.row_chunks;
    if (units > 65535)
        return orin_error_set("%s: %d kv heads x %d row chunks: more than 65535 blocks a split",
                              FA2D_LABEL, kv_heads, P.row_chunks);
    if (sizeof(T) == 2)
        P.scale = a->scale * 1.4426950408889634f; // log2(e): the exp2 kernels' units
    if constexpr (sizeof(T) == 2) {
        if (mma) {
            bool launched;
            const int rc = hd == 64
                ? fa2d_try_cluster<T, 64>(ex, dt, cfg, P, units, a->max_kv_len, &launched)
                : fa2d_try_cluster<T, 128>(ex, dt, cfg, P, units, a->max_kv_len, &launched);
            if (launched)
                return rc;
        }
    }

    size_t smem = 0; // dynamic: the cp.async kernel's rings
    const int tiles = mma && cfg->cp ? fa2d_cp_tiles(cfg->cp, hd) : 0;
    fa2d_kernel kernel = tiles ? fa2d_pick_cp<T>(hd, tiles, &smem)
                         : mma ? fa2d_pick_mma<T>(hd)
                               : (hd == 64 ? fa2d_pick_simt<T, 64>(rows, vec16)
                                           : fa2d_pick_simt<T, 128>(rows, vec16));
    // Asked even under "bps=N": the first ask also readies the kernel's shared memory.
    const int occupancy = fa2d_blocks_per_sm(ex, kernel, smem);
    const int bps = cfg->bps ? cfg->bps : occupancy;
    P.splits = fa2d_splits(orin_cu_sm_count(ex), bps, units, a->max_kv_len);
    P.prefetch_steps = tiles ? cfg->prefetch : 0;
    P.partial_o = (float *)ex->workspace;
    P.partial_lse = P.partial_o + (size_t)P.splits * P.heads * hd;
    P.slab = cfg->combine == FA2D_COMBINE_FUSED && units <= FA2D_SLAB_COUNTERS
                 ? fa2d_stream_slab(ex) : -1;

    orin_cu_launch(ex, true, kernel, dim3((unsigned)P.splits, (unsigned)units),
                   dim3(FA2D_THREADS), smem, P);
    if (orin_cu_launched(FA2D_LABEL, dt, "%s %s, cp.async tiles %d, heads %d/%d, head_dim %d, "
                         "max_kv_len %d, splits %d", mma ? "mma" : "simt",
                         P.slab >= 0 ? "fused" : "two-kernel", tiles, P.heads, kv_heads, hd,
                         a->max_kv_len, P.splits))
        return -1;
    if (P.slab >= 0)
        return 0;
    orin_cu_launch(ex, true, fa2d_combine<T>, dim3((unsigned)P.heads), dim3(FA2D_THREADS), 0, P);
    return orin_cu_launched(FA2D_LABEL, dt, "combine, heads %d, head_dim %d, splits %d", P.heads,
                            hd, P.splits);
}

} // namespace

extern "C" size_t fa2_cuda_decode_workspace_size(const orin_attention_args *a)
{
    if (!a || a->q.ndim != 3 || a->q.shape[1] < 1 || a->q.shape[2] < 1 || a->max_kv_len < 1)
        return 0; // run() reports the bad call
    return (size_t)fa2d_max_splits(a->max_kv_len) * (size_t)a->q.shape[1] *
           ((size_t)a->q.shape[2] + 1) * sizeof(float);
}

extern "C" int fa2_cuda_decode(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt)
{
    if (orin_check_exec(FA2D_LABEL, ex, ORIN_DEVICE_CUDA) ||
        orin_check_attention(FA2D_LABEL, a, ORIN_DEVICE_CUDA, dt, true))
        return -1;
    const int64_t hd = a->q.shape[2];
    if (hd != 64 && hd != 128)
        return orin_error_set("%s: head_dim %lld (the cuda kernels take 64 and 128)", FA2D_LABEL,
                              (long long)hd);
    const size_t need = fa2_cuda_decode_workspace_size(a);
    if (!ex->workspace || ex->workspace_size < need)
        return orin_error_set("%s: workspace of %zu bytes, the call needs %zu", FA2D_LABEL,
                              ex->workspace ? ex->workspace_size : 0, need);
    if (!orin_cu_aligned16(ex->workspace)) // the combine reads it as float4
        return orin_error_set("%s: workspace at %p is not 16-byte aligned", FA2D_LABEL,
                              ex->workspace);
    fa2d_config cfg;
    if (fa2d_parse_config(&cfg))
        return -1;
    const fa2d_params P = {
        .q = a->q.data,
        .out = a->out.data,
        .positions = (const int32_t *)a->positions.data,
        .cache = a->cache,
        .scale = a->scale,
        .max_kv_len = a->max_kv_len,
        .heads = (int)a->q.shape[1],
        .head_dim = (int)hd,
        .group = (int)(a->q.shape[1] / a->cache.n_kv_heads),
        .row_chunks = 0, // the rest: fa2d_launch, once it has picked the kernel
        .splits = 0,
        .partial_o = NULL,
        .partial_lse = NULL,
        .slab = -1,
        .prefetch_steps = 0, // fa2d_launch, for the kernel it picks
        .skew = 0,           // the cluster kernel's launch
    };
    ORIN_CU_DISPATCH(dt, FA2D_LABEL, T, return fa2d_launch<T>(ex, a, dt, &cfg, P));
    return 0;
}
