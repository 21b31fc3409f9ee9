/* The process rendezvous (rendezvous/rendezvous_processes.c): forked children
 * join one call through shared memory; each reports its rc and error through
 * a pipe; the parent reaps them all within a bound. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rendezvous/rendezvous.h"
#include "test.h"
#include "test_clock.h"
#include "test_value.h"

/* ---- helpers --------------------------------------------------------------
 */

/* Run ids of this process only: calls of different tests (and of other
 * runs of this binary) never meet. */
static int64_t fresh_run_id(void) {
  static int64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((int64_t)getpid() << 40) ^ ((int64_t)ts.tv_nsec << 12) ^ (++counter);
}

static jmg_rdv_key make_key(const char *op, int64_t mesh_id, int64_t run_id,
                            int nparts) {
  jmg_rdv_key k;
  k.op = op;
  k.mesh_id = mesh_id;
  k.run_id = run_id;
  k.seq = 0;
  k.nparts = nparts;
  k.pids = NULL;
  return k;
}

/* What a child posts (the start of a JMG_RDV_MAX_POST buffer). */
typedef struct post {
  int shard;
  int tag;
  unsigned char fill; /* the last byte of the buffer, checked by the leader */
} post;

/* The leader's function, run in the leader child. */
typedef struct leader_ctx {
  int runs;
  int order_bad;
  int tag;
  int fail;
} leader_ctx;

static int leader_fn(void *ctx, void *const *posts, int nparts,
                     jmg_error *err) {
  leader_ctx *l = ctx;
  l->runs++;
  for (int i = 0; i < nparts; ++i) {
    const post *p = posts[i];
    const unsigned char *raw = posts[i];
    if (p == NULL || p->shard != i || p->tag != l->tag ||
        raw[JMG_RDV_MAX_POST - 1] != (unsigned char)(i + 1))
      l->order_bad = 1;
  }
  if (l->fail)
    return jmg_error_set(err, JMG_ELAPACK, "potrs", "dpotrf",
                         "injected leader failure %d", 42);
  return 0;
}

/* The value the leader of tag's call gives (128 bytes: an NCCL unique id). */
#define VALUE_LEN 128

static int value_leader_fn(void *ctx, void *const *posts, int nparts,
                           jmg_rdv_value *value, jmg_error *err) {
  int rc = leader_fn(ctx, posts, nparts, err);
  if (rc != 0) return rc;
  const leader_ctx *l = ctx;
  value_fill(value, VALUE_LEN, l->tag);
  return 0;
}

/* What one child does. */
typedef struct spec {
  jmg_rdv_key key;
  int shard;
  int tag;
  double timeout_s;
  double delay_s;    /* sleep before joining */
  double linger_s;   /* sleep after reporting, before _exit */
  int abort_instead; /* abort(why) instead of join */
  int leader_fail;   /* the leader's fn fails */
  int async_join;    /* join_async, then wait for done */
  int value_join;    /* join_value(_async) instead of join(_async) */
  jmg_error why;
} spec;

/* What one child reports. */
typedef struct report {
  int rc;
  int leader_runs;
  int order_bad;
  double elapsed_s;
  jmg_error err;
  jmg_rdv_value value; /* value_join: what it received */
  int value_null;      /* value_join and async_join: done got no value */
} report;

typedef struct child {
  pid_t pid;
  int fd; /* read end of its pipe */
  int got;
  report r;
} child;

/* What done reports to a child that joined asynchronously. */
typedef struct async_result {
  _Atomic int called;
  int rc;
  jmg_error err;
  report *r; /* value_join: where the value goes */
} async_result;

static void async_done(void *ctx, int rc, const jmg_error *err) {
  async_result *a = ctx;
  a->rc = rc;
  if (err != NULL) a->err = *err;
  atomic_fetch_add(&a->called, 1);
}

static void async_value_done(void *ctx, int rc, const jmg_rdv_value *value,
                             const jmg_error *err) {
  async_result *a = ctx;
  a->r->value_null = value == NULL;
  if (value != NULL) a->r->value = *value;
  async_done(ctx, rc, err);
}

/* join_async, then waits (bounded) for done; -JMG_EINTERNAL if it never
 * comes. */
