/* potri on cuSOLVERMp. 0.8 has no potri: the inverse is A⁻¹ = potrs(A, I),
 * both triangles at once. Every rank factors its part of A
 * (cusolverMpPotrf, lower), sets a scratch part in A's layout to the
 * identity (cusolverMpLaset: 0 off the diagonal, 1 on it), solves against
 * it (cusolverMpPotrs with B distributed as A), and copies the solution
 * over its part of A. */
#include <string.h>

#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolvermp/mp.h"

int jmg_mp_potri(const jmg_engine *e, const jmg_local_matrix *a, int *info,
                 jmg_error *err) {
  (void)e;
  mp_call c;
  int *d_info = NULL;
  void *x = NULL;
  int rc = mp_begin(&c, "potri", a, err);
  if (rc == 0) rc = mp_take(&c, sizeof(int), (void **)&d_info, err);
  if (rc == 0)
    rc = mp_take(&c, (size_t)a->ld * (size_t)a->cols * c.elem, &x, err);
  rc = mp_agree(&c, rc, err);

  const jmg_mp_api *api = c.api;
  jmg_mp_desc_t da = NULL, dx = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
    rc = mp_grid(&c, err);
    if (rc == 0) rc = mp_desc_a(&c, &da, err);
    if (rc == 0) rc = mp_desc_a(&c, &dx, err);
    if (rc == 0)
      rc = mp_check(api->potrf_buffer_size(c.handle, CUBLAS_FILL_MODE_LOWER,
                                           a->n, a->data, 1, 1, da, c.type,
                                           &d1, &h1),
                    &c, "cusolverMpPotrf_bufferSize", err);
    if (rc == 0)
      rc = mp_check(api->potrs_buffer_size(c.handle, CUBLAS_FILL_MODE_LOWER,
                                           a->n, a->n, a->data, 1, 1, da, x, 1,
                                           1, dx, c.type, &d2, &h2),
                    &c, "cusolverMpPotrs_bufferSize", err);
    if (rc == 0)
      rc = mp_take_work(&c, d1 > d2 ? d1 : d2, h1 > h2 ? h1 : h2, err);
    rc = mp_agree(&c, rc, err);
  }

  int f = 0;
  if (rc == 0) {
    rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                      c.op, err);
    if (rc == 0)
      rc = mp_check(api->potrf(c.handle, CUBLAS_FILL_MODE_LOWER, a->n, a->data,
                               1, 1, da, c.type, c.d_work, c.d_bytes,
                               c.h_work, c.h_bytes, d_info),
                    &c, "cusolverMpPotrf", err);
    rc = mp_agree_info(&c, rc, d_info, "cusolverMpPotrf", &f, err);
  }
  /* f > 0: not positive definite; A's content is unspecified (engine.h). */
  if (rc == 0 && f == 0) {
    int s = 0;
    jmg_cuda_scalar zero = jmg_cuda_scalar_of(a->dtype, 0.0);
    jmg_cuda_scalar one = jmg_cuda_scalar_of(a->dtype, 1.0);
    rc = mp_check(api->laset(c.handle, CUBLAS_FILL_MODE_FULL, a->n, a->n,
                             &zero, &one, x, 1, 1, dx, d_info),
                  &c, "cusolverMpLaset", err);
    rc = mp_agree_info(&c, rc, d_info, "cusolverMpLaset", &s, err);
    if (rc == 0 && s != 0)
      rc = jmg_error_set(err, JMG_ECUSOLVER, c.op, "cusolverMpLaset",
                         "info %d", s);
    if (rc == 0) {
      rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                        c.op, err);
      if (rc == 0)
        rc = mp_check(api->potrs(c.handle, CUBLAS_FILL_MODE_LOWER, a->n, a->n,
                                 a->data, 1, 1, da, x, 1, 1, dx, c.type,
                                 c.d_work, c.d_bytes, c.h_work, c.h_bytes,
                                 d_info),
                      &c, "cusolverMpPotrs", err);
      rc = mp_agree_info(&c, rc, d_info, "cusolverMpPotrs", &s, err);
      if (rc == 0 && s != 0)
        rc = jmg_error_set(err, JMG_ECUSOLVER, c.op, "cusolverMpPotrs",
                           "info %d after a successful factorization", s);
    }
    if (rc == 0) rc = mp_copy_part(&c, a->data, x, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaStreamSynchronize(c.stream), c.op, err);
  }
  if (rc == 0) *info = f;
  mp_end(&c);
  return rc;
}
