/* syevd's call frame.
 *   args:  A (local_cols x n), shard (int32)
 *   rets:  A (aliased; becomes this shard's eigenvectors), W (n, real),
 *          status (int32)
 *   attrs: T_A, mesh_id, want_vectors */
#include "ffi/handler.h"

XLA_FFI_Error *jmg_ffi_syevd(XLA_FFI_CallFrame *frame,
                             const jmg_ffi_platform *platform) {
  if (jmg_ffi_answer_metadata(frame)) return NULL;
  const char *op = "syevd";
  jmg_error err;
  jmg_error_clear(&err);
  jmg_op_call call;
  jmg_shard_io io;
  jmg_ffi_buffer a = {0}, w = {0}, status = {0};
  if (jmg_ffi_begin(frame, platform, op, 2, 3, &call, &io, &a, &err) != 0)
    return jmg_ffi_error(frame, &err);

  int64_t want_vectors = 1;
  const XLA_FFI_DataType real = jmg_dtype_real_size(io.dtype) == 4
                                    ? XLA_FFI_DataType_F32
                                    : XLA_FFI_DataType_F64;
  int rc = jmg_ffi_attr_i64(frame, op, "want_vectors", &want_vectors, &err);
  if (rc == 0) rc = jmg_ffi_ret(frame, op, 1, "W", 1, &w, &err);
  if (rc == 0) rc = jmg_ffi_expect_dtype(&w, real, op, "W", &err);
  if (rc == 0) rc = jmg_ffi_expect_dims(&w, &io.n, op, "W", &err);
  if (rc == 0) rc = jmg_ffi_ret(frame, op, 2, "status", 0, &status, &err);
  if (rc == 0)
    rc =
        jmg_ffi_expect_dtype(&status, XLA_FFI_DataType_S32, op, "status", &err);
  if (rc != 0) {
    jmg_op_abort(&call, op, &err);
    return jmg_ffi_error(frame, &err);
  }
  io.want_vectors = want_vectors != 0;
  io.w = w.data;
  io.status = status.data;
  return jmg_ffi_run(frame, platform, jmg_syevd_run, &call, &io, &a, &err);
}
