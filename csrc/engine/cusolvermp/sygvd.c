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
 * do there: one_gpu.c), so that one GPU tests what several ranks run; its
 * speed there against JAX's Cholesky + triangular solves + eigh is in
 * bench/results/2026-11-26-s13-h200-one-gpu. */
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "engine/cusolvermp/mp.h"

static const cusolverEigType_t k_itype = CUSOLVER_EIG_TYPE_1;
static const cusolverEigMode_t k_jobz = CUSOLVER_EIG_MODE_VECTOR;

/* The descriptors of A, B and Z (all in A's layout). */
typedef struct sygvd_descs {
  jmg_mp_desc_t da, db, dz;
} sygvd_descs;

/* Step 2: the grid, the descriptors, sygvd's and potrf's (of B's copy)
 * workspace. */
static int workspace(jmg_mp_call *c, void *z, sygvd_descs *d, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const jmg_mp_api *api = c->api;
  size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
  int rc = jmg_mp_grid(c, err);
  if (rc == 0) rc = jmg_mp_desc_a(c, &d->da, err);
  if (rc == 0) rc = jmg_mp_desc_a(c, &d->db, err);
  if (rc == 0) rc = jmg_mp_desc_a(c, &d->dz, err);
  if (rc == 0)
    rc = jmg_mp_check(
        api->sygvd_buffer_size(c->handle, k_itype, k_jobz,
                               CUBLAS_FILL_MODE_LOWER, a->n, 1, 1, d->da, 1, 1,
                               d->db, 1, 1, d->dz, c->type, &d1, &h1),
        c, "cusolverMpSygvd_bufferSize", err);
  if (rc == 0)
    rc = jmg_mp_check(
        api->potrf_buffer_size(c->handle, CUBLAS_FILL_MODE_LOWER, a->n, z, 1, 1,
                               d->dz, c->type, &d2, &h2),
        c, "cusolverMpPotrf_bufferSize", err);
  return jmg_mp_take_work(c, rc, d1, h1, d2, h2, err);
}

/* B's Cholesky factor, of a copy in Z: cusolverMpSygvd answers a B that is
 * not positive definite with CUSOLVER_STATUS_INTERNAL_ERROR, not with info
 * (one rank, every dtype: docs/gpu-runs/2026-11-26-s13-h200), so B is
 * checked first, as LAPACK's ?sygvd does with its own potrf: *f > 0 is the
 * order of B's first leading minor that is not, reported as n + f. Z is
 * the eigenvectors' scratch anyway. */
static int factor_b(jmg_mp_call *c, const jmg_local_matrix *b, void *z,
                    jmg_mp_desc_t dz, int *f, jmg_error *err) {
  int rc = JMG_CUDA_TRY(
      cudaMemcpyAsync(z, b->data, (size_t)b->ld * (size_t)b->cols * c->elem,
                      cudaMemcpyDeviceToDevice, c->cuda.stream),
      c->cuda.op, err);
  rc = jmg_mp_potrf(c, rc, z, dz, f, err); /* collective whatever rc */
  if (*f > 0) *f += (int)c->a->n;
  jmg_trace_mark("potrf of B");
  return rc;
}

int jmg_mp_sygvd(const jmg_engine *e, const jmg_local_matrix *a,
                 const jmg_local_matrix *b, void *w, int want_vectors,
                 int *info, jmg_error *err) {
  (void)e;
  jmg_mp_call c;
  void *z = NULL;
  sygvd_descs d = {0};
  int rc = jmg_mp_begin(&c, JMG_OP_SYGVD, a, err);
  if (rc == 0 && (b->rows != a->rows || b->cols != a->cols ||
                  b->ld != a->ld || b->mb != a->mb || b->nb != a->nb ||
                  b->dtype != a->dtype))
    rc =
        jmg_error_set(err, JMG_EINTERNAL, "sygvd", "cuSOLVERMp",
                      "B's part (%lld x %lld, ld %lld) is not laid out as "
                      "A's (%lld x %lld, ld %lld)",
                      (long long)b->rows, (long long)b->cols, (long long)b->ld,
                      (long long)a->rows, (long long)a->cols, (long long)a->ld);
  if (rc == 0)
    rc = jmg_mp_take(&c, (size_t)a->ld * (size_t)a->cols * c.elem, &z, err);
  rc = jmg_mp_agree(&c, rc, err);
  if (rc == 0) rc = workspace(&c, z, &d, err);
  int f = 0;
  if (rc == 0) rc = factor_b(&c, b, z, d.dz, &f, err);
  if (rc == 0 && f == 0) {
    rc = jmg_mp_zero_info(&c, err);
    if (rc == 0)
      rc = jmg_mp_check(
          c.api->sygvd(c.handle, k_itype, k_jobz, CUBLAS_FILL_MODE_LOWER, a->n,
                       a->data, 1, 1, d.da, b->data, 1, 1, d.db, w, z, 1, 1,
                       d.dz, c.type, c.d_work, c.d_bytes, c.cuda.host_work,
                       c.h_bytes, c.cuda.d_info),
          &c, "cusolverMpSygvd", err);
    rc = jmg_mp_agree_info(&c, rc, "cusolverMpSygvd", &f, err);
    jmg_trace_mark("sygvd");
  }
  /* f != 0: no convergence or B not positive definite; w and A are left
   * to the ops layer (NaN). */
  if (rc == 0 && f == 0)
    rc = jmg_mp_eig_outputs(&c, w, want_vectors ? z : NULL, err);
  if (rc == 0) *info = f;
  return jmg_mp_end(&c, rc, err);
}
