/* qr (ops/qr.c, engine/lapack/qr.c): the op's leader steps over several
 * host "devices" (jmg_leader_run on hand-made posts) through the LAPACK
 * engine, with a reference geqrf / orgqr (unblocked Householder, in double
 * complex, LAPACK's conventions: zgeqr2's reflectors, zung2r's Q)
 * registered in SciPy's place; the checks are residual-based: A = QR, QᴴQ
 * = I, R upper triangular, R's padding rows zero. And what the op refuses:
 * a wide A, R's shards of the wrong size. And lapack-local's qr routine
 * (the local model) on one thread per rank over the threads communicator. */
#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"
#include "exec/join.h"
#include "host_leader.h"
#include "ops/ops.h"
#include "test.h"
#include "test_random.h"

typedef double complex cplx;

/* ---- a reference geqrf / orgqr ----------------------------------------------*/

static cplx get(int z, const void *p, size_t i) {
  return z ? ((const cplx *)p)[i] : (cplx)((const double *)p)[i];
}
static void put(int z, void *p, size_t i, cplx v) {
  if (z)
    ((cplx *)p)[i] = v;
  else
    ((double *)p)[i] = creal(v);
}

/* The workspace query's answer: n elements. */
static int queried(int z, int n, void *work, const int *lwork) {
  if (*lwork != -1) return 0;
  put(z, work, 0, (double)(n > 0 ? n : 1));
  return 1;
}

/* A = Q R by Householder reflectors H_j = I - tau_j v_j v_jᴴ (v_j(j) = 1),
 * R in the upper triangle, v_j below the diagonal (LAPACK's zgeqr2). */
static void ref_geqrf(int z, int *mp, int *np, void *a, int *lda, void *tau,
                      void *work, int *lwork, int *info) {
  const int m = *mp, n = *np, ld = *lda;
  *info = 0;
  if (queried(z, n, work, lwork)) return;
  for (int j = 0; j < n && j < m; ++j) {
    cplx alpha = get(z, a, (size_t)j + (size_t)j * ld);
    double xnorm = 0.0;
    for (int i = j + 1; i < m; ++i) {
      cplx x = get(z, a, (size_t)i + (size_t)j * ld);
      xnorm += creal(x * conj(x));
    }
    xnorm = sqrt(xnorm);
    if (xnorm == 0.0 && cimag(alpha) == 0.0) {
      put(z, tau, (size_t)j, 0.0);
      continue;
    }
    const double norm = sqrt(creal(alpha * conj(alpha)) + xnorm * xnorm);
    const double beta = creal(alpha) >= 0 ? -norm : norm;
    const cplx t = (beta - alpha) / beta, scale = 1.0 / (alpha - beta);
    put(z, tau, (size_t)j, t);
    for (int i = j + 1; i < m; ++i) {
      const size_t at = (size_t)i + (size_t)j * ld;
      put(z, a, at, get(z, a, at) * scale);
    }
    put(z, a, (size_t)j + (size_t)j * ld, beta);
    /* A(j:, j+1:) = H_jᴴ A(j:, j+1:) = A - conj(tau) v (vᴴ A). */
    for (int c = j + 1; c < n; ++c) {
      cplx dot = get(z, a, (size_t)j + (size_t)c * ld);
      for (int i = j + 1; i < m; ++i)
        dot += conj(get(z, a, (size_t)i + (size_t)j * ld)) *
               get(z, a, (size_t)i + (size_t)c * ld);
      dot *= conj(t);
      put(z, a, (size_t)j + (size_t)c * ld,
          get(z, a, (size_t)j + (size_t)c * ld) - dot);
      for (int i = j + 1; i < m; ++i)
        put(z, a, (size_t)i + (size_t)c * ld,
            get(z, a, (size_t)i + (size_t)c * ld) -
                dot * get(z, a, (size_t)i + (size_t)j * ld));
    }
  }
}

