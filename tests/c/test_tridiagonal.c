/* The host tridiagonal eigensolver (engine/lapack/tridiagonal.c): dsterf's
 * eigenvalues and the eigenvectors in chunks (dstemr, or the fallback of
 * dstebz and dstein forced), on 1 to 4 threads, in every dtype: T Z = Z
 * diag(w) and Zᵀ Z = I to working accuracy, w ascending and dsterf's, every
 * column handed to the sink once; matrices whose close eigenvalues a chunk
 * boundary must not split (Wilkinson's W+, glued W+, a T that splits into
 * equal blocks, clusters wider than a boundary's window) with small chunks
 * forced; a failing sink stops the solver with its error. LAPACK is the
 * system's (liblapack.so.3, registered like SciPy's in Python); where it is
 * absent the tests say so and check nothing. */
#include <dlfcn.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/lapack/table.h"
#include "engine/lapack/tridiagonal.h"
#include "test.h"
#include "test_lapack.h"

/* Registers the routines each time: the runner forgets them between tests. */
static int have_lapack(void) {
  static const char *const names[] = {"dsterf", "dstemr", "dstebz", "dstein"};
  return jmg_test_lapack_register(names, 4);
}

/* What the sink saw: the vectors' real parts (n x n), how often each
 * column came, the chunks' first indices in order. */
typedef struct {
  int64_t n;
  jmg_dtype dtype;
  double *z;
  int *seen;
  int64_t *firsts;
  int chunks;
  int nonzero_imag;
  int fail_at; /* the sink fails on this call (1-based); 0: never */
} sink_ctx;

static int sink(void *ctx, int64_t first, int64_t count, const void *z,
                jmg_error *err) {
  sink_ctx *s = ctx;
  if (s->fail_at > 0 && s->chunks + 1 == s->fail_at)
    return jmg_error_set(err, JMG_ECUDA, "test", "cudaMemcpy",
                         "the test's sink failed on chunk %d", s->chunks + 1);
  s->firsts[s->chunks++] = first;
  const char *b = z;
  const size_t esize = jmg_dtype_size(s->dtype);
  for (int64_t j = 0; j < count; ++j) {
    s->seen[first + j]++;
    for (int64_t i = 0; i < s->n; ++i) {
      const char *p = b + ((size_t)j * (size_t)s->n + (size_t)i) * esize;
      double re = 0.0, im = 0.0;
      if (jmg_dtype_real_size(s->dtype) == 4) {
        float f[2] = {0.0f, 0.0f};
        memcpy(f, p, esize);
        re = f[0];
        im = f[1];
      } else {
        double v[2] = {0.0, 0.0};
        memcpy(v, p, esize);
        re = v[0];
        im = v[1];
      }
      if (im != 0.0) s->nonzero_imag = 1;
      s->z[(size_t)(first + j) * (size_t)s->n + (size_t)i] = re;
    }
  }
  return 0;
}

static int sink_open(sink_ctx *s, int64_t n, jmg_dtype dtype) {
  memset(s, 0, sizeof *s);
  s->n = n;
  s->dtype = dtype;
  s->z = calloc((size_t)(n * n > 0 ? n * n : 1), sizeof *s->z);
  s->seen = calloc((size_t)(n > 0 ? n : 1), sizeof *s->seen);
  s->firsts = calloc((size_t)(n > 0 ? n : 1), sizeof *s->firsts);
  return s->z && s->seen && s->firsts ? 0 : -1;
}

static void sink_close(sink_ctx *s) {
  free(s->z);
  free(s->seen);
  free(s->firsts);
}

static uint64_t g_rng;
static double uniform(void) { /* in [-1, 1) */
  g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(g_rng >> 11) / 4503599627370496.0 - 1.0;
}

static double t_norm(int64_t n, const double *d, const double *e) {
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double r = fabs(d[i]) + (i > 0 ? fabs(e[i - 1]) : 0.0) +
               (i + 1 < n ? fabs(e[i]) : 0.0);
    if (r > m) m = r;
  }
  return m > 0.0 ? m : 1.0;
}

