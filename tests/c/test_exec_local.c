/* The local executor's collective steps (exec/local.h) on host memory, one
 * thread per rank, over the CPU platform's communicator (comm/comm.h,
 * comm/comm_threads.c: the ranks are threads of this process). The GPU
 * tests run these steps over NCCL. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/local.h"
#include "test.h"

#define TC_MAX_RANKS 8

/* A fresh communicator id: one per test case (its ranks are its own). */
typedef struct tc_shared {
  unsigned char id[JMG_COMM_ID_MAX];
} tc_shared;

static tc_shared *tc_new(int ranks) {
  (void)ranks; /* the first open says */
  tc_shared *sh = calloc(1, sizeof *sh);
  jmg_error err;
  jmg_error_clear(&err);
  if (sh != NULL && jmg_threads_comm()->make_id(sh->id, "test", &err) != 0) {
    free(sh);
    return NULL;
  }
  return sh;
}

static void tc_delete(tc_shared *sh) { free(sh); }

/* ---- ranks -------------------------------------------------------------- */

typedef struct rank_job {
  tc_shared *sh;
  int rank, ranks;
  int64_t n, tile;
  double *part; /* n x L, ld n */
  int fail;     /* the rc this rank brings */
  int grid_rows; /* 0: the line */
  int64_t grid_part_rows, grid_part_cols; /* v->a after the body */
  int rc;
  jmg_error err;
  void (*body)(struct rank_job *j, jmg_local_view *v);
} rank_job;

static void *rank_main(void *arg) {
  rank_job *j = arg;
  jmg_local_view v;
  memset(&v, 0, sizeof v);
  v.op = "syevd";
  v.mem = jmg_host_mem();
  v.group.n = 1;
  v.group.device_ctx = &v.device_ctx;
  v.comm_ops = jmg_threads_comm();
  v.rank = j->rank;
  v.ranks = j->ranks;
  jmg_error_clear(&j->err);
  j->rc = v.comm_ops->open(j->sh->id, j->rank, j->ranks, NULL, &v.comm, v.op,
                          &j->err);
  if (j->rc == 0)
    j->rc = jmg_local_perm_init(&v.perm, j->n, j->ranks, j->tile, v.op,
                                &j->err);
  v.grid_rows = j->grid_rows > 1 ? j->grid_rows : 1;
  if (j->rc == 0)
    j->rc = jmg_local_regrid_init(&v.regrid, j->n, j->tile, j->ranks,
                                  v.grid_rows, j->rank, v.op, &j->err);
  if (j->rc != 0) return NULL;
  v.a.rank = j->rank;
  v.a.ranks = j->ranks;
  v.a.grid_rows = 1;
  v.a.grid_cols = j->ranks;
  v.a.n = j->n;
  v.a.mb = v.a.nb = j->tile;
  v.a.dtype = JMG_F64;
  v.a.data = j->part;
  v.a.rows = j->n;
  v.a.cols = j->n / j->ranks;
  v.a.ld = j->n;
  j->body(j, &v);
  j->grid_part_rows = v.a.rows;
  j->grid_part_cols = v.a.cols;
  jmg_local_perm_free(&v.perm);
  jmg_local_regrid_free(&v.regrid);
  return NULL; /* the communicator stays open (comm_threads.c) */
}

static int run_ranks(rank_job *jobs, int ranks) {
  pthread_t t[TC_MAX_RANKS];
  for (int r = 0; r < ranks; ++r)
    if (pthread_create(&t[r], NULL, rank_main, &jobs[r]) != 0) return -1;
  for (int r = 0; r < ranks; ++r) pthread_join(t[r], NULL);
  return 0;
}

/* ---- tests -------------------------------------------------------------- */

static void agree_body(rank_job *j, jmg_local_view *v) {
  jmg_error err;
  jmg_error_clear(&err);
  int rc = 0;
  if (j->fail) rc = jmg_error_set(&err, JMG_ENOMEM, "syevd", "alloc", "mine");
  j->rc = jmg_local_agree(v, rc, "the solver", &err);
  j->err = err;
}

