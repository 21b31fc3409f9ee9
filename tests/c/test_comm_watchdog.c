/* The watchdog of communicators that cannot time out by themselves
 * (comm/watchdog.c, NCCL's in cuda/comm_nccl.c): its decision with fake
 * pids, clocks and library errors; its thread with real processes and
 * short timeouts. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/quit_mark.h"
#include "comm/watchdog.h"
#include "common/shm.h"
#include "test.h"
#include "test_clock.h"

/* ---- the decision, with fakes ------------------------------------------ */

typedef struct fake {
  double now;
  int64_t dead[4]; /* pids that are dead */
  int async;       /* the library's error, or 0 */
  int64_t quit;    /* the pid of a rank that gave up, or 0 */
  int asked_async;
} fake;

static int fake_alive(void *ctx, int64_t pid) {
  const fake *f = ctx;
  for (int i = 0; i < 4; ++i)
    if (f->dead[i] == pid) return 0;
  return 1;
}

static double fake_now(void *ctx) { return ((const fake *)ctx)->now; }

static int fake_async(void *ctx) {
  fake *f = ctx;
  f->asked_async++;
  return f->async;
}

static int fake_quit(void *ctx, int rank, int64_t pid) {
  (void)rank;
  return pid == ((const fake *)ctx)->quit;
}

TEST(watchdog_check_nothing_wrong_while_everyone_is_alive_and_in_time) {
  const int64_t pids[3] = {100, 101, 102};
  fake fk = {.now = 10.0};
  const jmg_watch w = {.rank = 0, .ranks = 3, .pids = pids, .started = 5.0,
                       .timeout_s = 30.0};
  const jmg_watch_probe p = {fake_alive, fake_now, fake_async, fake_quit, &fk};
  jmg_watch_fault f;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_OK);
  CHECK_EQ(fk.asked_async, 1);
}

TEST(watchdog_check_names_the_lowest_dead_peer_and_never_itself) {
  const int64_t pids[4] = {100, 101, 102, 103};
  /* Its own pid "dead" (a fake that says so) is never looked at. */
  fake fk = {.now = 1.0, .dead = {100, 103, 102}};
  const jmg_watch w = {.rank = 0, .ranks = 4, .pids = pids, .timeout_s = 30.0};
  const jmg_watch_probe p = {fake_alive, fake_now, fake_async, fake_quit, &fk};
  jmg_watch_fault f;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_PEER_GONE);
  CHECK_EQ(f.rank, 2);
  CHECK_EQ(f.pid, 102);
  /* A dead peer comes first: the library is not asked. */
  CHECK_EQ(fk.asked_async, 0);
}

TEST(watchdog_check_skips_peers_it_cannot_watch) {
  /* 0: another node's process, or no pids at all (one process). */
  const int64_t pids[3] = {100, 0, 102};
  fake fk = {.now = 1.0, .dead = {0}};
  jmg_watch w = {.rank = 0, .ranks = 3, .pids = pids, .timeout_s = 30.0};
  const jmg_watch_probe p = {fake_alive, fake_now, NULL, NULL, &fk};
  jmg_watch_fault f;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_OK);
  w.pids = NULL;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_OK);
}

TEST(watchdog_check_an_asynchronous_error_is_a_fault) {
  const int64_t pids[2] = {100, 101};
  fake fk = {.now = 1.0, .async = 6};
  const jmg_watch w = {.rank = 1, .ranks = 2, .pids = pids, .timeout_s = 30.0};
  const jmg_watch_probe p = {fake_alive, fake_now, fake_async, fake_quit, &fk};
  jmg_watch_fault f;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_ASYNC);
  CHECK_EQ(f.code, 6);
  CHECK_EQ(f.rank, -1);
}

TEST(watchdog_check_the_deadline_holds_until_everyone_arrived) {
  const int64_t pids[2] = {100, 101};
  fake fk = {.now = 39.9};
  jmg_watch w = {.rank = 0, .ranks = 2, .pids = pids, .started = 10.0,
                 .timeout_s = 30.0};
  const jmg_watch_probe p = {fake_alive, fake_now, fake_async, fake_quit, &fk};
  jmg_watch_fault f;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_OK);
  fk.now = 40.0;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_LATE);
  CHECK(f.waited >= 30.0);
  /* Once every rank arrived, the work may take any time... */
  w.arrived = 1;
  fk.now = 1e6;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_OK);
  /* ...but a dead peer still ends it. */
  fk.dead[0] = 101;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_PEER_GONE);
  /* No timeout: no deadline. */
  w.arrived = 0;
  w.timeout_s = 0;
  fk.dead[0] = 0;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_OK);
}

