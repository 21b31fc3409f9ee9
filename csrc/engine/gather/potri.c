/* potri on the gathered A (gather.h): cuSOLVERDn's potri on participant 0
 * (the inverse, both triangles, in the buffer), then scattered to the
 * shards in the CONTIGUOUS layout the op's contract wants (device d: columns
 * d*local_cols ...), when it succeeded (on failure A's content is
 * unspecified: the ops layer fills it with NaN). */
#include "engine/gather/gather.h"

int jmg_gather_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                     jmg_error *err) {
  (void)e;
  const jmg_engine *one = JMG_GATHER_ONE, *dist = JMG_GATHER_DISTRIBUTED;
  jmg_gather_call c;
  *info = 0;
  int rc = jmg_gather_begin(&c, JMG_OP_POTRI, a, err);
  if (rc == 0) rc = one->leader.potri(one, &c.one, info, err);
  if (rc == 0 && *info == 0)
    rc = jmg_gather_scatter(&c, JMG_GATHER_TO_CONTIGUOUS, err);
  rc = jmg_gather_end(&c, rc, err);
  if (jmg_gather_fall_back(&rc, a, JMG_OP_POTRI, err))
    rc = dist->leader.potri(dist, a, info, err);
  return rc;
}
