/* potrs and lu_solve in mixed precision on one GPU (engine.h's potrs_mixed
 * and lu_solve_mixed; the refinement is engine/refine.h's: classical, then
 * GMRES-IR where it stalls). On H100 and H200 float32 (without tensor
 * cores) runs no faster than float64 on its tensor cores, so the speed has
 * to come from TF32 tensor cores (10 bits of mantissa, u = 2^-11): at
 * that precision classical refinement stalls past a condition number of
 * about 10^3 and GMRES-IR carries it further. Three routes, chosen here:
 *
 *   - lu_solve with one right-hand side: cuSOLVER's own IRS
 *     solver, cusolverDnIRSXgesv, main precision float64 (complex128),
 *     lowest TF32 (CUSOLVER_R_TF32 / CUSOLVER_C_TF32), GMRES refinement
 *     (CUSOLVER_IRS_REFINE_GMRES, what NVIDIA's documentation finds best).
 *     Chosen over a TF32 LU of jaxmg's own because it is NVIDIA's tuned
 *     TF32 LU (panel, pivoting, trailing updates on the tensor cores) with
 *     GMRES-IR and the fallback built in, in about 100 lines here, where an
 *     own blocked LU (cusolverDnSgetrf panels, laswp, trsm and a TF32 gemm
 *     per panel) would be several hundred lines, slower on its panels, and
 *     a second LU to keep right. Its limits: it solves M x = b only, where
 *     the engine holds M = A^T for a row-major A (ops/lu_solve.c: a user's
 *     A x = b is the engine's transposed solve), so the buffer is first
 *     transposed in place (cuda/convert.h, one pass over A, which the call
 *     owns: the exact path overwrites it with its LU too); its GMRES
 *     refinement takes one right-hand side (more go to the float32 route);
 *     and it leaves A undefined where it did not converge (cuSOLVER's
 *     documentation), so the fallback is its own
 *     (cusolverDnIRSParamsEnableFallback: A factored in float64 in place,
 *     x solved from it; the exact path's algorithm, not its very bytes).
 *     Where it reports convergence, the backward error is measured here
 *     (one gemm and norms against the intact A) and must meet refine.h's
 *     sqrt(n) u, else jaxmg's own fallback runs the exact routine.
 *   - potrs: jaxmg's blocked right-looking Cholesky of A's float32
 *     (complex64) copy, lower: the diagonal blocks by cusolverDnXpotrf in
 *     float32, the panel below by cublas<t>trsm (since session 19: by the
 *     diagonal block's inverse in one float32 gemm, the inverse kept for
 *     the refinement's solves, tf32_potrf.h; JAXMG_TF32_TRSM=1 for the
 *     trsm) and the trailing update by
 *     cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 (complex64 too: TF32
 *     applies to CUDA_C_32F; cgemm in TF32 math mode where a cuBLAS lacks
 *     it), the handle in CUBLAS_TF32_TENSOR_OP_MATH for the trsm; cuSOLVER has no IRS for Cholesky. Blocks of 512 columns
 *     (1024 from N = 16384 on); the update column chunk 2 blocks wide (a
 *     square chunk's upper part is computed and not read: fewer, larger
 *     gemms; JAXMG_TF32_NB sets the block, to tune it). A matrix of one
 *     block is cuSOLVER's float32 potrf alone. With JAXMG_TRACE its three
 *     parts are timed by CUDA events (" (nb 1024: diagonal potrf 9.1 ms,
 *     trsm 3.0 ms, tf32 update 6.2 ms)" after the factorization's name):
 *     the diagonal blocks' potrf runs in float32 without tensor cores and
 *     one after the other (N / nb of them, each latency-bound at these
 *     sizes), the trsm in float32 (n^2 nb / 2 flops, on tensor cores only
 *     where cuBLAS's trsm takes the handle's TF32 math mode), and only the
 *     update (n^3 / 3 flops) surely on the tensor cores; each block waits
 *     for its potrf's info (one synchronization a block). Session 18's
 *     traces (H200, nb 1024: 40 ms at N = 16384, 104 ms at 32768) fit
 *     2.25 ms a block (16 and 32 of them) plus 4 ms x (N / 16384)^3: the
 *     TF32 flops take about 4 ms at 16384 (about 370 TFLOP/s), the rest is
 *     a fixed cost a block, cuSOLVER's float32 potrf of 1024 columns (its
 *     trsm is 0.2 ms a block at most), latency-bound. Hence the knobs to
 *     measure: JAXMG_TF32_NB (fewer, larger diagonal blocks or more,
 *     smaller ones), JAXMG_TF32_LOOKAHEAD (hides a potrf behind the
 *     previous update: at most the update's 4 ms at 16384, more at 32768),
 *     and JAXMG_MIXED_LOW=bf16x9 (cuSOLVER's own whole-matrix potrf, whose
 *     float64 one takes 39 ms at 16384, in FP32 emulated on BF16 tensor
 *     cores).
 *     Where the factorization fails (A not positive definite to TF32's
 *     precision: a condition number past about 10^3), it runs once more
 *     on A + 8 u_TF32 diag(A) (refine.h, JMG_REFINE_SHIFT), the
 *     preconditioner of GMRES-IR then.
 *   - lu_solve with several right-hand sides: cusolverDnXgetrf in float32
 *     (complex64), no tensor cores.
 * Failing fast (issue 39: a matrix past TF32's reach must cost little more
 * than the exact path): the refinement runs under a step budget
 * (DN_STEPS_DIVISOR; refine.h's max_steps: classical refinement gives up
 * where its contraction predicts too many corrections, GMRES-IR gets what
 * is left and gives up where its residual's reduction predicts more); a
 * TF32 Cholesky that fails is not factored again shifted unless GMRES-IR
 * has DN_SHIFT_MIN_INNER steps of budget (JAXMG_GMRES_MAX_INNER may give
 * them), so that the exact path runs at once; cusolverDnIRSXgesv's
 * iterations are bounded (DN_IRS_FLOOR) before its own fallback. The
 * trace says which rule ended it.
 * JAXMG_MIXED_LOW=float32 sends both ops to cuSOLVER's float32 routines
 * (Xpotrf, Xgetrf), to compare; JAXMG_MIXED_LOW=bf16x9 too, with
 * cuSOLVER's FP32 emulation on BF16 tensor cores (CUDA 13). For the last two routes the solves with
 * the factor are cusolverDnXpotrs / Xgetrs in the lower precision (the
 * conversions cuda/convert.h's kernels; with one right-hand side on the
 * Cholesky routes, gemv over the factor's blocks, tri_solve.h), the
 * residual b - A x in A's dtype by cuBLAS (symv/hemv or gemv for one
 * column, symm/hemm or gemm for several) against A, which stays intact,
 * the column norms by nrm2 brought to the host once a residual (a
 * refinement step's one synchronization); GMRES-IR's Arnoldi
 * steps by gemm (classical Gram-Schmidt twice) and nrm2/scal, its basis in
 * the workspace. Where refinement does not converge, b is restored and the
 * exact routine (potrs.c, lu_solve.c) runs on A after this call's
 * workspace went back.
 *
 * The workspace, one allocation from XLA's allocator: IRS [its workspace
 * (cusolverDnIRSXgesv_bufferSize: the TF32 copy of A, GMRES's vectors) | b
 * kept | the residual | 2 nrhs norms]; the others [A's lower copy | the
 * lower factorization's workspace | its pivots (LU) | b kept | the
 * residual | a lower-precision right-hand side | 2 nrhs norms | GMRES-IR's
 * basis (JMG_GMRES_RESTART + 1 vectors of n) | its coefficients]. The
 * info words: 0 the lower factorization's, 1
 * the lower solves', 2 a scratch overflow flag, 3 A's overflow flag.
 * float32 and complex64 inputs run the exact routine. Written against the
 * CUDA call frame; compiled, not yet run on a GPU. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/trace.h"
#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/convert.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"
#include "engine/cusolverdn/tf32_potrf.h"
#include "engine/cusolverdn/tri_solve.h"
#include "engine/refine.h"

typedef enum {
  ROUTE_IRS,           /* cusolverDnIRSXgesv, TF32 */
  ROUTE_TF32_CHOLESKY, /* jaxmg's blocked Cholesky on TF32 tensor cores */
  ROUTE_FLOAT32        /* cusolverDnXgetrf / Xpotrf in float32 */
} mixed_route;

