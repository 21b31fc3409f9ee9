/* potri on CPU devices: LAPACK's potrf and potri on the gathered matrix,
 * the upper triangle filled in, scattered back in the contiguous layout. */
#include <stdlib.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"

int jmg_lapack_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                     jmg_error *err) {
  (void)e;
  const jmg_lapack_routines *r = jmg_lapack_routines_for(a->dtype);
  int rc = jmg_lapack_require((const void *)r->potrf, a->dtype, "potrf",
                              "potri", err);
  if (rc == 0)
    rc = jmg_lapack_require((const void *)r->potri, a->dtype, "potri", "potri",
                            err);
  if (rc != 0) return rc;
  void *full;
  int n;
  if ((rc = jmg_lapack_gather(a, "potri", &full, &n, err)) != 0) return rc;
  char lower = 'L';
  *info = 0;
  r->potrf(&lower, &n, full, &n, info);
  if (*info == 0) r->potri(&lower, &n, full, &n, info);
  if (*info < 0) {
    rc = jmg_error_set(err, JMG_ELAPACK, "potri", "LAPACK potrf/potri",
                       "argument %d was rejected", -*info);
  } else if (*info == 0) {
    /* LAPACK's potri leaves the upper triangle; the contract wants both. */
    jmg_lapack_fill_upper(full, a->n, a->dtype);
    jmg_lapack_move_columns(a, full, 0, 1);
  }
  free(full);
  return rc;
}
