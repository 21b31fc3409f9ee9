/* The leader execution model (exec/leader.h). */
#include "exec/leader.h"

#include "common/config.h"
#include "common/trace.h"
#include "exec/finite.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether shard d's io describes the same call as shard 0's. */
static int same_call(const jmg_op_desc *desc, const jmg_shard_io *p,
                     const jmg_shard_io *first) {
  if (p->dtype != first->dtype || p->n != first->n ||
      p->local_cols != first->local_cols || p->tile != first->tile)
    return 0;
  for (int i = 0; i < desc->nscalars; ++i)
    if (*jmg_op_scalar_slot(&desc->scalars[i], p) !=
        *jmg_op_scalar_slot(&desc->scalars[i], first))
      return 0;
  return 1;
}

static void view_free(jmg_leader_view *v);

/* Checks that every post describes the same call, builds the distributed
 * matrix and the layout plan. On failure nothing needs freeing. */
static int view_init(jmg_leader_view *v, const jmg_op_call *call,
                     void *const *posts, int nparts, jmg_error *err) {
  const char *op = call->op->name;
  memset(v, 0, sizeof *v);
  v->op = op;
  v->desc = call->op;
  v->engine = call->engine;
  v->mem = call->mem;
  v->config = &call->config;
  v->io = (jmg_shard_io *const *)posts;
  v->ndev = nparts;
  const jmg_shard_io *first = v->io[0];
  for (int d = 1; d < nparts; ++d) {
    const jmg_shard_io *p = v->io[d];
    if (!same_call(v->desc, p, first))
      return jmg_error_set(err, JMG_EINVAL, op, "rendezvous",
                           "shard %d describes a different call than shard 0 "
                           "(N %lld vs %lld, T_A %lld vs %lld, dtype %s vs %s)",
                           d, (long long)p->n, (long long)first->n,
                           (long long)p->tile, (long long)first->tile,
                           jmg_dtype_name(p->dtype),
                           jmg_dtype_name(first->dtype));
  }
  v->a_data = calloc((size_t)nparts, sizeof *v->a_data);
  v->home = calloc((size_t)nparts, sizeof *v->home);
  v->device_ctx = calloc((size_t)nparts, sizeof *v->device_ctx);
  if (!v->a_data || !v->home || !v->device_ctx) {
    view_free(v);
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate the leader's view");
  }
  for (int d = 0; d < nparts; ++d) {
    v->a_data[d] = v->home[d] = v->io[d]->a;
    v->device_ctx[d] = v->io[d]->device_ctx;
  }
  v->a.ndev = nparts;
  v->a.n = first->n;
  v->a.tile = first->tile;
  v->a.local_cols = first->local_cols;
  v->a.dtype = first->dtype;
  v->a.data = v->a_data;
  v->a.device_ctx = v->device_ctx;
  v->group.n = nparts;
  v->group.device_ctx = v->device_ctx;
  /* The op's own scalars, as " name=value" each; an optional one only when
   * set, so that a call without it reads as it always has. */
  char own[JMG_OP_MAX_SCALARS * 48] = "";
  for (int i = 0, len = 0; i < v->desc->nscalars; ++i) {
    const jmg_op_scalar *s = &v->desc->scalars[i];
    if (s->optional && *jmg_op_scalar_slot(s, first) == 0) continue;
    int k = snprintf(own + len, sizeof own - (size_t)len, " %s=%lld", s->name,
                     (long long)*jmg_op_scalar_slot(s, first));
    if (k > 0 && (size_t)(len + k) < sizeof own) len += k;
  }
  jmg_trace_begin("%s %s N=%lld T_A=%lld%s on %d", op,
                  jmg_dtype_name(first->dtype), (long long)first->n,
                  (long long)first->tile, own, nparts);
  jmg_trace_engine(v->engine != NULL ? v->engine->name : "none");
  /* A rectangular A (gesvd) stays in its contiguous layout: no plan, and
   * jmg_leader_permute moves nothing. */
  if (v->desc->rows_scalar > 0) return 0;
  /* On one device every T_A gives the same layout (each column where it
   * is): plan it as one tile, one unit, rather than n / T_A units that map
   * to themselves. */
  const int64_t plan_tile = nparts == 1 ? first->n : first->tile;
  int rc = jmg_cyclic_plan_init(&v->plan, first->n, nparts, plan_tile, err);
  if (rc != 0) {
    jmg_error_name_op(err, op);
    view_free(v);
  }
  return rc;
}