/* The TF32 Cholesky's block (columns); its trailing chunk (blocks) is
 * tf32_potrf.c's TF32_CHUNK_BLOCKS. */
#define TF32_NB_SMALL 512
#define TF32_NB_LARGE 1024
#define TF32_NB_LARGE_FROM 16384

/* GMRES-IR's Arnoldi steps in all (refine.h's max_inner): each is a
 * product with A in float64 and a triangular solve pair in float32, one
 * read of A and one of its factor. */
#define DN_GMRES_MAX_INNER 60

/* Fail fast (refine.h's max_steps): a refinement step (a correction or an
 * Arnoldi step) cost about 5 ms at N = 16384 on an H200 (float64, one
 * right-hand side: 4 corrections 22 ms) against 39 ms for the exact
 * potrf+potrs, so about N / 2048 steps cost one exact factorization (its
 * n^3 against a step's n^2). The loop may spend half of that,
 * max(1, N / DN_STEPS_DIVISOR), past classical refinement's floor of
 * JMG_REFINE_FLOOR corrections; JAXMG_REFINE_MAX_STEPS sets it (0: no
 * bound). Measured with a TF32 factor: kappa 1e2 converges in 4
 * corrections; kappa 1e6 needed the shift and more than 60 Arnoldi steps
 * (GMRES-IR gave up, 250-394 ms before the 39 ms fallback). */
#define DN_STEPS_DIVISOR 4096

/* A TF32 Cholesky that fails (A not positive definite to TF32) is factored
 * again with its diagonal shifted only where GMRES-IR has at least this
 * many Arnoldi steps of budget: the shifted factor is a weak
 * preconditioner (an emulated TF32 Cholesky, N = 1024 and 2048: kappa
 * 1e6 took 240 Arnoldi steps, 1e12 did not converge in 300), so that
 * otherwise the exact path runs at once, after the failed factorization
 * only. */
#define DN_SHIFT_MIN_INNER 30

/* cusolverDnIRSXgesv's refinement iterations (its default is 50, each a
 * product with A and a TF32 LU solve): max(DN_IRS_FLOOR, N /
 * DN_IRS_DIVISOR); JAXMG_REFINE_MAX_STEPS sets it (0: cuSOLVER's
 * default). On an H200 (session 18) kappa 1e2 converged in 16 iterations
 * at N = 16384 (135 ms in all: its TF32 LU about 87 ms, an iteration about
 * 3 ms) and 21 at N = 32768 (463 ms: the LU about 340 ms, an iteration
 * about 6 ms); kappa 1e6 and 1e12 ran all 50 before its fallback (377 ms
 * against 141 for the exact getrf+getrs at 16384, 1.35 s against 0.72 s
 * at 32768). 30 keeps 1e2's margin at both sizes and saves 20 iterations
 * of the hopeless case (about 317 ms at 16384); growing with N (whose
 * iterations grow slowly with it) it stays about a quarter of the exact
 * factorization, whose cost grows as N^3 against an iteration's N^2. */
#define DN_IRS_FLOOR 30
#define DN_IRS_DIVISOR 1024

/* The block of the Cholesky routes' triangular solves with one right-hand
 * side (tri_solve.h; JAXMG_REFINE_NB sets it, "0" sends them back to
 * cusolverDnXpotrs): the TF32 Cholesky's own block where it inverted its
 * diagonal blocks (tf32_potrf.h: 1024 from N = 16384, 62 gemv a step
 * there), else DN_SOLVE_NB. Each block costs 4 gemv launches a solve pair
 * (some microseconds each, latency) and its inversion nb^2 columns of trsm
 * once a call: 512 makes 32 blocks at N = 16384 (126 gemv a step, the
 * inverses 32 MiB). Not yet tuned on a GPU. */
#define DN_SOLVE_NB 512

typedef struct mixed_layout {
  size_t f_at, factor_at, factor_bytes, piv_at, kept_at, r_at, w_at, norms_at,
      v_at, hd_at, irs_at, irs_bytes, inv_at, y_at, panel_at;
} mixed_layout;

/* Where a refinement's time goes (JAXMG_TRACE only, by CUDA events read at
 * each residual's synchronization): the corrections' solves with the
 * factor (narrow, solve, widen) and the residuals' products with A. */
typedef struct step_timer {
  cudaEvent_t ev[4]; /* solve begin, end; product begin, end */
  int solve_pending; /* ev[0..1] recorded since the last read */
  double solve_ms, product_ms;
  int solves, products;
} step_timer;

/* One call's state, the refinement steps' context. */
typedef struct gpu_refine {
  jmg_dn_call call;
  mixed_layout l;
  jmg_dtype dtype, low;
  int lu, transpose;
  int emulate; /* the float32 factorization in BF16x9 emulation */
  mixed_route route;
  int64_t n, k, nb;
  /* The TF32 Cholesky's parts (JAXMG_TRACE only, by CUDA events): its
   * diagonal blocks' potrf, its panels' trsm, its trailing updates, ms. */
  double t_diag, t_trsm, t_update;
  /* The Cholesky routes' blocked solves of one column (tri_solve.h): the
   * block (0: cusolverDnXpotrs), their state once the inverses are made
   * (tri.inv non-NULL), and how the residual is formed (JAXMG_REFINE_
   * RESIDUAL: 0 symv, 1 symm, 2 gemv). */
  int64_t snb;
  jmg_dn_tri tri;
  int residual;
  /* The TF32 Cholesky's panels by its inverted diagonal blocks
   * (tf32_potrf.h; JAXMG_TF32_TRSM=1: by trsm), and whether the last
   * factorization left every block's inverse (of g->nb) in the inverses'
   * part. */
  int inverse_panels, factor_inverted;
  void *ones; /* host: max(nb, snb) elements of the low dtype */
  step_timer timer;
  void *b;       /* the caller's b: x */
  double *hnorm; /* 3 k on the host */
  double *hh;    /* 2 (JMG_GMRES_RESTART + 1) elements of A's dtype, host */
} gpu_refine;

static void *part(const gpu_refine *g, size_t at) {
  return jmg_cuda_call_part(&g->call.cuda, at);
}

/* JAXMG_MIXED_LOW=float32 (1) or bf16x9 (2): cuSOLVER's float32
 * routines, the second in cuSOLVER's FP32 emulation on BF16 tensor cores
 * (cusolverDnSetMathMode CUSOLVER_FP32_EMULATED_BF16X9_MATH, strategy
 * EAGER; CUDA 13): float32's accuracy (classical refinement to a
 * condition number of about 10^7) at tensor cores' speed where cuSOLVER
 * has them; to measure against TF32. 0: neither. */
static int float32_forced(void) {
  jmg_config c;
  jmg_config_read(&c);
  return c.mixed_bf16x9 ? 2 : c.mixed_float32;
}

/* The route of a call (the transpose does not change it: IRS solves a
 * transposed system after transposing A in place). */
static mixed_route choose_route(int lu, int64_t n, int64_t k) {
  if (float32_forced()) return ROUTE_FLOAT32;
  if (!lu) return ROUTE_TF32_CHOLESKY;
  if (k == 1 && n <= INT_MAX && n <= 65535 * 32) return ROUTE_IRS;
  return ROUTE_FLOAT32;
}

/* The TF32 Cholesky's block: JAXMG_TF32_NB where it is a number from 64
 * to 8192 (to tune it on a GPU), else by N. */
static int64_t tf32_block(int64_t n) {
  jmg_config c;
  jmg_config_read(&c);
  if (c.tf32_nb > 0) return c.tf32_nb;
  return n >= TF32_NB_LARGE_FROM ? TF32_NB_LARGE : TF32_NB_SMALL;
}

/* JAXMG_TF32_LOOKAHEAD=1: jmg_dn_tf32_potrf_lookahead, to measure. */
static int tf32_lookahead(void) {
  jmg_config c;
  jmg_config_read(&c);
  return c.tf32_lookahead;
}

/* The step budget of an N (see DN_STEPS_DIVISOR). */
static int dn_max_steps(int64_t n) {
  const int64_t b = n / DN_STEPS_DIVISOR;
  return b < 1 ? 1 : (b > 100000 ? 100000 : (int)b);
}

/* The blocked solves' block for this call (0: cusolverDnXpotrs): the
 * Cholesky routes with one right-hand side, JAXMG_REFINE_NB over
 * DN_SOLVE_NB, at most n. */
