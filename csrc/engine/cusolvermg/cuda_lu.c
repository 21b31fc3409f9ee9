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
  int64_t *h_piv; /* the current panel's t pivots */
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

/* Step k's panel on its owner: factor; the host reads its pivots and info
 * and copies the pivots to every device. */
static int factor_panel(run *r, int64_t k, int64_t *info, jmg_error *err) {
  const int o = (int)(k % r->g.G);
  const int64_t top = k * r->g.t, m = r->g.n - top;
  int h_info = 0;
  int rc =
      JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, o)), r->g.op, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, o, JMG_TILES_IDLE, err);
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
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(&h_info, r->d_info[o], sizeof h_info,
                                      cudaMemcpyDeviceToHost, r->g.stream[o]),
                      r->g.op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamSynchronize(r->g.stream[o]), r->g.op, err);
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

/* Step k on device d (made current here): swaps, the panel's copy, the U row
 * block and the trailing update of d's tiles right of k. */
static int update_device(run *r, int64_t k, int d, jmg_error *err) {
  const int o = (int)(k % r->g.G);
  const int64_t top = k * r->g.t, m = r->g.n - top;
  const int64_t slot_k = k / r->g.G;
  const int64_t lc = r->slots * r->g.t;
  /* d's first tile right of k. */
  const int64_t s0 = k < d ? 0 : (k - d) / r->g.G + 1;
  const int64_t ncols = (r->slots - s0) * r->g.t;
  int rc =
      JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r->g, d)), r->g.op, err);
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_IDLE, err);
  if (rc != 0) return rc;
  if (d == o) {
    /* The panel's own rows were interchanged by getrf. */
    rc = swap_rows(r, d, k, 0, slot_k * r->g.t, err);
    if (rc == 0) rc = swap_rows(r, d, k, (slot_k + 1) * r->g.t, lc, err);
  } else {
    rc = swap_rows(r, d, k, 0, lc, err);
  }
  if (rc == 0)
    rc = jmg_tiles_timer_mark(&r->tm, &r->g, d, JMG_TILES_SWAP, err);
  if (rc != 0 || ncols == 0) return rc;
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
  char *u = jmg_tiles_elem(&r->g, d, s0 * r->g.t, top);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(
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
  r->h_piv = malloc((size_t)r->g.t * sizeof *r->h_piv);
  r->h_piv32 = malloc((size_t)r->g.n * sizeof *r->h_piv32);
  if (r->h_piv == NULL || r->h_piv32 == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, r->g.op, "malloc",
                       "cannot allocate %lld pivots", (long long)r->g.n);
  for (int d = 0; rc == 0 && d < r->g.G; ++d) {
    workspace_of(r, d, work[d]);
    rc = jmg_tiles_start_device(&r->g, d, r->h->blas[d], r->h->dn[d],
                                &r->copied[d], err);
    if (rc == 0)
      rc =
          jmg_tiles_host_work(&r->g, r->l.host, "getrf", &r->host_work[d], err);
  }
  /* Per device and step: the panel's idle and factor, the wait for the
   * copies, idle, swap, copy, update; and the start. */
  if (rc == 0)
    rc = jmg_tiles_timer_start(&r->tm, &r->g, 8 * r->g.nt + 4, err);
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
    free(r->host_work[d]);
  }
  free(r->h_piv);
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
  for (int64_t k = 0; rc == 0 && *info == 0 && k < r.g.nt; ++k) {
    rc = factor_panel(&r, k, info, err);
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

/* Rows dst .. dst + m of b -= op(blk) times rows src .. src + k of b (blk:
 * m x k after op, ld n; b: ld n). */
static int sub(const run *r, cublasOperation_t op, int m, int nrhs, int k,
               const void *blk, void *b, int64_t src, int64_t dst,
               jmg_error *err) {
  if (m == 0 || k == 0) return 0;
  return JMG_CUBLAS_TRY(
      jmg_cublas_gemm(r->h->blas[0], r->g.a->dtype, op, CUBLAS_OP_N, m, nrhs, k,
                      -1.0, blk, (int)r->g.n, (char *)b + (size_t)src * r->g.es,
                      (int)r->g.n, 1.0, (char *)b + (size_t)dst * r->g.es,
                      (int)r->g.n),
      r->g.op, err);
}

/* Rows j*t .. (j+1)*t of b = op(T)^-1 times them, T tile j's diagonal
 * block. */
static int tri(const run *r, int64_t j, cublasFillMode_t uplo,
               cublasOperation_t op, cublasDiagType_t diag, void *b, int nrhs,
               jmg_error *err) {
  const int64_t row = j * r->g.t;
  return JMG_CUBLAS_TRY(
      jmg_cublas_trsm(r->h->blas[0], r->g.a->dtype, CUBLAS_SIDE_LEFT, uplo, op,
                      diag, r->g.t, nrhs, jmg_tiles_at(&r->g, j, row),
                      (int)r->g.n, (char *)b + (size_t)row * r->g.es,
                      (int)r->g.n),
      r->g.op, err);
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
  const cublasFillMode_t LO = CUBLAS_FILL_MODE_LOWER,
                         UP = CUBLAS_FILL_MODE_UPPER;
  const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  const cublasDiagType_t UNIT = CUBLAS_DIAG_UNIT,
                         NONUNIT = CUBLAS_DIAG_NON_UNIT;
  const int k = (int)nrhs, t = r.g.t;
  r.g.stream[0] =
      (cudaStream_t)((const jmg_cuda_device *)a->device_ctx[0])->stream;
  rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(&r.g, 0)), op, err);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(cublasSetStream(h->blas[0], r.g.stream[0]), op, err);
  if (rc == 0)
    rc =
        JMG_CUSOLVER_TRY(cusolverDnSetStream(h->dn[0], r.g.stream[0]), op, err);
  if (rc == 0 && !transpose) {
    /* L U X = Pᵀ B: the interchanges, L forward, U backward. */
    rc = swap_b(&r, 1, b, k, err);
    for (int64_t j = 0; rc == 0 && j < r.g.nt; ++j) {
      const int64_t below = r.g.n - (j + 1) * t;
      rc = tri(&r, j, LO, N, UNIT, b, k, err);
      if (rc == 0)
        rc = sub(&r, N, (int)below, k, t, jmg_tiles_at(&r.g, j, (j + 1) * t), b,
                 j * t, (j + 1) * t, err);
    }
    for (int64_t j = r.g.nt - 1; rc == 0 && j >= 0; --j) {
      rc = tri(&r, j, UP, N, NONUNIT, b, k, err);
      if (rc == 0)
        rc = sub(&r, N, (int)(j * t), k, t, jmg_tiles_at(&r.g, j, 0), b, j * t,
                 0, err);
    }
  } else if (rc == 0) {
    /* Uᵀ Lᵀ (Pᵀ X) = B: Uᵀ forward and Lᵀ backward, each tile's block
     * column (contiguous in its tile) against the rows already solved; then
     * the interchanges undone. */
    for (int64_t j = 0; rc == 0 && j < r.g.nt; ++j) {
      rc = sub(&r, T, t, k, (int)(j * t), jmg_tiles_at(&r.g, j, 0), b, 0, j * t,
               err);
      if (rc == 0) rc = tri(&r, j, UP, T, NONUNIT, b, k, err);
    }
    for (int64_t j = r.g.nt - 1; rc == 0 && j >= 0; --j) {
      const int64_t below = r.g.n - (j + 1) * t;
      rc = sub(&r, T, t, k, (int)below, jmg_tiles_at(&r.g, j, (j + 1) * t), b,
               (j + 1) * t, j * t, err);
      if (rc == 0) rc = tri(&r, j, LO, T, UNIT, b, k, err);
    }
    if (rc == 0) rc = swap_b(&r, 0, b, k, err);
  }
  jmg_error ignored;
  int s = JMG_CUDA_TRY(cudaStreamSynchronize(r.g.stream[0]), op,
                       rc == 0 ? err : &ignored);
  return rc == 0 ? s : rc;
}
