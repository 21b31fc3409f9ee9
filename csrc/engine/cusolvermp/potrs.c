/* potrs on cuSOLVERMp: every rank factors its part of A (lower triangle,
 * cusolverMpPotrf) and solves for each right-hand side in turn
 * (cusolverMpPotrs takes one per call; B on grid column 0, mp.h, mp_rhs),
 * then every rank receives X. With a diag to fill, the
 * factor's diagonal is gathered before the solve: each diagonal block's
 * owner copies the real parts of its diagonal into an n-vector on its GPU
 * and broadcasts that segment (one broadcast per diagonal block, in NCCL
 * groups), so every rank ends with all n of them. */
#include <string.h>

#include "cuda/check.h"
#include "engine/cusolvermp/mp.h"

#define DIAG_GROUP 64 /* broadcasts per NCCL group */

static int gather_diag(mp_call *c, char *d_diag, void *diag, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const int64_t R = a->grid_rows, C = a->grid_cols, mb = a->mb, n = a->n;
  const size_t real = jmg_dtype_real_size(a->dtype), e = c->elem;
  const int64_t tiles = (n + mb - 1) / mb;
  int rc = 0;
  for (int64_t k = 0; rc == 0 && k < tiles; ++k) {
    int owner = (int)((k % R) + (k % C) * R);
    if (owner != a->rank) continue;
    int64_t len = n - k * mb < mb ? n - k * mb : mb;
    const char *src = (const char *)a->data +
                      ((size_t)((k / C) * mb) * (size_t)a->ld +
                       (size_t)((k / R) * mb)) *
                          e;
    rc = JMG_CUDA_TRY(cudaMemcpy2DAsync(d_diag + (size_t)(k * mb) * real, real,
                                        src, (size_t)(a->ld + 1) * e, real,
                                        (size_t)len, cudaMemcpyDeviceToDevice,
                                        c->stream),
                      c->op, err);
  }
  for (int64_t k0 = 0; rc == 0 && k0 < tiles; k0 += DIAG_GROUP) {
    rc = a->comm_ops->group_begin(c->op, err);
    for (int64_t k = k0; rc == 0 && k < tiles && k < k0 + DIAG_GROUP; ++k) {
      int owner = (int)((k % R) + (k % C) * R);
      int64_t len = n - k * mb < mb ? n - k * mb : mb;
      rc = a->comm_ops->bcast(a->comm, d_diag + (size_t)(k * mb) * real,
                              (size_t)len * real, owner, a->device_ctx, c->op,
                              err);
    }
    jmg_error ignored;
    int end = a->comm_ops->group_end(c->op, rc == 0 ? err : &ignored);
    if (rc == 0) rc = end;
  }
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(diag, d_diag, (size_t)n * real,
                                      cudaMemcpyDeviceToHost, c->stream),
                      c->op, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(c->stream), c->op, err);
  return rc;
}

/* cusolverMpPotrs on one column (mp_rhs_solve); ctx: A's descriptor. */
static cusolverStatus_t solve_column(mp_call *c, void *col,
                                     jmg_mp_desc_t col_desc, int *d_info,
                                     void *ctx) {
  const jmg_local_matrix *a = c->a;
  return c->api->potrs(c->handle, CUBLAS_FILL_MODE_LOWER, a->n, 1, a->data, 1,
                       1, (jmg_mp_desc_t)ctx, col, 1, 1, col_desc, c->type,
                       c->d_work, c->d_bytes, c->h_work, c->h_bytes, d_info);
}

int jmg_mp_potrs(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  mp_call c;
  mp_rhs r;
  memset(&r, 0, sizeof r);
  int *d_info = NULL;
  void *d_diag = NULL;
  int rc = mp_begin(&c, "potrs", a, err);
  if (rc == 0) rc = mp_take(&c, sizeof(int), (void **)&d_info, err);
  if (rc == 0) rc = mp_rhs_take(&c, b, nrhs, &r, err);
  if (rc == 0 && diag != NULL)
    rc = mp_take(&c, (size_t)a->n * jmg_dtype_real_size(a->dtype), &d_diag,
                 err);
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
                                           a->n, 1, a->data, 1, 1, da,
                                           mp_rhs_col(&c, &r, b, 0), 1, 1,
                                           r.desc, c.type, &d2, &h2),
                    &c, "cusolverMpPotrs_bufferSize", err);
    if (rc == 0)
      rc = mp_take_work(&c, d1 > d2 ? d1 : d2, h1 > h2 ? h1 : h2, err);
    rc = mp_agree(&c, rc, err);
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
  }
  /* f > 0: not positive definite; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    if (diag != NULL) rc = gather_diag(&c, d_diag, diag, err);
    if (rc == 0)
      rc = mp_rhs_solve(&c, b, &r, d_info, "cusolverMpPotrs", solve_column,
                        da, err);
  }
  if (rc == 0) *info = f;
  mp_end(&c);
  return rc;
}
