/* Gathering the participants of one call.
 *
 * XLA calls an op's handler once per device (one thread each in SPMD, one
 * process each in MPMD). The rendezvous gathers the participants of one call
 * (one per shard), lets the leader (shard 0) run its fn over everyone's
 * posts, and releases every participant with the leader's result: a status,
 * and, through join_value, a small value (up to JMG_RDV_MAX_VALUE bytes, e.g.
 * an NCCL unique id that every participant needs).
 *
 * Promises:
 *  - Calls never mix: a call is keyed by (op, mesh id, run id, sequence
 *    number, participant count). The run id is XLA's (XLA_FFI_RunId_Get); the
 *    mesh id tells apart device groups and call sites; the sequence number
 *    tells apart successive executions of one call site under one run id (a
 *    call in a loop, or a platform whose run id does not change).
 *  - Nobody hangs: an error on any participant, on the leader, or a participant
 *    that does not arrive within the timeout becomes an error on every
 *    participant. The timeout bounds only the wait for the others to arrive,
 *    never the leader's work (an eigensolve can take minutes).
 *  - A participant that arrives after its call has failed fails at once.
 *  - A value is handed over only with success: on any error every
 *    participant's value is empty, never a stale or partial one.
 *
 * The layer is one core and two mechanisms:
 *  - core.{h,c} (internal): a call's identity, the checks of a key, every
 *    message, a call's outcome (status, error, value), the leader's fn and
 *    the asynchronous callbacks, time and deadlines; sequence numbers and
 *    the default timeout below.
 *  - rendezvous_threads.c: threads of one process meet in a list of sessions
 *    under one mutex and condition variable.
 *  - rendezvous_processes.c: processes of one node meet in one POSIX
 *    shared-memory segment per call (common/shm.h) under a robust
 *    process-shared mutex, and tell a dead participant by common/proc.h. */
#ifndef JMG_RENDEZVOUS_RENDEZVOUS_H
#define JMG_RENDEZVOUS_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

/* The process rendezvous copies posts between processes: there, `post` must
 * point to JMG_RDV_MAX_POST readable bytes (or be NULL, read as zeros), which
 * are copied into shared memory, and the leader's fn gets pointers to those
 * copies. The thread rendezvous passes post pointers through untouched. */
#define JMG_RDV_MAX_POST 4096

/* The most bytes of value a call hands to its participants (an NCCL unique
 * id is 128). */
#define JMG_RDV_MAX_VALUE 256

#include "common/error.h"

typedef struct jmg_rdv_key {
  const char *op;  /* op name, e.g. "potrs" (at most 31 characters kept) */
  int64_t mesh_id; /* identifies the device group and the call site (the
                      ffi layer combines the Python layer's mesh id, the
                      group index and the call-site id) */
  int64_t run_id;  /* XLA's run id */
  int64_t seq;     /* see jmg_rdv_next_seq */
  int nparts;      /* number of participants (shards) */
  /* Not part of the call's identity: the pid of each shard's process (nparts
   * entries, 0 where unknown), or NULL. The process rendezvous fails the call
   * as soon as an expected process is gone before it arrived, instead of
   * waiting out the timeout; the thread rendezvous ignores it. Read only
   * while the join (any of the four) has not returned. */
  const int64_t *pids;
} jmg_rdv_key;

/* What a call hands to every participant: len bytes (0 for none). */
typedef struct jmg_rdv_value {
  size_t len;
  unsigned char bytes[JMG_RDV_MAX_VALUE];
} jmg_rdv_value;

/* Run by the leader once every participant has arrived. posts[i] is what
 * shard i posted. Returns 0 or a negative status with err filled. */
typedef int (*jmg_leader_fn)(void *ctx, void *const *posts, int nparts,
                             jmg_error *err);

/* The leader's fn of join_value: as jmg_leader_fn, and on success it may
 * write up to JMG_RDV_MAX_VALUE bytes into value (value->len of them; value
 * comes empty), which every participant receives. A value another shard
 * produces reaches the leader in that shard's post. */
typedef int (*jmg_leader_value_fn)(void *ctx, void *const *posts, int nparts,
                                   jmg_rdv_value *value, jmg_error *err);

/* Called once for a participant that joined asynchronously, when its call is
 * over: rc is 0 or a negative status, err says why (NULL when rc is 0). */
typedef void (*jmg_rdv_done_fn)(void *done_ctx, int rc, const jmg_error *err);

