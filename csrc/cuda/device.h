/* One participant's GPU, as the CUDA engine sees it: its CUDA device, the
 * stream XLA runs it on, and XLA's allocator for it. The ffi layer fills this
 * (ffi/cuda_targets.c); the engine never sees XLA's types. */
#ifndef JMG_CUDA_DEVICE_H
#define JMG_CUDA_DEVICE_H

#include <stddef.h>

#include "common/error.h"

/* The most GPUs one call drives (cuSOLVERMg's limit). */
#define JMG_CUDA_MAX_DEVICES 16

typedef struct jmg_cuda_device {
  int device;   /* CUDA device ordinal */
  void *stream; /* cudaStream_t: XLA's stream for this participant */
  /* Device memory from XLA's allocator, so that workspaces fit beside XLA's
   * memory pool (which holds most of the GPU). */
  void *alloc_ctx;
  int (*alloc)(void *alloc_ctx, size_t bytes, void **out, jmg_error *err);
  void (*free)(void *alloc_ctx, void *ptr, size_t bytes);
} jmg_cuda_device;

#endif
