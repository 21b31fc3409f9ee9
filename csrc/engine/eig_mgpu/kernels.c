/* Loading the multi-GPU eigensolver's kernels (kernels.h). */
#include "engine/eig_mgpu/kernels.h"

#include <pthread.h>

#include "cuda/check.h"
#include "engine/eig_mgpu/kernels_ptx.h"

static struct {
  pthread_once_t once;
  cudaError_t status; /* of the load */
  const char *failed; /* the call that failed */
  jmg_trd_kernels k;
} g = {.once = PTHREAD_ONCE_INIT};

static int get(cudaLibrary_t lib, cudaKernel_t *k, const char *name,
               const char *what) {
  g.failed = what;
  g.status = cudaLibraryGetKernel(k, lib, name);
  return g.status == cudaSuccess;
}

static void load(void) {
  cudaLibrary_t lib;
  g.failed = "cudaLibraryLoadData (jaxmg's eigensolver kernels)";
  g.status =
      cudaLibraryLoadData(&lib, jmg_eig_mgpu_ptx, NULL, NULL, 0, NULL, NULL, 0);
  if (g.status != cudaSuccess) return;
  /* The library stays loaded for the process. */
  (void)(get(lib, &g.k.symv, "jmg_trd_symv",
             "cudaLibraryGetKernel (jmg_trd_symv)") &&
         get(lib, &g.k.update_col, "jmg_trd_update_col",
             "cudaLibraryGetKernel (jmg_trd_update_col)") &&
         get(lib, &g.k.house, "jmg_trd_house",
             "cudaLibraryGetKernel (jmg_trd_house)") &&
         get(lib, &g.k.finish_w, "jmg_trd_finish_w",
             "cudaLibraryGetKernel (jmg_trd_finish_w)") &&
         get(lib, &g.k.fix_w, "jmg_trd_fix_w",
             "cudaLibraryGetKernel (jmg_trd_fix_w)") &&
         get(lib, &g.k.gather_rows, "jmg_trd_gather_rows",
             "cudaLibraryGetKernel (jmg_trd_gather_rows)") &&
         get(lib, &g.k.make_v, "jmg_trd_make_v",
             "cudaLibraryGetKernel (jmg_trd_make_v)") &&
         get(lib, &g.k.larft, "jmg_trd_larft",
             "cudaLibraryGetKernel (jmg_trd_larft)"));
}

int jmg_trd_kernels_get(const jmg_trd_kernels **out, const char *op,
                        jmg_error *err) {
  int rc = pthread_once(&g.once, load);
  if (rc != 0)
    return jmg_error_set(err, JMG_EINTERNAL, op, "pthread_once",
                         "loading the eigensolver kernels failed (%d)", rc);
  rc = jmg_cuda_check(g.status, op, g.failed, err);
  if (rc == 0) *out = &g.k;
  return rc;
}

int jmg_trd_launch(cudaKernel_t k, dim3 grid, dim3 block, void **args,
                   cudaStream_t stream, const char *name, const char *op,
                   jmg_error *err) {
  return jmg_cuda_check(
      cudaLaunchKernel((const void *)k, grid, block, args, 0, stream), op,
      name, err);
}