/* max |Z(:,i)ᵀ Z(:,j) - δij| over i in cols[] and every j. */
static double orth_error(const double *z, int64_t n, const int64_t *cols,
                         int64_t ncols) {
  double worst = 0.0;
  for (int64_t c = 0; c < ncols; ++c) {
    const double *zi = z + (size_t)cols[c] * (size_t)n;
    for (int64_t j = 0; j < n; ++j) {
      const double *zj = z + (size_t)j * (size_t)n;
      double dot = 0.0;
      for (int64_t r = 0; r < n; ++r) dot += zi[r] * zj[r];
      const double err = fabs(dot - (j == cols[c] ? 1.0 : 0.0));
      if (err > worst) worst = err;
    }
  }
  return worst;
}

/* Solves T (d, e) in dtype on `threads` threads with chunks of `chunk`
 * (0: the solver's choice) and checks everything the header promises:
 * residual, orthogonality (every column where n <= 600, else the columns
 * beside each chunk boundary and every 64th), w ascending and equal to
 * dsterf's, each column handed once, imaginary parts 0. */
/* Every chunk by dstebz and dstein (the fallback where dstemr fails). */
static int g_fallback_only = 0;

static void solve_and_check(int64_t n, const double *d, const double *e,
                            jmg_dtype dtype, int threads, int64_t chunk) {
  sink_ctx s;
  double *w = malloc((size_t)(n > 0 ? n : 1) * sizeof *w);
  double *w_ref = malloc((size_t)(n > 0 ? n : 1) * sizeof *w_ref);
  int64_t *cols = malloc((size_t)(n > 0 ? n : 1) * sizeof *cols);
  int ok = w && w_ref && cols && sink_open(&s, n, dtype) == 0;
  jmg_error err;
  jmg_error_clear(&err);
  int info = -7, info_ref = -7, rc = -1, rc_ref = -1;
  if (ok) {
    rc = jmg_tridiagonal_eigenvectors_chunked("syevd", n, d, e, w, dtype,
                                              threads, chunk, g_fallback_only,
                                              sink, &s, &info, &err);
    rc_ref =
        jmg_tridiagonal_eigenvalues("syevd", n, d, e, w_ref, &info_ref, &err);
  }
  const double eps =
      dtype == JMG_F32 || dtype == JMG_C64 ? FLT_EPSILON : DBL_EPSILON;
  const double norm = t_norm(n, d, e);
  const double tol = 50.0 * (double)(n > 0 ? n : 1) * eps;
  double resid = 0.0, werr = 0.0, orth = 0.0;
  int unsorted = 0, bad_seen = 0;
  int64_t ncols = 0;
  if (ok && rc == 0 && rc_ref == 0 && info == 0) {
    for (int64_t j = 0; j < n; ++j) {
      const double *zj = s.z + (size_t)j * (size_t)n;
      for (int64_t i = 0; i < n; ++i) {
        double r = d[i] * zj[i] - w[j] * zj[i];
        if (i > 0) r += e[i - 1] * zj[i - 1];
        if (i + 1 < n) r += e[i] * zj[i + 1];
        if (fabs(r) > resid) resid = fabs(r);
      }
      if (fabs(w[j] - w_ref[j]) > werr) werr = fabs(w[j] - w_ref[j]);
      if (j > 0 && w[j] < w[j - 1]) unsorted = 1;
      if (s.seen[j] != 1) bad_seen = 1;
    }
    resid /= norm;
    werr /= norm;
    for (int64_t j = 0; j < n; ++j) {
      int near = 0;
      for (int c = 1; c < s.chunks; ++c)
        if (j >= s.firsts[c] - 2 && j < s.firsts[c] + 2) near = 1;
      if (n <= 600 || near || j % 64 == 0) cols[ncols++] = j;
    }
    orth = orth_error(s.z, n, cols, ncols);
  }
  const int chunks = s.chunks, nonzero_imag = s.nonzero_imag;
  if (ok) sink_close(&s);
  free(w);
  free(w_ref);
  free(cols);
  CHECK(ok);
  if (rc != 0) fprintf(stderr, "  %s: %s\n", err.call, err.msg);
  CHECK_EQ(rc, 0);
  CHECK_EQ(rc_ref, 0);
  CHECK_EQ(info, 0);
  CHECK_EQ(info_ref, 0);
  if (resid > tol || orth > tol || werr > 50.0 * (double)n * DBL_EPSILON)
    fprintf(stderr,
            "  n=%lld %s threads=%d chunk=%lld (%d chunks): residual %.3g, "
            "orthogonality %.3g, |w - dsterf's| %.3g, tolerance %.3g\n",
            (long long)n, jmg_dtype_name(dtype), threads, (long long)chunk,
            chunks, resid, orth, werr, tol);
  CHECK(resid <= tol);
  CHECK(orth <= tol);
  CHECK(werr <= 50.0 * (double)(n > 0 ? n : 1) * DBL_EPSILON);
  CHECK(!unsorted);
  CHECK(!bad_seen);
  CHECK(!nonzero_imag);
  CHECK(n == 0 ? chunks == 0 : chunks >= 1);
}

