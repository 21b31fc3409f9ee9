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
 * and cuSOLVERMp's workspace. tests/gpu/test_gpu_qr.py runs it where
 * cuSOLVERMp loads. */
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

/* One call's buffers and sizes. */
typedef struct qr_call {
  int64_t n, lc, ranks, b; /* A's columns, this rank's rows, ranks, blocks */
  int64_t m, rr;           /* A's rows; R's rows per rank in rt */
  void *x, *tau, *rtw;     /* X (lc x n), tau (n), Rᵀ whole (n x n) */
  jmg_mp_desc_t dx;
  cublasHandle_t blas;
} qr_call;

/* Checks this rank's part of Aᵀ, and makes g the view of A (not Aᵀ) on the
 * ranks x 1 grid whose part on this rank is X. */
static int check_part(const jmg_local_matrix *a, const qr_call *q,
                      jmg_local_matrix *g, jmg_error *err) {
  *g = *a;
  g->grid_rows = a->ranks;
  g->grid_cols = 1;
  g->mb = g->nb = q->b;
  g->rows = q->lc;
  g->cols = q->n;
  g->ld = q->lc;
  if (a->rows != q->n || a->ld != q->n || q->lc * q->ranks != q->m ||
      q->m < q->n)
    return jmg_error_set(err, JMG_EINTERNAL, "qr", "cuSOLVERMp",
                         "rank %d holds %lld x %lld (ld %lld) of Aᵀ, %lld x "
                         "%lld over %lld ranks: not its contiguous part",
                         a->rank, (long long)a->rows, (long long)q->lc,
                         (long long)a->ld, (long long)q->n, (long long)q->m,
                         (long long)q->ranks);
  if (q->lc > INT_MAX || q->n > INT_MAX)
    return jmg_error_set(err, JMG_EUNSUPPORTED, "qr", "cublasXgeam",
                         "a part of %lld x %lld passes cuBLAS's 32-bit sizes",
                         (long long)q->lc, (long long)q->n);
  return 0;
}

/* Step 1: X, tau, Rᵀ and the cuBLAS handle. */
static int take_buffers(jmg_mp_call *c, qr_call *q, jmg_error *err) {
  const size_t es = c->elem;
  int rc = jmg_mp_take(c, (size_t)q->lc * (size_t)q->n * es, &q->x, err);
  if (rc == 0) rc = jmg_mp_take(c, (size_t)q->n * es, &q->tau, err);
  if (rc == 0)
    rc = jmg_mp_take(c, (size_t)q->n * (size_t)q->n * es, &q->rtw, err);
  if (rc == 0) rc = jmg_mp_handles(c, err);
  if (rc == 0) q->blas = c->cuda.h->blas[0];
  return rc;
}

/* Step 2: the grid, X's descriptor, geqrf's and orgqr's workspace. */
static int workspace(jmg_mp_call *c, qr_call *q, jmg_error *err) {
  const jmg_mp_api *api = c->api;
  const int64_t m = q->m, n = q->n;
  size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
  int rc = jmg_mp_grid(c, err);
  if (rc == 0) rc = jmg_mp_desc(c, m, n, q->b, q->b, q->lc, &q->dx, err);
  if (rc == 0)
    rc = jmg_mp_check(api->geqrf_buffer_size(c->handle, m, n, q->x, 1, 1, q->dx,
                                             c->type, &d1, &h1),
                      c, "cusolverMpGeqrf_bufferSize", err);
  if (rc == 0)
    rc = jmg_mp_check(api->orgqr_buffer_size(c->handle, m, n, n, q->x, 1, 1,
                                             q->dx, q->tau, c->type, &d2, &h2),
                      c, "cusolverMpOrgqr_bufferSize", err);
  return jmg_mp_take_work(c, rc, d1, h1, d2, h2, err);
}

/* The library's geqrf (orgqr 0) or orgqr (1) on X where rc (the outcome
 * so far) is 0, its info agreed whatever rc (collective); a nonzero info
 * is an error (a Householder QR does not fail numerically). */
static int factor_step(jmg_mp_call *c, qr_call *q, int rc, int orgqr,
                       jmg_error *err) {
  const jmg_mp_api *api = c->api;
  const char *name = orgqr ? "cusolverMpOrgqr" : "cusolverMpGeqrf";
  int s = 0;
  if (rc == 0) rc = jmg_mp_zero_info(c, err);
  if (rc == 0)
    rc = jmg_mp_check(
        orgqr ? api->orgqr(c->handle, q->m, q->n, q->n, q->x, 1, 1, q->dx,
                           q->tau, c->type, c->d_work, c->d_bytes,
                           c->cuda.host_work, c->h_bytes, c->cuda.d_info)
              : api->geqrf(c->handle, q->m, q->n, q->x, 1, 1, q->dx, q->tau,
                           c->type, c->d_work, c->d_bytes, c->cuda.host_work,
                           c->h_bytes, c->cuda.d_info),
        c, name, err);
  rc = jmg_mp_agree_info(c, rc, name, &s, err);
  jmg_trace_mark(orgqr ? "orgqr" : "geqrf");
  if (rc == 0 && s != 0)
    rc = jmg_error_set(err, JMG_ECUSOLVER, c->cuda.op, name, "info %d", s);
  return rc;
}

/* Rᵀ on every rank: each owner writes its blocks of R's rows transposed
 * (the reflectors left of the diagonal zeroed), then every block is
 * broadcast from its owner (one NCCL group). */
