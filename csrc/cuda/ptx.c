/* Loading jaxmg's PTX kernels (cuda/ptx.h). */
#include "cuda/ptx.h"

#include <pthread.h>
#include <stdio.h>

#include "cuda/check.h"

/* One lock for every set: a load happens once per set and process, and
 * later calls only read what it left. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void load(jmg_ptx_set *s) {
  cudaLibrary_t lib;
  snprintf(s->failed, sizeof s->failed, "cudaLibraryLoadData (%s)", s->what);
  s->status = cudaLibraryLoadData(&lib, s->ptx, NULL, NULL, 0, NULL, NULL, 0);
  for (int i = 0; s->status == cudaSuccess && i < s->count; ++i) {
    snprintf(s->failed, sizeof s->failed, "cudaLibraryGetKernel (%s)",
             s->names[i]);
    s->status = cudaLibraryGetKernel(&s->kernels[i], lib, s->names[i]);
  }
}

int jmg_ptx_get(jmg_ptx_set *set, const char *op, jmg_error *err) {
  int rc = pthread_mutex_lock(&g_lock);
  if (rc != 0)
    return jmg_error_set(err, JMG_EINTERNAL, op, "pthread_mutex_lock",
                         "loading %s failed (%d)", set->what, rc);
  if (!set->tried) {
    load(set);
    set->tried = 1;
  }
  const cudaError_t status = set->status;
  (void)pthread_mutex_unlock(&g_lock);
  return jmg_cuda_check(status, op, set->failed, err);
}

int jmg_ptx_launch(const jmg_ptx_set *set, int i, dim3 grid, dim3 block,
                   void **args, cudaStream_t stream, const char *op,
                   jmg_error *err) {
  const cudaError_t rc = cudaLaunchKernel((const void *)set->kernels[i], grid,
                                          block, args, 0, stream);
  if (rc == cudaSuccess) return 0;
  char call[96];
  snprintf(call, sizeof call, "cudaLaunchKernel (%s)", set->names[i]);
  return jmg_cuda_check(rc, op, call, err);
}
