/* Right-looking blocked LU with partial pivoting over the GPUs of a 1D
 * block-cyclic matrix (cuda_lu.h).
 *
 * Tile k (columns k*t .. k*t + t - 1) lives on device k % G. Step k, with
 * top = k*t:
 *  - panel: its owner factors the tall panel (rows top .. n of tile k) with
 *    cusolverDnXgetrf, which also interchanges the panel's rows; the host
 *    waits for it and reads its t pivots and info, and hands the pivots
 *    (as the 32-bit ints cusolverDn<t>laswp takes) to every device: one
 *    wait per step;
 *  - swaps: every device interchanges the same rows in all its other
 *    columns (one laswp over all its columns, left tiles included, so that
 *    L ends as LAPACK's);
 *  - update: every device with tiles right of k copies the panel into its
 *    own buffer (the owner reads its own in place), solves the U row block
 *    of those tiles (trsm with L_kk, unit lower) and subtracts L_below times
 *    it from the rows below (one gemm): a device's tiles right of k are
 *    contiguous in its memory, so each is one call.
 * Lookahead: the owner of tile k + 1 swaps and updates that tile first and
 * factors panel k + 1 at once, before the rest of its step-k work, so that
 * panel k + 1's pivots are on their way to the host while the devices still
 * update with panel k. The host waits for an event after the pivots' copy
 * (into pinned memory), not for the owner's whole stream.
 * Each device's work runs in order on its own stream. Dependences between
 * devices: a panel is complete when copied (the host waited for its
 * factorization), and its owner interchanges rows of it again at the next
 * step only after every copy of it is done (an event per copying device).
 * The factorization stops at the first exactly zero pivot.
 *
 * The solves run on device 0's stream with device 0's handles, tile by
 * tile, reading the other devices' tiles through peer access: with
 * M = P L U, M X = B is L U X = Pᵀ B, and Mᵀ X = B is Uᵀ Lᵀ (Pᵀ X) = B
 * (CUBLAS_OP_T, also for complex types: the transpose, never the conjugate
 * one). */
#include "engine/cusolvermg/cuda_lu.h"

#include <stdlib.h>
#include <string.h>

#include "cuda/blas.h"
#include "cuda/call.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/dtype.h"
#include "engine/cusolvermg/tiles.h"

/* Interchanges rows i and piv[i - 1] (1-based, relative to A) of the n
 * columns of A for i = k1 .. k2 (incx 1) or k2 .. k1 (incx -1). */
static cusolverStatus_t laswp(cusolverDnHandle_t h, jmg_dtype t, int n, void *A,
                              int lda, int k1, int k2, const int *piv,
                              int incx) {
  switch (t) {
    case JMG_F32:
      return cusolverDnSlaswp(h, n, A, lda, k1, k2, piv, incx);
    case JMG_F64:
      return cusolverDnDlaswp(h, n, A, lda, k1, k2, piv, incx);
    case JMG_C64:
      return cusolverDnClaswp(h, n, A, lda, k1, k2, piv, incx);
    default:
      return cusolverDnZlaswp(h, n, A, lda, k1, k2, piv, incx);
  }
}

/* Sizes of the per-device workspace: [panel | getrf workspace | the
 * panel's 64-bit pivots | info | every step's 32-bit pivots (n)], and
 * getrf's host workspace. */
typedef struct layout {
  size_t panel, dn, piv, info, piv32, host;
} layout;

static int sizes(const jmg_dist_matrix *a, const jmg_cuda_handles *h, layout *l,
                 const char *op, jmg_error *err) {
  int rc = jmg_tiles_check(a, "getrf", op, err);
  if (rc != 0) return rc;
  const jmg_cuda_device *d0 = a->device_ctx[0];
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  size_t dn = 0, host = 0;
  rc = JMG_CUDA_TRY(cudaSetDevice(d0->device), op, err);
  /* The panels run from n rows down to t: ask for both ends. */
  const int64_t rows[2] = {a->n, a->tile};
  for (int i = 0; rc == 0 && i < 2; ++i) {
    size_t dn_i = 0, host_i = 0;
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgetrf_bufferSize(h->dn[0], h->dn_params, rows[i], a->tile, t,
                                    a->data[0], a->n, t, &dn_i, &host_i),
        op, err);
    if (dn_i > dn) dn = dn_i;
    if (host_i > host) host = host_i;
  }
  if (rc != 0) return rc;
  l->panel =
      jmg_cuda_align((size_t)a->n * (size_t)a->tile * jmg_dtype_size(a->dtype));
  l->dn = jmg_cuda_align(dn > 0 ? dn : 1);
  l->piv = jmg_cuda_align((size_t)a->tile * sizeof(int64_t));
  l->info = jmg_cuda_align(sizeof(int));
  l->piv32 = jmg_cuda_align((size_t)a->n * sizeof(int));
  l->host = host;
  return 0;
}

