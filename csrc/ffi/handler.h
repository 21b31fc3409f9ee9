/* An op's handler: the frame decoded (ffi/decode.h), the call planned
 * (ffi/plan.h), the op run, blocking or through an XLA future
 * (ffi/async.h). */
#ifndef JMG_FFI_HANDLER_H
#define JMG_FFI_HANDLER_H

#include "exec/join.h"
#include "ffi/decode.h"
#include "ffi/platform.h"
#include "ops/ops.h"

/* The common start of every op handler. Every op's frame begins the same
 * way: argument 0 is this shard of A (local_cols x n, read column-major),
 * the last argument is the int32 shard index, result 0 is A's aliased output;
 * attributes mesh_id, T_A, (optional) call_id and (optional) job_id. Decodes
 * those and plans the call (ffi/plan.h), filling call and the call-wide
 * fields of io (not its buffers beyond a). Once it returns 0, later failures
 * must go through jmg_op_abort so that the other participants are
 * released. */
int jmg_ffi_begin(XLA_FFI_CallFrame *frame, const jmg_ffi_platform *platform,
                  const char *op, int64_t nargs, int64_t nrets,
                  jmg_op_call *call, jmg_shard_io *io, jmg_ffi_buffer *a,
                  jmg_error *err);

/* The op body on this participant: jmg_potrs_run and its siblings. */
typedef int (*jmg_op_run_fn)(jmg_op_call *call, jmg_shard_io *io,
                             jmg_error *err);

/* The common end of every op handler: makes the device context, brings A
 * into its aliased result buffer and runs the op, blocking or (platform->async)
 * through an XLA future. Returns what the handler returns. */
XLA_FFI_Error *jmg_ffi_run(XLA_FFI_CallFrame *frame,
                           const jmg_ffi_platform *platform, jmg_op_run_fn run,
                           jmg_op_call *call, jmg_shard_io *io,
                           const jmg_ffi_buffer *a, jmg_error *err);

/* The three ops' handlers, for any platform. */
XLA_FFI_Error *jmg_ffi_potrs(XLA_FFI_CallFrame *frame,
                             const jmg_ffi_platform *platform);
XLA_FFI_Error *jmg_ffi_potri(XLA_FFI_CallFrame *frame,
                             const jmg_ffi_platform *platform);
XLA_FFI_Error *jmg_ffi_syevd(XLA_FFI_CallFrame *frame,
                             const jmg_ffi_platform *platform);

#endif
