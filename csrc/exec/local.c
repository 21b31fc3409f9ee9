/* The local execution model (exec/local.h). */
#include "exec/local.h"

#include <stdio.h>
#include <string.h>

#include "common/trace.h"
#include "exec/finite.h"

/* Names the op in an error that a lower layer left without one. */
static int named(const jmg_local_view *v, int rc, jmg_error *err) {
  if (rc != 0) jmg_error_name_op(err, v->op);
  return rc;
}

int jmg_local_agree(jmg_local_view *v, int rc, const char *before,
                    jmg_error *err) {
  if (v->ranks == 1) return rc; /* no one to wait for us */
  int failed = rc != 0;
  jmg_error ignored;
  int crc = v->comm_ops->max_int(v->comm, &failed, v->device_ctx, v->op,
                                 rc != 0 ? &ignored : err);
  if (rc != 0) return rc;
  if (crc != 0) return named(v, crc, err);
  if (failed)
    return jmg_error_set(err, JMG_EPEER, v->op, "agreement",
                         "another participant (rank) of the call failed "
                         "before %s",
                         before);
  return 0;
}

/* ---- rows ---------------------------------------------------------------*/

static int copy2d(void *ctx, void *dst, size_t dst_pitch, const void *src,
                  size_t src_pitch, size_t width, size_t height,
                  jmg_error *err) {
  const jmg_local_view *v = ctx;
  return v->mem->copy2d(&v->group, 0, dst, dst_pitch, src, src_pitch, width,
                        height, err);
}

int jmg_local_permute_rows(jmg_local_view *v, void *dst, const void *src,
                           int64_t cols, jmg_local_dir dir, jmg_error *err) {
  const size_t elem = jmg_dtype_size(v->a.dtype);
  const int64_t n = v->perm.n;
  if (dst != src)
    return named(v,
                 jmg_local_rows_gather(&v->perm, dir, dst, src, n, cols, elem,
                                       copy2d, v, err),
                 err);
  if (v->perm.plan.ncycles == 0 || cols == 0) return 0;
  const size_t stage_bytes = (size_t)v->perm.tile * (size_t)cols * elem;
  void *stage = NULL;
  int rc = v->mem->alloc(&v->group, 0, stage_bytes, &stage, err);
  if (rc == 0)
    rc = jmg_local_rows_permute(&v->perm, dir, dst, n, cols, elem, stage,
                                copy2d, v, err);
  if (stage != NULL) {
    /* The copies through it may still be queued. */
    jmg_error ignored;
    int s = v->mem->sync(&v->group, rc == 0 ? err : &ignored);
    if (rc == 0) rc = s;
    v->mem->release(&v->group, 0, stage, stage_bytes);
  }
  return named(v, rc, err);
}

int jmg_local_permute_a(jmg_local_view *v, jmg_local_dir dir, jmg_error *err) {
  int rc = jmg_local_permute_rows(v, v->a.data, v->a.data, v->a.cols, dir, err);
  jmg_trace_mark(dir == JMG_LOCAL_APPLY ? "permute rows" : "permute rows back");
  return rc;
}

/* ---- eigenvectors -------------------------------------------------------*/

/* One group of sends and receives: this rank's block-cyclic tiles of a out,
 * its contiguous tiles into scratch. */
static int exchange(jmg_local_view *v, const jmg_local_redist *plan,
                    void *scratch, jmg_error *err) {
  const jmg_comm_ops *c = v->comm_ops;
  const size_t tile_bytes =
      (size_t)v->perm.tile * (size_t)v->perm.n * jmg_dtype_size(v->a.dtype);
  int rc = c->group_begin(v->op, err);
  if (rc != 0) return rc;
  for (int64_t s = 0; rc == 0 && s < plan->ntiles; ++s)
    rc = c->send(v->comm, (const char *)v->a.data + (size_t)s * tile_bytes,
                 tile_bytes, plan->send[s].peer, v->device_ctx, v->op, err);
  for (int64_t s = 0; rc == 0 && s < plan->ntiles; ++s)
    rc = c->recv(v->comm, (char *)scratch + (size_t)s * tile_bytes, tile_bytes,
                 plan->recv[s].peer, v->device_ctx, v->op, err);
  jmg_error ignored;
  int erc = c->group_end(v->op, rc == 0 ? err : &ignored);
  return rc != 0 ? rc : erc;
}

