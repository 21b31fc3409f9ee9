/* What the reduction's files share (engine/eig_mgpu/sytrd.c: the driver;
 * sytrd_replicated.c and sytrd_owner.c: the two ways of running a panel,
 * trd.h's jmg_trd_path): one run's state, its scratch, and the steps that
 * both paths take. Internal to the engine. */
#ifndef JMG_ENGINE_EIG_MGPU_TRD_RUN_H
#define JMG_ENGINE_EIG_MGPU_TRD_RUN_H

#include "engine/eig_mgpu/kernels.h"
#include "engine/eig_mgpu/trd.h"

/* Where a GPU's scratch parts start, in doubles (each at a multiple of 32
 * doubles, 256 bytes): sytrd.c's parts_of says what each holds. */
typedef struct jmg_trd_parts {
  size_t v, y, w, vr, vg, wg, p1, p2, tau, e, d, alpha, sumsq, dot, pc, yy,
      part, pp, scale, count, total;
} jmg_trd_parts;

/* One run's state. */
typedef struct jmg_trd_run {
  const jmg_trd_gpus *g;
  const jmg_trd_matrix *a;
  jmg_trd_path path;
  int ndev, nb;
  int64_t panel; /* the index of the panel being reduced (0, 1, ...) */
  int64_t n, tile;
  double *base[JMG_TRD_MAX_DEV];
  jmg_trd_parts p[JMG_TRD_MAX_DEV];
  /* ev_v: v made (owner path); ev_y: a GPU's product done; ev_b: a
   * panel's copies sent; ev_p: the owner's two gemv done (owner path). */
  cudaEvent_t ev_v[JMG_TRD_MAX_DEV], ev_y[JMG_TRD_MAX_DEV],
      ev_b[JMG_TRD_MAX_DEV], ev_p[JMG_TRD_MAX_DEV];
  /* A second stream on each GPU (owner path): the owner's two gemv run
   * there, beside its own part of the product. */
  cudaStream_t aux[JMG_TRD_MAX_DEV];
  const char *op;
  jmg_error *err;
} jmg_trd_run;

#define JMG_TRD_PTR(s, dev, part) ((s)->base[dev] + (s)->p[dev].part)

/* Return-code checks naming the run's op and the call. */
int jmg_trd_cuda(jmg_trd_run *s, cudaError_t rc, const char *call);
int jmg_trd_blas(jmg_trd_run *s, cublasStatus_t rc, const char *call);

/* cudaSetDevice to GPU dev of the run. */
int jmg_trd_on(jmg_trd_run *s, int dev);

/* Records ev on GPU o's stream and makes every other GPU's stream wait
 * for it (the current device is then the last of them). */
int jmg_trd_signal_others(jmg_trd_run *s, int o, cudaEvent_t ev);

/* Launches kernel k on GPU dev's stream (the current device: dev). */
int jmg_trd_run_launch(jmg_trd_run *s, int dev, jmg_trd_kernel k, dim3 grid,
                       dim3 block, void **args);

/* Blocks of 128 threads over m rows, at most 2048 (grid-stride beyond). */
dim3 jmg_trd_rows_grid(int64_t m);
#define JMG_TRD_ROWS_BLOCK ((dim3){128, 1, 1})

/* y += (GPU dev's part of the trailing lower triangle from row and column
 * j) v, on GPU dev's stream (kernels.cu jmg_trd_symv); v and y on dev. */
int jmg_trd_symv_launch(jmg_trd_run *s, int dev, int64_t j, const double *v,
                        double *y);

/* GPU q's trailing columns from row r0 less V Wc^T + W Vc^T (the panel's
 * wd columns of V and W, ld n, on q; Wc and Vc their rows at q's column
 * indices, gathered by a kernel), on q's stream (q current). */
int jmg_trd_update_trailing(jmg_trd_run *s, int q, int64_t r0, int64_t wd,
                            const double *vsrc, const double *wsrc);

/* A way of running a panel (trd.h jmg_trd_path), called for the panel at
 * i (width wd, owner o): start, then column for each of its columns (the
 * k-th: c = i + k), then, unless it is the last panel, end (the trailing
 * update on every GPU). sytrd_replicated.c and sytrd_owner.c. */
typedef struct jmg_trd_steps {
  int (*start)(jmg_trd_run *s, int o, int64_t i, int64_t wd);
  int (*column)(jmg_trd_run *s, int o, int64_t i, int k);
  int (*end)(jmg_trd_run *s, int o, int64_t i, int64_t wd);
} jmg_trd_steps;

extern const jmg_trd_steps jmg_trd_replicated_steps, jmg_trd_owner_steps;

#endif
