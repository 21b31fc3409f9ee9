/* Right-looking blocked Cholesky over the GPUs of a 1D block-cyclic matrix.
 *
 * Tile k (columns k*t .. k*t + t - 1) lives on device k % G. Step k:
 *  - factor: its owner factors the diagonal tile (cusolverDnXpotrf) and
 *    solves the panel below it (trsm), then records an event;
 *  - update: every device with tiles right of k waits for that event, copies
 *    the panel (rows below tile k) into its own buffer, and subtracts
 *    panel * panel^H from each of its tiles j > k, rows j*t and below.
 * The owner of tile k + 1 updates that tile first and factors it at once,
 * before its other updates (one step of lookahead), so that the next panel
 * is ready while the devices still update with this one.
 *
 * Each device's work runs in order on its own stream; the only dependences
 * between devices are the panel events. Two paths (jmg_cuda_potrf's
 * pipeline, JAXMG_POTRF_PIPELINE):
 *  - off (the default): the copy into a device's one panel buffer runs on
 *    its compute stream, after that device's previous updates, and each
 *    tile's update is one gemm (which also writes the strict upper triangle
 *    of the diagonal tile, which nothing reads);
 *  - on: each device copies on a copy stream of its own into one of two
 *    panel buffers, alternately (potri's pattern, cuda_potri.c): the copy
 *    waits for the panel's event and for the 'freed' event of the step that
 *    last read the buffer, the compute stream waits for the copy's 'ready'
 *    event, so that the copy of the next panel overlaps this step's
 *    updates (copy engines, not SMs: no compute runs concurrently); and
 *    each tile's update is herk (syrk) on its diagonal block's lower
 *    triangle and gemm on the rows below it. */
#include "engine/cusolvermg/cuda_potrf.h"

#include <stdlib.h>
#include <string.h>

#include "cuda/blas.h"
#include "cuda/call.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/dtype.h"
#include "engine/cusolvermg/tiles.h"

/* Sizes of the per-device workspace: [panel | panel2 | potrf workspace |
 * info], panel2 (the pipeline's second buffer) 0 without the pipeline. */
typedef struct layout {
  size_t panel, panel2, dn, info, host;
} layout;

static int sizes(const jmg_dist_matrix *a, const jmg_cuda_potrf_handles *h,
                 int pipeline, layout *l, const char *op, jmg_error *err) {
  int rc = jmg_tiles_check(a, "potrf", op, err);
  const jmg_cuda_device *d0 = a->device_ctx[0];
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  size_t dn = 0, host = 0;
  if (rc == 0) rc = JMG_CUDA_TRY(cudaSetDevice(d0->device), op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnXpotrf_bufferSize(
                              h->dn[0], h->params, CUBLAS_FILL_MODE_LOWER,
                              a->tile, t, a->data[0], a->n, t, &dn, &host),
                          op, err);
  if (rc != 0) return rc;
  const size_t es = jmg_dtype_size(a->dtype);
  l->panel = jmg_cuda_align((size_t)a->n * (size_t)a->tile * es);
  /* A device's i-th copy (from 0) is of a panel k >= i, of n - (k+1) t rows:
   * buffer 1 takes the odd ones, n - 2t rows at most. */
  const int64_t rows2 = a->n - 2 * a->tile > 0 ? a->n - 2 * a->tile : 0;
  l->panel2 =
      pipeline ? jmg_cuda_align((size_t)rows2 * (size_t)a->tile * es) : 0;
  l->dn = jmg_cuda_align(dn > 0 ? dn : 1);
  l->info = jmg_cuda_align((size_t)(a->n / a->tile / a->ndev) * sizeof(int));
  l->host = host;
  return 0;
}

int jmg_cuda_potrf_workspace(const jmg_dist_matrix *a,
                             const jmg_cuda_potrf_handles *h, int pipeline,
                             size_t *bytes, const char *op, jmg_error *err) {
  layout l;
  int rc = sizes(a, h, pipeline != 0, &l, op, err);
  *bytes = rc == 0 ? l.panel + l.panel2 + l.dn + l.info : 0;
  return rc;
}

/* One call's state. */
typedef struct run {
  jmg_tiles g;
  const jmg_cuda_potrf_handles *h;
  layout l;
  int pipeline; /* jmg_cuda_potrf's */
  cudaEvent_t panel_ready[JMG_CUDA_MAX_DEVICES];
  char *panel[JMG_CUDA_MAX_DEVICES];
  /* The pipeline's: each device's copy lane (its two panel buffers, the
   * first is panel[d]) and the copies made so far (copy i goes to buffer
   * i % 2). */
  jmg_tiles_lane lane[JMG_CUDA_MAX_DEVICES];
  int64_t copies[JMG_CUDA_MAX_DEVICES];
  void *dn_work[JMG_CUDA_MAX_DEVICES];
  int *info[JMG_CUDA_MAX_DEVICES];
  void *host_work[JMG_CUDA_MAX_DEVICES];
  jmg_tiles_timer tm; /* JAXMG_TRACE: each device's time by kind */
} run;

