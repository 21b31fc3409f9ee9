/* The LAPACK engine's table and the gather/scatter its routines share. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/lapack/lapack.h"
#include "layout/cyclic.h"

void jmg_lapack_move_columns(const jmg_dist_matrix *a, void *full, int to_full,
                             int contiguous) {
  const size_t col_bytes = (size_t)a->n * jmg_dtype_size(a->dtype);
  const int64_t cols = (int64_t)a->ndev * a->local_cols; /* n, if square */
  for (int64_t j = 0; j < cols; ++j) {
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

int jmg_lapack_lwork(double need, const char *op, const char *routine,
                     int *lwork, jmg_error *err) {
  if (!(need < (double)INT_MAX))
    return jmg_error_set(err, JMG_EINVAL, op, routine,
                         "its workspace (%g elements) exceeds LAPACK's 32-bit "
                         "int",
                         need);
  *lwork = (int)need + 1;
  return 0;
}

int jmg_lapack_int(int64_t n, const char *what, const char *op, int *out,
                   jmg_error *err) {
  if (n > INT_MAX)
    return jmg_error_set(err, JMG_EINVAL, op, "LAPACK",
                         "%s=%lld exceeds LAPACK's 32-bit int", what,
                         (long long)n);
  *out = (int)n;
  return 0;
}

int jmg_lapack_gather(const jmg_dist_matrix *a, const char *op, void **full,
                      jmg_error *err) {
  int n_int;
  int rc = jmg_lapack_int(a->n, "N", op, &n_int, err);
  if (rc != 0) return rc;
  size_t bytes = (size_t)a->n * (size_t)a->n * jmg_dtype_size(a->dtype);
  *full = malloc(bytes ? bytes : 1);
  if (*full == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate %zu bytes to gather the matrix",
                         bytes);
  jmg_lapack_move_columns(a, *full, 1, 0);
  return 0;
}

void jmg_lapack_fill_upper(void *full, int64_t n, jmg_dtype dtype) {
  const size_t esize = jmg_dtype_size(dtype);
  const int cplx = jmg_dtype_is_complex(dtype);
  char *base = full;
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < j; ++i) {
      char *up = base + ((size_t)j * (size_t)n + (size_t)i) * esize;
      memcpy(up, base + ((size_t)i * (size_t)n + (size_t)j) * esize, esize);
      if (!cplx) continue;
      if (dtype == JMG_C64) {
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
}

int jmg_lapack_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                        size_t why_len) {
  (void)e;
  const int64_t rows = jmg_problem_rows(p);
  if (rows <= INT_MAX && p->n <= INT_MAX) return 1;
  if (jmg_op_is_rectangular(p->op))
    snprintf(why, why_len,
             "%s of a %lld x %lld A: M and N must fit LAPACK's 32-bit int "
             "(at most %d)",
             jmg_op_name(p->op), (long long)rows, (long long)p->n, INT_MAX);
  else
    snprintf(why, why_len,
             "%s of N=%lld: N must fit LAPACK's 32-bit int "
             "(at most %d)",
             jmg_op_name(p->op), (long long)p->n, INT_MAX);
  return 0;
}

/* LAPACK's limit known before a call: A's sizes in an int (the routines
 * check them again, and their workspaces, which depend on more). */
const jmg_engine jmg_lapack_engine = {
    .name = "lapack",
    .model = JMG_MODEL_LEADER,
    .supports = jmg_lapack_supports,
    .workspace = jmg_lapack_workspace,
    .leader =
        {
            .potrs = jmg_lapack_potrs,
            .potri = jmg_lapack_potri,
            .syevd = jmg_lapack_syevd,
            .lu_solve = jmg_lapack_lu_solve,
            .gesvd = jmg_lapack_gesvd,
            .qr = jmg_lapack_qr,
            .sygvd = jmg_lapack_sygvd,
            .potrs_mixed = jmg_lapack_potrs_mixed,
            .lu_solve_mixed = jmg_lapack_lu_solve_mixed,
        },
};

int jmg_lapack_dc_work_alloc(jmg_lapack_dc_work *ws, jmg_dtype dtype,
                             const jmg_lapack_query *qwork,
                             const jmg_lapack_query *qrwork, int qiwork,
                             const char *op, jmg_error *err) {
  const int cplx = jmg_dtype_is_complex(dtype);
  const size_t rsize = jmg_dtype_real_size(dtype);
  memset(ws, 0, sizeof *ws);
  double lwork_d = rsize == 4 ? (double)qwork->f[0] : qwork->d[0];
  double lrwork_d = rsize == 4 ? (double)qrwork->f[0] : qrwork->d[0];
  ws->lwork = (int)lwork_d + 1;
  ws->lrwork = (int)lrwork_d + 1;
  ws->liwork = qiwork;
  ws->work = malloc((size_t)ws->lwork * jmg_dtype_size(dtype));
  ws->rwork = cplx ? malloc((size_t)ws->lrwork * rsize) : NULL;
  ws->iwork = malloc((size_t)(ws->liwork > 0 ? ws->liwork : 1) * sizeof(int));
  if (ws->work && ws->iwork && (!cplx || ws->rwork)) return 0;
  const int lwork = ws->lwork;
  jmg_lapack_dc_work_free(ws);
  return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate the LAPACK workspace (%d elements)",
                       lwork);
}

void jmg_lapack_dc_work_free(jmg_lapack_dc_work *ws) {
  free(ws->work);
  free(ws->rwork);
  free(ws->iwork);
  memset(ws, 0, sizeof *ws);
}
