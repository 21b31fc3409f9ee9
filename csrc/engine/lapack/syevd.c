/* syevd on CPU devices: LAPACK's syevd (heevd for complex types) on the
 * gathered matrix; the eigenvectors are scattered back block-cyclic. */
#include <stdlib.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"

int jmg_lapack_syevd_full(jmg_dtype dtype, int64_t n64, void *full, void *w,
                          int want_vectors, int *info, jmg_error *err) {
  const jmg_lapack_routines *r = jmg_lapack_routines_for(dtype);
  int n;
  int rc = jmg_lapack_require(r->syevd, dtype, "syevd", "syevd", err);
  if (rc == 0) rc = jmg_lapack_int(n64, "N", "syevd", &n, err);
  if (rc != 0) return rc;
  char jobz = want_vectors ? 'V' : 'N', lower = 'L';
  const int cplx = jmg_dtype_is_complex(dtype);

  /* Workspace query (lapack.h, jmg_lapack_dc_work). */
  jmg_lapack_query qwork = {{0}}, qrwork = {{0}};
  int qiwork = 0, minus1 = -1;
  *info = 0;
  if (cplx)
    ((jmg_heevd_fn)r->syevd)(&jobz, &lower, &n, full, &n, w, &qwork, &minus1,
                             &qrwork, &minus1, &qiwork, &minus1, info);
  else
    ((jmg_syevd_fn)r->syevd)(&jobz, &lower, &n, full, &n, w, &qwork, &minus1,
                             &qiwork, &minus1, info);
  if (*info != 0)
    return jmg_error_set(err, JMG_ELAPACK, "syevd", "LAPACK syevd",
                         "workspace query failed with info=%d", *info);
  jmg_lapack_dc_work ws;
  rc = jmg_lapack_dc_work_alloc(&ws, dtype, &qwork, &qrwork, qiwork, "syevd",
                                err);
  if (rc != 0) return rc;
  if (cplx)
    ((jmg_heevd_fn)r->syevd)(&jobz, &lower, &n, full, &n, w, ws.work,
                             &ws.lwork, ws.rwork, &ws.lrwork, ws.iwork,
                             &ws.liwork, info);
  else
    ((jmg_syevd_fn)r->syevd)(&jobz, &lower, &n, full, &n, w, ws.work,
                             &ws.lwork, ws.iwork, &ws.liwork, info);
  if (*info < 0)
    rc = jmg_error_set(err, JMG_ELAPACK, "syevd", "LAPACK syevd",
                       "argument %d was rejected", -*info);
  jmg_lapack_dc_work_free(&ws);
  return rc;
}

int jmg_lapack_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                     int want_vectors, int *info, jmg_error *err) {
  (void)e;
  void *full;
  int rc = jmg_lapack_gather(a, "syevd", &full, err);
  if (rc != 0) return rc;
  rc = jmg_lapack_syevd_full(a->dtype, a->n, full, w, want_vectors, info, err);
  if (rc == 0 && *info == 0 && want_vectors)
    jmg_lapack_move_columns(a, full, 0, 0);
  free(full);
  return rc;
}
