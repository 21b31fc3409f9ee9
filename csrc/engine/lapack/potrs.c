/* potrs on CPU devices: LAPACK's potrf and potrs on the gathered matrix. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"

int jmg_lapack_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                     int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  const jmg_lapack_routines *r = jmg_lapack_routines_for(a->dtype);
  int rc = jmg_lapack_require((const void *)r->potrf, a->dtype, "potrf",
                              "potrs", err);
  if (rc == 0)
    rc = jmg_lapack_require((const void *)r->potrs, a->dtype, "potrs", "potrs",
                            err);
  if (rc != 0) return rc;
  if (nrhs > INT_MAX)
    return jmg_error_set(err, JMG_EINVAL, "potrs", "LAPACK",
                         "NRHS=%lld exceeds LAPACK's 32-bit int",
                         (long long)nrhs);
  void *full;
  int n;
  if ((rc = jmg_lapack_gather(a, "potrs", &full, &n, err)) != 0) return rc;
  char lower = 'L';
  int k = (int)nrhs;
  *info = 0;
  r->potrf(&lower, &n, full, &n, info);
  if (*info == 0 && diag != NULL) {
    /* The real part comes first in a complex element. */
    const size_t elem = jmg_dtype_size(a->dtype);
    const size_t rsize = jmg_dtype_real_size(a->dtype);
    for (int i = 0; i < n; ++i)
      memcpy((char *)diag + (size_t)i * rsize,
             (const char *)full + (size_t)i * ((size_t)n + 1) * elem, rsize);
  }
  if (*info == 0 && k > 0) r->potrs(&lower, &n, &k, full, &n, b, &n, info);
  if (*info < 0)
    rc = jmg_error_set(err, JMG_ELAPACK, "potrs", "LAPACK potrf/potrs",
                       "argument %d was rejected", -*info);
  /* A holds its factor now; the ops layer never returns it, so no scatter. */
  free(full);
  return rc;
}
