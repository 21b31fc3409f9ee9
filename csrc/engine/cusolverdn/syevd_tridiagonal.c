/* syevd's tridiagonal path on one GPU: jaxmg's own eigensolver, for the A
 * whose cusolverDnXsyevd workspace (4 A, with or without eigenvectors) does
 * not fit beside it. It needs one more A (the eigenvectors of T) when
 * eigenvectors are asked and next to nothing when not:
 *
 * 1. A = Q T Q^H, T real symmetric tridiagonal, by LAPACK's blocked ?sytrd /
 *    ?hetrd (lower) on cuBLAS's 64-bit routines, in place: each panel of
 *    TRD_NB columns by ?latrd (a Householder reflector per column, built on
 *    the host from the column's norm; hemv on the trailing matrix), then the
 *    trailing matrix's rank-2k update (her2k). Q's reflectors stay in A's
 *    strictly lower triangle, their scalars tau on the host, T's diagonal
 *    and off-diagonal on the host in double. cuSOLVERDn's own ?sytrd takes
 *    32-bit sizes and fails once N * N passes INT_MAX, as its ?potri does.
 * 2. T's eigenvalues, and its eigenvectors Z chunk by chunk, on the host by
 *    LAPACK (engine/lapack/tridiagonal.h), each chunk copied into the
 *    workspace's n x n Z on the GPU as it comes.
 * 3. Z = Q Z by LAPACK's ?ormtr / ?unmtr (lower, from the left): blocks of
 *    ORM_NB reflectors, the last block first, each applied as
 *    (I - V T_b V^H) Z with T_b (?larft, forward, columnwise) made on the
 *    host from V^H V, and cuBLAS's gemm. Z is then copied into A's buffer,
 *    which is where the engine's contract wants the eigenvectors.
 *
 * Everything runs on the call's stream; the host waits for the stream where
 * it needs a number from the GPU (each column's norm and the dot product of
 * ?latrd, each block's V^H V). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"
#include "engine/lapack/tridiagonal.h"

#define TRD_NB 64  /* the reduction's panel (LAPACK's ?latrd block) */
#define ORM_NB 128 /* the back-transformation's block of reflectors */

typedef struct cplx {
  double re, im;
} cplx;

static cplx c_mul(cplx a, cplx b) {
  cplx r = {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  return r;
}

/* a / b (b != 0), scaled against overflow (Smith's). */
static cplx c_div(cplx a, cplx b) {
  cplx r;
  if (fabs(b.re) >= fabs(b.im)) {
    const double q = b.im / b.re, den = b.re + b.im * q;
    r.re = (a.re + a.im * q) / den;
    r.im = (a.im - a.re * q) / den;
  } else {
    const double q = b.re / b.im, den = b.im + b.re * q;
    r.re = (a.re * q + a.im) / den;
    r.im = (a.im * q - a.re) / den;
  }
  return r;
}

static cplx c_load(jmg_dtype t, const void *p) {
  cplx v = {0.0, 0.0};
  const float *f = p;
  const double *d = p;
  switch (t) {
    case JMG_F32:
      v.re = f[0];
      break;
    case JMG_F64:
      v.re = d[0];
      break;
    case JMG_C64:
      v.re = f[0];
      v.im = f[1];
      break;
    default:
      v.re = d[0];
      v.im = d[1];
      break;
  }
  return v;
}

static void c_store(jmg_dtype t, void *p, cplx v) {
  float *f = p;
  double *d = p;
  switch (t) {
    case JMG_F32:
      f[0] = (float)v.re;
      break;
    case JMG_F64:
      d[0] = v.re;
      break;
    case JMG_C64:
      f[0] = (float)v.re;
      f[1] = (float)v.im;
      break;
    default:
      d[0] = v.re;
      d[1] = v.im;
      break;
  }
}

/* Where each buffer sits in the call's device workspace (byte offsets of
 * its parts, cuda/call.h). */
typedef struct trd_layout {
  size_t z, wp, vb, w1, w2, td, gd;
} trd_layout;

static trd_layout layout_of(int64_t n, jmg_dtype t, int want_vectors,
                            jmg_cuda_work *w) {
  const size_t es = jmg_dtype_size(t), nn = (size_t)n;
  trd_layout l;
  memset(&l, 0, sizeof l);
  if (want_vectors) /* T's eigenvectors, then A's: n x n */
    l.z = jmg_cuda_work_part(w, nn * nn * es);
  l.wp = jmg_cuda_work_part(w, nn * TRD_NB * es); /* ?latrd's W: n x TRD_NB */
  if (want_vectors) {
    /* a block of reflectors, unit diagonal: n x ORM_NB */
    l.vb = jmg_cuda_work_part(w, nn * ORM_NB * es);
    l.w1 = jmg_cuda_work_part(w, ORM_NB * nn * es);     /* V^H Z: ORM_NB x n */
    l.w2 = jmg_cuda_work_part(w, ORM_NB * nn * es);     /* T_b V^H Z */
    l.td = jmg_cuda_work_part(w, ORM_NB * ORM_NB * es); /* T_b */
    l.gd = jmg_cuda_work_part(w, ORM_NB * ORM_NB * es); /* V^H V */
  }
  return l;
}

void jmg_dn_syevd_tridiagonal_workspace(int64_t n, jmg_dtype dtype,
                                        int want_vectors, jmg_cuda_work *w) {
  (void)layout_of(n, dtype, want_vectors, w);
}

/* One run's state. */
typedef struct trd {
  jmg_dn_call *call;
  cublasHandle_t blas;
  jmg_dtype t;
  size_t es;
  int64_t n; /* A's order, and its leading dimension */
  char *a;
  double *d, *e; /* T, on the host */
  cplx *tau;     /* the reflectors' scalars, on the host (n - 1) */
  jmg_error *err;
} trd;

#define AT(base, ld, r, c) \
  ((char *)(base) + ((size_t)(r) + (size_t)(c) * (size_t)(ld)) * es)

static int blas_ok(trd *s, cublasStatus_t st) {
  return JMG_CUBLAS_TRY(st, s->call->cuda.op, s->err);
}

static int cuda_ok(trd *s, cudaError_t st) {
  return JMG_CUDA_TRY(st, s->call->cuda.op, s->err);
}

/* Brings `bytes` from the device to the host and waits for them. */
static int fetch(trd *s, void *host, const void *dev, size_t bytes) {
  int rc = cuda_ok(s, cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost,
                                      s->call->cuda.stream));
  if (rc == 0) rc = cuda_ok(s, cudaStreamSynchronize(s->call->cuda.stream));
  return rc;
}