int jmg_local_redistribute_vectors(jmg_local_view *v, int rc, jmg_error *err) {
  if (v->ranks == 1) { /* the columns are where they belong */
    if (rc == 0) rc = jmg_local_permute_a(v, JMG_LOCAL_UNDO, err);
    return rc;
  }
  const size_t bytes =
      (size_t)v->a.rows * (size_t)v->a.cols * jmg_dtype_size(v->a.dtype);
  jmg_local_redist plan;
  memset(&plan, 0, sizeof plan);
  void *scratch = NULL;
  if (rc == 0) rc = jmg_local_redist_init(&plan, &v->perm, v->rank, v->op, err);
  if (rc == 0) rc = v->mem->alloc(&v->group, 0, bytes, &scratch, err);
  rc = jmg_local_agree(v, rc, "the eigenvectors' exchange", err);
  if (rc == 0) rc = exchange(v, &plan, scratch, err);
  jmg_trace_mark("exchange vectors");
  /* Home, with H's rows back in M's order. */
  if (rc == 0)
    rc = jmg_local_permute_rows(v, v->a.data, scratch, v->a.cols,
                                JMG_LOCAL_UNDO, err);
  if (scratch != NULL) {
    jmg_error ignored;
    int s = v->mem->sync(&v->group, rc == 0 ? err : &ignored);
    if (rc == 0) rc = s;
    v->mem->release(&v->group, 0, scratch, bytes);
  }
  jmg_local_redist_free(&plan);
  jmg_trace_mark("permute rows back");
  return named(v, rc, err);
}

/* ---- the grid -----------------------------------------------------------*/

/* v->a on the line (1 x ranks) or on the call's grid. */
static void describe_a(jmg_local_view *v, int on_grid) {
  const jmg_local_regrid *g = &v->regrid;
  v->a.grid_rows = on_grid ? g->grid_rows : 1;
  v->a.grid_cols = on_grid ? g->grid_cols : v->ranks;
  v->a.rows = on_grid ? g->rows : v->perm.n;
  v->a.cols = on_grid ? g->cols : v->perm.local_cols;
  v->a.ld = v->a.rows;
}

/* One move: pack A's part into one scratch part, agree, exchange into the
 * other, unpack into A's place. */
static int regrid(jmg_local_view *v, jmg_local_grid_dir dir, int rc,
                  int skip, void *data, int describe, jmg_error *err) {
  const jmg_local_regrid *g = &v->regrid;
  const size_t elem = jmg_dtype_size(v->a.dtype);
  const size_t bytes = (size_t)v->a.rows * (size_t)v->a.cols * elem;
  const size_t tb = (size_t)(g->tile * g->tile) * elem;
  const char *what = dir == JMG_LOCAL_TO_GRID ? "the move onto the grid"
                                              : "the move back from the grid";
  void *out = NULL, *in = NULL;
  if (rc == 0 && !skip) rc = v->mem->alloc(&v->group, 0, bytes, &out, err);
  if (rc == 0 && !skip) rc = v->mem->alloc(&v->group, 0, bytes, &in, err);
  if (rc == 0 && !skip)
    rc = named(v,
               jmg_local_regrid_pack(g, dir, out, data, elem, copy2d, v, err),
               err);
  rc = jmg_local_agree(v, rc, what, err);
  if (rc == 0 && !skip) {
    const jmg_comm_ops *c = v->comm_ops;
    rc = c->group_begin(v->op, err);
    for (int p = 0; rc == 0 && p < v->ranks; ++p) {
      int64_t off, count = jmg_local_regrid_sends(g, dir, p, &off);
      if (count > 0)
        rc = c->send(v->comm, (const char *)out + (size_t)off * tb,
                     (size_t)count * tb, p, v->device_ctx, v->op, err);
    }
    for (int p = 0; rc == 0 && p < v->ranks; ++p) {
      int64_t off, count = jmg_local_regrid_recvs(g, dir, p, &off);
      if (count > 0)
        rc = c->recv(v->comm, (char *)in + (size_t)off * tb,
                     (size_t)count * tb, p, v->device_ctx, v->op, err);
    }
    jmg_error ignored;
    int erc = c->group_end(v->op, rc == 0 ? err : &ignored);
    if (rc == 0) rc = erc;
    if (rc == 0)
      rc = jmg_local_regrid_unpack(g, dir, data, in, elem, copy2d, v, err);
    if (rc == 0 && describe) describe_a(v, dir == JMG_LOCAL_TO_GRID);
  }
  jmg_error ignored;
  if (out != NULL || in != NULL) {
    /* The copies through them may still be queued. */
    int s = v->mem->sync(&v->group, rc == 0 ? err : &ignored);
    if (rc == 0) rc = s;
  }
  if (out != NULL) v->mem->release(&v->group, 0, out, bytes);
  if (in != NULL) v->mem->release(&v->group, 0, in, bytes);
  jmg_trace_mark(dir == JMG_LOCAL_TO_GRID ? "onto the grid" : "off the grid");
  return named(v, rc, err);
}

