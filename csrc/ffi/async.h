/* Running a participant's call with the handler returning at once: XLA waits
 * on a future that the call completes when it is over (platforms with
 * platform->async: XLA:CPU, which may run independent calls in different
 * orders on different devices). */
#ifndef JMG_FFI_ASYNC_H
#define JMG_FFI_ASYNC_H

#include "exec/join.h"
#include "ffi/platform.h"

/* Moves the participant's state (call, io: call->op->io_size bytes, the
 * device context ctx) to the heap, creates the frame's future and joins the
 * call (jmg_op_join) with call->done set; the future is completed with the
 * outcome, and ctx freed, when the call is over. Returns what the handler
 * returns. */
XLA_FFI_Error *jmg_ffi_run_async(XLA_FFI_CallFrame *frame,
                                 const jmg_ffi_platform *platform,
                                 jmg_op_call *call, const jmg_shard_io *io,
                                 void *ctx, jmg_error *err);

#endif