int jmg_cuda_getrf_workspace(const jmg_dist_matrix *a,
                             const jmg_cuda_handles *h, size_t *bytes,
                             const char *op, jmg_error *err) {
  layout l;
  memset(&l, 0, sizeof l);
  int rc = sizes(a, h, &l, op, err);
  *bytes = rc == 0 ? l.panel + l.dn + l.piv + l.info + l.piv32 : 0;
  return rc;
}

/* One call's state. */
typedef struct run {
  jmg_tiles g;
  const jmg_cuda_handles *h;
  int64_t slots;
  cudaDataType type;
  layout l;
  cudaEvent_t copied[JMG_CUDA_MAX_DEVICES]; /* d's copy of the last panel */
  char *panel[JMG_CUDA_MAX_DEVICES];
  void *dn_work[JMG_CUDA_MAX_DEVICES];
  int64_t *d_piv[JMG_CUDA_MAX_DEVICES];
  int *d_info[JMG_CUDA_MAX_DEVICES];
  int *d_piv32[JMG_CUDA_MAX_DEVICES];
  void *host_work[JMG_CUDA_MAX_DEVICES];
  cudaEvent_t piv_ready[JMG_CUDA_MAX_DEVICES]; /* d's panel pivots copied */
  int64_t *h_piv; /* the current panel's t pivots (pinned) */
  int *h_info;    /* its getrf's info (pinned) */
  /* Every step's pivots, for the copies to the devices: each step writes
   * its own part, so none is overwritten while a copy may read it. */
  int *h_piv32;
  jmg_tiles_timer tm; /* JAXMG_TRACE: each device's time by kind */
} run;

static void workspace_of(run *r, int d, void *work) {
  char *w = work;
  r->panel[d] = w;
  r->dn_work[d] = w + r->l.panel;
  r->d_piv[d] = (int64_t *)(w + r->l.panel + r->l.dn);
  r->d_info[d] = (int *)(w + r->l.panel + r->l.dn + r->l.piv);
  r->d_piv32[d] = (int *)(w + r->l.panel + r->l.dn + r->l.piv + r->l.info);
}

/* Interchanges step k's rows in local columns [c0, c1) of device d
 * (current). */
static int swap_rows(run *r, int d, int64_t k, int64_t c0, int64_t c1,
                     jmg_error *err) {
  if (c1 <= c0) return 0;
  const int64_t top = k * r->g.t;
  return JMG_CUSOLVER_TRY(laswp(r->h->dn[d], r->g.a->dtype, (int)(c1 - c0),
                                jmg_tiles_elem(&r->g, d, c0, top), (int)r->g.n,
                                1, r->g.t, r->d_piv32[d] + top, 1),
                          r->g.op, err);
}

/* Step k's panel on its owner o (made current here): getrf, then its
 * pivots and info copied to the host's pinned buffers and piv_ready[o]
 * recorded. Asynchronous: finish_panel waits. */
static int start_panel(run *r, int64_t k, jmg_error *err) {
  const int o = (int)(k % r->g.G);
  const int64_t top = k * r->g.t, m = r->g.n - top;
  int rc =
      JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, o)), r->g.op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgetrf(r->h->dn[o], r->h->dn_params, m, r->g.t, r->type,
                         jmg_tiles_at(&r->g, k, top), r->g.n, r->d_piv[o],
                         r->type, r->dn_work[o], r->l.dn, r->host_work[o],
                         r->l.host, r->d_info[o]),
        r->g.op, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, o, JMG_TILES_FACTOR, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaMemcpyAsync(r->h_piv, r->d_piv[o], (size_t)r->g.t * sizeof(int64_t),
                        cudaMemcpyDeviceToHost, r->g.stream[o]),
        r->g.op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(r->h_info, r->d_info[o], sizeof(int),
                                      cudaMemcpyDeviceToHost, r->g.stream[o]),
                      r->g.op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaEventRecord(r->piv_ready[o], r->g.stream[o]),
                      r->g.op, err);
  return rc;
}