TEST(local_exec_agreement_fails_every_rank_when_one_failed) {
  const int P = 4;
  tc_shared *sh = tc_new(P);
  CHECK(sh != NULL);
  rank_job jobs[4];
  for (int round = 0; round < 2; ++round) {
    memset(jobs, 0, sizeof jobs);
    for (int r = 0; r < P; ++r) {
      jobs[r] = (rank_job){.sh = sh, .rank = r, .ranks = P, .n = 8,
                           .tile = 2, .fail = round == 1 && r == 2,
                           .body = agree_body};
    }
    CHECK_EQ(run_ranks(jobs, P), 0);
    for (int r = 0; r < P; ++r) {
      if (round == 0) {
        CHECK_EQ(jobs[r].rc, 0);
      } else if (r == 2) {
        CHECK_EQ(jobs[r].rc, -JMG_ENOMEM); /* its own error */
        CHECK_CONTAINS(jobs[r].err.msg, "mine");
      } else {
        CHECK_EQ(jobs[r].rc, -JMG_EPEER);
        CHECK_CONTAINS(jobs[r].err.msg, "before the solver");
        CHECK_CONTAINS(jobs[r].err.op, "syevd");
      }
    }
  }
  tc_delete(sh);
}

static void redistribute_body(rank_job *j, jmg_local_view *v) {
  j->rc = jmg_local_redistribute_vectors(v, j->fail, &j->err);
}

/* The engine's answer, simulated: V (n x n, column j the j-th eigenvector
 * of H) in the block-cyclic column layout, rows in H's order; M's
 * eigenvectors are Πᵀ V, wanted contiguous. */
TEST(local_exec_redistribute_vectors_gives_the_contiguous_layout) {
  static const int64_t cases[][3] = {{8, 2, 2},  {12, 3, 2}, {24, 4, 3},
                                     {16, 4, 4}, {32, 8, 2}, {6, 1, 3}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    const int64_t n = cases[c][0], T = cases[c][2];
    const int P = (int)cases[c][1];
    const int64_t L = n / P, q = L / T;
    tc_shared *sh = tc_new(P);
    double *v = malloc((size_t)(n * n) * sizeof *v);
    double *parts = malloc((size_t)(n * n) * sizeof *parts);
    CHECK(sh && v && parts);
    for (int64_t i = 0; i < n * n; ++i) v[i] = (double)i + 0.5;
    rank_job jobs[TC_MAX_RANKS];
    for (int r = 0; r < P; ++r) {
      double *part = parts + (size_t)(r * L * n);
      /* Local column lc is V's column jmg_bc_global(lc, T, r, P). */
      for (int64_t lc = 0; lc < L; ++lc)
        memcpy(part + lc * n, v + jmg_bc_global(lc, T, r, P) * n,
               (size_t)n * sizeof *v);
      jobs[r] = (rank_job){.sh = sh, .rank = r, .ranks = P, .n = n,
                           .tile = T, .part = part,
                           .body = redistribute_body};
    }
    CHECK_EQ(run_ranks(jobs, P), 0);
    for (int r = 0; r < P; ++r) CHECK_EQ(jobs[r].rc, 0);
    /* parts is now Πᵀ V, contiguous: row i of it is row σ⁻¹(i) of V, i.e.
     * V's row k sits at M's row σ(k), σ(k) = src(k / T) T + k % T. */
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k) {
        const int64_t kt = k / T;
        const int64_t sigma = ((kt % P) * q + kt / P) * T + k % T;
        if (parts[sigma + j * n] != v[k + j * n]) {
          TEST_FAIL_AT("n=%lld P=%d T=%lld: column %lld row %lld wrong",
                       (long long)n, P, (long long)T, (long long)j,
                       (long long)k);
          return;
        }
      }
    free(v), free(parts);
    tc_delete(sh);
  }
}

TEST(local_exec_redistribute_after_a_failure_moves_nothing) {
  const int P = 2;
  tc_shared *sh = tc_new(P);
  double parts[8 * 8], before[8 * 8];
  for (int i = 0; i < 64; ++i) parts[i] = before[i] = i;
  rank_job jobs[2];
  for (int r = 0; r < P; ++r)
    jobs[r] = (rank_job){.sh = sh, .rank = r, .ranks = P, .n = 8, .tile = 2,
                         .part = parts + r * 32, .fail = r == 0 ? -JMG_ECUDA : 0,
                         .body = redistribute_body};
  CHECK_EQ(run_ranks(jobs, P), 0);
  CHECK_EQ(jobs[0].rc, -JMG_ECUDA);
  CHECK_EQ(jobs[1].rc, -JMG_EPEER);
  CHECK(memcmp(parts, before, sizeof parts) == 0);
  tc_delete(sh);
}

