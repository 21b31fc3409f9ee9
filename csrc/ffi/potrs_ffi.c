/* potrs's call frame.
 *   args:  A (local_cols x n), B (nrhs x n: B column-major), shard (int32)
 *   rets:  A (aliased), X (nrhs x n), status (int32)
 *   attrs: T_A, mesh_id */
#include "ffi/handler.h"

XLA_FFI_Error *jmg_ffi_potrs(XLA_FFI_CallFrame *frame,
                             const jmg_ffi_platform *platform) {
  if (jmg_ffi_answer_metadata(frame)) return NULL;
  const char *op = "potrs";
  jmg_error err;
  jmg_error_clear(&err);
  jmg_op_call call;
  jmg_shard_io io;
  jmg_ffi_buffer a = {0}, b = {0}, x = {0}, status = {0};
  if (jmg_ffi_begin(frame, platform, op, 3, 3, &call, &io, &a, &err) != 0)
    return jmg_ffi_error(frame, &err);

  int rc = jmg_ffi_arg(frame, op, 1, "B", 2, &b, &err);
  if (rc == 0) rc = jmg_ffi_expect_dtype(&b, a.xla_dtype, op, "B", &err);
  if (rc == 0) {
    io.nrhs = b.dims[0];
    const int64_t b_dims[2] = {io.nrhs, io.n};
    rc = jmg_ffi_expect_dims(&b, b_dims, op, "B", &err);
    if (rc == 0) rc = jmg_ffi_ret(frame, op, 1, "X", 2, &x, &err);
    if (rc == 0) rc = jmg_ffi_expect_dtype(&x, a.xla_dtype, op, "X", &err);
    if (rc == 0) rc = jmg_ffi_expect_dims(&x, b_dims, op, "X", &err);
  }
  if (rc == 0) rc = jmg_ffi_ret(frame, op, 2, "status", 0, &status, &err);
  if (rc == 0)
    rc =
        jmg_ffi_expect_dtype(&status, XLA_FFI_DataType_S32, op, "status", &err);
  if (rc != 0) {
    jmg_op_abort(&call, op, &err);
    return jmg_ffi_error(frame, &err);
  }
  io.b = b.data;
  io.x = x.data;
  io.status = status.data;
  return jmg_ffi_run(frame, platform, jmg_potrs_run, &call, &io, &a, &err);
}
