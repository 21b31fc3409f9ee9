/* The CPU platform's communicator between processes (comm/comm.h): the
 * ranks are processes of one node (one per CPU device, started with
 * jax.distributed on localhost), or threads of them, and talk over Unix
 * domain sockets.
 *
 * What it is for: running the local model (JAXMG_ENGINE=lapack-local) with
 * one process per CPU device, so that everything a job of one process per
 * GPU does above the solver (the ids through JAX's key-value store, one
 * communicator per process, the agreements, the grid moves) runs, and is
 * tested, on a machine without GPUs. It joins the processes of one node
 * only: across nodes the GPU engines' NCCL (cuda/comm_nccl.c) carries the
 * work. It is not fast: every message is copied once more on its way in.
 *
 * Ids. make_id writes a tag, 16 random bytes and the maker's pid; the rest
 * of the 128 bytes is zero, and the local executor writes the call site
 * into the last 8 (per_call_site, comm/comm.h). The first 120 bytes name a
 * group of ranks: its transport, one connection between every pair of
 * ranks, set up by the first open of the group and shared by every call
 * site; the call site names a communicator on it, and every message says
 * which one it belongs to, so that calls never meet.
 *
 * Setting up a transport (open, the first time, collective): every rank
 * listens on an abstract Unix socket named after the group and its rank
 * ("@jaxmg-comm-<random>-<rank>": abstract names live in the kernel only,
 * so nothing is left in the file system, after an exit or a crash alike),
 * connects to every lower rank (retrying until that rank listens), accepts
 * every higher one, and checks each peer's hello (the group, the ranks, the
 * same user: SO_PEERCRED, which also gives the peer's pid for the errors).
 * The listening sockets are closed once the transport is up. Where the
 * caller told the ranks' pids (watch: MPMD calls name every shard's
 * process), a rank whose process is gone is an error at once, naming it,
 * instead of a wait until the timeout.
 *
 * Moving bytes. One thread of this process (started by the first open)
 * polls every connection: it writes the queued sends (header, then the
 * sender's buffer, as far as the socket takes them) and reads whatever
 * arrives into a message of its own, queued by (sender, call site,
 * channel). So a send never waits for its receiver to post a receive, two
 * ranks that send to each other at once never block each other, and a
 * process that has not reached a call yet still takes its peers' messages.
 * A send is complete once the socket has taken all of it (its buffer may
 * then be reused); a receive takes the first message of its (sender, call
 * site, channel) and copies it out. Groups (group_begin .. group_end) run
 * as in the threads communicator: every send queued, then the receives in
 * issue order, then the sends' completion; a rank may send to itself
 * (the pending operations and the groups' nesting are comm/group.c's,
 * shared with the threads communicator; running a group is this file's).
 *
 * Failure. Every wait ends by JAXMG_RENDEZVOUS_TIMEOUT (common/config.h,
 * read when the group ends). A connection that closes (its process exited
 * or was killed) loses that peer at once, naming its rank and pid: every
 * later send to it, and every receive from it of what had not arrived yet,
 * fails (a process that exits after its last call leaves the others to
 * finish theirs). A rank whose operation fails (a timeout, a peer's death)
 * marks the call site's communicator failed and tells every peer (a FAIL
 * message): their waits on that call site fail at once with its reason, and a
 * rank that arrives late finds the communicator failed instead of meeting the
 * next call's messages. A send withdrawn after part of it was written is
 * finished from a copy, so that the connection stays in step.
 *
 * Nothing is ever freed (as in the threads communicator): a pool thread of
 * XLA may still wait inside at exit. A transport holds one socket per peer;
 * a communicator, a few words. After fork the child forgets the parent's
 * transports (and closes its copies of their sockets). */
#define _GNU_SOURCE /* struct ucred, accept4, pipe2, SOCK_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/group.h"
#include "common/config.h"
#include "common/proc.h"

#define PC_CALL "processes communicator"
#define ID_TAG "jaxmg-procs-comm"
#define PC_MAGIC 0x6a6d6763u /* "jmgc" */
#define PC_SITE_BYTES 8      /* the call site, at the id's end */
#define PC_BASE_BYTES (JMG_COMM_ID_MAX - PC_SITE_BYTES)
#define PC_WHY_LEN 320

enum { KIND_DATA = 1, KIND_FAIL = 2 };

/* The id: what make_id writes (the rest of the 128 bytes zero). */
typedef struct pc_id {
  char tag[24];
  unsigned char random[16];
  int64_t pid;
} pc_id;
_Static_assert(sizeof(pc_id) + PC_SITE_BYTES <= JMG_COMM_ID_MAX,
               "the id and the call site must fit");

/* What precedes every message on a connection. */
typedef struct pc_head {
  uint32_t magic;
  uint32_t kind;
  uint32_t chan;
  uint32_t pad;
  uint64_t site;
  uint64_t bytes;
} pc_head;

/* The first message of a connection, from the connecting rank; the
 * accepting one answers with its own (from and to swapped). */
typedef struct pc_hello {
  uint32_t magic;
  int32_t from, to, ranks;
  unsigned char base[PC_BASE_BYTES];
} pc_hello;

/* A received message, waiting for its receive. */
typedef struct pc_msg {
  struct pc_msg *next;
  uint64_t site;
  int chan;
  size_t bytes;
  unsigned char *data;
} pc_msg;

/* A queued send. A user's lives in its thread's pending operations; a FAIL
 * message, and a send withdrawn half written, in the heap (owned). */
typedef struct pc_send {
  struct pc_send *next;
  pc_head head;
  const unsigned char *buf;
  size_t done;  /* bytes of head and payload written */
  int busy;     /* the I/O thread is writing from it (unlocked) */
  int finished; /* all written, or dropped with its connection */
  int dropped;  /* finished because the connection was lost */
  int owned;    /* freed (with buf) by the I/O thread when finished */
} pc_send;

typedef struct pc_peer {
  int fd; /* -1: this rank itself, or closed */
  long pid;
  int lost;             /* its connection closed or failed */
  char why[PC_WHY_LEN]; /* lost: the reason */
  pc_send *out_first, *out_last;
  pc_msg *in_first, *in_last;
  /* The message being read (the I/O thread's alone). */
  pc_head in_head;
  size_t in_got;
  unsigned char *in_data;
} pc_peer;

enum { END_CONNECTING, END_READY, END_FAILED };