static void release_scratch(jmg_leader_view *v) {
  if (v->scratch == NULL) return;
  /* After a failure work may still be queued on it. */
  jmg_error ignored;
  v->mem->sync(&v->group, &ignored);
  const size_t bytes =
      (size_t)v->a.n * (size_t)v->a.local_cols * jmg_dtype_size(v->a.dtype);
  for (int d = 0; v->scratch != NULL && d < v->ndev; ++d)
    if (v->scratch[d] != NULL)
      v->mem->release(&v->group, d, v->scratch[d], bytes);
  free(v->scratch);
  v->scratch = NULL;
}

static void view_free(jmg_leader_view *v) {
  jmg_trace_end();
  release_scratch(v);
  free(v->a_data);
  free(v->home);
  free(v->device_ctx);
  jmg_cyclic_plan_free(&v->plan);
  v->a_data = NULL;
  v->home = NULL;
  v->device_ctx = NULL;
}

/* ---- permutation ----------------------------------------------------------*/

/* Lanes for the permutation: JAXMG_COPY_LANES if set (1 runs every copy in
 * one queue), else one per device, never more than there are cycles. */
static int permute_lanes(const jmg_leader_view *v) {
  const jmg_cyclic_plan *plan = &v->plan;
  int want = v->config->copy_lanes > 0 ? v->config->copy_lanes : plan->ndev;
  return plan->ncycles < want ? (int)plan->ncycles : want;
}

typedef struct permute_ctx {
  jmg_leader_view *v;
  void *lanes;
  int nlanes;
  void **stage; /* stage[l]: lane l's staging unit, on device l % ndev */
  size_t unit_bytes;
} permute_ctx;

static void *unit_ptr(permute_ctx *c, jmg_unit_loc loc, int *dev) {
  if (loc.dev == JMG_STAGE) {
    *dev = (int)(loc.unit % c->v->ndev);
    return c->stage[loc.unit];
  }
  *dev = loc.dev;
  return (char *)c->v->a_data[loc.dev] + (size_t)loc.unit * c->unit_bytes;
}

static int copy_unit(void *ctx, int lane, jmg_unit_loc dst, jmg_unit_loc src,
                     jmg_error *err) {
  permute_ctx *c = ctx;
  int ddev, sdev;
  void *d = unit_ptr(c, dst, &ddev);
  void *s = unit_ptr(c, src, &sdev);
  const jmg_mem *m = c->v->mem;
  return m->lane_copy(&c->v->group, c->lanes, lane, d, ddev, s, sdev,
                      c->unit_bytes, err);
}

static int permute_in_place(jmg_leader_view *v, jmg_cyclic_direction dir,
                            jmg_error *err) {
  const jmg_mem *m = v->mem;
  permute_ctx c = {v, NULL, permute_lanes(v), NULL, 0};
  c.unit_bytes =
      (size_t)v->plan.unit * (size_t)v->a.n * jmg_dtype_size(v->a.dtype);
  int rc = 0, opened = 0;
  c.stage = calloc((size_t)c.nlanes, sizeof *c.stage);
  if (c.stage == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, v->op, "malloc",
                       "cannot allocate %d staging pointers", c.nlanes);
  for (int l = 0; rc == 0 && l < c.nlanes; ++l)
    rc = m->alloc(&v->group, l % v->ndev, c.unit_bytes, &c.stage[l], err);
  if (rc == 0) {
    rc = m->lanes_open(&v->group, c.nlanes, &c.lanes, err);
    opened = rc == 0;
  }
  if (rc == 0)
    rc = jmg_cyclic_apply(&v->plan, dir, c.nlanes, copy_unit, &c, err);
  /* Copies may be in flight: finish them before the staging goes away. */
  if (opened) {
    jmg_error ignored;
    int closed = m->lanes_close(&v->group, c.lanes, rc == 0 ? err : &ignored);
    if (rc == 0) rc = closed;
  }
  for (int l = 0; c.stage != NULL && l < c.nlanes; ++l)
    if (c.stage[l]) m->release(&v->group, l % v->ndev, c.stage[l], c.unit_bytes);
  free(c.stage);
  return rc;
}

/* Moves every unit of A from src to dst: unit slot s of src to slot map[s]
 * of dst (map NULL: to slot s; inverse: slot map[s] of src to slot s of dst).
 * Each device's copies go on a lane of its own (lane d lies on device d), so
 * that all devices copy at once. (One lane per pair of devices was no
 * faster, with four times the streams: bench/results/2026-11-21-h200x4-s3
 * ran it, at 8.6-9.1 ms against one lane per device's 8.6 ms for the
 * permutation at N=32768, T_A=2048 on 4 H200; commit a570ede.) */
