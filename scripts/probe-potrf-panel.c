/* Where the tiled Cholesky's panel time goes (issue 37): on one GPU, the
 * parts of one panel step of csrc/engine/cusolvermg/cuda_potrf.c at its
 * default tile (T_A = 2048) for N = 32768, against the alternatives:
 *
 *   potrf    cusolverDnXpotrf of the t x t diagonal tile
 *   trsm     cublasDtrsm of the m x t panel below it (right, lower, ^T)
 *   trtri    cusolverDnXtrtri of the factored tile (its inverse)
 *   gemm_inv the panel times the inverse's transpose (cublasDgemm m x t x t):
 *            trtri + gemm_inv is the trsm done as a GEMM
 *   syrk_upd one trailing tile's update as the engine runs it (gemm,
 *            m x t x t): the update's rate, for scale
 *
 * Each part: one warm-up, then the median of 5 runs timed with cudaEvents.
 * Prints "part,t,m,seconds,tflops". Usage: probe-potrf-panel [t [m]]
 * (defaults 2048 30720: step 0 of N = 32768). float64. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                             \
  do {                                                                    \
    int rc_ = (int)(x);                                                   \
    if (rc_ != 0) {                                                       \
      fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, rc_); \
      return 1;                                                           \
    }                                                                     \
  } while (0)

typedef struct ctx {
  cublasHandle_t blas;
  cusolverDnHandle_t dn;
  cusolverDnParams_t params;
  double *tile, *tile0, *inv, *panel, *panel0, *out;
  void *dwork, *hwork;
  size_t dbytes, hbytes;
  int *info;
  long long t, m;
} ctx;

static int cmp(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* A part's fresh input: 0 the tile, 1 the panel, 2 the inverse's start
 * (the factored tile). */
static int part(ctx *c, int which) {
  const size_t tb = (size_t)c->t * c->t * sizeof(double);
  const size_t pb = (size_t)c->m * c->t * sizeof(double);
  switch (which) {
    case 0:
      CK(cudaMemcpy(c->tile, c->tile0, tb, cudaMemcpyDeviceToDevice));
      return 0;
    case 1:
      CK(cudaMemcpy(c->panel, c->panel0, pb, cudaMemcpyDeviceToDevice));
      return 0;
    case 2:
      CK(cudaMemcpy(c->inv, c->tile, tb, cudaMemcpyDeviceToDevice));
      return 0;
  }
  return 0;
}

/* Part which: 0 potrf, 1 trsm, 2 trtri, 3 gemm_inv, 4 syrk_upd. */
static int run_part(ctx *c, int which) {
  const double one = 1.0, mone = -1.0, zero = 0.0;
  switch (which) {
    case 0:
      CK(cusolverDnXpotrf(c->dn, c->params, CUBLAS_FILL_MODE_LOWER, c->t,
                          CUDA_R_64F, c->tile, c->t, CUDA_R_64F, c->dwork,
                          c->dbytes, c->hwork, c->hbytes, c->info));
      break;
    case 1:
      CK(cublasDtrsm(c->blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER,
                     CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, (int)c->m, (int)c->t,
                     &one, c->tile, (int)c->t, c->panel, (int)c->m));
      break;
    case 2:
      CK(cusolverDnXtrtri(c->dn, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT,
                          c->t, CUDA_R_64F, c->inv, c->t, c->dwork, c->dbytes,
                          c->hwork, c->hbytes, c->info));
      break;
    case 3:
      CK(cublasDgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)c->m, (int)c->t,
                     (int)c->t, &one, c->panel0, (int)c->m, c->inv, (int)c->t,
                     &zero, c->out, (int)c->m));
      break;
    case 4:
      CK(cublasDgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)c->m, (int)c->t,
                     (int)c->t, &mone, c->panel0, (int)c->m, c->panel0,
                     (int)c->m, &one, c->out, (int)c->m));
      break;
  }
  return 0;
}

static double flops(const ctx *c, int which) {
  const double t = (double)c->t, m = (double)c->m;
  switch (which) {
    case 0: return t * t * t / 3;
    case 1: return m * t * t;
    case 2: return t * t * t / 3;
    default: return 2 * m * t * t;
  }
}

