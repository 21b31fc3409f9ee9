/* The rendezvous core: everything the two mechanisms (rendezvous_threads.c,
 * rendezvous_processes.c) share, written once. Internal to this layer.
 *
 *  - A call's identity (jmg_rdv_ident): the key as both mechanisms store and
 *    compare it, with the op name copied in. Plain data, so that it can live
 *    in shared memory.
 *  - The checks of a key, and every message a participant can get from the
 *    rendezvous itself (timeout, duplicate shard, abort, a dead process).
 *  - A call's outcome (jmg_rdv_outcome: state, rc, error, value), how it ends
 *    (failed, or done by the leader) and how a participant takes it away, so
 *    that nobody ever sees another call's value or a value with an error.
 *  - The leader's fn and an asynchronous participant's callback in their two
 *    forms (with and without a value), each run through one function.
 *  - Time: a monotonic clock in seconds, absolute deadlines, and the lock
 *    and condition variables (waiting on that clock) of either mechanism.
 *  - The public face: JMG_RDV_MECHANISM turns a mechanism's two joins into
 *    the four of jmg_rendezvous.
 *
 * What stays in a mechanism is only how participants find each other, wait
 * and wake: a list of sessions under one mutex, or one shared-memory segment
 * per call under a robust process-shared mutex. Sequence numbers and the
 * default timeout (rendezvous.h) are in core.c too. */
#ifndef JMG_RENDEZVOUS_CORE_H
#define JMG_RENDEZVOUS_CORE_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "common/error.h"
#include "rendezvous/rendezvous.h"

/* ---- a call's identity --------------------------------------------------- */

#define JMG_RDV_OP_LEN 32

typedef struct jmg_rdv_ident {
  char op[JMG_RDV_OP_LEN];
  int64_t mesh_id, run_id, seq;
  int nparts;
} jmg_rdv_ident;

/* Inline: they run on every lookup of a call (and GCC 12's -Wdangling-pointer
 * misreads the thread mechanism's tombstones when they are out of line). */
static inline jmg_rdv_ident jmg_rdv_ident_of(const jmg_rdv_key *key) {
  jmg_rdv_ident id;
  memset(&id, 0, sizeof id);
  snprintf(id.op, sizeof id.op, "%s", key->op ? key->op : "");
  id.mesh_id = key->mesh_id;
  id.run_id = key->run_id;
  id.seq = key->seq;
  id.nparts = key->nparts;
  return id;
}

static inline int jmg_rdv_ident_same(const jmg_rdv_ident *a,
                                     const jmg_rdv_ident *b) {
  return a->mesh_id == b->mesh_id && a->run_id == b->run_id &&
         a->seq == b->seq && a->nparts == b->nparts &&
         strncmp(a->op, b->op, JMG_RDV_OP_LEN) == 0;
}

/* 0 if `shard` is a participant of key (0 <= shard < nparts) and key has at
 * most max_parts participants (0: no bound), else -JMG_EINVAL with err
 * filled. */
int jmg_rdv_check_key(const jmg_rdv_key *key, int shard, int max_parts,
                      jmg_error *err);

/* For abort: 0 with *e filled with the error everyone gets (why's code and
 * call, and its message prefixed with the shard) when `shard` is a
 * participant of key (as jmg_rdv_check_key), else -1: an abort with a bad
 * key does nothing. */
int jmg_rdv_abort_begin(const jmg_rdv_key *key, int shard, int max_parts,
                        const jmg_error *why, jmg_error *e);

/* ---- messages ------------------------------------------------------------ */

/* Whether shard i has arrived, for the timeout message. */
typedef int (*jmg_rdv_arrived_fn)(const void *ctx, int shard);

/* Not everyone arrived within timeout_s: names the shards that did not. */
void jmg_rdv_timeout_error(const jmg_rdv_ident *id, int arrived,
                           jmg_rdv_arrived_fn has_arrived, const void *ctx,
                           double timeout_s, jmg_error *err);

/* Two participants claim `shard`: the shard indices do not match the mesh. */
void jmg_rdv_duplicate_error(const jmg_rdv_ident *id, int shard,
                             jmg_error *err);

/* The process of `shard` (pid) is dead (common/proc.h); `when` says at what
 * point ("before the call was over", "before it arrived"). */
void jmg_rdv_exited_error(const jmg_rdv_ident *id, int shard, pid_t pid,
                          const char *when, jmg_error *err);

/* ---- a call's outcome ---------------------------------------------------- */

typedef enum {
  JMG_RDV_WAITING = 1, /* participants are arriving */
  JMG_RDV_RUNNING,     /* all arrived; the leader works */
  JMG_RDV_DONE,        /* the leader's fn returned (rc says how) */
  JMG_RDV_FAILED       /* failed before the leader's fn could end it */
} jmg_rdv_state;

/* Plain data (it lives in shared memory in the process mechanism). */
typedef struct jmg_rdv_outcome {
  int state; /* jmg_rdv_state */
  int rc;
  jmg_error err;       /* when rc != 0 */
  jmg_rdv_value value; /* when rc == 0: the leader's value */
} jmg_rdv_outcome;

/* A call that begins: WAITING, no error, no value. */
void jmg_rdv_outcome_init(jmg_rdv_outcome *o);

/* Fails the call with e (its value is dropped). */
void jmg_rdv_outcome_fail(jmg_rdv_outcome *o, const jmg_error *e);

/* The leader's fn returned rc (e says why when rc != 0) and value: the call
 * is DONE, unless it failed meanwhile (a dead leader was seen first). */
void jmg_rdv_outcome_done(jmg_rdv_outcome *o, int rc, const jmg_error *e,
                          const jmg_rdv_value *value);

