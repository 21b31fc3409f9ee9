/* lu_solve with cuSOLVERDn on one GPU: cusolverDnXgetrf on the matrix in
 * place, then cusolverDnXgetrs on b in place with CUBLAS_OP_T or
 * CUBLAS_OP_N (never CUBLAS_OP_C: ops/lu_solve.c says why).
 *
 * Everything runs in order on the participant's XLA stream, the stream of
 * the ops layer's copies, so nothing waits between steps; the one wait
 * brings cuSOLVER's two info words to the host at the end. The solve runs
 * whatever the factorization found: after a zero pivot its output is
 * garbage, which the ops layer replaces by NaN (info is data). The device
 * workspace, the pivots and the info words are one allocation from XLA's
 * allocator (the platform's memory module), taken with the host workspace
 * before anything is written (the JMG_ENOMEM contract). */
#include "engine/cusolverdn/lu_solve.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/dtype.h"
#include "cuda/handles.h"
#include "mem/mem.h"

/* Pieces of the one allocation start at multiples of this (XLA's). */
#define LU_ALIGN 256

static size_t lu_round_up(size_t bytes) {
  return (bytes + LU_ALIGN - 1) / LU_ALIGN * LU_ALIGN;
}

int jmg_dn_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  (void)e;
  const char *op = "lu_solve";
  static const char *const names[2] = {"cusolverDnXgetrf", "cusolverDnXgetrs"};
  *info = 0;
  if (a->ndev != 1 || a->local_cols != a->n)
    return jmg_error_set(err, JMG_EINTERNAL, op, "cuSOLVERDn",
                         "called on %d GPUs (%lld of %lld columns here); it "
                         "runs on one",
                         a->ndev, (long long)a->local_cols, (long long)a->n);
  const jmg_cuda_device *dev = a->device_ctx[0];
  const cudaStream_t stream = (cudaStream_t)dev->stream;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  const int64_t n = a->n;
  const jmg_mem *mem = jmg_cuda_mem();
  const jmg_mem_group group = {.n = 1, .device_ctx = a->device_ctx};
  jmg_cuda_handles *h = NULL;
  void *work = NULL, *host_work = NULL;
  size_t dev_bytes = 0, host_bytes = 0, alloc_bytes = 0;
  int saved_device = -1, pending = 0, h_info[2] = {0, 0};

  int rc = JMG_CUDA_TRY(cudaGetDevice(&saved_device), op, err);
  if (rc == 0)
    rc = jmg_cuda_handles_acquire(a->device_ctx, 1, "cuSOLVERDn", &h, err);
  /* The handle was made on this GPU; cuSOLVER still wants it current. */
  if (rc == 0 && saved_device != dev->device)
    rc = JMG_CUDA_TRY(cudaSetDevice(dev->device), op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnSetStream(h->dn[0], stream), op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgetrf_bufferSize(h->dn[0], h->dn_params, n, n, t, a->data[0],
                                    n, t, &dev_bytes, &host_bytes),
        op, err);
  /* [workspace | pivots (n int64) | info words (2 int)] */
  const size_t piv_at = lu_round_up(dev_bytes);
  const size_t info_at = lu_round_up(piv_at + (size_t)n * sizeof(int64_t));
  if (rc == 0) {
    alloc_bytes = info_at + 2 * sizeof(int);
    rc = mem->alloc(&group, 0, alloc_bytes, &work, err);
    if (rc != 0) work = NULL;
  }
  if (rc == 0 && host_bytes > 0 && (host_work = malloc(host_bytes)) == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate %zu bytes of cuSOLVER's host "
                       "workspace",
                       host_bytes);
  jmg_trace_mark("workspace");
  int64_t *ipiv = work ? (int64_t *)((char *)work + piv_at) : NULL;
  int *d_info = work ? (int *)((char *)work + info_at) : NULL;
  if (rc == 0) {
    pending = 1;
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgetrf(h->dn[0], h->dn_params, n, n, t, a->data[0], n, ipiv,
                         t, work, dev_bytes, host_work, host_bytes, d_info),
        op, err);
  }
  if (rc == 0 && nrhs > 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXgetrs(h->dn[0], h->dn_params,
                         transpose ? CUBLAS_OP_T : CUBLAS_OP_N, n, nrhs, t,
                         a->data[0], n, ipiv, t, b, n, d_info + 1),
        op, err);
  const int count = nrhs > 0 ? 2 : 1;
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaMemcpyAsync(h_info, d_info, (size_t)count * sizeof(int),
                        cudaMemcpyDeviceToHost, stream),
        op, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(stream), op, err);
  if (rc == 0) pending = 0;
  for (int i = 0; rc == 0 && i < count; ++i)
    if (h_info[i] < 0)
      rc = jmg_error_set(err, JMG_ECUSOLVER, op, names[i],
                         "argument %d was rejected", -h_info[i]);
  jmg_trace_mark("getrf+getrs");
  if (rc == 0) *info = h_info[0];

  /* After a failure work may still run on the workspace. */
  if (pending) (void)cudaStreamSynchronize(stream);
  if (work != NULL) mem->release(&group, 0, work, alloc_bytes);
  free(host_work);
  if (h != NULL) jmg_cuda_handles_release(h);
  if (saved_device >= 0 && saved_device != dev->device)
    (void)cudaSetDevice(saved_device);
  if (rc != 0 && err->op[0] == '\0')
    snprintf(err->op, sizeof err->op, "%s", op);
  return rc;
}
