/* T's eigenproblem on one GPU by cuSOLVERMp's divide and conquer
 * (eig_mgpu.h: jmg_eig_mgpu_stedc): cusolverMpStedc on a 1 x 1 grid (one
 * rank, a one-rank NCCL communicator kept for the process), on participant
 * 0's GPU and stream, Q (n x n) in one buffer there, then Q's columns
 * copied to Z's owners tile by tile (peer copies). Session 18 measured
 * Stedc at 0.10-0.13 s for N = 16384 with vectors, where the host's dstemr
 * takes about 9 s. */
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/call.h"
#include "cuda/check.h"
#include "cuda/comm_nccl.h"
#include "engine/cusolvermp/api.h"
#include "engine/eig_mgpu/eig_mgpu.h"

/* Below this order T goes to the host, where dstemr takes well under 0.2 s,
 * and Stedc's blocks would be small: cuSOLVERMp 0.8 failed with tiny blocks
 * (syevd on 2 ranks) and left the process's CUDA context broken
 * (docs/gpu-notes.md); 2048-column blocks are what session 18 ran. */
#define STEDC_MIN_N 2048

static int mp_ok(cusolverStatus_t st, const char *op, const char *call,
                 jmg_error *err) {
  return jmg_cusolver_check(st, op, call, err);
}

typedef struct ranked {
  double w;
  int64_t col;
} ranked;

static int by_value(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->w != y->w) return x->w < y->w ? -1 : 1;
  return (x->col > y->col) - (x->col < y->col);
}

/* Stedc leaves the eigenvalues out of order where T splits (a zero
 * off-diagonal: a diagonal or block-diagonal A; seen on 2 H200, session
 * 19): w sorted ascending in place, and *order set to Q's column for each
 * position (NULL, and nothing moved, where w was ascending already). */
static int sort_ascending(double *w, int64_t n, int64_t **order,
                          const char *op, jmg_error *err) {
  *order = NULL;
  int64_t i = 1;
  while (i < n && w[i - 1] <= w[i]) ++i;
  if (i >= n) return 0;
  ranked *r = malloc((size_t)n * sizeof *r);
  int64_t *o = malloc((size_t)n * sizeof *o);
  if (r == NULL || o == NULL) {
    free(r);
    free(o);
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate the eigenvalues' order (n = %lld)",
                         (long long)n);
  }
  for (i = 0; i < n; ++i) r[i] = (ranked){w[i], i};
  qsort(r, (size_t)n, sizeof *r, by_value);
  for (i = 0; i < n; ++i) {
    w[i] = r[i].w;
    o[i] = r[i].col;
  }
  free(r);
  *order = o;
  return 0;
}

/* Q's columns to their GPUs: a tile at a time, or, where the eigenvalues
 * were reordered, a column at a time in their order. */
static int scatter_q(const jmg_trd_gpus *g, int64_t n, const double *q,
                     const int64_t *order, const jmg_trd_matrix *z,
                     const char *op, jmg_error *err) {
  const int dev = g->device[0];
  const cudaStream_t st = g->stream[0];
  const int64_t step = order != NULL ? 1 : z->tile;
  int rc = 0;
  for (int64_t t0 = 0; rc == 0 && t0 < n; t0 += step) {
    const int o = jmg_bc_owner(t0, z->tile, g->ndev);
    const int64_t wd =
        order != NULL ? 1 : (t0 + z->tile <= n ? z->tile : n - t0);
    const int64_t from = order != NULL ? order[t0] : t0;
    rc = JMG_CUDA_TRY(
        cudaMemcpyPeerAsync(z->a[o] + jmg_bc_local(t0, z->tile, g->ndev) * n,
                            g->device[o], q + from * n, dev,
                            (size_t)(wd * n) * sizeof(double), st),
        op, err);
  }
  return rc;
}