/* C (m x 1) = alpha op_a(A) op_b(B) + beta C through gemm (op C on a row
 * of a matrix conjugates it, which gemv cannot). */
static int gemm(trd *s, cublasOperation_t oa, cublasOperation_t ob, int64_t m,
                int64_t n, int64_t k, double alpha, const void *A, int64_t lda,
                const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
  if (m == 0 || n == 0) return 0;
  return blas_ok(s, jmg_cublas_gemm_64(s->blas, s->t, oa, ob, m, n, k, alpha, A,
                                       lda, B, ldb, beta, C, ldc));
}

/* LAPACK's ?larfg on the column at p: alpha = p[0], x = p[1 .. len]. Makes
 * H = I - tau v v^H with H^H (alpha; x) = (beta; 0), v = (1; x scaled),
 * writes the 1 at p[0] (where ?latrd wants it) and returns beta (real) and
 * tau. A column whose norm is below the smallest normal number is left as
 * it is (tau 0: H = I, the rest below underflow). */
static int larfg(trd *s, void *p, int64_t len, double *beta, cplx *tau) {
  const jmg_dtype t = s->t;
  const size_t es = s->es;
  unsigned char buf[16];
  double xnorm = 0.0;
  int rc = fetch(s, buf, p, es);
  const cplx alpha = c_load(t, buf);
  if (rc == 0 && len > 0)
    rc =
        blas_ok(s, jmg_cublas_nrm2_64(s->blas, t, len, (char *)p + es, &xnorm));
  if (rc != 0) return rc;
  const double tiny = jmg_dtype_real_size(t) == 4 ? FLT_MIN : DBL_MIN;
  const double norm = hypot(hypot(alpha.re, alpha.im), xnorm);
  if ((xnorm == 0.0 && alpha.im == 0.0) || norm < tiny) {
    tau->re = tau->im = 0.0;
    *beta = alpha.re;
  } else {
    const double b = -copysign(norm, alpha.re);
    tau->re = (b - alpha.re) / b;
    tau->im = -alpha.im / b;
    const cplx one = {1.0, 0.0}, diff = {alpha.re - b, alpha.im};
    const cplx scale = c_div(one, diff);
    if (len > 0)
      rc = blas_ok(s, jmg_cublas_scal_64(s->blas, t, len, scale.re, scale.im,
                                         (char *)p + es));
    *beta = b;
  }
  const cplx one = {1.0, 0.0};
  c_store(t, buf, one);
  /* From pageable memory: the copy has taken buf when it returns. */
  if (rc == 0)
    rc = cuda_ok(s, cudaMemcpyAsync(p, buf, es, cudaMemcpyHostToDevice,
                                    s->call->cuda.stream));
  return rc;
}