int main(int argc, char **argv) {
  ctx c = {0};
  c.t = argc > 1 ? atoll(argv[1]) : 2048;
  c.m = argc > 2 ? atoll(argv[2]) : 30720;
  const size_t tn = (size_t)c.t * c.t, pn = (size_t)c.m * c.t;
  double *h = malloc((tn > pn ? tn : pn) * sizeof *h);
  if (h == NULL) return 1;
  CK(cublasCreate(&c.blas));
  CK(cusolverDnCreate(&c.dn));
  CK(cusolverDnCreateParams(&c.params));
  CK(cudaMalloc((void **)&c.tile, tn * sizeof(double)));
  CK(cudaMalloc((void **)&c.tile0, tn * sizeof(double)));
  CK(cudaMalloc((void **)&c.inv, tn * sizeof(double)));
  CK(cudaMalloc((void **)&c.panel, pn * sizeof(double)));
  CK(cudaMalloc((void **)&c.panel0, pn * sizeof(double)));
  CK(cudaMalloc((void **)&c.out, pn * sizeof(double)));
  CK(cudaMalloc((void **)&c.info, sizeof(int)));
  /* A diagonally dominant SPD tile, a random panel. */
  srand(1);
  for (long long j = 0; j < c.t; ++j)
    for (long long i = 0; i < c.t; ++i)
      h[j * c.t + i] = i == j ? (double)c.t : 0.5 / (double)(1 + (i > j ? i - j : j - i));
  CK(cudaMemcpy(c.tile0, h, tn * sizeof(double), cudaMemcpyHostToDevice));
  for (size_t i = 0; i < pn; ++i) h[i] = (double)rand() / RAND_MAX - 0.5;
  CK(cudaMemcpy(c.panel0, h, pn * sizeof(double), cudaMemcpyHostToDevice));
  size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
  CK(cusolverDnXpotrf_bufferSize(c.dn, c.params, CUBLAS_FILL_MODE_LOWER, c.t,
                                 CUDA_R_64F, c.tile0, c.t, CUDA_R_64F, &d1, &h1));
  CK(cusolverDnXtrtri_bufferSize(c.dn, CUBLAS_FILL_MODE_LOWER,
                                 CUBLAS_DIAG_NON_UNIT, c.t, CUDA_R_64F, c.tile0,
                                 c.t, &d2, &h2));
  c.dbytes = (d1 > d2 ? d1 : d2) + 256;
  c.hbytes = (h1 > h2 ? h1 : h2) + 256;
  CK(cudaMalloc(&c.dwork, c.dbytes));
  c.hwork = malloc(c.hbytes);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  static const char *names[] = {"potrf", "trsm", "trtri", "gemm_inv", "syrk_upd"};
  printf("part,t,m,seconds,tflops\n");
  for (int w = 0; w < 5; ++w) {
    float ms[6];
    for (int r = 0; r < 6; ++r) {
      /* Fresh inputs: the tile for potrf; the factor for the rest. */
      if (w == 0 || r == 0) CK(part(&c, 0));
      if (w >= 1 && r == 0) {
        CK(run_part(&c, 0));
        CK(part(&c, 2));
        CK(run_part(&c, 2));
      }
      if (w == 1) CK(part(&c, 1));
      CK(cudaDeviceSynchronize());
      CK(cudaEventRecord(e0, 0));
      CK(run_part(&c, w));
      CK(cudaEventRecord(e1, 0));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&ms[r], e0, e1));
    }
    qsort(ms + 1, 5, sizeof ms[0], cmp);
    const double s = ms[3] * 1e-3;
    printf("%s,%lld,%lld,%.6f,%.2f\n", names[w], c.t, c.m, s, flops(&c, w) / s * 1e-12);
  }
  int info = 0;
  CK(cudaMemcpy(&info, c.info, sizeof info, cudaMemcpyDeviceToHost));
  printf("# info %d\n", info);
  return 0;
}