/* Step k's panel, once start_panel's copies are done: its info, and its
 * pivots (as the 32-bit ints laswp takes) copied to every device. */
static int finish_panel(run *r, int64_t k, int64_t *info, jmg_error *err) {
  const int o = (int)(k % r->g.G);
  const int64_t top = k * r->g.t;
  int rc = JMG_CUDA_TRY(cudaEventSynchronize(r->piv_ready[o]), r->g.op, err);
  const int h_info = rc == 0 ? *r->h_info : 0;
  if (rc == 0 && h_info < 0)
    rc = jmg_error_set(err, JMG_ECUSOLVER, r->g.op, "cusolverDnXgetrf",
                       "argument %d was rejected", -h_info);
  if (rc == 0 && h_info > 0) *info = top + h_info;
  if (rc != 0 || *info != 0) return rc;
  /* Relative to the panel's first row, as laswp takes them there. */
  for (int64_t i = 0; i < r->g.t; ++i) r->h_piv32[top + i] = (int)r->h_piv[i];
  for (int d = 0; rc == 0 && d < r->g.G; ++d) {
    rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, d)), r->g.op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaMemcpyAsync(r->d_piv32[d] + top, r->h_piv32 + top,
                                        (size_t)r->g.t * sizeof(int),
                                        cudaMemcpyHostToDevice, r->g.stream[d]),
                        r->g.op, err);
  }
  return rc;
}

/* Step k's swaps on device d (current) in its local columns [0, lc) but
 * the intervals [x0, x1) and [y0, y1) (each empty as [lc, lc)). */
static int swap_except(run *r, int d, int64_t k, int64_t x0, int64_t x1,
                       int64_t y0, int64_t y1, jmg_error *err) {
  const int64_t lc = r->slots * r->g.t;
  if (y0 < x0) {
    const int64_t t0 = x0, t1 = x1;
    x0 = y0;
    x1 = y1;
    y0 = t0;
    y1 = t1;
  }
  int rc = swap_rows(r, d, k, 0, x0, err);
  if (rc == 0) rc = swap_rows(r, d, k, x1, y0, err);
  if (rc == 0) rc = swap_rows(r, d, k, y1, lc, err);
  return rc;
}

/* Step k's U row block and trailing update of device d's local columns
 * [c0, c1) (right of k), with the panel's L at l (ld ldl). */
static int update_cols(run *r, int64_t k, int d, int64_t c0, int64_t c1,
                       const char *l, int64_t ldl, jmg_error *err) {
  const int64_t top = k * r->g.t, m = r->g.n - top, ncols = c1 - c0;
  if (ncols <= 0) return 0;
  char *u = jmg_tiles_elem(&r->g, d, c0, top);
  int rc = JMG_CUBLAS_TRY(
      jmg_cublas_trsm(r->h->blas[d], r->g.a->dtype, CUBLAS_SIDE_LEFT,
                      CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT,
                      r->g.t, (int)ncols, l, (int)ldl, u, (int)r->g.n),
      r->g.op, err);
  if (rc == 0 && m > r->g.t)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_gemm(r->h->blas[d], r->g.a->dtype, CUBLAS_OP_N, CUBLAS_OP_N,
                        (int)(m - r->g.t), (int)ncols, r->g.t, -1.0,
                        l + (size_t)r->g.t * r->g.es, (int)ldl, u, (int)r->g.n,
                        1.0, u + (size_t)r->g.t * r->g.es, (int)r->g.n),
        r->g.op, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_UPDATE, err);
  return rc;
}

/* Step k on device d (made current here): swaps, the panel's copy, the U row
 * block and the trailing update of d's tiles right of k. The owner of tile
 * k + 1 does tile k + 1 first and starts panel k + 1 (the lookahead), then
 * the rest. */
