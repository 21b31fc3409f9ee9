/* The CPU platform's communicator (comm/comm_threads.c): ranks are threads
 * of this process. Two communicators at once, an exchange of many and big
 * messages in one group (sends to self included), broadcasts inside and
 * outside groups, the timeout when a rank never comes (and the
 * communicator failed afterwards), and the ids' limits (another process's
 * id, a second open with other ranks). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm_exchanges.h"
#include "test.h"

#define MAX_RANKS 8

typedef struct ct_job {
  const unsigned char *id;
  int rank, ranks;
  int rc;
  jmg_error err;
  int bad;   /* a value that came out wrong */
  int value; /* max_int's */
  void (*body)(struct ct_job *j, jmg_comm *c);
} ct_job;

static const jmg_comm_ops *ops(void) { return jmg_threads_comm(); }

static void *ct_main(void *arg) {
  ct_job *j = arg;
  jmg_error_clear(&j->err);
  jmg_comm *c = NULL;
  j->rc = ops()->open(j->id, j->rank, j->ranks, NULL, &c, "test", &j->err);
  if (j->rc == 0) j->body(j, c);
  return NULL;
}

static void new_id(unsigned char *id) {
  jmg_error err;
  jmg_error_clear(&err);
  (void)ops()->make_id(id, "test", &err);
}

/* Starts jobs[0 .. n) (each names its communicator) and joins them. */
static int run_jobs(ct_job *jobs, int n) {
  pthread_t t[2 * MAX_RANKS];
  for (int r = 0; r < n; ++r)
    if (pthread_create(&t[r], NULL, ct_main, &jobs[r]) != 0) return -1;
  for (int r = 0; r < n; ++r) pthread_join(t[r], NULL);
  return 0;
}

/* Rounds of max_int, a ring exchange and a broadcast (comm_exchanges.h). */
static void rounds_body(ct_job *j, jmg_comm *c) {
  j->rc = comm_rounds(ops(), c, j->rank, j->ranks, &j->bad, &j->err);
}

TEST(comm_threads_two_communicators_at_once) {
  unsigned char a[JMG_COMM_ID_MAX], b[JMG_COMM_ID_MAX];
  new_id(a);
  new_id(b);
  CHECK(memcmp(a, b, sizeof a) != 0);
  ct_job jobs[7];
  for (int r = 0; r < 7; ++r) {
    const int in_a = r < 4;
    jobs[r] = (ct_job){.id = in_a ? a : b, .rank = in_a ? r : r - 4,
                       .ranks = in_a ? 4 : 3, .body = rounds_body};
  }
  CHECK_EQ(run_jobs(jobs, 7), 0);
  for (int r = 0; r < 7; ++r) {
    if (jobs[r].rc != 0) TEST_FAIL_AT("job %d: %s", r, jobs[r].err.msg);
    CHECK_EQ(jobs[r].rc, 0);
    CHECK_EQ(jobs[r].bad, 0);
  }
}

/* In one group: to every rank (itself too) MANY small messages and one of
 * BIG bytes, then all the receives; and broadcasts from every root in one
 * group. */
#define MANY 3000
#define BIG ((size_t)8 << 20)

static void big_body(ct_job *j, jmg_comm *c) {
  j->rc = comm_big_exchange(ops(), c, j->rank, j->ranks, MANY, BIG, &j->bad,
                            &j->err);
}

TEST(comm_threads_a_big_exchange_in_one_group) {
  unsigned char id[JMG_COMM_ID_MAX];
  new_id(id);
  ct_job jobs[4];
  for (int r = 0; r < 4; ++r)
    jobs[r] = (ct_job){.id = id, .rank = r, .ranks = 4, .body = big_body};
  CHECK_EQ(run_jobs(jobs, 4), 0);
  for (int r = 0; r < 4; ++r) {
    if (jobs[r].rc != 0) TEST_FAIL_AT("rank %d: %s", r, jobs[r].err.msg);
    CHECK_EQ(jobs[r].rc, 0);
    CHECK_EQ(jobs[r].bad, 0);
  }
}

static void max_body(ct_job *j, jmg_comm *c) {
  j->value = j->rank;
  j->rc = ops()->max_int(c, &j->value, NULL, "potrs", &j->err);
}

static void send_to_3_body(ct_job *j, jmg_comm *c) {
  int v = 1;
  j->rc = ops()->send(c, &v, sizeof v, 3, NULL, "potrs", &j->err);
}

