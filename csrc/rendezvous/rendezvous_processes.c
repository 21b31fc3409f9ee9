/* The rendezvous for processes of one node (one process per device).
 *
 * One POSIX shared-memory segment per call, named "/jaxmg-<16 hex digits>"
 * after a 64-bit FNV-1a hash of the key; the full key is stored inside and
 * checked, so a hash collision is an error, never a mixed call. The segment
 * holds a header (a robust process-shared mutex, a process-shared condition
 * variable on CLOCK_MONOTONIC, the state, the leader's rc and error, and a
 * record per shard: pid, present, inside, touched) and one post slot of
 * JMG_RDV_MAX_POST bytes per shard. A participant's post is copied into its
 * slot; the leader (shard 0) runs fn over pointers to the slots.
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
 *  - WAITING with a present participant whose pid is gone: the call is marked
 *    FAILED ("shard k (pid p) exited"); then, as for any FAILED segment,
 *  - FAILED, or WAITING, with no live owner (its creator and every process
 *    that joined or aborted it gone): stale; unlinked and created anew.
 *  - A segment (one inode) that is not initialized (size or magic word)
 *    within min(timeout / 2, 1 s) of our first look at it: its creator died
 *    between shm_open and the magic word (that takes microseconds); unlinked
 *    and created anew. The inode check keeps two joiners that both gave up
 *    on it from unlinking each other's fresh segment (but for a window of
 *    microseconds between the check and the unlink).
 * There is no age rule: a live owner means someone may still rely on the
 * segment. "Gone" is kill(pid, 0) failing with ESRCH, or /proc/<pid>/stat
 * saying zombie (dead, not yet reaped), so pids must be of one pid
 * namespace.
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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "rendezvous/call_ident.h"
#include "rendezvous/rendezvous.h"

#define NAME_LEN 40
#define SEG_MAGIC 0x6a6d67524456310aULL /* "jmgRDV1\n" */
#define MAX_PARTS 65536
#define POLL_S 0.05

typedef enum { WAITING = 1, RUNNING, DONE, FAILED } seg_state;

typedef jmg_call_ident ident;

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
  int state; /* seg_state */
  int rc;
  int arrived, touched;
  int inside;   /* participants inside join() (a killed one never leaves) */
  int unlinked; /* the name no longer refers to this segment */
  jmg_error err;
  shard_rec shards[]; /* nparts of them, then the post slots */
} seg;

/* One participant's view of a segment. */
typedef struct mapping {
  seg *s;
  size_t size;
  char name[NAME_LEN];
} mapping;

/* ---- small helpers ------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct timespec to_timespec(double t) {
  struct timespec ts;
  if (t > 4e9) t = 4e9;
  ts.tv_sec = (time_t)t;
  ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec += 1;
    ts.tv_nsec -= 1000000000L;
  }
  if (ts.tv_nsec < 0) ts.tv_nsec = 0;
  return ts;
}

static void sleep_s(double s) {
  struct timespec ts = to_timespec(s);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

static void make_name(const ident *id, char *name, size_t len) {
  uint64_t h = 14695981039346656037ULL;
  h = fnv1a(h, id->op, strlen(id->op) + 1);
  h = fnv1a(h, &id->mesh_id, sizeof id->mesh_id);
  h = fnv1a(h, &id->run_id, sizeof id->run_id);
  h = fnv1a(h, &id->seq, sizeof id->seq);
  h = fnv1a(h, &id->nparts, sizeof id->nparts);
  snprintf(name, len, "/jaxmg-%016llx", (unsigned long long)h);
}

void jmg_rdv_segment_name(const jmg_rdv_key *key, char *name, size_t len) {
  const ident id = jmg_call_ident_of(key);
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

/* Whether /proc says pid is dying or dead but still there: a zombie (dead,
 * not yet reaped by its parent: a launcher that waits for its children one
 * after the other reaps a killed one late), or a process whose exit has begun
 * (the kernel's PF_EXITING flag, 0x4 in the flags word, field 9 of
 * /proc/<pid>/stat: a process that held GPUs can take seconds to let go of
 * them before it becomes a zombie). Where /proc cannot be read, it is not. */