static int join_async_and_wait(const spec *sp, void *buf, leader_ctx *l,
                               report *r, jmg_error *err) {
  static async_result a; /* one per child process */
  a.r = r;
  const jmg_rendezvous *rdv = jmg_rendezvous_processes();
  int rc = sp->value_join
               ? rdv->join_value_async(&sp->key, sp->shard, buf,
                                       value_leader_fn, l, sp->timeout_s,
                                       async_value_done, &a, err)
               : rdv->join_async(&sp->key, sp->shard, buf, leader_fn, l,
                                 sp->timeout_s, async_done, &a, err);
  if (rc != 0) return rc;
  double end = now_s() + sp->timeout_s + 5.0;
  while (atomic_load(&a.called) == 0 && now_s() < end) sleep_s(0.002);
  sleep_s(0.01); /* done must not be called twice */
  if (atomic_load(&a.called) != 1)
    return jmg_error_set(err, JMG_EINTERNAL, "test", "join_async",
                         "done was called %d times", atomic_load(&a.called));
  if (a.rc != 0) *err = a.err;
  return a.rc;
}

static void child_main(const spec *sp, int wfd) {
  sleep_s(sp->delay_s);
  const jmg_rendezvous *rdv = jmg_rendezvous_processes();
  report r;
  memset(&r, 0, sizeof r);
  value_stale(&r.value);
  leader_ctx l;
  memset(&l, 0, sizeof l);
  l.tag = sp->tag;
  l.fail = sp->leader_fail;
  unsigned char buf[JMG_RDV_MAX_POST];
  memset(buf, 0, sizeof buf);
  post p = {sp->shard, sp->tag, 0};
  memcpy(buf, &p, sizeof p);
  buf[JMG_RDV_MAX_POST - 1] = (unsigned char)(sp->shard + 1);
  double t0 = now_s();
  if (sp->abort_instead) {
    rdv->abort(&sp->key, sp->shard, &sp->why);
    r.rc = -(int)sp->why.code;
  } else if (sp->async_join) {
    r.rc = join_async_and_wait(sp, buf, &l, &r, &r.err);
  } else if (sp->value_join) {
    r.rc = rdv->join_value(&sp->key, sp->shard, buf, value_leader_fn, &l,
                           sp->timeout_s, &r.value, &r.err);
  } else {
    r.rc = rdv->join(&sp->key, sp->shard, buf, leader_fn, &l, sp->timeout_s,
                     &r.err);
  }
  r.elapsed_s = now_s() - t0;
  r.leader_runs = l.runs;
  r.order_bad = l.order_bad;
  ssize_t w = write(wfd, &r, sizeof r);
  (void)w;
  close(wfd);
  sleep_s(sp->linger_s);
  _exit(0);
}

static int spawn(child *c, const spec *sp) {
  memset(c, 0, sizeof *c);
  int fds[2];
  if (pipe(fds) != 0) return -1;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(sp, fds[1]);
  }
  close(fds[1]);
  c->pid = pid;
  c->fd = fds[0];
  return 0;
}

/* Reads every child's report (until bound_s), then reaps them all (killing
 * any left). Returns how many reports came. */
static int collect(child *cs, int n, double bound_s) {
  double end = now_s() + bound_s;
  int got = 0;
  for (int i = 0; i < n; ++i) {
    if (cs[i].pid <= 0) continue;
    size_t have = 0;
    while (have < sizeof cs[i].r) {
      int ms = (int)((end - now_s()) * 1000);
      if (ms <= 0) break;
      struct pollfd pfd = {cs[i].fd, POLLIN, 0};
      int pr = poll(&pfd, 1, ms);
      if (pr <= 0) {
        if (pr < 0 && errno == EINTR) continue;
        break;
      }
      ssize_t rd =
          read(cs[i].fd, (char *)&cs[i].r + have, sizeof cs[i].r - have);
      if (rd <= 0) break;
      have += (size_t)rd;
    }
    if (have == sizeof cs[i].r) {
      cs[i].got = 1;
      ++got;
    }
    close(cs[i].fd);
  }
  for (int i = 0; i < n; ++i) {
    if (cs[i].pid <= 0) continue;
    int st;
    while (waitpid(cs[i].pid, &st, WNOHANG) == 0) {
      if (now_s() > end + 2.0) {
        kill(cs[i].pid, SIGKILL);
        waitpid(cs[i].pid, &st, 0);
        break;
      }
      sleep_s(0.002);
    }
    cs[i].pid = 0;
  }
  return got;
}

