/* The Cholesky factorization and the chunked solve that potrs and potri
 * share (mg.h). */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolvermg/cuda_potrf.h"
#include "engine/cusolvermg/mg.h"

/* Which factorization potrs and potri use. cusolverMgPotrf returns a wrong
 * factor when other processes run work on the same GPUs (which a 4-process
 * MPMD job does to itself; docs/gpu-notes.md), so the default is the tiled
 * one of cuda_potrf.h. JAXMG_POTRF=cusolvermg selects cuSOLVERMg's, for
 * comparison on GPUs that are not shared. */
static int potrf_choice(const char *op, int *use_mg, int *pipeline,
                        jmg_error *err) {
  jmg_config c;
  jmg_config_read(&c);
  const char *env = c.potrf;
  *use_mg = 0;
  /* JAXMG_POTRF_PIPELINE, read once for the workspace and the call. */
  *pipeline = c.potrf_pipeline;
  if (*env == '\0' || strcmp(env, "tiles") == 0) return 0;
  if (strcmp(env, "cusolvermg") == 0) {
    *use_mg = 1;
    return 0;
  }
  return jmg_error_set(err, JMG_EINVAL, op, "JAXMG_POTRF",
                       "\"%s\" is not a factorization: use \"tiles\" (the "
                       "default) or \"cusolvermg\"",
                       env);
}

static jmg_cuda_potrf_handles potrf_handles(const jmg_cuda_handles *c) {
  jmg_cuda_potrf_handles h = {c->blas, c->dn, c->dn_params};
  return h;
}

/* The factorization's workspace, in elements of the matrix's type. With
 * the pipeline it holds a second panel buffer; where that does not fit the
 * call fails with JMG_ENOMEM as any other (no fallback to one buffer). */
static int factor_workspace(jmg_mg_call *call, cudaLibMgMatrixDesc_t desc_a,
                            int use_mg, int pipeline, int64_t *lwork,
                            jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  if (use_mg)
    return JMG_CUSOLVER_TRY(
        cusolverMgPotrf_bufferSize(call->ctx->handle, CUBLAS_FILL_MODE_LOWER,
                                   (int)a->n, call->a_ptrs, 1, 1, desc_a, t,
                                   lwork),
        call->cuda.op, err);
  const jmg_cuda_potrf_handles h = potrf_handles(call->cuda.h);
  size_t bytes = 0;
  int rc =
      jmg_cuda_potrf_workspace(a, &h, pipeline, &bytes, call->cuda.op, err);
  const size_t es = jmg_dtype_size(a->dtype);
  *lwork = (int64_t)((bytes + es - 1) / es);
  return rc;
}

/* potrf. A matrix that is not positive definite is data, not an error:
 * h_info > 0 (the failing leading minor). cuSOLVERMg reports it through a
 * failed status with h_info set. */
static int factor(jmg_mg_call *call, cudaLibMgMatrixDesc_t desc_a, int use_mg,
                  int pipeline, int *h_info, jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  *h_info = 0;
  if (!use_mg) {
    const jmg_cuda_potrf_handles h = potrf_handles(call->cuda.h);
    int64_t info = 0;
    int rc = jmg_cuda_potrf(a, &h, pipeline, call->work, &info,
                            call->cuda.op, err);
    *h_info = (int)info;
    return rc;
  }
  cusolverStatus_t s = cusolverMgPotrf(
      call->ctx->handle, CUBLAS_FILL_MODE_LOWER, (int)a->n, call->a_ptrs, 1, 1,
      desc_a, jmg_cuda_data_type(a->dtype), call->work,
      (int64_t)(call->work_bytes / jmg_dtype_size(a->dtype)), h_info);
  if (s != CUSOLVER_STATUS_SUCCESS && *h_info > 0) return 0;
  return jmg_cusolver_check(s, call->cuda.op, "cusolverMgPotrf", err);
}

