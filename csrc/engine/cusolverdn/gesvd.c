/* gesvd with cuSOLVERDn: cusolverDnXgesvd (the 64-bit API) on the one GPU
 * (dn.h), the singular values straight into s (device memory), U and Vᴴ
 * straight into the outputs when the matrix is tall.
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

int jmg_dn_gesvd(const jmg_engine *e, const jmg_dist_matrix *a, void *s,
                 const jmg_dist_matrix *u, const jmg_dist_matrix *vt, int full,
                 int *info, jmg_error *err) {
  (void)e;
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
  if (rc == 0 && !tall && (rows > INT_MAX || cols > INT_MAX))
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
        cusolverDnXgesvd_bufferSize(call.dn, call.h->dn_params, jobu, jobvt, xm,
                                    xn, t, x, xm, rt, s, t, xu, ldxu, t, xvt,
                                    ldxvt, t, &dev_bytes, &host_bytes),
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
        cusolverDnXgesvd(call.dn, call.h->dn_params, jobu, jobvt, xm, xn, t, x,
                         xm, rt, s, t, xu, ldxu, t, xvt, ldxvt, t, call.work,
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
