/* potrs with cuSOLVERDn: cusolverDnXpotrf, then cusolverDnXpotrs on B in
 * place (dn.h), and the factor's diagonal when asked. One wait, at the end: the
 * solve runs whatever the factorization found, and the ops layer replaces X by
 * NaN when it was not positive definite. */
#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"

int jmg_dn_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  const char *op = "potrs";
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  static const char *const names[] = {"cusolverDnXpotrf", "cusolverDnXpotrs"};
  jmg_dn_call call;
  size_t dev_bytes = 0, host_bytes = 0;
  int h_info[2] = {0, 0};
  int rc = jmg_dn_begin_call(&call, op, a, err);
  if (rc == 0) rc = jmg_dn_potrf_workspace(&call, &dev_bytes, &host_bytes, err);
  if (rc == 0) rc = jmg_dn_take_workspace(&call, dev_bytes, host_bytes, err);
  jmg_trace_mark("workspace");
  if (rc == 0) rc = jmg_dn_potrf(&call, 0, err);
  /* The diagonal's real parts (the first member of a complex element), one
   * strided copy on the stream, finished by the wait below. */
  const size_t elem = jmg_dtype_size(a->dtype);
  const size_t rsize = jmg_dtype_real_size(a->dtype);
  if (rc == 0 && diag != NULL)
    rc = JMG_CUDA_TRY(
        cudaMemcpy2DAsync(diag, rsize, call.a_data, ((size_t)a->n + 1) * elem,
                          rsize, (size_t)a->n, cudaMemcpyDeviceToHost,
                          call.stream),
        op, err);
  if (rc == 0 && nrhs > 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXpotrs(call.dn, call.params, CUBLAS_FILL_MODE_LOWER, a->n,
                         nrhs, t, call.a_data, a->n, t, b, a->n,
                         call.d_info + 1),
        op, err);
  if (rc == 0)
    rc = jmg_dn_read_info(&call, h_info, nrhs > 0 ? 2 : 1, names, err);
  jmg_trace_mark("potrf+potrs");
  *info = h_info[0];
  jmg_dn_end_call(&call);
  return rc;
}
