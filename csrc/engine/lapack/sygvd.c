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
  const size_t esize = jmg_dtype_size(dtype);
  const size_t rsize = jmg_dtype_real_size(dtype);

  /* Workspace query: lwork = liwork = lrwork = -1 (as syevd.c). */
  union {
    float f[4];
    double d[2];
  } qwork = {{0}}, qrwork = {{0}};
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
  double lwork_d = rsize == 4 ? (double)qwork.f[0] : qwork.d[0];
  double lrwork_d = rsize == 4 ? (double)qrwork.f[0] : qrwork.d[0];
  int lwork = (int)lwork_d + 1, lrwork = (int)lrwork_d + 1, liwork = qiwork;
  void *work = malloc((size_t)lwork * esize);
  void *rwork = cplx ? malloc((size_t)lrwork * rsize) : NULL;
  int *iwork = malloc((size_t)(liwork > 0 ? liwork : 1) * sizeof(int));
  if (!work || !iwork || (cplx && !rwork)) {
    rc = jmg_error_set(err, JMG_ENOMEM, "sygvd", "malloc",
                       "cannot allocate the LAPACK workspace (%d elements)",
                       lwork);
  } else {
    if (cplx)
      ((jmg_hegvd_fn)r->sygvd)(&itype, &jobz, &lower, &n, a, &n, b, &n, w,
                               work, &lwork, rwork, &lrwork, iwork, &liwork,
                               info);
    else
      ((jmg_sygvd_fn)r->sygvd)(&itype, &jobz, &lower, &n, a, &n, b, &n, w,
                               work, &lwork, iwork, &liwork, info);
    if (*info < 0)
      rc = jmg_error_set(err, JMG_ELAPACK, "sygvd", "LAPACK sygvd",
                         "argument %d was rejected", -*info);
  }
  free(work);
  free(rwork);
  free(iwork);
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
