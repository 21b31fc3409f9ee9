/* The call plan (ffi/plan.h). */
#include "ffi/plan.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "common/config.h"
#include "share/host_share.h"

/* What crashed jobs left in /dev/shm (see jmg_rdv_sweep_stale). */
static void sweep_stale(void) {
  (void)jmg_rdv_sweep_stale();
  (void)jmg_host_share_sweep();
}

/* The local model's part of the plan (exec/local.h): the platform's
 * communicator and this group's id, from the attribute comm_id (int64,
 * groups x 16: group g's 128-byte id in words [16 g, 16 g + 16)), which the
 * Python layer makes for the local-model engines. No rendezvous and no
 * shared memory, in SPMD and MPMD alike: the communicator is the only
 * channel between the participants, so that they may be on any nodes. On
 * failure nothing can be told to the others yet (the communicator is not
 * open): the error is returned. */
static int plan_local(XLA_FFI_CallFrame *frame,
                      const jmg_ffi_platform *platform, jmg_op_call *call,
                      uint64_t group, jmg_error *err) {
  const char *op = call->op->name;
  call->rdv = NULL;
  call->share = NULL;
  call->comm_ops = platform->comm != NULL ? platform->comm() : NULL;
  if (call->comm_ops == NULL)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "communicator",
                         "engine %s runs every participant on its own (the "
                         "local model) and the %s platform has no "
                         "communicator",
                         call->engine->name, platform->name);
  enum { WORDS = JMG_COMM_ID_MAX / sizeof(int64_t) };
  if (!jmg_ffi_has_attr(frame, "comm_id"))
    return jmg_error_set(
        err, JMG_EINVAL, op, "FFI call frame",
        "engine %s runs every participant on its own (the local model) and "
        "needs the attribute comm_id (int64, %d words per group: the "
        "communicator's id, made by jaxmg's Python layer); the frame has "
        "none: call the op through jaxmg's Python layer",
        call->engine->name, (int)WORDS);
  const int64_t *words = NULL;
  size_t nwords = 0;
  int rc = jmg_ffi_attr_i64_array(frame, op, "comm_id", &words, &nwords, err);
  if (rc != 0) return rc;
  if (nwords % WORDS != 0 || group >= nwords / WORDS)
    return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "attribute comm_id has %zu words: not %d per group "
                         "for group %llu (jaxmg's Python layer makes it)",
                         nwords, (int)WORDS, (unsigned long long)group);
  memcpy(call->comm_id, words + group * WORDS, JMG_COMM_ID_MAX);
  if (platform->comm_of_id != NULL) /* the id says whose it is */
    call->comm_ops = platform->comm_of_id(call->comm_id);
  if (call->comm_ops->id_bytes > JMG_COMM_ID_MAX)
    return jmg_error_set(err, JMG_EINTERNAL, op, "communicator",
                         "the %s id needs %zu bytes, more than %d",
                         call->comm_ops->name, call->comm_ops->id_bytes,
                         JMG_COMM_ID_MAX);
  if (call->comm_ops->per_call_site) { /* comm/comm.h: one per call site */
    const uint64_t site = (uint64_t)call->key.mesh_id;
    if (call->comm_ops->id_bytes + sizeof site > JMG_COMM_ID_MAX)
      return jmg_error_set(err, JMG_EINTERNAL, op, "communicator",
                           "the %s id leaves no room for the call site",
                           call->comm_ops->name);
    memcpy(call->comm_id + JMG_COMM_ID_MAX - sizeof site, &site, sizeof site);
  }
  /* The grid the engine runs on: grid_rows x (P / grid_rows), the Python
   * layer's choice (A's rows over two mesh axes r and c: r rows); absent,
   * the 1 x P line. */
  int64_t grid_rows = 1;
  if (jmg_ffi_has_attr(frame, "grid_rows")) {
    rc = jmg_ffi_attr_i64(frame, op, "grid_rows", &grid_rows, err);
    if (rc != 0) return rc;
    if (grid_rows < 1 || grid_rows > call->key.nparts ||
        call->key.nparts % grid_rows != 0)
      return jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                           "attribute grid_rows=%lld does not divide the "
                           "group's %d devices",
                           (long long)grid_rows, call->key.nparts);
  }
  call->grid_rows = (int)grid_rows;
  return 0;
}

/* The attributes every call reads, in the order they are checked. */
typedef struct plan_attrs {
  int32_t position; /* group * nparts + shard */
  int64_t mesh_id, call_id, job_id, nodes;
} plan_attrs;

