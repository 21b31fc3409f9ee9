/* The rendezvous for threads of one process (SPMD on GPUs, and CPU devices):
 * the mechanism only; keys, messages, outcomes and time are the core's
 * (core.h).
 *
 * One global list of open calls ("sessions") under one mutex. A session is
 * created by its first participant and freed by its last to leave. A failed
 * session leaves a tombstone behind, so that participants arriving after the
 * failure fail at once instead of waiting for a timeout of their own.
 *
 * Participants join blocking (join: their thread waits) or asynchronously
 * (join_async: a callback reports the end). Asynchronous participants are
 * released by whichever thread ends the call; a watchdog thread, started with
 * the first asynchronous join, enforces their timeout. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rendezvous/core.h"
#include "rendezvous/rendezvous.h"

typedef jmg_rdv_ident ident;

typedef struct session {
  struct session *next;
  ident id;
  int arrived; /* participants that have posted */
  int inside;  /* participants still inside join() */
  int listed;  /* still in the list of open sessions */
  jmg_rdv_outcome out;
  void **posts;
  unsigned char *present;
  pthread_cond_t cv;
  /* The leader's op (shard 0's), and asynchronous participants' callbacks. */
  jmg_rdv_leader leader;
  int leader_async;
  jmg_rdv_waiter *waiters;
  int claimed;      /* someone runs (or ran) the leader's op */
  int has_deadline; /* some participant joined asynchronously */
  double deadline;  /* jmg_rdv_now_s() time */
  double timeout_s;
} session;

#define NUM_TOMBSTONES 256
typedef struct tombstone {
  int used;
  ident id;
  jmg_error err;
} tombstone;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static session *g_sessions;
static tombstone g_tombstones[NUM_TOMBSTONES];
static int g_next_tombstone;

static const tombstone *find_tombstone(const ident *id) {
  for (int i = 0; i < NUM_TOMBSTONES; ++i)
    if (g_tombstones[i].used && jmg_rdv_ident_same(&g_tombstones[i].id, id))
      return &g_tombstones[i];
  return NULL;
}

static void add_tombstone(const ident *id, const jmg_error *err) {
  tombstone *t = &g_tombstones[g_next_tombstone];
  g_next_tombstone = (g_next_tombstone + 1) % NUM_TOMBSTONES;
  t->used = 1;
  t->id = *id;
  jmg_error_copy(&t->err, err);
}

static void unlist(session *s) {
  if (!s->listed) return;
  for (session **p = &g_sessions; *p; p = &(*p)->next) {
    if (*p == s) {
      *p = s->next;
      break;
    }
  }
  s->listed = 0;
}

static void free_arrays(session *s) {
  free(s->posts);
  free(s->present);
  free(s->waiters);
}

static void free_session(session *s) {
  pthread_cond_destroy(&s->cv);
  free_arrays(s);
  free(s);
}

/* Marks s failed with err, wakes everyone, and makes later arrivals fail. */
static void fail_session(session *s, const jmg_error *err) {
  jmg_rdv_outcome_fail(&s->out, err);
  add_tombstone(&s->id, err);
  unlist(s);
  pthread_cond_broadcast(&s->cv);
}

static session *find_or_create(const ident *id, jmg_error *err) {
  for (session *s = g_sessions; s; s = s->next)
    if (jmg_rdv_ident_same(&s->id, id)) return s;
  session *s = calloc(1, sizeof *s);
  if (s) {
    s->posts = calloc((size_t)id->nparts, sizeof *s->posts);
    s->present = calloc((size_t)id->nparts, 1);
    s->waiters = calloc((size_t)id->nparts, sizeof *s->waiters);
  }
  if (!s || !s->posts || !s->present || !s->waiters) {
    if (s) free_arrays(s);
    free(s);
    jmg_error_set(err, JMG_ENOMEM, id->op, "rendezvous",
                  "cannot allocate the rendezvous of %d participants",
                  id->nparts);
    return NULL;
  }
  const char *call;
  int r = jmg_rdv_sync_init(NULL, &s->cv, 0, &call);
  if (r != 0) {
    free_arrays(s);
    free(s);
    jmg_error_sys(err, JMG_EINTERNAL, id->op, call, r,
                  "cannot set up the rendezvous' condition variable");
    return NULL;
  }
  s->id = *id;
  jmg_rdv_outcome_init(&s->out);
  s->listed = 1;
  s->next = g_sessions;
  g_sessions = s;
  return s;
}

static int has_arrived(const void *ctx, int shard) {
  return ((const session *)ctx)->present[shard];
}

static void timeout_error(const session *s, double timeout_s, jmg_error *e) {
  jmg_rdv_timeout_error(&s->id, s->arrived, has_arrived, s, timeout_s, e);
}

/* One asynchronous participant's release, run on a thread of its own:
 * completing its XLA future runs that device's next operations right there,
 * and those may block (a collective waits for the other devices, whose
 * futures are completed by their own threads). */
typedef struct release_job {
  jmg_rdv_waiter waiter;
  int rc;
  jmg_error err;
  jmg_rdv_value value;
} release_job;