/* A random T of order n (uniform entries, seeded): its d and e malloc'd
 * (n entries each), -1 where they cannot be. */
static int random_t(int64_t n, uint64_t seed, double **d, double **e) {
  *d = malloc((size_t)n * sizeof **d);
  *e = malloc((size_t)n * sizeof **e);
  if (*d == NULL || *e == NULL) return -1;
  g_rng = seed;
  for (int64_t i = 0; i < n; ++i) (*d)[i] = uniform();
  for (int64_t i = 0; i + 1 < n; ++i) (*e)[i] = uniform();
  return 0;
}

/* The runner forgets every LAPACK routine before each test. */
TEST(tridiagonal_without_lapack_names_the_missing_routine) {
  double d[2] = {1.0, 2.0}, e[1] = {0.5}, w[2];
  int info = 0;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_tridiagonal_eigenvalues("syevd", 2, d, e, w, &info, &err),
           -JMG_EUNSUPPORTED);
  CHECK_CONTAINS(err.msg, "LAPACK routine dsterf was not registered");
  CHECK_CONTAINS(err.op, "syevd");
  jmg_error_clear(&err);
  CHECK_EQ(jmg_tridiagonal_eigenvectors("syevd", 2, d, e, w, JMG_F64, 1, sink,
                                        NULL, &info, &err),
           -JMG_EUNSUPPORTED);
  CHECK_CONTAINS(err.msg, "LAPACK routine dstemr was not registered");
  /* Double only: the other prefixes have no entry. */
  CHECK_EQ(jmg_lapack_register("ssterf", (void *)sink), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("zstemr", (void *)sink), -JMG_EINVAL);
  void *lib = jmg_test_lapack();
  if (lib == NULL) return;
  /* Each routine the vectors need, named in turn as it is missing. */
  static const char *const names[] = {"dstemr", "dstebz"};
  static const char *const next[] = {"dstebz", "dstein"};
  for (int i = 0; i < 2; ++i) {
    char sym[16];
    snprintf(sym, sizeof sym, "%s_", names[i]);
    void *fn = dlsym(lib, sym);
    CHECK(fn != NULL);
    CHECK_EQ(jmg_lapack_register(names[i], fn), 0);
    jmg_error_clear(&err);
    CHECK_EQ(jmg_tridiagonal_eigenvectors("syevd", 2, d, e, w, JMG_F64, 1, sink,
                                          NULL, &info, &err),
             -JMG_EUNSUPPORTED);
    char want[64];
    snprintf(want, sizeof want, "LAPACK routine %s was not registered",
             next[i]);
    CHECK_CONTAINS(err.msg, want);
  }
}

