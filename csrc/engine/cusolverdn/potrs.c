/* potrs with cuSOLVERDn: cusolverDnXpotrf, then cusolverDnXpotrs on B in
 * place (dn.h), and the factor's diagonal when asked. One wait, at the end:
 * the solve runs whatever the factorization found, and the ops layer
 * replaces X by NaN when it was not positive definite. */
#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"

/* [potrf's workspace], and cuSOLVER's host workspace. */
static int layout(jmg_dn_call *call, jmg_cuda_work *w, size_t *potrf_at,
                  size_t *potrf_bytes, jmg_error *err) {
  int rc = jmg_dn_potrf_workspace(call, potrf_bytes, &w->host_bytes, err);
  *potrf_at = jmg_cuda_work_part(w, *potrf_bytes);
  return rc;
}

int jmg_dn_potrs_query(jmg_dn_call *call, const jmg_workspace_query *q,
                       size_t *bytes, jmg_error *err) {
  (void)q;
  jmg_cuda_work w = {0};
  size_t at = 0, potrf = 0;
  int rc = layout(call, &w, &at, &potrf, err);
  *bytes = jmg_cuda_work_alloc_bytes(&w);
  return rc;
}

int jmg_dn_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  static const char *const names[] = {"cusolverDnXpotrf", "cusolverDnXpotrs"};
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  jmg_dn_call call;
  jmg_cuda_work w = {0};
  size_t potrf_at = 0, potrf_bytes = 0;
  int h_info[2] = {0, 0};
  int rc = jmg_dn_begin(&call, JMG_OP_POTRS, a, err);
  const jmg_cuda_call *c = &call.cuda;
  if (rc == 0) rc = layout(&call, &w, &potrf_at, &potrf_bytes, err);
  if (rc == 0) rc = jmg_cuda_call_take(&call.cuda, &w, err);
  if (rc == 0)
    rc = jmg_dn_potrf(&call, jmg_cuda_call_part(c, potrf_at), potrf_bytes, 0,
                      err);
  /* The diagonal's real parts (the first member of a complex element), one
   * strided copy on the stream, finished by the wait below. */
  const size_t elem = jmg_dtype_size(a->dtype);
  const size_t rsize = jmg_dtype_real_size(a->dtype);
  if (rc == 0 && diag != NULL)
    rc = JMG_CUDA_TRY(
        cudaMemcpy2DAsync(diag, rsize, call.a_data, ((size_t)a->n + 1) * elem,
                          rsize, (size_t)a->n, cudaMemcpyDeviceToHost,
                          c->stream),
        c->op, err);
  if (rc == 0 && nrhs > 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXpotrs(call.dn, call.params, CUBLAS_FILL_MODE_LOWER, a->n,
                         nrhs, t, call.a_data, a->n, t, b, a->n, c->d_info + 1),
        c->op, err);
  rc = jmg_cuda_call_info(&call.cuda, rc, h_info, nrhs > 0 ? 2 : 1, names, err);
  jmg_trace_mark("potrf+potrs");
  *info = h_info[0];
  return jmg_dn_end(&call, rc, err);
}
