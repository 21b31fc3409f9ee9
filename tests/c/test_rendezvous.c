/* The thread rendezvous (rendezvous/rendezvous_threads.c): participants meet,
 * the leader runs once over everyone's posts in shard order, errors and
 * missing participants reach everyone, and nobody hangs. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rendezvous/rendezvous.h"
#include "test.h"
#include "test_clock.h"
#include "test_value.h"

/* ---- helpers --------------------------------------------------------------
 */

/* Run ids no other test uses, so that calls of different tests never meet. */
static int64_t fresh_run_id(void) {
  static atomic_llong next = 7000000;
  return (int64_t)atomic_fetch_add(&next, 1000);
}

/* What a participant posts: its shard and the call it thinks it is in. */
typedef struct post {
  int shard;
  int group;
  int iter;
} post;

/* The leader's function and what it saw. */
typedef struct leader_ctx {
  atomic_int runs;
  atomic_int order_bad; /* posts not in shard order, or from another call */
  int nparts_seen;
  double sleep_s;
  int fail; /* return an injected error */
  int group;
  atomic_int *runs_per_iter; /* optional: counts runs per post.iter */
  int niter;
  size_t value_len; /* join_value: how many bytes of value to give */
} leader_ctx;

static int leader_fn(void *ctx, void *const *posts, int nparts,
                     jmg_error *err) {
  leader_ctx *l = ctx;
  atomic_fetch_add(&l->runs, 1);
  l->nparts_seen = nparts;
  const post *first = posts[0];
  for (int i = 0; i < nparts; ++i) {
    const post *p = posts[i];
    if (p == NULL || p->shard != i || p->group != l->group ||
        p->iter != first->iter)
      atomic_store(&l->order_bad, 1);
  }
  if (l->runs_per_iter != NULL && first->iter >= 0 && first->iter < l->niter)
    atomic_fetch_add(&l->runs_per_iter[first->iter], 1);
  sleep_s(l->sleep_s);
  if (l->fail)
    return jmg_error_set(err, JMG_ELAPACK, "potrs", "dpotrf",
                         "injected leader failure %d", 42);
  return 0;
}

/* The leader's fn of join_value: leader_fn, then value_len bytes of a
 * pattern of the group (see value_is). */
static int value_leader_fn(void *ctx, void *const *posts, int nparts,
                           jmg_rdv_value *value, jmg_error *err) {
  int rc = leader_fn(ctx, posts, nparts, err);
  if (rc != 0) return rc;
  const leader_ctx *l = ctx;
  value_fill(value, l->value_len, l->group);
  return 0;
}

/* One participant, run on its own thread. */
typedef struct part {
  jmg_rdv_key key;
  int shard;
  post p;
  leader_ctx *leader;
  double timeout_s;
  double delay_s;    /* sleep before joining */
  int abort_instead; /* call abort(why) instead of join */
  int async;         /* join_async, then wait for the done callback */
  int value_join;    /* join_value or join_value_async */
  jmg_error why;
  /* results */
  int rc;
  jmg_error err;
  double elapsed_s; /* of the join (or abort) itself, until done for async */
  atomic_int done_calls;
  int done_rc;
  jmg_error done_err;
  jmg_rdv_value value; /* value_join: what the participant received */
  int done_value_null; /* value_join and async: done got no value */
} part;

static void part_done(void *ctx, int rc, const jmg_error *err) {
  part *pt = ctx;
  pt->done_rc = rc;
  if (err != NULL) jmg_error_copy(&pt->done_err, err);
  atomic_fetch_add(&pt->done_calls, 1);
}

static void part_value_done(void *ctx, int rc, const jmg_rdv_value *value,
                            const jmg_error *err) {
  part *pt = ctx;
  pt->done_value_null = value == NULL;
  if (value != NULL) pt->value = *value;
  part_done(ctx, rc, err);
}

static void *part_main(void *arg) {
  part *pt = arg;
  sleep_s(pt->delay_s);
  const jmg_rendezvous *rdv = jmg_rendezvous_threads();
  jmg_error_clear(&pt->err);
  double t0 = now_s();
  if (pt->abort_instead) {
    rdv->abort(&pt->key, pt->shard, &pt->why);
    pt->rc = -(int)pt->why.code;
  } else if (pt->async) {
    if (pt->value_join)
      pt->rc = rdv->join_value_async(&pt->key, pt->shard, &pt->p,
                                     value_leader_fn, pt->leader, pt->timeout_s,
                                     part_value_done, pt, &pt->err);
    else
      pt->rc = rdv->join_async(&pt->key, pt->shard, &pt->p, leader_fn,
                               pt->leader, pt->timeout_s, part_done, pt,
                               &pt->err);
    /* Joined: the outcome comes through done (bounded wait). */
    while (pt->rc == 0 && atomic_load(&pt->done_calls) == 0 &&
           now_s() - t0 < 10.0)
      sleep_s(0.001);
    if (pt->rc == 0) {
      pt->rc = atomic_load(&pt->done_calls) ? pt->done_rc : 99999;
      jmg_error_copy(&pt->err, &pt->done_err);
    }
  } else if (pt->value_join) {
    pt->rc = rdv->join_value(&pt->key, pt->shard, &pt->p, value_leader_fn,
                             pt->leader, pt->timeout_s, &pt->value, &pt->err);
  } else {
    pt->rc = rdv->join(&pt->key, pt->shard, &pt->p, leader_fn, pt->leader,
                       pt->timeout_s, &pt->err);
  }
  pt->elapsed_s = now_s() - t0;
  return NULL;
}

