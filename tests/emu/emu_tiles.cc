// What jaxmg's tiled Cholesky and inverse (csrc/engine/cusolvermg/
// cuda_potrf.c, cuda_potri.c, tiles.c) call beyond emu_cuda.cc's runtime:
// 2D copies, cuSOLVERDn's potrf and, one layer up, cuda/blas.h's gemm, trsm
// and herk, for the four types. As in emu_cuda.cc, every "device" pointer
// is host memory; every call runs at once, or is queued on its stream (on
// the handle's, for cuBLAS and cuSOLVER) where emu_streams.h defers them.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <vector>

#include "emu_streams.h"

extern "C" {
#include "common/dtype.h"
#include "cuda/blas.h"
}

namespace {
using cf = std::complex<float>;
using cd = std::complex<double>;
inline float cj(float x) { return x; }
inline double cj(double x) { return x; }
inline cf cj(cf x) { return std::conj(x); }
inline cd cj(cd x) { return std::conj(x); }
inline double re(float x) { return x; }
inline double re(double x) { return x; }
inline double re(cf x) { return x.real(); }
inline double re(cd x) { return x.real(); }

// op(A)(i, j).
template <class T>
T at(const T *a, int lda, cublasOperation_t op, int i, int j) {
  if (op == CUBLAS_OP_N) return a[i + (size_t)j * lda];
  const T v = a[j + (size_t)i * lda];
  return op == CUBLAS_OP_C ? cj(v) : v;
}

template <class T>
void gemm(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, double alpha,
          const T *A, int lda, const T *B, int ldb, double beta, T *c, int ldc) {
  std::vector<T> out((size_t)m * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      T s = T(0);
      for (int l = 0; l < k; ++l) s += at(A, lda, op_a, i, l) * at(B, ldb, op_b, l, j);
      out[i + (size_t)j * m] =
          T(alpha) * s + (beta == 0.0 ? T(0) : T(beta) * c[i + (size_t)j * ldc]);
    }
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) c[i + (size_t)j * ldc] = out[i + (size_t)j * m];
}

// C = alpha A A^H + beta C on the triangle uplo only; the diagonal's
// imaginary parts are set to zero (cuBLAS's herk).
template <class T>
void herk_n(cublasFillMode_t uplo, int n, int k, double alpha, const T *A, int lda,
            double beta, T *c, int ldc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      if (uplo == CUBLAS_FILL_MODE_LOWER ? i < j : i > j) continue;
      T s = T(0);
      for (int l = 0; l < k; ++l) s += A[i + (size_t)l * lda] * cj(A[j + (size_t)l * lda]);
      T &x = c[i + (size_t)j * ldc];
      x = T(alpha) * s + (beta == 0.0 ? T(0) : T(beta) * x);
      if (i == j) x = T(re(x));
    }
}

// B = op(A)^-1 B or B op(A)^-1, A lower triangular (all the tiles use).
template <class T>
void trsm(cublasSideMode_t side, cublasOperation_t op, int m, int n, const T *a, int lda,
          T *b, int ldb) {
  const int k = side == CUBLAS_SIDE_LEFT ? m : n;
  // op(A) as a dense k x k matrix; solve with it by substitution.
  std::vector<T> o((size_t)k * k, T(0));
  for (int j = 0; j < k; ++j)
    for (int i = j; i < k; ++i) o[i + (size_t)j * k] = a[i + (size_t)j * lda];
  if (op != CUBLAS_OP_N) {
    std::vector<T> t((size_t)k * k, T(0));
    for (int j = 0; j < k; ++j)
      for (int i = 0; i < k; ++i) {
        const T v = o[j + (size_t)i * k];
        t[i + (size_t)j * k] = op == CUBLAS_OP_C ? cj(v) : v;
      }
    o.swap(t);
  }
  const bool lower = op == CUBLAS_OP_N;
  if (side == CUBLAS_SIDE_LEFT) {
    for (int c = 0; c < n; ++c) {
      T *x = b + (size_t)c * ldb;
      for (int s = 0; s < m; ++s) {
        const int i = lower ? s : m - 1 - s;
        T v = x[i];
        for (int l = 0; l < m; ++l)
          if (l != i) v -= o[i + (size_t)l * k] * x[l];
        x[i] = v / o[i + (size_t)i * k];
      }
    }
  } else {  // X op(A) = B: row by row, x op(A) = b, op(A) lower or upper
    for (int r = 0; r < m; ++r) {
      for (int s = 0; s < n; ++s) {
        const int j = lower ? n - 1 - s : s;
        T v = b[r + (size_t)j * ldb];
        for (int l = 0; l < n; ++l)
          if (l != j) v -= b[r + (size_t)l * ldb] * o[l + (size_t)j * k];
        b[r + (size_t)j * ldb] = v / o[j + (size_t)j * k];
      }
    }
  }
}

