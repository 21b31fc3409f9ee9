/* The steps of the local model's one-device path (local_gather.h). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/trace.h"
#include "engine/local_gather/local_gather.h"
#include "layout/local.h"

/* Rank p's part: its place on the grid and its size. */
typedef struct lg_part {
  int row, col;
  int64_t rows, cols;
} lg_part;

static lg_part part_of(const jmg_local_matrix *a, int p) {
  lg_part q;
  q.row = p % a->grid_rows;
  q.col = p / a->grid_rows;
  q.rows = jmg_bc_count(a->n, a->mb, q.row, a->grid_rows);
  q.cols = jmg_bc_count(a->n, a->nb, q.col, a->grid_cols);
  return q;
}

static size_t part_bytes(const jmg_lg_call *c, const lg_part *q) {
  return (size_t)q->rows * (size_t)q->cols * c->elem;
}

/* What this rank can check before anything is taken. */
static int check_view(const jmg_lg_call *c, const jmg_local_matrix *a,
                      jmg_error *err) {
  if (a->ranks < 1 || a->rank < 0 || a->rank >= a->ranks ||
      a->grid_rows < 1 || a->grid_cols < 1 ||
      a->grid_rows * a->grid_cols != a->ranks || a->mb < 1 || a->nb < 1 ||
      a->n < 0)
    return jmg_error_set(err, JMG_EINVAL, c->op, c->e->name,
                         "rank %d of %d on a %d x %d grid, N=%lld, blocks "
                         "%lld x %lld: not a local-model view",
                         a->rank, a->ranks, a->grid_rows, a->grid_cols,
                         (long long)a->n, (long long)a->mb, (long long)a->nb);
  const lg_part q = part_of(a, a->rank);
  if (q.rows != a->rows || q.cols != a->cols || a->ld < a->rows)
    return jmg_error_set(err, JMG_EINVAL, c->op, c->e->name,
                         "rank %d holds a %lld x %lld part (ld %lld); its "
                         "block-cyclic part is %lld x %lld",
                         a->rank, (long long)a->rows, (long long)a->cols,
                         (long long)a->ld, (long long)q.rows,
                         (long long)q.cols);
  if (a->n > INT_MAX)
    return jmg_error_set(err, JMG_EINVAL, c->op, c->e->name,
                         "N=%lld exceeds the one-device engine's 32-bit "
                         "sizes",
                         (long long)a->n);
  return 0;
}

/* Whether e->fallback runs op on c's parts (the problem as selection saw
 * it; the same answer on every rank). Else err says why not, beside the
 * want of memory, and 0. */
static int can_fall_back(const jmg_lg_call *c, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const jmg_engine *f = c->e->fallback;
  jmg_op op = JMG_OP_POTRS;
  (void)jmg_op_by_name(c->op, &op);
  const jmg_problem p = {.op = op, .nparts = a->ranks, .nodes = 1,
                         .dtype = a->dtype, .n = a->n,
                         .m = c->m > 0 ? c->m : a->n,
                         .tile = a->mb};
  char why[JMG_ERROR_MSG_LEN / 4] = "no engine to fall back on";
  char cause[JMG_ERROR_MSG_LEN / 2] = "";
  if (a->rank == 0) /* its own error says what was refused */
    snprintf(cause, sizeof cause, " (%.180s)", err->msg);
  if (f != NULL && !jmg_engine_has(f, op))
    snprintf(why, sizeof why, "%s has no %s", f->name, c->op);
  else if (f != NULL &&
           (f->supports == NULL || f->supports(f, &p, why, sizeof why))) {
    jmg_error_clear(err);
    jmg_trace_mark("no memory on rank 0: fall back");
    jmg_trace_engine(f->name);
    return 1;
  }
  jmg_error_set(err, JMG_ENOMEM, c->op, c->e->name,
                "the gathered %lld x %lld matrix (and its workspace) does not "
                "fit on rank 0's device%s, and %s",
                (long long)a->n, (long long)a->n, cause, why);
  return 0;
}

/* The buffers: rank 0 the whole matrix and the parts, the others a packed
 * part where ld > rows. */
static int take(jmg_lg_call *c, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  if (a->rank == 0) {
    c->full_bytes = (size_t)a->n * (size_t)a->n * c->elem;
    c->packed_bytes = c->full_bytes; /* the parts add up to the matrix */
    int rc = c->mem->alloc(&c->group, 0, c->full_bytes, &c->full, err);
    if (rc != 0) c->full = NULL;
    if (rc == 0) rc = c->mem->alloc(&c->group, 0, c->packed_bytes,
                                    &c->packed, err);
    if (rc != 0) c->packed = NULL;
    return rc;
  }
  if (a->ld == a->rows) return 0;
  const lg_part q = part_of(a, a->rank);
  c->packed_bytes = part_bytes(c, &q);
  int rc = c->mem->alloc(&c->group, 0, c->packed_bytes, &c->packed, err);
  if (rc != 0) c->packed = NULL;
  return rc;
}

