/* potrs on the gathered A (gather.h): cuSOLVERDn's potrs on participant 0,
 * where B (and the factor's diagonal, on the host) already are; nothing to
 * scatter (A holds its factor and is not returned). */
#include "engine/gather/gather.h"

int jmg_gather_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                     int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  const jmg_engine *one = JMG_GATHER_ONE, *dist = JMG_GATHER_DISTRIBUTED;
  jmg_gather_call c;
  *info = 0;
  int rc = jmg_gather_begin(&c, JMG_OP_POTRS, a, err);
  if (rc == 0) rc = one->leader.potrs(one, &c.one, b, nrhs, diag, info, err);
  rc = jmg_gather_end(&c, rc, err);
  if (jmg_gather_fall_back(&rc, a, JMG_OP_POTRS, err))
    rc = dist->leader.potrs(dist, a, b, nrhs, diag, info, err);
  return rc;
}
