/* The CPU engine: LAPACK on a matrix gathered from the block-cyclic layout.
 *
 * CPU devices share host memory, so the engine gathers the distributed columns
 * into one column-major matrix, runs LAPACK, and scatters the result back into
 * the block-cyclic layout. The gather is the CPU stand-in for what
 * cuSOLVERMg does across GPUs; what matters is that the ops, the layout and
 * the rendezvous above it run exactly as they do on GPUs. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/lapack_table.h"
#include "layout/cyclic.h"

/* ---- memory ---------------------------------------------------------------*/

static int cpu_copy(const jmg_engine *e, const jmg_dist_matrix *m, void *dst,
                    int dst_dev, const void *src, int src_dev, size_t bytes,
                    jmg_error *err) {
  (void)e, (void)m, (void)dst_dev, (void)src_dev, (void)err;
  if (bytes != 0 && dst != src) memmove(dst, src, bytes);
  return 0;
}

/* CPU copies are synchronous memmoves: lanes need no state, and running them
 * one after the other is a valid order. */
static int cpu_lanes_open(const jmg_engine *e, const jmg_dist_matrix *m,
                          int nlanes, void **lanes, jmg_error *err) {
  (void)e, (void)m, (void)nlanes, (void)err;
  *lanes = NULL;
  return 0;
}

static int cpu_lane_copy(const jmg_engine *e, const jmg_dist_matrix *m,
                         void *lanes, int lane, void *dst, int dst_dev,
                         const void *src, int src_dev, size_t bytes,
                         jmg_error *err) {
  (void)lanes, (void)lane;
  return cpu_copy(e, m, dst, dst_dev, src, src_dev, bytes, err);
}

static int cpu_lanes_close(const jmg_engine *e, const jmg_dist_matrix *m,
                           void *lanes, jmg_error *err) {
  (void)e, (void)m, (void)lanes, (void)err;
  return 0;
}

static int cpu_alloc(const jmg_engine *e, const jmg_dist_matrix *m, int dev,
                     size_t bytes, void **out, jmg_error *err) {
  (void)e, (void)m;
  *out = malloc(bytes ? bytes : 1);
  if (*out == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                         "cannot allocate %zu bytes for device %d", bytes, dev);
  return 0;
}

static void cpu_release(const jmg_engine *e, const jmg_dist_matrix *m, int dev,
                        void *ptr, size_t bytes) {
  (void)e, (void)m, (void)dev, (void)bytes;
  free(ptr);
}

static int cpu_fill_nan(const jmg_engine *e, const jmg_dist_matrix *m, int dev,
                        void *ptr, size_t count, jmg_dtype dtype,
                        jmg_error *err) {
  (void)e, (void)m, (void)dev, (void)err;
  size_t reals = count * (jmg_dtype_is_complex(dtype) ? 2 : 1);
  if (jmg_dtype_real_size(dtype) == 4) {
    float *p = ptr;
    for (size_t i = 0; i < reals; ++i) p[i] = NAN;
  } else {
    double *p = ptr;
    for (size_t i = 0; i < reals; ++i) p[i] = (double)NAN;
  }
  return 0;
}

static int cpu_sync(const jmg_engine *e, const jmg_dist_matrix *m,
                    jmg_error *err) {
  (void)e, (void)m, (void)err;
  return 0;
}

/* ---- gather / scatter -----------------------------------------------------*/

/* Copies between the distributed columns and a full column-major matrix;
 * the distributed ones are block-cyclic, or contiguous if `contiguous`. */
static void move_columns(const jmg_dist_matrix *a, void *full, int to_full,
                         int contiguous) {
  const size_t col_bytes = (size_t)a->n * jmg_dtype_size(a->dtype);
  for (int64_t j = 0; j < a->n; ++j) {
    int dev = (int)(j / a->local_cols);
    int64_t lc = j % a->local_cols;
    if (!contiguous) jmg_cyclic_locate(j, a->ndev, a->tile, &dev, &lc);
    char *dist = (char *)a->data[dev] + (size_t)lc * col_bytes;
    char *whole = (char *)full + (size_t)j * col_bytes;
    if (to_full)
      memcpy(whole, dist, col_bytes);
    else
      memcpy(dist, whole, col_bytes);
  }
}

static int gather(const jmg_dist_matrix *a, const char *op, void **full,
                  int *n_int, jmg_error *err) {
  if (a->n > INT_MAX)
    return jmg_error_set(err, JMG_EINVAL, op, "LAPACK",
                         "N=%lld exceeds LAPACK's 32-bit int", (long long)a->n);
  *n_int = (int)a->n;
  size_t bytes = (size_t)a->n * (size_t)a->n * jmg_dtype_size(a->dtype);
  *full = malloc(bytes ? bytes : 1);
  if (*full == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate %zu bytes to gather the matrix",
                         bytes);
  move_columns(a, *full, 1, 0);
  return 0;
}

