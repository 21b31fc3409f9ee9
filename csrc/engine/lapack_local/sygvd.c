/* sygvd on lapack-local: A and B gathered onto rank 0, sygvd (hegvd) there,
 * the eigenvalues broadcast to every rank and, with vectors, the
 * eigenvectors' parts scattered back in A's layout (column j the j-th
 * eigenvector). B's parts are left as they were (B is workspace). */
#include <string.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack_local/local.h"

int jmg_ll_sygvd(const jmg_engine *e, const jmg_local_matrix *a,
                 const jmg_local_matrix *b, void *w, int want_vectors,
                 int *info, jmg_error *err) {
  (void)e;
  ll_call ca, cb;
  memset(&ca, 0, sizeof ca);
  int f = 0;
  int rc = ll_begin(&cb, "sygvd", b, err);
  if (rc == 0) rc = ll_gather(&cb, err);
  /* Both steps agree (ll_begin) or are collective on every rank: rc is
   * the same everywhere here. */
  if (rc == 0) rc = ll_begin(&ca, "sygvd", a, err);
  if (rc == 0) rc = ll_gather(&ca, err);
  if (rc == 0) {
    int lrc = 0;
    if (a->rank == 0)
      lrc = jmg_lapack_sygvd_full(a->dtype, a->n, ca.full, cb.full, w,
                                  want_vectors, &f, err);
    rc = ll_outcome(&ca, lrc, &f, err);
  }
  /* f != 0: no convergence or B not positive definite; the ops layer
   * fills NaN. */
  if (rc == 0 && f == 0) {
    void *const bufs[1] = {w};
    const size_t bytes[1] = {(size_t)a->n * jmg_dtype_real_size(a->dtype)};
    rc = ll_bcast(&ca, bufs, bytes, 1, err);
  }
  if (rc == 0 && f == 0 && want_vectors) rc = ll_scatter(&ca, err);
  if (rc == 0) *info = f;
  ll_end(&ca);
  ll_end(&cb);
  return rc;
}