static void spec_init(spec *sp, jmg_rdv_key key, int shard, int tag,
                      double timeout_s) {
  memset(sp, 0, sizeof *sp);
  sp->key = key;
  sp->shard = shard;
  sp->tag = tag;
  sp->timeout_s = timeout_s;
}

/* Whether the shared-memory segment of call k exists. */
static int shm_exists(const jmg_rdv_key *k) {
  char name[64];
  jmg_rdv_segment_name(k, name, sizeof name);
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd < 0) return 0;
  close(fd);
  return 1;
}

/* Runs n children that all join `key` (shards 0..n-1) and checks that they
 * met, that one leader ran once over posts in shard order, and that no
 * segment was left behind. */
static void meet(int n, int64_t mesh_id) {
  jmg_rdv_key key = make_key("potrs", mesh_id, fresh_run_id(), n);
  child cs[8];
  spec sp;
  double t0 = now_s();
  for (int i = 0; i < n; ++i) {
    spec_init(&sp, key, i, 7, 1.0);
    sp.delay_s = 0.005 * ((i * 3) % n); /* shard 0 is not always first */
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, n, 5.0), n);
  CHECK(now_s() - t0 < 3.0);
  int runs = 0;
  for (int i = 0; i < n; ++i) {
    CHECK_EQ(cs[i].r.rc, 0);
    CHECK_EQ(cs[i].r.err.code, JMG_OK);
    CHECK_EQ(cs[i].r.order_bad, 0);
    runs += cs[i].r.leader_runs;
  }
  CHECK_EQ(cs[0].r.leader_runs, 1);
  CHECK_EQ(runs, 1);
  CHECK(!shm_exists(&key));
}

/* ---- tests ---------------------------------------------------------------
 */

TEST(rendezvous_processes_two_meet_and_leader_runs_once) { meet(2, 101); }

TEST(rendezvous_processes_four_meet_posts_in_shard_order_nothing_left) {
  meet(4, 102);
}

TEST(rendezvous_processes_leader_error_reaches_everyone) {
  jmg_rdv_key key = make_key("potrs", 103, fresh_run_id(), 3);
  child cs[3];
  spec sp;
  for (int i = 0; i < 3; ++i) {
    spec_init(&sp, key, i, 1, 1.0);
    sp.leader_fail = 1;
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, 3, 5.0), 3);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(cs[i].r.rc, -JMG_ELAPACK);
    CHECK_CONTAINS(cs[i].r.err.msg, "injected leader failure 42");
    CHECK_CONTAINS(cs[i].r.err.call, "dpotrf");
  }
}

TEST(rendezvous_processes_abort_releases_the_others_quickly) {
  jmg_rdv_key key = make_key("potrs", 104, fresh_run_id(), 4);
  child cs[4];
  spec sp;
  double t0 = now_s();
  for (int i = 0; i < 4; ++i) {
    spec_init(&sp, key, i, 1, 10.0);
    if (i == 2) {
      sp.abort_instead = 1;
      sp.delay_s = 0.1;
      jmg_error_set(&sp.why, JMG_EINVAL, "potrs", "FFI call frame",
                    "B on shard 2 has the wrong dtype");
    }
    if (i == 3) sp.delay_s = 0.3; /* arrives after the failure */
    sp.linger_s = 0.5;            /* keep the failed call's owners alive */
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, 4, 5.0), 4);
  CHECK(now_s() - t0 < 3.0); /* nowhere near the 10 s timeout */
  for (int i = 0; i < 4; ++i) {
    if (i == 2) continue;
    CHECK_EQ(cs[i].r.rc, -JMG_EINVAL);
    CHECK_CONTAINS(cs[i].r.err.msg, "shard 2 failed");
    CHECK_CONTAINS(cs[i].r.err.msg, "B on shard 2 has the wrong dtype");
    CHECK_CONTAINS(cs[i].r.err.call, "FFI call frame");
    CHECK(cs[i].r.elapsed_s < 1.0);
  }
  CHECK(cs[3].r.elapsed_s < 0.2); /* failed at once */
  CHECK(!shm_exists(&key));       /* every shard came: unlinked */
}

