/* Right-looking blocked Cholesky over the GPUs of a 1D block-cyclic matrix,
 * with one step of lookahead on a second stream per device.
 *
 * Tile k (columns k*t .. k*t + t - 1) lives on device k % G. Step k:
 *  - factor (panel k): its owner factors the diagonal tile
 *    (cusolverDnXpotrf) and solves the panel below it (trsm);
 *  - update: every device with tiles right of k brings the panel (rows
 *    below tile k) into its own buffer unless it owns it, and subtracts
 *    panel * panel^H from each of its tiles j > k, rows j*t and below (one
 *    gemm per tile; the gemm also writes the strict upper triangle of the
 *    diagonal tile, which nothing reads).
 *
 * Streams. Each device d has S[d], XLA's stream (g.stream[d]), and A[d], a
 * stream of this call's own at the highest priority (ga.stream[d]). Every
 * factor, and each step's update of the tile to be factored next, runs on
 * A; the other updates run on S. At step k the owner of tile k + 1 (the
 * lookahead device) queues on A[d]: the panel's copy, step k's update of
 * tile k + 1, panel k + 1's factor and the event panel_ready[d]; and on
 * S[d] the rest of its step-k update. The factor of panel k + 1 then waits
 * only for what it reads (panel k and the updates of tile k + 1), not for
 * the device's other step k - 1 and step k updates, and runs beside them;
 * the other devices wait for panel_ready (recorded right after the factor)
 * before they copy it, never for the owner's update.
 *
 * Events, each made on its device and recorded on one of its streams:
 *  - panel_ready[d] (A[d]): the tile d factored last is final;
 *  - tile_ready[d] (S[d]): at step k, after S[d]'s update of tile k + 2
 *    when d holds it (the tile step k + 1 factors on A[d]); in setup, after
 *    XLA's earlier work and the info's reset;
 *  - copied[d] (A[d]): panel k is in d's buffer (lookahead steps);
 *  - buf_free[d] (S[d]): after S[d]'s last read of d's buffer (the end of a
 *    step in which S[d] read it); in setup, as tile_ready.
 * cudaStreamWaitEvent waits for the record issued last before it, so the
 * host issues each wait after the record it means and before the next
 * record of that event: panel_ready[d] is recorded again G steps later,
 * tile_ready[d] at step k + G after its wait at step k + 1, and with G = 1
 * (both in the same step) the step issues S's wait for panel k before A's
 * factor of panel k + 1 records panel_ready again, and A's wait for
 * tile_ready before S records it again.
 *
 * Why every access is ordered (d current, o = k % G, step k):
 *  - tile k + 1, written on S[d] in steps < k and on A[d] in step k only:
 *    A[d] waits tile_ready[d], recorded at step k - 1 after the last of
 *    those S[d] writes (the earlier ones precede it on S[d]; at k = 0,
 *    setup's record, after XLA's writes of the matrix); S[d] touches
 *    tile k + 1 no more after step k - 1;
 *  - tiles j > k + 1 (S[d] writes, step k): disjoint from tile k + 1 and
 *    from every panel that is read; written on A[d] only at step j - 1,
 *    after tile_ready as above;
 *  - panel k, final once factored on A[o]: everyone reading it (S[o] in
 *    place; A[d] or S[d] copying it) first waits panel_ready[o], and no
 *    one writes tile k again;
 *  - d's buffer: written by the copy (on A[d] in lookahead steps, on S[d]
 *    otherwise) and read by step k's gemms on A[d] and S[d]. S[d] reads
 *    after copied[d] (or after its own copy); A[d]'s copy waits buf_free[d],
 *    recorded after S[d]'s last reads of an earlier step (with G = 2 two
 *    steps earlier: S[d] reads its own tile in between, so the copy does
 *    not wait for the update before it; with G > 2 the step before, so
 *    there A's copy follows S's step k - 1 and only the update of tile
 *    k + 1 and the factor run beside S); an S[d] copy comes after S[d]
 *    waited, at step k' + 1, for panel_ready[d] recorded on A[d] after its
 *    reads at step k';
 *  - the info words: reset on S[d] before setup's tile_ready, which A[d]
 *    waits for before any factor; read after both streams are waited for.
 * The host waits for every S and A stream at the end, and the handles'
 * streams are S's again: nothing the call queued runs after it returns.
 *
 * One cuBLAS handle per device serves both streams (cublasSetStream before
 * each run of calls, as the cuBLAS guide's "Parallelism with Streams" does):
 * cuBLAS itself picks the internal workspace of routines in concurrent
 * streams, at the price of bitwise reproducibility between runs (its
 * "Results reproducibility"). The cuSOLVER handle runs on A only.
 *
 * JAXMG_TRACE: S's marks are noted as "tiled potrf" (wait: for a panel or
 * its copy, which may be A's on the same device), A's as "tiled potrf
 * lookahead"; the two overlap in time. */