/* ?latrd (lower) on the trailing m x m matrix A (at row and column i of
 * the whole): reflectors for its first b columns, W (m x b, ld n) such
 * that the trailing part's update is A - V W^H - W V^H. */
static int latrd(trd *s, int64_t i, int64_t m, int64_t b, char *A, char *W) {
  const jmg_dtype t = s->t;
  const size_t es = s->es;
  const int64_t lda = s->n, ldw = s->n;
  const cublasOperation_t N = CUBLAS_OP_N, C = CUBLAS_OP_C;
  int rc = 0;
  for (int64_t k = 0; rc == 0 && k < b; ++k) {
    if (k > 0) {
      /* A(k:m, k) -= A(k:m, 0:k) W(k, 0:k)^H + W(k:m, 0:k) A(k, 0:k)^H */
      rc = gemm(s, N, C, m - k, 1, k, -1.0, AT(A, lda, k, 0), lda,
                AT(W, ldw, k, 0), ldw, 1.0, AT(A, lda, k, k), lda);
      if (rc == 0)
        rc = gemm(s, N, C, m - k, 1, k, -1.0, AT(W, ldw, k, 0), ldw,
                  AT(A, lda, k, 0), lda, 1.0, AT(A, lda, k, k), lda);
    }
    double beta = 0.0;
    cplx tau = {0.0, 0.0};
    if (rc == 0) rc = larfg(s, AT(A, lda, k + 1, k), m - k - 2, &beta, &tau);
    if (rc != 0) break;
    s->e[i + k] = beta;
    s->tau[i + k] = tau;
    const int64_t len = m - k - 1;
    char *v = AT(A, lda, k + 1, k), *w = AT(W, ldw, k + 1, k),
         *wtop = AT(W, ldw, 0, k);
    /* w = A(k+1:m, k+1:m) v, less the panel's earlier columns' part */
    rc = blas_ok(s, jmg_cublas_hemv_64(s->blas, t, CUBLAS_FILL_MODE_LOWER, len,
                                       AT(A, lda, k + 1, k + 1), lda, v, w));
    if (rc == 0 && k > 0) {
      rc = gemm(s, C, N, k, 1, len, 1.0, AT(W, ldw, k + 1, 0), ldw, v, lda, 0.0,
                wtop, ldw);
      if (rc == 0)
        rc = gemm(s, N, N, len, 1, k, -1.0, AT(A, lda, k + 1, 0), lda, wtop,
                  ldw, 1.0, w, ldw);
      if (rc == 0)
        rc = gemm(s, C, N, k, 1, len, 1.0, AT(A, lda, k + 1, 0), lda, v, lda,
                  0.0, wtop, ldw);
      if (rc == 0)
        rc = gemm(s, N, N, len, 1, k, -1.0, AT(W, ldw, k + 1, 0), ldw, wtop,
                  ldw, 1.0, w, ldw);
    }
    /* w = tau w; w += -tau/2 (w^H v) v */
    double re = 0.0, im = 0.0;
    if (rc == 0)
      rc = blas_ok(s, jmg_cublas_scal_64(s->blas, t, len, tau.re, tau.im, w));
    if (rc == 0)
      rc = blas_ok(s, jmg_cublas_dotc_64(s->blas, t, len, w, v, &re, &im));
    if (rc == 0) {
      const cplx dot = {re, im}, half = {-0.5 * tau.re, -0.5 * tau.im};
      const cplx alpha = c_mul(half, dot);
      rc = blas_ok(
          s, jmg_cublas_axpy_64(s->blas, t, len, alpha.re, alpha.im, v, w));
    }
  }
  return rc;
}

