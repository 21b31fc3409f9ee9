/* syevd on cuSOLVERMp: cusolverMpSyevd on the lower triangle ("lower
 * triangular input matrix only", release notes 0.3.0), A's layout with
 * MB = NB = MB_Z, IA = JA = IZ = JZ = 1 (functions.html).
 *
 * compz is 'Z', as NVIDIA's sample (CUDALibrarySamples, cuSOLVERMp/
 * mp_syevd.c: `char compz = 'Z'`) passes it: the documented 'V' was
 * reported to fail or hang inside stedc, and 'N' to be refused ("SYEVD does
 * not support eigenvalue only, compz=N", 0.7.2 and 0.8.0, a third party's
 * record of runs). So the eigenvectors are always computed, into Z, a
 * scratch part of A's layout, and copied over A's part only when asked
 * for: eigenvalues alone cost what both do.
 *
 * The eigenvalues (ascending, "an array of global size N", replicated) go
 * to w, on the device, and are broadcast from rank 0 as well, so that
 * every rank has rank 0's whatever the library leaves on the others. */
#include <string.h>

#include "common/trace.h"
#include "engine/cusolvermp/mp.h"

int jmg_mp_syevd(const jmg_engine *e, const jmg_local_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err) {
  (void)e;
  jmg_mp_call c;
  void *q = NULL;
  int rc = jmg_mp_begin(&c, JMG_OP_SYEVD, a, err);
  if (rc == 0)
    rc = jmg_mp_take(&c, (size_t)a->ld * (size_t)a->cols * c.elem, &q, err);
  rc = jmg_mp_agree(&c, rc, err);

  const jmg_mp_api *api = c.api;
  char compz[2] = {'Z', '\0'};
  jmg_mp_desc_t da = NULL, dq = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0;
    rc = jmg_mp_grid(&c, err);
    if (rc == 0) rc = jmg_mp_desc_a(&c, &da, err);
    if (rc == 0) rc = jmg_mp_desc_a(&c, &dq, err);
    if (rc == 0)
      rc =
          jmg_mp_check(api->syevd_buffer_size(
                           c.handle, compz, CUBLAS_FILL_MODE_LOWER, a->n,
                           a->data, 1, 1, da, w, q, 1, 1, dq, c.type, &d1, &h1),
                       &c, "cusolverMpSyevd_bufferSize", err);
    rc = jmg_mp_take_work(&c, rc, d1, h1, 0, 0, err);
  }

  int f = 0;
  if (rc == 0) {
    rc = jmg_mp_zero_info(&c, err);
    if (rc == 0)
      rc = jmg_mp_check(
          api->syevd(c.handle, compz, CUBLAS_FILL_MODE_LOWER, a->n, a->data, 1,
                     1, da, w, q, 1, 1, dq, c.type, c.d_work, c.d_bytes,
                     c.cuda.host_work, c.h_bytes, c.cuda.d_info),
          &c, "cusolverMpSyevd", err);
    rc = jmg_mp_agree_info(&c, rc, "cusolverMpSyevd", &f, err);
    jmg_trace_mark("syevd");
  }
  /* f > 0: did not converge; w and A are left to the ops layer (NaN). */
  if (rc == 0 && f == 0)
    rc = jmg_mp_eig_outputs(&c, w, want_vectors ? q : NULL, err);
  if (rc == 0) *info = f;
  return jmg_mp_end(&c, rc, err);
}
