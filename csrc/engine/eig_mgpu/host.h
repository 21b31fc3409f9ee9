/* The multi-GPU reduction's algorithm on host arrays (engine/eig_mgpu/trd.h
 * runs it on GPUs), for the C tests: its bookkeeping (the panels, the
 * per-column steps, the split of the symmetric product over the GPUs'
 * columns, the trailing update per GPU) checked without a GPU. No CUDA. */
#ifndef JMG_ENGINE_EIG_MGPU_HOST_H
#define JMG_ENGINE_EIG_MGPU_HOST_H

#include "engine/eig_mgpu/map.h"

/* The symmetric product that jmg_trd_reduce splits, as the kernel
 * (kernels.cu jmg_trd_symv) splits it: y[d] (n each, zeroed here) = GPU
 * d's part of A(j:n, j:n) v, from the elements (r, c), r >= c >= j, of
 * its columns c, the diagonal counted once; a->a[d] GPU d's columns. The
 * sum of the y[d] is the whole product (rows j .. n-1). */
void jmg_trd_split_symv_host(const jmg_trd_matrix *a, int ndev, int64_t j,
                             const double *v, double *const *y);

/* jmg_trd_reduce step for step on host arrays: the same panels, the same
 * per-column steps in the same order (update_col, house, the split symv,
 * finish_w, fix_w), the same trailing update per GPU over its whole
 * trailing columns. Outputs as jmg_trd_reduce. Returns 0, or -1 where nb
 * is out of range or memory runs out. */
int jmg_trd_reduce_host(const jmg_trd_matrix *a, int ndev, int nb, double *d,
                        double *e, double *tau);

#endif
