/* engine/select.c: which engine runs a call, on small fake engine tables. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "test.h"

static int fake_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                      int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e, (void)a, (void)b, (void)nrhs, (void)diag, (void)err;
  *info = 0;
  return 0;
}

static int fake_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                      int want_vectors, int *info, jmg_error *err) {
  (void)e, (void)a, (void)w, (void)want_vectors, (void)err;
  *info = 0;
  return 0;
}

static int fake_local_potri(const jmg_engine *e, const jmg_local_matrix *a,
                            int *info, jmg_error *err) {
  (void)e, (void)a, (void)err;
  *info = 0;
  return 0;
}

/* Refuses tiles wider than 8, like cuSOLVERMg's syevd above 1024. */
static int narrow_tiles(const jmg_engine *e, const jmg_problem *p, char *why,
                        size_t len) {
  (void)e;
  if (p->tile <= 8) return 1;
  snprintf(why, len, "T_A=%lld > 8", (long long)p->tile);
  return 0;
}

/* "first" has potrs only; "narrow" has potrs and syevd up to T_A = 8;
 * "wide" has syevd only; "local" is of the other model, with potri. */
static const jmg_engine g_first = {
    .name = "first",
    .model = JMG_MODEL_LEADER,
    .leader = {.potrs = fake_potrs},
};
static const jmg_engine g_narrow = {
    .name = "narrow",
    .model = JMG_MODEL_LEADER,
    .supports = narrow_tiles,
    .leader = {.potrs = fake_potrs, .syevd = fake_syevd},
};
static const jmg_engine g_wide = {
    .name = "wide",
    .model = JMG_MODEL_LEADER,
    .leader = {.syevd = fake_syevd},
};
static const jmg_engine g_local = {
    .name = "local",
    .model = JMG_MODEL_LOCAL,
    .local = {.potri = fake_local_potri},
};
static const jmg_engine *const g_engines[] = {&g_first, &g_narrow, &g_wide,
                                              &g_local, NULL};

static jmg_problem problem(jmg_op op, int64_t tile) {
  jmg_problem p = {.op = op,
                   .nparts = 4,
                   .nodes = 1,
                   .dtype = JMG_F64,
                   .n = 64,
                   .tile = tile};
  return p;
}

static jmg_config config(const char *engine) {
  jmg_config c;
  memset(&c, 0, sizeof c);
  snprintf(c.engine, sizeof c.engine, "%s", engine);
  return c;
}

TEST(engine_select_takes_the_first_engine_that_supports_the_problem) {
  const jmg_config cfg = config("");
  const jmg_engine *e = NULL;
  jmg_error err;
  jmg_error_clear(&err);
  jmg_problem p = problem(JMG_OP_POTRS, 16);
  CHECK_EQ(jmg_engine_select(g_engines, &p, &cfg, &e, &err), 0);
  CHECK(e == &g_first);
  p = problem(JMG_OP_SYEVD, 8);
  CHECK_EQ(jmg_engine_select(g_engines, &p, &cfg, &e, &err), 0);
  CHECK(e == &g_narrow);
  /* narrow refuses T_A = 16: the next that has syevd runs it. */
  p = problem(JMG_OP_SYEVD, 16);
  CHECK_EQ(jmg_engine_select(g_engines, &p, &cfg, &e, &err), 0);
  CHECK(e == &g_wide);
  p = problem(JMG_OP_POTRI, 16);
  CHECK_EQ(jmg_engine_select(g_engines, &p, &cfg, &e, &err), 0);
  CHECK(e == &g_local);
}

TEST(engine_select_sends_groups_across_nodes_to_the_local_model) {
  const jmg_config cfg = config("");
  const jmg_engine *e = NULL;
  jmg_error err;
  jmg_error_clear(&err);
  /* potri: only the local engine has it, on one node or several. */
  jmg_problem p = problem(JMG_OP_POTRI, 16);
  p.nodes = 3;
  CHECK_EQ(jmg_engine_select(g_engines, &p, &cfg, &e, &err), 0);
  CHECK(e == &g_local);
  /* potrs: the leader engines that run it on one node refuse 2 nodes, and
   * the error says why. */
  p = problem(JMG_OP_POTRS, 16);
  p.nodes = 2;
  CHECK(jmg_engine_select(g_engines, &p, &cfg, &e, &err) < 0);
  CHECK_CONTAINS(err.msg, "spans 2 nodes");
}

