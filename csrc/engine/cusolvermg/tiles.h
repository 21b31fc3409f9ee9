/* What jaxmg's tiled factorizations over several GPUs (cuda_potrf.c,
 * cuda_lu.c) share, internal to engine/cusolvermg/: the geometry of a 1D
 * block-cyclic matrix (tile k, columns k*t .. k*t + t - 1, on device k % G,
 * column-major with ld n), its addressing, and the per-device steps both take
 * in the same way: the shape check, making a device's handles run on its
 * stream, copying a panel to another device, and waiting for a device.
 * Every CUDA call's return code is checked and reported under op. */
#ifndef JMG_ENGINE_CUSOLVERMG_TILES_H
#define JMG_ENGINE_CUSOLVERMG_TILES_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "cuda/device.h"
#include "engine/engine.h"

/* One call's geometry, from a (device_ctx entries jmg_cuda_device), and the
 * stream of each device. */
typedef struct jmg_tiles {
  const jmg_dist_matrix *a;
  const char *op;
  int G, t;                                  /* devices, tile width */
  int64_t n, nt;                             /* order, tiles */
  size_t es;                                 /* bytes per element */
  cudaStream_t stream[JMG_CUDA_MAX_DEVICES]; /* set by jmg_tiles_start_device */
} jmg_tiles;

/* Fails unless 1 <= ndev <= JMG_CUDA_MAX_DEVICES and n is a multiple of
 * tile * ndev within cuBLAS's 32-bit sizes; who names the routine. */
int jmg_tiles_check(const jmg_dist_matrix *a, const char *who, const char *op,
                    jmg_error *err);

/* Fills g from a (streams aside); a must have passed jmg_tiles_check. */
void jmg_tiles_init(jmg_tiles *g, const jmg_dist_matrix *a, const char *op);

/* Device d's CUDA ordinal. */
int jmg_tiles_device(const jmg_tiles *g, int d);

/* Row `row` of local column `col` of device d. */
char *jmg_tiles_elem(const jmg_tiles *g, int d, int64_t col, int64_t row);

/* Row `row` of tile k's first column, on device k % G. */
char *jmg_tiles_at(const jmg_tiles *g, int64_t k, int64_t row);

/* Makes device d current, takes its stream into g->stream[d], creates
 * *event (no timing) and puts blas and dn on the stream. */
int jmg_tiles_start_device(jmg_tiles *g, int d, cublasHandle_t blas,
                           cusolverDnHandle_t dn, cudaEvent_t *event,
                           jmg_error *err);

/* *out = bytes of host workspace for who's routine (NULL when bytes is 0). */
int jmg_tiles_host_work(const jmg_tiles *g, size_t bytes, const char *who,
                        void **out, jmg_error *err);

/* Copies the m x t panel at src (ld n) to dst (ld m) on device d's stream. */
int jmg_tiles_copy_panel(const jmg_tiles *g, int d, void *dst, const void *src,
                         int64_t m, jmg_error *err);

/* Makes device d current and waits for its stream. */
int jmg_tiles_sync_device(const jmg_tiles *g, int d, jmg_error *err);

#endif
