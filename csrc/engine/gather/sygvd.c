/* sygvd on the gathered A and B (gather.h): cuSOLVERDn's sygvd on
 * participant 0 (the eigenvalues straight into w, on participant 0; the
 * eigenvectors in A's buffer, column j the j-th), then the eigenvectors
 * scattered to the shards in the BLOCK-CYCLIC layout the op's contract
 * wants (the ops layer permutes them back), when asked for and computed.
 * cuSOLVERMg has no sygvd: where the copies do not fit there is no fall
 * back, and the want of memory is the call's error. */
#include "engine/gather/gather.h"

int jmg_gather_sygvd(const jmg_engine *e, const jmg_dist_matrix *a,
                     const jmg_dist_matrix *b, void *w, int want_vectors,
                     int *info, jmg_error *err) {
  (void)e;
  const jmg_engine *one = JMG_GATHER_ONE;
  jmg_gather_call c;
  *info = 0;
  int rc = jmg_gather_begin(&c, JMG_OP_SYGVD, a, err);
  if (rc == 0) rc = jmg_gather_second(&c, b, err);
  if (rc == 0)
    rc = one->leader.sygvd(one, &c.one, &c.second, w, want_vectors, info, err);
  if (rc == 0 && *info == 0 && want_vectors)
    rc = jmg_gather_scatter(&c, JMG_GATHER_TO_CYCLIC, err);
  return jmg_gather_end(&c, rc, err);
}
