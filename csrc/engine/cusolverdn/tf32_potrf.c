/* jaxmg's blocked TF32 Cholesky (tf32_potrf.h): moved out of mixed.c,
 * whose head says why it exists, how it is blocked and where its time
 * goes. Written against the CUDA call frame; compiled, not yet run on a
 * GPU. */
#include "engine/cusolverdn/tf32_potrf.h"

#include "common/config.h"
#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/dtype.h"

/* The trailing chunk (blocks). Each chunk's gemm also computes the upper
 * part of its square, cb^2 jb / 2 flops not needed, about 1.5 cb / N of
 * the useful n^3 / 3 in all: 37% at N = 16384 with chunks of 4 blocks of
 * 1024, 19% with 2, whose gemms ((N - c0) x 2048 x 1024) are still large
 * enough for the tensor cores. */
#define TF32_CHUNK_BLOCKS 2

/* The TF32 Cholesky's timing events (JAXMG_TRACE): around each diagonal
 * block's potrf (p0, p1) and after the panel's trsm (s0 before it, s1)
 * and the trailing update (s2). */
enum { EV_P0, EV_P1, EV_S0, EV_S1, EV_S2, EV_COUNT };

/* L^H's operation for the low dtype: conjugate transpose where complex. */
static cublasOperation_t herm_op(const jmg_dn_tf32 *p) {
  return jmg_dtype_is_complex(p->low) ? CUBLAS_OP_C : CUBLAS_OP_T;
}

/* f's element (row, col), lda n. */
static char *at(const jmg_dn_tf32 *p, int64_t row, int64_t col) {
  return (char *)p->f +
         ((size_t)col * (size_t)p->n + (size_t)row) * jmg_dtype_size(p->low);
}

/* cusolverDnXpotrf of the jb x jb diagonal block at a, info into word 0,
 * on the cuSOLVER handle's stream. */
static int potrf_block(jmg_dn_tf32 *p, int64_t jb, void *a, jmg_error *err) {
  jmg_cuda_call *c = &p->call->cuda;
  const cudaDataType t = jmg_cuda_data_type(p->low);
  return JMG_CUSOLVER_TRY(
      cusolverDnXpotrf(p->call->dn, p->call->params, CUBLAS_FILL_MODE_LOWER, jb,
                       t, a, p->n, t, p->work, p->work_bytes, c->host_work,
                       c->host_bytes, c->d_info),
      c->op, err);
}

/* The trailing update of block column j (jb wide) on columns from..n-1 in
 * chunks of TF32_CHUNK_BLOCKS blocks:
 * A(c0:, c0:c0+cb) -= L(c0:, j:j+jb) L(c0:c0+cb, j:j+jb)^H. */
static int trailing_update(jmg_dn_tf32 *p, int64_t j, int64_t jb, int64_t from,
                           jmg_error *err) {
  const int64_t n = p->n, chunk = TF32_CHUNK_BLOCKS * p->nb;
  int rc = 0;
  for (int64_t c0 = from; rc == 0 && c0 < n; c0 += chunk) {
    const int64_t cb = chunk < n - c0 ? chunk : n - c0;
    const char *lc = at(p, c0, j);
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_gemm_tf32_64(p->call->blas, p->low, CUBLAS_OP_N, herm_op(p),
                                n - c0, cb, jb, -1.0, lc, n, lc, n, 1.0,
                                at(p, c0, c0), n),
        p->call->cuda.op, err);
  }
  return rc;
}

/* The panel below block j: A(j+jb:, j:j+jb) = A(j+jb:, j:j+jb) L_jj^-H. */
static int panel_trsm(jmg_dn_tf32 *p, int64_t j, int64_t jb, int64_t rest,
                      jmg_error *err) {
  return JMG_CUBLAS_TRY(
      jmg_cublas_trsm_64(p->call->blas, p->low, CUBLAS_SIDE_RIGHT,
                         CUBLAS_FILL_MODE_LOWER, herm_op(p),
                         CUBLAS_DIAG_NON_UNIT, rest, jb, at(p, j, j), p->n,
                         at(p, j + jb, j), p->n),
      p->call->cuda.op, err);
}

/* The panel below block j (rest rows) by block j's inverse: A(j+jb:,
 * j:j+jb) = (its copy) L_jj^-H, one gemm. */
