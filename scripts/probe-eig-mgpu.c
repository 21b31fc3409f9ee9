/* The multi-GPU tridiagonal reduction alone (issue 37;
 * csrc/engine/eig_mgpu/trd.h, docs/design/eigensolver-mgpu.md), against
 * cuSOLVERDn's on one GPU. Float64. Modes (scripts/probe-eig-mgpu.sh runs
 * each as its own process under `timeout`):
 *
 *   probe-eig-mgpu dn N
 *       cusolverDnDsytrd (lower) on GPU 0 and cusolverDnXsyevd without
 *       vectors: the one-GPU baselines (JAX's eigh runs Xsyevd);
 *   probe-eig-mgpu mg NDEV N NB TILE CHECK REPS [PATH]
 *       jmg_trd_reduce on GPUs 0 .. NDEV-1, A in tiles of TILE columns,
 *       panels of NB: one warm-up and REPS timed runs (wall clock, from A
 *       restored to the host's T; min and median), then one more with the
 *       reduction's profile (mg_profile: GPU 0's time in the columns and
 *       the trailing updates, microseconds a column by eighths); CHECK 1:
 *       T's eigenvalues (cusolverDnXsyevd of T made dense on GPU 0)
 *       against A's (cusolverDnXsyevd), max |difference| / max
 *       |eigenvalue|; PATH "replicated" (the default) or "owner"
 *       (trd.h jmg_trd_path);
 *   probe-eig-mgpu orth NDEV N NB TILE [PATH]
 *       a small N: Q from the reflectors (cusolverDnDorgtr on A gathered to
 *       GPU 0): max |Q^T Q - I| and max |Q T Q^T - A| / max |A|.
 *
 * The part names of mg and orth end in "_owner" for the owner path.
 *
 * Output: "part,n,gpus,nb,tile,seconds,status,note" lines; status "ok" or
 * the failing call; '#' lines are comments. Every return code is checked. */
#define _POSIX_C_SOURCE 200809L
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <curand.h>
#include <cusolverDn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/eig_mgpu/trd.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char g_status[512] = "ok";
static jmg_trd_path g_path = JMG_TRD_REPLICATED;

/* part, with "_owner" appended for the owner path. */
static const char *named(const char *part) {
  static char buf[64];
  snprintf(buf, sizeof buf, "%s%s", part,
           g_path == JMG_TRD_OWNER ? "_owner" : "");
  return buf;
}

#define CK(call)                                                          \
  do {                                                                    \
    cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess) {                                              \
      snprintf(g_status, sizeof g_status, "%s:%s", #call,                 \
               cudaGetErrorName(e_));                                     \
      return -1;                                                          \
    }                                                                     \
  } while (0)
