/* Where the eigensolvers' time goes (issue 37: syevd on 2 GPUs at >= 1.5x
 * JAX's one-GPU eigh needs a design of jaxmg's own; docs/design/
 * eigensolver-2stage.md). Float64 throughout. Four modes, each one process
 * (scripts/probe-eig-parts.sh runs them in turn, each under `timeout`, so
 * that a hang inside a library costs only its own lines):
 *
 *   probe-eig-parts dn SIZES
 *       one GPU, cuSOLVERDn: cusolverDnXsyevd with vectors and without,
 *       cusolverDnDsytrd, cusolverDnDormtr applied to I (n x n), and the
 *       BLAS3 rates stage 1 of a two-stage reduction would run at (cuBLAS
 *       dgemm n x n x n, dsyr2k n x 128);
 *   probe-eig-parts mp RANKS NB SIZES MP_LIB
 *       cuSOLVERMp (dlopen'ed from MP_LIB, its libcusolverMp.so.0) on a
 *       1 x RANKS grid (jaxmg's: column blocks), one process driving RANKS
 *       GPUs (ncclCommInitAll, a thread per rank): cusolverMpSyevd whole,
 *       then its parts one by one: cusolverMpSytrd, cusolverMpStedc (on
 *       Sytrd's T, compz 'I'), cusolverMpOrmtr (on Stedc's vectors);
 *   probe-eig-parts host LAPACK_LIB PREFIX SIZES BANDS BUDGET_S
 *       the host: LAPACK's dsytrd_sb2st (band -> tridiagonal) of a random
 *       symmetric band matrix on one BLAS thread, vect 'N' (vect 'V', the
 *       Householder vectors kept, is tried once: reference LAPACK refuses
 *       it, info = -2), dsterf on its T, T copies of sb2st at once on T
 *       threads (what a parallel bulge chase could hope for), and one run
 *       with the library's default BLAS threads (last: it can be 10-60x
 *       slower); configurations predicted past BUDGET_S seconds are
 *       skipped (said so). List SIZES and BANDS ascending.
 *
 * Every GPU measurement: one warm-up, then one run timed with cudaEvents
 * on the call's stream (on several ranks: the slowest rank's, and the wall
 * time in the note); A restored from a pristine copy before each run (not
 * timed). Every return code is checked (CUDA, cuRAND, cuBLAS, cuSOLVER,
 * NCCL, LAPACK info); a failure is printed in the status column and the
 * probe goes on. Output: "part,n,ranks,nb,seconds,status,note" lines,
 * flushed as they come; '#' lines are comments. cuSOLVERMp is opened at
 * run time (it needs libcuda.so.1), so the host mode runs on machines
 * without a GPU. */
#define _GNU_SOURCE /* RTLD_DEFAULT in dlfcn.h */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <curand.h>
#include <cusolverDn.h>
#include <cusolverMp.h>
#include <dlfcn.h>
#include <math.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ST_LEN 192

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void row(const char *part, int64_t n, int ranks, int64_t nb, double s,
                const char *status, const char *note) {
  printf("%s,%lld,%d,%lld,%.4f,%s,%s\n", part, (long long)n, ranks,
         (long long)nb, s, status, note ? note : "");
  fflush(stdout);
}

static int ok(const char *st) { return strcmp(st, "ok") == 0; }

/* Each returns nonzero (and writes what failed into st) on failure. */
static int ck_cuda(cudaError_t e, const char *what, char *st) {
  if (e == cudaSuccess) return 0;
  snprintf(st, ST_LEN, "%s:cuda=%d(%s)", what, (int)e, cudaGetErrorName(e));
  return 1;
}
static int ck_sol(cusolverStatus_t s, const char *what, char *st) {
  if (s == CUSOLVER_STATUS_SUCCESS) return 0;
  snprintf(st, ST_LEN, "%s:cusolver=%d", what, (int)s);
  return 1;
}
static int ck_blas(cublasStatus_t s, const char *what, char *st) {
  if (s == CUBLAS_STATUS_SUCCESS) return 0;
  snprintf(st, ST_LEN, "%s:cublas=%d", what, (int)s);
  return 1;
}
static int ck_rand(curandStatus_t s, const char *what, char *st) {
  if (s == CURAND_STATUS_SUCCESS) return 0;
  snprintf(st, ST_LEN, "%s:curand=%d", what, (int)s);
  return 1;
}
static int ck_nccl(ncclResult_t r, const char *what, char *st) {
  if (r == ncclSuccess) return 0;
  snprintf(st, ST_LEN, "%s:nccl=%d(%s)", what, (int)r, ncclGetErrorString(r));
  return 1;
}

/* Reads *d_info (after the stream is synchronized): nonzero is a failure. */
static int ck_info(const int *d_info, const char *what, char *st) {
  int h = 0;
  if (ck_cuda(cudaMemcpy(&h, d_info, sizeof h, cudaMemcpyDeviceToHost), what,
              st))
    return 1;
  if (h == 0) return 0;
  snprintf(st, ST_LEN, "%s:info=%d", what, h);
  return 1;
}

static int parse_list(const char *s, int64_t *out, int max) {
  int k = 0;
  while (*s && k < max) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s) break;
    out[k++] = v;
    s = *end == ',' ? end + 1 : end;
  }
  return k;
}

/* A uniform random fill of n elements (0, 1] on the current device. */
static int fill_random(double *p, size_t n, unsigned long long seed,
                       char *st) {
  curandGenerator_t g;
  if (ck_rand(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_DEFAULT),
              "curandCreateGenerator", st))
    return 1;
  int rc = ck_rand(curandSetPseudoRandomGeneratorSeed(g, seed), "curandSeed",
                   st) ||
           ck_rand(curandGenerateUniformDouble(g, p, n), "curandGenerate", st);
  curandDestroyGenerator(g);
  if (rc == 0) rc = ck_cuda(cudaDeviceSynchronize(), "fill sync", st);
  return rc;
}

/* ---- one GPU: cuSOLVERDn ----------------------------------------------- */

typedef struct dn_ctx {
  int64_t n;
  cudaStream_t s;
  cusolverDnHandle_t h;
  cusolverDnParams_t p;
  cublasHandle_t b;
  double *a0, *a, *c, *w, *d, *e, *tau, *ones;
  void *work;
  size_t work_bytes;
  void *hwork;
  size_t hwork_bytes;
  int lwork_sytrd, lwork_ormtr;
  int *info;
} dn_ctx;

typedef int (*dn_fn)(dn_ctx *x, char *st);

