/* XLA FFI call-frame decoding (ffi/decode.c) and what the handler does for
 * every op (ffi/handler.c, ffi/plan.c): the metadata query, decoding
 * helpers, errors, several participants of one call where one is wrong, the
 * LAPACK table's names, and the local model's plan; driven by call frames
 * built by hand against the fake XLA runtime (fake_xla.h). Each op's own
 * cases are in its file (test_potrs.c, test_potri.c, test_syevd.c,
 * test_lu_solve.c). */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_calls.h"
#include "engine/lapack/table.h"
#include "fake_xla.h"
#include "ffi/handler.h"
#include "ops/ops.h"
#include "ref_lapack.h"
#include "test.h"
#include "test_clock.h"

/* ---- metadata ------------------------------------------------------------ */

/* The metadata query's extension, built through ffi/xla_compat.h's mirror of
 * the extension node (XLA renames the node's type between header versions).
 * Where the header has the 0.3 names, the mirror must match XLA's layout. */
#if XLA_FFI_API_MAJOR == 0 && XLA_FFI_API_MINOR < 4
_Static_assert(sizeof(jmg_xla_metadata_extension) ==
                   sizeof(XLA_FFI_Metadata_Extension),
               "metadata extension mirror size");
_Static_assert(offsetof(jmg_xla_metadata_extension, metadata) ==
                   offsetof(XLA_FFI_Metadata_Extension, metadata),
               "metadata extension mirror layout");
_Static_assert(offsetof(jmg_xla_extension, type) ==
                   offsetof(XLA_FFI_Extension_Base, type),
               "extension node mirror layout");
_Static_assert(offsetof(jmg_xla_extension, next) ==
                   offsetof(XLA_FFI_Extension_Base, next),
               "extension node mirror layout");
_Static_assert(XLA_FFI_Extension_Metadata == JMG_XLA_EXTENSION_METADATA,
               "metadata extension type");
#endif

static void metadata_frame(XLA_FFI_CallFrame *frame,
                           jmg_xla_metadata_extension *ext,
                           XLA_FFI_Metadata *md, int ext_type) {
  memset(ext, 0, sizeof *ext);
  ext->base.struct_size = sizeof *ext;
  ext->base.type = ext_type;
  ext->base.next = NULL;
  ext->metadata = md;
  memset(frame, 0, sizeof *frame);
  frame->struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame->api = fake_xla_api();
  frame->extension_start = (void *)ext;
}

TEST(ffi_answer_metadata_fills_version_and_traits) {
  XLA_FFI_Metadata md;
  memset(&md, 0xAB, sizeof md);
  md.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
  jmg_xla_metadata_extension ext;
  XLA_FFI_CallFrame frame;
  metadata_frame(&frame, &ext, &md, JMG_XLA_EXTENSION_METADATA);
  CHECK_EQ(jmg_ffi_answer_metadata(&frame), 1);
  CHECK_EQ(md.api_version.major_version, XLA_FFI_API_MAJOR);
  CHECK_EQ(md.api_version.minor_version, XLA_FFI_API_MINOR);
  CHECK_EQ(md.traits, 0);

  /* An ordinary call: no extension. */
  frame.extension_start = NULL;
  CHECK_EQ(jmg_ffi_answer_metadata(&frame), 0);
  /* An extension of another type is not the metadata query. */
  memset(&md, 0xAB, sizeof md);
  metadata_frame(&frame, &ext, &md, 77);
  CHECK_EQ(jmg_ffi_answer_metadata(&frame), 0);
  CHECK(md.traits != 0); /* untouched */
}

