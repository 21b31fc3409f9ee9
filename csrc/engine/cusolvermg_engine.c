/* The GPU engine: cuSOLVERMg over the participants' GPUs, in one process.
 *
 * Resources live per device set (the participants' CUDA devices in shard
 * order): the cuSOLVERMg handle and its 1 x G device grid, matrix descriptors
 * cached by shape, tile and type, one cuBLAS handle per device (for the
 * Hermitian fill), peer access enabled once. A device set's mutex makes its
 * calls one at a time. Workspaces come from XLA's allocator on each device and
 * are returned at the end of the call.
 *
 * cuSOLVERMg's routines run on their own streams and return when done; the
 * engine waits for every device after each of them. Copies for the layout go
 * in order on the leader's stream, which the ops layer relies on.
 *
 * The Cholesky factorization behind potrs and potri is not cuSOLVERMg's but
 * the tiled one of cuda_potrf.h (cuSOLVERMg's is wrong on GPUs that other
 * processes use, and slower; docs/gpu-notes.md); the solves and syevd are
 * cuSOLVERMg's. */
#define _POSIX_C_SOURCE 200809L
/* cuSOLVERMg is marked deprecated in CUDA 13 but still ships and works; this
 * file is the only one that calls it. */
#define DISABLE_CUSOLVERMG_DEPRECATED
#include <cusolverMg.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/dtype.h"
#include "engine/cuda_hermitian.h"
#include "engine/cuda_potrf.h"
#include "engine/engine.h"

#define MG_MAX_DEVICES JMG_CUDA_MAX_DEVICES
#define MG_MAX_DESCRIPTORS 32

typedef struct mg_desc {
  struct mg_desc *next;
  int64_t rows, cols, col_block;
  cudaDataType type;
  cudaLibMgMatrixDesc_t desc;
} mg_desc;

typedef struct mg_context {
  struct mg_context *next;
  int ndev;
  int devices[MG_MAX_DEVICES];
  cusolverMgHandle_t handle;
  cudaLibMgGrid_t grid;
  mg_desc *descs;
  int ndescs;
  cublasHandle_t cublas[MG_MAX_DEVICES];
  /* For the factorization that replaces cusolverMgPotrf (cuda_potrf.h). */
  cusolverDnHandle_t dn[MG_MAX_DEVICES];
  cusolverDnParams_t dn_params;
  pthread_mutex_t mu;
} mg_context;

static pthread_mutex_t g_contexts_mu = PTHREAD_MUTEX_INITIALIZER;
static mg_context *g_contexts;

static const jmg_cuda_device *dev_of(const jmg_dist_matrix *m, int d) {
  return (const jmg_cuda_device *)m->device_ctx[d];
}

static cudaStream_t stream_of(const jmg_dist_matrix *m, int d) {
  return (cudaStream_t)dev_of(m, d)->stream;
}

/* ---- device set resources -------------------------------------------------*/

static int enable_peer_access(const int *devices, int ndev, jmg_error *err) {
  for (int i = 0; i < ndev; ++i) {
    int rc = JMG_CUDA_TRY(cudaSetDevice(devices[i]), NULL, err);
    if (rc != 0) return rc;
    for (int j = 0; j < ndev; ++j) {
      if (devices[j] == devices[i]) continue;
      int can = 0;
      rc = JMG_CUDA_TRY(cudaDeviceCanAccessPeer(&can, devices[i], devices[j]),
                        NULL, err);
      if (rc != 0) return rc;
      if (!can)
        return jmg_error_set(err, JMG_EUNSUPPORTED, NULL,
                             "cudaDeviceCanAccessPeer",
                             "GPU %d cannot access GPU %d directly; "
                             "cuSOLVERMg needs peer access between all GPUs",
                             devices[i], devices[j]);
      cudaError_t e = cudaDeviceEnablePeerAccess(devices[j], 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
        continue;
      }
      rc = jmg_cuda_check(e, NULL, "cudaDeviceEnablePeerAccess", err);
      if (rc != 0) return rc;
    }
  }
  return 0;
}

