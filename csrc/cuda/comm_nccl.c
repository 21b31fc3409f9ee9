/* The CUDA platform's communicator (comm/comm.h) over NCCL, loaded at run
 * time with dlopen so that libjaxmg_cuda.so neither links nor needs libnccl
 * until a local-model call (cuSOLVERMp) runs.
 *
 * Loading: once per process (pthread_once), from the path the Python layer
 * set (jaxmg_nccl_set_path: the nvidia-nccl wheel's library, the one JAX
 * and libcusolverMp use) or else by the soname libnccl.so.2, RTLD_GLOBAL so
 * that libcusolverMp, loaded after it, binds to the same copy. Every function
 * is looked up into one table, typed from the toolkit's nccl.h (__typeof__
 * of the declaration, which references no symbol). A failed load is
 * remembered with its reason.
 *
 * Communicators: cached by (id, rank) in a list under a mutex. Ranks of one
 * process open their ends concurrently from different threads, and
 * ncclCommInitRank blocks until every rank has joined, so the mutex is NOT
 * held across it: the entry is marked "opening", the lock dropped, and a
 * second opener of the same (id, rank) waits on a condition variable. Each
 * comm keeps a device int for max_int, on its GPU.
 *
 * At process exit: the comms are aborted (ncclCommAbort), not destroyed,
 * and only where their GPU's primary context is still active. Why:
 * - ncclCommDestroy flushes outstanding work and may wait on peers, which at
 *   exit may be gone or exiting themselves: a hang at exit is worse than a
 *   leak. ncclCommAbort frees the communicator's resources (proxy threads,
 *   sockets, shared memory segments, device buffers) without waiting.
 * - CUDA may already be torn down: XLA's client releases the primary context
 *   during Python's finalization, before C atexit handlers run. Calling NCCL
 *   (which calls CUDA) on a destroyed context can crash. So the handler asks
 *   the driver (cuDevicePrimaryCtxGetState, looked up when the first comm is
 *   opened, through the runtime, so no link to libcuda) whether the context
 *   is active and skips the comm otherwise: its device memory went with the
 *   context, and the OS reclaims the rest.
 * - The handler is registered after libnccl was loaded, so it runs before
 *   libnccl's own destructors; libnccl is never dlclose'd.
 * - The device int is not freed at exit (cudaFree needs the runtime, which
 *   may be unloading); it goes with the context. */
#define _POSIX_C_SOURCE 200809L
#include "cuda/comm_nccl.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "common/runtime_lib.h"
#include "cuda/check.h"
#include "cuda/device.h"

_Static_assert(sizeof(ncclUniqueId) <= JMG_COMM_ID_MAX,
               "an NCCL unique id must fit JMG_COMM_ID_MAX");

/* ---- the library ---------------------------------------------------- */

#define NCCL_SONAME "libnccl.so.2"

typedef struct nccl_api {
  __typeof__(ncclGetUniqueId) *get_unique_id;
  __typeof__(ncclCommInitRank) *comm_init_rank;
  __typeof__(ncclCommAbort) *comm_abort;
  __typeof__(ncclAllReduce) *all_reduce;
  __typeof__(ncclBroadcast) *broadcast;
  __typeof__(ncclGroupStart) *group_start;
  __typeof__(ncclGroupEnd) *group_end;
  __typeof__(ncclSend) *send;
  __typeof__(ncclRecv) *recv;
  __typeof__(ncclGetErrorString) *get_error_string;
  __typeof__(ncclGetLastError) *get_last_error;
  __typeof__(ncclGetVersion) *get_version;
} nccl_api;

static jmg_runtime_lib g_lib = JMG_RUNTIME_LIB_INIT(NCCL_SONAME);
static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
static nccl_api g_nccl;
static int g_loaded; /* 1 after a successful load */
static char g_why[JMG_RUNTIME_LIB_PATH_MAX + 1024]; /* a failed load's reason */

int jmg_nccl_set_path(const char *path) {
  return jmg_runtime_lib_set_path(&g_lib, path);
}

#define NCCL_SYM(field, name)                                               \
  do {                                                                      \
    if (missing == NULL && jmg_runtime_lib_lookup(lib, name, &g_nccl.field, \
                                                  sizeof g_nccl.field) != 0) \
      missing = name;                                                       \
  } while (0)

