/* potrs and lu_solve in mixed precision on lapack-local (engine.h's local
 * potrs_mixed and lu_solve_mixed): the exact routines' steps (local.h),
 * with the LAPACK engine's mixed routine on rank 0's gathered matrix in
 * place of the exact one (engine/lapack/mixed.h: the float32 / complex64
 * factor, the refinement of engine/refine.h with the residual against the
 * gathered A, where this engine holds the whole matrix, and the exact
 * fallback on it), X broadcast to every rank. Memory on rank 0 beside the
 * exact routine's two gathered copies: mixed.h's (the lower-precision copy
 * and the refinement's vectors). */
#include "engine/lapack/mixed.h"

#include "engine/lapack/lapack.h"
#include "engine/lapack_local/local.h"

/* Both ops: lu chooses lu_solve (with transpose). */
static int ll_mixed(const jmg_local_matrix *a, void *b, int64_t nrhs, int lu,
                    int transpose, int *info, jmg_error *err) {
  ll_call c;
  int f = 0;
  int rc = ll_begin(&c, lu ? "lu_solve" : "potrs", a, err);
  if (rc == 0) rc = ll_gather(&c, err);
  if (rc == 0) {
    int lrc = 0;
    if (a->rank == 0 && lu)
      lrc = jmg_lapack_lu_solve_mixed_full(a->dtype, a->n, c.full, b, nrhs,
                                           transpose, &f, NULL, err);
    else if (a->rank == 0)
      lrc = jmg_lapack_potrs_mixed_full(a->dtype, a->n, c.full, b, nrhs, &f,
                                        NULL, err);
    rc = ll_outcome(&c, lrc, &f, err);
  }
  /* f > 0: the exact fallback's info (not positive definite, or U(f, f)
   * exactly zero); X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    void *const bufs[1] = {b};
    const size_t bytes[1] = {(size_t)a->n * (size_t)nrhs * c.elem};
    rc = ll_bcast(&c, bufs, bytes, 1, err);
  }
  if (rc == 0) *info = f;
  ll_end(&c);
  return rc;
}

int jmg_ll_potrs_mixed(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                       int64_t nrhs, int *info, jmg_error *err) {
  (void)e;
  return ll_mixed(a, b, nrhs, 0, 0, info, err);
}

int jmg_ll_lu_solve_mixed(const jmg_engine *e, const jmg_local_matrix *a,
                          void *b, int64_t nrhs, int transpose, int *info,
                          jmg_error *err) {
  (void)e;
  return ll_mixed(a, b, nrhs, 1, transpose, info, err);
}

int jmg_ll_workspace(const jmg_engine *e, const jmg_problem *p,
                     const jmg_workspace_query *q, size_t *bytes,
                     jmg_error *err) {
  /* The LAPACK engine's (the gathered A, the pivots, the mixed routine's
   * buffers), plus rank 0's packed parts: a second N x N. */
  int rc = jmg_lapack_workspace(e, p, q, bytes, err);
  if (rc == 0)
    *bytes += (size_t)p->n * (size_t)p->n * jmg_dtype_size(p->dtype);
  return rc;
}