TEST(rendezvous_processes_missing_participant_times_out_naming_it) {
  jmg_rdv_key key = make_key("syevd", 105, fresh_run_id(), 4);
  child cs[3];
  spec sp;
  const int shards[3] = {0, 1, 3}; /* shard 2 never comes */
  double t0 = now_s();
  for (int i = 0; i < 3; ++i) {
    /* A timeout of 1 s: the three forks must all arrive within it, which
     * 0.3 s did not always allow on a loaded machine under ASan. */
    spec_init(&sp, key, shards[i], 1, 1.0);
    sp.linger_s = 2.5;
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  /* The missing one arrives late, from this process, while the others
   * still live: it fails at once. */
  sleep_s(1.6);
  unsigned char buf[JMG_RDV_MAX_POST] = {0};
  leader_ctx l;
  memset(&l, 0, sizeof l);
  jmg_error err;
  double t1 = now_s();
  int late_rc =
      jmg_rendezvous_processes()->join(&key, 2, buf, leader_fn, &l, 10.0, &err);
  double late_elapsed = now_s() - t1;
  CHECK_EQ(collect(cs, 3, 5.0), 3);
  CHECK(now_s() - t0 < 8.0);
  /* The first to time out waited its whole timeout; it releases the others,
   * which may have arrived later (forks start at different times on a busy
   * machine) and so waited less. */
  double longest = 0;
  for (int i = 0; i < 3; ++i)
    if (cs[i].r.elapsed_s > longest) longest = cs[i].r.elapsed_s;
  CHECK(longest >= 0.9);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(cs[i].r.rc, -JMG_ETIMEDOUT);
    CHECK_CONTAINS(cs[i].r.err.msg, "3 of 4 participants arrived");
    CHECK_CONTAINS(cs[i].r.err.msg, "shard(s) 2 never did");
    CHECK(cs[i].r.elapsed_s < 2.5);
    CHECK_EQ(cs[i].r.leader_runs, 0);
  }
  CHECK_EQ(late_rc, -JMG_ETIMEDOUT);
  CHECK_CONTAINS(err.msg, "shard(s) 2 never did");
  CHECK(late_elapsed < 0.2);
  CHECK_EQ(l.runs, 0);
  CHECK(!shm_exists(&key));
}

