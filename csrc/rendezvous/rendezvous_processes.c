/* The rendezvous for processes of one node (one process per device): the
 * mechanism only; keys, messages, outcomes and time are the core's (core.h),
 * shared memory is common/shm.h's and "dead" is common/proc.h's.
 *
 * One POSIX shared-memory segment per call, named "/jaxmg-<16 hex digits>"
 * after a 64-bit FNV-1a hash of the key; the full key is stored inside and
 * checked, so a hash collision is an error, never a mixed call. The segment
 * holds a header (a robust process-shared mutex, a process-shared condition
 * variable on CLOCK_MONOTONIC, the call's outcome: state, rc, error and
 * value, and a record per shard: pid, present, inside, touched) and one post
 * slot of JMG_RDV_MAX_POST bytes per shard. A participant's post is copied
 * into its slot; the leader (shard 0) runs fn over pointers to the slots,
 * and its value is copied into the header for everyone to copy out.
 *
 * Creation: the first comer creates the name with O_CREAT|O_EXCL, sizes it,
 * initializes the header and writes the magic word last (release); others open
 * the name, wait until it has its full size and the magic word (acquire).
 *
 * Life of the name:
 *  - When the last participant arrives the name is unlinked at once (the
 *    members keep their mappings): a later call with the same key starts a
 *    fresh segment, as the thread version unlists a complete session.
 *  - A failed call keeps its segment as a tombstone, so that later arrivals
 *    fail at once; the last participant to leave unlinks it once every shard
 *    has come (joined or aborted). A tombstone for a shard that never comes
 *    stays in /dev/shm until a later opener finds it stale (below).
 *  - Each process munmaps its own mapping when it leaves; nobody destroys the
 *    shared mutex or condition variable (a killed waiter can make that hang).
 *
 * Stale segments (left behind by dead processes) are replaced, never joined:
 *  - WAITING with a present participant whose process is dead: the call is
 *    marked FAILED ("shard k (pid p) exited"); then, as for any FAILED
 *    segment,
 *  - FAILED, or WAITING, with no live owner (its creator and every process
 *    that joined or aborted it dead): stale; unlinked and created anew.
 *  - A segment (one inode) that is not initialized (size or magic word)
 *    within min(timeout / 2, 1 s) of our first look at it: its creator died
 *    between shm_open and the magic word (that takes microseconds); unlinked
 *    and created anew. The inode check keeps two joiners that both gave up
 *    on it from unlinking each other's fresh segment (but for a window of
 *    microseconds between the check and the unlink).
 * There is no age rule: a live owner means someone may still rely on the
 * segment. "Dead" is jmg_proc_alive's definition (gone, a zombie, or
 * exiting), so pids must be of one pid namespace.
 *
 * Every unlink of the name happens under the segment's mutex and sets its
 * `unlinked` flag first, so a segment's name is removed at most once and never
 * a newer segment's (except by the uninitialized-segment rule above, which
 * has no mutex to take).
 *
 * Waiting: every wait wakes at least every 50 ms to look for dead
 * participants (during arrivals: any present one, and any process the key
 * names for a shard that has not come; while the leader works: the leader),
 * so a killed process fails the call within the timeout. The
 * timeout bounds only the wait for arrivals, as in the thread version. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/proc.h"
#include "common/shm.h"
#include "rendezvous/core.h"
#include "rendezvous/rendezvous.h"

#define NAME_PREFIX "jaxmg-"
#define NAME_LEN 40
#define SEG_MAGIC 0x6a6d67524456320aULL /* "jmgRDV2\n" (2: with a value) */
#define MAX_PARTS 65536
#define POLL_S 0.05

typedef jmg_rdv_ident ident;

typedef struct shard_rec {
  pid_t pid;             /* the process that joined or aborted as this shard */
  unsigned char present; /* joined (posted) */
  unsigned char inside;  /* still inside join() */
  unsigned char touched; /* joined or aborted */
  unsigned char pad;
} shard_rec;

