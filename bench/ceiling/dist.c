/* Distributed matrices: allocation, the random Hermitian positive definite
 * fill, the mirror of the lower triangle, and matrix-vector products for the
 * checks. Everything here is outside the timed region. cuBLAS only (plain C,
 * no kernels of our own): a kernel launched from gcc-built C is not
 * possible without the driver API, and these few calls do the job. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ceiling.h"

typedef union scalar {
  float s;
  double d;
  cuComplex c;
  cuDoubleComplex z;
} scalar;

static scalar make_scalar(dtype_t t, double v) {
  scalar x;
  memset(&x, 0, sizeof x);
  switch (t) {
    case DT_F32:
      x.s = (float)v;
      break;
    case DT_F64:
      x.d = v;
      break;
    case DT_C64:
      x.c = make_cuComplex((float)v, 0.0f);
      break;
    case DT_C128:
      x.z = make_cuDoubleComplex(v, 0.0);
      break;
  }
  return x;
}

/* The conjugate transpose for complex types, the transpose for real ones. */
static cublasOperation_t op_ct(dtype_t t) {
  return dtype_of(t)->complex ? CUBLAS_OP_C : CUBLAS_OP_T;
}

/* C (m x m) = A^H, as 1 A^H + 0 A^H: B is A itself, so that nothing is read
 * from C (which may hold anything, NaN included: 0 * NaN is NaN should cuBLAS
 * read B despite beta = 0). */
static cublasStatus_t geam_ct(cublasHandle_t h, dtype_t t, int m, const void *A,
                              int lda, void *C, int ldc) {
  const scalar one = make_scalar(t, 1.0), zero = make_scalar(t, 0.0);
  const cublasOperation_t op = op_ct(t);
  switch (t) {
    case DT_F32:
      return cublasSgeam(h, op, op, m, m, &one.s, A, lda, &zero.s, A, lda, C,
                         ldc);
    case DT_F64:
      return cublasDgeam(h, op, op, m, m, &one.d, A, lda, &zero.d, A, lda, C,
                         ldc);
    case DT_C64:
      return cublasCgeam(h, op, op, m, m, &one.c, A, lda, &zero.c, A, lda, C,
                         ldc);
    default:
      return cublasZgeam(h, op, op, m, m, &one.z, A, lda, &zero.z, A, lda, C,
                         ldc);
  }
}

/* y = op(A) x + beta y, A m x n. */
static cublasStatus_t gemv(cublasHandle_t h, dtype_t t, cublasOperation_t op,
                           int m, int n, const void *A, int lda, const void *x,
                           double beta, void *y) {
  const scalar one = make_scalar(t, 1.0), b = make_scalar(t, beta);
  switch (t) {
    case DT_F32:
      return cublasSgemv(h, op, m, n, &one.s, A, lda, x, 1, &b.s, y, 1);
    case DT_F64:
      return cublasDgemv(h, op, m, n, &one.d, A, lda, x, 1, &b.d, y, 1);
    case DT_C64:
      return cublasCgemv(h, op, m, n, &one.c, A, lda, x, 1, &b.c, y, 1);
    default:
      return cublasZgemv(h, op, m, n, &one.z, A, lda, x, 1, &b.z, y, 1);
  }
}

static char *at(const dmat_t *m, int d, int64_t row, int64_t local_col) {
  return (char *)m->p[d] + ((size_t)local_col * (size_t)m->n + (size_t)row) *
                               dtype_of(m->dt)->size;
}

size_t dmat_bytes(const dmat_t *m) {
  return (size_t)m->n * (size_t)m->cols * dtype_of(m->dt)->size;
}

int dmat_alloc(const ctx_t *c, dmat_t *m, dtype_t dt, int64_t n, int64_t tile) {
  memset(m, 0, sizeof *m);
  m->dt = dt;
  m->n = n;
  m->tile = tile;
  m->cols = n / c->ndev;
  for (int d = 0; d < c->ndev; ++d) {
    if (CUDA(cudaSetDevice(c->dev[d]))) return -1;
    if (CUDA(cudaMalloc(&m->p[d], dmat_bytes(m)))) {
      fprintf(stderr, "ceiling: (%.1f GB on GPU %d)\n", dmat_bytes(m) / 1e9,
              c->dev[d]);
      return -1;
    }
  }
  return 0;
}

void dmat_free(const ctx_t *c, dmat_t *m) {
  for (int d = 0; d < c->ndev; ++d)
    if (m->p[d] != NULL) {
      (void)CUDA(cudaSetDevice(c->dev[d]));
      (void)CUDA(cudaFree(m->p[d]));
      m->p[d] = NULL;
    }
}