TEST(engine_select_honours_jaxmg_engine) {
  const jmg_config cfg = config("narrow");
  const jmg_engine *e = NULL;
  jmg_error err;
  jmg_error_clear(&err);
  /* first would run it, and comes first. */
  jmg_problem p = problem(JMG_OP_POTRS, 4);
  CHECK_EQ(jmg_engine_select(g_engines, &p, &cfg, &e, &err), 0);
  CHECK(e == &g_narrow);
}

TEST(engine_select_unknown_jaxmg_engine_names_the_engines_there_are) {
  const jmg_config cfg = config("cusolvermp");
  const jmg_engine *e = &g_first;
  jmg_error err;
  jmg_error_clear(&err);
  jmg_problem p = problem(JMG_OP_POTRS, 16);
  CHECK_EQ(jmg_engine_select(g_engines, &p, &cfg, &e, &err), -JMG_EINVAL);
  CHECK(e == NULL);
  CHECK_CONTAINS(err.op, "potrs");
  CHECK_CONTAINS(err.call, "JAXMG_ENGINE");
  CHECK_CONTAINS(err.msg, "\"cusolvermp\"");
  CHECK_CONTAINS(err.msg, "first, narrow, wide, local");
}

TEST(engine_select_jaxmg_engine_that_cannot_run_the_call_is_an_error) {
  const jmg_engine *e = NULL;
  jmg_error err;
  jmg_error_clear(&err);
  /* Refused by its supports: no fall back to wide. */
  jmg_config cfg = config("narrow");
  jmg_problem p = problem(JMG_OP_SYEVD, 16);
  CHECK_EQ(jmg_engine_select(g_engines, &p, &cfg, &e, &err), -JMG_EUNSUPPORTED);
  CHECK(e == NULL);
  CHECK_CONTAINS(err.call, "JAXMG_ENGINE");
  CHECK_CONTAINS(err.msg, "T_A=16 > 8");
  CHECK_CONTAINS(err.msg, "first, narrow, wide, local");
  /* Without a routine for the op. */
  jmg_error_clear(&err);
  cfg = config("wide");
  p = problem(JMG_OP_POTRS, 4);
  CHECK_EQ(jmg_engine_select(g_engines, &p, &cfg, &e, &err), -JMG_EUNSUPPORTED);
  CHECK_CONTAINS(err.msg, "has no potrs");
}

TEST(engine_select_without_any_engine_for_the_problem_names_each_reason) {
  static const jmg_engine *const engines[] = {&g_first, &g_narrow, NULL};
  static const jmg_engine *const none[] = {NULL};
  const jmg_config cfg = config("");
  const jmg_engine *e = NULL;
  jmg_error err;
  jmg_error_clear(&err);
  jmg_problem p = problem(JMG_OP_SYEVD, 16);
  CHECK_EQ(jmg_engine_select(engines, &p, &cfg, &e, &err), -JMG_EUNSUPPORTED);
  CHECK(e == NULL);
  CHECK_CONTAINS(err.op, "syevd");
  CHECK_CONTAINS(err.msg, "first: it has no syevd");
  CHECK_CONTAINS(err.msg, "narrow: T_A=16 > 8");
  jmg_error_clear(&err);
  CHECK_EQ(jmg_engine_select(none, &p, &cfg, &e, &err), -JMG_EUNSUPPORTED);
  CHECK_CONTAINS(err.msg, "no engines");
}

TEST(engine_has_looks_at_the_routines_of_the_engines_model) {
  CHECK(jmg_engine_has(&g_narrow, JMG_OP_SYEVD));
  CHECK(!jmg_engine_has(&g_first, JMG_OP_SYEVD));
  CHECK(jmg_engine_has(&g_local, JMG_OP_POTRI));
  CHECK(!jmg_engine_has(&g_local, JMG_OP_POTRS));
  CHECK(!jmg_engine_has(&g_first, JMG_OP_LU_SOLVE));
}

/* Like cuSOLVERDn: a group of one device only. */
static int one_device(const jmg_engine *e, const jmg_problem *p, char *why,
                      size_t len) {
  (void)e;
  if (p->nparts == 1) return 1;
  snprintf(why, len, "%d GPUs: runs on one", p->nparts);
  return 0;
}

