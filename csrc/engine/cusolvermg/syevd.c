/* syevd with cuSOLVERMg: eigenvalues (through host memory, where
 * cuSOLVERMg returns them) and eigenvectors in place, block-cyclic (mg.h). */
#include <stdio.h>
#include <stdlib.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolvermg/mg.h"

int jmg_mg_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err) {
  (void)e;
  const char *op = "syevd";
  jmg_mg_call call;
  int rc = jmg_mg_begin_call(&call, op, a, err);
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  const int n = (int)a->n;
  const cusolverEigMode_t jobz =
      want_vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const size_t w_bytes = (size_t)a->n * jmg_dtype_real_size(a->dtype);
  /* cuSOLVERMg returns the eigenvalues in host memory. */
  void *w_host = malloc(w_bytes ? w_bytes : 1);
  cudaLibMgMatrixDesc_t desc_a = NULL;
  int64_t lwork = 0;
  if (rc == 0 && w_host == NULL)
    rc =
        jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                      "cannot allocate %zu bytes for the eigenvalues", w_bytes);
  if (rc == 0)
    rc = jmg_mg_descriptor(&call, a->n, a->n, a->tile, t, &desc_a, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverMgSyevd_bufferSize(
                              call.ctx->handle, jobz, CUBLAS_FILL_MODE_LOWER, n,
                              call.a_ptrs, 1, 1, desc_a, w_host, rt, t, &lwork),
                          op, err);
  if (rc == 0) rc = jmg_mg_take_workspace(&call, lwork, err);
  jmg_trace_mark("workspace");
  int h_info = 0;
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverMgSyevd(call.ctx->handle, jobz, CUBLAS_FILL_MODE_LOWER, n,
                        call.a_ptrs, 1, 1, desc_a, w_host, rt, t, call.work,
                        (int64_t)(call.work_bytes / jmg_dtype_size(a->dtype)),
                        &h_info),
        op, err);
  if (rc == 0) rc = jmg_mg_sync_devices(a, op, err);
  jmg_trace_mark("syevd");
  if (rc == 0) rc = jmg_mg_check_info(h_info, op, "cusolverMgSyevd", err);
  if (rc == 0 && h_info == 0) {
    rc = call.mem->copy(&call.group, w, 0, w_host, JMG_HOST, w_bytes, err);
    if (rc == 0) rc = call.mem->sync(&call.group, err);
    if (rc != 0 && err->op[0] == '\0')
      snprintf(err->op, sizeof err->op, "%s", op);
  }
  *info = h_info;
  jmg_mg_end_call(&call);
  free(w_host);
  return rc;
}
