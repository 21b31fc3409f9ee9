/* qr with cuSOLVERDn on the one GPU (dn.h), by the routines JAX's own
 * jnp.linalg.qr calls on GPUs (geqrf, then orgqr / ungqr).
 *
 * The engine is given M = Aᵀ (n x m, lda n: engine.h, the qr routine).
 * cuSOLVER has no LQ, so A itself is made in the workspace:
 *   1. X = Mᵀ (m x n, lda m), cuBLAS geam;
 *   2. cusolverDnXgeqrf on X (R in its upper triangle, the reflectors
 *      below it, tau in the workspace);
 *   3. Rᵀ into rt: the top n x n block of X transposed (geam), with the
 *      reflectors below R's diagonal: below the diagonal R is left as it
 *      is (engine.h; core/qr.py zeroes it), and rt's columns past n are
 *      zeroed. (A trmm of triu(X)ᵀ onto the identity gave R clean, at n³
 *      flops, which held qr below jnp.linalg.qr's speed:
 *      bench/results/2026-11-25-s12-h100-one-gpu);
 *   4. cusolverDn<t>orgqr / <t>ungqr on X: Q (m x n);
 *   5. Qᵀ into a's buffer, geam.
 * Memory beside A and R: one copy of A (X), tau, and the two routines'
 * workspaces (taken together, before anything is written): laid out by
 * layout(), which the workspace query (jmg_dn_qr_query) asks too. orgqr has no
 * 64-bit form: `supports` (context.c) refuses an m, n or m * n past
 * INT_MAX (jmg_dn_qr_fits). */
#include <limits.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"

typedef union qr_ptr {
  void *p;
  float *s;
  double *d;
  cuComplex *c;
  cuDoubleComplex *z;
} qr_ptr;

/* cusolverDn<t>orgqr_bufferSize (lwork_out set) or <t>orgqr / <t>ungqr. */
static cusolverStatus_t orgqr_call(cusolverDnHandle_t h, jmg_dtype t, int m,
                                   int n, void *A, int lda, void *TAU,
                                   void *work, int lwork, int *d_info,
                                   int *lwork_out) {
  qr_ptr a = {A}, tau = {TAU}, w = {work};
  switch (t) {
    case JMG_F32:
      return lwork_out ? cusolverDnSorgqr_bufferSize(h, m, n, n, a.s, lda,
                                                     tau.s, lwork_out)
                       : cusolverDnSorgqr(h, m, n, n, a.s, lda, tau.s, w.s,
                                          lwork, d_info);
    case JMG_F64:
      return lwork_out ? cusolverDnDorgqr_bufferSize(h, m, n, n, a.d, lda,
                                                     tau.d, lwork_out)
                       : cusolverDnDorgqr(h, m, n, n, a.d, lda, tau.d, w.d,
                                          lwork, d_info);
    case JMG_C64:
      return lwork_out ? cusolverDnCungqr_bufferSize(h, m, n, n, a.c, lda,
                                                     tau.c, lwork_out)
                       : cusolverDnCungqr(h, m, n, n, a.c, lda, tau.c, w.c,
                                          lwork, d_info);
    case JMG_C128:
      return lwork_out ? cusolverDnZungqr_bufferSize(h, m, n, n, a.z, lda,
                                                     tau.z, lwork_out)
                       : cusolverDnZungqr(h, m, n, n, a.z, lda, tau.z, w.z,
                                          lwork, d_info);
  }
  return CUSOLVER_STATUS_INVALID_VALUE;
}

int jmg_dn_qr_fits(int64_t m, int64_t n) {
  return m >= 0 && n >= 0 && m <= INT_MAX && n <= INT_MAX &&
         m * n <= INT_MAX;
}

/* One call's workspace, in the order it lies: geqrf's and orgqr's (the
 * larger: they run one after the other), then X and tau. */
typedef struct qr_layout {
  size_t geqrf_dev; /* cusolverDnXgeqrf's, bytes */
  int lwork;        /* cusolverDn<t>orgqr's, elements */
  size_t solver_at, x_at, tau_at;
} qr_layout;

/* The layout for call->a (M = Aᵀ: n = a->n, m = a->local_cols), asked of
 * cuSOLVER with no matrix (the queries read no data). */