static jmg_rdv_key make_key(const char *op, int64_t mesh_id, int64_t run_id,
                            int64_t seq, int nparts) {
  jmg_rdv_key k;
  k.op = op;
  k.mesh_id = mesh_id;
  k.run_id = run_id;
  k.seq = seq;
  k.nparts = nparts;
  k.pids = NULL;
  return k;
}

static void part_init(part *pt, jmg_rdv_key key, int shard, leader_ctx *l,
                      double timeout_s) {
  memset(pt, 0, sizeof *pt);
  pt->key = key;
  pt->shard = shard;
  pt->p.shard = shard;
  pt->p.group = l ? l->group : 0;
  pt->leader = l;
  pt->timeout_s = timeout_s;
  pt->rc = 12345;
}

static void run_parts(part *parts, int n) {
  pthread_t th[64];
  for (int i = 0; i < n; ++i)
    if (pthread_create(&th[i], NULL, part_main, &parts[i]) != 0) abort();
  for (int i = 0; i < n; ++i) pthread_join(th[i], NULL);
}

/* ---- meeting ------------------------------------------------------------- */

TEST(rendezvous_eight_participants_meet_and_leader_runs_once) {
  leader_ctx l;
  memset(&l, 0, sizeof l);
  jmg_rdv_key key = make_key("potrs", 11, fresh_run_id(), 0, 8);
  part parts[8];
  for (int i = 0; i < 8; ++i) part_init(&parts[i], key, i, &l, 10.0);
  run_parts(parts, 8);
  for (int i = 0; i < 8; ++i) {
    CHECK_EQ(parts[i].rc, 0);
    CHECK_EQ(parts[i].err.code, JMG_OK);
  }
  CHECK_EQ(atomic_load(&l.runs), 1);
  CHECK_EQ(l.nparts_seen, 8);
  CHECK_EQ(atomic_load(&l.order_bad), 0);
}

TEST(rendezvous_single_participant_runs_at_once) {
  leader_ctx l;
  memset(&l, 0, sizeof l);
  jmg_rdv_key key = make_key("syevd", 12, fresh_run_id(), 0, 1);
  part pt;
  part_init(&pt, key, 0, &l, 10.0);
  run_parts(&pt, 1);
  CHECK_EQ(pt.rc, 0);
  CHECK_EQ(atomic_load(&l.runs), 1);
  CHECK(pt.elapsed_s < 1.0);
}

/* Participants that loop over niter calls, taking seq from jmg_rdv_next_seq. */
typedef struct looper {
  const char *op;
  int64_t mesh_id;
  int shard, nparts, niter, group;
  int64_t run_id;
  int change_run_id; /* run id run_id + iter, instead of one run id */
  leader_ctx *leader;
  int failures;
  int seq_bad;
  jmg_error last_err;
} looper;

static void *looper_main(void *arg) {
  looper *lp = arg;
  const jmg_rendezvous *rdv = jmg_rendezvous_threads();
  for (int it = 0; it < lp->niter; ++it) {
    int64_t run_id = lp->change_run_id ? lp->run_id + it : lp->run_id;
    int64_t seq = jmg_rdv_next_seq(lp->op, lp->mesh_id, lp->shard, run_id);
    if (seq != (lp->change_run_id ? 0 : it)) lp->seq_bad = 1;
    jmg_rdv_key key = make_key(lp->op, lp->mesh_id, run_id, seq, lp->nparts);
    post p = {lp->shard, lp->group, it};
    jmg_error err;
    int rc = rdv->join(&key, lp->shard, &p, leader_fn, lp->leader, 10.0, &err);
    if (rc != 0) {
      lp->failures++;
      lp->last_err = err;
    }
  }
  return NULL;
}

/* Runs ngroups groups of nparts loopers at the same time; group g uses
 * mesh_ids[g] and ops[g]. Reports through TEST_FAIL_AT (sets
 * jmg_test_failed); call it last in a test, or check jmg_test_failed. */
