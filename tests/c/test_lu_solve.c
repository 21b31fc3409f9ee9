/* lu_solve through its CPU handler (ffi/cpu_targets.c), on call frames
 * built by hand against the fake XLA runtime (fake_xla.h): the LAPACK
 * routine it names where none is registered, solutions of A X = B and
 * Aᵀ X = B in every dtype over several participants on threads with a
 * reference getrf / getrs (written here), a singular A as the first zero
 * pivot and NaN, and shards that disagree on the transpose. */
#define _POSIX_C_SOURCE 200809L
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_calls.h"
#include "engine/lapack/table.h"
#include "fake_xla.h"
#include "ref_lapack.h"
#include "test.h"

/* lu_solve: args A (lc x n), B (nrhs x n), shard; rets A, X (nrhs x n),
 * status; attrs T_A, mesh_id, trans. */
static const char k_trans[] = "trans#";
static void build_lu_solve(frame_builder *f, int64_t run_id, int64_t mesh_id,
                           int64_t tile, int64_t trans, XLA_FFI_DataType dt,
                           void *a, int64_t lc, int64_t n, void *b, void *x,
                           int64_t nrhs, int32_t *shard, int32_t *status) {
  build_potrs(f, run_id, mesh_id, tile, dt, a, lc, n, b, x, nrhs, shard,
              status); /* potrs's frame, and trans */
  fb_attr_scalar(f, k_trans, 5, XLA_FFI_DataType_PRED, trans);
}

/* The runner forgets every LAPACK routine before each test. */
TEST(ffi_lu_solve_without_lapack_names_dgetrf) {
  bound_rendezvous();
  CHECK(jmg_lapack_routines_for(JMG_F64)->getrf == NULL);
  enum { N = 4 };
  double a[N * N] = {0}, b[N] = {1, 2, 3, 4}, x[N] = {0};
  for (int i = 0; i < N; ++i) a[i * N + i] = 1.0;
  int32_t shard = 0, status = -1;
  frame_builder f;
  build_lu_solve(&f, fresh_run_id(), 601, 1, 0, XLA_FFI_DataType_F64, a, N, N,
                 b, x, 1, &shard, &status);
  xla_result r = take_error(call_handler(jaxmg_lu_solve_cpu, &f.frame));
  CHECK_EQ(r.is_error, 1);
  CHECK_EQ(r.errc, XLA_FFI_Error_Code_UNIMPLEMENTED);
  CHECK_CONTAINS(r.msg, "LAPACK routine dgetrf was not registered");
  CHECK_CONTAINS(r.msg, "jaxmg.lu_solve");
}

/* Reference getrf/getrs for every dtype, Fortran-style pointer arguments
 * (engine/lapack/table.h), computed in double complex: plain, unblocked, with
 * LAPACK's conventions (1-based pivots, the first exactly zero pivot in info
 * and the factorization carried on). getrs refuses trans 'C', which jaxmg
 * must never ask for (ops/lu_solve.c). */
static double cabs1(double complex v) {
  return fabs(creal(v)) + fabs(cimag(v));
}

static void ref_getrf(jmg_dtype t, int *m, int *n, void *a, int *lda, int *ipiv,
                      int *info) {
  const int M = *m, N = *n, ld = *lda;
  *info = 0;
  if (M != N) {
    *info = -1;
    return;
  }
#define A_(i, j) ((size_t)(i) + (size_t)(j) * (size_t)ld)
  for (int j = 0; j < N; ++j) {
    int p = j;
    for (int i = j + 1; i < N; ++i)
      if (cabs1(ref_load(t, a, A_(i, j))) > cabs1(ref_load(t, a, A_(p, j))))
        p = i;
    ipiv[j] = p + 1;
    for (int k = 0; k < N && p != j; ++k) {
      double complex s = ref_load(t, a, A_(j, k));
      ref_store(t, a, A_(j, k), ref_load(t, a, A_(p, k)));
      ref_store(t, a, A_(p, k), s);
    }
    double complex piv = ref_load(t, a, A_(j, j));
    if (piv == 0.0) {
      if (*info == 0) *info = j + 1;
      continue;
    }
    for (int i = j + 1; i < N; ++i) {
      double complex l = ref_load(t, a, A_(i, j)) / piv;
      ref_store(t, a, A_(i, j), l);
      for (int k = j + 1; k < N; ++k)
        ref_store(t, a, A_(i, k),
                  ref_load(t, a, A_(i, k)) - l * ref_load(t, a, A_(j, k)));
    }
  }
}

