/* potrs through its CPU handler (ffi/cpu_targets.c), on call frames built
 * by hand against the fake XLA runtime (fake_xla.h): frames it rejects,
 * the LAPACK routine it names where none is registered, solutions over
 * several participants on threads with reference LAPACK (ref_lapack.h),
 * groups of positions as independent calls, numerical failure as status and
 * NaN, and the log-determinant in every dtype. */
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
#include "ops/ops.h"
#include "ref_lapack.h"
#include "test.h"
#include "test_clock.h"

/* ---- rejected frames ----------------------------------------------------- */

TEST(ffi_potrs_rejects_bad_frames_promptly) {
  bound_rendezvous();
  enum { N = 4 };
  double a[N * N] = {0}, b[N] = {0}, x[N] = {0};
  float bf[N] = {0};
  int32_t ai[N * N] = {0};
  int32_t shard = 0, status = -1;
  const int64_t mesh = 101;
  frame_builder f;
#define FRESH()                                                              \
  build_potrs(&f, fresh_run_id(), mesh, 1, XLA_FFI_DataType_F64, a, N, N, b, \
              x, 1, &shard, &status)
#define REJECT(label, code, says) \
  EXPECT_REJECTED(label, jaxmg_potrs_cpu, &f, code, says)
  const XLA_FFI_Error_Code INVAL = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  int live = fake_xla_errors_live();

  FRESH();
  f.frame.args.size = 2;
  REJECT("2 args", INVAL, "expected 3 arguments and 3 results, got 2 and 3");
  FRESH();
  f.frame.rets.size = 4;
  f.ret_types[3] = XLA_FFI_RetType_BUFFER;
  f.rets[3] = f.rets[2];
  REJECT("4 rets", INVAL, "expected 3 arguments and 3 results, got 3 and 4");
  FRESH();
  f.bufs[0].rank = 1;
  REJECT("A rank 1", INVAL, "argument 0 (A) has rank 1, expected 2");
  FRESH();
  f.bufs[0].rank = 3;
  REJECT("A rank 3", INVAL, "argument 0 (A) has rank 3, expected 2");
  FRESH();
  f.bufs[0].dtype = f.bufs[3].dtype = XLA_FFI_DataType_S32;
  f.bufs[0].data = f.bufs[3].data = ai;
  REJECT("S32 A", INVAL, "A has XLA element type 4; jaxmg solves in");
  FRESH();
  f.bufs[0].dtype = XLA_FFI_DataType_F16;
  REJECT("F16 A", INVAL, "A has XLA element type 10");
  FRESH();
  f.dims[0][0] = 3; /* 3 rows of 4: not a shard of N=4 */
  f.dims[3][0] = 3;
  REJECT("A 3 x 4", INVAL,
         "A's shard is 3 x 4: the shard's rows must "
         "divide N");
  FRESH();
  f.dims[0][0] = 0;
  REJECT("A 0 x 4", INVAL, "the shard's rows must divide N");
  FRESH();
  f.frame.attrs.size = 0;
  fb_attr_i64(&f, NAME_MESH_ID, mesh); /* mesh_id only */
  REJECT("no T_A", INVAL, "attribute T_A is missing");
  FRESH();
  f.frame.attrs.size = 1; /* T_A only */
  REJECT("no mesh_id", INVAL, "attribute mesh_id is missing");
  FRESH();
  f.scalars[0].dtype = XLA_FFI_DataType_F64;
  REJECT("T_A float", INVAL, "attribute T_A has element type 12");
  /* The position operand is group * nparts + shard: only a negative one is
   * out of range (a larger one is another group's call). */
  FRESH();
  shard = -1;
  REJECT("position -1", INVAL, "shard position -1 is negative");
  shard = INT32_MIN;
  REJECT("position INT32_MIN", INVAL, "is negative");
  shard = 0;
  FRESH();
  f.bufs[2].dtype = XLA_FFI_DataType_S64;
  REJECT("S64 shard", INVAL,
         "the shard index has XLA element type 5, "
         "expected 4");
  FRESH();
  f.bufs[2].rank = 1;
  REJECT("rank-1 shard", INVAL,
         "argument 2 (shard index) has rank 1, "
         "expected 0");
  FRESH();
  f.ctx.run_id_fails = 1;
  REJECT("run id fails", XLA_FFI_Error_Code_INTERNAL,
         "XLA_FFI_RunId_Get: this runtime has no run id today");

  /* Past the plan (ffi/plan.h): these abort the call in the rendezvous. */
  FRESH();
  f.bufs[1].dtype = XLA_FFI_DataType_F32;
  f.bufs[1].data = bf;
  REJECT("F32 B", INVAL, "B has XLA element type 11, expected 12");
  FRESH();
  f.bufs[1].rank = 1;
  REJECT("rank-1 B", INVAL, "argument 1 (B) has rank 1, expected 2");
  FRESH();
  f.arg_types[1] = (XLA_FFI_ArgType)5;
  REJECT("B not a buffer", INVAL, "argument 1 (B) is not a buffer");
  FRESH();
  f.dims[1][1] = 5;
  REJECT("B 1 x 5", INVAL, "B has dimension 1 of size 5, expected 4");
  FRESH();
  f.dims[4][0] = 2;
  REJECT("X 2 x 4", INVAL, "X has dimension 0 of size 2, expected 1");
  FRESH();
  f.bufs[4].dtype = XLA_FFI_DataType_C128;
  REJECT("C128 X", INVAL, "X has XLA element type 18, expected 12");
  FRESH();
  f.bufs[5].dtype = XLA_FFI_DataType_F32;
  REJECT("F32 status", INVAL, "status has XLA element type 11, expected 4");
  FRESH();
  f.bufs[5].rank = 1;
  REJECT("rank-1 status", INVAL, "result 2 (status) has rank 1, expected 0");
  FRESH();
  f.dims[3][1] = 5;
  REJECT("result A 4 x 5", INVAL, "result A has dimension 1 of size 5");
  FRESH();
  f.bufs[3].dtype = XLA_FFI_DataType_F32;
  REJECT("F32 result A", INVAL, "result A has XLA element type 11");
  FRESH();
  f.values[0] = 0; /* T_A = 0: passes decoding, fails the op's checks */
  REJECT("T_A 0", INVAL, "T_A >= 1");
#undef FRESH
#undef REJECT
  CHECK_EQ(fake_xla_errors_live(), live);
  CHECK_EQ(fake_xla_bad_struct_size(), 0);
  CHECK_EQ(status, -1); /* never written */
}

