/* The gather engine's call frame, its copies, its fall back and its table
 * (gather.h). */
#include <stdio.h>
#include <string.h>

#include "common/trace.h"
#include "engine/gather/gather.h"
#include "engine/gather/thresholds.h"
#include "layout/cyclic.h"

static void name_op(jmg_error *err, const char *op) {
  if (err->op[0] == '\0') snprintf(err->op, sizeof err->op, "%s", op);
}

/* Column tile k of A (global columns k*tile ...): where it sits on its
 * device, its width, and where it sits in the gathered buffer. */
typedef struct tile_at {
  int dev;
  size_t shard_off, buf_off, bytes; /* in bytes */
} tile_at;

static tile_at tile_of(const jmg_dist_matrix *a, int64_t k) {
  const size_t col_bytes = (size_t)a->n * jmg_dtype_size(a->dtype);
  const int64_t first = k * a->tile;
  const int64_t width = a->n - first < a->tile
                            ? a->n - first
                            : a->tile; /* the last may be short */
  tile_at t;
  int64_t local = 0;
  jmg_cyclic_locate(first, a->ndev, a->tile, &t.dev, &local);
  t.shard_off = (size_t)local * col_bytes;
  t.buf_off = (size_t)first * col_bytes;
  t.bytes = (size_t)width * col_bytes;
  return t;
}

/* Copies between the buffer and the shards: to_buf gathers (from the
 * block-cyclic shards), else scatters in layout. One lane per device (lane
 * d lies on device d), all devices at once; returns when all are done. */
static int copy_all(jmg_gather_call *c, int to_buf, jmg_gather_layout layout,
                    jmg_error *err) {
  const jmg_dist_matrix *a = c->a;
  const jmg_mem *m = c->mem;
  void *lanes = NULL;
  int rc = m->lanes_open(&c->group, a->ndev, &lanes, err);
  if (rc != 0) return rc;
  char *buf = c->buf;
  if (layout == JMG_GATHER_TO_CONTIGUOUS) {
    const size_t shard =
        (size_t)a->n * (size_t)a->local_cols * jmg_dtype_size(a->dtype);
    for (int d = 0; rc == 0 && d < a->ndev; ++d)
      rc = to_buf ? m->lane_copy(&c->group, lanes, d, buf + (size_t)d * shard,
                                 0, a->data[d], d, shard, err)
                  : m->lane_copy(&c->group, lanes, d, a->data[d], d,
                                 buf + (size_t)d * shard, 0, shard, err);
  } else {
    const int64_t ntiles = (a->n + a->tile - 1) / a->tile;
    for (int64_t k = 0; rc == 0 && k < ntiles; ++k) {
      const tile_at t = tile_of(a, k);
      char *shard = (char *)a->data[t.dev] + t.shard_off;
      rc = to_buf ? m->lane_copy(&c->group, lanes, t.dev, buf + t.buf_off, 0,
                                 shard, t.dev, t.bytes, err)
                  : m->lane_copy(&c->group, lanes, t.dev, shard, t.dev,
                                 buf + t.buf_off, 0, t.bytes, err);
    }
  }
  jmg_error ignored;
  int closed = m->lanes_close(&c->group, lanes, rc == 0 ? err : &ignored);
  return rc != 0 ? rc : closed;
}

int jmg_gather_begin(jmg_gather_call *c, const char *op,
                     const jmg_dist_matrix *a, jmg_error *err) {
  return jmg_gather_begin_in(c, op, a, JMG_GATHER_TO_CYCLIC, err);
}

int jmg_gather_begin_in(jmg_gather_call *c, const char *op,
                        const jmg_dist_matrix *a, jmg_gather_layout layout,
                        jmg_error *err) {
  memset(c, 0, sizeof *c);
  c->op = op;
  c->a = a;
  c->group.n = a->ndev;
  c->group.device_ctx = a->device_ctx;
  c->mem = jmg_cuda_mem();
  const int64_t cols = a->local_cols * a->ndev; /* n but for gesvd's */
  c->bytes = (size_t)a->n * (size_t)cols * jmg_dtype_size(a->dtype);
  /* The table's supports refuses one GPU; this guards the routines. A
   * rectangular matrix (gesvd's) comes in the contiguous layout. */
  if (a->ndev < 2 || a->tile < 1 ||
      (cols != a->n && layout != JMG_GATHER_TO_CONTIGUOUS))
    return jmg_error_set(err, JMG_EINTERNAL, op, "gather",
                         "called on %d GPUs with %lld of %lld columns each "
                         "(T_A %lld); it gathers several equal shards",
                         a->ndev, (long long)a->local_cols, (long long)a->n,
                         (long long)a->tile);
  int rc = jmg_cuda_handles_acquire(a->device_ctx, a->ndev, "cuSOLVERDn-gather",
                                    &c->h, err);
  if (rc == 0) rc = c->mem->alloc(&c->group, 0, c->bytes, &c->buf, err);
  if (rc != 0) {
    c->buf = NULL;
    name_op(err, op);
    return rc;
  }
  jmg_trace_mark("gather buffer");
  rc = copy_all(c, 1, layout, err);
  jmg_trace_mark("gather");
  if (rc != 0) {
    /* Only the buffer was written (A's shards were only read): a want of
     * memory here (the lanes' bookkeeping) falls back like the buffer's. */
    name_op(err, op);
    return rc;
  }
  c->one_data[0] = c->buf;
  c->one.ndev = 1;
  c->one.n = a->n;
  c->one.tile = cols;
  c->one.local_cols = cols;
  c->one.dtype = a->dtype;
  c->one.data = c->one_data;
  c->one.device_ctx = a->device_ctx; /* its first: participant 0's */
  return 0;
}