/* A = Q T Q^H in place (?sytrd / ?hetrd, lower); T's diagonal into s->d. */
static int sytrd(trd *s, char *wp) {
  const size_t es = s->es;
  const int64_t n = s->n;
  int rc = 0;
  for (int64_t i = 0; rc == 0 && i < n - 1; i += TRD_NB) {
    const int64_t m = n - i, b = n - 1 - i < TRD_NB ? n - 1 - i : TRD_NB;
    char *A = AT(s->a, n, i, i);
    rc = latrd(s, i, m, b, A, wp);
    if (rc == 0)
      rc = blas_ok(
          s, jmg_cublas_her2k_minus_64(s->blas, s->t, CUBLAS_FILL_MODE_LOWER,
                                       m - b, b, AT(A, n, b, 0), n,
                                       AT(wp, n, b, 0), n, AT(A, n, b, b), n));
  }
  /* The diagonal (its real parts: her2k and hemv keep them real). */
  void *diag = rc == 0 ? malloc((size_t)n * es) : NULL;
  if (rc == 0 && diag == NULL)
    rc = jmg_error_set(s->err, JMG_ENOMEM, s->call->cuda.op, "malloc",
                       "cannot allocate T's diagonal (%lld elements)",
                       (long long)n);
  if (rc == 0)
    rc = cuda_ok(s, cudaMemcpy2DAsync(diag, es, s->a, ((size_t)n + 1) * es, es,
                                      (size_t)n, cudaMemcpyDeviceToHost,
                                      s->call->cuda.stream));
  if (rc == 0) rc = cuda_ok(s, cudaStreamSynchronize(s->call->cuda.stream));
  for (int64_t j = 0; rc == 0 && j < n; ++j)
    s->d[j] = c_load(s->t, (char *)diag + (size_t)j * es).re;
  free(diag);
  return rc;
}

/* The sink of the host's eigensolver: T's eigenvectors first .. first +
 * count - 1 into Z's columns. */
typedef struct z_sink {
  trd *s;
  char *z;
} z_sink;

static int to_z(void *ctx, int64_t first, int64_t count, const void *chunk,
                jmg_error *err) {
  z_sink *k = ctx;
  trd *s = k->s;
  const size_t es = s->es;
  (void)err; /* s->err is the same */
  int rc =
      cuda_ok(s, cudaMemcpyAsync(AT(k->z, s->n, 0, first), chunk,
                                 (size_t)s->n * (size_t)count * es,
                                 cudaMemcpyHostToDevice, s->call->cuda.stream));
  /* The chunk's buffer is reused when this returns. */
  if (rc == 0) rc = cuda_ok(s, cudaStreamSynchronize(s->call->cuda.stream));
  return rc;
}

/* Z = Q Z (?ormtr / ?unmtr, lower, left, no transpose): Q = H(0) ... H(n-2),
 * H(j) acting on rows j+1 .. n-1 with v(j+1) = 1 and v below from A(:, j).
 * Host scratch: three ORM_NB x ORM_NB matrices. */
/* The host scratch of the back-transformation: a block's top kb x kb
 * (htop), V^H V (hg), and T_b and a column of it in double (tb, g). */
typedef struct orm_host {
  char *htop, *hg;
  cplx *tb, *g;
} orm_host;

/* vb = V, the kb reflectors of the block at column j0: A(j0+1:n,
 * j0:j0+kb), its top kb x kb made unit lower triangular (on the host). */
static int block_reflectors(trd *s, int64_t j0, int64_t kb, char *vb,
                            const orm_host *h) {
  const jmg_dtype t = s->t;
  const size_t es = s->es;
  const int64_t n = s->n, mm = n - 1 - j0;
  const cudaStream_t st = s->call->cuda.stream;
  int rc =
      cuda_ok(s, cudaMemcpy2DAsync(vb, (size_t)n * es, AT(s->a, n, j0 + 1, j0),
                                   (size_t)n * es, (size_t)mm * es, (size_t)kb,
                                   cudaMemcpyDeviceToDevice, st));
  if (rc == 0)
    rc = cuda_ok(s, cudaMemcpy2DAsync(h->htop, (size_t)kb * es, vb,
                                      (size_t)n * es, (size_t)kb * es,
                                      (size_t)kb, cudaMemcpyDeviceToHost, st));
  if (rc == 0) rc = cuda_ok(s, cudaStreamSynchronize(st));
  if (rc != 0) return rc;
  const cplx zero = {0.0, 0.0}, one = {1.0, 0.0};
  for (int64_t c = 0; c < kb; ++c)
    for (int64_t r = 0; r <= c; ++r)
      c_store(t, h->htop + ((size_t)r + (size_t)c * (size_t)kb) * es,
              r == c ? one : zero);
  return cuda_ok(s, cudaMemcpy2DAsync(vb, (size_t)n * es, h->htop,
                                      (size_t)kb * es, (size_t)kb * es,
                                      (size_t)kb, cudaMemcpyHostToDevice, st));
}