/* One rank's end of a group's transport. */
typedef struct pc_end {
  unsigned char base[PC_BASE_BYTES];
  int rank, ranks;
  int state;
  char why[PC_WHY_LEN]; /* END_FAILED: the reason */
  pc_peer *peers;       /* [ranks] */
  int fails_queued;     /* FAIL messages not written yet */
  struct jmg_comm *comms;
  struct pc_end *next;
} pc_end;

/* A call site's communicator on an end. */
struct jmg_comm {
  pc_end *end;
  uint64_t site;
  int failed;
  char why[PC_WHY_LEN];
  struct jmg_comm *next;
};

/* The pids told by watch, per group (its base id), kept until exit. */
typedef struct pc_pids {
  unsigned char base[PC_BASE_BYTES];
  int ranks;
  int64_t *pids;
  struct pc_pids *next;
} pc_pids;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pc_pids *g_pids;
static pthread_cond_t g_cv; /* CLOCK_MONOTONIC; made by ensure_io */
static pc_end *g_ends;
static int g_io_started;
static int g_cv_made;
static int g_wake[2] = {-1, -1};
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* ---- small helpers -----------------------------------------------------*/

static void random_bytes(unsigned char *out, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = getrandom(out + got, len - got, 0);
    if (n <= 0) break;
    got += (size_t)n;
  }
  if (got == len) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
               ((uint64_t)getpid() << 12) ^ (uint64_t)(uintptr_t)out;
  for (size_t i = got; i < len; ++i) {
    x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    out[i] = (unsigned char)(x >> 56);
  }
}

/* Milliseconds left until deadline (0 once past). */
static int ms_left(const struct timespec *deadline) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double left = (double)(deadline->tv_sec - now.tv_sec) * 1e3 +
                (double)(deadline->tv_nsec - now.tv_nsec) * 1e-6;
  if (left <= 0) return 0;
  return left > 1e9 ? 1000000000 : (int)left + 1;
}

static double timeout_s(void) {
  jmg_config cfg;
  jmg_config_read(&cfg);
  return cfg.rendezvous_timeout_s;
}

static void hex(const unsigned char *bytes, size_t len, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < len; ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * len] = '\0';
}

/* The abstract address of rank's listening socket in the group of base. */
static socklen_t address(const unsigned char *base, int rank,
                         struct sockaddr_un *sa) {
  pc_id id;
  memcpy(&id, base, sizeof id);
  char random[2 * sizeof id.random + 1];
  hex(id.random, sizeof id.random, random);
  char name[96];
  int len = snprintf(name, sizeof name, "jaxmg-comm-%s-%d", random, rank);
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  memcpy(sa->sun_path + 1, name, (size_t)len); /* sun_path[0] = 0: abstract */
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
}

/* ---- fork --------------------------------------------------------------*/

static void atfork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_mu); }

/* The child has no I/O thread and must not touch its parent's transports
 * (nor keep their connections open, which would hide the parent's death
 * from its peers): it starts afresh. */
static void atfork_child(void) {
  for (pc_end *e = g_ends; e != NULL; e = e->next)
    for (int p = 0; e->peers != NULL && p < e->ranks; ++p)
      if (e->peers[p].fd >= 0) close(e->peers[p].fd);
  if (g_wake[0] >= 0) close(g_wake[0]);
  if (g_wake[1] >= 0) close(g_wake[1]);
  g_wake[0] = g_wake[1] = -1;
  g_ends = NULL;
  g_pids = NULL;
  g_io_started = 0;
  g_cv_made = 0; /* a waiter of the parent's may have left it in use */
  pthread_mutex_init(&g_mu, NULL);
}

