/* syevd on cuSOLVERMp: cusolverMpSyevd on the lower triangle ("lower
 * triangular input matrix only", release notes 0.3.0), A's layout with
 * MB = NB = MB_Z, IA = JA = IZ = JZ = 1 (functions.html). The eigenvectors
 * go to Z, a scratch part of A's layout, copied over A's part afterwards.
 * With jobz "N" Z is still a part of its own: the docs call d_Z an output
 * whatever jobz is, and A is the library's input, so Z is never A. The
 * eigenvalues ("an array of global size N") go to w, on the device, and
 * are broadcast from rank 0 so that every rank has them whatever the
 * library leaves on the others. */
#include <string.h>

#include "cuda/check.h"
#include "engine/cusolvermp/mp.h"

int jmg_mp_syevd(const jmg_engine *e, const jmg_local_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err) {
  (void)e;
  mp_call c;
  int *d_info = NULL;
  void *q = NULL;
  int rc = mp_begin(&c, "syevd", a, err);
  if (rc == 0) rc = mp_take(&c, sizeof(int), (void **)&d_info, err);
  if (rc == 0)
    rc = mp_take(&c, (size_t)a->ld * (size_t)a->cols * c.elem, &q, err);
  rc = mp_agree(&c, rc, err);

  const jmg_mp_api *api = c.api;
  char compz[2] = {want_vectors ? 'V' : 'N', '\0'};
  jmg_mp_desc_t da = NULL, dq = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0;
    rc = mp_grid(&c, err);
    if (rc == 0) rc = mp_desc_a(&c, &da, err);
    if (rc == 0) rc = mp_desc_a(&c, &dq, err);
    if (rc == 0)
      rc = mp_check(api->syevd_buffer_size(c.handle, compz,
                                           CUBLAS_FILL_MODE_LOWER, a->n,
                                           a->data, 1, 1, da, w, q, 1, 1, dq,
                                           c.type, &d1, &h1),
                    &c, "cusolverMpSyevd_bufferSize", err);
    if (rc == 0) rc = mp_take_work(&c, d1, h1, err);
    rc = mp_agree(&c, rc, err);
  }

  int f = 0;
  if (rc == 0) {
    rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                      c.op, err);
    if (rc == 0)
      rc = mp_check(api->syevd(c.handle, compz, CUBLAS_FILL_MODE_LOWER, a->n,
                               a->data, 1, 1, da, w, q, 1, 1, dq, c.type,
                               c.d_work, c.d_bytes, c.h_work, c.h_bytes,
                               d_info),
                    &c, "cusolverMpSyevd", err);
    rc = mp_agree_info(&c, rc, d_info, "cusolverMpSyevd", &f, err);
  }
  /* f > 0: did not converge; w and A are left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    rc = a->comm_ops->bcast(a->comm, w,
                            (size_t)a->n * jmg_dtype_real_size(a->dtype), 0,
                            a->device_ctx, c.op, err);
    if (rc == 0 && want_vectors) rc = mp_copy_part(&c, a->data, q, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaStreamSynchronize(c.stream), c.op, err);
  }
  if (rc == 0) *info = f;
  mp_end(&c);
  return rc;
}
