/* lu_solve on CPU devices: LAPACK's getrf and getrs on the gathered matrix. */
#include <stdlib.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"

int jmg_lapack_lu_solve_full(jmg_dtype dtype, int64_t n64, void *full, void *b,
                             int64_t nrhs, int transpose, int *info,
                             jmg_error *err) {
  const char *op = "lu_solve";
  const jmg_lapack_routines *r = jmg_lapack_routines_for(dtype);
  int n, k;
  int rc = jmg_lapack_require((const void *)r->getrf, dtype, "getrf", op, err);
  if (rc == 0)
    rc = jmg_lapack_require((const void *)r->getrs, dtype, "getrs", op, err);
  if (rc == 0) rc = jmg_lapack_int(n64, "N", op, &n, err);
  if (rc == 0) rc = jmg_lapack_int(nrhs, "NRHS", op, &k, err);
  if (rc != 0) return rc;
  int *ipiv = malloc((size_t)(n > 0 ? n : 1) * sizeof *ipiv);
  if (ipiv == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate %d pivots", n);
  /* 'T' for complex dtypes too: the transpose, never the conjugate one
   * (ops/lu_solve.c says why). */
  char trans = transpose ? 'T' : 'N';
  *info = 0;
  r->getrf(&n, &n, full, &n, ipiv, info);
  /* getrf's info > 0 (a zero pivot) is the result; getrs would divide by
   * it, and the ops layer fills X with NaN. */
  if (*info == 0 && k > 0)
    r->getrs(&trans, &n, &k, full, &n, ipiv, b, &n, info);
  if (*info < 0)
    rc = jmg_error_set(err, JMG_ELAPACK, op, "LAPACK getrf/getrs",
                       "argument %d was rejected", -*info);
  free(ipiv);
  return rc;
}

int jmg_lapack_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                        int64_t nrhs, int transpose, int *info,
                        jmg_error *err) {
  (void)e;
  void *full;
  int rc = jmg_lapack_gather(a, "lu_solve", &full, err);
  if (rc != 0) return rc;
  rc = jmg_lapack_lu_solve_full(a->dtype, a->n, full, b, nrhs, transpose, info,
                                err);
  /* A holds its factors now; the ops layer never returns it, so no scatter. */
  free(full);
  return rc;
}
