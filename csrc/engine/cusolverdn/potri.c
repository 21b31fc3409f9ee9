/* potri with cuSOLVERDn: cusolverDnXpotrf, then the inverse from the factor
 * in the lower triangle, then the Hermitian fill of the upper triangle
 * (engine/cuda_hermitian.h) once the infos say both succeeded (dn.h). One
 * GPU: the contiguous layout the contract wants is the matrix as it lies.
 * The inverse from the factor L, two ways:
 * - N*N within INT_MAX: cusolverDn<t>potri (the 64-bit API has none).
 * - Beyond, where that routine fails (CUSOLVER_STATUS_INVALID_VALUE), and
 *   so does cusolverDnXtrtri on the whole matrix (docs/gpu-notes.md,
 *   "Memory on one H200"): M = L^-1 by LAPACK's blocked TRTRI (lower),
 *   cuBLAS's 64-bit trmm and trsm around cusolverDnXtrtri on each LAUUM_NB
 *   diagonal block, then
 *   A^-1 = M^H M by LAPACK's blocked LAUUM (lower) on cuBLAS's 64-bit trmm,
 *   gemm and herk, in place, with one LAUUM_NB^2 scratch for the diagonal
 *   blocks. */
#include <limits.h>

#include "common/trace.h"
#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cuda_hermitian.h"
#include "engine/cusolverdn/dn.h"

/* cusolverDn<t>potri's workspace, in elements of the matrix's type. */
static cusolverStatus_t potri_lwork(jmg_dn_call *c, int n, int *lwork) {
  const cublasFillMode_t lo = CUBLAS_FILL_MODE_LOWER;
  switch (c->a->dtype) {
    case JMG_F32:
      return cusolverDnSpotri_bufferSize(c->dn, lo, n, c->a_data, n, lwork);
    case JMG_F64:
      return cusolverDnDpotri_bufferSize(c->dn, lo, n, c->a_data, n, lwork);
    case JMG_C64:
      return cusolverDnCpotri_bufferSize(c->dn, lo, n, c->a_data, n, lwork);
    default:
      return cusolverDnZpotri_bufferSize(c->dn, lo, n, c->a_data, n, lwork);
  }
}

static cusolverStatus_t potri(jmg_dn_call *c, int n, void *work, int lwork,
                              int *info) {
  const cublasFillMode_t lo = CUBLAS_FILL_MODE_LOWER;
  switch (c->a->dtype) {
    case JMG_F32:
      return cusolverDnSpotri(c->dn, lo, n, c->a_data, n, work, lwork, info);
    case JMG_F64:
      return cusolverDnDpotri(c->dn, lo, n, c->a_data, n, work, lwork, info);
    case JMG_C64:
      return cusolverDnCpotri(c->dn, lo, n, c->a_data, n, work, lwork, info);
    default:
      return cusolverDnZpotri(c->dn, lo, n, c->a_data, n, work, lwork, info);
  }
}

/* The blocked LAUUM's block (LAPACK's default for ?lauum is 64; wider
 * blocks keep cuBLAS's GEMMs large). */
#define LAUUM_NB 512

static int large(const jmg_dist_matrix *a) {
  return a->n > 0 && a->n > INT_MAX / a->n;
}

/* cusolverDnXtrtri's workspace for one diagonal block of LAUUM_NB (or
 * n) of the large path, which the workspace query and the inversion ask
 * alike. */
static int trtri_block_work(jmg_dn_call *call, size_t *dev, size_t *host,
                            jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const size_t nb = a->n < LAUUM_NB ? (size_t)a->n : LAUUM_NB;
  return JMG_CUSOLVER_TRY(
      cusolverDnXtrtri_bufferSize(
          call->dn, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, (int64_t)nb,
          jmg_cuda_data_type(a->dtype), call->a_data, a->n, dev, host),
      call->cuda.op, err);
}

/* The call's workspace: [the solvers' (potrf's, and <t>potri's or the
 * large path's trtri, the larger) | the LAUUM's diagonal-block scratch
 * (large path)]; *lwork <t>potri's in elements. */
typedef struct potri_layout {
  size_t solver_at, solver_bytes, scratch_at;
  int lwork;
} potri_layout;

