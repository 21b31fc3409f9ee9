/* The CPU platform's communicator between processes
 * (comm/comm_processes.c). Ranks as threads of this process (rounds, a big
 * exchange in one group with sends to self, two call sites of one group at
 * once), then ranks as forked processes: the same bodies, a rank killed
 * while the others wait for it (they fail at once, naming it, and so does a
 * rank that waits only for a survivor), a rank that never comes (a timeout,
 * in the set-up and after it, and the late rank fails at once), and nothing
 * left behind (no abstract socket of the group once its processes exit). */
#define _GNU_SOURCE /* setenv, kill */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm_exchanges.h"
#include "common/config.h"
#include "test.h"
#include "test_clock.h"

#define MAX_RANKS 8
#define SITE_OFFSET (JMG_COMM_ID_MAX - 8)

typedef struct pj {
  unsigned char id[JMG_COMM_ID_MAX];
  int rank, ranks;
  int rc;
  jmg_error err;
  int bad;
  double elapsed_s; /* of the body, after the open */
  double arg;       /* the body's own */
  void (*body)(struct pj *j, jmg_comm *c);
  int watch; /* tell pids (watch) before the open */
  int64_t pids[MAX_RANKS];
} pj;

static const jmg_comm_ops *ops(void) { return jmg_processes_comm(); }

static void new_id(unsigned char *id, uint64_t site) {
  jmg_error err;
  jmg_error_clear(&err);
  (void)ops()->make_id(id, "test", &err);
  memcpy(id + SITE_OFFSET, &site, sizeof site);
}

static void with_site(unsigned char *dst, const unsigned char *id,
                      uint64_t site) {
  memcpy(dst, id, JMG_COMM_ID_MAX);
  memcpy(dst + SITE_OFFSET, &site, sizeof site);
}

static void run_one(pj *j) {
  jmg_error_clear(&j->err);
  jmg_comm *c = NULL;
  if (j->watch) ops()->watch(j->id, j->ranks, j->pids);
  j->rc = ops()->open(j->id, j->rank, j->ranks, NULL, &c, "test", &j->err);
  const double t0 = now_s();
  if (j->rc == 0) j->body(j, c);
  j->elapsed_s = now_s() - t0;
}

static void *thread_main(void *arg) {
  run_one(arg);
  return NULL;
}

/* Ranks as threads of this process. */
static int run_threads(pj *jobs, int n) {
  pthread_t t[2 * MAX_RANKS];
  for (int r = 0; r < n; ++r)
    if (pthread_create(&t[r], NULL, thread_main, &jobs[r]) != 0) return -1;
  for (int r = 0; r < n; ++r) pthread_join(t[r], NULL);
  return 0;
}

/* Ranks as forked processes: each runs its job and writes it back through
 * a pipe; timeout (the child's JAXMG_RENDEZVOUS_TIMEOUT, NULL: unchanged).
 * A job with kill_after_open set is its own: see killed_body. The parent
 * reaps every child within bound_s (killing what is left). Returns the
 * number of children that reported. */
static int run_processes(pj *jobs, int n, const char *timeout, double bound_s) {
  int fds[MAX_RANKS][2];
  pid_t pids[MAX_RANKS];
  for (int r = 0; r < n; ++r) {
    if (pipe(fds[r]) != 0) return -1;
    fflush(NULL);
    pids[r] = fork();
    if (pids[r] < 0) return -1;
    if (pids[r] == 0) {
      for (int k = 0; k <= r; ++k) close(fds[k][0]);
      if (timeout != NULL) setenv("JAXMG_RENDEZVOUS_TIMEOUT", timeout, 1);
      run_one(&jobs[r]);
      ssize_t w = write(fds[r][1], &jobs[r], sizeof jobs[r]);
      _exit(w == (ssize_t)sizeof jobs[r] ? 0 : 3);
    }
    close(fds[r][1]);
  }
  int reported = 0;
  const double end = now_s() + bound_s;
  for (int r = 0; r < n; ++r) {
    pj got;
    ssize_t rd = 0;
    for (;;) { /* the read blocks until the child writes or exits */
      rd = read(fds[r][0], &got, sizeof got);
      if (rd >= 0 || errno != EINTR) break;
    }
    if (rd == (ssize_t)sizeof got) {
      jobs[r] = got;
      ++reported;
    } else {
      jobs[r].rc = 1; /* no report: killed */
    }
    close(fds[r][0]);
  }
  for (int r = 0; r < n; ++r) {
    int status;
    while (waitpid(pids[r], &status, WNOHANG) == 0) {
      if (now_s() > end) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &status, 0);
        break;
      }
      sleep_s(0.01);
    }
  }
  return reported;
}

