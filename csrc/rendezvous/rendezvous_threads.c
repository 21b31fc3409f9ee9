/* The rendezvous for threads of one process (SPMD on GPUs, and CPU devices).
 *
 * One global list of open calls ("sessions") under one mutex. A session is
 * created by its first participant and freed by its last to leave. A failed
 * session leaves a tombstone behind, so that participants arriving after the
 * failure fail at once instead of waiting for a timeout of their own. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rendezvous/rendezvous.h"

#define OP_LEN 32

typedef enum { WAITING, RUNNING, DONE, FAILED } session_state;

typedef struct ident {
  char op[OP_LEN];
  int64_t mesh_id, run_id, seq;
  int nparts;
} ident;

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

static ident make_ident(const jmg_rdv_key *key) {
  ident id;
  memset(&id, 0, sizeof id);
  snprintf(id.op, sizeof id.op, "%s", key->op ? key->op : "");
  id.mesh_id = key->mesh_id;
  id.run_id = key->run_id;
  id.seq = key->seq;
  id.nparts = key->nparts;
  return id;
}

static int same_ident(const ident *a, const ident *b) {
  return a->mesh_id == b->mesh_id && a->run_id == b->run_id &&
         a->seq == b->seq && a->nparts == b->nparts &&
         strcmp(a->op, b->op) == 0;
}

static const tombstone *find_tombstone(const ident *id) {
  for (int i = 0; i < NUM_TOMBSTONES; ++i)
    if (g_tombstones[i].used && same_ident(&g_tombstones[i].id, id))
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
    if (same_ident(&s->id, id)) return s;
  session *s = calloc(1, sizeof *s);
  if (s) {
    s->posts = calloc((size_t)id->nparts, sizeof *s->posts);
    s->present = calloc((size_t)id->nparts, 1);
  }
  if (!s || !s->posts || !s->present) {
    if (s) {
      free(s->posts);
      free(s->present);
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

static int threads_join(const jmg_rdv_key *key, int shard, void *post,
                        jmg_leader_fn fn, void *fn_ctx, double timeout_s,
                        jmg_error *err) {
  int rc = check_key(key, shard, err);
  if (rc != 0) return rc;
  ident id = make_ident(key);

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
  s->inside++;
  if (s->present[shard]) {
    /* Two participants claim one shard: the shard indices passed in do not
     * match the mesh. Nobody can be trusted to run the op. */
    jmg_error e;
    jmg_error_set(&e, JMG_EINVAL, id.op, "rendezvous",
                  "two participants claim shard %d of %d: the shard index "
                  "passed in is not this device's position on the mesh axis",
                  shard, id.nparts);
    fail_session(s, &e);
  } else {
    s->present[shard] = 1;
    s->posts[shard] = post;
    s->arrived++;
    if (s->arrived == id.nparts && s->state == WAITING) {
      s->state = RUNNING;
      unlist(s); /* complete: no later arrival can belong to it */
      pthread_cond_broadcast(&s->cv);
    }
  }

  struct timespec deadline = deadline_after(timeout_s);
  while (s->state == WAITING) {
    int w = pthread_cond_timedwait(&s->cv, &g_mu, &deadline);
    if (w == ETIMEDOUT && s->state == WAITING) {
      char missing[160];
      describe_missing(s, missing, sizeof missing);
      jmg_error e;
      jmg_error_set(&e, JMG_ETIMEDOUT, id.op, "rendezvous",
                    "%d of %d participants arrived within %.3g s; shard(s) "
                    "%s never did (set JAXMG_RENDEZVOUS_TIMEOUT to wait "
                    "longer)",
                    s->arrived, id.nparts, timeout_s, missing);
      fail_session(s, &e);
    }
  }

  if (s->state == RUNNING && shard == 0) {
    /* The leader runs the op without the lock: it may take minutes. */
    pthread_mutex_unlock(&g_mu);
    jmg_error e;
    jmg_error_clear(&e);
    int frc = fn(fn_ctx, s->posts, id.nparts, &e);
    pthread_mutex_lock(&g_mu);
    s->rc = frc;
    if (frc != 0) jmg_error_copy(&s->err, &e);
    s->state = DONE;
    pthread_cond_broadcast(&s->cv);
  }
  while (s->state == RUNNING) pthread_cond_wait(&s->cv, &g_mu);

  rc = s->rc;
  if (rc != 0) jmg_error_copy(err, &s->err);
  if (--s->inside == 0 && !s->listed) free_session(s);
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static void threads_abort(const jmg_rdv_key *key, int shard,
                          const jmg_error *why) {
  jmg_error e;
  if (check_key(key, shard, &e) != 0) return;
  ident id = make_ident(key);
  char reason[JMG_ERROR_MSG_LEN];
  snprintf(reason, sizeof reason, "%s", why ? why->msg : "failed");
  jmg_error_set(&e, why ? why->code : JMG_EPEER, id.op,
                why ? why->call : "rendezvous", "shard %d failed: %s", shard,
                reason);

  pthread_mutex_lock(&g_mu);
  if (find_tombstone(&id) == NULL) {
    jmg_error ignored;
    session *s = find_or_create(&id, &ignored);
    if (s != NULL && s->state == WAITING) {
      fail_session(s, &e);
      if (s->inside == 0) free_session(s);
    } else if (s == NULL) {
      add_tombstone(&id, &e);
    }
  }
  pthread_mutex_unlock(&g_mu);
}

static const jmg_rendezvous g_threads = {
    "threads",
    threads_join,
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
  const char *s = getenv("JAXMG_RENDEZVOUS_TIMEOUT");
  if (s != NULL) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (end != s && v > 0) return v;
  }
  return 300.0;
}
