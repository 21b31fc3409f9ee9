/* Sharing GPU buffers between the processes of one node: CUDA IPC.
 *
 * The participant exports, for each buffer, a CUDA IPC handle of the
 * allocation that holds it and the buffer's offset in it: XLA sub-allocates
 * its buffers from large blocks, and cudaIpcGetMemHandle wants the base of an
 * allocation, which the driver's cuMemGetAddressRange finds (reached through
 * the runtime's entry-point query). Its device is
 * named by PCI bus id, since device ordinals depend on each process's
 * CUDA_VISIBLE_DEVICES. The participant synchronized its XLA stream before it
 * joined (ffi/cuda_targets.c), so its inputs are complete.
 *
 * The leader opens each distinct handle once (several buffers usually share
 * one allocation), with lazy peer access, and gives the op a stream and an
 * allocator of its own on that device (cudaMalloc: the participant's XLA
 * allocator belongs to the other process). The op's last step waits for all
 * its work on every device (jmg_leader_finish), so the outputs are in the
 * participants' memory before the rendezvous publishes the status and the
 * participants return to XLA; the handles are closed after that. Buffers of
 * the leader's own process are used as they are (a process cannot open its
 * own IPC handles). */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cuda_check.h"
#include "engine/cuda_device.h"
#include "share/share.h"

/* cuMemGetAddressRange, from the driver through the runtime: linking libcuda
 * itself would make libjaxmg_cuda.so unloadable where no driver is installed
 * (build machines, CPU-only CI), which the Python layer tolerates only as
 * "no CUDA here". */
typedef CUresult (*mem_range_fn)(CUdeviceptr *base, size_t *size,
                                 CUdeviceptr ptr);

static int allocation_base(const char *op, uint64_t ptr, uint64_t *base,
                           jmg_error *err) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSuccess;
  int rc = JMG_CUDA_TRY(cudaGetDriverEntryPointByVersion(
                            "cuMemGetAddressRange", &fn, 12000,
                            cudaEnableDefault, &found),
                        op, err);
  if (rc == 0 && (fn == NULL || found != cudaDriverEntryPointSuccess))
    rc = jmg_error_set(err, JMG_ECUDA, op, "cudaGetDriverEntryPointByVersion",
                       "the driver has no cuMemGetAddressRange (query result "
                       "%d)",
                       (int)found);
  if (rc != 0) return rc;
  CUdeviceptr b = 0;
  size_t size = 0;
  CUresult r = ((mem_range_fn)fn)(&b, &size, (CUdeviceptr)ptr);
  if (r != CUDA_SUCCESS)
    return jmg_error_set(err, JMG_ECUDA, op, "cuMemGetAddressRange",
                         "CUresult %d for a buffer at %p", (int)r,
                         (void *)(uintptr_t)ptr);
  *base = (uint64_t)b;
  return 0;
}

/* ---- the participant ------------------------------------------------------*/

static int cuda_export(const char *op, jmg_share_post *post, void *device_ctx,
                       void **state, jmg_error *err) {
  const jmg_cuda_device *dev = device_ctx;
  *state = NULL; /* nothing to bring home: the leader writes in place */
  if (dev == NULL)
    return jmg_error_set(err, JMG_EINTERNAL, op, "CUDA IPC",
                         "the participant has no device context");
  int rc = JMG_CUDA_TRY(cudaSetDevice(dev->device), op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaDeviceGetPCIBusId(post->device, JMG_SHARE_DEVICE_LEN,
                                            dev->device),
                      op, err);
  for (int i = 0; rc == 0 && i < JMG_SHARE_NBUF; ++i) {
    jmg_share_buf *b = &post->buf[i];
    if (b->local == 0) continue;
    uint64_t base = 0;
    rc = allocation_base(op, b->local, &base, err);
    if (rc != 0) break;
    b->offset = b->local - base;
    cudaIpcMemHandle_t h;
    rc = JMG_CUDA_TRY(cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base), op,
                      err);
    if (rc != 0) {
      char why[JMG_ERROR_MSG_LEN];
      snprintf(why, sizeof why, "%s", err->msg);
      jmg_error_set(err, JMG_ECUDA, op, "cudaIpcGetMemHandle",
                    "XLA's buffer cannot be shared with the leader process "
                    "(%s); XLA's allocator must use cuMemAlloc-style memory "
                    "(the default BFC allocator does; a cudaMallocAsync pool "
                    "does not)",
                    why);
      break;
    }
    _Static_assert(sizeof h == JMG_SHARE_HANDLE_LEN, "IPC handle size");
    memcpy(b->handle, &h, sizeof h);
  }
  if (rc == 0) post->exported = 1;
  return rc;
}

static int cuda_finish(const char *op, const jmg_share_post *post, void *state,
                       int ok, jmg_error *err) {
  (void)op, (void)post, (void)state, (void)ok, (void)err;
  return 0;
}

/* ---- the leader -----------------------------------------------------------*/

typedef struct opened {
  int device;
  cudaStream_t stream;
  jmg_cuda_device dev;
  int nmapped;
  void *mapped[JMG_SHARE_NBUF];
  unsigned char handles[JMG_SHARE_NBUF][JMG_SHARE_HANDLE_LEN];
} opened;