/* Every dtype on 1 and 4 threads up to n = 500 (where every column's
 * orthogonality is checked); at 2000 (the solver's own chunks, several a
 * thread, and the columns beside their boundaries checked) every dtype
 * once: float32 and complex128 on 4 threads, float64 and complex64 on 1.
 * A dtype changes only a chunk's element size and its conversion (none;
 * narrowed front to back; widened back to front), the same code at any n:
 * with float64's many chunks a thread (chunk 7, below), each conversion
 * thus runs on 4 threads that take several chunks each, each real and
 * complex dtype and each precision on both thread counts. The check of a
 * 2000-vector solve is most of this test's time (ASan's, above all). */
TEST(tridiagonal_random_t_every_size_dtype_and_thread_count) {
  NEED_LAPACK(have_lapack());
  static const int64_t sizes[] = {1, 2, 37, 500, 2000};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; ++si) {
    const int64_t n = sizes[si];
    double *d = NULL, *e = NULL;
    CHECK(random_t(n, 12345 + (uint64_t)n, &d, &e) == 0);
    for (int t = 0; t < JMG_NUM_DTYPES && !jmg_test_failed; ++t)
      for (int threads = 1; threads <= 4 && !jmg_test_failed; threads += 3)
        if (n <= 500 || threads == (t == JMG_F32 || t == JMG_C128 ? 4 : 1))
          solve_and_check(n, d, e, (jmg_dtype)t, threads, 0);
    /* And chunks much smaller than the solver would pick. */
    if (n >= 37 && n <= 500 && !jmg_test_failed)
      solve_and_check(n, d, e, JMG_F64, 4, 7);
    free(d);
    free(e);
    if (jmg_test_failed) return;
  }
}

/* Wilkinson's W+(2m+1): d = |m - i|, e = 1. Its largest eigenvalues come
 * in pairs equal to far below double's precision: a boundary between the
 * two of a pair would give two dstemr calls one cluster, and vectors that
 * are not orthogonal. */
TEST(tridiagonal_wilkinson_pairs_stay_in_one_chunk) {
  NEED_LAPACK(have_lapack());
  static const int64_t sizes[] = {201, 1001};
  static const int64_t chunks[] = {8, 16};
  for (int c = 0; c < 2; ++c) {
    const int64_t n = sizes[c], m = (n - 1) / 2;
    double *d = malloc((size_t)n * sizeof *d);
    double *e = malloc((size_t)n * sizeof *e);
    CHECK(d != NULL && e != NULL);
    for (int64_t i = 0; i < n; ++i) d[i] = (double)(i > m ? i - m : m - i);
    for (int64_t i = 0; i + 1 < n; ++i) e[i] = 1.0;
    solve_and_check(n, d, e, JMG_F64, 4, chunks[c]);
    if (!jmg_test_failed) solve_and_check(n, d, e, JMG_F32, 2, chunks[c]);
    free(d);
    free(e);
    if (jmg_test_failed) return;
  }
}

/* Ten copies of W+(21) glued by 1e-10: clusters of 10 and 20 eigenvalues
 * within about 1e-10, which chunks of 64 (boundaries moved by up to 16)
 * keep whole. */
TEST(tridiagonal_glued_wilkinson_clusters_stay_in_one_chunk) {
  NEED_LAPACK(have_lapack());
  enum { COPIES = 10, BLOCK = 21 };
  const int64_t n = COPIES * BLOCK;
  double d[COPIES * BLOCK], e[COPIES * BLOCK];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i % BLOCK;
    d[i] = (double)(k > 10 ? k - 10 : 10 - k);
    e[i] = (k == BLOCK - 1) ? 1e-10 : 1.0;
  }
  solve_and_check(n, d, e, JMG_F64, 4, 64);
  if (!jmg_test_failed) solve_and_check(n, d, e, JMG_C128, 3, 64);
}

/* A zero off-diagonal splits T; here into three equal blocks, so that every
 * eigenvalue is threefold exactly and chunk boundaries must fall between
 * equal eigenvalues: the vectors of different blocks are orthogonal by
 * their supports, and w must still come out ascending. */