static void load_once(void) {
  char path[JMG_RUNTIME_LIB_PATH_MAX], why[512];
  void *lib = jmg_runtime_lib_open(&g_lib, path, sizeof path, why, sizeof why);
  if (lib == NULL) {
    snprintf(g_why, sizeof g_why, "cannot load NCCL (%s): %s", path, why);
    return;
  }
  const char *missing = NULL;
  NCCL_SYM(get_unique_id, "ncclGetUniqueId");
  NCCL_SYM(comm_init_rank, "ncclCommInitRank");
  NCCL_SYM(comm_abort, "ncclCommAbort");
  NCCL_SYM(all_reduce, "ncclAllReduce");
  NCCL_SYM(broadcast, "ncclBroadcast");
  NCCL_SYM(group_start, "ncclGroupStart");
  NCCL_SYM(group_end, "ncclGroupEnd");
  NCCL_SYM(send, "ncclSend");
  NCCL_SYM(recv, "ncclRecv");
  NCCL_SYM(get_error_string, "ncclGetErrorString");
  NCCL_SYM(get_version, "ncclGetVersion");
  /* Optional (NCCL >= 2.13): the last error's details, for messages. */
  if (jmg_runtime_lib_lookup(lib, "ncclGetLastError", &g_nccl.get_last_error,
                             sizeof g_nccl.get_last_error) != 0)
    g_nccl.get_last_error = NULL;
  if (missing != NULL) {
    /* The library stays loaded (harmless); nothing of it is used. */
    snprintf(g_why, sizeof g_why, "NCCL (%s) has no %s: too old a libnccl",
             path, missing);
    return;
  }
  g_loaded = 1;
}

int jmg_nccl_load(const char *op, jmg_error *err) {
  pthread_once(&g_load_once, load_once);
  if (!g_loaded)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "dlopen", "%s", g_why);
  return 0;
}

/* 0, or err naming op, the NCCL call and NCCL's own words. */
static int nccl_check(ncclResult_t r, const char *op, const char *call,
                      jmg_error *err) {
  if (r == ncclSuccess) return 0;
  const char *last = g_nccl.get_last_error ? g_nccl.get_last_error(NULL) : "";
  return jmg_error_set(err, JMG_EINTERNAL, op, call, "NCCL error %d: %s%s%s",
                       (int)r, g_nccl.get_error_string(r),
                       last && last[0] ? ": " : "", last ? last : "");
}

#define NCCL_TRY(call, name, op, err) nccl_check((call), (op), (name), (err))

/* ---- communicators --------------------------------------------------- */

enum { COMM_OPENING, COMM_READY };

struct jmg_comm {
  uint8_t id[sizeof(ncclUniqueId)];
  int rank, ranks, device;
  int state;
  ncclComm_t nc;
  int *dev_int; /* max_int's buffer, on device */
  struct jmg_comm *next;
};

static pthread_mutex_t g_comms_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_comms_cv = PTHREAD_COND_INITIALIZER;
static struct jmg_comm *g_comms;

/* The driver's primary context state, for the exit handler. */
typedef CUresult (*primary_ctx_state_fn)(CUdevice, unsigned int *, int *);
static primary_ctx_state_fn g_ctx_state;
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

static void abort_comms_at_exit(void) {
  /* No lock: other threads may hold it forever at exit. Entries are never
   * freed, so the list can be walked. */
  for (struct jmg_comm *c = g_comms; c != NULL; c = c->next) {
    if (c->state != COMM_READY || c->nc == NULL) continue;
    unsigned int flags = 0;
    int active = 0;
    if (g_ctx_state == NULL ||
        g_ctx_state((CUdevice)c->device, &flags, &active) != CUDA_SUCCESS ||
        !active)
      continue;
    g_nccl.comm_abort(c->nc);
    c->nc = NULL;
  }
}

static void register_exit_handler(void) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSuccess;
  if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn,
                                       12000, cudaEnableDefault,
                                       &found) == cudaSuccess &&
      found == cudaDriverEntryPointSuccess && fn != NULL)
    memcpy(&g_ctx_state, &fn, sizeof g_ctx_state);
  /* Without the entry point the handler skips every comm (it cannot tell
   * whether CUDA is still there): the OS reclaims them. */
  atexit(abort_comms_at_exit);
}