static int64_t solve_block(const gpu_refine *g) {
  jmg_config c;
  jmg_config_read(&c);
  if (g->lu || g->route == ROUTE_IRS || g->k != 1 || g->n < 1) return 0;
  const int64_t nb = c.refine_nb >= 0    ? c.refine_nb
                     : g->inverse_panels ? g->nb
                                         : DN_SOLVE_NB;
  return nb < g->n ? nb : g->n;
}

static void set_route(gpu_refine *g, mixed_route route) {
  jmg_config c;
  jmg_config_read(&c);
  g->route = route;
  g->emulate = route == ROUTE_FLOAT32 && float32_forced() == 2;
  g->nb = tf32_block(g->n);
  if (g->nb > g->n) g->nb = g->n > 0 ? g->n : 1;
  g->inverse_panels = route == ROUTE_TF32_CHOLESKY && !tf32_lookahead() &&
                      !c.tf32_trsm && g->n > 0;
  g->snb = solve_block(g);
  g->residual = c.refine_residual;
}

/* The factorization's name in the trace: "potrf tf32", "getrf float32". */
static const char *low_name(const gpu_refine *g) {
  if (g->route == ROUTE_IRS) return "tf32 (cusolverDnIRSXgesv gmres)";
  if (g->route == ROUTE_TF32_CHOLESKY && g->nb < g->n) return "tf32";
  if (g->emulate)
    return g->low == JMG_C64 ? "complex64 (bf16x9 emulated)"
                             : "float32 (bf16x9 emulated)";
  return jmg_dtype_name(g->low);
}

/* --- cuSOLVER's IRS ------------------------------------------------------ */

typedef struct irs {
  cusolverDnIRSParams_t params;
  cusolverDnIRSInfos_t infos;
} irs;

/* The bound on cusolverDnIRSXgesv's iterations (0: cuSOLVER's default). */
static int irs_max_iters(int64_t n) {
  jmg_config c;
  jmg_config_read(&c);
  if (c.refine_max_steps >= 0) return c.refine_max_steps;
  const int64_t b = n / DN_IRS_DIVISOR;
  return b > DN_IRS_FLOOR ? (b > 100000 ? 100000 : (int)b) : DN_IRS_FLOOR;
}

static int irs_create(const gpu_refine *g, irs *s, int want_infos,
                      jmg_error *err) {
  const char *op = g->call.cuda.op;
  const int cplx = jmg_dtype_is_complex(g->dtype);
  s->params = NULL;
  s->infos = NULL;
  int rc = JMG_CUSOLVER_TRY(cusolverDnIRSParamsCreate(&s->params), op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnIRSParamsSetSolverPrecisions(
            s->params, cplx ? CUSOLVER_C_64F : CUSOLVER_R_64F,
            cplx ? CUSOLVER_C_TF32 : CUSOLVER_R_TF32),
        op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnIRSParamsSetRefinementSolver(
                              s->params, CUSOLVER_IRS_REFINE_GMRES),
                          op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnIRSParamsEnableFallback(s->params), op,
                          err);
  /* Fail fast: its iterations bounded (DN_IRS_FLOOR), then its own
   * fallback, the float64 getrf+getrs on A (as cheap as jaxmg's: the same
   * routines, and A need not be restored). */
  const int iters = irs_max_iters(g->n);
  if (rc == 0 && iters > 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnIRSParamsSetMaxIters(s->params, iters),
                          op, err);
  if (rc == 0 && want_infos)
    rc = JMG_CUSOLVER_TRY(cusolverDnIRSInfosCreate(&s->infos), op, err);
  return rc;
}

/* Destroys what irs_create made; a failure is the error only where rc is
 * 0. */
static int irs_destroy(const gpu_refine *g, irs *s, int rc, jmg_error *err) {
  const char *op = g->call.cuda.op;
  jmg_error ignored;
  if (s->infos != NULL) {
    const int d = JMG_CUSOLVER_TRY(cusolverDnIRSInfosDestroy(s->infos), op,
                                   rc == 0 ? err : &ignored);
    if (rc == 0) rc = d;
  }
  if (s->params != NULL) {
    const int d = JMG_CUSOLVER_TRY(cusolverDnIRSParamsDestroy(s->params), op,
                                   rc == 0 ? err : &ignored);
    if (rc == 0) rc = d;
  }
  s->infos = NULL;
  s->params = NULL;
  return rc;
}

/* --- the workspace ------------------------------------------------------- */

/* The lower factorization's workspace (device and host bytes): the TF32
 * Cholesky's diagonal block's, or the whole float32 factorization's. */
static int factor_workspace(gpu_refine *g, size_t *dev, size_t *host,
                            jmg_error *err) {
  const cudaDataType t = jmg_cuda_data_type(g->low);
  *dev = *host = 0;
  if (g->lu)
    return JMG_CUSOLVER_TRY(
        cusolverDnXgetrf_bufferSize(g->call.dn, g->call.params, g->n, g->n, t,
                                    NULL, g->n, t, dev, host),
        g->call.cuda.op, err);
  const int64_t m = g->route == ROUTE_TF32_CHOLESKY ? g->nb : g->n;
  return JMG_CUSOLVER_TRY(
      cusolverDnXpotrf_bufferSize(g->call.dn, g->call.params,
                                  CUBLAS_FILL_MODE_LOWER, m, t, NULL, g->n, t,
                                  dev, host),
      g->call.cuda.op, err);
}

static int layout(gpu_refine *g, jmg_cuda_work *w, jmg_error *err) {
  mixed_layout *l = &g->l;
  memset(l, 0, sizeof *l);
  const size_t n = (size_t)g->n, k = (size_t)g->k;
  const size_t hi = jmg_dtype_size(g->dtype), lo = jmg_dtype_size(g->low);
  int rc = 0;
  if (g->route == ROUTE_IRS) {
    irs s;
    size_t bytes = 0;
    rc = irs_create(g, &s, 0, err);
    if (rc == 0)
      rc = JMG_CUSOLVER_TRY(
          cusolverDnIRSXgesv_bufferSize(g->call.dn, s.params,
                                        (cusolver_int_t)g->n,
                                        (cusolver_int_t)g->k, &bytes),
          g->call.cuda.op, err);
    rc = irs_destroy(g, &s, rc, err);
    l->irs_at = jmg_cuda_work_part(w, bytes);
    l->irs_bytes = bytes;
    l->kept_at = jmg_cuda_work_part(w, n * k * hi);
    l->r_at = jmg_cuda_work_part(w, n * k * hi);
    l->norms_at = jmg_cuda_work_part(w, 2 * k * sizeof(double));
    return rc;
  }
  size_t dev = 0;
  rc = factor_workspace(g, &dev, &w->host_bytes, err);
  l->f_at = jmg_cuda_work_part(w, n * n * lo);
  l->factor_at = jmg_cuda_work_part(w, dev);
  l->factor_bytes = dev;
  l->piv_at = jmg_cuda_work_part(w, g->lu ? n * sizeof(int64_t) : 0);
  l->kept_at = jmg_cuda_work_part(w, n * k * hi);
  l->r_at = jmg_cuda_work_part(w, n * k * hi);
  l->w_at = jmg_cuda_work_part(w, n * k * lo);
  l->norms_at = jmg_cuda_work_part(w, 2 * k * sizeof(double));
  l->v_at = jmg_cuda_work_part(w, (JMG_GMRES_RESTART + 1) * n * hi);
  l->hd_at = jmg_cuda_work_part(w, 2 * (JMG_GMRES_RESTART + 1) * hi);
  /* The inverses: the factorization's (of nb) and the solves' (of snb),
   * one after the other in one part. */
  const size_t inv_f = g->inverse_panels
                           ? jmg_dn_tri_inv_bytes(g->low, g->n, g->nb)
                           : 0,
               inv_s = g->snb > 0 ? jmg_dn_tri_inv_bytes(g->low, g->n, g->snb)
                                  : 0;
  l->inv_at = jmg_cuda_work_part(w, inv_f > inv_s ? inv_f : inv_s);
  l->y_at =
      jmg_cuda_work_part(w, g->snb > 0 || g->inverse_panels ? n * lo : 0);
  l->panel_at = jmg_cuda_work_part(
      w, g->inverse_panels ? (n - (size_t)g->nb) * (size_t)g->nb * lo : 0);
  return rc;
}