static void register_atfork(void) {
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* ---- failure -----------------------------------------------------------*/

static void wake_io(void) {
  if (g_wake[1] < 0) return;
  char byte = 1;
  ssize_t n = write(g_wake[1], &byte, 1); /* full: a wake-up is pending */
  (void)n;
}

/* Queues an owned FAIL message for site to every live peer of e; g_mu
 * held. */
static void tell_peers_locked(pc_end *e, uint64_t site, const char *why) {
  const size_t len = strlen(why) + 1;
  for (int p = 0; p < e->ranks; ++p) {
    pc_peer *q = &e->peers[p];
    if (p == e->rank || q->fd < 0) continue;
    pc_send *s = calloc(1, sizeof *s);
    unsigned char *text = malloc(len);
    if (s == NULL || text == NULL) {
      free(s), free(text);
      continue; /* the peer will time out instead */
    }
    memcpy(text, why, len);
    s->head = (pc_head){
        .magic = PC_MAGIC, .kind = KIND_FAIL, .site = site, .bytes = len};
    s->buf = text;
    s->owned = 1;
    ++e->fails_queued;
    if (q->out_last != NULL)
      q->out_last->next = s;
    else
      q->out_first = s;
    q->out_last = s;
  }
  wake_io();
}

/* Drops the waiting messages of site (it failed: nothing will take them). */
static void drop_site_locked(pc_end *e, uint64_t site) {
  for (int p = 0; p < e->ranks; ++p) {
    pc_peer *q = &e->peers[p];
    pc_msg *prev = NULL, *m = q->in_first;
    while (m != NULL) {
      pc_msg *next = m->next;
      if (m->site == site) {
        if (prev == NULL)
          q->in_first = next;
        else
          prev->next = next;
        if (q->in_last == m) q->in_last = prev;
        free(m->data);
        free(m);
      } else {
        prev = m;
      }
      m = next;
    }
  }
}

/* Marks communicator c failed with why (the first reason stays); tells the
 * peers when the failure is this rank's own. g_mu held. */
static void fail_comm_locked(struct jmg_comm *c, const char *why, int tell) {
  if (!c->failed) {
    c->failed = 1;
    snprintf(c->why, sizeof c->why, "%s", why);
    drop_site_locked(c->end, c->site);
    if (tell) tell_peers_locked(c->end, c->site, c->why);
  }
  pthread_cond_broadcast(&g_cv);
}

/* Marks a transport failed (a connection closed, a protocol error). */
static void fail_end_locked(pc_end *e, const char *why) {
  if (e->state != END_FAILED) {
    e->state = END_FAILED;
    snprintf(e->why, sizeof e->why, "%s", why);
  }
  pthread_cond_broadcast(&g_cv);
}

/* The error of an operation on a failed communicator or transport. */
static int failed_error(const struct jmg_comm *c, const char *op,
                        jmg_error *err) {
  if (c->end->state == END_FAILED)
    return jmg_error_set(err, JMG_EPEER, op, PC_CALL, "rank %d: %s",
                         c->end->rank, c->end->why);
  return jmg_error_set(err, JMG_EPEER, op, PC_CALL,
                       "rank %d: the communicator failed earlier and cannot "
                       "be used again in this process: %s",
                       c->end->rank, c->why);
}

static int comm_failed(const struct jmg_comm *c) {
  return c->failed || c->end->state == END_FAILED;
}

/* The error of an operation with peer p, whose connection was lost. */
static int lost_error(const struct jmg_comm *c, int p, const char *op,
                      jmg_error *err) {
  return jmg_error_set(err, JMG_EPEER, op, PC_CALL, "rank %d: %s", c->end->rank,
                       c->end->peers[p].why);
}

/* The communicator of site on e, made if new (a FAIL may come before this
 * rank reaches the call site). NULL without memory. g_mu held. */
static struct jmg_comm *comm_of_locked(pc_end *e, uint64_t site) {
  for (struct jmg_comm *c = e->comms; c != NULL; c = c->next)
    if (c->site == site) return c;
  struct jmg_comm *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->end = e;
  c->site = site;
  c->next = e->comms;
  e->comms = c;
  return c;
}

/* ---- the I/O thread ----------------------------------------------------*/

/* A connection that closed or failed: the peer is lost (every later
 * operation with it fails; what it sent before stays to be received); its
 * queued sends are dropped. g_mu held; called by the I/O thread only. */
static void lose_peer_locked(pc_end *e, int p, const char *what) {
  pc_peer *q = &e->peers[p];
  if (!q->lost) {
    q->lost = 1;
    snprintf(q->why, sizeof q->why,
             "the connection to rank %d (pid %ld) %s: its process exited or "
             "was killed",
             p, q->pid, what);
  }
  if (q->fd >= 0) close(q->fd);
  q->fd = -1;
  for (pc_send *s = q->out_first; s != NULL;) {
    pc_send *next = s->next;
    s->finished = 1;
    s->dropped = 1;
    if (s->head.kind == KIND_FAIL) --e->fails_queued;
    if (s->owned) {
      free((void *)s->buf);
      free(s);
    }
    s = next;
  }
  q->out_first = q->out_last = NULL;
  free(q->in_data);
  q->in_data = NULL;
  q->in_got = 0;
  (void)e;
  pthread_cond_broadcast(&g_cv);
}

/* A message has arrived whole: queue it (DATA) or fail its call site
 * (FAIL). g_mu held. */
static void arrived_locked(pc_end *e, int p) {
  pc_peer *q = &e->peers[p];
  const pc_head h = q->in_head;
  unsigned char *data = q->in_data;
  q->in_data = NULL;
  q->in_got = 0;
  struct jmg_comm *c = comm_of_locked(e, h.site);
  if (h.kind == KIND_FAIL) {
    if (c != NULL && !c->failed) {
      char why[PC_WHY_LEN];
      snprintf(why, sizeof why, "rank %d (pid %ld) failed: %.*s", p, q->pid,
               (int)(h.bytes ? h.bytes - 1 : 0), (const char *)data);
      fail_comm_locked(c, why, 0);
    }
    free(data);
    return;
  }
  pc_msg *m = c != NULL && !c->failed ? calloc(1, sizeof *m) : NULL;
  if (m == NULL) { /* a failed call site's: nobody will take it */
    free(data);
    return;
  }
  m->site = h.site;
  m->chan = (int)h.chan;
  m->bytes = (size_t)h.bytes;
  m->data = data;
  if (q->in_last != NULL)
    q->in_last->next = m;
  else
    q->in_first = m;
  q->in_last = m;
  pthread_cond_broadcast(&g_cv);
}

/* Reads what peer p sent, as far as the socket has it. */
static void read_some(pc_end *e, int p) {
  pc_peer *q = &e->peers[p];
  for (;;) {
    const int fd = q->fd;
    if (fd < 0) return;
    void *into;
    size_t want;
    if (q->in_got < sizeof q->in_head) {
      into = (char *)&q->in_head + q->in_got;
      want = sizeof q->in_head - q->in_got;
    } else {
      const size_t got = q->in_got - sizeof q->in_head;
      into = q->in_data + got;
      want = (size_t)q->in_head.bytes - got;
    }
    ssize_t n = want > 0 ? recv(fd, into, want, MSG_DONTWAIT) : 0;
    if (want > 0 && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (want > 0 && n < 0 && errno == EINTR) continue;
    if (want > 0 && n <= 0) {
      pthread_mutex_lock(&g_mu);
      lose_peer_locked(e, p, n == 0 ? "closed" : "failed");
      pthread_mutex_unlock(&g_mu);
      return;
    }
    q->in_got += (size_t)(n > 0 ? n : 0);
    if (q->in_got == sizeof q->in_head && q->in_data == NULL) {
      const pc_head h = q->in_head;
      if (h.magic != PC_MAGIC || (h.kind != KIND_DATA && h.kind != KIND_FAIL)) {
        pthread_mutex_lock(&g_mu);
        lose_peer_locked(e, p, "sent a message that is not the protocol's");
        pthread_mutex_unlock(&g_mu);
        return;
      }
      q->in_data = malloc(h.bytes ? (size_t)h.bytes : 1);
      if (q->in_data == NULL) {
        pthread_mutex_lock(&g_mu);
        lose_peer_locked(e, p, "sent more than this process can hold");
        pthread_mutex_unlock(&g_mu);
        return;
      }
    }
    if (q->in_data != NULL &&
        q->in_got == sizeof q->in_head + (size_t)q->in_head.bytes) {
      pthread_mutex_lock(&g_mu);
      arrived_locked(e, p);
      pthread_mutex_unlock(&g_mu);
    }
  }
}

/* Writes peer p's queued sends, as far as the socket takes them. */
static void write_some(pc_end *e, int p) {
  pc_peer *q = &e->peers[p];
  for (;;) {
    pthread_mutex_lock(&g_mu);
    pc_send *s = q->out_first;
    if (s == NULL || q->fd < 0) {
      pthread_mutex_unlock(&g_mu);
      return;
    }
    s->busy = 1;
    const int fd = q->fd;
    const size_t done = s->done;
    pthread_mutex_unlock(&g_mu);
    struct iovec iov[2];
    int cnt = 0;
    const size_t hb = sizeof s->head, total = hb + (size_t)s->head.bytes;
    if (done < hb) {
      iov[cnt].iov_base = (char *)&s->head + done;
      iov[cnt++].iov_len = hb - done;
    }
    if (s->head.bytes > 0) {
      const size_t from = done > hb ? done - hb : 0;
      iov[cnt].iov_base = (void *)(s->buf + from);
      iov[cnt++].iov_len = (size_t)s->head.bytes - from;
    }
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)cnt;
    ssize_t n = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    const int errnum = errno;
    pthread_mutex_lock(&g_mu);
    s->busy = 0;
    if (n < 0 &&
        (errnum == EAGAIN || errnum == EWOULDBLOCK || errnum == EINTR)) {
      pthread_cond_broadcast(&g_cv); /* a withdrawal may wait for busy */
      pthread_mutex_unlock(&g_mu);
      if (errnum == EINTR) continue;
      return;
    }
    if (n < 0) {
      lose_peer_locked(e, p, "failed");
      pthread_mutex_unlock(&g_mu);
      return;
    }
    s->done += (size_t)n;
    if (s->done == total) {
      q->out_first = s->next;
      if (q->out_first == NULL) q->out_last = NULL;
      s->next = NULL;
      s->finished = 1;
      if (s->head.kind == KIND_FAIL) --e->fails_queued;
      if (s->owned) {
        free((void *)s->buf);
        free(s);
      }
    }
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
  }
}

typedef struct pc_watch {
  pc_end *end;
  int peer;
} pc_watch;

static void *io_main(void *arg) {
  (void)arg;
  struct pollfd *fds = NULL;
  pc_watch *who = NULL;
  size_t cap = 0;
  for (;;) {
    pthread_mutex_lock(&g_mu);
    size_t n = 1;
    for (pc_end *e = g_ends; e != NULL; e = e->next)
      if (e->state != END_CONNECTING) n += (size_t)e->ranks;
    if (n > cap) {
      struct pollfd *f = realloc(fds, n * sizeof *f);
      if (f != NULL) fds = f;
      pc_watch *w = realloc(who, n * sizeof *w);
      if (w != NULL) who = w;
      if (f != NULL && w != NULL) cap = n;
    }
    size_t k = 0;
    if (cap > 0) {
      fds[k++] = (struct pollfd){.fd = g_wake[0], .events = POLLIN};
      for (pc_end *e = g_ends; e != NULL; e = e->next) {
        if (e->state == END_CONNECTING) continue;
        for (int p = 0; p < e->ranks && k < cap; ++p) {
          const pc_peer *q = &e->peers[p];
          if (q->fd < 0) continue;
          fds[k] = (struct pollfd){
              .fd = q->fd,
              .events = (short)(POLLIN | (q->out_first ? POLLOUT : 0))};
          who[k++] = (pc_watch){e, p};
        }
      }
    }
    pthread_mutex_unlock(&g_mu);
    if (k == 0) { /* no memory for the poll set: try again shortly */
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
      continue;
    }
    if (poll(fds, (nfds_t)k, -1) < 0) continue; /* EINTR */
    if (fds[0].revents != 0) {
      char sink[64];
      while (read(g_wake[0], sink, sizeof sink) > 0) {
      }
    }
    for (size_t i = 1; i < k; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
        read_some(who[i].end, who[i].peer);
      if (fds[i].revents & POLLOUT) write_some(who[i].end, who[i].peer);
    }
  }
  return NULL;
}

/* Starts the I/O thread once per process (again in a forked child). */
static int ensure_io_locked(const char *op, jmg_error *err) {
  if (g_io_started) return 0;
  if (!g_cv_made) {
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0 ||
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&g_cv, &attr) != 0)
      return jmg_error_set(err, JMG_EINTERNAL, op, PC_CALL,
                           "cannot make a condition variable");
    pthread_condattr_destroy(&attr);
    g_cv_made = 1;
  }
  if (pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    g_wake[0] = g_wake[1] = -1;
    return jmg_error_sys(err, jmg_errno_status(errno), op, "pipe2", errno,
                         "the communicator's wake-up pipe");
  }
  pthread_attr_t attr;
  pthread_t t;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (rc == 0) rc = pthread_create(&t, &attr, io_main, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    close(g_wake[0]), close(g_wake[1]);
    g_wake[0] = g_wake[1] = -1;
    return jmg_error_sys(err, JMG_EINTERNAL, op, "pthread_create", rc,
                         "the communicator's I/O thread");
  }
  g_io_started = 1;
  return 0;
}

