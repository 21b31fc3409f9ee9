/* A CPU stand-in for the parts of the CUDA runtime, cuBLAS, cuRAND and
 * cuSOLVERMg that the engine's ceiling (bench/ceiling/) calls, so that its
 * logic runs without a GPU: the block-cyclic indexing, the Hermitian fill,
 * the potri slab sequence, the checks, the error paths.
 *
 * "Device memory" is host memory tagged with its device. The stand-in also
 * enforces what the real libraries require and a CPU run would otherwise not
 * notice: cuBLAS and cuRAND calls made with their own device current,
 * outputs on that device, inputs on it or on a peer whose access was enabled,
 * cuSOLVERMg's per-device pointers on the right devices, workspaces at least
 * as large as asked. cuSOLVERMg's routines are computed densely (gather the
 * 1-D block-cyclic matrix, compute in double complex, scatter) on the
 * semantics jaxmg's engine relies on: LOWER fill, the lower triangle read,
 * the factor and potri's inverse written to the lower triangle only, syevd's
 * eigenvectors in A's layout (real types only here).
 *
 * Not a model of performance: times measured on it mean nothing. */
#define _POSIX_C_SOURCE 200809L
#define DISABLE_CUSOLVERMG_DEPRECATED
#include <complex.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>
#include <cusolverMg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NDEV 4
#define MAX_ALLOCS 4096

/* ---- devices and memory ---------------------------------------------------*/

static int g_current;
static int g_peer[NDEV][NDEV];
static cudaError_t g_last = cudaSuccess;

typedef struct alloc {
  char *p;
  size_t n;
  int dev;
} alloc;
static alloc g_allocs[MAX_ALLOCS];

static void fail(const char *what) {
  fprintf(stderr, "mock_cuda: %s\n", what);
  exit(99); /* a misuse is a test failure, never a result */
}

/* The device of a tagged pointer, -1 for host memory. */
static int device_of(const void *p) {
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (g_allocs[i].p != NULL && (const char *)p >= g_allocs[i].p &&
        (const char *)p < g_allocs[i].p + g_allocs[i].n)
      return g_allocs[i].dev;
  return -1;
}

/* Device memory [p, p + n) must lie in one allocation. */
static void check_range(const void *p, size_t n, const char *what) {
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (g_allocs[i].p != NULL && (const char *)p >= g_allocs[i].p &&
        (const char *)p + n <= g_allocs[i].p + g_allocs[i].n)
      return;
  if (device_of(p) >= 0) {
    fprintf(stderr, "mock_cuda: %s: %zu bytes out of bounds\n", what, n);
    exit(99);
  }
}

/* A kernel on `dev` may read p: p on dev, or on a peer it enabled. */
static void check_readable(int dev, const void *p, const char *what) {
  int d = device_of(p);
  if (d < 0) fail(what);
  if (d != dev && !g_peer[dev][d]) fail(what);
}