static void destroy_context(mg_context *c) {
  for (mg_desc *d = c->descs; d != NULL;) {
    mg_desc *next = d->next;
    cusolverMgDestroyMatrixDesc(d->desc);
    free(d);
    d = next;
  }
  if (c->grid) cusolverMgDestroyGrid(c->grid);
  if (c->handle) cusolverMgDestroy(c->handle);
  for (int i = 0; i < c->ndev; ++i) {
    cudaSetDevice(c->devices[i]);
    if (c->cublas[i]) cublasDestroy(c->cublas[i]);
    if (c->dn[i]) cusolverDnDestroy(c->dn[i]);
  }
  if (c->dn_params) cusolverDnDestroyParams(c->dn_params);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static int create_context(const int *devices, int ndev, mg_context **out,
                          jmg_error *err) {
  mg_context *c = calloc(1, sizeof *c);
  if (c == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                         "cannot allocate the cuSOLVERMg context");
  pthread_mutex_init(&c->mu, NULL);
  c->ndev = ndev;
  memcpy(c->devices, devices, (size_t)ndev * sizeof *devices);
  int rc = enable_peer_access(devices, ndev, err);
  if (rc == 0) rc = JMG_CUSOLVER_TRY(cusolverMgCreate(&c->handle), NULL, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverMgDeviceSelect(c->handle, ndev, c->devices),
                          NULL, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverMgCreateDeviceGrid(&c->grid, 1, ndev, c->devices,
                                   CUDALIBMG_GRID_MAPPING_COL_MAJOR),
        NULL, err);
  for (int i = 0; rc == 0 && i < ndev; ++i) {
    rc = JMG_CUDA_TRY(cudaSetDevice(devices[i]), NULL, err);
    if (rc == 0) rc = JMG_CUBLAS_TRY(cublasCreate(&c->cublas[i]), NULL, err);
    if (rc == 0) rc = JMG_CUSOLVER_TRY(cusolverDnCreate(&c->dn[i]), NULL, err);
  }
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnCreateParams(&c->dn_params), NULL, err);
  if (rc != 0) {
    destroy_context(c);
    return rc;
  }
  *out = c;
  return 0;
}

/* The context of the matrix's device set, locked; unlock with
 * pthread_mutex_unlock(&ctx->mu). */
static int acquire_context(const jmg_dist_matrix *m, mg_context **out,
                           jmg_error *err) {
  if (m->ndev > MG_MAX_DEVICES)
    return jmg_error_set(err, JMG_EUNSUPPORTED, NULL, "cuSOLVERMg",
                         "%d GPUs requested; cuSOLVERMg drives at most %d",
                         m->ndev, MG_MAX_DEVICES);
  int devices[MG_MAX_DEVICES];
  for (int d = 0; d < m->ndev; ++d) {
    devices[d] = dev_of(m, d)->device;
    for (int e = 0; e < d; ++e)
      if (devices[e] == devices[d])
        return jmg_error_set(err, JMG_EINVAL, NULL, "cuSOLVERMg",
                             "shards %d and %d are both on GPU %d; every "
                             "shard must be on its own GPU",
                             e, d, devices[d]);
  }
  pthread_mutex_lock(&g_contexts_mu);
  mg_context *c = g_contexts;
  while (c != NULL &&
         !(c->ndev == m->ndev &&
           memcmp(c->devices, devices, (size_t)m->ndev * sizeof *devices) == 0))
    c = c->next;
  int rc = 0;
  if (c == NULL) {
    rc = create_context(devices, m->ndev, &c, err);
    if (rc == 0) {
      c->next = g_contexts;
      g_contexts = c;
    }
  }
  pthread_mutex_unlock(&g_contexts_mu);
  if (rc != 0) return rc;
  pthread_mutex_lock(&c->mu);
  *out = c;
  return 0;
}

/* A cached descriptor of a rows x cols matrix in column tiles of col_block,
 * one row block (1D block-cyclic over the grid's columns). */
