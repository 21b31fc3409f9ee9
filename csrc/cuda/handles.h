/* The CUDA libraries' handles of a device set, for every CUDA engine.
 *
 * A device set is the participants' CUDA devices in shard order. Its handles
 * (one cuBLAS and one cuSOLVERDn handle per device, cuSOLVERDn's params) are
 * made on first use and kept for the life of the process, with peer access
 * enabled between all its GPUs (the leader model reads other GPUs' memory).
 * A device set is used by one call at a time: acquire locks it, release
 * unlocks it, so that an engine may keep per-set state of its own
 * (cuSOLVERMg's grid and descriptors) under the same lock. */
#ifndef JMG_CUDA_HANDLES_H
#define JMG_CUDA_HANDLES_H

#include <cublas_v2.h>
#include <cusolverDn.h>

#include "common/error.h"
#include "cuda/device.h"

typedef struct jmg_cuda_handles {
  int ndev;
  int devices[JMG_CUDA_MAX_DEVICES];         /* CUDA ordinals, in shard order */
  cublasHandle_t blas[JMG_CUDA_MAX_DEVICES]; /* made on devices[d] */
  cusolverDnHandle_t dn[JMG_CUDA_MAX_DEVICES]; /* made on devices[d] */
  cusolverDnParams_t dn_params;
} jmg_cuda_handles;

/* The handles of the device set of device_ctx[0 .. ndev) (jmg_cuda_device),
 * locked for the caller. Fails when ndev exceeds JMG_CUDA_MAX_DEVICES, when
 * two participants share a GPU, or when a GPU cannot reach another. who
 * names the library in messages ("cuSOLVERMg"). */
int jmg_cuda_handles_acquire(void *const *device_ctx, int ndev, const char *who,
                             jmg_cuda_handles **out, jmg_error *err);
void jmg_cuda_handles_release(jmg_cuda_handles *h);

#endif
