/* qr on the local model's one-device path: rank 0 gathers every rank's
 * columns of Aᵀ (the contiguous layout: rank p's part is columns p * cols
 * ..., engine.h's local qr) over the communicator, runs the on_rank0
 * engine's qr on them, and sends every rank its columns of Qᵀ and of Rᵀ
 * back. local_gather.h's steps, without the square view: the parts are
 * whole columns, packed (ld N), and travel as they lie. */
#include <string.h>

#include "common/trace.h"
#include "engine/local_gather/local_gather.h"

/* Rank 0: every other rank's part from (to_root) or to (!to_root) its slot
 * of whole (slot p at p * bytes); the others: their own part to or from
 * rank 0. */
static int exchange(const jmg_local_matrix *a, const char *op, void *own,
                    char *whole, size_t bytes, int to_root, jmg_error *err) {
  const jmg_comm_ops *ops = a->comm_ops;
  if (a->ranks == 1) return 0;
  int rc = ops->group_begin(op, err);
  if (rc == 0 && a->rank != 0)
    rc = to_root ? ops->send(a->comm, own, bytes, 0, a->device_ctx, op, err)
                 : ops->recv(a->comm, own, bytes, 0, a->device_ctx, op, err);
  for (int p = 1; rc == 0 && a->rank == 0 && p < a->ranks; ++p)
    rc = to_root ? ops->recv(a->comm, whole + (size_t)p * bytes, bytes, p,
                             a->device_ctx, op, err)
                 : ops->send(a->comm, whole + (size_t)p * bytes, bytes, p,
                             a->device_ctx, op, err);
  jmg_error ignored;
  int erc = ops->group_end(op, rc == 0 ? err : &ignored);
  return rc != 0 ? rc : erc;
}

/* Rank 0's buffers (Aᵀ's m columns and Rᵀ's), in c->full and c->packed,
 * and the agreement; JMG_LG_FALL_BACK as jmg_lg_begin. */
static int begin(jmg_lg_call *c, const jmg_engine *e,
                 const jmg_local_matrix *a, int64_t m, int64_t rr,
                 jmg_error *err) {
  memset(c, 0, sizeof *c);
  c->op = "qr";
  c->e = e;
  c->a = a;
  c->m = m;
  c->mem = a->mem != NULL ? a->mem : jmg_host_mem();
  c->view_ctx[0] = a->device_ctx;
  c->group.n = 1;
  c->group.device_ctx = c->view_ctx;
  c->elem = jmg_dtype_size(a->dtype);
  int rc = 0;
  if (a->ld != a->n || a->rows != a->n || (int64_t)a->ranks * a->cols != m)
    rc = jmg_error_set(err, JMG_EINTERNAL, c->op, e->name,
                       "rank %d holds %lld x %lld (ld %lld) of a %lld x %lld "
                       "Aᵀ over %d ranks: not its contiguous part",
                       a->rank, (long long)a->rows, (long long)a->cols,
                       (long long)a->ld, (long long)a->n, (long long)m,
                       a->ranks);
  if (rc == 0 && a->rank == 0) {
    c->full_bytes = (size_t)a->n * (size_t)m * c->elem;
    c->packed_bytes = (size_t)a->n * (size_t)(rr * a->ranks) * c->elem;
    rc = c->mem->alloc(&c->group, 0, c->full_bytes, &c->full, err);
    if (rc != 0) c->full = NULL;
    if (rc == 0)
      rc = c->mem->alloc(&c->group, 0, c->packed_bytes, &c->packed, err);
    if (rc != 0) c->packed = NULL;
  }
  return jmg_lg_agree(c, rc, err);
}

int jmg_lg_qr(const jmg_engine *e, const jmg_local_matrix *a, void *rt,
              int64_t m, int64_t rr, int *info, jmg_error *err) {
  const jmg_engine *one = e->on_rank0;
  jmg_lg_call c;
  const size_t part = (size_t)a->n * (size_t)a->cols * jmg_dtype_size(a->dtype);
  const size_t rpart = (size_t)a->n * (size_t)rr * jmg_dtype_size(a->dtype);
  int rc = begin(&c, e, a, m, rr, err);
  if (rc == 0 && a->rank == 0)
    rc = c.mem->copy(&c.group, c.full, 0, a->data, 0, part, err);
  if (rc == 0) rc = exchange(a, c.op, a->data, c.full, part, 1, err);
  jmg_trace_mark("gather onto rank 0");
  int f = 0;
  if (rc == 0) {
    int orc = 0;
    if (a->rank == 0) {
      void *rdata[1], *rctx[1];
      jmg_dist_matrix rview;
      jmg_lg_view_of(a, c.full, a->n, m, c.view_data, c.view_ctx, &c.view);
      jmg_lg_view_of(a, c.packed, a->n, rr * a->ranks, rdata, rctx, &rview);
      orc = one->leader.qr(one, &c.view, &rview, &f, err);
    }
    rc = jmg_lg_outcome(&c, orc, &f, err);
  }
  if (rc == 0 && f == 0) rc = exchange(a, c.op, a->data, c.full, part, 0, err);
  if (rc == 0 && f == 0) rc = exchange(a, c.op, rt, c.packed, rpart, 0, err);
  if (rc == 0 && f == 0 && a->rank == 0)
    rc = c.mem->copy(&c.group, a->data, 0, c.full, 0, part, err);
  if (rc == 0 && f == 0 && a->rank == 0)
    rc = c.mem->copy(&c.group, rt, 0, c.packed, 0, rpart, err);
  jmg_trace_mark("scatter from rank 0");
  if (rc == 0) *info = f;
  rc = jmg_lg_end(&c, rc, err);
  if (rc == JMG_LG_FALL_BACK)
    rc = e->fallback->local.qr(e->fallback, a, rt, m, rr, info, err);
  return rc;
}
