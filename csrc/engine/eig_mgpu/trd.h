/* jaxmg's multi-GPU Householder tridiagonal reduction and its
 * back-transformation, float64, for syevd on the GPUs that one process
 * drives (engine/eig_mgpu/syevd.c; scripts/probe-eig-mgpu.c times it
 * alone). The design and its costs: docs/design/eigensolver-mgpu.md.
 *
 * A (n x n, symmetric, its lower triangle read) is held 1D block-cyclically
 * by columns (engine/eig_mgpu/map.h): tiles of `tile` columns round-robin
 * over the GPUs, GPU d's columns column-major with leading dimension n.
 *
 * jmg_trd_reduce is LAPACK's ?sytrd (lower) in the style of MAGMA's
 * dsytrd_mgpu: panels of at most nb columns (never across a tile, so that
 * a panel lies on one GPU, its owner), each by ?latrd, whose symmetric
 * matrix-vector product per column is split over the GPUs by columns: each
 * GPU reads only its own columns' part of the trailing lower triangle (1 /
 * ndev of it) and the partial products are summed (peer loads); the
 * trailing matrix's rank-2nb update runs on every GPU over its own
 * columns. The column's other steps run either on every GPU (on copies of
 * the panel: one exchange a column) or on the owner alone (two): see
 * jmg_trd_path. Everything is enqueued on the GPUs' streams without the
 * host waiting (the reflectors are made on the GPU), ordered across GPUs
 * by events: the host waits once, at the end, for T.
 *
 * jmg_trd_ormtr is LAPACK's ?ormtr (lower, left, no transpose): Z := Q Z
 * with Z's columns held as A's, each GPU applying every block of
 * reflectors to its own columns (the block's V read from its owners by
 * peer loads, T_b made on the GPU): no other communication.
 *
 * Both need peer access between every pair of the GPUs (cuda/handles.h
 * enables it), and take their device scratch from the caller (the _bytes
 * functions say how much, per GPU). Errors name op and the failing call;
 * nothing exits. */
#ifndef JMG_ENGINE_EIG_MGPU_TRD_H
#define JMG_ENGINE_EIG_MGPU_TRD_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "engine/eig_mgpu/map.h"

#define JMG_TRD_ORM_NB 128 /* the back-transformation's block */

/* The GPUs, in the order of A's layout: device ordinals, a stream on each
 * (all work is enqueued there), a cuBLAS handle made on each (set to its
 * stream and to host pointer mode by the routines). */
typedef struct jmg_trd_gpus {
  int ndev;
  int device[JMG_TRD_MAX_DEV];
  cudaStream_t stream[JMG_TRD_MAX_DEV];
  cublasHandle_t blas[JMG_TRD_MAX_DEV];
} jmg_trd_gpus;

/* Device scratch of jmg_trd_reduce on GPU dev, in bytes (either path). */
size_t jmg_trd_reduce_bytes(int64_t n, int64_t tile, int ndev, int dev,
                            int nb);

/* How jmg_trd_reduce runs a column (docs/design/eigensolver-mgpu.md). */
typedef enum jmg_trd_path {
  /* Every GPU runs every column's steps on its own copy of the panel and
   * of V and W (the panel's columns copied to it once, at the panel's
   * start): one exchange a column, the partial products. Panels of at most
   * JMG_TRD_RNB (64) columns. The default. */
  JMG_TRD_REPLICATED = 0,
  /* Session 19's: the panel's owner runs the column's steps, sends v to
   * every GPU and sums their products: two exchanges a column; V and W
   * sent to every GPU at the panel's end. */
  JMG_TRD_OWNER = 1
} jmg_trd_path;

/* Where a reduction's time went, from timing events on GPU 0's stream at
 * each panel's start and before its trailing update (so including GPU 0's
 * waits for the others: the critical path). */
typedef struct jmg_trd_profile {
  double columns_ms;  /* the panels' columns */
  double trailing_ms; /* the trailing updates (and the panel copies) */
  /* Microseconds a column, columns and trailing update together, over
   * each eighth of the columns (the trailing matrix shrinking). */
  double us_per_column[8];
} jmg_trd_profile;

/* A = Q T Q^T in place: T's diagonal d[0..n-1] and off-diagonal
 * e[0..n-2], the reflectors' scalars tau[0..n-2] (host arrays), the
 * reflectors in A's strictly lower triangle (v(c+1) = 1 stored, as
 * LAPACK's ?latrd holds it while it works; the rest of A below). nb: the
 * panel, 1 .. JMG_TRD_NB_MAX (the replicated path: 1 .. 64). work[d]:
 * jmg_trd_reduce_bytes on GPU d. profile: NULL, or filled (timing events:
 * for tracing). Returns when T is on the host. */
int jmg_trd_reduce(const jmg_trd_gpus *g, const jmg_trd_matrix *a, int nb,
                   jmg_trd_path path, void *const *work, double *d, double *e,
                   double *tau, jmg_trd_profile *profile, const char *op,
                   jmg_error *err);

/* For the probe: the split symmetric product alone, the whole matrix (j =
 * 0), reps times on every GPU at once (each its own part); *ms the mean
 * milliseconds of one on GPU 0. work as jmg_trd_reduce's. */
int jmg_trd_time_symv(const jmg_trd_gpus *g, const jmg_trd_matrix *a, int nb,
                      void *const *work, int reps, double *ms, const char *op,
                      jmg_error *err);

/* Device scratch of jmg_trd_ormtr on GPU dev, in bytes. */
size_t jmg_trd_ormtr_bytes(int64_t n, int64_t tile, int ndev, int dev);

/* z := Q z, Q from jmg_trd_reduce's a and tau (host, n-1); z distributed
 * as a. Enqueued on the streams; returns without waiting for them. */
int jmg_trd_ormtr(const jmg_trd_gpus *g, const jmg_trd_matrix *a,
                  const double *tau, const jmg_trd_matrix *z,
                  void *const *work, const char *op, jmg_error *err);

#endif
