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

/* [getrf's workspace | the pivots (n int64)], and getrf's host bytes. */
typedef struct lu_layout {
  size_t getrf_at, getrf_bytes, piv_at;
} lu_layout;

static int layout(jmg_dn_call *call, jmg_cuda_work *w, lu_layout *l,
                  jmg_error *err) {
  const int64_t n = call->a->n;
  const cudaDataType t = jmg_cuda_data_type(call->a->dtype);
  int rc = JMG_CUSOLVER_TRY(
      cusolverDnXgetrf_bufferSize(call->dn, call->params, n, n, t, call->a_data,
                                  n, t, &l->getrf_bytes, &w->host_bytes),
      call->cuda.op, err);
  l->getrf_at = jmg_cuda_work_part(w, l->getrf_bytes);
  l->piv_at = jmg_cuda_work_part(w, (size_t)n * sizeof(int64_t));
  /* getrf is given its part up to the pivots. */
  l->getrf_bytes = l->piv_at - l->getrf_at;
  return rc;
}

int jmg_dn_lu_solve_query(jmg_dn_call *call, const jmg_workspace_query *q,
                          size_t *bytes, jmg_error *err) {
  (void)q;
  jmg_cuda_work w = {0};
  lu_layout l;
  int rc = layout(call, &w, &l, err);
  *bytes = jmg_cuda_work_alloc_bytes(&w);
  return rc;
}

int jmg_dn_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  (void)e;
  static const char *const names[] = {"cusolverDnXgetrf", "cusolverDnXgetrs"};
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  const int64_t n = a->n;
  jmg_dn_call call;
  jmg_cuda_work w = {0};
  lu_layout l = {0};
  int h_info[2] = {0, 0};
  *info = 0;
  int rc = jmg_dn_begin(&call, JMG_OP_LU_SOLVE, a, err);
  const jmg_cuda_call *c = &call.cuda;
  if (rc == 0) rc = layout(&call, &w, &l, err);
  if (rc == 0) rc = jmg_cuda_call_take(&call.cuda, &w, err);
  int64_t *ipiv = jmg_cuda_call_part(c, l.piv_at);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgetrf(call.dn, call.params, n, n, t, call.a_data, n, ipiv, t,
                         jmg_cuda_call_part(c, l.getrf_at), l.getrf_bytes,
                         c->host_work, c->host_bytes, c->d_info),
        c->op, err);
  if (rc == 0 && nrhs > 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgetrs(call.dn, call.params,
                         transpose ? CUBLAS_OP_T : CUBLAS_OP_N, n, nrhs, t,
                         call.a_data, n, ipiv, t, b, n, c->d_info + 1),
        c->op, err);
  rc = jmg_cuda_call_info(&call.cuda, rc, h_info, nrhs > 0 ? 2 : 1, names, err);
  jmg_trace_mark("getrf+getrs");
  if (rc == 0) *info = h_info[0];
  return jmg_dn_end(&call, rc, err);
}
