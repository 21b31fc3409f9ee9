// What jaxmg's tiled Cholesky and inverse (csrc/engine/cusolvermg/
// cuda_potrf.c, cuda_potri.c, tiles.c) call beyond emu_cuda.cc's runtime:
// 2D copies, cuSOLVERDn's potrf and, one layer up, cuda/blas.h's gemm and
// trsm (float64; the other types answer CUBLAS_STATUS_NOT_SUPPORTED, which
// the code under test reports as an error). As in emu_cuda.cc, every
// "device" pointer is host memory and every call runs at once.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <cmath>
#include <cstring>
#include <vector>

extern "C" {
#include "common/dtype.h"
#include "cuda/blas.h"

// cuda/call.c's (which needs the handles and allocators of a real frame).
size_t jmg_cuda_align(size_t bytes) { return (bytes + 255) / 256 * 256; }

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) {
  std::memmove(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind, cudaStream_t) {
  for (size_t r = 0; r < height; ++r)
    std::memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
  return cudaSuccess;
}
cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t, cudaStream_t) {
  return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverDnXpotrf_bufferSize(cusolverDnHandle_t, cusolverDnParams_t,
                                             cublasFillMode_t, int64_t, cudaDataType,
                                             const void *, int64_t, cudaDataType, size_t *dev,
                                             size_t *host) {
  *dev = 8;
  *host = 0;
  return CUSOLVER_STATUS_SUCCESS;
}
// Lower Cholesky in place; *info = the first failing minor (LAPACK's).
cusolverStatus_t cusolverDnXpotrf(cusolverDnHandle_t, cusolverDnParams_t, cublasFillMode_t uplo,
                                  int64_t n, cudaDataType t, void *a_, int64_t lda, cudaDataType,
                                  void *, size_t, void *, size_t, int *info) {
  if (uplo != CUBLAS_FILL_MODE_LOWER || t != CUDA_R_64F) return CUSOLVER_STATUS_NOT_SUPPORTED;
  double *a = (double *)a_;
  *info = 0;
  for (int64_t j = 0; j < n; ++j) {
    double d = a[j + j * lda];
    for (int64_t k = 0; k < j; ++k) d -= a[j + k * lda] * a[j + k * lda];
    if (!(d > 0.0)) {
      *info = (int)(j + 1);
      return CUSOLVER_STATUS_SUCCESS;
    }
    d = std::sqrt(d);
    a[j + j * lda] = d;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = a[i + j * lda];
      for (int64_t k = 0; k < j; ++k) s -= a[i + k * lda] * a[j + k * lda];
      a[i + j * lda] = s / d;
    }
  }
  return CUSOLVER_STATUS_SUCCESS;
}

static double at(const double *a, int lda, cublasOperation_t op, int i, int j) {
  return op == CUBLAS_OP_N ? a[i + (size_t)j * lda] : a[j + (size_t)i * lda];
}
cublasStatus_t jmg_cublas_gemm(cublasHandle_t, jmg_dtype t, cublasOperation_t op_a,
                               cublasOperation_t op_b, int m, int n, int k, double alpha,
                               const void *A, int lda, const void *B, int ldb, double beta,
                               void *C_, int ldc) {
  if (t != JMG_F64) return CUBLAS_STATUS_NOT_SUPPORTED;
  double *c = (double *)C_;
  std::vector<double> out((size_t)m * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0.0;
      for (int l = 0; l < k; ++l)
        s += at((const double *)A, lda, op_a, i, l) * at((const double *)B, ldb, op_b, l, j);
      out[i + (size_t)j * m] = alpha * s + (beta == 0.0 ? 0.0 : beta * c[i + (size_t)j * ldc]);
    }
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) c[i + (size_t)j * ldc] = out[i + (size_t)j * m];
  return CUBLAS_STATUS_SUCCESS;
}
// B = op(A)^-1 B or B op(A)^-1, A lower triangular (all the tiles use).
cublasStatus_t jmg_cublas_trsm(cublasHandle_t, jmg_dtype t, cublasSideMode_t side,
                               cublasFillMode_t uplo, cublasOperation_t op,
                               cublasDiagType_t diag, int m, int n, const void *A_, int lda,
                               void *B_, int ldb) {
  if (t != JMG_F64 || uplo != CUBLAS_FILL_MODE_LOWER || diag != CUBLAS_DIAG_NON_UNIT)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const double *a = (const double *)A_;
  double *b = (double *)B_;
  const int k = side == CUBLAS_SIDE_LEFT ? m : n;
  // op(A) as a dense k x k matrix; solve with it by substitution.
  std::vector<double> o((size_t)k * k, 0.0);
  for (int j = 0; j < k; ++j)
    for (int i = j; i < k; ++i) {
      const double v = a[i + (size_t)j * lda];
      if (op == CUBLAS_OP_N) o[i + (size_t)j * k] = v; else o[j + (size_t)i * k] = v;
    }
  const bool lower = op == CUBLAS_OP_N;
  if (side == CUBLAS_SIDE_LEFT) {
    for (int c = 0; c < n; ++c) {
      double *x = b + (size_t)c * ldb;
      for (int s = 0; s < m; ++s) {
        const int i = lower ? s : m - 1 - s;
        double v = x[i];
        for (int l = 0; l < m; ++l)
          if (l != i && o[i + (size_t)l * k] != 0.0) v -= o[i + (size_t)l * k] * x[l];
        x[i] = v / o[i + (size_t)i * k];
      }
    }
  } else {  // X op(A) = B: row by row, x op(A) = b, op(A) lower or upper
    for (int r = 0; r < m; ++r) {
      for (int s = 0; s < n; ++s) {
        const int j = lower ? n - 1 - s : s;
        double v = b[r + (size_t)j * ldb];
        for (int l = 0; l < n; ++l)
          if (l != j && o[l + (size_t)j * k] != 0.0) v -= b[r + (size_t)l * ldb] * o[l + (size_t)j * k];
        b[r + (size_t)j * ldb] = v / o[j + (size_t)j * k];
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}
}
