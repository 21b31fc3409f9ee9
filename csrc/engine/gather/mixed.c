/* potrs and lu_solve in mixed precision on the gathered A (mixed.h). The
 * gathered buffer is A as the engine holds it, in global column order, and
 * stays intact for the residuals (cuSOLVERDn's mixed routine factors a
 * lower-precision copy of it, and its own exact fallback factors the
 * buffer, never the shards); B (and X) is on participant 0 already. Nothing
 * is scattered: A holds nothing the op returns. Memory on participant 0
 * beside its shard: the gathered N x N copy in A's dtype, then the mixed
 * routine's workspace (the lower-precision copy, half the gathered one, and
 * the refinement's n x nrhs vectors), or the exact routine's in its
 * fallback. */
#include "engine/gather/mixed.h"

#include <stdio.h>

#include "common/trace.h"
#include "engine/gather/gather.h"
#include "engine/gather/thresholds.h"

/* One routine for both ops: lu chooses lu_solve (with transpose). */
static int gather_mixed(const jmg_dist_matrix *a, void *b, int64_t nrhs,
                        int lu, int transpose, int *info, jmg_error *err) {
  const jmg_engine *one = JMG_GATHER_ONE, *dist = JMG_GATHER_DISTRIBUTED;
  const jmg_op op = lu ? JMG_OP_LU_SOLVE : JMG_OP_POTRS;
  jmg_gather_call c;
  *info = 0;
  int rc = jmg_gather_begin(&c, op, a, err);
  if (rc == 0 && lu)
    rc = one->leader.lu_solve_mixed(one, &c.one, b, nrhs, transpose, info,
                                    err);
  else if (rc == 0)
    rc = one->leader.potrs_mixed(one, &c.one, b, nrhs, info, err);
  rc = jmg_gather_end(&c, rc, err);
  if (!jmg_gather_fall_back(&rc, a, op, err)) return rc;
  /* The distributed engine has no mixed routine: its exact one gives the
   * exact path's answer, which a mixed call returns where refinement
   * cannot (engine.h). */
  char mark[96];
  snprintf(mark, sizeof mark, "exact %s on %s (it has no mixed routine)",
           jmg_dtype_name(a->dtype), dist->name);
  jmg_trace_mark(mark);
  return lu ? dist->leader.lu_solve(dist, a, b, nrhs, transpose, info, err)
            : dist->leader.potrs(dist, a, b, nrhs, NULL, info, err);
}

int jmg_gather_potrs_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                           void *b, int64_t nrhs, int *info, jmg_error *err) {
  (void)e;
  return gather_mixed(a, b, nrhs, 0, 0, info, err);
}

int jmg_gather_lu_solve_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                              void *b, int64_t nrhs, int transpose, int *info,
                              jmg_error *err) {
  (void)e;
  return gather_mixed(a, b, nrhs, 1, transpose, info, err);
}

int jmg_gather_prefers_precision(const jmg_engine *e, const jmg_problem *p,
                                 char *why, size_t why_len) {
  if (p->precision == JMG_PRECISION_MIXED && p->nparts >= 2 &&
      (p->op == JMG_OP_POTRS || p->op == JMG_OP_LU_SOLVE))
    return 1;
  return jmg_gather_prefers(e, p, why, why_len);
}