/* The element (i, j) of a matrix in the contiguous layout. */
static char *element(const jmg_dist_matrix *a, int64_t i, int64_t j) {
  const size_t esize = jmg_dtype_size(a->dtype);
  const int dev = (int)(j / a->local_cols);
  const int64_t lc = j % a->local_cols;
  return (char *)a->data[dev] + ((size_t)lc * (size_t)a->n + (size_t)i) * esize;
}

static int cpu_fill_upper(const jmg_engine *e, const jmg_dist_matrix *a,
                          jmg_error *err) {
  (void)e, (void)err;
  const size_t esize = jmg_dtype_size(a->dtype);
  const int cplx = jmg_dtype_is_complex(a->dtype);
  for (int64_t j = 0; j < a->n; ++j) {
    for (int64_t i = 0; i < j; ++i) {
      char *up = element(a, i, j);
      memcpy(up, element(a, j, i), esize);
      if (!cplx) continue;
      if (a->dtype == JMG_C64) {
        float im;
        memcpy(&im, up + 4, 4);
        im = -im;
        memcpy(up + 4, &im, 4);
      } else {
        double im;
        memcpy(&im, up + 8, 8);
        im = -im;
        memcpy(up + 8, &im, 8);
      }
    }
  }
  return 0;
}

/* ---- solvers
 * ---------------------------------------------------------------*/

static int lapack_potrs(const jmg_engine *e, const jmg_dist_matrix *a,
                        void *const *bs, int64_t nrhs, int *info,
                        jmg_error *err) {
  void *b = bs[0];
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
  if ((rc = gather(a, "potrs", &full, &n, err)) != 0) return rc;
  char lower = 'L';
  int k = (int)nrhs;
  *info = 0;
  r->potrf(&lower, &n, full, &n, info);
  if (*info == 0 && k > 0) r->potrs(&lower, &n, &k, full, &n, b, &n, info);
  if (*info < 0)
    rc = jmg_error_set(err, JMG_ELAPACK, "potrs", "LAPACK potrf/potrs",
                       "argument %d was rejected", -*info);
  /* A holds its factor now; the ops layer never returns it, so no scatter. */
  free(full);
  return rc;
}

static int lapack_potri(const jmg_engine *e, const jmg_dist_matrix *a,
                        int *info, jmg_error *err) {
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
  if ((rc = gather(a, "potri", &full, &n, err)) != 0) return rc;
  char lower = 'L';
  *info = 0;
  r->potrf(&lower, &n, full, &n, info);
  if (*info == 0) r->potri(&lower, &n, full, &n, info);
  if (*info < 0) {
    rc = jmg_error_set(err, JMG_ELAPACK, "potri", "LAPACK potrf/potri",
                       "argument %d was rejected", -*info);
  } else if (*info == 0) {
    move_columns(a, full, 0, 1);
  }
  free(full);
  return rc;
}

static int lapack_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                        int want_vectors, int *info, jmg_error *err) {
  (void)e;
  const jmg_lapack_routines *r = jmg_lapack_routines_for(a->dtype);
  int rc = jmg_lapack_require(r->syevd, a->dtype, "syevd", "syevd", err);
  if (rc != 0) return rc;
  void *full;
  int n;
  if ((rc = gather(a, "syevd", &full, &n, err)) != 0) return rc;
  char jobz = want_vectors ? 'V' : 'N', lower = 'L';
  const int cplx = jmg_dtype_is_complex(a->dtype);
  const size_t esize = jmg_dtype_size(a->dtype);
  const size_t rsize = jmg_dtype_real_size(a->dtype);

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
  if (*info != 0) {
    free(full);
    return jmg_error_set(err, JMG_ELAPACK, "syevd", "LAPACK syevd",
                         "workspace query failed with info=%d", *info);
  }
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
    else if (*info == 0 && want_vectors)
      move_columns(a, full, 0, 0);
  }
  free(work);
  free(rwork);
  free(iwork);
  free(full);
  return rc;
}

static const jmg_engine g_lapack_engine = {
    .name = "lapack",
    .copy = cpu_copy,
    .lanes_open = cpu_lanes_open,
    .lane_copy = cpu_lane_copy,
    .lanes_close = cpu_lanes_close,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .fill_nan = cpu_fill_nan,
    .sync = cpu_sync,
    .potrs = lapack_potrs,
    .potri = lapack_potri,
    .fill_upper = cpu_fill_upper,
    .syevd = lapack_syevd,
};

const jmg_engine *jmg_lapack_engine(void) { return &g_lapack_engine; }