// Lower Cholesky in place; *info = the first failing minor (LAPACK's).
template <class T>
void potrf(int64_t n, T *a, int64_t lda, int *info) {
  *info = 0;
  for (int64_t j = 0; j < n; ++j) {
    double d = re(a[j + j * lda]);
    for (int64_t k = 0; k < j; ++k) d -= std::norm(cd(a[j + k * lda]));
    if (!(d > 0.0)) {
      *info = (int)(j + 1);
      return;
    }
    d = std::sqrt(d);
    a[j + j * lda] = T(d);
    for (int64_t i = j + 1; i < n; ++i) {
      T s = a[i + j * lda];
      for (int64_t k = 0; k < j; ++k) s -= a[i + k * lda] * cj(a[j + k * lda]);
      a[i + j * lda] = s / T(d);
    }
  }
}

// f<T>() for jaxmg's dtype t.
template <class F>
void by_type(jmg_dtype t, F f) {
  switch (t) {
    case JMG_F32: f(float()); break;
    case JMG_F64: f(double()); break;
    case JMG_C64: f(cf()); break;
    default: f(cd()); break;
  }
}
}  // namespace

extern "C" {

// cuda/call.c's (which needs the handles and allocators of a real frame).
size_t jmg_cuda_align(size_t bytes) { return (bytes + 255) / 256 * 256; }

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) {
  std::memmove(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind, cudaStream_t s) {
  emu_submit(s, [=] {
    for (size_t r = 0; r < height; ++r)
      std::memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
  });
  return cudaSuccess;
}
cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t h, cudaStream_t s) {
  emu_bind(h, s);
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
cusolverStatus_t cusolverDnXpotrf(cusolverDnHandle_t h, cusolverDnParams_t, cublasFillMode_t uplo,
                                  int64_t n, cudaDataType t, void *a, int64_t lda,
                                  cudaDataType compute, void *, size_t, void *, size_t,
                                  int *info) {
  if (uplo != CUBLAS_FILL_MODE_LOWER || compute != t) return CUSOLVER_STATUS_NOT_SUPPORTED;
  jmg_dtype dt;
  switch (t) {
    case CUDA_R_32F: dt = JMG_F32; break;
    case CUDA_R_64F: dt = JMG_F64; break;
    case CUDA_C_32F: dt = JMG_C64; break;
    case CUDA_C_64F: dt = JMG_C128; break;
    default: return CUSOLVER_STATUS_NOT_SUPPORTED;
  }
  emu_submit(emu_stream_of(h), [=] {
    by_type(dt, [&](auto z) { potrf(n, (decltype(z) *)a, lda, info); });
  });
  return CUSOLVER_STATUS_SUCCESS;
}

cublasStatus_t jmg_cublas_gemm(cublasHandle_t h, jmg_dtype t, cublasOperation_t op_a,
                               cublasOperation_t op_b, int m, int n, int k, double alpha,
                               const void *A, int lda, const void *B, int ldb, double beta,
                               void *C, int ldc) {
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  emu_submit(emu_stream_of(h), [=] {
    by_type(t, [&](auto z) {
      using T = decltype(z);
      gemm(op_a, op_b, m, n, k, alpha, (const T *)A, lda, (const T *)B, ldb, beta, (T *)C, ldc);
    });
  });
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t jmg_cublas_herk_n(cublasHandle_t h, jmg_dtype t, cublasFillMode_t uplo, int n,
                                 int k, double alpha, const void *A, int lda, double beta,
                                 void *C, int ldc) {
  if (n < 0 || k < 0 || lda < (n > 1 ? n : 1) || ldc < (n > 1 ? n : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  emu_submit(emu_stream_of(h), [=] {
    by_type(t, [&](auto z) {
      using T = decltype(z);
      herk_n(uplo, n, k, alpha, (const T *)A, lda, beta, (T *)C, ldc);
    });
  });
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t jmg_cublas_trsm(cublasHandle_t h, jmg_dtype t, cublasSideMode_t side,
                               cublasFillMode_t uplo, cublasOperation_t op,
                               cublasDiagType_t diag, int m, int n, const void *A, int lda,
                               void *B, int ldb) {
  if (uplo != CUBLAS_FILL_MODE_LOWER || diag != CUBLAS_DIAG_NON_UNIT)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  emu_submit(emu_stream_of(h), [=] {
    by_type(t, [&](auto z) {
      using T = decltype(z);
      trsm(side, op, m, n, (const T *)A, lda, (T *)B, ldb);
    });
  });
  return CUBLAS_STATUS_SUCCESS;
}
}
