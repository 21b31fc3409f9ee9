/* The multi-GPU eigensolver's kernels (engine/eig_mgpu/kernels.cu), loaded
 * once per process from their PTX (kernels_ptx.h) through the runtime
 * (cudaLibraryLoadData: context-independent, every GPU of the process). */
#ifndef JMG_ENGINE_EIG_MGPU_KERNELS_H
#define JMG_ENGINE_EIG_MGPU_KERNELS_H

#include <cuda_runtime_api.h>

#include "common/error.h"

typedef struct jmg_trd_kernels {
  cudaKernel_t symv, update_col, house, finish_w, fix_w, gather_rows, make_v,
      larft;
} jmg_trd_kernels;

/* The kernels of kernels.cu, loaded on first use; errors name op. */
int jmg_trd_kernels_get(const jmg_trd_kernels **out, const char *op,
                        jmg_error *err);

/* The kernels' pointer arrays, passed by value (kernels.cu struct ptrs). */
typedef struct jmg_trd_ptrs {
  double *p[16];
} jmg_trd_ptrs;

/* Launches k on stream with args (cudaLaunchKernel's). */
int jmg_trd_launch(cudaKernel_t k, dim3 grid, dim3 block, void **args,
                   cudaStream_t stream, const char *name, const char *op,
                   jmg_error *err);

#endif