/* The CUDA platform's shape: a one-device engine first, then one for any
 * group with cuSOLVERMg's kind of tile limit on syevd. */
static const jmg_engine g_dn = {
    .name = "dn",
    .model = JMG_MODEL_LEADER,
    .supports = one_device,
    .leader = {.potrs = fake_potrs, .syevd = fake_syevd},
};
static const jmg_engine *const g_cuda_like[] = {&g_dn, &g_narrow, NULL};

TEST(engine_select_one_device_engine_first_then_the_group_engine) {
  jmg_config cfg = config("");
  const jmg_engine *e = NULL;
  jmg_error err;
  jmg_error_clear(&err);
  /* One device: the one-device engine, whatever the tile. */
  jmg_problem p = {.op = JMG_OP_SYEVD,
                   .nparts = 1,
                   .nodes = 1,
                   .dtype = JMG_F64,
                   .n = 64,
                   .tile = 64};
  CHECK_EQ(jmg_engine_select(g_cuda_like, &p, &cfg, &e, &err), 0);
  CHECK(e == &g_dn);
  /* Several: the group engine, within its limits. */
  p.nparts = 4;
  p.tile = 8;
  CHECK_EQ(jmg_engine_select(g_cuda_like, &p, &cfg, &e, &err), 0);
  CHECK(e == &g_narrow);
  p.tile = 16;
  CHECK_EQ(jmg_engine_select(g_cuda_like, &p, &cfg, &e, &err),
           -JMG_EUNSUPPORTED);
  CHECK_CONTAINS(err.msg, "dn: 4 GPUs: runs on one");
  CHECK_CONTAINS(err.msg, "narrow: T_A=16 > 8");
  /* JAXMG_ENGINE names the group engine on one device: it runs. */
  jmg_error_clear(&err);
  cfg = config("narrow");
  p.nparts = 1;
  p.tile = 8;
  CHECK_EQ(jmg_engine_select(g_cuda_like, &p, &cfg, &e, &err), 0);
  CHECK(e == &g_narrow);
}

/* JAXMG_ENGINE as a test found it: unset for the test, put back after. */
typedef struct saved_engine {
  int set;
  char value[64];
} saved_engine;

static saved_engine unset_engine(void) {
  saved_engine s = {0, ""};
  const char *v = getenv("JAXMG_ENGINE");
  if (v != NULL) s.set = 1, snprintf(s.value, sizeof s.value, "%s", v);
  unsetenv("JAXMG_ENGINE");
  return s;
}

static void restore_engine(const saved_engine *s) {
  if (s->set)
    setenv("JAXMG_ENGINE", s->value, 1);
  else
    unsetenv("JAXMG_ENGINE");
}

TEST(engine_check_names_the_engine_or_the_reasons) {
  char out[512];
  const saved_engine saved = unset_engine();
  int64_t block = -1;
  CHECK_EQ(jmg_engine_check(g_cuda_like, "syevd", 1, 1, "float64", 0, 64, 64, 0, out,
                            sizeof out, &block),
           1);
  CHECK_CONTAINS(out, "dn");
  CHECK_EQ(block, 64); /* an engine without `block` lays A out in T_A */
  CHECK_EQ(jmg_engine_check(g_cuda_like, "syevd", 4, 1, "complex128", 0, 64, 16, 0, out,
                            sizeof out, &block),
           0);
  CHECK_EQ(block, 0); /* none chosen */
  CHECK_CONTAINS(out, "T_A=16 > 8");
  CHECK_EQ(jmg_engine_check(g_cuda_like, "potri", 4, 1, "float32", 0, 64, 8, 0, out,
                            sizeof out, NULL),
           0);
  CHECK_CONTAINS(out, "has no potri");
  CHECK_EQ(jmg_engine_check(g_cuda_like, "getrf", 1, 1, "float64", 0, 64, 8, 0, out,
                            sizeof out, NULL),
           -1);
  CHECK_EQ(
      jmg_engine_check(g_cuda_like, "potrs", 1, 1, "int8", 0, 64, 8, 0, out, sizeof out, NULL),
      -1);
  /* JAXMG_ENGINE is read at the check, as at the call. */
  setenv("JAXMG_ENGINE", "narrow", 1);
  CHECK_EQ(jmg_engine_check(g_cuda_like, "syevd", 1, 1, "float64", 0, 64, 16, 0, out,
                            sizeof out, NULL),
           0);
  CHECK_CONTAINS(out, "JAXMG_ENGINE");
  CHECK_EQ(jmg_engine_check(g_cuda_like, "syevd", 1, 1, "float64", 0, 64, 8, 0, out,
                            sizeof out, NULL),
           1);
  CHECK_CONTAINS(out, "narrow");
  restore_engine(&saved);
}