int jmg_local_to_grid(jmg_local_view *v, int rc, jmg_error *err) {
  if (v->regrid.grid_rows <= 1) return rc; /* the line is the grid */
  return regrid(v, JMG_LOCAL_TO_GRID, rc, 0, v->a.data, 1, err);
}

int jmg_local_matrix_to_grid(jmg_local_view *v, void *data, int rc,
                             jmg_error *err) {
  if (v->regrid.grid_rows <= 1) return rc;
  return regrid(v, JMG_LOCAL_TO_GRID, rc, 0, data, 0, err);
}

int jmg_local_from_grid(jmg_local_view *v, int rc, int skip, jmg_error *err) {
  if (v->regrid.grid_rows <= 1) return rc;
  return regrid(v, JMG_LOCAL_FROM_GRID, rc, skip, v->a.data, 1, err);
}

/* ---- outputs ------------------------------------------------------------*/

int jmg_local_nan(jmg_local_view *v, void *ptr, size_t count, jmg_dtype dtype,
                  jmg_error *err) {
  return named(v, v->mem->fill_nan(&v->group, 0, ptr, count, dtype, err), err);
}

int jmg_local_nan_a(jmg_local_view *v, jmg_error *err) {
  return jmg_local_nan(v, v->a.data, (size_t)v->a.rows * (size_t)v->a.cols,
                       v->a.dtype, err);
}

int jmg_local_write(jmg_local_view *v, void *dst, const void *src,
                    size_t bytes, jmg_error *err) {
  int rc = v->mem->copy(&v->group, dst, 0, src, JMG_HOST, bytes, err);
  if (rc == 0) rc = v->mem->sync(&v->group, err);
  return named(v, rc, err);
}

/* ---- the call -----------------------------------------------------------*/

static int open_comm(const jmg_op_call *call, void *device_ctx,
                     jmg_comm **out, jmg_error *err) {
  const char *op = call->op->name;
  if (call->comm_ops == NULL)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "communicator",
                         "engine %s runs in the local model, which needs a "
                         "communicator, and this platform has none",
                         call->engine ? call->engine->name : "?");
  /* MPMD calls name every rank's process: a communicator that sets up
   * connections between processes can tell a dead one at once. */
  if (call->comm_ops->watch != NULL && call->key.pids != NULL)
    call->comm_ops->watch(call->comm_id, call->key.nparts, call->key.pids);
  return call->comm_ops->open(call->comm_id, call->shard, call->key.nparts,
                              device_ctx, out, op, err);
}

/* Guards the call on comm where its communicator must be watched
 * (comm.h, guard_begin: NCCL), for the whole call, the engine's routines
 * included; rc as it was, or the guard's failure (told to the others by
 * the agreement that follows). */
static int guard_begin(const jmg_op_call *call, jmg_comm *comm, int rc,
                       jmg_error *err) {
  if (call->comm_ops->guard_begin == NULL || call->key.nparts < 2) return rc;
  jmg_error ignored;
  int grc = call->comm_ops->guard_begin(comm, call->op->name,
                                        rc == 0 ? err : &ignored);
  return rc != 0 ? rc : grc;
}

