/* potri through its CPU handler (ffi/cpu_targets.c), on call frames built
 * by hand against the fake XLA runtime (fake_xla.h): frames it rejects,
 * the inverse over several participants on threads with reference LAPACK
 * (ref_lapack.h) in A's own layout, a result buffer apart from the
 * argument, numerical failure as status and NaN. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_calls.h"
#include "fake_xla.h"
#include "ref_lapack.h"
#include "test.h"

/* ---- rejected frames ----------------------------------------------------- */

TEST(ffi_potri_rejects_bad_frames_promptly) {
  bound_rendezvous();
  enum { N = 4 };
  double a[N * N] = {0};
  int32_t shard = 0, status = -1;
  const int64_t mesh = 102;
  const XLA_FFI_Error_Code INVAL = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  frame_builder f;
#define REJECT(handler, label, says) \
  EXPECT_REJECTED(label, handler, &f, INVAL, says)
#define POTRI()                                                           \
  build_potri(&f, fresh_run_id(), mesh, 1, XLA_FFI_DataType_F64, a, N, N, \
              &shard, &status)

  POTRI();
  f.frame.args.size = 3;
  f.arg_types[2] = XLA_FFI_ArgType_BUFFER;
  f.args[2] = f.args[1];
  REJECT(jaxmg_potri_cpu, "potri 3 args",
         "expected 2 arguments and 2 "
         "results, got 3 and 2");
  POTRI();
  f.frame.rets.size = 1;
  REJECT(jaxmg_potri_cpu, "potri 1 ret", "got 2 and 1");
  POTRI();
  f.bufs[0].rank = 1;
  REJECT(jaxmg_potri_cpu, "potri A rank 1", "argument 0 (A) has rank 1");
  POTRI();
  f.bufs[0].dtype = XLA_FFI_DataType_S32;
  REJECT(jaxmg_potri_cpu, "potri S32 A", "A has XLA element type 4");
  POTRI();
  f.dims[0][0] = 3;
  REJECT(jaxmg_potri_cpu, "potri A 3 x 4", "must divide N");
  POTRI();
  f.frame.attrs.size = 0;
  REJECT(jaxmg_potri_cpu, "potri no attrs", "attribute mesh_id is missing");
  POTRI();
  shard = -2;
  REJECT(jaxmg_potri_cpu, "potri position -2",
         "shard position -2 is "
         "negative");
  shard = 0;
  POTRI();
  f.bufs[3].dtype = XLA_FFI_DataType_S64;
  REJECT(jaxmg_potri_cpu, "potri S64 status", "status has XLA element type 5");

#undef REJECT
#undef POTRI
  CHECK_EQ(status, -1);
}

/* ---- with LAPACK --------------------------------------------------------- */

/* Runs a potri over nparts threads; checks that every shard gets back its
 * own rows of inv(A), in A's own layout, both triangles. Asserts. */
static void check_potri(int nparts, int64_t n, int64_t tile, int64_t mesh_id) {
  double *A = spd_matrix(n);
  shard_call *s =
      make_shard_calls(nparts, n, tile, mesh_id, fresh_run_id(), A, NULL, 0);
  run_shard_calls(s, nparts);
  char why[1200] = "";
  const int64_t lc = n / nparts;
  double *inv = malloc((size_t)(n * n) * sizeof *inv);
  if (inv == NULL) abort();
  for (int d = 0; d < nparts && !why[0]; ++d) {
    if (s[d].call.result.is_error)
      snprintf(why, sizeof why, "shard %d failed: %s", d, s[d].call.result.msg);
    else if (s[d].status != 0)
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)s[d].status);
    else
      memcpy(inv + d * lc * n, s[d].a, (size_t)(lc * n) * sizeof(double));
  }
  for (int64_t i = 0; i < n && !why[0]; ++i)
    for (int64_t j = 0; j < n && !why[0]; ++j) {
      double e = (i == j) ? -1.0 : 0.0;
      for (int64_t k = 0; k < n; ++k) e += A[i * n + k] * inv[k * n + j];
      if (!(fabs(e) < 1e-12))
        snprintf(why, sizeof why, "(A inv(A))[%lld][%lld] is off by %g",
                 (long long)i, (long long)j, e);
      else if (inv[i * n + j] != inv[j * n + i])
        snprintf(why, sizeof why, "inv(A) not symmetric at %lld, %lld",
                 (long long)i, (long long)j);
    }
  free(inv);
  free_shard_calls(s, nparts);
  free(A);
  if (why[0])
    TEST_FAIL_AT("potri over %d shards, N=%lld T_A=%lld: %s", nparts,
                 (long long)n, (long long)tile, why);
}

TEST(ffi_potri_end_to_end_returns_inverse_in_original_layout) {
  bound_rendezvous();
  register_reference_lapack();
  check_potri(1, 5, 1, 501);
  if (jmg_test_failed) return;
  check_potri(4, 12, 1, 502);
  if (jmg_test_failed) return;
  check_potri(4, 16, 2, 503);
  if (jmg_test_failed) return;
  check_potri(2, 10, 5, 504);
  if (jmg_test_failed) return;
  check_potri(8, 24, 1, 505);
}

TEST(ffi_potri_separate_result_buffer_leaves_input_alone) {
  bound_rendezvous();
  register_reference_lapack();
  enum { N = 5 };
  double *A = spd_matrix(N);
  double in[N * N], out[N * N];
  memcpy(in, A, sizeof in);
  for (int i = 0; i < N * N; ++i) out[i] = -1.0;
  int32_t shard = 0, status = -1;
  frame_builder f;
  build_potri(&f, fresh_run_id(), 506, 2, XLA_FFI_DataType_F64, in, N, N,
              &shard, &status);
  f.bufs[2].data = out; /* result A is not aliased to argument A */
  xla_result r = take_error(call_handler(jaxmg_potri_cpu, &f.frame));
  int input_intact = memcmp(in, A, sizeof in) == 0;
  double worst = 0.0;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      double e = (i == j) ? -1.0 : 0.0;
      for (int k = 0; k < N; ++k) e += A[i * N + k] * out[k * N + j];
      if (!(fabs(e) <= worst)) worst = fabs(e);
    }
  free(A);
  CHECK_EQ(r.is_error, 0);
  CHECK_EQ(status, 0);
  CHECK(input_intact);
  CHECK(worst < 1e-12);
}

TEST(ffi_potri_not_positive_definite_gives_status_and_nan) {
  bound_rendezvous();
  register_reference_lapack();
  enum { P = 2, N = 6 };
  double *A = spd_matrix(N);
  A[0] = -1.0; /* the leading minor of order 1 */
  shard_call *s = make_shard_calls(P, N, 1, 507, fresh_run_id(), A, NULL, 0);
  run_shard_calls(s, P);
  int ok = 1;
  for (int d = 0; d < P; ++d) {
    if (s[d].call.result.is_error || s[d].status != 1) ok = 0;
    for (int i = 0; i < N * N / P; ++i)
      if (!isnan(s[d].a[i])) ok = 0;
  }
  free_shard_calls(s, P);
  free(A);
  CHECK(ok);
}