static void ref_getrs(jmg_dtype t, char *trans, int *n, int *nrhs, void *a,
                      int *lda, int *ipiv, void *b, int *ldb, int *info) {
  const int N = *n, ld = *lda;
  *info = 0;
  if (*trans != 'N' && *trans != 'T') {
    *info = -1;
    return;
  }
  double complex *y = malloc((size_t)(N > 0 ? N : 1) * sizeof *y);
  if (y == NULL) abort();
  for (int r = 0; r < *nrhs; ++r) {
    const size_t off = (size_t)r * (size_t)*ldb;
    for (int i = 0; i < N; ++i) y[i] = ref_load(t, b, off + (size_t)i);
    if (*trans == 'N') { /* P L U x = b */
      for (int i = 0; i < N; ++i) {
        double complex s = y[i];
        y[i] = y[ipiv[i] - 1];
        y[ipiv[i] - 1] = s;
      }
      for (int i = 0; i < N; ++i)
        for (int k = 0; k < i; ++k) y[i] -= ref_load(t, a, A_(i, k)) * y[k];
      for (int i = N - 1; i >= 0; --i) {
        for (int k = i + 1; k < N; ++k) y[i] -= ref_load(t, a, A_(i, k)) * y[k];
        y[i] /= ref_load(t, a, A_(i, i));
      }
    } else { /* Uᵀ Lᵀ Pᵀ x = b */
      for (int i = 0; i < N; ++i) {
        for (int k = 0; k < i; ++k) y[i] -= ref_load(t, a, A_(k, i)) * y[k];
        y[i] /= ref_load(t, a, A_(i, i));
      }
      for (int i = N - 1; i >= 0; --i)
        for (int k = i + 1; k < N; ++k) y[i] -= ref_load(t, a, A_(k, i)) * y[k];
      for (int i = N - 1; i >= 0; --i) {
        double complex s = y[i];
        y[i] = y[ipiv[i] - 1];
        y[ipiv[i] - 1] = s;
      }
    }
    for (int i = 0; i < N; ++i) ref_store(t, b, off + (size_t)i, y[i]);
  }
  free(y);
#undef A_
}

#define REF_LU(p, T)                                                       \
  static void ref_##p##getrf(int *m, int *n, void *a, int *lda, int *ipiv, \
                             int *info) {                                  \
    ref_getrf(T, m, n, a, lda, ipiv, info);                                \
  }                                                                        \
  static void ref_##p##getrs(char *trans, int *n, int *nrhs, void *a,      \
                             int *lda, int *ipiv, void *b, int *ldb,       \
                             int *info) {                                  \
    ref_getrs(T, trans, n, nrhs, a, lda, ipiv, b, ldb, info);              \
  }
REF_LU(s, JMG_F32)
REF_LU(d, JMG_F64)
REF_LU(c, JMG_C64)
REF_LU(z, JMG_C128)
#undef REF_LU

void register_reference_lu(void) {
  if (jaxmg_cpu_register_lapack("sgetrf", (void *)ref_sgetrf) != 0 ||
      jaxmg_cpu_register_lapack("dgetrf", (void *)ref_dgetrf) != 0 ||
      jaxmg_cpu_register_lapack("cgetrf", (void *)ref_cgetrf) != 0 ||
      jaxmg_cpu_register_lapack("zgetrf", (void *)ref_zgetrf) != 0 ||
      jaxmg_cpu_register_lapack("sgetrs", (void *)ref_sgetrs) != 0 ||
      jaxmg_cpu_register_lapack("dgetrs", (void *)ref_dgetrs) != 0 ||
      jaxmg_cpu_register_lapack("cgetrs", (void *)ref_cgetrs) != 0 ||
      jaxmg_cpu_register_lapack("zgetrs", (void *)ref_zgetrs) != 0)
    abort();
}