/* This rank's agreement word: 0 ready, 1 rank 0 short of memory (the
 * fallback may run), 2 any other failure. */
static int begin_word(const jmg_local_matrix *a, int rc) {
  if (rc == 0) return 0;
  return a->rank == 0 && rc == -(int)JMG_ENOMEM ? 1 : 2;
}

int jmg_lg_agree(jmg_lg_call *c, int rc, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  int word = begin_word(a, rc);
  jmg_error ignored;
  int crc = a->ranks > 1
                ? a->comm_ops->max_int(a->comm, &word, a->device_ctx, c->op,
                                       rc != 0 ? &ignored : err)
                : 0;
  if (crc != 0) return rc != 0 ? rc : crc;
  if (word == 1) /* rank 0 alone, short of memory */
    return can_fall_back(c, err) ? JMG_LG_FALL_BACK : -(int)JMG_ENOMEM;
  if (rc != 0) return rc;
  if (word != 0)
    return jmg_error_set(err, JMG_EPEER, c->op, c->e->name,
                         "another rank failed before the gather onto rank 0");
  return 0;
}

int jmg_lg_begin(jmg_lg_call *c, const jmg_engine *e, jmg_op op,
                 const jmg_local_matrix *a, jmg_error *err) {
  memset(c, 0, sizeof *c);
  c->op = jmg_op_name(op);
  c->e = e;
  c->a = a;
  c->mem = a->mem != NULL ? a->mem : jmg_host_mem();
  c->view_ctx[0] = a->device_ctx;
  c->group.n = 1;
  c->group.device_ctx = c->view_ctx;
  c->elem = jmg_dtype_size(a->dtype);
  int rc = check_view(c, a, err);
  if (rc == 0) rc = take(c, err);
  jmg_trace_mark("gather buffers");
  /* The agreement: no rank enters the gather while another failed. */
  return jmg_lg_agree(c, rc, err);
}

/* Between this rank's part (ld a->ld) and a packed copy (ld rows), on the
 * rank's queue. */
static int pack_own(const jmg_lg_call *c, void *packed, int to_packed,
                    jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const size_t width = (size_t)a->rows * c->elem;
  const size_t ld = (size_t)a->ld * c->elem;
  return to_packed ? c->mem->copy2d(&c->group, 0, packed, width, a->data, ld,
                                    width, (size_t)a->cols, err)
                   : c->mem->copy2d(&c->group, 0, a->data, ld, packed, width,
                                    width, (size_t)a->cols, err);
}

/* Between rank 0's full matrix and part p packed (ld rows): each block of
 * the part (mb rows of nb columns) is one 2D copy. */
static int move_part(const jmg_lg_call *c, int p, char *packed, int to_full,
                     jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const lg_part q = part_of(a, p);
  const size_t e = c->elem, full_ld = (size_t)a->n * e;
  const size_t part_ld = (size_t)q.rows * e;
  int rc = 0;
  for (int64_t lc = 0; rc == 0 && lc < q.cols; lc += a->nb) {
    const int64_t width = q.cols - lc < a->nb ? q.cols - lc : a->nb;
    const int64_t j = jmg_bc_global(lc, a->nb, q.col, a->grid_cols);
    for (int64_t lr = 0; rc == 0 && lr < q.rows; lr += a->mb) {
      const int64_t len = q.rows - lr < a->mb ? q.rows - lr : a->mb;
      const int64_t i = jmg_bc_global(lr, a->mb, q.row, a->grid_rows);
      char *whole = (char *)c->full + (size_t)(i + j * a->n) * e;
      char *mine = packed + (size_t)(lr + lc * q.rows) * e;
      rc = to_full ? c->mem->copy2d(&c->group, 0, whole, full_ld, mine,
                                    part_ld, (size_t)len * e, (size_t)width,
                                    err)
                   : c->mem->copy2d(&c->group, 0, mine, part_ld, whole,
                                    full_ld, (size_t)len * e, (size_t)width,
                                    err);
    }
  }
  return rc;
}

/* One group: this rank's part to (or from) rank 0; on rank 0, every other
 * rank's part from (or to) its slot of packed. Rank 0's own part is copied
 * to its slot (offset 0), not sent. */
