/* potri's call frame.
 *   args:  A (local_cols x n), shard (int32)
 *   rets:  A (aliased; becomes the inverse), status (int32)
 *   attrs: T_A, mesh_id */
#include "ffi/handler.h"

XLA_FFI_Error *jmg_ffi_potri(XLA_FFI_CallFrame *frame,
                             const jmg_ffi_platform *platform) {
  if (jmg_ffi_answer_metadata(frame)) return NULL;
  const char *op = "potri";
  jmg_error err;
  jmg_error_clear(&err);
  jmg_op_call call;
  jmg_shard_io io;
  jmg_ffi_buffer a = {0}, status = {0};
  if (jmg_ffi_begin(frame, platform, op, 2, 2, &call, &io, &a, &err) != 0)
    return jmg_ffi_error(frame, &err);

  int rc = jmg_ffi_ret(frame, op, 1, "status", 0, &status, &err);
  if (rc == 0)
    rc =
        jmg_ffi_expect_dtype(&status, XLA_FFI_DataType_S32, op, "status", &err);
  if (rc != 0) {
    jmg_op_abort(&call, op, &err);
    return jmg_ffi_error(frame, &err);
  }
  io.status = status.data;
  return jmg_ffi_run(frame, platform, jmg_potri_run, &call, &io, &a, &err);
}