TEST(rendezvous_processes_killed_participant_fails_the_others) {
  jmg_rdv_key key = make_key("potri", 106, fresh_run_id(), 4);
  child cs[3];
  spec sp;
  /* Shards 0, 1 and 2 join (timeout 3 s); shard 2 is killed after joining;
   * shard 3 never comes. The others must fail well before the timeout (the
   * bounds below leave room for a loaded machine: at 0.5 s and a 1 s
   * timeout this failed once under ASan at a load of 14 on 2 cores). */
  for (int i = 0; i < 3; ++i) {
    spec_init(&sp, key, i, 1, 3.0);
    sp.linger_s = 0.6; /* owners of the failed call stay alive a while */
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  sleep_s(0.15);
  kill(cs[2].pid, SIGKILL);
  int st;
  waitpid(cs[2].pid, &st, 0); /* reaped: its pid is gone */
  close(cs[2].fd);
  cs[2].pid = 0;
  /* Shard 3 comes late, while the others live: it fails at once, and, as
   * every shard has now come, the failed call's segment goes away. */
  sleep_s(0.3);
  unsigned char buf[JMG_RDV_MAX_POST] = {0};
  leader_ctx l;
  memset(&l, 0, sizeof l);
  jmg_error err;
  double t1 = now_s();
  int late_rc =
      jmg_rendezvous_processes()->join(&key, 3, buf, leader_fn, &l, 10.0, &err);
  double late_elapsed = now_s() - t1;
  CHECK_EQ(collect(cs, 2, 6.0), 2);
  for (int i = 0; i < 2; ++i) {
    CHECK_EQ(cs[i].r.rc, -JMG_EPEER);
    CHECK_CONTAINS(cs[i].r.err.msg, "shard 2 (pid");
    CHECK_CONTAINS(cs[i].r.err.msg, "exited before the call was over");
    /* joined at ~0, killed at ~0.15 s, noticed within a 50 ms poll: well
     * before the 3 s timeout */
    CHECK(cs[i].r.elapsed_s < 1.5);
  }
  CHECK_EQ(late_rc, -JMG_EPEER);
  CHECK_CONTAINS(err.msg, "shard 2 (pid");
  CHECK(late_elapsed < 1.0); /* at once, not after its 10 s timeout */
  CHECK(!shm_exists(&key));
}

TEST(rendezvous_processes_expected_process_gone_before_arriving_fails_fast) {
  /* The key names each shard's process. Shard 1's died before reaching the
   * call (a zombie: not reaped yet); shard 3's lives but never comes. The
   * shards that came fail at once, naming shard 1, not after the timeout. */
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  CHECK(dead > 0);
  pid_t idle = fork();
  if (idle == 0) {
    sleep_s(3.0);
    _exit(0);
  }
  CHECK(idle > 0);
  sleep_s(0.05); /* the first child has exited */
  int64_t pids[4] = {0, (int64_t)dead, 0, (int64_t)idle};
  jmg_rdv_key key = make_key("potrs", 112, fresh_run_id(), 4);
  key.pids = pids;
  child cs[2];
  spec sp;
  for (int i = 0; i < 2; ++i) {
    spec_init(&sp, key, 2 * i, 1, 5.0);
    sp.async_join = i == 1; /* the copy of the pids outlives join_async */
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, 2, 3.0), 2);
  for (int i = 0; i < 2; ++i) {
    CHECK_EQ(cs[i].r.rc, -JMG_EPEER);
    CHECK_CONTAINS(cs[i].r.err.msg, "shard 1 (pid");
    CHECK_CONTAINS(cs[i].r.err.msg, "exited before it arrived");
    CHECK(cs[i].r.elapsed_s < 1.0);
    CHECK_EQ(cs[i].r.leader_runs, 0);
  }

  /* Only the live one missing: the call waits out its timeout. */
  int64_t live[2] = {0, (int64_t)idle};
  jmg_rdv_key k2 = make_key("potrs", 113, fresh_run_id(), 2);
  k2.pids = live;
  unsigned char buf[JMG_RDV_MAX_POST] = {0};
  leader_ctx l;
  memset(&l, 0, sizeof l);
  jmg_error err;
  double t0 = now_s();
  int rc = jmg_rendezvous_processes()->join(&k2, 0, buf, leader_fn, &l, 0.4,
                                             &err);
  CHECK_EQ(rc, -JMG_ETIMEDOUT);
  CHECK_CONTAINS(err.msg, "shard(s) 1 never did");
  CHECK(now_s() - t0 >= 0.35);
  /* The failed call's tombstone goes once its last shard comes. */
  rc = jmg_rendezvous_processes()->join(&k2, 1, buf, leader_fn, &l, 0.4, &err);
  CHECK_EQ(rc, -JMG_ETIMEDOUT);
  kill(idle, SIGKILL);
  int st;
  waitpid(idle, &st, 0);
  waitpid(dead, &st, 0);
  CHECK(!shm_exists(&k2));
}

TEST(rendezvous_processes_stale_segment_is_replaced) {
  jmg_rdv_key key = make_key("potrs", 107, fresh_run_id(), 3);
  child dead;
  spec sp;
  /* Shard 1 creates the segment, joins, and is killed before anyone else
   * comes: it leaves a WAITING segment behind with a dead owner. */
  spec_init(&sp, key, 1, 5, 10.0);
  CHECK_EQ(spawn(&dead, &sp), 0);
  sleep_s(0.1);
  kill(dead.pid, SIGKILL);
  int st;
  waitpid(dead.pid, &st, 0);
  close(dead.fd);
  CHECK(shm_exists(&key));
  /* A new call with the same key replaces it and succeeds. */
  child cs[3];
  for (int i = 0; i < 3; ++i) {
    spec_init(&sp, key, i, 5, 1.0);
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, 3, 5.0), 3);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(cs[i].r.rc, 0);
    CHECK_EQ(cs[i].r.order_bad, 0);
  }
  CHECK_EQ(cs[0].r.leader_runs, 1);
  CHECK(!shm_exists(&key));
}

