/* Completing XLA futures (ffi/async.h). */
#include "ffi/async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffi/decode.h"

/* One participant of an asynchronous call: what must outlive the handler. */
typedef struct async_participant {
  jmg_op_call call;
  jmg_io_storage io;
  const jmg_ffi_platform *platform;
  void *device_ctx;
  const XLA_FFI_Api *api;
  XLA_FFI_Future *future;
} async_participant;

static XLA_FFI_Error *xla_error_of(const XLA_FFI_Api *api,
                                   const jmg_error *err) {
  XLA_FFI_CallFrame frame;
  memset(&frame, 0, sizeof frame);
  frame.api = api;
  return jmg_ffi_error(&frame, err);
}

/* Completes the participant's future with the call's outcome, then frees it. */
static void async_done(void *ctx, int rc, const jmg_error *err) {
  async_participant *p = ctx;
  if (rc == 0) {
    XLA_FFI_Future_SetAvailable_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE;
    args.future = p->future;
    XLA_FFI_Error *e = p->api->XLA_FFI_Future_SetAvailable(&args);
    if (e != NULL) {
      jmg_error ignored; /* nothing left to tell it to */
      jmg_ffi_consume_error(p->api, e, JMG_EINTERNAL, "Future_SetAvailable",
                            &ignored);
    }
  } else {
    XLA_FFI_Future_SetError_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Future_SetError_Args_STRUCT_SIZE;
    args.future = p->future;
    args.error = xla_error_of(p->api, err); /* XLA takes ownership */
    XLA_FFI_Error *e = p->api->XLA_FFI_Future_SetError(&args);
    if (e != NULL) {
      jmg_error ignored;
      jmg_ffi_consume_error(p->api, e, JMG_EINTERNAL, "Future_SetError",
                            &ignored);
    }
  }
  if (p->device_ctx != NULL) p->platform->free_device_ctx(p->device_ctx);
  free(p);
}

/* Runs the op with the handler returning at once: the participant's state
 * moves to the heap and XLA waits on a future that async_done completes. */
XLA_FFI_Error *jmg_ffi_run_async(XLA_FFI_CallFrame *frame,
                                 const jmg_ffi_platform *platform,
                                 jmg_op_call *call, const jmg_shard_io *io,
                                 void *ctx, jmg_error *err) {
  const char *op = call->key.op;
  async_participant *p = calloc(1, sizeof *p);
  if (p == NULL) {
    jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                  "cannot allocate the participant's state");
    jmg_op_abort(call, err);
    if (ctx != NULL) platform->free_device_ctx(ctx);
    return jmg_ffi_error(frame, err);
  }
  XLA_FFI_Future_Create_Args fc;
  memset(&fc, 0, sizeof fc);
  fc.struct_size = XLA_FFI_Future_Create_Args_STRUCT_SIZE;
  XLA_FFI_Error *e = frame->api->XLA_FFI_Future_Create(&fc);
  if (e != NULL) {
    jmg_ffi_consume_error(frame->api, e, JMG_EINTERNAL, "XLA_FFI_Future_Create",
                          err);
    jmg_error_name_op(err, op);
    jmg_op_abort(call, err);
    if (ctx != NULL) platform->free_device_ctx(ctx);
    free(p);
    return jmg_ffi_error(frame, err);
  }
  p->call = *call;
  memcpy(p->io.bytes, io, call->op->io_size);
  p->platform = platform;
  p->device_ctx = ctx;
  p->api = frame->api;
  p->future = fc.future;
  p->call.done = async_done;
  p->call.done_ctx = p;
  /* From here on every outcome goes through the future. */
  frame->future = fc.future;
  if (jmg_op_join(&p->call, &p->io.io, err) != 0)
    async_done(p, -(int)err->code, err);
  return NULL; /* p may be gone already: do not touch it */
}
