/* Memory operations for CUDA GPUs (mem/mem.h), for every CUDA engine and the
 * ops' leader steps: peer copies on the leader's stream, copy lanes on
 * streams of their own, XLA's allocator, NaN fills by memset. Participants'
 * device contexts are jmg_cuda_device (cuda/device.h). */
#include <cuda_runtime_api.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/handles.h"
#include "mem/mem.h"

static const jmg_cuda_device *dev_of(const jmg_mem_group *g, int d) {
  return (const jmg_cuda_device *)g->device_ctx[d];
}

static cudaStream_t stream_of(const jmg_mem_group *g, int d) {
  return (cudaStream_t)dev_of(g, d)->stream;
}

static int cuda_copy(const jmg_mem_group *g, void *dst, int dst_dev,
                     const void *src, int src_dev, size_t bytes,
                     jmg_error *err) {
  if (bytes == 0 || dst == src) return 0;
  cudaStream_t s = stream_of(g, 0);
  if (dst_dev == JMG_HOST || src_dev == JMG_HOST)
    return JMG_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s),
                        NULL, err);
  return JMG_CUDA_TRY(cudaMemcpyPeerAsync(dst, dev_of(g, dst_dev)->device, src,
                                          dev_of(g, src_dev)->device, bytes, s),
                      NULL, err);
}

static int cuda_copy2d(const jmg_mem_group *g, int dev, void *dst,
                       size_t dst_pitch, const void *src, size_t src_pitch,
                       size_t width, size_t height, jmg_error *err) {
  if (width == 0 || height == 0 || dst == src) return 0;
  /* One run of bytes: a plain copy (2D copies limit the pitch). */
  if (height == 1 || (dst_pitch == width && src_pitch == width))
    return JMG_CUDA_TRY(cudaMemcpyAsync(dst, src, width * height,
                                        cudaMemcpyDefault, stream_of(g, dev)),
                        NULL, err);
  return JMG_CUDA_TRY(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width,
                                        height, cudaMemcpyDefault,
                                        stream_of(g, dev)),
                      NULL, err);
}

/* Copy lanes: lane l is a stream on the l % ndev-th GPU of the call, so the
 * copy engines of every GPU drive the permutation at once. Each lane starts
 * after everything already issued on the participants' streams. */
typedef struct cuda_lanes {
  int n;
  cudaStream_t stream[];
} cuda_lanes;

static int cuda_lanes_close(const jmg_mem_group *g, void *lanes,
                            jmg_error *err) {
  (void)g;
  cuda_lanes *l = lanes;
  int rc = 0;
  for (int i = 0; l != NULL && i < l->n; ++i) {
    if (l->stream[i] == NULL) continue;
    jmg_error ignored;
    int s = JMG_CUDA_TRY(cudaStreamSynchronize(l->stream[i]), NULL,
                         rc == 0 ? err : &ignored);
    if (rc == 0) rc = s;
    cudaStreamDestroy(l->stream[i]);
  }
  free(l);
  return rc;
}

static int cuda_lanes_open(const jmg_mem_group *g, int nlanes, void **lanes,
                           jmg_error *err) {
  *lanes = NULL;
  int saved = -1;
  int rc = JMG_CUDA_TRY(cudaGetDevice(&saved), NULL, err);
  cuda_lanes *l = calloc(1, sizeof *l + (size_t)nlanes * sizeof(cudaStream_t));
  cudaEvent_t ready[JMG_CUDA_MAX_DEVICES] = {0};
  if (rc == 0 && g->n > JMG_CUDA_MAX_DEVICES)
    rc = jmg_error_set(err, JMG_EUNSUPPORTED, NULL, "copy lanes",
                       "%d GPUs requested; jaxmg drives at most %d", g->n,
                       JMG_CUDA_MAX_DEVICES);
  if (rc == 0 && l == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                       "cannot allocate %d copy lanes", nlanes);
  if (l != NULL) l->n = nlanes;
  for (int d = 0; rc == 0 && d < g->n; ++d) {
    rc = JMG_CUDA_TRY(cudaSetDevice(dev_of(g, d)->device), NULL, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaEventCreateWithFlags(&ready[d], cudaEventDisableTiming), NULL,
          err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaEventRecord(ready[d], stream_of(g, d)), NULL, err);
  }
  for (int i = 0; rc == 0 && i < nlanes; ++i) {
    rc = JMG_CUDA_TRY(cudaSetDevice(dev_of(g, i % g->n)->device), NULL, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaStreamCreateWithFlags(&l->stream[i], cudaStreamNonBlocking), NULL,
          err);
    for (int d = 0; rc == 0 && d < g->n; ++d)
      rc = JMG_CUDA_TRY(cudaStreamWaitEvent(l->stream[i], ready[d], 0), NULL,
                        err);
  }
  for (int d = 0; d < g->n && d < JMG_CUDA_MAX_DEVICES; ++d)
    if (ready[d] != NULL) cudaEventDestroy(ready[d]);
  if (saved >= 0) cudaSetDevice(saved);
  if (rc != 0) {
    jmg_error ignored;
    cuda_lanes_close(g, l, &ignored);
    return rc;
  }
  *lanes = l;
  return 0;
}