static int descriptor(mg_context *c, int64_t rows, int64_t cols,
                      int64_t col_block, cudaDataType type,
                      cudaLibMgMatrixDesc_t *out, jmg_error *err) {
  for (mg_desc *d = c->descs; d != NULL; d = d->next)
    if (d->rows == rows && d->cols == cols && d->col_block == col_block &&
        d->type == type) {
      *out = d->desc;
      return 0;
    }
  if (c->ndescs >= MG_MAX_DESCRIPTORS) {
    /* Drop the oldest (the list's tail): a program rarely uses many shapes. */
    mg_desc **p = &c->descs;
    while ((*p)->next != NULL) p = &(*p)->next;
    cusolverMgDestroyMatrixDesc((*p)->desc);
    free(*p);
    *p = NULL;
    c->ndescs--;
  }
  mg_desc *d = calloc(1, sizeof *d);
  if (d == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                         "cannot allocate a matrix descriptor");
  int rc =
      JMG_CUSOLVER_TRY(cusolverMgCreateMatrixDesc(&d->desc, rows, cols, rows,
                                                  col_block, type, c->grid),
                       NULL, err);
  if (rc != 0) {
    free(d);
    return rc;
  }
  d->rows = rows;
  d->cols = cols;
  d->col_block = col_block;
  d->type = type;
  d->next = c->descs;
  c->descs = d;
  c->ndescs++;
  *out = d->desc;
  return 0;
}

/* ---- memory --------------------------------------------------------------*/

static int cuda_copy(const jmg_engine *e, const jmg_dist_matrix *m, void *dst,
                     int dst_dev, const void *src, int src_dev, size_t bytes,
                     jmg_error *err) {
  (void)e;
  if (bytes == 0 || dst == src) return 0;
  cudaStream_t s = stream_of(m, 0);
  if (dst_dev == JMG_HOST || src_dev == JMG_HOST)
    return JMG_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s),
                        NULL, err);
  return JMG_CUDA_TRY(cudaMemcpyPeerAsync(dst, dev_of(m, dst_dev)->device, src,
                                          dev_of(m, src_dev)->device, bytes, s),
                      NULL, err);
}

/* Copy lanes: lane l is a stream on the l % ndev-th GPU of the call, so the
 * copy engines of every GPU drive the permutation at once. Each lane starts
 * after everything already issued on the participants' streams. */
typedef struct cuda_lanes {
  int n;
  cudaStream_t stream[];
} cuda_lanes;

