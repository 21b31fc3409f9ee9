/* potrs on CPU devices: LAPACK's potrf and potrs on the gathered matrix. */
#include <stdlib.h>
#include <string.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"

int jmg_lapack_potrs_full(jmg_dtype dtype, int64_t n64, void *full, void *b,
                          int64_t nrhs, void *diag, int *info,
                          jmg_error *err) {
  const jmg_lapack_routines *r = jmg_lapack_routines_for(dtype);
  int n, k;
  int rc =
      jmg_lapack_require((const void *)r->potrf, dtype, "potrf", "potrs", err);
  if (rc == 0)
    rc = jmg_lapack_require((const void *)r->potrs, dtype, "potrs", "potrs",
                            err);
  if (rc == 0) rc = jmg_lapack_int(n64, "N", "potrs", &n, err);
  if (rc == 0) rc = jmg_lapack_int(nrhs, "NRHS", "potrs", &k, err);
  if (rc != 0) return rc;
  char lower = 'L';
  *info = 0;
  r->potrf(&lower, &n, full, &n, info);
  if (*info == 0 && diag != NULL) {
    /* The real part comes first in a complex element. */
    const size_t elem = jmg_dtype_size(dtype);
    const size_t rsize = jmg_dtype_real_size(dtype);
    for (int i = 0; i < n; ++i)
      memcpy((char *)diag + (size_t)i * rsize,
             (const char *)full + (size_t)i * ((size_t)n + 1) * elem, rsize);
  }
  if (*info == 0 && k > 0) r->potrs(&lower, &n, &k, full, &n, b, &n, info);
  if (*info < 0)
    return jmg_error_set(err, JMG_ELAPACK, "potrs", "LAPACK potrf/potrs",
                         "argument %d was rejected", -*info);
  return 0;
}

int jmg_lapack_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                     int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  void *full;
  int rc = jmg_lapack_gather(a, "potrs", &full, err);
  if (rc != 0) return rc;
  rc = jmg_lapack_potrs_full(a->dtype, a->n, full, b, nrhs, diag, info, err);
  /* A holds its factor now; the ops layer never returns it, so no scatter. */
  free(full);
  return rc;
}
