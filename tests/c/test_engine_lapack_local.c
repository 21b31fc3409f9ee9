/* engine lapack-local (engine/lapack_local/) on host memory: one thread per
 * rank over the threads communicator, each holding its 2D block-cyclic part
 * of A (jmg_local_matrix) on 1 x P, R x C and R x 1 grids, ragged parts
 * included (N not a multiple of the blocks). LAPACK is the system's
 * (liblapack.so.3, opened here and registered like SciPy's in Python); where
 * it is absent the tests say so and check nothing. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "engine/engine.h"
#include "engine/lapack/table.h"
#include "layout/local.h"
#include "test.h"
#include "test_lapack.h"

#define MAX_RANKS 8

/* Registers the routines each time: the runner forgets them between tests. */
static int have_lapack(void) {
  static const char *const names[] = {"dpotrf", "dpotrs", "dpotri", "dsyevd",
                                      "dgetrf", "dgetrs", "spotrf", "spotrs",
                                      "sgetrf", "sgetrs"};
  return jmg_test_lapack_register(names, 10);
}

typedef enum { OP_POTRS, OP_POTRI, OP_SYEVD, OP_LU_T } ll_op;

typedef struct ll_job {
  const unsigned char *id;
  ll_op op;
  int rank, ranks, R;
  int64_t n, mb;
  const double *a; /* the whole matrix (read-only), n x n */
  double *part;    /* this rank's, ld rows */
  int64_t rows, cols;
  double *b;    /* n x nrhs, this rank's copy */
  double *diag; /* n, this rank's */
  double *w;    /* n */
  int64_t nrhs;
  int lie;   /* hands the engine a wrong part size */
  int mixed; /* potrs, lu_solve: precision "mixed" */
  int info, rc;
  jmg_error err;
} ll_job;

static void *ll_main(void *arg) {
  ll_job *j = arg;
  jmg_error_clear(&j->err);
  jmg_comm *c = NULL;
  const jmg_comm_ops *o = jmg_threads_comm();
  j->rc = o->open(j->id, j->rank, j->ranks, NULL, &c, "test", &j->err);
  if (j->rc != 0) return NULL;
  jmg_local_matrix m = {.rank = j->rank,
                        .ranks = j->ranks,
                        .grid_rows = j->R,
                        .grid_cols = j->ranks / j->R,
                        .comm_ops = o,
                        .comm = c,
                        .n = j->n,
                        .mb = j->mb,
                        .nb = j->mb,
                        .dtype = JMG_F64,
                        .data = j->part,
                        .rows = j->rows + (j->lie ? 1 : 0),
                        .cols = j->cols,
                        .ld = j->rows + (j->lie ? 1 : 0)};
  const jmg_engine *e = &jmg_lapack_local_engine;
  j->info = -99;
  switch (j->op) {
    case OP_POTRS:
      j->rc = j->mixed ? e->local.potrs_mixed(e, &m, j->b, j->nrhs, &j->info,
                                              &j->err)
                       : e->local.potrs(e, &m, j->b, j->nrhs, j->diag,
                                        &j->info, &j->err);
      break;
    case OP_POTRI:
      j->rc = e->local.potri(e, &m, &j->info, &j->err);
      break;
    case OP_SYEVD:
      j->rc = e->local.syevd(e, &m, j->w, 1, &j->info, &j->err);
      break;
    case OP_LU_T:
      j->rc = j->mixed ? e->local.lu_solve_mixed(e, &m, j->b, j->nrhs, 1,
                                                 &j->info, &j->err)
                       : e->local.lu_solve(e, &m, j->b, j->nrhs, 1, &j->info,
                                           &j->err);
      break;
  }
  return NULL;
}

/* Between the whole matrix and rank r's 2D block-cyclic part. */
static void move_part(double *whole, double *part, int64_t n, int64_t mb,
                      int r, int R, int C, int to_part) {
  const int64_t rows = jmg_bc_count(n, mb, r % R, R);
  const int64_t cols = jmg_bc_count(n, mb, r / R, C);
  for (int64_t lc = 0; lc < cols; ++lc)
    for (int64_t lr = 0; lr < rows; ++lr) {
      const int64_t i = jmg_bc_global(lr, mb, r % R, R);
      const int64_t j = jmg_bc_global(lc, mb, r / R, C);
      if (to_part)
        part[lr + lc * rows] = whole[i + j * n];
      else
        whole[i + j * n] = part[lr + lc * rows];
    }
}

typedef struct ll_case {
  int64_t n, mb;
  int P, R;
} ll_case;

static const ll_case g_cases[] = {{12, 3, 4, 1}, {12, 2, 4, 2}, {10, 3, 4, 2},
                                  {16, 4, 4, 4}, {9, 2, 2, 2},  {7, 3, 2, 1},
                                  {5, 2, 1, 1}};

/* A well-conditioned SPD matrix, or a general one. */
static void fill(double *a, int64_t n, int spd, unsigned seed) {
  for (int64_t i = 0; i < n * n; ++i) {
    seed = seed * 1103515245u + 12345u;
    a[i] = ((double)(seed >> 8) / 16777216.0) - 0.5;
  }
  if (spd) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < i; ++j) a[j + i * n] = a[i + j * n];
    for (int64_t i = 0; i < n; ++i) a[i + i * n] += (double)n;
  }
}

