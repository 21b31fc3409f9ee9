/* The CPU platform's communicator (comm/comm.h): the ranks are threads of
 * this process (XLA:CPU runs each CPU device's part of a program on a thread
 * of its pool) and talk through host memory.
 *
 * Ids: 128 bytes, made by make_id: a tag, this process's pid, a counter and
 * 16 random bytes. The communicators live in a registry of this process
 * (a list under a mutex), so an id made in another process names nothing
 * here: opening it is refused (the pid in the id says so): a group that
 * spans processes (MPMD) uses comm/comm_processes.c instead.
 *
 * The shared state of an id (its ranks' queues) is created by the first
 * rank that opens it; each rank's end is part of it, so the cache per
 * (id, rank) is the state itself. Neither is ever freed: a pool thread of
 * XLA may still be waiting inside at exit, and freeing under it would be a
 * use after free; a state is a few hundred bytes plus ranks² queue heads,
 * one per call site and group of devices (the local executor opens one per
 * call site: .per_call_site below, comm/comm.h), and the OS reclaims it at
 * exit.
 *
 * Messages. Every point-to-point operation, broadcast and max_int is a
 * message between a pair of ranks on a channel (p2p, bcast, max): a send
 * publishes a node that points at the sender's buffer in the queue of its
 * (sender, receiver) pair; the receiver takes the first node of its channel
 * in that queue (issue order per pair and channel), copies from the sender's
 * buffer and marks the node consumed; the sender returns once every node it
 * published is consumed (its buffer must stay valid until then). A group
 * (group_begin .. group_end, nestable, per thread like NCCL's) publishes all
 * its sends first, then takes its receives in issue order, then waits for
 * its sends: so the sends and receives of one group run as one, and a rank
 * may send to itself. Nothing has a fixed size: the queues are linked
 * lists of nodes that live in the thread's list of pending operations.
 * bcast is the root's send to every other rank (inside a group too);
 * max_int sends every rank's value to every other. The pending operations,
 * the groups' nesting and the operations built on them are comm/group.c's,
 * shared with comm/comm_processes.c; running a group is this file's.
 *
 * Every wait ends by JAXMG_RENDEZVOUS_TIMEOUT (common/config.h, read when
 * the group ends): a rank that never comes is an error (JMG_ETIMEDOUT), not
 * a hang. A rank that times out withdraws its unconsumed sends and marks the
 * communicator failed, with the reason: a rank that arrives late would
 * otherwise meet the next call's messages, so every later operation on it
 * fails at once, naming the first failure. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/group.h"
#include "common/config.h"

#define THREADS_CALL "threads communicator"
#define ID_TAG "jaxmg-threads-comm"

/* The id: what make_id writes (the rest of the 128 bytes zero). */
typedef struct tc_id {
  char tag[24];
  int64_t pid;
  uint64_t counter;
  unsigned char random[16];
} tc_id;
_Static_assert(sizeof(tc_id) <= JMG_COMM_ID_MAX, "the id must fit");

struct tc_shared;

/* A published send: lives in the sender's pending list. */
typedef struct tc_node {
  struct tc_node *next;
  int chan;
  const void *buf;
  size_t bytes;
  int taken;    /* a receiver is copying from it (unlinked) */
  int consumed; /* the copy is done: the sender may go */
} tc_node;

struct jmg_comm {
  struct tc_shared *sh;
  int rank;
};

typedef struct tc_shared {
  unsigned char id[JMG_COMM_ID_MAX];
  int ranks;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  tc_node **head, **tail; /* [from * ranks + to] */
  struct jmg_comm *ends;  /* one per rank */
  int failed;
  char why[256]; /* the first failure, once failed */
  struct tc_shared *next;
} tc_shared;

static pthread_mutex_t g_registry_mu = PTHREAD_MUTEX_INITIALIZER;
static tc_shared *g_registry;
static uint64_t g_counter;

/* ---- ids ---------------------------------------------------------------- */

static void random_bytes(unsigned char *out, size_t len) {
  size_t got = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (f != NULL) {
    got = fread(out, 1, len, f);
    fclose(f);
  }
  if (got == len) return;
  /* No /dev/urandom: the clock and an address; the pid and the counter
   * already make the id unique in this process, which is all it spans. */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
               (uint64_t)(uintptr_t)&ts;
  for (size_t i = got; i < len; ++i) {
    x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    out[i] = (unsigned char)(x >> 56);
  }
}