static int cuda_lanes_close(const jmg_engine *e, const jmg_dist_matrix *m,
                            void *lanes, jmg_error *err) {
  (void)e, (void)m;
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

static int cuda_lanes_open(const jmg_engine *e, const jmg_dist_matrix *m,
                           int nlanes, void **lanes, jmg_error *err) {
  *lanes = NULL;
  int saved = -1;
  int rc = JMG_CUDA_TRY(cudaGetDevice(&saved), NULL, err);
  cuda_lanes *l = calloc(1, sizeof *l + (size_t)nlanes * sizeof(cudaStream_t));
  cudaEvent_t ready[MG_MAX_DEVICES] = {0};
  if (rc == 0 && m->ndev > MG_MAX_DEVICES)
    rc = jmg_error_set(err, JMG_EUNSUPPORTED, NULL, "cuSOLVERMg",
                       "%d GPUs requested; cuSOLVERMg drives at most %d",
                       m->ndev, MG_MAX_DEVICES);
  if (rc == 0 && l == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                       "cannot allocate %d copy lanes", nlanes);
  if (l != NULL) l->n = nlanes;
  for (int d = 0; rc == 0 && d < m->ndev; ++d) {
    rc = JMG_CUDA_TRY(cudaSetDevice(dev_of(m, d)->device), NULL, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaEventCreateWithFlags(&ready[d], cudaEventDisableTiming), NULL,
          err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaEventRecord(ready[d], stream_of(m, d)), NULL, err);
  }
  for (int i = 0; rc == 0 && i < nlanes; ++i) {
    rc = JMG_CUDA_TRY(cudaSetDevice(dev_of(m, i % m->ndev)->device), NULL, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaStreamCreateWithFlags(&l->stream[i], cudaStreamNonBlocking), NULL,
          err);
    for (int d = 0; rc == 0 && d < m->ndev; ++d)
      rc = JMG_CUDA_TRY(cudaStreamWaitEvent(l->stream[i], ready[d], 0), NULL,
                        err);
  }
  for (int d = 0; d < m->ndev && d < MG_MAX_DEVICES; ++d)
    if (ready[d] != NULL) cudaEventDestroy(ready[d]);
  if (saved >= 0) cudaSetDevice(saved);
  if (rc != 0) {
    jmg_error ignored;
    cuda_lanes_close(e, m, l, &ignored);
    return rc;
  }
  *lanes = l;
  return 0;
}

static int cuda_lane_copy(const jmg_engine *e, const jmg_dist_matrix *m,
                          void *lanes, int lane, void *dst, int dst_dev,
                          const void *src, int src_dev, size_t bytes,
                          jmg_error *err) {
  (void)e;
  const cuda_lanes *l = lanes;
  if (bytes == 0 || dst == src) return 0;
  return JMG_CUDA_TRY(
      cudaMemcpyPeerAsync(dst, dev_of(m, dst_dev)->device, src,
                          dev_of(m, src_dev)->device, bytes, l->stream[lane]),
      NULL, err);
}

static int cuda_alloc(const jmg_engine *e, const jmg_dist_matrix *m, int dev,
                      size_t bytes, void **out, jmg_error *err) {
  (void)e;
  const jmg_cuda_device *d = dev_of(m, dev);
  return d->alloc(d->alloc_ctx, bytes, out, err);
}

static void cuda_release(const jmg_engine *e, const jmg_dist_matrix *m, int dev,
                         void *ptr, size_t bytes) {
  (void)e;
  const jmg_cuda_device *d = dev_of(m, dev);
  if (ptr != NULL) d->free(d->alloc_ctx, ptr, bytes);
}

static int cuda_fill_nan(const jmg_engine *e, const jmg_dist_matrix *m, int dev,
                         void *ptr, size_t count, jmg_dtype dtype,
                         jmg_error *err) {
  (void)e;
  /* All bits set is a NaN in IEEE float32 and float64, real or complex. */
  int saved = -1;
  int rc = JMG_CUDA_TRY(cudaGetDevice(&saved), NULL, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaSetDevice(dev_of(m, dev)->device), NULL, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemsetAsync(ptr, 0xFF, count * jmg_dtype_size(dtype),
                                      stream_of(m, dev)),
                      NULL, err);
  if (saved >= 0) cudaSetDevice(saved);
  return rc;
}

static int cuda_sync(const jmg_engine *e, const jmg_dist_matrix *m,
                     jmg_error *err) {
  (void)e;
  for (int d = 0; d < m->ndev; ++d) {
    int rc = JMG_CUDA_TRY(cudaStreamSynchronize(stream_of(m, d)), NULL, err);
    if (rc != 0) return rc;
  }
  return 0;
}

/* Waits for all work of the matrix's GPUs (cuSOLVERMg uses its own streams),
 * and leaves the grid's first GPU current, as NVIDIA's samples call it. */
static int sync_devices(const jmg_dist_matrix *m, const char *op,
                        jmg_error *err) {
  for (int d = m->ndev - 1; d >= 0; --d) {
    int rc = JMG_CUDA_TRY(cudaSetDevice(dev_of(m, d)->device), op, err);
    if (rc == 0) rc = JMG_CUDA_TRY(cudaDeviceSynchronize(), op, err);
    if (rc != 0) return rc;
  }
  return 0;
}

/* ---- one call's frame: device, context, workspace
 * ---------------------------*/

typedef struct mg_call {
  const char *op;
  const jmg_dist_matrix *a;
  mg_context *ctx;
  int saved_device;
  void *a_ptrs[MG_MAX_DEVICES];
  void *work[MG_MAX_DEVICES];
  size_t work_bytes;
} mg_call;

static int begin_call(mg_call *call, const char *op, const jmg_dist_matrix *a,
                      jmg_error *err) {
  memset(call, 0, sizeof *call);
  call->op = op;
  call->a = a;
  call->saved_device = -1;
  if (a->n > INT_MAX)
    return jmg_error_set(err, JMG_EINVAL, op, "cuSOLVERMg",
                         "N=%lld exceeds cuSOLVERMg's 32-bit int",
                         (long long)a->n);
  int rc = JMG_CUDA_TRY(cudaGetDevice(&call->saved_device), op, err);
  if (rc == 0) rc = acquire_context(a, &call->ctx, err);
  if (rc != 0) {
    if (err->op[0] == '\0') snprintf(err->op, sizeof err->op, "%s", op);
    return rc;
  }
  for (int d = 0; d < a->ndev; ++d) call->a_ptrs[d] = a->data[d];
  /* Inputs were written on XLA's streams, which each participant synchronized
   * before it joined; the ops layer's copies are on the leader's stream. */
  rc = cuda_sync(NULL, a, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaSetDevice(dev_of(a, 0)->device), op, err);
  jmg_trace_mark("engine start");
  return rc;
}

/* Takes lwork elements of the matrix's type on every device. */
static int take_workspace(mg_call *call, int64_t lwork, jmg_error *err) {
  size_t esize = jmg_dtype_size(call->a->dtype);
  call->work_bytes = (size_t)(lwork > 0 ? lwork : 1) * esize;
  for (int d = 0; d < call->a->ndev; ++d) {
    int rc =
        cuda_alloc(NULL, call->a, d, call->work_bytes, &call->work[d], err);
    if (rc != 0) {
      if (err->op[0] == '\0') snprintf(err->op, sizeof err->op, "%s", call->op);
      return rc;
    }
  }
  return 0;
}

static void end_call(mg_call *call) {
  for (int d = 0; d < call->a->ndev; ++d)
    if (call->work[d] != NULL)
      cuda_release(NULL, call->a, d, call->work[d], call->work_bytes);
  if (call->ctx != NULL) pthread_mutex_unlock(&call->ctx->mu);
  if (call->saved_device >= 0) cudaSetDevice(call->saved_device);
}

static int check_info(int info, const char *op, const char *call,
                      jmg_error *err) {
  if (info >= 0) return 0;
  return jmg_error_set(err, JMG_ECUSOLVER, op, call, "argument %d was rejected",
                       -info);
}

/* ---- solvers
 * ----------------------------------------------------------------*/

/* Which factorization potrs and potri use. cusolverMgPotrf returns a wrong
 * factor when other processes run work on the same GPUs (which a 4-process
 * MPMD job does to itself; docs/gpu-notes.md), so the default is the tiled
 * one of cuda_potrf.h. JAXMG_POTRF=cusolvermg selects cuSOLVERMg's, for
 * comparison on GPUs that are not shared. */
static int potrf_choice(const char *op, int *use_mg, jmg_error *err) {
  jmg_config c;
  jmg_config_read(&c);
  const char *env = c.potrf;
  *use_mg = 0;
  if (*env == '\0' || strcmp(env, "tiles") == 0) return 0;
  if (strcmp(env, "cusolvermg") == 0) {
    *use_mg = 1;
    return 0;
  }
  return jmg_error_set(err, JMG_EINVAL, op, "JAXMG_POTRF",
                       "\"%s\" is not a factorization: use \"tiles\" (the "
                       "default) or \"cusolvermg\"",
                       env);
}

static jmg_cuda_potrf_handles potrf_handles(const mg_context *c) {
  jmg_cuda_potrf_handles h = {c->cublas, c->dn, c->dn_params};
  return h;
}

/* The factorization's workspace, in elements of the matrix's type. */
static int factor_workspace(mg_call *call, cudaLibMgMatrixDesc_t desc_a,
                            int use_mg, int64_t *lwork, jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  if (use_mg)
    return JMG_CUSOLVER_TRY(
        cusolverMgPotrf_bufferSize(call->ctx->handle, CUBLAS_FILL_MODE_LOWER,
                                   (int)a->n, call->a_ptrs, 1, 1, desc_a, t,
                                   lwork),
        call->op, err);
  const jmg_cuda_potrf_handles h = potrf_handles(call->ctx);
  size_t bytes = 0;
  int rc = jmg_cuda_potrf_workspace(a, &h, &bytes, call->op, err);
  const size_t es = jmg_dtype_size(a->dtype);
  *lwork = (int64_t)((bytes + es - 1) / es);
  return rc;
}

/* potrf. A matrix that is not positive definite is data, not an error:
 * h_info > 0 (the failing leading minor). cuSOLVERMg reports it through a
 * failed status with h_info set. */
static int factor(mg_call *call, cudaLibMgMatrixDesc_t desc_a, int use_mg,
                  int *h_info, jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  *h_info = 0;
  if (!use_mg) {
    const jmg_cuda_potrf_handles h = potrf_handles(call->ctx);
    int64_t info = 0;
    int rc = jmg_cuda_potrf(a, &h, call->work, &info, call->op, err);
    *h_info = (int)info;
    return rc;
  }
  cusolverStatus_t s = cusolverMgPotrf(
      call->ctx->handle, CUBLAS_FILL_MODE_LOWER, (int)a->n, call->a_ptrs, 1, 1,
      desc_a, jmg_cuda_data_type(a->dtype), call->work,
      (int64_t)(call->work_bytes / jmg_dtype_size(a->dtype)), h_info);
  if (s != CUSOLVER_STATUS_SUCCESS && *h_info > 0) return 0;
  return jmg_cusolver_check(s, call->op, "cusolverMgPotrf", err);
}

/* cuSOLVERMg's potrs gives wrong entries past the 2048th right-hand side of
 * a B tile (seen on 2 and 4 H200s, CUDA 13.0: rows and columns past 2048 off
 * by 1e-4 relative), so right-hand sides go in chunks of at most this many. */
#define MG_MAX_RHS_CHUNK 2048

/* Solves A X = B with the factor in A, for B on the grid's first GPU
 * (n x nrhs, column-major, leading dimension n), chunk by chunk; each chunk
 * is one column tile of B, the layout cuSOLVERMg's potrs takes. other[d] are
 * valid buffers on GPU d (cuSOLVERMg wants a B pointer on every GPU). */
static int solve_chunked(mg_call *call, cudaLibMgMatrixDesc_t desc_a, void *b,
                         int64_t nrhs, void *const *other, int *h_info,
                         jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  const size_t es = jmg_dtype_size(a->dtype);
  void *b_ptrs[MG_MAX_DEVICES];
  for (int d = 0; d < a->ndev; ++d) b_ptrs[d] = other[d];
  *h_info = 0;
  for (int64_t c = 0; c < nrhs && *h_info == 0; c += MG_MAX_RHS_CHUNK) {
    const int k =
        (int)(nrhs - c < MG_MAX_RHS_CHUNK ? nrhs - c : MG_MAX_RHS_CHUNK);
    cudaLibMgMatrixDesc_t desc_b = NULL;
    b_ptrs[0] = (char *)b + (size_t)c * (size_t)a->n * es;
    int rc = descriptor(call->ctx, a->n, k, k, t, &desc_b, err);
    if (rc == 0)
      rc = JMG_CUSOLVER_TRY(
          cusolverMgPotrs(call->ctx->handle, CUBLAS_FILL_MODE_LOWER, (int)a->n,
                          k, call->a_ptrs, 1, 1, desc_a, b_ptrs, 1, 1, desc_b,
                          t, call->work, (int64_t)(call->work_bytes / es),
                          h_info),
          call->op, err);
    if (rc == 0) rc = sync_devices(a, call->op, err);
    if (rc == 0) rc = check_info(*h_info, call->op, "cusolverMgPotrs", err);
    if (rc != 0) return rc;
  }
  return 0;
}

/* The workspace potrs needs for chunks of up to nrhs right-hand sides. */
static int solve_workspace(mg_call *call, cudaLibMgMatrixDesc_t desc_a,
                           int64_t nrhs, void *const *b, int64_t *lwork,
                           jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const int k = (int)(nrhs < MG_MAX_RHS_CHUNK ? nrhs : MG_MAX_RHS_CHUNK);
  void *b_ptrs[MG_MAX_DEVICES];
  for (int d = 0; d < a->ndev; ++d) b_ptrs[d] = b[d];
  cudaLibMgMatrixDesc_t desc_b = NULL;
  *lwork = 0;
  if (k < 1) return 0;
  int rc = descriptor(call->ctx, a->n, k, k, jmg_cuda_data_type(a->dtype),
                      &desc_b, err);
  if (rc == 0)
    rc =
        JMG_CUSOLVER_TRY(cusolverMgPotrs_bufferSize(
                             call->ctx->handle, CUBLAS_FILL_MODE_LOWER,
                             (int)a->n, k, call->a_ptrs, 1, 1, desc_a, b_ptrs,
                             1, 1, desc_b, jmg_cuda_data_type(a->dtype), lwork),
                         call->op, err);
  return rc;
}

/* The step potrs and potri share: A's descriptor, a workspace large enough
 * for potrf and for potrs in chunks of up to nrhs right-hand sides (b[d] are
 * buffers on GPU d for the size query), and the factorization. h_info > 0
 * (not positive definite) is data: the caller skips the solves. */
static int factor_for_solve(mg_call *call, void *const *b, int64_t nrhs,
                            cudaLibMgMatrixDesc_t *desc_a, int *h_info,
                            jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype);
  int64_t lw_potrf = 0, lw_potrs = 0;
  int use_mg = 0;
  *h_info = 0;
  int rc = potrf_choice(call->op, &use_mg, err);
  if (rc == 0) rc = descriptor(call->ctx, a->n, a->n, a->tile, t, desc_a, err);
  if (rc == 0) rc = factor_workspace(call, *desc_a, use_mg, &lw_potrf, err);
  if (rc == 0) rc = solve_workspace(call, *desc_a, nrhs, b, &lw_potrs, err);
  if (rc == 0)
    rc = take_workspace(call, lw_potrf > lw_potrs ? lw_potrf : lw_potrs, err);
  jmg_trace_mark("workspace");
  if (rc == 0) rc = factor(call, *desc_a, use_mg, h_info, err);
  if (rc == 0) rc = sync_devices(a, call->op, err);
  jmg_trace_mark("potrf");
  if (rc == 0) rc = check_info(*h_info, call->op, "potrf", err);
  return rc;
}