typedef struct seg {
  _Atomic uint64_t magic; /* SEG_MAGIC once initialized (written last) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  ident id;
  pid_t creator;
  int arrived, touched;
  int inside;   /* participants inside join() (a killed one never leaves) */
  int unlinked; /* the name no longer refers to this segment */
  jmg_rdv_outcome out;
  shard_rec shards[]; /* nparts of them, then the post slots */
} seg;

/* One participant's view of a segment. */
typedef struct mapping {
  seg *s;      /* shm.base once mapped and checked */
  jmg_shm shm;
  size_t size; /* the size a segment of this call has */
  char name[NAME_LEN];
} mapping;

/* ---- the segment's name and layout --------------------------------------- */

static void make_name(const ident *id, char *name, size_t len) {
  uint64_t h = JMG_SHM_HASH_INIT;
  h = jmg_shm_hash(h, id->op, strlen(id->op) + 1);
  h = jmg_shm_hash(h, &id->mesh_id, sizeof id->mesh_id);
  h = jmg_shm_hash(h, &id->run_id, sizeof id->run_id);
  h = jmg_shm_hash(h, &id->seq, sizeof id->seq);
  h = jmg_shm_hash(h, &id->nparts, sizeof id->nparts);
  snprintf(name, len, "/" NAME_PREFIX "%016llx", (unsigned long long)h);
}

void jmg_rdv_segment_name(const jmg_rdv_key *key, char *name, size_t len) {
  const ident id = jmg_rdv_ident_of(key);
  make_name(&id, name, len);
}

static size_t posts_offset(int nparts) {
  size_t off = sizeof(seg) + (size_t)nparts * sizeof(shard_rec);
  return (off + 63) & ~(size_t)63;
}

static size_t seg_size(int nparts) {
  return posts_offset(nparts) + (size_t)nparts * JMG_RDV_MAX_POST;
}

static unsigned char *slot(seg *s, int shard) {
  return (unsigned char *)s + posts_offset(s->id.nparts) +
         (size_t)shard * JMG_RDV_MAX_POST;
}

/* ---- the segment, under its mutex ---------------------------------------- */

static void fail_seg(seg *s, const jmg_error *e) {
  jmg_rdv_outcome_fail(&s->out, e);
  pthread_cond_broadcast(&s->cv);
}

/* A process died holding the mutex: make it usable and fail the call. */
static int owner_died(seg *s, const char *call, jmg_error *err) {
  int r = pthread_mutex_consistent(&s->mu);
  if (r != 0) {
    int rc =
        jmg_error_sys(err, JMG_EINTERNAL, s->id.op, "pthread_mutex_consistent",
                      r, "cannot recover the rendezvous lock");
    pthread_mutex_unlock(&s->mu);
    return rc;
  }
  if (s->out.state == JMG_RDV_WAITING || s->out.state == JMG_RDV_RUNNING) {
    jmg_error e;
    jmg_error_set(&e, JMG_EPEER, s->id.op, call,
                  "a participant died while holding the rendezvous lock");
    fail_seg(s, &e);
  }
  return 0;
}

static int seg_lock(seg *s, jmg_error *err) {
  int r = pthread_mutex_lock(&s->mu);
  if (r == EOWNERDEAD) return owner_died(s, "pthread_mutex_lock", err);
  if (r != 0)
    return jmg_error_sys(err, JMG_EINTERNAL, s->id.op, "pthread_mutex_lock", r,
                         "cannot take the rendezvous lock");
  return 0;
}

static void seg_unlock(seg *s) { pthread_mutex_unlock(&s->mu); }

/* Waits on the condition variable for at most `seconds`. 0, or a negative
 * status with the mutex released. */
static int seg_wait(seg *s, double seconds, jmg_error *err) {
  struct timespec until = jmg_rdv_timespec(jmg_rdv_now_s() + seconds);
  int r = pthread_cond_timedwait(&s->cv, &s->mu, &until);
  if (r == 0 || r == ETIMEDOUT) return 0;
  if (r == EOWNERDEAD) return owner_died(s, "pthread_cond_timedwait", err);
  int rc = jmg_error_sys(err, JMG_EINTERNAL, s->id.op, "pthread_cond_timedwait",
                         r, "cannot wait for the other participants");
  seg_unlock(s);
  return rc;
}