/* --- solves with the lower factor ---------------------------------------- */

/* w = F^-1 w (its first cols columns), info into word 1 (cuSOLVER's
 * solves; the blocked ones of one column, once their inverses are made,
 * check nothing: the factorization's info was checked). */
static int low_solve(gpu_refine *g, int64_t cols, jmg_error *err) {
  const jmg_cuda_call *c = &g->call.cuda;
  const cudaDataType t = jmg_cuda_data_type(g->low);
  if (cols == 1 && g->tri.inv != NULL)
    return jmg_dn_tri_solve(&g->tri, part(g, g->l.w_at), err);
  if (g->lu)
    return JMG_CUSOLVER_TRY(
        cusolverDnXgetrs(g->call.dn, g->call.params,
                         g->transpose ? CUBLAS_OP_T : CUBLAS_OP_N, g->n, cols,
                         t, part(g, g->l.f_at), g->n, part(g, g->l.piv_at), t,
                         part(g, g->l.w_at), g->n, c->d_info + 1),
        c->op, err);
  return JMG_CUSOLVER_TRY(
      cusolverDnXpotrs(g->call.dn, g->call.params, CUBLAS_FILL_MODE_LOWER, g->n,
                       cols, t, part(g, g->l.f_at), g->n, t,
                       part(g, g->l.w_at), g->n, c->d_info + 1),
      c->op, err);
}

/* Records timer event `which` on the call's stream (JAXMG_TRACE only). */
static int timer_record(gpu_refine *g, int which, jmg_error *err) {
  if (g->timer.ev[which] == NULL) return 0;
  return JMG_CUDA_TRY(cudaEventRecord(g->timer.ev[which], g->call.cuda.stream),
                      g->call.cuda.op, err);
}

/* x = F^-1 src (add 0) or x += F^-1 src (add 1), src n x k of A's dtype:
 * one narrowing, the solves, one widening (timed with JAXMG_TRACE). */
static int solve_into_x(gpu_refine *g, const void *src, int add,
                        jmg_error *err) {
  const jmg_cuda_call *c = &g->call.cuda;
  const size_t count = (size_t)g->n * (size_t)g->k;
  int rc = timer_record(g, 0, err);
  if (rc == 0)
    rc = jmg_cuda_narrow(g->dtype, src, part(g, g->l.w_at), count,
                         c->d_info + 2, c->stream, c->op, err);
  if (rc == 0) rc = low_solve(g, g->k, err);
  if (rc == 0)
    rc = jmg_cuda_widen(g->dtype, part(g, g->l.w_at), g->b, count, add,
                        c->stream, c->op, err);
  if (rc == 0) rc = timer_record(g, 1, err);
  if (rc == 0 && g->timer.ev[1] != NULL) g->timer.solve_pending = 1;
  return rc;
}

static int step_first(void *ctx, jmg_error *err) {
  gpu_refine *g = ctx;
  return solve_into_x(g, part(g, g->l.kept_at), 0, err);
}

static int step_correct(void *ctx, jmg_error *err) {
  gpu_refine *g = ctx;
  return solve_into_x(g, part(g, g->l.r_at), 1, err);
}

/* --- residuals and norms ------------------------------------------------- */

/* The 2-norms of v's k columns into out (device memory), by nrm2 in the
 * handle's device pointer mode, restored to host mode after. */
static int column_norms(gpu_refine *g, const void *v, double *out,
                        jmg_error *err) {
  const char *op = g->call.cuda.op;
  cublasHandle_t h = g->call.blas;
  const size_t col = (size_t)g->n * jmg_dtype_size(g->dtype);
  int rc = JMG_CUBLAS_TRY(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE),
                          op, err);
  for (int64_t j = 0; rc == 0 && j < g->k; ++j) {
    const void *vj = (const char *)v + (size_t)j * col;
    rc = g->dtype == JMG_C128
             ? JMG_CUBLAS_TRY(cublasDznrm2_v2_64(h, g->n, vj, 1, out + j), op,
                              err)
             : JMG_CUBLAS_TRY(cublasDnrm2_v2_64(h, g->n, vj, 1, out + j), op,
                              err);
  }
  jmg_error ignored;
  const int back =
      JMG_CUBLAS_TRY(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST), op,
                     rc == 0 ? err : &ignored);
  return rc != 0 ? rc : back;
}

/* Brings count norms from the device to g->hnorm and waits. */
static int norms_to_host(gpu_refine *g, size_t count, jmg_error *err) {
  jmg_cuda_call *c = &g->call.cuda;
  int rc = JMG_CUDA_TRY(
      cudaMemcpyAsync(g->hnorm, part(g, g->l.norms_at), count * sizeof(double),
                      cudaMemcpyDeviceToHost, c->stream),
      c->op, err);
  if (rc == 0) rc = jmg_cuda_call_sync(c, err);
  return rc;
}

/* y = alpha op(A) x + beta y for one column: gemv (lu_solve; potrs with
 * JAXMG_REFINE_RESIDUAL=gemv, A's both triangles) or symv/hemv on A's lower
 * triangle (potrs): A read once at bandwidth, where symm and gemm of one
 * column are tiled for many. */
static int apply_a_column(gpu_refine *g, const void *x, void *y, double alpha,
                          double beta, jmg_error *err) {
  const int64_t n = g->n;
  if (g->lu || g->residual == 2)
    return JMG_CUBLAS_TRY(
        jmg_cublas_gemv_ab_64(g->call.blas, g->dtype,
                              g->lu && g->transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
                              n, n, alpha, g->call.a_data, n, x, beta, y),
        g->call.cuda.op, err);
  return JMG_CUBLAS_TRY(
      jmg_cublas_hemv_ab_64(g->call.blas, g->dtype, CUBLAS_FILL_MODE_LOWER, n,
                            alpha, g->call.a_data, n, x, beta, y),
      g->call.cuda.op, err);
}

/* y = alpha op(A) x + beta y for n x cols x and y of A's dtype (beta 0: y
 * is not read). */
static int apply_a(gpu_refine *g, const void *x, void *y, int64_t cols,
                   double alpha, double beta, jmg_error *err) {
  const int64_t n = g->n;
  if (cols == 1 && !(!g->lu && g->residual == 1))
    return apply_a_column(g, x, y, alpha, beta, err);
  if (g->lu)
    return JMG_CUBLAS_TRY(
        jmg_cublas_gemm_64(g->call.blas, g->dtype,
                           g->transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
                           CUBLAS_OP_N, n, cols, n, alpha, g->call.a_data, n, x,
                           n, beta, y, n),
        g->call.cuda.op, err);
  return JMG_CUBLAS_TRY(
      jmg_cublas_hemm_64(g->call.blas, g->dtype, CUBLAS_FILL_MODE_LOWER, n,
                         cols, alpha, g->call.a_data, n, x, n, beta, y, n),
      g->call.cuda.op, err);
}

/* The timed parts since the last read into g->timer (the stream is
 * synchronized: every recorded event is complete). */
static int timer_read(gpu_refine *g, jmg_error *err) {
  step_timer *t = &g->timer;
  if (t->ev[0] == NULL) return 0;
  float ms = 0.0f;
  int rc = JMG_CUDA_TRY(cudaEventElapsedTime(&ms, t->ev[2], t->ev[3]),
                        g->call.cuda.op, err);
  if (rc == 0) {
    t->product_ms += ms;
    t->products += 1;
  }
  if (rc == 0 && t->solve_pending)
    rc = JMG_CUDA_TRY(cudaEventElapsedTime(&ms, t->ev[0], t->ev[1]),
                      g->call.cuda.op, err);
  if (rc == 0 && t->solve_pending) {
    t->solve_ms += ms;
    t->solves += 1;
    t->solve_pending = 0;
  }
  return rc;
}

/* r = b - op(A) x, and the norms of r's and x's columns on the host: a copy
 * of b, one product (gemv or symv where one column), 2 k nrm2, one copy to
 * the host and the step's one synchronization. */
