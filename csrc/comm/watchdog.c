/* The watchdog of communicators that cannot time out by themselves
 * (comm/watchdog.h). */
#define _POSIX_C_SOURCE 200809L
#include "comm/watchdog.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/proc.h"

double jmg_watch_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t jmg_watch_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + (int64_t)(ts.tv_nsec / 1000000);
}

int jmg_watch_arrival(const jmg_watch *w, int64_t own_ms, int64_t first_ms,
                      int64_t last_ms, const char *op, const char *call,
                      jmg_error *err) {
  const double spread_s = (double)(last_ms - first_ms) * 1e-3;
  if (w->timeout_s <= 0 || spread_s <= w->timeout_s) return 0;
  const int late = own_ms == last_ms;
  return jmg_error_set(
      err, JMG_ETIMEDOUT, op, call,
      "rank %d of %d: the ranks entered this call %.3g s apart, past "
      "JAXMG_RENDEZVOUS_TIMEOUT (%.3g s): %s, so the earliest gave up by its "
      "own deadline; the communicator was aborted and is not used again",
      w->rank, w->ranks, spread_s, w->timeout_s,
      late ? "this rank came late" : "a rank came late");
}

jmg_watch_verdict jmg_watch_check(const jmg_watch *w, const jmg_watch_probe *p,
                                  jmg_watch_fault *f) {
  memset(f, 0, sizeof *f);
  f->rank = -1;
  const double now = p->now(p->ctx);
  f->waited = now - w->started;
  for (int q = 0; w->pids != NULL && q < w->ranks; ++q) {
    if (q == w->rank || w->pids[q] <= 0) continue;
    if (!p->alive(p->ctx, w->pids[q])) {
      f->verdict = JMG_WATCH_PEER_GONE;
      f->rank = q;
      f->pid = w->pids[q];
      return f->verdict;
    }
  }
  for (int q = 0; p->quit != NULL && w->pids != NULL && q < w->ranks; ++q) {
    if (q == w->rank || w->pids[q] <= 0) continue;
    if (p->quit(p->ctx, q, w->pids[q])) {
      f->verdict = JMG_WATCH_PEER_QUIT;
      f->rank = q;
      f->pid = w->pids[q];
      return f->verdict;
    }
  }
  if (p->async_error != NULL) {
    const int code = p->async_error(p->ctx);
    if (code != 0) {
      f->verdict = JMG_WATCH_ASYNC;
      f->code = code;
      return f->verdict;
    }
  }
  if (!w->arrived && w->timeout_s > 0 && f->waited >= w->timeout_s) {
    f->verdict = JMG_WATCH_LATE;
    return f->verdict;
  }
  return JMG_WATCH_OK;
}

int jmg_watch_error(const jmg_watch *w, const jmg_watch_fault *f,
                    const char *during, const char *async_words,
                    const char *op, const char *call, jmg_error *err) {
  switch (f->verdict) {
    case JMG_WATCH_PEER_GONE:
      return jmg_error_set(err, JMG_EPEER, op, call,
                           "rank %d of %d: rank %d (pid %lld) exited or was "
                           "killed during %s; the communicator was aborted "
                           "and is not used again",
                           w->rank, w->ranks, f->rank, (long long)f->pid,
                           during);
    case JMG_WATCH_PEER_QUIT:
      return jmg_error_set(err, JMG_EPEER, op, call,
                           "rank %d of %d: rank %d (pid %lld) gave up on this "
                           "communicator during %s (its own call failed: a "
                           "rank that did not arrive within "
                           "JAXMG_RENDEZVOUS_TIMEOUT, or another fault on its "
                           "side); the communicator was aborted and is not "
                           "used again",
                           w->rank, w->ranks, f->rank, (long long)f->pid,
                           during);
    case JMG_WATCH_ASYNC:
      return jmg_error_set(err, JMG_EPEER, op, call,
                           "rank %d of %d: the communicator reported an "
                           "asynchronous error during %s (%d: %s), such as "
                           "a peer on another node gone; it was aborted and "
                           "is not used again",
                           w->rank, w->ranks, during, f->code,
                           async_words != NULL ? async_words : "?");
    case JMG_WATCH_LATE:
      return jmg_error_set(err, JMG_ETIMEDOUT, op, call,
                           "rank %d of %d waited %.3g s during %s: a rank "
                           "did not arrive within %.3g s "
                           "(JAXMG_RENDEZVOUS_TIMEOUT sets the wait): its "
                           "process never came, or does not make the same "
                           "jaxmg calls; the communicator was aborted and is "
                           "not used again",
                           w->rank, w->ranks, f->waited, during, w->timeout_s);
    case JMG_WATCH_OK:
      break;
  }
  return jmg_error_set(err, JMG_EINTERNAL, op, call,
                       "the watchdog reported no fault");
}