static int exchange(jmg_lg_call *c, int to_root, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const jmg_comm_ops *ops = a->comm_ops;
  int rc = 0;
  if (to_root && c->packed != NULL) rc = pack_own(c, c->packed, 1, err);
  /* A part as it travels: in place, or packed (ld > rows). */
  void *own = c->packed != NULL ? c->packed : a->data;
  const lg_part mine = part_of(a, a->rank);
  if (rc == 0 && a->ranks > 1) rc = ops->group_begin(c->op, err);
  if (rc == 0 && a->rank != 0)
    rc = to_root ? ops->send(a->comm, own, part_bytes(c, &mine), 0,
                             a->device_ctx, c->op, err)
                 : ops->recv(a->comm, own, part_bytes(c, &mine), 0,
                             a->device_ctx, c->op, err);
  size_t off = part_bytes(c, &mine); /* past rank 0's slot */
  for (int p = 1; rc == 0 && a->rank == 0 && p < a->ranks; ++p) {
    const lg_part q = part_of(a, p);
    const size_t bytes = part_bytes(c, &q);
    char *slot = (char *)c->packed + off;
    rc = to_root ? ops->recv(a->comm, slot, bytes, p, a->device_ctx, c->op,
                             err)
                 : ops->send(a->comm, slot, bytes, p, a->device_ctx, c->op,
                             err);
    off += bytes;
  }
  if (a->ranks > 1) {
    jmg_error ignored;
    int erc = ops->group_end(c->op, rc == 0 ? err : &ignored);
    if (rc == 0) rc = erc;
  }
  if (rc == 0 && !to_root && own != a->data) rc = pack_own(c, own, 0, err);
  return rc;
}

int jmg_lg_gather(jmg_lg_call *c, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  int rc = exchange(c, 1, err);
  size_t off = 0;
  for (int p = 0; rc == 0 && a->rank == 0 && p < a->ranks; ++p) {
    const lg_part q = part_of(a, p);
    rc = move_part(c, p, (char *)c->packed + off, 1, err);
    off += part_bytes(c, &q);
  }
  jmg_trace_mark("gather onto rank 0");
  return rc;
}

int jmg_lg_scatter(jmg_lg_call *c, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  size_t off = 0;
  int rc = 0;
  for (int p = 0; rc == 0 && a->rank == 0 && p < a->ranks; ++p) {
    const lg_part q = part_of(a, p);
    rc = move_part(c, p, (char *)c->packed + off, 0, err);
    off += part_bytes(c, &q);
  }
  /* Every rank takes part in the exchange, whatever rank 0's copies did:
   * a failure there is the call's error on rank 0 alone (the others
   * receive what was sent; the guard, on GPUs, ends what hangs). */
  jmg_error ignored;
  int xrc = exchange(c, 0, rc == 0 ? err : &ignored);
  jmg_trace_mark("scatter from rank 0");
  return rc != 0 ? rc : xrc;
}

/* Rank 0's word for the outcome: its info, or a failure (INT_MAX - 1:
 * short of memory, before anything was written; INT_MAX: any other). The
 * others' word is 0: the maximum is rank 0's (info >= 0 where rc is 0). */
static int outcome_word(const jmg_lg_call *c, int rc, int info) {
  if (c->a->rank != 0) return 0;
  if (rc == 0) return info;
  return rc == -(int)JMG_ENOMEM ? INT_MAX - 1 : INT_MAX;
}

int jmg_lg_outcome(jmg_lg_call *c, int rc, int *info, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  if (a->rank != 0) rc = 0;
  int word = outcome_word(c, rc, *info);
  jmg_error ignored;
  int crc = a->ranks > 1
                ? a->comm_ops->max_int(a->comm, &word, a->device_ctx, c->op,
                                       rc != 0 ? &ignored : err)
                : 0;
  if (crc != 0) return rc != 0 ? rc : crc;
  if (word == INT_MAX - 1)
    return can_fall_back(c, err) ? JMG_LG_FALL_BACK : -(int)JMG_ENOMEM;
  if (rc != 0) return rc;
  if (word == INT_MAX)
    return jmg_error_set(err, JMG_EPEER, c->op, c->e->name,
                         "rank 0 failed running %s (its error says why)",
                         c->e->on_rank0 ? c->e->on_rank0->name : "the solver");
  *info = word;
  return 0;
}

