/* potri on lapack-local: potrf and potri on rank 0's gathered matrix (both
 * triangles), the inverse's parts scattered back in A's layout. */
#include "engine/lapack/lapack.h"
#include "engine/lapack_local/local.h"

int jmg_ll_potri(const jmg_engine *e, const jmg_local_matrix *a, int *info,
                 jmg_error *err) {
  (void)e;
  ll_call c;
  int f = 0;
  int rc = ll_begin(&c, "potri", a, err);
  if (rc == 0) rc = ll_gather(&c, err);
  if (rc == 0) {
    int lrc = 0;
    if (a->rank == 0)
      lrc = jmg_lapack_potri_full(a->dtype, a->n, c.full, &f, err);
    rc = ll_outcome(&c, lrc, &f, err);
  }
  /* f > 0: A's content is unspecified (the ops layer fills NaN). */
  if (rc == 0 && f == 0) rc = ll_scatter(&c, err);
  if (rc == 0) *info = f;
  ll_end(&c);
  return rc;
}