static int dn_restore_a(dn_ctx *x, char *st) {
  const size_t bytes = (size_t)x->n * (size_t)x->n * sizeof(double);
  return ck_cuda(cudaMemcpyAsync(x->a, x->a0, bytes, cudaMemcpyDeviceToDevice,
                                 x->s),
                 "restore A", st);
}

static int dn_identity(dn_ctx *x, char *st) {
  const size_t n = (size_t)x->n;
  return ck_cuda(cudaMemsetAsync(x->c, 0, n * n * sizeof(double), x->s),
                 "memset C", st) ||
         ck_cuda(cudaMemcpy2DAsync(x->c, (n + 1) * sizeof(double), x->ones,
                                   sizeof(double), sizeof(double), n,
                                   cudaMemcpyHostToDevice, x->s),
                 "diag C", st);
}

static int dn_syevd(dn_ctx *x, int vectors, char *st) {
  return ck_sol(
      cusolverDnXsyevd(x->h, x->p,
                       vectors ? CUSOLVER_EIG_MODE_VECTOR
                               : CUSOLVER_EIG_MODE_NOVECTOR,
                       CUBLAS_FILL_MODE_LOWER, x->n, CUDA_R_64F, x->a, x->n,
                       CUDA_R_64F, x->w, CUDA_R_64F, x->work, x->work_bytes,
                       x->hwork, x->hwork_bytes, x->info),
      "cusolverDnXsyevd", st);
}
static int dn_syevd_v(dn_ctx *x, char *st) { return dn_syevd(x, 1, st); }
static int dn_syevd_n(dn_ctx *x, char *st) { return dn_syevd(x, 0, st); }

static int dn_sytrd(dn_ctx *x, char *st) {
  return ck_sol(cusolverDnDsytrd(x->h, CUBLAS_FILL_MODE_LOWER, (int)x->n, x->a,
                                 (int)x->n, x->d, x->e, x->tau, x->work,
                                 x->lwork_sytrd, x->info),
                "cusolverDnDsytrd", st);
}

static int dn_ormtr(dn_ctx *x, char *st) {
  return ck_sol(cusolverDnDormtr(x->h, CUBLAS_SIDE_LEFT,
                                 CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                 (int)x->n, (int)x->n, x->a, (int)x->n,
                                 x->tau, x->c, (int)x->n, x->work,
                                 x->lwork_ormtr, x->info),
                "cusolverDnDormtr", st);
}

/* C (n x n) = A0 * A0': 2 n^3 flops. */
static int dn_gemm(dn_ctx *x, char *st) {
  const double one = 1.0, zero = 0.0;
  const int n = (int)x->n;
  return ck_blas(cublasDgemm(x->b, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one,
                             x->a0, n, x->a0, n, &zero, x->c, n),
                 "cublasDgemm", st);
}

/* C's lower triangle += A0(:, 0:128) B' + B A0(:, 0:128)', B = A0(:,
 * 128:256): the her2k of one panel of 128 over the whole matrix, 2 n^2 128
 * flops. */
static int dn_syr2k(dn_ctx *x, char *st) {
  const double one = 1.0;
  const int n = (int)x->n;
  return ck_blas(cublasDsyr2k(x->b, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n,
                              128, &one, x->a0, n, x->a0 + (size_t)128 * n, n,
                              &one, x->c, n),
                 "cublasDsyr2k", st);
}

/* One warm-up and one timed run of call (prep before each, not timed);
 * prints the line. */
static void dn_time(dn_ctx *x, const char *part, dn_fn prep, dn_fn call,
                    int check_info, double flops) {
  char st[ST_LEN] = "ok", note[96] = "";
  cudaEvent_t e0 = NULL, e1 = NULL;
  float ms = 0;
  if (ck_cuda(cudaEventCreate(&e0), "event", st) ||
      ck_cuda(cudaEventCreate(&e1), "event", st))
    goto out;
  for (int it = 0; it < 2; ++it) {
    if (prep && prep(x, st)) goto out;
    if (ck_cuda(cudaMemsetAsync(x->info, 0, sizeof(int), x->s), "info", st) ||
        ck_cuda(cudaEventRecord(e0, x->s), "record", st) || call(x, st) ||
        ck_cuda(cudaEventRecord(e1, x->s), "record", st) ||
        ck_cuda(cudaStreamSynchronize(x->s), "sync", st) ||
        (check_info && ck_info(x->info, part, st)) ||
        ck_cuda(cudaEventElapsedTime(&ms, e0, e1), "elapsed", st))
      goto out;
  }
  if (flops > 0) snprintf(note, sizeof note, "%.0f GFLOP/s", flops / ms * 1e-6);
out:
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  row(part, x->n, 1, 0, ok(st) ? ms * 1e-3 : -1, st, note);
}

