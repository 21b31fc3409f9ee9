/* The Hermitian fill with cuBLAS only (no kernels of our own).
 *
 * With r = local_cols, device q holds the column slab q, whose row blocks are
 * the r x r blocks B(p, q). For p < q, B(p, q) = B(q, p)^H, and B(q, p) sits
 * in device p's slab: one geam on device q reads it over NVLink (peer access).
 * The diagonal block B(q, q) is filled in tiles of t x t: a diagonal tile X
 * becomes tril(X) + strict_tril(X)^H by two out-of-place trmm with an identity
 * (one with the unit diagonal, which drops X's diagonal) and two geam; the
 * strip right of the tile is the conjugate transpose of the panel below it,
 * one geam. Reads never touch what the fill writes, so each device's calls
 * run in order on its own stream and the devices run concurrently. */
#include "engine/cuda_hermitian.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/dtype.h"

#define FILL_TILE 512

/* C = alpha op(A) + beta op(B); OP_C is the transpose for real types. */
static cublasStatus_t geam(cublasHandle_t h, jmg_dtype t, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n, double alpha,
                           const void *A, int lda, double beta, const void *B,
                           int ldb, void *C, int ldc) {
  jmg_cuda_scalar al = jmg_cuda_scalar_of(t, alpha),
                  be = jmg_cuda_scalar_of(t, beta);
  switch (t) {
    case JMG_F32:
      return cublasSgeam(h, ta, tb, m, n, &al.s, A, lda, &be.s, B, ldb, C, ldc);
    case JMG_F64:
      return cublasDgeam(h, ta, tb, m, n, &al.d, A, lda, &be.d, B, ldb, C, ldc);
    case JMG_C64:
      return cublasCgeam(h, ta, tb, m, n, &al.c, A, lda, &be.c, B, ldb, C, ldc);
    default:
      return cublasZgeam(h, ta, tb, m, n, &al.z, A, lda, &be.z, B, ldb, C, ldc);
  }
}

/* C = tril(A) * B (out of place), diag says whether A's diagonal is used. */
static cublasStatus_t trmm(cublasHandle_t h, jmg_dtype t, cublasDiagType_t diag,
                           int m, const void *A, int lda, const void *B,
                           int ldb, void *C, int ldc) {
  jmg_cuda_scalar one = jmg_cuda_scalar_of(t, 1.0);
  const cublasSideMode_t L = CUBLAS_SIDE_LEFT;
  const cublasFillMode_t lo = CUBLAS_FILL_MODE_LOWER;
  const cublasOperation_t nt = CUBLAS_OP_N;
  switch (t) {
    case JMG_F32:
      return cublasStrmm(h, L, lo, nt, diag, m, m, &one.s, A, lda, B, ldb, C,
                         ldc);
    case JMG_F64:
      return cublasDtrmm(h, L, lo, nt, diag, m, m, &one.d, A, lda, B, ldb, C,
                         ldc);
    case JMG_C64:
      return cublasCtrmm(h, L, lo, nt, diag, m, m, &one.c, A, lda, B, ldb, C,
                         ldc);
    default:
      return cublasZtrmm(h, L, lo, nt, diag, m, m, &one.z, A, lda, B, ldb, C,
                         ldc);
  }
}

typedef struct scratch {
  void *tile, *work, *eye; /* t x t each, leading dimension t */
  size_t bytes;
} scratch;

