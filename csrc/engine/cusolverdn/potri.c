/* potri with cuSOLVERDn: cusolverDnXpotrf, then the inverse from the factor
 * in the lower triangle, then the Hermitian fill of the upper triangle
 * (engine/cuda_hermitian.h) once the infos say both succeeded (dn.h). One
 * GPU: the contiguous layout the contract wants is the matrix as it lies.
 * The inverse from the factor L, two ways:
 * - N*N within INT_MAX: cusolverDn<t>potri (the 64-bit API has none).
 * - Beyond, where that routine fails (CUSOLVER_STATUS_INVALID_VALUE: N =
 *   46,336 ran and 46,400 failed on an H200, 2026-11-25), and so does
 *   cusolverDnXtrtri on the whole matrix (same N, same status, the same
 *   day): M = L^-1 by LAPACK's blocked TRTRI (lower), cuBLAS's 64-bit trmm
 *   and trsm around cusolverDnXtrtri on each LAUUM_NB diagonal block, then
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

static cusolverStatus_t potri(jmg_dn_call *c, int n, int lwork, int *info) {
  const cublasFillMode_t lo = CUBLAS_FILL_MODE_LOWER;
  switch (c->a->dtype) {
    case JMG_F32:
      return cusolverDnSpotri(c->dn, lo, n, c->a_data, n, c->work, lwork, info);
    case JMG_F64:
      return cusolverDnDpotri(c->dn, lo, n, c->a_data, n, c->work, lwork, info);
    case JMG_C64:
      return cusolverDnCpotri(c->dn, lo, n, c->a_data, n, c->work, lwork, info);
    default:
      return cusolverDnZpotri(c->dn, lo, n, c->a_data, n, c->work, lwork, info);
  }
}

/* The blocked LAUUM's block (LAPACK's default for ?lauum is 64; wider
 * blocks keep cuBLAS's GEMMs large). */
#define LAUUM_NB 512
#define POTRI_ALIGN 256

static int large(const jmg_dist_matrix *a) {
  return a->n > 0 && a->n > INT_MAX / a->n;
}

static size_t aligned(size_t bytes) {
  return (bytes + POTRI_ALIGN - 1) / POTRI_ALIGN * POTRI_ALIGN;
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
      call->op, err);
}

int jmg_dn_potri_workspace(jmg_dn_call *call, size_t *device_bytes,
                           size_t *host_bytes, int *lwork, jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  *lwork = 0;
  int rc = jmg_dn_potrf_workspace(call, device_bytes, host_bytes, err);
  if (rc != 0) return rc;
  if (!large(a)) {
    rc = JMG_CUSOLVER_TRY(potri_lwork(call, (int)a->n, lwork), call->op, err);
    const size_t potri_bytes = (size_t)*lwork * jmg_dtype_size(a->dtype);
    if (potri_bytes > *device_bytes) *device_bytes = potri_bytes;
    return rc;
  }
  size_t dev = 0, host = 0;
  const size_t nb = a->n < LAUUM_NB ? (size_t)a->n : LAUUM_NB;
  rc = trtri_block_work(call, &dev, &host, err);
  if (dev > *device_bytes) *device_bytes = dev;
  if (host > *host_bytes) *host_bytes = host;
  /* [the solvers' workspace | the LAUUM's diagonal-block scratch] */
  *device_bytes = aligned(*device_bytes) + nb * nb * jmg_dtype_size(a->dtype);
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
          call->op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaMemcpy2DAsync(scratch, (size_t)ib * es, AT(i, i),
                            (size_t)lda * es, (size_t)ib * es, (size_t)ib,
                            cudaMemcpyDeviceToDevice, call->stream),
          call->op, err);
    for (int64_t j = 1; rc == 0 && j < ib; ++j)
      rc = JMG_CUDA_TRY(cudaMemsetAsync((char *)scratch + (size_t)(j * ib) * es,
                                        0, (size_t)j * es, call->stream),
                        call->op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_herk_64(blas, t, CUBLAS_FILL_MODE_LOWER, ib, ib, scratch,
                             ib, 0.0, AT(i, i), lda),
          call->op, err);
    if (rc == 0 && below > 0 && i > 0)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_gemm_64(blas, t, h, CUBLAS_OP_N, ib, i, below, 1.0,
                             AT(i + ib, i), lda, AT(i + ib, 0), lda, 1.0,
                             AT(i, 0), lda),
          call->op, err);
    if (rc == 0 && below > 0)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_herk_64(blas, t, CUBLAS_FILL_MODE_LOWER, ib, below,
                             AT(i + ib, i), lda, 1.0, AT(i, i), lda),
          call->op, err);
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
static int trtri_lower(jmg_dn_call *call, cublasHandle_t blas, size_t dev,
                       jmg_error *err) {
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
          call->op, err);
      if (rc == 0)
        rc = JMG_CUBLAS_TRY(
            jmg_cublas_trsm_right_64(blas, t, CUBLAS_FILL_MODE_LOWER, below, jb,
                                     -1.0, AT(j, j), lda, AT(j + jb, j), lda),
            call->op, err);
    }
    if (rc == 0)
      rc = JMG_CUSOLVER_TRY(
          cusolverDnXtrtri(call->dn, CUBLAS_FILL_MODE_LOWER,
                           CUBLAS_DIAG_NON_UNIT, jb, jmg_cuda_data_type(t),
                           AT(j, j), lda, call->work, dev, call->host_work,
                           call->host_bytes, call->d_info + 1),
          call->op, err);
  }
