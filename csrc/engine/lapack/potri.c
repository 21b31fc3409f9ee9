/* potri on CPU devices: LAPACK's potrf and potri on the gathered matrix,
 * the upper triangle filled in, scattered back in the contiguous layout. */
#include <stdlib.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"

int jmg_lapack_potri_full(jmg_dtype dtype, int64_t n64, void *full, int *info,
                          jmg_error *err) {
  const jmg_lapack_routines *r = jmg_lapack_routines_for(dtype);
  int n;
  int rc =
      jmg_lapack_require((const void *)r->potrf, dtype, "potrf", "potri", err);
  if (rc == 0)
    rc = jmg_lapack_require((const void *)r->potri, dtype, "potri", "potri",
                            err);
  if (rc == 0) rc = jmg_lapack_int(n64, "N", "potri", &n, err);
  if (rc != 0) return rc;
  char lower = 'L';
  *info = 0;
  r->potrf(&lower, &n, full, &n, info);
  if (*info == 0) r->potri(&lower, &n, full, &n, info);
  if (*info < 0)
    return jmg_error_set(err, JMG_ELAPACK, "potri", "LAPACK potrf/potri",
                         "argument %d was rejected", -*info);
  /* LAPACK's potri leaves the upper triangle; the contract wants both. */
  if (*info == 0) jmg_lapack_fill_upper(full, n64, dtype);
  return 0;
}

int jmg_lapack_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                     jmg_error *err) {
  (void)e;
  void *full;
  int rc = jmg_lapack_gather(a, "potri", &full, err);
  if (rc != 0) return rc;
  rc = jmg_lapack_potri_full(a->dtype, a->n, full, info, err);
  if (rc == 0 && *info == 0) jmg_lapack_move_columns(a, full, 0, 1);
  free(full);
  return rc;
}