TEST(rendezvous_processes_uninitialized_segment_is_replaced) {
  jmg_rdv_key key = make_key("potrs", 110, fresh_run_id(), 2);
  char name[64];
  jmg_rdv_segment_name(&key, name, sizeof name);
  /* A creator that died between shm_open and sizing its segment. */
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  CHECK(fd >= 0);
  close(fd);
  CHECK(shm_exists(&key));
  child cs[2];
  spec sp;
  double t0 = now_s();
  for (int i = 0; i < 2; ++i) {
    spec_init(&sp, key, i, 3, 0.6); /* replaced after min(0.3 s, 1 s) */
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, 2, 5.0), 2);
  CHECK(now_s() - t0 < 2.0);
  for (int i = 0; i < 2; ++i) CHECK_EQ(cs[i].r.rc, 0);
  CHECK_EQ(cs[0].r.leader_runs, 1);
  CHECK(!shm_exists(&key));
}

TEST(rendezvous_processes_concurrent_keys_never_mix) {
  enum { G = 4, MAXN = 3 };
  int64_t run_id = fresh_run_id();
  child cs[G * MAXN];
  jmg_rdv_key keys[G];
  int nparts[G] = {3, 3, 3, 2};
  spec sp;
  for (int g = 0; g < G; ++g) {
    /* Same run id; the keys differ in mesh id, op or participant count. */
    keys[g] =
        make_key(g == 2 ? "syevd" : "potrs", 108 + (g == 1), run_id, nparts[g]);
    for (int i = 0; i < nparts[g]; ++i) {
      spec_init(&sp, keys[g], i, 100 + g, 2.0);
      sp.delay_s = 0.003 * ((i + g) % 3);
      CHECK_EQ(spawn(&cs[g * MAXN + i], &sp), 0);
    }
    for (int i = nparts[g]; i < MAXN; ++i) cs[g * MAXN + i].pid = 0;
  }
  CHECK_EQ(collect(cs, G * MAXN, 5.0), 11);
  for (int g = 0; g < G; ++g) {
    for (int i = 0; i < nparts[g]; ++i) {
      CHECK_EQ(cs[g * MAXN + i].r.rc, 0);
      CHECK_EQ(cs[g * MAXN + i].r.order_bad, 0); /* the tag is the group's */
    }
    CHECK_EQ(cs[g * MAXN].r.leader_runs, 1);
    CHECK(!shm_exists(&keys[g]));
  }
}

TEST(rendezvous_processes_single_participant_and_bad_shard) {
  const jmg_rendezvous *rdv = jmg_rendezvous_processes();
  unsigned char buf[JMG_RDV_MAX_POST] = {0};
  post p = {0, 9, 0};
  memcpy(buf, &p, sizeof p);
  buf[JMG_RDV_MAX_POST - 1] = 1;
  leader_ctx l;
  memset(&l, 0, sizeof l);
  l.tag = 9;
  jmg_error err;
  jmg_rdv_key key = make_key("potrs", 109, fresh_run_id(), 1);
  CHECK_EQ(rdv->join(&key, 0, buf, leader_fn, &l, 1.0, &err), 0);
  CHECK_EQ(l.runs, 1);
  CHECK_EQ(l.order_bad, 0);
  key.nparts = 4;
  CHECK_EQ(rdv->join(&key, 4, buf, leader_fn, &l, 1.0, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "outside");
  rdv->abort(&key, -1, &err); /* does nothing */
  CHECK_EQ(l.runs, 1);
}

/* join_async: the leader's fn runs in shard 0's process (on its waiting
 * thread), mixed with blocking participants; an abort reaches asynchronous
 * participants through done; a late asynchronous arrival fails at once,
 * returning the error without calling done. */
TEST(rendezvous_processes_async_joins_meet_and_fail_like_blocking_ones) {
  jmg_rdv_key key = make_key("syevd", 110, fresh_run_id(), 3);
  child cs[4];
  spec sp;
  for (int i = 0; i < 3; ++i) {
    spec_init(&sp, key, i, 7, 5.0);
    sp.async_join = i != 1; /* shards 0 and 2 asynchronous, 1 blocking */
    sp.delay_s = 0.05 * i;
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, 3, 10.0), 3);
  for (int i = 0; i < 3; ++i) CHECK_EQ(cs[i].r.rc, 0);
  CHECK_EQ(cs[0].r.leader_runs, 1);
  CHECK_EQ(cs[0].r.order_bad, 0);
  CHECK(!shm_exists(&key));

  key = make_key("potri", 111, fresh_run_id(), 4);
  for (int i = 0; i < 4; ++i) {
    spec_init(&sp, key, i, 7, 10.0);
    sp.async_join = 1;
    if (i == 2) {
      sp.abort_instead = 1;
      sp.delay_s = 0.1;
      jmg_error_set(&sp.why, JMG_EINVAL, "potri", "FFI call frame",
                    "status on shard 2 is not int32");
    }
    if (i == 3) sp.delay_s = 0.4; /* arrives after the failure */
    sp.linger_s = 0.8;            /* keep the failed call's owners alive */
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, 4, 10.0), 4);
  for (int i = 0; i < 4; ++i) {
    if (i == 2) continue;
    CHECK_EQ(cs[i].r.rc, -JMG_EINVAL);
    CHECK_CONTAINS(cs[i].r.err.msg, "status on shard 2 is not int32");
    CHECK(cs[i].r.elapsed_s < 2.0);
  }
  CHECK(cs[3].r.elapsed_s < 0.2); /* failed at once, without done */
  CHECK_EQ(cs[0].r.leader_runs, 0);
}