static int cuda_lane_copy(const jmg_mem_group *g, void *lanes, int lane,
                          void *dst, int dst_dev, const void *src, int src_dev,
                          size_t bytes, jmg_error *err) {
  const cuda_lanes *l = lanes;
  if (bytes == 0 || dst == src) return 0;
  return JMG_CUDA_TRY(
      cudaMemcpyPeerAsync(dst, dev_of(g, dst_dev)->device, src,
                          dev_of(g, src_dev)->device, bytes, l->stream[lane]),
      NULL, err);
}

static int cuda_alloc(const jmg_mem_group *g, int dev, size_t bytes, void **out,
                      jmg_error *err) {
  const jmg_cuda_device *d = dev_of(g, dev);
  return d->alloc(d->alloc_ctx, bytes, out, err);
}

static void cuda_release(const jmg_mem_group *g, int dev, void *ptr,
                         size_t bytes) {
  const jmg_cuda_device *d = dev_of(g, dev);
  if (ptr != NULL) d->free(d->alloc_ctx, ptr, bytes);
}

static int cuda_fill_nan(const jmg_mem_group *g, int dev, void *ptr,
                         size_t count, jmg_dtype dtype, jmg_error *err) {
  /* All bits set is a NaN in IEEE float32 and float64, real or complex. */
  int saved = -1;
  int rc = JMG_CUDA_TRY(cudaGetDevice(&saved), NULL, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaSetDevice(dev_of(g, dev)->device), NULL, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemsetAsync(ptr, 0xFF, count * jmg_dtype_size(dtype),
                                      stream_of(g, dev)),
                      NULL, err);
  if (saved >= 0) cudaSetDevice(saved);
  return rc;
}

/* What a cuBLAS step on participant dev's GPU holds: the caller's current
 * device (restored at the end), bytes of scratch from the participant's
 * allocator, and this GPU's cuBLAS handle (cuda/handles.h) on dev's
 * stream, pointer mode host. blas_begin takes them (whatever fails, what
 * was taken is in w for blas_end); blas_end gives them back after dev's
 * stream is done (so that the scratch is free and the results are there
 * when it returns) and returns rc, or the wait's failure where rc is 0. */
typedef struct cuda_blas_work {
  int saved;         /* the caller's device, -1 if not read */
  void *scratch;     /* bytes of scratch, or NULL */
  size_t bytes;
  jmg_cuda_handles *h;
  cublasHandle_t b;  /* h's cuBLAS handle */
} cuda_blas_work;

static int blas_begin(const jmg_mem_group *g, int dev, size_t bytes,
                      cuda_blas_work *w, jmg_error *err) {
  *w = (cuda_blas_work){.saved = -1, .bytes = bytes};
  int rc = JMG_CUDA_TRY(cudaGetDevice(&w->saved), NULL, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaSetDevice(dev_of(g, dev)->device), NULL, err);
  if (rc == 0) rc = cuda_alloc(g, dev, bytes, &w->scratch, err);
  if (rc == 0)
    rc = jmg_cuda_handles_acquire(&g->device_ctx[dev], 1, "cuBLAS", &w->h,
                                  err);
  if (rc == 0) {
    w->b = w->h->blas[0];
    rc = JMG_CUBLAS_TRY(cublasSetStream(w->b, stream_of(g, dev)), NULL, err);
  }
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(cublasSetPointerMode(w->b, CUBLAS_POINTER_MODE_HOST),
                        NULL, err);
  return rc;
}

static int blas_end(const jmg_mem_group *g, int dev, cuda_blas_work *w, int rc,
                    jmg_error *err) {
  if (w->h != NULL) jmg_cuda_handles_release(w->h);
  if (w->scratch != NULL) {
    jmg_error ignored;
    int s = JMG_CUDA_TRY(cudaStreamSynchronize(stream_of(g, dev)), NULL,
                         rc == 0 ? err : &ignored);
    if (rc == 0) rc = s;
    cuda_release(g, dev, w->scratch, w->bytes);
  }
  if (w->saved >= 0) cudaSetDevice(w->saved);
  return rc;
}

/* No kernel of our own: cuBLAS reads the block once. y = Aᵀ z with z = 0
 * gives y_j = sum_i A_ij * 0, which is 0 where column j is finite and NaN
 * where it holds a NaN or an Inf (0 * Inf is NaN); the sum of |y_j| is then
 * 0 or NaN. Nothing can overflow, as a sum of the entries could. op T,
 * whose reference loop multiplies every entry (op N's may skip a zero x_j).
 * z and y, and the cuBLAS handle: blas_begin. */