static int mg_potrs(const jmg_engine *e, const jmg_dist_matrix *a,
                    void *const *b, int64_t nrhs, int *info, jmg_error *err) {
  (void)e;
  const char *op = "potrs";
  mg_call call;
  int rc = begin_call(&call, op, a, err);
  cudaLibMgMatrixDesc_t desc_a = NULL;
  int h_info = 0;
  if (rc == 0) rc = factor_for_solve(&call, b, nrhs, &desc_a, &h_info, err);
  if (rc == 0 && h_info == 0)
    rc = solve_chunked(&call, desc_a, b[0], nrhs, b, &h_info, err);
  jmg_trace_mark("potrs");
  *info = h_info;
  end_call(&call);
  jmg_trace_mark("release");
  return rc;
}

/* The inverse, column slab by column slab: slab d of A^-1 solves A X = I_d,
 * where I_d holds columns d*r .. (d+1)*r - 1 of the identity. Each slab is
 * solved in one right-hand-side tile on the grid's first GPU (the layout of B
 * that cuSOLVERMg's potrs takes) and copied to GPU d; slab 0 is solved last,
 * in place. A keeps its factor until every slab is done, then takes the
 * result: the inverse in the contiguous layout.
 *
 * cuSOLVERMg's potri is not used, nor potrs with B spread over the GPUs: on 2
 * and 4 H200s (CUDA 13.0) both gave entries wrong by 1e-4 relative in rows and
 * columns past 2048, for every T_A tried, while one GPU was right (the same
 * defect as potrs past 2048 right-hand sides, see MG_MAX_RHS_CHUNK). This
 * costs a second copy of the shard on every GPU. */