/* A random, strongly non-symmetric n x n matrix in dtype t (row-major; the
 * upper triangle four times the lower, complex parts as large as the real
 * ones), with row `zero_row` zero when >= 0. Stored in t and returned in
 * double complex as stored. */
static double complex *lu_matrix(jmg_dtype t, int64_t n, uint64_t seed,
                                 int64_t zero_row) {
  double complex *A = malloc((size_t)(n * n) * sizeof *A);
  void *tmp = malloc(16);
  if (A == NULL || tmp == NULL) abort();
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double v[2];
      for (int k = 0; k < 2; ++k) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[k] = (double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
      }
      double scale = j > i ? 4.0 : 1.0;
      double complex e =
          scale * (v[0] + (jmg_dtype_is_complex(t) ? v[1] : 0.0) * I);
      if (i == zero_row) e = 0.0;
      ref_store(t, tmp, 0, e);
      A[i * n + j] = ref_load(t, tmp, 0);
    }
  free(tmp);
  return A;
}

/* Runs nparts lu_solve participants over A (double complex, row-major) and
 * right-hand sides B (nrhs x n, row r = rhs r, both as stored in t). */
static typed_call *run_lu_calls(int nparts, jmg_dtype t, int64_t n,
                                int64_t tile, int64_t trans,
                                const double complex *A,
                                const double complex *B, int64_t nrhs,
                                int64_t mesh_id) {
  const size_t es = jmg_dtype_size(t);
  const int64_t lc = n / nparts;
  const int64_t run_id = fresh_run_id();
  typed_call *s = calloc((size_t)nparts, sizeof *s);
  if (s == NULL) abort();
  for (int d = 0; d < nparts; ++d) {
    s[d].shard = d;
    s[d].status = -99;
    s[d].a = malloc((size_t)(lc * n) * es);
    s[d].b = malloc((size_t)(nrhs * n + 1) * es);
    s[d].x = malloc((size_t)(nrhs * n + 1) * es);
    if (!s[d].a || !s[d].b || !s[d].x) abort();
    for (int64_t i = 0; i < lc * n; ++i)
      ref_store(t, s[d].a, (size_t)i, A[d * lc * n + i]);
    for (int64_t i = 0; i < nrhs * n; ++i) {
      ref_store(t, s[d].b, (size_t)i, B[i]);
      ref_store(t, s[d].x, (size_t)i, -777.0);
    }
    build_lu_solve(&s[d].f, run_id, mesh_id, tile, trans, k_xla_types[t],
                   s[d].a, lc, n, s[d].b, s[d].x, nrhs, &s[d].shard,
                   &s[d].status);
    s[d].call.handler = jaxmg_lu_solve_cpu;
    s[d].call.frame = &s[d].f.frame;
  }
  ffi_call calls[16];
  for (int d = 0; d < nparts; ++d) calls[d] = s[d].call;
  run_calls(calls, nparts);
  for (int d = 0; d < nparts; ++d) s[d].call = calls[d];
  return s;
}

/* The normwise backward error of x as a solution of op(A) x = b, for every
 * right-hand side: max |op(A) x - b| / (|A| |x| + |b|) in the max norm, op
 * the transpose (not conjugated) when trans. NaN propagates. */
