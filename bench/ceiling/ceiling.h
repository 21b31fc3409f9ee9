/* The engine's ceiling: cuSOLVERMg driven directly, on data generated in its
 * own 1-D block-cyclic layout on every GPU. No JAX, no redistribution; the
 * program owns its memory (cudaMalloc). What jaxmg's time exceeds this by is
 * the cost of the integration.
 *
 * Files: check.c (return-code checks: every CUDA, cuBLAS, cuRAND and
 * cuSOLVER call goes through them), context.c (handles, grid, peer access),
 * dist.c (distributed matrices: allocation, random Hermitian positive
 * definite fill, mirror of the lower triangle, matrix-vector products for
 * the checks), ops.c (each op's call sequence, as jaxmg's engine makes it,
 * and its check), main.c (command line, timing, CSV). */
#ifndef JAXMG_BENCH_CEILING_H
#define JAXMG_BENCH_CEILING_H

/* cuSOLVERMg is marked deprecated in CUDA 13 but ships and works; it is what
 * jaxmg's engine calls (csrc/engine/cusolvermg/ does the same). */
#define DISABLE_CUSOLVERMG_DEPRECATED
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>
#include <cusolverMg.h>
#include <stddef.h>
#include <stdint.h>

/* cuSOLVERMg drives at most 16 GPUs. */
#define CEIL_MAX_DEVICES 16

/* ---- element types -------------------------------------------------------*/

typedef enum { DT_F32, DT_F64, DT_C64, DT_C128 } dtype_t;

typedef struct dtype_info {
  const char *name; /* as NumPy spells it */
  size_t size;      /* bytes per element */
  int complex;      /* 1 for complex types */
  cudaDataType type, real_type;
  double eps; /* unit roundoff of the real type, times 2 (LAPACK's eps) */
} dtype_info;

const dtype_info *dtype_of(dtype_t t);
/* 0 and *out set when s names a type, else -1. */
int dtype_parse(const char *s, dtype_t *out);

/* ---- return-code checks --------------------------------------------------
 * Each prints "ceiling: <call> failed: <reason>" on stderr and returns -1 on
 * failure, 0 on success; the macros pass the call's text as its name. */

int check_cuda(cudaError_t rc, const char *call);
int check_solver(cusolverStatus_t rc, const char *call);
int check_blas(cublasStatus_t rc, const char *call);
int check_rand(curandStatus_t rc, const char *call);
#define CUDA(call) check_cuda((call), #call)
#define SOLVER(call) check_solver((call), #call)
#define BLAS(call) check_blas((call), #call)
#define RAND(call) check_rand((call), #call)

/* ---- the device set ------------------------------------------------------*/

typedef struct ctx_t {
  int ndev;
  int dev[CEIL_MAX_DEVICES]; /* CUDA ordinals 0 .. ndev-1 */
  cusolverMgHandle_t mg;
  cudaLibMgGrid_t grid; /* 1 x ndev, column major, as jaxmg's engine */
  cublasHandle_t blas[CEIL_MAX_DEVICES];
  curandGenerator_t rng[CEIL_MAX_DEVICES];
} ctx_t;

int ctx_init(ctx_t *c, int ndev, unsigned long long seed);
void ctx_destroy(ctx_t *c);
/* Waits for every device, last to first, leaving the grid's first current
 * (jaxmg's engine does the same after every cuSOLVERMg call). */
int sync_all(const ctx_t *c);

/* ---- distributed matrices ------------------------------------------------
 * An n x n matrix, column-major, split into column tiles of `tile` columns.
 * CYCLIC: tile t on device t % ndev as its local tile t / ndev (cuSOLVERMg's
 * 1-D block-cyclic layout). CONTIG: device d holds columns d*cols ..
 * (d+1)*cols - 1 (the layout jaxmg's potri leaves its inverse in). Every
 * device holds `cols` = n / ndev columns with leading dimension n. */

typedef enum { LAYOUT_CYCLIC, LAYOUT_CONTIG } layout_t;

