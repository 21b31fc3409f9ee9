/* potrs and lu_solve in mixed precision on one GPU (engine.h's potrs_mixed
 * and lu_solve_mixed; the algorithm is engine/refine.h's): A's copy in the
 * lower precision (cuda/convert.h) factored by cusolverDnXpotrf or
 * cusolverDnXgetrf in float32 (complex64), solves with that factor by
 * cusolverDnXpotrs / Xgetrs, and the residual b - A x in A's dtype by cuBLAS
 * (symm/hemm, gemm) against A, which stays intact; the column norms by
 * cuBLAS's nrm2 into device memory, brought to the host once a residual.
 * Where refinement does not converge, b is restored and the exact routine
 * (potrs.c, lu_solve.c) runs on A after this call's workspace went back.
 *
 * The workspace, one allocation from XLA's allocator: [A's lower copy |
 * the lower factorization's workspace | its pivots (LU) | b kept | the
 * residual | a lower-precision right-hand side | 2 nrhs norms]. The info
 * words: 0 the lower factorization's, 1 the lower solves', 2 a scratch
 * overflow flag, 3 A's overflow flag. float32 and complex64 inputs run the
 * exact routine (TF32, bfloat16 and float16 factorizations are not yet
 * jaxmg's). Written against the CUDA call frame; not yet run on a GPU. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/convert.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"
#include "engine/refine.h"

typedef struct mixed_layout {
  size_t f_at, factor_at, factor_bytes, piv_at, kept_at, r_at, w_at, norms_at;
} mixed_layout;

/* One call's state, the refinement steps' context. */
typedef struct gpu_refine {
  jmg_dn_call call;
  mixed_layout l;
  jmg_dtype dtype, low;
  int lu, transpose;
  int64_t n, k;
  void *b;       /* the caller's b: x */
  double *hnorm; /* 2 k on the host */
} gpu_refine;

static void *part(const gpu_refine *g, size_t at) {
  return jmg_cuda_call_part(&g->call.cuda, at);
}

/* The lower factorization's workspace (device and host bytes). */
static int factor_workspace(gpu_refine *g, size_t *dev, size_t *host,
                            jmg_error *err) {
  const cudaDataType t = jmg_cuda_data_type(g->low);
  *dev = *host = 0;
  if (g->lu)
    return JMG_CUSOLVER_TRY(
        cusolverDnXgetrf_bufferSize(g->call.dn, g->call.params, g->n, g->n, t,
                                    NULL, g->n, t, dev, host),
        g->call.cuda.op, err);
  return JMG_CUSOLVER_TRY(
      cusolverDnXpotrf_bufferSize(g->call.dn, g->call.params,
                                  CUBLAS_FILL_MODE_LOWER, g->n, t, NULL, g->n,
                                  t, dev, host),
      g->call.cuda.op, err);
}

static int layout(gpu_refine *g, jmg_cuda_work *w, jmg_error *err) {
  mixed_layout *l = &g->l;
  const size_t n = (size_t)g->n, k = (size_t)g->k;
  const size_t hi = jmg_dtype_size(g->dtype), lo = jmg_dtype_size(g->low);
  size_t dev = 0;
  int rc = factor_workspace(g, &dev, &w->host_bytes, err);
  l->f_at = jmg_cuda_work_part(w, n * n * lo);
  l->factor_at = jmg_cuda_work_part(w, dev);
  l->factor_bytes = dev;
  l->piv_at = jmg_cuda_work_part(w, g->lu ? n * sizeof(int64_t) : 0);
  l->kept_at = jmg_cuda_work_part(w, n * k * hi);
  l->r_at = jmg_cuda_work_part(w, n * k * hi);
  l->w_at = jmg_cuda_work_part(w, n * k * lo);
  l->norms_at = jmg_cuda_work_part(w, 2 * k * sizeof(double));
  return rc;
}

/* w = F^-1 w, info into word 1. */
static int low_solve(gpu_refine *g, jmg_error *err) {
  const jmg_cuda_call *c = &g->call.cuda;
  const cudaDataType t = jmg_cuda_data_type(g->low);
  if (g->lu)
    return JMG_CUSOLVER_TRY(
        cusolverDnXgetrs(g->call.dn, g->call.params,
                         g->transpose ? CUBLAS_OP_T : CUBLAS_OP_N, g->n, g->k,
                         t, part(g, g->l.f_at), g->n, part(g, g->l.piv_at), t,
                         part(g, g->l.w_at), g->n, c->d_info + 1),
        c->op, err);
  return JMG_CUSOLVER_TRY(
      cusolverDnXpotrs(g->call.dn, g->call.params, CUBLAS_FILL_MODE_LOWER, g->n,
                       g->k, t, part(g, g->l.f_at), g->n, t, part(g, g->l.w_at),
                       g->n, c->d_info + 1),
      c->op, err);
}

