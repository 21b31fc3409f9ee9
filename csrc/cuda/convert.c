/* The conversion kernels, loaded from PTX and launched (cuda/convert.h). */
#include "cuda/convert.h"

#include "cuda/convert_ptx.h"
#include "cuda/ptx.h"

enum { NARROW, WIDEN, TRANSPOSE_D, TRANSPOSE_Z };
static const char *const g_names[] = {[NARROW] = "jmg_narrow",
                                      [WIDEN] = "jmg_widen",
                                      [TRANSPOSE_D] = "jmg_transpose_d",
                                      [TRANSPOSE_Z] = "jmg_transpose_z"};
static cudaKernel_t g_kernels[sizeof g_names / sizeof g_names[0]];
static jmg_ptx_set g_set = JMG_PTX_SET(
    jmg_convert_ptx, "jaxmg's conversion kernels", g_names, g_kernels);

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
  int rc = jmg_ptx_get(&g_set, op, err);
  if (rc != 0 || count == 0) return rc;
  unsigned long long n = (unsigned long long)reals(dtype, count);
  void *args[] = {&src, &dst, &n, &overflow};
  dim3 grid, block;
  shape((size_t)n, &grid, &block);
  return jmg_ptx_launch(&g_set, NARROW, grid, block, args, stream, op, err);
}

int jmg_cuda_widen(jmg_dtype dtype, const void *src, void *dst, size_t count,
                   int add, cudaStream_t stream, const char *op,
                   jmg_error *err) {
  int rc = jmg_ptx_get(&g_set, op, err);
  if (rc != 0 || count == 0) return rc;
  unsigned long long n = (unsigned long long)reals(dtype, count);
  void *args[] = {&src, &dst, &n, &add};
  dim3 grid, block;
  shape((size_t)n, &grid, &block);
  return jmg_ptx_launch(&g_set, WIDEN, grid, block, args, stream, op, err);
}

int jmg_cuda_transpose_square(jmg_dtype dtype, void *a, int64_t n,
                              cudaStream_t stream, const char *op,
                              jmg_error *err) {
  if (dtype != JMG_F64 && dtype != JMG_C128)
    return jmg_error_set(err, JMG_EINTERNAL, op, "jmg_cuda_transpose_square",
                         "only float64 and complex128 are transposed, not %s",
                         jmg_dtype_name(dtype));
  int rc = jmg_ptx_get(&g_set, op, err);
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
  return jmg_ptx_launch(&g_set, dtype == JMG_F64 ? TRANSPOSE_D : TRANSPOSE_Z,
                        grid, block, args, stream, op, err);
}
