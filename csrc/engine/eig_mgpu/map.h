/* The 1D block-cyclic column map of the multi-GPU eigensolver
 * (engine/eig_mgpu/trd.h): tiles of `tile` columns go round-robin to ndev
 * GPUs (tile t to GPU t % ndev), each GPU holding its columns in order, the
 * layout of jmg_dist_matrix (engine/engine.h) and cuSOLVERMg. Pure
 * functions, no CUDA: tested on the CPU (tests/c/test_eig_mgpu.c). */
#ifndef JMG_ENGINE_EIG_MGPU_MAP_H
#define JMG_ENGINE_EIG_MGPU_MAP_H

#include <stdint.h>

#define JMG_TRD_MAX_DEV 16 /* the kernels' limit (kernels.cu MAXDEV) */
#define JMG_TRD_NB_MAX 128 /* the widest panel (kernels.cu MAXNB) */

/* A (or Z) distributed: a[d] is GPU d's columns, column-major, lda n. */
typedef struct jmg_trd_matrix {
  int64_t n, tile;
  double *a[JMG_TRD_MAX_DEV];
} jmg_trd_matrix;

/* The GPU that holds global column c. */
static inline int jmg_bc_owner(int64_t c, int64_t tile, int ndev) {
  return (int)((c / tile) % ndev);
}

/* Global column c's index among its owner's columns. */
static inline int64_t jmg_bc_local(int64_t c, int64_t tile, int ndev) {
  return (c / (tile * ndev)) * tile + c % tile;
}

/* The global index of GPU dev's local column lc. */
static inline int64_t jmg_bc_global(int64_t lc, int64_t tile, int ndev,
                                    int dev) {
  return ((lc / tile) * ndev + dev) * tile + lc % tile;
}

/* How many of the n columns GPU dev holds. */
static inline int64_t jmg_bc_count(int64_t n, int64_t tile, int ndev,
                                   int dev) {
  const int64_t full = n / tile, rest = n % tile; /* whole tiles, a part */
  int64_t cnt = (full / ndev) * tile;
  const int64_t extra = full % ndev; /* GPUs 0 .. extra-1 hold one more */
  if (dev < extra) cnt += tile;
  if (dev == extra) cnt += rest;
  return cnt;
}

/* The first of GPU dev's local columns whose global index is c or more
 * (its count where there is none). */
static inline int64_t jmg_bc_first_from(int64_t c, int64_t n, int64_t tile,
                                        int ndev, int dev) {
  const int64_t cnt = jmg_bc_count(n, tile, ndev, dev);
  if (c >= n) return cnt;
  const int64_t b = c / tile;
  int64_t lc;
  if (b % ndev == dev) {
    lc = (b / ndev) * tile + c % tile;
  } else {
    const int64_t b2 = b + ((dev - b % ndev) % ndev + ndev) % ndev;
    lc = (b2 / ndev) * tile;
  }
  return lc < cnt ? lc : cnt;
}

/* The panel that starts at global column i: its width, at most nb, never
 * past the end of i's tile (a panel stays on one GPU) nor past column
 * last. */
static inline int64_t jmg_bc_panel(int64_t i, int64_t last, int64_t tile,
                                   int64_t nb) {
  int64_t w = nb;
  const int64_t tile_end = (i / tile + 1) * tile;
  if (i + w > tile_end) w = tile_end - i;
  if (i + w > last + 1) w = last + 1 - i;
  return w;
}

#endif