static struct jmg_comm *find_locked(const void *id, int rank) {
  for (struct jmg_comm *c = g_comms; c != NULL; c = c->next)
    if (c->rank == rank && memcmp(c->id, id, sizeof c->id) == 0) return c;
  return NULL;
}

static void unlink_locked(struct jmg_comm *dead) {
  for (struct jmg_comm **p = &g_comms; *p != NULL; p = &(*p)->next)
    if (*p == dead) {
      *p = dead->next;
      return;
    }
}

/* ncclCommInitRank and the device int, on device, the lock not held. */
static int open_new(struct jmg_comm *c, const char *op, jmg_error *err) {
  int saved = -1;
  int rc = JMG_CUDA_TRY(cudaGetDevice(&saved), op, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaSetDevice(c->device), op, err);
  ncclUniqueId uid;
  memcpy(&uid, c->id, sizeof uid);
  if (rc == 0)
    rc = NCCL_TRY(g_nccl.comm_init_rank(&c->nc, c->ranks, uid, c->rank),
                  "ncclCommInitRank", op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMalloc((void **)&c->dev_int, sizeof(int)), op, err);
  if (rc != 0 && c->nc != NULL) {
    g_nccl.comm_abort(c->nc);
    c->nc = NULL;
  }
  if (saved >= 0) cudaSetDevice(saved);
  return rc;
}

static int nccl_open(const void *id, int rank, int ranks, void *device_ctx,
                     jmg_comm **out, const char *op, jmg_error *err) {
  *out = NULL;
  int rc = jmg_nccl_load(op, err);
  if (rc != 0) return rc;
  const jmg_cuda_device *dev = device_ctx;
  if (dev == NULL)
    return jmg_error_set(err, JMG_EINVAL, op, "ncclCommInitRank",
                         "no device for rank %d", rank);
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return jmg_error_set(err, JMG_EINVAL, op, "ncclCommInitRank",
                         "rank %d of %d ranks", rank, ranks);
  pthread_mutex_lock(&g_comms_mu);
  struct jmg_comm *c;
  while ((c = find_locked(id, rank)) != NULL && c->state == COMM_OPENING)
    pthread_cond_wait(&g_comms_cv, &g_comms_mu);
  if (c != NULL) {
    pthread_mutex_unlock(&g_comms_mu);
    if (c->ranks != ranks || c->device != dev->device)
      return jmg_error_set(err, JMG_EINVAL, op, "ncclCommInitRank",
                           "the communicator of this id and rank %d was "
                           "opened for %d ranks on GPU %d, not %d ranks on "
                           "GPU %d",
                           rank, c->ranks, c->device, ranks, dev->device);
    *out = c;
    return 0;
  }
  c = calloc(1, sizeof *c);
  if (c == NULL) {
    pthread_mutex_unlock(&g_comms_mu);
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate a communicator");
  }
  memcpy(c->id, id, sizeof c->id);
  c->rank = rank;
  c->ranks = ranks;
  c->device = dev->device;
  c->state = COMM_OPENING;
  c->next = g_comms;
  g_comms = c;
  pthread_mutex_unlock(&g_comms_mu);

  rc = open_new(c, op, err);

  pthread_mutex_lock(&g_comms_mu);
  if (rc == 0)
    c->state = COMM_READY;
  else
    unlink_locked(c); /* a later call may try again with a new id */
  pthread_cond_broadcast(&g_comms_cv);
  pthread_mutex_unlock(&g_comms_mu);
  if (rc != 0) {
    free(c);
    return rc;
  }
  pthread_once(&g_exit_once, register_exit_handler);
  *out = c;
  return 0;
}

static int nccl_make_id(void *id, const char *op, jmg_error *err) {
  int rc = jmg_nccl_load(op, err);
  if (rc != 0) return rc;
  ncclUniqueId uid;
  memset(&uid, 0, sizeof uid);
  rc = NCCL_TRY(g_nccl.get_unique_id(&uid), "ncclGetUniqueId", op, err);
  if (rc == 0) memcpy(id, &uid, sizeof uid);
  return rc;
}

