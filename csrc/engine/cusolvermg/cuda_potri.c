/* The tiled inverse from the Cholesky factor (cuda_potri.h).
 *
 * Tile k (columns k*t .. k*t + t - 1) lives on device k % G. Device d's
 * right-hand sides are its own columns of the identity, in its x. Step k of
 * a solve touches, on device d, the columns of its tiles j <= k: a prefix
 * of its local columns (tiles j > k have nothing in rows k*t .. yet in the
 * forward solve, and want nothing there from the backward one). With P the
 * panel (rows k*t and below of tile k: L_kk over L_{>k,k}) and X_k rows
 * k*t .. k*t + t - 1 of those columns:
 *   forward,  k = 0 .. nt-1:  X_k = L_kk^-1 X_k;  X_{>k} -= L_{>k,k} X_k
 *   backward, k = nt-1 .. 0:  X_k -= L_{>k,k}^H X_{>k};  X_k = L_kk^-H X_k
 * Every device copies P from its owner into one of two buffers on a copy
 * stream of its own; its stream waits for that copy, and the copy into a
 * buffer waits until the step that last read the buffer is done. */
#include "engine/cusolvermg/cuda_potri.h"

#include <stdlib.h>
#include <string.h>

#include "cuda/blas.h"
#include "cuda/call.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "engine/cusolvermg/tiles.h"

/* [panel 0 | panel 1 | t ones]: the ones are copied from the host once,
 * synchronously, so that no copy is left reading host memory. */
static size_t panel_bytes(const jmg_dist_matrix *a) {
  return jmg_cuda_align((size_t)a->n * (size_t)a->tile *
                        jmg_dtype_size(a->dtype));
}

size_t jmg_cuda_potri_workspace(const jmg_dist_matrix *a) {
  return 2 * panel_bytes(a) +
         jmg_cuda_align((size_t)a->tile * jmg_dtype_size(a->dtype));
}

/* One call's state. */
typedef struct run {
  jmg_tiles g;
  const jmg_cuda_potrf_handles *h;
  char *x[JMG_CUDA_MAX_DEVICES];
  jmg_tiles_lane lane[JMG_CUDA_MAX_DEVICES];
  cudaEvent_t start[JMG_CUDA_MAX_DEVICES]; /* jmg_tiles_start_device's */
  jmg_tiles_timer tm;
} run;

/* Device d's tiles j <= k. */
static int64_t tiles_upto(const run *r, int d, int64_t k) {
  return k < d ? 0 : (k - d) / r->g.G + 1;
}

/* Row `row` of device d's local column `col` in x. */
static char *x_at(const run *r, int d, int64_t col, int64_t row) {
  return r->x[d] + ((size_t)col * (size_t)r->g.n + (size_t)row) * r->g.es;
}

/* Device d's x = its columns of the identity; ones: t ones on device d. */
static int identity(run *r, int d, const char *ones, jmg_error *err) {
  const size_t es = r->g.es;
  const int64_t cols = r->g.n / r->g.G;
  int rc = JMG_CUDA_TRY(cudaMemsetAsync(r->x[d], 0,
                                        (size_t)cols * (size_t)r->g.n * es,
                                        r->g.stream[d]),
                        r->g.op, err);
  for (int64_t s = 0; rc == 0 && s * r->g.t < cols; ++s) {
    const int64_t j = s * r->g.G + d; /* the tile of local slot s */
    rc = JMG_CUDA_TRY(
        cudaMemcpy2DAsync(x_at(r, d, s * r->g.t, j * r->g.t),
                          ((size_t)r->g.n + 1) * es, ones, es, es,
                          (size_t)r->g.t, cudaMemcpyDeviceToDevice,
                          r->g.stream[d]),
        r->g.op, err);
  }
  return rc;
}

/* Step i of both solves (i < nt: forward step k = i; then backward step
 * k = 2 nt - 1 - i) on device d (made current here). */
