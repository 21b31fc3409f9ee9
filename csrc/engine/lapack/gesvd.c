/* gesvd on CPU devices: LAPACK's gesdd (divide and conquer, what
 * jnp.linalg.svd runs on CPU) on the gathered rectangular matrix; the
 * singular vectors scattered to their own distributed matrices
 * (engine/engine.h, the gesvd routine's contract). gesdd computes U and Vᴴ
 * together or neither: a call that wants one of them computes both and
 * scatters the one wanted. */
#include <limits.h>
#include <stdlib.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"

/* Whether a distributed output has the shape the contract gives it. */
static int shaped(const jmg_dist_matrix *x, int64_t rows, int64_t cols) {
  return x == NULL || (x->n == rows && (int64_t)x->ndev * x->local_cols == cols);
}

int jmg_lapack_gesvd(const jmg_engine *e, const jmg_dist_matrix *a, void *s,
                     const jmg_dist_matrix *u, const jmg_dist_matrix *vt,
                     int full, int *info, jmg_error *err) {
  (void)e;
  const char *op = "gesvd";
  const jmg_lapack_routines *r = jmg_lapack_routines_for(a->dtype);
  int rc = jmg_lapack_require(r->gesdd, a->dtype, "gesdd", op, err);
  if (rc != 0) return rc;
  const int64_t rows = a->n, cols = (int64_t)a->ndev * a->local_cols;
  const int64_t k64 = rows < cols ? rows : cols;
  const int64_t ucols = full ? rows : k64, vrows = full ? cols : k64;
  if (rows > INT_MAX || cols > INT_MAX)
    return jmg_error_set(err, JMG_EINVAL, op, "LAPACK",
                         "a %lld x %lld matrix exceeds LAPACK's 32-bit int",
                         (long long)rows, (long long)cols);
  if (!shaped(u, rows, ucols) || !shaped(vt, vrows, cols))
    return jmg_error_set(err, JMG_EINTERNAL, op, "LAPACK",
                         "the outputs' shapes do not fit a %lld x %lld "
                         "matrix (full_matrices=%d)",
                         (long long)rows, (long long)cols, full);
  int m = (int)rows, n = (int)cols, k = (int)k64;
  const int vectors = u != NULL || vt != NULL;
  char jobz = !vectors ? 'N' : full ? 'A' : 'S';
  int ldu = vectors ? m : 1, ldvt = vectors ? (int)vrows : 1;
  const int cplx = jmg_dtype_is_complex(a->dtype);
  const size_t esize = jmg_dtype_size(a->dtype);
  const size_t rsize = jmg_dtype_real_size(a->dtype);
  const size_t kk = (size_t)(k > 0 ? k : 1), big = (size_t)(m > n ? m : n);
  /* LAPACK 3.7's rwork: 7 min(m,n) without vectors, else min(m,n) *
   * max(5 min(m,n) + 7, 2 max(m,n) + 2 min(m,n) + 1). */
  size_t lrwork = 7 * kk;
  if (vectors) {
    size_t x = 5 * kk + 7, y = 2 * big + 2 * kk + 1;
    lrwork = kk * (x > y ? x : y);
  }
  void *full_a = malloc((size_t)m * (size_t)n * esize);
  void *ubuf = vectors ? malloc((size_t)m * (size_t)ucols * esize) : NULL;
  void *vbuf = vectors ? malloc((size_t)vrows * (size_t)n * esize) : NULL;
  int *iwork = malloc(8 * kk * sizeof *iwork);
  void *rwork = cplx ? malloc(lrwork * rsize) : NULL;
  void *work = NULL;
  /* Placeholders where LAPACK references U and Vᴴ without vectors. */
  unsigned char none_u[16], none_vt[16];
  void *up = vectors ? ubuf : (void *)none_u, *vp = vectors ? vbuf : (void *)none_vt;
  if (!full_a || !iwork || (vectors && (!ubuf || !vbuf)) || (cplx && !rwork)) {
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate a %d x %d matrix and its SVD", m, n);
    goto done;
  }
  jmg_lapack_move_columns(a, full_a, 1, 1);
  /* Workspace query: lwork = -1; the size comes back in work[0] (a float
   * for s/c, a double for d/z). */
  union {
    float f[4];
    double d[2];
  } qwork = {{0}};
  int lwork = -1;
  *info = 0;
  if (cplx)
    ((jmg_cgesdd_fn)r->gesdd)(&jobz, &m, &n, full_a, &m, s, up, &ldu, vp,
                              &ldvt, &qwork, &lwork, rwork, iwork, info);
  else
    ((jmg_gesdd_fn)r->gesdd)(&jobz, &m, &n, full_a, &m, s, up, &ldu, vp, &ldvt,
                             &qwork, &lwork, iwork, info);
  if (*info != 0) {
    rc = jmg_error_set(err, JMG_ELAPACK, op, "LAPACK gesdd",
                       "workspace query failed with info=%d", *info);
    goto done;
  }
  const double lwork_d = rsize == 4 ? (double)qwork.f[0] : qwork.d[0];
  if (!(lwork_d < (double)INT_MAX)) {
    rc = jmg_error_set(err, JMG_EINVAL, op, "LAPACK gesdd",
                       "its workspace (%g elements) exceeds LAPACK's 32-bit "
                       "int", lwork_d);
    goto done;
  }
  lwork = (int)lwork_d + 1;
  work = malloc((size_t)lwork * esize);
  if (work == NULL) {
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate the LAPACK workspace (%d elements)",
                       lwork);
    goto done;
  }
  if (cplx)
    ((jmg_cgesdd_fn)r->gesdd)(&jobz, &m, &n, full_a, &m, s, up, &ldu, vp,
                              &ldvt, work, &lwork, rwork, iwork, info);
  else
    ((jmg_gesdd_fn)r->gesdd)(&jobz, &m, &n, full_a, &m, s, up, &ldu, vp, &ldvt,
                             work, &lwork, iwork, info);
  /* gesdd's info -4 (LAPACK >= 3.10) says A has a NaN entry: no argument
   * of ours was wrong, the matrix cannot be decomposed. Such an A does not
   * get here (exec/finite.h answers it with status -1 before any engine);
   * should gesdd say so anyway, it is data (the ops layer fills the outputs
   * with NaN), not an error. */
  if (*info < 0 && *info != -4) {
    rc = jmg_error_set(err, JMG_ELAPACK, op, "LAPACK gesdd",
                       "argument %d was rejected", -*info);
  } else if (*info == 0) {
    if (u != NULL) jmg_lapack_move_columns(u, ubuf, 0, 1);
    if (vt != NULL) jmg_lapack_move_columns(vt, vbuf, 0, 1);
  }
done:
  free(work);
  free(rwork);
  free(iwork);
  free(vbuf);
  free(ubuf);
  free(full_a);
  return rc;
}
