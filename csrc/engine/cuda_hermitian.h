/* Making a distributed matrix Hermitian on GPUs: the strict upper triangle
 * becomes the conjugate transpose of the strict lower one (potri's solvers
 * compute the lower triangle only). Shared by the CUDA engines: cuSOLVERMg's
 * over several GPUs, cuSOLVERDn's on one (a one-device matrix is one slab).
 * It lives beside engine.h, not in cuda/, because it works on the engines'
 * jmg_dist_matrix (cuda/ knows no engine). */
#ifndef JMG_ENGINE_CUDA_HERMITIAN_H
#define JMG_ENGINE_CUDA_HERMITIAN_H

#include <cublas_v2.h>

#include "common/error.h"
#include "engine/engine.h"

/* a is in the contiguous layout (device d holds columns d*local_cols ...),
 * device_ctx entries are jmg_cuda_device; cublas[d] is a handle on device d.
 * Peer access between the devices must be enabled. Returns when done. */
int jmg_cuda_hermitian_fill(const jmg_dist_matrix *a,
                            const cublasHandle_t *cublas, jmg_error *err);

/* The scratch the fill takes from XLA on each device (three t x t tiles). */
size_t jmg_cuda_hermitian_fill_bytes(const jmg_dist_matrix *a);

#endif
