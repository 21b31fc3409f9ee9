/* lapack-local's table and the steps its routines share (local.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack_local/local.h"
#include "layout/local.h"

#define LL_CALL "lapack-local"

/* Rank p's part: its place on the grid and its size. */
typedef struct ll_part {
  int row, col;
  int64_t rows, cols;
} ll_part;

static ll_part part_of(const jmg_local_matrix *a, int p) {
  ll_part q;
  q.row = p % a->grid_rows;
  q.col = p / a->grid_rows;
  q.rows = jmg_bc_count(a->n, a->mb, q.row, a->grid_rows);
  q.cols = jmg_bc_count(a->n, a->nb, q.col, a->grid_cols);
  return q;
}

static size_t part_bytes(const ll_call *c, const ll_part *q) {
  return (size_t)q->rows * (size_t)q->cols * c->elem;
}

/* What this rank can check before anything is taken. */
static int check_view(const char *op, const jmg_local_matrix *a,
                      jmg_error *err) {
  if (a->ranks < 1 || a->rank < 0 || a->rank >= a->ranks ||
      a->grid_rows < 1 || a->grid_cols < 1 ||
      a->grid_rows * a->grid_cols != a->ranks || a->mb < 1 || a->nb < 1 ||
      a->n < 0)
    return jmg_error_set(err, JMG_EINVAL, op, LL_CALL,
                         "rank %d of %d on a %d x %d grid, N=%lld, blocks "
                         "%lld x %lld: not a local-model view",
                         a->rank, a->ranks, a->grid_rows, a->grid_cols,
                         (long long)a->n, (long long)a->mb, (long long)a->nb);
  const ll_part q = part_of(a, a->rank);
  if (q.rows != a->rows || q.cols != a->cols || a->ld < a->rows)
    return jmg_error_set(err, JMG_EINVAL, op, LL_CALL,
                         "rank %d holds a %lld x %lld part (ld %lld); its "
                         "block-cyclic part is %lld x %lld",
                         a->rank, (long long)a->rows, (long long)a->cols,
                         (long long)a->ld, (long long)q.rows,
                         (long long)q.cols);
  if (a->n > INT_MAX)
    return jmg_error_set(err, JMG_EINVAL, op, LL_CALL,
                         "N=%lld exceeds LAPACK's 32-bit int",
                         (long long)a->n);
  return 0;
}

int ll_begin(ll_call *c, const char *op, const jmg_local_matrix *a,
             jmg_error *err) {
  memset(c, 0, sizeof *c);
  c->op = op;
  c->a = a;
  c->elem = jmg_dtype_size(a->dtype);
  int rc = check_view(op, a, err);
  if (rc == 0 && a->rank == 0) {
    const size_t bytes = (size_t)a->n * (size_t)a->n * c->elem;
    c->full = malloc(bytes ? bytes : 1);
    c->packed_bytes = bytes; /* the parts add up to the matrix */
    c->packed = malloc(bytes ? bytes : 1);
    if (c->full == NULL || c->packed == NULL)
      rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "rank 0 cannot allocate 2 x %zu bytes to gather the "
                         "matrix",
                         bytes);
  } else if (rc == 0 && a->ld != a->rows) {
    const ll_part q = part_of(a, a->rank);
    c->packed_bytes = part_bytes(c, &q);
    c->packed = malloc(c->packed_bytes ? c->packed_bytes : 1);
    if (c->packed == NULL)
      rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate %zu bytes to pack the part",
                         c->packed_bytes);
  }
  /* The agreement: no rank enters the gather while another failed. */
  int failed = rc != 0;
  jmg_error ignored;
  int crc = a->comm_ops->max_int(a->comm, &failed, a->device_ctx, op,
                                 rc != 0 ? &ignored : err);
  if (rc != 0) return rc;
  if (crc != 0) return crc;
  if (failed)
    return jmg_error_set(err, JMG_EPEER, op, LL_CALL,
                         "another rank failed before the gather onto rank 0");
  return 0;
}

void ll_end(ll_call *c) {
  free(c->full);
  free(c->packed);
  c->full = c->packed = NULL;
}

/* Between this rank's part (ld a->ld) and a packed copy (ld rows). */
static void pack_own(const ll_call *c, void *packed, int to_packed) {
  const jmg_local_matrix *a = c->a;
  const size_t col = (size_t)a->rows * c->elem;
  for (int64_t j = 0; j < a->cols; ++j) {
    char *p = (char *)packed + (size_t)j * col;
    char *d = (char *)a->data + (size_t)j * (size_t)a->ld * c->elem;
    if (to_packed)
      memcpy(p, d, col);
    else
      memcpy(d, p, col);
  }
}

/* Between rank 0's full matrix and part p packed (ld rows): each local
 * column's row blocks are runs of global rows. */
static void move_part(const ll_call *c, int p, char *packed, int to_full) {
  const jmg_local_matrix *a = c->a;
  const ll_part q = part_of(a, p);
  const size_t e = c->elem;
  for (int64_t lc = 0; lc < q.cols; ++lc) {
    const int64_t j = jmg_bc_global(lc, a->nb, q.col, a->grid_cols);
    for (int64_t lr = 0; lr < q.rows; lr += a->mb) {
      const int64_t len = q.rows - lr < a->mb ? q.rows - lr : a->mb;
      const int64_t i = jmg_bc_global(lr, a->mb, q.row, a->grid_rows);
      char *whole = (char *)c->full + (size_t)(i + j * a->n) * e;
      char *mine = packed + (size_t)(lr + lc * q.rows) * e;
      if (to_full)
        memcpy(whole, mine, (size_t)len * e);
      else
        memcpy(mine, whole, (size_t)len * e);
    }
  }
}