int jmg_lg_bcast(jmg_lg_call *c, void *buf, size_t bytes, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const jmg_comm_ops *ops = a->comm_ops;
  if (a->ranks == 1 || buf == NULL || bytes == 0) return 0;
  int rc = ops->group_begin(c->op, err);
  if (rc == 0)
    rc = ops->bcast(a->comm, buf, bytes, 0, a->device_ctx, c->op, err);
  jmg_error ignored;
  int erc = ops->group_end(c->op, rc == 0 ? err : &ignored);
  return rc != 0 ? rc : erc;
}

int jmg_lg_bcast_host(jmg_lg_call *c, void *host, size_t bytes,
                      jmg_error *err) {
  if (c->a->ranks == 1 || host == NULL || bytes == 0) return 0;
  const jmg_mem *m = c->mem;
  int rc = m->alloc(&c->group, 0, bytes, &c->stage, err);
  if (rc != 0) {
    c->stage = NULL;
    return rc;
  }
  c->stage_bytes = bytes;
  if (c->a->rank == 0) rc = m->copy(&c->group, c->stage, 0, host, JMG_HOST,
                                    bytes, err);
  if (rc == 0) rc = jmg_lg_bcast(c, c->stage, bytes, err);
  if (rc == 0 && c->a->rank != 0)
    rc = m->copy(&c->group, host, JMG_HOST, c->stage, 0, bytes, err);
  if (rc == 0) rc = m->sync(&c->group, err);
  return rc;
}

int jmg_lg_end(jmg_lg_call *c, int rc, jmg_error *err) {
  if (c->mem == NULL) return rc; /* never begun */
  jmg_error ignored;
  /* Copies and the communicator's operations may still be queued. */
  int s = c->mem->sync(&c->group, rc == 0 ? err : &ignored);
  if (rc == 0 && s != 0) rc = s;
  if (c->stage != NULL)
    c->mem->release(&c->group, 0, c->stage, c->stage_bytes);
  if (c->packed != NULL)
    c->mem->release(&c->group, 0, c->packed, c->packed_bytes);
  if (c->full != NULL) c->mem->release(&c->group, 0, c->full, c->full_bytes);
  c->stage = c->packed = c->full = NULL;
  if (rc < 0) jmg_error_name_op(err, c->op);
  return rc;
}

void jmg_lg_view_of(const jmg_local_matrix *a, void *data, int64_t rows,
                    int64_t cols, void **data_home, void **ctx_home,
                    jmg_dist_matrix *view) {
  *data_home = data;
  *ctx_home = a->device_ctx;
  *view = (jmg_dist_matrix){.ndev = 1,
                            .n = rows,
                            .tile = cols,
                            .local_cols = cols,
                            .dtype = a->dtype,
                            .data = data_home,
                            .device_ctx = ctx_home};
}

const jmg_dist_matrix *jmg_lg_square_view(jmg_lg_call *c) {
  jmg_lg_view_of(c->a, c->full, c->a->n, c->a->n, c->view_data, c->view_ctx,
                 &c->view);
  return &c->view;
}

int64_t jmg_lg_block(const jmg_engine *e, const jmg_problem *p) {
  (void)e;
  if (!jmg_op_is_eigensolver(p->op)) return p->tile;
  return jmg_local_pow2_block(p->n, p->nparts, p->tile);
}

int jmg_lg_workspace(const jmg_engine *e, const jmg_problem *p,
                     const jmg_workspace_query *q, size_t *bytes,
                     jmg_error *err) {
  const jmg_engine *one = e->on_rank0;
  const char *op = jmg_op_name(p->op);
  *bytes = 0;
  if (p->op == JMG_OP_QR || p->op == JMG_OP_GESVD || p->n < 0)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, e->name,
                         "the workspace of %s is not asked ahead of a call "
                         "(JAXMG_TRACE=1 prints what a call took)",
                         op);
  if (one == NULL || one->workspace == NULL)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, e->name,
                         "its one-device engine cannot tell its workspace "
                         "ahead of a call");
  /* The gathered copies (A's, B's for sygvd) and the parts as they
   * arrive: at most 3 n x n. */
  const uint64_t elem = jmg_dtype_size(p->dtype), n = (uint64_t)p->n;
  if (n > 0 && n > SIZE_MAX / n / elem / 4)
    return jmg_error_set(err, JMG_EINVAL, op, e->name,
                         "N=%lld: the gathered copy is too large to address",
                         (long long)p->n);
  const size_t copy = (size_t)(n * n * elem);
  jmg_problem single = *p;
  single.nparts = 1;
  size_t library = 0;
  int rc = one->workspace(one, &single, q, &library, err);
  if (rc == 0) *bytes = (p->op == JMG_OP_SYGVD ? 3 : 2) * copy + library;
  return rc;
}