/* Q = H_0 H_1 ... H_{k-1} [I; 0] (m x n) over the reflectors in a (zung2r). */
static void ref_orgqr(int z, int *mp, int *np, int *kp, void *a, int *lda,
                      void *tau, void *work, int *lwork, int *info) {
  const int m = *mp, n = *np, k = *kp, ld = *lda;
  *info = 0;
  if (queried(z, n, work, lwork)) return;
  cplx *q = calloc((size_t)m * (size_t)n, sizeof *q), *v = malloc((size_t)m * sizeof *v);
  if (!q || !v) abort();
  for (int j = 0; j < n; ++j) q[(size_t)j + (size_t)j * m] = 1.0;
  for (int j = k - 1; j >= 0; --j) {
    for (int i = 0; i < m; ++i)
      v[i] = i < j ? 0.0 : i == j ? 1.0 : get(z, a, (size_t)i + (size_t)j * ld);
    const cplx t = get(z, tau, (size_t)j);
    for (int c = 0; c < n; ++c) {
      cplx dot = 0.0;
      for (int i = j; i < m; ++i) dot += conj(v[i]) * q[(size_t)i + (size_t)c * m];
      for (int i = j; i < m; ++i) q[(size_t)i + (size_t)c * m] -= t * v[i] * dot;
    }
  }
  for (int c = 0; c < n; ++c)
    for (int i = 0; i < m; ++i) put(z, a, (size_t)i + (size_t)c * ld, q[(size_t)i + (size_t)c * m]);
  free(v);
  free(q);
}

static void ref_dgeqrf(int *m, int *n, void *a, int *lda, void *tau, void *work,
                       int *lwork, int *info) {
  ref_geqrf(0, m, n, a, lda, tau, work, lwork, info);
}
static void ref_zgeqrf(int *m, int *n, void *a, int *lda, void *tau, void *work,
                       int *lwork, int *info) {
  ref_geqrf(1, m, n, a, lda, tau, work, lwork, info);
}
static void ref_dorgqr(int *m, int *n, int *k, void *a, int *lda, void *tau,
                       void *work, int *lwork, int *info) {
  ref_orgqr(0, m, n, k, a, lda, tau, work, lwork, info);
}
static void ref_zungqr(int *m, int *n, int *k, void *a, int *lda, void *tau,
                       void *work, int *lwork, int *info) {
  ref_orgqr(1, m, n, k, a, lda, tau, work, lwork, info);
}

static void register_reference_qr(void) {
  if (jmg_lapack_register("dgeqrf", (void *)ref_dgeqrf) != 0 ||
      jmg_lapack_register("zgeqrf", (void *)ref_zgeqrf) != 0 ||
      jmg_lapack_register("dorgqr", (void *)ref_dorgqr) != 0 ||
      jmg_lapack_register("zungqr", (void *)ref_zungqr) != 0)
    abort();
}

/* ---- the op over shards -------------------------------------------------------*/

/* Each test starts the sequence again (seed_uniform), so that its matrices
 * do not depend on which tests ran before it. */
static uint64_t g_seed;
static void seed_uniform(void) { g_seed = 0x9E3779B97F4A7C15ULL; }
static double uniform(void) { return test_uniform(&g_seed); }

typedef struct post {
  jmg_io_storage io;
  void *a, *r;
  int32_t status;
} post;

static void set_scalar(post *p, const char *name, int64_t value) {
  *op_scalar_named(&jmg_qr_op, &p->io.io, name) = value;
}

/* qr's leader steps with the LAPACK engine over ndev shards of the m x n
 * row-major A, R's shards rr rows each. */
static int run_op(post *p, int ndev, jmg_dtype t, const cplx *A, int m, int n,
                  int rr, jmg_error *err) {
  const jmg_op_desc *op = &jmg_qr_op;
  const int z = t == JMG_C128, lc = m / ndev;
  const size_t es = jmg_dtype_size(t);
  void *posts[8];
  for (int d = 0; d < ndev; ++d) {
    memset(&p[d], 0, sizeof p[d]);
    jmg_shard_io *io = &p[d].io.io;
    p[d].a = malloc((size_t)lc * n * es);
    p[d].r = malloc((size_t)rr * n * es);
    if (!p[d].a || !p[d].r) abort();
    memset(p[d].r, 0xAB, (size_t)rr * n * es); /* garbage: the op writes it all */
    for (size_t i = 0; i < (size_t)lc * n; ++i) put(z, p[d].a, i, A[(size_t)d * lc * n + i]);
    host_shard_io_init(io, t, n, lc, 1, p[d].a, &p[d].status);
    set_scalar(&p[d], "m", m);
    set_scalar(&p[d], "r_rows", rr);
    *jmg_op_buf_slot(jmg_op_buffer(op, 1), io) = p[d].r;
    posts[d] = io;
  }
  int rc = host_leader_run(op, posts, ndev, err);
  return rc;
}

static void free_posts(post *p, int ndev) {
  for (int d = 0; d < ndev; ++d) {
    free(p[d].a);
    free(p[d].r);
  }
}

/* Q (m x n) and R (n x n, its padding rows too) from the shards, row-major;
 * checks them; why on failure. */
