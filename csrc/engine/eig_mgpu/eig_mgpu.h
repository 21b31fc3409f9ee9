/* The eig-mgpu engine's routines (engine/engine.h's contract): syevd,
 * float64, on the GPUs one process drives, by the multi-GPU reduction of
 * trd.h, T solved on the host (engine/lapack/tridiagonal.h), the
 * eigenvectors back-transformed on every GPU. */
#ifndef JMG_ENGINE_EIG_MGPU_EIG_MGPU_H
#define JMG_ENGINE_EIG_MGPU_EIG_MGPU_H

#include "cuda/call.h"
#include "engine/eig_mgpu/trd.h"
#include "engine/engine.h"

/* The reduction's panel (trd.h's nb). */
#define JMG_EIG_MGPU_NB 64

int jmg_eig_mgpu_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                       int want_vectors, int *info, jmg_error *err);

/* T's eigenvalues (ascending, into w on the host) and, with z, its
 * eigenvectors into z (laid out as A), by cuSOLVERMp's cusolverMpStedc on
 * participant 0's GPU (stedc.c), for N >= 2048. *ran: 0 below that, or
 * where cuSOLVERMp is not available (the reason traced; nothing done:
 * solve T elsewhere), 1 where
 * Stedc was called. *info: Stedc's (> 0: it did not converge). Its buffers
 * are the call's (cuda/call.h). Errors name the op. */
int jmg_eig_mgpu_stedc(jmg_cuda_call *c, const jmg_trd_gpus *g, int64_t n,
                       const double *d, const double *e, double *w,
                       const jmg_trd_matrix *z, int *info, int *ran,
                       jmg_error *err);

/* The device bytes a call takes on participant dev beside A and w. */
size_t jmg_eig_mgpu_syevd_bytes(int64_t n, int64_t tile, int ndev, int dev,
                                int want_vectors);

#endif
