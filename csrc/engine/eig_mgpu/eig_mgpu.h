/* The eig-mgpu engine's routines (engine/engine.h's contract): syevd,
 * float64, on the GPUs one process drives, by the multi-GPU reduction of
 * trd.h, T solved on the host (engine/lapack/tridiagonal.h), the
 * eigenvectors back-transformed on every GPU. */
#ifndef JMG_ENGINE_EIG_MGPU_EIG_MGPU_H
#define JMG_ENGINE_EIG_MGPU_EIG_MGPU_H

#include "engine/engine.h"

/* The reduction's panel (trd.h's nb). */
#define JMG_EIG_MGPU_NB 64

int jmg_eig_mgpu_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                       int want_vectors, int *info, jmg_error *err);

/* The device bytes a call takes on participant dev beside A and w. */
size_t jmg_eig_mgpu_syevd_bytes(int64_t n, int64_t tile, int ndev, int dev,
                                int want_vectors);

#endif