/* ---- without LAPACK, then with the reference ----------------------------- */

/* The runner forgets every LAPACK routine before each test. */
TEST(ffi_potrs_without_lapack_names_dpotrf) {
  bound_rendezvous();
  CHECK(jmg_lapack_routines_for(JMG_F64)->potrf == NULL);
  enum { N = 4 };
  double a[N * N] = {0}, b[N] = {1, 2, 3, 4}, x[N] = {0};
  for (int i = 0; i < N; ++i) a[i * N + i] = 1.0;
  int32_t shard = 0, status = -1;
  frame_builder f;
  build_potrs(&f, fresh_run_id(), 301, 1, XLA_FFI_DataType_F64, a, N, N, b, x,
              1, &shard, &status);
  double t0 = now_s();
  xla_result r = take_error(call_handler(jaxmg_potrs_cpu, &f.frame));
  CHECK(now_s() - t0 < 2.0);
  CHECK_EQ(r.is_error, 1);
  CHECK_EQ(r.errc, XLA_FFI_Error_Code_UNIMPLEMENTED);
  CHECK_CONTAINS(r.msg, "LAPACK routine dpotrf was not registered");
  CHECK_CONTAINS(r.msg, "jaxmg.potrs");
  CHECK_CONTAINS(r.msg, "JMG_EUNSUPPORTED");
}

/* max_i |(A x_r)_i - b_r,i| over all right-hand sides; A row-major. */
static double residual(const double *A, const double *x, const double *b,
                       int64_t n, int64_t nrhs) {
  double worst = 0.0;
  for (int64_t r = 0; r < nrhs; ++r)
    for (int64_t i = 0; i < n; ++i) {
      double s = -b[r * n + i];
      for (int64_t j = 0; j < n; ++j) s += A[i * n + j] * x[r * n + j];
      if (!(fabs(s) <= worst)) worst = fabs(s); /* NaN propagates */
    }
  return worst;
}

/* Runs a potrs over nparts threads and checks it: status, x on every shard
 * the same and solving A x = b, b untouched. Asserts. */