static int step_residual(void *ctx, double *rnorm, double *xnorm,
                         jmg_error *err) {
  gpu_refine *g = ctx;
  const jmg_cuda_call *c = &g->call.cuda;
  const int64_t n = g->n, k = g->k;
  void *r = part(g, g->l.r_at);
  double *d_norms = part(g, g->l.norms_at);
  int rc = timer_record(g, 2, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaMemcpyAsync(r, part(g, g->l.kept_at),
                        (size_t)n * (size_t)k * jmg_dtype_size(g->dtype),
                        cudaMemcpyDeviceToDevice, c->stream),
        c->op, err);
  if (rc == 0) rc = apply_a(g, g->b, r, k, -1.0, 1.0, err);
  if (rc == 0) rc = timer_record(g, 3, err);
  if (rc == 0) rc = column_norms(g, r, d_norms, err);
  if (rc == 0) rc = column_norms(g, g->b, d_norms + k, err);
  if (rc == 0) rc = norms_to_host(g, 2 * (size_t)k, err);
  if (rc == 0) rc = timer_read(g, err);
  if (rc == 0) {
    memcpy(rnorm, g->hnorm, (size_t)k * sizeof *rnorm);
    memcpy(xnorm, g->hnorm + k, (size_t)k * sizeof *xnorm);
  }
  return rc;
}

/* ||A||_F (the whole held matrix's, one nrm2: potrs's Hermitian A holds
 * both triangles; the LAPACK engine reads the lower one,
 * engine/lapack/mixed_host.c: the same number for the Hermitian A the API
 * takes) and b's column norms into bnorm (k host values past the
 * residual's and x's in g->hnorm). */
static int norms_of_a_and_b(gpu_refine *g, double *anorm, double **bnorm,
                            jmg_error *err) {
  const int64_t k = g->k;
  *anorm = 0.0;
  int rc = JMG_CUBLAS_TRY(jmg_cublas_nrm2_64(g->call.blas, g->dtype,
                                             g->n * g->n, g->call.a_data,
                                             anorm),
                          g->call.cuda.op, err);
  if (rc == 0)
    rc = column_norms(g, part(g, g->l.kept_at), part(g, g->l.norms_at), err);
  if (rc == 0) rc = norms_to_host(g, (size_t)k, err);
  *bnorm = g->hnorm + 2 * k;
  if (rc == 0) memcpy(*bnorm, g->hnorm, (size_t)k * sizeof **bnorm);
  return rc;
}

/* --- GMRES-IR's steps (engine/refine.h) ---------------------------------- */

static void *basis(const gpu_refine *g, int j) {
  return (char *)part(g, g->l.v_at) +
         (size_t)j * (size_t)g->n * jmg_dtype_size(g->dtype);
}

/* dst = F^-1 src, one column of n of A's dtype (dst may be src). */
static int precondition(gpu_refine *g, const void *src, void *dst,
                        jmg_error *err) {
  const jmg_cuda_call *c = &g->call.cuda;
  const size_t n = (size_t)g->n;
  int rc = jmg_cuda_narrow(g->dtype, src, part(g, g->l.w_at), n, c->d_info + 2,
                           c->stream, c->op, err);
  if (rc == 0) rc = low_solve(g, 1, err);
  if (rc == 0)
    rc = jmg_cuda_widen(g->dtype, part(g, g->l.w_at), dst, n, 0, c->stream,
                        c->op, err);
  return rc;
}

/* v /= ||v|| where that is finite and not 0; the norm into *norm. */
static int normalize(gpu_refine *g, void *v, double *norm, jmg_error *err) {
  const char *op = g->call.cuda.op;
  *norm = 0.0;
  int rc = JMG_CUBLAS_TRY(
      jmg_cublas_nrm2_64(g->call.blas, g->dtype, g->n, v, norm), op, err);
  if (rc == 0 && *norm > 0.0 && isfinite(*norm))
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_scal_64(g->call.blas, g->dtype, g->n, 1.0 / *norm, 0.0, v),
        op, err);
  return rc;
}

static int step_gmres_start(void *ctx, int64_t col, double *beta,
                            jmg_error *err) {
  gpu_refine *g = ctx;
  const void *r = (const char *)part(g, g->l.r_at) +
                  (size_t)col * (size_t)g->n * jmg_dtype_size(g->dtype);
  int rc = precondition(g, r, basis(g, 0), err);
  if (rc == 0) rc = normalize(g, basis(g, 0), beta, err);
  return rc;
}

static int step_arnoldi(void *ctx, int j, double *h, jmg_error *err) {
  gpu_refine *g = ctx;
  jmg_cuda_call *c = &g->call.cuda;
  const int64_t n = g->n, m1 = JMG_GMRES_RESTART + 1;
  const size_t hi = jmg_dtype_size(g->dtype);
  const int cplx = jmg_dtype_is_complex(g->dtype);
  void *w = basis(g, j + 1), *v = basis(g, 0);
  char *hd = part(g, g->l.hd_at);
  int rc = apply_a(g, basis(g, j), w, 1, 1.0, 0.0, err);
  if (rc == 0) rc = precondition(g, w, w, err);
  /* Classical Gram-Schmidt, twice: hp = V^H w, w -= V hp. */
  for (int pass = 0; rc == 0 && pass < 2; ++pass) {
    void *hp = hd + (size_t)pass * (size_t)m1 * hi;
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_gemm_64(g->call.blas, g->dtype, CUBLAS_OP_C, CUBLAS_OP_N,
                           j + 1, 1, n, 1.0, v, n, w, n, 0.0, hp, m1),
        c->op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_gemm_64(g->call.blas, g->dtype, CUBLAS_OP_N, CUBLAS_OP_N,
                             n, 1, j + 1, -1.0, v, n, hp, m1, 1.0, w, n),
          c->op, err);
  }
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(g->hh, hd, 2 * (size_t)m1 * hi,
                                      cudaMemcpyDeviceToHost, c->stream),
                      c->op, err);
  if (rc == 0) rc = jmg_cuda_call_sync(c, err);
  if (rc != 0) return rc;
  for (int i = 0; i <= j; ++i) {
    if (cplx) {
      h[2 * i] = g->hh[2 * i] + g->hh[2 * (m1 + i)];
      h[2 * i + 1] = g->hh[2 * i + 1] + g->hh[2 * (m1 + i) + 1];
    } else {
      h[2 * i] = g->hh[i] + g->hh[m1 + i];
      h[2 * i + 1] = 0.0;
    }
  }
  h[2 * (j + 1) + 1] = 0.0;
  return normalize(g, w, &h[2 * (j + 1)], err);
}

static int step_gmres_update(void *ctx, int64_t col, int k, const double *y,
                             jmg_error *err) {
  gpu_refine *g = ctx;
  jmg_cuda_call *c = &g->call.cuda;
  const int64_t n = g->n, m1 = JMG_GMRES_RESTART + 1;
  const size_t hi = jmg_dtype_size(g->dtype);
  const int cplx = jmg_dtype_is_complex(g->dtype);
  for (int i = 0; i < k; ++i) {
    if (cplx) {
      g->hh[2 * i] = y[2 * i];
      g->hh[2 * i + 1] = y[2 * i + 1];
    } else {
      g->hh[i] = y[2 * i];
    }
  }
  void *hd = part(g, g->l.hd_at);
  void *x = (char *)g->b + (size_t)col * (size_t)n * hi;
  /* From pageable memory: the copy has read g->hh when it returns. */
  int rc = JMG_CUDA_TRY(cudaMemcpyAsync(hd, g->hh, (size_t)k * hi,
                                        cudaMemcpyHostToDevice, c->stream),
                        c->op, err);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_gemm_64(g->call.blas, g->dtype, CUBLAS_OP_N, CUBLAS_OP_N, n,
                           1, k, 1.0, basis(g, 0), n, hd, m1, 1.0, x, n),
        c->op, err);
  return rc;
}

/* --- the lower factorizations -------------------------------------------- */

/* The blocked solves' state over this call's factor and parts, of block
 * nb (tri_solve.h). */
static jmg_dn_tri tri_of(gpu_refine *g, int64_t nb) {
  const jmg_dn_tri t = {.call = &g->call,
                        .low = g->low,
                        .n = g->n,
                        .nb = nb,
                        .f = part(g, g->l.f_at),
                        .inv = part(g, g->l.inv_at),
                        .y = part(g, g->l.y_at),
                        .ones = g->ones};
  return t;
}

/* f = L L^H by blocks of g->nb columns (tf32_potrf.h; see the head of
 * this file); *low_info the first failing leading minor (0: none). With
 * JAXMG_TRACE and no look-ahead, its three parts' times into g->t_diag,
 * t_trsm and t_update (the trace prints them after the factorization). */