static int tc_make_id(void *id, const char *op, jmg_error *err) {
  (void)op, (void)err;
  tc_id made;
  memset(&made, 0, sizeof made);
  snprintf(made.tag, sizeof made.tag, "%s", ID_TAG);
  made.pid = (int64_t)getpid();
  pthread_mutex_lock(&g_registry_mu);
  made.counter = ++g_counter;
  pthread_mutex_unlock(&g_registry_mu);
  random_bytes(made.random, sizeof made.random);
  memset(id, 0, JMG_COMM_ID_MAX);
  memcpy(id, &made, sizeof made);
  return 0;
}

/* ---- the registry --------------------------------------------------------*/

static tc_shared *shared_new(const void *id, int ranks) {
  tc_shared *sh = calloc(1, sizeof *sh);
  if (sh == NULL) return NULL;
  const size_t pairs = (size_t)ranks * (size_t)ranks;
  sh->head = calloc(pairs, sizeof *sh->head);
  sh->tail = calloc(pairs, sizeof *sh->tail);
  sh->ends = calloc((size_t)ranks, sizeof *sh->ends);
  pthread_condattr_t attr;
  int ok = sh->head && sh->tail && sh->ends &&
           pthread_condattr_init(&attr) == 0;
  if (ok) {
    ok = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
         pthread_cond_init(&sh->cv, &attr) == 0;
    pthread_condattr_destroy(&attr);
  }
  if (ok && pthread_mutex_init(&sh->mu, NULL) != 0) {
    pthread_cond_destroy(&sh->cv);
    ok = 0;
  }
  if (!ok) {
    free(sh->head), free(sh->tail), free(sh->ends), free(sh);
    return NULL;
  }
  memcpy(sh->id, id, JMG_COMM_ID_MAX);
  sh->ranks = ranks;
  for (int r = 0; r < ranks; ++r) {
    sh->ends[r].sh = sh;
    sh->ends[r].rank = r;
  }
  return sh;
}

static int tc_open(const void *id, int rank, int ranks, void *device_ctx,
                   jmg_comm **out, const char *op, jmg_error *err) {
  (void)device_ctx;
  *out = NULL;
  tc_id given;
  memcpy(&given, id, sizeof given);
  if (memcmp(given.tag, ID_TAG, sizeof ID_TAG) != 0)
    return jmg_error_set(err, JMG_EINVAL, op, THREADS_CALL,
                         "the id was not made by the threads communicator "
                         "(jaxmg_comm_new_id of the CPU library)");
  if (given.pid != (int64_t)getpid())
    return jmg_error_set(
        err, JMG_EUNSUPPORTED, op, THREADS_CALL,
        "the id was made by process %lld and this is process %lld: the "
        "threads communicator joins the threads of one process and cannot "
        "run a group that spans processes (MPMD), whose ids come from the "
        "processes communicator (jaxmg_comm_new_id_processes)",
        (long long)given.pid, (long long)getpid());
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return jmg_error_set(err, JMG_EINVAL, op, THREADS_CALL,
                         "rank %d of %d ranks", rank, ranks);
  pthread_mutex_lock(&g_registry_mu);
  tc_shared *sh = g_registry;
  while (sh != NULL && memcmp(sh->id, id, JMG_COMM_ID_MAX) != 0) sh = sh->next;
  if (sh == NULL) {
    sh = shared_new(id, ranks);
    if (sh == NULL) {
      pthread_mutex_unlock(&g_registry_mu);
      return jmg_error_set(err, JMG_ENOMEM, op, THREADS_CALL,
                           "cannot allocate a communicator of %d ranks",
                           ranks);
    }
    sh->next = g_registry;
    g_registry = sh;
  }
  pthread_mutex_unlock(&g_registry_mu);
  if (sh->ranks != ranks)
    return jmg_error_set(err, JMG_EINVAL, op, THREADS_CALL,
                         "the communicator of this id was opened for %d "
                         "ranks, not %d",
                         sh->ranks, ranks);
  *out = &sh->ends[rank];
  return 0;
}

static void *tc_native(jmg_comm *c) { return c; }

/* ---- pending operations (per thread: comm/group.h) ---------------------*/

typedef struct tc_op {
  jmg_group_op base;
  tc_node node; /* a send's, once published */
} tc_op;

static _Thread_local jmg_group g_pend;