static void *release_main(void *arg) {
  release_job *job = arg;
  jmg_rdv_waiter_call(&job->waiter, job->rc, &job->value, &job->err);
  free(job);
  return NULL;
}

/* Releases the asynchronous participants of an ended session, each on its
 * own thread (or, should no thread be had, on this one), and lets them go.
 * Called and returns with g_mu held; the caller must hold the session
 * (inside > 0) across the call. */
static void release_async(session *s) {
  for (int i = 0; i < s->id.nparts; ++i) {
    if (!jmg_rdv_waiter_async(&s->waiters[i])) continue;
    release_job here = {0};
    release_job *job = calloc(1, sizeof *job);
    release_job *j = job != NULL ? job : &here;
    j->waiter = s->waiters[i];
    j->rc = jmg_rdv_outcome_take(&s->out, &j->err, &j->value);
    memset(&s->waiters[i], 0, sizeof s->waiters[i]);
    s->inside--; /* that participant has left: nothing below needs s */
    pthread_t t;
    if (job != NULL && pthread_create(&t, NULL, release_main, job) == 0) {
      pthread_detach(t);
      continue;
    }
    pthread_mutex_unlock(&g_mu);
    jmg_rdv_waiter_call(&j->waiter, j->rc, &j->value, &j->err);
    free(job);
    pthread_mutex_lock(&g_mu);
  }
}

/* Runs the leader's op once and ends the session. Called with g_mu held and
 * the session RUNNING; returns with g_mu held. */
static void run_leader(session *s) {
  s->claimed = 1;
  pthread_mutex_unlock(&g_mu);
  jmg_error e;
  jmg_rdv_value v;
  /* The op runs without the lock: it may take minutes. */
  int frc = jmg_rdv_leader_run(&s->leader, &s->id, s->posts, &v, &e);
  pthread_mutex_lock(&g_mu);
  jmg_rdv_outcome_done(&s->out, frc, &e, &v);
  pthread_cond_broadcast(&s->cv);
}

/* Lets a session go when nobody is inside and it is out of the list. */
static void leave(session *s) {
  if (--s->inside == 0 && !s->listed) free_session(s);
}

/* Fails a waiting session with e, and releases its asynchronous
 * participants. Called and returns with g_mu held. */
static void fail_and_release(session *s, const jmg_error *e) {
  fail_session(s, e); /* unlists it */
  s->inside++;        /* hold it while releasing */
  release_async(s);
  leave(s);
}

/* ---- the timeout watchdog for asynchronous participants ------------------ */

static pthread_cond_t g_watch_cv;
static pthread_once_t g_watch_once = PTHREAD_ONCE_INIT;
static int g_watch_running;

static void *watchdog(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    const double now = jmg_rdv_now_s();
    session *expired = NULL;
    double next = -1;
    for (session *s = g_sessions; s; s = s->next) {
      if (s->out.state != JMG_RDV_WAITING || !s->has_deadline) continue;
      if (now >= s->deadline) {
        expired = s;
        break;
      }
      if (next < 0 || s->deadline < next) next = s->deadline;
    }
    if (expired != NULL) {
      jmg_error e;
      timeout_error(expired, expired->timeout_s, &e);
      fail_and_release(expired, &e);
      continue;
    }
    if (next < 0) {
      pthread_cond_wait(&g_watch_cv, &g_mu);
    } else {
      struct timespec until = jmg_rdv_timespec(next);
      pthread_cond_timedwait(&g_watch_cv, &g_mu, &until);
    }
  }
  return NULL;
}

static void start_watchdog(void) {
  const char *call;
  if (jmg_rdv_sync_init(NULL, &g_watch_cv, 0, &call) != 0) return;
  pthread_t t;
  /* Without a watchdog asynchronous participants could wait forever for a
   * missing one; there is no way to report that from here, so it is checked
   * when joining (see join_async). */
  if (pthread_create(&t, NULL, watchdog, NULL) == 0) {
    pthread_detach(t);
    g_watch_running = 1;
  }
}

/* ---- joining ------------------------------------------------------------- */

/* Registers a participant. On 0 the session is *s_out, locked, with this
 * participant inside; *completes says whether this arrival completed it.
 * On failure g_mu is released. */