TEST(tridiagonal_split_t_with_equal_blocks) {
  NEED_LAPACK(have_lapack());
  enum { BLOCK = 50, COPIES = 3 };
  const int64_t n = BLOCK * COPIES;
  double d[BLOCK * COPIES], e[BLOCK * COPIES];
  g_rng = 99;
  for (int64_t i = 0; i < BLOCK; ++i) {
    d[i] = uniform();
    e[i] = uniform();
  }
  for (int64_t i = BLOCK; i < n; ++i) {
    d[i] = d[i % BLOCK];
    e[i] = e[i % BLOCK];
  }
  for (int64_t c = 1; c < COPIES; ++c) e[c * BLOCK - 1] = 0.0;
  solve_and_check(n, d, e, JMG_F64, 4, 5);
  if (!jmg_test_failed) solve_and_check(n, d, e, JMG_F64, 1, 0);
}

TEST(tridiagonal_edge_sizes_auto_threads_and_bad_arguments) {
  NEED_LAPACK(have_lapack());
  double d[3] = {2.0, -1.0, 0.5}, e[3] = {0.0, 0.0, 0.0}, w[3] = {0, 0, 0};
  sink_ctx s;
  CHECK(sink_open(&s, 1, JMG_C64) == 0);
  int info = -7;
  jmg_error err;
  jmg_error_clear(&err);
  /* n = 0: nothing to hand over. */
  int rc = jmg_tridiagonal_eigenvectors("syevd", 0, d, e, w, JMG_F64, 0, sink,
                                        &s, &info, &err);
  const int chunks0 = s.chunks;
  /* n = 1: the vector [1], on threads = 0 (one per CPU). */
  int rc1 = jmg_tridiagonal_eigenvectors("syevd", 1, d, e, w, JMG_C64, 0, sink,
                                         &s, &info, &err);
  const double z1 = s.z[0], w1 = w[0];
  const int chunks1 = s.chunks, seen1 = s.seen[0];
  sink_close(&s);
  CHECK_EQ(rc, 0);
  CHECK_EQ(chunks0, 0);
  CHECK_EQ(rc1, 0);
  CHECK_EQ(info, 0);
  CHECK_EQ(chunks1, 1);
  CHECK_EQ(seen1, 1);
  CHECK(fabs(fabs(z1) - 1.0) == 0.0);
  CHECK(w1 == 2.0);
  /* A diagonal T (all e zero) on automatic threads. */
  solve_and_check(3, d, e, JMG_F64, 0, 0);
  if (jmg_test_failed) return;
  /* n past LAPACK's int, before anything is read. */
  jmg_error_clear(&err);
  rc = jmg_tridiagonal_eigenvectors("syevd", (int64_t)INT_MAX + 1, d, e, w,
                                    JMG_F64, 1, sink, NULL, &info, &err);
  CHECK_EQ(rc, -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "N=2147483648 exceeds LAPACK's 32-bit int");
  CHECK_CONTAINS(err.op, "syevd");
  jmg_error_clear(&err);
  rc = jmg_tridiagonal_eigenvalues("eigh", (int64_t)INT_MAX + 1, d, e, w, &info,
                                   &err);
  CHECK_EQ(rc, -JMG_EINVAL);
  CHECK_CONTAINS(err.op, "eigh");
  jmg_error_clear(&err);
  rc = jmg_tridiagonal_eigenvectors("syevd", 3, d, e, w, JMG_F64, 1, NULL, NULL,
                                    &info, &err);
  CHECK_EQ(rc, -JMG_EINVAL);
  jmg_error_clear(&err);
  rc = jmg_tridiagonal_eigenvalues("syevd", -1, d, e, w, &info, &err);
  CHECK_EQ(rc, -JMG_EINVAL);
}

