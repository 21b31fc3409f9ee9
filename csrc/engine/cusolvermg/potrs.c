/* potrs with cuSOLVERMg: the tiled factorization, then cuSOLVERMg's solves
 * in chunks of right-hand sides (mg.h), and the factor's diagonal when asked.
 */
#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "engine/cusolvermg/mg.h"

/* The real parts of the factor's diagonal, to diag on the host: per column
 * tile t (block-cyclic: on device t % ndev, at local column (t / ndev) * T),
 * the diagonal of its diagonal block, one strided copy each. The factor is
 * complete (the factorization waited for its info); each copy waits for
 * itself, on the tile's device. */
static int read_diagonal(const jmg_dist_matrix *a, void *diag, const char *op,
                         jmg_error *err) {
  const size_t elem = jmg_dtype_size(a->dtype);
  const size_t rsize = jmg_dtype_real_size(a->dtype);
  const size_t pitch = ((size_t)a->n + 1) * elem;
  int rc = 0;
  for (int64_t t = 0; rc == 0 && t * a->tile < a->n; ++t) {
    const int d = (int)(t % a->ndev);
    const int64_t col = (t / a->ndev) * a->tile; /* local column */
    const int64_t row = t * a->tile;
    const int64_t count =
        a->n - row < a->tile ? a->n - row : a->tile;
    const jmg_cuda_device *dev = a->device_ctx[d];
    const char *src =
        (const char *)a->data[d] + ((size_t)col * (size_t)a->n + (size_t)row) * elem;
    rc = JMG_CUDA_TRY(cudaSetDevice(dev->device), op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaMemcpy2D((char *)diag + (size_t)row * rsize, rsize,
                                     src, pitch, rsize, (size_t)count,
                                     cudaMemcpyDeviceToHost),
                        op, err);
  }
  return rc;
}

int jmg_mg_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  jmg_mg_call call;
  int rc = jmg_mg_begin(&call, JMG_OP_POTRS, a, err);
  /* cuSOLVERMg wants a B pointer on every GPU of its grid, though B's one
   * column tile lies on the first: buffers of a chunk's size on the others,
   * taken before anything is written (the JMG_ENOMEM contract). */
  const int64_t k = nrhs < JMG_MG_MAX_RHS_CHUNK ? nrhs : JMG_MG_MAX_RHS_CHUNK;
  const size_t b_bytes = (size_t)a->n * (size_t)k * jmg_dtype_size(a->dtype);
  void *bs[JMG_MG_MAX_DEVICES] = {0};
  bs[0] = b;
  for (int d = 1; rc == 0 && k > 0 && d < a->ndev; ++d)
    rc = jmg_cuda_call_buffer(&call.cuda, d, b_bytes, &bs[d], err);
  cudaLibMgMatrixDesc_t desc_a = NULL;
  int h_info = 0;
  if (rc == 0)
    rc = jmg_mg_factor_for_solve(&call, bs, nrhs, &desc_a, &h_info, err);
  if (rc == 0 && h_info == 0)
    rc = jmg_mg_solve_chunked(&call, desc_a, b, nrhs, bs, &h_info, err);
  /* After the solves, which leave the factor as it is: read_diagonal moves
   * the current device, which cuSOLVERMg's calls expect on the first GPU
   * (the end of the call restores the caller's). */
  if (rc == 0 && h_info == 0 && diag != NULL)
    rc = read_diagonal(a, diag, call.cuda.op, err);
  jmg_trace_mark("potrs");
  *info = h_info;
  rc = jmg_mg_end(&call, rc, err);
  jmg_trace_mark("release");
  return rc;
}
