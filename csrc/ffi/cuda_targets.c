/* The CUDA platform and its registration table: the handlers
 * libjaxmg_cuda.so exports, one per op, registered for platform "CUDA".
 *
 * Each participant (one per GPU, each on its own XLA thread) reads its shard
 * position from device memory, synchronizes its XLA stream so that its inputs
 * are complete, and joins the rendezvous; the leader then drives every GPU
 * through the engine chosen for the call (cuSOLVERDn on one GPU, cuSOLVERMg
 * on several). Workspaces come from XLA's allocator.
 * In MPMD (one process per GPU) the participants are processes: they share
 * their buffers with the leader through CUDA IPC (share/cuda_share.c), and
 * the stream synchronization above is what makes their inputs complete
 * before the leader, in another process, reads them. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/comm_nccl.h"
#include "cuda/device.h"
#include "engine/cusolvermp/api.h"
#include "engine/lapack/table.h"
#include "ffi/handler.h"
#include "ops/ops.h"

typedef struct xla_alloc_ctx {
  const XLA_FFI_Api *api;
  XLA_FFI_ExecutionContext *ctx;
  int device;
} xla_alloc_ctx;

typedef struct cuda_participant {
  jmg_cuda_device dev;
  xla_alloc_ctx alloc;
} cuda_participant;

static int get_stream(XLA_FFI_CallFrame *frame, cudaStream_t *out,
                      jmg_error *err) {
  XLA_FFI_Stream_Get_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  args.ctx = frame->ctx;
  XLA_FFI_Error *e = frame->api->XLA_FFI_Stream_Get(&args);
  if (e != NULL)
    return jmg_ffi_consume_error(frame->api, e, JMG_EINTERNAL,
                                 "XLA_FFI_Stream_Get", err);
  *out = (cudaStream_t)args.stream;
  return 0;
}

/* Device memory from XLA's allocator; cudaMalloc where the runtime has none. */
static int xla_alloc(void *p, size_t bytes, void **out, jmg_error *err) {
  xla_alloc_ctx *a = p;
  if (JMG_XLA_API_HAS(a->api, XLA_FFI_DeviceMemory_Allocate) &&
      a->api->XLA_FFI_DeviceMemory_Allocate != NULL) {
    XLA_FFI_DeviceMemory_Allocate_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_DeviceMemory_Allocate_Args_STRUCT_SIZE;
    args.ctx = a->ctx;
    args.size = bytes;
    /* XLA accepts at most alignof(max_align_t) (16); its GPU allocator
     * returns 256-byte aligned blocks regardless. */
    args.alignment = 16;
    XLA_FFI_Error *e = a->api->XLA_FFI_DeviceMemory_Allocate(&args);
    if (e != NULL) {
      int rc = jmg_ffi_consume_error(a->api, e, JMG_ENOMEM,
                                     "XLA_FFI_DeviceMemory_Allocate", err);
      char why[JMG_ERROR_MSG_LEN];
      snprintf(why, sizeof why, "%s", err->msg);
      /* What the GPU has left outside XLA's pool, which holds most of it. */
      size_t free_b = 0, total_b = 0;
      char left[96] = "";
      if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
        snprintf(left, sizeof left,
                 " (%.2f GiB of the GPU's %.2f GiB are outside it)",
                 (double)free_b / 1073741824.0, (double)total_b / 1073741824.0);
      jmg_error_set(
          err, JMG_ENOMEM, NULL, "XLA_FFI_DeviceMemory_Allocate",
          "the call's workspace needs %zu bytes (%.2f GiB) more on GPU %d, "
          "which XLA's allocator refused%s: %s",
          bytes, (double)bytes / 1073741824.0, a->device, left, why);
      return rc;
    }
    *out = args.data;
    jmg_trace_alloc(bytes); /* what was taken, not what was refused */
    return 0;
  }
  int rc = JMG_CUDA_TRY(cudaSetDevice(a->device), NULL, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaMalloc(out, bytes), NULL, err);
  if (rc == 0) jmg_trace_alloc(bytes);
  return rc;
}