/* As jmg_rdv_done_fn, with the call's value (NULL when rc is not 0). */
typedef void (*jmg_rdv_value_done_fn)(void *done_ctx, int rc,
                                      const jmg_rdv_value *value,
                                      const jmg_error *err);

typedef struct jmg_rendezvous {
  const char *name;
  /* Joins call `key` as participant `shard` (0 <= shard < key->nparts) with
   * `post`, and returns once the call is over: 0 if the leader's fn returned
   * 0, else a negative status with err filled (the leader's error, or why the
   * call failed). Only the leader's fn and fn_ctx are used. */
  int (*join)(const jmg_rdv_key *key, int shard, void *post, jmg_leader_fn fn,
              void *fn_ctx, double timeout_s, jmg_error *err);
  /* Joins like join, but returns at once: 0 once joined, after which done is
   * called exactly once, on some participant's thread or the timeout
   * watchdog's, possibly before join_async returns; or a negative status with
   * err filled, without calling done, when it could not join (the call had
   * already failed). The participant that completes the call runs the
   * leader's fn when shard 0 joined asynchronously. XLA:CPU needs this: it
   * may run independent operations in different orders on different devices,
   * and a device blocked in one call could never reach the next. */
  int (*join_async)(const jmg_rdv_key *key, int shard, void *post,
                    jmg_leader_fn fn, void *fn_ctx, double timeout_s,
                    jmg_rdv_done_fn done, void *done_ctx, jmg_error *err);
  /* Tells the call `key` that participant `shard` failed before it could join
   * (why says how); everyone waiting for the call, and everyone arriving
   * later, fails with that error. Returns at once. */
  void (*abort)(const jmg_rdv_key *key, int shard, const jmg_error *why);
  /* join and join_async, and each participant also receives the value the
   * leader's fn (shard 0's) wrote: into *value when join_value returns 0, or
   * through done. On an error *value is empty (len 0, all bytes 0). Calls
   * with and without a value meet: a participant of join or join_async
   * receives nothing, and when shard 0 joined with join or join_async the
   * value is empty. */
  int (*join_value)(const jmg_rdv_key *key, int shard, void *post,
                    jmg_leader_value_fn fn, void *fn_ctx, double timeout_s,
                    jmg_rdv_value *value, jmg_error *err);
  int (*join_value_async)(const jmg_rdv_key *key, int shard, void *post,
                          jmg_leader_value_fn fn, void *fn_ctx,
                          double timeout_s, jmg_rdv_value_done_fn done,
                          void *done_ctx, jmg_error *err);
} jmg_rendezvous;

/* Threads of one process: mutex + condition variable. */
const jmg_rendezvous *jmg_rendezvous_threads(void);

/* Processes of one node: one POSIX shared-memory segment per call, with a
 * robust process-shared mutex + condition variable. join and abort behave as
 * the thread version. join_async arrives before it returns and waits on a
 * thread of its own; the leader's fn always runs in shard 0's process (on
 * that thread when shard 0 joined asynchronously), since only it holds the
 * leader's context. Posts are copied (see JMG_RDV_MAX_POST); so is the
 * value. */
const jmg_rendezvous *jmg_rendezvous_processes(void);

/* Removes the process rendezvous' segments that are stale (left behind by
 * crashed jobs: waiting or failed, with every process that created, joined or
 * aborted them dead), by the rule the rendezvous itself applies to a segment
 * it finds under its own name. Never touches a segment with a live owner.
 * Returns how many were removed. Called once per process, at its first
 * call through the process rendezvous: a crashed job's segments never meet
 * a later job (their names hash another job's identity) but would stay in
 * /dev/shm. */
int jmg_rdv_sweep_stale(void);

/* The POSIX shared-memory name ("/jaxmg-" and 16 hex digits) of the process
 * rendezvous' segment for call key: a hash of the key, so that every process
 * of the call finds it. */
void jmg_rdv_segment_name(const jmg_rdv_key *key, char *name, size_t len);

/* The sequence number of the next call of `op` by participant `shard` of
 * mesh `mesh_id` under run id `run_id`: 0 for the first call under a run id,
 * then 1, 2, ... One call site executes in the same order on every device
 * (loop iterations are sequential), so the k-th call on one shard meets the
 * k-th call on the others. */
int64_t jmg_rdv_next_seq(const char *op, int64_t mesh_id, int shard,
                         int64_t run_id);

/* Seconds to wait for all participants: $JAXMG_RENDEZVOUS_TIMEOUT if set to a
 * positive number, else 300 (read by common/config.h). */
double jmg_rdv_default_timeout(void);

#endif