#include "engine/cusolvermg/cuda_potrf.h"

#include <stdlib.h>
#include <string.h>

#include "cuda/blas.h"
#include "cuda/call.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/dtype.h"
#include "engine/cusolvermg/tiles.h"

/* Sizes of the per-device workspace: [panel | potrf workspace | info]. */
typedef struct layout {
  size_t panel, dn, info, host;
} layout;

static int sizes(const jmg_dist_matrix *a, const jmg_cuda_potrf_handles *h,
                 layout *l, const char *op, jmg_error *err) {
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
  l->panel =
      jmg_cuda_align((size_t)a->n * (size_t)a->tile * jmg_dtype_size(a->dtype));
  l->dn = jmg_cuda_align(dn > 0 ? dn : 1);
  l->info = jmg_cuda_align((size_t)(a->n / a->tile / a->ndev) * sizeof(int));
  l->host = host;
  return 0;
}

int jmg_cuda_potrf_workspace(const jmg_dist_matrix *a,
                             const jmg_cuda_potrf_handles *h, size_t *bytes,
                             const char *op, jmg_error *err) {
  layout l;
  int rc = sizes(a, h, &l, op, err);
  *bytes = rc == 0 ? l.panel + l.dn + l.info : 0;
  return rc;
}

/* One call's state. */
typedef struct run {
  jmg_tiles g;  /* stream[d]: S[d], XLA's stream */
  jmg_tiles ga; /* the same geometry; stream[d]: A[d], the lookahead's */
  const jmg_cuda_potrf_handles *h;
  layout l;
  int made; /* devices whose A stream exists (the handles' to restore) */
  cudaEvent_t panel_ready[JMG_CUDA_MAX_DEVICES];
  cudaEvent_t tile_ready[JMG_CUDA_MAX_DEVICES];
  cudaEvent_t copied[JMG_CUDA_MAX_DEVICES];
  cudaEvent_t buf_free[JMG_CUDA_MAX_DEVICES];
  char *panel[JMG_CUDA_MAX_DEVICES];
  void *dn_work[JMG_CUDA_MAX_DEVICES];
  int *info[JMG_CUDA_MAX_DEVICES];
  void *host_work[JMG_CUDA_MAX_DEVICES];
  jmg_tiles_timer tm;  /* JAXMG_TRACE: each S stream's time by kind */
  jmg_tiles_timer tma; /* and each A stream's */
} run;

/* stream waits for event (device d current). */
static int wait_for(run *r, cudaStream_t stream, cudaEvent_t event,
                    jmg_error *err) {
  return JMG_CUDA_TRY(cudaStreamWaitEvent(stream, event, 0), r->g.op, err);
}

static int record(run *r, cudaEvent_t event, cudaStream_t stream,
                  jmg_error *err) {
  return JMG_CUDA_TRY(cudaEventRecord(event, stream), r->g.op, err);
}

/* Device d's cuBLAS calls from here run on stream. */
static int blas_on(run *r, int d, cudaStream_t stream, jmg_error *err) {
  return JMG_CUBLAS_TRY(cublasSetStream(r->h->blas[d], stream), r->g.op, err);
}

/* Tile j -= p * p^H, rows j*t and below, with p the rows of a panel from
 * row top (ld ldp): one gemm on device d's blas handle's stream. */
static int update_tile(run *r, int d, int64_t j, const char *p, int64_t ldp,
                       int64_t top, jmg_error *err) {
  const char *pj = p + (size_t)(j * r->g.t - top) * r->g.es;
  return JMG_CUBLAS_TRY(
      jmg_cublas_gemm(r->h->blas[d], r->g.a->dtype, CUBLAS_OP_N, CUBLAS_OP_C,
                      (int)(r->g.n - j * r->g.t), r->g.t, r->g.t, -1.0, pj,
                      (int)ldp, pj, (int)ldp, 1.0,
                      jmg_tiles_at(&r->g, j, j * r->g.t), (int)r->g.n),
      r->g.op, err);
}

/* Panel k's factor on A of tile k's device d (current; its blas handle on
 * A[d]), then panel_ready[d]. */
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
    rc = jmg_tiles_timer_mark(&r->tma, &r->ga, d, JMG_TILES_FACTOR, err);
  if (rc == 0) rc = record(r, r->panel_ready[d], r->ga.stream[d], err);
  return rc;
}

/* Step k on device d (made current here): where d holds tile k + 1, the
 * lookahead on A[d] (panel k's copy, tile k + 1's update, panel k + 1's
 * factor); then the rest of d's update on S[d]. The order of the host's
 * calls is the file comment's. */
