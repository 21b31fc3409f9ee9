/* Sharing GPU buffers between the processes of one node.
 *
 * The participant exports, for each buffer, the allocation that holds it and
 * the buffer's offset in it (XLA sub-allocates its buffers from large blocks;
 * the driver's cuMemGetAddressRange finds the block). How depends on how the
 * block was allocated, which the driver tells (cuPointerGetAttribute):
 *  - the virtual-memory API (cuMemCreate, what XLA's allocator uses since
 *    jax 0.11): the allocation is exported as a POSIX file descriptor
 *    (cuMemExportToShareableHandle), and the descriptors travel to the leader
 *    through a Unix socket (share/fd_pass.h); the leader imports each one,
 *    reserves an address range and maps it there, readable and writable by
 *    every GPU that can reach the owner's;
 *  - cudaMalloc-style memory (older XLA, the "platform" allocator): a legacy
 *    CUDA IPC handle (cudaIpcGetMemHandle), opened with cudaIpcOpenMemHandle.
 * Memory that allows neither (a cudaMallocAsync pool) is refused with the
 * reason. Each region is exported once however many buffers it holds. The
 * device is named by PCI bus id, since device ordinals depend on each
 * process's CUDA_VISIBLE_DEVICES. The participant synchronized its XLA stream
 * before it joined (ffi/cuda_targets.c), so its inputs are complete.
 *
 * The leader gives the op a stream and an allocator of its own on each
 * participant's device (cudaMalloc: the participant's XLA allocator belongs
 * to the other process). The op's last step (the leader's finish,
 * exec/leader.c) waits for all its work on every device, so the outputs are
 * in the participants' memory before the rendezvous publishes the status and
 * the participants return to XLA; the mappings are undone after that. Buffers of the leader's own
 * process are used as they are. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/check.h"
#include "cuda/device.h"
#include "share/cuda_driver.h"
#include "share/fd_pass.h"
#include "share/share.h"

_Static_assert(JMG_FD_PASS_NAME_LEN <= JMG_SHARE_OFFER_LEN,
               "a descriptor offer's name must fit in the post");

/* jmg_share_buf.kind */
enum { KIND_LEGACY_IPC = 1, KIND_VMM_FD = 2 };

/* How long the leader waits for a participant to hand over its descriptors:
 * they are offered before the participant joins, so only a dead participant
 * makes the leader wait. */
#define TAKE_TIMEOUT_S 10.0

/* ---- the participant ------------------------------------------------------*/

typedef struct exported {
  int nregions;
  uint64_t base[JMG_SHARE_NBUF];
  CUmemGenericAllocationHandle handle[JMG_SHARE_NBUF];
  int fd[JMG_SHARE_NBUF];
  jmg_fd_offer *offer;
} exported;

static int cuda_finish(const char *op, const jmg_share_post *post, void *state,
                       int ok, jmg_error *err) {
  (void)post, (void)ok; /* the leader wrote the outputs in place */
  exported *x = state;
  jmg_fd_offer_close(x->offer);
  const jmg_cu_driver *d = NULL;
  int rc = x->nregions > 0 ? jmg_cu_driver_get(op, &d, err) : 0;
  for (int r = 0; r < x->nregions; ++r) {
    if (x->fd[r] >= 0) close(x->fd[r]);
    if (d == NULL || x->handle[r] == 0) continue;
    jmg_error e;
    int rrc =
        jmg_cu_check(d, d->mem_release(x->handle[r]), op, "cuMemRelease", &e);
    if (rrc != 0 && rc == 0) {
      rc = rrc;
      jmg_error_copy(err, &e);
    }
  }
  free(x);
  return rc;
}

