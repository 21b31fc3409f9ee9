/* sygvd (ops/sygvd.c, engine/lapack/sygvd.c, exec/finite.c): its
 * description (B an aliased in/out argument checked for finiteness), and the
 * op's leader steps with the LAPACK engine over 1, 2 and 4 host "devices"
 * (B permuted into the block-cyclic layout beside A, the eigenvectors back):
 * A V = B V diag(w) and Vᵀ B V = I, the eigenvalues ascending and the same
 * on every shard; a B whose leading minor of order k is not positive
 * definite gives status n + k and NaN; a NaN in B gives status -1 and NaN
 * without any solver. LAPACK's dsygvd is the system's (liblapack.so.3,
 * registered like SciPy's in Python); where it is absent the tests say so
 * and check nothing but the description. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/lapack/table.h"
#include "exec/join.h"
#include "host_leader.h"
#include "ops/ops.h"
#include "test.h"
#include "test_lapack.h"

/* Registers it each time: the runner forgets it between tests. */
static int have_dsygvd(void) {
  static const char *const names[] = {"dsygvd"};
  return jmg_test_lapack_register(names, 1);
}

TEST(sygvd_desc_b_is_an_aliased_argument_checked_for_finiteness) {
  const jmg_op_desc *op = &jmg_sygvd_op;
  CHECK_EQ(jmg_op_nargs(op), 3);  /* A, B, shard */
  CHECK_EQ(jmg_op_nrets(op), 4);  /* A, W, B, status */
  const jmg_op_buf *b = NULL, *w = NULL;
  for (int i = 0; i < op->nbufs; ++i) {
    if (strcmp(op->bufs[i].name, "B") == 0) b = &op->bufs[i];
    if (strcmp(op->bufs[i].name, "W") == 0) w = &op->bufs[i];
  }
  CHECK(b != NULL && w != NULL);
  if (b == NULL || w == NULL) return;
  CHECK_EQ(b->dir, JMG_INOUT);
  CHECK_EQ(b->arg, 1);
  CHECK_EQ(b->ret, 2);
  CHECK_EQ(b->check_finite, 1);
  CHECK_EQ(b->dims[0], JMG_DIM_LOCAL_COLS);
  CHECK_EQ(b->dims[1], JMG_DIM_N);
  CHECK_EQ(w->check_finite, 0);
  CHECK_EQ(w->ret, 1);
  jmg_io_storage io;
  memset(&io, 0, sizeof io);
  CHECK_EQ(jmg_op_ret_index(op, jmg_op_buffer(op, op->nbufs + 1), &io.io), 3);
}

/* One participant's post. */
typedef struct post {
  jmg_io_storage io;
  double *a, *b, *w;
  int32_t status;
} post;

/* Runs sygvd's leader steps with the LAPACK engine over ndev shards of the
 * n x n symmetric A and B (row-major, float64); fills the posts. */
static int run_op(post *p, int ndev, int n, int tile, int want_vectors,
                  const double *A, const double *B, jmg_error *err) {
  const jmg_op_desc *op = &jmg_sygvd_op;
  const int lc = n / ndev;
  void *posts[8];
  for (int d = 0; d < ndev; ++d) {
    memset(&p[d], 0, sizeof p[d]);
    jmg_shard_io *io = &p[d].io.io;
    p[d].a = malloc((size_t)lc * n * sizeof(double));
    p[d].b = malloc((size_t)lc * n * sizeof(double));
    p[d].w = malloc((size_t)n * sizeof(double));
    if (!p[d].a || !p[d].b || !p[d].w) abort();
    /* Shard d: rows d*lc ... read column-major (ld n): column j is row
     * d*lc + j, which for a symmetric matrix is that column. */
    for (int j = 0; j < lc; ++j)
      for (int i = 0; i < n; ++i) {
        p[d].a[i + (size_t)j * n] = A[(size_t)(d * lc + j) * n + i];
        p[d].b[i + (size_t)j * n] = B[(size_t)(d * lc + j) * n + i];
      }
    host_shard_io_init(io, JMG_F64, n, lc, tile, p[d].a, &p[d].status);
    *jmg_op_scalar_slot(&op->scalars[0], io) = want_vectors;
    *jmg_op_buf_slot(op_buf_named(op, "B"), io) = p[d].b;
    *jmg_op_buf_slot(op_buf_named(op, "W"), io) = p[d].w;
    posts[d] = io;
  }
  int rc = host_leader_run(op, posts, ndev, err);
  return rc;
}

static void free_posts(post *p, int ndev) {
  for (int d = 0; d < ndev; ++d) {
    free(p[d].a);
    free(p[d].b);
    free(p[d].w);
  }
}

/* A symmetric indefinite A and a positive definite B = I + X Xᵀ / n, from a
 * fixed linear congruential sequence (no rand(): reproducible anywhere). */
static void pencil(int n, double *A, double *B) {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  double *x = malloc((size_t)n * n * sizeof *x);
  if (!x) abort();
  for (int i = 0; i < n * n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (double)(s >> 11) / 9007199254740992.0 - 0.5;
  }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      A[i * n + j] = x[i * n + j] + x[j * n + i];
      double acc = 0;
      for (int k = 0; k < n; ++k) acc += x[i * n + k] * x[j * n + k];
      B[i * n + j] = (i == j) + acc / n;
    }
  free(x);
}

