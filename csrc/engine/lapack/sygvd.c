/* sygvd on CPU devices: LAPACK's sygvd (hegvd for complex types), itype 1
 * (A v = λ B v), on the gathered A and B; the eigenvectors are scattered
 * back block-cyclic. */
#include <stdlib.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"

int jmg_lapack_sygvd_full(jmg_dtype dtype, int64_t n64, void *a, void *b,
                          void *w, int want_vectors, int *info,
                          jmg_error *err) {
  const jmg_lapack_routines *r = jmg_lapack_routines_for(dtype);
  int n;
  int rc = jmg_lapack_require(r->sygvd, dtype, "sygvd", "sygvd", err);
  if (rc == 0) rc = jmg_lapack_int(n64, "N", "sygvd", &n, err);
  if (rc != 0) return rc;
  int itype = 1;
  char jobz = want_vectors ? 'V' : 'N', lower = 'L';
  const int cplx = jmg_dtype_is_complex(dtype);

  /* Workspace query (lapack.h, jmg_lapack_dc_work). */
  jmg_lapack_query qwork = {{0}}, qrwork = {{0}};
  int qiwork = 0, minus1 = -1;
  *info = 0;
  if (cplx)
    ((jmg_hegvd_fn)r->sygvd)(&itype, &jobz, &lower, &n, a, &n, b, &n, w,
                             &qwork, &minus1, &qrwork, &minus1, &qiwork,
                             &minus1, info);
  else
    ((jmg_sygvd_fn)r->sygvd)(&itype, &jobz, &lower, &n, a, &n, b, &n, w,
                             &qwork, &minus1, &qiwork, &minus1, info);
  if (*info != 0)
    return jmg_error_set(err, JMG_ELAPACK, "sygvd", "LAPACK sygvd",
                         "workspace query failed with info=%d", *info);
  jmg_lapack_dc_work ws;
  rc = jmg_lapack_dc_work_alloc(&ws, dtype, &qwork, &qrwork, qiwork, "sygvd",
                                err);
  if (rc != 0) return rc;
  if (cplx)
    ((jmg_hegvd_fn)r->sygvd)(&itype, &jobz, &lower, &n, a, &n, b, &n, w,
                             ws.work, &ws.lwork, ws.rwork, &ws.lrwork,
                             ws.iwork, &ws.liwork, info);
  else
    ((jmg_sygvd_fn)r->sygvd)(&itype, &jobz, &lower, &n, a, &n, b, &n, w,
                             ws.work, &ws.lwork, ws.iwork, &ws.liwork, info);
  if (*info < 0)
    rc = jmg_error_set(err, JMG_ELAPACK, "sygvd", "LAPACK sygvd",
                       "argument %d was rejected", -*info);
  jmg_lapack_dc_work_free(&ws);
  return rc;
}

int jmg_lapack_sygvd(const jmg_engine *e, const jmg_dist_matrix *a,
                     const jmg_dist_matrix *b, void *w, int want_vectors,
                     int *info, jmg_error *err) {
  (void)e;
  void *full_a = NULL, *full_b = NULL;
  int rc = jmg_lapack_gather(a, "sygvd", &full_a, err);
  if (rc == 0) rc = jmg_lapack_gather(b, "sygvd", &full_b, err);
  if (rc == 0)
    rc = jmg_lapack_sygvd_full(a->dtype, a->n, full_a, full_b, w, want_vectors,
                               info, err);
  if (rc == 0 && *info == 0 && want_vectors)
    jmg_lapack_move_columns(a, full_a, 0, 0);
  free(full_a);
  free(full_b);
  return rc;
}
