/* lu_solve with cuSOLVERDn: cusolverDnXgetrf on the matrix in place, then
 * cusolverDnXgetrs on b in place with CUBLAS_OP_T or CUBLAS_OP_N (never
 * CUBLAS_OP_C: ops/lu_solve.c says why) (dn.h). One wait, at the end: the
 * solve runs whatever the factorization found; after a zero pivot its output
 * is garbage, which the ops layer replaces by NaN (info is data). The pivots
 * sit in the call's device workspace, after getrf's own. */
#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"

/* getrf's workspace ends, and the pivots start, at a multiple of this
 * (XLA's alignment of blocks). */
#define LU_ALIGN 256

/* [getrf's workspace | pivots (n int64)], then the frame's info words. */
int jmg_dn_lu_workspace(jmg_dn_call *call, size_t *device_bytes,
                        size_t *host_bytes, size_t *piv_at, jmg_error *err) {
  const int64_t n = call->a->n;
  const cudaDataType t = jmg_cuda_data_type(call->a->dtype);
  size_t getrf = 0;
  *host_bytes = 0;
  int rc = JMG_CUSOLVER_TRY(
      cusolverDnXgetrf_bufferSize(call->dn, call->params, n, n, t, call->a_data,
                                  n, t, &getrf, host_bytes),
      call->op, err);
  *piv_at = (getrf + LU_ALIGN - 1) / LU_ALIGN * LU_ALIGN;
  *device_bytes = *piv_at + (size_t)n * sizeof(int64_t);
  return rc;
}

int jmg_dn_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  (void)e;
  const char *op = "lu_solve";
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  static const char *const names[] = {"cusolverDnXgetrf", "cusolverDnXgetrs"};
  const int64_t n = a->n;
  jmg_dn_call call;
  size_t dev_bytes = 0, host_bytes = 0;
  int h_info[2] = {0, 0};
  *info = 0;
  size_t piv_at = 0, total = 0;
  int rc = jmg_dn_begin_call(&call, op, a, err);
  if (rc == 0)
    rc = jmg_dn_lu_workspace(&call, &total, &host_bytes, &piv_at, err);
  dev_bytes = piv_at; /* getrf's own, rounded up */
  if (rc == 0) rc = jmg_dn_take_workspace(&call, total, host_bytes, err);
  jmg_trace_mark("workspace");
  int64_t *ipiv =
      call.work != NULL ? (int64_t *)((char *)call.work + piv_at) : NULL;
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgetrf(call.dn, call.params, n, n, t, call.a_data, n, ipiv, t,
                         call.work, dev_bytes, call.host_work, call.host_bytes,
                         call.d_info),
        op, err);
  if (rc == 0 && nrhs > 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgetrs(call.dn, call.params,
                         transpose ? CUBLAS_OP_T : CUBLAS_OP_N, n, nrhs, t,
                         call.a_data, n, ipiv, t, b, n, call.d_info + 1),
        op, err);
  if (rc == 0)
    rc = jmg_dn_read_info(&call, h_info, nrhs > 0 ? 2 : 1, names, err);
  jmg_trace_mark("getrf+getrs");
  if (rc == 0) *info = h_info[0];
  jmg_dn_end_call(&call);
  return rc;
}