static void *nccl_native(jmg_comm *c) { return c->nc; }

static cudaStream_t stream_of(void *device_ctx) {
  return (cudaStream_t)((const jmg_cuda_device *)device_ctx)->stream;
}

static int nccl_max_int(jmg_comm *c, int *value, void *device_ctx,
                        const char *op, jmg_error *err) {
  cudaStream_t s = stream_of(device_ctx);
  int host = *value;
  int rc = JMG_CUDA_TRY(cudaMemcpyAsync(c->dev_int, &host, sizeof host,
                                        cudaMemcpyHostToDevice, s),
                        op, err);
  if (rc == 0)
    rc = NCCL_TRY(g_nccl.all_reduce(c->dev_int, c->dev_int, 1, ncclInt32,
                                    ncclMax, c->nc, s),
                  "ncclAllReduce", op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(&host, c->dev_int, sizeof host,
                                      cudaMemcpyDeviceToHost, s),
                      op, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(s), op, err);
  if (rc == 0) *value = host;
  return rc;
}

static int nccl_bcast(jmg_comm *c, void *buf, size_t bytes, int root,
                      void *device_ctx, const char *op, jmg_error *err) {
  if (bytes == 0) return 0;
  return NCCL_TRY(g_nccl.broadcast(buf, buf, bytes, ncclUint8, root, c->nc,
                                   stream_of(device_ctx)),
                  "ncclBroadcast", op, err);
}

static int nccl_group_begin(const char *op, jmg_error *err) {
  int rc = jmg_nccl_load(op, err);
  if (rc != 0) return rc;
  return NCCL_TRY(g_nccl.group_start(), "ncclGroupStart", op, err);
}

static int nccl_group_end(const char *op, jmg_error *err) {
  int rc = jmg_nccl_load(op, err);
  if (rc != 0) return rc;
  return NCCL_TRY(g_nccl.group_end(), "ncclGroupEnd", op, err);
}

static int nccl_send(jmg_comm *c, const void *buf, size_t bytes, int peer,
                     void *device_ctx, const char *op, jmg_error *err) {
  if (bytes == 0) return 0;
  return NCCL_TRY(g_nccl.send(buf, bytes, ncclUint8, peer, c->nc,
                              stream_of(device_ctx)),
                  "ncclSend", op, err);
}

static int nccl_recv(jmg_comm *c, void *buf, size_t bytes, int peer,
                     void *device_ctx, const char *op, jmg_error *err) {
  if (bytes == 0) return 0;
  return NCCL_TRY(g_nccl.recv(buf, bytes, ncclUint8, peer, c->nc,
                              stream_of(device_ctx)),
                  "ncclRecv", op, err);
}

static const jmg_comm_ops g_nccl_ops = {
    .name = "nccl",
    .id_bytes = sizeof(ncclUniqueId),
    .make_id = nccl_make_id,
    .open = nccl_open,
    .native = nccl_native,
    .max_int = nccl_max_int,
    .bcast = nccl_bcast,
    .group_begin = nccl_group_begin,
    .group_end = nccl_group_end,
    .send = nccl_send,
    .recv = nccl_recv,
};

const jmg_comm_ops *jmg_nccl_comm(void) { return &g_nccl_ops; }

int jmg_nccl_new_id(uint8_t *out, size_t len, char *err_msg, size_t errlen) {
  jmg_error err;
  jmg_error_clear(&err);
  int rc = 0;
  if (out == NULL || len < sizeof(ncclUniqueId))
    rc = jmg_error_set(&err, JMG_EINVAL, "comm_new_id", NULL,
                       "the buffer holds %zu bytes; an NCCL id needs %zu",
                       out == NULL ? (size_t)0 : len, sizeof(ncclUniqueId));
  if (rc == 0) {
    memset(out, 0, len);
    rc = nccl_make_id(out, "comm_new_id", &err);
  }
  if (rc != 0) {
    if (err_msg != NULL && errlen > 0) jmg_error_format(&err, err_msg, errlen);
    return -1;
  }
  if (err_msg != NULL && errlen > 0) err_msg[0] = '\0';
  return 0;
}