static int update_device(run *r, int64_t k, int d, jmg_error *err) {
  const int o = (int)(k % r->g.G);
  const int64_t top = k * r->g.t, m = r->g.n - top;
  const int64_t slot_k = k / r->g.G;
  const int64_t lc = r->slots * r->g.t;
  /* d's first tile right of k (tile k + 1 where d holds it). */
  const int64_t s0 = k < d ? 0 : (k - d) / r->g.G + 1;
  const int64_t c0 = s0 * r->g.t;
  const int ahead = k + 1 < r->g.nt && d == (int)((k + 1) % r->g.G);
  /* The panel's own rows were interchanged by getrf. */
  const int64_t p0 = d == o ? slot_k * r->g.t : lc, p1 = d == o ? p0 + r->g.t : lc;
  const int64_t a0 = ahead ? c0 : lc, a1 = ahead ? c0 + r->g.t : lc;
  int rc =
      JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, d)), r->g.op, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_IDLE, err);
  if (rc == 0 && ahead) rc = swap_rows(r, d, k, a0, a1, err);
  if (rc == 0 && !ahead) rc = swap_except(r, d, k, p0, p1, lc, lc, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_SWAP, err);
  if (rc != 0 || c0 >= lc) return rc;
  const char *l = jmg_tiles_at(&r->g, k, top);
  int64_t ldl = r->g.n;
  if (d != o) {
    rc = jmg_tiles_copy_panel(&r->g, d, r->panel[d], l, m, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaEventRecord(r->copied[d], r->g.stream[d]), r->g.op,
                        err);
    if (rc == 0)
      rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_COPY, err);
    l = r->panel[d];
    ldl = m;
  }
  if (!ahead) return rc == 0 ? update_cols(r, k, d, c0, lc, l, ldl, err) : rc;
  if (rc == 0) rc = update_cols(r, k, d, a0, a1, l, ldl, err);
  if (rc == 0) rc = start_panel(r, k + 1, err);
  if (rc == 0) rc = swap_except(r, d, k, p0, p1, a0, a1, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_SWAP, err);
  if (rc == 0) rc = update_cols(r, k, d, a1, lc, l, ldl, err);
  return rc;
}

/* Before step k's swaps: the previous panel's owner interchanges rows of
 * that panel again, so its stream waits for every copy of it (an event
 * never recorded counts as done). */
static int wait_for_copies(run *r, int64_t k, jmg_error *err) {
  if (k == 0) return 0;
  const int p = (int)((k - 1) % r->g.G);
  int rc =
      JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, p)), r->g.op, err);
  for (int d = 0; rc == 0 && d < r->g.G; ++d)
    if (d != p)
      rc = JMG_CUDA_TRY(cudaStreamWaitEvent(r->g.stream[p], r->copied[d], 0),
                        r->g.op, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, p, JMG_TILES_WAIT, err);
  return rc;
}

/* Streams, events, handles and workspace pointers for every device. */
static int setup(run *r, void *const *work, jmg_error *err) {
  int rc = 0;
  r->h_piv32 = malloc((size_t)r->g.n * sizeof *r->h_piv32);
  if (r->h_piv32 == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, r->g.op, "malloc",
                       "cannot allocate %lld pivots", (long long)r->g.n);
  /* Pinned: a copy from the device into pageable memory returns only once
   * done, which would hold the host at the lookahead's panel. */
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMallocHost((void **)&r->h_piv,
                                     (size_t)r->g.t * sizeof *r->h_piv),
                      r->g.op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMallocHost((void **)&r->h_info, sizeof *r->h_info),
                      r->g.op, err);
  for (int d = 0; rc == 0 && d < r->g.G; ++d) {
    workspace_of(r, d, work[d]);
    rc = jmg_tiles_start_device(&r->g, d, r->h->blas[d], r->h->dn[d],
                                &r->copied[d], err);
    if (rc == 0) /* device d is current */
      rc = JMG_CUDA_TRY(
          cudaEventCreateWithFlags(&r->piv_ready[d], cudaEventDisableTiming),
          r->g.op, err);
    if (rc == 0)
      rc =
          jmg_tiles_host_work(&r->g, r->l.host, "getrf", &r->host_work[d], err);
  }
  /* Per device and step: the wait for the copies, idle, swap, copy, update,
   * the lookahead's factor, swap and update; and the start and panel 0. */
  if (rc == 0)
    rc = jmg_tiles_timer_start(&r->tm, &r->g, 9 * r->g.nt + 4, err);
  return rc;
}

