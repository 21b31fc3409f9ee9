/* The Cholesky factorization of a 1D block-cyclic matrix over several GPUs,
 * tile by tile with cuSOLVER (one GPU) and cuBLAS, every dependence between
 * GPUs an event.
 *
 * It stands in for cusolverMgPotrf, which returns a wrong factor when other
 * processes run work on the same GPUs (docs/gpu-notes.md): CUDA orders this
 * one's work by streams and events only, so sharing the GPUs can slow it down
 * but not change its result. */
#ifndef JMG_ENGINE_CUSOLVERMG_CUDA_POTRF_H
#define JMG_ENGINE_CUSOLVERMG_CUDA_POTRF_H

#include <cublas_v2.h>
#include <cusolverDn.h>
#include <stddef.h>

#include "common/error.h"
#include "engine/engine.h"

/* Per-device handles: blas[d] and dn[d] were created on a's device d. */
typedef struct jmg_cuda_potrf_handles {
  const cublasHandle_t *blas;
  const cusolverDnHandle_t *dn;
  cusolverDnParams_t params;
} jmg_cuda_potrf_handles;

/* The workspace jmg_cuda_potrf needs on every device, in bytes, with the
 * same pipeline: one panel of N x T_A elements, a second of (N - 2 T_A) x
 * T_A with the pipeline, cusolverDnXpotrf's workspace for one tile and the
 * info words. */
int jmg_cuda_potrf_workspace(const jmg_dist_matrix *a,
                             const jmg_cuda_potrf_handles *h, int pipeline,
                             size_t *bytes, const char *op, jmg_error *err);

/* A = L L^H in place: a's tiles (1D block-cyclic, tile t on device t % ndev,
 * n a multiple of tile * ndev) take L in their lower triangle; the strict
 * upper triangles of the diagonal tiles are overwritten, the tiles above the
 * diagonal are not touched. device_ctx entries are jmg_cuda_device: the work
 * runs on their streams. work[d] holds the bytes jmg_cuda_potrf_workspace
 * gave for the same pipeline, on device d. Peer access between the devices
 * must be enabled. pipeline (JAXMG_POTRF_PIPELINE, cuda_potrf.c): non-zero
 * copies the panels on a copy stream of each device into two buffers,
 * overlapped with the updates, and updates the diagonal tiles by herk; 0
 * is the one-buffer path with the copies on the compute streams.
 * Returns when done; *info is 0, or the order of the first leading minor that
 * is not positive definite (LAPACK's convention). */
int jmg_cuda_potrf(const jmg_dist_matrix *a, const jmg_cuda_potrf_handles *h,
                   int pipeline, void *const *work, int64_t *info,
                   const char *op, jmg_error *err);

#endif