static int cuda_all_finite(const jmg_mem_group *g, int dev, const void *ptr,
                           int64_t rows, int64_t cols, int64_t ld,
                           jmg_dtype dtype, int *finite, jmg_error *err) {
  *finite = 1;
  if (rows == 0 || cols == 0) return 0;
  const size_t elem = jmg_dtype_size(dtype);
  cuda_blas_work w;
  int rc = blas_begin(g, dev, (size_t)(rows + cols) * elem, &w, err);
  char *const z = w.scratch;
  char *const y = rc == 0 ? z + (size_t)rows * elem : NULL;
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaMemsetAsync(z, 0, (size_t)rows * elem, stream_of(g, dev)), NULL,
        err);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_gemv(w.b, dtype, CUBLAS_OP_T, rows, cols, ptr, ld, z, y),
        NULL, err);
  /* A host result: cuBLAS waits for it. */
  double sum = 0.0;
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(jmg_cublas_asum(w.b, dtype, cols, y, &sum), NULL, err);
  rc = blas_end(g, dev, &w, rc, err);
  if (rc == 0) *finite = isfinite(sum) ? 1 : 0;
  return rc;
}

/* The in-place conjugate transpose in tiles of CUDA_CT_TILE (the last ones
 * short where n is not a multiple): for each tile pair (I, J), I <= J,
 * cublas<t>geam writes op(A[J, I]) and op(A[I, J]) (op C for the complex
 * dtypes, T for the real) into two tiles of scratch, which are copied back
 * swapped, on dev's stream; a diagonal tile goes through one. geam takes
 * int sizes: n must be below 2^31 (its elements may pass it: offsets are
 * 64-bit). The scratch (2 tiles) and the cuBLAS handle: blas_begin. */
enum { CUDA_CT_TILE = 1024 };

static int cuda_conj_transpose(const jmg_mem_group *g, int dev, void *ptr,
                               int64_t n, jmg_dtype dtype, jmg_error *err) {
  if (n <= 0) return 0;
  if (n > INT_MAX)
    return jmg_error_set(err, JMG_EUNSUPPORTED, NULL, "cublas<t>geam",
                         "the in-place conjugate transpose takes N < 2^31 "
                         "(cuBLAS's geam has int sizes), got N = %lld",
                         (long long)n);
  const int64_t t = n < CUDA_CT_TILE ? n : CUDA_CT_TILE;
  const size_t elem = jmg_dtype_size(dtype);
  const size_t tile_bytes = (size_t)t * (size_t)t * elem;
  const size_t pitch = (size_t)n * elem, tile_pitch = (size_t)t * elem;
  const cublasOperation_t op =
      jmg_dtype_is_complex(dtype) ? CUBLAS_OP_C : CUBLAS_OP_T;
  char *const a = ptr;
  cuda_blas_work w;
  int rc = blas_begin(g, dev, 2 * tile_bytes, &w, err);
  const cublasHandle_t b = w.b;
  char *const s_ij = w.scratch;
  char *const s_ji = rc == 0 ? s_ij + tile_bytes : NULL;
  for (int64_t jb = 0; rc == 0 && jb < n; jb += t)
    for (int64_t ib = 0; rc == 0 && ib <= jb; ib += t) {
      const int bi = (int)(n - ib < t ? n - ib : t);
      const int bj = (int)(n - jb < t ? n - jb : t);
      /* A[I, J]: bi x bj at (ib, jb); A[J, I]: bj x bi at (jb, ib). */
      char *const x = a + ((size_t)ib + (size_t)jb * (size_t)n) * elem;
      char *const y = a + ((size_t)jb + (size_t)ib * (size_t)n) * elem;
      /* The new A[I, J] = op(A[J, I]), bi x bj. */
      rc = JMG_CUBLAS_TRY(jmg_cublas_geam(b, dtype, op, bi, bj, y, (int)n,
                                          s_ij, (int)t),
                          NULL, err);
      if (rc == 0 && ib != jb) /* the new A[J, I] = op(A[I, J]), bj x bi */
        rc = JMG_CUBLAS_TRY(jmg_cublas_geam(b, dtype, op, bj, bi, x, (int)n,
                                            s_ji, (int)t),
                            NULL, err);
      if (rc == 0)
        rc = cuda_copy2d(g, dev, x, pitch, s_ij, tile_pitch,
                         (size_t)bi * elem, (size_t)bj, err);
      if (rc == 0 && ib != jb)
        rc = cuda_copy2d(g, dev, y, pitch, s_ji, tile_pitch,
                         (size_t)bj * elem, (size_t)bi, err);
    }
  /* blas_end waits for the stream: the matrix is whole when this returns. */
  return blas_end(g, dev, &w, rc, err);
}

static int cuda_sync(const jmg_mem_group *g, jmg_error *err) {
  for (int d = 0; d < g->n; ++d) {
    int rc = JMG_CUDA_TRY(cudaStreamSynchronize(stream_of(g, d)), NULL, err);
    if (rc != 0) return rc;
  }
  return 0;
}

static const jmg_mem g_cuda_mem = {
    .name = "cuda",
    .copy = cuda_copy,
    .copy2d = cuda_copy2d,
    .lanes_open = cuda_lanes_open,
    .lane_copy = cuda_lane_copy,
    .lanes_close = cuda_lanes_close,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .fill_nan = cuda_fill_nan,
    .all_finite = cuda_all_finite,
    .conj_transpose = cuda_conj_transpose,
    .sync = cuda_sync,
};

const jmg_mem *jmg_cuda_mem(void) { return &g_cuda_mem; }