static int layout(jmg_dn_call *call, jmg_cuda_work *w, potri_layout *l,
                  jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  size_t dev = 0, host = 0;
  l->lwork = 0;
  int rc = jmg_dn_potrf_workspace(call, &l->solver_bytes, &w->host_bytes, err);
  if (rc == 0 && !large(a)) {
    rc = JMG_CUSOLVER_TRY(potri_lwork(call, (int)a->n, &l->lwork),
                          call->cuda.op, err);
    dev = (size_t)l->lwork * jmg_dtype_size(a->dtype);
  } else if (rc == 0) {
    rc = trtri_block_work(call, &dev, &host, err);
  }
  if (dev > l->solver_bytes) l->solver_bytes = dev;
  if (host > w->host_bytes) w->host_bytes = host;
  l->solver_at = jmg_cuda_work_part(w, l->solver_bytes);
  if (large(a)) {
    const size_t nb = a->n < LAUUM_NB ? (size_t)a->n : LAUUM_NB;
    l->scratch_at = jmg_cuda_work_part(w, nb * nb * jmg_dtype_size(a->dtype));
  }
  return rc;
}

int jmg_dn_potri_query(jmg_dn_call *call, const jmg_workspace_query *q,
                       size_t *bytes, jmg_error *err) {
  (void)q;
  jmg_cuda_work w = {0};
  potri_layout l;
  int rc = layout(call, &w, &l, err);
  /* With the Hermitian fill's scratch, taken after the inverse. */
  *bytes =
      jmg_cuda_work_alloc_bytes(&w) + jmg_cuda_hermitian_fill_bytes(call->a);
  return rc;
}

/* A^-1 = M^H M in the lower triangle of a (M = L^-1 there), LAPACK's ?lauum
 * (lower) by blocks of LAUUM_NB: for each diagonal block i, its row block
 * left of it becomes M_ii^H times itself, the block itself M_ii^H M_ii (from
 * a copy in `scratch` with its upper triangle zeroed), and both gain the
 * products of the column below them. */
static int lauum_lower(jmg_dn_call *call, cublasHandle_t blas, void *scratch,
                       jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const jmg_dtype t = a->dtype;
  const int64_t n = a->n, lda = a->n;
  const size_t es = jmg_dtype_size(t);
  const cublasOperation_t h =
      jmg_dtype_is_complex(t) ? CUBLAS_OP_C : CUBLAS_OP_T;
  char *base = call->a_data;
#define AT(r, c) (base + ((size_t)(r) + (size_t)(c) * (size_t)lda) * es)
  int rc = 0;
  for (int64_t i = 0; rc == 0 && i < n; i += LAUUM_NB) {
    const int64_t ib = n - i < LAUUM_NB ? n - i : LAUUM_NB;
    const int64_t below = n - i - ib;
    if (i > 0)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_trmm_left_64(blas, t, CUBLAS_FILL_MODE_LOWER, h, ib, i,
                                  AT(i, i), lda, AT(i, 0), lda),
          call->cuda.op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaMemcpy2DAsync(scratch, (size_t)ib * es, AT(i, i),
                            (size_t)lda * es, (size_t)ib * es, (size_t)ib,
                            cudaMemcpyDeviceToDevice, call->cuda.stream),
          call->cuda.op, err);
    for (int64_t j = 1; rc == 0 && j < ib; ++j)
      rc = JMG_CUDA_TRY(cudaMemsetAsync((char *)scratch + (size_t)(j * ib) * es,
                                        0, (size_t)j * es, call->cuda.stream),
                        call->cuda.op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_herk_64(blas, t, CUBLAS_FILL_MODE_LOWER, ib, ib, scratch,
                             ib, 0.0, AT(i, i), lda),
          call->cuda.op, err);
    if (rc == 0 && below > 0 && i > 0)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_gemm_64(blas, t, h, CUBLAS_OP_N, ib, i, below, 1.0,
                             AT(i + ib, i), lda, AT(i + ib, 0), lda, 1.0,
                             AT(i, 0), lda),
          call->cuda.op, err);
    if (rc == 0 && below > 0)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_herk_64(blas, t, CUBLAS_FILL_MODE_LOWER, ib, below,
                             AT(i + ib, i), lda, 1.0, AT(i, i), lda),
          call->cuda.op, err);
  }
#undef AT
  return rc;
}

/* M = L^-1 in place in the lower triangle of a, LAPACK's ?trtri (lower) by
 * blocks of LAUUM_NB, from the last block column to the first: the block
 * below each diagonal block becomes -(inverted trailing part) times it
 * times the diagonal block's inverse, then the diagonal block is inverted
 * (cusolverDnXtrtri on that block alone, its info in d_info[1] when it
 * finds a zero on the diagonal). */