static void dn_part(int64_t n) {
  char st[ST_LEN] = "ok";
  dn_ctx x;
  memset(&x, 0, sizeof x);
  x.n = n;
  const size_t nn = (size_t)n * (size_t)n * sizeof(double);
  if (ck_cuda(cudaSetDevice(0), "cudaSetDevice", st) ||
      ck_cuda(cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking),
              "stream", st) ||
      ck_sol(cusolverDnCreate(&x.h), "cusolverDnCreate", st) ||
      ck_sol(cusolverDnSetStream(x.h, x.s), "cusolverDnSetStream", st) ||
      ck_sol(cusolverDnCreateParams(&x.p), "cusolverDnCreateParams", st) ||
      ck_blas(cublasCreate(&x.b), "cublasCreate", st) ||
      ck_blas(cublasSetStream(x.b, x.s), "cublasSetStream", st) ||
      ck_cuda(cudaMalloc((void **)&x.a0, nn), "malloc A0", st) ||
      ck_cuda(cudaMalloc((void **)&x.a, nn), "malloc A", st) ||
      ck_cuda(cudaMalloc((void **)&x.c, nn), "malloc C", st) ||
      ck_cuda(cudaMalloc((void **)&x.w, (size_t)n * sizeof(double)), "malloc",
              st) ||
      ck_cuda(cudaMalloc((void **)&x.d, (size_t)n * sizeof(double)), "malloc",
              st) ||
      ck_cuda(cudaMalloc((void **)&x.e, (size_t)n * sizeof(double)), "malloc",
              st) ||
      ck_cuda(cudaMalloc((void **)&x.tau, (size_t)n * sizeof(double)),
              "malloc", st) ||
      ck_cuda(cudaMalloc((void **)&x.info, sizeof(int)), "malloc", st) ||
      fill_random(x.a0, (size_t)n * (size_t)n, 1234, st))
    goto out;
  x.ones = malloc((size_t)n * sizeof(double));
  if (x.ones == NULL) {
    snprintf(st, ST_LEN, "malloc ones");
    goto out;
  }
  for (int64_t i = 0; i < n; ++i) x.ones[i] = 1.0;
  size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
  if (ck_sol(cusolverDnXsyevd_bufferSize(x.h, x.p, CUSOLVER_EIG_MODE_VECTOR,
                                         CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F,
                                         x.a, n, CUDA_R_64F, x.w, CUDA_R_64F,
                                         &d1, &h1),
             "Xsyevd_bufferSize", st) ||
      ck_sol(cusolverDnXsyevd_bufferSize(
                 x.h, x.p, CUSOLVER_EIG_MODE_NOVECTOR, CUBLAS_FILL_MODE_LOWER,
                 n, CUDA_R_64F, x.a, n, CUDA_R_64F, x.w, CUDA_R_64F, &d2, &h2),
             "Xsyevd_bufferSize", st) ||
      ck_sol(cusolverDnDsytrd_bufferSize(x.h, CUBLAS_FILL_MODE_LOWER, (int)n,
                                         x.a, (int)n, x.d, x.e, x.tau,
                                         &x.lwork_sytrd),
             "Dsytrd_bufferSize", st) ||
      ck_sol(cusolverDnDormtr_bufferSize(
                 x.h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                 (int)n, (int)n, x.a, (int)n, x.tau, x.c, (int)n,
                 &x.lwork_ormtr),
             "Dormtr_bufferSize", st))
    goto out;
  x.work_bytes = d1 > d2 ? d1 : d2;
  if ((size_t)x.lwork_sytrd * 8 > x.work_bytes)
    x.work_bytes = (size_t)x.lwork_sytrd * 8;
  if ((size_t)x.lwork_ormtr * 8 > x.work_bytes)
    x.work_bytes = (size_t)x.lwork_ormtr * 8;
  x.hwork_bytes = (h1 > h2 ? h1 : h2) + 1;
  x.hwork = malloc(x.hwork_bytes);
  if (x.hwork == NULL) {
    snprintf(st, ST_LEN, "malloc host work");
    goto out;
  }
  if (ck_cuda(cudaMalloc(&x.work, x.work_bytes), "malloc work", st)) goto out;
  printf("# dn n=%lld work: Xsyevd V %.2f GiB, N %.2f GiB, sytrd %.3f GiB, "
         "ormtr %.3f GiB\n",
         (long long)n, d1 / 1073741824.0, d2 / 1073741824.0,
         x.lwork_sytrd * 8.0 / 1073741824.0, x.lwork_ormtr * 8.0 / 1073741824.0);
  const double fn = (double)n;
  dn_time(&x, "dn_gemm", NULL, dn_gemm, 0, 2 * fn * fn * fn);
  dn_time(&x, "dn_syr2k_k128", NULL, dn_syr2k, 0, 2 * fn * fn * 128);
  dn_time(&x, "dn_syevd_V", dn_restore_a, dn_syevd_v, 1, 0);
  dn_time(&x, "dn_syevd_N", dn_restore_a, dn_syevd_n, 1, 0);
  dn_time(&x, "dn_sytrd", dn_restore_a, dn_sytrd, 1, 0);
  /* A now holds the last Dsytrd's reflectors. */
  dn_time(&x, "dn_ormtr", dn_identity, dn_ormtr, 1, 0);
out:
  if (!ok(st)) row("dn_setup", n, 1, 0, -1, st, NULL);
  cudaFree(x.a0), cudaFree(x.a), cudaFree(x.c), cudaFree(x.w), cudaFree(x.d);
  cudaFree(x.e), cudaFree(x.tau), cudaFree(x.info), cudaFree(x.work);
  free(x.hwork), free(x.ones);
  if (x.b) cublasDestroy(x.b);
  if (x.p) cusolverDnDestroyParams(x.p);
  if (x.h) cusolverDnDestroy(x.h);
  if (x.s) cudaStreamDestroy(x.s);
}

/* ---- several GPUs: cuSOLVERMp ------------------------------------------ */

#define MP_FN(name) __typeof__(name) *name
static struct {
  MP_FN(cusolverMpCreate);
  MP_FN(cusolverMpDestroy);
  MP_FN(cusolverMpCreateDeviceGrid);
  MP_FN(cusolverMpDestroyGrid);
  MP_FN(cusolverMpCreateMatrixDesc);
  MP_FN(cusolverMpDestroyMatrixDesc);
  MP_FN(cusolverMpSyevd_bufferSize);
  MP_FN(cusolverMpSyevd);
  MP_FN(cusolverMpSytrd_bufferSize);
  MP_FN(cusolverMpSytrd);
  MP_FN(cusolverMpStedc_bufferSize);
  MP_FN(cusolverMpStedc);
  MP_FN(cusolverMpOrmtr_bufferSize);
  MP_FN(cusolverMpOrmtr);
  MP_FN(cusolverMpGetVersion);
} mp;

static int mp_load(const char *path) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (lib == NULL) {
    printf("# dlopen(%s): %s\n", path, dlerror());
    return 1;
  }
