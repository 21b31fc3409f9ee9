/* engine/local_gather/ beyond lapack-local (test_engine_lapack_local.c runs
 * its numbers): the crossover that chooses the one-device path in the
 * local model (jmg_gather_local_prefers, the gather engine's table read
 * for cusolverdn-local), selection over a table shaped like the CUDA
 * platform's, and the fall back where rank 0 cannot hold the gathered
 * copy: its buffers refused at begin, or the one-device engine's
 * workspace refused in its routine. On host memory over the threads
 * communicator; fake one-device and fallback engines. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "engine/engine.h"
#include "engine/gather/thresholds.h"
#include "engine/local_gather/local_gather.h"
#include "layout/local.h"
#include "mem/mem.h"
#include "test.h"

static jmg_problem local_problem(jmg_op op, jmg_dtype t, int nparts,
                                 int64_t n) {
  return (jmg_problem){.op = op, .nparts = nparts, .nodes = 2, .dtype = t,
                       .n = n, .m = n, .tile = 256};
}

TEST(local_gather_prefers_below_each_row_of_the_gather_table) {
  char why[256];
  int rows = 0;
  for (const jmg_gather_row *r = jmg_gather_rows; r->op != JMG_NUM_OPS; ++r) {
    const jmg_dtype t = r->complex ? JMG_C128 : JMG_F64;
    for (int parts = r->min_parts; parts <= r->max_parts; ++parts) {
      /* The row that decides (rows may overlap: the first wins). */
      if (jmg_gather_row_of(r->op, t, parts) != r) continue;
      /* The local model's own size where the row has one (potri). */
      const int64_t below = r->local_below > 0 ? r->local_below : r->below;
      jmg_problem p = local_problem(r->op, t, parts, below - 1);
      CHECK_EQ(jmg_gather_local_prefers(NULL, &p, why, sizeof why), 1);
      p.n = below;
      CHECK_EQ(jmg_gather_local_prefers(NULL, &p, why, sizeof why), 0);
      CHECK_CONTAINS(why, "several GPUs are faster");
      ++rows;
    }
  }
  CHECK(rows > 0);
}

TEST(local_gather_prefers_sygvd_as_syevd_and_never_qr_or_one_gpu) {
  char why[256];
  const jmg_gather_row *r = jmg_gather_row_of(JMG_OP_SYEVD, JMG_F64, 2);
  CHECK(r != NULL);
  jmg_problem p = local_problem(JMG_OP_SYGVD, JMG_F64, 2, r->below - 1);
  CHECK_EQ(jmg_gather_local_prefers(NULL, &p, why, sizeof why), 1);
  p.n = r->below;
  CHECK_EQ(jmg_gather_local_prefers(NULL, &p, why, sizeof why), 0);
  p = local_problem(JMG_OP_QR, JMG_F64, 2, 512);
  CHECK_EQ(jmg_gather_local_prefers(NULL, &p, why, sizeof why), 0);
  CHECK_CONTAINS(why, "no size measured");
  p = local_problem(JMG_OP_POTRS, JMG_F64, 1, 512);
  CHECK_EQ(jmg_gather_local_prefers(NULL, &p, why, sizeof why), 0);
  CHECK_CONTAINS(why, "one GPU");
  /* More GPUs than any row: the distributed engine. */
  p = local_problem(JMG_OP_POTRS, JMG_F64, 16, 512);
  CHECK_EQ(jmg_gather_local_prefers(NULL, &p, why, sizeof why), 0);
}

/* ---- selection over a table shaped like the CUDA platform's ---------- */

static int fake_leader_potrs(const jmg_engine *e, const jmg_dist_matrix *a,
                             void *b, int64_t nrhs, void *diag, int *info,
                             jmg_error *err) {
  (void)e, (void)a, (void)b, (void)nrhs, (void)diag, (void)err;
  *info = 0;
  return 0;
}

static int fake_local_syevd(const jmg_engine *e, const jmg_local_matrix *a,
                            void *w, int want_vectors, int *info,
                            jmg_error *err) {
  (void)e, (void)a, (void)w, (void)want_vectors, (void)err;
  *info = 0;
  return 0;
}

static const jmg_engine g_leader = {
    .name = "leader",
    .model = JMG_MODEL_LEADER,
    .leader = {.potrs = fake_leader_potrs},
};
static const jmg_engine g_dn_local = {
    .name = "dn-local",
    .model = JMG_MODEL_LOCAL,
    .prefers = jmg_gather_local_prefers,
    .local = {.potrs = jmg_lg_potrs, .syevd = fake_local_syevd,
              .qr = jmg_lg_qr},
};
static const jmg_engine g_mp = {
    .name = "mp",
    .model = JMG_MODEL_LOCAL,
    .local = {.potrs = jmg_lg_potrs, .syevd = fake_local_syevd,
              .qr = jmg_lg_qr},
};
static const jmg_engine *const g_table[] = {&g_leader, &g_dn_local, &g_mp,
                                            NULL};