TEST(ffi_handlers_answer_metadata_query) {
  XLA_FFI_Handler *handlers[3] = {jaxmg_potrs_cpu, jaxmg_potri_cpu,
                                  jaxmg_syevd_cpu};
  for (int h = 0; h < 3; ++h) {
    XLA_FFI_Metadata md;
    memset(&md, 0xCD, sizeof md);
    md.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
    /* The metadata query comes with no arguments at all. */
    jmg_xla_metadata_extension ext;
    XLA_FFI_CallFrame frame;
    metadata_frame(&frame, &ext, &md, JMG_XLA_EXTENSION_METADATA);
    xla_result r = take_error(handlers[h](&frame));
    CHECK_EQ(r.is_error, 0);
    CHECK_EQ(md.api_version.major_version, XLA_FFI_API_MAJOR);
    CHECK_EQ(md.api_version.minor_version, XLA_FFI_API_MINOR);
    CHECK_EQ(md.traits, 0);
  }
  CHECK_EQ(fake_xla_bad_struct_size(), 0);
}

/* ---- decoding helpers ---------------------------------------------------- */

TEST(ffi_check_counts) {
  frame_builder f;
  double a[4];
  fb_init(&f, fake_xla_api(), 1);
  fb_arg(&f, XLA_FFI_DataType_F64, a, 2, 2, 2);
  fb_arg(&f, XLA_FFI_DataType_F64, a, 2, 2, 2);
  fb_ret(&f, XLA_FFI_DataType_F64, a, 2, 2, 2);
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_ffi_check_counts(&f.frame, "potri", 2, 1, &err), 0);
  CHECK_EQ(jmg_ffi_check_counts(&f.frame, "potrs", 3, 1, &err), -JMG_EINVAL);
  CHECK_EQ(err.code, JMG_EINVAL);
  CHECK_CONTAINS(err.op, "potrs");
  CHECK_CONTAINS(err.msg, "expected 3 arguments and 1 results, got 2 and 1");
  CHECK_EQ(jmg_ffi_check_counts(&f.frame, "potrs", 2, 3, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "expected 2 arguments and 3 results, got 2 and 1");
}

