/* The tiled factorizations' shared pieces (tiles.h). */
#include "engine/cusolvermg/tiles.h"

#include <stdlib.h>

#include "cuda/check.h"

int jmg_tiles_check(const jmg_dist_matrix *a, const char *who, const char *op,
                    jmg_error *err) {
  if (a->ndev < 1 || a->ndev > JMG_CUDA_MAX_DEVICES)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, who,
                         "%d GPUs; between 1 and %d are supported", a->ndev,
                         JMG_CUDA_MAX_DEVICES);
  /* The tile's own 32-bit check is potrf's; with n >= 1 (the ops layer
   * checks it) and n a multiple of the tile it follows from n's. */
  if (a->tile < 1 || a->n % (a->tile * a->ndev) != 0 || a->tile > INT32_MAX ||
      a->n > INT32_MAX)
    return jmg_error_set(err, JMG_EINVAL, op, who,
                         "N=%lld is not a multiple of T_A=%lld times %d GPUs "
                         "(or exceeds cuBLAS's 32-bit sizes)",
                         (long long)a->n, (long long)a->tile, a->ndev);
  return 0;
}

void jmg_tiles_init(jmg_tiles *g, const jmg_dist_matrix *a, const char *op) {
  g->a = a;
  g->op = op;
  g->G = a->ndev;
  g->t = (int)a->tile;
  g->n = a->n;
  g->nt = a->n / a->tile;
  g->es = jmg_dtype_size(a->dtype);
}

int jmg_tiles_device(const jmg_tiles *g, int d) {
  return ((const jmg_cuda_device *)g->a->device_ctx[d])->device;
}

char *jmg_tiles_elem(const jmg_tiles *g, int d, int64_t col, int64_t row) {
  return (char *)g->a->data[d] +
         ((size_t)col * (size_t)g->n + (size_t)row) * g->es;
}

char *jmg_tiles_at(const jmg_tiles *g, int64_t k, int64_t row) {
  return jmg_tiles_elem(g, (int)(k % g->G), (k / g->G) * g->t, row);
}

int jmg_tiles_start_device(jmg_tiles *g, int d, cublasHandle_t blas,
                           cusolverDnHandle_t dn, cudaEvent_t *event,
                           jmg_error *err) {
  g->stream[d] =
      (cudaStream_t)((const jmg_cuda_device *)g->a->device_ctx[d])->stream;
  int rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(g, d)), g->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaEventCreateWithFlags(event, cudaEventDisableTiming),
                      g->op, err);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(cublasSetStream(blas, g->stream[d]), g->op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnSetStream(dn, g->stream[d]), g->op, err);
  return rc;
}

int jmg_tiles_host_work(const jmg_tiles *g, size_t bytes, const char *who,
                        void **out, jmg_error *err) {
  *out = NULL;
  if (bytes == 0) return 0;
  *out = malloc(bytes);
  if (*out == NULL)
    return jmg_error_set(err, JMG_ENOMEM, g->op, "malloc",
                         "cannot allocate %zu bytes of %s host workspace",
                         bytes, who);
  return 0;
}

int jmg_tiles_copy_panel(const jmg_tiles *g, int d, void *dst, const void *src,
                         int64_t m, jmg_error *err) {
  return JMG_CUDA_TRY(
      cudaMemcpy2DAsync(dst, (size_t)m * g->es, src, (size_t)g->n * g->es,
                        (size_t)m * g->es, (size_t)g->t, cudaMemcpyDefault,
                        g->stream[d]),
      g->op, err);
}

int jmg_tiles_sync_device(const jmg_tiles *g, int d, jmg_error *err) {
  int rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(g, d)), g->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamSynchronize(g->stream[d]), g->op, err);
  return rc;
}