static jmg_group *tc_pending(void) { return &g_pend; }
static int tc_ranks(const jmg_comm *c) { return c->sh->ranks; }
static int tc_rank(const jmg_comm *c) { return c->rank; }

/* ---- running a group -----------------------------------------------------*/

/* Marks sh failed with the reason (the first one stays); sh->mu held. */
static void fail_locked(tc_shared *sh, const jmg_error *err) {
  if (!sh->failed) {
    sh->failed = 1;
    jmg_error_format(err, sh->why, sizeof sh->why);
  }
  pthread_cond_broadcast(&sh->cv);
}

static int failed_locked(const tc_shared *sh, const char *op, jmg_error *err) {
  return jmg_error_set(err, JMG_EPEER, op, THREADS_CALL,
                       "the communicator failed earlier and cannot be used "
                       "again in this process: %s",
                       sh->why);
}

/* The first node of chan in the queue from -> to, unlinked and taken; NULL
 * if none yet. sh->mu held. */
static tc_node *take_locked(tc_shared *sh, int from, int to, int chan) {
  const size_t q = (size_t)from * (size_t)sh->ranks + (size_t)to;
  tc_node *prev = NULL;
  for (tc_node *n = sh->head[q]; n != NULL; prev = n, n = n->next) {
    if (n->chan != chan) continue;
    if (prev == NULL)
      sh->head[q] = n->next;
    else
      prev->next = n->next;
    if (sh->tail[q] == n) sh->tail[q] = prev;
    n->next = NULL;
    n->taken = 1;
    return n;
  }
  return NULL;
}

/* Withdraws a published node nobody took (after a failure); sh->mu held.
 * A taken one is being copied: waits for the copy (it cannot block). */
static void withdraw_locked(tc_shared *sh, int from, int to, tc_node *node) {
  const size_t q = (size_t)from * (size_t)sh->ranks + (size_t)to;
  if (!node->taken) {
    tc_node *prev = NULL;
    for (tc_node *n = sh->head[q]; n != NULL; prev = n, n = n->next) {
      if (n != node) continue;
      if (prev == NULL)
        sh->head[q] = n->next;
      else
        prev->next = n->next;
      if (sh->tail[q] == n) sh->tail[q] = prev;
      return;
    }
    return;
  }
  while (!node->consumed) pthread_cond_wait(&sh->cv, &sh->mu);
}

