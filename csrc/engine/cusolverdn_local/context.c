/* cusolverdn-local: cuSOLVERDn in the local model (engine/engine.h,
 * JMG_MODEL_LOCAL): one process (or thread) per GPU, the ranks joined by
 * NCCL (cuda/comm_nccl.c, through comm/comm.h). The local model's
 * one-device path (engine/local_gather/, the steps lapack-local runs on
 * CPU devices): rank 0 gathers A (and sygvd's B) over the communicator,
 * jmg_cusolverdn_engine's routine runs there on a one-GPU view of the
 * gathered matrix, X, the eigenvalues and the factor's diagonal are
 * broadcast, the inverse's and the eigenvectors' parts scattered back,
 * info agreed on every rank.
 *
 * Why: on several GPUs cuSOLVERMp is slower than one GPU for small
 * problems and for its eigensolver (DESIGN.md, 2 H200, 2026-11-27; issue
 * 37), and a call must never be slower than one GPU. Where it runs by
 * default: groups of several GPUs (across nodes, or within one when the
 * leader-model engines cannot run the call) with N below the op's
 * one-GPU crossover, engine/gather/thresholds.c's table read by
 * jmg_gather_local_prefers (one table for both models). cuSOLVERMp runs
 * the rest, and also runs a call whose gathered copy (or cuSOLVERDn's
 * workspace) does not fit on rank 0's GPU: rank 0's allocation decides
 * at the call (selection, made alike on every rank, knows no GPU's free
 * memory; XLA's allocator does), the ranks agree, and every rank runs
 * cuSOLVERMp's routine on the same parts (its `fallback`). Memory on rank
 * 0: the gathered A, the parts as they arrive (one more N x N), B's copy
 * for sygvd, and cuSOLVERDn's workspace (its `workspace` query tells it).
 *
 * Blocks: those cuSOLVERMp takes (powers of two for the eigensolvers,
 * layout/local.h), so that the fallback runs on the layout the executor
 * made. Under JAXMG_ENGINE=cusolvermp the eigensolvers below their
 * crossover run this engine's routines too (engine/cusolvermp/one_gpu.c):
 * cuSOLVERMp's eigensolver is slower than one GPU there.
 *
 * Both by default since tests/gpu/test_gpu_cusolverdn_local.py passed on
 * 2 H200 (2026-11-27, session 18: named, and chosen by default with
 * cuSOLVERMp installed); JAXMG_LOCAL_GATHER=0 turns both off (the engine
 * then runs where JAXMG_ENGINE=cusolverdn-local names it). */
#include <stdint.h>
#include <stdio.h>

#include "common/config.h"

#include "engine/cusolvermp/mp.h"
#include "engine/gather/thresholds.h"
#include "engine/local_gather/local_gather.h"
#include "layout/local.h"

static int dnl_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                        size_t len) {
  (void)e;
  if (p->n < 1 || p->tile < 1 || p->nparts < 1) {
    snprintf(why, len, "N=%lld, T_A=%lld on %d GPUs: needs N >= 1, T_A >= 1",
             (long long)p->n, (long long)p->tile, p->nparts);
    return 0;
  }
  const jmg_engine *dn = &jmg_cusolverdn_engine;
  jmg_problem one = *p;
  one.nparts = 1;
  if (dn->supports != NULL && !dn->supports(dn, &one, why, len)) return 0;
  const uint64_t rows = (uint64_t)jmg_problem_rows(p);
  if ((uint64_t)p->n > SIZE_MAX / 4 / rows / jmg_dtype_size(p->dtype)) {
    snprintf(why, len,
             "%lld x %lld: rank 0's gathered copy is too large to address",
             (long long)rows, (long long)p->n);
    return 0;
  }
  return 1;
}

int jmg_cusolverdn_local_by_default(char *why, size_t why_len) {
  jmg_config c;
  jmg_config_read(&c);
  if (c.local_gather) return 1;
  snprintf(why, why_len,
           "JAXMG_LOCAL_GATHER=0: cusolverdn-local runs only where "
           "JAXMG_ENGINE names it");
  return 0;
}

/* The crossover; mixed-precision solves wherever there are several GPUs
 * (cuSOLVERMp has no mixed routine: the gather engine's rule). */
static int dnl_prefers(const jmg_engine *e, const jmg_problem *p, char *why,
                       size_t len) {
  if (!jmg_cusolverdn_local_by_default(why, len)) return 0;
  if (p->precision == JMG_PRECISION_MIXED && p->nparts >= 2 &&
      (p->op == JMG_OP_POTRS || p->op == JMG_OP_LU_SOLVE))
    return 1;
  return jmg_gather_local_prefers(e, p, why, len);
}

const jmg_engine jmg_cusolverdn_local_engine = {
    .name = "cusolverdn-local",
    .model = JMG_MODEL_LOCAL,
    .supports = dnl_supports,
    .prefers = dnl_prefers,
    .workspace = jmg_lg_workspace,
    .block = jmg_lg_block,
    .local = JMG_LG_LOCAL_ROUTINES,
    .on_rank0 = &jmg_cusolverdn_engine,
    .fallback = &jmg_cusolvermp_own_engine,
};
