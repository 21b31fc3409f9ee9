/* cuBLAS's typed routines behind one call each, the type picked from
 * jaxmg's dtype (alpha and beta given as real numbers, made into the
 * matrix's type), for the CUDA engines' tiled algorithms. */
#ifndef JMG_CUDA_BLAS_H
#define JMG_CUDA_BLAS_H

#include <cublas_v2.h>
#include <stdint.h>

#include "common/dtype.h"

/* C = alpha op(A) op(B) + beta C (m x n, inner dimension k). */
cublasStatus_t jmg_cublas_gemm(cublasHandle_t h, jmg_dtype t,
                               cublasOperation_t op_a, cublasOperation_t op_b,
                               int m, int n, int k, double alpha, const void *A,
                               int lda, const void *B, int ldb, double beta,
                               void *C, int ldc);

/* B = op(A)^-1 B (side left) or B op(A)^-1 (side right), A triangular. */
cublasStatus_t jmg_cublas_trsm(cublasHandle_t h, jmg_dtype t,
                               cublasSideMode_t side, cublasFillMode_t uplo,
                               cublasOperation_t op, cublasDiagType_t diag,
                               int m, int n, const void *A, int lda, void *B,
                               int ldb);

/* C = alpha A A^H + beta C (A A^T for the real types: cublas<t>syrk, for
 * the complex ones <t>herk, whose alpha and beta are real), C n x n of
 * which only the triangle uplo is read and written, A n x k. */
cublasStatus_t jmg_cublas_herk_n(cublasHandle_t h, jmg_dtype t,
                                 cublasFillMode_t uplo, int n, int k,
                                 double alpha, const void *A, int lda,
                                 double beta, void *C, int ldc);

/* C (m x n) = op(A) (op: CUBLAS_OP_N, _T or _C), through cublas<t>geam with
 * beta 0 (C passed as B, as geam allows in place with transb N); C must
 * not overlap A. */
cublasStatus_t jmg_cublas_geam(cublasHandle_t h, jmg_dtype t,
                               cublasOperation_t op, int m, int n,
                               const void *A, int lda, void *C, int ldc);

/* The same with 64-bit sizes (cuBLAS's _64 API), for matrices whose element
 * count passes INT_MAX (potri's blocked inverse on one GPU). */
cublasStatus_t jmg_cublas_gemm_64(cublasHandle_t h, jmg_dtype t,
                                  cublasOperation_t op_a,
                                  cublasOperation_t op_b, int64_t m, int64_t n,
                                  int64_t k, double alpha, const void *A,
                                  int64_t lda, const void *B, int64_t ldb,
                                  double beta, void *C, int64_t ldc);

/* C = alpha op(A) op(B) + beta C for float32 or complex64 (t) on the TF32
 * tensor cores: cublasGemmEx_64 with CUBLAS_COMPUTE_32F_FAST_TF32 (the
 * inputs rounded to TF32, 10 bits of mantissa, the products accumulated in
 * float32), for the mixed-precision factorizations
 * (engine/cusolverdn/mixed.c); for complex64, where cuBLAS does not
 * support that compute type, cublasCgemm (TF32 where the handle's math
 * mode is CUBLAS_TF32_TENSOR_OP_MATH, as the caller sets it).
 * CUBLAS_STATUS_INVALID_VALUE for the other dtypes. */
cublasStatus_t jmg_cublas_gemm_tf32_64(cublasHandle_t h, jmg_dtype t,
                                       cublasOperation_t op_a,
                                       cublasOperation_t op_b, int64_t m,
                                       int64_t n, int64_t k, double alpha,
                                       const void *A, int64_t lda,
                                       const void *B, int64_t ldb, double beta,
                                       void *C, int64_t ldc);

/* B = op(A)^-1 B (side left) or B op(A)^-1 (side right), A triangular,
 * 64-bit sizes. */
cublasStatus_t jmg_cublas_trsm_64(cublasHandle_t h, jmg_dtype t,
                                  cublasSideMode_t side, cublasFillMode_t uplo,
                                  cublasOperation_t op, cublasDiagType_t diag,
                                  int64_t m, int64_t n, const void *A,
                                  int64_t lda, void *B, int64_t ldb);

/* B = op(A) B in place, A lower or upper triangular (side left, m x m). */
cublasStatus_t jmg_cublas_trmm_left_64(cublasHandle_t h, jmg_dtype t,
                                       cublasFillMode_t uplo,
                                       cublasOperation_t op, int64_t m,
                                       int64_t n, const void *A, int64_t lda,
                                       void *B, int64_t ldb);