static double lu_backward_error(jmg_dtype t, const double complex *A,
                                const void *x, const double complex *B,
                                int64_t n, int64_t nrhs, int64_t trans) {
  double worst = 0.0, norm_a = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double row = 0.0;
    for (int64_t j = 0; j < n; ++j)
      row += cabs(trans ? A[j * n + i] : A[i * n + j]);
    if (row > norm_a) norm_a = row;
  }
  for (int64_t r = 0; r < nrhs; ++r) {
    double norm_x = 0.0, norm_b = 0.0, res = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      double ax = cabs(ref_load(t, x, (size_t)(r * n + i)));
      if (!(ax <= norm_x)) norm_x = ax;
      if (cabs(B[r * n + i]) > norm_b) norm_b = cabs(B[r * n + i]);
    }
    for (int64_t i = 0; i < n; ++i) {
      double complex s = -B[r * n + i];
      for (int64_t j = 0; j < n; ++j)
        s += (trans ? A[j * n + i] : A[i * n + j]) *
             ref_load(t, x, (size_t)(r * n + j));
      if (!(cabs(s) <= res)) res = cabs(s);
    }
    double e = res / (norm_a * norm_x + norm_b);
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

/* Solves op(A) X = B for a random non-symmetric A over nparts threads and
 * checks: status 0, X the same on every shard, a small backward error (and
 * a large one for the other op, so that a wrong transpose cannot pass), B
 * untouched. Asserts. */
static void check_lu_solve(int nparts, jmg_dtype t, int64_t n, int64_t tile,
                           int64_t nrhs, int64_t trans, int64_t mesh_id) {
  const size_t es = jmg_dtype_size(t);
  const double eps = jmg_dtype_real_size(t) == 4 ? 1.2e-7 : 2.3e-16;
  double complex *A = lu_matrix(t, n, (uint64_t)(mesh_id * 7 + t), -1);
  double complex *B = lu_matrix(t, n, (uint64_t)(mesh_id * 11 + t + 1), -1);
  typed_call *s = run_lu_calls(nparts, t, n, tile, trans, A, B, nrhs, mesh_id);
  void *b_stored = malloc((size_t)(nrhs * n + 1) * es);
  if (b_stored == NULL) abort();
  for (int64_t i = 0; i < nrhs * n; ++i)
    ref_store(t, b_stored, (size_t)i, B[i]);
  char why[1200] = "";
  for (int d = 0; d < nparts && !why[0]; ++d) {
    const xla_result *r = &s[d].call.result;
    double berr = lu_backward_error(t, A, s[d].x, B, n, nrhs, trans);
    double other = lu_backward_error(t, A, s[d].x, B, n, nrhs, !trans);
    if (r->is_error)
      snprintf(why, sizeof why, "shard %d failed: %s", d, r->msg);
    else if (s[d].status != 0)
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)s[d].status);
    else if (!(berr < 64.0 * (double)n * eps))
      snprintf(why, sizeof why, "shard %d: backward error %g", d, berr);
    else if (nrhs > 0 && n > 1 && !(other > 1e-3))
      snprintf(why, sizeof why, "shard %d: solves the other op too (%g)", d,
               other);
    else if (memcmp(s[d].x, s[0].x, (size_t)(nrhs * n) * es))
      snprintf(why, sizeof why, "shard %d's x differs from shard 0's", d);
    else if (memcmp(s[d].b, b_stored, (size_t)(nrhs * n) * es))
      snprintf(why, sizeof why, "shard %d's b was written", d);
  }
  free_typed_calls(s, nparts);
  free(b_stored);
  free(A);
  free(B);
  if (why[0])
    TEST_FAIL_AT(
        "lu_solve %s over %d shards, N=%lld T_A=%lld NRHS=%lld "
        "trans=%lld: %s",
        jmg_dtype_name(t), nparts, (long long)n, (long long)tile,
        (long long)nrhs, (long long)trans, why);
}