static int pid_zombie(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return jmg_proc_stat_dying(buf);
}

int jmg_proc_stat_dying(const char *stat) {
  /* "pid (comm) S ppid pgrp session tty_nr tpgid flags ...": the fields
   * follow the last ')' (comm may hold one, and spaces). */
  const char *p = strrchr(stat, ')');
  if (p == NULL || p[1] != ' ') return 0;
  const char state = p[2];
  if (state == 'Z' || state == 'X' || state == 'x') return 1;
  long long ppid, pgrp, session, tty, tpgid;
  unsigned long flags = 0;
  if (sscanf(p + 3, "%lld %lld %lld %lld %lld %lu", &ppid, &pgrp, &session,
             &tty, &tpgid, &flags) != 6)
    return 0;
  return (flags & 0x4UL) != 0; /* PF_EXITING */
}

/* kill(pid, 0) fails with ESRCH only for a pid that no longer exists; a
 * zombie exists but is dead. */
static int pid_alive(pid_t pid) {
  if (pid <= 0) return 0;
  if (kill(pid, 0) == 0) return !pid_zombie(pid);
  return errno != ESRCH;
}

static int check_key(const jmg_rdv_key *key, int shard, jmg_error *err) {
  if (key->nparts < 1 || shard < 0 || shard >= key->nparts)
    return jmg_error_set(err, JMG_EINVAL, key->op, "rendezvous",
                         "shard index %d is outside [0, %d)", shard,
                         key->nparts);
  if (key->nparts > MAX_PARTS)
    return jmg_error_set(err, JMG_EINVAL, key->op, "rendezvous",
                         "%d participants are more than the process "
                         "rendezvous supports (%d)",
                         key->nparts, MAX_PARTS);
  return 0;
}

/* ---- the segment, under its mutex ---------------------------------------- */

static void fail_seg(seg *s, const jmg_error *e) {
  s->state = FAILED;
  s->rc = -(int)e->code;
  jmg_error_copy(&s->err, e);
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
  if (s->state == WAITING || s->state == RUNNING) {
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
  struct timespec until = to_timespec(now_s() + seconds);
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
  if (shm_unlink(m->name) != 0 && errno != ENOENT)
    return jmg_error_sys(err, JMG_EINTERNAL, m->s->id.op, "shm_unlink", errno,
                         m->name);
  return 0;
}

static int first_dead_present(const seg *s) {
  for (int i = 0; i < s->id.nparts; ++i)
    if (s->shards[i].present && s->shards[i].inside &&
        !pid_alive(s->shards[i].pid))
      return i;
  return -1;
}

static int any_owner_alive(const seg *s) {
  if (pid_alive(s->creator)) return 1;
  for (int i = 0; i < s->id.nparts; ++i)
    if (s->shards[i].touched && pid_alive(s->shards[i].pid)) return 1;
  return 0;
}

#define OVER "before the call was over"

/* Fails the call: shard's process (pid) is gone; `when` says at what point
 * ("before the call was over", "before it arrived"). */
static void fail_dead(seg *s, int shard, pid_t pid, const char *when) {
  jmg_error e;
  jmg_error_set(&e, JMG_EPEER, s->id.op, "rendezvous",
                "shard %d (pid %ld) exited %s", shard, (long)pid, when);
  fail_seg(s, &e);
}

/* The first shard that has not come although the process expected to be it
 * (key.pids) is gone: a process killed before it reached the call, which
 * would otherwise hold everyone until the timeout. */
static int first_dead_expected(const seg *s, const pid_t *expect) {
  if (expect == NULL) return -1;
  for (int i = 0; i < s->id.nparts; ++i)
    if (!s->shards[i].touched && expect[i] > 0 && !pid_alive(expect[i]))
      return i;
  return -1;
}

static void describe_missing(const seg *s, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < s->id.nparts && used + 12 < len; ++i) {
    if (s->shards[i].present) continue;
    int w = snprintf(buf + used, len - used, "%s%d", used ? ", " : "", i);
    if (w < 0) break;
    used += (size_t)w;
  }
}