static int panel_by_inverse(jmg_dn_tf32 *p, int64_t j, int64_t jb,
                            int64_t rest, jmg_error *err) {
  const jmg_cuda_call *c = &p->call->cuda;
  const size_t lo = jmg_dtype_size(p->low);
  int rc = JMG_CUDA_TRY(cudaMemcpy2DAsync(p->panel, (size_t)rest * lo,
                                          at(p, j + jb, j), (size_t)p->n * lo,
                                          (size_t)rest * lo, (size_t)jb,
                                          cudaMemcpyDeviceToDevice, c->stream),
                        c->op, err);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_gemm_64(p->call->blas, p->low, CUBLAS_OP_N, herm_op(p), rest,
                           jb, jb, 1.0, p->panel, rest,
                           jmg_dn_tri_inverse(p->tri, j / p->nb), p->tri->nb,
                           0.0, at(p, j + jb, j), p->n),
        c->op, err);
  return rc;
}

/* Block j's inverse into p->tri and, where rest > 0, the panel below it by
 * that inverse, both in CUBLAS_DEFAULT_MATH: float32 arithmetic, not TF32 (a TF32 panel gemm doubled the corrections at a
 * condition number of 1e4 and made the factorization fail at 1e5 in an
 * emulation of this Cholesky, N = 1024, blocks of 256, where the float32
 * one matched the trsm's corrections); TF32 set again after. */
static int invert_block(jmg_dn_tf32 *p, int64_t j, int64_t jb, int64_t rest,
                        jmg_error *err) {
  const char *op = p->call->cuda.op;
  cublasHandle_t h = p->call->blas;
  int rc = JMG_CUBLAS_TRY(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), op, err);
  if (rc == 0) rc = jmg_dn_tri_invert_block(p->tri, j / p->nb, err);
  if (rc == 0 && rest > 0) rc = panel_by_inverse(p, j, jb, rest, err);
  jmg_error ignored;
  const int back =
      JMG_CUBLAS_TRY(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), op,
                     rc == 0 ? err : &ignored);
  return rc != 0 ? rc : back;
}

/* Checks a diagonal block's info; *low_info the failing minor of block j. */
static int check_block_info(jmg_dn_tf32 *p, int64_t j, int info, int *low_info,
                            jmg_error *err) {
  const int rc = jmg_cuda_call_check_info(
      &p->call->cuda, info,
      "cusolverDnXpotrf (a TF32 Cholesky's diagonal block)", err);
  if (rc == 0 && info > 0) *low_info = (int)(j + info);
  return rc;
}

/* --- without look-ahead, timed with JAXMG_TRACE -------------------------- */

/* Adds the milliseconds from event a to b to *ms (both complete). */
static int add_elapsed(const jmg_dn_tf32 *p, cudaEvent_t a, cudaEvent_t b,
                       double *ms, jmg_error *err) {
  float t = 0.0f;
  const int rc =
      JMG_CUDA_TRY(cudaEventElapsedTime(&t, a, b), p->call->cuda.op, err);
  if (rc == 0) *ms += t;
  return rc;
}

static int record(const jmg_dn_tf32 *p, cudaEvent_t *ev, int which,
                  jmg_error *err) {
  if (ev[which] == NULL) return 0;
  return JMG_CUDA_TRY(cudaEventRecord(ev[which], p->call->cuda.stream),
                      p->call->cuda.op, err);
}

/* The previous block's trsm and update times, once complete. */
static int add_panel_times(jmg_dn_tf32 *p, cudaEvent_t *ev, jmg_error *err) {
  int rc = JMG_CUDA_TRY(cudaEventSynchronize(ev[EV_S2]), p->call->cuda.op, err);
  if (rc == 0) rc = add_elapsed(p, ev[EV_S0], ev[EV_S1], &p->t_trsm, err);
  if (rc == 0) rc = add_elapsed(p, ev[EV_S1], ev[EV_S2], &p->t_update, err);
  return rc;
}

/* Block j's potrf, timed; its info into *info (read, so that a later
 * block does not overwrite it) and checked, with the times so far. */