#undef AT
  return rc;
}

/* The inverse from the factor beyond cusolverDn<t>potri's sizes (above). */
static int inverse_large(jmg_dn_call *call, jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const size_t nb = a->n < LAUUM_NB ? (size_t)a->n : LAUUM_NB;
  size_t dev = 0, host = 0;
  int rc = trtri_block_work(call, &dev, &host, err);
  cublasHandle_t blas = call->h->blas[0];
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(cublasSetStream(blas, call->stream), call->op, err);
  if (rc == 0) rc = trtri_lower(call, blas, dev, err);
  /* The scratch sits after the solvers' workspace (jmg_dn_potri_workspace). */
  void *scratch = (char *)call->work + call->work_bytes -
                  nb * nb * jmg_dtype_size(a->dtype);
  if (rc == 0) rc = lauum_lower(call, blas, scratch, err);
  return rc;
}

int jmg_dn_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                 jmg_error *err) {
  (void)e;
  const char *op = "potri";
  static const char *const names[] = {"cusolverDnXpotrf", "cusolverDn<t>potri"};
  static const char *const names_large[] = {"cusolverDnXpotrf",
                                            "cusolverDnXtrtri"};
  jmg_dn_call call;
  size_t dev_bytes = 0, host_bytes = 0;
  int lwork = 0;
  int h_info[2] = {0, 0};
  int rc = jmg_dn_begin_call(&call, op, a, err);
  if (rc == 0)
    rc = jmg_dn_potri_workspace(&call, &dev_bytes, &host_bytes, &lwork, err);
  if (rc == 0) rc = jmg_dn_take_workspace(&call, dev_bytes, host_bytes, err);
  jmg_trace_mark("workspace");
  if (rc == 0) rc = jmg_dn_potrf(&call, 0, err);
  /* On a factor that failed the inverse computes garbage, harmlessly: the
   * ops layer replaces A by NaN on info != 0. Running it saves a wait. */
  if (rc == 0 && !large(a))
    rc = JMG_CUSOLVER_TRY(potri(&call, (int)a->n, lwork, call.d_info + 1), op,
                          err);
  if (rc == 0 && large(a)) rc = inverse_large(&call, err);
  if (rc == 0)
    rc =
        jmg_dn_read_info(&call, h_info, 2, large(a) ? names_large : names, err);
  jmg_trace_mark(large(a) ? "potrf+trtri+lauum" : "potrf+potri");
  *info = h_info[0] != 0 ? h_info[0] : h_info[1];
  if (rc == 0 && *info == 0) {
    rc = jmg_cuda_hermitian_fill(a, &call.h->blas[0], err);
    jmg_trace_mark("fill");
    /* The fill takes its scratch after A holds the inverse: a lack of
     * memory then is not the JMG_ENOMEM of the contract (nothing written),
     * on which the ops layer would call potri again, on the inverse. */
    if (rc == -(int)JMG_ENOMEM) {
      err->code = JMG_EINTERNAL;
      rc = -(int)JMG_EINTERNAL;
    }
  }
  jmg_dn_end_call(&call);
  return rc;
}