/* One group: this rank's part to (or from) rank 0; on rank 0, every other
 * rank's part from (or to) its slot of packed. Rank 0's own part is copied
 * to its slot (offset 0), not sent. */
static int exchange(ll_call *c, int to_root, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const jmg_comm_ops *ops = a->comm_ops;
  if (a->rank == 0) {
    if (to_root) pack_own(c, c->packed, 1);
  } else if (to_root && c->packed != NULL) {
    pack_own(c, c->packed, 1);
  }
  /* A part as it travels: in place, or packed (ld > rows). */
  void *own = c->packed != NULL ? c->packed : a->data;
  const ll_part mine = part_of(a, a->rank);
  int rc = ops->group_begin(c->op, err);
  if (rc == 0 && a->rank != 0)
    rc = to_root ? ops->send(a->comm, own, part_bytes(c, &mine), 0,
                             a->device_ctx, c->op, err)
                 : ops->recv(a->comm, own, part_bytes(c, &mine), 0,
                             a->device_ctx, c->op, err);
  size_t off = part_bytes(c, &mine); /* past rank 0's slot */
  for (int p = 1; rc == 0 && a->rank == 0 && p < a->ranks; ++p) {
    const ll_part q = part_of(a, p);
    const size_t bytes = part_bytes(c, &q);
    char *slot = (char *)c->packed + off;
    rc = to_root ? ops->recv(a->comm, slot, bytes, p, a->device_ctx, c->op,
                             err)
                 : ops->send(a->comm, slot, bytes, p, a->device_ctx, c->op,
                             err);
    off += bytes;
  }
  jmg_error ignored;
  int erc = ops->group_end(c->op, rc == 0 ? err : &ignored);
  if (rc == 0) rc = erc;
  if (rc == 0 && !to_root && own != a->data) pack_own(c, own, 0);
  return rc;
}

int ll_gather(ll_call *c, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  int rc = exchange(c, 1, err);
  size_t off = 0;
  for (int p = 0; rc == 0 && a->rank == 0 && p < a->ranks; ++p) {
    const ll_part q = part_of(a, p);
    move_part(c, p, (char *)c->packed + off, 1);
    off += part_bytes(c, &q);
  }
  return rc;
}

int ll_scatter(ll_call *c, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  size_t off = 0;
  for (int p = 0; a->rank == 0 && p < a->ranks; ++p) {
    const ll_part q = part_of(a, p);
    move_part(c, p, (char *)c->packed + off, 0);
    off += part_bytes(c, &q);
  }
  return exchange(c, 0, err);
}

int ll_outcome(ll_call *c, int rc, int *info, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  int word[2] = {a->rank == 0 ? rc != 0 : 0, a->rank == 0 ? *info : 0};
  jmg_error ignored;
  int brc = a->comm_ops->bcast(a->comm, word, sizeof word, 0, a->device_ctx,
                               c->op, a->rank == 0 && rc != 0 ? &ignored : err);
  if (a->rank == 0 && rc != 0) return rc;
  if (brc != 0) return brc;
  if (word[0])
    return jmg_error_set(err, JMG_EPEER, c->op, LL_CALL,
                         "rank 0 failed running LAPACK (its error says why)");
  *info = word[1];
  return 0;
}

int ll_bcast(ll_call *c, void *const *bufs, const size_t *bytes, int count,
             jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const jmg_comm_ops *ops = a->comm_ops;
  int rc = ops->group_begin(c->op, err);
  for (int i = 0; rc == 0 && i < count; ++i)
    if (bufs[i] != NULL)
      rc = ops->bcast(a->comm, bufs[i], bytes[i], 0, a->device_ctx, c->op,
                      err);
  jmg_error ignored;
  int erc = ops->group_end(c->op, rc == 0 ? err : &ignored);
  return rc != 0 ? rc : erc;
}

/* ---- the engine ----------------------------------------------------------*/

static int ll_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                       size_t len) {
  (void)e;
  if (p->nodes > 1) {
    snprintf(why, len,
             "the group spans %d nodes and its communicators join the "
             "threads and processes of one node",
             p->nodes);
    return 0;
  }
  return jmg_lapack_supports(e, p, why, len);
}

/* LAPACK takes any block; lapack-local lays A out in the blocks
 * cuSOLVERMp's routines take (engine/cusolvermp/context.c, mp_block: a
 * power of two for syevd and sygvd), so that the CPU tests run the layouts the GPU
 * engine gets. */
static int64_t ll_block(const jmg_engine *e, const jmg_problem *p) {
  (void)e;
  if (!jmg_op_is_eigensolver(p->op)) return p->tile;
  return jmg_local_pow2_block(p->n, p->nparts, p->tile);
}

static int ll_prefers(const jmg_engine *e, const jmg_problem *p, char *why,
                      size_t len) {
  (void)e, (void)p;
  snprintf(why, len,
           "it runs only when JAXMG_ENGINE=lapack-local names it (the local "
           "model on CPU devices, for testing; engine lapack is faster)");
  return 0;
}

const jmg_engine jmg_lapack_local_engine = {
    .name = "lapack-local",
    .model = JMG_MODEL_LOCAL,
    .supports = ll_supports,
    .prefers = ll_prefers,
    .block = ll_block,
    .workspace = jmg_ll_workspace,
    .local =
        {
            .potrs = jmg_ll_potrs,
            .potri = jmg_ll_potri,
            .syevd = jmg_ll_syevd,
            .lu_solve = jmg_ll_lu_solve,
            .qr = jmg_ll_qr,
            .sygvd = jmg_ll_sygvd,
            .potrs_mixed = jmg_ll_potrs_mixed,
            .lu_solve_mixed = jmg_ll_lu_solve_mixed,
        },
};