/* Whether an abstract socket of the group of id is still bound on this
 * machine (/proc/net/unix lists them as "@name"). */
static int group_socket_left(const unsigned char *id) {
  static const char digits[] = "0123456789abcdef";
  char name[64] = "@jaxmg-comm-";
  size_t len = strlen(name);
  for (int i = 0; i < 16; ++i) { /* the random bytes, after the 24-byte tag */
    name[len++] = digits[id[24 + i] >> 4];
    name[len++] = digits[id[24 + i] & 15];
  }
  name[len] = '\0';
  FILE *f = fopen("/proc/net/unix", "r");
  if (f == NULL) return 0;
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof line, f) != NULL)
    found = strstr(line, name) != NULL;
  fclose(f);
  return found;
}

/* ---- bodies ------------------------------------------------------------*/

/* Rounds of max_int, a ring exchange and a broadcast (comm_exchanges.h). */
static void rounds_body(pj *j, jmg_comm *c) {
  j->rc = comm_rounds(ops(), c, j->rank, j->ranks, &j->bad, &j->err);
}

/* In one group: to every rank (itself too) MANY small messages and one of
 * BIG bytes (far more than a socket holds), then all the receives; then
 * broadcasts from every root in one group. */
#define MANY 1000
#define BIG ((size_t)3 << 20)

static void big_body(pj *j, jmg_comm *c) {
  j->rc = comm_big_exchange(ops(), c, j->rank, j->ranks, MANY, BIG, &j->bad,
                            &j->err);
}

static void both_body(pj *j, jmg_comm *c) {
  rounds_body(j, c);
  if (j->rc == 0) big_body(j, c);
}

static void max_body(pj *j, jmg_comm *c) {
  int v = j->rank;
  j->rc = ops()->max_int(c, &v, NULL, "potrs", &j->err);
  if (j->rc == 0 && v != j->ranks - 1) j->bad = 1;
}

/* One round together, then rank 1 dies (SIGKILL, arg: after how long)
 * while rank 0 waits for a message from it and the others wait for a
 * broadcast from rank 0 (which fails, and tells them). */
static void killed_body(pj *j, jmg_comm *c) {
  max_body(j, c);
  if (j->rc != 0) return;
  if (j->rank == 1) {
    sleep_s(j->arg);
    kill(getpid(), SIGKILL);
  }
  const double t0 = now_s();
  long v = 0;
  if (j->rank == 0)
    j->rc = ops()->recv(c, &v, sizeof v, 1, NULL, "potri", &j->err);
  else
    j->rc = ops()->bcast(c, &v, sizeof v, 0, NULL, "potri", &j->err);
  j->arg = now_s() - t0;
}

/* Rank 2 arrives arg seconds late at a max_int. */
static void late_body(pj *j, jmg_comm *c) {
  if (j->rank == 2) sleep_s(j->arg);
  const double t0 = now_s();
  max_body(j, c);
  j->arg = now_s() - t0;
}

/* ---- tests -------------------------------------------------------------*/

TEST(comm_processes_ranks_as_threads_two_call_sites_at_once) {
  unsigned char a[JMG_COMM_ID_MAX], b[JMG_COMM_ID_MAX];
  new_id(a, 11);
  with_site(b, a, 12); /* the same group, another call site */
  pj jobs[8];
  for (int r = 0; r < 8; ++r) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    memcpy(jobs[r].id, r < 4 ? a : b, JMG_COMM_ID_MAX);
    jobs[r].rank = r % 4;
    jobs[r].ranks = 4;
    jobs[r].body = r < 4 ? rounds_body : big_body;
  }
  CHECK_EQ(run_threads(jobs, 8), 0);
  for (int r = 0; r < 8; ++r) {
    if (jobs[r].rc != 0) TEST_FAIL_AT("job %d: %s", r, jobs[r].err.msg);
    CHECK_EQ(jobs[r].rc, 0);
    CHECK_EQ(jobs[r].bad, 0);
  }
}