static int gather_rt(jmg_mp_call *c, qr_call *q, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const char *op = c->cuda.op;
  const size_t es = c->elem;
  const int64_t n = q->n, b = q->b;
  const int64_t nblocks = (n + b - 1) / b;
  int lrc = JMG_CUDA_TRY(
      cudaMemsetAsync(q->rtw, 0, (size_t)n * (size_t)n * es, c->cuda.stream),
      op, err);
  for (int64_t kb = 0; lrc == 0 && kb < nblocks; ++kb) {
    if (kb % q->ranks != a->rank) continue;
    const int64_t i0 = kb * b, len = n - i0 < b ? n - i0 : b;
    const int64_t lr = (kb / q->ranks) * b; /* its first row in X */
    char *col = (char *)q->rtw + (size_t)i0 * (size_t)n * es;
    lrc =
        JMG_CUBLAS_TRY(jmg_cublas_geam(q->blas, a->dtype, CUBLAS_OP_T, (int)n,
                                       (int)len, (char *)q->x + (size_t)lr * es,
                                       (int)q->lc, col, (int)n),
                       op, err);
    /* Rᵀ's column i (R's row i): its rows above i are the reflectors. */
    for (int64_t j = 0; lrc == 0 && j < len; ++j)
      if (i0 + j > 0)
        lrc =
            JMG_CUDA_TRY(cudaMemsetAsync(col + (size_t)j * (size_t)n * es, 0,
                                         (size_t)(i0 + j) * es, c->cuda.stream),
                         op, err);
  }
  int rc = jmg_mp_agree(c, lrc, err);
  if (rc != 0) return rc;
  const jmg_comm_ops *ops = a->comm_ops;
  rc = ops->group_begin(op, err);
  for (int64_t kb = 0; rc == 0 && kb < nblocks; ++kb) {
    const int64_t i0 = kb * b, len = n - i0 < b ? n - i0 : b;
    rc = ops->bcast(a->comm, (char *)q->rtw + (size_t)i0 * (size_t)n * es,
                    (size_t)len * (size_t)n * es, (int)(kb % q->ranks),
                    a->device_ctx, op, err);
  }
  jmg_error ignored;
  int erc = ops->group_end(op, rc == 0 ? err : &ignored);
  if (rc == 0) rc = erc;
  jmg_trace_mark("R");
  return rc;
}

/* This rank's columns of Rᵀ (R's rows r * rr ...) into rt, zero past n. */
static int rt_columns(jmg_mp_call *c, const qr_call *q, void *rt,
                      jmg_error *err) {
  const size_t es = c->elem;
  const int64_t n = q->n, rr = q->rr;
  int rc = JMG_CUDA_TRY(
      cudaMemsetAsync(rt, 0, (size_t)n * (size_t)rr * es, c->cuda.stream),
      c->cuda.op, err);
  const int64_t first = (int64_t)c->a->rank * rr;
  const int64_t here = n - first < rr ? (n - first > 0 ? n - first : 0) : rr;
  if (rc == 0 && here > 0)
    rc = JMG_CUDA_TRY(
        cudaMemcpyAsync(rt, (char *)q->rtw + (size_t)first * (size_t)n * es,
                        (size_t)here * (size_t)n * es, cudaMemcpyDeviceToDevice,
                        c->cuda.stream),
        c->cuda.op, err);
  return rc;
}

/* A's part = X's transpose (to 0: X = this rank's rows of A, from it). */
static int transpose_part(jmg_mp_call *c, const qr_call *q, int to_a,
                          jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const int n = (int)q->n, lc = (int)q->lc;
  return JMG_CUBLAS_TRY(to_a ? jmg_cublas_geam(q->blas, a->dtype, CUBLAS_OP_T,
                                               n, lc, q->x, lc, a->data, n)
                             : jmg_cublas_geam(q->blas, a->dtype, CUBLAS_OP_T,
                                               lc, n, a->data, n, q->x, lc),
                        c->cuda.op, err);
}

int jmg_mp_qr(const jmg_engine *e, const jmg_local_matrix *a, void *rt,
              int64_t m, int64_t rr, int *info, jmg_error *err) {
  (void)e;
  qr_call q = {.n = a->n, .lc = a->cols, .ranks = a->ranks, .m = m, .rr = rr};
  q.b = qr_block(q.lc);
  jmg_local_matrix g; /* A (not Aᵀ) on the ranks x 1 grid: the part is X */
  jmg_mp_call c;
  int rc = check_part(a, &q, &g, err);
  /* jmg_mp_begin_mn's checks are g's; every rank calls it (a failure here
   * is told to the others by the agreement below). */
  int brc =
      jmg_mp_begin_mn(&c, JMG_OP_QR, &g, m, rc == 0 ? err : &(jmg_error){0});
  if (rc == 0) rc = brc;
  if (rc == 0) rc = take_buffers(&c, &q, err);
  rc = jmg_mp_agree(&c, rc, err);
  if (rc == 0) rc = workspace(&c, &q, err);
  /* From here every rank is past the agreements: a failure of its own
   * still takes part in the next collective (factor_step's). */
  const int ready = rc == 0;
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(cublasSetStream(q.blas, c.cuda.stream), c.cuda.op, err);
  if (rc == 0) rc = transpose_part(&c, &q, 0, err);
  if (ready) rc = factor_step(&c, &q, rc, 0, err);
  if (rc == 0) rc = gather_rt(&c, &q, err);
  if (rc == 0) rc = rt_columns(&c, &q, rt, err);
  /* X = Q's rows, then A's part = their transpose. */
  if (ready) rc = factor_step(&c, &q, rc, 1, err);
  if (rc == 0) rc = transpose_part(&c, &q, 1, err);
  if (rc == 0) rc = jmg_cuda_call_sync(&c.cuda, err);
  if (rc == 0) *info = 0;
  return jmg_mp_end(&c, rc, err);
}
