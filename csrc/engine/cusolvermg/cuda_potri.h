/* The inverse of a Hermitian positive definite 1D block-cyclic matrix over
 * several GPUs from its Cholesky factor (cuda_potrf.h's), tile by tile with
 * cuBLAS.
 *
 * X = A^-1 = L^-H L^-1 by two triangular solves with the identity's columns
 * as right-hand sides, each device solving for its own columns: forward
 * L Y = I, then backward L^H X = Y. Column c of tile j needs only rows
 * j*t and below of Y and X (those of Y above are zero; those of X below
 * depend only on Y's below), so both solves run on the trailing part: the
 * flops of LAPACK's potri after potrf (2 N^3 / 3), spread over the devices
 * by their columns. Every device reads each tile column of L once per solve
 * (a peer copy on a stream of its own, two buffers, overlapped with the
 * previous step's work); L is final, so no device ever waits for another's
 * work, only for its own copies. */
#ifndef JMG_ENGINE_CUSOLVERMG_CUDA_POTRI_H
#define JMG_ENGINE_CUSOLVERMG_CUDA_POTRI_H

#include <stddef.h>

#include "common/error.h"
#include "engine/cusolvermg/cuda_potrf.h"
#include "engine/engine.h"

/* The panel buffers jmg_cuda_potri_from_factor needs on every device, in
 * bytes. */
size_t jmg_cuda_potri_workspace(const jmg_dist_matrix *a);

/* a's tiles hold L (jmg_cuda_potrf's result, lower triangle); x[d] is an
 * n x local_cols buffer on device d (a's shard's shape), work[d] holds
 * jmg_cuda_potri_workspace bytes. Writes into x the columns of A^-1 that
 * device d holds in a's layout: rows j*t and below of each tile j (the
 * lower triangle and the diagonal tiles whole); rows above are zero. a is
 * only read. device_ctx entries are jmg_cuda_device (their streams run the
 * work); peer access between the devices must be enabled. Returns when
 * done. */
int jmg_cuda_potri_from_factor(const jmg_dist_matrix *a,
                               const jmg_cuda_potrf_handles *h,
                               void *const *x, void *const *work,
                               const char *op, jmg_error *err);

#endif
