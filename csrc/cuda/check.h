/* Turning CUDA, cuBLAS and cuSOLVER return codes into jmg_errors that name
 * the op, the call and the library's own error string. */
#ifndef JMG_CUDA_CHECK_H
#define JMG_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolver_common.h>

#include "common/error.h"

/* Each returns 0 on success, else fills err and returns its negative code. */
int jmg_cuda_check(cudaError_t rc, const char *op, const char *call,
                   jmg_error *err);
/* "CUSOLVER_STATUS_INVALID_VALUE" and so on (cuSOLVER has no such function). */
const char *jmg_cusolver_status_name(cusolverStatus_t rc);
int jmg_cusolver_check(cusolverStatus_t rc, const char *op, const char *call,
                       jmg_error *err);
int jmg_cublas_check(cublasStatus_t rc, const char *op, const char *call,
                     jmg_error *err);

/* `call` is both run and named: CUDA_TRY(cudaSetDevice(d), op, err). */
#define JMG_CUDA_TRY(call, op, err) jmg_cuda_check((call), (op), #call, (err))
#define JMG_CUSOLVER_TRY(call, op, err) \
  jmg_cusolver_check((call), (op), #call, (err))
#define JMG_CUBLAS_TRY(call, op, err) \
  jmg_cublas_check((call), (op), #call, (err))

#endif