int jmg_mg_solve_chunked(jmg_mg_call *call, cudaLibMgMatrixDesc_t desc_a,
                         void *b, int64_t nrhs, void *const *other, int *h_info,
                         jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  const size_t es = jmg_dtype_size(a->dtype);
  void *b_ptrs[JMG_MG_MAX_DEVICES];
  for (int d = 0; d < a->ndev; ++d) b_ptrs[d] = other[d];
  *h_info = 0;
  for (int64_t c = 0; c < nrhs && *h_info == 0; c += JMG_MG_MAX_RHS_CHUNK) {
    const int k = (int)(nrhs - c < JMG_MG_MAX_RHS_CHUNK ? nrhs - c
                                                        : JMG_MG_MAX_RHS_CHUNK);
    cudaLibMgMatrixDesc_t desc_b = NULL;
    b_ptrs[0] = (char *)b + (size_t)c * (size_t)a->n * es;
    int rc = jmg_mg_descriptor(call, a->n, k, k, t, &desc_b, err);
    if (rc == 0)
      rc = JMG_CUSOLVER_TRY(
          cusolverMgPotrs(call->ctx->handle, CUBLAS_FILL_MODE_LOWER, (int)a->n,
                          k, call->a_ptrs, 1, 1, desc_a, b_ptrs, 1, 1, desc_b,
                          t, call->work, (int64_t)(call->work_bytes / es),
                          h_info),
          call->cuda.op, err);
    if (rc == 0) rc = jmg_mg_sync_devices(a, call->cuda.op, err);
    if (rc == 0)
      rc = jmg_cuda_call_check_info(&call->cuda, *h_info, "cusolverMgPotrs",
                                    err);
    if (rc != 0) return rc;
  }
  return 0;
}

/* The workspace potrs needs for chunks of up to nrhs right-hand sides. */
static int solve_workspace(jmg_mg_call *call, cudaLibMgMatrixDesc_t desc_a,
                           int64_t nrhs, void *const *b, int64_t *lwork,
                           jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const int k =
      (int)(nrhs < JMG_MG_MAX_RHS_CHUNK ? nrhs : JMG_MG_MAX_RHS_CHUNK);
  void *b_ptrs[JMG_MG_MAX_DEVICES];
  for (int d = 0; d < a->ndev; ++d) b_ptrs[d] = b[d];
  cudaLibMgMatrixDesc_t desc_b = NULL;
  *lwork = 0;
  if (k < 1) return 0;
  int rc = jmg_mg_descriptor(call, a->n, k, k, jmg_cuda_data_type(a->dtype),
                             &desc_b, err);
  if (rc == 0)
    rc =
        JMG_CUSOLVER_TRY(cusolverMgPotrs_bufferSize(
                             call->ctx->handle, CUBLAS_FILL_MODE_LOWER,
                             (int)a->n, k, call->a_ptrs, 1, 1, desc_a, b_ptrs,
                             1, 1, desc_b, jmg_cuda_data_type(a->dtype), lwork),
                         call->cuda.op, err);
  return rc;
}

int jmg_mg_factor_for_solve(jmg_mg_call *call, void *const *b, int64_t nrhs,
                            cudaLibMgMatrixDesc_t *desc_a, int *h_info,
                            jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  int64_t lw_potrf = 0, lw_potrs = 0;
  int use_mg = 0, pipeline = 0;
  *h_info = 0;
  int rc = potrf_choice(call->cuda.op, &use_mg, &pipeline, err);
  if (rc == 0)
    rc = jmg_mg_descriptor(call, a->n, a->n, a->tile, t, desc_a, err);
  if (rc == 0)
    rc = factor_workspace(call, *desc_a, use_mg, pipeline, &lw_potrf, err);
  if (rc == 0) rc = solve_workspace(call, *desc_a, nrhs, b, &lw_potrs, err);
  if (rc == 0)
    rc = jmg_mg_take_workspace(call, lw_potrf > lw_potrs ? lw_potrf : lw_potrs,
                               err);
  if (rc == 0) rc = factor(call, *desc_a, use_mg, pipeline, h_info, err);
  if (rc == 0) rc = jmg_mg_sync_devices(a, call->cuda.op, err);
  jmg_trace_mark("potrf");
  if (rc == 0)
    rc = jmg_cuda_call_check_info(&call->cuda, *h_info, "potrf", err);
  return rc;
}
