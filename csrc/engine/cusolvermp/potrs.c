/* potrs on cuSOLVERMp: every rank factors its part of A (lower triangle,
 * cusolverMpPotrf) and solves the right-hand sides in chunks of up to T_A
 * columns (B on grid column 0, mp.h, mp_rhs),
 * then every rank receives X. With a diag to fill, the
 * factor's diagonal is gathered before the solve (mp_diag), and its real
 * parts kept.
 *
 * One rank holding the whole matrix runs the cuSOLVERDn engine's potrs
 * instead (mp.h, mp_one_gpu_view, says why). */
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "engine/cusolvermp/mp.h"

/* The real parts of the factor's diagonal, from all of it (mp_diag, into
 * d_diag on the device and full on the host). */
static int factor_diag(mp_call *c, void *d_diag, void *full, void *diag,
                       jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  int rc = mp_diag(c, a->data, d_diag, full, err);
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

/* cusolverMpPotrs on one chunk (mp_rhs_solve); ctx: A's descriptor. */
static cusolverStatus_t solve_chunk(mp_call *c, void *col, int64_t ncols,
                                    jmg_mp_desc_t col_desc, int *d_info,
                                    void *ctx) {
  const jmg_local_matrix *a = c->a;
  return c->api->potrs(c->handle, CUBLAS_FILL_MODE_LOWER, a->n, ncols,
                       a->data, 1, 1, (jmg_mp_desc_t)ctx, col, 1, 1, col_desc,
                       c->type, c->d_work, c->d_bytes, c->h_work, c->h_bytes,
                       d_info);
}

int jmg_mp_potrs(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  mp_one_gpu one;
  if (mp_one_gpu_view(a, &one))
    return jmg_cusolverdn_engine.leader.potrs(&jmg_cusolverdn_engine,
                                              &one.view, b, nrhs, diag, info,
                                              err);
  mp_call c;
  mp_rhs r;
  memset(&r, 0, sizeof r);
  int *d_info = NULL;
  void *d_diag = NULL, *h_diag = NULL;
  int rc = mp_begin(&c, "potrs", a, err);
  if (rc == 0) rc = mp_take(&c, sizeof(int), (void **)&d_info, err);
  if (rc == 0) rc = mp_rhs_take(&c, b, nrhs, &r, err);
  if (rc == 0 && diag != NULL) rc = mp_diag_take(&c, &d_diag, &h_diag, err);
  rc = mp_agree(&c, rc, err);

  const jmg_mp_api *api = c.api;
  jmg_mp_desc_t da = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
    rc = mp_grid(&c, err);
    if (rc == 0) rc = mp_desc_a(&c, &da, err);
    if (rc == 0) rc = mp_rhs_desc(&c, &r, err);
    if (rc == 0)
      rc = mp_check(api->potrf_buffer_size(c.handle, CUBLAS_FILL_MODE_LOWER,
                                           a->n, a->data, 1, 1, da, c.type,
                                           &d1, &h1),
                    &c, "cusolverMpPotrf_bufferSize", err);
    if (rc == 0)
      rc = mp_check(api->potrs_buffer_size(c.handle, CUBLAS_FILL_MODE_LOWER,
                                           a->n, r.width, a->data, 1, 1, da,
                                           mp_rhs_col(&c, &r, b, 0), 1, 1,
                                           r.desc, c.type, &d2, &h2),
                    &c, "cusolverMpPotrs_bufferSize", err);
    if (rc == 0)
      rc = mp_take_work(&c, d1 > d2 ? d1 : d2, h1 > h2 ? h1 : h2, err);
    rc = mp_agree(&c, rc, err);
    jmg_trace_mark("engine start");
  }

  int f = 0;
  if (rc == 0) {
    rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                      c.op, err);
    cusolverStatus_t st = CUSOLVER_STATUS_SUCCESS;
    if (rc == 0)
      st = api->potrf(c.handle, CUBLAS_FILL_MODE_LOWER, a->n, a->data, 1, 1, da,
                      c.type, c.d_work, c.d_bytes, c.h_work, c.h_bytes, d_info);
    rc = mp_agree_factor(&c, rc, st, d_info, "cusolverMpPotrf", &f, err);
    jmg_trace_mark("potrf");
  }
  /* f > 0: not positive definite; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    if (diag != NULL) rc = factor_diag(&c, d_diag, h_diag, diag, err);
    if (rc == 0)
      rc = mp_rhs_solve(&c, b, &r, d_info, "cusolverMpPotrs", solve_chunk,
                        da, err);
    jmg_trace_mark("potrs");
  }
  if (rc == 0) *info = f;
  mp_end(&c);
  return rc;
}
