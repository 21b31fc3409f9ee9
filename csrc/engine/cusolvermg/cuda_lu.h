/* The LU factorization with partial pivoting of a 1D block-cyclic matrix
 * over several GPUs, and the solves with its factors: jaxmg's own, tile by
 * tile with cuSOLVERDn (one GPU) and cuBLAS, as cuda_potrf.h is for
 * Cholesky. cusolverMgGetrf is not used: cuSOLVERMg's potrf returns wrong
 * factors when other processes use the GPUs (docs/gpu-notes.md), and its
 * getrf has not been shown right there.
 *
 * The result is LAPACK's getrf's: M = P L U, L unit lower and U upper in
 * place of M, every row interchange applied to all columns; the pivots stay
 * in the workspace, where the solves find them. */
#ifndef JMG_ENGINE_CUSOLVERMG_CUDA_LU_H
#define JMG_ENGINE_CUSOLVERMG_CUDA_LU_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "cuda/handles.h"
#include "engine/engine.h"

/* The workspace jmg_cuda_getrf needs on every device, in bytes. */
int jmg_cuda_getrf_workspace(const jmg_dist_matrix *a,
                             const jmg_cuda_handles *h, size_t *bytes,
                             const char *op, jmg_error *err);

/* M = P L U in place: a's tiles (1D block-cyclic, tile t on device t % ndev,
 * n a multiple of tile * ndev; device_ctx entries jmg_cuda_device, whose
 * streams run the work). work[d]: the bytes jmg_cuda_getrf_workspace gave,
 * on device d; it holds the pivots afterwards. Peer access between the
 * devices must be enabled. Returns when done; *info is 0, or the first
 * exactly zero pivot U(info, info) (LAPACK's convention), at which the
 * factorization stops: a's content is then unspecified. */
int jmg_cuda_getrf(const jmg_dist_matrix *a, const jmg_cuda_handles *h,
                   void *const *work, int64_t *info, const char *op,
                   jmg_error *err);

/* Solves op(M) X = B (M X = B, or Mᵀ X = B when transpose: the transpose,
 * not the conjugate one) with jmg_cuda_getrf's factors in a and its pivots
 * in work (unchanged since). b:
 * n x nrhs, column-major (ld n), on device 0, overwritten by X. Runs on
 * device 0's stream, reading the other devices' tiles through peer access;
 * returns when done. */
int jmg_cuda_getrs(const jmg_dist_matrix *a, const jmg_cuda_handles *h,
                   void *const *work, int transpose, void *b, int64_t nrhs,
                   const char *op, jmg_error *err);

#endif