static void check_op(jmg_dtype t, int ndev, int m, int n, char *why, size_t len) {
  const int z = t == JMG_C128, lc = m / ndev, rr = (n + ndev - 1) / ndev;
  cplx *A = malloc((size_t)m * n * sizeof *A), *Q = malloc((size_t)m * n * sizeof *Q);
  cplx *R = malloc((size_t)rr * ndev * n * sizeof *R);
  if (!A || !Q || !R) abort();
  for (size_t i = 0; i < (size_t)m * n; ++i) A[i] = uniform() + (z ? uniform() * I : 0.0);
  post p[8];
  jmg_error err;
  const int rc = run_op(p, ndev, t, A, m, n, rr, &err);
  for (int d = 0; rc == 0 && d < ndev; ++d) {
    for (size_t i = 0; i < (size_t)lc * n; ++i) Q[(size_t)d * lc * n + i] = get(z, p[d].a, i);
    for (size_t i = 0; i < (size_t)rr * n; ++i) R[(size_t)d * rr * n + i] = get(z, p[d].r, i);
    if (p[d].status != 0 && !why[0])
      snprintf(why, len, "shard %d: status %d", d, (int)p[d].status);
  }
  if (rc != 0) snprintf(why, len, "failed: %.200s", err.msg);
  const double tol = 1e-12 * m;
  for (int i = 0; !why[0] && i < rr * ndev; ++i)
    for (int j = 0; j < (i < n ? i : n) && !why[0]; ++j)
      if (R[(size_t)i * n + j] != 0.0)
        snprintf(why, len, "R[%d][%d] = %g below the diagonal (or in a padding row)", i, j,
                 cabs(R[(size_t)i * n + j]));
  for (int i = 0; !why[0] && i < m; ++i)
    for (int j = 0; j < n && !why[0]; ++j) {
      cplx s = -A[(size_t)i * n + j];
      for (int l = 0; l <= j; ++l) s += Q[(size_t)i * n + l] * R[(size_t)l * n + j];
      if (!(cabs(s) < tol)) snprintf(why, len, "(QR - A)[%d][%d] = %g", i, j, cabs(s));
    }
  for (int p1 = 0; !why[0] && p1 < n; ++p1)
    for (int q1 = 0; q1 < n && !why[0]; ++q1) {
      cplx s = p1 == q1 ? -1.0 : 0.0;
      for (int i = 0; i < m; ++i) s += conj(Q[(size_t)i * n + p1]) * Q[(size_t)i * n + q1];
      if (!(cabs(s) < tol)) snprintf(why, len, "(QᴴQ - I)[%d][%d] = %g", p1, q1, cabs(s));
    }
  free_posts(p, ndev);
  free(R);
  free(Q);
  free(A);
}

TEST(qr_op_over_shards_gives_q_and_r_in_rows_layouts) {
  seed_uniform();
  register_reference_qr();
  static const struct {
    int ndev, m, n;
  } cases[] = {{1, 5, 3}, {2, 6, 4}, {4, 8, 8}, {4, 16, 3}, {3, 9, 5}, {4, 12, 1}};
  static const jmg_dtype types[] = {JMG_F64, JMG_C128};
  for (size_t t = 0; t < 2; ++t)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
      char why[300] = "";
      check_op(types[t], cases[c].ndev, cases[c].m, cases[c].n, why, sizeof why);
      if (why[0]) {
        TEST_FAIL_AT("qr %s over %d shards, %d x %d: %s", jmg_dtype_name(types[t]),
                     cases[c].ndev, cases[c].m, cases[c].n, why);
        return;
      }
    }
}

TEST(qr_op_refuses_a_wide_a_and_r_shards_of_the_wrong_size) {
  seed_uniform();
  register_reference_qr();
  cplx A[4 * 6];
  for (int i = 0; i < 24; ++i) A[i] = uniform();
  post p[2];
  jmg_error err;
  int rc = run_op(p, 2, JMG_F64, A, 4, 6, 3, &err); /* 4 x 6: wide */
  free_posts(p, 2);
  CHECK_EQ(rc, -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "4 x 6");
  CHECK_CONTAINS(err.msg, "M >= N");
  rc = run_op(p, 2, JMG_F64, A, 6, 3, 1, &err); /* R: 1 row a shard for 3 rows */
  free_posts(p, 2);
  CHECK_EQ(rc, -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "R's shards have 1 rows; 3 rows over 2 devices take 2 each");
}

/* ---- lapack-local's qr, one thread per rank ----------------------------------*/

