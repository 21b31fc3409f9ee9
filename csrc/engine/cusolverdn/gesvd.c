/* gesvd with cuSOLVERDn on the one GPU (dn.h), by the routine JAX's own
 * jnp.linalg.svd takes for the size (jax._src.lax.linalg,
 * _resolve_gpu_svd_implementation, jax 0.10: Jacobi when m and n are at
 * most 1024, else gesvd): so that jaxmg.gesvd on one GPU is not slower than
 * JAX's (Xgesvd alone was, at N = 1024:
 * bench/results/2026-11-24-h100x1-gesvd/).
 *
 * Jacobi (cusolverDn<t>gesvdj, 32-bit, any m and n): S into s, U straight
 * into its output (or a scratch when not asked: the routine computes both),
 * V into the workspace, then Vᴴ = V's conjugate transpose into its output
 * (cuBLAS geam). econ = !full: U m x k and V n x k, or U m x m and V n x n.
 *
 * cusolverDnXgesvd (the 64-bit API): the singular values straight into s
 * (device memory), U and Vᴴ straight into the outputs when the matrix is
 * tall.
 *
 * cusolverDnXgesvd takes only rows >= cols. A wide M (rows < cols) is
 * decomposed through its plain transpose X = Mᵀ (cols x rows, tall), made
 * in the workspace: X = U2 S VT2 gives M = VT2ᵀ S U2ᵀ, so M's U is VT2ᵀ and
 * its Vᴴ is U2ᵀ (plain transposes: no conjugation, since Xᵀ = M exactly),
 * each transposed out of the workspace into its output by cuBLAS (geam). */
#include <limits.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"

/* The largest m and n that Jacobi takes (JAX's rule, above). */
#define DN_GESVDJ_MAX 1024

typedef union gesvdj_ptr {
  void *p;
  float *s;
  double *d;
  cuComplex *c;
  cuDoubleComplex *z;
} gesvdj_ptr;

/* cusolverDn<t>gesvdj_bufferSize, or <t>gesvdj where lwork_out is NULL. */
static cusolverStatus_t gesvdj_call(cusolverDnHandle_t h, jmg_dtype t,
                                    int vectors, int econ, int m, int n,
                                    void *A, void *S, void *U, int ldu, void *V,
                                    int ldv, void *work, int lwork, int *d_info,
                                    int *lwork_out, gesvdjInfo_t params) {
  const cusolverEigMode_t jobz =
      vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  gesvdj_ptr a = {A}, s = {S}, u = {U}, v = {V}, w = {work};
  switch (t) {
    case JMG_F32:
      return lwork_out
                 ? cusolverDnSgesvdj_bufferSize(h, jobz, econ, m, n, a.s, m,
                                                s.s, u.s, ldu, v.s, ldv,
                                                lwork_out, params)
                 : cusolverDnSgesvdj(h, jobz, econ, m, n, a.s, m, s.s, u.s, ldu,
                                     v.s, ldv, w.s, lwork, d_info, params);
    case JMG_F64:
      return lwork_out
                 ? cusolverDnDgesvdj_bufferSize(h, jobz, econ, m, n, a.d, m,
                                                s.d, u.d, ldu, v.d, ldv,
                                                lwork_out, params)
                 : cusolverDnDgesvdj(h, jobz, econ, m, n, a.d, m, s.d, u.d, ldu,
                                     v.d, ldv, w.d, lwork, d_info, params);
    case JMG_C64:
      return lwork_out
                 ? cusolverDnCgesvdj_bufferSize(h, jobz, econ, m, n, a.c, m,
                                                s.s, u.c, ldu, v.c, ldv,
                                                lwork_out, params)
                 : cusolverDnCgesvdj(h, jobz, econ, m, n, a.c, m, s.s, u.c, ldu,
                                     v.c, ldv, w.c, lwork, d_info, params);
    case JMG_C128:
      return lwork_out
                 ? cusolverDnZgesvdj_bufferSize(h, jobz, econ, m, n, a.z, m,
                                                s.d, u.z, ldu, v.z, ldv,
                                                lwork_out, params)
                 : cusolverDnZgesvdj(h, jobz, econ, m, n, a.z, m, s.d, u.z, ldu,
                                     v.z, ldv, w.z, lwork, d_info, params);
  }
  return CUSOLVER_STATUS_INVALID_VALUE;
}

/* The Jacobi path (above): a is rows x cols, both <= DN_GESVDJ_MAX. Its
 * workspace: [gesvdj's | U's scratch where U is not asked | V]. */