/* Exports the region at base (holding ptr) as a descriptor, once. */
static int export_region(const jmg_cu_driver *d, exported *x, uint64_t base,
                         uint64_t ptr, const char *op, int *index,
                         jmg_error *err) {
  for (int r = 0; r < x->nregions; ++r)
    if (x->base[r] == base) {
      *index = r;
      return 0;
    }
  const int r = x->nregions;
  x->base[r] = base;
  x->fd[r] = -1;
  x->handle[r] = 0;
  x->nregions++;
  int rc = jmg_cu_check(
      d, d->mem_retain_allocation_handle(&x->handle[r], (void *)(uintptr_t)ptr),
      op, "cuMemRetainAllocationHandle", err);
  if (rc == 0)
    rc = jmg_cu_check(d,
                      d->mem_export_to_shareable_handle(
                          &x->fd[r], x->handle[r],
                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                      op, "cuMemExportToShareableHandle", err);
  *index = r;
  return rc;
}

static int export_buf(const jmg_cu_driver *d, exported *x, jmg_share_buf *b,
                      const char *op, jmg_error *err) {
  const CUdeviceptr ptr = (CUdeviceptr)b->local;
  CUdeviceptr base = 0;
  size_t size = 0;
  int legacy = 0;
  unsigned long long types = 0;
  int rc = jmg_cu_check(d, d->mem_get_address_range(&base, &size, ptr), op,
                        "cuMemGetAddressRange", err);
  if (rc == 0 && (uint64_t)(ptr - base) + b->bytes > size)
    rc = jmg_error_set(err, JMG_EINTERNAL, op, "cuMemGetAddressRange",
                       "a buffer of %llu bytes at offset %llu overruns its "
                       "allocation of %zu bytes",
                       (unsigned long long)b->bytes,
                       (unsigned long long)(ptr - base), size);
  if (rc == 0)
    rc = jmg_cu_check(
        d,
        d->pointer_get_attribute(
            &legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, ptr),
        op, "cuPointerGetAttribute", err);
  if (rc == 0 && !legacy)
    rc = jmg_cu_check(
        d,
        d->pointer_get_attribute(
            &types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, ptr),
        op, "cuPointerGetAttribute", err);
  if (rc != 0) return rc;
  b->offset = (uint64_t)(ptr - base);
  b->region_bytes = (uint64_t)size;
  if (legacy) {
    cudaIpcMemHandle_t h;
    _Static_assert(sizeof h == JMG_SHARE_HANDLE_LEN, "IPC handle size");
    rc =
        JMG_CUDA_TRY(cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base), op, err);
    if (rc == 0) {
      memcpy(b->handle, &h, sizeof h);
      b->kind = KIND_LEGACY_IPC;
    }
    return rc;
  }
  if (!(types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
    return jmg_error_set(
        err, JMG_EUNSUPPORTED, op, "cuPointerGetAttribute",
        "XLA's buffer cannot be shared with the leader process: its memory "
        "allows neither CUDA IPC nor export as a file descriptor (handle "
        "types %#llx), as a cudaMallocAsync pool "
        "(XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async) gives; use XLA's default "
        "allocator in MPMD jobs",
        types);
  b->kind = KIND_VMM_FD;
  return export_region(d, x, (uint64_t)base, (uint64_t)ptr, op, &b->region,
                       err);
}

static int cuda_export(const char *op, jmg_share_post *post, void *device_ctx,
                       void **state, jmg_error *err) {
  const jmg_cuda_device *dev = device_ctx;
  *state = NULL;
  if (dev == NULL)
    return jmg_error_set(err, JMG_EINTERNAL, op, "CUDA IPC",
                         "the participant has no device context");
  exported *x = calloc(1, sizeof *x);
  if (x == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate the record of exported buffers");
  const jmg_cu_driver *d = NULL;
  int rc = jmg_cu_driver_get(op, &d, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaSetDevice(dev->device), op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaDeviceGetPCIBusId(post->device, JMG_SHARE_DEVICE_LEN, dev->device),
        op, err);
  for (int i = 0; rc == 0 && i < JMG_SHARE_NBUF; ++i)
    if (post->buf[i].local != 0) rc = export_buf(d, x, &post->buf[i], op, err);
  if (rc == 0 && x->nregions > 0)
    rc = jmg_fd_offer_open(op, x->fd, x->nregions, post->offer, &x->offer, err);
  if (rc != 0) {
    jmg_error ignored;
    cuda_finish(op, post, x, 0, &ignored);
    return rc;
  }
  post->exported = 1;
  *state = x;
  return 0;
}

/* ---- the leader -----------------------------------------------------------*/

/* A region of another process mapped here: by the virtual-memory API (handle
 * != 0) or by legacy IPC (legacy: the handle it was opened from). */
typedef struct mapping {
  void *base;
  size_t size;
  CUmemGenericAllocationHandle handle;
  int legacy;
  unsigned char ipc[JMG_SHARE_HANDLE_LEN];
} mapping;

typedef struct opened {
  int device;
  cudaStream_t stream;
  jmg_cuda_device dev;
  int nmapped;
  mapping map[JMG_SHARE_NBUF];
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

/* Undoes one mapping; the first error is kept in err. */
static void unmap(const jmg_cu_driver *d, const mapping *m, const char *op,
                  int *rc, jmg_error *err) {
  jmg_error e;
  int r = 0;
  if (m->legacy) {
    r = JMG_CUDA_TRY(cudaIpcCloseMemHandle(m->base), op, &e);
  } else if (m->handle != 0) {
    const CUdeviceptr va = (CUdeviceptr)(uintptr_t)m->base;
    if (va != 0) {
      r = jmg_cu_check(d, d->mem_unmap(va, m->size), op, "cuMemUnmap", &e);
      int f = jmg_cu_check(d, d->mem_address_free(va, m->size), op,
                           "cuMemAddressFree", r == 0 ? &e : &(jmg_error){0});
      if (r == 0) r = f;
    }
    int rel = jmg_cu_check(d, d->mem_release(m->handle), op, "cuMemRelease",
                           r == 0 ? &e : &(jmg_error){0});
    if (r == 0) r = rel;
  }
  if (r != 0 && *rc == 0) {
    *rc = r;
    jmg_error_copy(err, &e);
  }
}

static int cuda_close(const char *op, void *state, jmg_error *err) {
  opened *o = state;
  const jmg_cu_driver *d = NULL;
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
  if (o->nmapped > 0) {
    jmg_error e;
    int drc = jmg_cu_driver_get(op, &d, &e);
    if (drc != 0 && rc == 0) {
      rc = drc;
      jmg_error_copy(err, &e);
    }
  }
  for (int i = 0; d != NULL && i < o->nmapped; ++i)
    unmap(d, &o->map[i], op, &rc, err);
  free(o);
  return rc;
}

/* Lets every GPU that can reach the owner's (device) read and write [va,
 * va + size): the layout's peer copies and cuSOLVERMg's own run there. */
static int grant_access(const jmg_cu_driver *d, CUdeviceptr va, size_t size,
                        int device, const char *op, jmg_error *err) {
  int count = 0;
  int rc = JMG_CUDA_TRY(cudaGetDeviceCount(&count), op, err);
  CUmemAccessDesc desc[64];
  size_t n = 0;
  for (int g = 0; rc == 0 && g < count && n < 64; ++g) {
    int can = g == device;
    if (!can)
      rc = JMG_CUDA_TRY(cudaDeviceCanAccessPeer(&can, g, device), op, err);
    if (rc != 0 || !can) continue;
    memset(&desc[n], 0, sizeof desc[n]);
    desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc[n].location.id = g;
    desc[n].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ++n;
  }
  if (rc == 0)
    rc = jmg_cu_check(d, d->mem_set_access(va, size, desc, n), op,
                      "cuMemSetAccess", err);
  return rc;
}

/* Maps the descriptor fd (consumed) of a region of size bytes. */
static int map_fd(const jmg_cu_driver *d, opened *o, int fd, size_t size,
                  const char *op, void **out, jmg_error *err) {
  mapping *m = &o->map[o->nmapped];
  memset(m, 0, sizeof *m);
  int rc = jmg_cu_check(d,
                        d->mem_import_from_shareable_handle(
                            &m->handle, (void *)(uintptr_t)fd,
                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                        op, "cuMemImportFromShareableHandle", err);
  close(fd);
  if (rc != 0) return rc;
  o->nmapped++; /* from here on, close undoes what was done */
  m->size = size;
  CUdeviceptr va = 0;
  rc = jmg_cu_check(d, d->mem_address_reserve(&va, size, 0, 0, 0), op,
                    "cuMemAddressReserve", err);
  if (rc != 0) return rc;
  m->base = (void *)(uintptr_t)va;
  rc = jmg_cu_check(d, d->mem_map(va, size, 0, m->handle, 0), op, "cuMemMap",
                    err);
  if (rc != 0) {
    /* Not mapped: unmap would fail; free the range and keep the handle. */
    d->mem_address_free(va, size);
    m->base = NULL;
    return rc;
  }
  rc = grant_access(d, va, size, o->device, op, err);
  *out = m->base;
  return rc;
}

/* The mapping of legacy IPC handle h: opens it the first time. */
static int open_legacy(opened *o, const unsigned char *h, const char *op,
                       void **out, jmg_error *err) {
  for (int i = 0; i < o->nmapped; ++i)
    if (o->map[i].legacy &&
        memcmp(o->map[i].ipc, h, JMG_SHARE_HANDLE_LEN) == 0) {
      *out = o->map[i].base;
      return 0;
    }
  cudaIpcMemHandle_t handle;
  memcpy(&handle, h, sizeof handle);
  void *p = NULL;
  int rc = JMG_CUDA_TRY(
      cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess), op,
      err);
  if (rc != 0) return rc;
  mapping *m = &o->map[o->nmapped++];
  memset(m, 0, sizeof *m);
  m->legacy = 1;
  m->base = p;
  memcpy(m->ipc, h, JMG_SHARE_HANDLE_LEN);
  *out = p;
  return 0;
}

/* Takes the post's descriptors and maps every region they export. */
static int map_regions(opened *o, const jmg_share_post *post, const char *op,
                       void *bases[JMG_SHARE_NBUF], jmg_error *err) {
  int nregions = 0;
  size_t size[JMG_SHARE_NBUF] = {0};
  for (int i = 0; i < JMG_SHARE_NBUF; ++i) {
    const jmg_share_buf *b = &post->buf[i];
    if (b->local == 0 || b->kind != KIND_VMM_FD) continue;
    if (b->region < 0 || b->region >= JMG_SHARE_NBUF)
      return jmg_error_set(err, JMG_EINTERNAL, op, "rendezvous",
                           "buffer %d names region %d", i, (int)b->region);
    if (b->region + 1 > nregions) nregions = b->region + 1;
    size[b->region] = (size_t)b->region_bytes;
  }
  if (nregions == 0) return 0;
  const jmg_cu_driver *d = NULL;
  int fds[JMG_SHARE_NBUF];
  char name[JMG_SHARE_OFFER_LEN];
  memcpy(name, post->offer, sizeof name);
  name[sizeof name - 1] = '\0';
  int rc = jmg_cu_driver_get(op, &d, err);
  if (rc == 0)
    rc = jmg_fd_take(op, name, (pid_t)post->pid, fds, nregions, TAKE_TIMEOUT_S,
                     err);
  if (rc != 0) return rc;
  int r = 0;
  for (; rc == 0 && r < nregions; ++r)
    rc = map_fd(d, o, fds[r], size[r], op, &bases[r], err);
  for (; r < nregions; ++r) close(fds[r]); /* not reached after a failure */
  return rc;
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
  void *regions[JMG_SHARE_NBUF] = {NULL};
  rc = JMG_CUDA_TRY(cudaSetDevice(o->device), op, err);
  if (rc == 0) rc = map_regions(o, post, op, regions, err);
  for (int i = 0; rc == 0 && i < JMG_SHARE_NBUF; ++i) {
    const jmg_share_buf *b = &post->buf[i];
    void *base = NULL;
    ptrs[i] = NULL;
    if (b->local == 0) continue;
    if (b->kind == KIND_VMM_FD)
      base = regions[b->region];
    else if (b->kind == KIND_LEGACY_IPC)
      rc = open_legacy(o, b->handle, op, &base, err);
    else
      rc = jmg_error_set(err, JMG_EINTERNAL, op, "rendezvous",
                         "buffer %d of process %lld was exported as kind %d", i,
                         (long long)post->pid, (int)b->kind);
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
    "cuda", cuda_export, cuda_finish, cuda_import, cuda_close,
};

const jmg_share *jmg_cuda_share(void) { return &g_cuda; }
