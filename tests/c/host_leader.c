/* An op's leader steps on host memory (host_leader.h). */
#include "host_leader.h"

#include <stdlib.h>
#include <string.h>

#include "engine/lapack/lapack.h"
#include "exec/leader.h"
#include "mem/mem.h"

int64_t *op_scalar_named(const jmg_op_desc *op, jmg_shard_io *io,
                         const char *name) {
  for (int i = 0; i < op->nscalars; ++i)
    if (strcmp(op->scalars[i].name, name) == 0)
      return jmg_op_scalar_slot(&op->scalars[i], io);
  abort();
}

const jmg_op_buf *op_buf_named(const jmg_op_desc *op, const char *name) {
  for (int i = 0; i < op->nbufs; ++i)
    if (strcmp(op->bufs[i].name, name) == 0) return &op->bufs[i];
  abort();
}

void host_shard_io_init(jmg_shard_io *io, jmg_dtype t, int64_t n,
                        int64_t local_cols, int64_t tile, void *a,
                        int32_t *status) {
  io->dtype = t;
  io->n = n;
  io->local_cols = local_cols;
  io->tile = tile;
  io->a = a;
  io->status = status;
  *status = -99;
}

void host_leader_call(jmg_op_call *call, const jmg_op_desc *op) {
  memset(call, 0, sizeof *call);
  call->op = op;
  call->engine = &jmg_lapack_engine;
  call->mem = jmg_host_mem();
  jmg_config_read(&call->config);
}

int host_leader_run(const jmg_op_desc *op, void **posts, int ndev,
                    jmg_error *err) {
  jmg_op_call call;
  host_leader_call(&call, op);
  jmg_error_clear(err);
  int rc = jmg_op_check_local(op, posts[0], ndev, err);
  if (rc == 0) rc = jmg_leader_run(&call, posts, ndev, err);
  return rc;
}
