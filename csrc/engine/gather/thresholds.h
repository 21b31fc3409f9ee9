/* Where gathering A onto one GPU beats the distributed engine: the one table
 * of sizes behind the gather engine's `prefers` (engine/engine.h), by op,
 * dtype class (real: float32/float64; complex: complex64/complex128) and
 * number of GPUs. Each row says where its number comes from (measured, or a
 * guess to be replaced by the multi-GPU measurements of issue 20). Pure C,
 * no CUDA: in the core library, so that the C tests read the same table. */
#ifndef JMG_ENGINE_GATHER_THRESHOLDS_H
#define JMG_ENGINE_GATHER_THRESHOLDS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

typedef struct jmg_gather_row {
  jmg_op op;                /* potrs, potri, syevd, lu_solve */
  int complex;              /* 0: float32/float64; 1: complex64/complex128 */
  int min_parts, max_parts; /* GPUs in the group, inclusive */
  int64_t below;            /* gathered by default when N < below */
  int measured;             /* 1: from measurements; 0: a guess (issue 20) */
  const char *source;       /* where the number comes from */
  /* The local model's (cusolverdn-local against cuSOLVERMp's routine,
   * jmg_gather_local_prefers) where it differs from below; 0: below. */
  int64_t local_below;
} jmg_gather_row;

/* The row for (op, dtype, nparts), or NULL where the table has none (then
 * the gather engine is never preferred: the distributed engine runs). */
const jmg_gather_row *jmg_gather_row_of(jmg_op op, jmg_dtype dtype, int nparts);

/* The table itself, terminated by a row whose op is JMG_NUM_OPS (for tests and
 * documentation). */
extern const jmg_gather_row jmg_gather_rows[];

/* The gather engine's `prefers`: a group of several devices and N below its
 * row's size; else 0 and the reason in why. */
int jmg_gather_prefers(const jmg_engine *e, const jmg_problem *p, char *why,
                       size_t why_len);

/* The same table for the local model (one process per GPU, groups across
 * nodes): whether cusolverdn-local (A gathered onto rank 0 over NCCL,
 * cuSOLVERDn there) is preferred to cuSOLVERMp, i.e. N below the op's row
 * (sygvd: syevd's row; no row: never). The one-GPU-vs-several crossover is
 * taken as the leader model's: both compare one GPU with a distributed
 * library on the same GPUs, and the local model's copies (over NCCL
 * rather than peer copies) cost as little beside the solve. cuSOLVERMp's
 * own routines were no faster than cuSOLVERMg's where both were measured
 * (DESIGN.md, 2 H200, 2026-11-27), so its crossover is no lower. Pure:
 * every rank of a call decides alike. */
int jmg_gather_local_prefers(const jmg_engine *e, const jmg_problem *p,
                             char *why, size_t why_len);

#endif