static int move_units(jmg_leader_view *v, void *const *dst, void *const *src,
                      const int64_t *map, int inverse, jmg_error *err) {
  const jmg_mem *m = v->mem;
  const jmg_cyclic_plan *plan = &v->plan;
  const size_t unit_bytes =
      (size_t)plan->unit * (size_t)v->a.n * jmg_dtype_size(v->a.dtype);
  void *lanes = NULL;
  int rc = m->lanes_open(&v->group, v->ndev, &lanes, err);
  if (rc != 0) return rc;
  for (int64_t s = 0; rc == 0 && s < plan->nunits; ++s) {
    const int64_t to = map == NULL || inverse ? s : map[s];
    const int64_t from = map != NULL && inverse ? map[s] : s;
    const jmg_unit_loc f = jmg_cyclic_slot_loc(plan, from);
    const jmg_unit_loc t = jmg_cyclic_slot_loc(plan, to);
    rc = m->lane_copy(&v->group, lanes, f.dev,
                      (char *)dst[t.dev] + (size_t)t.unit * unit_bytes, t.dev,
                      (const char *)src[f.dev] + (size_t)f.unit * unit_bytes,
                      f.dev, unit_bytes, err);
  }
  jmg_error ignored;
  int closed = m->lanes_close(&v->group, lanes, rc == 0 ? err : &ignored);
  return rc != 0 ? rc : closed;
}

/* A shard-sized buffer on every device, or none (and no error) when the
 * memory module cannot give them all: the in-place permutation needs no more. */
static void take_scratch(jmg_leader_view *v) {
  const jmg_config c = *v->config;
  if (c.permute == JMG_PERMUTE_INPLACE) return;
  /* A refused allocation can cost seconds (XLA's allocator waits for memory
   * to be freed before it gives up): try only where the Python layer judged
   * that it fits, unless JAXMG_PERMUTE=apart insists. */
  if (!v->io[0]->scratch_ok && c.permute != JMG_PERMUTE_APART)
    return;
  const size_t bytes =
      (size_t)v->a.n * (size_t)v->a.local_cols * jmg_dtype_size(v->a.dtype);
  v->scratch = calloc((size_t)v->ndev, sizeof *v->scratch);
  for (int d = 0; v->scratch != NULL && d < v->ndev; ++d) {
    jmg_error ignored;
    if (v->mem->alloc(&v->group, d, bytes, &v->scratch[d],
                         &ignored) != 0) {
      v->scratch[d] = NULL;
      release_scratch(v);
    }
  }
}

int jmg_leader_permute(jmg_leader_view *v, jmg_cyclic_direction dir,
                       jmg_error *err) {
  if (v->plan.ncycles == 0) return 0; /* one device, or T_A = shard size */
  void **home = v->home;
  int rc = 0;
  const char *how = "in place";
  if (dir == JMG_TO_CYCLIC && v->scratch == NULL && v->a_data[0] == home[0]) {
    take_scratch(v);
    jmg_trace_mark(v->scratch != NULL ? "scratch" : "no scratch");
  }
  if (dir == JMG_TO_CYCLIC && v->scratch != NULL) {
    how = "apart";
    rc = move_units(v, v->scratch, home, v->plan.dest, 0, err);
    if (rc == 0)
      for (int d = 0; d < v->ndev; ++d) v->a_data[d] = v->scratch[d];
  } else if (dir == JMG_FROM_CYCLIC && v->a_data[0] != home[0]) {
    how = "apart";
    rc = move_units(v, home, v->a_data, v->plan.dest, 1, err);
    if (rc == 0)
      for (int d = 0; d < v->ndev; ++d) v->a_data[d] = home[d];
  } else {
    rc = permute_in_place(v, dir, err);
  }
  if (rc != 0) jmg_error_name_op(err, v->op);
  char what[48];
  snprintf(what, sizeof what, "%s %s",
           dir == JMG_TO_CYCLIC ? "permute" : "permute back", how);
  jmg_trace_mark(what);
  return rc;
}