static int tf32_cholesky(gpu_refine *g, int *low_info, jmg_error *err) {
  const jmg_dn_tri tri = tri_of(g, g->nb);
  jmg_dn_tf32 p = {.call = &g->call,
                   .low = g->low,
                   .n = g->n,
                   .nb = g->nb,
                   .f = part(g, g->l.f_at),
                   .work = part(g, g->l.factor_at),
                   .work_bytes = g->l.factor_bytes,
                   .tri = g->inverse_panels ? &tri : NULL,
                   .panel = part(g, g->l.panel_at)};
  const int rc = tf32_lookahead()
                     ? jmg_dn_tf32_potrf_lookahead(&p, low_info, err)
                     : jmg_dn_tf32_potrf(&p, low_info, err);
  g->t_diag = p.t_diag;
  g->t_trsm = p.t_trsm;
  g->t_update = p.t_update;
  g->factor_inverted = rc == 0 && p.inverted;
  return rc;
}

/* f's diagonal times (1 + shift): A + shift diag(A) in the lower
 * precision (refine.h, JMG_REFINE_SHIFT), by a strided scal (stride n + 1;
 * csscal keeps a complex diagonal's imaginary part 0). */
static int shift_diagonal(gpu_refine *g, double shift, jmg_error *err) {
  const float by = (float)(1.0 + shift);
  void *f = part(g, g->l.f_at);
  if (g->low == JMG_C64)
    return JMG_CUBLAS_TRY(
        cublasCsscal_v2_64(g->call.blas, g->n, &by, f, g->n + 1),
        g->call.cuda.op, err);
  return JMG_CUBLAS_TRY(
      cublasSscal_v2_64(g->call.blas, g->n, &by, f, g->n + 1),
      g->call.cuda.op, err);
}

/* cuSOLVER's float32 factorization in BF16x9 emulation (g->emulate) from
 * here: the handle's math mode and emulation strategy into *mode and
 * *strategy, to restore with emulation_end. */
static int emulation_begin(gpu_refine *g, cusolverMathMode_t *mode,
                           cudaEmulationStrategy_t *strategy, jmg_error *err) {
  const char *op = g->call.cuda.op;
  cusolverDnHandle_t dn = g->call.dn;
  int rc = JMG_CUSOLVER_TRY(cusolverDnGetMathMode(dn, mode), op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnGetEmulationStrategy(dn, strategy), op,
                          err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnSetMathMode(dn, CUSOLVER_FP32_EMULATED_BF16X9_MATH), op,
        err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnSetEmulationStrategy(dn, CUDA_EMULATION_STRATEGY_EAGER), op,
        err);
  return rc;
}

/* Restores what emulation_begin saved; a failure is the error only where
 * rc is 0. Returns rc, or the restore's failure. */
static int emulation_end(gpu_refine *g, cusolverMathMode_t mode,
                         cudaEmulationStrategy_t strategy, int rc,
                         jmg_error *err) {
  const char *op = g->call.cuda.op;
  jmg_error ignored;
  const int m = JMG_CUSOLVER_TRY(cusolverDnSetMathMode(g->call.dn, mode), op,
                                 rc == 0 ? err : &ignored);
  if (rc == 0) rc = m;
  const int s = JMG_CUSOLVER_TRY(
      cusolverDnSetEmulationStrategy(g->call.dn, strategy), op,
      rc == 0 ? err : &ignored);
  return rc == 0 ? s : rc;
}

/* Factors A's lower copy once (with the diagonal shifted where shift > 0):
 * 0 with *low_info (the factorization's info) and *overflow (A exceeds the
 * lower precision's range), or an error. */
static int factor_once(gpu_refine *g, double shift, int *low_info,
                       int *overflow, jmg_error *err) {
  jmg_cuda_call *c = &g->call.cuda;
  const cudaDataType t = jmg_cuda_data_type(g->low);
  void *f = part(g, g->l.f_at);
  int tf32_info = 0;
  int rc = JMG_CUDA_TRY(
      cudaMemsetAsync(c->d_info, 0, 4 * sizeof(int), c->stream), c->op, err);
  if (rc == 0)
    rc = jmg_cuda_narrow(g->dtype, g->call.a_data, f,
                         (size_t)g->n * (size_t)g->n, c->d_info + 3, c->stream,
                         c->op, err);
  if (rc == 0 && shift > 0.0) rc = shift_diagonal(g, shift, err);
  cusolverMathMode_t mode = CUSOLVER_DEFAULT_MATH;
  cudaEmulationStrategy_t strategy = CUDA_EMULATION_STRATEGY_DEFAULT;
  int emulating = 0;
  if (rc == 0 && g->emulate && g->route == ROUTE_FLOAT32) {
    rc = emulation_begin(g, &mode, &strategy, err);
    emulating = 1; /* restored even where a set failed half way */
  }
  if (rc == 0 && g->route == ROUTE_TF32_CHOLESKY)
    rc = tf32_cholesky(g, &tf32_info, err);
  else if (rc == 0 && g->lu)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgetrf(g->call.dn, g->call.params, g->n, g->n, t, f, g->n,
                         part(g, g->l.piv_at), t, part(g, g->l.factor_at),
                         g->l.factor_bytes, c->host_work, c->host_bytes,
                         c->d_info),
        c->op, err);
  else if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXpotrf(g->call.dn, g->call.params, CUBLAS_FILL_MODE_LOWER,
                         g->n, t, f, g->n, t, part(g, g->l.factor_at),
                         g->l.factor_bytes, c->host_work, c->host_bytes,
                         c->d_info),
        c->op, err);
  if (emulating) rc = emulation_end(g, mode, strategy, rc, err);
  int h_info[4] = {0, 0, 0, 0};
  if (rc == 0) rc = jmg_cuda_call_read_info(c, h_info, 4, err);
  if (rc == 0 && g->route != ROUTE_TF32_CHOLESKY)
    rc = jmg_cuda_call_check_info(c, h_info[0],
                                  g->lu ? "cusolverDnXgetrf (lower precision)"
                                        : "cusolverDnXpotrf (lower precision)",
                                  err);
  *low_info = g->route == ROUTE_TF32_CHOLESKY ? tf32_info : h_info[0];
  *overflow = h_info[3] != 0;
  return rc;
}

/* The refinement's steps on this call (engine/refine.h). */
static jmg_refine_steps dn_steps(gpu_refine *g) {
  const jmg_refine_steps steps = {.ctx = g,
                                  .first = step_first,
                                  .residual = step_residual,
                                  .correct = step_correct,
                                  .restart = JMG_GMRES_RESTART,
                                  .max_inner = DN_GMRES_MAX_INNER,
                                  .max_steps = dn_max_steps(g->n),
                                  .gmres_start = step_gmres_start,
                                  .arnoldi = step_arnoldi,
                                  .gmres_update = step_gmres_update};
  return steps;
}

/* The lower factorization; a Cholesky that fails (A not positive definite
 * to the lower precision) once more with the diagonal shifted, *shift
 * then the shift (0: none), where GMRES-IR's budget (*gmres_budget) is at
 * least DN_SHIFT_MIN_INNER (else *low_info stays the failed column's and
 * the caller falls back). */
static int factor(gpu_refine *g, int *low_info, int *overflow, double *shift,
                  int *gmres_budget, jmg_error *err) {
  *shift = 0.0;
  *gmres_budget = -1;
  int rc = factor_once(g, 0.0, low_info, overflow, err);
  if (rc == 0 && !g->lu && !*overflow && *low_info > 0) {
    const jmg_refine_steps steps = dn_steps(g);
    *gmres_budget = jmg_refine_gmres_budget(&steps);
    if (*gmres_budget < DN_SHIFT_MIN_INNER) return rc;
    const double u_low = g->route == ROUTE_TF32_CHOLESKY && g->nb < g->n
                             ? ldexp(1.0, -11) /* TF32's 10-bit mantissa */
                             : jmg_refine_unit_roundoff(g->low);
    *shift = JMG_REFINE_SHIFT * u_low;
    rc = factor_once(g, *shift, low_info, overflow, err);
  }
  return rc;
}

/* The blocked solves' inverses of the factor's diagonal blocks
 * (tri_solve.h), where the call has them (g->snb > 0): g->tri ready, a
 * trace mark. */