/* B = alpha B op(A)^-1, A lower or upper triangular (side right, n x n). */
cublasStatus_t jmg_cublas_trsm_right_64(cublasHandle_t h, jmg_dtype t,
                                        cublasFillMode_t uplo, int64_t m,
                                        int64_t n, double alpha, const void *A,
                                        int64_t lda, void *B, int64_t ldb);

/* C = A^H A + beta C (A^T A for the real types), C n x n of which the
 * triangle uplo is written, A k x n. */
cublasStatus_t jmg_cublas_herk_64(cublasHandle_t h, jmg_dtype t,
                                  cublasFillMode_t uplo, int64_t n, int64_t k,
                                  const void *A, int64_t lda, double beta,
                                  void *C, int64_t ldc);

/* C = alpha A B + beta C, A n x n Hermitian (symmetric for the real types)
 * of which the triangle uplo is read, on the left of B (n x k), 64-bit
 * sizes (cublas<t>symm for the real types, <t>hemm for the complex ones). */
cublasStatus_t jmg_cublas_hemm_64(cublasHandle_t h, jmg_dtype t,
                                  cublasFillMode_t uplo, int64_t n, int64_t k,
                                  double alpha, const void *A, int64_t lda,
                                  const void *B, int64_t ldb, double beta,
                                  void *C, int64_t ldc);

/* y = op(A) x (alpha 1, beta 0: y is not read), A m x n, 64-bit sizes. */
cublasStatus_t jmg_cublas_gemv(cublasHandle_t h, jmg_dtype t,
                               cublasOperation_t op, int64_t m, int64_t n,
                               const void *A, int64_t lda, const void *x,
                               void *y);

/* y = alpha op(A) x + beta y (beta 0: y is not read), A m x n, unit
 * strides, 64-bit sizes: the refinement's residual (op(A) against float64
 * or complex128 A) and its blocked triangular solves with the lower factor
 * (engine/cusolverdn/tri_solve.h). */
cublasStatus_t jmg_cublas_gemv_ab_64(cublasHandle_t h, jmg_dtype t,
                                     cublasOperation_t op, int64_t m,
                                     int64_t n, double alpha, const void *A,
                                     int64_t lda, const void *x, double beta,
                                     void *y);

/* y = alpha A x + beta y, A n x n Hermitian (symmetric for the real types)
 * of which the triangle uplo is read, unit strides, 64-bit sizes. */
cublasStatus_t jmg_cublas_hemv_ab_64(cublasHandle_t h, jmg_dtype t,
                                     cublasFillMode_t uplo, int64_t n,
                                     double alpha, const void *A, int64_t lda,
                                     const void *x, double beta, void *y);

/* The sum of |Re x_i| + |Im x_i| over n elements (cublas<t>asum), as a
 * double on the host (the handle's pointer mode must be host). */
cublasStatus_t jmg_cublas_asum(cublasHandle_t h, jmg_dtype t, int64_t n,
                               const void *x, double *result);

/* The vector steps of jaxmg's Householder tridiagonal reduction and of its
 * back-transformation (engine/cusolverdn/sytrd.c), 64-bit sizes, unit
 * strides, scalars on the host (the handle's pointer mode must be host). */

/* y = A x, A n x n Hermitian (symmetric for the real types) of which the
 * triangle uplo is read (y is not read). */
cublasStatus_t jmg_cublas_hemv_64(cublasHandle_t h, jmg_dtype t,
                                  cublasFillMode_t uplo, int64_t n,
                                  const void *A, int64_t lda, const void *x,
                                  void *y);

/* C = -(A B^H + B A^H) + C, C n x n of which the triangle uplo is written,
 * A and B n x k (her2k; syr2k for the real types). */
cublasStatus_t jmg_cublas_her2k_minus_64(cublasHandle_t h, jmg_dtype t,
                                         cublasFillMode_t uplo, int64_t n,
                                         int64_t k, const void *A, int64_t lda,
                                         const void *B, int64_t ldb, void *C,
                                         int64_t ldc);

/* ||x||_2, as a double on the host. */
cublasStatus_t jmg_cublas_nrm2_64(cublasHandle_t h, jmg_dtype t, int64_t n,
                                  const void *x, double *result);

/* x^H y (x^T y for the real types), its real and imaginary parts on the
 * host. */
cublasStatus_t jmg_cublas_dotc_64(cublasHandle_t h, jmg_dtype t, int64_t n,
                                  const void *x, const void *y, double *re,
                                  double *im);

/* y = (re + i im) x + y. */
cublasStatus_t jmg_cublas_axpy_64(cublasHandle_t h, jmg_dtype t, int64_t n,
                                  double re, double im, const void *x, void *y);

/* x = (re + i im) x. */
cublasStatus_t jmg_cublas_scal_64(cublasHandle_t h, jmg_dtype t, int64_t n,
                                  double re, double im, void *x);

#endif