/* Removes the name, once. Under the mutex. */
static int unlink_name(mapping *m, jmg_error *err) {
  if (m->s->unlinked) return 0;
  m->s->unlinked = 1;
  int rc = jmg_shm_unlink(m->name, m->s->id.op, err);
  return rc < 0 ? rc : 0;
}

static int first_dead_present(const seg *s) {
  for (int i = 0; i < s->id.nparts; ++i)
    if (s->shards[i].present && s->shards[i].inside &&
        !jmg_proc_alive(s->shards[i].pid))
      return i;
  return -1;
}

static int any_owner_alive(const seg *s) {
  if (jmg_proc_alive(s->creator)) return 1;
  for (int i = 0; i < s->id.nparts; ++i)
    if (s->shards[i].touched && jmg_proc_alive(s->shards[i].pid)) return 1;
  return 0;
}

#define OVER "before the call was over"

/* Fails the call: shard's process (pid) is dead. */
static void fail_dead(seg *s, int shard, pid_t pid, const char *when) {
  jmg_error e;
  jmg_rdv_exited_error(&s->id, shard, pid, when, &e);
  fail_seg(s, &e);
}

/* Fails a waiting call whose present participant is dead. */
static void fail_if_present_dead(seg *s) {
  if (s->out.state != JMG_RDV_WAITING) return;
  int d = first_dead_present(s);
  if (d >= 0) fail_dead(s, d, s->shards[d].pid, OVER);
}

/* Whether a segment is stale: waiting or failed with no live owner. */
static int stale(const seg *s) {
  return (s->out.state == JMG_RDV_WAITING || s->out.state == JMG_RDV_FAILED) &&
         !any_owner_alive(s);
}

/* The first shard that has not come although the process expected to be it
 * (key.pids) is dead: a process killed before it reached the call, which
 * would otherwise hold everyone until the timeout. */
static int first_dead_expected(const seg *s, const pid_t *expect) {
  if (expect == NULL) return -1;
  for (int i = 0; i < s->id.nparts; ++i)
    if (!s->shards[i].touched && expect[i] > 0 && !jmg_proc_alive(expect[i]))
      return i;
  return -1;
}

static int has_arrived(const void *ctx, int shard) {
  return ((const seg *)ctx)->shards[shard].present;
}

/* A shard has come (joined or aborted). Under the mutex. */
static void touch(seg *s, int shard) {
  if (s->shards[shard].touched) return;
  s->shards[shard].touched = 1;
  s->shards[shard].pid = getpid();
  s->touched++;
}

/* Drops the name of a failed segment that nobody needs any more: every shard
 * has come, and nobody alive is still inside (a killed participant never
 * leaves). */
static int maybe_unlink_failed(mapping *m, jmg_error *err) {
  seg *s = m->s;
  if (s->out.state != JMG_RDV_FAILED || s->touched != s->id.nparts) return 0;
  for (int i = 0; i < s->id.nparts; ++i)
    if (s->shards[i].inside && jmg_proc_alive(s->shards[i].pid)) return 0;
  return unlink_name(m, err);
}

/* ---- opening ------------------------------------------------------------- */

static void unmap(mapping *m) {
  jmg_shm_unmap(&m->shm);
  m->s = NULL;
}

/* Creates the segment; JMG_SHM_TAKEN if the name already exists, 0 once
 * created and initialized (mapped in m), or a negative status. */
static int create_seg(mapping *m, const ident *id, jmg_error *err) {
  int rc = jmg_shm_create(m->name, m->size, &m->shm, id->op, err);
  if (rc != 0) return rc;
  seg *s = m->shm.base;
  s->id = *id;
  s->creator = getpid();
  jmg_rdv_outcome_init(&s->out);
  const char *call;
  int r = jmg_rdv_sync_init(&s->mu, &s->cv, 1, &call);
  if (r != 0) {
    rc = jmg_error_sys(err, JMG_EINTERNAL, id->op, call, r,
                       "cannot set up the shared rendezvous lock");
    jmg_error ignored; /* the setup's error says more */
    unmap(m);
    (void)jmg_shm_unlink(m->name, id->op, &ignored);
    return rc;
  }
  atomic_store_explicit(&s->magic, SEG_MAGIC, memory_order_release);
  m->s = s;
  return 0;
}

