/* lu_solve on the local model's one-device path (local_gather.h): the
 * on_rank0 engine's lu_solve (op(A) as transpose says) on rank 0's
 * gathered matrix, X broadcast to every rank. */
#include "engine/local_gather/local_gather.h"

int jmg_lg_lu_solve(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  const jmg_engine *one = e->on_rank0;
  jmg_lg_call c;
  int f = 0;
  int rc = jmg_lg_begin(&c, e, JMG_OP_LU_SOLVE, a, err);
  if (rc == 0) rc = jmg_lg_gather(&c, err);
  if (rc == 0) {
    int orc = 0;
    if (a->rank == 0) {
      const jmg_dist_matrix *v = jmg_lg_square_view(&c);
      orc = one->leader.lu_solve(one, v, b, nrhs, transpose, &f, err);
    }
    rc = jmg_lg_outcome(&c, orc, &f, err);
  }
  /* f > 0: U(f, f) is exactly zero; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0)
    rc = jmg_lg_bcast(&c, b, (size_t)a->n * (size_t)nrhs * c.elem, err);
  if (rc == 0) *info = f;
  rc = jmg_lg_end(&c, rc, err);
  if (rc == JMG_LG_FALL_BACK)
    rc = e->fallback->local.lu_solve(e->fallback, a, b, nrhs, transpose, info,
                                     err);
  return rc;
}