static const char *chosen(jmg_op op, int nodes, int nparts, int64_t n,
                          const char *named) {
  jmg_config cfg;
  memset(&cfg, 0, sizeof cfg);
  snprintf(cfg.engine, sizeof cfg.engine, "%s", named);
  jmg_problem p = local_problem(op, JMG_F64, nparts, n);
  p.nodes = nodes;
  const jmg_engine *e = NULL;
  jmg_error err;
  jmg_error_clear(&err);
  return jmg_engine_select(g_table, &p, &cfg, &e, &err) == 0 ? e->name : "-";
}

TEST(engine_select_local_model_gathers_below_the_crossover) {
  const jmg_gather_row *potrs = jmg_gather_row_of(JMG_OP_POTRS, JMG_F64, 2);
  const jmg_gather_row *syevd = jmg_gather_row_of(JMG_OP_SYEVD, JMG_F64, 2);
  CHECK(potrs != NULL && syevd != NULL);
  /* One node: the leader model runs potrs whatever N. */
  CHECK_CONTAINS(chosen(JMG_OP_POTRS, 1, 2, 1024, ""), "leader");
  /* Across nodes: one GPU below the crossover, cuSOLVERMp from it on. */
  CHECK_CONTAINS(chosen(JMG_OP_POTRS, 2, 2, potrs->below - 256, ""),
                 "dn-local");
  CHECK_CONTAINS(chosen(JMG_OP_POTRS, 2, 2, potrs->below, ""), "mp");
  CHECK_CONTAINS(chosen(JMG_OP_SYEVD, 1, 2, syevd->below / 2, ""),
                 "dn-local");
  CHECK_CONTAINS(chosen(JMG_OP_SYEVD, 2, 2, syevd->below, ""), "mp");
  /* qr has no row: cuSOLVERMp; 16 GPUs have none: cuSOLVERMp. */
  CHECK_CONTAINS(chosen(JMG_OP_QR, 2, 2, 512, ""), "mp");
  CHECK_CONTAINS(chosen(JMG_OP_POTRS, 2, 16, 512, ""), "mp");
  /* Named: beyond where it is preferred, to measure it there. */
  CHECK_CONTAINS(chosen(JMG_OP_POTRS, 2, 2, potrs->below * 2, "dn-local"),
                 "dn-local");
  CHECK_CONTAINS(chosen(JMG_OP_POTRS, 2, 2, 512, "mp"), "mp");
}

/* ---- falling back where rank 0 is short of memory -------------------- */

#define LG_N 4
#define LG_RANKS 2

/* Host memory whose allocations of a whole matrix or more fail where
 * g_refuse_full is set: rank 0's gathered copy cannot be had. */
static int g_refuse_full;

static int refusing_alloc(const jmg_mem_group *g, int dev, size_t bytes,
                          void **out, jmg_error *err) {
  if (g_refuse_full && bytes >= (size_t)LG_N * LG_N * sizeof(double))
    return jmg_error_set(err, JMG_ENOMEM, NULL, "test allocator",
                         "refused %zu bytes", bytes);
  return jmg_host_mem()->alloc(g, dev, bytes, out, err);
}

static jmg_mem g_refusing;

static const jmg_mem *refusing_mem(void) {
  g_refusing = *jmg_host_mem();
  g_refusing.alloc = refusing_alloc;
  return &g_refusing;
}

/* The one-device engines: one solves (X = 7, diag = 3), one is refused
 * its workspace before writing anything. */
static int solving_potrs(const jmg_engine *e, const jmg_dist_matrix *a,
                         void *b, int64_t nrhs, void *diag, int *info,
                         jmg_error *err) {
  (void)e, (void)err;
  for (int64_t i = 0; i < a->n * nrhs; ++i) ((double *)b)[i] = 7.0;
  for (int64_t i = 0; diag != NULL && i < a->n; ++i) ((double *)diag)[i] = 3.0;
  *info = 0;
  return 0;
}

static int short_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                       int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e, (void)a, (void)b, (void)nrhs, (void)diag, (void)info;
  return jmg_error_set(err, JMG_ENOMEM, "potrs", "test workspace",
                       "refused the workspace");
}

static atomic_int g_fallback_calls;

static int fallback_potrs(const jmg_engine *e, const jmg_local_matrix *a,
                          void *b, int64_t nrhs, void *diag, int *info,
                          jmg_error *err) {
  (void)e, (void)diag, (void)err;
  atomic_fetch_add(&g_fallback_calls, 1);
  for (int64_t i = 0; i < a->n * nrhs; ++i) ((double *)b)[i] = 42.0;
  *info = 0;
  return 0;
}

static const jmg_engine g_solving = {
    .name = "solving", .model = JMG_MODEL_LEADER,
    .leader = {.potrs = solving_potrs}};
static const jmg_engine g_short = {
    .name = "short", .model = JMG_MODEL_LEADER,
    .leader = {.potrs = short_potrs}};
static const jmg_engine g_fallback = {
    .name = "distributed", .model = JMG_MODEL_LOCAL,
    .local = {.potrs = fallback_potrs}};

typedef struct lg_job {
  const unsigned char *id;
  const jmg_engine *e;
  const jmg_mem *mem;
  int rank, rc, info;
  double part[LG_N * LG_N], b[LG_N], diag[LG_N];
  jmg_error err;
} lg_job;

