/* The conversion kernels, loaded from PTX and launched (cuda/convert.h). */
#include "cuda/convert.h"

#include <pthread.h>

#include "cuda/check.h"
#include "cuda/convert_ptx.h"

/* The kernels, loaded once per process. */
static struct {
  pthread_once_t once;
  cudaError_t status; /* of the load: cudaSuccess, or its failure */
  const char *failed; /* the call that failed */
  cudaKernel_t narrow, widen, transpose_d, transpose_z;
} g_kernels = {.once = PTHREAD_ONCE_INIT};

static void load(void) {
  cudaLibrary_t lib;
  g_kernels.failed = "cudaLibraryLoadData (jaxmg's conversion kernels)";
  g_kernels.status =
      cudaLibraryLoadData(&lib, jmg_convert_ptx, NULL, NULL, 0, NULL, NULL, 0);
  if (g_kernels.status != cudaSuccess) return;
  /* The library stays loaded for the process: its kernels are used until
   * exit. */
  g_kernels.failed = "cudaLibraryGetKernel (jmg_narrow)";
  g_kernels.status = cudaLibraryGetKernel(&g_kernels.narrow, lib, "jmg_narrow");
  if (g_kernels.status != cudaSuccess) return;
  g_kernels.failed = "cudaLibraryGetKernel (jmg_widen)";
  g_kernels.status = cudaLibraryGetKernel(&g_kernels.widen, lib, "jmg_widen");
  if (g_kernels.status != cudaSuccess) return;
  g_kernels.failed = "cudaLibraryGetKernel (jmg_transpose_d)";
  g_kernels.status =
      cudaLibraryGetKernel(&g_kernels.transpose_d, lib, "jmg_transpose_d");
  if (g_kernels.status != cudaSuccess) return;
  g_kernels.failed = "cudaLibraryGetKernel (jmg_transpose_z)";
  g_kernels.status =
      cudaLibraryGetKernel(&g_kernels.transpose_z, lib, "jmg_transpose_z");
}

static int kernels(const char *op, jmg_error *err) {
  int rc = pthread_once(&g_kernels.once, load);
  if (rc != 0)
    return jmg_error_set(err, JMG_EINTERNAL, op, "pthread_once",
                         "loading the conversion kernels failed (%d)", rc);
  return jmg_cuda_check(g_kernels.status, op, g_kernels.failed, err);
}

/* Threads and blocks of a grid-stride launch over count reals: 256 a block,
 * at most 65535 blocks (each thread takes several elements beyond). */
static void shape(size_t count, dim3 *grid, dim3 *block) {
  size_t blocks = (count + 255) / 256;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535) blocks = 65535;
  *grid = (dim3){(unsigned)blocks, 1, 1};
  *block = (dim3){256, 1, 1};
}

static size_t reals(jmg_dtype dtype, size_t count) {
  return jmg_dtype_is_complex(dtype) ? 2 * count : count;
}

int jmg_cuda_narrow(jmg_dtype dtype, const void *src, void *dst, size_t count,
                    int *overflow, cudaStream_t stream, const char *op,
                    jmg_error *err) {
  int rc = kernels(op, err);
  if (rc != 0 || count == 0) return rc;
  unsigned long long n = (unsigned long long)reals(dtype, count);
  void *args[] = {&src, &dst, &n, &overflow};
  dim3 grid, block;
  shape((size_t)n, &grid, &block);
  return JMG_CUDA_TRY(cudaLaunchKernel((const void *)g_kernels.narrow, grid,
                                       block, args, 0, stream),
                      op, err);
}

int jmg_cuda_widen(jmg_dtype dtype, const void *src, void *dst, size_t count,
                   int add, cudaStream_t stream, const char *op,
                   jmg_error *err) {
  int rc = kernels(op, err);
  if (rc != 0 || count == 0) return rc;
  unsigned long long n = (unsigned long long)reals(dtype, count);
  void *args[] = {&src, &dst, &n, &add};
  dim3 grid, block;
  shape((size_t)n, &grid, &block);
  return JMG_CUDA_TRY(cudaLaunchKernel((const void *)g_kernels.widen, grid,
                                       block, args, 0, stream),
                      op, err);
}

int jmg_cuda_transpose_square(jmg_dtype dtype, void *a, int64_t n,
                              cudaStream_t stream, const char *op,
                              jmg_error *err) {
  if (dtype != JMG_F64 && dtype != JMG_C128)
    return jmg_error_set(err, JMG_EINTERNAL, op, "jmg_cuda_transpose_square",
                         "only float64 and complex128 are transposed, not %s",
                         jmg_dtype_name(dtype));
  int rc = kernels(op, err);
  if (rc != 0 || n <= 0) return rc;
  const unsigned long long tiles = ((unsigned long long)n + 31) / 32;
  if (tiles > 65535)
    return jmg_error_set(err, JMG_EINTERNAL, op, "jmg_cuda_transpose_square",
                         "N=%lld is past the transpose's grid (65535 tiles)",
                         (long long)n);
  unsigned long long nn = (unsigned long long)n;
  void *args[] = {&a, &nn};
  const dim3 grid = {(unsigned)tiles, (unsigned)tiles, 1};
  const dim3 block = {32, 8, 1};
  const cudaKernel_t k =
      dtype == JMG_F64 ? g_kernels.transpose_d : g_kernels.transpose_z;
  return JMG_CUDA_TRY(
      cudaLaunchKernel((const void *)k, grid, block, args, 0, stream), op,
      err);
}