TEST(comm_processes_ranks_as_processes_then_nothing_left_behind) {
  for (int ranks = 2; ranks <= 4; ranks += 2) {
    unsigned char id[JMG_COMM_ID_MAX];
    new_id(id, 1);
    pj jobs[MAX_RANKS];
    for (int r = 0; r < ranks; ++r) {
      memset(&jobs[r], 0, sizeof jobs[r]);
      memcpy(jobs[r].id, id, sizeof id);
      jobs[r].rank = r;
      jobs[r].ranks = ranks;
      jobs[r].body = both_body;
    }
    CHECK_EQ(run_processes(jobs, ranks, "30", 60.0), ranks);
    for (int r = 0; r < ranks; ++r) {
      if (jobs[r].rc != 0) TEST_FAIL_AT("rank %d: %s", r, jobs[r].err.msg);
      CHECK_EQ(jobs[r].rc, 0);
      CHECK_EQ(jobs[r].bad, 0);
    }
    CHECK(!group_socket_left(id));
  }
}

TEST(comm_processes_a_killed_rank_fails_the_others_at_once) {
  unsigned char id[JMG_COMM_ID_MAX];
  new_id(id, 3);
  pj jobs[4];
  for (int r = 0; r < 4; ++r) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    memcpy(jobs[r].id, id, sizeof id);
    jobs[r].rank = r;
    jobs[r].ranks = 4;
    jobs[r].arg = 0.3;
    jobs[r].body = killed_body;
  }
  /* A 30 s timeout: failing at once means well before it. */
  CHECK_EQ(run_processes(jobs, 4, "30", 60.0), 3);
  CHECK(jobs[1].rc != 0); /* killed: no report */
  CHECK_EQ(jobs[0].rc, -JMG_EPEER);
  CHECK_CONTAINS(jobs[0].err.op, "potri");
  CHECK_CONTAINS(jobs[0].err.msg, "connection to rank 1 (pid");
  CHECK_CONTAINS(jobs[0].err.msg, "exited or was killed");
  CHECK(jobs[0].arg < 3.0);
  for (int r = 2; r < 4; ++r) { /* waiting for rank 0, which told them */
    CHECK_EQ(jobs[r].rc, -JMG_EPEER);
    CHECK_CONTAINS(jobs[r].err.msg, "rank 0 (pid");
    CHECK_CONTAINS(jobs[r].err.msg, "connection to rank 1");
    CHECK(jobs[r].arg < 3.0);
  }
  CHECK(!group_socket_left(id));
}

TEST(comm_processes_a_rank_that_never_comes_is_a_timeout) {
  /* In the set-up: rank 3 of 4 never opens. */
  unsigned char id[JMG_COMM_ID_MAX];
  new_id(id, 5);
  pj jobs[4];
  for (int r = 0; r < 3; ++r) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    memcpy(jobs[r].id, id, sizeof id);
    jobs[r].rank = r;
    jobs[r].ranks = 4;
    jobs[r].body = max_body;
  }
  const double t0 = now_s();
  CHECK_EQ(run_processes(jobs, 3, "0.5", 30.0), 3);
  CHECK(now_s() - t0 < 10.0);
  for (int r = 0; r < 3; ++r) {
    CHECK_EQ(jobs[r].rc, -JMG_ETIMEDOUT);
    CHECK_CONTAINS(jobs[r].err.msg, "waited 0.5 s for rank");
    CHECK_CONTAINS(jobs[r].err.msg, "3");
    CHECK_CONTAINS(jobs[r].err.msg, "JAXMG_RENDEZVOUS_TIMEOUT");
  }
  CHECK(!group_socket_left(id));
  /* After the set-up: rank 2 of 3 comes 3 s late to a max_int; the others
   * time out after 0.5 s, and rank 2 then fails at once, told by them. */
  new_id(id, 6);
  for (int r = 0; r < 3; ++r) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    memcpy(jobs[r].id, id, sizeof id);
    jobs[r].rank = r;
    jobs[r].ranks = 3;
    jobs[r].arg = 3.0;
    jobs[r].body = late_body;
  }
  CHECK_EQ(run_processes(jobs, 3, "0.5", 30.0), 3);
  for (int r = 0; r < 2; ++r) {
    CHECK(jobs[r].rc == -JMG_ETIMEDOUT || jobs[r].rc == -JMG_EPEER);
    CHECK(jobs[r].arg < 2.5);
  }
  CHECK(jobs[0].rc == -JMG_ETIMEDOUT || jobs[1].rc == -JMG_ETIMEDOUT);
  CHECK_CONTAINS(
      jobs[0].rc == -JMG_ETIMEDOUT ? jobs[0].err.msg : jobs[1].err.msg,
      "for a max_int from rank 2");
  CHECK_EQ(jobs[2].rc, -JMG_EPEER);
  CHECK_CONTAINS(jobs[2].err.msg, "failed earlier");
  CHECK_CONTAINS(jobs[2].err.msg, "never came");
  CHECK(jobs[2].arg < 0.5);
}

