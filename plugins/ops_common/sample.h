/* sample.candidates (orin/ops.h): the sampler's vocabulary-wide steps where
 * the logits are, so that a decode step copies back a few candidates.
 *
 * cpu_sample.c is the reference; cuda_sample.cu the GPU twin, bit for bit the
 * same values, ids and count. Both take a workspace (workspace_size below),
 * and neither keeps anything in it between calls: any workspace, shared with
 * other ops or not, works, and the CUDA op can be replayed in a graph.
 *
 * The CUDA op reads n_history on the GPU, so it cannot check it: a value
 * above history's length counts as the length, a negative one as 0 (the CPU
 * op reports both as errors). History ids outside the vocabulary are ignored
 * on both, as in the sampler. */
#ifndef ORIN_OPS_COMMON_SAMPLE_H
#define ORIN_OPS_COMMON_SAMPLE_H

#include "orin/ops.h"
#include "orin/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The checks both run first (in cpu_sample.c): the tensors, outputs apart
 * from the inputs and from each other, top_k in 1..max, the penalties the
 * sampler accepts, and a workspace of `workspace_need` bytes, 8-byte aligned.
 * 0, or -1 with an error naming `label`. */
int sample_candidates_check(const char *label, const orin_exec *ex,
                            const orin_sample_candidates_args *a, orin_device_kind device,
                            orin_dtype dt, size_t workspace_need);

/* The CPU reference (cpu_sample.c). */
int cpu_sample_candidates(const orin_exec *ex, const orin_sample_candidates_args *a,
                          orin_dtype dt);
size_t cpu_sample_candidates_workspace_size(const void *args);

/* The CUDA op (cuda_sample.cu); graph-safe. `supports` declines outputs longer
 * than CUDA_SAMPLE_MAX_CANDIDATES (the merge keeps them in shared memory). */
#define CUDA_SAMPLE_MAX_CANDIDATES 1024
int cuda_sample_candidates(const orin_exec *ex, const orin_sample_candidates_args *a,
                           orin_dtype dt);
size_t cuda_sample_candidates_workspace_size(const void *args);
bool cuda_sample_candidates_supports(const void *args, char *why, size_t why_cap);

#ifdef __cplusplus
}
#endif
#endif