static int step_device(run *r, int64_t k, int d, jmg_error *err) {
  const int G = r->g.G;
  const int64_t first = k + 1 + ((d - (k + 1) % G) + G) % G;
  if (first >= r->g.nt) return 0; /* no tile right of k */
  const int own = d == (int)(k % G);
  const int o = (int)(k % G);
  const int ahead = first == k + 1;     /* d holds tile k + 1 */
  const int64_t top = (k + 1) * r->g.t; /* the panel's first row */
  const int64_t m = r->g.n - top;
  const cudaStream_t s = r->g.stream[d], a = r->ga.stream[d];
  const char *p = jmg_tiles_at(&r->g, k, top); /* panel k, on device o */
  int rc =
      JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, d)), r->g.op, err);
  if (rc == 0) rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_IDLE, err);
  /* S: panel k is d's own, factored on A[d] at step k - 1 (before A's
   * next factor below records panel_ready[d] again). */
  if (rc == 0 && own) {
    rc = wait_for(r, s, r->panel_ready[d], err);
    if (rc == 0)
      rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_WAIT, err);
  }
  if (rc == 0 && ahead) {
    const char *pa = own ? p : r->panel[d];
    const int64_t lda = own ? r->g.n : m;
    rc = jmg_tiles_timer_mark(&r->tma, &r->ga, d, JMG_TILES_IDLE, err);
    /* Tile k + 1 has every update before step k. */
    if (rc == 0) rc = wait_for(r, a, r->tile_ready[d], err);
    if (rc == 0 && !own) rc = wait_for(r, a, r->panel_ready[o], err);
    if (rc == 0 && !own) rc = wait_for(r, a, r->buf_free[d], err);
    if (rc == 0)
      rc = jmg_tiles_timer_mark(&r->tma, &r->ga, d, JMG_TILES_WAIT, err);
    if (rc == 0 && !own) {
      rc = jmg_tiles_copy_panel(&r->ga, d, r->panel[d], p, m, err);
      if (rc == 0) rc = record(r, r->copied[d], a, err);
      if (rc == 0)
        rc = jmg_tiles_timer_mark(&r->tma, &r->ga, d, JMG_TILES_COPY, err);
    }
    if (rc == 0) rc = blas_on(r, d, a, err);
    if (rc == 0) rc = update_tile(r, d, k + 1, pa, lda, top, err);
    if (rc == 0)
      rc = jmg_tiles_timer_mark(&r->tma, &r->ga, d, JMG_TILES_UPDATE, err);
    if (rc == 0) rc = factor_tile(r, k + 1, err);
  }
  const int64_t j0 = ahead ? first + G : first; /* S's first tile */
  if (rc != 0 || j0 >= r->g.nt) return rc;
  if (!own) {
    if (ahead) {
      rc = wait_for(r, s, r->copied[d], err);
      if (rc == 0)
        rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_WAIT, err);
    } else {
      rc = wait_for(r, s, r->panel_ready[o], err);
      if (rc == 0)
        rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_WAIT, err);
      if (rc == 0) rc = jmg_tiles_copy_panel(&r->g, d, r->panel[d], p, m, err);
      if (rc == 0)
        rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_COPY, err);
    }
  }
  const char *ps = own ? p : r->panel[d];
  const int64_t lds = own ? r->g.n : m;
  if (rc == 0) rc = blas_on(r, d, s, err);
  for (int64_t j = j0; rc == 0 && j < r->g.nt; j += G) {
    rc = update_tile(r, d, j, ps, lds, top, err);
    /* Tile k + 2 is factored next step, on A[d]. */
    if (rc == 0 && j == k + 2) rc = record(r, r->tile_ready[d], s, err);
  }
  if (rc == 0 && !own) rc = record(r, r->buf_free[d], s, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_UPDATE, err);
  return rc;
}

static int make_event(run *r, cudaEvent_t *e, jmg_error *err) {
  return JMG_CUDA_TRY(cudaEventCreateWithFlags(e, cudaEventDisableTiming),
                      r->g.op, err);
}

/* Device d's A stream, at the highest priority (the factors are the
 * critical path), and its handles: cuSOLVER on A. Device d current. */
static int make_lookahead(run *r, int d, jmg_error *err) {
  int least = 0, greatest = 0;
  int rc = JMG_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                        r->g.op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamCreateWithPriority(
                          &r->ga.stream[d], cudaStreamNonBlocking, greatest),
                      r->g.op, err);
  if (rc == 0) r->made = d + 1;
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnSetStream(r->h->dn[d], r->ga.stream[d]),
                          r->g.op, err);
  return rc;
}