/* A workspace query that answers from the problem (as cuSOLVERDn's asks its
 * library): n * n * 3 bytes for potrs, and no query for syevd. */
static int fake_workspace(const jmg_engine *e, const jmg_problem *p,
                          const jmg_workspace_query *q, size_t *bytes,
                          jmg_error *err) {
  (void)e;
  if (p->op != JMG_OP_POTRS)
    return jmg_error_set(err, JMG_EUNSUPPORTED, jmg_op_name(p->op), "fake",
                         "not asked ahead");
  *bytes = (size_t)(p->n * p->n * 3 + q->nrhs);
  return 0;
}

static const jmg_engine g_dn_ws = {
    .name = "dn_ws",
    .model = JMG_MODEL_LEADER,
    .supports = one_device,
    .workspace = fake_workspace,
    .leader = {.potrs = fake_potrs, .syevd = fake_syevd},
};
static const jmg_engine *const g_ws_like[] = {&g_dn_ws, &g_narrow, NULL};

TEST(engine_workspace_asks_the_chosen_engine_or_says_why_not) {
  char out[512];
  size_t bytes = 0;
  const jmg_workspace_query q = {.nrhs = 2, .want_vectors = 1};
  const saved_engine saved = unset_engine();
  /* The chosen engine's answer, and its name. */
  CHECK_EQ(jmg_engine_workspace(g_ws_like, "potrs", 1, 1, "float64", 0, 64, 64, 0, &q,
                                &bytes, out, sizeof out),
           1);
  CHECK_EQ(bytes, (size_t)(64 * 64 * 3 + 2));
  CHECK_CONTAINS(out, "dn_ws");
  /* Its own refusal to tell: 0, naming the engine and why. */
  CHECK_EQ(jmg_engine_workspace(g_ws_like, "syevd", 1, 1, "float64", 0, 64, 64, 0, &q,
                                &bytes, out, sizeof out),
           0);
  CHECK_CONTAINS(out, "dn_ws");
  CHECK_CONTAINS(out, "not asked ahead");
  /* An engine without a query (several devices: narrow): 0, and why. */
  CHECK_EQ(jmg_engine_workspace(g_ws_like, "potrs", 4, 1, "float64", 0, 64, 8, 0, &q,
                                &bytes, out, sizeof out),
           0);
  CHECK_CONTAINS(out, "narrow: the engine cannot tell");
  /* No engine for the problem, or an unknown op: -1 and the reasons. */
  CHECK_EQ(jmg_engine_workspace(g_ws_like, "syevd", 4, 1, "float64", 0, 64, 16, 0, &q,
                                &bytes, out, sizeof out),
           -1);
  CHECK_CONTAINS(out, "T_A=16 > 8");
  CHECK_EQ(jmg_engine_workspace(g_ws_like, "getrf", 1, 1, "float64", 0, 64, 8, 0, &q,
                                &bytes, out, sizeof out),
           -1);
  restore_engine(&saved);
}

/* ---- the gather engine's table and its place in the CUDA list ------------*/

#include "engine/gather/thresholds.h"