static void check_potrs(int nparts, int64_t n, int64_t tile, int64_t nrhs,
                        int64_t mesh_id) {
  double *A = spd_matrix(n);
  double *B = malloc((size_t)(nrhs * n + 1) * sizeof *B);
  if (B == NULL) abort();
  for (int64_t i = 0; i < nrhs * n; ++i) B[i] = sin(1.0 + (double)i);
  shard_call *s =
      make_shard_calls(nparts, n, tile, mesh_id, fresh_run_id(), A, B, nrhs);
  run_shard_calls(s, nparts);
  char why[1200] = "";
  for (int d = 0; d < nparts && !why[0]; ++d) {
    const xla_result *r = &s[d].call.result;
    double res = residual(A, s[d].x, B, n, nrhs);
    if (r->is_error)
      snprintf(why, sizeof why, "shard %d failed: %s", d, r->msg);
    else if (s[d].status != 0)
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)s[d].status);
    else if (!(res < 1e-10))
      snprintf(why, sizeof why, "shard %d: residual %g", d, res);
    else if (memcmp(s[d].x, s[0].x, (size_t)(nrhs * n) * sizeof(double)))
      snprintf(why, sizeof why, "shard %d's x differs from shard 0's", d);
    else if (memcmp(s[d].b, B, (size_t)(nrhs * n) * sizeof(double)))
      snprintf(why, sizeof why, "shard %d's b was written", d);
  }
  free_shard_calls(s, nparts);
  free(A);
  free(B);
  if (why[0])
    TEST_FAIL_AT("potrs over %d shards, N=%lld T_A=%lld NRHS=%lld: %s", nparts,
                 (long long)n, (long long)tile, (long long)nrhs, why);
}

TEST(ffi_potrs_end_to_end_with_reference_lapack) {
  bound_rendezvous();
  register_reference_lapack();
  check_potrs(1, 6, 2, 2, 401);
  if (jmg_test_failed) return;
  check_potrs(4, 12, 1, 3, 402); /* unit 1, several cycles */
  if (jmg_test_failed) return;
  check_potrs(4, 12, 3, 1, 403); /* T_A = shard size: nothing moves */
  if (jmg_test_failed) return;
  check_potrs(4, 16, 2, 2, 404);
  if (jmg_test_failed) return;
  check_potrs(3, 18, 2, 1, 405);
  if (jmg_test_failed) return;
  check_potrs(4, 8, 1, 0, 406); /* no right-hand sides */
}

TEST(ffi_potrs_groups_of_positions_are_independent_calls) {
  bound_rendezvous();
  register_reference_lapack();
  /* Two groups of 2 shards under one mesh id and one run id, at the same
   * time: positions 0, 1 are group 0 (shards 0, 1), positions 2, 3 are
   * group 1 (shards 0, 1). Each group solves its own matrix. */
  enum { P = 2, N = 8, NRHS = 2 };
  double *A0 = spd_matrix(N), *A1 = spd_matrix(N);
  for (int i = 0; i < N; ++i) A1[i * N + i] += 5.0 * (double)(i % 3);
  double B[NRHS * N];
  for (int i = 0; i < NRHS * N; ++i) B[i] = cos((double)i);
  const int64_t run_id = fresh_run_id();
  shard_call *g0 = make_shard_calls(P, N, 1, 408, run_id, A0, B, NRHS);
  shard_call *g1 = make_shard_calls(P, N, 1, 408, run_id, A1, B, NRHS);
  for (int d = 0; d < P; ++d) g1[d].shard = P + d;
  ffi_call calls[2 * P];
  for (int d = 0; d < P; ++d) {
    calls[d] = g1[d].call; /* group 1 first, for good measure */
    calls[P + d] = g0[d].call;
  }
  run_calls(calls, 2 * P);
  char why[1200] = "";
  for (int d = 0; d < P && !why[0]; ++d) {
    const xla_result *r1 = &calls[d].result, *r0 = &calls[P + d].result;
    double res0 = residual(A0, g0[d].x, B, N, NRHS);
    double res1 = residual(A1, g1[d].x, B, N, NRHS);
    if (r0->is_error || r1->is_error)
      snprintf(why, sizeof why, "shard %d failed: %s", d,
               r0->is_error ? r0->msg : r1->msg);
    else if (g0[d].status != 0 || g1[d].status != 0)
      snprintf(why, sizeof why, "shard %d: status %d / %d", d,
               (int)g0[d].status, (int)g1[d].status);
    else if (!(res0 < 1e-10) || !(res1 < 1e-10))
      snprintf(why, sizeof why, "shard %d: residuals %g / %g", d, res0, res1);
  }
  free_shard_calls(g0, P);
  free_shard_calls(g1, P);
  free(A0);
  free(A1);
  if (why[0]) TEST_FAIL_AT("%s", why);
}