static int leader_alloc(void *ctx, size_t bytes, void **out, jmg_error *err) {
  const opened *o = ctx;
  int rc = JMG_CUDA_TRY(cudaSetDevice(o->device), NULL, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaMalloc(out, bytes), NULL, err);
  if (rc != 0 && err->code == JMG_ECUDA) {
    char why[JMG_ERROR_MSG_LEN];
    snprintf(why, sizeof why, "%s", err->msg);
    jmg_error_set(err, JMG_ENOMEM, NULL, "cudaMalloc",
                  "%zu bytes of workspace on GPU %d, which another process's "
                  "XLA holds (%s): lower XLA_PYTHON_CLIENT_MEM_FRACTION in "
                  "MPMD jobs",
                  bytes, o->device, why);
  }
  return rc;
}

static void leader_free(void *ctx, void *ptr, size_t bytes) {
  const opened *o = ctx;
  (void)bytes;
  if (cudaSetDevice(o->device) == cudaSuccess) cudaFree(ptr);
}

static int cuda_close(const char *op, void *state, jmg_error *err) {
  opened *o = state;
  int rc = JMG_CUDA_TRY(cudaSetDevice(o->device), op, err);
  if (rc == 0 && o->stream != NULL)
    rc = JMG_CUDA_TRY(cudaStreamSynchronize(o->stream), op, err);
  if (o->stream != NULL) {
    jmg_error e;
    int src = JMG_CUDA_TRY(cudaStreamDestroy(o->stream), op, &e);
    if (src != 0 && rc == 0) {
      rc = src;
      jmg_error_copy(err, &e);
    }
  }
  for (int i = 0; i < o->nmapped; ++i) {
    jmg_error e;
    int crc = JMG_CUDA_TRY(cudaIpcCloseMemHandle(o->mapped[i]), op, &e);
    if (crc != 0 && rc == 0) {
      rc = crc;
      jmg_error_copy(err, &e);
    }
  }
  free(o);
  return rc;
}

/* The opened allocation for handle h: opens it the first time. */
static int open_handle(opened *o, const unsigned char *h, const char *op,
                       void **out, jmg_error *err) {
  for (int i = 0; i < o->nmapped; ++i)
    if (memcmp(o->handles[i], h, JMG_SHARE_HANDLE_LEN) == 0) {
      *out = o->mapped[i];
      return 0;
    }
  cudaIpcMemHandle_t handle;
  memcpy(&handle, h, sizeof handle);
  void *p = NULL;
  int rc = JMG_CUDA_TRY(
      cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess), op,
      err);
  if (rc != 0) return rc;
  memcpy(o->handles[o->nmapped], h, JMG_SHARE_HANDLE_LEN);
  o->mapped[o->nmapped++] = p;
  *out = p;
  return 0;
}

static int cuda_import(const char *op, const jmg_share_post *post,
                       void *ptrs[JMG_SHARE_NBUF], void **device_ctx,
                       void **state, jmg_error *err) {
  *state = NULL;
  if (post->pid == (int64_t)getpid()) { /* our own process: as they are */
    for (int i = 0; i < JMG_SHARE_NBUF; ++i)
      ptrs[i] = (void *)(uintptr_t)post->buf[i].local;
    *device_ctx = (void *)(uintptr_t)post->local_device_ctx;
    return 0;
  }
  opened *o = calloc(1, sizeof *o);
  if (o == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate the record of opened handles");
  char bus[JMG_SHARE_DEVICE_LEN];
  memcpy(bus, post->device, sizeof bus);
  bus[sizeof bus - 1] = '\0';
  int rc = JMG_CUDA_TRY(cudaDeviceGetByPCIBusId(&o->device, bus), op, err);
  if (rc != 0) {
    jmg_error_set(err, JMG_EINVAL, op, "cudaDeviceGetByPCIBusId",
                  "GPU %s of process %lld is not visible to the leader "
                  "process: start every process with all the node's GPUs "
                  "visible (CUDA_VISIBLE_DEVICES unset) and pick each one's "
                  "GPU with jax.distributed.initialize(local_device_ids=[i])",
                  bus, (long long)post->pid);
    free(o);
    return rc;
  }
  rc = JMG_CUDA_TRY(cudaSetDevice(o->device), op, err);
  for (int i = 0; rc == 0 && i < JMG_SHARE_NBUF; ++i) {
    const jmg_share_buf *b = &post->buf[i];
    ptrs[i] = NULL;
    if (b->local == 0) continue;
    void *base = NULL;
    rc = open_handle(o, b->handle, op, &base, err);
    if (rc == 0) ptrs[i] = (char *)base + b->offset;
  }
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaStreamCreateWithFlags(&o->stream, cudaStreamNonBlocking), op, err);
  if (rc != 0) {
    jmg_error ignored;
    cuda_close(op, o, &ignored);
    return rc;
  }
  o->dev.device = o->device;
  o->dev.stream = o->stream;
  o->dev.alloc_ctx = o;
  o->dev.alloc = leader_alloc;
  o->dev.free = leader_free;
  *device_ctx = &o->dev;
  *state = o;
  return 0;
}

static const jmg_share g_cuda = {
    "cuda",
    cuda_export,
    cuda_finish,
    cuda_import,
    cuda_close,
};

const jmg_share *jmg_cuda_share(void) { return &g_cuda; }
