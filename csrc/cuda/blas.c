#include "cuda/blas.h"

#include "cuda/dtype.h"

cublasStatus_t jmg_cublas_gemm(cublasHandle_t h, jmg_dtype t,
                               cublasOperation_t op_a, cublasOperation_t op_b,
                               int m, int n, int k, double alpha, const void *A,
                               int lda, const void *B, int ldb, double beta,
                               void *C, int ldc) {
  const jmg_cuda_scalar al = jmg_cuda_scalar_of(t, alpha),
                        be = jmg_cuda_scalar_of(t, beta);
  switch (t) {
    case JMG_F32:
      return cublasSgemm(h, op_a, op_b, m, n, k, &al.s, A, lda, B, ldb, &be.s,
                         C, ldc);
    case JMG_F64:
      return cublasDgemm(h, op_a, op_b, m, n, k, &al.d, A, lda, B, ldb, &be.d,
                         C, ldc);
    case JMG_C64:
      return cublasCgemm(h, op_a, op_b, m, n, k, &al.c, A, lda, B, ldb, &be.c,
                         C, ldc);
    default:
      return cublasZgemm(h, op_a, op_b, m, n, k, &al.z, A, lda, B, ldb, &be.z,
                         C, ldc);
  }
}

cublasStatus_t jmg_cublas_trsm(cublasHandle_t h, jmg_dtype t,
                               cublasSideMode_t side, cublasFillMode_t uplo,
                               cublasOperation_t op, cublasDiagType_t diag,
                               int m, int n, const void *A, int lda, void *B,
                               int ldb) {
  const jmg_cuda_scalar one = jmg_cuda_scalar_of(t, 1.0);
  switch (t) {
    case JMG_F32:
      return cublasStrsm(h, side, uplo, op, diag, m, n, &one.s, A, lda, B, ldb);
    case JMG_F64:
      return cublasDtrsm(h, side, uplo, op, diag, m, n, &one.d, A, lda, B, ldb);
    case JMG_C64:
      return cublasCtrsm(h, side, uplo, op, diag, m, n, &one.c, A, lda, B, ldb);
    default:
      return cublasZtrsm(h, side, uplo, op, diag, m, n, &one.z, A, lda, B, ldb);
  }
}

cublasStatus_t jmg_cublas_herk_n(cublasHandle_t h, jmg_dtype t,
                                 cublasFillMode_t uplo, int n, int k,
                                 double alpha, const void *A, int lda,
                                 double beta, void *C, int ldc) {
  const float al_s = (float)alpha, be_s = (float)beta;
  switch (t) {
    case JMG_F32:
      return cublasSsyrk(h, uplo, CUBLAS_OP_N, n, k, &al_s, A, lda, &be_s, C,
                         ldc);
    case JMG_F64:
      return cublasDsyrk(h, uplo, CUBLAS_OP_N, n, k, &alpha, A, lda, &beta, C,
                         ldc);
    case JMG_C64:
      return cublasCherk(h, uplo, CUBLAS_OP_N, n, k, &al_s, A, lda, &be_s, C,
                         ldc);
    default:
      return cublasZherk(h, uplo, CUBLAS_OP_N, n, k, &alpha, A, lda, &beta, C,
                         ldc);
  }
}

cublasStatus_t jmg_cublas_geam(cublasHandle_t h, jmg_dtype t,
                               cublasOperation_t op, int m, int n,
                               const void *A, int lda, void *C, int ldc) {
  const jmg_cuda_scalar one = jmg_cuda_scalar_of(t, 1.0),
                        zero = jmg_cuda_scalar_of(t, 0.0);
  switch (t) {
    case JMG_F32:
      return cublasSgeam(h, op, CUBLAS_OP_N, m, n, &one.s, A, lda, &zero.s, C,
                         ldc, C, ldc);
    case JMG_F64:
      return cublasDgeam(h, op, CUBLAS_OP_N, m, n, &one.d, A, lda, &zero.d, C,
                         ldc, C, ldc);
    case JMG_C64:
      return cublasCgeam(h, op, CUBLAS_OP_N, m, n, &one.c, A, lda, &zero.c, C,
                         ldc, C, ldc);
    default:
      return cublasZgeam(h, op, CUBLAS_OP_N, m, n, &one.z, A, lda, &zero.z, C,
                         ldc, C, ldc);
  }
}