/* A participant's share of an ended call: returns its rc; fills err when rc
 * != 0, and *value (if value is not NULL) with the leader's value when rc ==
 * 0, else with an empty value. */
int jmg_rdv_outcome_take(const jmg_rdv_outcome *o, jmg_error *err,
                         jmg_rdv_value *value);

/* ---- the leader's fn and an asynchronous participant's callback ---------- */

/* The leader's work, as shard 0 gave it: fn (join, join_async) or value_fn
 * (join_value, join_value_async). */
typedef struct jmg_rdv_leader {
  jmg_leader_fn fn;
  jmg_leader_value_fn value_fn;
  void *ctx;
} jmg_rdv_leader;

/* Runs the leader's work for call `id` over posts: 0 with *value filled
 * (empty when the leader has no value to give), or a negative status with
 * err filled and *value empty. A value longer than JMG_RDV_MAX_VALUE is an
 * error. */
int jmg_rdv_leader_run(const jmg_rdv_leader *l, const jmg_rdv_ident *id,
                       void *const *posts, jmg_rdv_value *value,
                       jmg_error *err);

/* How an asynchronous participant hears the end: done (join_async) or
 * value_done (join_value_async); neither for a blocking participant. */
typedef struct jmg_rdv_waiter {
  jmg_rdv_done_fn done;
  jmg_rdv_value_done_fn value_done;
  void *ctx;
} jmg_rdv_waiter;

/* Whether w is an asynchronous participant's (has a callback). */
int jmg_rdv_waiter_async(const jmg_rdv_waiter *w);

/* Tells w's participant that its call ended with rc: err when rc != 0, the
 * value when rc == 0 (callbacks get NULL for the one that does not apply). */
void jmg_rdv_waiter_call(const jmg_rdv_waiter *w, int rc,
                         const jmg_rdv_value *value, const jmg_error *err);

/* ---- time ---------------------------------------------------------------- */

/* CLOCK_MONOTONIC in seconds: a change of the wall clock can neither cut a
 * wait short nor make it endless. */
double jmg_rdv_now_s(void);

/* The absolute monotonic time t (seconds, as jmg_rdv_now_s) as a timespec for
 * pthread_cond_timedwait; a far deadline is capped (an endless wait). */
struct timespec jmg_rdv_timespec(double t);

/* Sleeps `seconds`, through signals. */
void jmg_rdv_sleep_s(double seconds);

/* Initializes the lock and condition variable a mechanism waits with: cv
 * waits on CLOCK_MONOTONIC; with pshared both are shared between processes
 * and mu is robust (when a process dies holding it, the next taker gets
 * EOWNERDEAD instead of waiting forever). mu may be NULL (a cv for an
 * existing mutex). 0, or the pthread error number with *call naming the
 * call that failed. */
int jmg_rdv_sync_init(pthread_mutex_t *mu, pthread_cond_t *cv, int pshared,
                      const char **call);

/* ---- a mechanism's public face ------------------------------------------- */

/* Defines `static const jmg_rendezvous table` (named label) from a
 * mechanism's two ways to join, so that the four public joins are written
 * once (C has no closures, hence a macro):
 *   int join(const jmg_rdv_key *key, int shard, void *post,
 *            const jmg_rdv_leader *leader, double timeout_s,
 *            jmg_rdv_value *value, jmg_error *err);   blocking; value or NULL
 *   int join_async(const jmg_rdv_key *key, int shard, void *post,
 *                  const jmg_rdv_leader *leader, double timeout_s,
 *                  const jmg_rdv_waiter *waiter, jmg_error *err);
 * join and join_async give the leader's fn and the callback in their plain
 * form, join_value and join_value_async in their value-giving form; abort_fn
 * is the mechanism's abort. */
#define JMG_RDV_MECHANISM(table, label, join, join_async, abort_fn)            \
  static int table##_join(const jmg_rdv_key *key, int shard, void *post,       \
                          jmg_leader_fn fn, void *fn_ctx, double timeout_s,    \
                          jmg_error *err) {                                    \
    return join(key, shard, post, &(jmg_rdv_leader){fn, NULL, fn_ctx},         \
                timeout_s, NULL, err);                                         \
  }                                                                            \
  static int table##_join_async(                                               \
      const jmg_rdv_key *key, int shard, void *post, jmg_leader_fn fn,         \
      void *fn_ctx, double timeout_s, jmg_rdv_done_fn done, void *done_ctx,    \
      jmg_error *err) {                                                        \
    return join_async(key, shard, post, &(jmg_rdv_leader){fn, NULL, fn_ctx},   \
                      timeout_s, &(jmg_rdv_waiter){done, NULL, done_ctx},      \
                      err);                                                    \
  }                                                                            \
  static int table##_join_value(const jmg_rdv_key *key, int shard, void *post, \
                                jmg_leader_value_fn fn, void *fn_ctx,          \
                                double timeout_s, jmg_rdv_value *value,        \
                                jmg_error *err) {                              \
    return join(key, shard, post, &(jmg_rdv_leader){NULL, fn, fn_ctx},         \
                timeout_s, value, err);                                        \
  }                                                                            \
  static int table##_join_value_async(                                         \
      const jmg_rdv_key *key, int shard, void *post, jmg_leader_value_fn fn,   \
      void *fn_ctx, double timeout_s, jmg_rdv_value_done_fn done,              \
      void *done_ctx, jmg_error *err) {                                        \
    return join_async(key, shard, post, &(jmg_rdv_leader){NULL, fn, fn_ctx},   \
                      timeout_s, &(jmg_rdv_waiter){NULL, done, done_ctx},      \
                      err);                                                    \
  }                                                                            \
  static const jmg_rendezvous table = {                                        \
      label,    table##_join,       table##_join_async,                        \
      abort_fn, table##_join_value, table##_join_value_async}

#endif
