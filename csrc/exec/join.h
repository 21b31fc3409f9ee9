/* Joining a call: the first step of every op on every participant.
 *
 * Every participant of a call joins the rendezvous with its jmg_shard_io;
 * once all have arrived, the leader (shard 0) runs the op's leader function
 * over all of them. In SPMD the participants are threads of one process and
 * the leader uses their buffers as they are; in MPMD (call->share set) they
 * may be processes, and their buffers travel through share/ (exported by each
 * participant, imported by the leader). The op's leader function is the same
 * in both modes: only the buffers it is handed differ.
 *
 * That is the leader model. A call whose engine runs in the local model
 * (engine/engine.h) joins nothing: each participant runs its own part
 * (exec/local.h) and talks to the others through the communicator only.
 *
 * This layer runs an op from its description (exec/op_desc.h); it never
 * calls into ops/. */
#ifndef JMG_EXEC_JOIN_H
#define JMG_EXEC_JOIN_H

#include <stdint.h>

#include "common/config.h"
#include "common/dtype.h"
#include "comm/comm.h"
#include "common/error.h"
#include "engine/engine.h"
#include "exec/op_desc.h"
#include "mem/mem.h"
#include "rendezvous/rendezvous.h"
#include "share/share.h"

/* One participant's call, as planned (ffi/plan.h). */
typedef struct jmg_op_call {
  const jmg_op_desc *op;
  const jmg_engine *engine;
  const jmg_mem *mem; /* the platform's memory operations */
  jmg_config config; /* the settings, read once when the call was planned */
  const jmg_rendezvous *rdv;
  jmg_rdv_key key; /* key.op is op->name */
  int shard;
  double timeout_s;
  /* NULL: the participants are threads of one process (SPMD) and the leader
   * uses their buffers as they are. Else they may be processes (MPMD): posts
   * carry buffers exported through share, and rdv is the process
   * rendezvous. */
  const jmg_share *share;
  /* NULL: the run functions block until the call is over. Else they join
   * asynchronously and return 0 once joined; done reports the end. The call
   * and io must then live until done has run. */
  jmg_rdv_done_fn done;
  void *done_ctx;
  /* The local model (engine->model JMG_MODEL_LOCAL; exec/local.h): the
   * platform's communicator, this group's id (ffi/plan.c, from the
   * attribute comm_id), and the participant's device context once made (so
   * that an abort can tell the other ranks through the communicator). rdv
   * and share are then unused. */
  const jmg_comm_ops *comm_ops;
  unsigned char comm_id[JMG_COMM_ID_MAX];
  void *device_ctx;
  /* The rows of the grid the engine runs on (attribute grid_rows, 1 when
   * absent: the 1 x P line; exec/local.h). */
  int grid_rows;
} jmg_op_call;

/* Whether call runs in the local model (its engine's). */
static inline int jmg_op_call_is_local(const jmg_op_call *call) {
  return call->engine != NULL && call->engine->model == JMG_MODEL_LOCAL;
}

/* Tells the other participants of call that this one failed before it could
 * join (err says why), and returns err's status. Leader model: through the
 * rendezvous. Local model: through the communicator (jmg_local_abort) when
 * the device context is made, else not at all (there is no rendezvous: the
 * others fail in theirs, or wait; NCCL has no timeout). Never waits on a
 * rendezvous for a local-model call. */
int jmg_op_abort(jmg_op_call *call, jmg_error *err);

/* Runs the op in its engine's model. Leader model: joins the rendezvous
 * with io (the op's io struct, call->op->io_size bytes) and runs the op
 * (jmg_leader_run) on shard 0, in SPMD or MPMD as call says. Local model:
 * runs this participant's part (jmg_local_run), without a rendezvous; with
 * call->done set it still runs at once and reports through done. Validates
 * the local arguments first: a participant with bad arguments fails the call
 * for everyone. */
int jmg_op_join(jmg_op_call *call, jmg_shard_io *io, jmg_error *err);

#endif