int jmg_gather_second(const jmg_gather_call *c, jmg_gather_call *second,
                      const jmg_dist_matrix *b, jmg_error *err) {
  memset(second, 0, sizeof *second);
  second->op = c->op;
  second->a = b;
  second->group = c->group;
  second->mem = c->mem;
  second->bytes = c->bytes;
  if (b->ndev != c->a->ndev || b->n != c->a->n || b->tile != c->a->tile ||
      b->local_cols != c->a->local_cols || b->dtype != c->a->dtype)
    return jmg_error_set(err, JMG_EINTERNAL, c->op, "gather",
                         "the second matrix is not laid out as the first");
  int rc = c->mem->alloc(&second->group, 0, second->bytes, &second->buf, err);
  if (rc != 0) {
    second->buf = NULL;
    name_op(err, c->op);
    return rc;
  }
  rc = copy_all(second, 1, JMG_GATHER_TO_CYCLIC, err);
  jmg_trace_mark("gather second matrix");
  if (rc != 0) {
    name_op(err, c->op);
    return rc;
  }
  second->one_data[0] = second->buf;
  second->one = c->one;
  second->one.data = second->one_data;
  return 0;
}

int jmg_gather_scatter(jmg_gather_call *c, jmg_gather_layout layout,
                       jmg_error *err) {
  int rc = copy_all(c, 0, layout, err);
  jmg_trace_mark("scatter");
  if (rc != 0) name_op(err, c->op);
  /* The shards hold part of the result: a want of memory now (the lanes'
   * bookkeeping) must not make the ops layer call the routine again. */
  if (rc == -(int)JMG_ENOMEM) {
    err->code = JMG_EINTERNAL;
    rc = -(int)JMG_EINTERNAL;
  }
  return rc;
}

void jmg_gather_end(jmg_gather_call *c) {
  if (c->buf != NULL) {
    /* After a failure copies or cuSOLVER's work may still use it. */
    jmg_error ignored;
    (void)c->mem->sync(&c->group, &ignored);
    c->mem->release(&c->group, 0, c->buf, c->bytes);
    c->buf = NULL;
  }
  if (c->h != NULL) jmg_cuda_handles_release(c->h);
  c->h = NULL;
}

int jmg_gather_fall_back(int *rc, jmg_error *err) {
  if (*rc != -(int)JMG_ENOMEM) return 0;
  jmg_error_clear(err);
  *rc = 0;
  jmg_trace_mark("no memory to gather: cusolvermg");
  jmg_trace_engine("cusolverdn-gather>cusolvermg");
  return 1;
}

/* ---- the engine -----------------------------------------------------------*/

/* What the engine can run: a group of several GPUs (one GPU is cuSOLVERDn's
 * own), what cuSOLVERDn can run on one GPU, and what cuSOLVERMg can run on
 * the group (its routine runs when the gathered copy does not fit, gather.h).
 * Where it is preferred is thresholds.c's table (`prefers`). */
static int gather_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                           size_t why_len) {
  (void)e;
  if (p->nparts < 2) {
    snprintf(why, why_len,
             "one GPU: nothing to gather (cusolverdn runs it in place)");
    return 0;
  }
  jmg_problem one = *p;
  one.nparts = 1;
  const jmg_engine *dn = JMG_GATHER_ONE, *mg = JMG_GATHER_DISTRIBUTED;
  if (dn->supports != NULL && !dn->supports(dn, &one, why, why_len)) return 0;
  /* An op the distributed engine lacks (gesvd, sygvd, qr) has no fall back
   * to judge:
   * where its copy does not fit, its routine says so. */
  char mg_why[128];
  if (jmg_engine_has(mg, p->op) && mg->supports != NULL &&
      !mg->supports(mg, p, mg_why, sizeof mg_why)) {
    snprintf(why, why_len, "its fall back %s cannot: %s", mg->name, mg_why);
    return 0;
  }
  /* The gathered copy's size in bytes must be a size_t. */
  const int64_t rows = jmg_problem_rows(p);
  if (p->n > 0 &&
      (uint64_t)rows > SIZE_MAX / (uint64_t)p->n / jmg_dtype_size(p->dtype)) {
    snprintf(why, why_len,
             "%lld x %lld: the gathered copy is too large to address",
             (long long)rows, (long long)p->n);
    return 0;
  }
  return 1;
}

const jmg_engine jmg_gather_engine = {
    .name = "cusolverdn-gather",
    .model = JMG_MODEL_LEADER,
    .supports = gather_supports,
    .prefers = jmg_gather_prefers,
    .leader =
        {
            .potrs = jmg_gather_potrs,
            .potri = jmg_gather_potri,
            .syevd = jmg_gather_syevd,
            .lu_solve = jmg_gather_lu_solve,
            .gesvd = jmg_gather_gesvd,
            .qr = jmg_gather_qr,
            .sygvd = jmg_gather_sygvd,
        },
};