const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "mock error";
}
const char *cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : "cudaErrorMock";
}
cudaError_t cudaGetLastError(void) {
  cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
cudaError_t cudaGetDeviceCount(int *count) {
  *count = NDEV;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "mock GPU %d", d);
  p->totalGlobalMem = (size_t)1 << 30;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= NDEV) return cudaErrorInvalidDevice;
  g_current = d;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
  *d = g_current;
  return cudaSuccess;
}
cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer) {
  *can = d != peer;
  return cudaSuccess;
}
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  (void)flags;
  if (g_peer[g_current][peer]) return cudaErrorPeerAccessAlreadyEnabled;
  g_peer[g_current][peer] = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t n) {
  /* An environment limit lets a test see the out-of-memory path. */
  const char *lim = getenv("MOCK_CUDA_MAX_ALLOC");
  if (lim != NULL && n > (size_t)strtoull(lim, NULL, 10))
    return cudaErrorMemoryAllocation;
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (g_allocs[i].p == NULL) {
      /* Poisoned: all bits set is a NaN in every floating type. */
      g_allocs[i].p = malloc(n ? n : 1);
      if (g_allocs[i].p == NULL) return cudaErrorMemoryAllocation;
      memset(g_allocs[i].p, 0xFF, n);
      g_allocs[i].n = n;
      g_allocs[i].dev = g_current;
      *p = g_allocs[i].p;
      return cudaSuccess;
    }
  return cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p) {
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (g_allocs[i].p == p) {
      free(g_allocs[i].p);
      memset(&g_allocs[i], 0, sizeof g_allocs[i]);
      return cudaSuccess;
    }
  fail("cudaFree of an unknown pointer");
  return cudaErrorInvalidValue;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n,
                       enum cudaMemcpyKind kind) {
  (void)kind;
  check_range(dst, n, "cudaMemcpy dst");
  check_range(src, n, "cudaMemcpy src");
  memmove(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                            enum cudaMemcpyKind kind, cudaStream_t s) {
  (void)s;
  return cudaMemcpy(dst, src, n, kind);
}
cudaError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd,
                                size_t n, cudaStream_t s) {
  (void)s;
  if (device_of(dst) != dd || device_of(src) != sd)
    fail("cudaMemcpyPeerAsync: a pointer is not on its device");
  return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice);
}
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src,
                         size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind) {
  (void)kind;
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  for (size_t r = 0; r < height; ++r) {
    check_range((char *)dst + r * dpitch, width, "cudaMemcpy2D dst");
    memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
  }
  return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                              size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t s) {
  (void)s;
  return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
  (void)s;
  check_range(p, n, "cudaMemsetAsync");
  memset(p, v, n);
  return cudaSuccess;
}

/* ---- element access in double complex
 * --------------------------------------*/

typedef enum { T_S, T_D, T_C, T_Z } etype;

static size_t esize(etype t) {
  static const size_t s[] = {4, 8, 8, 16};
  return s[t];
}

static etype from_cuda(cudaDataType t) {
  switch (t) {
    case CUDA_R_32F:
      return T_S;
    case CUDA_R_64F:
      return T_D;
    case CUDA_C_32F:
      return T_C;
    case CUDA_C_64F:
      return T_Z;
    default:
      fail("unsupported cudaDataType");
      return T_D;
  }
}

static double complex get(etype t, const void *p, size_t i) {
  switch (t) {
    case T_S:
      return ((const float *)p)[i];
    case T_D:
      return ((const double *)p)[i];
    case T_C:
      return CMPLXF(((const float *)p)[2 * i], ((const float *)p)[2 * i + 1]);
    default:
      return CMPLX(((const double *)p)[2 * i], ((const double *)p)[2 * i + 1]);
  }
}

static void put(etype t, void *p, size_t i, double complex v) {
  switch (t) {
    case T_S:
      ((float *)p)[i] = (float)creal(v);
      break;
    case T_D:
      ((double *)p)[i] = creal(v);
      break;
    case T_C:
      ((float *)p)[2 * i] = (float)creal(v);
      ((float *)p)[2 * i + 1] = (float)cimag(v);
      break;
    default:
      ((double *)p)[2 * i] = creal(v);
      ((double *)p)[2 * i + 1] = cimag(v);
  }
}

/* ---- cuBLAS
 * -----------------------------------------------------------------*/

struct cublasContext {
  int dev;
};

cublasStatus_t cublasCreate(cublasHandle_t *h) {
  *h = malloc(sizeof **h);
  (*h)->dev = g_current;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
  free(h);
  return CUBLAS_STATUS_SUCCESS;
}
const char *cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "success" : "mock cuBLAS error";
}

static double complex op_at(etype t, cublasOperation_t op, const void *A,
                            int lda, int i, int j) {
  /* Element (i, j) of op(A). */
  if (op == CUBLAS_OP_N) return get(t, A, (size_t)j * lda + i);
  double complex v = get(t, A, (size_t)i * lda + j);
  return op == CUBLAS_OP_C ? conj(v) : v;
}