static int trtri_lower(jmg_dn_call *call, cublasHandle_t blas, void *work,
                       size_t dev, jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const jmg_dtype t = a->dtype;
  const int64_t n = a->n, lda = a->n;
  const size_t es = jmg_dtype_size(t);
  char *base = call->a_data;
#define AT(r, c) (base + ((size_t)(r) + (size_t)(c) * (size_t)lda) * es)
  int rc = 0;
  const int64_t last = (n - 1) / LAUUM_NB * LAUUM_NB;
  for (int64_t j = last; rc == 0 && j >= 0; j -= LAUUM_NB) {
    const int64_t jb = n - j < LAUUM_NB ? n - j : LAUUM_NB;
    const int64_t below = n - j - jb;
    if (below > 0) {
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_trmm_left_64(blas, t, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                  below, jb, AT(j + jb, j + jb), lda,
                                  AT(j + jb, j), lda),
          call->cuda.op, err);
      if (rc == 0)
        rc = JMG_CUBLAS_TRY(
            jmg_cublas_trsm_right_64(blas, t, CUBLAS_FILL_MODE_LOWER, below, jb,
                                     -1.0, AT(j, j), lda, AT(j + jb, j), lda),
            call->cuda.op, err);
    }
    if (rc == 0)
      rc = JMG_CUSOLVER_TRY(
          cusolverDnXtrtri(call->dn, CUBLAS_FILL_MODE_LOWER,
                           CUBLAS_DIAG_NON_UNIT, jb, jmg_cuda_data_type(t),
                           AT(j, j), lda, work, dev, call->cuda.host_work,
                           call->cuda.host_bytes, call->cuda.d_info + 1),
          call->cuda.op, err);
  }
#undef AT
  return rc;
}

/* The inverse from the factor beyond cusolverDn<t>potri's sizes (above). */
static int inverse_large(jmg_dn_call *call, const potri_layout *l,
                         jmg_error *err) {
  const jmg_cuda_call *c = &call->cuda;
  size_t dev = 0, host = 0;
  int rc = trtri_block_work(call, &dev, &host, err);
  if (rc == 0)
    rc = trtri_lower(call, call->blas, jmg_cuda_call_part(c, l->solver_at), dev,
                     err);
  if (rc == 0)
    rc = lauum_lower(call, call->blas, jmg_cuda_call_part(c, l->scratch_at),
                     err);
  return rc;
}

/* The inverse from the factor, in the lower triangle; its info in
 * d_info[1]. On a factor that failed it computes garbage, harmlessly: the
 * ops layer replaces A by NaN on info != 0. Running it saves a wait. */
static int inverse(jmg_dn_call *call, const potri_layout *l, jmg_error *err) {
  const jmg_cuda_call *c = &call->cuda;
  if (large(call->a)) return inverse_large(call, l, err);
  return JMG_CUSOLVER_TRY(
      potri(call, (int)call->a->n, jmg_cuda_call_part(c, l->solver_at),
            l->lwork, c->d_info + 1),
      c->op, err);
}

int jmg_dn_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                 jmg_error *err) {
  (void)e;
  static const char *const names[] = {"cusolverDnXpotrf", "cusolverDn<t>potri"};
  static const char *const names_large[] = {"cusolverDnXpotrf",
                                            "cusolverDnXtrtri"};
  jmg_dn_call call;
  jmg_cuda_work w = {0};
  potri_layout l = {0};
  int h_info[2] = {0, 0};
  int rc = jmg_dn_begin(&call, JMG_OP_POTRI, a, err);
  if (rc == 0) rc = layout(&call, &w, &l, err);
  if (rc == 0) rc = jmg_cuda_call_take(&call.cuda, &w, err);
  if (rc == 0)
    rc = jmg_dn_potrf(&call, jmg_cuda_call_part(&call.cuda, l.solver_at),
                      l.solver_bytes, 0, err);
  if (rc == 0) rc = inverse(&call, &l, err);
  rc = jmg_cuda_call_info(&call.cuda, rc, h_info, 2,
                          large(a) ? names_large : names, err);
  jmg_trace_mark(large(a) ? "potrf+trtri+lauum" : "potrf+potri");
  *info = h_info[0] != 0 ? h_info[0] : h_info[1];
  if (rc == 0 && *info == 0) {
    rc = jmg_cuda_hermitian_fill(a, &call.blas, err);
    jmg_trace_mark("fill");
    /* The fill takes its scratch after A holds the inverse: a lack of
     * memory then is not the JMG_ENOMEM of the contract (nothing written),
     * on which the ops layer would call potri again, on the inverse. */
    if (rc == -(int)JMG_ENOMEM) {
      err->code = JMG_EINTERNAL;
      rc = -(int)JMG_EINTERNAL;
    }
  }
  return jmg_dn_end(&call, rc, err);
}