/* Waits for every device (also after a failure: the caller frees the
 * workspace next) and frees what setup made. */
static int finish(run *r, int rc, jmg_error *err) {
  for (int d = 0; d < r->g.G; ++d) {
    jmg_error ignored;
    jmg_error *e = rc == 0 ? err : &ignored;
    int s = jmg_tiles_sync_device(&r->g, d, e);
    if (rc == 0) rc = s;
    if (r->copied[d] != NULL) cudaEventDestroy(r->copied[d]);
    if (r->piv_ready[d] != NULL) cudaEventDestroy(r->piv_ready[d]);
    free(r->host_work[d]);
  }
  /* After every device's wait: no copy into them is left. */
  if (r->h_piv != NULL) {
    int s = JMG_CUDA_TRY(cudaFreeHost(r->h_piv), r->g.op,
                         rc == 0 ? err : &(jmg_error){0});
    if (rc == 0) rc = s;
  }
  if (r->h_info != NULL) {
    int s = JMG_CUDA_TRY(cudaFreeHost(r->h_info), r->g.op,
                         rc == 0 ? err : &(jmg_error){0});
    if (rc == 0) rc = s;
  }
  free(r->h_piv32);
  jmg_tiles_timer_end(&r->tm, &r->g, "tiled getrf");
  return rc;
}

/* The call's state, once a's shape has passed sizes' check. */
static int run_init(run *r, const jmg_dist_matrix *a, const jmg_cuda_handles *h,
                    const char *op, jmg_error *err) {
  memset(r, 0, sizeof *r);
  r->h = h;
  int rc = sizes(a, h, &r->l, op, err);
  if (rc != 0) return rc;
  jmg_tiles_init(&r->g, a, op);
  r->slots = r->g.nt / a->ndev;
  r->type = jmg_cuda_data_type(a->dtype);
  return 0;
}

int jmg_cuda_getrf(const jmg_dist_matrix *a, const jmg_cuda_handles *h,
                   void *const *work, int64_t *info, const char *op,
                   jmg_error *err) {
  run r;
  *info = 0;
  int rc = run_init(&r, a, h, op, err);
  if (rc != 0) return rc;
  rc = setup(&r, work, err);
  if (rc == 0) rc = start_panel(&r, 0, err);
  for (int64_t k = 0; rc == 0 && *info == 0 && k < r.g.nt; ++k) {
    rc = finish_panel(&r, k, info, err);
    if (rc == 0 && *info == 0) rc = wait_for_copies(&r, k, err);
    for (int d = 0; rc == 0 && *info == 0 && d < r.g.G; ++d)
      rc = update_device(&r, k, d, err);
  }
  return finish(&r, rc, err);
}

/* ---- the solves -----------------------------------------------------------*/

/* Interchanges b's rows as getrf did (forward: one laswp per tile, each
 * tile's pivots relative to its first row), or undoes that (reverse: row by
 * row from the last, with the forward laswp of one row each, so that
 * nothing rests on laswp's negative increments). */
static int swap_b(const run *r, int forward, void *b, int nrhs,
                  jmg_error *err) {
  int rc = 0;
  const int64_t steps = forward ? r->g.nt : r->g.n;
  for (int64_t s = 0; rc == 0 && s < steps; ++s) {
    /* Row i's pivot is relative to its tile's first row, top. */
    const int64_t i = forward ? s * r->g.t : r->g.n - 1 - s;
    const int64_t top = i / r->g.t * r->g.t;
    const int k1 = (int)(i - top) + 1, k2 = forward ? r->g.t : k1;
    rc = JMG_CUSOLVER_TRY(laswp(r->h->dn[0], r->g.a->dtype, nrhs,
                                (char *)b + (size_t)top * r->g.es, (int)r->g.n,
                                k1, k2, r->d_piv32[0] + top, 1),
                          r->g.op, err);
  }
  return rc;
}