/* Streams, events and workspace pointers for every device. */
static int setup(run *r, void *const *work, jmg_error *err) {
  int rc = 0;
  r->ga = r->g;
  for (int d = 0; rc == 0 && d < r->g.G; ++d) {
    r->panel[d] = work[d];
    r->dn_work[d] = (char *)work[d] + r->l.panel;
    r->info[d] = (int *)((char *)work[d] + r->l.panel + r->l.dn);
    rc = jmg_tiles_start_device(&r->g, d, r->h->blas[d], r->h->dn[d],
                                &r->panel_ready[d], err);
    const cudaStream_t s = r->g.stream[d];
    if (rc == 0) rc = make_event(r, &r->tile_ready[d], err);
    if (rc == 0) rc = make_event(r, &r->copied[d], err);
    if (rc == 0) rc = make_event(r, &r->buf_free[d], err);
    if (rc == 0) rc = make_lookahead(r, d, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaMemsetAsync(r->info[d], 0, r->l.info, s), r->g.op,
                        err);
    /* A starts after S's work so far: the matrix, the info's reset. */
    if (rc == 0) rc = record(r, r->tile_ready[d], s, err);
    if (rc == 0) rc = record(r, r->buf_free[d], s, err);
    if (rc == 0) rc = wait_for(r, r->ga.stream[d], r->tile_ready[d], err);
    if (rc == 0)
      rc =
          jmg_tiles_host_work(&r->g, r->l.host, "potrf", &r->host_work[d], err);
  }
  /* Per device and step, S: idle, wait, copy, update; A: idle, wait, copy,
   * update, factor; and the start and panel 0's factor. */
  if (rc == 0) rc = jmg_tiles_timer_start(&r->tm, &r->g, 4 * r->g.nt + 4, err);
  if (rc == 0)
    rc = jmg_tiles_timer_start(&r->tma, &r->ga, 5 * r->g.nt + 4, err);
  return rc;
}

/* Waits for every device's streams (also after a failure: the caller frees
 * the workspace next), gives the handles back their S streams, frees what
 * setup made, and reads the first failing minor when all went well. */
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
    int s = jmg_tiles_sync_device(&r->g, d, e);
    if (d < r->made) {
      jmg_error *e2 = s == 0 ? e : &ignored;
      int s2 = jmg_tiles_sync_device(&r->ga, d, e2);
      if (s == 0) s = s2;
      s2 = JMG_CUBLAS_TRY(cublasSetStream(r->h->blas[d], r->g.stream[d]),
                          r->g.op, s == 0 ? e : &ignored);
      if (s == 0) s = s2;
      s2 = JMG_CUSOLVER_TRY(cusolverDnSetStream(r->h->dn[d], r->g.stream[d]),
                            r->g.op, s == 0 ? e : &ignored);
      if (s == 0) s = s2;
    }
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
  }
  jmg_tiles_timer_end(&r->tm, &r->g, "tiled potrf");
  jmg_tiles_timer_end(&r->tma, &r->ga, "tiled potrf lookahead");
  for (int d = 0; d < r->g.G; ++d) {
    /* Device d's streams were waited for above. */
    jmg_error ignored;
    int s = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, d)), r->g.op,
                         rc == 0 ? err : &ignored);
    if (rc == 0) rc = s;
    if (r->panel_ready[d] != NULL) cudaEventDestroy(r->panel_ready[d]);
    if (r->tile_ready[d] != NULL) cudaEventDestroy(r->tile_ready[d]);
    if (r->copied[d] != NULL) cudaEventDestroy(r->copied[d]);
    if (r->buf_free[d] != NULL) cudaEventDestroy(r->buf_free[d]);
    if (d < r->made) cudaStreamDestroy(r->ga.stream[d]);
    free(r->host_work[d]);
  }
  free(host);
  return rc;
}

int jmg_cuda_potrf(const jmg_dist_matrix *a, const jmg_cuda_potrf_handles *h,
                   void *const *work, int64_t *info, const char *op,
                   jmg_error *err) {
  run r;
  memset(&r, 0, sizeof r);
  r.h = h;
  *info = 0;
  int rc = sizes(a, h, &r.l, op, err);
  if (rc != 0) return rc;
  jmg_tiles_init(&r.g, a, op);
  rc = setup(&r, work, err);
  /* Panel 0, on A[0] (after setup's wait for S[0]). */
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r.g, 0)), op, err);
  if (rc == 0) rc = blas_on(&r, 0, r.ga.stream[0], err);
  if (rc == 0) rc = factor_tile(&r, 0, err);
  for (int64_t k = 0; rc == 0 && k + 1 < r.g.nt; ++k)
    for (int d = 0; rc == 0 && d < r.g.G; ++d) rc = step_device(&r, k, d, err);
  return finish(&r, rc, info, err);
}
