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

/* ---- a device's copy lane (the tiled inverse; the Cholesky's pipeline) ----
 *
 * Panels from other devices come by peer copy on a copy stream of the
 * device's own, beside its compute stream (copy engines take no SMs), into
 * one of two buffers: buffer b's `ready` is recorded on the copy stream
 * after its copy, its `freed` on the compute stream after the last step
 * that read it; the copy into b waits for `freed`, the compute stream for
 * `ready`. A zeroed lane holds nothing (jmg_tiles_lane_end leaves it). */
typedef struct jmg_tiles_lane {
  cudaStream_t copy;
  char *buf[2]; /* set by the caller: each an n x t panel (ld n) at most */
  cudaEvent_t ready[2], freed[2];
} jmg_tiles_lane;

/* Creates the lane's copy stream and events on device d (made current). */
int jmg_tiles_lane_start(const jmg_tiles *g, int d, jmg_tiles_lane *lane,
                         jmg_error *err);

/* Copies the m x t panel at src (ld n) into buffer b (ld m) on device d's
 * copy stream (d current), after `after` (an event of the panel's owner, or
 * NULL) and after buffer b's last reader; d's compute stream then waits for
 * the copy. */
int jmg_tiles_lane_fetch(const jmg_tiles *g, int d, jmg_tiles_lane *lane,
                         int b, cudaEvent_t after, const void *src, int64_t m,
                         jmg_error *err);

/* Records on device d's compute stream (d current) that the steps reading
 * buffer b are all issued: the next copy into b waits for them. */
int jmg_tiles_lane_release(const jmg_tiles *g, int d, jmg_tiles_lane *lane,
                           int b, jmg_error *err);

/* Waits for the lane's copy stream (its error into err, unless rc already
 * holds one) and destroys the stream and events; returns rc or that error.
 * Device d is made current. */
int jmg_tiles_lane_end(const jmg_tiles *g, int d, jmg_tiles_lane *lane, int rc,
                       jmg_error *err);

/* ---- where the time goes (JAXMG_TRACE) ----
 *
 * With JAXMG_TRACE on, and not at all without it, a factorization marks
 * each device's stream at the end of each piece of its work with the kind
 * of that piece (a timing event recorded on the stream). After the last
 * synchronization the intervals between consecutive marks are summed by
 * kind and noted in the call's trace line: per GPU, the time its stream
 * spent on each kind. IDLE is time a stream had nothing queued (the host
 * had not given it its next work: a mark made when a step's work for it
 * begins), WAIT time it waited for another device's event. The events are
 * asynchronous: marking adds no synchronization. */
typedef enum jmg_tiles_kind {
  JMG_TILES_IDLE,
  JMG_TILES_WAIT,
  JMG_TILES_FACTOR,
  JMG_TILES_SWAP,
  JMG_TILES_COPY,
  JMG_TILES_UPDATE,
  JMG_TILES_KINDS
} jmg_tiles_kind;

typedef struct jmg_tiles_timer {
  int on;
  int64_t cap;                               /* marks per device */
  int64_t count[JMG_CUDA_MAX_DEVICES];       /* marks made */
  int64_t dropped;                           /* marks past cap */
  cudaEvent_t *ev[JMG_CUDA_MAX_DEVICES];     /* cap events per device */
  unsigned char *kind[JMG_CUDA_MAX_DEVICES]; /* the kind each mark ends */
} jmg_tiles_timer;

/* Zeroes tm and, where JAXMG_TRACE is on, creates marks_per_device timing
 * events on each device and marks every stream once (the start). After
 * jmg_tiles_start_device for every device; leaves device G - 1 current. */
int jmg_tiles_timer_start(jmg_tiles_timer *tm, const jmg_tiles *g,
                          int64_t marks_per_device, jmg_error *err);

/* Ends the piece of device d's work queued since its previous mark: it was
 * of kind. Device d must be current. Nothing when the timer is off; a mark
 * past the cap is dropped (and counted). */
int jmg_tiles_timer_mark(jmg_tiles_timer *tm, const jmg_tiles *g, int d,
                         jmg_tiles_kind kind, jmg_error *err);

/* After every device's stream finished: notes "what [GPU 0: factor 1.20 ms,
 * ...; GPU 1: ...]" in the trace (common/trace.h) and destroys the events.
 * Safe with the timer off or after a failed start. */
void jmg_tiles_timer_end(jmg_tiles_timer *tm, const jmg_tiles *g,
                         const char *what);

#endif