/* x = F^-1 src (add 0) or x += F^-1 src (add 1), src n x k of A's dtype. */
static int solve_into_x(gpu_refine *g, const void *src, int add,
                        jmg_error *err) {
  const jmg_cuda_call *c = &g->call.cuda;
  const size_t count = (size_t)g->n * (size_t)g->k;
  int rc = jmg_cuda_narrow(g->dtype, src, part(g, g->l.w_at), count,
                           c->d_info + 2, c->stream, c->op, err);
  if (rc == 0) rc = low_solve(g, err);
  if (rc == 0)
    rc = jmg_cuda_widen(g->dtype, part(g, g->l.w_at), g->b, count, add,
                        c->stream, c->op, err);
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

/* r = b - op(A) x, and the norms of r's and x's columns on the host. */
static int step_residual(void *ctx, double *rnorm, double *xnorm,
                         jmg_error *err) {
  gpu_refine *g = ctx;
  const jmg_cuda_call *c = &g->call.cuda;
  const int64_t n = g->n, k = g->k;
  void *r = part(g, g->l.r_at);
  double *d_norms = part(g, g->l.norms_at);
  int rc = JMG_CUDA_TRY(
      cudaMemcpyAsync(r, part(g, g->l.kept_at),
                      (size_t)n * (size_t)k * jmg_dtype_size(g->dtype),
                      cudaMemcpyDeviceToDevice, c->stream),
      c->op, err);
  if (rc == 0 && g->lu)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_gemm_64(
            g->call.blas, g->dtype, g->transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
            CUBLAS_OP_N, n, k, n, -1.0, g->call.a_data, n, g->b, n, 1.0, r, n),
        c->op, err);
  else if (rc == 0)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_hemm_64(g->call.blas, g->dtype, CUBLAS_FILL_MODE_LOWER, n, k,
                           -1.0, g->call.a_data, n, g->b, n, 1.0, r, n),
        c->op, err);
  if (rc == 0) rc = column_norms(g, r, d_norms, err);
  if (rc == 0) rc = column_norms(g, g->b, d_norms + k, err);
  if (rc == 0) rc = norms_to_host(g, 2 * (size_t)k, err);
  if (rc == 0) {
    memcpy(rnorm, g->hnorm, (size_t)k * sizeof *rnorm);
    memcpy(xnorm, g->hnorm + k, (size_t)k * sizeof *xnorm);
  }
  return rc;
}

/* Factors A's lower copy: 0 with *low_info (the factorization's info) and
 * *overflow (A exceeds the lower precision's range), or an error. */
static int factor(gpu_refine *g, int *low_info, int *overflow, jmg_error *err) {
  jmg_cuda_call *c = &g->call.cuda;
  const cudaDataType t = jmg_cuda_data_type(g->low);
  void *f = part(g, g->l.f_at);
  int rc = JMG_CUDA_TRY(
      cudaMemsetAsync(c->d_info, 0, 4 * sizeof(int), c->stream), c->op, err);
  if (rc == 0)
    rc = jmg_cuda_narrow(g->dtype, g->call.a_data, f,
                         (size_t)g->n * (size_t)g->n, c->d_info + 3, c->stream,
                         c->op, err);
  if (rc == 0 && g->lu)
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
  int h_info[4] = {0, 0, 0, 0};
  if (rc == 0) rc = jmg_cuda_call_read_info(c, h_info, 4, err);
  if (rc == 0)
    rc = jmg_cuda_call_check_info(c, h_info[0],
                                  g->lu ? "cusolverDnXgetrf (lower precision)"
                                        : "cusolverDnXpotrf (lower precision)",
                                  err);
  *low_info = h_info[0];
  *overflow = h_info[3] != 0;
  return rc;
}

/* The refinement from the lower factor: *converged. ||A||_F is the whole
 * held matrix's, one nrm2 (potrs's Hermitian A holds both triangles; the
 * LAPACK engine reads the lower one, engine/lapack/mixed_host.c: the same
 * number for the Hermitian A the API takes). */