/* Step k's factor, on tile k's device (current). */
static int factor_tile(run *r, int64_t k, jmg_error *err) {
  const int d = (int)(k % r->g.G);
  const jmg_dtype dt = r->g.a->dtype;
  const cudaDataType t = jmg_cuda_data_type(dt);
  char *akk = jmg_tiles_at(&r->g, k, k * r->g.t);
  int rc = JMG_CUSOLVER_TRY(
      cusolverDnXpotrf(r->h->dn[d], r->h->params, CUBLAS_FILL_MODE_LOWER,
                       r->g.t, t, akk, r->g.n, t, r->dn_work[d], r->l.dn,
                       r->host_work[d], r->l.host, r->info[d] + k / r->g.G),
      r->g.op, err);
  const int64_t below = r->g.n - (k + 1) * r->g.t;
  if (rc == 0 && below > 0)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_trsm(
            r->h->blas[d], dt, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER,
            CUBLAS_OP_C, CUBLAS_DIAG_NON_UNIT, (int)below, r->g.t, akk,
            (int)r->g.n, akk + (size_t)r->g.t * r->g.es, (int)r->g.n),
        r->g.op, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_FACTOR, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaEventRecord(r->panel_ready[d], r->g.stream[d]),
                      r->g.op, err);
  return rc;
}

/* The pipeline's copy of step k's panel (m rows at p, ld n, on device
 * owner) to device d (current), on d's copy stream into buffer *b, which
 * d's compute stream then waits for. */
static int fetch_panel(run *r, int d, int owner, const char *p, int64_t m,
                       int *b, jmg_error *err) {
  *b = (int)(r->copies[d]++ % 2);
  return jmg_tiles_lane_fetch(&r->g, d, &r->lane[d], *b, r->panel_ready[owner],
                              p, m, err);
}

/* Tile j's update on device d with the panel p (ld ldp, its first row
 * top): rows j*t and below -= P_j P_jj^H, P_j the panel's rows from j*t.
 * One gemm, or with the pipeline herk on the diagonal block's lower
 * triangle and gemm below it. */
static int update_tile(run *r, int d, const char *p, int64_t ldp,
                       int64_t top, int64_t j, jmg_error *err) {
  const int t = r->g.t;
  const jmg_dtype dt = r->g.a->dtype;
  const cublasHandle_t blas = r->h->blas[d];
  const char *pj = p + (size_t)(j * t - top) * r->g.es;
  char *cj = jmg_tiles_at(&r->g, j, j * t);
  if (!r->pipeline)
    return JMG_CUBLAS_TRY(
        jmg_cublas_gemm(blas, dt, CUBLAS_OP_N, CUBLAS_OP_C,
                        (int)(r->g.n - j * t), t, t, -1.0, pj, (int)ldp, pj,
                        (int)ldp, 1.0, cj, (int)r->g.n),
        r->g.op, err);
  int rc = JMG_CUBLAS_TRY(
      jmg_cublas_herk_n(blas, dt, CUBLAS_FILL_MODE_LOWER, t, t, -1.0, pj,
                        (int)ldp, 1.0, cj, (int)r->g.n),
      r->g.op, err);
  const int64_t below = r->g.n - (j + 1) * t;
  if (rc == 0 && below > 0)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_gemm(blas, dt, CUBLAS_OP_N, CUBLAS_OP_C, (int)below, t, t,
                        -1.0, pj + (size_t)t * r->g.es, (int)ldp, pj,
                        (int)ldp, 1.0, cj + (size_t)t * r->g.es, (int)r->g.n),
        r->g.op, err);
  return rc;
}

/* Step k's update on device d (made current here), with the lookahead
 * factor of tile k + 1 when d holds it. */
static int update_device(run *r, int64_t k, int d, jmg_error *err) {
  const int64_t first = k + 1 + ((d - (k + 1) % r->g.G) + r->g.G) % r->g.G;
  if (first >= r->g.nt) return 0;
  const int owner = (int)(k % r->g.G);
  const int64_t top = (k + 1) * r->g.t; /* the panel's first row */
  const int64_t m = r->g.n - top;
  int rc =
      JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, d)), r->g.op, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_IDLE, err);
  const char *p = jmg_tiles_at(&r->g, k, top);
  int64_t ldp = r->g.n;
  int b = -1; /* the pipeline's buffer this step reads */
  if (rc == 0 && d != owner && r->pipeline) {
    /* The copy is on the copy stream: the compute stream's time until it
     * is done (the panel's factor, then the copy, where the copy did not
     * finish during the previous step's updates) is a wait. */
    rc = fetch_panel(r, d, owner, p, m, &b, err);
    if (rc == 0)
      rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_WAIT, err);
    p = r->lane[d].buf[b];
    ldp = m;
  } else if (rc == 0 && d != owner) {
    rc = JMG_CUDA_TRY(
        cudaStreamWaitEvent(r->g.stream[d], r->panel_ready[owner], 0), r->g.op,
        err);
    if (rc == 0)
      rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_WAIT, err);
    if (rc == 0) rc = jmg_tiles_copy_panel(&r->g, d, r->panel[d], p, m, err);
    if (rc == 0)
      rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_COPY, err);
    p = r->panel[d];
    ldp = m;
  }
  for (int64_t j = first; rc == 0 && j < r->g.nt; j += r->g.G) {
    rc = update_tile(r, d, p, ldp, top, j, err);
    if (rc == 0 && j == k + 1) {
      rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_UPDATE, err);
      if (rc == 0) rc = factor_tile(r, j, err);
    }
  }
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_UPDATE, err);
  if (rc == 0 && b >= 0)
    rc = jmg_tiles_lane_release(&r->g, d, &r->lane[d], b, err);
  return rc;
}