typedef struct ll_job {
  const unsigned char *id;
  int rank, ranks;
  int64_t m, n, rr;
  void *part, *rt; /* this rank's columns of Aᵀ (n x m / ranks), of Rᵀ */
  jmg_dtype t;
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
  const int64_t cols = j->m / j->ranks;
  jmg_local_matrix a = {.rank = j->rank, .ranks = j->ranks, .grid_rows = 1,
                        .grid_cols = j->ranks, .comm_ops = o, .comm = c,
                        .n = j->n, .mb = cols, .nb = cols, .dtype = j->t,
                        .data = j->part, .rows = j->n, .cols = cols, .ld = j->n};
  const jmg_engine *e = &jmg_lapack_local_engine;
  j->info = -99;
  j->rc = e->local.qr(e, &a, j->rt, j->m, j->rr, &j->info, &j->err);
  return NULL;
}

TEST(qr_lapack_local_gives_every_rank_its_rows_of_q_and_r) {
  seed_uniform();
  register_reference_qr();
  static const struct {
    int ranks, m, n;
  } cases[] = {{1, 5, 3}, {2, 6, 4}, {4, 12, 3}, {3, 9, 9}};
  static const jmg_dtype types[] = {JMG_F64, JMG_C128};
  for (size_t ti = 0; ti < 2; ++ti)
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ++ci) {
      const jmg_dtype t = types[ti];
      const int z = t == JMG_C128, P = cases[ci].ranks, m = cases[ci].m,
                n = cases[ci].n, lc = m / P, rr = (n + P - 1) / P;
      const size_t es = jmg_dtype_size(t);
      cplx *A = malloc((size_t)m * n * sizeof *A);
      char *parts = malloc((size_t)m * n * es), *rts = malloc((size_t)n * rr * P * es);
      if (!A || !parts || !rts) abort();
      for (size_t i = 0; i < (size_t)m * n; ++i) {
        A[i] = uniform() + (z ? uniform() * I : 0.0); /* row-major: Aᵀ's columns */
        put(z, parts, i, A[i]);
      }
      unsigned char id[JMG_COMM_ID_MAX];
      jmg_error err;
      jmg_error_clear(&err);
      CHECK_EQ(jmg_threads_comm()->make_id(id, "test", &err), 0);
      ll_job jobs[8];
      pthread_t th[8];
      for (int r = 0; r < P; ++r) {
        jobs[r] = (ll_job){.id = id, .rank = r, .ranks = P, .m = m, .n = n, .rr = rr,
                           .part = parts + (size_t)r * lc * n * es,
                           .rt = rts + (size_t)r * rr * n * es, .t = t};
        CHECK_EQ(pthread_create(&th[r], NULL, ll_main, &jobs[r]), 0);
      }
      for (int r = 0; r < P; ++r) pthread_join(th[r], NULL);
      char why[300] = "";
      for (int r = 0; r < P && !why[0]; ++r)
        if (jobs[r].rc != 0 || jobs[r].info != 0)
          snprintf(why, sizeof why, "rank %d: rc %d info %d: %.200s", r, jobs[r].rc,
                   jobs[r].info, jobs[r].err.msg);
      /* Q row-major in parts, R row-major (rr * P rows) in rts. */
      const double tol = 1e-12 * m;
      for (int i = 0; !why[0] && i < rr * P; ++i)
        for (int j = 0; j < (i < n ? i : n) && !why[0]; ++j)
          if (get(z, rts, (size_t)i * n + j) != 0.0)
            snprintf(why, sizeof why, "R[%d][%d] below the diagonal", i, j);
      for (int i = 0; !why[0] && i < m; ++i)
        for (int j = 0; j < n && !why[0]; ++j) {
          cplx s = -A[(size_t)i * n + j];
          for (int l = 0; l <= j; ++l)
            s += get(z, parts, (size_t)i * n + l) * get(z, rts, (size_t)l * n + j);
          if (!(cabs(s) < tol)) snprintf(why, sizeof why, "(QR - A)[%d][%d] = %g", i, j, cabs(s));
        }
      for (int p1 = 0; !why[0] && p1 < n; ++p1)
        for (int q1 = 0; q1 < n && !why[0]; ++q1) {
          cplx s = p1 == q1 ? -1.0 : 0.0;
          for (int i = 0; i < m; ++i)
            s += conj(get(z, parts, (size_t)i * n + p1)) * get(z, parts, (size_t)i * n + q1);
          if (!(cabs(s) < tol)) snprintf(why, sizeof why, "(QᴴQ - I)[%d][%d]", p1, q1);
        }
      free(rts);
      free(parts);
      free(A);
      if (why[0]) {
        TEST_FAIL_AT("lapack-local qr %s on %d ranks, %d x %d: %s", jmg_dtype_name(t), P, m,
                     n, why);
        return;
      }
    }
}