static void run_loopers(int ngroups, int nparts, int niter,
                        const char *const *ops, const int64_t *mesh_ids,
                        int64_t run_id, int change_run_id) {
  enum { MAXG = 4, MAXP = 8 };
  looper lps[MAXG][MAXP];
  leader_ctx leaders[MAXG];
  atomic_int *runs[MAXG];
  pthread_t th[MAXG][MAXP];
  for (int g = 0; g < ngroups; ++g) {
    runs[g] = calloc((size_t)niter, sizeof *runs[g]);
    if (runs[g] == NULL) abort();
    for (int i = 0; i < niter; ++i) atomic_init(&runs[g][i], 0);
    memset(&leaders[g], 0, sizeof leaders[g]);
    leaders[g].group = g;
    leaders[g].runs_per_iter = runs[g];
    leaders[g].niter = niter;
    for (int s = 0; s < nparts; ++s) {
      looper *lp = &lps[g][s];
      memset(lp, 0, sizeof *lp);
      lp->op = ops[g];
      lp->mesh_id = mesh_ids[g];
      lp->shard = s;
      lp->nparts = nparts;
      lp->niter = niter;
      lp->group = g;
      lp->run_id = run_id;
      lp->change_run_id = change_run_id;
      lp->leader = &leaders[g];
    }
  }
  for (int g = 0; g < ngroups; ++g)
    for (int s = nparts - 1; s >= 0; --s) /* leader last */
      if (pthread_create(&th[g][s], NULL, looper_main, &lps[g][s]) != 0)
        abort();
  for (int g = 0; g < ngroups; ++g)
    for (int s = 0; s < nparts; ++s) pthread_join(th[g][s], NULL);

  int bad = 0;
  for (int g = 0; g < ngroups && !bad; ++g) {
    for (int s = 0; s < nparts && !bad; ++s) {
      if (lps[g][s].failures != 0) {
        TEST_FAIL_AT("group %d shard %d: %d calls failed, last: %s", g, s,
                     lps[g][s].failures, lps[g][s].last_err.msg);
        bad = 1;
      } else if (lps[g][s].seq_bad) {
        TEST_FAIL_AT("group %d shard %d: unexpected sequence numbers", g, s);
        bad = 1;
      }
    }
    if (!bad && atomic_load(&leaders[g].runs) != niter) {
      TEST_FAIL_AT("group %d: leader ran %d times for %d calls", g,
                   atomic_load(&leaders[g].runs), niter);
      bad = 1;
    }
    if (!bad && atomic_load(&leaders[g].order_bad)) {
      TEST_FAIL_AT(
          "group %d: the leader saw posts of another call or out "
          "of shard order",
          g);
      bad = 1;
    }
    for (int i = 0; i < niter && !bad; ++i)
      if (atomic_load(&runs[g][i]) != 1) {
        TEST_FAIL_AT("group %d: call %d ran %d times", g, i,
                     atomic_load(&runs[g][i]));
        bad = 1;
      }
  }
  for (int g = 0; g < ngroups; ++g) free(runs[g]);
}

TEST(rendezvous_200_back_to_back_calls_with_one_run_id) {
  const char *ops[] = {"potri"};
  const int64_t mesh[] = {21};
  run_loopers(1, 4, 200, ops, mesh, fresh_run_id(), 0);
}

TEST(rendezvous_200_back_to_back_calls_with_changing_run_ids) {
  const char *ops[] = {"potri"};
  const int64_t mesh[] = {22};
  run_loopers(1, 4, 200, ops, mesh, fresh_run_id(), 1);
}

TEST(rendezvous_concurrent_calls_on_different_keys_never_mix) {
  /* Same run id and the same sequence numbers at the same time: only the
   * mesh id (groups 0, 1) or the op (groups 1, 2) tells the calls apart. */
  const char *ops[] = {"syevd", "syevd", "potrs"};
  const int64_t mesh[] = {31, 32, 32};
  run_loopers(3, 4, 100, ops, mesh, fresh_run_id(), 0);
}

TEST(rendezvous_calls_differing_only_in_participant_count_never_mix) {
  /* One key but for nparts: a call of 2 and a call of 3 at the same time. */
  int64_t run_id = fresh_run_id();
  leader_ctx l2, l3;
  memset(&l2, 0, sizeof l2);
  memset(&l3, 0, sizeof l3);
  l3.group = 1;
  part parts[5];
  for (int i = 0; i < 2; ++i)
    part_init(&parts[i], make_key("potrs", 33, run_id, 0, 2), i, &l2, 10.0);
  for (int i = 0; i < 3; ++i)
    part_init(&parts[2 + i], make_key("potrs", 33, run_id, 0, 3), i, &l3, 10.0);
  run_parts(parts, 5);
  for (int i = 0; i < 5; ++i) CHECK_EQ(parts[i].rc, 0);
  CHECK_EQ(atomic_load(&l2.runs), 1);
  CHECK_EQ(atomic_load(&l3.runs), 1);
  CHECK_EQ(l2.nparts_seen, 2);
  CHECK_EQ(l3.nparts_seen, 3);
  CHECK_EQ(atomic_load(&l2.order_bad), 0);
  CHECK_EQ(atomic_load(&l3.order_bad), 0);
}

