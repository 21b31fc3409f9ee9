/* The rendezvous for threads of one process (SPMD on GPUs, and CPU devices).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config.h"
#include "rendezvous/call_ident.h"
#include "rendezvous/rendezvous.h"

#define OP_LEN JMG_RDV_OP_LEN

typedef enum { WAITING, RUNNING, DONE, FAILED } session_state;

typedef jmg_call_ident ident;

typedef struct session {
  struct session *next;
  ident id;
  int arrived; /* participants that have posted */
  int inside;  /* participants still inside join() */
  int listed;  /* still in the list of open sessions */
  session_state state;
  void **posts;
  unsigned char *present;
  int rc;
  jmg_error err;
  pthread_cond_t cv;
  /* The leader's op (shard 0's), and asynchronous participants' callbacks. */
  jmg_leader_fn fn;
  void *fn_ctx;
  int leader_async;
  jmg_rdv_done_fn *done;
  void **done_ctx;
  int claimed;      /* someone runs (or ran) the leader's op */
  int has_deadline; /* some participant joined asynchronously */
  struct timespec deadline;
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
    if (g_tombstones[i].used && jmg_call_ident_same(&g_tombstones[i].id, id))
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

static void free_session(session *s) {
  pthread_cond_destroy(&s->cv);
  free(s->posts);
  free(s->present);
  free(s->done);
  free(s->done_ctx);
  free(s);
}

/* Marks s failed with err, wakes everyone, and makes later arrivals fail. */
static void fail_session(session *s, const jmg_error *err) {
  s->state = FAILED;
  s->rc = -(int)err->code;
  jmg_error_copy(&s->err, err);
  add_tombstone(&s->id, err);
  unlist(s);
  pthread_cond_broadcast(&s->cv);
}

static session *find_or_create(const ident *id, jmg_error *err) {
  for (session *s = g_sessions; s; s = s->next)
    if (jmg_call_ident_same(&s->id, id)) return s;
  session *s = calloc(1, sizeof *s);
  if (s) {
    s->posts = calloc((size_t)id->nparts, sizeof *s->posts);
    s->present = calloc((size_t)id->nparts, 1);
    s->done = calloc((size_t)id->nparts, sizeof *s->done);
    s->done_ctx = calloc((size_t)id->nparts, sizeof *s->done_ctx);
  }
  if (!s || !s->posts || !s->present || !s->done || !s->done_ctx) {
    if (s) {
      free(s->posts);
      free(s->present);
      free(s->done);
      free(s->done_ctx);
      free(s);
    }
    jmg_error_set(err, JMG_ENOMEM, id->op, "rendezvous",
                  "cannot allocate the rendezvous of %d participants",
                  id->nparts);
    return NULL;
  }
  /* CLOCK_MONOTONIC, so that a change of the wall clock cannot cut a wait
   * short or make it endless. */
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &attr);
  pthread_condattr_destroy(&attr);
  s->id = *id;
  s->state = WAITING;
  s->listed = 1;
  s->next = g_sessions;
  g_sessions = s;
  return s;
}

static void describe_missing(const session *s, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < s->id.nparts && used + 12 < len; ++i) {
    if (s->present[i]) continue;
    int w = snprintf(buf + used, len - used, "%s%d", used ? ", " : "", i);
    if (w < 0) break;
    used += (size_t)w;
  }
}

