/* The back-transformation Z := Q Z on several GPUs (trd.h: jmg_trd_ormtr),
 * LAPACK's ?ormtr (lower, left, no transpose) split by Z's columns: Q =
 * H(0) ... H(n-2) is applied in blocks of JMG_TRD_ORM_NB reflectors, the
 * last block first, each as (I - V T_b V^T). Every GPU runs every block on
 * its own columns of Z, by itself: make_v copies the block's V from the
 * GPUs that hold its columns (peer loads) into a unit lower trapezoid,
 * gemm makes G = V^T V, larft T_b from G and tau (kernels.cu), three gemm
 * apply it. No GPU waits for another; the host waits for none. */
#include <string.h>

#include "cuda/check.h"
#include "engine/eig_mgpu/kernels.h"
#include "engine/eig_mgpu/trd.h"

#define NB JMG_TRD_ORM_NB

typedef struct orm_parts {
  size_t vb, g, t, w1, w2, tau, total; /* in doubles */
} orm_parts;

static size_t up(size_t x) { return (x + 31) / 32 * 32; }

static orm_parts parts_of(int64_t n, int64_t tile, int ndev, int dev) {
  const size_t nn = (size_t)n;
  size_t cnt = (size_t)jmg_bc_count(n, tile, ndev, dev);
  if (cnt < 1) cnt = 1;
  orm_parts p;
  size_t at = 0;
  p.vb = at;
  at += up(nn * NB);
  p.g = at;
  at += up(NB * NB);
  p.t = at;
  at += up(NB * NB);
  p.w1 = at;
  at += up(NB * cnt);
  p.w2 = at;
  at += up(NB * cnt);
  p.tau = at;
  at += up(nn);
  p.total = at;
  return p;
}

size_t jmg_trd_ormtr_bytes(int64_t n, int64_t tile, int ndev, int dev) {
  return parts_of(n, tile, ndev, dev).total * sizeof(double);
}

int jmg_trd_ormtr(const jmg_trd_gpus *g, const jmg_trd_matrix *a,
                  const double *tau, const jmg_trd_matrix *z,
                  void *const *work, const char *op, jmg_error *err) {
  const int64_t n = a->n, tile = a->tile, nref = n - 1;
  const int ndev = g->ndev;
  if (ndev < 1 || ndev > JMG_TRD_MAX_DEV || tile < 1 || z->n != n ||
      z->tile != tile)
    return jmg_error_set(err, JMG_EINVAL, op, "jmg_trd_ormtr",
                         "%d GPUs (1 .. %d), tile %lld; Z must be laid out "
                         "as A",
                         ndev, JMG_TRD_MAX_DEV, (long long)tile);
  if (nref <= 0) return 0;
  int saved = -1;
  int rc = jmg_cuda_check(cudaGetDevice(&saved), op, "cudaGetDevice", err);
  if (rc == 0) rc = jmg_trd_kernels_get(op, err);
  orm_parts p[JMG_TRD_MAX_DEV];
  double *base[JMG_TRD_MAX_DEV];
  jmg_trd_ptrs ap;
  memset(&ap, 0, sizeof ap);
  for (int q = 0; q < ndev; ++q) ap.p[q] = a->a[q];
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    p[q] = parts_of(n, tile, ndev, q);
    base[q] = work[q];
    rc = JMG_CUDA_TRY(cudaSetDevice(g->device[q]), op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(cublasSetStream(g->blas[q], g->stream[q]), op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(
          cublasSetPointerMode(g->blas[q], CUBLAS_POINTER_MODE_HOST), op, err);
    /* From pageable memory: the copy has taken tau when it returns. */
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaMemcpyAsync(base[q] + p[q].tau, tau, (size_t)nref * sizeof(double),
                          cudaMemcpyHostToDevice, g->stream[q]),
          op, err);
  }
  const int64_t last = (nref - 1) / NB * NB;
  const double one = 1.0, zero = 0.0, minus = -1.0;
  for (int64_t j0 = last; rc == 0 && j0 >= 0; j0 -= NB) {
    const int64_t kb = nref - j0 < NB ? nref - j0 : NB, mm = n - 1 - j0;
    for (int q = 0; rc == 0 && q < ndev; ++q) {
      const int64_t cnt = jmg_bc_count(n, tile, ndev, q);
      if (cnt <= 0) continue;
      double *vb = base[q] + p[q].vb, *gd = base[q] + p[q].g,
             *td = base[q] + p[q].t, *w1 = base[q] + p[q].w1,
             *w2 = base[q] + p[q].w2, *taud = base[q] + p[q].tau;
      cublasHandle_t h = g->blas[q];
      rc = JMG_CUDA_TRY(cudaSetDevice(g->device[q]), op, err);
      {
        long long m2 = mm, nn = n, jj = j0, tl = tile;
        int b = (int)kb, nd = ndev;
        void *args[] = {&vb, &m2, &b, &nn, &jj, &ap, &tl, &nd};
        int64_t blocks = (mm * kb + 255) / 256;
        if (blocks > 4096) blocks = 4096;
        if (rc == 0)
          rc = jmg_trd_launch(JMG_TRD_MAKE_V, (dim3){(unsigned)blocks, 1, 1},
                              (dim3){256, 1, 1}, args, g->stream[q], op, err);
      }
      if (rc == 0)
        rc = JMG_CUBLAS_TRY(cublasDgemm_64(h, CUBLAS_OP_T, CUBLAS_OP_N, kb, kb,
                                           mm, &one, vb, mm, vb, mm, &zero, gd,
                                           kb),
                            op, err);
      {
        long long jj = j0;
        int b = (int)kb;
        void *args[] = {&gd, &taud, &jj, &b, &td};
        if (rc == 0)
          rc = jmg_trd_launch(JMG_TRD_LARFT, (dim3){1, 1, 1}, (dim3){NB, 1, 1},
                              args, g->stream[q], op, err);
      }
      double *zs = z->a[q] + j0 + 1;
      if (rc == 0)
        rc = JMG_CUBLAS_TRY(cublasDgemm_64(h, CUBLAS_OP_T, CUBLAS_OP_N, kb, cnt,
                                           mm, &one, vb, mm, zs, n, &zero, w1,
                                           kb),
                            op, err);
      if (rc == 0)
        rc = JMG_CUBLAS_TRY(cublasDgemm_64(h, CUBLAS_OP_N, CUBLAS_OP_N, kb, cnt,
                                           kb, &one, td, kb, w1, kb, &zero, w2,
                                           kb),
                            op, err);
      if (rc == 0)
        rc = JMG_CUBLAS_TRY(cublasDgemm_64(h, CUBLAS_OP_N, CUBLAS_OP_N, mm, cnt,
                                           kb, &minus, vb, mm, w2, kb, &one, zs,
                                           n),
                            op, err);
    }
  }
  if (saved >= 0) {
    const int r = JMG_CUDA_TRY(cudaSetDevice(saved), op, err);
    if (rc == 0) rc = r;
  }
  return rc;
}