/* ---- the value a call hands to everyone ----------------------------------
 */

TEST(rendezvous_processes_value_reaches_every_participant) {
  /* Shard 0 asynchronous (the leader's fn runs on its waiting thread), shard
   * 1 blocking, shard 2 asynchronous; each starts with a stale value. */
  jmg_rdv_key key = make_key("potrs", 114, fresh_run_id(), 3);
  child cs[3];
  spec sp;
  for (int i = 0; i < 3; ++i) {
    spec_init(&sp, key, i, 21, 5.0);
    sp.value_join = 1;
    sp.async_join = i != 1;
    sp.delay_s = 0.02 * (2 - i); /* shard 0 last */
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, 3, 10.0), 3);
  CHECK_EQ(cs[0].r.leader_runs, 1);
  CHECK_EQ(cs[0].r.order_bad, 0);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(cs[i].r.rc, 0);
    CHECK(value_is(&cs[i].r.value, VALUE_LEN, 21));
    CHECK_EQ(cs[i].r.value_null, 0);
  }
  CHECK(!shm_exists(&key));
}

TEST(rendezvous_processes_value_is_empty_on_error) {
  /* The leader fails: nobody receives a value (blocking ones an empty one,
   * asynchronous ones none). */
  jmg_rdv_key key = make_key("potrs", 115, fresh_run_id(), 3);
  child cs[3];
  spec sp;
  for (int i = 0; i < 3; ++i) {
    spec_init(&sp, key, i, 22, 5.0);
    sp.value_join = 1;
    sp.async_join = i == 2;
    sp.leader_fail = 1;
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, 3, 10.0), 3);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(cs[i].r.rc, -JMG_ELAPACK);
    CHECK_CONTAINS(cs[i].r.err.msg, "injected leader failure 42");
  }
  CHECK(value_empty(&cs[0].r.value));
  CHECK(value_empty(&cs[1].r.value));
  CHECK_EQ(cs[2].r.value_null, 1);

  /* A participant aborted before the others came: they fail at once (the
   * asynchronous one without joining: no done call, no value). */
  key = make_key("potrs", 116, fresh_run_id(), 3);
  jmg_error why;
  jmg_error_set(&why, JMG_EINVAL, "potrs", "FFI call frame", "bad shard 2");
  jmg_rendezvous_processes()->abort(&key, 2, &why);
  for (int i = 0; i < 2; ++i) {
    spec_init(&sp, key, i, 23, 5.0);
    sp.value_join = 1;
    sp.async_join = i == 1;
    CHECK_EQ(spawn(&cs[i], &sp), 0);
  }
  CHECK_EQ(collect(cs, 2, 5.0), 2);
  for (int i = 0; i < 2; ++i) {
    CHECK_EQ(cs[i].r.rc, -JMG_EINVAL);
    CHECK_CONTAINS(cs[i].r.err.msg, "bad shard 2");
  }
  CHECK(value_empty(&cs[0].r.value));
  CHECK(!shm_exists(&key));
}
