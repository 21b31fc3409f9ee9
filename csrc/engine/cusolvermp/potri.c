/* potri on cuSOLVERMp. 0.8 has no potri; the inverse is the solution of
 * A X = I by the Cholesky factor, all n right-hand sides in one
 * cusolverMpPotrs (0.8.0 takes NRHS > 1: mp.h, jmg_mp_rhs), with X in a
 * scratch part of A's own layout (B aligned with A, as potrs requires):
 *   1. cusolverMpPotrf on A (lower): info, as every engine reports it;
 *   2. W = I (cusolverMpLaset), a scratch part in A's layout;
 *   3. cusolverMpPotrs(A's factor, W), NRHS = n: W = A⁻¹;
 *   4. A = the Hermitian matrix of W's lower triangle (jmg_mp_hermitian):
 *      exactly Hermitian, both triangles, as the other engines return it.
 * Memory beyond A: one part and the transposes' staging (jmg_mp_stage).
 *
 * The factorization and its workspace are cholesky.c's, which potrs
 * shares. potrf + potrs is about 7/3 n³ flops, against a QR's (cusolverMpGels
 * against I: 4/3 n³ + applying Qᴴ, 2 n³, + a triangular solve, n³), which
 * this replaced (bench/results/2026-11-24-h200x1-one-gpu measured that). */
#include <string.h>

#include "common/trace.h"
#include "cuda/dtype.h"
#include "engine/cusolvermp/mp.h"

/* Step 3 after the factorization: w = A⁻¹ by cusolverMpLaset (w = I)
 * and cusolverMpPotrs on its n columns, then A = the Hermitian matrix of
 * w's lower triangle. */
static int inverse(jmg_mp_call *c, jmg_mp_desc_t da, void *w, jmg_mp_stage *st,
                   jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const jmg_mp_api *api = c->api;
  const jmg_cuda_scalar zero = jmg_cuda_scalar_of(a->dtype, 0.0);
  const jmg_cuda_scalar one = jmg_cuda_scalar_of(a->dtype, 1.0);
  int s = 0;
  int rc = jmg_mp_zero_info(c, err);
  if (rc == 0)
    rc = jmg_mp_check(api->laset(c->handle, CUBLAS_FILL_MODE_FULL, a->n, a->n,
                                 &zero, &one, w, 1, 1, da, c->cuda.d_info),
                      c, "cusolverMpLaset", err);
  rc = jmg_mp_agree_info(c, rc, "cusolverMpLaset", &s, err);
  if (rc != 0) return rc;
  rc = jmg_mp_zero_info(c, err);
  if (rc == 0)
    rc = jmg_mp_check(
        api->potrs(c->handle, CUBLAS_FILL_MODE_LOWER, a->n, a->n, a->data, 1, 1,
                   da, w, 1, 1, da, c->type, c->d_work, c->d_bytes,
                   c->cuda.host_work, c->h_bytes, c->cuda.d_info),
        c, "cusolverMpPotrs", err);
  rc = jmg_mp_agree_info(c, rc, "cusolverMpPotrs", &s, err);
  jmg_trace_mark("laset+potrs");
  if (rc == 0 && s != 0)
    rc = jmg_error_set(err, JMG_ECUSOLVER, c->cuda.op, "cusolverMpPotrs",
                       "info %d after a successful factorization", s);
  if (rc == 0) rc = jmg_mp_hermitian(c, w, a->data, st, err);
  if (rc == 0) rc = jmg_cuda_call_sync(&c->cuda, err);
  jmg_trace_mark("hermitian");
  return rc;
}

int jmg_mp_potri(const jmg_engine *e, const jmg_local_matrix *a, int *info,
                 jmg_error *err) {
  (void)e;
  jmg_mp_call c;
  jmg_mp_stage st;
  memset(&st, 0, sizeof st);
  void *w = NULL;
  jmg_mp_desc_t da = NULL;
  int rc = jmg_mp_begin(&c, JMG_OP_POTRI, a, err);
  if (rc == 0)
    rc = jmg_mp_take(&c, (size_t)(a->ld * a->cols) * c.elem, &w, err);
  if (rc == 0) rc = jmg_mp_transpose_take(&c, &st, err);
  rc = jmg_mp_agree(&c, rc, err);
  rc = jmg_mp_cholesky_workspace(&c, rc, NULL, w, &da, err);
  int f = 0;
  if (rc == 0) rc = jmg_mp_potrf(&c, rc, a->data, da, &f, err);
  jmg_trace_mark("potrf");
  /* f > 0: not positive definite; A's content is unspecified (engine.h). */
  if (rc == 0 && f == 0) rc = inverse(&c, da, w, &st, err);
  if (rc == 0) *info = f;
  return jmg_mp_end(&c, rc, err);
}