TEST(ffi_potrs_not_positive_definite_gives_status_and_nan) {
  bound_rendezvous();
  register_reference_lapack();
  enum { P = 4, N = 12, NRHS = 2 };
  /* Leading minors of order 1 and 2 are positive, of order 3 negative. */
  double *A = spd_matrix(N);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) A[i * N + j] *= (i == j ? 1.0 : 0.01);
  A[2 * N + 2] = -3.0;
  double B[NRHS * N];
  for (int i = 0; i < NRHS * N; ++i) B[i] = 1.0;
  shard_call *s = make_shard_calls(P, N, 1, 407, fresh_run_id(), A, B, NRHS);
  run_shard_calls(s, P);
  int bad = -1;
  char what[1200] = "";
  for (int d = 0; d < P && bad < 0; ++d) {
    if (s[d].call.result.is_error) {
      bad = d;
      snprintf(what, sizeof what, "error %s", s[d].call.result.msg);
    } else if (s[d].status != 3) {
      bad = d;
      snprintf(what, sizeof what, "status %d, expected 3", (int)s[d].status);
    } else {
      for (int i = 0; i < NRHS * N; ++i)
        if (!isnan(s[d].x[i])) {
          bad = d;
          snprintf(what, sizeof what, "x[%d] = %g is not NaN", i, s[d].x[i]);
          break;
        }
    }
  }
  free_shard_calls(s, P);
  free(A);
  if (bad >= 0) TEST_FAIL_AT("shard %d: %s", bad, what);
}

TEST(ffi_potrs_nonfinite_a_gives_status_minus_one_and_nan) {
  bound_rendezvous();
  register_reference_lapack();
  enum { P = 4, N = 12, NRHS = 2 };
  /* A NaN, then an Inf, in a strict triangle of a positive definite A (the
   * solver would read one triangle only: the check reads all of A). */
  const double bad_values[2] = {NAN, -INFINITY};
  const int where[2] = {7 * N + 1, 2 * N + 10};
  char what[1200] = "";
  for (int t = 0; t < 2 && !what[0]; ++t) {
    double *A = spd_matrix(N);
    A[where[t]] = bad_values[t];
    double B[NRHS * N];
    for (int i = 0; i < NRHS * N; ++i) B[i] = 1.0;
    shard_call *s =
        make_shard_calls(P, N, 1, 408 + t, fresh_run_id(), A, B, NRHS);
    run_shard_calls(s, P);
    for (int d = 0; d < P && !what[0]; ++d) {
      if (s[d].call.result.is_error)
        snprintf(what, sizeof what, "case %d, shard %d: error %s", t, d,
                 s[d].call.result.msg);
      else if (s[d].status != JMG_INFO_NONFINITE)
        snprintf(what, sizeof what, "case %d, shard %d: status %d, expected %d",
                 t, d, (int)s[d].status, JMG_INFO_NONFINITE);
      for (int i = 0; i < NRHS * N && !what[0]; ++i)
        if (!isnan(s[d].x[i]))
          snprintf(what, sizeof what, "case %d, shard %d: x[%d] = %g", t, d, i,
                   s[d].x[i]);
      for (int i = 0; i < N * N / P && !what[0]; ++i)
        if (!isnan(s[d].a[i]))
          snprintf(what, sizeof what, "case %d, shard %d: a[%d] = %g", t, d, i,
                   s[d].a[i]);
    }
    free_shard_calls(s, P);
    free(A);
  }
  if (what[0]) TEST_FAIL_AT("%s", what);
}

/* ---- the log-determinant (want_logdet) ----------------------------------- */

/* An n x n Hermitian positive definite matrix (row-major; complex parts off
 * the diagonal for complex t), as stored in t; with bad_minor >= 1 the
 * leading minor of that order is made negative. */
static double complex *hpd_matrix(jmg_dtype t, int64_t n, int bad_minor) {
  double complex *A = malloc((size_t)(n * n) * sizeof *A);
  void *tmp = malloc(16);
  if (A == NULL || tmp == NULL) abort();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double complex e =
          1.0 / (double)(1 + i + j) + (i == j ? (double)n + (double)i : 0.0);
      if (jmg_dtype_is_complex(t))
        e += 0.3 * (double)(i - j) / (double)(1 + i + j) * I;
      if (bad_minor >= 1 && i == bad_minor - 1 && j == i) e = -3.0;
      ref_store(t, tmp, 0, e);
      A[i * n + j] = ref_load(t, tmp, 0);
    }
  free(tmp);
  return A;
}

/* log det A of a Hermitian positive definite A (row-major, as stored), by
 * the reference Cholesky in double complex. */
static double ref_logdet(const double complex *A, int64_t n) {
  double complex *L = malloc((size_t)(n * n) * sizeof *L);
  if (L == NULL) abort();
  memcpy(L, A, (size_t)(n * n) * sizeof *L);
  char lower = 'L';
  int N = (int)n, info = 0;
  /* Row-major A is column-major A^T = conj(A): the same determinant. */
  ref_potrf(JMG_C128, &lower, &N, L, &N, &info);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += log(creal(L[i * n + i]));
  free(L);
  return info == 0 ? 2.0 * sum : NAN;
}

