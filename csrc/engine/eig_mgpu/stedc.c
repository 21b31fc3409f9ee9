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
  /* Q's columns to their GPUs, a tile at a time. */
  for (int64_t t0 = 0; rc == 0 && h_info == 0 && z != NULL && t0 < n;
       t0 += z->tile) {
    const int o = jmg_bc_owner(t0, z->tile, g->ndev);
    const int64_t wd = t0 + z->tile <= n ? z->tile : n - t0;
    rc = JMG_CUDA_TRY(
        cudaMemcpyPeerAsync(z->a[o] + jmg_bc_local(t0, z->tile, g->ndev) * n,
                            g->device[o], q + t0 * n, dev,
                            (size_t)(wd * n) * sizeof(double), st),
        op, err);
  }
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