static int dn_gesvdj(const jmg_dist_matrix *a, void *s,
                     const jmg_dist_matrix *u, const jmg_dist_matrix *vt,
                     int full, int *info, jmg_error *err) {
  const size_t es = jmg_dtype_size(a->dtype);
  const int m = (int)a->n, n = (int)a->local_cols, k = m < n ? m : n;
  const int econ = !full;
  const int ucols = econ ? k : m, vcols = econ ? k : n;
  const int vectors = u != NULL || vt != NULL;
  static const char *const names[] = {"cusolverDn<t>gesvdj"};
  jmg_dn_call call;
  jmg_cuda_work w = {0};
  gesvdjInfo_t params = NULL;
  int lwork = 0, h_info = 0;
  *info = 0;
  int rc = jmg_dn_begin(&call, JMG_OP_GESVD, a, err);
  const jmg_cuda_call *c = &call.cuda;
  const char *op = c->op;
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnCreateGesvdjInfo(&params), op, err);
  /* U where asked, else a scratch; V always in the workspace (Vᴴ is the
   * output). Without vectors too: the routine was seen to write them then
   * (with U and V pointing into A, the singular values came out wrong:
   * bench/results/2026-11-24-h100x1-gesvd/), so they get room of their own
   * (at most 1024² each). */
  size_t solver_at = 0, u_at = 0, v_at = 0;
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(gesvdj_call(call.dn, a->dtype, vectors, econ, m, n,
                                      a->data[0], s, a->data[0], m, a->data[0],
                                      n, NULL, 0, NULL, &lwork, params),
                          op, err);
  if (rc == 0) {
    solver_at = jmg_cuda_work_part(&w, (size_t)lwork * es);
    if (u == NULL) u_at = jmg_cuda_work_part(&w, (size_t)m * ucols * es);
    v_at = jmg_cuda_work_part(&w, (size_t)n * vcols * es);
    rc = jmg_cuda_call_take(&call.cuda, &w, err);
  }
  void *d_u = u != NULL ? u->data[0] : jmg_cuda_call_part(c, u_at);
  void *d_v = jmg_cuda_call_part(c, v_at);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        gesvdj_call(call.dn, a->dtype, vectors, econ, m, n, a->data[0], s, d_u,
                    m, d_v, n, jmg_cuda_call_part(c, solver_at), lwork,
                    c->d_info, NULL, params),
        op, err);
  if (rc == 0 && vt != NULL) /* Vᴴ (vcols x n) = V (n x vcols)ᴴ */
    rc = JMG_CUBLAS_TRY(jmg_cublas_geam(call.blas, a->dtype, CUBLAS_OP_C, vcols,
                                        n, d_v, n, vt->data[0], vcols),
                        op, err);
  rc = jmg_cuda_call_info(&call.cuda, rc, &h_info, 1, names, err);
  jmg_trace_mark("gesvdj");
  *info = h_info;
  rc = jmg_dn_end(&call, rc, err); /* waits for the stream where pending */
  if (params != NULL) {
    jmg_error ignored;
    int d = JMG_CUSOLVER_TRY(cusolverDnDestroyGesvdjInfo(params), "gesvd",
                             rc == 0 ? err : &ignored);
    if (rc == 0) rc = d;
  }
  return rc;
}

int jmg_dn_gesvd_fits(int64_t m, int64_t n) {
  /* A's M x N is the routine's cols x rows: a tall A (M > N) is the wide
   * case below, transposed by cuBLAS with int sizes. */
  return m <= n || (m <= INT_MAX && n <= INT_MAX);
}

/* cusolverDnXgesvd's call on X, the matrix cuSOLVER decomposes: M (tall)
 * or Mᵀ (wide); xm >= xn. Tall: X is M itself and the factors go straight
 * to the outputs. Wide: X, its U and its Vᴴ are parts of the workspace. */
typedef struct xgesvd {
  int tall;
  int64_t rows, cols, xm, xn;
  int want_xu, want_xvt; /* which of X's factors the outputs need */
  int64_t xu_cols;       /* X's U: xm x xu_cols */
  signed char jobu, jobvt;
  void *x, *xu, *xvt;
  int64_t ldxu, ldxvt;
  size_t solver_at, solver_bytes, x_at, xu_at, xvt_at;
} xgesvd;

static xgesvd xgesvd_of(const jmg_dist_matrix *a, const jmg_dist_matrix *u,
                        const jmg_dist_matrix *vt, int full) {
  xgesvd g;
  memset(&g, 0, sizeof g);
  g.rows = a->n;
  g.cols = a->local_cols;
  g.tall = g.rows >= g.cols;
  g.xm = g.tall ? g.rows : g.cols;
  g.xn = g.tall ? g.cols : g.rows;
  g.want_xu = g.tall ? u != NULL : vt != NULL;
  g.want_xvt = g.tall ? vt != NULL : u != NULL;
  g.xu_cols = full ? g.xm : g.xn;
  g.jobu = !g.want_xu ? 'N' : full ? 'A' : 'S';
  g.jobvt = !g.want_xvt ? 'N' : 'S'; /* X's Vᴴ: xn x xn */
  g.x = a->data[0];
  g.ldxu = g.ldxvt = 1;
  if (g.tall) {
    if (g.want_xu) g.xu = u->data[0], g.ldxu = g.rows;
    if (g.want_xvt) g.xvt = vt->data[0], g.ldxvt = g.xn;
  } else {
    g.ldxu = g.want_xu ? g.xm : 1;
    g.ldxvt = g.want_xvt ? g.xn : 1;
  }
  return g;
}

/* The workspace: [cuSOLVER's | X | X's U | X's Vᴴ] (the last three wide
 * only). cuSOLVER asks for its workspace with the pointers it will get:
 * in the wide case those in the workspace are not known yet, and the query
 * does not read them. */