TEST(tridiagonal_failing_sink_stops_the_solver_with_its_error) {
  NEED_LAPACK(have_lapack());
  enum { N = 300 };
  double d[N], e[N], w[N];
  g_rng = 7;
  for (int i = 0; i < N; ++i) {
    d[i] = uniform();
    e[i] = uniform();
  }
  sink_ctx s;
  CHECK(sink_open(&s, N, JMG_F32) == 0);
  s.fail_at = 3;
  int info = -7;
  jmg_error err;
  jmg_error_clear(&err);
  const int rc = jmg_tridiagonal_eigenvectors_chunked(
      "syevd", N, d, e, w, JMG_F32, 2, 20, 0, sink, &s, &info, &err);
  const int handed = s.chunks;
  sink_close(&s);
  CHECK_EQ(rc, -JMG_ECUDA);
  CHECK_EQ(handed, 2); /* the first two; none after the failure */
  CHECK_EQ(err.code, JMG_ECUDA);
  CHECK_CONTAINS(err.call, "cudaMemcpy");
  CHECK_CONTAINS(err.msg, "the test's sink failed on chunk 3");
}

/* The fallback where dstemr fails (dstebz's bisection, dstein's inverse
 * iteration, sorted ascending), forced for every chunk: random T of every
 * dtype, Wilkinson's pairs and a split T, against the same checks. */
TEST(tridiagonal_fallback_stebz_stein_for_every_chunk) {
  NEED_LAPACK(have_lapack());
  g_fallback_only = 1;
  static const int64_t sizes[] = {1, 2, 37, 500};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; ++si) {
    const int64_t n = sizes[si];
    double *d = NULL, *e = NULL;
    CHECK(random_t(n, 777 + (uint64_t)n, &d, &e) == 0);
    for (int t = 0; t < JMG_NUM_DTYPES && !jmg_test_failed; ++t)
      solve_and_check(n, d, e, (jmg_dtype)t, 3, n >= 37 ? 11 : 0);
    free(d);
    free(e);
  }
  enum { W = 201 };
  double d[W], e[W];
  for (int64_t i = 0; i < W && !jmg_test_failed; ++i)
    d[i] = (double)(i > 100 ? i - 100 : 100 - i);
  for (int64_t i = 0; i + 1 < W; ++i) e[i] = 1.0;
  if (!jmg_test_failed) solve_and_check(W, d, e, JMG_F64, 4, 8);
  /* Split in three equal blocks: dstebz orders by block, the sort by value. */
  g_rng = 5;
  for (int64_t i = 0; i < 67; ++i) {
    d[i] = uniform();
    e[i] = uniform();
  }
  for (int64_t i = 67; i < W; ++i) {
    d[i] = d[i % 67];
    e[i] = e[i % 67];
  }
  e[66] = e[133] = 0.0;
  if (!jmg_test_failed) solve_and_check(W, d, e, JMG_C64, 2, 30);
  g_fallback_only = 0;
}

/* A hundred copies of a 3 x 3 block glued by 1e-12: three clusters of a
 * hundred eigenvalues each within about 1e-12, far wider than the window
 * that moves a boundary (chunks of 16, moved by up to 4). Each cluster must
 * still come whole from one call (the boundary moves on to its end); split,
 * its vectors would not be orthogonal. By dstemr, and by the fallback. */
TEST(tridiagonal_clusters_wider_than_the_window_stay_whole) {
  NEED_LAPACK(have_lapack());
  enum { COPIES = 100, BLOCK = 3 };
  const int64_t n = COPIES * BLOCK;
  double d[COPIES * BLOCK], e[COPIES * BLOCK];
  for (int64_t i = 0; i < n; ++i) {
    d[i] = (double)(1 + i % BLOCK);
    e[i] = (i % BLOCK == BLOCK - 1) ? 1e-12 : 0.5;
  }
  solve_and_check(n, d, e, JMG_F64, 4, 16);
  g_fallback_only = 1;
  if (!jmg_test_failed) solve_and_check(n, d, e, JMG_C128, 3, 16);
  g_fallback_only = 0;
}