#define VANISHED 1 /* open_seg: the name is gone (try again) */
#define UNINIT 2   /* open_seg: the segment is not initialized yet */

/* Opens an existing segment: 0 once mapped and initialized, VANISHED, UNINIT
 * (*ino says which object that is), or a negative status. */
static int open_seg(mapping *m, const ident *id, ino_t *ino, jmg_error *err) {
  int rc = jmg_shm_open(m->name, &m->shm, id->op, err);
  *ino = m->shm.ino;
  if (rc == JMG_SHM_ABSENT) return VANISHED;
  if (rc == JMG_SHM_UNSIZED) return UNINIT; /* the creator has not sized it */
  if (rc != 0) return rc;
  if (m->shm.size != m->size) {
    rc = jmg_error_set(err, JMG_EINTERNAL, id->op, "rendezvous",
                       "shared segment %s has %zu bytes, not %zu: another "
                       "call's segment (hash collision?)",
                       m->name, m->shm.size, m->size);
    unmap(m);
    return rc;
  }
  seg *s = m->shm.base;
  if (atomic_load_explicit(&s->magic, memory_order_acquire) != SEG_MAGIC) {
    unmap(m);
    return UNINIT;
  }
  if (!jmg_rdv_ident_same(&s->id, id)) {
    unmap(m);
    return jmg_error_set(err, JMG_EINTERNAL, id->op, "rendezvous",
                         "shared segment %s belongs to another call (hash "
                         "collision)",
                         m->name);
  }
  m->s = s;
  return 0;
}

/* Maps the segment of call `id`, creating it or replacing a stale one, and
 * returns with its mutex held. 0 or a negative status (nothing held). */
static int attach(mapping *m, const ident *id, double timeout_s,
                  jmg_error *err) {
  memset(m, 0, sizeof *m);
  make_name(id, m->name, sizeof m->name);
  m->size = seg_size(id->nparts);
  double grace = timeout_s / 2 < 1.0 ? timeout_s / 2 : 1.0;
  double uninit_since = -1;
  ino_t uninit_ino = 0;
  for (int attempt = 0;; ++attempt) {
    ino_t ino = 0;
    int rc = create_seg(m, id, err);
    if (rc < 0) return rc;
    if (rc == JMG_SHM_TAKEN) rc = open_seg(m, id, &ino, err);
    if (rc < 0) return rc;
    if (rc == VANISHED) continue; /* between the two: create it */
    if (rc == UNINIT) {
      if (uninit_since < 0 || ino != uninit_ino) { /* a new one: look anew */
        uninit_since = jmg_rdv_now_s();
        uninit_ino = ino;
      }
      if (jmg_rdv_now_s() - uninit_since > grace) {
        /* Its creator died before initializing it: replace it. */
        rc = jmg_shm_unlink(m->name, id->op, err);
        if (rc < 0) return rc;
        uninit_since = -1;
        continue;
      }
      jmg_rdv_sleep_s(0.001);
      continue;
    }
    uninit_since = -1;
    rc = seg_lock(m->s, err);
    if (rc != 0) {
      unmap(m);
      return rc;
    }
    seg *s = m->s;
    fail_if_present_dead(s);
    if (stale(s)) {
      /* Left behind by processes that are all dead. */
      rc = unlink_name(m, err);
      seg_unlock(s);
      unmap(m);
      if (rc != 0) return rc;
      if (attempt > 1000)
        return jmg_error_set(err, JMG_EINTERNAL, id->op, "rendezvous",
                             "cannot replace stale shared segment %s", m->name);
      continue;
    }
    if (s->unlinked) { /* complete, or replaced: not ours */
      seg_unlock(s);
      unmap(m);
      continue;
    }
    return 0;
  }
}

