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
 *      flops: 11 ms of 114 at n = 8192 on an H100, 2026-11-25, which put
 *      qr at 0.90 of jnp.linalg.qr's speed);
 *   4. cusolverDn<t>orgqr / <t>ungqr on X: Q (m x n);
 *   5. Qᵀ into a's buffer, geam.
 * Memory beside A and R: one copy of A (X), tau, and the two routines'
 * workspaces (taken together, before anything is written): sized by
 * qr_sizes, which the workspace query (workspace.c) asks too. orgqr has no
 * 64-bit form: `supports` (context.c) refuses an m, n or m * n past
 * INT_MAX (jmg_dn_qr_fits). */
#include <limits.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"

#define DN_QR_ALIGN 256

static size_t aligned(size_t bytes) {
  return (bytes + DN_QR_ALIGN - 1) / DN_QR_ALIGN * DN_QR_ALIGN;
}

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
typedef struct qr_sizes {
  size_t geqrf_dev, geqrf_host; /* cusolverDnXgeqrf's, bytes */
  int lwork;                    /* cusolverDn<t>orgqr's, elements */
  size_t solver, x, tau;        /* the three parts, aligned */
} qr_sizes;

/* The sizes for call->a (M = Aᵀ: n = a->n, m = a->local_cols), asked of
 * cuSOLVER with no matrix (the queries read no data). */
static int qr_sizes_of(jmg_dn_call *call, qr_sizes *z, jmg_error *err) {
  const char *op = "qr";
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  const size_t es = jmg_dtype_size(a->dtype);
  const int64_t n64 = a->n, m64 = a->local_cols;
  memset(z, 0, sizeof *z);
  if (!jmg_dn_qr_fits(m64, n64))
    return jmg_error_set(err, JMG_EINVAL, op, "cuSOLVERDn",
                         "a %lld x %lld A passes the 32-bit sizes of "
                         "cusolverDn<t>orgqr",
                         (long long)m64, (long long)n64);
  const int m = (int)m64, n = (int)n64;
  int rc = JMG_CUSOLVER_TRY(
      cusolverDnXgeqrf_bufferSize(call->dn, call->params, m64, n64, t, NULL,
                                  m64, t, NULL, t, &z->geqrf_dev,
                                  &z->geqrf_host),
      op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(orgqr_call(call->dn, a->dtype, m, n, NULL, m, NULL,
                                     NULL, 0, NULL, &z->lwork),
                          op, err);
  if (rc != 0) return rc;
  z->solver = aligned(z->geqrf_dev);
  if (aligned((size_t)z->lwork * es) > z->solver)
    z->solver = aligned((size_t)z->lwork * es);
  z->x = aligned((size_t)m * (size_t)n * es);
  z->tau = aligned((size_t)(n > 0 ? n : 1) * es);
  return 0;
}

int jmg_dn_qr_workspace(jmg_dn_call *call, size_t *device_bytes,
                        size_t *host_bytes, jmg_error *err) {
  qr_sizes z;
  int rc = qr_sizes_of(call, &z, err);
  if (rc != 0) return rc;
  *device_bytes = z.solver + z.x + z.tau;
  *host_bytes = z.geqrf_host;
  return 0;
}

int jmg_dn_qr(const jmg_engine *e, const jmg_dist_matrix *a,
              const jmg_dist_matrix *rt, int *info, jmg_error *err) {
  (void)e;
  const char *op = "qr";
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  const size_t es = jmg_dtype_size(a->dtype);
  const int64_t n64 = a->n, m64 = a->local_cols;
  const int64_t rcols = (int64_t)rt->ndev * rt->local_cols;
  static const char *const names[] = {"cusolverDnXgeqrf",
                                      "cusolverDn<t>orgqr"};
  jmg_dn_call call;
  qr_sizes z = {0};
  int h_info[2] = {0, 0};
  *info = 0;
  int rc = jmg_dn_begin_call(&call, op, a, err);
  if (rc == 0 && (m64 < n64 || rt->ndev != 1 || rt->n != n64 || rcols < n64))
    rc = jmg_error_set(err, JMG_EINTERNAL, op, "cuSOLVERDn",
                       "shapes do not fit a %lld x %lld A (M >= N) and its R "
                       "(%lld x %lld on %d GPUs)",
                       (long long)m64, (long long)n64, (long long)rt->n,
                       (long long)rcols, rt->ndev);
  if (rc == 0) rc = qr_sizes_of(&call, &z, err);
  const int m = (int)m64, n = (int)n64;
  if (rc == 0)
    rc = jmg_dn_take_workspace(&call, z.solver + z.x + z.tau, z.geqrf_host,
                               err);
  jmg_trace_mark("workspace");
  char *x = NULL, *tau = NULL;
  if (rc == 0) x = (char *)call.work + z.solver, tau = x + z.x;
  cublasHandle_t blas = call.h->blas[0];
  if (rc == 0) rc = JMG_CUBLAS_TRY(cublasSetStream(blas, call.stream), op, err);
  /* 1. X = Mᵀ. */
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(jmg_cublas_geam(blas, a->dtype, CUBLAS_OP_T, m, n,
                                        a->data[0], n, x, m),
                        op, err);
  /* 2. X = QR, compactly. */
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgeqrf(call.dn, call.params, m64, n64, t, x, m64, t, tau, t,
                         call.work, z.geqrf_dev, call.host_work,
                         call.host_bytes, call.d_info),
        op, err);
  jmg_trace_mark("geqrf");
  /* 3. rt's first n columns = X's top n x n block transposed (R above
   * its diagonal, the reflectors below it), the columns past n zero. */
  if (rc == 0 && rcols > n64)
    rc = JMG_CUDA_TRY(cudaMemsetAsync((char *)rt->data[0] +
                                          (size_t)n * (size_t)n * es,
                                      0, (size_t)n * (size_t)(rcols - n64) * es,
                                      call.stream),
                      op, err);
  if (rc == 0 && n > 0)
    rc = JMG_CUBLAS_TRY(jmg_cublas_geam(blas, a->dtype, CUBLAS_OP_T, n, n, x,
                                        m, rt->data[0], n),
                        op, err);
  /* 4. X = Q. */
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(orgqr_call(call.dn, a->dtype, m, n, x, m, tau,
                                     call.work, z.lwork, call.d_info + 1, NULL),
                          op, err);
  jmg_trace_mark("orgqr");
  /* 5. a = Qᵀ. */
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(jmg_cublas_geam(blas, a->dtype, CUBLAS_OP_T, n, m, x,
                                        m, a->data[0], n),
                        op, err);
  if (rc == 0) rc = jmg_dn_read_info(&call, h_info, 2, names, err);
  *info = h_info[0] != 0 ? h_info[0] : h_info[1];
  jmg_dn_end_call(&call); /* waits for the stream where work is pending */
  return rc;
}
