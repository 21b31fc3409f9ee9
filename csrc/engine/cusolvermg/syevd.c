/* syevd with cuSOLVERMg: eigenvalues (through host memory, where
 * cuSOLVERMg returns them) and eigenvectors in place, block-cyclic (mg.h). */
#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolvermg/mg.h"

int jmg_mg_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err) {
  (void)e;
  jmg_mg_call call;
  int rc = jmg_mg_begin(&call, JMG_OP_SYEVD, a, err);
  jmg_cuda_call *c = &call.cuda;
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  const int n = (int)a->n;
  const cusolverEigMode_t jobz =
      want_vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const size_t w_bytes = (size_t)a->n * jmg_dtype_real_size(a->dtype);
  /* cuSOLVERMg returns the eigenvalues in host memory. */
  void *w_host = NULL;
  cudaLibMgMatrixDesc_t desc_a = NULL;
  int64_t lwork = 0;
  if (rc == 0) rc = jmg_cuda_call_buffer(c, JMG_HOST, w_bytes, &w_host, err);
  if (rc == 0)
    rc = jmg_mg_descriptor(&call, a->n, a->n, a->tile, t, &desc_a, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverMgSyevd_bufferSize(
                              call.ctx->handle, jobz, CUBLAS_FILL_MODE_LOWER, n,
                              call.a_ptrs, 1, 1, desc_a, w_host, rt, t, &lwork),
                          c->op, err);
  if (rc == 0) rc = jmg_mg_take_workspace(&call, lwork, err);
  int h_info = 0;
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverMgSyevd(call.ctx->handle, jobz, CUBLAS_FILL_MODE_LOWER, n,
                        call.a_ptrs, 1, 1, desc_a, w_host, rt, t, call.work,
                        (int64_t)(call.work_bytes / jmg_dtype_size(a->dtype)),
                        &h_info),
        c->op, err);
  if (rc == 0) rc = jmg_mg_sync_devices(a, c->op, err);
  jmg_trace_mark("syevd");
  if (rc == 0) rc = jmg_cuda_call_check_info(c, h_info, "cusolverMgSyevd", err);
  if (rc == 0 && h_info == 0) {
    rc = c->mem->copy(&c->group, w, 0, w_host, JMG_HOST, w_bytes, err);
    if (rc == 0) rc = c->mem->sync(&c->group, err);
  }
  *info = h_info;
  return jmg_mg_end(&call, rc, err);
}