static cublasStatus_t geam(cublasHandle_t h, etype t, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n,
                           double complex alpha, const void *A, int lda,
                           double complex beta, const void *B, int ldb, void *C,
                           int ldc) {
  if (g_current != h->dev) fail("cuBLAS geam with another device current");
  if (device_of(C) != h->dev) fail("cuBLAS geam output on another device");
  check_readable(h->dev, A, "cuBLAS geam reads A without peer access");
  check_readable(h->dev, B, "cuBLAS geam reads B without peer access");
  if (B == C && (tb != CUBLAS_OP_N || ldb != ldc)) fail("geam: bad in-place");
  if (A == C || B == C) fail("geam: the ceiling never aliases");
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i)
      put(t, C, (size_t)j * ldc + i,
          alpha * op_at(t, ta, A, lda, i, j) +
              beta * op_at(t, tb, B, ldb, i, j));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgeam(cublasHandle_t h, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n,
                           const float *alpha, const float *A, int lda,
                           const float *beta, const float *B, int ldb, float *C,
                           int ldc) {
  return geam(h, T_S, ta, tb, m, n, *alpha, A, lda, *beta, B, ldb, C, ldc);
}
cublasStatus_t cublasDgeam(cublasHandle_t h, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n,
                           const double *alpha, const double *A, int lda,
                           const double *beta, const double *B, int ldb,
                           double *C, int ldc) {
  return geam(h, T_D, ta, tb, m, n, *alpha, A, lda, *beta, B, ldb, C, ldc);
}
cublasStatus_t cublasCgeam(cublasHandle_t h, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n,
                           const cuComplex *alpha, const cuComplex *A, int lda,
                           const cuComplex *beta, const cuComplex *B, int ldb,
                           cuComplex *C, int ldc) {
  return geam(h, T_C, ta, tb, m, n, CMPLXF(alpha->x, alpha->y), A, lda,
              CMPLXF(beta->x, beta->y), B, ldb, C, ldc);
}
cublasStatus_t cublasZgeam(cublasHandle_t h, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n,
                           const cuDoubleComplex *alpha,
                           const cuDoubleComplex *A, int lda,
                           const cuDoubleComplex *beta,
                           const cuDoubleComplex *B, int ldb,
                           cuDoubleComplex *C, int ldc) {
  return geam(h, T_Z, ta, tb, m, n, CMPLX(alpha->x, alpha->y), A, lda,
              CMPLX(beta->x, beta->y), B, ldb, C, ldc);
}

