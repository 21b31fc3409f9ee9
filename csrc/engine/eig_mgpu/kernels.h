/* The multi-GPU eigensolver's kernels (engine/eig_mgpu/kernels.cu), loaded
 * once per process from their PTX (kernels_ptx.h) by cuda/ptx.h. */
#ifndef JMG_ENGINE_EIG_MGPU_KERNELS_H
#define JMG_ENGINE_EIG_MGPU_KERNELS_H

#include <cuda_runtime_api.h>

#include "common/error.h"
#include "cuda/ptx.h"

/* The kernels, by their index in jmg_trd_kernels_get's array. */
typedef enum {
  JMG_TRD_SYMV,
  JMG_TRD_UPDATE_COL,
  JMG_TRD_HOUSE,
  JMG_TRD_FINISH_W,
  JMG_TRD_FIX_W,
  JMG_TRD_GATHER_ROWS,
  JMG_TRD_MAKE_V,
  JMG_TRD_LARFT,
  JMG_TRD_COL_START,
  JMG_TRD_COL_FINISH,
  JMG_TRD_KERNELS
} jmg_trd_kernel;

/* Loads the kernels of kernels.cu on first use (every thread that
 * launches them calls it first); errors name op. */
int jmg_trd_kernels_get(const char *op, jmg_error *err);

/* Launches kernel `which` on stream; errors name op and the kernel. */
int jmg_trd_launch(jmg_trd_kernel which, dim3 grid, dim3 block, void **args,
                   cudaStream_t stream, const char *op, jmg_error *err);

/* The kernels' pointer arrays, passed by value (kernels.cu struct ptrs). */
typedef struct jmg_trd_ptrs {
  double *p[16];
} jmg_trd_ptrs;

/* The replicated column's kernels (kernels.cu col_start, col_finish): the
 * widest panel, their blocks (rows x column slices) and the most blocks of
 * col_start (2 RNB + 1 partial sums a block) and of col_finish (one). */
#define JMG_TRD_RNB 64
#define JMG_TRD_CR 32
#ifndef JMG_TRD_CS /* kernels.cu's default; tests/emu builds both with 2 */
#define JMG_TRD_CS 8
#endif
#define JMG_TRD_GMAX 256
#define JMG_TRD_GMAX_FINISH 1024

#endif