TEST(comm_threads_a_rank_that_never_comes_is_a_timeout_then_a_failed_comm) {
  const char *saved = getenv("JAXMG_RENDEZVOUS_TIMEOUT");
  char keep[64] = "";
  if (saved != NULL) snprintf(keep, sizeof keep, "%s", saved);
  setenv("JAXMG_RENDEZVOUS_TIMEOUT", "0.3", 1);
  unsigned char id[JMG_COMM_ID_MAX], id2[JMG_COMM_ID_MAX];
  new_id(id);
  new_id(id2);
  ct_job jobs[3];
  for (int r = 0; r < 3; ++r) /* rank 3 of 4 never comes */
    jobs[r] = (ct_job){.id = id, .rank = r, .ranks = 4, .body = max_body};
  int started = run_jobs(jobs, 3);
  /* A send nobody receives times out too. */
  ct_job lone = {.id = id2, .rank = 0, .ranks = 4, .body = send_to_3_body};
  int started2 = run_jobs(&lone, 1);
  /* Afterwards the communicator fails at once, naming the first failure. */
  ct_job later[1] = {{.id = id, .rank = 1, .ranks = 4, .body = max_body}};
  int started3 = run_jobs(later, 1);
  if (saved != NULL)
    setenv("JAXMG_RENDEZVOUS_TIMEOUT", keep, 1);
  else
    unsetenv("JAXMG_RENDEZVOUS_TIMEOUT");
  CHECK_EQ(started, 0);
  CHECK_EQ(started2, 0);
  CHECK_EQ(started3, 0);
  int timed_out = 0;
  for (int r = 0; r < 3; ++r) {
    CHECK(jobs[r].rc == -JMG_ETIMEDOUT || jobs[r].rc == -JMG_EPEER);
    CHECK_CONTAINS(jobs[r].err.op, "potrs");
    if (jobs[r].rc == -JMG_ETIMEDOUT) {
      ++timed_out;
      CHECK_CONTAINS(jobs[r].err.msg, "never came");
      CHECK_CONTAINS(jobs[r].err.msg, "JAXMG_RENDEZVOUS_TIMEOUT");
    } else {
      CHECK_CONTAINS(jobs[r].err.msg, "failed earlier");
    }
  }
  CHECK(timed_out >= 1);
  CHECK_EQ(lone.rc, -JMG_ETIMEDOUT);
  CHECK_CONTAINS(lone.err.msg, "rank 0 waited 0.3 s for rank 3 to receive");
  CHECK_EQ(later[0].rc, -JMG_EPEER);
  CHECK_CONTAINS(later[0].err.msg, "failed earlier");
  CHECK_CONTAINS(later[0].err.msg, "never came");
}

TEST(comm_threads_ids_name_one_process_and_one_group_size) {
  unsigned char id[JMG_COMM_ID_MAX];
  new_id(id);
  jmg_error err;
  jmg_error_clear(&err);
  jmg_comm *c = NULL, *again = NULL;
  CHECK_EQ(ops()->open(id, 1, 2, NULL, &c, "syevd", &err), 0);
  CHECK_EQ(ops()->open(id, 1, 2, NULL, &again, "syevd", &err), 0);
  CHECK(c == again); /* cached per (id, rank) */
  CHECK_EQ(ops()->open(id, 0, 3, NULL, &c, "syevd", &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "opened for 2 ranks, not 3");
  /* The pid sits after the tag (comm_threads.c's tc_id). */
  unsigned char other[JMG_COMM_ID_MAX];
  memcpy(other, id, sizeof other);
  int64_t pid;
  memcpy(&pid, other + 24, sizeof pid);
  CHECK_EQ(pid, (int64_t)getpid());
  pid += 1;
  memcpy(other + 24, &pid, sizeof pid);
  CHECK_EQ(ops()->open(other, 0, 2, NULL, &c, "syevd", &err),
           -JMG_EUNSUPPORTED);
  CHECK_CONTAINS(err.msg, "joins the threads of one process");
  CHECK_CONTAINS(err.msg, "spans processes (MPMD)");
  unsigned char zeros[JMG_COMM_ID_MAX] = {0};
  CHECK_EQ(ops()->open(zeros, 0, 2, NULL, &c, "syevd", &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "not made by the threads communicator");
}