/* ---- joining ------------------------------------------------------------- */

/* Leaves the segment (under its mutex) and lets go of it. */
static int leave(mapping *m, int shard, int rc, jmg_error *err) {
  seg *s = m->s;
  s->inside--;
  s->shards[shard].inside = 0;
  jmg_error e;
  int urc = maybe_unlink_failed(m, &e);
  if (urc != 0 && rc == 0) {
    rc = urc;
    jmg_error_copy(err, &e);
  }
  seg_unlock(s);
  unmap(m);
  return rc;
}

/* One participant between its arrival and its leaving. */
typedef struct part {
  mapping m;
  ident id;
  int shard;
  double deadline;
  double timeout_s;
  void **posts;  /* the leader's: pointers to the slots */
  pid_t *expect; /* key.pids, copied (it may not outlive join_async) */
  jmg_rdv_leader leader;
} part;

static void part_free(part *p) {
  free(p->posts);
  p->posts = NULL;
  free(p->expect);
  p->expect = NULL;
}

/* Attaches to the call and posts. 0: arrived, with the segment's mutex held;
 * 1: the call was over before we came (failed, or the shard was claimed
 * twice), rc and err say why, nothing held; or a negative status. */
static int arrive(const jmg_rdv_key *key, int shard, void *post,
                  const jmg_rdv_leader *leader, double timeout_s, part *p,
                  int *rc_out, jmg_error *err) {
  memset(p, 0, sizeof *p);
  int rc = jmg_rdv_check_key(key, shard, MAX_PARTS, err);
  if (rc != 0) return rc;
  p->deadline = jmg_rdv_now_s() + timeout_s;
  p->timeout_s = timeout_s;
  p->id = jmg_rdv_ident_of(key);
  p->shard = shard;
  p->leader = *leader;
  const ident *id = &p->id;
  if (shard == 0) {
    p->posts = calloc((size_t)id->nparts, sizeof *p->posts);
    if (p->posts == NULL)
      return jmg_error_set(err, JMG_ENOMEM, id->op, "rendezvous",
                           "cannot allocate the posts of %d participants",
                           id->nparts);
  }
  if (key->pids != NULL) {
    p->expect = calloc((size_t)id->nparts, sizeof *p->expect);
    if (p->expect == NULL) {
      part_free(p);
      return jmg_error_set(err, JMG_ENOMEM, id->op, "rendezvous",
                           "cannot allocate the pids of %d participants",
                           id->nparts);
    }
    for (int i = 0; i < id->nparts; ++i)
      p->expect[i] = key->pids[i] > 0 && key->pids[i] <= INT32_MAX
                         ? (pid_t)key->pids[i]
                         : 0;
  }
  rc = attach(&p->m, id, timeout_s, err);
  if (rc != 0) {
    part_free(p);
    return rc;
  }
  seg *s = p->m.s;

  if (s->out.state == JMG_RDV_FAILED) { /* arriving after the failure */
    touch(s, shard);
    *rc_out = jmg_rdv_outcome_take(&s->out, err, NULL);
    jmg_error e; /* an unlink failure here: the call's error says more */
    (void)maybe_unlink_failed(&p->m, &e);
    seg_unlock(s);
    unmap(&p->m);
    part_free(p);
    return 1;
  }
  if (s->shards[shard].touched) {
    jmg_rdv_duplicate_error(id, shard, err);
    fail_seg(s, err);
    *rc_out = -(int)err->code;
    seg_unlock(s);
    unmap(&p->m);
    part_free(p);
    return 1;
  }

  touch(s, shard);
  s->shards[shard].present = 1;
  s->shards[shard].inside = 1;
  s->inside++;
  if (post != NULL)
    memcpy(slot(s, shard), post, JMG_RDV_MAX_POST);
  else
    memset(slot(s, shard), 0, JMG_RDV_MAX_POST);
  s->arrived++;
  if (s->arrived == id->nparts) {
    s->out.state = JMG_RDV_RUNNING;
    jmg_error e;
    if (unlink_name(&p->m, &e) != 0) fail_seg(s, &e);
    pthread_cond_broadcast(&s->cv);
  }
  return 0;
}

