/* attention_mha's CPU kernel: the textbook algorithm, the reference. */
#ifndef ORIN_ATTENTION_MHA_CPU_H
#define ORIN_ATTENTION_MHA_CPU_H

#include "orin/ops.h"
#include "orin/registry.h"

/* decode: the call must have one token (attention.decode); `dt` is the dtype
 * the implementation was registered for. */
int mha_cpu_attention(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt,
                      bool decode);

/* attention.full: bidirectional attention within cu_seqlens' segments, no cache
 * (the vision encoders' attention). */
int mha_cpu_attention_full(const orin_exec *ex, const orin_attention_full_args *a,
                           orin_dtype dt);

#endif