TEST(gather_thresholds_one_row_per_case_with_its_source) {
  static const jmg_op ops[] = {JMG_OP_POTRS, JMG_OP_POTRI, JMG_OP_SYEVD,
                               JMG_OP_LU_SOLVE};
  static const jmg_dtype dtypes[] = {JMG_F32, JMG_F64, JMG_C64, JMG_C128};
  /* Every op and dtype on 2 to 4 GPUs has exactly one row; 1 GPU and more
   * than 4 (nothing measured) have none. */
  for (size_t o = 0; o < 4; ++o)
    for (size_t t = 0; t < 4; ++t)
      for (int parts = 1; parts <= 9; ++parts) {
        const jmg_gather_row *r = jmg_gather_row_of(ops[o], dtypes[t], parts);
        int matches = 0;
        for (const jmg_gather_row *q = jmg_gather_rows; q->op != JMG_NUM_OPS;
             ++q)
          matches += q->op == ops[o] &&
                     q->complex == jmg_dtype_is_complex(dtypes[t]) &&
                     parts >= q->min_parts && parts <= q->max_parts;
        if (parts >= 2 && parts <= 4) {
          CHECK(r != NULL);
          CHECK_EQ(matches, 1);
        } else {
          CHECK(r == NULL);
          CHECK_EQ(matches, 0);
        }
      }
  for (const jmg_gather_row *q = jmg_gather_rows; q->op != JMG_NUM_OPS; ++q) {
    CHECK(q->min_parts >= 2 && q->min_parts <= q->max_parts);
    CHECK(q->below >= 4096 && q->below <= 65536);
    CHECK(q->source != NULL && strlen(q->source) > 20);
    /* A guess says so. */
    if (!q->measured) CHECK_CONTAINS(q->source, "guess");
  }
}

TEST(gather_thresholds_hold_the_measured_sizes) {
  /* bench/results/2026-11-21-h200x4 and DESIGN.md (thresholds.c). */
  CHECK_EQ(jmg_gather_row_of(JMG_OP_POTRS, JMG_F64, 4)->below, 16384);
  CHECK_EQ(jmg_gather_row_of(JMG_OP_POTRS, JMG_F32, 2)->below, 16384);
  CHECK(jmg_gather_row_of(JMG_OP_POTRS, JMG_F64, 4)->measured);
  CHECK_EQ(jmg_gather_row_of(JMG_OP_SYEVD, JMG_F64, 4)->below, 32768);
  CHECK(jmg_gather_row_of(JMG_OP_SYEVD, JMG_F64, 4)->measured);
  CHECK(!jmg_gather_row_of(JMG_OP_SYEVD, JMG_F64, 2)->measured);
  /* potri: the tiled inverse wins from 8192 on 2 GPUs and 16384 on 4
   * (bench/results/2026-11-28-s20-h200x4-scaling); the local model keeps
   * cuSOLVERMp's crossovers (2026-11-27-s17 and -h200x4-scaling). */
  CHECK_EQ(jmg_gather_row_of(JMG_OP_POTRI, JMG_F64, 2)->below, 8192);
  CHECK_EQ(jmg_gather_row_of(JMG_OP_POTRI, JMG_F64, 4)->below, 8192);
  CHECK_EQ(jmg_gather_row_of(JMG_OP_POTRI, JMG_F64, 2)->local_below, 65536);
  CHECK_EQ(jmg_gather_row_of(JMG_OP_POTRI, JMG_F64, 4)->local_below, 32768);
  CHECK_EQ(jmg_gather_row_of(JMG_OP_POTRI, JMG_C128, 4)->local_below, 32768);
  CHECK(jmg_gather_row_of(JMG_OP_LU_SOLVE, JMG_F64, 4)->measured);
  CHECK_EQ(jmg_gather_row_of(JMG_OP_LU_SOLVE, JMG_F64, 2)->below, 32768);
  CHECK(!jmg_gather_row_of(JMG_OP_LU_SOLVE, JMG_C64, 2)->measured);
  CHECK(!jmg_gather_row_of(JMG_OP_POTRS, JMG_C128, 4)->measured);
}

TEST(gather_prefers_small_problems_on_several_devices_only) {
  char why[160];
  jmg_problem p = {.op = JMG_OP_POTRS,
                   .nparts = 4,
                   .nodes = 1,
                   .dtype = JMG_F64,
                   .n = 16383,
                   .tile = 1024};
  CHECK(jmg_gather_prefers(NULL, &p, why, sizeof why));
  p.n = 16384;
  CHECK(!jmg_gather_prefers(NULL, &p, why, sizeof why));
  CHECK_CONTAINS(why, "N=16384 >= 16384");
  CHECK_CONTAINS(why, "thresholds.c");
  p.n = 1024;
  p.nparts = 1;
  CHECK(!jmg_gather_prefers(NULL, &p, why, sizeof why));
  CHECK_CONTAINS(why, "one GPU");
  p.nparts = 8;
  CHECK(!jmg_gather_prefers(NULL, &p, why, sizeof why));
  CHECK_CONTAINS(why, "no size measured for potrs float64 on 8 GPUs");
}