static int mg_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                    jmg_error *err) {
  (void)e;
  const char *op = "potri";
  mg_call call;
  int rc = begin_call(&call, op, a, err);
  const int n = (int)a->n, r = (int)a->local_cols;
  const size_t es = jmg_dtype_size(a->dtype);
  const size_t shard_bytes = (size_t)a->n * (size_t)a->local_cols * es;
  void *x[MG_MAX_DEVICES] = {0};
  cudaLibMgMatrixDesc_t desc_a = NULL;
  char *ones = calloc((size_t)r, es);
  if (rc == 0 && ones == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc", "cannot allocate ones");
  for (int i = 0; rc == 0 && i < r; ++i)
    jmg_dtype_set_one(a->dtype, ones + (size_t)i * es);
  for (int d = 0; rc == 0 && d < a->ndev; ++d)
    rc = cuda_alloc(NULL, a, d, shard_bytes, &x[d], err);
  int h_info = 0;
  if (rc == 0) rc = factor_for_solve(&call, x, r, &desc_a, &h_info, err);
  const cudaStream_t s0 = rc == 0 ? stream_of(a, 0) : NULL;
  for (int k = 1; rc == 0 && h_info == 0 && k <= a->ndev; ++k) {
    const int d = k % a->ndev; /* slabs 1, 2, ..., ndev - 1, then 0 */
    char *first_one = (char *)x[0] + (size_t)d * (size_t)r * es;
    rc = JMG_CUDA_TRY(cudaMemsetAsync(x[0], 0, shard_bytes, s0), op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaMemcpy2DAsync(first_one, ((size_t)n + 1) * es, ones, es, es,
                            (size_t)r, cudaMemcpyHostToDevice, s0),
          op, err);
    if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(s0), op, err);
    if (rc == 0) rc = solve_chunked(&call, desc_a, x[0], r, x, &h_info, err);
    if (rc == 0 && d != 0)
      rc = cuda_copy(NULL, a, x[d], d, x[0], 0, shard_bytes, err);
    if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(s0), op, err);
  }
  for (int d = 0; rc == 0 && h_info == 0 && d < a->ndev; ++d)
    rc =
        JMG_CUDA_TRY(cudaMemcpyAsync(a->data[d], x[d], shard_bytes,
                                     cudaMemcpyDeviceToDevice, stream_of(a, d)),
                     op, err);
  if (rc == 0) rc = cuda_sync(NULL, a, err);
  jmg_trace_mark("potri slabs");
  *info = h_info;
  /* After a failure copies may still run on x: wait before returning it. */
  if (rc != 0) {
    jmg_error ignored;
    cuda_sync(NULL, a, &ignored);
    if (err->op[0] == '\0') snprintf(err->op, sizeof err->op, "%s", op);
  }
  for (int d = 0; d < a->ndev; ++d)
    if (x[d] != NULL) cuda_release(NULL, a, d, x[d], shard_bytes);
  free(ones);
  end_call(&call);
  return rc;
}