/* ---- the thread -------------------------------------------------------- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv; /* CLOCK_MONOTONIC; made by ensure_thread */
static int g_cv_made;
static int g_started;
static jmg_watchdog_entry *g_list;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static int probe_alive(void *ctx, int64_t pid) {
  (void)ctx;
  return jmg_proc_alive((pid_t)pid);
}

static double probe_now(void *ctx) {
  (void)ctx;
  return jmg_watch_now();
}

/* Every listed entry that has not fired yet, checked; the lock held. */
static void sweep_locked(void) {
  for (jmg_watchdog_entry *e = g_list; e != NULL; e = e->next) {
    if (e->fired) continue;
    jmg_watch w = e->watch;
    w.arrived = w.arrived || atomic_load(&e->arrived);
    const jmg_watch_probe p = {.alive = probe_alive,
                               .now = probe_now,
                               .async_error = e->async_error,
                               .quit = e->quit,
                               .ctx = e->ctx};
    jmg_watch_fault f;
    if (jmg_watch_check(&w, &p, &f) == JMG_WATCH_OK) continue;
    e->fired = 1;
    e->fault = f;
    e->fire(e->ctx, &f);
  }
}

static void *watchdog_main(void *unused) {
  (void)unused;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    while (g_list == NULL) pthread_cond_wait(&g_cv, &g_mu);
    sweep_locked();
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += (long)(JMG_WATCHDOG_POLL_S * 1e9);
    if (t.tv_nsec >= 1000000000L) {
      t.tv_sec += 1;
      t.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&g_cv, &g_mu, &t); /* a wake-up or the poll */
  }
  return NULL;
}

/* The child of a fork has no watchdog thread, and none of its parent's
 * calls: it starts afresh. */
static void atfork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void atfork_child(void) {
  g_list = NULL;
  g_started = 0;
  g_cv_made = 0; /* the parent's waiter may have left it in use */
  pthread_mutex_init(&g_mu, NULL);
}

static void register_atfork(void) {
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* The condition variable and the thread, once; the lock held. */
static int ensure_thread_locked(const char *op, jmg_error *err) {
  if (!g_cv_made) {
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc == 0) rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0) rc = pthread_cond_init(&g_cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
      return jmg_error_sys(err, JMG_EINTERNAL, op, "watchdog", rc,
                           "pthread_cond_init");
    g_cv_made = 1;
  }
  if (g_started) return 0;
  pthread_attr_t attr;
  pthread_t thread;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (rc == 0) rc = pthread_create(&thread, &attr, watchdog_main, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    return jmg_error_sys(err, JMG_EINTERNAL, op, "watchdog", rc,
                         "pthread_create");
  g_started = 1;
  return 0;
}

int jmg_watchdog_add(jmg_watchdog_entry *e, const char *op, jmg_error *err) {
  pthread_once(&g_atfork_once, register_atfork);
  e->watch.started = jmg_watch_now();
  atomic_store(&e->arrived, e->watch.arrived);
  e->fired = 0;
  memset(&e->fault, 0, sizeof e->fault);
  pthread_mutex_lock(&g_mu);
  int rc = ensure_thread_locked(op, err);
  if (rc == 0) {
    e->next = g_list;
    g_list = e;
    pthread_cond_signal(&g_cv);
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

void jmg_watchdog_arrived(jmg_watchdog_entry *e) {
  atomic_store(&e->arrived, 1);
}

int jmg_watchdog_remove(jmg_watchdog_entry *e, jmg_watch_fault *f) {
  pthread_mutex_lock(&g_mu);
  for (jmg_watchdog_entry **p = &g_list; *p != NULL; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      break;
    }
  e->next = NULL;
  const int fired = e->fired;
  if (fired && f != NULL) *f = e->fault;
  pthread_mutex_unlock(&g_mu);
  return fired;
}