TEST(ffi_lu_solve_end_to_end_every_dtype_and_transpose) {
  bound_rendezvous();
  register_reference_lu();
  static const struct {
    int nparts;
    int64_t n, tile, nrhs;
  } cases[] = {
      {1, 6, 2, 2},  {4, 12, 1, 3}, /* unit 1, several cycles */
      {4, 12, 3, 1},                /* T_A = shard size: nothing moves */
      {4, 16, 2, 2}, {3, 18, 2, 1},
      {2, 20, 5, 4}, {4, 8, 1, 0}, /* no right-hand sides */
  };
  int64_t mesh = 610;
  for (int t = 0; t < JMG_NUM_DTYPES; ++t)
    for (int64_t trans = 0; trans < 2; ++trans)
      for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        check_lu_solve(cases[c].nparts, (jmg_dtype)t, cases[c].n, cases[c].tile,
                       cases[c].nrhs, trans, mesh++);
        if (jmg_test_failed) return;
      }
}

TEST(ffi_lu_solve_singular_gives_first_zero_pivot_and_nan) {
  bound_rendezvous();
  register_reference_lu();
  enum { P = 4, N = 12, NRHS = 2 };
  /* A's row 2 is zero: the engine holds Aᵀ, whose column 2 stays zero
   * through the elimination, so U(3, 3) is the first exactly zero pivot. */
  for (int t = 0; t < JMG_NUM_DTYPES; ++t)
    for (int64_t trans = 0; trans < 2; ++trans) {
      double complex *A = lu_matrix((jmg_dtype)t, N, 77, 2);
      double complex *B = lu_matrix((jmg_dtype)t, N, 78, -1);
      typed_call *s = run_lu_calls(P, (jmg_dtype)t, N, 1, trans, A, B, NRHS,
                                   620 + 2 * t + trans);
      char what[1200] = "";
      for (int d = 0; d < P && !what[0]; ++d) {
        if (s[d].call.result.is_error)
          snprintf(what, sizeof what, "shard %d: error %s", d,
                   s[d].call.result.msg);
        else if (s[d].status != 3)
          snprintf(what, sizeof what, "shard %d: status %d, expected 3", d,
                   (int)s[d].status);
        for (int i = 0; i < NRHS * N && !what[0]; ++i) {
          double complex v = ref_load((jmg_dtype)t, s[d].x, (size_t)i);
          if (!isnan(creal(v)))
            snprintf(what, sizeof what, "shard %d: x[%d] = %g is not NaN", d, i,
                     creal(v));
        }
      }
      free_typed_calls(s, P);
      free(A);
      free(B);
      if (what[0])
        TEST_FAIL_AT("%s trans=%lld: %s", jmg_dtype_name((jmg_dtype)t),
                     (long long)trans, what);
      if (jmg_test_failed) return;
    }
}

TEST(ffi_lu_solve_shards_disagreeing_on_trans_fail_everyone) {
  bound_rendezvous();
  register_reference_lu();
  enum { P = 2, N = 8, NRHS = 1 };
  double complex *A = lu_matrix(JMG_F64, N, 90, -1);
  double complex *B = lu_matrix(JMG_F64, N, 91, -1);
  const int64_t run_id = fresh_run_id();
  typed_call s[P];
  memset(s, 0, sizeof s);
  double a[P][N * N / P], b[P][N], x[P][N];
  for (int d = 0; d < P; ++d) {
    s[d].shard = d;
    s[d].status = -99;
    for (int i = 0; i < N * N / P; ++i) a[d][i] = creal(A[d * N * N / P + i]);
    for (int i = 0; i < N; ++i) b[d][i] = creal(B[i]);
    build_lu_solve(&s[d].f, run_id, 630, 1, d, XLA_FFI_DataType_F64, a[d],
                   N / P, N, b[d], x[d], NRHS, &s[d].shard, &s[d].status);
    s[d].call.handler = jaxmg_lu_solve_cpu;
    s[d].call.frame = &s[d].f.frame;
  }
  ffi_call calls[P];
  for (int d = 0; d < P; ++d) calls[d] = s[d].call;
  run_calls(calls, P);
  free(A);
  free(B);
  for (int d = 0; d < P; ++d) {
    CHECK_EQ(calls[d].result.is_error, 1);
    CHECK_CONTAINS(calls[d].result.msg, "describes a different call");
  }
}
