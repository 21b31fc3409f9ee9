/* The one handler (ffi/handler.h). */
#include "ffi/handler.h"

#include <stdio.h>
#include <string.h>

#include "exec/join.h"
#include "ffi/async.h"
#include "ffi/plan.h"

/* The common end of every call: makes the device context, brings A into its
 * aliased result buffer and runs the op, blocking or (platform->async)
 * through an XLA future. Returns what the handler returns. */
static XLA_FFI_Error *run(XLA_FFI_CallFrame *frame,
                          const jmg_ffi_platform *platform, jmg_op_call *call,
                          jmg_shard_io *io, const jmg_ffi_buffer *a,
                          jmg_error *err) {
  const char *op = call->key.op;
  jmg_ffi_buffer a_out = {0};
  void *ctx = NULL;
  int rc = jmg_ffi_ret(frame, op, 0, "A", 2, &a_out, err);
  if (rc == 0)
    rc = jmg_ffi_expect_dtype(&a_out, a->xla_dtype, op, "result A", err);
  if (rc == 0) rc = jmg_ffi_expect_dims(&a_out, a->dims, op, "result A", err);
  if (rc == 0) rc = platform->make_device_ctx(frame, &ctx, err);
  /* From here on a local-model abort can tell the others (exec/local.h). */
  call->device_ctx = ctx;
  /* input_output_aliases makes result 0 A's own buffer; should XLA ever hand
   * a distinct one, work there on a copy. */
  if (rc == 0 && a_out.data != a->data) {
    size_t bytes =
        (size_t)a->dims[0] * (size_t)a->dims[1] * jmg_dtype_size(io->dtype);
    rc = platform->copy_local(ctx, a_out.data, a->data, bytes, err);
  }
  if (rc != 0) {
    jmg_error_name_op(err, op);
    jmg_op_abort(call, err);
    if (ctx != NULL) platform->free_device_ctx(ctx);
    return jmg_ffi_error(frame, err);
  }
  io->a = a_out.data;
  io->device_ctx = ctx;
  if (platform->async)
    return jmg_ffi_run_async(frame, platform, call, io, ctx, err);
  jmg_op_join(call, io, err);
  if (ctx != NULL) platform->free_device_ctx(ctx);
  return jmg_ffi_error(frame, err);
}

XLA_FFI_Error *jmg_ffi_handle(XLA_FFI_CallFrame *frame,
                              const jmg_ffi_platform *platform,
                              const jmg_op_desc *op) {
  if (jmg_ffi_answer_metadata(frame)) return NULL;
  jmg_error err;
  jmg_error_clear(&err);
  jmg_op_call call;
  jmg_io_storage store;
  memset(&store, 0, sizeof store);
  jmg_shard_io *io = &store.io;
  jmg_ffi_head head;
  /* The optional attributes first: they say which optional results the
   * frame has. */
  int rc = jmg_ffi_decode_scalars(frame, op, 1, io, &err);
  if (rc == 0)
    rc = jmg_ffi_decode_head(
        frame, op->name, jmg_op_nargs(op), jmg_op_nrets_in(op, io),
        op->rows_scalar > 0 ? op->scalars[op->rows_scalar - 1].name : NULL,
        &head, &err);
  if (rc == 0) rc = jmg_ffi_plan(frame, platform, op, &head, &call, io, &err);
  if (rc != 0) return jmg_ffi_error(frame, &err);
  /* From here on a failure must release the other participants. */
  io->a = head.a.data;
  if (jmg_ffi_decode_op(frame, op, &head, io, &err) != 0) {
    jmg_op_abort(&call, &err);
    return jmg_ffi_error(frame, &err);
  }
  return run(frame, platform, &call, io, &head.a, &err);
}
