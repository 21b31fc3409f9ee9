/* qr on CPU devices: LAPACK's geqrf and orgqr (ungqr for complex dtypes),
 * what jnp.linalg.qr runs on CPU, on the gathered matrix. The engine is
 * given Aᵀ (engine.h, the qr routine): it gathers it, transposes it into A
 * (m x n, column-major), factors, and writes Qᵀ and Rᵀ back into the
 * contiguous shards. jmg_lapack_qr_full, the work on the gathered Aᵀ, is
 * lapack-local's too. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"

/* dst (cols x rows, ld cols) = the plain transpose of src (rows x cols, ld
 * rows), elements of esize bytes. */
static void transpose(const void *src, int64_t rows, int64_t cols, void *dst,
                      size_t esize) {
  const char *s = src;
  char *d = dst;
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i)
      memcpy(d + ((size_t)i * (size_t)cols + (size_t)j) * esize,
             s + ((size_t)j * (size_t)rows + (size_t)i) * esize, esize);
}

/* The size LAPACK's workspace query left in work[0] (a float for s/c, a
 * double for d/z). */
static double queried(const void *work, size_t rsize) {
  float f;
  double d;
  if (rsize == 4) {
    memcpy(&f, work, sizeof f);
    return (double)f;
  }
  memcpy(&d, work, sizeof d);
  return d;
}

/* One workspace for geqrf and orgqr on the m x n A in full: the larger of
 * their queries, in elements, within LAPACK's int. */
static int qr_lwork(const jmg_lapack_routines *r, int m, int n, void *full,
                    void *tau, size_t rsize, int *lwork, int *info,
                    jmg_error *err) {
  unsigned char qwork[16] = {0};
  int lda = m, k = n;
  *lwork = -1;
  *info = 0;
  r->geqrf(&m, &n, full, &lda, tau, qwork, lwork, info);
  double need = queried(qwork, rsize);
  if (*info == 0) {
    memset(qwork, 0, sizeof qwork);
    r->orgqr(&m, &n, &k, full, &lda, tau, qwork, lwork, info);
    const double need2 = queried(qwork, rsize);
    if (need2 > need) need = need2;
  }
  if (*info != 0)
    return jmg_error_set(err, JMG_ELAPACK, "qr", "LAPACK geqrf/orgqr",
                         "workspace query failed with info=%d", *info);
  return jmg_lapack_lwork(need, "qr", "LAPACK geqrf", lwork, err);
}

/* Rᵀ (n x rcols, ld n) from geqrf's factors in full (m x n): column i is
 * R's row i, R(i, j) for j >= i; the rest zero. */
static void r_transposed(const void *full, int m, int n, void *rt,
                         int64_t rcols, size_t esize) {
  memset(rt, 0, (size_t)n * (size_t)rcols * esize);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i <= j; ++i)
      memcpy((char *)rt + ((size_t)i * (size_t)n + (size_t)j) * esize,
             (const char *)full + ((size_t)j * (size_t)m + (size_t)i) * esize,
             esize);
}

int jmg_lapack_qr_full(jmg_dtype dtype, int64_t m64, int64_t n64, void *mt,
                       void *rt, int64_t rcols, int *info, jmg_error *err) {
  const char *op = "qr";
  const jmg_lapack_routines *r = jmg_lapack_routines_for(dtype);
  int rc = jmg_lapack_require((const void *)r->geqrf, dtype, "geqrf", op, err);
  if (rc == 0)
    rc = jmg_lapack_require((const void *)r->orgqr, dtype, "orgqr", op, err);
  if (rc != 0) return rc;
  if (m64 < n64 || rcols < n64)
    return jmg_error_set(err, JMG_EINTERNAL, op, "LAPACK",
                         "shapes do not fit a %lld x %lld A (M >= N) and its "
                         "R (%lld x %lld)",
                         (long long)m64, (long long)n64, (long long)n64,
                         (long long)rcols);
  int m, n;
  rc = jmg_lapack_int(m64, "M", op, &m, err);
  if (rc == 0) rc = jmg_lapack_int(n64, "N", op, &n, err);
  if (rc != 0) return rc;
  const size_t esize = jmg_dtype_size(dtype);
  const size_t rsize = jmg_dtype_real_size(dtype);
  const size_t mn = (size_t)m * (size_t)n;
  void *full = malloc(mn ? mn * esize : 1); /* A, then the factors, then Q */
  void *tau = malloc((size_t)(n > 0 ? n : 1) * esize);
  void *work = NULL;
  if (!full || !tau) {
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate a %d x %d matrix and its QR", m, n);
    goto done;
  }
  transpose(mt, n, m, full, esize); /* n x m -> m x n */
  int lwork = 0, lda = m, k = n;
  rc = qr_lwork(r, m, n, full, tau, rsize, &lwork, info, err);
  if (rc != 0) goto done;
  work = malloc((size_t)lwork * esize);
  if (work == NULL) {
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate the LAPACK workspace (%d elements)",
                       lwork);
    goto done;
  }
  r->geqrf(&m, &n, full, &lda, tau, work, &lwork, info);
  if (*info != 0) {
    rc = jmg_error_set(err, JMG_ELAPACK, op, "LAPACK geqrf",
                       "argument %d was rejected", -*info);
    goto done;
  }
  r_transposed(full, m, n, rt, rcols, esize);
  r->orgqr(&m, &n, &k, full, &lda, tau, work, &lwork, info);
  if (*info != 0) {
    rc = jmg_error_set(err, JMG_ELAPACK, op, "LAPACK orgqr",
                       "argument %d was rejected", -*info);
    goto done;
  }
  transpose(full, m, n, mt, esize); /* Q (m x n) -> Qᵀ (n x m) */
done:
  free(work);
  free(tau);
  free(full);
  return rc;
}

int jmg_lapack_qr(const jmg_engine *e, const jmg_dist_matrix *a,
                  const jmg_dist_matrix *rt, int *info, jmg_error *err) {
  (void)e;
  const char *op = "qr";
  const int64_t n = a->n, m = (int64_t)a->ndev * a->local_cols;
  const int64_t rcols = (int64_t)rt->ndev * rt->local_cols;
  if (rt->n != n)
    return jmg_error_set(err, JMG_EINTERNAL, op, "LAPACK",
                         "R has %lld rows for an A of %lld columns",
                         (long long)rt->n, (long long)n);
  const size_t esize = jmg_dtype_size(a->dtype);
  void *mt = malloc(m * n > 0 ? (size_t)m * (size_t)n * esize : 1);
  void *rbuf = malloc((size_t)n * (size_t)(rcols > 0 ? rcols : 1) * esize);
  int rc = 0;
  if (!mt || !rbuf)
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate a %lld x %lld matrix to gather",
                       (long long)m, (long long)n);
  if (rc == 0) {
    jmg_lapack_move_columns(a, mt, 1, 1);
    rc = jmg_lapack_qr_full(a->dtype, m, n, mt, rbuf, rcols, info, err);
  }
  if (rc == 0 && *info == 0) {
    jmg_lapack_move_columns(a, mt, 0, 1);
    jmg_lapack_move_columns(rt, rbuf, 0, 1);
  }
  free(rbuf);
  free(mt);
  return rc;
}