TEST(watchdog_check_a_peer_that_gave_up_is_a_fault_after_its_death) {
  const int64_t pids[3] = {100, 101, 102};
  fake fk = {.now = 1.0, .quit = 102};
  jmg_watch w = {.rank = 0, .ranks = 3, .pids = pids, .timeout_s = 30.0,
                 .arrived = 1};
  const jmg_watch_probe p = {fake_alive, fake_now, fake_async, fake_quit, &fk};
  jmg_watch_fault f;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_PEER_QUIT);
  CHECK_EQ(f.rank, 2);
  CHECK_EQ(f.pid, 102);
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_watch_error(&w, &f, "the call", NULL, "potri", "NCCL", &err),
           -JMG_EPEER);
  CHECK_CONTAINS(err.msg, "rank 2 (pid 102) gave up on this communicator");
  CHECK_CONTAINS(err.msg, "rank 0 of 3");
  /* A dead peer is told first; its own mark is never looked at. */
  fk.dead[0] = 101;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_PEER_GONE);
  fk.dead[0] = 0;
  fk.quit = 100;
  CHECK_EQ(jmg_watch_check(&w, &p, &f), JMG_WATCH_OK);
}

TEST(quit_mark_is_seen_by_id_rank_and_pid_and_swept_with_its_process) {
  const unsigned char id[16] = {7, 1, 2, 3};
  const unsigned char other[16] = {7, 1, 2, 4};
  const int64_t me = (int64_t)getpid();
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_quit_marked(id, sizeof id, 1, me), 0);
  CHECK_EQ(jmg_quit_mark(id, sizeof id, 1, "potri", &err), 0);
  CHECK_EQ(jmg_quit_mark(id, sizeof id, 1, "potri", &err), 0); /* again */
  CHECK_EQ(jmg_quit_marked(id, sizeof id, 1, me), 1);
  CHECK_EQ(jmg_quit_marked(id, sizeof id, 0, me), 0);
  CHECK_EQ(jmg_quit_marked(other, sizeof other, 1, me), 0);
  /* A live process's mark stays; a dead one's goes. */
  CHECK_EQ(jmg_quit_sweep(), 0);
  CHECK_EQ(jmg_quit_marked(id, sizeof id, 1, me), 1);
  const pid_t child = fork();
  if (child == 0) {
    jmg_error e;
    _exit(jmg_quit_mark(other, sizeof other, 3, "potri", &e) == 0 ? 0 : 1);
  }
  int status = 0;
  CHECK_EQ(waitpid(child, &status, 0), child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_EQ(jmg_quit_marked(other, sizeof other, 3, (int64_t)child), 1);
  CHECK(jmg_quit_sweep() >= 1);
  CHECK_EQ(jmg_quit_marked(other, sizeof other, 3, (int64_t)child), 0);
  CHECK_EQ(jmg_quit_marked(id, sizeof id, 1, me), 1);
  /* This test's own mark, removed as its process's would be once dead. */
  char name[96];
  snprintf(name, sizeof name, "/jaxmg-q-%016llx-1-%lld",
           (unsigned long long)jmg_shm_hash(JMG_SHM_HASH_INIT, id, sizeof id),
           (long long)me);
  CHECK_EQ(jmg_shm_unlink(name, "test", &err), 0);
  CHECK_EQ(jmg_quit_marked(id, sizeof id, 1, me), 0);
}

