#include "cuda/check.h"

#include <stdio.h>
#include <string.h>

/* Keeps "cudaSetDevice(d)" of "cudaSetDevice(d)" but cuts long argument
 * lists: the function name is what identifies the call. */
static void call_name(const char *call, char *out, size_t len) {
  snprintf(out, len, "%s", call);
  char *paren = strchr(out, '(');
  if (paren != NULL) *paren = '\0';
}

int jmg_cuda_check(cudaError_t rc, const char *op, const char *call,
                   jmg_error *err) {
  if (rc == cudaSuccess) return 0;
  char name[JMG_ERROR_CALL_LEN];
  call_name(call, name, sizeof name);
  (void)cudaGetLastError(); /* clear the sticky-free error state */
  return jmg_error_set(err, JMG_ECUDA, op, name, "%s (%s)",
                       cudaGetErrorString(rc), cudaGetErrorName(rc));
}

const char *jmg_cusolver_status_name(cusolverStatus_t rc) {
  switch (rc) {
    case CUSOLVER_STATUS_NOT_INITIALIZED:
      return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED:
      return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE:
      return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH:
      return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_MAPPING_ERROR:
      return "CUSOLVER_STATUS_MAPPING_ERROR";
    case CUSOLVER_STATUS_EXECUTION_FAILED:
      return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR:
      return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED:
      return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSOLVER_STATUS_NOT_SUPPORTED:
      return "CUSOLVER_STATUS_NOT_SUPPORTED";
    case CUSOLVER_STATUS_INVALID_WORKSPACE:
      return "CUSOLVER_STATUS_INVALID_WORKSPACE";
    default:
      return "CUSOLVER_STATUS_?";
  }
}

int jmg_cusolver_check(cusolverStatus_t rc, const char *op, const char *call,
                       jmg_error *err) {
  if (rc == CUSOLVER_STATUS_SUCCESS) return 0;
  char name[JMG_ERROR_CALL_LEN];
  call_name(call, name, sizeof name);
  return jmg_error_set(err, JMG_ECUSOLVER, op, name, "%s (%d)",
                       jmg_cusolver_status_name(rc), (int)rc);
}

int jmg_cublas_check(cublasStatus_t rc, const char *op, const char *call,
                     jmg_error *err) {
  if (rc == CUBLAS_STATUS_SUCCESS) return 0;
  char name[JMG_ERROR_CALL_LEN];
  call_name(call, name, sizeof name);
  return jmg_error_set(err, JMG_ECUDA, op, name, "%s (%d)",
                       cublasGetStatusString(rc), (int)rc);
}