static struct timespec deadline_after(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (seconds > 1e9) seconds = 1e9;
  time_t whole = (time_t)seconds;
  long nanos = (long)((seconds - (double)whole) * 1e9);
  ts.tv_sec += whole;
  ts.tv_nsec += nanos;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec += 1;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static int check_key(const jmg_rdv_key *key, int shard, jmg_error *err) {
  if (key->nparts < 1 || shard < 0 || shard >= key->nparts)
    return jmg_error_set(err, JMG_EINVAL, key->op, "rendezvous",
                         "shard index %d is outside [0, %d)", shard,
                         key->nparts);
  return 0;
}

/* One asynchronous participant's release, run on a thread of its own:
 * completing its XLA future runs that device's next operations right there,
 * and those may block (a collective waits for the other devices, whose
 * futures are completed by their own threads). */
typedef struct release_job {
  jmg_rdv_done_fn done;
  void *ctx;
  int rc;
  jmg_error err;
} release_job;

static void *release_main(void *arg) {
  release_job *job = arg;
  job->done(job->ctx, job->rc, job->rc != 0 ? &job->err : NULL);
  free(job);
  return NULL;
}

/* Releases the asynchronous participants of an ended session, each on its
 * own thread (or, should no thread be had, on this one), and lets them go.
 * Called and returns with g_mu held; the caller must hold the session
 * (inside > 0) across the call. */
static void release_async(session *s) {
  for (int i = 0; i < s->id.nparts; ++i) {
    if (s->done[i] == NULL) continue;
    release_job *job = calloc(1, sizeof *job);
    jmg_rdv_done_fn done = s->done[i];
    void *ctx = s->done_ctx[i];
    const int rc = s->rc;
    jmg_error err;
    jmg_error_copy(&err, &s->err);
    s->done[i] = NULL;
    s->inside--; /* that participant has left: nothing below needs s */
    pthread_t t;
    if (job != NULL) {
      job->done = done;
      job->ctx = ctx;
      job->rc = rc;
      jmg_error_copy(&job->err, &err);
      if (pthread_create(&t, NULL, release_main, job) == 0) {
        pthread_detach(t);
        continue;
      }
      free(job);
    }
    pthread_mutex_unlock(&g_mu);
    done(ctx, rc, rc != 0 ? &err : NULL);
    pthread_mutex_lock(&g_mu);
  }
}

/* Runs the leader's op once and ends the session. Called with g_mu held and
 * the session RUNNING; returns with g_mu held. */
static void run_leader(session *s) {
  s->claimed = 1;
  pthread_mutex_unlock(&g_mu);
  jmg_error e;
  jmg_error_clear(&e);
  /* The op runs without the lock: it may take minutes. */
  int frc = s->fn(s->fn_ctx, s->posts, s->id.nparts, &e);
  pthread_mutex_lock(&g_mu);
  s->rc = frc;
  if (frc != 0) jmg_error_copy(&s->err, &e);
  s->state = DONE;
  pthread_cond_broadcast(&s->cv);
}

/* Lets a session go when nobody is inside and it is out of the list. */
static void leave(session *s) {
  if (--s->inside == 0 && !s->listed) free_session(s);
}

/* ---- the timeout watchdog for asynchronous participants ------------------ */

static pthread_cond_t g_watch_cv;
static pthread_once_t g_watch_once = PTHREAD_ONCE_INIT;
static int g_watch_running;

static int before(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec < b->tv_sec ||
         (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void timeout_error(const session *s, double timeout_s, jmg_error *e) {
  char missing[160];
  describe_missing(s, missing, sizeof missing);
  jmg_error_set(e, JMG_ETIMEDOUT, s->id.op, "rendezvous",
                "%d of %d participants arrived within %.3g s; shard(s) %s "
                "never did (set JAXMG_RENDEZVOUS_TIMEOUT to wait longer)",
                s->arrived, s->id.nparts, timeout_s, missing);
}

static void *watchdog(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    session *expired = NULL;
    const struct timespec *next = NULL;
    for (session *s = g_sessions; s; s = s->next) {
      if (s->state != WAITING || !s->has_deadline) continue;
      if (!before(&now, &s->deadline)) {
        expired = s;
        break;
      }
      if (next == NULL || before(&s->deadline, next)) next = &s->deadline;
    }
    if (expired != NULL) {
      jmg_error e;
      timeout_error(expired, expired->timeout_s, &e);
      fail_session(expired, &e); /* unlists it */
      expired->inside++;         /* hold it while releasing */
      release_async(expired);
      leave(expired);
      continue;
    }
    if (next == NULL) {
      pthread_cond_wait(&g_watch_cv, &g_mu);
    } else {
      struct timespec until = *next;
      pthread_cond_timedwait(&g_watch_cv, &g_mu, &until);
    }
  }
  return NULL;
}

static void start_watchdog(void) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g_watch_cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_t t;
  /* Without a watchdog asynchronous participants could wait forever for a
   * missing one; there is no way to report that from here, so it is checked
   * when joining (see threads_join_async). */
  if (pthread_create(&t, NULL, watchdog, NULL) == 0) {
    pthread_detach(t);
    g_watch_running = 1;
  }
}

/* ---- joining
 * ----------------------------------------------------------------*/

/* Registers a participant. On 0 the session is *s_out, locked, with this
 * participant inside; *completes says whether this arrival completed it.
 * On failure g_mu is released. */
static int arrive(const jmg_rdv_key *key, int shard, void *post,
                  jmg_leader_fn fn, void *fn_ctx, jmg_rdv_done_fn done,
                  void *done_ctx, double timeout_s, session **s_out,
                  int *completes, jmg_error *err) {
  int rc = check_key(key, shard, err);
  if (rc != 0) return rc;
  ident id = jmg_call_ident_of(key);
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
    jmg_error_set(err, JMG_EINVAL, id.op, "rendezvous",
                  "two participants claim shard %d of %d: the shard index "
                  "passed in is not this device's position on the mesh axis",
                  shard, id.nparts);
    if (s->state == WAITING) {
      fail_session(s, err);
      s->inside++;
      release_async(s);
      leave(s);
    }
    pthread_mutex_unlock(&g_mu);
    return -(int)err->code;
  }
  s->inside++;
  s->present[shard] = 1;
  s->posts[shard] = post;
  s->done[shard] = done;
  s->done_ctx[shard] = done_ctx;
  if (shard == 0) {
    s->fn = fn;
    s->fn_ctx = fn_ctx;
    s->leader_async = done != NULL;
  }
  if (done != NULL) {
    struct timespec d = deadline_after(timeout_s);
    if (!s->has_deadline || before(&d, &s->deadline)) {
      s->deadline = d;
      s->timeout_s = timeout_s;
    }
    s->has_deadline = 1;
    pthread_cond_signal(&g_watch_cv);
  }
  s->arrived++;
  if (s->arrived == id.nparts && s->state == WAITING) {
    s->state = RUNNING;
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
  if (s->state != RUNNING || s->claimed) return 0;
  return s->leader_async ? completes : shard == 0;
}

static int threads_join(const jmg_rdv_key *key, int shard, void *post,
                        jmg_leader_fn fn, void *fn_ctx, double timeout_s,
                        jmg_error *err) {
  session *s;
  int completes;
  int rc = arrive(key, shard, post, fn, fn_ctx, NULL, NULL, timeout_s, &s,
                  &completes, err);
  if (rc != 0) return rc;

  struct timespec deadline = deadline_after(timeout_s);
  while (s->state == WAITING) {
    int w = pthread_cond_timedwait(&s->cv, &g_mu, &deadline);
    if (w == ETIMEDOUT && s->state == WAITING) {
      jmg_error e;
      timeout_error(s, timeout_s, &e);
      fail_session(s, &e);
    }
  }
  if (runs_leader(s, shard, completes)) run_leader(s);
  while (s->state == RUNNING) pthread_cond_wait(&s->cv, &g_mu);
  release_async(s); /* no-op unless this thread ended the call */

  rc = s->rc;
  if (rc != 0) jmg_error_copy(err, &s->err);
  leave(s);
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static int threads_join_async(const jmg_rdv_key *key, int shard, void *post,
                              jmg_leader_fn fn, void *fn_ctx, double timeout_s,
                              jmg_rdv_done_fn done, void *done_ctx,
                              jmg_error *err) {
  pthread_once(&g_watch_once, start_watchdog);
  if (!g_watch_running)
    return jmg_error_set(err, JMG_EINTERNAL, key->op, "pthread_create",
                         "cannot start the rendezvous timeout watchdog");
  session *s;
  int completes;
  int rc = arrive(key, shard, post, fn, fn_ctx, done, done_ctx, timeout_s, &s,
                  &completes, err);
  if (rc != 0) return rc;
  s->inside++; /* hold the session: done may let this participant go */
  if (runs_leader(s, shard, completes)) run_leader(s);
  if (s->state == DONE || s->state == FAILED) release_async(s);
  leave(s);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static void threads_abort(const jmg_rdv_key *key, int shard,
                          const jmg_error *why) {
  jmg_error e;
  if (check_key(key, shard, &e) != 0) return;
  ident id = jmg_call_ident_of(key);
  jmg_rdv_abort_error(&id, shard, why, &e);

  pthread_mutex_lock(&g_mu);
  if (find_tombstone(&id) == NULL) {
    jmg_error ignored;
    session *s = find_or_create(&id, &ignored);
    if (s != NULL && s->state == WAITING) {
      fail_session(s, &e);
      s->inside++;
      release_async(s);
      leave(s);
    } else if (s == NULL) {
      add_tombstone(&id, &e);
    }
  }
  pthread_mutex_unlock(&g_mu);
}

static const jmg_rendezvous g_threads = {
    "threads",
    threads_join,
    threads_join_async,
    threads_abort,
};

const jmg_rendezvous *jmg_rendezvous_threads(void) { return &g_threads; }

/* ---- sequence numbers ---------------------------------------------------- */

typedef struct seq_entry {
  struct seq_entry *next;
  char op[OP_LEN];
  int64_t mesh_id;
  int shard;
  int64_t run_id;
  int64_t count;
} seq_entry;

static pthread_mutex_t g_seq_mu = PTHREAD_MUTEX_INITIALIZER;
static seq_entry *g_seq;

int64_t jmg_rdv_next_seq(const char *op, int64_t mesh_id, int shard,
                         int64_t run_id) {
  pthread_mutex_lock(&g_seq_mu);
  seq_entry *e = g_seq;
  while (e && !(e->mesh_id == mesh_id && e->shard == shard &&
                strncmp(e->op, op, OP_LEN - 1) == 0))
    e = e->next;
  if (e == NULL) {
    e = calloc(1, sizeof *e);
    if (e == NULL) {
      /* Without memory no counter is kept; distinct run ids still work. */
      pthread_mutex_unlock(&g_seq_mu);
      return 0;
    }
    snprintf(e->op, sizeof e->op, "%s", op);
    e->mesh_id = mesh_id;
    e->shard = shard;
    e->run_id = run_id;
    e->count = 0;
    e->next = g_seq;
    g_seq = e;
  } else if (e->run_id != run_id) {
    e->run_id = run_id;
    e->count = 0;
  }
  int64_t seq = e->count++;
  pthread_mutex_unlock(&g_seq_mu);
  return seq;
}

double jmg_rdv_default_timeout(void) {
  jmg_config c;
  jmg_config_read(&c);
  return c.rendezvous_timeout_s;
}