static void xla_free(void *p, void *ptr, size_t bytes) {
  xla_alloc_ctx *a = p;
  if (JMG_XLA_API_HAS(a->api, XLA_FFI_DeviceMemory_Free) &&
      a->api->XLA_FFI_DeviceMemory_Free != NULL) {
    XLA_FFI_DeviceMemory_Free_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_DeviceMemory_Free_Args_STRUCT_SIZE;
    args.ctx = a->ctx;
    args.size = bytes;
    args.data = ptr;
    XLA_FFI_Error *e = a->api->XLA_FFI_DeviceMemory_Free(&args);
    if (e != NULL) {
      jmg_error ignored; /* nothing to do about a failed free */
      jmg_ffi_consume_error(a->api, e, JMG_EINTERNAL,
                            "XLA_FFI_DeviceMemory_Free", &ignored);
    }
    return;
  }
  cudaSetDevice(a->device);
  cudaFree(ptr);
}

/* Reads the shard position and waits for the stream: after this, every
 * input of the call is complete (cuda_make_device_ctx relies on it). */
static int cuda_read_shard(XLA_FFI_CallFrame *frame, const void *buf,
                           int32_t *out, jmg_error *err) {
  cudaStream_t stream = NULL;
  int rc = get_stream(frame, &stream, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaMemcpyAsync(out, buf, sizeof *out, cudaMemcpyDeviceToHost, stream),
        NULL, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(stream), NULL, err);
  return rc;
}

static int cuda_make_device_ctx(XLA_FFI_CallFrame *frame, void **ctx,
                                jmg_error *err) {
  cuda_participant *p = calloc(1, sizeof *p);
  if (p == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                         "cannot allocate the participant's context");
  cudaStream_t stream = NULL;
  int rc = get_stream(frame, &stream, err);
  /* The GPU is the one holding A (argument 0 of every op). */
  struct cudaPointerAttributes attr;
  memset(&attr, 0, sizeof attr);
  const XLA_FFI_Buffer *a = frame->args.args[0];
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaPointerGetAttributes(&attr, a->data), NULL, err);
  if (rc == 0 && attr.type != cudaMemoryTypeDevice)
    rc = jmg_error_set(err, JMG_EINVAL, NULL, "cudaPointerGetAttributes",
                       "A is not in GPU memory");
  /* Everything XLA queued before this call must be done before the leader
   * reads this GPU's buffers from its own thread: cuda_read_shard waited for
   * this stream when the call was planned (ffi/plan.c reads the shard
   * before the device context is made), and nothing was queued on it since,
   * so no second wait here. */
  if (rc != 0) {
    free(p);
    return rc;
  }
  p->alloc.api = frame->api;
  p->alloc.ctx = frame->ctx;
  p->alloc.device = attr.device;
  p->dev.device = attr.device;
  p->dev.stream = stream;
  p->dev.alloc_ctx = &p->alloc;
  p->dev.alloc = xla_alloc;
  p->dev.free = xla_free;
  *ctx = &p->dev; /* dev is the first member: free_device_ctx frees p */
  return 0;
}

/* The end of this participant's call, on the thread XLA runs its device's
 * work on. A library may leave a non-sticky error in the CUDA runtime's
 * per-thread last-error state behind a call that returned success; XLA's
 * next kernel launch on this thread then fails ("There was an error before
 * calling cuModuleGetFunction (1): cudaErrorInvalidValue", seen after
 * cuSOLVERMp calls with one process per GPU:
 * docs/gpu-runs/2026-11-25-s11-h100x2-cusolvermp). Every
 * call of jaxmg's own is checked (and jmg_cuda_check clears what fails), so
 * what is pending here is a library's: cleared, and named under
 * JAXMG_TRACE. A sticky error (the context lost) is not cleared by this and
 * reaches XLA as before. */
static void cuda_free_device_ctx(void *ctx) {
  cudaError_t left = cudaGetLastError();
  if (left != cudaSuccess && jmg_trace_on())
    fprintf(stderr,
            "jaxmg trace: a library left %s (%s) pending in the CUDA "
            "runtime after a call that succeeded; cleared\n",
            cudaGetErrorName(left), cudaGetErrorString(left));
  free(ctx);
}

static int cuda_copy_local(void *ctx, void *dst, const void *src, size_t bytes,
                           jmg_error *err) {
  const jmg_cuda_device *d = ctx;
  cudaStream_t s = (cudaStream_t)d->stream;
  int rc = JMG_CUDA_TRY(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), NULL, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(s), NULL, err);
  return rc;
}