static int arrive(const jmg_rdv_key *key, int shard, void *post,
                  const jmg_rdv_leader *leader, const jmg_rdv_waiter *waiter,
                  double timeout_s, session **s_out, int *completes,
                  jmg_error *err) {
  int rc = jmg_rdv_check_key(key, shard, 0, err);
  if (rc != 0) return rc;
  ident id = jmg_rdv_ident_of(key);
  *completes = 0;
  pthread_mutex_lock(&g_mu);
  const tombstone *t = find_tombstone(&id);
  if (t != NULL) {
    jmg_error_copy(err, &t->err);
    pthread_mutex_unlock(&g_mu);
    return -(int)err->code;
  }
  session *s = find_or_create(&id, err);
  if (s == NULL) {
    pthread_mutex_unlock(&g_mu);
    return -(int)err->code;
  }
  if (s->present[shard]) {
    /* Two participants claim one shard: the shard indices passed in do not
     * match the mesh. Nobody can be trusted to run the op. */
    jmg_rdv_duplicate_error(&id, shard, err);
    if (s->out.state == JMG_RDV_WAITING) fail_and_release(s, err);
    pthread_mutex_unlock(&g_mu);
    return -(int)err->code;
  }
  const int async = jmg_rdv_waiter_async(waiter);
  s->inside++;
  s->present[shard] = 1;
  s->posts[shard] = post;
  s->waiters[shard] = *waiter;
  if (shard == 0) {
    s->leader = *leader;
    s->leader_async = async;
  }
  if (async) {
    double d = jmg_rdv_now_s() + timeout_s;
    if (!s->has_deadline || d < s->deadline) {
      s->deadline = d;
      s->timeout_s = timeout_s;
    }
    s->has_deadline = 1;
    pthread_cond_signal(&g_watch_cv);
  }
  s->arrived++;
  if (s->arrived == id.nparts && s->out.state == JMG_RDV_WAITING) {
    s->out.state = JMG_RDV_RUNNING;
    *completes = 1;
    unlist(s); /* complete: no later arrival can belong to it */
    pthread_cond_broadcast(&s->cv);
  }
  *s_out = s;
  return 0;
}

/* Who runs the op: a blocking shard 0 always; with an asynchronous shard 0,
 * the participant whose arrival completed the call. */
static int runs_leader(const session *s, int shard, int completes) {
  if (s->out.state != JMG_RDV_RUNNING || s->claimed) return 0;
  return s->leader_async ? completes : shard == 0;
}

/* A blocking participant: arrives, waits, runs the leader's op if it is
 * shard 0, and takes its share of the outcome (value may be NULL). */
static int join_blocking(const jmg_rdv_key *key, int shard, void *post,
                         const jmg_rdv_leader *leader, double timeout_s,
                         jmg_rdv_value *value, jmg_error *err) {
  if (value != NULL) memset(value, 0, sizeof *value);
  const jmg_rdv_waiter blocking = {NULL, NULL, NULL};
  session *s;
  int completes;
  int rc = arrive(key, shard, post, leader, &blocking, timeout_s, &s,
                  &completes, err);
  if (rc != 0) return rc;

  struct timespec deadline = jmg_rdv_timespec(jmg_rdv_now_s() + timeout_s);
  while (s->out.state == JMG_RDV_WAITING) {
    int w = pthread_cond_timedwait(&s->cv, &g_mu, &deadline);
    if (w == ETIMEDOUT && s->out.state == JMG_RDV_WAITING) {
      jmg_error e;
      timeout_error(s, timeout_s, &e);
      fail_session(s, &e);
    }
  }
  if (runs_leader(s, shard, completes)) run_leader(s);
  while (s->out.state == JMG_RDV_RUNNING) pthread_cond_wait(&s->cv, &g_mu);
  release_async(s); /* no-op unless this thread ended the call */

  rc = jmg_rdv_outcome_take(&s->out, err, value);
  leave(s);
  pthread_mutex_unlock(&g_mu);
  return rc;
}

/* An asynchronous participant: arrives, runs the leader's op if its arrival
 * completed the call and shard 0 is asynchronous, and releases whoever waits
 * if the call is over. */
static int join_async(const jmg_rdv_key *key, int shard, void *post,
                      const jmg_rdv_leader *leader, double timeout_s,
                      const jmg_rdv_waiter *waiter, jmg_error *err) {
  pthread_once(&g_watch_once, start_watchdog);
  if (!g_watch_running)
    return jmg_error_set(err, JMG_EINTERNAL, key->op, "pthread_create",
                         "cannot start the rendezvous timeout watchdog");
  session *s;
  int completes;
  int rc = arrive(key, shard, post, leader, waiter, timeout_s, &s, &completes,
                  err);
  if (rc != 0) return rc;
  s->inside++; /* hold the session: done may let this participant go */
  if (runs_leader(s, shard, completes)) run_leader(s);
  if (s->out.state == JMG_RDV_DONE || s->out.state == JMG_RDV_FAILED)
    release_async(s);
  leave(s);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static void threads_abort(const jmg_rdv_key *key, int shard,
                          const jmg_error *why) {
  jmg_error e;
  if (jmg_rdv_abort_begin(key, shard, 0, why, &e) != 0) return;
  const ident id = jmg_rdv_ident_of(key);
  pthread_mutex_lock(&g_mu);
  if (find_tombstone(&id) == NULL) {
    jmg_error ignored;
    session *s = find_or_create(&id, &ignored);
    if (s != NULL && s->out.state == JMG_RDV_WAITING)
      fail_and_release(s, &e);
    else if (s == NULL)
      add_tombstone(&id, &e);
  }
  pthread_mutex_unlock(&g_mu);
}

JMG_RDV_MECHANISM(g_threads, "threads", join_blocking, join_async,
                  threads_abort);

const jmg_rendezvous *jmg_rendezvous_threads(void) { return &g_threads; }