/* Waits for the others to arrive (or for the call to fail). Under the mutex;
 * 0, or a negative status with the mutex lost. */
static int await_arrivals(part *p, jmg_error *err) {
  seg *s = p->m.s;
  while (s->out.state == JMG_RDV_WAITING) {
    double left = p->deadline - jmg_rdv_now_s();
    if (left <= 0) {
      jmg_error e;
      jmg_rdv_timeout_error(&s->id, s->arrived, has_arrived, s, p->timeout_s,
                            &e);
      fail_seg(s, &e);
      break;
    }
    int rc = seg_wait(s, left < POLL_S ? left : POLL_S, err);
    if (rc != 0) return rc;
    fail_if_present_dead(s);
    if (s->out.state == JMG_RDV_WAITING) {
      int d = first_dead_expected(s, p->expect);
      if (d >= 0) fail_dead(s, d, p->expect[d], "before it arrived");
    }
  }
  return 0;
}

/* From arrival to leaving: waits for the others, runs the leader's fn on
 * shard 0, waits for the end, takes this participant's share of the outcome
 * (value may be NULL) and leaves. Called with the mutex held; returns the
 * call's outcome with nothing held and p freed. */
static int await_end(part *p, jmg_rdv_value *value, jmg_error *err) {
  seg *s = p->m.s;
  int rc = await_arrivals(p, err);
  if (rc != 0) goto lost_lock;

  /* The leader runs the op, without the lock: it may take minutes. */
  if (s->out.state == JMG_RDV_RUNNING && p->shard == 0) {
    for (int i = 0; i < p->id.nparts; ++i) p->posts[i] = slot(s, i);
    seg_unlock(s);
    jmg_error e;
    jmg_rdv_value v;
    int frc = jmg_rdv_leader_run(&p->leader, &p->id, p->posts, &v, &e);
    rc = seg_lock(s, err);
    if (rc != 0) goto lost_lock;
    jmg_rdv_outcome_done(&s->out, frc, &e, &v);
    pthread_cond_broadcast(&s->cv);
  }
  while (s->out.state == JMG_RDV_RUNNING) {
    rc = seg_wait(s, POLL_S, err);
    if (rc != 0) goto lost_lock;
    if (s->out.state == JMG_RDV_RUNNING && !jmg_proc_alive(s->shards[0].pid))
      fail_dead(s, 0, s->shards[0].pid, OVER);
  }
  rc = jmg_rdv_outcome_take(&s->out, err, value);
  part_free(p);
  rc = leave(&p->m, p->shard, rc, err);
  if (rc != 0 && value != NULL) memset(value, 0, sizeof *value);
  return rc;

lost_lock: /* the lock is broken (and not held): the segment is lost */
  unmap(&p->m);
  part_free(p);
  return rc;
}

static int join_blocking(const jmg_rdv_key *key, int shard, void *post,
                         const jmg_rdv_leader *leader, double timeout_s,
                         jmg_rdv_value *value, jmg_error *err) {
  if (value != NULL) memset(value, 0, sizeof *value);
  part p;
  int over_rc = 0;
  int rc = arrive(key, shard, post, leader, timeout_s, &p, &over_rc, err);
  if (rc < 0) return rc;
  if (rc == 1) return over_rc;
  return await_end(&p, value, err);
}

/* An asynchronous participant: its arrival happens in join_async, the rest
 * on a thread of its own (the robust mutex is released in between: a mutex
 * belongs to the thread that took it). */
typedef struct async_part {
  part p;
  jmg_rdv_waiter waiter;
} async_part;

static void finish_async(async_part *a) {
  jmg_error err;
  jmg_error_clear(&err);
  jmg_rdv_value value;
  memset(&value, 0, sizeof value);
  int rc = seg_lock(a->p.m.s, &err);
  if (rc == 0) {
    rc = await_end(&a->p, &value, &err);
  } else {
    unmap(&a->p.m);
    part_free(&a->p);
  }
  jmg_rdv_waiter_call(&a->waiter, rc, &value, &err);
  free(a);
}