/* In order of preference: cuSOLVERDn where the group is one GPU (jaxlib's
 * own solver; cuSOLVERMg on one GPU ran well below JAX's speed,
 * bench/results/2026-11-23-h100x1-one-gpu); the gather to one GPU where a
 * group of several is small enough (engine/gather/thresholds.c); cuSOLVERMg
 * for several. JAXMG_ENGINE=cusolvermg
 * still picks cuSOLVERMg on one GPU, for comparison (docs/guides/engines.md).
 * The local model last: it takes what the leader engines refuse (a group
 * across nodes), or what JAXMG_ENGINE sends it; there cusolverdn-local (A
 * gathered onto rank 0 over NCCL, cuSOLVERDn there) below the one-GPU
 * crossover of engine/gather/thresholds.c, cuSOLVERMp above it. */
/* eig-mgpu (jaxmg's own multi-GPU syevd) comes before the gather engine but
 * prefers nothing unless JAXMG_SYEVD_MGPU=1 (engine/eig_mgpu/context.c). */
static const jmg_engine *const g_cuda_engines[] = {
    &jmg_cusolverdn_engine, &jmg_eig_mgpu_engine,         &jmg_gather_engine,
    &jmg_cusolvermg_engine, &jmg_cusolverdn_local_engine, &jmg_cusolvermp_engine,
    NULL};

static const jmg_ffi_platform g_cuda = {
    .name = "CUDA",
    .engines = g_cuda_engines,
    .mem = jmg_cuda_mem,
    .rendezvous = jmg_rendezvous_threads,
    .read_shard = cuda_read_shard,
    .make_device_ctx = cuda_make_device_ctx,
    .free_device_ctx = cuda_free_device_ctx,
    .copy_local = cuda_copy_local,
    .async = 0,
    .share = jmg_cuda_share,
    .comm = jmg_nccl_comm,
};

/* The handlers, one per op. */
JMG_FFI_EXPORT(jaxmg_potrs_cuda, &jmg_potrs_op, &g_cuda)
JMG_FFI_EXPORT(jaxmg_potri_cuda, &jmg_potri_op, &g_cuda)
JMG_FFI_EXPORT(jaxmg_syevd_cuda, &jmg_syevd_op, &g_cuda)
JMG_FFI_EXPORT(jaxmg_lu_solve_cuda, &jmg_lu_solve_op, &g_cuda)
JMG_FFI_EXPORT(jaxmg_gesvd_cuda, &jmg_gesvd_op, &g_cuda)
JMG_FFI_EXPORT(jaxmg_qr_cuda, &jmg_qr_op, &g_cuda)
JMG_FFI_EXPORT(jaxmg_sygvd_cuda, &jmg_sygvd_op, &g_cuda)

/* Which engine would run a call: asked by the Python layer before tracing. */
JMG_FFI_EXPORT_ENGINE_CHECK(jaxmg_engine_check_cuda, &g_cuda)
/* Which model an engine runs in (the local model's calls carry
 * communicator ids): asked by the Python layer of the engine chosen. */
JMG_FFI_EXPORT_ENGINE_MODEL(jaxmg_engine_model_cuda, &g_cuda)

/* NCCL and cuSOLVERMp, loaded at run time, for the Python layer (ctypes):
 * where to load them from (NULL: the soname; each path is fixed by the
 * first load, and jaxmg_cusolvermp_available loads NCCL too, so set both
 * paths first), whether cuSOLVERMp loads (1, or 0 and the reason, which
 * names the extra), and a new NCCL id for a group (0, or -1 and the
 * reason; len >= 128). */
#define JMG_CUDA_EXPORT __attribute__((visibility("default")))

JMG_CUDA_EXPORT int jaxmg_nccl_set_path(const char *path) {
  return jmg_nccl_set_path(path);
}

JMG_CUDA_EXPORT int jaxmg_cusolvermp_set_path(const char *path) {
  return jmg_cusolvermp_set_path(path);
}

JMG_CUDA_EXPORT int jaxmg_cusolvermp_available(char *why, size_t len) {
  return jmg_cusolvermp_available(why, len);
}

JMG_CUDA_EXPORT int jaxmg_comm_new_id(uint8_t *out, size_t len, char *err,
                                      size_t errlen) {
  return jmg_nccl_new_id(out, len, err, errlen);
}

/* SciPy's LAPACK pointers, as jaxmg_cpu_register_lapack takes them: this
 * library links its own copy of jaxmg_core, and so of the routine table
 * (engine/lapack/table.h), which the host tridiagonal eigensolver of the
 * GPU engines reads. */
JMG_CUDA_EXPORT int jaxmg_cuda_register_lapack(const char *name, void *fn) {
  return jmg_lapack_register(name, fn);
}