/* ---- ids ---------------------------------------------------------------*/

static int pc_make_id(void *id, const char *op, jmg_error *err) {
  (void)op, (void)err;
  pc_id made;
  memset(&made, 0, sizeof made);
  snprintf(made.tag, sizeof made.tag, "%s", ID_TAG);
  random_bytes(made.random, sizeof made.random);
  made.pid = (int64_t)getpid();
  memset(id, 0, JMG_COMM_ID_MAX);
  memcpy(id, &made, sizeof made);
  return 0;
}

int jmg_comm_processes_id(const void *id) {
  return memcmp(id, ID_TAG, sizeof ID_TAG) == 0;
}

/* ---- setting up a transport --------------------------------------------*/

static void pc_watch_pids(const void *id, int ranks, const int64_t *pids) {
  if (ranks < 1 || pids == NULL) return;
  pthread_once(&g_atfork_once, register_atfork);
  pthread_mutex_lock(&g_mu);
  pc_pids *w = g_pids;
  while (w != NULL && memcmp(w->base, id, PC_BASE_BYTES) != 0) w = w->next;
  if (w == NULL || w->ranks != ranks) {
    pc_pids *made = calloc(1, sizeof *made);
    int64_t *copy = calloc((size_t)ranks, sizeof *copy);
    if (made == NULL || copy == NULL) { /* nothing to watch: the timeout */
      free(made), free(copy);
      pthread_mutex_unlock(&g_mu);
      return;
    }
    memcpy(made->base, id, PC_BASE_BYTES);
    made->ranks = ranks;
    made->pids = copy;
    made->next = g_pids;
    g_pids = w = made;
  }
  memcpy(w->pids, pids, (size_t)ranks * sizeof *pids);
  pthread_mutex_unlock(&g_mu);
}