/* The shard position operand and the attributes mesh_id, T_A (into io) and
 * the optional call_id, scratch and job_id. */
static int read_attrs(XLA_FFI_CallFrame *frame,
                      const jmg_ffi_platform *platform, const char *op,
                      const jmg_ffi_head *head, jmg_shard_io *io,
                      plan_attrs *at, jmg_error *err) {
  at->position = -1;
  int rc = jmg_ffi_expect_dtype(&head->shard, XLA_FFI_DataType_S32, op,
                                "the shard index", err);
  if (rc == 0)
    rc = platform->read_shard(frame, head->shard.data, &at->position, err);
  if (rc == 0 && at->position < 0)
    rc = jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                       "shard position %d is negative", (int)at->position);
  if (rc == 0) rc = jmg_ffi_attr_i64(frame, op, "mesh_id", &at->mesh_id, err);
  if (rc == 0) rc = jmg_ffi_attr_i64(frame, op, "T_A", &io->tile, err);
  /* The call site: the Python layer numbers every traced call, so that two
   * calls in one program never meet, whatever order the devices reach them
   * in (XLA:CPU runs independent calls in different orders on different
   * devices). Frames built by hand may leave it out: one site. */
  if (rc == 0 && jmg_ffi_has_attr(frame, "call_id"))
    rc = jmg_ffi_attr_i64(frame, op, "call_id", &at->call_id, err);
  /* The Python layer says whether a scratch shard is likely to fit; frames
   * built by hand may leave it out: allowed. */
  int64_t scratch = 1;
  if (rc == 0 && jmg_ffi_has_attr(frame, "scratch"))
    rc = jmg_ffi_attr_i64(frame, op, "scratch", &scratch, err);
  io->scratch_ok = scratch != 0;
  if (rc == 0 && jmg_ffi_has_attr(frame, "job_id"))
    rc = jmg_ffi_attr_i64(frame, op, "job_id", &at->job_id, err);
  return rc;
}

/* The key's run id, and the rendezvous. MPMD (job_id != 0): XLA's run ids
 * are per process and do not match across processes. The key's run id is
 * then the job's identity, which every process of one job run shares and no
 * other job has; the call site (call_id, numbered alike in every process,
 * see _shard.py) and the sequence number (every process executes a call
 * site's calls in the same order) tell its calls apart. The participants
 * meet in the process rendezvous (which also hears an abort before the
 * engine is chosen); buffers are shared once the engine's model is known
 * (jmg_ffi_plan: the local model uses neither). */
static int plan_run(XLA_FFI_CallFrame *frame, const char *op,
                    const plan_attrs *at, jmg_op_call *call, jmg_error *err) {
  if (at->job_id == 0) return jmg_ffi_run_id(frame, op, &call->key.run_id, err);
  call->key.run_id = at->job_id;
  call->rdv = jmg_rendezvous_processes();
  return 0;
}

/* The rest of the key: the processes of this group's shards (MPMD calls
 * from the Python layer name the process of every shard of every group,
 * pids, groups x nparts, so that a process that dies before it reaches the
 * call fails the others at once), one identity for the device group and
 * the call site (groups are independent calls, and so are call sites),
 * this participant's shard, and the sequence number (taken last: from
 * here on failures go through jmg_op_abort). */
static int plan_key(XLA_FFI_CallFrame *frame, const char *op,
                    const plan_attrs *at, int nparts, jmg_op_call *call,
                    uint64_t *group_out, jmg_error *err) {
  const int shard = at->position % nparts;
  const uint64_t group = (uint64_t)(at->position / nparts);
  if (at->job_id != 0 && jmg_ffi_has_attr(frame, "pids")) {
    const int64_t *pids = NULL;
    size_t npids = 0;
    int rc = jmg_ffi_attr_i64_array(frame, op, "pids", &pids, &npids, err);
    if (rc == 0 && (npids % (size_t)nparts != 0 || group >= npids / nparts))
      rc = jmg_error_set(err, JMG_EINVAL, op, "FFI call frame",
                         "attribute pids has %zu entries: not one per shard "
                         "of group %llu of %d shards",
                         npids, (unsigned long long)group, nparts);
    if (rc != 0) return rc;
    call->key.pids = pids + group * (uint64_t)nparts;
  }
  call->key.mesh_id =
      (int64_t)((uint64_t)at->mesh_id ^ (group * UINT64_C(0x9E3779B97F4A7C15)) ^
                ((uint64_t)at->call_id * UINT64_C(0xC2B2AE3D27D4EB4F)));
  call->shard = shard;
  call->key.seq =
      jmg_rdv_next_seq(op, call->key.mesh_id, shard, call->key.run_id);
  *group_out = group;
  return 0;
}