#define MP_SYM(name)                                            \
  do {                                                          \
    void *p_ = dlsym(lib, #name);                               \
    memcpy(&mp.name, &p_, sizeof p_);                           \
    if (mp.name == NULL) {                                      \
      printf("# %s: not in %s\n", #name, path);                 \
      return 1;                                                 \
    }                                                           \
  } while (0)
  MP_SYM(cusolverMpCreate);
  MP_SYM(cusolverMpDestroy);
  MP_SYM(cusolverMpCreateDeviceGrid);
  MP_SYM(cusolverMpDestroyGrid);
  MP_SYM(cusolverMpCreateMatrixDesc);
  MP_SYM(cusolverMpDestroyMatrixDesc);
  MP_SYM(cusolverMpSyevd_bufferSize);
  MP_SYM(cusolverMpSyevd);
  MP_SYM(cusolverMpSytrd_bufferSize);
  MP_SYM(cusolverMpSytrd);
  MP_SYM(cusolverMpStedc_bufferSize);
  MP_SYM(cusolverMpStedc);
  MP_SYM(cusolverMpOrmtr_bufferSize);
  MP_SYM(cusolverMpOrmtr);
  MP_SYM(cusolverMpGetVersion);
#undef MP_SYM
  return 0;
}

#define MP_MAX_RANKS 8
enum { MP_SYEVD, MP_SYTRD, MP_STEDC, MP_ORMTR, MP_STEPS };
static const char *const mp_names[MP_STEPS] = {"mp_syevd", "mp_sytrd",
                                               "mp_stedc", "mp_ormtr"};

typedef struct mp_shared {
  int ranks;
  int64_t nb;
  const int64_t *sizes;
  int nsizes;
  ncclComm_t comms[MP_MAX_RANKS];
  pthread_barrier_t bar;
  char st[MP_MAX_RANKS][ST_LEN];
  float ms[MP_MAX_RANKS];
  double wall0, wall1;
  int go; /* rank 0's verdict after each step: 1 when every rank was ok */
  int64_t local_cols[MP_MAX_RANKS];
  double *hd[MP_MAX_RANKS], *he[MP_MAX_RANKS]; /* Sytrd's d, e per rank */
  double *gd, *ge;                             /* T, gathered */
  double *w_syevd;                             /* syevd's eigenvalues */
} mp_shared;

typedef struct mp_rank {
  mp_shared *sh;
  int rank;
} mp_rank;

static int64_t numroc(int64_t n, int64_t nb, int iproc, int nprocs) {
  int64_t nblocks = n / nb;
  int64_t num = (nblocks / nprocs) * nb;
  int64_t extra = nblocks % nprocs;
  if (iproc < extra)
    num += nb;
  else if (iproc == extra)
    num += n % nb;
  return num;
}

/* Rank 0 prints a step's line from every rank's status and time, and sets
 * sh->go to whether every rank was ok (every rank reads it after the
 * second barrier). Every rank calls it. */
static void mp_report(mp_shared *sh, int rank, const char *part, int64_t n,
                      const char *extra) {
  pthread_barrier_wait(&sh->bar);
  if (rank == 0) {
    sh->wall1 = now();
    char st[ST_LEN] = "ok", note[256];
    float worst = 0;
    for (int r = 0; r < sh->ranks; ++r) {
      if (!ok(sh->st[r]) && ok(st))
        snprintf(st, ST_LEN, "rank%d:%s", r, sh->st[r]);
      if (sh->ms[r] > worst) worst = sh->ms[r];
    }
    int used = snprintf(note, sizeof note, "wall %.4f s; per rank",
                        sh->wall1 - sh->wall0);
    for (int r = 0; r < sh->ranks && used < (int)sizeof note; ++r)
      used += snprintf(note + used, sizeof note - used, " %.4f",
                       sh->ms[r] * 1e-3);
    if (extra && used < (int)sizeof note)
      snprintf(note + used, sizeof note - used, "; %s", extra);
    row(part, n, sh->ranks, sh->nb, ok(st) ? worst * 1e-3 : -1, st, note);
    sh->go = ok(st);
  }
  pthread_barrier_wait(&sh->bar);
}

static void *mp_thread(void *arg) {
  mp_rank *me = arg;
  mp_shared *sh = me->sh;
  const int r = me->rank, R = sh->ranks;
  const int64_t nb = sh->nb;
  char *st = sh->st[r];
  snprintf(st, ST_LEN, "ok");
  cudaStream_t s = NULL;
  cusolverMpHandle_t h = NULL;
  cusolverMpGrid_t grid = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  if (!ck_cuda(cudaSetDevice(r), "cudaSetDevice", st) &&
      !ck_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream",
               st) &&
      !ck_cuda(cudaEventCreate(&e0), "event", st) &&
      !ck_cuda(cudaEventCreate(&e1), "event", st) &&
      !ck_sol(mp.cusolverMpCreate(&h, r, s), "cusolverMpCreate", st) &&
      !ck_sol(mp.cusolverMpCreateDeviceGrid(h, &grid, sh->comms[r], 1, R,
                                            CUSOLVERMP_GRID_MAPPING_COL_MAJOR),
              "cusolverMpCreateDeviceGrid", st)) {
    int v = 0;
    if (r == 0 && mp.cusolverMpGetVersion(h, &v) == CUSOLVER_STATUS_SUCCESS)
      printf("# cuSOLVERMp version %d\n", v);
  }
  mp_report(sh, r, "mp_setup", 0, NULL);
  const int setup_ok = sh->go;

  for (int k = 0; setup_ok && k < sh->nsizes; ++k) {
    const int64_t n = sh->sizes[k];
    const int64_t lc = numroc(n, nb, r, R); /* local columns; rows: n */
    const size_t lbytes = (size_t)n * (size_t)(lc > 0 ? lc : 1) * 8;
    const int64_t nd = lc > 0 ? lc : 1;
    double *a0 = NULL, *a = NULL, *q = NULL, *w = NULL, *d = NULL, *e = NULL,
           *tau = NULL, *D = NULL, *E = NULL;
    int *info = NULL;
    void *work = NULL, *hwork = NULL;
    int *iwork = NULL;
    cusolverMpMatrixDescriptor_t da = NULL, dq = NULL;
    size_t dw[MP_STEPS] = {0}, hw[MP_STEPS] = {0}, dmax = 0, hmax = 1;
    char compz_syevd[2] = {'Z', 0}, compz_stedc[2] = {'I', 0};
    snprintf(st, ST_LEN, "ok");
    sh->ms[r] = 0;
    sh->local_cols[r] = lc;
    if (ck_cuda(cudaMalloc((void **)&a0, lbytes), "malloc A0", st) ||
        ck_cuda(cudaMalloc((void **)&a, lbytes), "malloc A", st) ||
        ck_cuda(cudaMalloc((void **)&q, lbytes), "malloc Q", st) ||
        ck_cuda(cudaMalloc((void **)&w, (size_t)n * 8), "malloc w", st) ||
        ck_cuda(cudaMalloc((void **)&d, (size_t)nd * 8), "malloc d", st) ||
        ck_cuda(cudaMalloc((void **)&e, (size_t)nd * 8), "malloc e", st) ||
        ck_cuda(cudaMalloc((void **)&tau, (size_t)nd * 8), "malloc tau", st) ||
        ck_cuda(cudaMalloc((void **)&D, (size_t)n * 8), "malloc D", st) ||
        ck_cuda(cudaMalloc((void **)&E, (size_t)n * 8), "malloc E", st) ||
        ck_cuda(cudaMalloc((void **)&info, sizeof(int)), "malloc info", st) ||
        fill_random(a0, lbytes / 8, 1234 + (unsigned long long)r, st) ||
        ck_sol(mp.cusolverMpCreateMatrixDesc(&da, grid, CUDA_R_64F, n, n, nb,
                                             nb, 0, 0, n),
               "CreateMatrixDesc", st) ||
        ck_sol(mp.cusolverMpCreateMatrixDesc(&dq, grid, CUDA_R_64F, n, n, nb,
                                             nb, 0, 0, n),
               "CreateMatrixDesc", st))
      goto step_done;
    iwork = calloc((size_t)n + 2 * (size_t)R + 1, sizeof(int));
    sh->hd[r] = malloc((size_t)nd * 8);
    sh->he[r] = malloc((size_t)nd * 8);
    if (iwork == NULL || sh->hd[r] == NULL || sh->he[r] == NULL) {
      snprintf(st, ST_LEN, "host malloc");
      goto step_done;
    }
    if (ck_sol(mp.cusolverMpSyevd_bufferSize(
                   h, compz_syevd, CUBLAS_FILL_MODE_LOWER, n, a, 1, 1, da, w,
                   q, 1, 1, dq, CUDA_R_64F, &dw[MP_SYEVD], &hw[MP_SYEVD]),
               "Syevd_bufferSize", st) ||
        ck_sol(mp.cusolverMpSytrd_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a,
                                             1, 1, da, d, e, tau, CUDA_R_64F,
                                             &dw[MP_SYTRD], &hw[MP_SYTRD]),
               "Sytrd_bufferSize", st) ||
        ck_sol(mp.cusolverMpStedc_bufferSize(h, compz_stedc, n, D, E, q, 1, 1,
                                             dq, CUDA_R_64F, &dw[MP_STEDC],
                                             &hw[MP_STEDC], iwork),
               "Stedc_bufferSize", st) ||
        ck_sol(mp.cusolverMpOrmtr_bufferSize(
                   h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n,
                   n, a, 1, 1, da, tau, q, 1, 1, dq, CUDA_R_64F, &dw[MP_ORMTR],
                   &hw[MP_ORMTR]),
               "Ormtr_bufferSize", st))
      goto step_done;
    for (int i = 0; i < MP_STEPS; ++i) {
      if (dw[i] > dmax) dmax = dw[i];
      if (hw[i] > hmax) hmax = hw[i];
    }
    hwork = malloc(hmax);
    if (hwork == NULL) {
      snprintf(st, ST_LEN, "host work malloc %zu", hmax);
      goto step_done;
    }
    if (ck_cuda(cudaMalloc(&work, dmax > 0 ? dmax : 1), "malloc work", st))
      goto step_done;
    if (r == 0) {
      const double A = (double)n * (double)n * 8.0 / R;
      printf("# mp n=%lld ranks=%d nb=%lld device work per rank (A = a "
             "rank's part): syevd %.2f A, sytrd %.2f A, stedc %.2f A, ormtr "
             "%.2f A; host work %.3f GiB\n",
             (long long)n, R, (long long)nb, dw[MP_SYEVD] / A,
             dw[MP_SYTRD] / A, dw[MP_STEDC] / A, dw[MP_ORMTR] / A,
             hmax / 1073741824.0);
      fflush(stdout);
    }
  step_done:
    mp_report(sh, r, "mp_alloc", n, NULL);
    if (!sh->go) goto free_n;

    /* Each step: warm-up, timed run; A (or T) restored first. */
    for (int step = 0; step < MP_STEPS; ++step) {
      for (int it = 0; it < 2; ++it) {
        snprintf(st, ST_LEN, "ok");
        if (step == MP_SYEVD || step == MP_SYTRD) {
          ck_cuda(cudaMemcpyAsync(a, a0, lbytes, cudaMemcpyDeviceToDevice, s),
                  "restore A", st);
        } else if (step == MP_STEDC) {
          if (!ck_cuda(cudaMemcpyAsync(D, sh->gd, (size_t)n * 8,
                                       cudaMemcpyHostToDevice, s),
                       "upload D", st))
            ck_cuda(cudaMemcpyAsync(E, sh->ge, (size_t)n * 8,
                                    cudaMemcpyHostToDevice, s),
                    "upload E", st);
        }
        if (ok(st) &&
            !ck_cuda(cudaMemsetAsync(info, 0, sizeof(int), s), "info", st))
          ck_cuda(cudaStreamSynchronize(s), "sync", st);
        /* Every rank passes this barrier, failed or not. */
        pthread_barrier_wait(&sh->bar);
        if (r == 0) sh->wall0 = now();
        if (!ok(st)) goto timed;
        if (ck_cuda(cudaEventRecord(e0, s), "record", st)) goto timed;
        cusolverStatus_t cs = CUSOLVER_STATUS_SUCCESS;
        switch (step) {
          case MP_SYEVD:
            cs = mp.cusolverMpSyevd(h, compz_syevd, CUBLAS_FILL_MODE_LOWER, n,
                                    a, 1, 1, da, w, q, 1, 1, dq, CUDA_R_64F,
                                    work, dw[MP_SYEVD], hwork, hw[MP_SYEVD],
                                    info);
            break;
          case MP_SYTRD:
            cs = mp.cusolverMpSytrd(h, CUBLAS_FILL_MODE_LOWER, n, a, 1, 1, da,
                                    d, e, tau, CUDA_R_64F, work, dw[MP_SYTRD],
                                    hwork, hw[MP_SYTRD], info);
            break;
          case MP_STEDC:
            cs = mp.cusolverMpStedc(h, compz_stedc, n, D, E, q, 1, 1, dq,
                                    CUDA_R_64F, work, dw[MP_STEDC], hwork,
                                    hw[MP_STEDC], info);
            break;
          default:
            cs = mp.cusolverMpOrmtr(h, CUBLAS_SIDE_LEFT,
                                    CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, n,
                                    a, 1, 1, da, tau, q, 1, 1, dq, CUDA_R_64F,
                                    work, dw[MP_ORMTR], hwork, hw[MP_ORMTR],
                                    info);
        }
        if (ck_sol(cs, mp_names[step], st) ||
            ck_cuda(cudaEventRecord(e1, s), "record", st) ||
            ck_cuda(cudaStreamSynchronize(s), "sync", st) ||
            ck_info(info, mp_names[step], st) ||
            ck_cuda(cudaEventElapsedTime(&sh->ms[r], e0, e1), "elapsed", st))
          goto timed;
        if (step == MP_SYEVD && r == 0 && it == 1 &&
            ck_cuda(cudaMemcpy(sh->w_syevd, w, (size_t)n * 8,
                               cudaMemcpyDeviceToHost),
                    "download w", st))
          goto timed;
        if (step == MP_SYTRD && it == 1 &&
            (ck_cuda(cudaMemcpy(sh->hd[r], d, (size_t)lc * 8,
                                cudaMemcpyDeviceToHost),
                     "download d", st) ||
             ck_cuda(cudaMemcpy(sh->he[r], e, (size_t)lc * 8,
                                cudaMemcpyDeviceToHost),
                     "download e", st)))
          goto timed;
      timed:
        if (it == 0) {
          /* The warm-up's failure is reported; its time is not. */
          pthread_barrier_wait(&sh->bar);
          if (r == 0) {
            sh->go = 1;
            for (int i = 0; i < R; ++i)
              if (!ok(sh->st[i])) {
                char part[48];
                snprintf(part, sizeof part, "%s_warmup", mp_names[step]);
                row(part, n, R, nb, -1, sh->st[i], "");
                sh->go = 0;
                break;
              }
          }
          pthread_barrier_wait(&sh->bar);
          if (!sh->go) break;
          continue;
        }
        char extra[96] = "";
        if (step == MP_SYTRD) {
          /* Sytrd's d and e (column blocks of the 1 x R grid) into T. */
          pthread_barrier_wait(&sh->bar);
          if (r == 0) {
            for (int64_t j = 0; j * nb < n; ++j) {
              const int owner = (int)(j % R);
              const int64_t off = (j / R) * nb, len = n - j * nb < nb ? n - j * nb : nb;
              memcpy(sh->gd + j * nb, sh->hd[owner] + off, (size_t)len * 8);
              memcpy(sh->ge + j * nb, sh->he[owner] + off, (size_t)len * 8);
            }
            sh->ge[n - 1] = 0;
          }
        }
        if (step == MP_STEDC && r == 0) {
          /* Stedc's eigenvalues against Syevd's (same A). */
          double *hD = malloc((size_t)n * 8), diff = 0, big = 0;
          if (hD && cudaMemcpy(hD, D, (size_t)n * 8, cudaMemcpyDeviceToHost) ==
                        cudaSuccess) {
            for (int64_t i = 0; i < n; ++i) {
              if (fabs(hD[i] - sh->w_syevd[i]) > diff)
                diff = fabs(hD[i] - sh->w_syevd[i]);
              if (fabs(sh->w_syevd[i]) > big) big = fabs(sh->w_syevd[i]);
            }
            if (big > 0)
              snprintf(extra, sizeof extra,
                       "max |w_stedc - w_syevd| / max |w| = %.1e", diff / big);
          }
          free(hD);
        }
        mp_report(sh, r, mp_names[step], n, extra[0] ? extra : NULL);
      }
      if (!sh->go && step == MP_SYTRD) break; /* the rest needs T */
    }
  free_n:
    if (da) mp.cusolverMpDestroyMatrixDesc(da);
    if (dq) mp.cusolverMpDestroyMatrixDesc(dq);
    cudaFree(a0), cudaFree(a), cudaFree(q), cudaFree(w), cudaFree(d);
    cudaFree(e), cudaFree(tau), cudaFree(D), cudaFree(E), cudaFree(info);
    cudaFree(work);
    free(hwork), free(iwork), free(sh->hd[r]), free(sh->he[r]);
    sh->hd[r] = sh->he[r] = NULL;
  }
  if (grid) mp.cusolverMpDestroyGrid(grid);
  if (h) mp.cusolverMpDestroy(h);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (s) cudaStreamDestroy(s);
  return NULL;
}