static int diagonal_block(jmg_dn_tf32 *p, cudaEvent_t *ev, int64_t j,
                          int64_t jb, int *panels, int *low_info, int *info,
                          jmg_error *err) {
  jmg_cuda_call *c = &p->call->cuda;
  *info = 0;
  int rc = record(p, ev, EV_P0, err);
  if (rc == 0) rc = potrf_block(p, jb, at(p, j, j), err);
  if (rc == 0) rc = record(p, ev, EV_P1, err);
  /* The block's info now: a later block would overwrite it. */
  if (rc == 0) rc = jmg_cuda_call_read_info(c, info, 1, err);
  /* Synchronized: this potrf's events and the last panel's are done. */
  if (rc == 0 && ev[0] != NULL)
    rc = add_elapsed(p, ev[EV_P0], ev[EV_P1], &p->t_diag, err);
  if (rc == 0 && ev[0] != NULL && *panels > 0) {
    rc = add_panel_times(p, ev, err);
    *panels = 0;
  }
  if (rc == 0) rc = check_block_info(p, j, *info, low_info, err);
  return rc;
}

/* Block j's panel (trsm) and trailing update, timed. */
static int panel_and_update(jmg_dn_tf32 *p, cudaEvent_t *ev, int64_t j,
                            int64_t jb, int64_t rest, jmg_error *err) {
  int rc = record(p, ev, EV_S0, err);
  if (rc == 0)
    rc = p->tri != NULL ? invert_block(p, j, jb, rest, err)
                        : panel_trsm(p, j, jb, rest, err);
  if (rc == 0) rc = record(p, ev, EV_S1, err);
  if (rc == 0) rc = trailing_update(p, j, jb, j + jb, err);
  if (rc == 0) rc = record(p, ev, EV_S2, err);
  return rc;
}

/* The blocks' loop, in TF32 math mode; the last panel's times added. */
static int blocks(jmg_dn_tf32 *p, cudaEvent_t *ev, int *low_info,
                  jmg_error *err) {
  const int64_t n = p->n, nb = p->nb;
  int rc = 0, panels = 0; /* panels: blocks whose trsm/update were timed */
  if (p->tri != NULL) rc = jmg_dn_tri_begin(p->tri, err);
  for (int64_t j = 0; rc == 0 && j < n; j += nb) {
    const int64_t jb = nb < n - j ? nb : n - j, rest = n - j - jb;
    int info = 0;
    rc = diagonal_block(p, ev, j, jb, &panels, low_info, &info, err);
    if (rc != 0 || info > 0) break;
    if (rest == 0) {
      /* The last block has no panel: its inverse alone. */
      if (p->tri != NULL) rc = invert_block(p, j, jb, 0, err);
      if (rc == 0) p->inverted = p->tri != NULL;
      break;
    }
    rc = panel_and_update(p, ev, j, jb, rest, err);
    if (rc == 0 && ev[0] != NULL) panels = 1;
  }
  if (rc == 0 && ev[0] != NULL && panels > 0) rc = add_panel_times(p, ev, err);
  return rc;
}

/* With JAXMG_TRACE, CUDA events time its three parts into p->t_diag,
 * t_trsm and t_update (the trace prints them after the factorization:
 * where its time goes, to tune it). */
int jmg_dn_tf32_potrf(jmg_dn_tf32 *p, int *low_info, jmg_error *err) {
  jmg_cuda_call *c = &p->call->cuda;
  cublasHandle_t h = p->call->blas;
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
  *low_info = 0;
  p->t_diag = p->t_trsm = p->t_update = 0.0;
  p->inverted = 0;
  jmg_config cfg;
  jmg_config_read(&cfg);
  cudaEvent_t ev[EV_COUNT] = {NULL, NULL, NULL, NULL, NULL};
  jmg_error ignored;
  int rc = 0;
  for (int i = 0; rc == 0 && cfg.trace && i < EV_COUNT; ++i)
    rc = JMG_CUDA_TRY(cudaEventCreate(&ev[i]), c->op, err);
  if (rc == 0) rc = JMG_CUBLAS_TRY(cublasGetMathMode(h, &mode), c->op, err);
  if (rc != 0) goto events;
  rc = JMG_CUBLAS_TRY(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), c->op,
                      err);
  if (rc == 0) rc = blocks(p, ev, low_info, err);
  const int back = JMG_CUBLAS_TRY(cublasSetMathMode(h, mode), c->op,
                                  rc == 0 ? err : &ignored);
  if (rc == 0) rc = back;
events:
  for (int i = 0; i < EV_COUNT; ++i)
    if (ev[i] != NULL) {
      const int d = JMG_CUDA_TRY(cudaEventDestroy(ev[i]), c->op,
                                 rc == 0 ? err : &ignored);
      if (rc == 0) rc = d;
    }
  return rc;
}