/* Runs a potrs with want_logdet over nparts threads in dtype t; checks every
 * shard's status, its logdet against want (NaN: must be NaN) and, when
 * status is 0, that x solves the system closely. Asserts. */
static void check_potrs_logdet(int nparts, jmg_dtype t, int64_t n, int64_t tile,
                               int bad_minor, int64_t mesh_id) {
  enum { NRHS = 2 };
  const size_t es = jmg_dtype_size(t);
  const int64_t lc = n / nparts;
  const int64_t run_id = fresh_run_id();
  /* logdet is real: rank 0, of A's real type */
  const XLA_FFI_DataType real_dt = jmg_dtype_real_size(t) == 4
                                       ? XLA_FFI_DataType_F32
                                       : XLA_FFI_DataType_F64;
  double complex *A = hpd_matrix(t, n, bad_minor);
  const double want = bad_minor >= 1 ? NAN : ref_logdet(A, n);
  typed_call *s = calloc((size_t)nparts, sizeof *s);
  double ld[16][2];
  if (s == NULL) abort();
  for (int d = 0; d < nparts; ++d) {
    s[d].shard = d;
    s[d].status = -99;
    s[d].a = malloc((size_t)(lc * n) * es);
    s[d].b = malloc((size_t)(NRHS * n) * es);
    s[d].x = malloc((size_t)(NRHS * n) * es);
    if (!s[d].a || !s[d].b || !s[d].x) abort();
    for (int64_t i = 0; i < lc * n; ++i)
      ref_store(t, s[d].a, (size_t)i, A[d * lc * n + i]);
    for (int64_t i = 0; i < NRHS * n; ++i) ref_store(t, s[d].b, (size_t)i, 1.0);
    ld[d][0] = ld[d][1] = -777.0;
    build_potrs_logdet(&s[d].f, run_id, mesh_id, tile, k_xla_types[t], s[d].a,
                       lc, n, s[d].b, s[d].x, NRHS, real_dt, ld[d],
                       &s[d].shard, &s[d].status);
    s[d].call.handler = jaxmg_potrs_cpu;
    s[d].call.frame = &s[d].f.frame;
  }
  ffi_call calls[16];
  for (int d = 0; d < nparts; ++d) calls[d] = s[d].call;
  run_calls(calls, nparts);
  const double tol = jmg_dtype_real_size(t) == 4 ? 1e-4 : 1e-11;
  char why[1200] = "";
  for (int d = 0; d < nparts && !why[0]; ++d) {
    float single;
    memcpy(&single, ld[d], sizeof single);
    const double got = jmg_dtype_real_size(t) == 4 ? (double)single : ld[d][0];
    if (calls[d].result.is_error)
      snprintf(why, sizeof why, "shard %d failed: %s", d, calls[d].result.msg);
    else if (s[d].status != (bad_minor >= 1 ? bad_minor : 0))
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)s[d].status);
    else if (isnan(want) ? !isnan(got)
                         : !(fabs(got - want) <= tol * fabs(want)))
      snprintf(why, sizeof why, "shard %d: logdet %.17g, expected %.17g", d,
               got, want);
  }
  free_typed_calls(s, nparts);
  free(A);
  if (why[0])
    TEST_FAIL_AT("potrs logdet, dtype %d, %d shards, N=%lld T_A=%lld: %s",
                 (int)t, nparts, (long long)n, (long long)tile, why);
}

TEST(ffi_potrs_logdet_every_dtype_with_reference_lapack) {
  bound_rendezvous();
  register_reference_cholesky();
  for (int t = 0; t < JMG_NUM_DTYPES && !jmg_test_failed; ++t) {
    check_potrs_logdet(1, (jmg_dtype)t, 6, 2, 0, 700 + t);
    if (!jmg_test_failed)
      check_potrs_logdet(4, (jmg_dtype)t, 16, 2, 0, 710 + t);
    if (!jmg_test_failed)
      check_potrs_logdet(2, (jmg_dtype)t, 12, 3, 0, 720 + t);
  }
}

TEST(ffi_potrs_logdet_is_nan_when_not_positive_definite) {
  bound_rendezvous();
  register_reference_cholesky();
  for (int t = 0; t < JMG_NUM_DTYPES && !jmg_test_failed; ++t)
    check_potrs_logdet(4, (jmg_dtype)t, 12, 1, 3, 730 + t);
}
