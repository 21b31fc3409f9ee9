/* syevd on lapack-local: syevd (heevd) on rank 0's gathered matrix, the
 * eigenvalues broadcast to every rank and, with vectors, the eigenvectors'
 * parts scattered back in A's layout (column j the j-th eigenvector). */
#include "engine/lapack/lapack.h"
#include "engine/lapack_local/local.h"

int jmg_ll_syevd(const jmg_engine *e, const jmg_local_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err) {
  (void)e;
  ll_call c;
  int f = 0;
  int rc = ll_begin(&c, "syevd", a, err);
  if (rc == 0) rc = ll_gather(&c, err);
  if (rc == 0) {
    int lrc = 0;
    if (a->rank == 0)
      lrc = jmg_lapack_syevd_full(a->dtype, a->n, c.full, w, want_vectors, &f,
                                  err);
    rc = ll_outcome(&c, lrc, &f, err);
  }
  /* f > 0: no convergence; the ops layer fills NaN. */
  if (rc == 0 && f == 0) {
    void *const bufs[1] = {w};
    const size_t bytes[1] = {(size_t)a->n * jmg_dtype_real_size(a->dtype)};
    rc = ll_bcast(&c, bufs, bytes, 1, err);
  }
  if (rc == 0 && f == 0 && want_vectors) rc = ll_scatter(&c, err);
  if (rc == 0) *info = f;
  ll_end(&c);
  return rc;
}