/* --- with a look-ahead of one block -------------------------------------- */

/* The look-ahead's state: its second stream, events, and what it changed
 * on the handles (to set back). */
typedef struct lookahead {
  cudaStream_t s2, dn_stream;
  cudaEvent_t ready, done;
  cublasMath_t mode;
  int mode_set, dn_set;
  int64_t potrf_at; /* the block whose potrf runs on s2 */
} lookahead;

/* Creates the second stream and events, puts cuBLAS in TF32 math mode and
 * cuSOLVER's handle on the second stream (each noted in la to set back). */
static int lookahead_begin(jmg_dn_tf32 *p, lookahead *la, jmg_error *err) {
  const char *op = p->call->cuda.op;
  cublasHandle_t h = p->call->blas;
  cusolverDnHandle_t dn = p->call->dn;
  int rc = JMG_CUDA_TRY(
      cudaStreamCreateWithFlags(&la->s2, cudaStreamNonBlocking), op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaEventCreateWithFlags(&la->ready, cudaEventDisableTiming), op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaEventCreateWithFlags(&la->done, cudaEventDisableTiming), op, err);
  if (rc == 0) rc = JMG_CUBLAS_TRY(cublasGetMathMode(h, &la->mode), op, err);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), op,
                        err);
  la->mode_set = rc == 0;
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnGetStream(dn, &la->dn_stream), op, err);
  if (rc == 0) rc = JMG_CUSOLVER_TRY(cusolverDnSetStream(dn, la->s2), op, err);
  la->dn_set = rc == 0;
  return rc;
}

/* The main stream's work so far (a record of ready), then the second
 * stream waits for it. */
static int hand_to_s2(jmg_dn_tf32 *p, lookahead *la, jmg_error *err) {
  const jmg_cuda_call *c = &p->call->cuda;
  int rc = JMG_CUDA_TRY(cudaEventRecord(la->ready, c->stream), c->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamWaitEvent(la->s2, la->ready, 0), c->op, err);
  return rc;
}

/* Block 0's potrf on the second stream. */
static int lookahead_first(jmg_dn_tf32 *p, lookahead *la, jmg_error *err) {
  /* Block 0 once the main stream has made f (the narrowed, shifted A). */
  int rc = hand_to_s2(p, la, err);
  if (rc == 0) {
    const int64_t jb = p->nb < p->n ? p->nb : p->n;
    rc = potrf_block(p, jb, p->f, err);
    if (rc == 0) la->potrf_at = 0;
  }
  return rc;
}

/* potrf(j)'s info into *info, checked. */
static int lookahead_info(jmg_dn_tf32 *p, lookahead *la, int64_t j,
                          int *low_info, int *info, jmg_error *err) {
  const jmg_cuda_call *c = &p->call->cuda;
  /* potrf(j)'s info, on the second stream alone. */
  *info = 0;
  int rc = JMG_CUDA_TRY(cudaMemcpyAsync(info, c->d_info, sizeof *info,
                                        cudaMemcpyDeviceToHost, la->s2),
                        c->op, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(la->s2), c->op, err);
  if (rc == 0) la->potrf_at = -1;
  if (rc == 0) rc = check_block_info(p, j, *info, low_info, err);
  return rc;
}

/* Block j past its potrf: the panel, the next block column's update and
 * potrf (second stream), the columns past it (main stream). */
static int lookahead_step(jmg_dn_tf32 *p, lookahead *la, int64_t j, int64_t jb,
                          int64_t rest, jmg_error *err) {
  const jmg_cuda_call *c = &p->call->cuda;
  const int64_t n = p->n, nb = p->nb;
  int rc = JMG_CUDA_TRY(cudaEventRecord(la->done, la->s2), c->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamWaitEvent(c->stream, la->done, 0), c->op, err);
  if (rc == 0) rc = panel_trsm(p, j, jb, rest, err);
  /* The next block column: A(j1:, j1:j1+jb1) -= L(j1:, j) L(j1:j1+jb1, j)^H,
   * then its potrf on the second stream. */
  const int64_t j1 = j + jb, jb1 = nb < n - j1 ? nb : n - j1;
  const char *l1 = at(p, j1, j);
  char *b1 = at(p, j1, j1);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(jmg_cublas_gemm_tf32_64(
                            p->call->blas, p->low, CUBLAS_OP_N, herm_op(p),
                            n - j1, jb1, jb, -1.0, l1, n, l1, n, 1.0, b1, n),
                        c->op, err);
  if (rc == 0) rc = hand_to_s2(p, la, err);
  if (rc == 0) rc = potrf_block(p, jb1, b1, err);
  if (rc == 0) la->potrf_at = j1;
  /* The columns past it, meanwhile, on the main stream. */
  if (rc == 0) rc = trailing_update(p, j, jb, j1 + jb1, err);
  return rc;
}

