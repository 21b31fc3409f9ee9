/* The call plan: how one participant's call runs, decided from its decoded
 * frame, the platform and the settings (common/config.h, read once here per
 * call):
 *  - the mode: SPMD (the participants are threads of this process; the
 *    platform's rendezvous, buffers used as they are) or MPMD (a nonzero
 *    job_id attribute: the participants may be processes; the process
 *    rendezvous, buffers shared through platform->share);
 *  - the rendezvous key (op, device group and call site, run id, sequence
 *    number, the processes expected) and this participant's shard;
 *  - the engine that runs the call (one marked place in plan.c), and with
 *    it the execution model: for a local-model engine the platform's
 *    communicator and the group's id (attribute comm_id) instead of the
 *    rendezvous and share/, in SPMD and MPMD alike (exec/local.h).
 * The plan reads the frame only through ffi/decode.h. */
#ifndef JMG_FFI_PLAN_H
#define JMG_FFI_PLAN_H

#include "exec/join.h"
#include "ffi/decode.h"
#include "ffi/platform.h"

/* Fills call and the call-wide fields of io (dtype, n, local_cols, tile,
 * scratch_ok; not its buffers) from head and the frame's attributes mesh_id,
 * T_A, and the optional call_id, scratch, job_id, pids, nodes and comm_id
 * (local-model engines: required). Nothing is joined
 * yet: on failure the caller returns the error. Once it returns 0 a sequence
 * number is taken, and later failures must go through jmg_op_abort so that
 * the other participants are released. */
int jmg_ffi_plan(XLA_FFI_CallFrame *frame, const jmg_ffi_platform *platform,
                 const jmg_op_desc *op, const jmg_ffi_head *head,
                 jmg_op_call *call, jmg_shard_io *io, jmg_error *err);

#endif