int dmat_copy(const ctx_t *c, dmat_t *dst, const dmat_t *src) {
  for (int d = 0; d < c->ndev; ++d) {
    if (CUDA(cudaSetDevice(c->dev[d]))) return -1;
    if (CUDA(cudaMemcpyAsync(dst->p[d], src->p[d], dmat_bytes(src),
                             cudaMemcpyDeviceToDevice, 0)))
      return -1;
  }
  return sync_all(c);
}

int64_t dmat_global_col(const dmat_t *m, int ndev, layout_t layout, int d,
                        int64_t lc) {
  if (layout == LAYOUT_CONTIG) return (int64_t)d * m->cols + lc;
  return ((lc / m->tile) * ndev + d) * m->tile + lc % m->tile;
}

int dmat_mirror_lower(const ctx_t *c, dmat_t *m) {
  const int G = c->ndev;
  const int64_t T = m->tile, nt = m->n / m->tile;
  const size_t es = dtype_of(m->dt)->size;
  void *w[CEIL_MAX_DEVICES] = {0};
  int rc = 0;
  for (int d = 0; rc == 0 && d < G; ++d) {
    rc = CUDA(cudaSetDevice(c->dev[d]));
    if (rc == 0) rc = CUDA(cudaMalloc(&w[d], (size_t)(T * T) * es));
  }
  for (int64_t t = 0; rc == 0 && t < nt; ++t) {
    const int q = (int)(t % G);
    const int64_t lt = t / G;
    rc = CUDA(cudaSetDevice(c->dev[q]));
    /* Block (s, t) above the diagonal := block (t, s)^H, which sits in tile
     * s's columns on device s % G; cuBLAS reads it over peer access. */
    for (int64_t s = 0; rc == 0 && s < t; ++s) {
      const void *src = at(m, (int)(s % G), t * T, (s / G) * T);
      void *dst = at(m, q, s * T, lt * T);
      rc = BLAS(
          geam_ct(c->blas[q], m->dt, (int)T, src, (int)m->n, dst, (int)m->n));
    }
    /* The diagonal block: W = D^H, then D's strict upper triangle from W,
     * column by column (column j has j entries above the diagonal). */
    char *diag = at(m, q, t * T, lt * T);
    if (rc == 0)
      rc = BLAS(
          geam_ct(c->blas[q], m->dt, (int)T, diag, (int)m->n, w[q], (int)T));
    for (int64_t j = 1; rc == 0 && j < T; ++j)
      rc = CUDA(cudaMemcpyAsync(diag + (size_t)(j * m->n) * es,
                                (char *)w[q] + (size_t)(j * T) * es,
                                (size_t)j * es, cudaMemcpyDeviceToDevice, 0));
  }
  if (rc == 0) rc = sync_all(c);
  for (int d = 0; d < G; ++d)
    if (w[d] != NULL) {
      (void)CUDA(cudaSetDevice(c->dev[d]));
      (void)CUDA(cudaFree(w[d]));
    }
  return rc;
}

/* Every diagonal entry := v (real; imaginary part 0). */
static int set_diagonal(const ctx_t *c, dmat_t *m, double v) {
  const dtype_info *ti = dtype_of(m->dt);
  const int64_t T = m->tile, nt = m->n / m->tile;
  char *host = calloc((size_t)T, ti->size);
  if (host == NULL) {
    fprintf(stderr, "ceiling: out of host memory\n");
    return -1;
  }
  for (int64_t i = 0; i < T; ++i) {
    if (ti->real_type == CUDA_R_32F) {
      float f = (float)v;
      memcpy(host + (size_t)i * ti->size, &f, sizeof f);
    } else {
      memcpy(host + (size_t)i * ti->size, &v, sizeof v);
    }
  }
  int rc = 0;
  for (int64_t t = 0; rc == 0 && t < nt; ++t) {
    const int q = (int)(t % c->ndev);
    rc = CUDA(cudaSetDevice(c->dev[q]));
    if (rc == 0)
      rc = CUDA(cudaMemcpy2D(at(m, q, t * T, (t / c->ndev) * T),
                             (size_t)(m->n + 1) * ti->size, host, ti->size,
                             ti->size, (size_t)T, cudaMemcpyHostToDevice));
  }
  free(host);
  return rc;
}