static int mg_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                    int want_vectors, int *info, jmg_error *err) {
  (void)e;
  const char *op = "syevd";
  mg_call call;
  int rc = begin_call(&call, op, a, err);
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  const int n = (int)a->n;
  const cusolverEigMode_t jobz =
      want_vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const size_t w_bytes = (size_t)a->n * jmg_dtype_real_size(a->dtype);
  /* cuSOLVERMg returns the eigenvalues in host memory. */
  void *w_host = malloc(w_bytes ? w_bytes : 1);
  cudaLibMgMatrixDesc_t desc_a = NULL;
  int64_t lwork = 0;
  if (rc == 0 && w_host == NULL)
    rc =
        jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                      "cannot allocate %zu bytes for the eigenvalues", w_bytes);
  if (rc == 0) rc = descriptor(call.ctx, a->n, a->n, a->tile, t, &desc_a, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverMgSyevd_bufferSize(
                              call.ctx->handle, jobz, CUBLAS_FILL_MODE_LOWER, n,
                              call.a_ptrs, 1, 1, desc_a, w_host, rt, t, &lwork),
                          op, err);
  if (rc == 0) rc = take_workspace(&call, lwork, err);
  jmg_trace_mark("workspace");
  int h_info = 0;
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverMgSyevd(call.ctx->handle, jobz, CUBLAS_FILL_MODE_LOWER, n,
                        call.a_ptrs, 1, 1, desc_a, w_host, rt, t, call.work,
                        (int64_t)(call.work_bytes / jmg_dtype_size(a->dtype)),
                        &h_info),
        op, err);
  if (rc == 0) rc = sync_devices(a, op, err);
  jmg_trace_mark("syevd");
  if (rc == 0) rc = check_info(h_info, op, "cusolverMgSyevd", err);
  if (rc == 0 && h_info == 0) {
    rc = cuda_copy(NULL, a, w, 0, w_host, JMG_HOST, w_bytes, err);
    if (rc == 0) rc = cuda_sync(NULL, a, err);
    if (rc != 0 && err->op[0] == '\0')
      snprintf(err->op, sizeof err->op, "%s", op);
  }
  *info = h_info;
  end_call(&call);
  free(w_host);
  return rc;
}

static int mg_fill_upper(const jmg_engine *e, const jmg_dist_matrix *a,
                         jmg_error *err) {
  (void)e;
  mg_call call;
  int rc = begin_call(&call, "potri", a, err);
  if (rc == 0) rc = jmg_cuda_hermitian_fill(a, call.ctx->cublas, err);
  end_call(&call);
  return rc;
}

static const jmg_engine g_cusolvermg_engine = {
    .name = "cusolvermg",
    .copy = cuda_copy,
    .lanes_open = cuda_lanes_open,
    .lane_copy = cuda_lane_copy,
    .lanes_close = cuda_lanes_close,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .fill_nan = cuda_fill_nan,
    .sync = cuda_sync,
    .potrs = mg_potrs,
    .potri = mg_potri,
    .fill_upper = mg_fill_upper,
    .syevd = mg_syevd,
};

const jmg_engine *jmg_cusolvermg_engine(void) { return &g_cusolvermg_engine; }