TEST(watchdog_arrival_fails_where_the_ranks_entered_past_the_timeout_apart) {
  /* A late rank whose agreement completed against what an abandoned call
   * left in flight learns it from the spread of the ranks' entry times. */
  const jmg_watch w = {.rank = 1, .ranks = 2, .timeout_s = 8.0};
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_watch_arrival(&w, 1000, 1000, 1000, "potri", "NCCL", &err), 0);
  CHECK_EQ(jmg_watch_arrival(&w, 9000, 1000, 9000, "potri", "NCCL", &err), 0);
  CHECK_EQ(jmg_watch_arrival(&w, 11000, 1000, 11000, "potri", "NCCL", &err),
           -JMG_ETIMEDOUT);
  CHECK_CONTAINS(err.op, "potri");
  CHECK_CONTAINS(err.msg, "rank 1 of 2");
  CHECK_CONTAINS(err.msg, "10 s apart");
  CHECK_CONTAINS(err.msg, "JAXMG_RENDEZVOUS_TIMEOUT (8 s)");
  CHECK_CONTAINS(err.msg, "this rank came late");
  /* The same verdict where this rank was the early one... */
  jmg_error_clear(&err);
  CHECK_EQ(jmg_watch_arrival(&w, 1000, 1000, 11000, "potri", "NCCL", &err),
           -JMG_ETIMEDOUT);
  CHECK_CONTAINS(err.msg, "a rank came late");
  /* ...and none without a timeout. */
  const jmg_watch forever = {.rank = 0, .ranks = 2, .timeout_s = 0};
  CHECK_EQ(jmg_watch_arrival(&forever, 1000, 1000, 1000000, "potri", "NCCL",
                             &err), 0);
  /* The wall clock moves. */
  const int64_t t0 = jmg_watch_wall_ms();
  CHECK(t0 > 1700000000000LL);
}

TEST(watchdog_errors_name_the_op_the_rank_its_pid_and_the_timeout) {
  const int64_t pids[3] = {100, 4242, 102};
  const jmg_watch w = {.rank = 0, .ranks = 3, .pids = pids, .timeout_s = 8.0};
  jmg_error err;
  jmg_error_clear(&err);
  jmg_watch_fault f = {.verdict = JMG_WATCH_PEER_GONE, .rank = 1, .pid = 4242};
  CHECK_EQ(jmg_watch_error(&w, &f, "the call", NULL, "potri", "NCCL", &err),
           -JMG_EPEER);
  CHECK_CONTAINS(err.op, "potri");
  CHECK_CONTAINS(err.msg, "rank 1 (pid 4242) exited or was killed");
  CHECK_CONTAINS(err.msg, "rank 0 of 3");
  CHECK_CONTAINS(err.msg, "not used again");

  f = (jmg_watch_fault){.verdict = JMG_WATCH_LATE, .rank = -1, .waited = 8.05};
  CHECK_EQ(jmg_watch_error(&w, &f, "the call", NULL, "potri", "NCCL", &err),
           -JMG_ETIMEDOUT);
  CHECK_CONTAINS(err.msg, "did not arrive");
  CHECK_CONTAINS(err.msg, "within 8 s");
  CHECK_CONTAINS(err.msg, "JAXMG_RENDEZVOUS_TIMEOUT");
  CHECK_CONTAINS(err.msg, "never came");

  f = (jmg_watch_fault){.verdict = JMG_WATCH_ASYNC, .rank = -1, .code = 6};
  CHECK_EQ(jmg_watch_error(&w, &f, "the call", "remote process exited",
                           "syevd", "NCCL", &err),
           -JMG_EPEER);
  CHECK_CONTAINS(err.msg, "6: remote process exited");
}

/* ---- the thread, with real processes ------------------------------------ */

typedef struct fired_log {
  atomic_int fired;
  atomic_int verdict;
  atomic_int rank;
} fired_log;

static void log_fire(void *ctx, const jmg_watch_fault *f) {
  fired_log *l = ctx;
  atomic_store(&l->verdict, (int)f->verdict);
  atomic_store(&l->rank, f->rank);
  atomic_fetch_add(&l->fired, 1);
}

/* Waits up to s seconds for l to fire; the seconds it took, or -1. */
static double wait_fired(fired_log *l, double s) {
  const double t0 = now_s();
  while (now_s() - t0 < s) {
    if (atomic_load(&l->fired) > 0) return now_s() - t0;
    sleep_s(0.01);
  }
  return -1;
}

