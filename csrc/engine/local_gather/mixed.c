/* potrs and lu_solve in mixed precision on the local model's one-device
 * path (engine.h's local potrs_mixed and lu_solve_mixed): the exact
 * routines' steps (local_gather.h), with the on_rank0 engine's mixed
 * routine on rank 0's gathered matrix (the lower-precision factor, the
 * refinement against the gathered A, the exact fallback on it), X
 * broadcast to every rank. Where rank 0 is short of memory the fallback
 * engine's mixed routine runs, where it has one. */
#include "engine/local_gather/local_gather.h"

/* Both ops: lu chooses lu_solve (with transpose). */
static int lg_mixed(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                    int64_t nrhs, int lu, int transpose, int *info,
                    jmg_error *err) {
  const jmg_engine *one = e->on_rank0;
  jmg_lg_call c;
  int f = 0;
  int rc = jmg_lg_begin(&c, e, lu ? JMG_OP_LU_SOLVE : JMG_OP_POTRS, a, err);
  if (rc == 0) rc = jmg_lg_gather(&c, err);
  if (rc == 0) {
    int orc = 0;
    if (a->rank == 0) {
      const jmg_dist_matrix *v = jmg_lg_square_view(&c);
      orc = lu ? one->leader.lu_solve_mixed(one, v, b, nrhs, transpose,
                                            &f, err)
               : one->leader.potrs_mixed(one, v, b, nrhs, &f, err);
    }
    rc = jmg_lg_outcome(&c, orc, &f, err);
  }
  /* f > 0: the exact fallback's info; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0)
    rc = jmg_lg_bcast(&c, b, (size_t)a->n * (size_t)nrhs * c.elem, err);
  if (rc == 0) *info = f;
  return jmg_lg_end(&c, rc, err);
}

int jmg_lg_potrs_mixed(const jmg_engine *e, const jmg_local_matrix *a,
                       void *b, int64_t nrhs, int *info, jmg_error *err) {
  int rc = lg_mixed(e, a, b, nrhs, 0, 0, info, err);
  if (rc == JMG_LG_FALL_BACK && e->fallback->local.potrs_mixed != NULL)
    return e->fallback->local.potrs_mixed(e->fallback, a, b, nrhs, info, err);
  if (rc == JMG_LG_FALL_BACK) /* the exact routine, as mixed's fallback */
    return e->fallback->local.potrs(e->fallback, a, b, nrhs, NULL, info, err);
  return rc;
}

int jmg_lg_lu_solve_mixed(const jmg_engine *e, const jmg_local_matrix *a,
                          void *b, int64_t nrhs, int transpose, int *info,
                          jmg_error *err) {
  int rc = lg_mixed(e, a, b, nrhs, 1, transpose, info, err);
  if (rc == JMG_LG_FALL_BACK && e->fallback->local.lu_solve_mixed != NULL)
    return e->fallback->local.lu_solve_mixed(e->fallback, a, b, nrhs,
                                             transpose, info, err);
  if (rc == JMG_LG_FALL_BACK)
    return e->fallback->local.lu_solve(e->fallback, a, b, nrhs, transpose,
                                       info, err);
  return rc;
}