TEST(rendezvous_participants_arriving_in_random_order) {
  uint64_t seed = 0x243F6A8885A308D3ULL;
  for (int round = 0; round < 12; ++round) {
    enum { N = 8 };
    int perm[N];
    for (int i = 0; i < N; ++i) perm[i] = i;
    for (int i = N - 1; i > 0; --i) { /* Fisher-Yates */
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      int j = (int)((seed >> 33) % (uint64_t)(i + 1));
      int t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    leader_ctx l;
    memset(&l, 0, sizeof l);
    jmg_rdv_key key = make_key("potrs", 41, fresh_run_id(), round, N);
    part parts[N];
    for (int t = 0; t < N; ++t) {
      part_init(&parts[t], key, perm[t], &l, 10.0);
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      parts[t].delay_s = (double)((seed >> 33) % 15) * 1e-3; /* 0-14 ms */
    }
    run_parts(parts, N);
    for (int t = 0; t < N; ++t) {
      if (parts[t].rc != 0) {
        TEST_FAIL_AT("round %d shard %d: rc=%d %s", round, perm[t], parts[t].rc,
                     parts[t].err.msg);
        return;
      }
    }
    CHECK_EQ(atomic_load(&l.runs), 1);
    CHECK_EQ(atomic_load(&l.order_bad), 0);
  }
}

/* ---- failures --------------------------------------------------------------
 */

TEST(rendezvous_leader_error_reaches_every_participant) {
  leader_ctx l;
  memset(&l, 0, sizeof l);
  l.fail = 1;
  jmg_rdv_key key = make_key("potrs", 51, fresh_run_id(), 0, 4);
  part parts[4];
  for (int i = 0; i < 4; ++i) part_init(&parts[i], key, i, &l, 10.0);
  run_parts(parts, 4);
  CHECK_EQ(atomic_load(&l.runs), 1);
  for (int i = 0; i < 4; ++i) {
    CHECK_EQ(parts[i].rc, -JMG_ELAPACK);
    CHECK_EQ(parts[i].err.code, JMG_ELAPACK);
    CHECK_CONTAINS(parts[i].err.msg, "injected leader failure 42");
    CHECK_CONTAINS(parts[i].err.call, "dpotrf");
    CHECK_CONTAINS(parts[i].err.op, "potrs");
  }
}

TEST(rendezvous_abort_releases_everyone_and_later_arrivals) {
  leader_ctx l;
  memset(&l, 0, sizeof l);
  jmg_rdv_key key = make_key("potrs", 52, fresh_run_id(), 0, 4);
  part parts[4];
  for (int i = 0; i < 4; ++i) part_init(&parts[i], key, i, &l, 10.0);
  /* Shard 2 fails before it can join; shard 3 arrives after the failure. */
  parts[2].abort_instead = 1;
  parts[2].delay_s = 0.05;
  jmg_error_set(&parts[2].why, JMG_EINVAL, "potrs", "FFI call frame",
                "B on shard 2 has the wrong dtype");
  parts[3].delay_s = 0.4;
  double t0 = now_s();
  run_parts(parts, 4);
  double total = now_s() - t0;
  CHECK_EQ(atomic_load(&l.runs), 0);
  CHECK(total < 3.0); /* nowhere near the 10 s timeout */
  for (int i = 0; i < 4; ++i) {
    if (i == 2) continue;
    CHECK_EQ(parts[i].rc, -JMG_EINVAL);
    CHECK_CONTAINS(parts[i].err.msg, "shard 2 failed");
    CHECK_CONTAINS(parts[i].err.msg, "B on shard 2 has the wrong dtype");
    CHECK_CONTAINS(parts[i].err.call, "FFI call frame");
    CHECK(parts[i].elapsed_s < 2.0);
  }
  /* The late arrival failed at once, without waiting at all. */
  CHECK(parts[3].elapsed_s < 1.0);
  /* And so does anyone arriving later still. */
  part late;
  part_init(&late, key, 1, &l, 10.0);
  run_parts(&late, 1);
  CHECK_EQ(late.rc, -JMG_EINVAL);
  CHECK_CONTAINS(late.err.msg, "shard 2 failed");
  CHECK(late.elapsed_s < 1.0);
}

TEST(rendezvous_abort_before_anyone_joins_fails_every_later_join) {
  jmg_rdv_key key = make_key("syevd", 53, fresh_run_id(), 0, 3);
  jmg_error why;
  jmg_error_set(&why, JMG_ENOMEM, "syevd", "cudaMalloc",
                "no memory for the workspace");
  jmg_rendezvous_threads()->abort(&key, 1, &why);
  /* A second abort of the same call is harmless. */
  jmg_rendezvous_threads()->abort(&key, 2, &why);
  leader_ctx l;
  memset(&l, 0, sizeof l);
  part parts[2];
  part_init(&parts[0], key, 0, &l, 10.0);
  part_init(&parts[1], key, 2, &l, 10.0);
  run_parts(parts, 2);
  CHECK_EQ(atomic_load(&l.runs), 0);
  for (int i = 0; i < 2; ++i) {
    CHECK_EQ(parts[i].rc, -JMG_ENOMEM);
    CHECK_CONTAINS(parts[i].err.msg, "shard 1 failed: no memory");
    CHECK(parts[i].elapsed_s < 1.0);
  }
}

TEST(rendezvous_missing_participant_times_out_everyone) {
  leader_ctx l;
  memset(&l, 0, sizeof l);
  jmg_rdv_key key = make_key("potrs", 54, fresh_run_id(), 0, 4);
  part parts[3];
  const int shards[3] = {0, 1, 3}; /* shard 2 never comes */
  for (int i = 0; i < 3; ++i) part_init(&parts[i], key, shards[i], &l, 0.2);
  double t0 = now_s();
  run_parts(parts, 3);
  double total = now_s() - t0;
  CHECK_EQ(atomic_load(&l.runs), 0);
  CHECK(total < 2.0);
  CHECK(total >= 0.15);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(parts[i].rc, -JMG_ETIMEDOUT);
    CHECK_EQ(parts[i].err.code, JMG_ETIMEDOUT);
    CHECK_CONTAINS(parts[i].err.msg, "3 of 4 participants arrived");
    CHECK_CONTAINS(parts[i].err.msg, "shard(s) 2 never did");
    CHECK_CONTAINS(parts[i].err.msg, "JAXMG_RENDEZVOUS_TIMEOUT");
  }
  /* The missing one arrives at last, with a long timeout: it fails at once. */
  part late;
  part_init(&late, key, 2, &l, 10.0);
  run_parts(&late, 1);
  CHECK_EQ(late.rc, -JMG_ETIMEDOUT);
  CHECK_CONTAINS(late.err.msg, "shard(s) 2 never did");
  CHECK(late.elapsed_s < 1.0);
  CHECK_EQ(atomic_load(&l.runs), 0);
}