int jmg_leader_permute_matrix(jmg_leader_view *v, void *const *data,
                              jmg_cyclic_direction dir, jmg_error *err) {
  if (v->plan.ncycles == 0) return 0; /* one device, or T_A = shard size */
  /* The same plan over other shards: a view whose A lies at data. */
  jmg_leader_view other = *v;
  other.a_data = (void **)(uintptr_t)data;
  other.a.data = data;
  int rc = permute_in_place(&other, dir, err);
  if (rc != 0) jmg_error_name_op(err, v->op);
  jmg_trace_mark(dir == JMG_TO_CYCLIC ? "permute second matrix"
                                      : "permute second matrix back");
  return rc;
}

int jmg_leader_home(jmg_leader_view *v, jmg_error *err) {
  int rc = 0;
  if (v->a_data[0] != v->home[0]) {
    rc = move_units(v, v->home, v->a_data, NULL, 0, err);
    if (rc == 0)
      for (int d = 0; d < v->ndev; ++d) v->a_data[d] = v->home[d];
    jmg_trace_mark("home");
  }
  if (rc != 0) jmg_error_name_op(err, v->op);
  return rc;
}

int jmg_leader_retry_without_scratch(jmg_leader_view *v, int *rc,
                                     jmg_error *err) {
  if (*rc != -(int)JMG_ENOMEM || v->scratch == NULL) return 0;
  jmg_error e;
  if (jmg_leader_home(v, &e) != 0) return 0; /* keep the first error */
  release_scratch(v);
  jmg_trace_mark("scratch freed for the solver");
  jmg_error_clear(err);
  *rc = 0;
  return 1;
}

/* ---- outputs
 * ----------------------------------------------------------------*/

/* buf's pointer in shard d's io. */
static void *pick(const jmg_op_buf *buf, const jmg_shard_io *io) {
  return *jmg_op_buf_slot(buf, io);
}

int jmg_leader_broadcast(jmg_leader_view *v, const jmg_op_buf *buf,
                         jmg_error *err) {
  const void *src = pick(buf, v->io[0]);
  const size_t bytes = jmg_op_buf_bytes(v->desc, buf, v->io[0]);
  for (int d = 1; d < v->ndev; ++d) {
    int rc = v->mem->copy(&v->group, pick(buf, v->io[d]), d, src, 0,
                             bytes, err);
    if (rc != 0) return rc;
  }
  return 0;
}

int jmg_leader_nan_a(jmg_leader_view *v, jmg_error *err) {
  size_t count = (size_t)v->a.n * (size_t)v->a.local_cols;
  for (int d = 0; d < v->ndev; ++d) {
    int rc = v->mem->fill_nan(&v->group, d, v->io[d]->a, count,
                                 v->a.dtype, err);
    if (rc != 0) return rc;
  }
  return 0;
}

/* Writes info into every shard's status and waits for all issued work. */
static int finish(jmg_leader_view *v, int info, jmg_error *err) {
  int32_t status = (int32_t)info;
  for (int d = 0; d < v->ndev; ++d) {
    int rc = v->mem->copy(&v->group, v->io[d]->status, d, &status,
                             JMG_HOST, sizeof status, err);
    if (rc != 0) return rc;
  }
  /* status is on the host stack: the copies must finish before we return. */
  int rc = v->mem->sync(&v->group, err);
  jmg_trace_mark("outputs");
  return rc;
}

int jmg_leader_run(void *ctx, void *const *posts, int nparts, jmg_error *err) {
  const jmg_op_call *call = ctx;
  jmg_leader_view v;
  int rc = view_init(&v, call, posts, nparts, err);
  if (rc != 0) return rc;
  /* A with a NaN or an Inf entry on any shard: no solver, NaN outputs
   * (exec/finite.h). */
  int finite = 1;
  for (int d = 0; rc == 0 && finite && d < v.ndev; ++d)
    rc = jmg_shard_finite(v.mem, &v.group, d, v.desc, v.io[d], &finite,
                          err);
  jmg_trace_mark("finite check");
  int info = 0;
  if (rc == 0 && !finite) {
    info = JMG_INFO_NONFINITE;
    for (int d = 0; rc == 0 && d < v.ndev; ++d)
      rc = jmg_shard_nan_outputs(v.mem, &v.group, d, v.desc, v.io[d], err);
    jmg_trace_mark("A not finite: no solver");
  } else if (rc == 0) {
    rc = call->op->leader(&v, &info, err);
  }
  if (rc != 0) jmg_error_name_op(err, v.op);
  if (rc == 0) rc = finish(&v, info, err);
  view_free(&v);
  return rc;
}
