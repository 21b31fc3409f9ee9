/* qr on cuSOLVERMp (engine.h's local qr): every rank factors its own rows
 * of A where they lie, with cusolverMpGeqrf and cusolverMpOrgqr.
 *
 * The layout. The engine gets this rank's columns of Aᵀ (n x lc, ld n: its
 * lc rows of A, read column-major). cuBLAS geam turns them into X, those
 * rows as an lc x n column-major part (ld lc), and the parts make an
 * m x n matrix on a ranks x 1 grid with square b x b blocks, b a divisor
 * of lc (qr_block): rank p's part of that block-cyclic layout is its global
 * row blocks p, p + ranks, ..., lc / b of them, which X fills. The matrix
 * cuSOLVERMp factors is so Π A for a permutation Π of A's rows, and the QR
 * of Π A is (Π Q) R: the same R, and Q's rows where A's rows were. Nothing
 * moves between ranks for A or Q.
 *
 * R. After geqrf, R's row i (global row i of Π A: block i / b, on rank
 * (i / b) % ranks) lies in its owner's X, the reflectors left of the
 * diagonal. Each owner writes its blocks of R's rows transposed into Rᵀ (an
 * n x n buffer on every rank: geam), zeroes their entries left of the
 * diagonal, and broadcasts them (one NCCL broadcast per block of rows, in
 * one group); every rank then copies its own columns of Rᵀ (R's rows
 * r * rr ...) into rt.
 *
 * Memory beside A's part and rt: X (one part), Rᵀ whole (n x n), tau (n),
 * and cuSOLVERMp's workspace. Compiled against cuSOLVERMp 0.8.0's header;
 * not yet run on a GPU (tests/gpu/test_gpu_qr.py runs it where cuSOLVERMp
 * loads). */
#include <limits.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/handles.h"
#include "engine/cusolvermp/mp.h"

/* The blocks: the largest divisor of the part's rows lc at most 256. */
static int64_t qr_block(int64_t lc) {
  for (int64_t b = lc < 256 ? lc : 256; b > 1; --b)
    if (lc % b == 0) return b;
  return 1;
}

