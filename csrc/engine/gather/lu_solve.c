/* lu_solve on the gathered A (gather.h): cuSOLVERDn's getrf + getrs on
 * participant 0, where B already is, with the transpose the ops layer asks
 * for (the gathered buffer is the matrix as the engine holds it, in the same
 * column order); nothing to scatter (A holds its factors and is not
 * returned). */
#include "engine/gather/gather.h"

int jmg_gather_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                        int64_t nrhs, int transpose, int *info,
                        jmg_error *err) {
  (void)e;
  const jmg_engine *one = JMG_GATHER_ONE, *dist = JMG_GATHER_DISTRIBUTED;
  jmg_gather_call c;
  *info = 0;
  int rc = jmg_gather_begin(&c, JMG_OP_LU_SOLVE, a, err);
  if (rc == 0)
    rc = one->leader.lu_solve(one, &c.one, b, nrhs, transpose, info, err);
  rc = jmg_gather_end(&c, rc, err);
  if (jmg_gather_fall_back(&rc, a, JMG_OP_LU_SOLVE, err))
    rc = dist->leader.lu_solve(dist, a, b, nrhs, transpose, info, err);
  return rc;
}
