/* The handler's frame (ffi/handler.h). */
#include "ffi/handler.h"

#include <stdio.h>
#include <string.h>

#include "ffi/async.h"
#include "ffi/plan.h"

int jmg_ffi_begin(XLA_FFI_CallFrame *frame, const jmg_ffi_platform *platform,
                  const char *op, int64_t nargs, int64_t nrets,
                  jmg_op_call *call, jmg_shard_io *io, jmg_ffi_buffer *a,
                  jmg_error *err) {
  memset(io, 0, sizeof *io);
  jmg_ffi_head head;
  int rc = jmg_ffi_decode_head(frame, op, nargs, nrets, &head, err);
  *a = head.a;
  if (rc == 0) rc = jmg_ffi_plan(frame, platform, op, &head, call, io, err);
  if (rc == 0) io->a = a->data;
  return rc;
}

XLA_FFI_Error *jmg_ffi_run(XLA_FFI_CallFrame *frame,
                           const jmg_ffi_platform *platform, jmg_op_run_fn run,
                           jmg_op_call *call, jmg_shard_io *io,
                           const jmg_ffi_buffer *a, jmg_error *err) {
  const char *op = call->key.op;
  jmg_ffi_buffer a_out = {0};
  void *ctx = NULL;
  int rc = jmg_ffi_ret(frame, op, 0, "A", 2, &a_out, err);
  if (rc == 0)
    rc = jmg_ffi_expect_dtype(&a_out, a->xla_dtype, op, "result A", err);
  if (rc == 0) rc = jmg_ffi_expect_dims(&a_out, a->dims, op, "result A", err);
  if (rc == 0) rc = platform->make_device_ctx(frame, &ctx, err);
  /* input_output_aliases makes result 0 A's own buffer; should XLA ever hand
   * a distinct one, work there on a copy. */
  if (rc == 0 && a_out.data != a->data) {
    size_t bytes =
        (size_t)a->dims[0] * (size_t)a->dims[1] * jmg_dtype_size(io->dtype);
    rc = platform->copy_local(ctx, a_out.data, a->data, bytes, err);
  }
  if (rc != 0) {
    if (err->op[0] == '\0') snprintf(err->op, sizeof err->op, "%s", op);
    jmg_op_abort(call, op, err);
    if (ctx != NULL) platform->free_device_ctx(ctx);
    return jmg_ffi_error(frame, err);
  }
  io->a = a_out.data;
  io->device_ctx = ctx;
  if (platform->async)
    return jmg_ffi_run_async(frame, platform, run, call, io, ctx, err);
  run(call, io, err);
  if (ctx != NULL) platform->free_device_ctx(ctx);
  return jmg_ffi_error(frame, err);
}