/* rc, or the watchdog's error where it aborted the communicator. */
static int guard_end(const jmg_op_call *call, jmg_comm *comm, int rc,
                     jmg_error *err) {
  if (call->comm_ops->guard_end == NULL || call->key.nparts < 2) return rc;
  return call->comm_ops->guard_end(comm, rc, err);
}

int jmg_local_abort(jmg_op_call *call, jmg_error *err) {
  if (call->device_ctx == NULL || call->comm_ops == NULL)
    return -(int)err->code;
  jmg_error ignored;
  jmg_comm *comm = NULL;
  if (open_comm(call, call->device_ctx, &comm, &ignored) == 0 &&
      call->key.nparts > 1) {
    /* The caller's error stands whatever happens here: a guard that
     * failed leaves the agreement unguarded, and the guard's own error
     * (a peer gone, the timeout) is not the call's. */
    (void)guard_begin(call, comm, 0, &ignored);
    int failed = 1;
    int rc = call->comm_ops->max_int(comm, &failed, call->device_ctx,
                                     call->op->name, &ignored);
    (void)guard_end(call, comm, rc, &ignored);
  }
  return -(int)err->code;
}

/* Every rank's *finite made 0 where any rank's is (after an agreement:
 * every rank takes part). */
static int agree_finite(jmg_local_view *v, int *finite, jmg_error *err) {
  if (v->ranks == 1) return 0;
  int bad = !*finite;
  int rc = v->comm_ops->max_int(v->comm, &bad, v->device_ctx, v->op, err);
  if (rc != 0) return named(v, rc, err);
  *finite = !bad;
  return 0;
}

/* This participant's view of the call, before any layout. */
static void view_of(jmg_op_call *call, jmg_shard_io *io, jmg_local_view *v) {
  memset(v, 0, sizeof *v);
  v->op = call->op->name;
  v->desc = call->op;
  v->engine = call->engine;
  v->call = call;
  v->config = &call->config;
  v->io = io;
  v->mem = call->mem;
  v->device_ctx = io->device_ctx;
  v->group.n = 1;
  v->group.device_ctx = &v->device_ctx;
  v->comm_ops = call->comm_ops;
  v->rank = call->shard;
  v->ranks = call->key.nparts;
}

/* The engine's blocks (engine.h, block): T_A, unless its library cannot
 * take T_A. Π and the grid are planned in them; on one rank Π is the
 * identity and the block any (the engine holds the whole matrix). A
 * rectangular A (qr's: op_desc.h, rows_scalar) stays in its contiguous
 * layout, as in the leader model: no Π, no grid; its steps and its
 * engine's routine take the parts as they are (engine.h). */
static int plan_layout(jmg_local_view *v, int rc, int64_t *block,
                       jmg_error *err) {
  const jmg_shard_io *io = v->io;
  const jmg_op_call *call = v->call;
  const jmg_problem problem = {.op = v->desc->id,
                               .nparts = v->ranks,
                               .nodes = 1,
                               .dtype = io->dtype,
                               .n = io->n,
                               .tile = io->tile};
  *block = v->engine != NULL && rc == 0 ? jmg_engine_block(v->engine, &problem)
                                        : io->tile;
  const int64_t layout_tile = v->ranks == 1 ? io->n : *block;
  const int rectangular = v->desc->rows_scalar > 0;
  if (rc == 0 && !rectangular &&
      (*block < 1 || *block > io->n ||
       (v->ranks > 1 && (io->n / v->ranks) % *block != 0)))
    rc = jmg_error_set(err, JMG_EINTERNAL, v->op, "layout",
                       "engine %s chose blocks of %lld for N=%lld on %d ranks "
                       "(T_A=%lld): they must divide the shard",
                       v->engine->name, (long long)*block, (long long)io->n,
                       v->ranks, (long long)io->tile);
  if (rc == 0 && !rectangular)
    rc =
        jmg_local_perm_init(&v->perm, io->n, v->ranks, layout_tile, v->op, err);
  v->grid_rows = call->grid_rows > 1 && !rectangular ? call->grid_rows : 1;
  if (rc == 0 && !rectangular)
    rc = jmg_local_regrid_init(&v->regrid, io->n, layout_tile, v->ranks,
                               v->grid_rows, v->rank, v->op, err);
  return rc;
}