static int blocked_solves(gpu_refine *g, jmg_error *err) {
  if (g->snb <= 0) return 0;
  const jmg_dn_tri t = tri_of(g, g->snb);
  /* The factorization's own inverses where their block is the solves'. */
  const int reuse = g->factor_inverted && g->snb == g->nb;
  const int rc = reuse ? 0 : jmg_dn_tri_invert(&t, err);
  if (rc == 0) {
    g->tri = t;
    char mark[128];
    snprintf(mark, sizeof mark,
             "factor's diagonal blocks inverted (solves by blocks of %lld%s)",
             (long long)g->snb, reuse ? "; by the factorization" : "");
    jmg_trace_mark(mark);
  }
  return rc;
}

/* With JAXMG_TRACE, the step timer's events (else nothing). */
static int timer_begin(gpu_refine *g, jmg_error *err) {
  jmg_config cfg;
  jmg_config_read(&cfg);
  int rc = 0;
  for (int i = 0; rc == 0 && cfg.trace && i < 4; ++i)
    rc = JMG_CUDA_TRY(cudaEventCreate(&g->timer.ev[i]), g->call.cuda.op, err);
  return rc;
}

/* Destroys the timer's events; a failure is the error only where rc is 0. */
static int timer_end(gpu_refine *g, int rc, jmg_error *err) {
  jmg_error ignored;
  for (int i = 0; i < 4; ++i) {
    if (g->timer.ev[i] == NULL) continue;
    const int d = JMG_CUDA_TRY(cudaEventDestroy(g->timer.ev[i]),
                               g->call.cuda.op, rc == 0 ? err : &ignored);
    if (rc == 0) rc = d;
    g->timer.ev[i] = NULL;
  }
  return rc;
}

/* The refinement's trace mark, with the timer's split where it ran:
 * " [5 solves 1.10 ms; 5 products with A 2.20 ms]" (no comma: the
 * benchmark reads the mark's time after it). */
static void refine_mark(const gpu_refine *g, const jmg_refine_result *r) {
  char mark[320];
  jmg_refine_describe(r, g->dtype, mark, sizeof mark);
  const step_timer *t = &g->timer;
  const size_t at = strlen(mark);
  if (t->products > 0)
    snprintf(mark + at, sizeof mark - at,
             " [%d solves %.2f ms; %d products with A %.2f ms]", t->solves,
             t->solve_ms, t->products, t->product_ms);
  jmg_trace_mark(mark);
}

/* The refinement from the lower factor: *converged. */
static int refine(gpu_refine *g, int *converged, jmg_error *err) {
  jmg_cuda_call *c = &g->call.cuda;
  double anorm = 0.0, *bnorm = NULL;
  int rc = blocked_solves(g, err);
  if (rc == 0) rc = norms_of_a_and_b(g, &anorm, &bnorm, err);
  const jmg_refine_steps steps = dn_steps(g);
  jmg_refine_result r;
  memset(&r, 0, sizeof r);
  if (rc == 0) rc = timer_begin(g, err);
  if (rc == 0)
    rc = jmg_refine_run(&steps, g->dtype, g->n, g->k, bnorm, anorm, &r, err);
  rc = timer_end(g, rc, err);
  /* The lower solves' info: a negative one is an argument they rejected. */
  int h_info[2] = {0, 0};
  if (rc == 0) rc = jmg_cuda_call_read_info(c, h_info, 2, err);
  if (rc == 0)
    rc = jmg_cuda_call_check_info(c, h_info[1],
                                  g->lu ? "cusolverDnXgetrs (lower precision)"
                                        : "cusolverDnXpotrs (lower precision)",
                                  err);
  if (rc == 0) refine_mark(g, &r);
  *converged = rc == 0 && r.converged;
  return rc;
}

/* Where the call transposes: A's buffer transposed in place. */
static int irs_transpose(gpu_refine *g, jmg_error *err) {
  jmg_cuda_call *c = &g->call.cuda;
  if (!g->transpose) return 0;
  /* IRS solves M x = b only: M^T in place, and from here on the call
   * (the residual, the fallback) solves with the buffer as it is. */
  const int rc = jmg_cuda_transpose_square(g->dtype, g->call.a_data, g->n,
                                           c->stream, c->op, err);
  if (rc == 0) {
    g->transpose = 0;
    jmg_trace_mark("transpose in place");
  }
  return rc;
}

/* cusolverDnIRSXgesv itself: x, its niters, its outer iterations and its
 * factorization's info (checked). */
static int irs_solve(gpu_refine *g, cusolver_int_t *niters,
                     cusolver_int_t *outer, int *h_info, jmg_error *err) {
  jmg_cuda_call *c = &g->call.cuda;
  irs s = {NULL, NULL};
  int rc = irs_create(g, &s, 1, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaMemsetAsync(c->d_info, 0, 4 * sizeof(int), c->stream), c->op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnIRSXgesv(g->call.dn, s.params, s.infos, (cusolver_int_t)g->n,
                           (cusolver_int_t)g->k, g->call.a_data,
                           (cusolver_int_t)g->n, part(g, g->l.kept_at),
                           (cusolver_int_t)g->n, g->b, (cusolver_int_t)g->n,
                           part(g, g->l.irs_at), g->l.irs_bytes, niters,
                           c->d_info),
        c->op, err);
  if (rc == 0) rc = jmg_cuda_call_read_info(c, h_info, 1, err);
  if (rc == 0)
    rc = jmg_cuda_call_check_info(c, *h_info, "cusolverDnIRSXgesv", err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnIRSInfosGetOuterNiters(s.infos, outer),
                          c->op, err);
  return irs_destroy(g, &s, rc, err);
}

/* The trace's mark where cuSOLVER fell back by itself (niters < 0 or its
 * info not 0). */
static void irs_fallback_mark(const gpu_refine *g, cusolver_int_t niters) {
  /* cuSOLVER fell back by itself: A holds its float64 LU, x its answer.
   * Its niters says why (cusolverDn<t1><t2>gesv's documentation). */
  const int bound = irs_max_iters(g->n);
  char why[96], mark[160];
  if (niters == -1)
    snprintf(why, sizeof why, "lower precision not worth it for this N");
  else if (niters == -2 || niters == -5)
    snprintf(why, sizeof why, "an overflow in the lower precision");
  else if (niters == -3)
    snprintf(why, sizeof why, "the TF32 factorization failed");
  else if (bound > 0 && niters == -bound)
    snprintf(why, sizeof why, "not converged within its %d iterations",
             bound);
  else
    snprintf(why, sizeof why, "niters %d", (int)niters);
  snprintf(mark, sizeof mark,
           "fallback %s getrf+getrs (cusolverDnIRSXgesv's own: %s)",
           jmg_dtype_name(g->dtype), why);
  jmg_trace_mark(mark);
}

/* jaxmg's backward error of cuSOLVER's converged x; *solved where it
 * meets sqrt(n) u. */
static int irs_check(gpu_refine *g, cusolver_int_t niters,
                     cusolver_int_t outer, int *solved, jmg_error *err) {
  jmg_cuda_call *c = &g->call.cuda;
  /* Converged by cuSOLVER's test (A intact): jaxmg's, against A. The
   * route has one right-hand side (choose_route). */
  double anorm = 0.0, *bnorm = NULL, rnorm[1] = {0.0}, xnorm[1] = {0.0};
  if (g->k != 1)
    return jmg_error_set(err, JMG_EINTERNAL, c->op, "cusolverDnIRSXgesv",
                         "%lld right-hand sides on its one-column route",
                         (long long)g->k);
  int rc = norms_of_a_and_b(g, &anorm, &bnorm, err);
  /* step_residual overwrites hnorm's first 2 k: b's norms sit past them. */
  if (rc == 0) rc = step_residual(g, rnorm, xnorm, err);
  if (rc != 0) return rc;
  jmg_refine_result r;
  memset(&r, 0, sizeof r);
  r.berr = jmg_refine_backward_error(1, rnorm, xnorm, bnorm, anorm);
  const double u = jmg_refine_unit_roundoff(g->dtype);
  r.converged = r.berr <= sqrt((double)g->n) * u;
  r.iterations = (int)outer;
  r.gmres_outer = (int)outer;
  r.gmres_inner = (int)niters;
  char mark[160];
  jmg_refine_describe(&r, g->dtype, mark, sizeof mark);
  jmg_trace_mark(mark);
  *solved = r.converged;
  return 0;
}