/* Runs op on every rank of case k; the parts come from a. */
static int run_case(const ll_case *k, ll_op op, const double *a, double *parts,
                    double *bs, double *diags, double *ws, int64_t nrhs,
                    int lie_rank, int mixed, ll_job *jobs) {
  unsigned char id[JMG_COMM_ID_MAX];
  jmg_error err;
  jmg_error_clear(&err);
  if (jmg_threads_comm()->make_id(id, "test", &err) != 0) return -1;
  const int C = k->P / k->R;
  int64_t off = 0;
  for (int r = 0; r < k->P; ++r) {
    const int64_t rows = jmg_bc_count(k->n, k->mb, r % k->R, k->R);
    const int64_t cols = jmg_bc_count(k->n, k->mb, r / k->R, C);
    move_part((double *)a, parts + off, k->n, k->mb, r, k->R, C, 1);
    jobs[r] = (ll_job){.id = id, .op = op, .rank = r, .ranks = k->P,
                       .R = k->R, .n = k->n, .mb = k->mb, .a = a,
                       .part = parts + off, .rows = rows, .cols = cols,
                       .b = bs + (size_t)(r * k->n * nrhs),
                       .diag = diags + r * k->n, .w = ws + r * k->n,
                       .nrhs = nrhs, .lie = r == lie_rank, .mixed = mixed};
    off += rows * cols;
  }
  pthread_t t[MAX_RANKS];
  for (int r = 0; r < k->P; ++r)
    if (pthread_create(&t[r], NULL, ll_main, &jobs[r]) != 0) return -1;
  for (int r = 0; r < k->P; ++r) pthread_join(t[r], NULL);
  return 0;
}

/* The parts back into a whole matrix. */
static void assemble(const ll_case *k, const double *parts, double *whole) {
  int64_t off = 0;
  const int C = k->P / k->R;
  for (int r = 0; r < k->P; ++r) {
    move_part(whole, (double *)parts + off, k->n, k->mb, r, k->R, C, 0);
    off += jmg_bc_count(k->n, k->mb, r % k->R, k->R) *
           jmg_bc_count(k->n, k->mb, r / k->R, C);
  }
}

typedef struct buffers {
  double *a, *parts, *bs, *diags, *ws, *whole;
} buffers;

static int take(buffers *m, int64_t n, int64_t nrhs) {
  m->a = calloc((size_t)(n * n), sizeof(double));
  m->parts = calloc((size_t)(n * n), sizeof(double));
  m->whole = calloc((size_t)(n * n), sizeof(double));
  m->bs = calloc((size_t)(MAX_RANKS * n * nrhs), sizeof(double));
  m->diags = calloc((size_t)(MAX_RANKS * n), sizeof(double));
  m->ws = calloc((size_t)(MAX_RANKS * n), sizeof(double));
  return m->a && m->parts && m->whole && m->bs && m->diags && m->ws;
}

static void give(buffers *m) {
  free(m->a), free(m->parts), free(m->whole), free(m->bs), free(m->diags),
      free(m->ws);
}

/* Both solves, exact and mixed (a float32 factor refined on rank 0's
 * gathered A: the same residual bound). */
TEST(lapack_local_potrs_and_transposed_lu_solve_give_x_on_every_rank) {
  NEED_LAPACK(have_lapack());
  const int64_t nrhs = 2;
  for (size_t ci = 0; ci < sizeof g_cases / sizeof g_cases[0]; ++ci) {
    const ll_case *k = &g_cases[ci];
    const int64_t n = k->n;
    for (int v = 0; v < 4; ++v) {
      const int lu = v & 1, mixed = v >> 1;
      buffers m;
      CHECK(take(&m, n, nrhs));
      fill(m.a, n, !lu, (unsigned)(ci * 7 + 1));
      double b[64];
      for (int64_t i = 0; i < n * nrhs; ++i) b[i] = (double)(i % 5) - 1.5;
      for (int r = 0; r < k->P; ++r)
        memcpy(m.bs + r * n * nrhs, b, (size_t)(n * nrhs) * sizeof *b);
      ll_job jobs[MAX_RANKS];
      CHECK_EQ(run_case(k, lu ? OP_LU_T : OP_POTRS, m.a, m.parts, m.bs,
                        m.diags, m.ws, nrhs, -1, mixed, jobs),
               0);
      for (int r = 0; r < k->P; ++r) {
        if (jobs[r].rc != 0) TEST_FAIL_AT("rank %d: %s", r, jobs[r].err.msg);
        CHECK_EQ(jobs[r].rc, 0);
        CHECK_EQ(jobs[r].info, 0);
        /* op(A) X = B, op = A for potrs, Aᵀ for the transposed solve. */
        const double *x = m.bs + r * n * nrhs;
        for (int64_t c = 0; c < nrhs; ++c)
          for (int64_t i = 0; i < n; ++i) {
            double s = 0;
            for (int64_t l = 0; l < n; ++l)
              s += (lu ? m.a[l + i * n] : m.a[i + l * n]) * x[l + c * n];
            if (fabs(s - b[i + c * n]) > 1e-10) {
              TEST_FAIL_AT(
                  "case %zu lu %d mixed %d rank %d: residual %g at row %lld",
                  ci, lu, mixed, r, fabs(s - b[i + c * n]), (long long)i);
              give(&m);
              return;
            }
          }
        if (!lu && !mixed) /* the factor's diagonal, the same everywhere */
          CHECK(memcmp(m.diags + r * n, m.diags, (size_t)n * sizeof(double)) ==
                0);
      }
      if (!lu && !mixed) { /* prod diag(L)² = det A > 0 */
        double logdet = 0;
        for (int64_t i = 0; i < n; ++i) logdet += 2 * log(m.diags[i]);
        CHECK(isfinite(logdet));
      }
      give(&m);
    }
  }
}