typedef struct dmat_t {
  dtype_t dt;
  int64_t n, tile, cols;
  void *p[CEIL_MAX_DEVICES];
} dmat_t;

size_t dmat_bytes(const dmat_t *m); /* per device */
int dmat_alloc(const ctx_t *c, dmat_t *m, dtype_t dt, int64_t n, int64_t tile);
void dmat_free(const ctx_t *c, dmat_t *m);
/* dst = src, device by device (same shape). */
int dmat_copy(const ctx_t *c, dmat_t *dst, const dmat_t *src);
/* The global column of device d's local column lc. */
int64_t dmat_global_col(const dmat_t *m, int ndev, layout_t layout, int d,
                        int64_t lc);
/* Fills m (CYCLIC) with a random Hermitian positive definite matrix: normal
 * entries (real and imaginary parts N(0, 1)) below the diagonal, mirrored
 * above, and `shift` on the diagonal. The off-diagonal part's spectrum lies
 * in about [-2 sqrt(v n), 2 sqrt(v n)] (v = E|a_ij|^2, semicircle law); the
 * shift 3 sqrt(v n) makes the eigenvalues about sqrt(v n) .. 5 sqrt(v n): a
 * condition number of about 5. */
int dmat_random_hpd(ctx_t *c, dmat_t *m, double *shift);
/* Makes a CYCLIC matrix Hermitian from its lower triangle (diagonal kept). */
int dmat_mirror_lower(const ctx_t *c, dmat_t *m);
/* y = op(M) x on host vectors of doubles (complex: re, im pairs), computed on
 * the devices in M's type: op is M itself, or its conjugate transpose when
 * conj_trans. */
int dmat_gemv(const ctx_t *c, const dmat_t *m, layout_t layout, int conj_trans,
              const double *x, double *y);

/* ---- host vectors (doubles; complex as re, im pairs) ---------------------*/

/* Uniform in [-1, 1), from a per-program xorshift generator. */
void host_random(double *v, size_t count, uint64_t *state);
double host_norm(const double *v, size_t count);
double host_diff_norm(const double *a, const double *b, size_t count);
/* Typed device data <-> doubles (count elements of dt). */
int host_to_device(dtype_t dt, const double *h, size_t count, void *dev);
int device_to_host(dtype_t dt, const void *dev, size_t count, double *h);

/* ---- ops -------------------------------------------------------------------
 * One case: setup once (allocation, the matrix, descriptors, workspaces);
 * then, for every run, prepare (untimed: restore the inputs the op
 * overwrites) and run (timed); check the last run's result. */

typedef enum { OP_POTRS, OP_POTRI, OP_POTRI_MG, OP_SYEVD } op_t;

typedef struct op_case {
  op_t op;
  dtype_t dt;
  int64_t n, tile, nrhs;
  ctx_t *ctx;
  dmat_t a, a0; /* a: the op's operand; a0: the untouched matrix */
  double shift; /* the diagonal of a0 */
  cudaLibMgMatrixDesc_t desc_a, desc_b, desc_b_rest;
  int64_t chunk, rest; /* right-hand sides per potrs call, the last call's */
  int64_t lwork;       /* elements of dt on every device */
  void *work[CEIL_MAX_DEVICES];
  void *b[CEIL_MAX_DEVICES]; /* potrs: n x nrhs on every device */
  void *x[CEIL_MAX_DEVICES]; /* potri: one shard per device */
  void *ones;                /* potri: r ones of dt, host */
  double *b0, *xtrue;        /* potrs: host right-hand sides, solution */
  void *w;                   /* syevd: eigenvalues, host, real type */
  uint64_t host_rng;         /* state of host_random, seeded by the caller */
} op_case;

int op_parse(const char *s, op_t *out);
const char *op_name(op_t op);
int op_setup(op_case *k);
int op_prepare(op_case *k);
int op_run(op_case *k);
/* The relative error of the last run's result (see ops.c for each op's
 * measure); NaN or inf when it is not finite. */
int op_check(op_case *k, double *residual);
void op_free(op_case *k);

#endif
