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

/* One gesdd call's arguments but the workspace. */
typedef struct gesdd_args {
  const jmg_lapack_routines *r;
  int cplx;
  char jobz;
  int m, n, ldu, ldvt;
  void *a, *s, *u, *vt, *rwork;
  int *iwork;
} gesdd_args;

/* gesdd (the complex one takes rwork); lwork -1 asks its workspace. */
static void gesdd(gesdd_args *g, void *work, int *lwork, int *info) {
  if (g->cplx)
    ((jmg_cgesdd_fn)g->r->gesdd)(&g->jobz, &g->m, &g->n, g->a, &g->m, g->s,
                                 g->u, &g->ldu, g->vt, &g->ldvt, work, lwork,
                                 g->rwork, g->iwork, info);
  else
    ((jmg_gesdd_fn)g->r->gesdd)(&g->jobz, &g->m, &g->n, g->a, &g->m, g->s, g->u,
                                &g->ldu, g->vt, &g->ldvt, work, lwork, g->iwork,
                                info);
}

/* gesdd's workspace in elements (lwork = -1; the size comes back in
 * work[0], a float for s/c, a double for d/z), within LAPACK's int. */
static int gesdd_lwork(gesdd_args *g, size_t rsize, int *lwork,
                       jmg_error *err) {
  union {
    float f[4];
    double d[2];
  } qwork = {{0}};
  int info = 0;
  *lwork = -1;
  gesdd(g, &qwork, lwork, &info);
  if (info != 0)
    return jmg_error_set(err, JMG_ELAPACK, "gesvd", "LAPACK gesdd",
                         "workspace query failed with info=%d", info);
  const double need = rsize == 4 ? (double)qwork.f[0] : qwork.d[0];
  return jmg_lapack_lwork(need, "gesvd", "LAPACK gesdd", lwork, err);
}

/* LAPACK 3.7's rwork: 7 min(m,n) without vectors, else min(m,n) *
 * max(5 min(m,n) + 7, 2 max(m,n) + 2 min(m,n) + 1). */
static size_t gesdd_lrwork(size_t kk, size_t big, int vectors) {
  if (!vectors) return 7 * kk;
  const size_t x = 5 * kk + 7, y = 2 * big + 2 * kk + 1;
  return kk * (x > y ? x : y);
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
  const int m = (int)rows, n = (int)cols, k = (int)k64;
  const int vectors = u != NULL || vt != NULL;
  const size_t esize = jmg_dtype_size(a->dtype);
  const size_t rsize = jmg_dtype_real_size(a->dtype);
  const size_t kk = (size_t)(k > 0 ? k : 1), big = (size_t)(m > n ? m : n);
  /* Placeholders where LAPACK references U and Vᴴ without vectors. */
  unsigned char none_u[16], none_vt[16];
  gesdd_args g = {
      .r = r,
      .cplx = jmg_dtype_is_complex(a->dtype),
      .jobz = !vectors ? 'N'
              : full   ? 'A'
                       : 'S',
      .m = m,
      .n = n,
      .ldu = vectors ? m : 1,
      .ldvt = vectors ? (int)vrows : 1,
      .a = malloc((size_t)m * (size_t)n * esize),
      .s = s,
      .u = vectors ? malloc((size_t)m * (size_t)ucols * esize) : (void *)none_u,
      .vt =
          vectors ? malloc((size_t)vrows * (size_t)n * esize) : (void *)none_vt,
      .iwork = malloc(8 * kk * sizeof(int))};
  if (g.cplx) g.rwork = malloc(gesdd_lrwork(kk, big, vectors) * rsize);
  void *work = NULL;
  int lwork = 0;
  if (!g.a || !g.iwork || !g.u || !g.vt || (g.cplx && !g.rwork)) {
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate a %d x %d matrix and its SVD", m, n);
    goto done;
  }
  jmg_lapack_move_columns(a, g.a, 1, 1);
  *info = 0;
  rc = gesdd_lwork(&g, rsize, &lwork, err);
  if (rc == 0 && (work = malloc((size_t)lwork * esize)) == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate the LAPACK workspace (%d elements)",
                       lwork);
  if (rc != 0) goto done;
  gesdd(&g, work, &lwork, info);
  /* gesdd's info -4 (LAPACK >= 3.10) says A has a NaN entry: no argument
   * of ours was wrong, the matrix cannot be decomposed. Such an A does not
   * get here (exec/finite.h answers it with status -1 before any engine);
   * should gesdd say so anyway, it is data (the ops layer fills the outputs
   * with NaN), not an error. */
  if (*info < 0 && *info != -4) {
    rc = jmg_error_set(err, JMG_ELAPACK, op, "LAPACK gesdd",
                       "argument %d was rejected", -*info);
  } else if (*info == 0) {
    if (u != NULL) jmg_lapack_move_columns(u, g.u, 0, 1);
    if (vt != NULL) jmg_lapack_move_columns(vt, g.vt, 0, 1);
  }
done:
  free(work);
  free(g.rwork);
  free(g.iwork);
  if (vectors) free(g.vt), free(g.u);
  free(g.a);
  return rc;
}