/* The pid of rank p's process as watch told it (0: unknown). */
static int64_t watched_pid(const pc_end *e, int p) {
  int64_t pid = 0;
  pthread_mutex_lock(&g_mu);
  for (const pc_pids *w = g_pids; w != NULL; w = w->next)
    if (w->ranks == e->ranks && memcmp(w->base, e->base, PC_BASE_BYTES) == 0)
      pid = w->pids[p];
  pthread_mutex_unlock(&g_mu);
  return pid;
}

/* A rank not connected yet whose watched process is gone (the one waited
 * for, or any other: a rank that saw it gone gave up its set-up, and those
 * that wait for that rank must not wait for the timeout); -1 if none. */
static int gone_rank(const pc_end *e, int64_t *pid) {
  for (int q = 0; q < e->ranks; ++q) {
    if (q == e->rank || e->peers[q].fd >= 0) continue;
    *pid = watched_pid(e, q);
    if (*pid > 0 && !jmg_proc_alive((pid_t)*pid)) return q;
  }
  return -1;
}

/* The error for rank p, whose process is gone before it opened. */
static int gone_error(const pc_end *e, int p, int64_t pid, const char *op,
                      jmg_error *err) {
  return jmg_error_set(err, JMG_EPEER, op, PC_CALL,
                       "rank %d of %d: the process of rank %d (pid %lld) is "
                       "gone: it exited or was killed before it opened the "
                       "communicator",
                       e->rank, e->ranks, p, (long long)pid);
}

/* Writes or reads all of len bytes on a blocking-or-not socket by the
 * deadline: 0, or -1 with errno (ETIMEDOUT at the deadline, EPIPE for a
 * connection closed while reading). */
static int xfer_all(int fd, void *buf, size_t len, int writing,
                    const struct timespec *deadline) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = writing
                    ? send(fd, (char *)buf + done, len - done,
                           MSG_DONTWAIT | MSG_NOSIGNAL)
                    : recv(fd, (char *)buf + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == 0) {
      errno = EPIPE;
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    const int left = ms_left(deadline);
    if (left == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    struct pollfd p = {fd, writing ? POLLOUT : POLLIN, 0};
    (void)poll(&p, 1, left);
  }
  return 0;
}

static long peer_pid(int fd) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.uid == getuid() ? (long)cred.pid : -1;
}

static void hello_of(const pc_end *e, int to, pc_hello *h) {
  memset(h, 0, sizeof *h);
  h->magic = PC_MAGIC;
  h->from = e->rank;
  h->to = to;
  h->ranks = e->ranks;
  memcpy(h->base, e->base, PC_BASE_BYTES);
}

static int hello_ok(const pc_end *e, const pc_hello *h, int from) {
  return h->magic == PC_MAGIC && h->to == e->rank && h->ranks == e->ranks &&
         h->from >= 0 && h->from < e->ranks && (from < 0 || h->from == from) &&
         memcmp(h->base, e->base, PC_BASE_BYTES) == 0;
}

/* Connects to rank `to` (lower than this rank), retrying until it listens,
 * and says hello. */
static int connect_lower(pc_end *e, int to, const struct timespec *deadline,
                         const char *op, jmg_error *err) {
  struct sockaddr_un sa;
  const socklen_t len = address(e->base, to, &sa);
  long pause_us = 500;
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return jmg_error_sys(err, jmg_errno_status(errno), op, "socket", errno,
                           "a connection of the communicator");
    if (connect(fd, (struct sockaddr *)&sa, len) == 0) {
      const long pid = peer_pid(fd);
      pc_hello h;
      hello_of(e, to, &h);
      if (pid < 0) {
        close(fd);
        return jmg_error_set(err, JMG_EINVAL, op, PC_CALL,
                             "rank %d's socket belongs to another user", to);
      }
      if (xfer_all(fd, &h, sizeof h, 1, deadline) != 0) {
        const int errnum = errno;
        close(fd);
        if (errnum == ETIMEDOUT) break;
        return jmg_error_sys(err, JMG_EPEER, op, "send", errnum,
                             "the hello to a lower rank");
      }
      e->peers[to].fd = fd;
      e->peers[to].pid = pid;
      return 0;
    }
    const int errnum = errno;
    close(fd);
    if (errnum != ECONNREFUSED && errnum != ENOENT && errnum != EAGAIN &&
        errnum != EINTR)
      return jmg_error_sys(err, jmg_errno_status(errnum), op, "connect", errnum,
                           "a connection of the communicator");
    if (ms_left(deadline) == 0) break;
    int64_t pid = 0;
    const int gone = gone_rank(e, &pid);
    if (gone >= 0) return gone_error(e, gone, pid, op, err);
    struct timespec ts = {0, pause_us * 1000};
    nanosleep(&ts, NULL);
    if (pause_us < 20000) pause_us *= 2;
  }
  return jmg_error_set(err, JMG_ETIMEDOUT, op, PC_CALL,
                       "rank %d of %d waited %.3g s for rank %d to open the "
                       "communicator, which it never did (every process must "
                       "make the same jaxmg calls; JAXMG_RENDEZVOUS_TIMEOUT "
                       "sets the wait)",
                       e->rank, e->ranks, timeout_s(), to);
}

/* Sets up e's connections (outside g_mu): listen, connect to the lower
 * ranks, accept the higher ones, exchange hellos. */
