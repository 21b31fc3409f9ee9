/* syevd with cuSOLVERDn: cusolverDnXsyevd on the lower triangle, the
 * eigenvalues straight into w (device memory), the eigenvectors in place of A
 * (dn.h). */
#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"

static cusolverEigMode_t jobz(int want_vectors) {
  return want_vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
}

int jmg_dn_syevd_workspace(jmg_dn_call *call, int want_vectors, void *w,
                           size_t *device_bytes, size_t *host_bytes,
                           jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  *device_bytes = *host_bytes = 0;
  return JMG_CUSOLVER_TRY(
      cusolverDnXsyevd_bufferSize(call->dn, call->params, jobz(want_vectors),
                                  CUBLAS_FILL_MODE_LOWER, a->n, t, call->a_data,
                                  a->n, rt, w, t, device_bytes, host_bytes),
      call->op, err);
}

int jmg_dn_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err) {
  (void)e;
  const char *op = "syevd";
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  static const char *const names[] = {"cusolverDnXsyevd"};
  jmg_dn_call call;
  size_t dev_bytes = 0, host_bytes = 0;
  int h_info = 0;
  int rc = jmg_dn_begin_call(&call, op, a, err);
  if (rc == 0)
    rc = jmg_dn_syevd_workspace(&call, want_vectors, w, &dev_bytes, &host_bytes,
                                err);
  if (rc == 0) rc = jmg_dn_take_workspace(&call, dev_bytes, host_bytes, err);
  jmg_trace_mark("workspace");
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXsyevd(call.dn, call.params, jobz(want_vectors),
                         CUBLAS_FILL_MODE_LOWER, a->n, t, call.a_data, a->n, rt,
                         w, t, call.work, call.work_bytes, call.host_work,
                         call.host_bytes, call.d_info),
        op, err);
  if (rc == 0) rc = jmg_dn_read_info(&call, &h_info, 1, names, err);
  jmg_trace_mark("syevd");
  *info = h_info;
  jmg_dn_end_call(&call);
  return rc;
}