int jmg_eig_mgpu_stedc(jmg_cuda_call *c, const jmg_trd_gpus *g, int64_t n,
                       const double *d, const double *e, double *w,
                       const jmg_trd_matrix *z, int *info, int *ran,
                       jmg_error *err) {
  const char *op = c->op;
  *ran = 0;
  *info = 0;
  if (n < STEDC_MIN_N) return 0;
  char why[512];
  const jmg_mp_api *mp = jmg_mp_load(why, sizeof why);
  if (mp == NULL) {
    jmg_trace_note("T on the host: %s", why);
    return 0;
  }
  const int dev = g->device[0];
  const cudaStream_t st = g->stream[0];
  void *comm = NULL;
  jmg_mp_handle_t h = NULL;
  jmg_mp_grid_t grid = NULL;
  jmg_mp_desc_t dq = NULL;
  double *dd = NULL, *de = NULL, *q = NULL;
  int *dinfo = NULL, *iwork = NULL;
  void *work = NULL, *hwork = NULL;
  size_t dbytes = 0, hbytes = 0;
  char compz[2] = {'I', '\0'};
  /* Blocks: a power of two (Stedc may fail with others), 2048 from
   * STEDC_MIN_N on. */
  int64_t nb = 1;
  while (nb * 2 <= n && nb * 2 <= 2048) nb *= 2;
  const size_t nn = (size_t)n;
  int rc = jmg_nccl_comm_self(dev, &comm, op, err);
  if (rc == 0) rc = mp_ok(mp->create(&h, dev, st), op, "cusolverMpCreate", err);
  if (rc == 0)
    rc = mp_ok(mp->create_grid(h, &grid, (ncclComm_t)comm, 1, 1,
                               JMG_MP_GRID_COL_MAJOR),
               op, "cusolverMpCreateDeviceGrid", err);
  if (rc == 0)
    rc = mp_ok(mp->create_desc(&dq, grid, CUDA_R_64F, n, n, nb, nb, 0, 0, n),
               op, "cusolverMpCreateMatrixDesc", err);
  if (rc == 0)
    rc = jmg_cuda_call_buffer(c, 0, nn * sizeof(double), (void **)&dd, err);
  if (rc == 0)
    rc = jmg_cuda_call_buffer(c, 0, nn * sizeof(double), (void **)&de, err);
  if (rc == 0)
    rc = jmg_cuda_call_buffer(c, 0, nn * nn * sizeof(double), (void **)&q, err);
  if (rc == 0)
    rc = jmg_cuda_call_buffer(c, 0, sizeof(int), (void **)&dinfo, err);
  iwork = calloc(nn + 3, sizeof(int));
  if (rc == 0 && iwork == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, op, "calloc",
                       "cannot allocate Stedc's host integers");
  if (rc == 0) rc = JMG_CUDA_TRY(cudaSetDevice(dev), op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(dd, d, nn * sizeof(double),
                                      cudaMemcpyHostToDevice, st),
                      op, err);
  if (rc == 0 && n > 1)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(de, e, (nn - 1) * sizeof(double),
                                      cudaMemcpyHostToDevice, st),
                      op, err);
  if (rc == 0)
    rc = mp_ok(mp->stedc_buffer_size(h, compz, n, dd, de, q, 1, 1, dq,
                                     CUDA_R_64F, &dbytes, &hbytes, iwork),
               op, "cusolverMpStedc_bufferSize", err);
  if (rc == 0)
    rc = jmg_cuda_call_buffer(c, 0, dbytes > 0 ? dbytes : 1, &work, err);
  if (rc == 0) {
    hwork = malloc(hbytes > 0 ? hbytes : 1);
    if (hwork == NULL)
      rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate Stedc's host workspace (%zu bytes)",
                         hbytes);
  }
  if (rc == 0) {
    *ran = 1;
    rc = mp_ok(mp->stedc(h, compz, n, dd, de, q, 1, 1, dq, CUDA_R_64F, work,
                         dbytes, hwork, hbytes, dinfo),
               op, "cusolverMpStedc", err);
  }
  int h_info = 0;
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(&h_info, dinfo, sizeof(int),
                                      cudaMemcpyDeviceToHost, st),
                      op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(w, dd, nn * sizeof(double),
                                      cudaMemcpyDeviceToHost, st),
                      op, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(st), op, err);
  if (rc == 0) *info = h_info;
  int64_t *order = NULL;
  if (rc == 0 && h_info == 0) rc = sort_ascending(w, n, &order, op, err);
  if (rc == 0 && order != NULL)
    jmg_trace_note("cusolverMpStedc's eigenvalues reordered (T splits)");
  if (rc == 0 && h_info == 0 && z != NULL)
    rc = scatter_q(g, n, q, order, z, op, err);
  free(order);
  if (rc == 0 && z != NULL) rc = JMG_CUDA_TRY(cudaStreamSynchronize(st), op, err);
  /* A failure may leave Stedc's work queued: wait before the buffers go. */
  if (rc != 0) (void)cudaStreamSynchronize(st);
  if (dq != NULL) (void)mp->destroy_desc(dq);
  if (grid != NULL) (void)mp->destroy_grid(grid);
  if (h != NULL) (void)mp->destroy(h);
  free(iwork);
  free(hwork);
  return rc;
}