static void entry_init(jmg_watchdog_entry *e, fired_log *l,
                       const int64_t *pids, int ranks, double timeout_s) {
  memset(e, 0, sizeof *e);
  memset(l, 0, sizeof *l);
  e->watch = (jmg_watch){.rank = 0, .ranks = ranks, .pids = pids,
                         .timeout_s = timeout_s};
  e->fire = log_fire;
  e->ctx = l;
}

TEST(watchdog_fires_once_soon_after_a_watched_process_is_killed) {
  pid_t child = fork();
  if (child == 0) {
    sleep_s(30.0);
    _exit(0);
  }
  CHECK(child > 0);
  const int64_t pids[2] = {(int64_t)getpid(), (int64_t)child};
  jmg_watchdog_entry e;
  fired_log l;
  entry_init(&e, &l, pids, 2, 60.0);
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_watchdog_add(&e, "potri", &err), 0);
  sleep_s(0.2);
  const int quiet = atomic_load(&l.fired);
  kill(child, SIGKILL); /* a zombie until reaped: dead all the same */
  const double took = wait_fired(&l, 5.0);
  sleep_s(0.2); /* it fires once */
  jmg_watch_fault f;
  const int fired = jmg_watchdog_remove(&e, &f);
  waitpid(child, NULL, 0);
  CHECK_EQ(quiet, 0);
  CHECK(took >= 0 && took < 1.0);
  CHECK_EQ(atomic_load(&l.fired), 1);
  CHECK_EQ(fired, 1);
  CHECK_EQ(f.verdict, JMG_WATCH_PEER_GONE);
  CHECK_EQ(f.rank, 1);
  CHECK_EQ(f.pid, (int64_t)child);
}

TEST(watchdog_fires_at_the_deadline_unless_everyone_arrived) {
  jmg_watchdog_entry late, in_time;
  fired_log l_late, l_in_time;
  entry_init(&late, &l_late, NULL, 2, 0.2);
  entry_init(&in_time, &l_in_time, NULL, 2, 0.2);
  jmg_error err;
  jmg_error_clear(&err);
  const double t0 = now_s();
  CHECK_EQ(jmg_watchdog_add(&late, "potrs", &err), 0);
  CHECK_EQ(jmg_watchdog_add(&in_time, "potrs", &err), 0);
  jmg_watchdog_arrived(&in_time);
  const double took = wait_fired(&l_late, 5.0);
  sleep_s(0.3);
  jmg_watch_fault f;
  CHECK_EQ(jmg_watchdog_remove(&in_time, &f), 0);
  CHECK_EQ(jmg_watchdog_remove(&late, &f), 1);
  CHECK(took >= 0);
  CHECK(now_s() - t0 >= 0.2);
  CHECK(took < 1.0);
  CHECK_EQ(f.verdict, JMG_WATCH_LATE);
  CHECK_EQ(atomic_load(&l_in_time.fired), 0);
}

static int async_after(void *ctx) {
  (void)ctx;
  return 3; /* ncclInternalError, say */
}

TEST(watchdog_fires_on_the_library_s_asynchronous_error) {
  jmg_watchdog_entry e;
  fired_log l;
  entry_init(&e, &l, NULL, 2, 60.0);
  e.async_error = async_after;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_watchdog_add(&e, "syevd", &err), 0);
  const double took = wait_fired(&l, 5.0);
  jmg_watch_fault f;
  CHECK_EQ(jmg_watchdog_remove(&e, &f), 1);
  CHECK(took >= 0 && took < 1.0);
  CHECK_EQ(f.verdict, JMG_WATCH_ASYNC);
  CHECK_EQ(f.code, 3);
}

TEST(watchdog_never_fires_after_remove) {
  jmg_watchdog_entry e;
  fired_log l;
  entry_init(&e, &l, NULL, 2, 0.15);
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_watchdog_add(&e, "potri", &err), 0);
  jmg_watch_fault f;
  CHECK_EQ(jmg_watchdog_remove(&e, &f), 0);
  sleep_s(0.4); /* past the deadline it would have had */
  CHECK_EQ(atomic_load(&l.fired), 0);
  /* Added again (the next call), it watches afresh. */
  CHECK_EQ(jmg_watchdog_add(&e, "potri", &err), 0);
  CHECK(wait_fired(&l, 5.0) >= 0);
  CHECK_EQ(jmg_watchdog_remove(&e, &f), 1);
}