static int connect_end(pc_end *e, const char *op, jmg_error *err) {
  const struct timespec deadline = jmg_deadline_after(timeout_s());
  int lfd = -1, rc = 0;
  if (e->rank < e->ranks - 1) { /* someone will connect to us */
    struct sockaddr_un sa;
    const socklen_t len = address(e->base, e->rank, &sa);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lfd < 0)
      return jmg_error_sys(err, jmg_errno_status(errno), op, "socket", errno,
                           "the communicator's listening socket");
    if (bind(lfd, (struct sockaddr *)&sa, len) != 0) {
      const int errnum = errno;
      close(lfd);
      if (errnum == EADDRINUSE)
        return jmg_error_set(err, JMG_EINVAL, op, PC_CALL,
                             "rank %d of this communicator is open in another "
                             "process already (each rank is opened once)",
                             e->rank);
      return jmg_error_sys(err, jmg_errno_status(errnum), op, "bind", errnum,
                           "the communicator's listening socket");
    }
    if (listen(lfd, e->ranks) != 0) {
      const int errnum = errno;
      close(lfd);
      return jmg_error_sys(err, jmg_errno_status(errnum), op, "listen", errnum,
                           "the communicator's listening socket");
    }
  }
  for (int p = 0; rc == 0 && p < e->rank; ++p)
    rc = connect_lower(e, p, &deadline, op, err);
  /* The higher ranks, in whatever order they come. */
  int missing = e->ranks - 1 - e->rank;
  while (rc == 0 && missing > 0) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
          errno != ECONNABORTED) {
        rc = jmg_error_sys(err, jmg_errno_status(errno), op, "accept", errno,
                           "a connection of the communicator");
        break;
      }
      const int left = ms_left(&deadline);
      if (left == 0) {
        char who[160] = "";
        size_t used = 0;
        for (int p = e->rank + 1; p < e->ranks && used + 12 < sizeof who; ++p)
          if (e->peers[p].fd < 0)
            used += (size_t)snprintf(who + used, sizeof who - used, "%s%d",
                                     used ? ", " : "", p);
        rc = jmg_error_set(
            err, JMG_ETIMEDOUT, op, PC_CALL,
            "rank %d of %d waited %.3g s for rank(s) %s to open the "
            "communicator, which they never did (every process must make "
            "the same jaxmg calls; JAXMG_RENDEZVOUS_TIMEOUT sets the wait)",
            e->rank, e->ranks, timeout_s(), who);
        break;
      }
      int64_t pid = 0;
      const int gone = gone_rank(e, &pid);
      if (gone >= 0) {
        rc = gone_error(e, gone, pid, op, err);
        break;
      }
      struct pollfd p = {lfd, POLLIN, 0};
      (void)poll(&p, 1, left < 100 ? left : 100);
      continue;
    }
    const long pid = peer_pid(fd);
    pc_hello h;
    if (pid < 0 || xfer_all(fd, &h, sizeof h, 0, &deadline) != 0 ||
        !hello_ok(e, &h, -1) || h.from <= e->rank || e->peers[h.from].fd >= 0) {
      close(fd); /* not one of ours: another user, or a stray connection */
      continue;
    }
    pc_hello back;
    hello_of(e, h.from, &back);
    if (xfer_all(fd, &back, sizeof back, 1, &deadline) != 0) {
      close(fd);
      continue;
    }
    e->peers[h.from].fd = fd;
    e->peers[h.from].pid = pid;
    --missing;
  }
  if (lfd >= 0) close(lfd); /* its name goes with it */
  /* The lower ranks' answers. */
  for (int p = 0; rc == 0 && p < e->rank; ++p) {
    pc_hello h;
    if (xfer_all(e->peers[p].fd, &h, sizeof h, 0, &deadline) != 0 ||
        !hello_ok(e, &h, p))
      rc = jmg_error_set(err, errno == ETIMEDOUT ? JMG_ETIMEDOUT : JMG_EPEER,
                         op, PC_CALL,
                         "rank %d of %d: rank %d (pid %ld) did not answer its "
                         "hello within %.3g s (JAXMG_RENDEZVOUS_TIMEOUT)",
                         e->rank, e->ranks, p, e->peers[p].pid, timeout_s());
  }
  for (int p = 0; rc == 0 && p < e->ranks; ++p) {
    const int fd = e->peers[p].fd;
    if (fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
      rc = jmg_error_sys(err, jmg_errno_status(errno), op, "fcntl", errno,
                         "a connection of the communicator");
  }
  if (rc != 0)
    for (int p = 0; p < e->ranks; ++p)
      if (e->peers[p].fd >= 0) {
        close(e->peers[p].fd);
        e->peers[p].fd = -1;
      }
  return rc;
}

static int pc_open(const void *id, int rank, int ranks, void *device_ctx,
                   jmg_comm **out, const char *op, jmg_error *err) {
  (void)device_ctx;
  *out = NULL;
  if (!jmg_comm_processes_id(id))
    return jmg_error_set(err, JMG_EINVAL, op, PC_CALL,
                         "the id was not made by the processes communicator "
                         "(jaxmg_comm_new_id_processes of the CPU library)");
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return jmg_error_set(err, JMG_EINVAL, op, PC_CALL, "rank %d of %d ranks",
                         rank, ranks);
  pthread_once(&g_atfork_once, register_atfork);
  uint64_t site;
  memcpy(&site, (const unsigned char *)id + PC_BASE_BYTES, sizeof site);
  pthread_mutex_lock(&g_mu);
  int rc = ensure_io_locked(op, err);
  if (rc != 0) {
    pthread_mutex_unlock(&g_mu);
    return rc;
  }
  pc_end *e = g_ends;
  while (e != NULL &&
         (e->rank != rank || memcmp(e->base, id, PC_BASE_BYTES) != 0))
    e = e->next;
  int mine = 0;
  if (e == NULL) {
    e = calloc(1, sizeof *e);
    pc_peer *peers = calloc((size_t)ranks, sizeof *peers);
    if (e == NULL || peers == NULL) {
      free(e), free(peers);
      pthread_mutex_unlock(&g_mu);
      return jmg_error_set(err, JMG_ENOMEM, op, PC_CALL,
                           "cannot allocate a communicator of %d ranks", ranks);
    }
    memcpy(e->base, id, PC_BASE_BYTES);
    e->rank = rank;
    e->ranks = ranks;
    e->state = END_CONNECTING;
    e->peers = peers;
    for (int p = 0; p < ranks; ++p) peers[p].fd = -1;
    peers[rank].pid = (long)getpid();
    e->next = g_ends;
    g_ends = e;
    mine = 1;
  }
  if (e->ranks != ranks) {
    pthread_mutex_unlock(&g_mu);
    return jmg_error_set(err, JMG_EINVAL, op, PC_CALL,
                         "the communicator of this id was opened for %d "
                         "ranks, not %d",
                         e->ranks, ranks);
  }
  if (mine) { /* this thread sets the transport up; others wait for it */
    pthread_mutex_unlock(&g_mu);
    jmg_error cerr;
    jmg_error_clear(&cerr);
    int crc = e->ranks > 1 ? connect_end(e, op, &cerr) : 0;
    pthread_mutex_lock(&g_mu);
    if (crc != 0) {
      char why[PC_WHY_LEN];
      snprintf(why, sizeof why, "setting up the communicator failed: %.280s",
               cerr.msg);
      fail_end_locked(e, why);
      jmg_error_copy(err, &cerr);
      pthread_mutex_unlock(&g_mu);
      return crc;
    }
    e->state = END_READY;
    pthread_cond_broadcast(&g_cv);
    wake_io();
  } else {
    const struct timespec deadline = jmg_deadline_after(timeout_s() + 1.0);
    while (e->state == END_CONNECTING &&
           pthread_cond_timedwait(&g_cv, &g_mu, &deadline) != ETIMEDOUT) {
    }
  }
  if (e->state != END_READY) {
    rc = e->state == END_FAILED
             ? jmg_error_set(err, JMG_EPEER, op, PC_CALL, "rank %d: %s",
                             e->rank, e->why)
             : jmg_error_set(err, JMG_ETIMEDOUT, op, PC_CALL,
                             "rank %d: the communicator's set-up by another "
                             "thread did not end",
                             e->rank);
    pthread_mutex_unlock(&g_mu);
    return rc;
  }
  struct jmg_comm *c = comm_of_locked(e, site);
  pthread_mutex_unlock(&g_mu);
  if (c == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, PC_CALL,
                         "cannot allocate a communicator");
  *out = c;
  return 0;
}

