/* lu_solve on cuSOLVERMp: cusolverMpGetrf (partial pivoting) and
 * cusolverMpGetrs for each right-hand side in turn (one per call; B on grid
 * column 0, mp.h, mp_rhs), then X broadcast to every rank.
 *
 * The transposed solve (transpose 1: Aᵀ X = B, not conjugated): getrs
 * solves only with A itself ("Only CUBLAS_OP_N is currently supported",
 * functions.html), so the ranks factor Aᵀ instead: a scratch part in A's
 * layout receives Aᵀ (transpose.c: blocks exchanged over NCCL, each
 * transposed by cuBLAS), and getrf/getrs run on it. This is the ops layer's
 * usual case: the engines hold Aᵀ of the user's matrix. A is overwritten
 * or left as it is (engine.h: not returned). */
#include <string.h>

#include "cuda/check.h"
#include "engine/cusolvermp/mp.h"

/* What cusolverMpGetrs needs beside the column (mp_rhs_solve's ctx). */
typedef struct mp_getrs_ctx {
  jmg_mp_desc_t da;   /* the factored matrix's descriptor */
  void *m;            /* the factored matrix: A, or Aᵀ in a scratch part */
  const int64_t *ipiv; /* getrf's pivots */
} mp_getrs_ctx;

/* cusolverMpGetrs on one column (mp_rhs_solve). */
static cusolverStatus_t solve_column(mp_call *c, void *col,
                                     jmg_mp_desc_t col_desc, int *d_info,
                                     void *ctx) {
  const mp_getrs_ctx *g = ctx;
  return c->api->getrs(c->handle, CUBLAS_OP_N, c->a->n, 1, g->m, 1, 1, g->da,
                       g->ipiv, col, 1, 1, col_desc, c->type, c->d_work,
                       c->d_bytes, c->h_work, c->h_bytes, d_info);
}

int jmg_mp_lu_solve(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  (void)e;
  mp_call c;
  mp_rhs r;
  mp_stage st;
  memset(&r, 0, sizeof r);
  memset(&st, 0, sizeof st);
  int *d_info = NULL;
  int64_t *ipiv = NULL;
  void *m = a->data; /* the matrix factored: A, or Aᵀ in a scratch part */
  int rc = mp_begin(&c, "lu_solve", a, err);
  if (rc == 0) rc = mp_take(&c, sizeof(int), (void **)&d_info, err);
  if (rc == 0) /* LOCr(M_A) + MB_A (functions.html, cusolverMpGetrf) */
    rc = mp_take(&c, (size_t)(a->rows + a->mb) * sizeof(int64_t),
                 (void **)&ipiv, err);
  if (rc == 0) rc = mp_rhs_take(&c, b, nrhs, &r, err);
  if (rc == 0 && transpose) {
    rc = mp_take(&c, (size_t)(a->ld * a->cols) * c.elem, &m, err);
    if (rc == 0) rc = mp_transpose_take(&c, &st, err);
  }
  rc = mp_agree(&c, rc, err);

  const jmg_mp_api *api = c.api;
  jmg_mp_desc_t da = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
    rc = mp_grid(&c, err);
    if (rc == 0) rc = mp_desc_a(&c, &da, err);
    if (rc == 0) rc = mp_rhs_desc(&c, &r, err);
    if (rc == 0)
      rc = mp_check(api->getrf_buffer_size(c.handle, a->n, a->n, m, 1, 1, da,
                                           ipiv, c.type, &d1, &h1),
                    &c, "cusolverMpGetrf_bufferSize", err);
    if (rc == 0)
      rc = mp_check(api->getrs_buffer_size(c.handle, CUBLAS_OP_N, a->n, 1, m,
                                           1, 1, da, ipiv,
                                           mp_rhs_col(&c, &r, b, 0), 1, 1,
                                           r.desc, c.type, &d2, &h2),
                    &c, "cusolverMpGetrs_bufferSize", err);
    if (rc == 0)
      rc = mp_take_work(&c, d1 > d2 ? d1 : d2, h1 > h2 ? h1 : h2, err);
    rc = mp_agree(&c, rc, err);
  }

  if (rc == 0 && transpose) {
    rc = mp_transpose(&c, a->data, m, 0, &st, err);
    rc = mp_agree(&c, rc, err);
  }
  int f = 0;
  if (rc == 0) {
    rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                      c.op, err);
    cusolverStatus_t st = CUSOLVER_STATUS_SUCCESS;
    if (rc == 0)
      st = api->getrf(c.handle, a->n, a->n, m, 1, 1, da, ipiv, c.type, c.d_work,
                      c.d_bytes, c.h_work, c.h_bytes, d_info);
    rc = mp_agree_factor(&c, rc, st, d_info, "cusolverMpGetrf", &f, err);
  }
  /* f > 0: U(f, f) is exactly zero; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    mp_getrs_ctx g = {da, m, ipiv};
    rc = mp_rhs_solve(&c, b, &r, d_info, "cusolverMpGetrs", solve_column, &g,
                      err);
  }
  if (rc == 0) *info = f;
  mp_end(&c);
  return rc;
}