int dmat_random_hpd(ctx_t *c, dmat_t *m, double *shift) {
  const dtype_info *ti = dtype_of(m->dt);
  const size_t count = (size_t)m->n * (size_t)m->cols * (ti->complex ? 2 : 1);
  if (count % 2 != 0) {
    fprintf(stderr,
            "ceiling: cuRAND draws normals in pairs: choose an even N\n");
    return -1;
  }
  for (int d = 0; d < c->ndev; ++d) {
    if (CUDA(cudaSetDevice(c->dev[d]))) return -1;
    if (ti->real_type == CUDA_R_32F) {
      if (RAND(curandGenerateNormal(c->rng[d], m->p[d], count, 0.0f, 1.0f)))
        return -1;
    } else if (RAND(curandGenerateNormalDouble(c->rng[d], m->p[d], count, 0.0,
                                               1.0))) {
      return -1;
    }
  }
  if (sync_all(c) || dmat_mirror_lower(c, m)) return -1;
  *shift = 3.0 * sqrt((ti->complex ? 2.0 : 1.0) * (double)m->n);
  if (set_diagonal(c, m, *shift)) return -1;
  return sync_all(c);
}

/* Columns per gemv call: keeps every call's matrix under 2^31 elements. */
#define GEMV_CHUNK 4096

int dmat_gemv(const ctx_t *c, const dmat_t *m, layout_t layout, int conj_trans,
              const double *x, double *y) {
  const dtype_info *ti = dtype_of(m->dt);
  const size_t nd = ti->complex ? 2 : 1; /* doubles per element */
  const size_t n = (size_t)m->n, r = (size_t)m->cols;
  double *hx = malloc(n * nd * sizeof *hx), *hy = malloc(n * nd * sizeof *hy);
  void *vin = NULL, *vout = NULL;
  int rc = 0;
  if (hx == NULL || hy == NULL) {
    fprintf(stderr, "ceiling: out of host memory\n");
    rc = -1;
  }
  if (rc == 0 && !conj_trans) memset(y, 0, n * nd * sizeof *y);
  for (int d = 0; rc == 0 && d < c->ndev; ++d) {
    rc = CUDA(cudaSetDevice(c->dev[d]));
    if (rc == 0) rc = CUDA(cudaMalloc(&vin, n * ti->size));
    if (rc == 0) rc = CUDA(cudaMalloc(&vout, n * ti->size));
    if (rc == 0 && !conj_trans) {
      /* y += M_d x_d, x_d: the entries of x at device d's columns. */
      for (size_t lc = 0; lc < r; ++lc) {
        const size_t g =
            (size_t)dmat_global_col(m, c->ndev, layout, d, (int64_t)lc);
        memcpy(hx + lc * nd, x + g * nd, nd * sizeof *hx);
      }
      rc = host_to_device(m->dt, hx, r, vin);
      for (size_t c0 = 0; rc == 0 && c0 < r; c0 += GEMV_CHUNK) {
        const size_t k = r - c0 < GEMV_CHUNK ? r - c0 : GEMV_CHUNK;
        rc = BLAS(gemv(c->blas[d], m->dt, CUBLAS_OP_N, (int)n, (int)k,
                       at(m, d, 0, (int64_t)c0), (int)n,
                       (char *)vin + c0 * ti->size, c0 == 0 ? 0.0 : 1.0, vout));
      }
      if (rc == 0) rc = device_to_host(m->dt, vout, n, hy);
      for (size_t i = 0; rc == 0 && i < n * nd; ++i) y[i] += hy[i];
    } else if (rc == 0) {
      /* Device d's columns of M^H x: entries of y at those columns. */
      rc = host_to_device(m->dt, x, n, vin);
      for (size_t c0 = 0; rc == 0 && c0 < r; c0 += GEMV_CHUNK) {
        const size_t k = r - c0 < GEMV_CHUNK ? r - c0 : GEMV_CHUNK;
        rc = BLAS(gemv(c->blas[d], m->dt, op_ct(m->dt), (int)n, (int)k,
                       at(m, d, 0, (int64_t)c0), (int)n, vin, 0.0,
                       (char *)vout + c0 * ti->size));
      }
      if (rc == 0) rc = device_to_host(m->dt, vout, r, hy);
      for (size_t lc = 0; rc == 0 && lc < r; ++lc) {
        const size_t g =
            (size_t)dmat_global_col(m, c->ndev, layout, d, (int64_t)lc);
        memcpy(y + g * nd, hy + lc * nd, nd * sizeof *y);
      }
    }
    if (vin != NULL) (void)CUDA(cudaFree(vin));
    if (vout != NULL) (void)CUDA(cudaFree(vout));
    vin = vout = NULL;
  }
  free(hx);
  free(hy);
  return rc;
}
