/* syevd through its CPU handler (ffi/cpu_targets.c), on call frames built
 * by hand against the fake XLA runtime (fake_xla.h): frames it rejects, and
 * the LAPACK routine it names where none is registered (dsyevd for real
 * dtypes, zheevd for complex). Its solutions are checked with the system's
 * LAPACK in test_engine_lapack_local.c and in the Python tests. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <string.h>

#include "engine/lapack/table.h"
#include "fake_xla.h"
#include "test.h"

/* syevd: args A, shard; rets A, W (n, real), status; attrs T_A, mesh_id,
 * want_vectors. */
static void build_syevd(frame_builder *f, int64_t run_id, int64_t mesh_id,
                        int64_t tile, XLA_FFI_DataType dt, void *a, int64_t lc,
                        int64_t n, XLA_FFI_DataType real, void *w,
                        int32_t *shard, int32_t *status) {
  fb_init(f, fake_xla_api(), run_id);
  fb_arg(f, dt, a, 2, lc, n);
  fb_arg(f, XLA_FFI_DataType_S32, shard, 0, 0, 0);
  fb_ret(f, dt, a, 2, lc, n);
  fb_ret(f, real, w, 1, n, 0);
  fb_ret(f, XLA_FFI_DataType_S32, status, 0, 0, 0);
  fb_attr_i64(f, NAME_T_A, tile);
  fb_attr_i64(f, NAME_MESH_ID, mesh_id);
  fb_attr_scalar(f, NAME_WANT_VECTORS, XLA_FFI_DataType_PRED, 1);
}

/* ---- rejected frames ----------------------------------------------------- */

TEST(ffi_syevd_rejects_bad_frames_promptly) {
  bound_rendezvous();
  enum { N = 4 };
  double a[N * N] = {0}, w[N] = {0};
  float wf[N] = {0};
  int32_t shard = 0, status = -1;
  const int64_t mesh = 102;
  const XLA_FFI_Error_Code INVAL = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  frame_builder f;
#define REJECT(handler, label, says) \
  EXPECT_REJECTED(label, handler, &f, INVAL, says)
#define SYEVD()                                                           \
  build_syevd(&f, fresh_run_id(), mesh, 1, XLA_FFI_DataType_F64, a, N, N, \
              XLA_FFI_DataType_F64, w, &shard, &status)

  SYEVD();
  f.frame.rets.size = 2;
  REJECT(jaxmg_syevd_cpu, "syevd 2 rets",
         "expected 2 arguments and 3 "
         "results, got 2 and 2");
  SYEVD();
  f.dims[0][0] = 3;
  REJECT(jaxmg_syevd_cpu, "syevd A 3 x 4", "A's shard is 3 x 4");
  SYEVD();
  f.bufs[0].dtype = f.bufs[2].dtype = XLA_FFI_DataType_S32;
  REJECT(jaxmg_syevd_cpu, "syevd S32 A", "A has XLA element type 4");
  SYEVD();
  f.frame.attrs.size = 2; /* no want_vectors */
  REJECT(jaxmg_syevd_cpu, "syevd no want_vectors",
         "attribute want_vectors is missing");
  SYEVD();
  f.frame.attrs.size = 1; /* T_A only */
  REJECT(jaxmg_syevd_cpu, "syevd no mesh_id", "attribute mesh_id is missing");
  SYEVD();
  f.bufs[3].dtype = XLA_FFI_DataType_F32;
  f.bufs[3].data = wf;
  REJECT(jaxmg_syevd_cpu, "syevd F32 W",
         "W has XLA element type 11, "
         "expected 12");
  SYEVD();
  f.dims[3][0] = N + 1;
  REJECT(jaxmg_syevd_cpu, "syevd W of 5",
         "W has dimension 0 of size 5, "
         "expected 4");
  SYEVD();
  f.bufs[3].rank = 2;
  REJECT(jaxmg_syevd_cpu, "syevd W rank 2",
         "result 1 (W) has rank 2, "
         "expected 1");
  SYEVD();
  f.bufs[4].dtype = XLA_FFI_DataType_F64;
  REJECT(jaxmg_syevd_cpu, "syevd F64 status",
         "status has XLA element type "
         "12, expected 4");
  SYEVD();
  shard = -1;
  REJECT(jaxmg_syevd_cpu, "syevd position -1",
         "shard position -1 is "
         "negative");
  shard = 0;
#undef REJECT
#undef SYEVD
  CHECK_EQ(status, -1);
}

/* ---- without LAPACK ------------------------------------------------------ */

/* The runner forgets every LAPACK routine before each test. */
TEST(ffi_syevd_without_lapack_names_dsyevd_and_zheevd) {
  bound_rendezvous();
  CHECK(jmg_lapack_routines_for(JMG_F64)->syevd == NULL);
  enum { N = 4 };
  double a[N * N] = {0};
  for (int i = 0; i < N; ++i) a[i * N + i] = 1.0;
  int32_t shard = 0, status = -1;
  frame_builder f;
  xla_result r;

  /* syevd names its own routine: dsyevd for real, zheevd for complex. */
  double w[N];
  build_syevd(&f, fresh_run_id(), 302, 1, XLA_FFI_DataType_F64, a, N, N,
              XLA_FFI_DataType_F64, w, &shard, &status);
  r = take_error(call_handler(jaxmg_syevd_cpu, &f.frame));
  CHECK_CONTAINS(r.msg, "LAPACK routine dsyevd was not registered");
  double z[2 * N * N] = {0};
  build_syevd(&f, fresh_run_id(), 303, 1, XLA_FFI_DataType_C128, z, N, N,
              XLA_FFI_DataType_F64, w, &shard, &status);
  r = take_error(call_handler(jaxmg_syevd_cpu, &f.frame));
  CHECK_CONTAINS(r.msg, "LAPACK routine zheevd was not registered");
}