TEST(ffi_arg_and_ret_decode_buffers_and_reject_bad_ones) {
  frame_builder f;
  double a[6];
  int32_t s = 0;
  fb_init(&f, fake_xla_api(), 1);
  fb_arg(&f, XLA_FFI_DataType_F64, a, 2, 2, 3);
  XLA_FFI_Buffer *sb = fb_arg(&f, XLA_FFI_DataType_S32, &s, 0, 0, 0);
  fb_ret(&f, XLA_FFI_DataType_F64, a, 2, 2, 3);
  jmg_error err;
  jmg_error_clear(&err);
  jmg_ffi_buffer b;
  memset(&b, 0, sizeof b);

  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 0, "A", 2, &b, &err), 0);
  CHECK(b.data == a);
  CHECK_EQ(b.xla_dtype, XLA_FFI_DataType_F64);
  CHECK_EQ(b.rank, 2);
  CHECK_EQ(b.dims[0], 2);
  CHECK_EQ(b.dims[1], 3);
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 1, "shard index", 0, &b, &err), 0);
  CHECK(b.data == &s);
  CHECK_EQ(b.rank, 0);
  CHECK_EQ(jmg_ffi_ret(&f.frame, "potri", 0, "A", 2, &b, &err), 0);
  CHECK(b.data == a);

  /* Wrong rank. */
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 0, "A", 1, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "argument 0 (A) has rank 2, expected 1");
  CHECK_EQ(jmg_ffi_ret(&f.frame, "potri", 0, "A", 3, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "result 0 (A) has rank 2, expected 3");
  /* Missing index, either side. */
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 2, "B", 2, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "argument 2 (B) is missing");
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", -1, "B", 2, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "is missing");
  CHECK_EQ(jmg_ffi_ret(&f.frame, "potri", 1, "status", 0, &b, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "result 1 (status) is missing");
  /* Not a buffer (a type XLA may add later), or no buffer at all. */
  f.arg_types[1] = (XLA_FFI_ArgType)7;
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 1, "shard index", 0, &b, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "argument 1 (shard index) is not a buffer");
  f.arg_types[1] = XLA_FFI_ArgType_BUFFER;
  f.args[1] = NULL;
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 1, "shard index", 0, &b, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "is not a buffer");
  f.args[1] = sb;
  f.ret_types[0] = (XLA_FFI_RetType)9;
  CHECK_EQ(jmg_ffi_ret(&f.frame, "potri", 0, "A", 2, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "result 0 (A) is not a buffer");
  f.ret_types[0] = XLA_FFI_RetType_BUFFER;
  /* A negative dimension. */
  f.dims[0][1] = -3;
  CHECK_EQ(jmg_ffi_arg(&f.frame, "potri", 0, "A", 2, &b, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "argument 0 (A) has a negative dimension");
}

TEST(ffi_dtype_accepts_solver_types_only) {
  static const struct {
    XLA_FFI_DataType xla;
    jmg_dtype ours;
  } ok[] = {{XLA_FFI_DataType_F32, JMG_F32},
            {XLA_FFI_DataType_F64, JMG_F64},
            {XLA_FFI_DataType_C64, JMG_C64},
            {XLA_FFI_DataType_C128, JMG_C128}};
  jmg_error err;
  jmg_error_clear(&err);
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
    jmg_dtype t = (jmg_dtype)-1;
    CHECK_EQ(jmg_ffi_dtype(ok[i].xla, "potrs", "A", &t, &err), 0);
    CHECK_EQ(t, ok[i].ours);
  }
  static const XLA_FFI_DataType bad[] = {
      XLA_FFI_DataType_S32, XLA_FFI_DataType_F16,  XLA_FFI_DataType_BF16,
      XLA_FFI_DataType_S64, XLA_FFI_DataType_PRED, XLA_FFI_DataType_INVALID};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    jmg_dtype t = JMG_F64;
    jmg_error_clear(&err);
    CHECK_EQ(jmg_ffi_dtype(bad[i], "syevd", "A", &t, &err), -JMG_EINVAL);
    CHECK_EQ(err.code, JMG_EINVAL);
    CHECK_CONTAINS(err.op, "syevd");
    char want[64];
    snprintf(want, sizeof want, "A has XLA element type %d", (int)bad[i]);
    CHECK_CONTAINS(err.msg, want);
    CHECK_CONTAINS(err.msg, "float32, float64, complex64 and complex128");
  }
  /* expect_dtype / expect_dims. */
  int64_t dims[2] = {3, 5};
  jmg_ffi_buffer b = {XLA_FFI_DataType_F32, NULL, 2, dims};
  CHECK_EQ(jmg_ffi_expect_dtype(&b, XLA_FFI_DataType_F32, "potrs", "B", &err),
           0);
  CHECK_EQ(jmg_ffi_expect_dtype(&b, XLA_FFI_DataType_F64, "potrs", "B", &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "B has XLA element type 11, expected 12");
  const int64_t same[2] = {3, 5}, other[2] = {3, 6};
  CHECK_EQ(jmg_ffi_expect_dims(&b, same, "potrs", "X", &err), 0);
  CHECK_EQ(jmg_ffi_expect_dims(&b, other, "potrs", "X", &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "X has dimension 1 of size 5, expected 6");
}

TEST(ffi_attr_i64_finds_unterminated_names) {
  frame_builder f;
  fb_init(&f, fake_xla_api(), 1);
  /* Sorted by name as XLA passes them; none of the three names is followed
   * by a NUL, and "mesh" is a prefix of "mesh_id". */
  fb_attr_scalar(&f, NAME_T_A, XLA_FFI_DataType_S32, -7);
  fb_attr_scalar(&f, fake_xla_names + 3, 4, /* "mesh" */
                 XLA_FFI_DataType_S64, 999);
  fb_attr_scalar(&f, NAME_MESH_ID, XLA_FFI_DataType_S64, (int64_t)1 << 40 | 5);
  fb_attr_scalar(&f, NAME_WANT_VECTORS, XLA_FFI_DataType_PRED, 1);
  jmg_error err;
  jmg_error_clear(&err);
  int64_t v = 0;
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "T_A", &v, &err), 0);
  CHECK_EQ(v, -7);
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "mesh_id", &v, &err), 0);
  CHECK_EQ(v, (int64_t)1 << 40 | 5);
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "mesh", &v, &err), 0);
  CHECK_EQ(v, 999);
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "want_vectors", &v, &err), 0);
  CHECK_EQ(v, 1);
  /* PRED: any nonzero byte is true, zero is false. */
  f.values[3] = 0;
  memset(&f.values[3], 0x80, 1);
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "want_vectors", &v, &err), 0);
  CHECK_EQ(v, 1);
  memset(&f.values[3], 0, 1);
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "want_vectors", &v, &err), 0);
  CHECK_EQ(v, 0);

  /* Missing: not there at all, or only a longer / shorter name is. */
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "T_", &v, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute T_ is missing");
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "mesh_id2", &v, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute mesh_id2 is missing");
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "pad", &v, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute pad is missing");

  /* Not an integer scalar. */
  f.scalars[0].dtype = XLA_FFI_DataType_F32;
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "T_A", &v, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg,
                 "attribute T_A has element type 11, expected an "
                 "integer");
  /* Not a scalar at all: an array attribute. */
  int64_t arr_data[2] = {1, 2};
  XLA_FFI_Array arr = {XLA_FFI_DataType_S64, 2, arr_data};
  f.attr_types[1] = XLA_FFI_AttrType_ARRAY;
  f.attrs[1] = &arr;
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "mesh", &v, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute mesh is not a scalar");
  /* The neighbours are unaffected. */
  CHECK_EQ(jmg_ffi_attr_i64(&f.frame, "syevd", "mesh_id", &v, &err), 0);
  CHECK_EQ(v, (int64_t)1 << 40 | 5);
  /* The array accessor reads it, and refuses scalars and other types. */
  const int64_t *data = NULL;
  size_t n = 0;
  CHECK_EQ(jmg_ffi_attr_i64_array(&f.frame, "syevd", "mesh", &data, &n, &err),
           0);
  CHECK_EQ(n, 2);
  CHECK(data == arr_data);
  CHECK_EQ(
      jmg_ffi_attr_i64_array(&f.frame, "syevd", "mesh_id", &data, &n, &err),
      -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute mesh_id is not an array");
  arr.dtype = XLA_FFI_DataType_S32;
  CHECK_EQ(jmg_ffi_attr_i64_array(&f.frame, "syevd", "mesh", &data, &n, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute mesh has element type 4, expected int64");
  CHECK_EQ(jmg_ffi_attr_i64_array(&f.frame, "syevd", "pids", &data, &n, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute pids is missing");

  /* No attributes at all. */
  frame_builder empty;
  fb_init(&empty, fake_xla_api(), 1);
  CHECK_EQ(jmg_ffi_attr_i64(&empty.frame, "potrs", "T_A", &v, &err),
           -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "attribute T_A is missing");
}

TEST(ffi_run_id_from_runtime_or_zero) {
  frame_builder f;
  XLA_FFI_Api api;
  fake_xla_api_init(&api);
  fb_init(&f, &api, (int64_t)0x123456789ABLL);
  jmg_error err;
  jmg_error_clear(&err);
  int64_t id = -1;
  int calls = fake_xla_run_id_calls();
  CHECK_EQ(jmg_ffi_run_id(&f.frame, "potrs", &id, &err), 0);
  CHECK_EQ(id, (int64_t)0x123456789ABLL);
  CHECK_EQ(fake_xla_run_id_calls(), calls + 1);

  /* An older runtime whose API ends before XLA_FFI_RunId_Get: 0, not called. */
  api.struct_size = offsetof(XLA_FFI_Api, XLA_FFI_RunId_Get);
  id = -1;
  CHECK_EQ(jmg_ffi_run_id(&f.frame, "potrs", &id, &err), 0);
  CHECK_EQ(id, 0);
  CHECK_EQ(fake_xla_run_id_calls(), calls + 1);
  /* A runtime that has the field but leaves it NULL. */
  api.struct_size = XLA_FFI_Api_STRUCT_SIZE;
  api.XLA_FFI_RunId_Get = NULL;
  id = -1;
  CHECK_EQ(jmg_ffi_run_id(&f.frame, "potrs", &id, &err), 0);
  CHECK_EQ(id, 0);

  /* A runtime that fails: its message comes through, its error is freed. */
  api.XLA_FFI_RunId_Get = fake_xla_run_id_get;
  f.ctx.run_id_fails = 1;
  int live = fake_xla_errors_live();
  CHECK_EQ(jmg_ffi_run_id(&f.frame, "potrs", &id, &err), -JMG_EINTERNAL);
  CHECK_EQ(err.code, JMG_EINTERNAL);
  CHECK_CONTAINS(err.call, "XLA_FFI_RunId_Get");
  CHECK_CONTAINS(err.msg, "this runtime has no run id today");
  CHECK_EQ(fake_xla_errors_live(), live);
  CHECK_EQ(fake_xla_bad_struct_size(), 0);
}

TEST(ffi_error_maps_codes_and_formats_message) {
  frame_builder f;
  fb_init(&f, fake_xla_api(), 1);
  jmg_error err;
  jmg_error_clear(&err);
  CHECK(jmg_ffi_error(&f.frame, &err) == NULL);
  CHECK(jmg_ffi_error(&f.frame, NULL) == NULL);
  static const struct {
    jmg_status code;
    XLA_FFI_Error_Code xla;
  } map[] = {{JMG_EINVAL, XLA_FFI_Error_Code_INVALID_ARGUMENT},
             {JMG_ENOMEM, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED},
             {JMG_ETIMEDOUT, XLA_FFI_Error_Code_DEADLINE_EXCEEDED},
             {JMG_EPEER, XLA_FFI_Error_Code_ABORTED},
             {JMG_EUNSUPPORTED, XLA_FFI_Error_Code_UNIMPLEMENTED},
             {JMG_ELAPACK, XLA_FFI_Error_Code_INTERNAL},
             {JMG_ECUDA, XLA_FFI_Error_Code_INTERNAL},
             {JMG_EINTERNAL, XLA_FFI_Error_Code_INTERNAL}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; ++i) {
    jmg_error_set(&err, map[i].code, "potri", "dpotrf", "argument %d", 4);
    xla_result r = take_error(jmg_ffi_error(&f.frame, &err));
    CHECK_EQ(r.is_error, 1);
    CHECK_EQ(r.errc, map[i].xla);
    CHECK_CONTAINS(r.msg, "jaxmg.potri: dpotrf: argument 4");
    CHECK_CONTAINS(r.msg, jmg_status_name(map[i].code));
  }
  CHECK_EQ(fake_xla_bad_struct_size(), 0);
}

/* ---- several participants of one call ------------------------------------ */

TEST(ffi_multi_shard_rejection_on_one_shard_releases_the_others) {
  bound_rendezvous();
  enum { P = 4, N = 12, NRHS = 2 };
  double *A = spd_matrix(N);
  double B[NRHS * N] = {0};
  shard_call *s = make_shard_calls(P, N, 1, 201, fresh_run_id(), A, B, NRHS);
  /* Shard 2's B has the wrong element type: it fails after decoding its
   * call's key and aborts the call for the others. */
  float bf[NRHS * N] = {0};
  s[2].f.bufs[1].dtype = XLA_FFI_DataType_F32;
  s[2].f.bufs[1].data = bf;
  double t0 = now_s();
  run_shard_calls(s, P);
  double total = now_s() - t0;
  xla_result r[P];
  int32_t status[P];
  for (int d = 0; d < P; ++d) {
    r[d] = s[d].call.result;
    status[d] = s[d].status;
  }
  free_shard_calls(s, P);
  free(A);
  CHECK(total < 2.0);
  CHECK_EQ(r[2].is_error, 1);
  CHECK_CONTAINS(r[2].msg, "B has XLA element type 11, expected 12");
  for (int d = 0; d < P; ++d) {
    CHECK_EQ(status[d], -99);
    if (d == 2) continue;
    CHECK_EQ(r[d].is_error, 1);
    CHECK_EQ(r[d].errc, XLA_FFI_Error_Code_INVALID_ARGUMENT);
    CHECK_CONTAINS(r[d].msg, "shard 2 failed: B has XLA element type 11");
  }
}

TEST(ffi_multi_shard_bad_tile_or_mismatched_call_fails_everyone) {
  bound_rendezvous();
  enum { P = 4, N = 12, NRHS = 1 };
  double *A = spd_matrix(N);
  double B[NRHS * N] = {0};
  /* T_A = 2 does not fit shards of 3 columns: the leader's plan fails. */
  shard_call *s = make_shard_calls(P, N, 2, 202, fresh_run_id(), A, B, NRHS);
  run_shard_calls(s, P);
  xla_result r[P];
  for (int d = 0; d < P; ++d) r[d] = s[d].call.result;
  free_shard_calls(s, P);
  /* Shard 3 thinks T_A is 1 where the others say 3. */
  s = make_shard_calls(P, N, 3, 203, fresh_run_id(), A, B, NRHS);
  s[3].f.values[0] = 1;
  run_shard_calls(s, P);
  xla_result m[P];
  for (int d = 0; d < P; ++d) m[d] = s[d].call.result;
  free_shard_calls(s, P);
  free(A);
  for (int d = 0; d < P; ++d) {
    CHECK_EQ(r[d].is_error, 1);
    CHECK_EQ(r[d].errc, XLA_FFI_Error_Code_INVALID_ARGUMENT);
    CHECK_CONTAINS(r[d].msg,
                   "jaxmg.potrs: layout: T_A=2 does not fit the "
                   "shard size 3");
    CHECK_EQ(m[d].is_error, 1);
    CHECK_CONTAINS(m[d].msg,
                   "shard 3 describes a different call than shard "
                   "0");
  }
}

/* ---- the LAPACK table ---------------------------------------------------- */

TEST(ffi_lapack_register_rejects_unknown_names) {
  CHECK_EQ(jmg_lapack_register("dgesvd", (void *)ref_potrf), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("xpotrf", (void *)ref_potrf), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("zsyevd", (void *)ref_potrf), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("dheevd", (void *)ref_potrf), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("dpotrfx", (void *)ref_potrf), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register("dpotrf", NULL), -JMG_EINVAL);
  CHECK_EQ(jmg_lapack_register(NULL, (void *)ref_potrf), -JMG_EINVAL);
  CHECK(jmg_lapack_routines_for(JMG_C128)->syevd == NULL);
}

/* ---- the local model's plan ---------------------------------------------- */

/* A local-model engine and a platform around it, for the plan's checks: its
 * routine and its communicator must never be reached (the plan stops
 * before). */
static atomic_int g_local_reached;

static int local_never_potri(const jmg_engine *e, const jmg_local_matrix *a,
                             int *info, jmg_error *err) {
  (void)e, (void)a, (void)info;
  atomic_fetch_add(&g_local_reached, 1);
  return jmg_error_set(err, JMG_EINTERNAL, "potri", "test", "reached");
}

static const jmg_engine g_local_engine = {
    .name = "local-test",
    .model = JMG_MODEL_LOCAL,
    .local = {.potri = local_never_potri},
};
static const jmg_engine *const g_local_engines[] = {&g_local_engine, NULL};

static int never_open(const void *id, int rank, int ranks, void *device_ctx,
                      jmg_comm **out, const char *op, jmg_error *err) {
  (void)id, (void)rank, (void)ranks, (void)device_ctx, (void)out;
  atomic_fetch_add(&g_local_reached, 1);
  return jmg_error_set(err, JMG_EINTERNAL, op, "test", "opened");
}
static const jmg_comm_ops g_never_comm = {
    .name = "never", .id_bytes = 128, .open = never_open};
static const jmg_comm_ops *never_comm(void) { return &g_never_comm; }

static int host_read_shard(XLA_FFI_CallFrame *frame, const void *buf,
                           int32_t *out, jmg_error *err) {
  (void)frame, (void)err;
  memcpy(out, buf, sizeof *out);
  return 0;
}
static int no_device_ctx(XLA_FFI_CallFrame *frame, void **ctx, jmg_error *err) {
  (void)frame, (void)err;
  *ctx = NULL;
  return 0;
}
static void no_free_ctx(void *ctx) { (void)ctx; }
static int host_copy_local(void *ctx, void *dst, const void *src, size_t bytes,
                           jmg_error *err) {
  (void)ctx, (void)err;
  memmove(dst, src, bytes);
  return 0;
}

static jmg_ffi_platform local_platform(const jmg_comm_ops *(*comm)(void)) {
  jmg_ffi_platform p = {
      .name = "local-test-platform",
      .engines = g_local_engines,
      .mem = jmg_host_mem,
      .rendezvous = jmg_rendezvous_threads,
      .read_shard = host_read_shard,
      .make_device_ctx = no_device_ctx,
      .free_device_ctx = no_free_ctx,
      .copy_local = host_copy_local,
      .async = 0,
      .share = NULL, /* MPMD below: the local model must not need it */
      .comm = comm,
  };
  return p;
}

static const char k_local_names[] = "T_Acomm_idjob_idmesh_idgrid_rowscall_id";
#define NAME_L_T_A k_local_names, 3
#define NAME_L_COMM_ID (k_local_names + 3), 7
#define NAME_L_JOB_ID (k_local_names + 10), 6
#define NAME_L_MESH_ID (k_local_names + 16), 7
#define NAME_L_GRID_ROWS (k_local_names + 23), 9
#define NAME_L_CALL_ID (k_local_names + 32), 7

/* A one-shard potri frame (A n x n, the shard index, A back, the status),
 * with T_A = 2; the caller adds the other attributes. */
static void local_potri_frame(frame_builder *f, double *a, int64_t n,
                              int32_t *shard, int32_t *status) {
  fb_init(f, fake_xla_api(), fresh_run_id());
  fb_arg(f, XLA_FFI_DataType_F64, a, 2, n, n);
  fb_arg(f, XLA_FFI_DataType_S32, shard, 0, 0, 0);
  fb_ret(f, XLA_FFI_DataType_F64, a, 2, n, n);
  fb_ret(f, XLA_FFI_DataType_S32, status, 0, 0, 0);
  fb_attr_i64(f, NAME_L_T_A, 2);
}

TEST(ffi_local_model_plan_needs_a_communicator_and_comm_id) {
  bound_rendezvous();
  atomic_store(&g_local_reached, 0);
  const int64_t n = 4;
  double a[16] = {0};
  int32_t shard = 0, status = -7;
  int64_t words[16] = {0};
  XLA_FFI_Array comm_id = {XLA_FFI_DataType_S64, 16, words};
  XLA_FFI_Array short_id = {XLA_FFI_DataType_S64, 8, words};
  struct {
    const char *label;
    const jmg_comm_ops *(*comm)(void);
    XLA_FFI_Array *id;
    int64_t grid_rows; /* 0: no attribute */
    const char *says[3];
  } cases[] = {
      {"no communicator",
       NULL,
       &comm_id,
       0,
       {"local-test", "local model", "has no communicator"}},
      {"no comm_id",
       never_comm,
       NULL,
       0,
       {"comm_id", "Python layer", "local-test"}},
      {"short comm_id",
       never_comm,
       &short_id,
       0,
       {"comm_id", "8 words", "Python layer"}},
      {"grid rows not dividing the group",
       never_comm,
       &comm_id,
       2,
       {"grid_rows=2", "does not divide", "1 devices"}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    const jmg_ffi_platform platform = local_platform(cases[c].comm);
    frame_builder f;
    local_potri_frame(&f, a, n, &shard, &status);
    if (cases[c].id != NULL)
      fb_attr(&f, NAME_L_COMM_ID, XLA_FFI_AttrType_ARRAY, cases[c].id);
    if (cases[c].grid_rows != 0)
      fb_attr_i64(&f, NAME_L_GRID_ROWS, cases[c].grid_rows);
    /* MPMD: a local-model call reaches neither the process rendezvous nor
     * share/ (the platform has none: the leader model would refuse). */
    fb_attr_i64(&f, NAME_L_JOB_ID, 77);
    fb_attr_i64(&f, NAME_L_MESH_ID, 5);
    const double t0 = now_s();
    xla_result r =
        take_error(jmg_ffi_handle(&f.frame, &platform, &jmg_potri_op));
    CHECK(now_s() - t0 < 2.0);
    if (!r.is_error) {
      TEST_FAIL_AT("%s: the call succeeded", cases[c].label);
      return;
    }
    for (int k = 0; k < 3; ++k) CHECK_CONTAINS(r.msg, cases[c].says[k]);
    CHECK(strstr(r.msg, "share") == NULL);
  }
  CHECK_EQ(atomic_load(&g_local_reached), 0);
  CHECK_EQ(status, -7);

  /* With both, the call goes to the local executor, which opens the
   * communicator (here refusing): no rendezvous, no engine reached. */
  const jmg_ffi_platform platform = local_platform(never_comm);
  frame_builder f;
  local_potri_frame(&f, a, n, &shard, &status);
  fb_attr(&f, NAME_L_COMM_ID, XLA_FFI_AttrType_ARRAY, &comm_id);
  fb_attr_i64(&f, NAME_L_JOB_ID, 78);
  fb_attr_i64(&f, NAME_L_MESH_ID, 5);
  const double t0 = now_s();
  xla_result r = take_error(jmg_ffi_handle(&f.frame, &platform, &jmg_potri_op));
  CHECK(now_s() - t0 < 2.0);
  CHECK(r.is_error);
  CHECK_CONTAINS(r.msg, "opened");
  CHECK_EQ(atomic_load(&g_local_reached), 1);
  CHECK_EQ(status, -7);
}

/* A communicator of the per-call-site kind (comm/comm.h): records the id
 * it is asked to open, then refuses. */
static unsigned char g_opened_id[JMG_COMM_ID_MAX];
static int recording_open(const void *id, int rank, int ranks, void *device_ctx,
                          jmg_comm **out, const char *op, jmg_error *err) {
  (void)rank, (void)ranks, (void)device_ctx, (void)out;
  memcpy(g_opened_id, id, JMG_COMM_ID_MAX);
  return jmg_error_set(err, JMG_EINTERNAL, op, "test", "opened");
}
static const jmg_comm_ops g_site_comm = {.name = "per-site",
                                         .id_bytes = 64,
                                         .per_call_site = 1,
                                         .open = recording_open};
static const jmg_comm_ops *site_comm(void) { return &g_site_comm; }

/* Its calls open one communicator per call site: the id's first bytes as
 * the Python layer made them, its last 8 the call site's, different for two
 * sites of one device set and the same for two calls of one site. */
TEST(ffi_local_model_opens_one_communicator_per_call_site_where_asked) {
  bound_rendezvous();
  const int64_t n = 4;
  double a[16] = {0};
  int32_t shard = 0, status = -7;
  int64_t words[16];
  for (int i = 0; i < 16; ++i) words[i] = 1000 + i;
  XLA_FFI_Array comm_id = {XLA_FFI_DataType_S64, 16, words};
  unsigned char seen[3][JMG_COMM_ID_MAX];
  const int64_t sites[3] = {1, 2, 1};
  const jmg_ffi_platform platform = local_platform(site_comm);
  for (int c = 0; c < 3; ++c) {
    frame_builder f;
    local_potri_frame(&f, a, n, &shard, &status);
    fb_attr_i64(&f, NAME_L_CALL_ID, sites[c]);
    fb_attr(&f, NAME_L_COMM_ID, XLA_FFI_AttrType_ARRAY, &comm_id);
    fb_attr_i64(&f, NAME_L_MESH_ID, 5);
    memset(g_opened_id, 0, sizeof g_opened_id);
    xla_result r =
        take_error(jmg_ffi_handle(&f.frame, &platform, &jmg_potri_op));
    CHECK(r.is_error);
    CHECK_CONTAINS(r.msg, "opened");
    memcpy(seen[c], g_opened_id, JMG_COMM_ID_MAX);
    CHECK(memcmp(seen[c], words, JMG_COMM_ID_MAX - 8) == 0);
  }
  CHECK(memcmp(seen[0], seen[1], JMG_COMM_ID_MAX) != 0);
  CHECK(memcmp(seen[0], seen[2], JMG_COMM_ID_MAX) == 0);
  CHECK_EQ(status, -7);
}