static cublasStatus_t gemv(cublasHandle_t h, etype t, cublasOperation_t op,
                           int m, int n, double complex alpha, const void *A,
                           int lda, const void *x, double complex beta,
                           void *y) {
  if (g_current != h->dev) fail("cuBLAS gemv with another device current");
  if (device_of(y) != h->dev) fail("cuBLAS gemv output on another device");
  check_readable(h->dev, A, "cuBLAS gemv reads A without peer access");
  check_readable(h->dev, x, "cuBLAS gemv reads x without peer access");
  const int rows = op == CUBLAS_OP_N ? m : n, cols = op == CUBLAS_OP_N ? n : m;
  for (int i = 0; i < rows; ++i) {
    double complex s = 0;
    for (int j = 0; j < cols; ++j)
      s += op_at(t, op, A, lda, i, j) * get(t, x, (size_t)j);
    /* BLAS: beta == 0 means y is not read. */
    put(t, y, (size_t)i,
        alpha * s + (beta == 0 ? 0 : beta * get(t, y, (size_t)i)));
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemv(cublasHandle_t h, cublasOperation_t op, int m, int n,
                           const float *alpha, const float *A, int lda,
                           const float *x, int incx, const float *beta,
                           float *y, int incy) {
  if (incx != 1 || incy != 1) fail("gemv: strides");
  return gemv(h, T_S, op, m, n, *alpha, A, lda, x, *beta, y);
}
cublasStatus_t cublasDgemv(cublasHandle_t h, cublasOperation_t op, int m, int n,
                           const double *alpha, const double *A, int lda,
                           const double *x, int incx, const double *beta,
                           double *y, int incy) {
  if (incx != 1 || incy != 1) fail("gemv: strides");
  return gemv(h, T_D, op, m, n, *alpha, A, lda, x, *beta, y);
}
cublasStatus_t cublasCgemv(cublasHandle_t h, cublasOperation_t op, int m, int n,
                           const cuComplex *alpha, const cuComplex *A, int lda,
                           const cuComplex *x, int incx, const cuComplex *beta,
                           cuComplex *y, int incy) {
  if (incx != 1 || incy != 1) fail("gemv: strides");
  return gemv(h, T_C, op, m, n, CMPLXF(alpha->x, alpha->y), A, lda, x,
              CMPLXF(beta->x, beta->y), y);
}
cublasStatus_t cublasZgemv(cublasHandle_t h, cublasOperation_t op, int m, int n,
                           const cuDoubleComplex *alpha,
                           const cuDoubleComplex *A, int lda,
                           const cuDoubleComplex *x, int incx,
                           const cuDoubleComplex *beta, cuDoubleComplex *y,
                           int incy) {
  if (incx != 1 || incy != 1) fail("gemv: strides");
  return gemv(h, T_Z, op, m, n, CMPLX(alpha->x, alpha->y), A, lda, x,
              CMPLX(beta->x, beta->y), y);
}

/* ---- cuRAND
 * -----------------------------------------------------------------*/

struct curandGenerator_st {
  int dev;
  uint64_t state;
};

curandStatus_t curandCreateGenerator(curandGenerator_t *g, curandRngType_t t) {
  (void)t;
  *g = malloc(sizeof **g);
  (*g)->dev = g_current;
  (*g)->state = 0x9E3779B97F4A7C15ULL;
  return CURAND_STATUS_SUCCESS;
}
curandStatus_t curandDestroyGenerator(curandGenerator_t g) {
  free(g);
  return CURAND_STATUS_SUCCESS;
}
curandStatus_t curandSetPseudoRandomGeneratorSeed(curandGenerator_t g,
                                                  unsigned long long seed) {
  g->state = seed * 0x9E3779B97F4A7C15ULL + 1;
  return CURAND_STATUS_SUCCESS;
}

static double uniform01(curandGenerator_t g) {
  g->state ^= g->state >> 12;
  g->state ^= g->state << 25;
  g->state ^= g->state >> 27;
  return ((double)((g->state * 0x2545F4914F6CDD1DULL) >> 11) + 0.5) * 0x1p-53;
}

static curandStatus_t normals(curandGenerator_t g, void *out, size_t n,
                              double mean, double sd, int single) {
  if (g_current != g->dev) fail("cuRAND with another device current");
  if (device_of(out) != g->dev) fail("cuRAND output on another device");
  if (n % 2) return CURAND_STATUS_LENGTH_NOT_MULTIPLE;
  check_range(out, n * (single ? 4 : 8), "curandGenerateNormal");
  for (size_t i = 0; i < n; i += 2) {
    const double r = sqrt(-2 * log(uniform01(g))),
                 a = 6.283185307179586 * uniform01(g);
    const double v[2] = {mean + sd * r * cos(a), mean + sd * r * sin(a)};
    for (int k = 0; k < 2; ++k) {
      if (single)
        ((float *)out)[i + k] = (float)v[k];
      else
        ((double *)out)[i + k] = v[k];
    }
  }
  return CURAND_STATUS_SUCCESS;
}
curandStatus_t curandGenerateNormal(curandGenerator_t g, float *out, size_t n,
                                    float mean, float sd) {
  return normals(g, out, n, mean, sd, 1);
}
curandStatus_t curandGenerateNormalDouble(curandGenerator_t g, double *out,
                                          size_t n, double mean, double sd) {
  return normals(g, out, n, mean, sd, 0);
}

/* ---- cuSOLVERMg
 * ----------------------------------------------------------------*/

/* MOCK_CUDA_CORRUPT=<routine> makes that routine's result wrong in one entry
 * (relative 1e-6: far above rounding, far below what a glance would notice),
 * so that a test can see the ceiling's checks catch a wrong answer. */
static int corrupt(const char *routine) {
  const char *c = getenv("MOCK_CUDA_CORRUPT");
  return c != NULL && strcmp(c, routine) == 0;
}

struct cusolverMgContext {
  int ndev, dev[NDEV];
};

typedef struct grid {
  int ndev, dev[NDEV];
} grid;

typedef struct desc {
  int64_t rows, cols, row_block, col_block;
  etype t;
  const grid *g;
} desc;

#define LWORK 1000

cusolverStatus_t cusolverMgCreate(cusolverMgHandle_t *h) {
  *h = calloc(1, sizeof **h);
  return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverMgDestroy(cusolverMgHandle_t h) {
  free(h);
  return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverMgDeviceSelect(cusolverMgHandle_t h, int n,
                                        int dev[]) {
  if (n < 1 || n > NDEV) return CUSOLVER_STATUS_INVALID_VALUE;
  h->ndev = n;
  memcpy(h->dev, dev, (size_t)n * sizeof *dev);
  return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverMgCreateDeviceGrid(cudaLibMgGrid_t *out, int32_t rows,
                                            int32_t cols, const int32_t dev[],
                                            cusolverMgGridMapping_t map) {
  if (rows != 1 || map != CUDALIBMG_GRID_MAPPING_COL_MAJOR)
    return CUSOLVER_STATUS_NOT_SUPPORTED;
  grid *g = calloc(1, sizeof *g);
  g->ndev = cols;
  memcpy(g->dev, dev, (size_t)cols * sizeof *dev);
  *out = g;
  return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverMgDestroyGrid(cudaLibMgGrid_t g) {
  free(g);
  return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverMgCreateMatrixDesc(cudaLibMgMatrixDesc_t *out,
                                            int64_t rows, int64_t cols,
                                            int64_t row_block,
                                            int64_t col_block, cudaDataType t,
                                            const cudaLibMgGrid_t g) {
  if (row_block != rows) return CUSOLVER_STATUS_NOT_SUPPORTED;
  desc *d = calloc(1, sizeof *d);
  *d = (desc){rows, cols, row_block, col_block, from_cuda(t), g};
  *out = d;
  return CUSOLVER_STATUS_SUCCESS;
}
cusolverStatus_t cusolverMgDestroyMatrixDesc(cudaLibMgMatrixDesc_t d) {
  free(d);
  return CUSOLVER_STATUS_SUCCESS;
}

/* The address of global element (i, j): column tile j / col_block lives on
 * grid column (tile % ndev) as its local tile tile / ndev. */
static void *elem(const desc *d, void *const *ptr, int64_t i, int64_t j) {
  const int64_t tile = j / d->col_block, q = tile % d->g->ndev;
  const int64_t lc = (tile / d->g->ndev) * d->col_block + j % d->col_block;
  char *p = (char *)ptr[q] + ((size_t)lc * d->rows + i) * esize(d->t);
  if (device_of(p) != d->g->dev[q]) fail("cuSOLVERMg: a pointer off its GPU");
  check_range(p, esize(d->t), "cuSOLVERMg operand");
  return p;
}

static double complex mget(const desc *d, void *const *ptr, int64_t i,
                           int64_t j) {
  return get(d->t, elem(d, ptr, i, j), 0);
}

static void mput(const desc *d, void *const *ptr, int64_t i, int64_t j,
                 double complex v) {
  put(d->t, elem(d, ptr, i, j), 0, v);
}

static void check_call(cusolverMgHandle_t h, const desc *d, void **work,
                       int64_t lwork) {
  if (g_current != h->dev[0])
    fail("cuSOLVERMg: the grid's first GPU is not current");
  if (d->g->ndev != h->ndev) fail("cuSOLVERMg: descriptor of another grid");
  if (lwork < LWORK) fail("cuSOLVERMg: workspace smaller than asked");
  for (int q = 0; q < h->ndev; ++q)
    if (device_of(work[q]) != h->dev[q])
      fail("cuSOLVERMg: workspace off its GPU");
}

/* L (n x n, column-major) of the lower triangle of A; 0 or the failing minor.
 */
static int cholesky(const desc *d, void **A, int n, double complex *L) {
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) L[(size_t)j * n + i] = mget(d, A, i, j);
  for (int j = 0; j < n; ++j) {
    double s = creal(L[(size_t)j * n + j]);
    for (int k = 0; k < j; ++k)
      s -= creal(L[(size_t)k * n + j] * conj(L[(size_t)k * n + j]));
    if (!(s > 0)) return j + 1;
    const double ljj = sqrt(s);
    L[(size_t)j * n + j] = ljj;
    for (int i = j + 1; i < n; ++i) {
      double complex v = L[(size_t)j * n + i];
      for (int k = 0; k < j; ++k)
        v -= L[(size_t)k * n + i] * conj(L[(size_t)k * n + j]);
      L[(size_t)j * n + i] = v / ljj;
    }
  }
  return 0;
}

/* x := (L L^H)^-1 x with L read from A's lower triangle. */
static void chol_solve(const desc *d, void **A, int n, double complex *x) {
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < i; ++k) x[i] -= mget(d, A, i, k) * x[k];
    x[i] /= mget(d, A, i, i);
  }
  for (int i = n - 1; i >= 0; --i) {
    for (int k = i + 1; k < n; ++k) x[i] -= conj(mget(d, A, k, i)) * x[k];
    x[i] /= conj(mget(d, A, i, i));
  }
}

cusolverStatus_t cusolverMgPotrf_bufferSize(cusolverMgHandle_t h,
                                            cublasFillMode_t uplo, int n,
                                            void *A[], int IA, int JA,
                                            cudaLibMgMatrixDesc_t dA,
                                            cudaDataType t, int64_t *lwork) {
  (void)h, (void)n, (void)A, (void)dA, (void)t;
  if (uplo != CUBLAS_FILL_MODE_LOWER || IA != 1 || JA != 1)
    return CUSOLVER_STATUS_NOT_SUPPORTED;
  *lwork = LWORK;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverMgPotrf(cusolverMgHandle_t h, cublasFillMode_t uplo,
                                 int n, void *A[], int IA, int JA,
                                 cudaLibMgMatrixDesc_t dA, cudaDataType t,
                                 void *work[], int64_t lwork, int *info) {
  const desc *d = dA;
  if (uplo != CUBLAS_FILL_MODE_LOWER || IA != 1 || JA != 1 ||
      from_cuda(t) != d->t || d->rows != n)
    return CUSOLVER_STATUS_INVALID_VALUE;
  check_call(h, d, work, lwork);
  double complex *L = calloc((size_t)n * n, sizeof *L);
  *info = cholesky(d, A, n, L);
  if (*info == 0)
    for (int j = 0; j < n; ++j)
      for (int i = j; i < n; ++i) mput(d, A, i, j, L[(size_t)j * n + i]);
  free(L);
  /* As cuSOLVERMg 13.0 does (docs/gpu-notes.md). */
  return *info ? CUSOLVER_STATUS_INTERNAL_ERROR : CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverMgPotrs_bufferSize(
    cusolverMgHandle_t h, cublasFillMode_t uplo, int n, int nrhs, void *A[],
    int IA, int JA, cudaLibMgMatrixDesc_t dA, void *B[], int IB, int JB,
    cudaLibMgMatrixDesc_t dB, cudaDataType t, int64_t *lwork) {
  (void)h, (void)n, (void)nrhs, (void)A, (void)dA, (void)B, (void)dB, (void)t;
  if (uplo != CUBLAS_FILL_MODE_LOWER || IA != 1 || JA != 1 || IB != 1 ||
      JB != 1)
    return CUSOLVER_STATUS_NOT_SUPPORTED;
  *lwork = LWORK;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverMgPotrs(cusolverMgHandle_t h, cublasFillMode_t uplo,
                                 int n, int nrhs, void *A[], int IA, int JA,
                                 cudaLibMgMatrixDesc_t dA, void *B[], int IB,
                                 int JB, cudaLibMgMatrixDesc_t dB,
                                 cudaDataType t, void *work[], int64_t lwork,
                                 int *info) {
  const desc *da = dA, *db = dB;
  if (uplo != CUBLAS_FILL_MODE_LOWER || IA != 1 || JA != 1 || IB != 1 ||
      JB != 1 || db->rows != n || db->cols != nrhs || from_cuda(t) != da->t)
    return CUSOLVER_STATUS_INVALID_VALUE;
  check_call(h, da, work, lwork);
  for (int q = 0; q < h->ndev; ++q)
    if (device_of(B[q]) != h->dev[q]) fail("cuSOLVERMg potrs: B off its GPU");
  double complex *x = malloc((size_t)n * sizeof *x);
  for (int j = 0; j < nrhs; ++j) {
    for (int i = 0; i < n; ++i) x[i] = mget(db, B, i, j);
    chol_solve(da, A, n, x);
    if (corrupt("potrs")) x[n / 2] *= 1 + 1e-6;
    for (int i = 0; i < n; ++i) mput(db, B, i, j, x[i]);
  }
  free(x);
  *info = 0;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverMgPotri_bufferSize(cusolverMgHandle_t h,
                                            cublasFillMode_t uplo, int n,
                                            void *A[], int IA, int JA,
                                            cudaLibMgMatrixDesc_t dA,
                                            cudaDataType t, int64_t *lwork) {
  return cusolverMgPotrf_bufferSize(h, uplo, n, A, IA, JA, dA, t, lwork);
}

cusolverStatus_t cusolverMgPotri(cusolverMgHandle_t h, cublasFillMode_t uplo,
                                 int n, void *A[], int IA, int JA,
                                 cudaLibMgMatrixDesc_t dA, cudaDataType t,
                                 void *work[], int64_t lwork, int *info) {
  const desc *d = dA;
  if (uplo != CUBLAS_FILL_MODE_LOWER || IA != 1 || JA != 1 ||
      from_cuda(t) != d->t)
    return CUSOLVER_STATUS_INVALID_VALUE;
  check_call(h, d, work, lwork);
  double complex *inv = malloc((size_t)n * n * sizeof *inv);
  for (int j = 0; j < n; ++j) {
    double complex *x = inv + (size_t)j * n;
    for (int i = 0; i < n; ++i) x[i] = i == j;
    chol_solve(d, A, n, x);
  }
  if (corrupt("potri")) inv[(size_t)(n - 1) * n + n - 1] *= 1 + 1e-6;
  /* The lower triangle only, as LAPACK's potri. */
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) mput(d, A, i, j, inv[(size_t)j * n + i]);
  free(inv);
  *info = 0;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverMgSyevd_bufferSize(
    cusolverMgHandle_t h, cusolverEigMode_t jobz, cublasFillMode_t uplo, int n,
    void *A[], int IA, int JA, cudaLibMgMatrixDesc_t dA, void *W,
    cudaDataType tw, cudaDataType t, int64_t *lwork) {
  (void)h, (void)jobz, (void)n, (void)A, (void)dA, (void)W, (void)tw, (void)t;
  if (uplo != CUBLAS_FILL_MODE_LOWER || IA != 1 || JA != 1)
    return CUSOLVER_STATUS_NOT_SUPPORTED;
  *lwork = LWORK;
  return CUSOLVER_STATUS_SUCCESS;
}

/* Cyclic Jacobi on a real symmetric matrix (columns of V: eigenvectors). */
static void jacobi(int n, double *a, double *v) {
  for (int i = 0; i < n * n; ++i) v[i] = i % (n + 1) == 0;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, all = 0;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        all += a[j * n + i] * a[j * n + i];
        if (i != j) off += a[j * n + i] * a[j * n + i];
      }
    if (off <= 1e-32 * all) return;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        const double apq = a[q * n + p];
        if (apq == 0) continue;
        const double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const double tt =
            (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
        const double c = 1 / sqrt(tt * tt + 1), s = tt * c;
        for (int k = 0; k < n; ++k) { /* columns p, q */
          const double x = a[p * n + k], y = a[q * n + k];
          a[p * n + k] = c * x - s * y;
          a[q * n + k] = s * x + c * y;
        }
        for (int k = 0; k < n; ++k) { /* rows p, q */
          const double x = a[k * n + p], y = a[k * n + q];
          a[k * n + p] = c * x - s * y;
          a[k * n + q] = s * x + c * y;
        }
        for (int k = 0; k < n; ++k) {
          const double x = v[p * n + k], y = v[q * n + k];
          v[p * n + k] = c * x - s * y;
          v[q * n + k] = s * x + c * y;
        }
      }
  }
}

cusolverStatus_t cusolverMgSyevd(cusolverMgHandle_t h, cusolverEigMode_t jobz,
                                 cublasFillMode_t uplo, int n, void *A[],
                                 int IA, int JA, cudaLibMgMatrixDesc_t dA,
                                 void *W, cudaDataType tw, cudaDataType t,
                                 void *work[], int64_t lwork, int *info) {
  const desc *d = dA;
  if (uplo != CUBLAS_FILL_MODE_LOWER || IA != 1 || JA != 1 ||
      jobz != CUSOLVER_EIG_MODE_VECTOR || from_cuda(t) != d->t)
    return CUSOLVER_STATUS_INVALID_VALUE;
  if (d->t == T_C || d->t == T_Z) return CUSOLVER_STATUS_NOT_SUPPORTED;
  if (device_of(W) >= 0) fail("cuSOLVERMg syevd: W must be host memory");
  check_call(h, d, work, lwork);
  double *a = malloc((size_t)n * n * sizeof *a),
         *v = malloc((size_t)n * n * sizeof *v);
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i)
      a[(size_t)j * n + i] = a[(size_t)i * n + j] = creal(mget(d, A, i, j));
  jacobi(n, a, v);
  if (corrupt("syevd")) v[(size_t)(n / 2) * n + 3] += 1e-6;
  int *order = malloc((size_t)n * sizeof *order);
  for (int i = 0; i < n; ++i) order[i] = i;
  for (int i = 1; i < n; ++i) /* insertion sort by eigenvalue */
    for (int k = i; k > 0 && a[(size_t)order[k] * (n + 1)] <
                                 a[(size_t)order[k - 1] * (n + 1)];
         --k) {
      const int tmp = order[k];
      order[k] = order[k - 1];
      order[k - 1] = tmp;
    }
  for (int j = 0; j < n; ++j) {
    const double w = a[(size_t)order[j] * (n + 1)];
    if (tw == CUDA_R_32F)
      ((float *)W)[j] = (float)w;
    else
      ((double *)W)[j] = w;
    for (int i = 0; i < n; ++i) mput(d, A, i, j, v[(size_t)order[j] * n + i]);
  }
  free(order);
  free(a);
  free(v);
  *info = 0;
  return CUSOLVER_STATUS_SUCCESS;
}