/* A rank whose process is gone before it opens the group: where the others
 * were told the ranks' pids (watch), they fail at once, naming it (the
 * highest rank: the others wait to accept it; the lowest: the others
 * connect to it), long before the 30 s timeout. */
TEST(comm_processes_a_rank_dead_before_the_set_up_fails_the_others_at_once) {
  for (int dead_rank = 3; dead_rank >= 0; dead_rank -= 3) {
    unsigned char id[JMG_COMM_ID_MAX];
    new_id(id, 7);
    fflush(NULL);
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    CHECK(dead > 0);
    pj jobs[3];
    for (int k = 0, r = 0; r < 4; ++r) {
      if (r == dead_rank) continue;
      memset(&jobs[k], 0, sizeof jobs[k]);
      memcpy(jobs[k].id, id, sizeof id);
      jobs[k].rank = r;
      jobs[k].ranks = 4;
      jobs[k].body = max_body;
      jobs[k].watch = 1;
      jobs[k].pids[dead_rank] = (int64_t)dead; /* the others: 0, unknown */
      ++k;
    }
    const double t0 = now_s();
    const int reported = run_processes(jobs, 3, "30", 60.0);
    const double took = now_s() - t0;
    waitpid(dead, NULL, 0);
    CHECK_EQ(reported, 3);
    if (took >= 10.0)
      for (int k = 0; k < 3; ++k)
        TEST_FAIL_AT("dead %d, took %.1f s: rank %d: %s", dead_rank, took,
                     jobs[k].rank, jobs[k].err.msg);
    CHECK(took < 10.0);
    char says[64];
    snprintf(says, sizeof says, "rank %d (pid %ld) is gone", dead_rank,
             (long)dead);
    int named = 0;
    for (int k = 0; k < 3; ++k) {
      CHECK(jobs[k].rc == -JMG_EPEER || jobs[k].rc == -JMG_ETIMEDOUT);
      named += jobs[k].rc == -JMG_EPEER && strstr(jobs[k].err.msg, says);
    }
    /* Every rank waits for the dead one in the set-up and sees it gone. */
    if (named != 3)
      for (int k = 0; k < 3; ++k)
        TEST_FAIL_AT("rank %d: %s", jobs[k].rank, jobs[k].err.msg);
    CHECK_EQ(named, 3);
  }
}

/* A call site that fails leaves the group's other call sites working:
 * the group set up (site C), ranks 0 and 1 of 3 time out at site A (rank 2
 * never comes there), then all three run rounds at site B over the same
 * connections, and rank 2 then finds site A failed, told why. */
static void set_timeout(const char *value) {
  setenv("JAXMG_RENDEZVOUS_TIMEOUT", value, 1);
}

static int run_at(pj *jobs, int n, const unsigned char *id,
                  void (*body)(pj *, jmg_comm *), int first_rank) {
  for (int r = 0; r < n; ++r) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    memcpy(jobs[r].id, id, JMG_COMM_ID_MAX);
    jobs[r].rank = first_rank + r;
    jobs[r].ranks = 3;
    jobs[r].body = body;
  }
  return run_threads(jobs, n);
}

