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
 * Failures (comm.h: watch, guard_begin, guard_end). NCCL's waits never end
 * by themselves: a peer that dies, or never comes, leaves this rank's
 * kernels (in max_int, or inside cuSOLVERMp's routines) waiting forever.
 * So:
 * - watch keeps every rank's pid per id (0: not watchable from here);
 * - a new communicator is set up (ncclCommInitRank) by a helper thread
 *   while the opener waits for it, checking every JMG_WATCHDOG_POLL_S the
 *   watched pids and JAXMG_RENDEZVOUS_TIMEOUT (comm/watchdog.h's check): a
 *   rank whose process is gone, or that never comes, fails the open instead
 *   of a wait forever. A set-up given up is left to its helper thread (a
 *   blocking ncclCommInitRank cannot be interrupted: it has no handle yet),
 *   which aborts the communicator if it ever completes; the entry is dead;
 * - a call is guarded (guard_begin .. guard_end, around the whole call, the
 *   engine's routines included): the watchdog thread (comm/watchdog.c)
 *   checks the watched pids, ncclCommGetAsyncError and, until the call's
 *   first max_int completes, the timeout. On a fault it revokes the
 *   communicator (ncclCommRevoke, NCCL >= 2.28: "stops all in-flight
 *   operations", and the communicator stays a valid object, so that the
 *   call's thread, still inside cuSOLVERMp, never touches a freed one),
 *   or, where libnccl has no ncclCommRevoke, aborts it (ncclCommAbort from
 *   another thread, as PyTorch's and XLA's watchdogs do). This file's own
 *   operations on a faulted communicator fail at once without calling
 *   NCCL. guard_end, on the call's thread once the call is out of the
 *   library, aborts a revoked communicator (freeing it), marks the entry
 *   dead and returns the watchdog's error naming the op, the rank and its
 *   pid. A dead entry stays in the cache, so that a later open of its id
 *   (every later call of the same group of devices in this process) fails
 *   at once; cuSOLVERMp's grids made on it (engine/cusolvermp/context.c,
 *   cached by this entry's address) are never matched again, since entries
 *   are never freed once listed and a dead one is never handed out.
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/quit_mark.h"
#include "comm/watchdog.h"
#include "common/config.h"
#include "common/proc.h"
#include "common/runtime_lib.h"
#include "common/trace.h"
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
  /* Optional: */
  __typeof__(ncclCommGetAsyncError) *get_async_error; /* NCCL >= 2.4 */
  /* NCCL >= 2.28; typed by hand, so that an older nccl.h builds too. */
  ncclResult_t (*comm_revoke)(ncclComm_t comm, int revoke_flags);
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
  /* Optional: the watchdog's (the header comment says how each is used). */
  if (jmg_runtime_lib_lookup(lib, "ncclCommGetAsyncError",
                             &g_nccl.get_async_error,
                             sizeof g_nccl.get_async_error) != 0)
    g_nccl.get_async_error = NULL;
  if (jmg_runtime_lib_lookup(lib, "ncclCommRevoke", &g_nccl.comm_revoke,
                             sizeof g_nccl.comm_revoke) != 0)
    g_nccl.comm_revoke = NULL;
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

/* OPENING: a helper thread runs ncclCommInitRank; READY: usable; DEAD: its
 * set-up was given up, or a guarded call aborted it (why says which): never
 * handed out again. */
enum { COMM_OPENING, COMM_READY, COMM_DEAD };

/* faulted: set by the watchdog's fire, or by the arrival agreement (LATE:
 * the ranks entered the call more than the timeout apart; the agreement
 * completed against an abandoned call, and nothing after it would). */
enum { FAULT_NONE, FAULT_REVOKED, FAULT_ABORTED, FAULT_LATE };

struct jmg_comm {
  uint8_t id[sizeof(ncclUniqueId)];
  int rank, ranks, device;
  int state;
  char why[JMG_ERROR_MSG_LEN]; /* DEAD: why */
  ncclComm_t nc;
  int64_t *dev_buf; /* max_int's AGREE_WORDS int64, on device */
  /* The set-up (the helper thread's; under g_comms_mu). */
  int init_done, init_rc, abandoned;
  jmg_error init_err;
  /* The guard of the call in progress (its thread's, but faulted). */
  jmg_watchdog_entry guard;
  int guarded;
  char guard_op[JMG_ERROR_OP_LEN];
  int64_t *pids; /* ranks entries, from watch (NULL: none told) */
  int64_t entered_ms; /* wall clock, when the guarded call began */
  atomic_int faulted;
  struct jmg_comm *next;
};

static pthread_mutex_t g_comms_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_comms_cv; /* CLOCK_MONOTONIC; made by make_cv */
static pthread_once_t g_cv_once = PTHREAD_ONCE_INIT;
static int g_cv_rc;
static struct jmg_comm *g_comms;

/* The pids told by watch, per id, kept until exit (under g_comms_mu). */
typedef struct nccl_pids {
  uint8_t id[sizeof(ncclUniqueId)];
  int ranks;
  int64_t *pids;
  struct nccl_pids *next;
} nccl_pids;
static nccl_pids *g_pids;

static void make_cv(void) {
  pthread_condattr_t attr;
  g_cv_rc = pthread_condattr_init(&attr);
  if (g_cv_rc != 0) return;
  g_cv_rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (g_cv_rc == 0) g_cv_rc = pthread_cond_init(&g_comms_cv, &attr);
  pthread_condattr_destroy(&attr);
}

/* The driver's primary context state, for the exit handler. */
typedef CUresult (*primary_ctx_state_fn)(CUdevice, unsigned int *, int *);
static primary_ctx_state_fn g_ctx_state;
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

static void abort_comms_at_exit(void) {
  /* No lock: other threads may hold it forever at exit. Entries are never
   * freed once listed (but for a set-up that failed, unlinked first), so
   * the list can be walked. A comm that the watchdog aborted is gone; one
   * that it revoked is aborted here if its call never ended. */
  for (struct jmg_comm *c = g_comms; c != NULL; c = c->next) {
    if (c->state == COMM_OPENING || c->nc == NULL ||
        atomic_load(&c->faulted) == FAULT_ABORTED)
      continue;
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

static const nccl_pids *pids_locked(const void *id, int ranks) {
  for (const nccl_pids *w = g_pids; w != NULL; w = w->next)
    if (w->ranks == ranks && memcmp(w->id, id, sizeof w->id) == 0) return w;
  return NULL;
}

static void nccl_watch(const void *id, int ranks, const int64_t *pids) {
  if (ranks < 1 || pids == NULL) return;
  pthread_mutex_lock(&g_comms_mu);
  nccl_pids *w = (nccl_pids *)pids_locked(id, ranks);
  if (w == NULL) {
    nccl_pids *made = calloc(1, sizeof *made);
    int64_t *copy = calloc((size_t)ranks, sizeof *copy);
    if (made == NULL || copy == NULL) { /* nothing to watch: the timeout */
      free(made), free(copy);
      pthread_mutex_unlock(&g_comms_mu);
      return;
    }
    memcpy(made->id, id, sizeof made->id);
    made->ranks = ranks;
    made->pids = copy;
    made->next = g_pids;
    g_pids = w = made;
  }
  memcpy(w->pids, pids, (size_t)ranks * sizeof *pids);
  pthread_mutex_unlock(&g_comms_mu);
}

/* The error for a dead entry, at its next open. */
static int dead_error(const struct jmg_comm *c, const char *op,
                      jmg_error *err) {
  return jmg_error_set(err, JMG_EPEER, op, "ncclCommInitRank",
                       "rank %d of %d: this group's communicator failed "
                       "earlier and is not used again (%s); a new job (new "
                       "processes) makes a new one",
                       c->rank, c->ranks, c->why);
}

/* ncclCommInitRank and the device int, on device, the lock not held. */
/* max_int's words: the value, and, in a call's arrival agreement, when the
 * rank entered the call and its negation (ncclMax of both: the latest and
 * the earliest); NO_TIME where the rank has no such time to tell. */
enum { AGREE_WORDS = 3 };
#define NO_TIME INT64_MIN

static int open_new(struct jmg_comm *c, ncclComm_t *nc, int64_t **dev_buf,
                    const char *op, jmg_error *err) {
  int saved = -1;
  int rc = JMG_CUDA_TRY(cudaGetDevice(&saved), op, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaSetDevice(c->device), op, err);
  ncclUniqueId uid;
  memcpy(&uid, c->id, sizeof uid);
  if (rc == 0)
    rc = NCCL_TRY(g_nccl.comm_init_rank(nc, c->ranks, uid, c->rank),
                  "ncclCommInitRank", op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaMalloc((void **)dev_buf, AGREE_WORDS * sizeof(int64_t)), op, err);
  if (rc != 0 && *nc != NULL) {
    g_nccl.comm_abort(*nc);
    *nc = NULL;
  }
  if (saved >= 0) cudaSetDevice(saved);
  return rc;
}

/* The helper thread of a set-up: the entry is its until init_done, or, if
 * its opener gave up (abandoned), for ever. */
static void *open_thread(void *arg) {
  struct jmg_comm *c = arg;
  ncclComm_t nc = NULL;
  int64_t *dev_buf = NULL;
  jmg_error err;
  jmg_error_clear(&err);
  const int rc = open_new(c, &nc, &dev_buf, c->guard_op, &err);
  pthread_mutex_lock(&g_comms_mu);
  const int abandoned = c->abandoned;
  if (!abandoned) {
    c->nc = nc;
    c->dev_buf = dev_buf;
    c->init_rc = rc;
    c->init_err = err;
    c->init_done = 1;
  }
  pthread_cond_broadcast(&g_comms_cv);
  pthread_mutex_unlock(&g_comms_mu);
  /* A late set-up: no one will use it (its device int goes with the
   * context). */
  if (abandoned && nc != NULL) g_nccl.comm_abort(nc);
  return NULL;
}

static int probe_alive(void *ctx, int64_t pid) {
  (void)ctx;
  return jmg_proc_alive((pid_t)pid);
}

static double probe_now(void *ctx) {
  (void)ctx;
  return jmg_watch_now();
}

static double timeout_s(void) {
  jmg_config cfg;
  jmg_config_read(&cfg);
  return cfg.rendezvous_timeout_s;
}

/* Sets c up (a new entry, listed OPENING): a helper thread runs
 * ncclCommInitRank while this one watches the pids and the timeout. On
 * success c is READY; on failure it is unlinked and freed, or, where the
 * set-up was given up, DEAD (and the helper thread's). */
static int set_up(struct jmg_comm *c, const char *op, jmg_error *err) {
  int rc = 0;
  pthread_mutex_lock(&g_comms_mu);
  const nccl_pids *told = pids_locked(c->id, c->ranks);
  const jmg_watch w = {.rank = c->rank,
                       .ranks = c->ranks,
                       .pids = told != NULL ? told->pids : NULL,
                       .started = jmg_watch_now(),
                       .timeout_s = timeout_s()};
  const jmg_watch_probe p = {.alive = probe_alive, .now = probe_now};
  jmg_watch_fault f;
  /* The helper's op (guard_op is free until the first call's guard). */
  snprintf(c->guard_op, sizeof c->guard_op, "%s", op != NULL ? op : "");
  /* A rank already gone: fail before anything starts. */
  int started = 0;
  if (jmg_watch_check(&w, &p, &f) == JMG_WATCH_OK) {
    pthread_attr_t attr;
    pthread_t thread;
    int prc = pthread_attr_init(&attr);
    if (prc == 0)
      prc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (prc == 0) prc = pthread_create(&thread, &attr, open_thread, c);
    pthread_attr_destroy(&attr);
    if (prc != 0)
      rc = jmg_error_sys(err, JMG_EINTERNAL, op, "pthread_create", prc,
                         "the communicator's set-up thread");
    started = prc == 0;
  }
  while (started && !c->init_done &&
         jmg_watch_check(&w, &p, &f) == JMG_WATCH_OK) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += (long)(JMG_WATCHDOG_POLL_S * 1e9);
    if (t.tv_nsec >= 1000000000L) {
      t.tv_sec += 1;
      t.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&g_comms_cv, &g_comms_mu, &t);
  }
  int free_it = 0;
  if (started && c->init_done) {
    rc = c->init_rc;
    if (rc == 0) {
      c->state = COMM_READY;
    } else {
      jmg_error_copy(err, &c->init_err);
      unlink_locked(c); /* a later call may try again with a new id */
      free_it = 1;
    }
  } else if (rc == 0) { /* a rank gone, or late: given up */
    rc = jmg_watch_error(&w, &f, "the communicator's set-up", NULL, op,
                         "ncclCommInitRank", err);
    snprintf(c->why, sizeof c->why, "%s", err->msg);
    c->state = COMM_DEAD;
    c->abandoned = started;
  } else { /* no thread */
    unlink_locked(c);
    free_it = 1;
  }
  pthread_cond_broadcast(&g_comms_cv);
  pthread_mutex_unlock(&g_comms_mu);
  if (free_it) free(c);
  return rc;
}

static int nccl_open(const void *id, int rank, int ranks, void *device_ctx,
                     jmg_comm **out, const char *op, jmg_error *err) {
  *out = NULL;
  int rc = jmg_nccl_load(op, err);
  if (rc != 0) return rc;
  pthread_once(&g_cv_once, make_cv);
  if (g_cv_rc != 0)
    return jmg_error_sys(err, JMG_EINTERNAL, op, "pthread_cond_init", g_cv_rc,
                         "the communicators' condition variable");
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
    int dead = c->state == COMM_DEAD;
    rc = dead ? dead_error(c, op, err) : 0;
    pthread_mutex_unlock(&g_comms_mu);
    if (rc != 0) return rc;
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
  atomic_init(&c->faulted, FAULT_NONE);
  c->next = g_comms;
  g_comms = c;
  pthread_mutex_unlock(&g_comms_mu);

  rc = set_up(c, op, err);
  if (rc != 0) return rc;
  pthread_once(&g_exit_once, register_exit_handler);
  *out = c;
  return 0;
}

/* ---- the guard of a call ---------------------------------------------- */

/* 0, or NCCL's asynchronous error on c (the watchdog thread's). */
static int comm_async_error(void *ctx) {
  const struct jmg_comm *c = ctx;
  ncclResult_t r = ncclSuccess;
  if (g_nccl.get_async_error(c->nc, &r) != ncclSuccess) return 0;
  return r == ncclSuccess || r == ncclInProgress ? 0 : (int)r;
}

/* 1 where peer rank (in pid) gave up on c (the watchdog thread's). */
static int comm_quit(void *ctx, int rank, int64_t pid) {
  const struct jmg_comm *c = ctx;
  return jmg_quit_marked(c->id, sizeof c->id, rank, pid);
}

/* The watchdog found a fault (its thread, its lock held): end c's waits. */
static void comm_fire(void *ctx, const jmg_watch_fault *f) {
  struct jmg_comm *c = ctx;
  /* JAXMG_TRACE: what the watchdog did, as it happens (a call that does
   * not come back after it says where it stopped). */
  const int trace = jmg_trace_on();
  if (trace)
    fprintf(stderr,
            "jaxmg trace watchdog: %s rank %d of %d: verdict %d after %.3g s; "
            "%s\n",
            c->guard_op, c->rank, c->ranks, (int)f->verdict, f->waited,
            g_nccl.comm_revoke != NULL ? "ncclCommRevoke" : "ncclCommAbort");
  ncclResult_t r = ncclInternalError;
  if (g_nccl.comm_revoke != NULL)
    r = g_nccl.comm_revoke(c->nc, 0 /* NCCL_REVOKE_DEFAULT */);
  if (trace && g_nccl.comm_revoke != NULL)
    fprintf(stderr, "jaxmg trace watchdog: rank %d: ncclCommRevoke returned %d\n",
            c->rank, (int)r);
  /* In progress: quiescing (nccl.h); guard_end's abort comes after. */
  if (r == ncclSuccess || r == ncclInProgress) {
    atomic_store(&c->faulted, FAULT_REVOKED);
    return;
  }
  /* Told first, so that this file's operations stop calling NCCL. */
  atomic_store(&c->faulted, FAULT_ABORTED);
  g_nccl.comm_abort(c->nc);
  if (trace) fprintf(stderr, "jaxmg trace watchdog: rank %d: aborted\n", c->rank);
}

/* The error of an operation on a communicator that the watchdog ended
 * (guard_end replaces it by the watchdog's own). */
static int faulted_error(const struct jmg_comm *c, const char *op,
                         const char *call, jmg_error *err) {
  return jmg_error_set(err, JMG_EPEER, op, call,
                       "rank %d of %d: the communicator was aborted by the "
                       "watchdog during this call",
                       c->rank, c->ranks);
}

#define CHECK_FAULT(c, op, call, err)                                   \
  do {                                                                  \
    if (atomic_load(&(c)->faulted) != FAULT_NONE)                       \
      return faulted_error((c), (op), (call), (err));                   \
  } while (0)

static int nccl_guard_begin(jmg_comm *c, const char *op, jmg_error *err) {
  if (c->ranks < 2 || c->guarded) return 0;
  CHECK_FAULT(c, op, "NCCL", err);
  pthread_mutex_lock(&g_comms_mu);
  const nccl_pids *told = pids_locked(c->id, c->ranks);
  if (told != NULL && c->pids == NULL)
    c->pids = calloc((size_t)c->ranks, sizeof *c->pids);
  if (told != NULL && c->pids != NULL) /* else no pids: the timeout only */
    memcpy(c->pids, told->pids, (size_t)c->ranks * sizeof *c->pids);
  pthread_mutex_unlock(&g_comms_mu);
  snprintf(c->guard_op, sizeof c->guard_op, "%s", op != NULL ? op : "");
  c->guard.watch = (jmg_watch){.rank = c->rank,
                               .ranks = c->ranks,
                               .pids = told != NULL ? c->pids : NULL,
                               .timeout_s = timeout_s()};
  c->entered_ms = jmg_watch_wall_ms();
  c->guard.async_error =
      g_nccl.get_async_error != NULL ? comm_async_error : NULL;
  c->guard.quit = comm_quit;
  c->guard.fire = comm_fire;
  c->guard.ctx = c;
  int rc = jmg_watchdog_add(&c->guard, op, err);
  c->guarded = rc == 0;
  return rc;
}

static int nccl_guard_end(jmg_comm *c, int rc, jmg_error *err) {
  if (!c->guarded) return rc;
  c->guarded = 0;
  jmg_watch_fault f;
  const int fired = jmg_watchdog_remove(&c->guard, &f);
  const int faulted = atomic_load(&c->faulted);
  if (!fired && faulted == FAULT_NONE) return rc;
  /* The call is out of the library: free what NCCL holds (a revoked
   * communicator, or one whose arrival agreement found a rank late; an
   * aborted one is gone), and never hand c out again. */
  pthread_mutex_lock(&g_comms_mu);
  ncclComm_t nc = c->nc;
  c->nc = NULL;
  c->state = COMM_DEAD;
  pthread_mutex_unlock(&g_comms_mu);
  if ((faulted == FAULT_REVOKED || faulted == FAULT_LATE) && nc != NULL)
    g_nccl.comm_abort(nc);
  /* The peers of this node learn it from the mark (their watchdogs); where
   * it cannot be made, from their own deadline. */
  jmg_error mark_err;
  if (jmg_quit_mark(c->id, sizeof c->id, c->rank, c->guard_op, &mark_err) != 0 &&
      jmg_trace_on())
    fprintf(stderr, "jaxmg trace watchdog: rank %d: no quit mark: %s\n",
            c->rank, mark_err.msg);
  if (!fired) { /* the arrival agreement's error, in err already */
    pthread_mutex_lock(&g_comms_mu);
    snprintf(c->why, sizeof c->why, "%s", err->msg);
    pthread_mutex_unlock(&g_comms_mu);
    return rc;
  }
  const char *words = f.verdict == JMG_WATCH_ASYNC
                          ? g_nccl.get_error_string((ncclResult_t)f.code)
                          : NULL;
  rc = jmg_watch_error(&c->guard.watch, &f, "the call", words, c->guard_op,
                       "NCCL", err);
  pthread_mutex_lock(&g_comms_mu);
  snprintf(c->why, sizeof c->why, "%s", err->msg);
  pthread_mutex_unlock(&g_comms_mu);
  return rc;
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

/* The arrival agreement's check (comm/watchdog.h, jmg_watch_arrival) on
 * the agreed words; a failure marks c LATE (guard_end aborts it). */
static int check_arrival(struct jmg_comm *c, const int64_t *words,
                         const char *op, jmg_error *err) {
  if (words[1] == NO_TIME || words[2] == NO_TIME) return 0;
  const int64_t first = -words[2], last = words[1];
  if (jmg_trace_on())
    fprintf(stderr, "jaxmg trace agreement: %s rank %d of %d: entered the "
            "call %.3f s after the earliest rank, %.3f s before the latest\n",
            c->guard_op, c->rank, c->ranks, (double)(c->entered_ms - first) * 1e-3,
            (double)(last - c->entered_ms) * 1e-3);
  const int rc = jmg_watch_arrival(&c->guard.watch, c->entered_ms, first,
                                   last, op, "ncclAllReduce", err);
  if (rc != 0) atomic_store(&c->faulted, FAULT_LATE);
  return rc;
}

/* The agreement: the ranks' largest *value. The first of a guarded call is
 * also its arrival agreement (check_arrival). */
static int nccl_max_int(jmg_comm *c, int *value, void *device_ctx,
                        const char *op, jmg_error *err) {
  CHECK_FAULT(c, op, "ncclAllReduce", err);
  cudaStream_t s = stream_of(device_ctx);
  const int arrival = c->guarded && !atomic_load(&c->guard.arrived);
  int64_t host[AGREE_WORDS] = {*value, arrival ? c->entered_ms : NO_TIME,
                               arrival ? -c->entered_ms : NO_TIME};
  int rc = JMG_CUDA_TRY(cudaMemcpyAsync(c->dev_buf, host, sizeof host,
                                        cudaMemcpyHostToDevice, s),
                        op, err);
  if (rc == 0)
    rc = NCCL_TRY(g_nccl.all_reduce(c->dev_buf, c->dev_buf, AGREE_WORDS,
                                    ncclInt64, ncclMax, c->nc, s),
                  "ncclAllReduce", op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(host, c->dev_buf, sizeof host,
                                      cudaMemcpyDeviceToHost, s),
                      op, err);
  if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(s), op, err);
  if (atomic_load(&c->faulted) != FAULT_NONE && jmg_trace_on())
    fprintf(stderr, "jaxmg trace watchdog: rank %d: the agreement's wait "
            "ended after the fault (%d)\n", c->rank, rc);
  /* A wait that a revoke or an abort ended: not a result. */
  if (rc == 0 && atomic_load(&c->faulted) != FAULT_NONE)
    rc = faulted_error(c, op, "ncclAllReduce", err);
  if (rc == 0 && arrival) rc = check_arrival(c, host, op, err);
  if (rc == 0) *value = (int)host[0];
  /* Every rank took part: the guarded call's wait for the others is over. */
  if (rc == 0 && c->guarded) jmg_watchdog_arrived(&c->guard);
  return rc;
}

static int nccl_bcast(jmg_comm *c, void *buf, size_t bytes, int root,
                      void *device_ctx, const char *op, jmg_error *err) {
  if (bytes == 0) return 0;
  CHECK_FAULT(c, op, "ncclBroadcast", err);
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
  CHECK_FAULT(c, op, "ncclSend", err);
  return NCCL_TRY(g_nccl.send(buf, bytes, ncclUint8, peer, c->nc,
                              stream_of(device_ctx)),
                  "ncclSend", op, err);
}

static int nccl_recv(jmg_comm *c, void *buf, size_t bytes, int peer,
                     void *device_ctx, const char *op, jmg_error *err) {
  if (bytes == 0) return 0;
  CHECK_FAULT(c, op, "ncclRecv", err);
  return NCCL_TRY(g_nccl.recv(buf, bytes, ncclUint8, peer, c->nc,
                              stream_of(device_ctx)),
                  "ncclRecv", op, err);
}

static const jmg_comm_ops g_nccl_ops = {
    .name = "nccl",
    .id_bytes = sizeof(ncclUniqueId),
    .make_id = nccl_make_id,
    .open = nccl_open,
    .watch = nccl_watch,
    .guard_begin = nccl_guard_begin,
    .guard_end = nccl_guard_end,
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

/* ---- one-rank communicators (comm_nccl.h) ------------------------------ */

#define SELF_MAX_DEVICES 64
static pthread_mutex_t g_self_mu = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t g_self[SELF_MAX_DEVICES];

int jmg_nccl_comm_self(int device, void **out, const char *op,
                       jmg_error *err) {
  if (device < 0 || device >= SELF_MAX_DEVICES)
    return jmg_error_set(err, JMG_EINVAL, op, "jmg_nccl_comm_self",
                         "CUDA device %d past %d", device, SELF_MAX_DEVICES);
  int rc = jmg_nccl_load(op, err);
  if (rc != 0) return rc;
  rc = JMG_CUDA_TRY(cudaSetDevice(device), op, err);
  if (rc != 0) return rc;
  pthread_mutex_lock(&g_self_mu);
  if (g_self[device] == NULL) {
    ncclUniqueId id;
    ncclComm_t c = NULL;
    rc = NCCL_TRY(g_nccl.get_unique_id(&id), "ncclGetUniqueId", op, err);
    if (rc == 0)
      rc = NCCL_TRY(g_nccl.comm_init_rank(&c, 1, id, 0), "ncclCommInitRank",
                    op, err);
    if (rc == 0) g_self[device] = c;
  }
  *out = g_self[device];
  pthread_mutex_unlock(&g_self_mu);
  return rc;
}