#define CKB(call)                                                         \
  do {                                                                    \
    cublasStatus_t e_ = (call);                                           \
    if (e_ != CUBLAS_STATUS_SUCCESS) {                                    \
      snprintf(g_status, sizeof g_status, "%s:cublas=%d", #call, (int)e_); \
      return -1;                                                          \
    }                                                                     \
  } while (0)
#define CKS(call)                                                           \
  do {                                                                      \
    cusolverStatus_t e_ = (call);                                           \
    if (e_ != CUSOLVER_STATUS_SUCCESS) {                                    \
      snprintf(g_status, sizeof g_status, "%s:cusolver=%d", #call, (int)e_); \
      return -1;                                                            \
    }                                                                       \
  } while (0)
#define CKR(call)                                                         \
  do {                                                                    \
    curandStatus_t e_ = (call);                                           \
    if (e_ != CURAND_STATUS_SUCCESS) {                                    \
      snprintf(g_status, sizeof g_status, "%s:curand=%d", #call, (int)e_); \
      return -1;                                                          \
    }                                                                     \
  } while (0)

static void line(const char *part, long long n, int gpus, int nb, long long tile,
                 double sec, const char *note) {
  printf("%s,%lld,%d,%d,%lld,%.4f,%s,%s\n", part, n, gpus, nb, tile, sec,
         g_status, note ? note : "");
  fflush(stdout);
}

/* A = (G + G^T) / 2, G standard normal (uniform in [0, 1) where n * n is
 * odd), on the current GPU (n x n, lda n); scratch: n x n. */
static int make_a(double *a, double *scratch, long long n, cublasHandle_t h) {
  curandGenerator_t g;
  CKR(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_DEFAULT));
  CKR(curandSetPseudoRandomGeneratorSeed(g, 1234));
  if ((n * n) % 2 == 0)
    CKR(curandGenerateNormalDouble(g, scratch, (size_t)(n * n), 0.0, 1.0));
  else
    CKR(curandGenerateUniformDouble(g, scratch, (size_t)(n * n)));
  CKR(curandDestroyGenerator(g));
  const double half = 0.5;
  CKB(cublasDgeam(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)n, (int)n, &half, scratch,
                  (int)n, &half, scratch, (int)n, a, (int)n));
  CK(cudaDeviceSynchronize());
  return 0;
}

/* Eigenvalues of the symmetric n x n a (overwritten) on the current GPU. */
static int eigvals(double *a, long long n, double *w_dev, cusolverDnHandle_t dn,
                   double *seconds) {
  cusolverDnParams_t p;
  CKS(cusolverDnCreateParams(&p));
  size_t dbytes = 0, hbytes = 0;
  CKS(cusolverDnXsyevd_bufferSize(dn, p, CUSOLVER_EIG_MODE_NOVECTOR,
                                  CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F, a, n,
                                  CUDA_R_64F, w_dev, CUDA_R_64F, &dbytes,
                                  &hbytes));
  void *dw = NULL, *hw = malloc(hbytes > 0 ? hbytes : 1);
  int *info = NULL;
  CK(cudaMalloc(&dw, dbytes > 0 ? dbytes : 1));
  CK(cudaMalloc((void **)&info, sizeof(int)));
  CK(cudaDeviceSynchronize());
  const double t0 = now();
  CKS(cusolverDnXsyevd(dn, p, CUSOLVER_EIG_MODE_NOVECTOR,
                       CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F, a, n, CUDA_R_64F,
                       w_dev, CUDA_R_64F, dw, dbytes, hw, hbytes, info));
  CK(cudaDeviceSynchronize());
  *seconds = now() - t0;
  int h_info = 0;
  CK(cudaMemcpy(&h_info, info, sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaFree(dw));
  CK(cudaFree(info));
  free(hw);
  cusolverDnDestroyParams(p);
  if (h_info != 0) {
    snprintf(g_status, sizeof g_status, "syevd info %d", h_info);
    return -1;
  }
  return 0;
}

static int mode_dn(long long n) {
  CK(cudaSetDevice(0));
  cublasHandle_t h;
  cusolverDnHandle_t dn;
  CKB(cublasCreate(&h));
  CKS(cusolverDnCreate(&dn));
  double *a0, *a, *d, *e, *tau, *w;
  int *info;
  const size_t nn = (size_t)(n * n) * sizeof(double);
  CK(cudaMalloc((void **)&a0, nn));
  CK(cudaMalloc((void **)&a, nn));
  CK(cudaMalloc((void **)&d, (size_t)n * sizeof(double)));
  CK(cudaMalloc((void **)&e, (size_t)n * sizeof(double)));
  CK(cudaMalloc((void **)&tau, (size_t)n * sizeof(double)));
  CK(cudaMalloc((void **)&w, (size_t)n * sizeof(double)));
  CK(cudaMalloc((void **)&info, sizeof(int)));
  if (make_a(a0, a, n, h)) return -1;
  int lwork = 0;
  CKS(cusolverDnDsytrd_bufferSize(dn, CUBLAS_FILL_MODE_LOWER, (int)n, a, (int)n,
                                  d, e, tau, &lwork));
  double *work, t_symv = 0.0;
  CK(cudaMalloc((void **)&work, (size_t)(lwork > 0 ? lwork : 1) * sizeof(double)));
  for (int rep = 0; rep < 2; ++rep) {
    CK(cudaMemcpy(a, a0, nn, cudaMemcpyDeviceToDevice));
    CK(cudaDeviceSynchronize());
    const double t0 = now();
    CKS(cusolverDnDsytrd(dn, CUBLAS_FILL_MODE_LOWER, (int)n, a, (int)n, d, e,
                         tau, work, lwork, info));
    CK(cudaDeviceSynchronize());
    if (rep == 1) line("dn_sytrd", n, 1, 0, 0, now() - t0, "cusolverDnDsytrd");
  }
  {
    /* cuBLAS's dsymv (lower, atomics allowed: what the one-GPU reduction
     * runs) on the whole matrix: the bandwidth to beat. */
    CKB(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_ALLOWED));
    const double one = 1.0, zero = 0.0;
    for (int rep = 0; rep < 12; ++rep) {
      if (rep == 2) {
        CK(cudaDeviceSynchronize());
        t_symv = now();
      }
      CKB(cublasDsymv(h, CUBLAS_FILL_MODE_LOWER, (int)n, &one, a0, (int)n, d,
                      1, &zero, e, 1));
    }
    CK(cudaDeviceSynchronize());
    const double per = (now() - t_symv) / 10.0;
    char note[160];
    snprintf(note, sizeof note, "cublasDsymv lower, atomics; %.2f TB/s (n^2/2 elements)",
             0.5 * (double)n * (double)n * 8.0 / per * 1e-12);
    line("dn_symv", n, 1, 0, 0, per, note);
  }
  for (int rep = 0; rep < 2; ++rep) {
    CK(cudaMemcpy(a, a0, nn, cudaMemcpyDeviceToDevice));
    double sec = 0.0;
    if (eigvals(a, n, w, dn, &sec)) return -1;
    if (rep == 1) line("dn_syevd_N", n, 1, 0, 0, sec, "cusolverDnXsyevd, eigenvalues only");
  }
  cudaFree(a0);
  cudaFree(a);
  cudaFree(d);
  cudaFree(e);
  cudaFree(tau);
  cudaFree(w);
  cudaFree(info);
  cudaFree(work);
  cublasDestroy(h);
  cusolverDnDestroy(dn);
  return 0;
}

/* The GPUs' state: streams, handles, pristine and working local parts. */
typedef struct setup {
  jmg_trd_gpus g;
  jmg_trd_matrix a;   /* working */
  double *a0[JMG_TRD_MAX_DEV]; /* pristine */
  void *work[JMG_TRD_MAX_DEV];
  long long n, tile, cnt[JMG_TRD_MAX_DEV];
} setup;

static int make_setup(setup *s, int ndev, long long n, long long tile, int nb,
                      double *dense0 /* on GPU 0, n x n */) {
  memset(s, 0, sizeof *s);
  s->g.ndev = ndev;
  s->n = n;
  s->tile = tile;
  s->a.n = n;
  s->a.tile = tile;
  for (int q = 0; q < ndev; ++q) {
    s->g.device[q] = q;
    CK(cudaSetDevice(q));
    for (int r = 0; r < ndev; ++r) {
      if (r == q) continue;
      int can = 0;
      CK(cudaDeviceCanAccessPeer(&can, q, r));
      if (!can) {
        snprintf(g_status, sizeof g_status, "no peer access %d -> %d", q, r);
        return -1;
      }
      cudaError_t pe = cudaDeviceEnablePeerAccess(r, 0);
      if (pe == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else CK(pe);
    }
    CK(cudaStreamCreateWithFlags(&s->g.stream[q], cudaStreamNonBlocking));
    CKB(cublasCreate(&s->g.blas[q]));
    s->cnt[q] = jmg_bc_count(n, tile, ndev, q);
    const size_t bytes = (size_t)(s->cnt[q] > 0 ? s->cnt[q] : 1) * (size_t)n * sizeof(double);
    CK(cudaMalloc((void **)&s->a.a[q], bytes));
    CK(cudaMalloc((void **)&s->a0[q], bytes));
    CK(cudaMalloc(&s->work[q], jmg_trd_reduce_bytes(n, tile, ndev, q, nb)));
  }
  /* The tiles of the dense A to their GPUs. */
  for (long long t0 = 0; t0 < n; t0 += tile) {
    const int q = jmg_bc_owner(t0, tile, ndev);
    const long long lc = jmg_bc_local(t0, tile, ndev);
    const long long w = t0 + tile <= n ? tile : n - t0;
    CK(cudaMemcpyPeer(s->a0[q] + lc * n, q, dense0 + t0 * n, 0,
                      (size_t)(w * n) * sizeof(double)));
  }
  for (int q = 0; q < ndev; ++q) {
    CK(cudaSetDevice(q));
    CK(cudaDeviceSynchronize());
  }
  return 0;
}

static int restore(setup *s) {
  for (int q = 0; q < s->g.ndev; ++q) {
    CK(cudaSetDevice(q));
    CK(cudaMemcpy(s->a.a[q], s->a0[q],
                  (size_t)(s->cnt[q] > 0 ? s->cnt[q] : 1) * (size_t)s->n * sizeof(double),
                  cudaMemcpyDeviceToDevice));
    CK(cudaDeviceSynchronize());
  }
  CK(cudaSetDevice(0));
  return 0;
}

static int free_setup(setup *s) {
  for (int q = 0; q < s->g.ndev; ++q) {
    CK(cudaSetDevice(q));
    cudaFree(s->a.a[q]);
    cudaFree(s->a0[q]);
    cudaFree(s->work[q]);
    cublasDestroy(s->g.blas[q]);
    cudaStreamDestroy(s->g.stream[q]);
  }
  CK(cudaSetDevice(0));
  return 0;
}

static int cmp(const void *x, const void *y) {
  const double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Z (as A, from the pristine copies) := Q Z with the reflectors in s->a:
 * a warm-up and a timed run; the seconds as text into out. */
static int ormtr_time(setup *s, const double *tau, char *out, size_t len) {
  jmg_trd_matrix z = s->a;
  void *work[JMG_TRD_MAX_DEV];
  for (int q = 0; q < s->g.ndev; ++q) {
    CK(cudaSetDevice(q));
    z.a[q] = s->a0[q];
    CK(cudaMalloc(&work[q], jmg_trd_ormtr_bytes(s->n, s->tile, s->g.ndev, q)));
  }
  double t = 0.0;
  for (int rep = 0; rep < 2; ++rep) {
    for (int q = 0; q < s->g.ndev; ++q) {
      CK(cudaSetDevice(q));
      CK(cudaDeviceSynchronize());
    }
    const double t0 = now();
    jmg_error err;
    memset(&err, 0, sizeof err);
    if (jmg_trd_ormtr(&s->g, &s->a, tau, &z, work, "probe", &err) != 0) {
      snprintf(g_status, sizeof g_status, "jmg_trd_ormtr: %s: %s", err.call,
               err.msg);
      return -1;
    }
    for (int q = 0; q < s->g.ndev; ++q) {
      CK(cudaSetDevice(q));
      CK(cudaStreamSynchronize(s->g.stream[q]));
    }
    t = now() - t0;
  }
  for (int q = 0; q < s->g.ndev; ++q) {
    CK(cudaSetDevice(q));
    CK(cudaFree(work[q]));
  }
  CK(cudaSetDevice(0));
  snprintf(out, len, "%.6f", t);
  return 0;
}

static int mode_mg(int ndev, long long n, int nb, long long tile, int check,
                   int reps) {
  char note[256];
  CK(cudaSetDevice(0));
  cublasHandle_t h0;
  CKB(cublasCreate(&h0));
  double *dense, *scratch;
  const size_t nn = (size_t)(n * n) * sizeof(double);
  CK(cudaMalloc((void **)&dense, nn));
  CK(cudaMalloc((void **)&scratch, nn));
  if (make_a(dense, scratch, n, h0)) return -1;
  setup s;
  if (make_setup(&s, ndev, n, tile, nb, dense)) return -1;
  double *d = malloc((size_t)n * sizeof(double)), *e = calloc((size_t)n, sizeof(double)),
         *tau = calloc((size_t)n, sizeof(double));
  {
    /* The split product alone, the whole lower triangle: GPU 0 reads its
     * columns' part, about n^2 / 2 / ndev elements. */
    if (restore(&s)) return -1;
    jmg_error err;
    memset(&err, 0, sizeof err);
    double ms = 0.0;
    if (jmg_trd_time_symv(&s.g, &s.a, nb, s.work, 10, &ms, "probe", &err) != 0) {
      snprintf(g_status, sizeof g_status, "jmg_trd_time_symv: %s: %s", err.call, err.msg);
      return -1;
    }
    const double bytes = 0.5 * (double)n * (double)n * 8.0 / ndev;
    snprintf(note, sizeof note, "j = 0, one product; GPU 0 reads %.2f GB: %.2f TB/s",
             bytes * 1e-9, bytes / (ms * 1e-3) * 1e-12);
    line("mg_symv", n, ndev, nb, tile, ms * 1e-3, note);
  }
  double times[64];
  if (reps > 63) reps = 63;
  for (int rep = 0; rep <= reps; ++rep) {
    if (restore(&s)) return -1;
    jmg_error err;
    memset(&err, 0, sizeof err);
    const double t0 = now();
    if (jmg_trd_reduce(&s.g, &s.a, nb, g_path, s.work, d, e, tau, NULL, "probe",
                       &err) != 0) {
      snprintf(g_status, sizeof g_status, "jmg_trd_reduce: %s: %s", err.call,
               err.msg);
      return -1;
    }
    const double t = now() - t0;
    if (rep > 0) times[rep - 1] = t;
    else
      line(named("mg_sytrd_warmup"), n, ndev, nb, tile, t,
           "first run (kernel load)");
  }
  qsort(times, (size_t)reps, sizeof(double), cmp);
  snprintf(note, sizeof note, "min of %d; median %.4f s; per column %.1f us",
           reps, times[reps / 2], 1e6 * times[0] / (double)n);
  line(named("mg_sytrd"), n, ndev, nb, tile, times[0], note);
  {
    /* Once more, with the profile (timing events on GPU 0). */
    if (restore(&s)) return -1;
    jmg_error err;
    memset(&err, 0, sizeof err);
    jmg_trd_profile pr;
    const double t0 = now();
    if (jmg_trd_reduce(&s.g, &s.a, nb, g_path, s.work, d, e, tau, &pr, "probe",
                       &err) != 0) {
      snprintf(g_status, sizeof g_status, "jmg_trd_reduce: %s: %s", err.call,
               err.msg);
      return -1;
    }
    const double t = now() - t0;
    snprintf(
        note, sizeof note,
        "GPU 0: columns %.1f ms; trailing %.1f ms; us a column by eighths: "
        "%.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f",
        pr.columns_ms, pr.trailing_ms, pr.us_per_column[0], pr.us_per_column[1],
        pr.us_per_column[2], pr.us_per_column[3], pr.us_per_column[4],
        pr.us_per_column[5], pr.us_per_column[6], pr.us_per_column[7]);
    line(named("mg_profile"), n, ndev, nb, tile, t, note);
  }
  if (ormtr_time(&s, tau, &note[0], sizeof note) == 0)
    line(named("mg_ormtr"), n, ndev, nb, tile, atof(note),
         "Z = Q Z, Z n x n split by columns; second run");
  if (check) {
    /* T dense in scratch, its eigenvalues and A's. */
    CK(cudaSetDevice(0));
    double *t = scratch, *w1, *w2;
    CK(cudaMalloc((void **)&w1, (size_t)n * sizeof(double)));
    CK(cudaMalloc((void **)&w2, (size_t)n * sizeof(double)));
    CK(cudaMemset(t, 0, nn));
    CK(cudaMemcpy2D(t, (size_t)(n + 1) * sizeof(double), d, sizeof(double),
                    sizeof(double), (size_t)n, cudaMemcpyHostToDevice));
    if (n > 1)
      CK(cudaMemcpy2D(t + 1, (size_t)(n + 1) * sizeof(double), e, sizeof(double),
                      sizeof(double), (size_t)(n - 1), cudaMemcpyHostToDevice));
    cusolverDnHandle_t dn;
    CKS(cusolverDnCreate(&dn));
    double sec = 0.0;
    if (eigvals(t, n, w1, dn, &sec)) return -1;
    if (make_a(dense, scratch, n, h0)) return -1; /* the same A again */
    if (eigvals(dense, n, w2, dn, &sec)) return -1;
    double *h1 = malloc((size_t)n * sizeof(double)), *h2 = malloc((size_t)n * sizeof(double));
    CK(cudaMemcpy(h1, w1, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2, w2, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost));
    double diff = 0.0, big = 0.0;
    for (long long i = 0; i < n; ++i) {
      if (fabs(h1[i] - h2[i]) > diff) diff = fabs(h1[i] - h2[i]);
      if (fabs(h2[i]) > big) big = fabs(h2[i]);
    }
    snprintf(note, sizeof note,
             "max |eig(T) - eig(A)| / max |eig(A)| (cusolverDnXsyevd both)");
    if (!(diff / big < 1e-10)) snprintf(g_status, sizeof g_status, "WRONG");
    line(named("mg_check_eigenvalues"), n, ndev, nb, tile, diff / big, note);
    free(h1);
    free(h2);
    cudaFree(w1);
    cudaFree(w2);
    cusolverDnDestroy(dn);
  }
  free(d);
  free(e);
  free(tau);
  if (free_setup(&s)) return -1;
  cudaFree(dense);
  cudaFree(scratch);
  cublasDestroy(h0);
  return 0;
}

static int mode_orth(int ndev, long long n, int nb, long long tile) {
  CK(cudaSetDevice(0));
  cublasHandle_t h0;
  CKB(cublasCreate(&h0));
  cusolverDnHandle_t dn;
  CKS(cusolverDnCreate(&dn));
  double *dense, *q, *t, *r;
  const size_t nn = (size_t)(n * n) * sizeof(double);
  CK(cudaMalloc((void **)&dense, nn));
  CK(cudaMalloc((void **)&q, nn));
  CK(cudaMalloc((void **)&t, nn));
  CK(cudaMalloc((void **)&r, nn));
  if (make_a(dense, q, n, h0)) return -1;
  setup s;
  if (make_setup(&s, ndev, n, tile, nb, dense)) return -1;
  if (restore(&s)) return -1;
  double *d = malloc((size_t)n * sizeof(double)), *e = calloc((size_t)n, sizeof(double)),
         *tau = calloc((size_t)n, sizeof(double));
  jmg_error err;
  memset(&err, 0, sizeof err);
  const double t0 = now();
  if (jmg_trd_reduce(&s.g, &s.a, nb, g_path, s.work, d, e, tau, NULL, "probe",
                     &err) != 0) {
    snprintf(g_status, sizeof g_status, "jmg_trd_reduce: %s: %s", err.call, err.msg);
    return -1;
  }
  const double sec = now() - t0;
  /* Q: the reflectors gathered to GPU 0 (q), then dorgtr. */
  for (long long t1 = 0; t1 < n; t1 += tile) {
    const int o = jmg_bc_owner(t1, tile, ndev);
    const long long lc = jmg_bc_local(t1, tile, ndev);
    const long long w = t1 + tile <= n ? tile : n - t1;
    CK(cudaMemcpyPeer(q + t1 * n, 0, s.a.a[o] + lc * n, o, (size_t)(w * n) * sizeof(double)));
  }
  CK(cudaSetDevice(0));
  double *dtau;
  int *info, lwork = 0;
  CK(cudaMalloc((void **)&dtau, (size_t)n * sizeof(double)));
  CK(cudaMalloc((void **)&info, sizeof(int)));
  CK(cudaMemcpy(dtau, tau, (size_t)n * sizeof(double), cudaMemcpyHostToDevice));
  CKS(cusolverDnDorgtr_bufferSize(dn, CUBLAS_FILL_MODE_LOWER, (int)n, q, (int)n, dtau, &lwork));
  double *work;
  CK(cudaMalloc((void **)&work, (size_t)(lwork > 0 ? lwork : 1) * sizeof(double)));
  CKS(cusolverDnDorgtr(dn, CUBLAS_FILL_MODE_LOWER, (int)n, q, (int)n, dtau, work, lwork, info));
  int h_info = 0;
  CK(cudaMemcpy(&h_info, info, sizeof(int), cudaMemcpyDeviceToHost));
  if (h_info != 0) {
    snprintf(g_status, sizeof g_status, "dorgtr info %d", h_info);
    return -1;
  }
  /* r = Q^T Q - I; then t = T dense, r2 = Q T Q^T - A */
  const double one = 1.0, zero = 0.0, minus = -1.0;
  CKB(cublasDgemm(h0, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)n, (int)n, &one, q, (int)n, q, (int)n, &zero, r, (int)n));
  double *hr = malloc(nn);
  CK(cudaMemcpy(hr, r, nn, cudaMemcpyDeviceToHost));
  double eq = 0.0;
  for (long long i = 0; i < n; ++i)
    for (long long j = 0; j < n; ++j) {
      const double x = fabs(hr[i + j * n] - (i == j ? 1.0 : 0.0));
      if (x > eq) eq = x;
    }
  CK(cudaMemset(t, 0, nn));
  CK(cudaMemcpy2D(t, (size_t)(n + 1) * sizeof(double), d, sizeof(double), sizeof(double), (size_t)n, cudaMemcpyHostToDevice));
  CK(cudaMemcpy2D(t + 1, (size_t)(n + 1) * sizeof(double), e, sizeof(double), sizeof(double), (size_t)(n - 1), cudaMemcpyHostToDevice));
  CK(cudaMemcpy2D(t + n, (size_t)(n + 1) * sizeof(double), e, sizeof(double), sizeof(double), (size_t)(n - 1), cudaMemcpyHostToDevice));
  CKB(cublasDgemm(h0, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n, &one, q, (int)n, t, (int)n, &zero, r, (int)n));
  if (make_a(dense, t, n, h0)) return -1; /* A again (t as scratch) */
  CKB(cublasDgemm(h0, CUBLAS_OP_N, CUBLAS_OP_T, (int)n, (int)n, (int)n, &one, r, (int)n, q, (int)n, &minus, dense, (int)n));
  double *ha = malloc(nn);
  CK(cudaMemcpy(hr, dense, nn, cudaMemcpyDeviceToHost));
  if (make_a(dense, t, n, h0)) return -1;
  CK(cudaMemcpy(ha, dense, nn, cudaMemcpyDeviceToHost));
  double ea = 0.0, amax = 0.0;
  for (size_t i = 0; i < (size_t)(n * n); ++i) {
    if (fabs(hr[i]) > ea) ea = fabs(hr[i]);
    if (fabs(ha[i]) > amax) amax = fabs(ha[i]);
  }
  /* Z = I laid out as A, then Z := Q Z: must be dorgtr's Q. */
  double eo = 0.0;
  {
    jmg_trd_matrix z = s.a;
    void *work[JMG_TRD_MAX_DEV];
    for (int qd = 0; qd < ndev; ++qd) {
      CK(cudaSetDevice(qd));
      CK(cudaMalloc((void **)&z.a[qd], (size_t)(s.cnt[qd] > 0 ? s.cnt[qd] : 1) * (size_t)n * sizeof(double)));
      CK(cudaMemset(z.a[qd], 0, (size_t)(s.cnt[qd] > 0 ? s.cnt[qd] : 1) * (size_t)n * sizeof(double)));
      for (long long lc = 0; lc < s.cnt[qd]; ++lc) {
        const double one1 = 1.0;
        CK(cudaMemcpy(z.a[qd] + lc * n + jmg_bc_global(lc, tile, ndev, qd), &one1, sizeof(double), cudaMemcpyHostToDevice));
      }
      CK(cudaMalloc(&work[qd], jmg_trd_ormtr_bytes(n, tile, ndev, qd)));
    }
    memset(&err, 0, sizeof err);
    if (jmg_trd_ormtr(&s.g, &s.a, tau, &z, work, "probe", &err) != 0) {
      snprintf(g_status, sizeof g_status, "jmg_trd_ormtr: %s: %s", err.call, err.msg);
      return -1;
    }
    for (int qd = 0; qd < ndev; ++qd) {
      CK(cudaSetDevice(qd));
      CK(cudaStreamSynchronize(s.g.stream[qd]));
    }
    CK(cudaSetDevice(0));
    double *hz = malloc(nn), *hq = malloc(nn);
    CK(cudaMemcpy(hq, q, nn, cudaMemcpyDeviceToHost));
    for (long long t1 = 0; t1 < n; t1 += tile) {
      const int o = jmg_bc_owner(t1, tile, ndev);
      const long long lc = jmg_bc_local(t1, tile, ndev);
      const long long w = t1 + tile <= n ? tile : n - t1;
      CK(cudaSetDevice(o));
      CK(cudaMemcpy(hz + t1 * n, z.a[o] + lc * n, (size_t)(w * n) * sizeof(double), cudaMemcpyDeviceToHost));
    }
    for (size_t i = 0; i < (size_t)(n * n); ++i)
      if (fabs(hz[i] - hq[i]) > eo) eo = fabs(hz[i] - hq[i]);
    for (int qd = 0; qd < ndev; ++qd) {
      CK(cudaSetDevice(qd));
      CK(cudaFree(z.a[qd]));
      CK(cudaFree(work[qd]));
    }
    CK(cudaSetDevice(0));
    free(hz);
    free(hq);
  }
  char note[200];
  snprintf(note, sizeof note, "reduction %.4f s; max|Q^TQ-I| %.2e", sec, eq);
  if (!(eq < 1e-12 && ea / amax < 1e-12 && eo < 1e-12)) snprintf(g_status, sizeof g_status, "WRONG");
  line(named("mg_orth_qtq"), n, ndev, nb, tile, eq, note);
  line(named("mg_orth_residual"), n, ndev, nb, tile, ea / amax,
       "max|Q T Q^T - A| / max|A|");
  line(named("mg_orth_ormtr"), n, ndev, nb, tile, eo,
       "max|jmg_trd_ormtr(I) - dorgtr's Q|");
  free(hr);
  free(ha);
  free(d);
  free(e);
  free(tau);
  return free_setup(&s);
}

/* The optional PATH argument; 0, or -1 (after a line) where it is unknown. */
static int path_arg(int argc, char **argv, int at) {
  if (argc <= at || strcmp(argv[at], "replicated") == 0) return 0;
  if (strcmp(argv[at], "owner") == 0) {
    g_path = JMG_TRD_OWNER;
    return 0;
  }
  fprintf(stderr, "PATH: replicated or owner, not %s\n", argv[at]);
  return -1;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "dn") == 0) {
    const long long n = atoll(argv[2]);
    if (mode_dn(n)) line("dn", n, 1, 0, 0, 0.0, "failed");
    return 0;
  }
  if (argc >= 8 && strcmp(argv[1], "mg") == 0) {
    if (path_arg(argc, argv, 8)) return 2;
    const int ndev = atoi(argv[2]), nb = atoi(argv[4]);
    const long long n = atoll(argv[3]), tile = atoll(argv[5]);
    if (mode_mg(ndev, n, nb, tile, atoi(argv[6]), atoi(argv[7])))
      line(named("mg"), n, ndev, nb, tile, 0.0, "failed");
    return 0;
  }
  if (argc >= 6 && strcmp(argv[1], "orth") == 0) {
    if (path_arg(argc, argv, 6)) return 2;
    const int ndev = atoi(argv[2]), nb = atoi(argv[4]);
    const long long n = atoll(argv[3]), tile = atoll(argv[5]);
    if (mode_orth(ndev, n, nb, tile))
      line(named("orth"), n, ndev, nb, tile, 0.0, "failed");
    return 0;
  }
  fprintf(
      stderr,
      "usage: %s dn N | mg NDEV N NB TILE CHECK REPS [PATH] | orth NDEV N NB "
      "TILE [PATH]\n",
      argv[0]);
  return 2;
}