TEST(rendezvous_several_missing_participants_are_all_named) {
  leader_ctx l;
  memset(&l, 0, sizeof l);
  jmg_rdv_key key = make_key("potri", 55, fresh_run_id(), 0, 6);
  part parts[2];
  part_init(&parts[0], key, 1, &l, 0.1);
  part_init(&parts[1], key, 4, &l, 0.1);
  run_parts(parts, 2);
  for (int i = 0; i < 2; ++i) {
    CHECK_EQ(parts[i].rc, -JMG_ETIMEDOUT);
    CHECK_CONTAINS(parts[i].err.msg, "shard(s) 0, 2, 3, 5 never did");
  }
}

TEST(rendezvous_leader_work_longer_than_timeout_does_not_time_out) {
  leader_ctx l;
  memset(&l, 0, sizeof l);
  l.sleep_s = 0.5;
  jmg_rdv_key key = make_key("syevd", 56, fresh_run_id(), 0, 4);
  part parts[4];
  for (int i = 0; i < 4; ++i) part_init(&parts[i], key, i, &l, 0.2);
  run_parts(parts, 4);
  CHECK_EQ(atomic_load(&l.runs), 1);
  for (int i = 0; i < 4; ++i) {
    CHECK_EQ(parts[i].rc, 0);
    CHECK(parts[i].elapsed_s >= 0.45); /* everyone waited for the leader */
  }
}

TEST(rendezvous_duplicate_shard_fails_everyone_without_hanging) {
  leader_ctx l;
  memset(&l, 0, sizeof l);
  jmg_rdv_key key = make_key("potrs", 57, fresh_run_id(), 0, 4);
  part parts[4];
  const int shards[4] = {0, 1, 1, 3}; /* two claim shard 1, none shard 2 */
  for (int i = 0; i < 4; ++i) {
    part_init(&parts[i], key, shards[i], &l, 10.0);
    parts[i].delay_s = 0.01 * i;
  }
  double t0 = now_s();
  run_parts(parts, 4);
  CHECK(now_s() - t0 < 3.0);
  CHECK_EQ(atomic_load(&l.runs), 0);
  for (int i = 0; i < 4; ++i) {
    CHECK_EQ(parts[i].rc, -JMG_EINVAL);
    CHECK_CONTAINS(parts[i].err.msg, "two participants claim shard 1");
    CHECK(parts[i].elapsed_s < 2.0);
  }
}