/* Like the gather engine: several devices, whatever the distributed engine
 * it falls back on supports (that is judged in the call, where the copy does
 * not fit), preferred by the real table. */
static int several_devices(const jmg_engine *e, const jmg_problem *p, char *why,
                           size_t len) {
  (void)e;
  if (p->nparts < 2) {
    snprintf(why, len, "one GPU: nothing to gather");
    return 0;
  }
  return 1;
}

static const jmg_engine g_gather = {
    .name = "gather",
    .model = JMG_MODEL_LEADER,
    .supports = several_devices,
    .prefers = jmg_gather_prefers,
    .leader = {.potrs = fake_potrs, .syevd = fake_syevd},
};
/* The CUDA list's order: one device, gather, the distributed engine. */
static const jmg_engine *const g_cuda_gather[] = {&g_dn, &g_gather, &g_narrow,
                                                  NULL};

static const jmg_engine *chosen(const char *engine, jmg_op op, int nparts,
                                int64_t n, int64_t tile, jmg_error *err) {
  const jmg_config cfg = config(engine);
  const jmg_engine *e = NULL;
  jmg_problem p = {.op = op,
                   .nparts = nparts,
                   .nodes = 1,
                   .dtype = JMG_F64,
                   .n = n,
                   .tile = tile};
  jmg_error_clear(err);
  if (jmg_engine_select(g_cuda_gather, &p, &cfg, &e, err) != 0) return NULL;
  return e;
}

TEST(engine_select_gathers_small_problems_on_several_devices) {
  jmg_error err;
  /* One device: the one-device engine at every size. */
  CHECK(chosen("", JMG_OP_POTRS, 1, 1024, 8, &err) == &g_dn);
  CHECK(chosen("", JMG_OP_POTRS, 1, 65536, 8, &err) == &g_dn);
  /* Several, below the table's size: gathered; from it on: distributed. */
  CHECK(chosen("", JMG_OP_POTRS, 4, 8192, 8, &err) == &g_gather);
  CHECK(chosen("", JMG_OP_POTRS, 2, 16376, 8, &err) == &g_gather);
  CHECK(chosen("", JMG_OP_POTRS, 4, 16384, 8, &err) == &g_narrow);
  CHECK(chosen("", JMG_OP_SYEVD, 4, 16384, 8, &err) == &g_gather);
  CHECK(chosen("", JMG_OP_SYEVD, 4, 32768, 8, &err) == &g_narrow);
  /* More devices than the table has rows for: distributed. */
  CHECK(chosen("", JMG_OP_POTRS, 8, 1024, 8, &err) == &g_narrow);
  /* A tile the distributed engine refuses: gathered all the same below the
   * table's size (cuSOLVERMg's syevd and T_A > 1024 went to cuSOLVERMp
   * otherwise, at a third of one GPU's speed); from the size on no engine
   * runs it, and the error names both reasons. */
  CHECK(chosen("", JMG_OP_SYEVD, 4, 4096, 16, &err) == &g_gather);
  CHECK(chosen("", JMG_OP_SYEVD, 4, 32768, 16, &err) == NULL);
  CHECK_CONTAINS(err.msg, "gather: N=32768 >= 32768");
  CHECK_CONTAINS(err.msg, "narrow: T_A=16 > 8");
  /* JAXMG_ENGINE forces either, below and above the table's size. */
  CHECK(chosen("narrow", JMG_OP_POTRS, 4, 1024, 8, &err) == &g_narrow);
  CHECK(chosen("gather", JMG_OP_POTRS, 4, 65536, 8, &err) == &g_gather);
  CHECK(chosen("gather", JMG_OP_POTRS, 1, 1024, 8, &err) == NULL);
  CHECK_CONTAINS(err.msg, "one GPU: nothing to gather");
  /* Groups across nodes: no leader engine, the gather engine neither. */
  const jmg_config cfg = config("");
  const jmg_engine *e = NULL;
  jmg_problem p = {.op = JMG_OP_POTRS,
                   .nparts = 4,
                   .nodes = 2,
                   .dtype = JMG_F64,
                   .n = 1024,
                   .tile = 8};
  jmg_error_clear(&err);
  CHECK(jmg_engine_select(g_cuda_gather, &p, &cfg, &e, &err) < 0);
  CHECK_CONTAINS(err.msg, "gather: the group spans 2 nodes");
}