static void *pc_native(jmg_comm *c) { return c; }

/* ---- pending operations (per thread: comm/group.h) -------------------*/

typedef struct pc_op {
  jmg_group_op base;
  pc_send node; /* a send's, once queued */
  int queued;
} pc_op;

static _Thread_local jmg_group g_pend;

static jmg_group *pc_pending(void) { return &g_pend; }
static int pc_ranks(const jmg_comm *c) { return c->end->ranks; }
static int pc_rank(const jmg_comm *c) { return c->end->rank; }

/* ---- running a group ---------------------------------------------------*/

/* The first message of (site, chan) from peer p of e, unlinked; NULL if
 * none yet. g_mu held. */
static pc_msg *take_locked(pc_end *e, int p, uint64_t site, int chan) {
  pc_peer *q = &e->peers[p];
  pc_msg *prev = NULL;
  for (pc_msg *m = q->in_first; m != NULL; prev = m, m = m->next) {
    if (m->site != site || m->chan != chan) continue;
    if (prev == NULL)
      q->in_first = m->next;
    else
      prev->next = m->next;
    if (q->in_last == m) q->in_last = prev;
    m->next = NULL;
    return m;
  }
  return NULL;
}

/* Takes a queued send back after a failure: unlinked if nothing of it was
 * written, else finished from a copy by the I/O thread (the connection
 * must stay in step). g_mu held. */
static void withdraw_locked(pc_end *e, int p, pc_send *s) {
  while (s->busy) pthread_cond_wait(&g_cv, &g_mu);
  if (s->finished) return;
  pc_peer *q = &e->peers[p];
  pc_send *prev = NULL, *n = q->out_first;
  while (n != NULL && n != s) prev = n, n = n->next;
  if (n == NULL) return;
  pc_send *copy = NULL;
  unsigned char *rest = NULL;
  if (s->done > 0) {
    copy = malloc(sizeof *copy);
    rest = malloc(s->head.bytes ? (size_t)s->head.bytes : 1);
    if (copy != NULL && rest != NULL) {
      *copy = *s;
      if (s->head.bytes > 0) memcpy(rest, s->buf, (size_t)s->head.bytes);
      copy->buf = rest;
      copy->owned = 1;
    } else { /* out of step for good: the transport cannot go on */
      free(copy), free(rest);
      copy = NULL;
      fail_end_locked(e,
                      "a message half sent was lost (out of memory): "
                      "the communicator cannot go on");
    }
  }
  if (copy != NULL) {
    if (prev == NULL)
      q->out_first = copy;
    else
      prev->next = copy;
    if (q->out_last == s) q->out_last = copy;
  } else {
    if (prev == NULL)
      q->out_first = s->next;
    else
      prev->next = s->next;
    if (q->out_last == s) q->out_last = prev;
  }
  s->finished = 1;
}

/* Fails o's communicator for a failure of this rank's own (err): its peers
 * are told. g_mu held. */
static void fail_own_locked(jmg_comm *c, const jmg_error *err) {
  char why[PC_WHY_LEN];
  jmg_error_format(err, why, sizeof why);
  fail_comm_locked(c, why, 1);
}

