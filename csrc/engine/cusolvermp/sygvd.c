/* sygvd on cuSOLVERMp: cusolverMpSygvd, ibtype CUSOLVER_EIG_TYPE_1 (A v =
 * λ B v), on the lower triangles (as syevd.c, whose stedc it shares), A's
 * layout for A, B and Z, MB = NB = MB_Z, IA = JA = IB = JB = IZ = JZ = 1.
 *
 * As syevd.c does with its compz, the eigenvectors are always computed
 * (CUSOLVER_EIG_MODE_VECTOR), into Z, a scratch part of A's layout, and
 * copied over A's part only when asked for: cusolverMpSyevd refuses
 * eigenvalues alone (syevd.c), and sygvd runs through it. Its blocks are
 * syevd's powers of two (context.c, mp_block).
 *
 * The eigenvalues ("an array of global size N", replicated) go to w, on
 * the device, and are broadcast from rank 0 as well. *info is LAPACK's
 * ?sygvd's: n + k for B's leading minor of order k not positive definite
 * (found by a Cholesky of B's copy first, below), else the library's.
 *
 * One rank runs this path too (not cuSOLVERDn's sygvd, as the other ops
 * do there: mp.h, mp_one_gpu_view), so that one GPU tests what several
 * ranks run; at N = 4096 / 8192 float64 it ran at 0.93 / 0.99 of JAX's
 * Cholesky + triangular solves + eigh on one H200 (bench/results/
 * 2026-11-26-s13-h200-one-gpu). */
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "engine/cusolvermp/mp.h"

int jmg_mp_sygvd(const jmg_engine *e, const jmg_local_matrix *a,
                 const jmg_local_matrix *b, void *w, int want_vectors,
                 int *info, jmg_error *err) {
  (void)e;
  mp_call c;
  int *d_info = NULL;
  void *z = NULL;
  int rc = mp_begin(&c, "sygvd", a, err);
  if (rc == 0 && (b->rows != a->rows || b->cols != a->cols ||
                  b->ld != a->ld || b->mb != a->mb || b->nb != a->nb ||
                  b->dtype != a->dtype))
    rc = jmg_error_set(err, JMG_EINTERNAL, "sygvd", "cuSOLVERMp",
                       "B's part (%lld x %lld, ld %lld) is not laid out as "
                       "A's (%lld x %lld, ld %lld)",
                       (long long)b->rows, (long long)b->cols,
                       (long long)b->ld, (long long)a->rows,
                       (long long)a->cols, (long long)a->ld);
  if (rc == 0) rc = mp_take(&c, sizeof(int), (void **)&d_info, err);
  if (rc == 0)
    rc = mp_take(&c, (size_t)a->ld * (size_t)a->cols * c.elem, &z, err);
  rc = mp_agree(&c, rc, err);

  const jmg_mp_api *api = c.api;
  const cusolverEigType_t itype = CUSOLVER_EIG_TYPE_1;
  const cusolverEigMode_t jobz = CUSOLVER_EIG_MODE_VECTOR;
  jmg_mp_desc_t da = NULL, db = NULL, dz = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
    rc = mp_grid(&c, err);
    if (rc == 0) rc = mp_desc_a(&c, &da, err);
    if (rc == 0) rc = mp_desc_a(&c, &db, err);
    if (rc == 0) rc = mp_desc_a(&c, &dz, err);
    if (rc == 0)
      rc = mp_check(api->sygvd_buffer_size(c.handle, itype, jobz,
                                           CUBLAS_FILL_MODE_LOWER, a->n, 1, 1,
                                           da, 1, 1, db, 1, 1, dz, c.type, &d1,
                                           &h1),
                    &c, "cusolverMpSygvd_bufferSize", err);
    if (rc == 0)
      rc = mp_check(api->potrf_buffer_size(c.handle, CUBLAS_FILL_MODE_LOWER,
                                           a->n, z, 1, 1, dz, c.type, &d2,
                                           &h2),
                    &c, "cusolverMpPotrf_bufferSize", err);
    if (rc == 0)
      rc = mp_take_work(&c, d1 > d2 ? d1 : d2, h1 > h2 ? h1 : h2, err);
    rc = mp_agree(&c, rc, err);
    jmg_trace_mark("engine start");
  }

  /* B's Cholesky factor, of a copy in Z: cusolverMpSygvd answers a B that
   * is not positive definite with CUSOLVER_STATUS_INTERNAL_ERROR (one
   * H200, one rank, every dtype: docs/gpu-runs/2026-11-26-s13-h200), not
   * with info, so B is checked first, as LAPACK's ?sygvd does with its
   * own potrf: f > 0 is the order of B's first leading minor that is not,
   * reported as n + f. Z is the eigenvectors' scratch anyway. */
  int f = 0;
  if (rc == 0) {
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(z, b->data,
                                      (size_t)b->ld * (size_t)b->cols * c.elem,
                                      cudaMemcpyDeviceToDevice, c.stream),
                      c.op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                        c.op, err);
    cusolverStatus_t st = CUSOLVER_STATUS_SUCCESS;
    if (rc == 0)
      st = api->potrf(c.handle, CUBLAS_FILL_MODE_LOWER, a->n, z, 1, 1, dz,
                      c.type, c.d_work, c.d_bytes, c.h_work, c.h_bytes, d_info);
    rc = mp_agree_factor(&c, rc, st, d_info, "cusolverMpPotrf", &f, err);
    if (f > 0) f += (int)a->n;
    jmg_trace_mark("potrf of B");
  }
  if (rc == 0 && f == 0) {
    rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                      c.op, err);
    if (rc == 0)
      rc = mp_check(api->sygvd(c.handle, itype, jobz, CUBLAS_FILL_MODE_LOWER,
                               a->n, a->data, 1, 1, da, b->data, 1, 1, db, w,
                               z, 1, 1, dz, c.type, c.d_work, c.d_bytes,
                               c.h_work, c.h_bytes, d_info),
                    &c, "cusolverMpSygvd", err);
    rc = mp_agree_info(&c, rc, d_info, "cusolverMpSygvd", &f, err);
    jmg_trace_mark("sygvd");
  }
  /* f != 0: no convergence or B not positive definite; w and A are left
   * to the ops layer (NaN). */
  if (rc == 0 && f == 0)
    rc = mp_eig_outputs(&c, w, want_vectors ? z : NULL, err);
  if (rc == 0) *info = f;
  mp_end(&c);
  return rc;
}