/* td = T_b of the block at column j0 (?larft, forward, columnwise), made
 * on the host from G = V^H V (gd, upper): T(c,c) = tau_c, T(0:c, c) =
 * -tau_c T(0:c, 0:c) G(0:c, c). */
static int larft(trd *s, int64_t j0, int64_t kb, int64_t mm, const char *vb,
                 char *gd, char *td, const orm_host *h) {
  const jmg_dtype t = s->t;
  const size_t es = s->es;
  int rc = blas_ok(s, jmg_cublas_herk_64(s->blas, t, CUBLAS_FILL_MODE_UPPER, kb,
                                         mm, vb, s->n, 0.0, gd, kb));
  if (rc == 0) rc = fetch(s, h->hg, gd, (size_t)(kb * kb) * es);
  if (rc != 0) return rc;
  cplx *tb = h->tb, *g = h->g;
  const cplx zero = {0.0, 0.0};
  for (int64_t c = 0; c < kb; ++c) {
    const cplx tc = s->tau[j0 + c], mt = {-tc.re, -tc.im};
    for (int64_t r = 0; r < c; ++r)
      g[r + c * kb] = c_mul(
          mt, c_load(t, h->hg + ((size_t)r + (size_t)c * (size_t)kb) * es));
    for (int64_t r = 0; r < c; ++r) {
      cplx sum = {0.0, 0.0};
      for (int64_t q = r; q < c; ++q) {
        const cplx p = c_mul(tb[r + q * kb], g[q + c * kb]);
        sum.re += p.re;
        sum.im += p.im;
      }
      tb[r + c * kb] = sum;
    }
    tb[c + c * kb] = tc;
    for (int64_t r = c + 1; r < kb; ++r) tb[r + c * kb] = zero;
  }
  for (int64_t q = 0; q < kb * kb; ++q)
    c_store(t, h->htop + (size_t)q * es, tb[q]);
  return cuda_ok(s,
                 cudaMemcpyAsync(td, h->htop, (size_t)(kb * kb) * es,
                                 cudaMemcpyHostToDevice, s->call->cuda.stream));
}

static int ormtr(trd *s, char *work, const trd_layout *l) {
  const size_t es = s->es;
  const int64_t n = s->n, nref = n - 1;
  if (nref <= 0) return 0;
  char *z = work + l->z, *vb = work + l->vb, *w1 = work + l->w1,
       *w2 = work + l->w2, *td = work + l->td, *gd = work + l->gd;
  const size_t blk = (size_t)ORM_NB * ORM_NB * es;
  char *host = malloc(2 * blk);
  orm_host h = {host, host + blk,
                malloc((size_t)ORM_NB * ORM_NB * sizeof(cplx)),
                malloc((size_t)ORM_NB * ORM_NB * sizeof(cplx))};
  int rc = 0;
  if (host == NULL || h.tb == NULL || h.g == NULL)
    rc = jmg_error_set(s->err, JMG_ENOMEM, s->call->cuda.op, "malloc",
                       "cannot allocate the back-transformation's host "
                       "scratch");
  const int64_t last = (nref - 1) / ORM_NB * ORM_NB;
  for (int64_t j0 = last; rc == 0 && j0 >= 0; j0 -= ORM_NB) {
    const int64_t kb = nref - j0 < ORM_NB ? nref - j0 : ORM_NB;
    const int64_t mm = n - 1 - j0;
    rc = block_reflectors(s, j0, kb, vb, &h);
    if (rc == 0) rc = larft(s, j0, kb, mm, vb, gd, td, &h);
    /* Z(j0+1:n, :) -= V T_b (V^H Z(j0+1:n, :)) */
    char *zs = AT(z, n, j0 + 1, 0);
    if (rc == 0)
      rc = gemm(s, CUBLAS_OP_C, CUBLAS_OP_N, kb, n, mm, 1.0, vb, n, zs, n, 0.0,
                w1, kb);
    if (rc == 0)
      rc = gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, kb, n, kb, 1.0, td, kb, w1, kb,
                0.0, w2, kb);
    if (rc == 0)
      rc = gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, mm, n, kb, -1.0, vb, n, w2, kb,
                1.0, zs, n);
  }
  /* The last block's host copies were from pageable memory (taken when
   * the call returned); wait before freeing nothing the GPU still reads. */
  if (rc == 0) rc = cuda_ok(s, cudaStreamSynchronize(s->call->cuda.stream));
  free(host);
  free(h.tb);
  free(h.g);
  return rc;
}