/* The solves' steps run on the GPU that holds their tile (tile j on device
 * j % G), reading it from its own memory, while b stays on GPU 0 and is
 * read and written over NVLink: for few right-hand sides b's rows are far
 * fewer bytes than a tile's (on 2 H200 at N = 32768, one b, getrs on GPU 0
 * alone took 0.136 s of lu_solve's 0.618 s reading half the tiles from the
 * other GPU: bench/results/2026-11-27-s17-h200x4-scaling/raw). The steps
 * stay in order: when the next step's GPU differs, its stream waits for an
 * event recorded after the previous step. With nrhs above the tile width
 * every step runs on GPU 0 as before (then b's rows outweigh the tile's). */
typedef struct solve_chain {
  int spread;                          /* steps on their tile's GPU */
  int cur;                             /* the GPU of the last step queued */
  cudaEvent_t ev[JMG_CUDA_MAX_DEVICES]; /* recorded after a GPU's steps */
} solve_chain;

static int tile_gpu(const run *r, const solve_chain *c, int64_t j) {
  return c->spread ? (int)(j % r->g.G) : 0;
}

/* Makes device d current with its stream after every step queued so far. */
static int chain_to(const run *r, solve_chain *c, int d, jmg_error *err) {
  if (d == c->cur) return 0;
  const int prev = c->cur;
  int rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, prev)), r->g.op,
                        err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaEventRecord(c->ev[prev], r->g.stream[prev]),
                      r->g.op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, d)), r->g.op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamWaitEvent(r->g.stream[d], c->ev[prev], 0),
                      r->g.op, err);
  if (rc == 0) c->cur = d;
  return rc;
}

/* Each device in the chain gets its stream on its handles and an event;
 * GPU 0 only where the steps do not spread. Leaves GPU 0 current. */
static int chain_start(run *r, solve_chain *c, int64_t nrhs, jmg_error *err) {
  memset(c, 0, sizeof *c);
  c->spread = r->g.G > 1 && nrhs <= r->g.t;
  int rc = 0;
  for (int d = (c->spread ? r->g.G : 1) - 1; rc == 0 && d >= 0; --d)
    rc = jmg_tiles_start_device(&r->g, d, r->h->blas[d], r->h->dn[d],
                                &c->ev[d], err);
  return rc;
}

/* Waits for every stream the chain used (also after a failure: b must not
 * be written after the call returns) and destroys its events. */
static int chain_end(const run *r, solve_chain *c, int rc, jmg_error *err) {
  for (int d = 0; d < (c->spread ? r->g.G : 1); ++d) {
    jmg_error ignored;
    int s = r->g.stream[d] != NULL
                ? jmg_tiles_sync_device(&r->g, d, rc == 0 ? err : &ignored)
                : 0;
    if (rc == 0) rc = s;
    if (c->ev[d] != NULL) cudaEventDestroy(c->ev[d]);
  }
  return rc;
}

/* Rows dst .. dst + m of b -= op(blk) times rows src .. src + k of b (blk:
 * m x k after op, ld n; b: ld n), on device d. */
static int sub(const run *r, int d, cublasOperation_t op, int m, int nrhs,
               int k, const void *blk, void *b, int64_t src, int64_t dst,
               jmg_error *err) {
  if (m == 0 || k == 0) return 0;
  return JMG_CUBLAS_TRY(
      jmg_cublas_gemm(r->h->blas[d], r->g.a->dtype, op, CUBLAS_OP_N, m, nrhs, k,
                      -1.0, blk, (int)r->g.n, (char *)b + (size_t)src * r->g.es,
                      (int)r->g.n, 1.0, (char *)b + (size_t)dst * r->g.es,
                      (int)r->g.n),
      r->g.op, err);
}

/* Rows j*t .. (j+1)*t of b = op(T)^-1 times them, T tile j's diagonal
 * block, on device d. */
static int tri(const run *r, int d, int64_t j, cublasFillMode_t uplo,
               cublasOperation_t op, cublasDiagType_t diag, void *b, int nrhs,
               jmg_error *err) {
  const int64_t row = j * r->g.t;
  return JMG_CUBLAS_TRY(
      jmg_cublas_trsm(r->h->blas[d], r->g.a->dtype, CUBLAS_SIDE_LEFT, uplo, op,
                      diag, r->g.t, nrhs, jmg_tiles_at(&r->g, j, row),
                      (int)r->g.n, (char *)b + (size_t)row * r->g.es,
                      (int)r->g.n),
      r->g.op, err);
}