static void check_solution(int ndev, int n, int tile, int want_vectors) {
  double *A = malloc((size_t)n * n * sizeof *A), *B = malloc((size_t)n * n * sizeof *B);
  double *V = malloc((size_t)n * n * sizeof *V);
  if (!A || !B || !V) abort();
  pencil(n, A, B);
  post p[8];
  jmg_error err;
  int rc = run_op(p, ndev, n, tile, want_vectors, A, B, &err);
  char why[512] = "";
  const int lc = n / ndev;
  if (rc != 0) snprintf(why, sizeof why, "failed: %s", err.msg);
  for (int d = 0; !why[0] && d < ndev; ++d) {
    if (p[d].status != 0)
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)p[d].status);
    else if (memcmp(p[d].w, p[0].w, (size_t)n * sizeof(double)) != 0)
      snprintf(why, sizeof why, "shard %d's W differs from shard 0's", d);
    /* V's column d*lc + j is shard d's column j. */
    for (int j = 0; j < lc; ++j)
      memcpy(V + (size_t)(d * lc + j) * n, p[d].a + (size_t)j * n,
             (size_t)n * sizeof(double));
  }
  const double *w = p[0].w;
  for (int i = 1; !why[0] && i < n; ++i)
    if (!(w[i] >= w[i - 1]))
      snprintf(why, sizeof why, "w[%d] = %g < w[%d] = %g", i, w[i], i - 1,
               w[i - 1]);
  double res = 0, orth = 0, scale = 0;
  for (int i = 0; i < n * n; ++i) scale = fmax(scale, fabs(A[i]));
  for (int j = 0; !why[0] && want_vectors && j < n; ++j)
    for (int i = 0; i < n; ++i) {
      double av = 0, bv = 0, vbv = 0;
      for (int k = 0; k < n; ++k) {
        av += A[i * n + k] * V[(size_t)j * n + k];
        bv += B[i * n + k] * V[(size_t)j * n + k];
      }
      res = fmax(res, fabs(av - w[j] * bv));
      /* (Vᵀ B V)[i][j] */
      for (int k = 0; k < n; ++k) {
        double bvk = 0;
        for (int l = 0; l < n; ++l) bvk += B[k * n + l] * V[(size_t)j * n + l];
        vbv += V[(size_t)i * n + k] * bvk;
      }
      orth = fmax(orth, fabs(vbv - (i == j)));
    }
  if (!why[0] && (res > 1e-12 * n * scale || orth > 1e-12 * n))
    snprintf(why, sizeof why, "max |A V - B V w| = %.3e, max |VᵀBV - I| = %.3e",
             res, orth);
  free_posts(p, ndev);
  free(A);
  free(B);
  free(V);
  if (why[0])
    TEST_FAIL_AT("sygvd over %d shards, N=%d, T_A=%d, vectors=%d: %s", ndev, n,
                 tile, want_vectors, why);
}

TEST(sygvd_op_over_shards_gives_b_orthonormal_eigenvectors) {
  NEED_LAPACK(have_dsygvd());
  static const struct {
    int ndev, n, tile;
  } cases[] = {{1, 7, 7}, {2, 12, 2}, {2, 12, 3}, {4, 12, 1}, {4, 16, 2}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
    for (int vectors = 1; vectors >= 0; --vectors) {
      check_solution(cases[c].ndev, cases[c].n, cases[c].tile, vectors);
      if (jmg_test_failed) return;
    }
}

/* All of every shard's outputs (A's place and W) NaN, status as given. */
static void check_failed(post *p, int ndev, int n, int32_t want, const char *what) {
  const int lc = n / ndev;
  for (int d = 0; d < ndev; ++d) {
    if (p[d].status != want) {
      TEST_FAIL_AT("%s: shard %d status %d, want %d", what, d, (int)p[d].status,
                   (int)want);
      return;
    }
    for (int i = 0; i < n; ++i)
      if (!isnan(p[d].w[i])) {
        TEST_FAIL_AT("%s: shard %d w[%d] = %g, not NaN", what, d, i, p[d].w[i]);
        return;
      }
    for (int i = 0; i < lc * n; ++i)
      if (!isnan(p[d].a[i])) {
        TEST_FAIL_AT("%s: shard %d A's place [%d] = %g, not NaN", what, d, i,
                     p[d].a[i]);
        return;
      }
  }
}

TEST(sygvd_op_b_not_positive_definite_gives_n_plus_k_and_nan) {
  NEED_LAPACK(have_dsygvd());
  enum { NDEV = 4, N = 12, K = 7 };
  double A[N * N], B[N * N];
  pencil(N, A, B);
  B[(K - 1) * N + (K - 1)] = -100; /* minors of order >= K not definite */
  post p[NDEV];
  jmg_error err;
  for (int vectors = 0; vectors < 2; ++vectors) {
    int rc = run_op(p, NDEV, N, 3, vectors, A, B, &err);
    if (rc != 0) TEST_FAIL_AT("failed: %s", err.msg);
    if (rc == 0) check_failed(p, NDEV, N, N + K, "B not positive definite");
    free_posts(p, NDEV);
    if (jmg_test_failed) return;
  }
}

TEST(sygvd_op_nan_in_b_gives_minus_one_and_nan_without_a_solver) {
  /* No LAPACK needed: the finite check answers before any solver. */
  enum { NDEV = 2, N = 8 };
  double A[N * N], B[N * N];
  pencil(N, A, B);
  B[5 * N + 1] = NAN; /* row 5: shard 1 */
  post p[NDEV];
  jmg_error err;
  int rc = run_op(p, NDEV, N, 2, 1, A, B, &err);
  if (rc != 0) TEST_FAIL_AT("failed: %s", err.msg);
  if (rc == 0) check_failed(p, NDEV, N, JMG_INFO_NONFINITE, "NaN in B");
  free_posts(p, NDEV);
}