/* sytrd with cuBLAS's atomics allowed: hemv is the reduction's time, and
 * cuBLAS documents its implementation with atomics as generally
 * significantly faster (its results may then differ in the last bits from
 * run to run). The handle's mode is restored. */
static int sytrd_atomics(trd *s, char *wp) {
  cublasAtomicsMode_t atomics = CUBLAS_ATOMICS_NOT_ALLOWED;
  int rc = blas_ok(s, cublasGetAtomicsMode(s->blas, &atomics));
  if (rc == 0)
    rc = blas_ok(s, cublasSetAtomicsMode(s->blas, CUBLAS_ATOMICS_ALLOWED));
  if (rc != 0) return rc;
  rc = sytrd(s, wp);
  const int r = blas_ok(s, cublasSetAtomicsMode(s->blas, atomics));
  return rc != 0 ? rc : r;
}

int jmg_dn_syevd_tridiagonal(jmg_dn_call *call, void *w, int want_vectors,
                             int *info, jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const int64_t n = a->n;
  const jmg_dtype t = a->dtype;
  const size_t es = jmg_dtype_size(t), rs = jmg_dtype_real_size(t);
  jmg_cuda_work parts = {0};
  const trd_layout l = layout_of(n, t, want_vectors, &parts);
  trd s;
  memset(&s, 0, sizeof s);
  s.call = call;
  s.blas = call->blas;
  s.t = t;
  s.es = es;
  s.n = n;
  s.a = call->a_data;
  s.err = err;
  *info = 0;
  const size_t nn = n > 0 ? (size_t)n : 1;
  s.d = malloc(nn * sizeof(double));
  s.e = calloc(nn, sizeof(double));
  s.tau = calloc(nn, sizeof(cplx));
  double *wd = malloc(nn * sizeof(double));
  void *wr = malloc(nn * rs);
  int rc = 0;
  if (s.d == NULL || s.e == NULL || s.tau == NULL || wd == NULL || wr == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, call->cuda.op, "malloc",
                       "cannot allocate T and the eigenvalues on the host "
                       "(N=%lld)",
                       (long long)n);
  if (rc == 0) rc = blas_ok(&s, cublasSetStream(s.blas, call->cuda.stream));
  if (rc == 0)
    rc = blas_ok(&s, cublasSetPointerMode(s.blas, CUBLAS_POINTER_MODE_HOST));
  char *work = call->cuda.work;
  if (rc == 0 && n > 0) rc = sytrd_atomics(&s, work + l.wp);
  jmg_trace_mark("sytrd");
  if (rc == 0 && n > 0 && !want_vectors)
    rc = jmg_tridiagonal_eigenvalues(call->cuda.op, n, s.d, s.e, wd, info, err);
  z_sink sink = {&s, work + l.z};
  if (rc == 0 && n > 0 && want_vectors)
    rc = jmg_tridiagonal_eigenvectors(call->cuda.op, n, s.d, s.e, wd, t, 0,
                                      to_z, &sink, info, err);
  jmg_trace_mark(want_vectors ? "stemr" : "sterf");
  if (rc == 0 && *info == 0 && n > 0 && want_vectors) {
    rc = ormtr(&s, work, &l);
    if (rc == 0)
      rc = cuda_ok(&s, cudaMemcpyAsync(
                           call->a_data, work + l.z, (size_t)n * (size_t)n * es,
                           cudaMemcpyDeviceToDevice, call->cuda.stream));
    jmg_trace_mark("ormtr");
  }
  const jmg_dtype real = rs == 4 ? JMG_F32 : JMG_F64;
  for (int64_t j = 0; rc == 0 && *info == 0 && j < n; ++j) {
    const cplx v = {wd[j], 0.0};
    c_store(real, (char *)wr + (size_t)j * rs, v);
  }
  if (rc == 0 && *info == 0 && n > 0)
    rc =
        cuda_ok(&s, cudaMemcpyAsync(w, wr, (size_t)n * rs,
                                    cudaMemcpyHostToDevice, call->cuda.stream));
  /* wr is pageable: taken when the copy returned; the stream's end is the
   * caller's wait (syevd.c). */
  free(s.d);
  free(s.e);
  free(s.tau);
  free(wd);
  free(wr);
  return rc;
}
#undef AT
