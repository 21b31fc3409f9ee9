/* The Cholesky steps potrs and potri share, and sygvd's factorization of
 * B (mp.h): the lower triangle, in place, by cusolverMpPotrf. */
#include "common/trace.h"
#include "engine/cusolvermp/mp.h"

int jmg_mp_cholesky_workspace(jmg_mp_call *c, int rc, jmg_mp_rhs *r, void *b,
                              jmg_mp_desc_t *da, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const jmg_mp_api *api = c->api;
  const cublasFillMode_t lo = CUBLAS_FILL_MODE_LOWER;
  if (rc != 0) return rc; /* every rank failed step 1 alike (agreed) */
  size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
  rc = jmg_mp_grid(c, err);
  if (rc == 0) rc = jmg_mp_desc_a(c, da, err);
  if (rc == 0 && r != NULL) rc = jmg_mp_rhs_desc(c, r, err);
  /* The right-hand sides potrs is asked about: r's first chunk, or n
   * columns in A's layout. */
  const int64_t nrhs = r != NULL ? r->width : a->n;
  void *col = r != NULL ? jmg_mp_rhs_col(c, r, b, 0) : b;
  const jmg_mp_desc_t db = r != NULL ? r->desc : *da;
  if (rc == 0)
    rc = jmg_mp_check(api->potrf_buffer_size(c->handle, lo, a->n, a->data, 1, 1,
                                             *da, c->type, &d1, &h1),
                      c, "cusolverMpPotrf_bufferSize", err);
  if (rc == 0)
    rc = jmg_mp_check(
        api->potrs_buffer_size(c->handle, lo, a->n, nrhs, a->data, 1, 1, *da,
                               col, 1, 1, db, c->type, &d2, &h2),
        c, "cusolverMpPotrs_bufferSize", err);
  return jmg_mp_take_work(c, rc, d1, h1, d2, h2, err);
}

int jmg_mp_potrf(jmg_mp_call *c, int rc, void *m, jmg_mp_desc_t dm, int *f,
                 jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  if (rc == 0) rc = jmg_mp_zero_info(c, err);
  cusolverStatus_t st = CUSOLVER_STATUS_SUCCESS;
  if (rc == 0)
    st = c->api->potrf(c->handle, CUBLAS_FILL_MODE_LOWER, a->n, m, 1, 1, dm,
                       c->type, c->d_work, c->d_bytes, c->cuda.host_work,
                       c->h_bytes, c->cuda.d_info);
  return jmg_mp_agree_factor(c, rc, st, "cusolverMpPotrf", f, err);
}