cublasStatus_t jmg_cublas_gemm_64(cublasHandle_t h, jmg_dtype t,
                                  cublasOperation_t op_a,
                                  cublasOperation_t op_b, int64_t m, int64_t n,
                                  int64_t k, double alpha, const void *A,
                                  int64_t lda, const void *B, int64_t ldb,
                                  double beta, void *C, int64_t ldc) {
  const jmg_cuda_scalar al = jmg_cuda_scalar_of(t, alpha),
                        be = jmg_cuda_scalar_of(t, beta);
  switch (t) {
    case JMG_F32:
      return cublasSgemm_v2_64(h, op_a, op_b, m, n, k, &al.s, A, lda, B, ldb,
                               &be.s, C, ldc);
    case JMG_F64:
      return cublasDgemm_v2_64(h, op_a, op_b, m, n, k, &al.d, A, lda, B, ldb,
                               &be.d, C, ldc);
    case JMG_C64:
      return cublasCgemm_v2_64(h, op_a, op_b, m, n, k, &al.c, A, lda, B, ldb,
                               &be.c, C, ldc);
    default:
      return cublasZgemm_v2_64(h, op_a, op_b, m, n, k, &al.z, A, lda, B, ldb,
                               &be.z, C, ldc);
  }
}

cublasStatus_t jmg_cublas_gemm_tf32_64(cublasHandle_t h, jmg_dtype t,
                                       cublasOperation_t op_a,
                                       cublasOperation_t op_b, int64_t m,
                                       int64_t n, int64_t k, double alpha,
                                       const void *A, int64_t lda,
                                       const void *B, int64_t ldb, double beta,
                                       void *C, int64_t ldc) {
  if (t != JMG_F32 && t != JMG_C64) return CUBLAS_STATUS_INVALID_VALUE;
  const jmg_cuda_scalar al = jmg_cuda_scalar_of(t, alpha),
                        be = jmg_cuda_scalar_of(t, beta);
  const cudaDataType dt = jmg_cuda_data_type(t);
  const cublasStatus_t s = cublasGemmEx_64(
      h, op_a, op_b, m, n, k, &al, A, dt, lda, B, dt, ldb, &be, C, dt, ldc,
      CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  /* A cuBLAS without the complex TF32 compute type: cgemm, on TF32 tensor
   * cores where the handle's math mode is CUBLAS_TF32_TENSOR_OP_MATH. */
  if (s == CUBLAS_STATUS_NOT_SUPPORTED && t == JMG_C64)
    return cublasCgemm_v2_64(h, op_a, op_b, m, n, k, &al.c, A, lda, B, ldb,
                             &be.c, C, ldc);
  return s;
}

/* cublas<t>trsm with 64-bit sizes: B = alpha op(A)^-1 B, or alpha B
 * op(A)^-1. */
static cublasStatus_t trsm_64(cublasHandle_t h, jmg_dtype t,
                              cublasSideMode_t side, cublasFillMode_t uplo,
                              cublasOperation_t op, cublasDiagType_t diag,
                              int64_t m, int64_t n, double alpha,
                              const void *A, int64_t lda, void *B,
                              int64_t ldb) {
  const jmg_cuda_scalar al = jmg_cuda_scalar_of(t, alpha);
  switch (t) {
    case JMG_F32:
      return cublasStrsm_v2_64(h, side, uplo, op, diag, m, n, &al.s, A, lda,
                               B, ldb);
    case JMG_F64:
      return cublasDtrsm_v2_64(h, side, uplo, op, diag, m, n, &al.d, A, lda,
                               B, ldb);
    case JMG_C64:
      return cublasCtrsm_v2_64(h, side, uplo, op, diag, m, n, &al.c, A, lda,
                               B, ldb);
    default:
      return cublasZtrsm_v2_64(h, side, uplo, op, diag, m, n, &al.z, A, lda,
                               B, ldb);
  }
}

cublasStatus_t jmg_cublas_trsm_64(cublasHandle_t h, jmg_dtype t,
                                  cublasSideMode_t side, cublasFillMode_t uplo,
                                  cublasOperation_t op, cublasDiagType_t diag,
                                  int64_t m, int64_t n, const void *A,
                                  int64_t lda, void *B, int64_t ldb) {
  return trsm_64(h, t, side, uplo, op, diag, m, n, 1.0, A, lda, B, ldb);
}

cublasStatus_t jmg_cublas_trmm_left_64(cublasHandle_t h, jmg_dtype t,
                                       cublasFillMode_t uplo,
                                       cublasOperation_t op, int64_t m,
                                       int64_t n, const void *A, int64_t lda,
                                       void *B, int64_t ldb) {
  const jmg_cuda_scalar one = jmg_cuda_scalar_of(t, 1.0);
  const cublasSideMode_t left = CUBLAS_SIDE_LEFT;
  const cublasDiagType_t nonunit = CUBLAS_DIAG_NON_UNIT;
  /* cuBLAS's trmm writes C; C = B computes in place. */
  switch (t) {
    case JMG_F32:
      return cublasStrmm_v2_64(h, left, uplo, op, nonunit, m, n, &one.s, A, lda,
                               B, ldb, B, ldb);
    case JMG_F64:
      return cublasDtrmm_v2_64(h, left, uplo, op, nonunit, m, n, &one.d, A, lda,
                               B, ldb, B, ldb);
    case JMG_C64:
      return cublasCtrmm_v2_64(h, left, uplo, op, nonunit, m, n, &one.c, A, lda,
                               B, ldb, B, ldb);
    default:
      return cublasZtrmm_v2_64(h, left, uplo, op, nonunit, m, n, &one.z, A, lda,
                               B, ldb, B, ldb);
  }
}

cublasStatus_t jmg_cublas_trsm_right_64(cublasHandle_t h, jmg_dtype t,
                                        cublasFillMode_t uplo, int64_t m,
                                        int64_t n, double alpha, const void *A,
                                        int64_t lda, void *B, int64_t ldb) {
  return trsm_64(h, t, CUBLAS_SIDE_RIGHT, uplo, CUBLAS_OP_N,
                 CUBLAS_DIAG_NON_UNIT, m, n, alpha, A, lda, B, ldb);
}

cublasStatus_t jmg_cublas_herk_64(cublasHandle_t h, jmg_dtype t,
                                  cublasFillMode_t uplo, int64_t n, int64_t k,
                                  const void *A, int64_t lda, double beta,
                                  void *C, int64_t ldc) {
  switch (t) {
    case JMG_F32: {
      const float al = 1.0f, be = (float)beta;
      return cublasSsyrk_v2_64(h, uplo, CUBLAS_OP_T, n, k, &al, A, lda, &be, C,
                               ldc);
    }
    case JMG_F64: {
      const double al = 1.0;
      return cublasDsyrk_v2_64(h, uplo, CUBLAS_OP_T, n, k, &al, A, lda, &beta,
                               C, ldc);
    }
    case JMG_C64: {
      const float al = 1.0f, be = (float)beta;
      return cublasCherk_v2_64(h, uplo, CUBLAS_OP_C, n, k, &al, A, lda, &be, C,
                               ldc);
    }
    default: {
      const double al = 1.0;
      return cublasZherk_v2_64(h, uplo, CUBLAS_OP_C, n, k, &al, A, lda, &beta,
                               C, ldc);
    }
  }
}

cublasStatus_t jmg_cublas_gemv(cublasHandle_t h, jmg_dtype t,
                               cublasOperation_t op, int64_t m, int64_t n,
                               const void *A, int64_t lda, const void *x,
                               void *y) {
  const jmg_cuda_scalar one = jmg_cuda_scalar_of(t, 1.0),
                        zero = jmg_cuda_scalar_of(t, 0.0);
  switch (t) {
    case JMG_F32:
      return cublasSgemv_64(h, op, m, n, &one.s, A, lda, x, 1, &zero.s, y, 1);
    case JMG_F64:
      return cublasDgemv_64(h, op, m, n, &one.d, A, lda, x, 1, &zero.d, y, 1);
    case JMG_C64:
      return cublasCgemv_64(h, op, m, n, &one.c, A, lda, x, 1, &zero.c, y, 1);
    default:
      return cublasZgemv_64(h, op, m, n, &one.z, A, lda, x, 1, &zero.z, y, 1);
  }
}

cublasStatus_t jmg_cublas_gemv_ab_64(cublasHandle_t h, jmg_dtype t,
                                     cublasOperation_t op, int64_t m,
                                     int64_t n, double alpha, const void *A,
                                     int64_t lda, const void *x, double beta,
                                     void *y) {
  const jmg_cuda_scalar al = jmg_cuda_scalar_of(t, alpha),
                        be = jmg_cuda_scalar_of(t, beta);
  switch (t) {
    case JMG_F32:
      return cublasSgemv_64(h, op, m, n, &al.s, A, lda, x, 1, &be.s, y, 1);
    case JMG_F64:
      return cublasDgemv_64(h, op, m, n, &al.d, A, lda, x, 1, &be.d, y, 1);
    case JMG_C64:
      return cublasCgemv_64(h, op, m, n, &al.c, A, lda, x, 1, &be.c, y, 1);
    default:
      return cublasZgemv_64(h, op, m, n, &al.z, A, lda, x, 1, &be.z, y, 1);
  }
}

cublasStatus_t jmg_cublas_hemv_ab_64(cublasHandle_t h, jmg_dtype t,
                                     cublasFillMode_t uplo, int64_t n,
                                     double alpha, const void *A, int64_t lda,
                                     const void *x, double beta, void *y) {
  const jmg_cuda_scalar al = jmg_cuda_scalar_of(t, alpha),
                        be = jmg_cuda_scalar_of(t, beta);
  switch (t) {
    case JMG_F32:
      return cublasSsymv_64(h, uplo, n, &al.s, A, lda, x, 1, &be.s, y, 1);
    case JMG_F64:
      return cublasDsymv_64(h, uplo, n, &al.d, A, lda, x, 1, &be.d, y, 1);
    case JMG_C64:
      return cublasChemv_64(h, uplo, n, &al.c, A, lda, x, 1, &be.c, y, 1);
    default:
      return cublasZhemv_64(h, uplo, n, &al.z, A, lda, x, 1, &be.z, y, 1);
  }
}

/* A reduction of x to one real number (asum, nrm2), as a double on the
 * host, by the routine of x's type (the single-precision ones give a
 * float). */
typedef cublasStatus_t (*real_red_s)(cublasHandle_t, int64_t, const float *,
                                     int64_t, float *);
typedef cublasStatus_t (*real_red_d)(cublasHandle_t, int64_t, const double *,
                                     int64_t, double *);
typedef cublasStatus_t (*real_red_c)(cublasHandle_t, int64_t, const cuComplex *,
                                     int64_t, float *);
typedef cublasStatus_t (*real_red_z)(cublasHandle_t, int64_t,
                                     const cuDoubleComplex *, int64_t,
                                     double *);

static cublasStatus_t real_reduction(cublasHandle_t h, jmg_dtype t, int64_t n,
                                     const void *x, double *result,
                                     real_red_s s, real_red_d d, real_red_c c,
                                     real_red_z z) {
  float r = 0.0f;
  cublasStatus_t st;
  switch (t) {
    case JMG_F32:
      st = s(h, n, x, 1, &r);
      break;
    case JMG_F64:
      return d(h, n, x, 1, result);
    case JMG_C64:
      st = c(h, n, x, 1, &r);
      break;
    default:
      return z(h, n, x, 1, result);
  }
  *result = (double)r;
  return st;
}

cublasStatus_t jmg_cublas_asum(cublasHandle_t h, jmg_dtype t, int64_t n,
                               const void *x, double *result) {
  return real_reduction(h, t, n, x, result, cublasSasum_v2_64,
                        cublasDasum_v2_64, cublasScasum_v2_64,
                        cublasDzasum_v2_64);
}

cublasStatus_t jmg_cublas_hemv_64(cublasHandle_t h, jmg_dtype t,
                                  cublasFillMode_t uplo, int64_t n,
                                  const void *A, int64_t lda, const void *x,
                                  void *y) {
  const jmg_cuda_scalar one = jmg_cuda_scalar_of(t, 1.0),
                        zero = jmg_cuda_scalar_of(t, 0.0);
  switch (t) {
    case JMG_F32:
      return cublasSsymv_64(h, uplo, n, &one.s, A, lda, x, 1, &zero.s, y, 1);
    case JMG_F64:
      return cublasDsymv_64(h, uplo, n, &one.d, A, lda, x, 1, &zero.d, y, 1);
    case JMG_C64:
      return cublasChemv_64(h, uplo, n, &one.c, A, lda, x, 1, &zero.c, y, 1);
    default:
      return cublasZhemv_64(h, uplo, n, &one.z, A, lda, x, 1, &zero.z, y, 1);
  }
}

cublasStatus_t jmg_cublas_her2k_minus_64(cublasHandle_t h, jmg_dtype t,
                                         cublasFillMode_t uplo, int64_t n,
                                         int64_t k, const void *A, int64_t lda,
                                         const void *B, int64_t ldb, void *C,
                                         int64_t ldc) {
  const jmg_cuda_scalar minus = jmg_cuda_scalar_of(t, -1.0);
  const cublasOperation_t no = CUBLAS_OP_N;
  switch (t) {
    case JMG_F32: {
      const float one = 1.0f;
      return cublasSsyr2k_v2_64(h, uplo, no, n, k, &minus.s, A, lda, B, ldb,
                                &one, C, ldc);
    }
    case JMG_F64: {
      const double one = 1.0;
      return cublasDsyr2k_v2_64(h, uplo, no, n, k, &minus.d, A, lda, B, ldb,
                                &one, C, ldc);
    }
    case JMG_C64: {
      const float one = 1.0f;
      return cublasCher2k_v2_64(h, uplo, no, n, k, &minus.c, A, lda, B, ldb,
                                &one, C, ldc);
    }
    default: {
      const double one = 1.0;
      return cublasZher2k_v2_64(h, uplo, no, n, k, &minus.z, A, lda, B, ldb,
                                &one, C, ldc);
    }
  }
}

cublasStatus_t jmg_cublas_nrm2_64(cublasHandle_t h, jmg_dtype t, int64_t n,
                                  const void *x, double *result) {
  return real_reduction(h, t, n, x, result, cublasSnrm2_v2_64,
                        cublasDnrm2_v2_64, cublasScnrm2_v2_64,
                        cublasDznrm2_v2_64);
}

cublasStatus_t jmg_cublas_dotc_64(cublasHandle_t h, jmg_dtype t, int64_t n,
                                  const void *x, const void *y, double *re,
                                  double *im) {
  jmg_cuda_scalar r = jmg_cuda_scalar_of(t, 0.0);
  cublasStatus_t st;
  *im = 0.0;
  switch (t) {
    case JMG_F32:
      st = cublasSdot_v2_64(h, n, x, 1, y, 1, &r.s);
      *re = (double)r.s;
      return st;
    case JMG_F64:
      return cublasDdot_v2_64(h, n, x, 1, y, 1, re);
    case JMG_C64:
      st = cublasCdotc_v2_64(h, n, x, 1, y, 1, &r.c);
      *re = (double)cuCrealf(r.c);
      *im = (double)cuCimagf(r.c);
      return st;
    default:
      st = cublasZdotc_v2_64(h, n, x, 1, y, 1, &r.z);
      *re = cuCreal(r.z);
      *im = cuCimag(r.z);
      return st;
  }
}

cublasStatus_t jmg_cublas_axpy_64(cublasHandle_t h, jmg_dtype t, int64_t n,
                                  double re, double im, const void *x,
                                  void *y) {
  const jmg_cuda_scalar a = jmg_cuda_scalar_of_complex(t, re, im);
  switch (t) {
    case JMG_F32:
      return cublasSaxpy_v2_64(h, n, &a.s, x, 1, y, 1);
    case JMG_F64:
      return cublasDaxpy_v2_64(h, n, &a.d, x, 1, y, 1);
    case JMG_C64:
      return cublasCaxpy_v2_64(h, n, &a.c, x, 1, y, 1);
    default:
      return cublasZaxpy_v2_64(h, n, &a.z, x, 1, y, 1);
  }
}

cublasStatus_t jmg_cublas_scal_64(cublasHandle_t h, jmg_dtype t, int64_t n,
                                  double re, double im, void *x) {
  const jmg_cuda_scalar a = jmg_cuda_scalar_of_complex(t, re, im);
  switch (t) {
    case JMG_F32:
      return cublasSscal_v2_64(h, n, &a.s, x, 1);
    case JMG_F64:
      return cublasDscal_v2_64(h, n, &a.d, x, 1);
    case JMG_C64:
      return cublasCscal_v2_64(h, n, &a.c, x, 1);
    default:
      return cublasZscal_v2_64(h, n, &a.z, x, 1);
  }
}

cublasStatus_t jmg_cublas_hemm_64(cublasHandle_t h, jmg_dtype t,
                                  cublasFillMode_t uplo, int64_t n, int64_t k,
                                  double alpha, const void *A, int64_t lda,
                                  const void *B, int64_t ldb, double beta,
                                  void *C, int64_t ldc) {
  const jmg_cuda_scalar al = jmg_cuda_scalar_of(t, alpha),
                        be = jmg_cuda_scalar_of(t, beta);
  const cublasSideMode_t left = CUBLAS_SIDE_LEFT;
  switch (t) {
    case JMG_F32:
      return cublasSsymm_v2_64(h, left, uplo, n, k, &al.s, A, lda, B, ldb,
                               &be.s, C, ldc);
    case JMG_F64:
      return cublasDsymm_v2_64(h, left, uplo, n, k, &al.d, A, lda, B, ldb,
                               &be.d, C, ldc);
    case JMG_C64:
      return cublasChemm_v2_64(h, left, uplo, n, k, &al.c, A, lda, B, ldb,
                               &be.c, C, ldc);
    default:
      return cublasZhemm_v2_64(h, left, uplo, n, k, &al.z, A, lda, B, ldb,
                               &be.z, C, ldc);
  }
}