static int mp_part(int ranks, int64_t nb, const int64_t *sizes, int nsizes,
                   const char *lib) {
  char st[ST_LEN] = "ok";
  int ndev = 0;
  if (ck_cuda(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount", st)) {
    row("mp_setup", 0, ranks, nb, -1, st, NULL);
    return 1;
  }
  if (ranks < 1 || ranks > MP_MAX_RANKS || ranks > ndev) {
    snprintf(st, ST_LEN, "ranks=%d but %d GPUs", ranks, ndev);
    row("mp_setup", 0, ranks, nb, -1, st, NULL);
    return 1;
  }
  if (mp_load(lib) != 0) {
    row("mp_setup", 0, ranks, nb, -1, "dlopen", lib);
    return 1;
  }
  static mp_shared sh;
  sh.ranks = ranks;
  sh.nb = nb;
  sh.sizes = sizes;
  sh.nsizes = nsizes;
  int64_t nmax = 0;
  for (int i = 0; i < nsizes; ++i) nmax = sizes[i] > nmax ? sizes[i] : nmax;
  sh.gd = calloc((size_t)nmax + 1, 8);
  sh.ge = calloc((size_t)nmax + 1, 8);
  sh.w_syevd = calloc((size_t)nmax + 1, 8);
  int devs[MP_MAX_RANKS];
  for (int i = 0; i < ranks; ++i) devs[i] = i;
  if (sh.gd == NULL || sh.ge == NULL || sh.w_syevd == NULL ||
      ck_nccl(ncclCommInitAll(sh.comms, ranks, devs), "ncclCommInitAll", st) ||
      pthread_barrier_init(&sh.bar, NULL, (unsigned)ranks) != 0) {
    row("mp_setup", 0, ranks, nb, -1, ok(st) ? "host setup" : st, NULL);
    return 1;
  }
  pthread_t th[MP_MAX_RANKS];
  mp_rank me[MP_MAX_RANKS];
  int started = 0;
  for (int i = 0; i < ranks; ++i) {
    me[i].sh = &sh;
    me[i].rank = i;
    if (pthread_create(&th[i], NULL, mp_thread, &me[i]) != 0) {
      /* The others would wait at the barrier for ever: stop here. */
      row("mp_setup", 0, ranks, nb, -1, "pthread_create", NULL);
      _exit(1);
    }
    ++started;
  }
  for (int i = 0; i < started; ++i) pthread_join(th[i], NULL);
  for (int i = 0; i < ranks; ++i) ncclCommDestroy(sh.comms[i]);
  pthread_barrier_destroy(&sh.bar);
  free(sh.gd), free(sh.ge), free(sh.w_syevd);
  return 0;
}

/* ---- the host: LAPACK's band -> tridiagonal ---------------------------- */

/* Fortran: every argument by pointer, then the hidden lengths of the
 * CHARACTER arguments (gfortran's size_t). */
typedef void (*sb2st_fn)(const char *stage1, const char *vect,
                         const char *uplo, const int *n, const int *kd,
                         double *ab, const int *ldab, double *d, double *e,
                         double *hous, const int *lhous, double *work,
                         const int *lwork, int *info, size_t, size_t, size_t);
typedef void (*sterf_fn)(const int *n, double *d, double *e, int *info);
typedef int (*get_int_fn)(void);
typedef void (*set_threads_fn)(int);

static sb2st_fn h_sb2st;
static sterf_fn h_sterf;

/* A random symmetric band matrix, lower band storage (kd + 1) x n. */
static void band_fill(double *ab, int n, int kd) {
  uint64_t s = 2024;
  const size_t len = (size_t)(kd + 1) * (size_t)n;
  for (size_t i = 0; i < len; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    ab[i] = (double)(s >> 11) / 4503599627370496.0 - 1.0;
  }
}

typedef struct sb_run {
  int n, kd;
  char vect;
  double seconds;
  int info;
  char st[ST_LEN];
  double *d, *e; /* T's, when wanted (else scratch) */
} sb_run;

/* One dsytrd_sb2st of a fresh band matrix, timed (the fill is not). */
static void *sb2st_once(void *arg) {
  sb_run *x = arg;
  const int n = x->n, kd = x->kd, ldab = kd + 1;
  double *ab = malloc((size_t)ldab * (size_t)n * 8);
  double *d = x->d ? x->d : malloc((size_t)n * 8);
  double *e = x->e ? x->e : malloc((size_t)n * 8);
  double *hous = NULL, *work = NULL, qh = 0, qw = 0;
  snprintf(x->st, ST_LEN, "ok");
  x->seconds = -1;
  if (ab == NULL || d == NULL || e == NULL) {
    snprintf(x->st, ST_LEN, "malloc");
    goto out;
  }
  band_fill(ab, n, kd);
  const int m1 = -1;
  int info = 0;
  h_sb2st("N", &x->vect, "L", &n, &kd, ab, &ldab, d, e, &qh, &m1, &qw, &m1,
          &info, 1, 1, 1);
  if (info != 0) {
    snprintf(x->st, ST_LEN, "sb2st query:info=%d", info);
    x->info = info;
    goto out;
  }
  const int lhous = (int)qh > 1 ? (int)qh : 1, lwork = (int)qw > 1 ? (int)qw : 1;
  hous = malloc((size_t)lhous * 8);
  work = malloc((size_t)lwork * 8);
  if (hous == NULL || work == NULL) {
    snprintf(x->st, ST_LEN, "malloc hous %d work %d", lhous, lwork);
    goto out;
  }
  const double t0 = now();
  h_sb2st("N", &x->vect, "L", &n, &kd, ab, &ldab, d, e, hous, &lhous, work,
          &lwork, &info, 1, 1, 1);
  x->seconds = now() - t0;
  x->info = info;
  if (info != 0) snprintf(x->st, ST_LEN, "sb2st:info=%d", info);
out:
  free(ab), free(hous), free(work);
  if (x->d == NULL) free(d);
  if (x->e == NULL) free(e);
  return NULL;
}

/* *out = dlsym(lib, prefix + name), as a function pointer. */
static void *host_sym(void *lib, const char *prefix, const char *name,
                      void *out) {
  char sym[96];
  snprintf(sym, sizeof sym, "%s%s", prefix, name);
  void *p = dlsym(lib, sym);
  memcpy(out, &p, sizeof p);
  return p;
}

/* T copies of sb2st at once (n, kd 64), one a thread, BLAS on one thread
 * each: the throughput a parallel bulge chase could at best reach. coef:
 * seconds per n^2 kd of one copy. */
static void host_concurrent(int n, double coef, double left, long cpus) {
  const int T = cpus > 1 ? (int)(cpus > 64 ? 64 : cpus) : 1, kd = 64;
  if (T < 2) return;
  char part[32];
  snprintf(part, sizeof part, "host_sb2st_N_x%d", T);
  /* Guess: twice one copy's time (memory contention). */
  const double pred = 2 * coef * (double)n * n * kd;
  if (coef <= 0 || pred > left) {
    char why[96];
    snprintf(why, sizeof why, "skipped: predicted %.1f s, %.1f s left", pred,
             left);
    row(part, n, T, kd, -1, "skipped", why);
    return;
  }
  sb_run *xs = calloc((size_t)T, sizeof *xs);
  pthread_t *th = calloc((size_t)T, sizeof *th);
  int started = 0;
  const double t0 = now();
  if (xs && th)
    for (; started < T; ++started) {
      xs[started] = (sb_run){.n = n, .kd = kd, .vect = 'N'};
      if (pthread_create(&th[started], NULL, sb2st_once, &xs[started]) != 0)
        break;
    }
  for (int k = 0; k < started; ++k) pthread_join(th[k], NULL);
  const double wall = now() - t0;
  char st[ST_LEN] = "ok";
  double worst = 0, best = 1e300;
  for (int k = 0; k < started; ++k) {
    if (!ok(xs[k].st) && ok(st)) snprintf(st, ST_LEN, "%s", xs[k].st);
    if (xs[k].seconds > worst) worst = xs[k].seconds;
    if (xs[k].seconds < best) best = xs[k].seconds;
  }
  if (started < T) snprintf(st, ST_LEN, "pthread_create:%d of %d", started, T);
  char nt[768];
  snprintf(nt, sizeof nt,
           "%d copies at once; each %.3f..%.3f s; wall incl. fill %.3f s",
           started, best, worst, wall);
  row(part, n, T, kd, started > 0 ? worst : -1, st, nt);
  free(xs), free(th);
}

static int host_part(const char *libpath, const char *prefix,
                     const int64_t *sizes, int nsizes, const int64_t *bands,
                     int nbands, double budget) {
  const double start = now();
  void *lib = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    row("host_setup", 0, 0, 0, -1, "dlopen", dlerror());
    return 1;
  }
  void *unused;
  host_sym(lib, prefix, "dsytrd_sb2st_", &h_sb2st);
  host_sym(lib, prefix, "dsterf_", &h_sterf);
  const int has_sy2sb = host_sym(lib, prefix, "dsytrd_sy2sb_", &unused) != NULL;
  /* Threads: OpenBLAS's (scipy_openblas_* in SciPy's copy), OpenMP's. */
  get_int_fn nthreads = NULL, parallel = NULL, omp = NULL;
  set_threads_fn set_threads = NULL;
  const char *ob =
      strncmp(prefix, "scipy_", 6) == 0 ? "scipy_openblas" : "openblas";
  host_sym(lib, ob, "_get_num_threads", &nthreads);
  host_sym(lib, ob, "_get_parallel", &parallel);
  host_sym(lib, ob, "_set_num_threads", &set_threads);
  host_sym(lib, "", "omp_get_max_threads", &omp);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const int blas_threads = nthreads ? nthreads() : -1;
  const int omp_threads = omp ? omp() : -1;
  printf("# host: %s (prefix '%s'), %ld CPUs online; dsytrd_sb2st %s, "
         "dsytrd_sy2sb %s, dsterf %s; OpenBLAS threads %d, parallel %d (0 "
         "none, 1 pthreads, 2 OpenMP; -1 not OpenBLAS); OpenMP max threads "
         "%d (-1: no OpenMP in the library: sb2st's OpenMP tasks compiled "
         "out, it runs on one thread)\n",
         libpath, prefix, cpus, h_sb2st ? "found" : "MISSING",
         has_sy2sb ? "found" : "MISSING", h_sterf ? "found" : "MISSING",
         blas_threads, parallel ? parallel() : -1, omp_threads);
  fflush(stdout);
  if (h_sb2st == NULL || h_sterf == NULL) return 1;
  /* sb2st's BLAS calls are on blocks of kd: OpenBLAS's threads there only
   * cost (10x at n = 2048, kd = 128 on 2 CPUs); one thread, but for one
   * run below with the library's default. */
  if (set_threads) set_threads(1);
  char note[128];
  snprintf(note, sizeof note, "blas threads %d; omp threads %d",
           nthreads ? nthreads() : -1, omp_threads);
  /* Seconds per n^2 kd, from the last run of each vect (sizes and bands
   * run in the order given: list them ascending). */
  double coef[2] = {0, 0};
  int no_vect = 0;
  for (int i = 0; i < nsizes; ++i) {
    const int n = (int)sizes[i];
    double *d = malloc((size_t)n * 8), *e = malloc((size_t)n * 8);
    int have_t = 0;
    for (int b = 0; b < nbands && d && e; ++b) {
      for (int v = 0; v < 2; ++v) {
        const int kd = (int)bands[b];
        if (v == 1 && no_vect) continue;
        char part[32];
        snprintf(part, sizeof part, "host_sb2st_%c", v ? 'V' : 'N');
        const double pred = coef[v] * (double)n * n * kd;
        const double left = budget - (now() - start);
        if (pred > left) {
          char why[96];
          snprintf(why, sizeof why, "skipped: predicted %.1f s, %.1f s left",
                   pred, left);
          row(part, n, 1, kd, -1, "skipped", why);
          continue;
        }
        sb_run x = {.n = n, .kd = kd, .vect = v ? 'V' : 'N', .d = d, .e = e};
        sb2st_once(&x);
        if (ok(x.st)) {
          coef[v] = x.seconds / ((double)n * n * kd);
          have_t = 1;
        }
        if (v == 1 && x.info == -2) {
          /* Reference LAPACK (3.7 on) checks VECT = 'N' only. */
          no_vect = 1;
          row(part, n, 1, kd, -1, x.st,
              "VECT='V' refused by this LAPACK: no Householder vectors of "
              "stage 2; not tried again");
          continue;
        }
        row(part, n, 1, kd, x.seconds, x.st, note);
      }
    }
    if (have_t) {
      /* dsterf on the last T sb2st made. */
      int info = 0;
      const double t0 = now();
      h_sterf(&n, d, e, &info);
      const double t = now() - t0;
      char st[ST_LEN] = "ok";
      if (info != 0) snprintf(st, ST_LEN, "dsterf:info=%d", info);
      row("host_sterf", n, 1, 0, t, st, "LAPACK dsterf (serial)");
    } else {
      row("host_sterf", n, 1, 0, -1, d && e ? "skipped" : "malloc",
          "no T from sb2st");
    }
    free(d), free(e);
    host_concurrent(n, coef[0], budget - (now() - start), cpus);
  }
  /* Once with the library's default BLAS threads, last (it may take
   * long: 126 s against 2.0 s at n = 4096, kd = 128 on 2 CPUs), at n = 1024
   * and the widest band, abandoned after 15 s (the process then exits). */
  if (set_threads && blas_threads > 1 && nbands > 0) {
    const int kd = (int)bands[nbands - 1];
    char part[48], nt[128];
    snprintf(part, sizeof part, "host_sb2st_N_blas%d", blas_threads);
    set_threads(blas_threads);
    sb_run x = {.n = 1024, .kd = kd, .vect = 'N'};
    pthread_t th;
    if (pthread_create(&th, NULL, sb2st_once, &x) != 0) {
      row(part, 1024, 1, kd, -1, "pthread_create", NULL);
    } else {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_sec += 15;
      if (pthread_timedjoin_np(th, NULL, &until) != 0) {
        row(part, 1024, 1, kd, -1, "timeout",
            "over 15 s with the default BLAS threads; abandoned");
        return 0;
      }
      snprintf(nt, sizeof nt, "blas threads %d (the default)", blas_threads);
      row(part, 1024, 1, kd, x.seconds, x.st, nt);
    }
    set_threads(1);
  }
  return 0;
}

int main(int argc, char **argv) {
  int64_t sizes[16], bands[16];
  printf("part,n,ranks,nb,seconds,status,note\n");
  if (argc >= 3 && strcmp(argv[1], "dn") == 0) {
    const int k = parse_list(argv[2], sizes, 16);
    for (int i = 0; i < k; ++i) dn_part(sizes[i]);
    return 0;
  }
  if (argc >= 6 && strcmp(argv[1], "mp") == 0) {
    const int k = parse_list(argv[4], sizes, 16);
    return mp_part(atoi(argv[2]), atoll(argv[3]), sizes, k, argv[5]);
  }
  if (argc >= 7 && strcmp(argv[1], "host") == 0) {
    const int k = parse_list(argv[4], sizes, 16);
    const int nb = parse_list(argv[5], bands, 16);
    return host_part(argv[2], argv[3], sizes, k, bands, nb, atof(argv[6]));
  }
  fprintf(stderr,
          "usage: %s dn SIZES | mp RANKS NB SIZES LIBCUSOLVERMP | host "
          "LAPACK_LIB PREFIX SIZES BANDS BUDGET_S\n",
          argv[0]);
  return 2;
}
