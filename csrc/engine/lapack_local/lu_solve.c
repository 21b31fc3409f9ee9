/* lu_solve on lapack-local: getrf and getrs (op(A) as transpose says) on
 * rank 0's gathered matrix, X broadcast to every rank. */
#include "engine/lapack/lapack.h"
#include "engine/lapack_local/local.h"

int jmg_ll_lu_solve(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  (void)e;
  ll_call c;
  int f = 0;
  int rc = ll_begin(&c, "lu_solve", a, err);
  if (rc == 0) rc = ll_gather(&c, err);
  if (rc == 0) {
    int lrc = 0;
    if (a->rank == 0)
      lrc = jmg_lapack_lu_solve_full(a->dtype, a->n, c.full, b, nrhs,
                                     transpose, &f, err);
    rc = ll_outcome(&c, lrc, &f, err);
  }
  /* f > 0: U(f, f) is exactly zero; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    void *const bufs[1] = {b};
    const size_t bytes[1] = {(size_t)a->n * (size_t)nrhs * c.elem};
    rc = ll_bcast(&c, bufs, bytes, 1, err);
  }
  if (rc == 0) *info = f;
  ll_end(&c);
  return rc;
}
