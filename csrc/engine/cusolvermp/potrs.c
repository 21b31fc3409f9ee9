/* potrs on cuSOLVERMp: every rank factors its part of A (lower triangle,
 * cusolverMpPotrf) and solves the right-hand sides in chunks of up to T_A
 * columns (B on grid column 0, mp.h, jmg_mp_rhs),
 * then every rank receives X. With a diag to fill, the
 * factor's diagonal is gathered before the solve (jmg_mp_diag), and its real
 * parts kept.
 * The factorization is cholesky.c's, which potri shares. */
#include <string.h>

#include "common/trace.h"
#include "engine/cusolvermp/mp.h"

/* The real parts of the factor's diagonal, from all of it (jmg_mp_diag, into
 * d_diag on the device and full on the host). */
static int factor_diag(jmg_mp_call *c, void *d_diag, void *full, void *diag,
                       jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  int rc = jmg_mp_diag(c, a->data, d_diag, full, err);
  const int single = jmg_dtype_real_size(a->dtype) == 4;
  const size_t step = jmg_dtype_is_complex(a->dtype) ? 2 : 1;
  for (int64_t i = 0; rc == 0 && i < a->n; ++i) {
    if (single)
      ((float *)diag)[i] = ((const float *)full)[(size_t)i * step];
    else
      ((double *)diag)[i] = ((const double *)full)[(size_t)i * step];
  }
  return rc;
}

/* cusolverMpPotrs on one chunk (jmg_mp_rhs_solve); ctx: A's descriptor. */
static cusolverStatus_t solve_chunk(jmg_mp_call *c, void *col, int64_t ncols,
                                    jmg_mp_desc_t col_desc, int *d_info,
                                    void *ctx) {
  const jmg_local_matrix *a = c->a;
  return c->api->potrs(c->handle, CUBLAS_FILL_MODE_LOWER, a->n, ncols, a->data,
                       1, 1, (jmg_mp_desc_t)ctx, col, 1, 1, col_desc, c->type,
                       c->d_work, c->d_bytes, c->cuda.host_work, c->h_bytes,
                       d_info);
}

int jmg_mp_potrs(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  jmg_mp_call c;
  jmg_mp_rhs r;
  memset(&r, 0, sizeof r);
  void *d_diag = NULL, *h_diag = NULL;
  jmg_mp_desc_t da = NULL;
  int rc = jmg_mp_begin(&c, JMG_OP_POTRS, a, err);
  if (rc == 0) rc = jmg_mp_rhs_take(&c, b, nrhs, &r, err);
  if (rc == 0 && diag != NULL) rc = jmg_mp_diag_take(&c, &d_diag, &h_diag, err);
  rc = jmg_mp_agree(&c, rc, err);
  rc = jmg_mp_cholesky_workspace(&c, rc, &r, b, &da, err);
  int f = 0;
  if (rc == 0) rc = jmg_mp_potrf(&c, rc, a->data, da, &f, err);
  jmg_trace_mark("potrf");
  /* f > 0: not positive definite; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    if (diag != NULL) rc = factor_diag(&c, d_diag, h_diag, diag, err);
    if (rc == 0)
      rc = jmg_mp_rhs_solve(&c, b, &r, "cusolverMpPotrs", solve_chunk, da, err);
    jmg_trace_mark("potrs");
  }
  if (rc == 0) *info = f;
  return jmg_mp_end(&c, rc, err);
}