static int xgesvd_layout(jmg_dn_call *call, xgesvd *g, void *s,
                         jmg_cuda_work *w, jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  const size_t es = jmg_dtype_size(a->dtype);
  int rc = JMG_CUSOLVER_TRY(
      cusolverDnXgesvd_bufferSize(call->dn, call->params, g->jobu, g->jobvt,
                                  g->xm, g->xn, t, g->x, g->xm, rt, s, t, g->xu,
                                  g->ldxu, t, g->xvt, g->ldxvt, t,
                                  &g->solver_bytes, &w->host_bytes),
      call->cuda.op, err);
  g->solver_at = jmg_cuda_work_part(w, g->solver_bytes);
  if (!g->tall) {
    g->x_at = jmg_cuda_work_part(w, (size_t)g->xm * (size_t)g->xn * es);
    if (g->want_xu)
      g->xu_at = jmg_cuda_work_part(w, (size_t)g->xm * (size_t)g->xu_cols * es);
    if (g->want_xvt)
      g->xvt_at = jmg_cuda_work_part(w, (size_t)g->xn * (size_t)g->xn * es);
  }
  return rc;
}

/* Wide: X = Mᵀ, made in its part of the taken workspace. */
static int xgesvd_transpose_in(jmg_dn_call *call, xgesvd *g, jmg_error *err) {
  const jmg_cuda_call *c = &call->cuda;
  if (g->tall) return 0;
  g->x = jmg_cuda_call_part(c, g->x_at);
  if (g->want_xu) g->xu = jmg_cuda_call_part(c, g->xu_at);
  if (g->want_xvt) g->xvt = jmg_cuda_call_part(c, g->xvt_at);
  return JMG_CUBLAS_TRY(
      jmg_cublas_geam(call->blas, call->a->dtype, CUBLAS_OP_T, (int)g->cols,
                      (int)g->rows, call->a->data[0], (int)g->rows, g->x,
                      (int)g->cols),
      c->op, err);
}

/* Wide: M's Vᴴ = X's Uᵀ (vt->n x cols), M's U = X's Vᴴᵀ (rows x rows). */
static int xgesvd_transpose_out(jmg_dn_call *call, const xgesvd *g,
                                const jmg_dist_matrix *u,
                                const jmg_dist_matrix *vt, jmg_error *err) {
  const jmg_dtype t = call->a->dtype;
  int rc = 0;
  if (g->tall) return 0;
  if (vt != NULL)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_geam(call->blas, t, CUBLAS_OP_T, (int)g->xu_cols, (int)g->xm,
                        g->xu, (int)g->xm, vt->data[0], (int)g->xu_cols),
        call->cuda.op, err);
  if (rc == 0 && u != NULL)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_geam(call->blas, t, CUBLAS_OP_T, (int)g->xn, (int)g->xn,
                        g->xvt, (int)g->xn, u->data[0], (int)g->rows),
        call->cuda.op, err);
  return rc;
}

int jmg_dn_gesvd(const jmg_engine *e, const jmg_dist_matrix *a, void *s,
                 const jmg_dist_matrix *u, const jmg_dist_matrix *vt, int full,
                 int *info, jmg_error *err) {
  (void)e;
  if (a->n <= DN_GESVDJ_MAX && a->local_cols <= DN_GESVDJ_MAX)
    return dn_gesvdj(a, s, u, vt, full, info, err);
  static const char *const names[] = {"cusolverDnXgesvd"};
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  xgesvd g = xgesvd_of(a, u, vt, full);
  jmg_dn_call call;
  jmg_cuda_work w = {0};
  int h_info = 0;
  *info = 0;
  int rc = jmg_dn_begin(&call, JMG_OP_GESVD, a, err);
  const jmg_cuda_call *c = &call.cuda;
  if (rc == 0 && !jmg_dn_gesvd_fits(g.cols, g.rows))
    rc = jmg_error_set(err, JMG_EINVAL, c->op, "cuBLAS",
                       "a wide %lld x %lld matrix is transposed by cuBLAS, "
                       "whose sizes are 32-bit ints",
                       (long long)g.rows, (long long)g.cols);
  if (rc == 0) rc = xgesvd_layout(&call, &g, s, &w, err);
  if (rc == 0) rc = jmg_cuda_call_take(&call.cuda, &w, err);
  if (rc == 0) rc = xgesvd_transpose_in(&call, &g, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgesvd(call.dn, call.params, g.jobu, g.jobvt, g.xm, g.xn, t,
                         g.x, g.xm, rt, s, t, g.xu, g.ldxu, t, g.xvt, g.ldxvt,
                         t, jmg_cuda_call_part(c, g.solver_at), g.solver_bytes,
                         c->host_work, c->host_bytes, c->d_info),
        c->op, err);
  if (rc == 0) rc = xgesvd_transpose_out(&call, &g, u, vt, err);
  rc = jmg_cuda_call_info(&call.cuda, rc, &h_info, 1, names, err);
  jmg_trace_mark("gesvd");
  *info = h_info;
  return jmg_dn_end(&call, rc, err);
}
