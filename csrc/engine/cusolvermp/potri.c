/* potri on cuSOLVERMp. 0.8 has no potri; the inverse is the solution of
 * A X = I by the Cholesky factor, all n right-hand sides in one
 * cusolverMpPotrs (0.8.0 takes NRHS > 1: mp.h, mp_rhs), with X in a
 * scratch part of A's own layout (B aligned with A, as potrs requires):
 *   1. cusolverMpPotrf on A (lower): info, as every engine reports it;
 *   2. W = I (cusolverMpLaset), a scratch part in A's layout;
 *   3. cusolverMpPotrs(A's factor, W), NRHS = n: W = A⁻¹;
 *   4. A = the Hermitian matrix of W's lower triangle (mp_hermitian):
 *      exactly Hermitian, both triangles, as the other engines return it.
 * Memory beyond A: one part and the transposes' staging (mp_stage).
 *
 * Until 2026-11-25 the inverse came from cusolverMpGels (QR) against I,
 * because the documentation of 0.7 said potrs took one right-hand side
 * per call: 0.20-0.31 of jnp.linalg.inv's speed on one H200 (complex128,
 * bench/results/2026-11-24-h200x1-one-gpu). potrf + potrs is about 7/3 n³
 * flops against QR's 4/3 n³ + applying Qᴴ (2 n³) + a triangular solve
 * (n³).
 *
 * One rank holding the whole matrix runs the cuSOLVERDn engine's potri
 * instead (mp.h, mp_one_gpu_view, says why). */
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolvermp/mp.h"

int jmg_mp_potri(const jmg_engine *e, const jmg_local_matrix *a, int *info,
                 jmg_error *err) {
  (void)e;
  mp_one_gpu one;
  if (mp_one_gpu_view(a, &one))
    return jmg_cusolverdn_engine.leader.potri(&jmg_cusolverdn_engine,
                                              &one.view, info, err);
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
  jmg_mp_desc_t da = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
    rc = mp_grid(&c, err);
    if (rc == 0) rc = mp_desc_a(&c, &da, err);
    if (rc == 0)
      rc = mp_check(api->potrf_buffer_size(c.handle, CUBLAS_FILL_MODE_LOWER,
                                           a->n, a->data, 1, 1, da, c.type,
                                           &d1, &h1),
                    &c, "cusolverMpPotrf_bufferSize", err);
    if (rc == 0)
      rc = mp_check(api->potrs_buffer_size(c.handle, CUBLAS_FILL_MODE_LOWER,
                                           a->n, a->n, a->data, 1, 1, da, w, 1,
                                           1, da, c.type, &d2, &h2),
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
    cusolverStatus_t s = CUSOLVER_STATUS_SUCCESS;
    if (rc == 0)
      s = api->potrf(c.handle, CUBLAS_FILL_MODE_LOWER, a->n, a->data, 1, 1, da,
                     c.type, c.d_work, c.d_bytes, c.h_work, c.h_bytes, d_info);
    rc = mp_agree_factor(&c, rc, s, d_info, "cusolverMpPotrf", &f, err);
    jmg_trace_mark("potrf");
  }
  /* f > 0: not positive definite; A's content is unspecified (engine.h). */
  if (rc == 0 && f == 0) {
    int s = 0;
    jmg_cuda_scalar zero = jmg_cuda_scalar_of(a->dtype, 0.0);
    jmg_cuda_scalar one = jmg_cuda_scalar_of(a->dtype, 1.0);
    rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream), c.op,
                      err);
    if (rc == 0)
      rc = mp_check(api->laset(c.handle, CUBLAS_FILL_MODE_FULL, a->n, a->n,
                               &zero, &one, w, 1, 1, da, d_info),
                    &c, "cusolverMpLaset", err);
    rc = mp_agree_info(&c, rc, d_info, "cusolverMpLaset", &s, err);
    if (rc == 0) {
      rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                        c.op, err);
      if (rc == 0)
        rc = mp_check(api->potrs(c.handle, CUBLAS_FILL_MODE_LOWER, a->n, a->n,
                                 a->data, 1, 1, da, w, 1, 1, da, c.type,
                                 c.d_work, c.d_bytes, c.h_work, c.h_bytes,
                                 d_info),
                      &c, "cusolverMpPotrs", err);
      rc = mp_agree_info(&c, rc, d_info, "cusolverMpPotrs", &s, err);
      jmg_trace_mark("laset+potrs");
      if (rc == 0 && s != 0)
        rc = jmg_error_set(err, JMG_ECUSOLVER, c.op, "cusolverMpPotrs",
                           "info %d after a successful factorization", s);
    }
    if (rc == 0) rc = mp_hermitian(&c, w, a->data, &st, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaStreamSynchronize(c.stream), c.op, err);
    jmg_trace_mark("hermitian");
  }
  if (rc == 0) *info = f;
  mp_end(&c);
  return rc;
}
