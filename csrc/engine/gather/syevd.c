/* syevd on the gathered A (gather.h): cuSOLVERDn's syevd on participant 0
 * (the eigenvalues straight into w, on participant 0; the eigenvectors in
 * the buffer, column j the j-th), then the eigenvectors scattered to the
 * shards in the BLOCK-CYCLIC layout the op's contract wants (the ops layer
 * permutes them back), when asked for and computed. */
#include "engine/gather/gather.h"

int jmg_gather_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                     int want_vectors, int *info, jmg_error *err) {
  (void)e;
  const jmg_engine *one = JMG_GATHER_ONE, *dist = JMG_GATHER_DISTRIBUTED;
  jmg_gather_call c;
  *info = 0;
  int rc = jmg_gather_begin(&c, JMG_OP_SYEVD, a, err);
  if (rc == 0) rc = one->leader.syevd(one, &c.one, w, want_vectors, info, err);
  if (rc == 0 && *info == 0 && want_vectors)
    rc = jmg_gather_scatter(&c, JMG_GATHER_TO_CYCLIC, err);
  rc = jmg_gather_end(&c, rc, err);
  if (jmg_gather_fall_back(&rc, a, JMG_OP_SYEVD, err))
    rc = dist->leader.syevd(dist, a, w, want_vectors, info, err);
  return rc;
}
