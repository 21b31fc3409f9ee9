/* gesvd with cuSOLVERDn on the one GPU (dn.h), by the routine JAX's own
 * jnp.linalg.svd takes for the size (jax._src.lax.linalg,
 * _resolve_gpu_svd_implementation, jax 0.10: Jacobi when m and n are at
 * most 1024, else gesvd): so that jaxmg.gesvd on one GPU is not slower than
 * JAX's (an H100, float64, N = 1024: Xgesvd 0.15 s against JAX's 0.089 s,
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

#include "common/trace.h"
#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"

#define DN_GESVD_ALIGN 256

static size_t aligned(size_t bytes) {
  return (bytes + DN_GESVD_ALIGN - 1) / DN_GESVD_ALIGN * DN_GESVD_ALIGN;
}

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

/* The Jacobi path (above): a is rows x cols, both <= DN_GESVDJ_MAX. */
static int dn_gesvdj(const jmg_dist_matrix *a, void *s,
                     const jmg_dist_matrix *u, const jmg_dist_matrix *vt,
                     int full, int *info, jmg_error *err) {
  const char *op = "gesvd";
  const size_t es = jmg_dtype_size(a->dtype);
  const int m = (int)a->n, n = (int)a->local_cols, k = m < n ? m : n;
  const int econ = !full;
  const int ucols = econ ? k : m, vcols = econ ? k : n;
  const int vectors = u != NULL || vt != NULL;
  static const char *const names[] = {"cusolverDn<t>gesvdj"};
  jmg_dn_call call;
  gesvdjInfo_t params = NULL;
  int lwork = 0, h_info = 0;
  *info = 0;
  int rc = jmg_dn_begin_call(&call, op, a, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnCreateGesvdjInfo(&params), op, err);
  /* U where asked, else a scratch; V always in the workspace (Vᴴ is the
   * output). Without vectors too: the routine was seen to write them then
   * (an H100, CUDA 13.0: with U and V pointing into A, the singular values
   * came out wrong), so they get room of their own (at most 1024² each). */
  const size_t solver_off = 0;
  size_t u_off = 0, v_off = 0, total = 0;
  void *d_u = NULL, *d_v = NULL;
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(gesvdj_call(call.dn, a->dtype, vectors, econ, m, n,
                                      a->data[0], s, a->data[0], m, a->data[0],
                                      n, NULL, 0, NULL, &lwork, params),
                          op, err);
  if (rc == 0) {
    total = aligned((size_t)lwork * es);
    if (u == NULL) u_off = total, total += aligned((size_t)m * ucols * es);
    v_off = total, total += aligned((size_t)n * vcols * es);
    rc = jmg_dn_take_workspace(&call, total, 0, err);
  }
  jmg_trace_mark("workspace");
  if (rc == 0) {
    char *work = (char *)call.work;
    d_u = u != NULL ? u->data[0] : work + u_off;
    d_v = work + v_off;
    rc = JMG_CUSOLVER_TRY(
        gesvdj_call(call.dn, a->dtype, vectors, econ, m, n, a->data[0], s, d_u,
                    m, d_v, n, work + solver_off, lwork, call.d_info, NULL,
                    params),
        op, err);
  }
  if (rc == 0 && vt != NULL) { /* Vᴴ (vcols x n) = V (n x vcols)ᴴ */
    rc = JMG_CUBLAS_TRY(cublasSetStream(call.h->blas[0], call.stream), op, err);
    if (rc == 0)
      rc =
          JMG_CUBLAS_TRY(jmg_cublas_geam(call.h->blas[0], a->dtype, CUBLAS_OP_C,
                                         vcols, n, d_v, n, vt->data[0], vcols),
                         op, err);
  }
  if (rc == 0) rc = jmg_dn_read_info(&call, &h_info, 1, names, err);
  jmg_trace_mark("gesvdj");
  *info = h_info;
  jmg_dn_end_call(&call); /* waits for the stream where work is pending */
  if (params != NULL) {
    jmg_error ignored;
    int d = JMG_CUSOLVER_TRY(cusolverDnDestroyGesvdjInfo(params), op,
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

int jmg_dn_gesvd(const jmg_engine *e, const jmg_dist_matrix *a, void *s,
                 const jmg_dist_matrix *u, const jmg_dist_matrix *vt, int full,
                 int *info, jmg_error *err) {
  (void)e;
  if (a->n <= DN_GESVDJ_MAX && a->local_cols <= DN_GESVDJ_MAX)
    return dn_gesvdj(a, s, u, vt, full, info, err);
  const char *op = "gesvd";
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  const size_t es = jmg_dtype_size(a->dtype);
  const int64_t rows = a->n, cols = a->local_cols;
  const int tall = rows >= cols;
  /* X, the matrix cuSOLVER decomposes: M (tall) or Mᵀ; xm >= xn. */
  const int64_t xm = tall ? rows : cols, xn = tall ? cols : rows;
  /* Which of X's factors the outputs need (see above). */
  const int want_xu = tall ? u != NULL : vt != NULL;
  const int want_xvt = tall ? vt != NULL : u != NULL;
  const int64_t xu_cols = full ? xm : xn; /* X's U: xm x xu_cols */
  const signed char jobu = !want_xu ? 'N' : full ? 'A' : 'S';
  const signed char jobvt = !want_xvt ? 'N' : 'S'; /* X's Vᴴ: xn x xn */
  static const char *const names[] = {"cusolverDnXgesvd"};
  jmg_dn_call call;
  size_t dev_bytes = 0, host_bytes = 0;
  int h_info = 0;
  *info = 0;
  int rc = jmg_dn_begin_call(&call, op, a, err);
  if (rc == 0 && !jmg_dn_gesvd_fits(cols, rows))
    rc = jmg_error_set(err, JMG_EINVAL, op, "cuBLAS",
                       "a wide %lld x %lld matrix is transposed by cuBLAS, "
                       "whose sizes are 32-bit ints",
                       (long long)rows, (long long)cols);
  /* Tall: X is M itself and the factors go straight to the outputs. Wide:
   * X, its U and its Vᴴ live in the workspace (their offsets below). */
  const size_t x_bytes = tall ? 0 : aligned((size_t)xm * (size_t)xn * es);
  const size_t xu_bytes =
      tall || !want_xu ? 0 : aligned((size_t)xm * (size_t)xu_cols * es);
  const size_t xvt_bytes =
      tall || !want_xvt ? 0 : aligned((size_t)xn * (size_t)xn * es);
  void *x = a->data[0], *xu = NULL, *xvt = NULL;
  int64_t ldxu = 1, ldxvt = 1;
  if (tall) {
    if (want_xu) xu = u->data[0], ldxu = rows;
    if (want_xvt) xvt = vt->data[0], ldxvt = xn;
  } else {
    ldxu = want_xu ? xm : 1;
    ldxvt = want_xvt ? xn : 1;
  }
  /* cuSOLVER asks for its workspace with the pointers it will get: in the
   * wide case those in the workspace are not known yet, and the query does
   * not read them. */
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgesvd_bufferSize(call.dn, call.params, jobu, jobvt, xm, xn,
                                    t, x, xm, rt, s, t, xu, ldxu, t, xvt, ldxvt,
                                    t, &dev_bytes, &host_bytes),
        op, err);
  const size_t solver_bytes = aligned(dev_bytes);
  if (rc == 0)
    rc = jmg_dn_take_workspace(
        &call, solver_bytes + x_bytes + xu_bytes + xvt_bytes, host_bytes, err);
  jmg_trace_mark("workspace");
  if (rc == 0 && !tall) {
    char *at = (char *)call.work + solver_bytes;
    x = at;
    if (want_xu) xu = at + x_bytes;
    if (want_xvt) xvt = at + x_bytes + xu_bytes;
    rc = JMG_CUBLAS_TRY(cublasSetStream(call.h->blas[0], call.stream), op, err);
    if (rc == 0)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_geam(call.h->blas[0], a->dtype, CUBLAS_OP_T, (int)cols,
                          (int)rows, a->data[0], (int)rows, x, (int)cols),
          op, err);
  }
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgesvd(call.dn, call.params, jobu, jobvt, xm, xn, t, x, xm,
                         rt, s, t, xu, ldxu, t, xvt, ldxvt, t, call.work,
                         dev_bytes, call.host_work, call.host_bytes,
                         call.d_info),
        op, err);
  /* Wide: M's Vᴴ = X's Uᵀ (vt->n x cols), M's U = X's Vᴴᵀ (rows x rows). */
  if (rc == 0 && !tall && vt != NULL)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_geam(call.h->blas[0], a->dtype, CUBLAS_OP_T, (int)xu_cols,
                        (int)xm, xu, (int)xm, vt->data[0], (int)xu_cols),
        op, err);
  if (rc == 0 && !tall && u != NULL)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_geam(call.h->blas[0], a->dtype, CUBLAS_OP_T, (int)xn,
                        (int)xn, xvt, (int)xn, u->data[0], (int)rows),
        op, err);
  if (rc == 0) rc = jmg_dn_read_info(&call, &h_info, 1, names, err);
  jmg_trace_mark("gesvd");
  *info = h_info;
  jmg_dn_end_call(&call);
  return rc;
}