TEST(engine_check_names_the_gather_engine_where_it_runs) {
  char out[512];
  const saved_engine saved = unset_engine();
  CHECK_EQ(jmg_engine_check(g_cuda_gather, "potrs", 4, 1, "float64", 0, 8192, 8, 0,
                            out, sizeof out, NULL),
           1);
  CHECK_EQ(strcmp(out, "gather"), 0);
  CHECK_EQ(jmg_engine_check(g_cuda_gather, "potrs", 4, 1, "float64", 0, 16384, 8, 0,
                            out, sizeof out, NULL),
           1);
  CHECK_EQ(strcmp(out, "narrow"), 0);
  /* complex: a smaller size (a guess, thresholds.c). */
  CHECK_EQ(jmg_engine_check(g_cuda_gather, "potrs", 4, 1, "complex128", 0, 8192,
                            8, 0, out, sizeof out, NULL),
           1);
  CHECK_EQ(strcmp(out, "narrow"), 0);
  setenv("JAXMG_ENGINE", "gather", 1);
  CHECK_EQ(jmg_engine_check(g_cuda_gather, "potrs", 4, 1, "float64", 0, 16384, 8, 0,
                            out, sizeof out, NULL),
           1);
  CHECK_EQ(strcmp(out, "gather"), 0);
  restore_engine(&saved);
}

/* ---- A's rows M: carried from the check to the engines' limits ----------*/

/* Refuses qr where M * N passes 1000, naming both (as cuSOLVERDn's orgqr
 * limit does with INT_MAX); a workspace of M * N bytes. */
static int fake_qr(const jmg_engine *e, const jmg_dist_matrix *a,
                   const jmg_dist_matrix *rt, int *info, jmg_error *err) {
  (void)e, (void)a, (void)rt, (void)err;
  *info = 0;
  return 0;
}

static int small_qr(const jmg_engine *e, const jmg_problem *p, char *why,
                    size_t len) {
  (void)e;
  if (jmg_problem_rows(p) * p->n <= 1000) return 1;
  snprintf(why, len, "qr of a %lld x %lld A: M * N past 1000",
           (long long)jmg_problem_rows(p), (long long)p->n);
  return 0;
}

static int rows_workspace(const jmg_engine *e, const jmg_problem *p,
                          const jmg_workspace_query *q, size_t *bytes,
                          jmg_error *err) {
  (void)e, (void)q, (void)err;
  *bytes = (size_t)(jmg_problem_rows(p) * p->n);
  return 0;
}

static const jmg_engine g_small_qr = {
    .name = "small_qr",
    .model = JMG_MODEL_LEADER,
    .supports = small_qr,
    .workspace = rows_workspace,
    .leader = {.potrs = fake_potrs, .qr = fake_qr},
};
static const jmg_engine *const g_qr_like[] = {&g_small_qr, NULL};

