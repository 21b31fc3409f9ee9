/* The engine: the solver behind an op, and the memory moves it needs.
 *
 * The ops layer sees only this table. An engine gets the matrix already in the
 * 1D block-cyclic layout (layout/cyclic.h) that cuSOLVERMg defines: device d
 * holds its columns column-major with leading dimension n. Engines: LAPACK on
 * CPU devices (engine/lapack_engine.c), cuSOLVERMg on GPUs. A future
 * cuSolverMp engine (2D block-cyclic, several nodes) gets its own layout plan
 * and plugs in here without touching the ops or the Python layer.
 *
 * Numerical failure is data: *info receives LAPACK's info (> 0: the leading
 * minor of that order is not positive definite, or the eigensolver did not
 * converge) and the call returns 0. Only a failure of the machinery (memory,
 * a driver call) is an error. A solver fails with JMG_ENOMEM only before it
 * has written anything (it takes all its memory first), so that the ops
 * layer can free memory of its own and call it again. */
#ifndef JMG_ENGINE_ENGINE_H
#define JMG_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"

/* A matrix distributed 1D block-cyclically over ndev devices. */
typedef struct jmg_dist_matrix {
  int ndev;
  int64_t n;          /* order of the (padded) matrix */
  int64_t tile;       /* T_A */
  int64_t local_cols; /* n / ndev columns on each device */
  jmg_dtype dtype;
  void *const *data; /* data[d]: device d's columns, column-major, lda n */
  void *const *device_ctx; /* engine-specific per-device context (or NULL) */
} jmg_dist_matrix;

/* Where a buffer lives, for copies: a device's position in the call (0 ..
 * ndev-1), or the host. */
enum { JMG_HOST = -1 };

typedef struct jmg_engine {
  const char *name;

  /* ---- memory: used by the ops layer for redistribution and outputs ---- */
  /* Copies bytes between buffers on (possibly different) devices or the host.
   * May be asynchronous on the leader's stream; jmg_engine.sync orders it. */
  int (*copy)(const struct jmg_engine *e, const jmg_dist_matrix *m, void *dst,
              int dst_dev, const void *src, int src_dev, size_t bytes,
              jmg_error *err);
  /* Copy lanes for the layout permutation: independent in-order queues, so
   * that copies between different devices run at the same time. lanes_open
   * makes nlanes lanes ordered after everything issued so far (*lanes may be
   * NULL where the engine needs no state); lane_copy issues a copy on a lane;
   * lanes_close waits for every lane and frees them, also after an error. */
  int (*lanes_open)(const struct jmg_engine *e, const jmg_dist_matrix *m,
                    int nlanes, void **lanes, jmg_error *err);
  int (*lane_copy)(const struct jmg_engine *e, const jmg_dist_matrix *m,
                   void *lanes, int lane, void *dst, int dst_dev,
                   const void *src, int src_dev, size_t bytes, jmg_error *err);
  int (*lanes_close)(const struct jmg_engine *e, const jmg_dist_matrix *m,
                     void *lanes, jmg_error *err);
  /* Allocates / frees scratch on device dev (staging buffers). */
  int (*alloc)(const struct jmg_engine *e, const jmg_dist_matrix *m, int dev,
               size_t bytes, void **out, jmg_error *err);
  void (*release)(const struct jmg_engine *e, const jmg_dist_matrix *m, int dev,
                  void *ptr, size_t bytes);
  /* Fills count elements of a dtype buffer on device dev with NaN. */
  int (*fill_nan)(const struct jmg_engine *e, const jmg_dist_matrix *m, int dev,
                  void *ptr, size_t count, jmg_dtype dtype, jmg_error *err);
  /* Waits until everything issued so far has finished. */
  int (*sync)(const struct jmg_engine *e, const jmg_dist_matrix *m,
              jmg_error *err);

  /* ---- solvers: one per op ----------------------------------------------*/
  /* Solves A X = B for SPD/HPD A (lower triangle used; A is overwritten by
   * its factor). b[0]: n x nrhs, column-major, on device 0, overwritten by X;
   * b[d] for d > 0: buffers of the same size on device d, which the engine may
   * use (cuSOLVERMg wants a B pointer on every device of its grid). */
  int (*potrs)(const struct jmg_engine *e, const jmg_dist_matrix *a,
               void *const *b, int64_t nrhs, int *info, jmg_error *err);
  /* Replaces A (block-cyclic) by its inverse in the CONTIGUOUS layout
   * (device d holds columns d*local_cols ...); only the lower triangle needs
   * to be right, as LAPACK's and cuSOLVER's potri leave the upper one. */
  int (*potri)(const struct jmg_engine *e, const jmg_dist_matrix *a, int *info,
               jmg_error *err);
  /* For A in the CONTIGUOUS layout (device d holds columns d*local_cols ...):
   * overwrites the strict upper triangle with the conjugate transpose of the
   * strict lower one, making A Hermitian. */
  int (*fill_upper)(const struct jmg_engine *e, const jmg_dist_matrix *a,
                    jmg_error *err);
  /* Eigenvalues (ascending, real, n of them, written to w on device 0) and,
   * if want_vectors, eigenvectors in place of A (column j is the j-th). */
  int (*syevd)(const struct jmg_engine *e, const jmg_dist_matrix *a, void *w,
               int want_vectors, int *info, jmg_error *err);
} jmg_engine;

/* The LAPACK engine for CPU devices (device_ctx unused). */
const jmg_engine *jmg_lapack_engine(void);

/* The cuSOLVERMg engine for CUDA GPUs (device_ctx: jmg_cuda_device, see
 * cuda/device.h). Defined in libjaxmg_cuda.so only. */
const jmg_engine *jmg_cusolvermg_engine(void);

#endif
