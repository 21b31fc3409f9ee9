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
  const size_t esize = jmg_dtype_size(dtype);
  const size_t rsize = jmg_dtype_real_size(dtype);

  /* Workspace query: lwork = liwork = lrwork = -1. The sizes come back as
   * the first element of work (a float for s/c, a double for d/z). */
  union {
    float f[4];
    double d[2];
  } qwork = {{0}}, qrwork = {{0}};
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
  double lwork_d = rsize == 4 ? (double)qwork.f[0] : qwork.d[0];
  double lrwork_d = rsize == 4 ? (double)qrwork.f[0] : qrwork.d[0];
  int lwork = (int)lwork_d + 1, lrwork = (int)lrwork_d + 1, liwork = qiwork;
  void *work = malloc((size_t)lwork * esize);
  void *rwork = cplx ? malloc((size_t)lrwork * rsize) : NULL;
  int *iwork = malloc((size_t)(liwork > 0 ? liwork : 1) * sizeof(int));
  if (!work || !iwork || (cplx && !rwork)) {
    rc = jmg_error_set(err, JMG_ENOMEM, "syevd", "malloc",
                       "cannot allocate the LAPACK workspace (%d elements)",
                       lwork);
  } else {
    if (cplx)
      ((jmg_heevd_fn)r->syevd)(&jobz, &lower, &n, full, &n, w, work, &lwork,
                               rwork, &lrwork, iwork, &liwork, info);
    else
      ((jmg_syevd_fn)r->syevd)(&jobz, &lower, &n, full, &n, w, work, &lwork,
                               iwork, &liwork, info);
    if (*info < 0)
      rc = jmg_error_set(err, JMG_ELAPACK, "syevd", "LAPACK syevd",
                         "argument %d was rejected", -*info);
  }
  free(work);
  free(rwork);
  free(iwork);
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
