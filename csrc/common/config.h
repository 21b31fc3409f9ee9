/* Every JAXMG_* setting of the C library, read in one place.
 *
 * The settings are read afresh from the environment each time a caller asks
 * (once per call, by whoever plans the call), so that a program may change
 * them between calls, as the tests and bench/time_potrs.py do. Nothing else
 * in csrc/ calls getenv. Malformed values fall back to the default, except
 * where a wrong value would silently change what runs (JAXMG_POTRF,
 * JAXMG_ENGINE, JAXMG_SYEVD, JAXMG_SYEVD_MGPU_PATH): those are kept as text
 * and checked by their user, which reports an error naming the variable.
 * The Python layer reads JAXMG_RENDEZVOUS_TIMEOUT too (_mode.py), for MPMD
 * calls.
 *
 *   JAXMG_TRACE               "" or "0": off; anything else: one line per call
 *   JAXMG_RENDEZVOUS_TIMEOUT  seconds to wait for the other participants (300;
 *                             the rendezvous, and every wait of the CPU
 *                             communicators, comm/comm_threads.c and
 *                             comm/comm_processes.c)
 *   JAXMG_COPY_LANES          copy queues of the in-place permutation, 1..64
 *                             (0, the default: one per device)
 *   JAXMG_PERMUTE             "inplace", "apart", or unset (auto)
 *   JAXMG_POTRF               "tiles" (default) or "cusolvermg"
 *   JAXMG_POTRF_PIPELINE      "1": the tiled Cholesky (engine/cusolvermg/
 *                             cuda_potrf.c) copies its panels on a copy
 *                             stream of each GPU into two buffers, and
 *                             updates diagonal tiles by herk; anything
 *                             else (the default): one buffer, copies on
 *                             the compute stream, gemm only
 *   JAXMG_ENGINE              the engine to use; unset: chosen per call
 *   JAXMG_SYEVD               one GPU's eigensolver (cuSOLVERDn engine):
 *                             "cusolver" (cusolverDnXsyevd), "tridiagonal"
 *                             (jaxmg's own, A and one more A), or unset /
 *                             "auto": cusolver where its workspace fits
 *   JAXMG_LOCAL_GATHER        unset (the default) or anything but "0": the
 *                             local model's one-GPU path on CUDA
 *                             (cusolverdn-local) is chosen by default below
 *                             the crossover, and cuSOLVERMp's eigensolvers
 *                             route to it there; "0": only where
 *                             JAXMG_ENGINE=cusolverdn-local names it
 *   JAXMG_MIXED_LOW           precision="mixed" on one GPU: "float32" takes
 *                             cuSOLVER's float32 routines instead of TF32
 *   JAXMG_GMRES_MAX_INNER     GMRES-IR's bound on Arnoldi steps, 0..100000
 *                             (0: no GMRES-IR); unset: the engine's
 *   JAXMG_TF32_NB             the TF32 Cholesky's block, 64..8192; unset: by N
 *   JAXMG_SYEVD_MGPU          float64 syevd on the GPUs one process drives
 *                             (2 or more) by jaxmg's own multi-GPU
 *                             eigensolver (engine/eig_mgpu/): "1" at every
 *                             N, "0" never; unset (or anything else): in
 *                             the sizes where it was measured to win
 *                             (engine/eig_mgpu/context.c)
 *   JAXMG_SYEVD_MGPU_PATH     how that eigensolver's reduction runs a column
 *                             (engine/eig_mgpu/trd.h jmg_trd_path): unset or
 *                             "replicated" (every GPU runs its steps: one
 *                             exchange a column), "owner" (session 19's:
 *                             the panel's owner does, two exchanges)
 *   JAXMG_CUSOLVERMP_LIB      path of libcusolverMp.so.0 (read by the Python
 *                             layer when it loads the CUDA library, handed
 *                             over by jaxmg_cusolvermp_set_path; not here) */
#ifndef JMG_COMMON_CONFIG_H
#define JMG_COMMON_CONFIG_H

typedef enum {
  JMG_PERMUTE_AUTO,    /* out of place where the Python layer judged it fits */
  JMG_PERMUTE_INPLACE, /* always in place, by cycles */
  JMG_PERMUTE_APART    /* try out of place whatever the Python layer said */
} jmg_permute_mode;

#define JMG_CONFIG_NAME_LEN 32

typedef struct jmg_config {
  int trace;
  double rendezvous_timeout_s;
  int copy_lanes; /* 0: one per device */
  jmg_permute_mode permute;
  char potrf[JMG_CONFIG_NAME_LEN];  /* "" when unset; may be malformed */
  char engine[JMG_CONFIG_NAME_LEN]; /* "" when unset; may be malformed */
  char syevd[JMG_CONFIG_NAME_LEN];  /* "" when unset; may be malformed */
  int local_gather;                 /* JAXMG_LOCAL_GATHER is not "0" */
  int mixed_float32;                /* JAXMG_MIXED_LOW is "float32" */
  int mixed_bf16x9;                 /* JAXMG_MIXED_LOW is "bf16x9" */
  int gmres_max_inner;              /* -1 when unset or malformed */
  int tf32_nb;                      /* 0 when unset or malformed */
  int tf32_lookahead;               /* JAXMG_TF32_LOOKAHEAD is "1" */
  int syevd_mgpu; /* JAXMG_SYEVD_MGPU: 1 "1", 0 "0", -1 unset/malformed */
  /* JAXMG_SYEVD_MGPU_PATH: "" when unset; may be malformed. */
  char syevd_mgpu_path[JMG_CONFIG_NAME_LEN];
  int refine_max_steps;             /* -1 when unset or malformed */
  /* JAXMG_REFINE_NB: the block of the one-GPU refinement's triangular
   * solves (engine/cusolverdn/tri_solve.h), 64 to 8192; "0": cuSOLVER's
   * potrs instead; -1 when unset or malformed (the default block). */
  int refine_nb;
  /* JAXMG_REFINE_RESIDUAL: how the one-GPU potrs refinement forms b - A x
   * of one column: 0 (unset, malformed or "symv") symv on A's lower
   * triangle, 1 ("symm") symm as with several columns, 2 ("gemv") gemv on
   * the whole A (both triangles held, as the API requires). */
  int refine_residual;
  /* JAXMG_TF32_TRSM is "1": the TF32 Cholesky's panels by cuBLAS's trsm
   * (session 18's), not by its inverted diagonal blocks and a TF32 gemm. */
  int tf32_trsm;
  /* JAXMG_POTRF_PIPELINE is "1" (cuda_potrf.h jmg_cuda_potrf's pipeline). */
  int potrf_pipeline;
} jmg_config;

/* Reads every setting from the environment now. */
void jmg_config_read(jmg_config *out);

#endif
