/* potrs on lapack-local: potrf and potrs on rank 0's gathered matrix, X
 * and the factor's diagonal broadcast to every rank. */
#include "engine/lapack/lapack.h"
#include "engine/lapack_local/local.h"

int jmg_ll_potrs(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  ll_call c;
  int f = 0;
  int rc = ll_begin(&c, "potrs", a, err);
  if (rc == 0) rc = ll_gather(&c, err);
  if (rc == 0) {
    int lrc = 0;
    if (a->rank == 0)
      lrc = jmg_lapack_potrs_full(a->dtype, a->n, c.full, b, nrhs, diag, &f,
                                  err);
    rc = ll_outcome(&c, lrc, &f, err);
  }
  /* f > 0: not positive definite; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    void *const bufs[2] = {b, diag};
    const size_t bytes[2] = {(size_t)a->n * (size_t)nrhs * c.elem,
                             (size_t)a->n * jmg_dtype_real_size(a->dtype)};
    rc = ll_bcast(&c, bufs, bytes, 2, err);
  }
  if (rc == 0) *info = f;
  ll_end(&c);
  return rc;
}