int jmg_mp_qr(const jmg_engine *e, const jmg_local_matrix *a, void *rt,
              int64_t m, int64_t rr, int *info, jmg_error *err) {
  (void)e;
  const char *op = "qr";
  const int64_t n = a->n, lc = a->cols, ranks = a->ranks;
  const int64_t b = qr_block(lc);
  /* A (not Aᵀ) on the ranks x 1 grid: this rank's part is X. */
  jmg_local_matrix g = *a;
  g.grid_rows = a->ranks;
  g.grid_cols = 1;
  g.mb = g.nb = b;
  g.rows = lc;
  g.cols = n;
  g.ld = lc;
  mp_call c;
  int rc = 0;
  if (a->rows != n || a->ld != n || lc * ranks != m || m < n)
    rc = jmg_error_set(err, JMG_EINTERNAL, op, "cuSOLVERMp",
                       "rank %d holds %lld x %lld (ld %lld) of Aᵀ, %lld x "
                       "%lld over %lld ranks: not its contiguous part",
                       a->rank, (long long)a->rows, (long long)lc,
                       (long long)a->ld, (long long)n, (long long)m,
                       (long long)ranks);
  if (rc == 0 && (lc > INT_MAX || n > INT_MAX))
    rc = jmg_error_set(err, JMG_EUNSUPPORTED, op, "cublasXgeam",
                       "a part of %lld x %lld passes cuBLAS's 32-bit sizes",
                       (long long)lc, (long long)n);
  /* mp_begin_mn's checks are g's; every rank calls it (a failure here is
   * told to the others by the agreement below). */
  int brc = mp_begin_mn(&c, op, &g, m, rc == 0 ? err : &(jmg_error){0});
  if (rc == 0) rc = brc;
  const size_t es = c.elem;
  void *x = NULL, *tau = NULL, *rtw = NULL;
  int *d_info = NULL;
  if (rc == 0) rc = mp_take(&c, (size_t)lc * (size_t)n * es, &x, err);
  if (rc == 0) rc = mp_take(&c, (size_t)n * es, &tau, err);
  if (rc == 0) rc = mp_take(&c, (size_t)n * (size_t)n * es, &rtw, err);
  if (rc == 0) rc = mp_take(&c, sizeof(int), (void **)&d_info, err);
  if (rc == 0) rc = mp_handles(&c, err);
  rc = mp_agree(&c, rc, err);

  const jmg_mp_api *api = c.api;
  jmg_mp_desc_t dx = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
    rc = mp_grid(&c, err);
    if (rc == 0) rc = mp_desc(&c, m, n, b, b, lc, &dx, err);
    if (rc == 0)
      rc = mp_check(api->geqrf_buffer_size(c.handle, m, n, x, 1, 1, dx, c.type,
                                           &d1, &h1),
                    &c, "cusolverMpGeqrf_bufferSize", err);
    if (rc == 0)
      rc = mp_check(api->orgqr_buffer_size(c.handle, m, n, n, x, 1, 1, dx, tau,
                                           c.type, &d2, &h2),
                    &c, "cusolverMpOrgqr_bufferSize", err);
    if (rc == 0)
      rc = mp_take_work(&c, d1 > d2 ? d1 : d2, h1 > h2 ? h1 : h2, err);
    rc = mp_agree(&c, rc, err);
    jmg_trace_mark("engine start");
  }
  cublasHandle_t blas = c.blas != NULL ? c.blas->blas[0] : NULL;
  /* X = this rank's rows of A. */
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(cublasSetStream(blas, c.stream), op, err);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(jmg_cublas_geam(blas, a->dtype, CUBLAS_OP_T, (int)lc,
                                        (int)n, a->data, (int)n, x, (int)lc),
                        op, err);
  int s = 0;
  if (rc == 0) {
    rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream), op,
                      err);
    if (rc == 0)
      rc = mp_check(api->geqrf(c.handle, m, n, x, 1, 1, dx, tau, c.type,
                               c.d_work, c.d_bytes, c.h_work, c.h_bytes,
                               d_info),
                    &c, "cusolverMpGeqrf", err);
    rc = mp_agree_info(&c, rc, d_info, "cusolverMpGeqrf", &s, err);
    jmg_trace_mark("geqrf");
    if (rc == 0 && s != 0)
      rc = jmg_error_set(err, JMG_ECUSOLVER, op, "cusolverMpGeqrf", "info %d",
                         s);
  }
  /* Rᵀ on every rank: each owner's blocks of R's rows, then broadcasts. */
  const int64_t nblocks = (n + b - 1) / b;
  int lrc = 0;
  if (rc == 0)
    lrc = JMG_CUDA_TRY(cudaMemsetAsync(rtw, 0, (size_t)n * (size_t)n * es,
                                       c.stream),
                       op, err);
  for (int64_t kb = 0; rc == 0 && lrc == 0 && kb < nblocks; ++kb) {
    if (kb % ranks != a->rank) continue;
    const int64_t i0 = kb * b, len = n - i0 < b ? n - i0 : b;
    const int64_t lr = (kb / ranks) * b; /* its first row in X */
    char *col = (char *)rtw + (size_t)i0 * (size_t)n * es;
    lrc = JMG_CUBLAS_TRY(
        jmg_cublas_geam(blas, a->dtype, CUBLAS_OP_T, (int)n, (int)len,
                        (char *)x + (size_t)lr * es, (int)lc, col, (int)n),
        op, err);
    /* Rᵀ's column i (R's row i): its rows above i are the reflectors. */
    for (int64_t j = 0; lrc == 0 && j < len; ++j)
      if (i0 + j > 0)
        lrc = JMG_CUDA_TRY(cudaMemsetAsync(col + (size_t)j * (size_t)n * es, 0,
                                           (size_t)(i0 + j) * es, c.stream),
                           op, err);
  }
  if (rc == 0) rc = mp_agree(&c, lrc, err);
  if (rc == 0) {
    const jmg_comm_ops *ops = a->comm_ops;
    rc = ops->group_begin(op, err);
    for (int64_t kb = 0; rc == 0 && kb < nblocks; ++kb) {
      const int64_t i0 = kb * b, len = n - i0 < b ? n - i0 : b;
      rc = ops->bcast(a->comm, (char *)rtw + (size_t)i0 * (size_t)n * es,
                      (size_t)len * (size_t)n * es, (int)(kb % ranks),
                      a->device_ctx, op, err);
    }
    jmg_error ignored;
    int erc = ops->group_end(op, rc == 0 ? err : &ignored);
    if (rc == 0) rc = erc;
    jmg_trace_mark("R");
  }
  /* This rank's columns of Rᵀ (R's rows r * rr ...), zero past n. */
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemsetAsync(rt, 0, (size_t)n * (size_t)rr * es,
                                      c.stream),
                      op, err);
  const int64_t first = (int64_t)a->rank * rr;
  const int64_t here = n - first < rr ? (n - first > 0 ? n - first : 0) : rr;
  if (rc == 0 && here > 0)
    rc = JMG_CUDA_TRY(
        cudaMemcpyAsync(rt, (char *)rtw + (size_t)first * (size_t)n * es,
                        (size_t)here * (size_t)n * es, cudaMemcpyDeviceToDevice,
                        c.stream),
        op, err);
  /* X = Q's rows, then A's part = their transpose. */
  if (rc == 0) {
    rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream), op,
                      err);
    if (rc == 0)
      rc = mp_check(api->orgqr(c.handle, m, n, n, x, 1, 1, dx, tau, c.type,
                               c.d_work, c.d_bytes, c.h_work, c.h_bytes,
                               d_info),
                    &c, "cusolverMpOrgqr", err);
    rc = mp_agree_info(&c, rc, d_info, "cusolverMpOrgqr", &s, err);
    jmg_trace_mark("orgqr");
    if (rc == 0 && s != 0)
      rc = jmg_error_set(err, JMG_ECUSOLVER, op, "cusolverMpOrgqr", "info %d",
                         s);
  }
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(jmg_cublas_geam(blas, a->dtype, CUBLAS_OP_T, (int)n,
                                        (int)lc, x, (int)lc, a->data, (int)n),
                        op, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(c.stream), op, err);
  if (rc == 0) *info = 0;
  mp_end(&c);
  return rc;
}
