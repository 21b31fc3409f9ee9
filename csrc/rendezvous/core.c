#define _POSIX_C_SOURCE 200809L
#include "rendezvous/core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"

/* ---- a call's identity --------------------------------------------------- */

int jmg_rdv_check_key(const jmg_rdv_key *key, int shard, int max_parts,
                      jmg_error *err) {
  if (key->nparts < 1 || shard < 0 || shard >= key->nparts)
    return jmg_error_set(err, JMG_EINVAL, key->op, "rendezvous",
                         "shard index %d is outside [0, %d)", shard,
                         key->nparts);
  if (max_parts > 0 && key->nparts > max_parts)
    return jmg_error_set(err, JMG_EINVAL, key->op, "rendezvous",
                         "%d participants are more than the process "
                         "rendezvous supports (%d)",
                         key->nparts, max_parts);
  return 0;
}

/* ---- messages ------------------------------------------------------------ */

/* Participant `shard` aborted the call: why's code and call, and its message
 * prefixed with the shard. */
static void abort_error(const jmg_rdv_ident *id, int shard,
                        const jmg_error *why, jmg_error *err) {
  char reason[JMG_ERROR_MSG_LEN];
  snprintf(reason, sizeof reason, "%s", why ? why->msg : "failed");
  jmg_error_set(err, why ? why->code : JMG_EPEER, id->op,
                why ? why->call : "rendezvous", "shard %d failed: %s", shard,
                reason);
}

int jmg_rdv_abort_begin(const jmg_rdv_key *key, int shard, int max_parts,
                        const jmg_error *why, jmg_error *e) {
  if (jmg_rdv_check_key(key, shard, max_parts, e) != 0) return -1;
  const jmg_rdv_ident id = jmg_rdv_ident_of(key);
  abort_error(&id, shard, why, e);
  return 0;
}

void jmg_rdv_timeout_error(const jmg_rdv_ident *id, int arrived,
                           jmg_rdv_arrived_fn has_arrived, const void *ctx,
                           double timeout_s, jmg_error *err) {
  char missing[160];
  size_t used = 0;
  missing[0] = '\0';
  for (int i = 0; i < id->nparts && used + 12 < sizeof missing; ++i) {
    if (has_arrived(ctx, i)) continue;
    int w = snprintf(missing + used, sizeof missing - used, "%s%d",
                     used ? ", " : "", i);
    if (w < 0) break;
    used += (size_t)w;
  }
  jmg_error_set(err, JMG_ETIMEDOUT, id->op, "rendezvous",
                "%d of %d participants arrived within %.3g s; shard(s) %s "
                "never did (set JAXMG_RENDEZVOUS_TIMEOUT to wait longer)",
                arrived, id->nparts, timeout_s, missing);
}

void jmg_rdv_duplicate_error(const jmg_rdv_ident *id, int shard,
                             jmg_error *err) {
  jmg_error_set(err, JMG_EINVAL, id->op, "rendezvous",
                "two participants claim shard %d of %d: the shard index "
                "passed in is not this device's position on the mesh axis",
                shard, id->nparts);
}

void jmg_rdv_exited_error(const jmg_rdv_ident *id, int shard, pid_t pid,
                          const char *when, jmg_error *err) {
  jmg_error_set(err, JMG_EPEER, id->op, "rendezvous",
                "shard %d (pid %ld) exited %s", shard, (long)pid, when);
}

/* ---- a call's outcome ---------------------------------------------------- */

void jmg_rdv_outcome_init(jmg_rdv_outcome *o) {
  memset(o, 0, sizeof *o);
  o->state = JMG_RDV_WAITING;
}

void jmg_rdv_outcome_fail(jmg_rdv_outcome *o, const jmg_error *e) {
  o->state = JMG_RDV_FAILED;
  o->rc = -(int)e->code;
  jmg_error_copy(&o->err, e);
  memset(&o->value, 0, sizeof o->value);
}

void jmg_rdv_outcome_done(jmg_rdv_outcome *o, int rc, const jmg_error *e,
                          const jmg_rdv_value *value) {
  if (o->state != JMG_RDV_RUNNING) return;
  o->state = JMG_RDV_DONE;
  o->rc = rc;
  if (rc != 0) {
    jmg_error_copy(&o->err, e);
    memset(&o->value, 0, sizeof o->value);
  } else {
    o->value = *value;
  }
}