static int step(run *r, int64_t i, int d, jmg_error *err) {
  const int backward = i >= r->g.nt;
  const int64_t k = backward ? 2 * r->g.nt - 1 - i : i;
  const int64_t cols = tiles_upto(r, d, k) * r->g.t;
  if (cols == 0) return 0;
  const int t = r->g.t, b = (int)(i % 2);
  const int64_t top = k * t, below = r->g.n - top - t, m = r->g.n - top;
  const jmg_dtype dt = r->g.a->dtype;
  const cublasHandle_t blas = r->h->blas[d];
  int rc =
      JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, d)), r->g.op, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_IDLE, err);
  const char *p = jmg_tiles_at(&r->g, k, top);
  int64_t ldp = r->g.n;
  if (rc == 0 && (int)(k % r->g.G) != d) {
    rc = jmg_tiles_lane_fetch(&r->g, d, &r->lane[d], b, NULL, p, m, err);
    if (rc == 0)
      rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_WAIT, err);
    p = r->lane[d].buf[b];
    ldp = m;
  }
  const char *below_p = p + (size_t)t * r->g.es;
  char *xk = x_at(r, d, 0, top), *xb = x_at(r, d, 0, top + t);
  const int ld = (int)r->g.n;
  if (rc == 0 && !backward)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_trsm(blas, dt, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
                        CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, t, (int)cols, p,
                        (int)ldp, xk, ld),
        r->g.op, err);
  if (rc == 0 && !backward)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_FACTOR, err);
  if (rc == 0 && below > 0)
    rc = JMG_CUBLAS_TRY(
        backward
            ? jmg_cublas_gemm(blas, dt, CUBLAS_OP_C, CUBLAS_OP_N, t, (int)cols,
                              (int)below, -1.0, below_p, (int)ldp, xb, ld, 1.0,
                              xk, ld)
            : jmg_cublas_gemm(blas, dt, CUBLAS_OP_N, CUBLAS_OP_N, (int)below,
                              (int)cols, t, -1.0, below_p, (int)ldp, xk, ld,
                              1.0, xb, ld),
        r->g.op, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_UPDATE, err);
  if (rc == 0 && backward)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_trsm(blas, dt, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
                        CUBLAS_OP_C, CUBLAS_DIAG_NON_UNIT, t, (int)cols, p,
                        (int)ldp, xk, ld),
        r->g.op, err);
  if (rc == 0 && backward)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_FACTOR, err);
  if (rc == 0)
    rc = jmg_tiles_lane_release(&r->g, d, &r->lane[d], b, err);
  return rc;
}

/* Streams, events, buffers and x's identity on every device. */
static int setup(run *r, void *const *x, void *const *work, jmg_error *err) {
  const size_t half = panel_bytes(r->g.a);
  char *ones = NULL;
  int rc = jmg_tiles_host_work(&r->g, (size_t)r->g.t * r->g.es, "potri",
                               (void **)&ones, err);
  for (int i = 0; rc == 0 && i < r->g.t; ++i)
    jmg_dtype_set_one(r->g.a->dtype, ones + (size_t)i * r->g.es);
  for (int d = 0; rc == 0 && d < r->g.G; ++d) {
    r->x[d] = x[d];
    r->lane[d].buf[0] = work[d];
    r->lane[d].buf[1] = (char *)work[d] + half;
    rc = jmg_tiles_start_device(&r->g, d, r->h->blas[d], r->h->dn[d],
                                &r->start[d], err);
    if (rc == 0) rc = jmg_tiles_lane_start(&r->g, d, &r->lane[d], err);
    char *dev_ones = (char *)work[d] + 2 * half;
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaMemcpy(dev_ones, ones, (size_t)r->g.t * r->g.es,
                                   cudaMemcpyHostToDevice),
                        r->g.op, err);
    if (rc == 0) rc = identity(r, d, dev_ones, err);
  }
  free(ones);
  /* Per device and step: idle, wait, the trsm, the gemm; and the start. */
  if (rc == 0)
    rc = jmg_tiles_timer_start(&r->tm, &r->g, 8 * r->g.nt + 2, err);
  return rc;
}

/* Waits for every device's streams (also after a failure: the caller
 * frees x and the buffers next) and frees what setup made. */
static int finish(run *r, int rc, jmg_error *err) {
  for (int d = 0; d < r->g.G; ++d) {
    jmg_error ignored;
    jmg_error *e = rc == 0 ? err : &ignored;
    int s = r->g.stream[d] != NULL ? jmg_tiles_sync_device(&r->g, d, e) : 0;
    s = jmg_tiles_lane_end(&r->g, d, &r->lane[d], s, e);
    if (rc == 0) rc = s;
    if (r->start[d] != NULL) cudaEventDestroy(r->start[d]);
  }
  jmg_tiles_timer_end(&r->tm, &r->g, "tiled potri");
  return rc;
}

int jmg_cuda_potri_from_factor(const jmg_dist_matrix *a,
                               const jmg_cuda_potrf_handles *h,
                               void *const *x, void *const *work,
                               const char *op, jmg_error *err) {
  run r;
  memset(&r, 0, sizeof r);
  r.h = h;
  int rc = jmg_tiles_check(a, "potri", op, err);
  if (rc != 0) return rc;
  jmg_tiles_init(&r.g, a, op);
  rc = setup(&r, x, work, err);
  for (int64_t i = 0; rc == 0 && i < 2 * r.g.nt; ++i)
    for (int d = 0; rc == 0 && d < r.g.G; ++d) rc = step(&r, i, d, err);
  return finish(&r, rc, err);
}