/* Streams, events and workspace pointers for every device. */
static int setup(run *r, void *const *work, jmg_error *err) {
  int rc = 0;
  for (int d = 0; rc == 0 && d < r->g.G; ++d) {
    const size_t panels = r->l.panel + r->l.panel2;
    r->panel[d] = work[d];
    r->lane[d].buf[0] = work[d];
    r->lane[d].buf[1] = (char *)work[d] + r->l.panel;
    r->dn_work[d] = (char *)work[d] + panels;
    r->info[d] = (int *)((char *)work[d] + panels + r->l.dn);
    rc = jmg_tiles_start_device(&r->g, d, r->h->blas[d], r->h->dn[d],
                                &r->panel_ready[d], err);
    if (rc == 0 && r->pipeline)
      rc = jmg_tiles_lane_start(&r->g, d, &r->lane[d], err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaMemsetAsync(r->info[d], 0, r->l.info, r->g.stream[d]), r->g.op,
          err);
    if (rc == 0)
      rc =
          jmg_tiles_host_work(&r->g, r->l.host, "potrf", &r->host_work[d], err);
  }
  /* Per device and step: idle, wait, copy, update, the lookahead's factor,
   * update; and the start and step 0's factor. */
  if (rc == 0)
    rc = jmg_tiles_timer_start(&r->tm, &r->g, 6 * r->g.nt + 4, err);
  return rc;
}

/* Waits for every device (also after a failure: the caller frees the
 * workspace next), frees what setup made, and reads the first failing minor
 * when all went well. */
static int finish(run *r, int rc, int64_t *info, jmg_error *err) {
  const int64_t per_dev = r->g.nt / r->g.G;
  int *host = rc == 0 ? calloc((size_t)per_dev, sizeof *host) : NULL;
  if (rc == 0 && host == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, r->g.op, "malloc",
                       "cannot allocate %lld ints", (long long)per_dev);
  *info = 0;
  for (int d = 0; d < r->g.G; ++d) {
    jmg_error ignored;
    jmg_error *e = rc == 0 ? err : &ignored;
    int s = r->g.stream[d] != NULL ? jmg_tiles_sync_device(&r->g, d, e) : 0;
    s = jmg_tiles_lane_end(&r->g, d, &r->lane[d], s, e);
    if (s == 0 && rc == 0)
      s = JMG_CUDA_TRY(
          cudaMemcpy(host, r->info[d], (size_t)per_dev * sizeof *host,
                     cudaMemcpyDeviceToHost),
          r->g.op, e);
    /* Tile k = slot * G + d; the first failing tile wins. */
    for (int64_t slot = 0; s == 0 && rc == 0 && slot < per_dev; ++slot) {
      const int64_t k = slot * r->g.G + d;
      if (host[slot] != 0) {
        const int64_t minor = host[slot] > 0 ? k * r->g.t + host[slot] : -1;
        if (minor < 0)
          s = jmg_error_set(err, JMG_ECUSOLVER, r->g.op, "cusolverDnXpotrf",
                            "argument %d was rejected", -host[slot]);
        else if (*info == 0 || minor < *info)
          *info = minor;
        break;
      }
    }
    if (rc == 0) rc = s;
    if (r->panel_ready[d] != NULL) cudaEventDestroy(r->panel_ready[d]);
    free(r->host_work[d]);
  }
  free(host);
  jmg_tiles_timer_end(&r->tm, &r->g, "tiled potrf");
  return rc;
}

int jmg_cuda_potrf(const jmg_dist_matrix *a, const jmg_cuda_potrf_handles *h,
                   int pipeline, void *const *work, int64_t *info,
                   const char *op, jmg_error *err) {
  run r;
  memset(&r, 0, sizeof r);
  r.h = h;
  r.pipeline = pipeline != 0;
  *info = 0;
  int rc = sizes(a, h, r.pipeline, &r.l, op, err);
  if (rc != 0) return rc;
  jmg_tiles_init(&r.g, a, op);
  rc = setup(&r, work, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r.g, 0)), op, err);
  if (rc == 0) rc = factor_tile(&r, 0, err);
  for (int64_t k = 0; rc == 0 && k + 1 < r.g.nt; ++k)
    for (int d = 0; rc == 0 && d < r.g.G; ++d)
      rc = update_device(&r, k, d, err);
  return finish(&r, rc, info, err);
}
