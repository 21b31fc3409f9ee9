/* The gather engine's call frame, its copies, its fall back and its table
 * (gather.h). */
#include <stdio.h>
#include <string.h>

#include "common/trace.h"
#include "engine/gather/gather.h"
#include "engine/gather/mixed.h"
#include "engine/gather/thresholds.h"
#include "layout/cyclic.h"

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

/* Copies between buf and a's shards: to_buf gathers (from the
 * block-cyclic shards), else scatters in layout. One lane per device (lane
 * d lies on device d), all devices at once; returns when all are done. */
static int copy_all(jmg_gather_call *call, const jmg_dist_matrix *a, char *buf,
                    int to_buf, jmg_gather_layout layout, jmg_error *err) {
  jmg_cuda_call *c = &call->cuda;
  const jmg_mem *m = c->mem;
  void *lanes = NULL;
  int rc = m->lanes_open(&c->group, a->ndev, &lanes, err);
  if (rc != 0) return rc;
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

int jmg_gather_begin(jmg_gather_call *c, jmg_op op, const jmg_dist_matrix *a,
                     jmg_error *err) {
  return jmg_gather_begin_in(c, op, a, JMG_GATHER_TO_CYCLIC, err);
}

/* A one-GPU view of buf, rows x cols, on participant 0 of c. */
static jmg_dist_matrix one_gpu(const jmg_gather_call *c, int64_t rows,
                               int64_t cols, void **data) {
  jmg_dist_matrix one = {.ndev = 1,
                         .n = rows,
                         .tile = cols,
                         .local_cols = cols,
                         .dtype = c->a->dtype,
                         .data = data,
                         .device_ctx = c->a->device_ctx}; /* participant 0's */
  return one;
}

int jmg_gather_begin_in(jmg_gather_call *c, jmg_op op, const jmg_dist_matrix *a,
                        jmg_gather_layout layout, jmg_error *err) {
  memset(c, 0, sizeof *c);
  c->a = a;
  const int64_t cols = a->local_cols * a->ndev; /* n but for gesvd's */
  c->bytes = (size_t)a->n * (size_t)cols * jmg_dtype_size(a->dtype);
  /* The table's supports refuses one GPU; this guards the routines. A
   * rectangular matrix (gesvd's) comes in the contiguous layout. */
  if (a->ndev < 2 || a->tile < 1 ||
      (cols != a->n && layout != JMG_GATHER_TO_CONTIGUOUS))
    return jmg_error_set(err, JMG_EINTERNAL, jmg_op_name(op), "gather",
                         "called on %d GPUs with %lld of %lld columns each "
                         "(T_A %lld); it gathers several equal shards",
                         a->ndev, (long long)a->local_cols, (long long)a->n,
                         (long long)a->tile);
  int rc =
      jmg_cuda_call_begin(&c->cuda, jmg_op_name(op), "cuSOLVERDn-gather",
                          a->ndev, a->device_ctx, JMG_CUDA_CALL_HANDLES, err);
  if (rc == 0) rc = jmg_cuda_call_buffer(&c->cuda, 0, c->bytes, &c->buf, err);
  if (rc != 0) return rc;
  jmg_trace_mark("gather buffer");
  /* Only the buffer is written (A's shards are only read): a want of
   * memory here (the lanes' bookkeeping) falls back like the buffer's. */
  rc = copy_all(c, a, c->buf, 1, layout, err);
  jmg_trace_mark("gather");
  c->one_data[0] = c->buf;
  c->one = one_gpu(c, a->n, cols, c->one_data);
  return rc;
}

int jmg_gather_second(jmg_gather_call *c, const jmg_dist_matrix *b,
                      jmg_error *err) {
  const jmg_dist_matrix *a = c->a;
  if (b->ndev != a->ndev || b->n != a->n || b->tile != a->tile ||
      b->local_cols != a->local_cols || b->dtype != a->dtype)
    return jmg_error_set(err, JMG_EINTERNAL, c->cuda.op, "gather",
                         "the second matrix is not laid out as the first");
  void *buf = NULL;
  int rc = jmg_cuda_call_buffer(&c->cuda, 0, c->bytes, &buf, err);
  if (rc == 0) rc = copy_all(c, b, buf, 1, JMG_GATHER_TO_CYCLIC, err);
  jmg_trace_mark("gather second matrix");
  c->second_data[0] = buf;
  c->second = c->one;
  c->second.data = c->second_data;
  return rc;
}

int jmg_gather_output(jmg_gather_call *c, int64_t rows, int64_t cols,
                      void **data, jmg_dist_matrix *out, jmg_error *err) {
  const size_t bytes =
      (size_t)rows * (size_t)cols * jmg_dtype_size(c->a->dtype);
  int rc = jmg_cuda_call_buffer(&c->cuda, 0, bytes, &data[0], err);
  *out = one_gpu(c, rows, cols, data);
  return rc;
}

int jmg_gather_scatter(jmg_gather_call *c, jmg_gather_layout layout,
                       jmg_error *err) {
  int rc = copy_all(c, c->a, c->buf, 0, layout, err);
  jmg_trace_mark("scatter");
  /* The shards hold part of the result: a want of memory now (the lanes'
   * bookkeeping) must not make the ops layer call the routine again. */
  if (rc == -(int)JMG_ENOMEM) {
    err->code = JMG_EINTERNAL;
    rc = -(int)JMG_EINTERNAL;
  }
  return rc;
}

int jmg_gather_scatter_to(jmg_gather_call *c, const jmg_dist_matrix *x,
                          const jmg_dist_matrix *one, jmg_error *err) {
  const jmg_cuda_call *f = &c->cuda;
  const size_t slice =
      (size_t)x->n * (size_t)x->local_cols * jmg_dtype_size(x->dtype);
  const char *buf = one->data[0];
  int rc = 0;
  for (int d = 0; rc == 0 && d < x->ndev; ++d)
    rc = f->mem->copy(&f->group, x->data[d], d, buf + (size_t)d * slice, 0,
                      slice, err);
  /* Wait for the copies before their source goes. */
  if (rc == 0) rc = f->mem->sync(&f->group, err);
  return rc;
}

int jmg_gather_end(jmg_gather_call *c, int rc, jmg_error *err) {
  return jmg_cuda_call_end(&c->cuda, rc, err);
}

int jmg_gather_no_room(int rc, const char *op, const jmg_dist_matrix *a,
                       int64_t rows, int64_t cols, const char *what,
                       const char *why, jmg_error *err) {
  if (rc != -(int)JMG_ENOMEM) return rc;
  char cause[JMG_ERROR_MSG_LEN];
  snprintf(cause, sizeof cause, "%s", err->msg);
  return jmg_error_set(err, JMG_ENOMEM, op, "cusolverdn-gather",
                       "the gathered %lld x %lld matrix and %s do not fit on "
                       "the first GPU of the %d (%s); %s",
                       (long long)rows, (long long)cols, what, a->ndev, cause,
                       why);
}

int jmg_gather_fall_back(int *rc, const jmg_dist_matrix *a, jmg_op op,
                         jmg_error *err) {
  if (*rc != -(int)JMG_ENOMEM) return 0;
  const jmg_engine *dist = JMG_GATHER_DISTRIBUTED;
  const jmg_problem p = {.op = op,
                         .nparts = a->ndev,
                         .nodes = 1,
                         .dtype = a->dtype,
                         .n = a->n,
                         .m = a->n,
                         .tile = a->tile};
  char why[JMG_ERROR_MSG_LEN / 2];
  if (dist->supports != NULL && !dist->supports(dist, &p, why, sizeof why)) {
    char cause[JMG_ERROR_MSG_LEN];
    snprintf(cause, sizeof cause, "%s", err->msg);
    jmg_error_set(err, JMG_ENOMEM, jmg_op_name(op), "cusolverdn-gather",
                  "the gathered %lld x %lld matrix does not fit on the first "
                  "GPU of the %d (%s), and %s, which runs where it does not, "
                  "cannot run this call: %s",
                  (long long)a->n, (long long)a->n, a->ndev, cause, dist->name,
                  why);
    return 0;
  }
  jmg_error_clear(err);
  *rc = 0;
  jmg_trace_mark("no memory to gather: cusolvermg");
  jmg_trace_engine("cusolverdn-gather>cusolvermg");
  return 1;
}

/* ---- the engine -----------------------------------------------------------*/

/* What the engine can run: a group of several GPUs (one GPU is cuSOLVERDn's
 * own) and what cuSOLVERDn can run on one GPU (cuSOLVERMg's routine runs
 * when the gathered copy does not fit, where it can: gather.h).
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
  const jmg_engine *dn = JMG_GATHER_ONE;
  if (dn->supports != NULL && !dn->supports(dn, &one, why, why_len)) return 0;
  /* The distributed engine runs only where the gathered copy does not fit,
   * which is known in the call: a problem it cannot take (cuSOLVERMg's syevd
   * and T_A > 1024) is still gathered, and where the copy does not fit the
   * error names both causes (jmg_gather_fall_back). Refusing it here sent
   * syevd at N = 8192 on 2 and 4 H200 with the default T_A to cuSOLVERMp,
   * at 0.36x one GPU (bench/results/2026-11-27-h200x4-scaling). An op the
   * distributed engine lacks (gesvd, sygvd, qr) has no fall back: where its
   * copy does not fit, its routine says so. */
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
    .prefers = jmg_gather_prefers_precision,
    .workspace = jmg_gather_workspace,
    .leader =
        {
            .potrs = jmg_gather_potrs,
            .potri = jmg_gather_potri,
            .syevd = jmg_gather_syevd,
            .lu_solve = jmg_gather_lu_solve,
            .gesvd = jmg_gather_gesvd,
            .qr = jmg_gather_qr,
            .sygvd = jmg_gather_sygvd,
            .potrs_mixed = jmg_gather_potrs_mixed,
            .lu_solve_mixed = jmg_gather_lu_solve_mixed,
        },
};