static int run_group(jmg_group *g, const char *op, jmg_error *err) {
  jmg_config cfg;
  jmg_config_read(&cfg);
  const double timeout = cfg.rendezvous_timeout_s;
  const struct timespec deadline = jmg_deadline_after(timeout);
  int rc = 0;
  size_t published = 0;
  /* 1. Publish every send. */
  for (size_t i = 0; i < g->count; ++i) {
    tc_op *o = jmg_group_op_at(g, i);
    const jmg_group_op *b = &o->base;
    if (!b->send) continue;
    tc_shared *sh = b->c->sh;
    pthread_mutex_lock(&sh->mu);
    if (sh->failed) {
      rc = failed_locked(sh, op, err);
      pthread_mutex_unlock(&sh->mu);
      break;
    }
    o->node.chan = b->chan;
    o->node.buf = b->buf;
    o->node.bytes = b->bytes;
    const size_t q = (size_t)b->c->rank * (size_t)sh->ranks + (size_t)b->peer;
    if (sh->tail[q] != NULL)
      sh->tail[q]->next = &o->node;
    else
      sh->head[q] = &o->node;
    sh->tail[q] = &o->node;
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
    published = i + 1;
  }
  /* 2. Every receive, in issue order. */
  for (size_t i = 0; rc == 0 && i < g->count; ++i) {
    tc_op *o = jmg_group_op_at(g, i);
    const jmg_group_op *b = &o->base;
    if (b->send) continue;
    tc_shared *sh = b->c->sh;
    const int me = b->c->rank;
    pthread_mutex_lock(&sh->mu);
    tc_node *n = NULL;
    while (rc == 0 && (n = take_locked(sh, b->peer, me, b->chan)) == NULL) {
      if (sh->failed) {
        rc = failed_locked(sh, op, err);
      } else if (pthread_cond_timedwait(&sh->cv, &sh->mu, &deadline) ==
                 ETIMEDOUT) {
        if ((n = take_locked(sh, b->peer, me, b->chan)) != NULL) break;
        rc = jmg_error_set(
            err, JMG_ETIMEDOUT, op, THREADS_CALL,
            "rank %d waited %.3g s for a %s from rank %d, which never came "
            "(every device of the group must make the same jaxmg calls; "
            "JAXMG_RENDEZVOUS_TIMEOUT sets the wait)",
            me, timeout, jmg_group_chan_name(b->chan), b->peer);
        fail_locked(sh, err);
      }
    }
    pthread_mutex_unlock(&sh->mu);
    if (rc != 0) break;
    const int fits = n->bytes == b->bytes;
    if (fits && b->bytes > 0) memcpy(b->buf, n->buf, b->bytes);
    pthread_mutex_lock(&sh->mu);
    n->consumed = 1;
    if (!fits) {
      rc = jmg_error_set(err, JMG_EINTERNAL, op, THREADS_CALL,
                         "rank %d's %s of %zu bytes from rank %d met one of "
                         "%zu bytes",
                         me, jmg_group_chan_name(b->chan), b->bytes, b->peer,
                         n->bytes);
      fail_locked(sh, err);
    }
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
  }
  /* 3. Every published send consumed (or withdrawn, after a failure). */
  for (size_t i = 0; i < published; ++i) {
    tc_op *o = jmg_group_op_at(g, i);
    const jmg_group_op *b = &o->base;
    if (!b->send) continue;
    tc_shared *sh = b->c->sh;
    pthread_mutex_lock(&sh->mu);
    while (rc == 0 && !o->node.consumed) {
      if (sh->failed) {
        rc = failed_locked(sh, op, err);
      } else if (pthread_cond_timedwait(&sh->cv, &sh->mu, &deadline) ==
                     ETIMEDOUT &&
                 !o->node.consumed) {
        rc = jmg_error_set(
            err, JMG_ETIMEDOUT, op, THREADS_CALL,
            "rank %d waited %.3g s for rank %d to receive its %s, which it "
            "never did (every device of the group must make the same jaxmg "
            "calls; JAXMG_RENDEZVOUS_TIMEOUT sets the wait)",
            b->c->rank, timeout, b->peer, jmg_group_chan_name(b->chan));
        fail_locked(sh, err);
      }
    }
    if (!o->node.consumed) withdraw_locked(sh, b->c->rank, b->peer, &o->node);
    pthread_mutex_unlock(&sh->mu);
  }
  return rc;
}

static const jmg_group_transport g_transport = {
    .call = THREADS_CALL,
    .op_bytes = sizeof(tc_op),
    .pending = tc_pending,
    .ranks = tc_ranks,
    .rank = tc_rank,
    .run = run_group,
};

static int tc_group_begin(const char *op, jmg_error *err) {
  return jmg_group_begin(&g_transport, op, err);
}

static int tc_group_end(const char *op, jmg_error *err) {
  return jmg_group_end(&g_transport, op, err);
}

static int tc_send(jmg_comm *c, const void *buf, size_t bytes, int peer,
                   void *device_ctx, const char *op, jmg_error *err) {
  (void)device_ctx;
  return jmg_group_send(&g_transport, c, buf, bytes, peer, op, err);
}

static int tc_recv(jmg_comm *c, void *buf, size_t bytes, int peer,
                   void *device_ctx, const char *op, jmg_error *err) {
  (void)device_ctx;
  return jmg_group_recv(&g_transport, c, buf, bytes, peer, op, err);
}

static int tc_bcast(jmg_comm *c, void *buf, size_t bytes, int root,
                    void *device_ctx, const char *op, jmg_error *err) {
  (void)device_ctx;
  return jmg_group_bcast(&g_transport, c, buf, bytes, root, op, err);
}

static int tc_max_int(jmg_comm *c, int *value, void *device_ctx,
                      const char *op, jmg_error *err) {
  (void)device_ctx;
  return jmg_group_max_int(&g_transport, c, value, op, err);
}

static const jmg_comm_ops g_threads_ops = {
    .name = "threads",
    .id_bytes = sizeof(tc_id), /* make_id zeroes the rest of the 128 */
    .per_call_site = 1,
    .make_id = tc_make_id,
    .open = tc_open,
    .native = tc_native,
    .max_int = tc_max_int,
    .bcast = tc_bcast,
    .group_begin = tc_group_begin,
    .group_end = tc_group_end,
    .send = tc_send,
    .recv = tc_recv,
};

const jmg_comm_ops *jmg_threads_comm(void) { return &g_threads_ops; }
