/* potri on cuSOLVERMp. 0.8 has no potri, and its potrs solves one
 * right-hand side per call ("Currently, this routine only supports
 * NRHS=1", functions.html), so the inverse comes from cusolverMpGels
 * (QR; no such limit) against the identity, after the Cholesky
 * factorization has said whether A is positive definite:
 *   1. W = A (a scratch part in A's layout);
 *   2. cusolverMpPotrf on A (lower): info, as every engine reports it;
 *   3. A = the Hermitian matrix of W's lower triangle (jaxmg's ops give
 *      the lower triangle only; gels reads both): mp_hermitian;
 *   4. W = I (cusolverMpLaset), then cusolverMpGels(A, W): W = A⁻¹;
 *   5. A = the Hermitian matrix of W's lower triangle: exactly Hermitian,
 *      both triangles, as the other engines return it.
 * Memory beyond A: one part and the transposes' staging (mp_stage). */
#include <string.h>

#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolvermp/mp.h"

int jmg_mp_potri(const jmg_engine *e, const jmg_local_matrix *a, int *info,
                 jmg_error *err) {
  (void)e;
  mp_call c;
  mp_stage st;
  memset(&st, 0, sizeof st);
  int *d_info = NULL;
  void *w = NULL;
  int rc = mp_begin(&c, "potri", a, err);
  if (rc == 0) rc = mp_take(&c, sizeof(int), (void **)&d_info, err);
  if (rc == 0) rc = mp_take(&c, (size_t)(a->ld * a->cols) * c.elem, &w, err);
  if (rc == 0) rc = mp_transpose_take(&c, &st, err);
  rc = mp_agree(&c, rc, err);

  const jmg_mp_api *api = c.api;
  jmg_mp_desc_t da = NULL, dw = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
    rc = mp_grid(&c, err);
    if (rc == 0) rc = mp_desc_a(&c, &da, err);
    if (rc == 0) rc = mp_desc_a(&c, &dw, err);
    if (rc == 0)
      rc = mp_check(api->potrf_buffer_size(c.handle, CUBLAS_FILL_MODE_LOWER,
                                           a->n, a->data, 1, 1, da, c.type,
                                           &d1, &h1),
                    &c, "cusolverMpPotrf_bufferSize", err);
    if (rc == 0)
      rc = mp_check(api->gels_buffer_size(c.handle, CUBLAS_OP_N, a->n, a->n,
                                          a->n, a->data, 1, 1, da, w, 1, 1, dw,
                                          c.type, &d2, &h2),
                    &c, "cusolverMpGels_bufferSize", err);
    if (rc == 0)
      rc = mp_take_work(&c, d1 > d2 ? d1 : d2, h1 > h2 ? h1 : h2, err);
    rc = mp_agree(&c, rc, err);
  }

  int f = 0;
  if (rc == 0) {
    rc = mp_copy_part(&c, w, a->data, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                        c.op, err);
    cusolverStatus_t st = CUSOLVER_STATUS_SUCCESS;
    if (rc == 0)
      st = api->potrf(c.handle, CUBLAS_FILL_MODE_LOWER, a->n, a->data, 1, 1, da,
                      c.type, c.d_work, c.d_bytes, c.h_work, c.h_bytes, d_info);
    rc = mp_agree_factor(&c, rc, st, d_info, "cusolverMpPotrf", &f, err);
  }
  /* f > 0: not positive definite; A's content is unspecified (engine.h). */
  if (rc == 0 && f == 0) {
    int s = 0;
    rc = mp_hermitian(&c, w, a->data, &st, err);
    rc = mp_agree(&c, rc, err);
    if (rc == 0) {
      jmg_cuda_scalar zero = jmg_cuda_scalar_of(a->dtype, 0.0);
      jmg_cuda_scalar one = jmg_cuda_scalar_of(a->dtype, 1.0);
      rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                        c.op, err);
      if (rc == 0)
        rc = mp_check(api->laset(c.handle, CUBLAS_FILL_MODE_FULL, a->n, a->n,
                                 &zero, &one, w, 1, 1, dw, d_info),
                      &c, "cusolverMpLaset", err);
      rc = mp_agree_info(&c, rc, d_info, "cusolverMpLaset", &s, err);
    }
    if (rc == 0) {
      rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                        c.op, err);
      if (rc == 0)
        rc = mp_check(api->gels(c.handle, CUBLAS_OP_N, a->n, a->n, a->n,
                                a->data, 1, 1, da, w, 1, 1, dw, c.type,
                                c.d_work, c.d_bytes, c.h_work, c.h_bytes,
                                d_info),
                      &c, "cusolverMpGels", err);
      rc = mp_agree_info(&c, rc, d_info, "cusolverMpGels", &s, err);
    }
    if (rc == 0) rc = mp_hermitian(&c, w, a->data, &st, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaStreamSynchronize(c.stream), c.op, err);
  }
  if (rc == 0) *info = f;
  mp_end(&c);
  return rc;
}