TEST(lapack_local_potri_and_syevd_give_the_parts_in_a_s_layout) {
  NEED_LAPACK(have_lapack());
  for (size_t ci = 0; ci < sizeof g_cases / sizeof g_cases[0]; ++ci) {
    const ll_case *k = &g_cases[ci];
    const int64_t n = k->n;
    for (int eig = 0; eig < 2; ++eig) {
      buffers m;
      CHECK(take(&m, n, 1));
      fill(m.a, n, 1, (unsigned)(ci * 13 + 5));
      ll_job jobs[MAX_RANKS];
      CHECK_EQ(run_case(k, eig ? OP_SYEVD : OP_POTRI, m.a, m.parts, m.bs,
                        m.diags, m.ws, 1, -1, 0, jobs),
               0);
      for (int r = 0; r < k->P; ++r) {
        if (jobs[r].rc != 0) TEST_FAIL_AT("rank %d: %s", r, jobs[r].err.msg);
        CHECK_EQ(jobs[r].rc, 0);
        CHECK_EQ(jobs[r].info, 0);
        if (eig)
          CHECK(memcmp(m.ws + r * n, m.ws, (size_t)n * sizeof(double)) == 0);
      }
      assemble(k, m.parts, m.whole);
      /* potri: A A⁻¹ = I (both triangles used). syevd: A V = V diag(w),
       * Vᵀ V = I. */
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0, t = 0;
          for (int64_t l = 0; l < n; ++l) {
            s += m.a[i + l * n] * m.whole[l + j * n];
            t += m.whole[l + i * n] * m.whole[l + j * n];
          }
          const double want = eig ? m.whole[i + j * n] * m.ws[j]
                                  : (i == j ? 1.0 : 0.0);
          const double orth = i == j ? 1.0 : 0.0;
          if (fabs(s - want) > 1e-9 || (eig && fabs(t - orth) > 1e-10)) {
            TEST_FAIL_AT("case %zu eig %d: (%lld, %lld) off by %g / %g", ci,
                         eig, (long long)i, (long long)j, fabs(s - want),
                         fabs(t - orth));
            give(&m);
            return;
          }
        }
      give(&m);
    }
  }
}

TEST(lapack_local_info_is_the_same_on_every_rank) {
  NEED_LAPACK(have_lapack());
  const ll_case k = {12, 2, 4, 2};
  buffers m;
  CHECK(take(&m, k.n, 1));
  fill(m.a, k.n, 1, 3);
  m.a[5 + 5 * k.n] = -100.0; /* leading minor of order 6 not PD */
  /* Mixed: the float32 factor fails too, and the exact fallback's info is
   * every rank's. */
  for (int mixed = 0; mixed < 2; ++mixed) {
    ll_job jobs[MAX_RANKS];
    CHECK_EQ(run_case(&k, OP_POTRS, m.a, m.parts, m.bs, m.diags, m.ws, 1, -1,
                      mixed, jobs),
             0);
    for (int r = 0; r < k.P; ++r) {
      CHECK_EQ(jobs[r].rc, 0);
      CHECK_EQ(jobs[r].info, 6);
    }
  }
  give(&m);
}

TEST(lapack_local_a_rank_that_fails_fails_every_rank_before_the_gather) {
  /* No LAPACK needed: the failure comes first. */
  const ll_case k = {12, 2, 4, 2};
  buffers m;
  CHECK(take(&m, k.n, 1));
  fill(m.a, k.n, 1, 3);
  ll_job jobs[MAX_RANKS];
  CHECK_EQ(run_case(&k, OP_POTRI, m.a, m.parts, m.bs, m.diags, m.ws, 1, 2, 0,
                    jobs),
           0);
  CHECK_EQ(jobs[2].rc, -JMG_EINVAL);
  CHECK_CONTAINS(jobs[2].err.msg, "its block-cyclic part is 6 x 6");
  CHECK_CONTAINS(jobs[2].err.op, "potri");
  for (int r = 0; r < k.P; ++r) {
    if (r == 2) continue;
    CHECK_EQ(jobs[r].rc, -JMG_EPEER);
    CHECK_CONTAINS(jobs[r].err.msg, "before the gather onto rank 0");
  }
  give(&m);
}