/* cusolverDnIRSXgesv into x: *solved where x is the answer (refined to
 * sqrt(n) u by the backward error measured here, or cuSOLVER's own
 * fallback's, *info its factorization's info); else A is intact and the
 * caller falls back. */
static int run_irs(gpu_refine *g, int *solved, int *info, jmg_error *err) {
  cusolver_int_t niters = 0, outer = 0;
  int h_info = 0;
  *solved = 0;
  int rc = irs_transpose(g, err);
  if (rc == 0) rc = irs_solve(g, &niters, &outer, &h_info, err);
  if (rc != 0) return rc;
  char mark[160];
  snprintf(mark, sizeof mark, "getrf %s", low_name(g));
  jmg_trace_mark(mark);
  if (niters < 0 || h_info != 0) {
    irs_fallback_mark(g, niters);
    *solved = 1;
    *info = h_info;
    return 0;
  }
  return irs_check(g, niters, outer, solved, err);
}

/* The call's host buffers: the norms, GMRES's coefficients, the
 * inversions' ones (tri_solve.h) for the larger of the two blocks. */
static int host_buffers(gpu_refine *g, jmg_error *err) {
  jmg_cuda_call *c = &g->call.cuda;
  int rc = jmg_cuda_call_buffer(c, JMG_HOST, 3 * (size_t)g->k * sizeof(double),
                                (void **)&g->hnorm, err);
  if (rc == 0)
    rc = jmg_cuda_call_buffer(c, JMG_HOST,
                              2 * (JMG_GMRES_RESTART + 1) *
                                  jmg_dtype_size(g->dtype),
                              (void **)&g->hh, err);
  const int64_t ones = g->nb > g->snb ? g->nb : g->snb;
  if (rc == 0 && (g->snb > 0 || g->inverse_panels))
    rc = jmg_cuda_call_buffer(c, JMG_HOST,
                              (size_t)ones * jmg_dtype_size(g->low), &g->ones,
                              err);
  return rc;
}

/* The lower factorization's trace mark: "potrf tf32 (nb 1024: diagonal
 * potrf 5.9 ms, inverse panels 1.2 ms, tf32 update 8.7 ms)", what failed
 * and why, the shift. */
static void factor_mark(const gpu_refine *g, int low_info, int overflow,
                        double shift, int gmres_budget) {
  char mark[320], shifted[64] = "", failed[128] = " failed", parts[112] = "";
  if (g->route == ROUTE_TF32_CHOLESKY && g->nb < g->n && tf32_lookahead())
    snprintf(parts, sizeof parts, " (nb %lld, look-ahead)", (long long)g->nb);
  else if (g->t_diag > 0.0)
    snprintf(parts, sizeof parts,
             " (nb %lld: diagonal potrf %.1f ms, %s %.1f ms, tf32 update "
             "%.1f ms)",
             (long long)g->nb, g->t_diag,
             g->inverse_panels ? "inverse panels" : "trsm", g->t_trsm,
             g->t_update);
  if (shift > 0.0 && low_info == 0)
    snprintf(shifted, sizeof shifted, " (diagonal shifted by %.2g)", shift);
  /* Failed fast: the exact path at once, without the shifted factor. */
  if (low_info > 0 && gmres_budget >= 0 && shift == 0.0)
    snprintf(failed, sizeof failed,
             " failed at column %d (not positive definite in %s; no "
             "diagonal shift: gmres-ir budget %d < %d)",
             low_info, low_name(g), gmres_budget, DN_SHIFT_MIN_INNER);
  snprintf(mark, sizeof mark, "%s %s%s%s%s", g->lu ? "getrf" : "potrf",
           low_name(g), shifted,
           overflow        ? " skipped (A exceeds its range)"
           : low_info != 0 ? failed
                           : "",
           parts);
  jmg_trace_mark(mark);
}

/* The mixed call's frame and steps; *fall_back where refinement did not
 * converge (b then holds the caller's b again); *info cuSOLVER IRS's own
 * fallback's. */
static int run(gpu_refine *g, const jmg_dist_matrix *a, int *fall_back,
               int *info, jmg_error *err) {
  jmg_cuda_work w = {0};
  *fall_back = 1;
  int rc =
      jmg_dn_begin(&g->call, g->lu ? JMG_OP_LU_SOLVE : JMG_OP_POTRS, a, err);
  jmg_cuda_call *c = &g->call.cuda;
  if (rc == 0) rc = layout(g, &w, err);
  if (rc == 0) rc = jmg_cuda_call_take(c, &w, err);
  if (rc == 0) rc = host_buffers(g, err);
  const size_t b_bytes = (size_t)g->n * (size_t)g->k * jmg_dtype_size(g->dtype);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(part(g, g->l.kept_at), g->b, b_bytes,
                                      cudaMemcpyDeviceToDevice, c->stream),
                      c->op, err);
  int converged = 0;
  if (g->route == ROUTE_IRS) {
    if (rc == 0) rc = run_irs(g, &converged, info, err);
  } else {
    int low_info = 0, overflow = 0, gmres_budget = -1;
    double shift = 0.0;
    if (rc == 0)
      rc = factor(g, &low_info, &overflow, &shift, &gmres_budget, err);
    if (rc == 0) factor_mark(g, low_info, overflow, shift, gmres_budget);
    if (rc == 0 && !overflow && low_info == 0)
      rc = refine(g, &converged, err);
  }
  if (rc == 0 && !converged)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(g->b, part(g, g->l.kept_at), b_bytes,
                                      cudaMemcpyDeviceToDevice, c->stream),
                      c->op, err);
  if (rc == 0) *fall_back = !converged;
  return jmg_dn_end(&g->call, rc, err);
}

/* The fallback solves with g.transpose: the IRS route may have transposed
 * the buffer in place (run_irs). */
static int mixed(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                 int64_t nrhs, int lu, int transpose, int *info,
                 jmg_error *err) {
  gpu_refine g;
  memset(&g, 0, sizeof g);
  g.dtype = a->dtype;
  g.lu = lu;
  g.transpose = transpose;
  g.n = a->n;
  g.k = nrhs;
  g.b = b;
  set_route(&g, choose_route(lu, a->n, nrhs));
  *info = 0;
  int fall_back = 1, rc = 0;
  if (!jmg_refine_lower(a->dtype, &g.low) || nrhs < 1)
    jmg_trace_mark(nrhs < 1
                       ? "no right-hand side: exact path"
                       : "no lower precision jaxmg factors in: exact path");
  else
    rc = run(&g, a, &fall_back, info, err);
  if (rc != 0 || !fall_back) return rc;
  char mark[64];
  snprintf(mark, sizeof mark, "fallback %s", jmg_dtype_name(a->dtype));
  if (jmg_refine_lower(a->dtype, &g.low) && nrhs >= 1) jmg_trace_mark(mark);
  return lu ? jmg_dn_lu_solve(e, a, b, nrhs, g.transpose, info, err)
            : jmg_dn_potrs(e, a, b, nrhs, NULL, info, err);
}

int jmg_dn_potrs_mixed(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                       int64_t nrhs, int *info, jmg_error *err) {
  return mixed(e, a, b, nrhs, 0, 0, info, err);
}

int jmg_dn_lu_solve_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                          void *b, int64_t nrhs, int transpose, int *info,
                          jmg_error *err) {
  return mixed(e, a, b, nrhs, 1, transpose, info, err);
}

/* One route's workspace bytes into *bytes. */
static int route_bytes(gpu_refine *g, mixed_route route, size_t *bytes,
                       jmg_error *err) {
  jmg_cuda_work w = {0};
  set_route(g, route);
  int rc = layout(g, &w, err);
  *bytes = jmg_cuda_work_alloc_bytes(&w);
  return rc;
}

int jmg_dn_mixed_query(jmg_dn_call *call, const jmg_workspace_query *q, int lu,
                       size_t *bytes, jmg_error *err) {
  gpu_refine g;
  memset(&g, 0, sizeof g);
  g.call = *call;
  g.dtype = call->a->dtype;
  g.lu = lu;
  g.n = call->a->n;
  g.k = q->nrhs > 0 ? q->nrhs : 1;
  *bytes = 0;
  if (!jmg_refine_lower(g.dtype, &g.low)) return 0;
  return route_bytes(&g, choose_route(lu, g.n, g.k), bytes, err);
}