static int layout(jmg_dn_call *call, jmg_cuda_work *w, qr_layout *l,
                  jmg_error *err) {
  const char *op = call->cuda.op;
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  const size_t es = jmg_dtype_size(a->dtype);
  const int64_t n64 = a->n, m64 = a->local_cols;
  memset(l, 0, sizeof *l);
  if (!jmg_dn_qr_fits(m64, n64))
    return jmg_error_set(err, JMG_EINVAL, op, "cuSOLVERDn",
                         "a %lld x %lld A passes the 32-bit sizes of "
                         "cusolverDn<t>orgqr",
                         (long long)m64, (long long)n64);
  const int m = (int)m64, n = (int)n64;
  int rc = JMG_CUSOLVER_TRY(cusolverDnXgeqrf_bufferSize(
                                call->dn, call->params, m64, n64, t, NULL, m64,
                                t, NULL, t, &l->geqrf_dev, &w->host_bytes),
                            op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(orgqr_call(call->dn, a->dtype, m, n, NULL, m, NULL,
                                     NULL, 0, NULL, &l->lwork),
                          op, err);
  if (rc != 0) return rc;
  const size_t orgqr = (size_t)l->lwork * es;
  l->solver_at =
      jmg_cuda_work_part(w, l->geqrf_dev > orgqr ? l->geqrf_dev : orgqr);
  l->x_at = jmg_cuda_work_part(w, (size_t)m * (size_t)n * es);
  l->tau_at = jmg_cuda_work_part(w, (size_t)(n > 0 ? n : 1) * es);
  return 0;
}

int jmg_dn_qr_query(jmg_dn_call *call, const jmg_workspace_query *q,
                    size_t *bytes, jmg_error *err) {
  (void)q;
  jmg_cuda_work w = {0};
  qr_layout l;
  int rc = layout(call, &w, &l, err);
  *bytes = jmg_cuda_work_alloc_bytes(&w);
  return rc;
}

int jmg_dn_qr(const jmg_engine *e, const jmg_dist_matrix *a,
              const jmg_dist_matrix *rt, int *info, jmg_error *err) {
  (void)e;
  static const char *const names[] = {"cusolverDnXgeqrf", "cusolverDn<t>orgqr"};
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  const size_t es = jmg_dtype_size(a->dtype);
  const int64_t n64 = a->n, m64 = a->local_cols;
  const int64_t rcols = (int64_t)rt->ndev * rt->local_cols;
  jmg_dn_call call;
  jmg_cuda_work w = {0};
  qr_layout l = {0};
  int h_info[2] = {0, 0};
  *info = 0;
  int rc = jmg_dn_begin(&call, JMG_OP_QR, a, err);
  const jmg_cuda_call *c = &call.cuda;
  const char *op = c->op;
  if (rc == 0 && (m64 < n64 || rt->ndev != 1 || rt->n != n64 || rcols < n64))
    rc = jmg_error_set(err, JMG_EINTERNAL, op, "cuSOLVERDn",
                       "shapes do not fit a %lld x %lld A (M >= N) and its R "
                       "(%lld x %lld on %d GPUs)",
                       (long long)m64, (long long)n64, (long long)rt->n,
                       (long long)rcols, rt->ndev);
  if (rc == 0) rc = layout(&call, &w, &l, err);
  const int m = (int)m64, n = (int)n64;
  if (rc == 0) rc = jmg_cuda_call_take(&call.cuda, &w, err);
  void *solver = jmg_cuda_call_part(c, l.solver_at);
  char *x = jmg_cuda_call_part(c, l.x_at),
       *tau = jmg_cuda_call_part(c, l.tau_at);
  cublasHandle_t blas = call.blas;
  /* 1. X = Mᵀ. */
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(jmg_cublas_geam(blas, a->dtype, CUBLAS_OP_T, m, n,
                                        a->data[0], n, x, m),
                        op, err);
  /* 2. X = QR, compactly. */
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgeqrf(call.dn, call.params, m64, n64, t, x, m64, t, tau, t,
                         solver, l.geqrf_dev, c->host_work, c->host_bytes,
                         c->d_info),
        op, err);
  jmg_trace_mark("geqrf");
  /* 3. rt's first n columns = X's top n x n block transposed (R above
   * its diagonal, the reflectors below it), the columns past n zero. */
  if (rc == 0 && rcols > n64)
    rc = JMG_CUDA_TRY(
        cudaMemsetAsync((char *)rt->data[0] + (size_t)n * (size_t)n * es, 0,
                        (size_t)n * (size_t)(rcols - n64) * es, c->stream),
        op, err);
  if (rc == 0 && n > 0)
    rc = JMG_CUBLAS_TRY(jmg_cublas_geam(blas, a->dtype, CUBLAS_OP_T, n, n, x,
                                        m, rt->data[0], n),
                        op, err);
  /* 4. X = Q. */
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(orgqr_call(call.dn, a->dtype, m, n, x, m, tau, solver,
                                     l.lwork, c->d_info + 1, NULL),
                          op, err);
  jmg_trace_mark("orgqr");
  /* 5. a = Qᵀ. */
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(jmg_cublas_geam(blas, a->dtype, CUBLAS_OP_T, n, m, x,
                                        m, a->data[0], n),
                        op, err);
  rc = jmg_cuda_call_info(&call.cuda, rc, h_info, 2, names, err);
  *info = h_info[0] != 0 ? h_info[0] : h_info[1];
  return jmg_dn_end(&call, rc, err);
}