static void timeout_error(const seg *s, double timeout_s, jmg_error *e) {
  char missing[160];
  describe_missing(s, missing, sizeof missing);
  jmg_error_set(e, JMG_ETIMEDOUT, s->id.op, "rendezvous",
                "%d of %d participants arrived within %.3g s; shard(s) %s "
                "never did (set JAXMG_RENDEZVOUS_TIMEOUT to wait longer)",
                s->arrived, s->id.nparts, timeout_s, missing);
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
  if (s->state != FAILED || s->touched != s->id.nparts) return 0;
  for (int i = 0; i < s->id.nparts; ++i)
    if (s->shards[i].inside && pid_alive(s->shards[i].pid)) return 0;
  return unlink_name(m, err);
}

/* ---- opening ------------------------------------------------------------- */

static void unmap(mapping *m) {
  if (m->s != NULL) munmap(m->s, m->size);
  m->s = NULL;
}

/* Creates the segment; 1 if the name already exists, 0 once created and
 * initialized (mapped in m), or a negative status. */
static int create_seg(mapping *m, const ident *id, jmg_error *err) {
  int fd = shm_open(m->name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return 1;
    return jmg_error_sys(err, JMG_EINTERNAL, id->op, "shm_open", errno,
                         m->name);
  }
  int rc = 0;
  void *p = MAP_FAILED;
  if (ftruncate(fd, (off_t)m->size) != 0) {
    rc = jmg_error_sys(err, JMG_ENOMEM, id->op, "ftruncate", errno, m->name);
    goto fail;
  }
  p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    rc = jmg_error_sys(err, JMG_ENOMEM, id->op, "mmap", errno, m->name);
    goto fail;
  }
  seg *s = p;
  s->id = *id;
  s->creator = getpid();
  s->state = WAITING;

  pthread_mutexattr_t ma;
  int r = pthread_mutexattr_init(&ma);
  const char *call = "pthread_mutexattr_init";
  if (r == 0) {
    call = "pthread_mutexattr_setpshared";
    r = pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    if (r == 0) {
      call = "pthread_mutexattr_setrobust";
      r = pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    }
    if (r == 0) {
      call = "pthread_mutex_init";
      r = pthread_mutex_init(&s->mu, &ma);
    }
    pthread_mutexattr_destroy(&ma);
  }
  if (r == 0) {
    pthread_condattr_t ca;
    call = "pthread_condattr_init";
    r = pthread_condattr_init(&ca);
    if (r == 0) {
      call = "pthread_condattr_setpshared";
      r = pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
      if (r == 0) {
        call = "pthread_condattr_setclock";
        r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
      }
      if (r == 0) {
        call = "pthread_cond_init";
        r = pthread_cond_init(&s->cv, &ca);
      }
      pthread_condattr_destroy(&ca);
    }
  }
  if (r != 0) {
    rc = jmg_error_sys(err, JMG_EINTERNAL, id->op, call, r,
                       "cannot set up the shared rendezvous lock");
    goto fail;
  }
  atomic_store_explicit(&s->magic, SEG_MAGIC, memory_order_release);
  close(fd);
  m->s = s;
  return 0;

fail:
  if (p != MAP_FAILED) munmap(p, m->size);
  close(fd);
  shm_unlink(m->name);
  return rc;
}

/* Opens an existing segment: 0 once mapped and initialized, 1 when the name
 * vanished (try again), 2 when it is still not initialized (*ino says which
 * object that is), or a negative status. */