/* Folds a clean-up's result d into rc (d is the error only where rc is
 * 0). */
static int fold(int rc, int d) { return rc == 0 ? d : rc; }

/* Sets back what lookahead_begin changed and destroys what it made; a
 * failure is the error only where rc is 0. Returns rc, or that failure. */
static int lookahead_end(jmg_dn_tf32 *p, lookahead *la, int rc,
                         jmg_error *err) {
  const char *op = p->call->cuda.op;
  jmg_error ignored;
  /* Nothing left on the second stream (a potrf enqueued before a failure),
   * and the main stream after it. */
  if (la->s2 != NULL && la->potrf_at >= 0)
    rc = fold(rc, JMG_CUDA_TRY(cudaStreamSynchronize(la->s2), op,
                               rc == 0 ? err : &ignored));
  if (la->dn_set)
    rc = fold(rc,
              JMG_CUSOLVER_TRY(cusolverDnSetStream(p->call->dn, la->dn_stream),
                               op, rc == 0 ? err : &ignored));
  if (la->mode_set)
    rc = fold(rc, JMG_CUBLAS_TRY(cublasSetMathMode(p->call->blas, la->mode), op,
                                 rc == 0 ? err : &ignored));
  if (la->done != NULL)
    rc = fold(rc, JMG_CUDA_TRY(cudaEventDestroy(la->done), op,
                               rc == 0 ? err : &ignored));
  if (la->ready != NULL)
    rc = fold(rc, JMG_CUDA_TRY(cudaEventDestroy(la->ready), op,
                               rc == 0 ? err : &ignored));
  if (la->s2 != NULL)
    rc = fold(rc, JMG_CUDA_TRY(cudaStreamDestroy(la->s2), op,
                               rc == 0 ? err : &ignored));
  return rc;
}

/* The TF32 Cholesky with a look-ahead of one block (JAXMG_TF32_LOOKAHEAD=1,
 * to measure against jmg_dn_tf32_potrf): the diagonal blocks' potrf,
 * latency-bound and one after the other, runs on a second stream while
 * the main one does the previous block's trailing update. Block j: the
 * host waits for potrf(j) on the second stream (its info, read there);
 * the main stream waits for it too, solves the panel below (trsm),
 * updates the next block column alone (one gemm, rows j1.. of columns
 * j1..j1+jb1) and records that; the second stream waits for that record
 * and factors block j + 1 while the main stream updates the columns past
 * it (they touch neither block j + 1 nor its column). cuSOLVER's handle
 * runs on the second stream meanwhile and is set back after; every
 * potrf's info is read before the loop goes on, so no work is left on the
 * second stream when it is destroyed. */
int jmg_dn_tf32_potrf_lookahead(jmg_dn_tf32 *p, int *low_info, jmg_error *err) {
  const int64_t n = p->n, nb = p->nb;
  lookahead la = {.s2 = NULL,
                  .dn_stream = NULL,
                  .ready = NULL,
                  .done = NULL,
                  .mode = CUBLAS_DEFAULT_MATH,
                  .mode_set = 0,
                  .dn_set = 0,
                  .potrf_at = -1};
  *low_info = 0;
  p->t_diag = p->t_trsm = p->t_update = 0.0;
  int rc = lookahead_begin(p, &la, err);
  if (rc == 0) rc = lookahead_first(p, &la, err);
  for (int64_t j = 0; rc == 0 && j < n; j += nb) {
    const int64_t jb = nb < n - j ? nb : n - j, rest = n - j - jb;
    int info = 0;
    rc = lookahead_info(p, &la, j, low_info, &info, err);
    if (rc != 0 || info > 0 || rest == 0) break;
    rc = lookahead_step(p, &la, j, jb, rest, err);
  }
  return lookahead_end(p, &la, rc, err);
}