int jmg_rdv_outcome_take(const jmg_rdv_outcome *o, jmg_error *err,
                         jmg_rdv_value *value) {
  if (o->rc != 0) jmg_error_copy(err, &o->err);
  if (value != NULL) {
    if (o->rc == 0)
      *value = o->value;
    else
      memset(value, 0, sizeof *value);
  }
  return o->rc;
}

/* ---- the leader's fn and an asynchronous participant's callback ---------- */

int jmg_rdv_leader_run(const jmg_rdv_leader *l, const jmg_rdv_ident *id,
                       void *const *posts, jmg_rdv_value *value,
                       jmg_error *err) {
  memset(value, 0, sizeof *value);
  jmg_error_clear(err);
  int rc = l->value_fn != NULL
               ? l->value_fn(l->ctx, posts, id->nparts, value, err)
               : l->fn(l->ctx, posts, id->nparts, err);
  if (rc == 0 && value->len > JMG_RDV_MAX_VALUE)
    rc = jmg_error_set(err, JMG_EINTERNAL, id->op, "rendezvous",
                       "the leader's value has %zu bytes, more than the %d "
                       "a rendezvous hands over (JMG_RDV_MAX_VALUE)",
                       value->len, JMG_RDV_MAX_VALUE);
  if (rc != 0) memset(value, 0, sizeof *value);
  return rc;
}

int jmg_rdv_waiter_async(const jmg_rdv_waiter *w) {
  return w->done != NULL || w->value_done != NULL;
}

void jmg_rdv_waiter_call(const jmg_rdv_waiter *w, int rc,
                         const jmg_rdv_value *value, const jmg_error *err) {
  const jmg_error *why = rc != 0 ? err : NULL;
  if (w->value_done != NULL)
    w->value_done(w->ctx, rc, rc == 0 ? value : NULL, why);
  else if (w->done != NULL)
    w->done(w->ctx, rc, why);
}

/* ---- time ---------------------------------------------------------------- */

double jmg_rdv_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct timespec jmg_rdv_timespec(double t) {
  struct timespec ts;
  if (t > 4e9) t = 4e9; /* over a century of uptime: never reached */
  if (t < 0) t = 0;
  ts.tv_sec = (time_t)t;
  ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec += 1;
    ts.tv_nsec -= 1000000000L;
  }
  if (ts.tv_nsec < 0) ts.tv_nsec = 0;
  return ts;
}

void jmg_rdv_sleep_s(double seconds) {
  struct timespec ts = jmg_rdv_timespec(seconds);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int jmg_rdv_sync_init(pthread_mutex_t *mu, pthread_cond_t *cv, int pshared,
                      const char **call) {
  int r;
  if (mu != NULL) {
    pthread_mutexattr_t ma;
    *call = "pthread_mutexattr_init";
    if ((r = pthread_mutexattr_init(&ma)) != 0) return r;
    if (pshared && (r = pthread_mutexattr_setpshared(
                        &ma, PTHREAD_PROCESS_SHARED)) != 0)
      *call = "pthread_mutexattr_setpshared";
    else if (pshared &&
             (r = pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST)) != 0)
      *call = "pthread_mutexattr_setrobust";
    else if ((r = pthread_mutex_init(mu, &ma)) != 0)
      *call = "pthread_mutex_init";
    pthread_mutexattr_destroy(&ma);
    if (r != 0) return r;
  }
  pthread_condattr_t ca;
  *call = "pthread_condattr_init";
  if ((r = pthread_condattr_init(&ca)) != 0) return r;
  if (pshared &&
      (r = pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED)) != 0)
    *call = "pthread_condattr_setpshared";
  else if ((r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) != 0)
    *call = "pthread_condattr_setclock";
  else if ((r = pthread_cond_init(cv, &ca)) != 0)
    *call = "pthread_cond_init";
  pthread_condattr_destroy(&ca);
  return r;
}

/* ---- sequence numbers and the timeout ------------------------------------ */

/* One counter per (op, mesh id, shard), for the run id it last saw. */
typedef struct seq_entry {
  struct seq_entry *next;
  char op[JMG_RDV_OP_LEN];
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
                strncmp(e->op, op, JMG_RDV_OP_LEN - 1) == 0))
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