/* L U X = Pᵀ B: the interchanges, L forward, U backward. */
static int solve_n(const run *r, solve_chain *c, void *b, int k,
                   jmg_error *err) {
  const cublasFillMode_t LO = CUBLAS_FILL_MODE_LOWER,
                         UP = CUBLAS_FILL_MODE_UPPER;
  const int64_t t = r->g.t;
  int rc = swap_b(r, 1, b, k, err);
  for (int64_t j = 0; rc == 0 && j < r->g.nt; ++j) {
    const int d = tile_gpu(r, c, j);
    const int64_t below = r->g.n - (j + 1) * t;
    rc = chain_to(r, c, d, err);
    if (rc == 0) rc = tri(r, d, j, LO, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, b, k, err);
    if (rc == 0)
      rc = sub(r, d, CUBLAS_OP_N, (int)below, k, (int)t,
               jmg_tiles_at(&r->g, j, (j + 1) * t), b, j * t, (j + 1) * t, err);
  }
  for (int64_t j = r->g.nt - 1; rc == 0 && j >= 0; --j) {
    const int d = tile_gpu(r, c, j);
    rc = chain_to(r, c, d, err);
    if (rc == 0)
      rc = tri(r, d, j, UP, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, b, k, err);
    if (rc == 0)
      rc = sub(r, d, CUBLAS_OP_N, (int)(j * t), k, (int)t,
               jmg_tiles_at(&r->g, j, 0), b, j * t, 0, err);
  }
  return rc == 0 ? chain_to(r, c, 0, err) : rc;
}

/* Uᵀ Lᵀ (Pᵀ X) = B: Uᵀ forward and Lᵀ backward, each tile's block column
 * (contiguous in its tile) against the rows already solved; then the
 * interchanges undone (on GPU 0, after every step). */
static int solve_t(const run *r, solve_chain *c, void *b, int k,
                   jmg_error *err) {
  const cublasFillMode_t LO = CUBLAS_FILL_MODE_LOWER,
                         UP = CUBLAS_FILL_MODE_UPPER;
  const int64_t t = r->g.t;
  int rc = 0;
  for (int64_t j = 0; rc == 0 && j < r->g.nt; ++j) {
    const int d = tile_gpu(r, c, j);
    rc = chain_to(r, c, d, err);
    if (rc == 0)
      rc = sub(r, d, CUBLAS_OP_T, (int)t, k, (int)(j * t),
               jmg_tiles_at(&r->g, j, 0), b, 0, j * t, err);
    if (rc == 0)
      rc = tri(r, d, j, UP, CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, b, k, err);
  }
  for (int64_t j = r->g.nt - 1; rc == 0 && j >= 0; --j) {
    const int d = tile_gpu(r, c, j);
    const int64_t below = r->g.n - (j + 1) * t;
    rc = chain_to(r, c, d, err);
    if (rc == 0)
      rc = sub(r, d, CUBLAS_OP_T, (int)t, k, (int)below,
               jmg_tiles_at(&r->g, j, (j + 1) * t), b, (j + 1) * t, j * t, err);
    if (rc == 0)
      rc = tri(r, d, j, LO, CUBLAS_OP_T, CUBLAS_DIAG_UNIT, b, k, err);
  }
  if (rc == 0) rc = chain_to(r, c, 0, err);
  return rc == 0 ? swap_b(r, 0, b, k, err) : rc;
}

int jmg_cuda_getrs(const jmg_dist_matrix *a, const jmg_cuda_handles *h,
                   void *const *work, int transpose, void *b, int64_t nrhs,
                   const char *op, jmg_error *err) {
  run r;
  int rc = run_init(&r, a, h, op, err);
  if (rc != 0) return rc;
  if (nrhs > INT32_MAX)
    return jmg_error_set(err, JMG_EINVAL, op, "getrs",
                         "NRHS=%lld exceeds cuBLAS's 32-bit int",
                         (long long)nrhs);
  workspace_of(&r, 0, work[0]);
  solve_chain c;
  rc = chain_start(&r, &c, nrhs, err);
  if (rc == 0)
    rc = transpose ? solve_t(&r, &c, b, (int)nrhs, err)
                   : solve_n(&r, &c, b, (int)nrhs, err);
  return chain_end(&r, &c, rc, err);
}