static void *lg_main(void *arg) {
  lg_job *j = arg;
  jmg_error_clear(&j->err);
  jmg_comm *c = NULL;
  const jmg_comm_ops *o = jmg_threads_comm();
  j->rc = o->open(j->id, j->rank, LG_RANKS, NULL, &c, "test", &j->err);
  if (j->rc != 0) return NULL;
  const int64_t cols = LG_N / LG_RANKS;
  jmg_local_matrix m = {.rank = j->rank, .ranks = LG_RANKS, .grid_rows = 1,
                        .grid_cols = LG_RANKS, .comm_ops = o, .comm = c,
                        .n = LG_N, .mb = cols, .nb = cols, .dtype = JMG_F64,
                        .data = j->part, .rows = LG_N, .cols = cols,
                        .ld = LG_N, .mem = j->mem};
  j->info = -99;
  j->rc = j->e->local.potrs(j->e, &m, j->b, 1, j->diag, &j->info, &j->err);
  return NULL;
}

/* Runs potrs on every rank of engine e over mem; 0 or -1. */
static int run_potrs(const jmg_engine *e, const jmg_mem *mem, lg_job *jobs) {
  unsigned char id[JMG_COMM_ID_MAX];
  jmg_error err;
  jmg_error_clear(&err);
  if (jmg_threads_comm()->make_id(id, "test", &err) != 0) return -1;
  atomic_store(&g_fallback_calls, 0);
  pthread_t t[LG_RANKS];
  for (int r = 0; r < LG_RANKS; ++r) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    jobs[r].id = id, jobs[r].e = e, jobs[r].mem = mem, jobs[r].rank = r;
    if (pthread_create(&t[r], NULL, lg_main, &jobs[r]) != 0) return -1;
  }
  for (int r = 0; r < LG_RANKS; ++r) pthread_join(t[r], NULL);
  return 0;
}

static jmg_engine engine_of(const jmg_engine *one, const jmg_engine *fb) {
  return (jmg_engine){.name = "gathering", .model = JMG_MODEL_LOCAL,
                      .local = {.potrs = jmg_lg_potrs}, .on_rank0 = one,
                      .fallback = fb};
}

TEST(local_gather_broadcasts_x_and_the_host_diagonal) {
  const jmg_engine e = engine_of(&g_solving, &g_fallback);
  lg_job jobs[LG_RANKS];
  g_refuse_full = 0;
  CHECK_EQ(run_potrs(&e, jmg_host_mem(), jobs), 0);
  for (int r = 0; r < LG_RANKS; ++r) {
    CHECK_EQ(jobs[r].rc, 0);
    CHECK_EQ(jobs[r].info, 0);
    CHECK(jobs[r].b[LG_N - 1] == 7.0);
    CHECK(jobs[r].diag[LG_N - 1] == 3.0);
  }
  CHECK_EQ(atomic_load(&g_fallback_calls), 0);
}

TEST(local_gather_falls_back_where_rank_0_cannot_hold_the_copy) {
  const jmg_engine e = engine_of(&g_solving, &g_fallback);
  lg_job jobs[LG_RANKS];
  g_refuse_full = 1;
  CHECK_EQ(run_potrs(&e, refusing_mem(), jobs), 0);
  g_refuse_full = 0;
  for (int r = 0; r < LG_RANKS; ++r) {
    CHECK_EQ(jobs[r].rc, 0);
    CHECK_EQ(jobs[r].info, 0);
    CHECK(jobs[r].b[0] == 42.0);
  }
  CHECK_EQ(atomic_load(&g_fallback_calls), LG_RANKS);
}

TEST(local_gather_falls_back_where_the_workspace_is_refused) {
  const jmg_engine e = engine_of(&g_short, &g_fallback);
  lg_job jobs[LG_RANKS];
  g_refuse_full = 0;
  CHECK_EQ(run_potrs(&e, jmg_host_mem(), jobs), 0);
  for (int r = 0; r < LG_RANKS; ++r) {
    CHECK_EQ(jobs[r].rc, 0);
    CHECK(jobs[r].b[0] == 42.0);
  }
  CHECK_EQ(atomic_load(&g_fallback_calls), LG_RANKS);
}

TEST(local_gather_without_a_fallback_the_want_of_memory_is_every_rank_s_error) {
  const jmg_engine e = engine_of(&g_short, NULL);
  lg_job jobs[LG_RANKS];
  g_refuse_full = 0;
  CHECK_EQ(run_potrs(&e, jmg_host_mem(), jobs), 0);
  for (int r = 0; r < LG_RANKS; ++r) {
    CHECK_EQ(jobs[r].rc, -(int)JMG_ENOMEM);
    CHECK_CONTAINS(jobs[r].err.msg, "does not fit on rank 0");
    CHECK_CONTAINS(jobs[r].err.op, "potrs");
  }
  /* Rank 0 says what was refused. */
  CHECK_CONTAINS(jobs[0].err.msg, "refused the workspace");
  CHECK_EQ(atomic_load(&g_fallback_calls), 0);
}