/* The engine that runs the call: chosen here and nowhere else, from the
 * op, the group, the problem and the settings (engine/select.c). Every
 * participant chooses alike. The hosts the group spans: the attribute
 * nodes (absent: one); the solve's precision: the attribute precision
 * (absent: exact; common/op.h), which the op's own steps read too (its
 * scalar of that name, ops/potrs.c and ops/lu_solve.c). */
static int choose_engine(XLA_FFI_CallFrame *frame,
                         const jmg_ffi_platform *platform,
                         const jmg_ffi_head *head, const jmg_shard_io *io,
                         jmg_op_call *call, jmg_error *err) {
  const char *op = call->op->name;
  int64_t nodes = 1;
  if (jmg_ffi_has_attr(frame, "nodes")) {
    int rc = jmg_ffi_attr_i64(frame, op, "nodes", &nodes, err);
    if (rc != 0) return rc;
  }
  int64_t precision = JMG_PRECISION_EXACT;
  if (jmg_ffi_has_attr(frame, "precision")) {
    int rc = jmg_ffi_attr_i64(frame, op, "precision", &precision, err);
    if (rc != 0) return rc;
    if (precision < 0 || precision >= JMG_NUM_PRECISIONS)
      return jmg_error_set(err, JMG_EINVAL, op, "FFI attributes",
                           "precision=%lld: 0 (exact) or 1 (mixed)",
                           (long long)precision);
  }
  const jmg_problem problem = {.op = call->op->id,
                               .nparts = head->nparts,
                               .nodes = (int)nodes,
                               .dtype = io->dtype,
                               .n = io->n,
                               .m = head->m,
                               .tile = io->tile,
                               .precision = (int)precision};
  return jmg_engine_select(platform->engines, &problem, &call->config,
                           &call->engine, err);
}

/* MPMD in the leader model: buffers travel through share/. */
static int plan_share(const jmg_ffi_platform *platform, jmg_op_call *call,
                      jmg_error *err) {
  if (platform->share == NULL)
    return jmg_error_set(err, JMG_EUNSUPPORTED, call->op->name,
                         "FFI call frame",
                         "the %s platform cannot share buffers between "
                         "processes (MPMD)",
                         platform->name);
  static pthread_once_t swept = PTHREAD_ONCE_INIT;
  pthread_once(&swept, sweep_stale);
  call->share = platform->share();
  return 0;
}

int jmg_ffi_plan(XLA_FFI_CallFrame *frame, const jmg_ffi_platform *platform,
                 const jmg_op_desc *desc, const jmg_ffi_head *head,
                 jmg_op_call *call, jmg_shard_io *io, jmg_error *err) {
  const char *op = desc->name;
  memset(call, 0, sizeof *call);
  call->op = desc;
  call->grid_rows = 1;
  io->dtype = head->dtype;
  io->n = head->n;
  io->local_cols = head->local_cols;
  jmg_config_read(&call->config);
  call->mem = platform->mem();
  call->rdv = platform->rendezvous();
  call->timeout_s = call->config.rendezvous_timeout_s;
  call->key.op = op;
  call->key.nparts = head->nparts;
  /* The position operand is group * nparts + shard: the shard is this
   * device's index along the sharded mesh axes, the group its index along
   * the other axes (a mesh ("S", "T") with A sharded over "T" solves one
   * independent copy per value of "S"). */
  plan_attrs at = {0};
  uint64_t group = 0;
  int rc = read_attrs(frame, platform, op, head, io, &at, err);
  if (rc == 0) rc = plan_run(frame, op, &at, call, err);
  if (rc == 0) rc = plan_key(frame, op, &at, head->nparts, call, &group, err);
  if (rc != 0) return rc;
  /* A sequence number is taken: a refusal from here releases the others. */
  if (choose_engine(frame, platform, head, io, call, err) != 0)
    return jmg_op_abort(call, err);
  if (call->engine->model == JMG_MODEL_LOCAL)
    return plan_local(frame, platform, call, group, err);
  if (at.job_id != 0 && plan_share(platform, call, err) != 0)
    return jmg_op_abort(call, err);
  return 0;
}
