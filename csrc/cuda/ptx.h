/* jaxmg's own kernels, carried as PTX text and loaded once per process.
 *
 * The library is C built by the host compiler, without nvcc: each set of
 * kernels (a .cu file) is turned into PTX by a script and committed as a C
 * string (cuda/convert_ptx.h, engine/eig_mgpu/kernels_ptx.h). At first use
 * the set is loaded through the runtime (cudaLibraryLoadData:
 * context-independent, so one load serves every GPU of the process; the
 * driver compiles the PTX for the GPU at hand) and its kernels looked up by
 * name. The library stays loaded until the process exits. A failed load is
 * remembered and reported, naming the failing call, to every caller. */
#ifndef JMG_CUDA_PTX_H
#define JMG_CUDA_PTX_H

#include <cuda_runtime_api.h>

#include "common/error.h"

/* One set of kernels: define it static, with JMG_PTX_SET, beside the
 * kernels' names; jmg_ptx_get fills `kernels` in the order of `names`. */
typedef struct jmg_ptx_set {
  const char *ptx;          /* the PTX text, NUL-terminated */
  const char *what;         /* for errors: "jaxmg's conversion kernels" */
  const char *const *names; /* count kernel names */
  cudaKernel_t *kernels;    /* count slots */
  int count;
  /* Filled by the first jmg_ptx_get, under a lock. */
  int tried;
  cudaError_t status;
  char failed[128]; /* the call that failed */
} jmg_ptx_set;

#define JMG_PTX_SET(ptx_text, what_text, names_array, kernels_array) \
  {                                                                  \
    .ptx = (ptx_text), .what = (what_text), .names = (names_array),  \
    .kernels = (kernels_array),                                      \
    .count = (int)(sizeof(names_array) / sizeof((names_array)[0]))   \
  }

/* Loads set on first use (thread-safe); 0 when its kernels are there,
 * else the load's error (naming op and the failing call) in err. */
int jmg_ptx_get(jmg_ptx_set *set, const char *op, jmg_error *err);

/* Launches set's kernel i (its index in names) on stream (cudaLaunchKernel,
 * no dynamic shared memory), after a jmg_ptx_get of set that succeeded on
 * this thread; errors name op and "cudaLaunchKernel (<kernel>)". */
int jmg_ptx_launch(const jmg_ptx_set *set, int i, dim3 grid, dim3 block,
                   void **args, cudaStream_t stream, const char *op,
                   jmg_error *err);

#endif