static int run_group(jmg_group *g, const char *op, jmg_error *err) {
  const double timeout = timeout_s();
  const struct timespec deadline = jmg_deadline_after(timeout);
  int rc = 0;
  jmg_comm *bad = NULL; /* the communicator whose operation failed */
  pthread_mutex_lock(&g_mu);
  /* 1. Queue every send (one to itself is delivered at once). */
  for (size_t i = 0; rc == 0 && i < g->count; ++i) {
    pc_op *o = jmg_group_op_at(g, i);
    const jmg_group_op *b = &o->base;
    if (!b->send) continue;
    jmg_comm *c = b->c;
    pc_end *e = c->end;
    if (comm_failed(c) || e->peers[b->peer].lost) {
      rc = comm_failed(c) ? failed_error(c, op, err)
                          : lost_error(c, b->peer, op, err);
      bad = c;
      break;
    }
    if (b->peer == e->rank) {
      pc_msg *m = calloc(1, sizeof *m);
      unsigned char *data = malloc(b->bytes ? b->bytes : 1);
      if (m == NULL || data == NULL) {
        free(m), free(data);
        rc = jmg_error_set(err, JMG_ENOMEM, op, PC_CALL,
                           "cannot copy a message of %zu bytes to itself",
                           b->bytes);
        bad = c;
        break;
      }
      if (b->bytes > 0) memcpy(data, b->buf, b->bytes);
      *m = (pc_msg){
          .site = c->site, .chan = b->chan, .bytes = b->bytes, .data = data};
      pc_peer *q = &e->peers[e->rank];
      if (q->in_last != NULL)
        q->in_last->next = m;
      else
        q->in_first = m;
      q->in_last = m;
      continue;
    }
    o->node = (pc_send){.head = {.magic = PC_MAGIC,
                                 .kind = KIND_DATA,
                                 .chan = (uint32_t)b->chan,
                                 .site = c->site,
                                 .bytes = b->bytes},
                        .buf = b->buf};
    pc_peer *q = &e->peers[b->peer];
    if (q->out_last != NULL)
      q->out_last->next = &o->node;
    else
      q->out_first = &o->node;
    q->out_last = &o->node;
    o->queued = 1;
  }
  wake_io();
  /* 2. Every receive, in issue order. */
  for (size_t i = 0; rc == 0 && i < g->count; ++i) {
    pc_op *o = jmg_group_op_at(g, i);
    const jmg_group_op *b = &o->base;
    if (b->send) continue;
    jmg_comm *c = b->c;
    pc_end *e = c->end;
    pc_msg *m = NULL;
    while (rc == 0 && (m = take_locked(e, b->peer, c->site, b->chan)) == NULL) {
      if (comm_failed(c)) {
        rc = failed_error(c, op, err);
        bad = c;
      } else if (e->peers[b->peer].lost) {
        rc = lost_error(c, b->peer, op, err);
        bad = c;
      } else if (pthread_cond_timedwait(&g_cv, &g_mu, &deadline) == ETIMEDOUT) {
        if ((m = take_locked(e, b->peer, c->site, b->chan)) != NULL) break;
        rc = jmg_error_set(
            err, JMG_ETIMEDOUT, op, PC_CALL,
            "rank %d waited %.3g s for a %s from rank %d (pid %ld), which "
            "never came (every process must make the same jaxmg calls; "
            "JAXMG_RENDEZVOUS_TIMEOUT sets the wait)",
            e->rank, timeout, jmg_group_chan_name(b->chan), b->peer,
            e->peers[b->peer].pid);
        bad = c;
        fail_own_locked(c, err);
      }
    }
    if (rc != 0) break;
    if (m->bytes != b->bytes) {
      rc = jmg_error_set(err, JMG_EINTERNAL, op, PC_CALL,
                         "rank %d's %s of %zu bytes from rank %d met one of "
                         "%zu bytes",
                         e->rank, jmg_group_chan_name(b->chan), b->bytes,
                         b->peer, m->bytes);
      bad = c;
      fail_own_locked(c, err);
    } else if (b->bytes > 0) {
      pthread_mutex_unlock(&g_mu);
      memcpy(b->buf, m->data, b->bytes);
      pthread_mutex_lock(&g_mu);
    }
    free(m->data);
    free(m);
  }
  /* 3. Every queued send written (or withdrawn, after a failure). */
  for (size_t i = 0; i < g->count; ++i) {
    pc_op *o = jmg_group_op_at(g, i);
    const jmg_group_op *b = &o->base;
    if (!b->send || !o->queued) continue;
    jmg_comm *c = b->c;
    pc_end *e = c->end;
    while (rc == 0 && !o->node.finished) {
      if (comm_failed(c)) {
        rc = failed_error(c, op, err);
        bad = c;
      } else if (pthread_cond_timedwait(&g_cv, &g_mu, &deadline) == ETIMEDOUT &&
                 !o->node.finished) {
        rc = jmg_error_set(
            err, JMG_ETIMEDOUT, op, PC_CALL,
            "rank %d waited %.3g s for rank %d (pid %ld) to take its %s, "
            "which it never did (JAXMG_RENDEZVOUS_TIMEOUT sets the wait)",
            e->rank, timeout, b->peer, e->peers[b->peer].pid,
            jmg_group_chan_name(b->chan));
        bad = c;
        fail_own_locked(c, err);
      }
    }
    if (rc == 0 && o->node.dropped) {
      rc = lost_error(c, b->peer, op, err);
      bad = c;
    }
    if (!o->node.finished) withdraw_locked(e, b->peer, &o->node);
  }
  /* A peer's death or failure: this call site fails, and the peers that
   * wait for this rank hear of it now rather than at their timeout. */
  if (rc != 0 && bad != NULL && !bad->failed) fail_own_locked(bad, err);
  /* Told peers hear it even if this process exits right after the error:
   * the FAIL messages are written before it returns (within a second). */
  if (rc != 0 && bad != NULL) {
    const struct timespec soon = jmg_deadline_after(1.0);
    while (bad->end->fails_queued > 0 &&
           pthread_cond_timedwait(&g_cv, &g_mu, &soon) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static const jmg_group_transport g_transport = {
    .call = PC_CALL,
    .op_bytes = sizeof(pc_op),
    .pending = pc_pending,
    .ranks = pc_ranks,
    .rank = pc_rank,
    .run = run_group,
};

static int pc_group_begin(const char *op, jmg_error *err) {
  return jmg_group_begin(&g_transport, op, err);
}

static int pc_group_end(const char *op, jmg_error *err) {
  return jmg_group_end(&g_transport, op, err);
}

static int pc_send_op(jmg_comm *c, const void *buf, size_t bytes, int peer,
                      void *device_ctx, const char *op, jmg_error *err) {
  (void)device_ctx;
  return jmg_group_send(&g_transport, c, buf, bytes, peer, op, err);
}

static int pc_recv_op(jmg_comm *c, void *buf, size_t bytes, int peer,
                      void *device_ctx, const char *op, jmg_error *err) {
  (void)device_ctx;
  return jmg_group_recv(&g_transport, c, buf, bytes, peer, op, err);
}

static int pc_bcast(jmg_comm *c, void *buf, size_t bytes, int root,
                    void *device_ctx, const char *op, jmg_error *err) {
  (void)device_ctx;
  return jmg_group_bcast(&g_transport, c, buf, bytes, root, op, err);
}

static int pc_max_int(jmg_comm *c, int *value, void *device_ctx, const char *op,
                      jmg_error *err) {
  (void)device_ctx;
  return jmg_group_max_int(&g_transport, c, value, op, err);
}

static const jmg_comm_ops g_processes_ops = {
    .name = "processes",
    .id_bytes = sizeof(pc_id), /* make_id zeroes the rest of the 128 */
    .per_call_site = 1,
    .make_id = pc_make_id,
    .open = pc_open,
    .watch = pc_watch_pids,
    .native = pc_native,
    .max_int = pc_max_int,
    .bcast = pc_bcast,
    .group_begin = pc_group_begin,
    .group_end = pc_group_end,
    .send = pc_send_op,
    .recv = pc_recv_op,
};

const jmg_comm_ops *jmg_processes_comm(void) { return &g_processes_ops; }