/* The op's local steps on this rank's part of A (in blocks of block), or
 * NaN outputs where A has a NaN or an Inf entry on any rank: no solver on
 * any, NaN outputs on every one (exec/finite.h). *info the solver's. */
static int run_steps(jmg_local_view *v, int rc, int64_t block, int *info,
                     jmg_error *err) {
  const jmg_op_desc *desc = v->desc;
  jmg_shard_io *io = v->io;
  int finite = 1;
  if (rc == 0)
    rc = named(
        v, jmg_shard_finite(v->mem, &v->group, 0, desc, io, &finite, err), err);
  rc = jmg_local_agree(v, rc, "the op's first step", err);
  if (rc == 0) rc = agree_finite(v, &finite, err);
  jmg_trace_mark("finite check");
  if (rc == 0 && !finite) {
    *info = JMG_INFO_NONFINITE;
    rc = named(v, jmg_shard_nan_outputs(v->mem, &v->group, 0, desc, io, err),
               err);
    jmg_trace_mark("A not finite: no solver");
    return rc;
  }
  if (rc != 0) return rc;
  v->a.rank = v->rank;
  v->a.ranks = v->ranks;
  v->a.one_process = v->call->key.pids == NULL; /* no pids: SPMD */
  v->a.comm_ops = v->comm_ops;
  v->a.comm = v->comm;
  v->a.n = io->n;
  v->a.mb = v->a.nb = block;
  v->a.dtype = io->dtype;
  v->a.data = io->a;
  v->a.device_ctx = io->device_ctx;
  v->a.mem = v->mem;
  describe_a(v, 0);
  if (desc->rows_scalar > 0) { /* n x local_cols, the columns of Aᵀ */
    v->a.mb = v->a.nb = io->local_cols;
    v->a.rows = v->a.ld = io->n;
    v->a.cols = io->local_cols;
  }
  return desc->local(v, info, err);
}

int jmg_local_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err) {
  const jmg_op_desc *desc = call->op;
  jmg_local_view v;
  view_of(call, io, &v);
  /* What could fail here fails before the first collective, and is told to
   * the others by the agreement. */
  int rc = jmg_op_check_local(desc, io, v.ranks, err);
  if (rc == 0 && desc->local == NULL)
    rc = jmg_error_set(err, JMG_EUNSUPPORTED, v.op, "local model",
                       "the op has no steps in the local model (engine %s)",
                       v.engine->name);
  int64_t block = io->tile;
  rc = plan_layout(&v, rc, &block, err);
  jmg_error open_err;
  int orc = open_comm(call, io->device_ctx, &v.comm,
                      rc == 0 ? err : &open_err);
  if (orc != 0) { /* no one can be told: the communicator is the only way */
    jmg_local_perm_free(&v.perm);
    jmg_local_regrid_free(&v.regrid);
    return rc != 0 ? rc : orc;
  }
  jmg_trace_begin("%s %s N=%lld T_A=%lld on %d (grid %d x %d), blocks %lld, "
                  "rank %d",
                  v.op, jmg_dtype_name(io->dtype), (long long)io->n,
                  (long long)io->tile, v.ranks, v.grid_rows,
                  v.ranks / v.grid_rows, (long long)block, v.rank);
  jmg_trace_engine(v.engine->name);
  int info = 0;
  rc = guard_begin(call, v.comm, rc, err);
  rc = run_steps(&v, rc, block, &info, err);
  if (rc == 0) {
    const int32_t status = (int32_t)info;
    rc = jmg_local_write(&v, io->status, &status, sizeof status, err);
    jmg_trace_mark("outputs");
  }
  rc = guard_end(call, v.comm, rc, err);
  jmg_trace_end();
  jmg_local_perm_free(&v.perm);
  jmg_local_regrid_free(&v.regrid);
  return named(&v, rc, err);
}