static int open_seg(mapping *m, const ident *id, ino_t *ino, jmg_error *err) {
  int fd = shm_open(m->name, O_RDWR, 0600);
  if (fd < 0) {
    if (errno == ENOENT) return 1;
    return jmg_error_sys(err, JMG_EINTERNAL, id->op, "shm_open", errno,
                         m->name);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int rc = jmg_error_sys(err, JMG_EINTERNAL, id->op, "fstat", errno, m->name);
    close(fd);
    return rc;
  }
  *ino = st.st_ino;
  if (st.st_size == 0) { /* the creator has not sized it yet */
    close(fd);
    return 2;
  }
  if ((size_t)st.st_size != m->size) {
    close(fd);
    return jmg_error_set(err, JMG_EINTERNAL, id->op, "rendezvous",
                         "shared segment %s has %lld bytes, not %zu: another "
                         "call's segment (hash collision?)",
                         m->name, (long long)st.st_size, m->size);
  }
  void *p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED)
    return jmg_error_sys(err, JMG_ENOMEM, id->op, "mmap", e, m->name);
  seg *s = p;
  if (atomic_load_explicit(&s->magic, memory_order_acquire) != SEG_MAGIC) {
    munmap(p, m->size);
    return 2;
  }
  if (!jmg_call_ident_same(&s->id, id)) {
    munmap(p, m->size);
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
    if (rc == 1) rc = open_seg(m, id, &ino, err);
    if (rc < 0) return rc;
    if (rc == 1) continue; /* vanished between the two: create it */
    if (rc == 2) {         /* not initialized yet */
      if (uninit_since < 0 || ino != uninit_ino) { /* a new one: look anew */
        uninit_since = now_s();
        uninit_ino = ino;
      }
      if (now_s() - uninit_since > grace) {
        /* Its creator died before initializing it: replace it. */
        if (shm_unlink(m->name) != 0 && errno != ENOENT)
          return jmg_error_sys(err, JMG_EINTERNAL, id->op, "shm_unlink", errno,
                               m->name);
        uninit_since = -1;
        continue;
      }
      sleep_s(0.001);
      continue;
    }
    uninit_since = -1;
    rc = seg_lock(m->s, err);
    if (rc != 0) {
      unmap(m);
      return rc;
    }
    seg *s = m->s;
    if (s->state == WAITING) {
      int d = first_dead_present(s);
      if (d >= 0) fail_dead(s, d, s->shards[d].pid, OVER);
    }
    if ((s->state == WAITING || s->state == FAILED) && !any_owner_alive(s)) {
      /* Stale: left behind by processes that are all gone. */
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
  void **posts; /* the leader's: pointers to the slots */
  pid_t *expect; /* key.pids, copied (it may not outlive join_async) */
  jmg_leader_fn fn;
  void *fn_ctx;
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
                  jmg_leader_fn fn, void *fn_ctx, double timeout_s, part *p,
                  int *rc_out, jmg_error *err) {
  memset(p, 0, sizeof *p);
  int rc = check_key(key, shard, err);
  if (rc != 0) return rc;
  p->deadline = now_s() + timeout_s;
  p->timeout_s = timeout_s;
  p->id = jmg_call_ident_of(key);
  p->shard = shard;
  p->fn = fn;
  p->fn_ctx = fn_ctx;
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

  if (s->state == FAILED) { /* a participant arriving after the failure */
    touch(s, shard);
    *rc_out = s->rc;
    jmg_error_copy(err, &s->err);
    jmg_error e; /* an unlink failure here: the call's error says more */
    (void)maybe_unlink_failed(&p->m, &e);
    seg_unlock(s);
    unmap(&p->m);
    part_free(p);
    return 1;
  }
  if (s->shards[shard].touched) {
    jmg_error e;
    jmg_error_set(&e, JMG_EINVAL, id->op, "rendezvous",
                  "two participants claim shard %d of %d: the shard index "
                  "passed in is not this device's position on the mesh axis",
                  shard, id->nparts);
    fail_seg(s, &e);
    jmg_error_copy(err, &e);
    *rc_out = -(int)e.code;
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
    s->state = RUNNING;
    jmg_error e;
    if (unlink_name(&p->m, &e) != 0) fail_seg(s, &e);
    pthread_cond_broadcast(&s->cv);
  }
  return 0;
}

/* From arrival to leaving: waits for the others, runs the leader's fn on
 * shard 0, waits for the end and leaves. Called with the mutex held; returns
 * the call's outcome with nothing held and p freed. */
static int await_end(part *p, jmg_error *err) {
  seg *s = p->m.s;
  const int nparts = p->id.nparts;
  int rc;
  while (s->state == WAITING) {
    double left = p->deadline - now_s();
    if (left <= 0) {
      jmg_error e;
      timeout_error(s, p->timeout_s, &e);
      fail_seg(s, &e);
      break;
    }
    rc = seg_wait(s, left < POLL_S ? left : POLL_S, err);
    if (rc != 0) goto lost_lock;
    if (s->state == WAITING) {
      int d = first_dead_present(s);
      if (d >= 0) fail_dead(s, d, s->shards[d].pid, OVER);
    }
    if (s->state == WAITING) {
      int d = first_dead_expected(s, p->expect);
      if (d >= 0) fail_dead(s, d, p->expect[d], "before it arrived");
    }
  }

  /* The leader runs the op, without the lock: it may take minutes. */
  if (s->state == RUNNING && p->shard == 0) {
    for (int i = 0; i < nparts; ++i) p->posts[i] = slot(s, i);
    seg_unlock(s);
    jmg_error e;
    jmg_error_clear(&e);
    int frc = p->fn(p->fn_ctx, p->posts, nparts, &e);
    rc = seg_lock(s, err);
    if (rc != 0) goto lost_lock;
    if (s->state == RUNNING) {
      s->rc = frc;
      if (frc != 0) jmg_error_copy(&s->err, &e);
      s->state = DONE;
    }
    pthread_cond_broadcast(&s->cv);
  }
  while (s->state == RUNNING) {
    rc = seg_wait(s, POLL_S, err);
    if (rc != 0) goto lost_lock;
    if (s->state == RUNNING && !pid_alive(s->shards[0].pid))
      fail_dead(s, 0, s->shards[0].pid, OVER);
  }
  rc = s->rc;
  if (rc != 0) jmg_error_copy(err, &s->err);
  part_free(p);
  return leave(&p->m, p->shard, rc, err);

lost_lock: /* the lock is broken (and not held): the segment is lost */
  unmap(&p->m);
  part_free(p);
  return rc;
}

static int procs_join(const jmg_rdv_key *key, int shard, void *post,
                      jmg_leader_fn fn, void *fn_ctx, double timeout_s,
                      jmg_error *err) {
  part p;
  int over_rc = 0;
  int rc = arrive(key, shard, post, fn, fn_ctx, timeout_s, &p, &over_rc, err);
  if (rc < 0) return rc;
  if (rc == 1) return over_rc;
  return await_end(&p, err);
}

/* An asynchronous participant: its arrival happens in join_async, the rest
 * on a thread of its own (the robust mutex is released in between: a mutex
 * belongs to the thread that took it). */
typedef struct async_part {
  part p;
  jmg_rdv_done_fn done;
  void *done_ctx;
} async_part;

static void finish_async(async_part *a) {
  jmg_error err;
  jmg_error_clear(&err);
  int rc = seg_lock(a->p.m.s, &err);
  if (rc == 0) {
    rc = await_end(&a->p, &err);
  } else {
    unmap(&a->p.m);
    part_free(&a->p);
  }
  a->done(a->done_ctx, rc, rc != 0 ? &err : NULL);
  free(a);
}

static void *async_main(void *arg) {
  finish_async(arg);
  return NULL;
}

static int procs_join_async(const jmg_rdv_key *key, int shard, void *post,
                            jmg_leader_fn fn, void *fn_ctx, double timeout_s,
                            jmg_rdv_done_fn done, void *done_ctx,
                            jmg_error *err) {
  async_part *a = calloc(1, sizeof *a);
  if (a == NULL)
    return jmg_error_set(err, JMG_ENOMEM, key->op, "rendezvous",
                         "cannot allocate an asynchronous participant");
  a->done = done;
  a->done_ctx = done_ctx;
  int over_rc = 0;
  int rc =
      arrive(key, shard, post, fn, fn_ctx, timeout_s, &a->p, &over_rc, err);
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
  if (check_key(key, shard, &e) != 0) return;
  ident id = jmg_call_ident_of(key);
  jmg_rdv_abort_error(&id, shard, why, &e);
  mapping m;
  jmg_error ignored;
  /* abort returns at once: a short bound on waiting for the segment. */
  if (attach(&m, &id, 1.0, &ignored) != 0) return;
  seg *s = m.s;
  if (s->state == WAITING) fail_seg(s, &e);
  touch(s, shard);
  maybe_unlink_failed(&m, &ignored);
  seg_unlock(s);
  unmap(&m);
}

static const jmg_rendezvous g_processes = {
    "processes",
    procs_join,
    procs_join_async,
    procs_abort,
};

const jmg_rendezvous *jmg_rendezvous_processes(void) { return &g_processes; }

/* ---- sweeping ------------------------------------------------------------ */

/* Looks at one segment by name: unlinks it when it is stale (the rule of
 * attach). 1 if removed, 0 if not, or a negative status. */
static int sweep_one(const char *name, jmg_error *err) {
  mapping m;
  memset(&m, 0, sizeof m);
  snprintf(m.name, sizeof m.name, "%s", name);
  int fd = shm_open(m.name, O_RDWR, 0600);
  if (fd < 0) return 0; /* gone meanwhile */
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(seg)) {
    close(fd); /* being created: its creator decides */
    return 0;
  }
  m.size = (size_t)st.st_size;
  void *p = mmap(NULL, m.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return 0;
  m.s = p;
  seg *s = m.s;
  if (atomic_load_explicit(&s->magic, memory_order_acquire) != SEG_MAGIC ||
      s->id.nparts < 1 || s->id.nparts > MAX_PARTS ||
      seg_size(s->id.nparts) != m.size) {
    unmap(&m);
    return 0;
  }
  if (seg_lock(s, err) != 0) {
    unmap(&m);
    return 0; /* a broken lock: left to attach's rules */
  }
  if (s->state == WAITING) {
    int d = first_dead_present(s);
    if (d >= 0) fail_dead(s, d, s->shards[d].pid, OVER);
  }
  int removed = 0;
  if ((s->state == WAITING || s->state == FAILED) && !s->unlinked &&
      !any_owner_alive(s)) {
    int rc = unlink_name(&m, err);
    removed = rc == 0 ? 1 : rc;
  }
  seg_unlock(s);
  unmap(&m);
  return removed;
}

int jmg_rdv_sweep_stale(void) {
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return 0; /* not Linux's layout: nothing to sweep */
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    /* Our segments: "jaxmg-" and 16 hex digits (see make_name). */
    const char *hex = e->d_name + 6;
    if (strncmp(e->d_name, "jaxmg-", 6) != 0 || strlen(hex) != 16 ||
        strspn(hex, "0123456789abcdef") != 16)
      continue;
    char name[NAME_LEN];
    name[0] = '/';
    memcpy(name + 1, e->d_name, 6 + 16 + 1); /* checked above: 22 + NUL */
    jmg_error err;
    if (sweep_one(name, &err) > 0) ++removed;
  }
  closedir(d);
  return removed;
}
