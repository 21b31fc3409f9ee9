/* Conversions between a dtype and its lower precision on a GPU (float64 <->
 * float32, complex128 <-> complex64), and a square matrix's transpose in
 * place, for the mixed-precision solves
 * (engine/refine.h, engine/cusolverdn/mixed.c). No CUDA library converts
 * between precisions (nor transposes a square matrix in place), and the
 * library is built without nvcc: the kernels (cuda/convert.cu) come as PTX (cuda/convert_ptx.h), loaded once
 * per process through the runtime (cudaLibraryLoadData, context-independent:
 * every GPU of the process) and launched on the call's stream. */
#ifndef JMG_CUDA_CONVERT_H
#define JMG_CUDA_CONVERT_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"

/* dst (count elements of dtype's lower precision) = src (count elements of
 * dtype: float64 or complex128), rounded to nearest; *overflow (an int on
 * the device, not reset here) is set to 1 where an entry exceeds float32's
 * range. On stream; errors name op. */
int jmg_cuda_narrow(jmg_dtype dtype, const void *src, void *dst, size_t count,
                    int *overflow, cudaStream_t stream, const char *op,
                    jmg_error *err);

/* dst (count elements of dtype) = src (its lower precision's), or dst +=
 * src with add. On stream; errors name op. */
int jmg_cuda_widen(jmg_dtype dtype, const void *src, void *dst, size_t count,
                   int add, cudaStream_t stream, const char *op,
                   jmg_error *err);

/* a (n x n of float64 or complex128, column-major, lda n) = aᵀ in place,
 * not conjugated, on stream; errors name op. */
int jmg_cuda_transpose_square(jmg_dtype dtype, void *a, int64_t n,
                              cudaStream_t stream, const char *op,
                              jmg_error *err);

#endif
