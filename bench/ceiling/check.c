/* Element types and the return-code checks of every library call. */
#include <stdio.h>
#include <string.h>

#include "ceiling.h"
#include "cuda/check.h"

/* "cudaSetDevice(c->dev[d])" -> "cudaSetDevice": the function names the call.
 */
static const char *name_of(const char *call, char *buf, size_t len) {
  snprintf(buf, len, "%s", call);
  char *paren = strchr(buf, '(');
  if (paren != NULL) *paren = '\0';
  return buf;
}

static const dtype_info g_dtypes[] = {
    [DT_F32] = {"float32", 4, 0, CUDA_R_32F, CUDA_R_32F, 0x1p-23},
    [DT_F64] = {"float64", 8, 0, CUDA_R_64F, CUDA_R_64F, 0x1p-52},
    [DT_C64] = {"complex64", 8, 1, CUDA_C_32F, CUDA_R_32F, 0x1p-23},
    [DT_C128] = {"complex128", 16, 1, CUDA_C_64F, CUDA_R_64F, 0x1p-52},
};

const dtype_info *dtype_of(dtype_t t) { return &g_dtypes[t]; }

int dtype_parse(const char *s, dtype_t *out) {
  for (size_t i = 0; i < sizeof g_dtypes / sizeof g_dtypes[0]; ++i)
    if (strcmp(s, g_dtypes[i].name) == 0) {
      *out = (dtype_t)i;
      return 0;
    }
  return -1;
}

int check_cuda(cudaError_t rc, const char *call) {
  if (rc == cudaSuccess) return 0;
  char name[64];
  fprintf(stderr, "ceiling: %s failed: %s (%s)\n",
          name_of(call, name, sizeof name), cudaGetErrorString(rc),
          cudaGetErrorName(rc));
  /* Clears a non-sticky error so that later cases can run. */
  (void)cudaGetLastError();
  return -1;
}

int check_solver(cusolverStatus_t rc, const char *call) {
  if (rc == CUSOLVER_STATUS_SUCCESS) return 0;
  char name[64];
  fprintf(stderr, "ceiling: %s failed: %s (%d)\n",
          name_of(call, name, sizeof name), jmg_cusolver_status_name(rc),
          (int)rc);
  return -1;
}

int check_blas(cublasStatus_t rc, const char *call) {
  if (rc == CUBLAS_STATUS_SUCCESS) return 0;
  char name[64];
  fprintf(stderr, "ceiling: %s failed: %s (%d)\n",
          name_of(call, name, sizeof name), cublasGetStatusString(rc), (int)rc);
  return -1;
}

int check_rand(curandStatus_t rc, const char *call) {
  if (rc == CURAND_STATUS_SUCCESS) return 0;
  char name[64];
  fprintf(stderr, "ceiling: %s failed: curandStatus %d\n",
          name_of(call, name, sizeof name), (int)rc);
  return -1;
}
