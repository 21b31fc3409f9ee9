/* lu_solve on cuSOLVERMp: cusolverMpGetrf (partial pivoting) and
 * cusolverMpGetrs, with the right-hand sides on grid column 0 (mp.h,
 * mp_rhs) and X broadcast to every rank afterwards.
 *
 * The transposed solve (transpose 1: Aᵀ X = B, not conjugated): getrs
 * solves only with A itself ("only non-transposed is supported",
 * cuSOLVERMp samples), so the ranks first replace A by Aᵀ in the same
 * layout (transpose.c: blocks exchanged over NCCL, each transposed by
 * cuBLAS) and factor that. A is overwritten either way (engine.h). This is
 * the ops layer's usual case: the engines hold Aᵀ of the user's matrix. */
#include <string.h>

#include "cuda/check.h"
#include "engine/cusolvermp/mp.h"

int jmg_mp_lu_solve(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  (void)e;
  mp_call c;
  mp_rhs r;
  memset(&r, 0, sizeof r);
  int *d_info = NULL;
  int64_t *ipiv = NULL;
  void *stage[2] = {NULL, NULL};
  int rc = mp_begin(&c, "lu_solve", a, err);
  if (rc == 0) rc = mp_take(&c, sizeof(int), (void **)&d_info, err);
  if (rc == 0) {
    /* ScaLAPACK's LOCr(M_A) + MB_A; the samples size it by the local
     * columns: the larger of the two. */
    int64_t rows = a->rows + a->mb, cols = a->cols + a->nb;
    rc = mp_take(&c, (size_t)(rows > cols ? rows : cols) * sizeof(int64_t),
                 (void **)&ipiv, err);
  }
  if (rc == 0) rc = mp_rhs_take(&c, b, nrhs, &r, err);
  if (rc == 0 && transpose) rc = mp_transpose_take(&c, stage, err);
  rc = mp_agree(&c, rc, err);

  const jmg_mp_api *api = c.api;
  jmg_mp_desc_t da = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
    rc = mp_grid(&c, err);
    if (rc == 0) rc = mp_desc_a(&c, &da, err);
    if (rc == 0) rc = mp_rhs_desc(&c, &r, err);
    if (rc == 0)
      rc = mp_check(api->getrf_buffer_size(c.handle, a->n, a->n, a->data, 1, 1,
                                           da, ipiv, c.type, &d1, &h1),
                    &c, "cusolverMpGetrf_bufferSize", err);
    if (rc == 0)
      rc = mp_check(api->getrs_buffer_size(c.handle, CUBLAS_OP_N, a->n, nrhs,
                                           a->data, 1, 1, da, ipiv, r.arg, 1,
                                           1, r.desc, c.type, &d2, &h2),
                    &c, "cusolverMpGetrs_bufferSize", err);
    if (rc == 0)
      rc = mp_take_work(&c, d1 > d2 ? d1 : d2, h1 > h2 ? h1 : h2, err);
    rc = mp_agree(&c, rc, err);
  }

  if (rc == 0 && transpose) {
    rc = mp_transpose(&c, stage, err);
    rc = mp_agree(&c, rc, err);
  }
  int f = 0;
  if (rc == 0) {
    rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                      c.op, err);
    if (rc == 0)
      rc = mp_check(api->getrf(c.handle, a->n, a->n, a->data, 1, 1, da, ipiv,
                               c.type, c.d_work, c.d_bytes, c.h_work,
                               c.h_bytes, d_info),
                    &c, "cusolverMpGetrf", err);
    rc = mp_agree_info(&c, rc, d_info, "cusolverMpGetrf", &f, err);
  }
  /* f > 0: U(f, f) is exactly zero; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    int s = 0;
    rc = mp_rhs_scatter(&c, b, &r, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                        c.op, err);
    if (rc == 0 && nrhs > 0)
      rc = mp_check(api->getrs(c.handle, CUBLAS_OP_N, a->n, nrhs, a->data, 1,
                               1, da, ipiv, r.arg, 1, 1, r.desc, c.type,
                               c.d_work, c.d_bytes, c.h_work, c.h_bytes,
                               d_info),
                    &c, "cusolverMpGetrs", err);
    rc = mp_agree_info(&c, rc, d_info, "cusolverMpGetrs", &s, err);
    if (rc == 0 && s != 0)
      rc = jmg_error_set(err, JMG_ECUSOLVER, c.op, "cusolverMpGetrs",
                         "info %d after a successful factorization", s);
    if (rc == 0) rc = mp_rhs_gather(&c, b, &r, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaStreamSynchronize(c.stream), c.op, err);
  }
  if (rc == 0) *info = f;
  mp_end(&c);
  return rc;
}