/* Issues device q's part of the fill on its stream. */
static int fill_device(const jmg_dist_matrix *a, int q, cublasHandle_t h,
                       const scratch *sc, int t, jmg_error *err) {
  const char *op = "potri";
  const jmg_dtype dt = a->dtype;
  const size_t es = jmg_dtype_size(dt);
  const int n = (int)a->n, r = (int)a->local_cols;
  char *slab = a->data[q];
  const cublasOperation_t N = CUBLAS_OP_N, C = CUBLAS_OP_C;
#define AT(base, row, col) \
  ((char *)(base) + ((size_t)(col) * (size_t)n + (size_t)(row)) * es)

  /* Blocks above the diagonal block, from the other devices' slabs. */
  for (int p = 0; p < q; ++p) {
    void *dst = AT(slab, p * r, 0);
    int rc =
        JMG_CUBLAS_TRY(geam(h, dt, C, N, r, r, 1.0, AT(a->data[p], q * r, 0), n,
                            0.0, dst, n, dst, n),
                       op, err);
    if (rc != 0) return rc;
  }
  /* The diagonal block, tile by tile. */
  char *block = AT(slab, q * r, 0);
  for (int o = 0; o < r; o += t) {
    const int s = (r - o < t) ? r - o : t;
    char *x = AT(block, o, o);
    int rc = JMG_CUDA_TRY(
        cudaMemcpy2DAsync(
            sc->tile, (size_t)t * es, x, (size_t)n * es, (size_t)s * es,
            (size_t)s, cudaMemcpyDeviceToDevice,
            (cudaStream_t)((const jmg_cuda_device *)a->device_ctx[q])->stream),
        op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(
          trmm(h, dt, CUBLAS_DIAG_NON_UNIT, s, sc->tile, t, sc->eye, t, x, n),
          op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(trmm(h, dt, CUBLAS_DIAG_UNIT, s, sc->tile, t, sc->eye,
                               t, sc->work, t),
                          op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(
          geam(h, dt, N, C, s, s, 1.0, x, n, 1.0, sc->work, t, x, n), op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(
          geam(h, dt, N, N, s, s, 1.0, x, n, -1.0, sc->eye, t, x, n), op, err);
    if (rc == 0 && o + s < r) {
      void *dst = AT(block, o, o + s);
      rc = JMG_CUBLAS_TRY(geam(h, dt, C, N, s, r - o - s, 1.0,
                               AT(block, o + s, o), n, 0.0, dst, n, dst, n),
                          op, err);
    }
    if (rc != 0) return rc;
  }
#undef AT
  return 0;
}

/* The fill's tile: t x t, at most FILL_TILE. */
static int fill_tile(const jmg_dist_matrix *a) {
  return a->local_cols < FILL_TILE ? (int)a->local_cols : FILL_TILE;
}

size_t jmg_cuda_hermitian_fill_bytes(const jmg_dist_matrix *a) {
  const size_t t = (size_t)fill_tile(a);
  return 3 * t * t * jmg_dtype_size(a->dtype);
}

int jmg_cuda_hermitian_fill(const jmg_dist_matrix *a,
                            const cublasHandle_t *cublas, jmg_error *err) {
  const char *op = "potri";
  const int t = fill_tile(a);
  const size_t es = jmg_dtype_size(a->dtype);
  /* Three tiles a device (jmg_cuda_hermitian_fill_bytes): tile, work, eye. */
  const size_t bytes = jmg_cuda_hermitian_fill_bytes(a) / 3;
  scratch *sc = calloc((size_t)a->ndev, sizeof *sc);
  /* t ones: the identity's diagonal, copied onto a zeroed device tile (a
   * t x t identity built on the host and copied whole cost more than the
   * fill itself at N = 1024: docs/gpu-notes.md). */
  char *ones = calloc((size_t)t, es); /* zeroed: complex ones */
  int rc = 0;
  if (sc == NULL || ones == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate the fill's scratch");
  for (int i = 0; rc == 0 && i < t; ++i)
    jmg_dtype_set_one(a->dtype, ones + (size_t)i * es);
  for (int q = 0; rc == 0 && q < a->ndev; ++q) {
    const jmg_cuda_device *d = a->device_ctx[q];
    cudaStream_t stream = (cudaStream_t)d->stream;
    sc[q].bytes = bytes;
    rc = JMG_CUDA_TRY(cudaSetDevice(d->device), op, err);
    if (rc == 0) rc = d->alloc(d->alloc_ctx, bytes, &sc[q].tile, err);
    if (rc == 0) rc = d->alloc(d->alloc_ctx, bytes, &sc[q].work, err);
    if (rc == 0) rc = d->alloc(d->alloc_ctx, bytes, &sc[q].eye, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaMemsetAsync(sc[q].eye, 0, bytes, stream), op, err);
    /* The diagonal: element i goes to (i, i), (t + 1) elements apart. */
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaMemcpy2DAsync(sc[q].eye, (size_t)(t + 1) * es, ones, es, es,
                            (size_t)t, cudaMemcpyHostToDevice, stream),
          op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(cublasSetStream(cublas[q], stream), op, err);
    if (rc == 0) rc = fill_device(a, q, cublas[q], &sc[q], t, err);
  }
  /* Wait for every device (also after a failure: scratch is in use). */
  for (int q = 0; q < a->ndev; ++q) {
    const jmg_cuda_device *d = a->device_ctx[q];
    jmg_error ignored;
    int s = JMG_CUDA_TRY(cudaStreamSynchronize((cudaStream_t)d->stream), op,
                         rc == 0 ? err : &ignored);
    if (rc == 0) rc = s;
    if (sc != NULL) {
      if (sc[q].tile) d->free(d->alloc_ctx, sc[q].tile, bytes);
      if (sc[q].work) d->free(d->alloc_ctx, sc[q].work, bytes);
      if (sc[q].eye) d->free(d->alloc_ctx, sc[q].eye, bytes);
    }
  }
  free(sc);
  free(ones);
  if (rc != 0) jmg_error_name_op(err, op);
  return rc;
}