static void to_grid_body(rank_job *j, jmg_local_view *v) {
  j->rc = jmg_local_to_grid(v, j->fail, &j->err);
}

static void round_trip_body(rank_job *j, jmg_local_view *v) {
  j->rc = jmg_local_to_grid(v, j->fail, &j->err);
  j->rc = jmg_local_from_grid(v, j->rc, 0, &j->err);
}

/* H's line parts (column tile J on rank J % P, all rows) go onto a
 * R x (P / R) grid: each rank's part is then its 2D block-cyclic part of H
 * (column-major rank mapping), and v->a says so; and back. */
TEST(local_exec_grid_moves_give_the_2d_parts_and_back) {
  static const int64_t cases[][4] = {{8, 4, 2, 2}, {24, 6, 3, 2}, {16, 4, 4, 2},
                                     {32, 8, 2, 2}, {12, 2, 2, 3}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    const int64_t n = cases[c][0], T = cases[c][3];
    const int P = (int)cases[c][1], R = (int)cases[c][2], C = P / R;
    const int64_t L = n / P, part = n * L;
    tc_shared *sh = tc_new(P);
    double *h = malloc((size_t)(n * n) * sizeof *h);
    double *parts = malloc((size_t)(n * n) * sizeof *parts);
    CHECK(sh && h && parts);
    for (int64_t i = 0; i < n * n; ++i) h[i] = (double)i - 0.5;
    for (int round = 0; round < 2; ++round) {
      rank_job jobs[TC_MAX_RANKS];
      for (int r = 0; r < P; ++r) {
        for (int64_t lc = 0; lc < L; ++lc)
          memcpy(parts + r * part + lc * n, h + jmg_bc_global(lc, T, r, P) * n,
                 (size_t)n * sizeof *h);
        jobs[r] = (rank_job){.sh = sh, .rank = r, .ranks = P, .n = n,
                             .tile = T, .part = parts + r * part,
                             .grid_rows = R,
                             .body = round ? round_trip_body : to_grid_body};
      }
      CHECK_EQ(run_ranks(jobs, P), 0);
      for (int r = 0; r < P; ++r) {
        CHECK_EQ(jobs[r].rc, 0);
        CHECK_EQ(jobs[r].grid_part_rows, round ? n : n / R);
        CHECK_EQ(jobs[r].grid_part_cols, round ? L : n / C);
        for (int64_t e = 0; e < part; ++e) {
          int64_t i, j;
          if (round) { /* back on the line */
            i = e % n;
            j = jmg_bc_global(e / n, T, r, P);
          } else {
            i = jmg_bc_global(e % (n / R), T, r % R, R);
            j = jmg_bc_global(e / (n / R), T, r / R, C);
          }
          if (parts[r * part + e] != h[i + j * n]) {
            TEST_FAIL_AT("n=%lld P=%d R=%d round %d: rank %d element %lld is "
                         "not H(%lld, %lld)",
                         (long long)n, P, R, round, r, (long long)e,
                         (long long)i, (long long)j);
            return;
          }
        }
      }
    }
    free(h), free(parts);
    tc_delete(sh);
  }
}

TEST(local_exec_grid_move_after_a_failure_moves_nothing_and_fails_all) {
  const int P = 4;
  tc_shared *sh = tc_new(P);
  double parts[8 * 8], before[8 * 8];
  for (int i = 0; i < 64; ++i) parts[i] = before[i] = i;
  rank_job jobs[4];
  for (int r = 0; r < P; ++r)
    jobs[r] = (rank_job){.sh = sh, .rank = r, .ranks = P, .n = 8, .tile = 2,
                         .part = parts + r * 16, .grid_rows = 2,
                         .fail = r == 3 ? -JMG_ENOMEM : 0,
                         .body = to_grid_body};
  CHECK_EQ(run_ranks(jobs, P), 0);
  CHECK_EQ(jobs[3].rc, -JMG_ENOMEM);
  for (int r = 0; r < 3; ++r) {
    CHECK_EQ(jobs[r].rc, -JMG_EPEER);
    CHECK_CONTAINS(jobs[r].err.msg, "the move onto the grid");
    CHECK_EQ(jobs[r].grid_part_rows, 8); /* still on the line */
  }
  CHECK(memcmp(parts, before, sizeof parts) == 0);
  tc_delete(sh);
}