TEST(engine_check_carries_a_s_rows_to_the_engines_limits) {
  char out[512];
  const saved_engine saved = unset_engine();
  /* 100 x 10 fits; 101 x 10 does not, though N alone would. */
  CHECK_EQ(jmg_engine_check(g_qr_like, "qr", 1, 1, "float32", 100, 10, 10, 0, out,
                            sizeof out, NULL),
           1);
  CHECK_EQ(strcmp(out, "small_qr"), 0);
  CHECK_EQ(jmg_engine_check(g_qr_like, "qr", 1, 1, "float32", 101, 10, 10, 0, out,
                            sizeof out, NULL),
           0);
  CHECK_CONTAINS(out, "no engine runs qr float32 M=101 N=10 T_A=10");
  CHECK_CONTAINS(out, "small_qr: qr of a 101 x 10 A: M * N past 1000");
  /* M = 0 reads as N: a square problem. */
  CHECK_EQ(jmg_engine_check(g_qr_like, "qr", 1, 1, "float32", 0, 32, 8, 0, out,
                            sizeof out, NULL),
           0);
  CHECK_CONTAINS(out, "qr of a 32 x 32 A");
  /* A square op takes M = 0 or N only; a negative M is nobody's. */
  CHECK_EQ(jmg_engine_check(g_qr_like, "potrs", 1, 1, "float64", 10, 10, 10, 0,
                            out, sizeof out, NULL),
           1);
  CHECK_EQ(jmg_engine_check(g_qr_like, "potrs", 1, 1, "float64", 20, 10, 10, 0,
                            out, sizeof out, NULL),
           -1);
  CHECK_CONTAINS(out, "potrs takes a square A: M=20 for N=10");
  CHECK_EQ(jmg_engine_check(g_qr_like, "qr", 1, 1, "float64", -1, 10, 10, 0, out,
                            sizeof out, NULL),
           -1);
  /* JAXMG_ENGINE's refusal names M too. */
  setenv("JAXMG_ENGINE", "small_qr", 1);
  CHECK_EQ(jmg_engine_check(g_qr_like, "qr", 1, 1, "float32", 101, 10, 10, 0, out,
                            sizeof out, NULL),
           0);
  CHECK_CONTAINS(out, "cannot run qr float32 M=101 N=10 T_A=10 on 1 devices");
  /* The workspace query gets the same problem: M rows. */
  unsetenv("JAXMG_ENGINE");
  size_t bytes = 0;
  const jmg_workspace_query q = {.nrhs = 1, .want_vectors = 0};
  CHECK_EQ(jmg_engine_workspace(g_qr_like, "qr", 1, 1, "float32", 50, 10, 10, 0,
                                &q, &bytes, out, sizeof out),
           1);
  CHECK_EQ(bytes, (size_t)500);
  CHECK_EQ(jmg_engine_workspace(g_qr_like, "qr", 1, 1, "float32", 0, 10, 10, 0,
                                &q, &bytes, out, sizeof out),
           1);
  CHECK_EQ(bytes, (size_t)100);
  CHECK_EQ(jmg_engine_workspace(g_qr_like, "qr", 1, 1, "float32", 101, 10, 10, 0,
                                &q, &bytes, out, sizeof out),
           -1);
  CHECK_CONTAINS(out, "M * N past 1000");
  restore_engine(&saved);
}

/* The CPU library's export (ffi/cpu_targets.c), over its real engines. */
int jaxmg_engine_check_cpu(const char *op, int nparts, int nodes,
                           const char *dtype, int64_t m, int64_t n,
                           int64_t tile, int precision, char *out, size_t len,
                           int64_t *block);

TEST(cpu_engines_refuse_an_a_past_lapack_s_int_before_a_call) {
  char out[1024];
  const saved_engine saved = unset_engine();
  const int64_t past = (int64_t)INT32_MAX + 5; /* divisible by 4 */
  CHECK_EQ(jaxmg_engine_check_cpu("qr", 4, 1, "float32", (int64_t)INT32_MAX - 3,
                                  4, 4, 0, out, sizeof out, NULL),
           1);
  CHECK_EQ(strcmp(out, "lapack"), 0);
  static const char *const ops[] = {"qr", "gesvd"};
  for (int i = 0; i < 2; ++i) {
    CHECK_EQ(jaxmg_engine_check_cpu(ops[i], 4, 1, "float32", past, 4, 4, 0, out,
                                    sizeof out, NULL),
             0);
    CHECK_CONTAINS(out, "M=2147483652 N=4");
    CHECK_CONTAINS(out, "a 2147483652 x 4 A: M and N must fit LAPACK's "
                        "32-bit int (at most 2147483647)");
  }
  /* lapack-local (named) has the same limit. */
  setenv("JAXMG_ENGINE", "lapack-local", 1);
  CHECK_EQ(jaxmg_engine_check_cpu("qr", 4, 1, "float64", past, 4, 4, 0, out,
                                  sizeof out, NULL),
           0);
  CHECK_CONTAINS(out, "lapack-local");
  CHECK_CONTAINS(out, "qr of a 2147483652 x 4 A: M and N must fit");
  CHECK_EQ(jaxmg_engine_check_cpu("qr", 4, 1, "float64", 64, 4, 4, 0, out,
                                  sizeof out, NULL),
           1);
  restore_engine(&saved);
}