static int refine(gpu_refine *g, int *converged, jmg_error *err) {
  jmg_cuda_call *c = &g->call.cuda;
  const int64_t k = g->k;
  double anorm = 0.0;
  int rc =
      JMG_CUBLAS_TRY(jmg_cublas_nrm2_64(g->call.blas, g->dtype, g->n * g->n,
                                        g->call.a_data, &anorm),
                     c->op, err);
  if (rc == 0)
    rc = column_norms(g, part(g, g->l.kept_at), part(g, g->l.norms_at), err);
  if (rc == 0) rc = norms_to_host(g, (size_t)k, err);
  double *bnorm = g->hnorm + 2 * k; /* past the residual's and x's */
  if (rc == 0) memcpy(bnorm, g->hnorm, (size_t)k * sizeof *bnorm);
  const jmg_refine_steps steps = {.ctx = g,
                                  .first = step_first,
                                  .residual = step_residual,
                                  .correct = step_correct};
  jmg_refine_result r = {0};
  if (rc == 0)
    rc = jmg_refine_run(&steps, g->dtype, g->n, k, bnorm, anorm, &r, err);
  /* The lower solves' info: a negative one is an argument they rejected. */
  int h_info[2] = {0, 0};
  if (rc == 0) rc = jmg_cuda_call_read_info(c, h_info, 2, err);
  if (rc == 0)
    rc = jmg_cuda_call_check_info(c, h_info[1],
                                  g->lu ? "cusolverDnXgetrs (lower precision)"
                                        : "cusolverDnXpotrs (lower precision)",
                                  err);
  if (rc == 0) {
    char mark[128];
    jmg_refine_describe(&r, g->dtype, mark, sizeof mark);
    jmg_trace_mark(mark);
  }
  *converged = rc == 0 && r.converged;
  return rc;
}

/* The mixed call's frame and steps; *fall_back where refinement did not
 * converge (b then holds the caller's b again). */
static int run(gpu_refine *g, const jmg_dist_matrix *a, int *fall_back,
               jmg_error *err) {
  jmg_cuda_work w = {0};
  *fall_back = 1;
  int rc =
      jmg_dn_begin(&g->call, g->lu ? JMG_OP_LU_SOLVE : JMG_OP_POTRS, a, err);
  jmg_cuda_call *c = &g->call.cuda;
  if (rc == 0) rc = layout(g, &w, err);
  if (rc == 0) rc = jmg_cuda_call_take(c, &w, err);
  if (rc == 0)
    rc = jmg_cuda_call_buffer(c, JMG_HOST, 3 * (size_t)g->k * sizeof(double),
                              (void **)&g->hnorm, err);
  const size_t b_bytes = (size_t)g->n * (size_t)g->k * jmg_dtype_size(g->dtype);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(part(g, g->l.kept_at), g->b, b_bytes,
                                      cudaMemcpyDeviceToDevice, c->stream),
                      c->op, err);
  int low_info = 0, overflow = 0, converged = 0;
  if (rc == 0) rc = factor(g, &low_info, &overflow, err);
  char mark[96];
  snprintf(mark, sizeof mark, "%s %s%s", g->lu ? "getrf" : "potrf",
           jmg_dtype_name(g->low),
           overflow        ? " skipped (A exceeds its range)"
           : low_info != 0 ? " failed"
                           : "");
  if (rc == 0) jmg_trace_mark(mark);
  if (rc == 0 && !overflow && low_info == 0) rc = refine(g, &converged, err);
  if (rc == 0 && !converged)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(g->b, part(g, g->l.kept_at), b_bytes,
                                      cudaMemcpyDeviceToDevice, c->stream),
                      c->op, err);
  if (rc == 0) *fall_back = !converged;
  return jmg_dn_end(&g->call, rc, err);
}

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
  *info = 0;
  int fall_back = 1, rc = 0;
  if (!jmg_refine_lower(a->dtype, &g.low) || nrhs < 1)
    jmg_trace_mark(nrhs < 1
                       ? "no right-hand side: exact path"
                       : "no lower precision jaxmg factors in: exact path");
  else
    rc = run(&g, a, &fall_back, err);
  if (rc != 0 || !fall_back) return rc;
  char mark[64];
  snprintf(mark, sizeof mark, "fallback %s", jmg_dtype_name(a->dtype));
  if (jmg_refine_lower(a->dtype, &g.low) && nrhs >= 1) jmg_trace_mark(mark);
  return lu ? jmg_dn_lu_solve(e, a, b, nrhs, transpose, info, err)
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

int jmg_dn_mixed_query(jmg_dn_call *call, const jmg_workspace_query *q, int lu,
                       size_t *bytes, jmg_error *err) {
  gpu_refine g;
  memset(&g, 0, sizeof g);
  g.call = *call;
  g.dtype = call->a->dtype;
  g.lu = lu;
  g.n = call->a->n;
  g.k = q->nrhs > 0 ? q->nrhs : 1;
  jmg_cuda_work w = {0};
  *bytes = 0;
  if (!jmg_refine_lower(g.dtype, &g.low)) return 0;
  int rc = layout(&g, &w, err);
  *bytes = jmg_cuda_work_alloc_bytes(&w);
  return rc;
}