static void *async_main(void *arg) {
  finish_async(arg);
  return NULL;
}

static int join_async(const jmg_rdv_key *key, int shard, void *post,
                      const jmg_rdv_leader *leader, double timeout_s,
                      const jmg_rdv_waiter *waiter, jmg_error *err) {
  async_part *a = calloc(1, sizeof *a);
  if (a == NULL)
    return jmg_error_set(err, JMG_ENOMEM, key->op, "rendezvous",
                         "cannot allocate an asynchronous participant");
  a->waiter = *waiter;
  int over_rc = 0;
  int rc = arrive(key, shard, post, leader, timeout_s, &a->p, &over_rc, err);
  if (rc != 0) {
    free(a);
    return rc < 0 ? rc : over_rc;
  }
  seg_unlock(a->p.m.s);
  pthread_t t;
  pthread_attr_t attr;
  int r = pthread_attr_init(&attr);
  if (r == 0) r = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (r == 0) r = pthread_create(&t, &attr, async_main, a);
  pthread_attr_destroy(&attr);
  /* Joined already: without a thread of its own it finishes on this one,
   * blocking (the leader's work, or the wait for the others). */
  if (r != 0) finish_async(a);
  return 0;
}

static void procs_abort(const jmg_rdv_key *key, int shard,
                        const jmg_error *why) {
  jmg_error e;
  if (jmg_rdv_abort_begin(key, shard, MAX_PARTS, why, &e) != 0) return;
  const ident id = jmg_rdv_ident_of(key);
  mapping m;
  jmg_error ignored;
  /* abort returns at once: a short bound on waiting for the segment. */
  if (attach(&m, &id, 1.0, &ignored) != 0) return;
  seg *s = m.s;
  if (s->out.state == JMG_RDV_WAITING) fail_seg(s, &e);
  touch(s, shard);
  maybe_unlink_failed(&m, &ignored);
  seg_unlock(s);
  unmap(&m);
}

JMG_RDV_MECHANISM(g_processes, "processes", join_blocking, join_async,
                  procs_abort);

const jmg_rendezvous *jmg_rendezvous_processes(void) { return &g_processes; }

/* ---- sweeping ------------------------------------------------------------ */

/* Looks at one segment found in /dev/shm: unlinks it when it is stale (the
 * rule of attach). 1 if removed, else 0. */
static int sweep_one(void *ctx, const char *name) {
  (void)ctx;
  /* Ours: "/jaxmg-" and 16 hex digits (see make_name). */
  const char *hex = name + 1 + strlen(NAME_PREFIX);
  if (strlen(hex) != 16 || strspn(hex, "0123456789abcdef") != 16) return 0;
  mapping m;
  memset(&m, 0, sizeof m);
  snprintf(m.name, sizeof m.name, "%s", name);
  jmg_error err;
  if (jmg_shm_open(m.name, &m.shm, "rendezvous", &err) != 0)
    return 0; /* gone meanwhile, or being created: its creator decides */
  seg *s = m.shm.base;
  if (m.shm.size < sizeof(seg) ||
      atomic_load_explicit(&s->magic, memory_order_acquire) != SEG_MAGIC ||
      s->id.nparts < 1 || s->id.nparts > MAX_PARTS ||
      seg_size(s->id.nparts) != m.shm.size) {
    unmap(&m);
    return 0;
  }
  m.s = s;
  if (seg_lock(s, &err) != 0) {
    unmap(&m);
    return 0; /* a broken lock: left to attach's rules */
  }
  fail_if_present_dead(s);
  int removed = 0;
  if (stale(s) && !s->unlinked) removed = unlink_name(&m, &err) == 0;
  seg_unlock(s);
  unmap(&m);
  return removed;
}

int jmg_rdv_sweep_stale(void) {
  return jmg_shm_sweep(NAME_PREFIX, sweep_one, NULL);
}