TEST(rendezvous_shard_out_of_range_is_an_error) {
  leader_ctx l;
  memset(&l, 0, sizeof l);
  int64_t run_id = fresh_run_id();
  const struct {
    int nparts, shard;
  } bad[] = {{4, -1}, {4, 4}, {4, 100}, {0, 0}, {-2, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    jmg_rdv_key key = make_key("potrs", 58, run_id, (int64_t)i, bad[i].nparts);
    part pt;
    part_init(&pt, key, bad[i].shard, &l, 10.0);
    run_parts(&pt, 1);
    CHECK_EQ(pt.rc, -JMG_EINVAL);
    CHECK_CONTAINS(pt.err.msg, "outside");
    CHECK(pt.elapsed_s < 1.0);
    /* abort with a bad shard does nothing (and does not crash). */
    jmg_error why;
    jmg_error_set(&why, JMG_EINVAL, "potrs", "x", "y");
    jmg_rendezvous_threads()->abort(&key, bad[i].shard, &why);
  }
  CHECK_EQ(atomic_load(&l.runs), 0);
}

/* ---- sequence numbers and the timeout -------------------------------------
 */

TEST(rendezvous_next_seq_counts_per_run_id_op_mesh_and_shard) {
  int64_t r1 = fresh_run_id(), r2 = fresh_run_id();
  CHECK_EQ(jmg_rdv_next_seq("potrs", 61, 0, r1), 0);
  CHECK_EQ(jmg_rdv_next_seq("potrs", 61, 0, r1), 1);
  CHECK_EQ(jmg_rdv_next_seq("potrs", 61, 0, r1), 2);
  /* Other shards, meshes and ops count on their own. */
  CHECK_EQ(jmg_rdv_next_seq("potrs", 61, 1, r1), 0);
  CHECK_EQ(jmg_rdv_next_seq("potrs", 62, 0, r1), 0);
  CHECK_EQ(jmg_rdv_next_seq("potri", 61, 0, r1), 0);
  CHECK_EQ(jmg_rdv_next_seq("potrs", 61, 0, r1), 3);
  CHECK_EQ(jmg_rdv_next_seq("potrs", 61, 1, r1), 1);
  /* A new run id starts over; so does going back to the old one. */
  CHECK_EQ(jmg_rdv_next_seq("potrs", 61, 0, r2), 0);
  CHECK_EQ(jmg_rdv_next_seq("potrs", 61, 0, r2), 1);
  CHECK_EQ(jmg_rdv_next_seq("potrs", 61, 1, r1), 2); /* untouched by r2 */
  CHECK_EQ(jmg_rdv_next_seq("potrs", 61, 0, r1), 0);
  CHECK_EQ(jmg_rdv_next_seq("potri", 61, 0, r1), 1);
}

TEST(rendezvous_default_timeout_honours_environment) {
  const char *old = getenv("JAXMG_RENDEZVOUS_TIMEOUT");
  char saved[64] = {0};
  if (old != NULL) snprintf(saved, sizeof saved, "%s", old);

  unsetenv("JAXMG_RENDEZVOUS_TIMEOUT");
  double unset = jmg_rdv_default_timeout();
  setenv("JAXMG_RENDEZVOUS_TIMEOUT", "7.5", 1);
  double seven = jmg_rdv_default_timeout();
  setenv("JAXMG_RENDEZVOUS_TIMEOUT", "0.25", 1);
  double quarter = jmg_rdv_default_timeout();
  setenv("JAXMG_RENDEZVOUS_TIMEOUT", "0", 1);
  double zero = jmg_rdv_default_timeout();
  setenv("JAXMG_RENDEZVOUS_TIMEOUT", "-3", 1);
  double negative = jmg_rdv_default_timeout();
  setenv("JAXMG_RENDEZVOUS_TIMEOUT", "soon", 1);
  double garbage = jmg_rdv_default_timeout();
  setenv("JAXMG_RENDEZVOUS_TIMEOUT", "", 1);
  double empty = jmg_rdv_default_timeout();

  if (old != NULL)
    setenv("JAXMG_RENDEZVOUS_TIMEOUT", saved, 1);
  else
    unsetenv("JAXMG_RENDEZVOUS_TIMEOUT");

  CHECK(unset == 300.0);
  CHECK(seven == 7.5);
  CHECK(quarter == 0.25);
  CHECK(zero == 300.0);
  CHECK(negative == 300.0);
  CHECK(garbage == 300.0);
  CHECK(empty == 300.0);
}

/* ---- asynchronous joins (XLA:CPU's futures) -------------------------------
 */

TEST(rendezvous_async_participants_meet_and_leader_runs_once) {
  enum { N = 6 };
  leader_ctx l;
  memset(&l, 0, sizeof l);
  part parts[N];
  jmg_rdv_key key = make_key("potrs", 71, fresh_run_id(), 0, N);
  for (int i = 0; i < N; ++i) {
    part_init(&parts[i], key, i, &l, 5.0);
    parts[i].async = 1;
    parts[i].delay_s = 0.002 * ((i * 7) % N); /* shard 0 is not first */
  }
  run_parts(parts, N);
  CHECK_EQ(atomic_load(&l.runs), 1);
  CHECK_EQ(atomic_load(&l.order_bad), 0);
  for (int i = 0; i < N; ++i) {
    CHECK_EQ(parts[i].rc, 0);
    CHECK_EQ(atomic_load(&parts[i].done_calls), 1);
  }
  sleep_s(0.05); /* a second done call would show up here */
  for (int i = 0; i < N; ++i) CHECK_EQ(atomic_load(&parts[i].done_calls), 1);
}

TEST(rendezvous_async_and_blocking_participants_meet) {
  enum { N = 4 };
  leader_ctx l;
  memset(&l, 0, sizeof l);
  part parts[N];
  jmg_rdv_key key = make_key("syevd", 72, fresh_run_id(), 0, N);
  for (int i = 0; i < N; ++i) {
    part_init(&parts[i], key, i, &l, 5.0);
    parts[i].async = i % 2;
    parts[i].delay_s = 0.003 * (N - i);
  }
  run_parts(parts, N);
  CHECK_EQ(atomic_load(&l.runs), 1);
  for (int i = 0; i < N; ++i) CHECK_EQ(parts[i].rc, 0);
}

TEST(rendezvous_async_missing_participant_times_out_by_watchdog) {
  enum { N = 4 };
  leader_ctx l;
  memset(&l, 0, sizeof l);
  part parts[N];
  jmg_rdv_key key = make_key("potri", 73, fresh_run_id(), 0, N);
  for (int i = 0; i < N - 1; ++i) {
    part_init(&parts[i], key, i, &l, 0.2);
    parts[i].async = 1;
  }
  run_parts(parts, N - 1); /* shard 3 never comes */
  CHECK_EQ(atomic_load(&l.runs), 0);
  for (int i = 0; i < N - 1; ++i) {
    CHECK_EQ(parts[i].rc, -JMG_ETIMEDOUT);
    CHECK_CONTAINS(parts[i].err.msg, "shard(s) 3 never did");
    CHECK(parts[i].elapsed_s < 3.0);
  }
  /* The late one fails at once, without a done call. */
  part late;
  part_init(&late, key, N - 1, &l, 0.2);
  late.async = 1;
  run_parts(&late, 1);
  CHECK_EQ(late.rc, -JMG_ETIMEDOUT);
  CHECK_EQ(atomic_load(&late.done_calls), 0);
  CHECK(late.elapsed_s < 0.5);
}

TEST(rendezvous_async_abort_and_leader_error_reach_everyone) {
  enum { N = 3 };
  leader_ctx l;
  memset(&l, 0, sizeof l);
  part parts[N];
  jmg_rdv_key key = make_key("potrs", 74, fresh_run_id(), 0, N);
  for (int i = 0; i < N; ++i) {
    part_init(&parts[i], key, i, &l, 5.0);
    parts[i].async = 1;
  }
  parts[2].abort_instead = 1;
  parts[2].delay_s = 0.05;
  jmg_error_set(&parts[2].why, JMG_EINVAL, "potrs", "FFI call frame",
                "bad frame on this one");
  run_parts(parts, N);
  for (int i = 0; i < 2; ++i) {
    CHECK_EQ(parts[i].rc, -JMG_EINVAL);
    CHECK_CONTAINS(parts[i].err.msg, "bad frame on this one");
    CHECK(parts[i].elapsed_s < 2.0);
  }
  leader_ctx bad;
  memset(&bad, 0, sizeof bad);
  bad.fail = 1;
  key = make_key("potrs", 75, fresh_run_id(), 0, N);
  for (int i = 0; i < N; ++i) {
    part_init(&parts[i], key, i, &bad, 5.0);
    parts[i].async = 1;
  }
  run_parts(parts, N);
  CHECK_EQ(atomic_load(&bad.runs), 1);
  for (int i = 0; i < N; ++i) {
    CHECK_EQ(parts[i].rc, -JMG_ELAPACK);
    CHECK_CONTAINS(parts[i].err.msg, "injected leader failure 42");
  }
}

/* ---- the value a call hands to everyone ----------------------------------
 */

TEST(rendezvous_value_reaches_every_participant) {
  enum { N = 6 };
  part parts[N];
  /* Blocking and asynchronous participants, shard 0 blocking; shard 5 joins
   * without a value and still meets the others. */
  leader_ctx l;
  memset(&l, 0, sizeof l);
  l.group = 3;
  l.value_len = 128; /* an NCCL unique id */
  jmg_rdv_key key = make_key("potrs", 81, fresh_run_id(), 0, N);
  for (int i = 0; i < N; ++i) {
    part_init(&parts[i], key, i, &l, 5.0);
    parts[i].async = i % 2;
    parts[i].value_join = i != 5;
    parts[i].delay_s = 0.002 * ((i * 5) % N);
    value_stale(&parts[i].value);
  }
  run_parts(parts, N);
  CHECK_EQ(atomic_load(&l.runs), 1);
  CHECK_EQ(atomic_load(&l.order_bad), 0);
  for (int i = 0; i < N; ++i) {
    CHECK_EQ(parts[i].rc, 0);
    if (i == 5) continue;
    CHECK(value_is(&parts[i].value, 128, 3));
    CHECK_EQ(parts[i].done_value_null, 0);
  }

  /* Shard 0 asynchronous: the leader's fn runs on whichever participant
   * completes the call; a value of the largest size. */
  leader_ctx l2;
  memset(&l2, 0, sizeof l2);
  l2.group = 4;
  l2.value_len = JMG_RDV_MAX_VALUE;
  key = make_key("potrs", 82, fresh_run_id(), 0, N);
  for (int i = 0; i < N; ++i) {
    part_init(&parts[i], key, i, &l2, 5.0);
    parts[i].async = i != 3;
    parts[i].value_join = 1;
    parts[i].delay_s = 0.002 * (N - i); /* shard 0 is not last */
    value_stale(&parts[i].value);
  }
  run_parts(parts, N);
  CHECK_EQ(atomic_load(&l2.runs), 1);
  for (int i = 0; i < N; ++i) {
    CHECK_EQ(parts[i].rc, 0);
    CHECK(value_is(&parts[i].value, JMG_RDV_MAX_VALUE, 4));
  }

  /* Shard 0 joins without a value: everyone else gets an empty one. */
  leader_ctx l3;
  memset(&l3, 0, sizeof l3);
  l3.value_len = 16; /* not used: leader_fn gives no value */
  key = make_key("potrs", 83, fresh_run_id(), 0, 3);
  for (int i = 0; i < 3; ++i) {
    part_init(&parts[i], key, i, &l3, 5.0);
    parts[i].value_join = i != 0;
    parts[i].async = i == 2;
    value_stale(&parts[i].value);
  }
  run_parts(parts, 3);
  CHECK_EQ(atomic_load(&l3.runs), 1);
  for (int i = 1; i < 3; ++i) {
    CHECK_EQ(parts[i].rc, 0);
    CHECK(value_empty(&parts[i].value));
  }
}

/* Runs n value-joining participants of key (odd shards asynchronous), each
 * starting with a stale value; shard `missing` never comes (-1: all come).
 * Checks that each failed with `code`, message containing `msg`, and that
 * nobody received a value. */
static void value_fails_everyone(jmg_rdv_key key, int n, int missing,
                                 leader_ctx *l, double timeout_s, int code,
                                 const char *msg) {
  part parts[8];
  int m = 0;
  for (int i = 0; i < n; ++i) {
    if (i == missing) continue;
    part_init(&parts[m], key, i, l, timeout_s);
    parts[m].async = i % 2;
    parts[m].value_join = 1;
    value_stale(&parts[m].value);
    ++m;
  }
  run_parts(parts, m);
  for (int i = 0; i < m; ++i) {
    CHECK_EQ(parts[i].rc, -code);
    CHECK_CONTAINS(parts[i].err.msg, msg);
    if (parts[i].async) /* done got no value, or (failed to join) no call */
      CHECK(parts[i].done_value_null || atomic_load(&parts[i].done_calls) == 0);
    else
      CHECK(value_empty(&parts[i].value));
  }
}

TEST(rendezvous_value_is_empty_on_every_error) {
  leader_ctx l;
  /* The leader fails. */
  memset(&l, 0, sizeof l);
  l.value_len = 64;
  l.fail = 1;
  value_fails_everyone(make_key("potrs", 84, fresh_run_id(), 0, 4), 4, -1, &l,
                       5.0, JMG_ELAPACK, "injected leader failure 42");
  if (jmg_test_failed) return;
  CHECK_EQ(atomic_load(&l.runs), 1);
  /* The leader's value is larger than a rendezvous hands over. */
  memset(&l, 0, sizeof l);
  l.value_len = JMG_RDV_MAX_VALUE + 1;
  value_fails_everyone(make_key("potrs", 85, fresh_run_id(), 0, 4), 4, -1, &l,
                       5.0, JMG_EINTERNAL, "JMG_RDV_MAX_VALUE");
  if (jmg_test_failed) return;
  /* A participant never comes. */
  memset(&l, 0, sizeof l);
  l.value_len = 64;
  value_fails_everyone(make_key("potrs", 86, fresh_run_id(), 0, 4), 4, 2, &l,
                       0.2, JMG_ETIMEDOUT, "shard(s) 2 never did");
  if (jmg_test_failed) return;
  CHECK_EQ(atomic_load(&l.runs), 0);
  /* A participant aborts before anyone joins. */
  jmg_rdv_key key = make_key("potrs", 87, fresh_run_id(), 0, 4);
  jmg_error why;
  jmg_error_set(&why, JMG_EINVAL, "potrs", "FFI call frame", "bad shard 1");
  jmg_rendezvous_threads()->abort(&key, 1, &why);
  value_fails_everyone(key, 4, 1, &l, 5.0, JMG_EINVAL, "bad shard 1");
  if (jmg_test_failed) return;
  CHECK_EQ(atomic_load(&l.runs), 0);
}
