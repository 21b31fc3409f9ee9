/* The Cholesky factorization that potrs and potri share (dn.h): the 64-bit
 * cusolverDnXpotrf on the lower triangle, in place. */
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"

int jmg_dn_potrf_workspace(jmg_dn_call *call, size_t *device_bytes,
                           size_t *host_bytes, jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  *device_bytes = *host_bytes = 0;
  return JMG_CUSOLVER_TRY(
      cusolverDnXpotrf_bufferSize(call->dn, call->params,
                                  CUBLAS_FILL_MODE_LOWER, a->n, t, call->a_data,
                                  a->n, t, device_bytes, host_bytes),
      call->cuda.op, err);
}

int jmg_dn_potrf(jmg_dn_call *call, void *work, size_t work_bytes, int slot,
                 jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const jmg_cuda_call *c = &call->cuda;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  /* A matrix that is not positive definite is not a failed status: info > 0
   * in the info word, read with the others at the end. */
  return JMG_CUSOLVER_TRY(
      cusolverDnXpotrf(call->dn, call->params, CUBLAS_FILL_MODE_LOWER, a->n, t,
                       call->a_data, a->n, t, work, work_bytes, c->host_work,
                       c->host_bytes, c->d_info + slot),
      c->op, err);
}