TEST(comm_processes_a_failed_call_site_leaves_the_others_working) {
  const char *saved = getenv("JAXMG_RENDEZVOUS_TIMEOUT");
  char keep[64] = "";
  if (saved != NULL) snprintf(keep, sizeof keep, "%s", saved);
  unsigned char a[JMG_COMM_ID_MAX], b[JMG_COMM_ID_MAX], c[JMG_COMM_ID_MAX];
  new_id(c, 20);
  with_site(a, c, 21);
  with_site(b, c, 22);
  pj setup[3], at_a[2], at_b[3], late[1];
  set_timeout("10");
  int rc = run_at(setup, 3, c, max_body, 0);
  set_timeout("0.3");
  if (rc == 0) rc = run_at(at_a, 2, a, max_body, 0);
  set_timeout("10");
  if (rc == 0) rc = run_at(at_b, 3, b, rounds_body, 0);
  if (rc == 0) rc = run_at(late, 1, a, max_body, 2);
  if (saved != NULL)
    setenv("JAXMG_RENDEZVOUS_TIMEOUT", keep, 1);
  else
    unsetenv("JAXMG_RENDEZVOUS_TIMEOUT");
  CHECK_EQ(rc, 0);
  for (int r = 0; r < 3; ++r) CHECK_EQ(setup[r].rc, 0);
  int timed_out = 0;
  for (int r = 0; r < 2; ++r) {
    CHECK(at_a[r].rc == -JMG_ETIMEDOUT || at_a[r].rc == -JMG_EPEER);
    timed_out += at_a[r].rc == -JMG_ETIMEDOUT;
  }
  CHECK(timed_out >= 1);
  for (int r = 0; r < 3; ++r) {
    if (at_b[r].rc != 0) TEST_FAIL_AT("rank %d at B: %s", r, at_b[r].err.msg);
    CHECK_EQ(at_b[r].rc, 0);
    CHECK_EQ(at_b[r].bad, 0);
  }
  CHECK_EQ(late[0].rc, -JMG_EPEER);
  CHECK_CONTAINS(late[0].err.msg, "failed earlier");
  CHECK_CONTAINS(late[0].err.msg, "never came");
}

TEST(comm_processes_ids_and_the_cpu_platform_choice) {
  unsigned char id[JMG_COMM_ID_MAX], other[JMG_COMM_ID_MAX];
  new_id(id, 0);
  new_id(other, 0);
  CHECK(memcmp(id, other, sizeof id) != 0);
  CHECK(jmg_comm_processes_id(id));
  CHECK_EQ(memcmp(id, "jaxmg-procs-comm", 16), 0);
  for (size_t k = 48; k < JMG_COMM_ID_MAX; ++k) CHECK_EQ(id[k], 0);
  CHECK(ops()->per_call_site);
  CHECK(ops()->id_bytes + 8 <= JMG_COMM_ID_MAX);
  unsigned char threads_id[JMG_COMM_ID_MAX];
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_threads_comm()->make_id(threads_id, "test", &err), 0);
  CHECK(!jmg_comm_processes_id(threads_id));
  jmg_comm *c = NULL;
  CHECK_EQ(ops()->open(threads_id, 0, 2, NULL, &c, "syevd", &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "not made by the processes communicator");
  CHECK_EQ(jmg_threads_comm()->open(id, 0, 2, NULL, &c, "syevd", &err),
           -JMG_EINVAL);
  CHECK_EQ(ops()->open(id, 2, 2, NULL, &c, "syevd", &err), -JMG_EINVAL);
  /* A group of one rank needs no connection. */
  CHECK_EQ(ops()->open(id, 0, 1, NULL, &c, "syevd", &err), 0);
  int v = 5;
  CHECK_EQ(ops()->max_int(c, &v, NULL, "syevd", &err), 0);
  CHECK_EQ(v, 5);
  long x = 9, y = 0;
  CHECK_EQ(ops()->group_begin("syevd", &err), 0);
  CHECK_EQ(ops()->send(c, &x, sizeof x, 0, NULL, "syevd", &err), 0);
  CHECK_EQ(ops()->recv(c, &y, sizeof y, 0, NULL, "syevd", &err), 0);
  CHECK_EQ(ops()->group_end("syevd", &err), 0);
  CHECK_EQ(y, 9);
  CHECK_EQ(ops()->open(id, 0, 3, NULL, &c, "syevd", &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "opened for 1 ranks, not 3");
}
