/* The local model's layout (layout/local.h). */
#include "layout/local.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t jmg_bc_count(int64_t n, int64_t b, int proc, int p) {
  const int64_t blocks = n / b; /* whole blocks */
  int64_t count = (blocks / p) * b;
  const int64_t extra = blocks % p; /* processes with one more whole block */
  if (proc < extra)
    count += b;
  else if (proc == extra)
    count += n % b; /* the last, partial block */
  return count;
}

int jmg_local_perm_init(jmg_local_perm *p, int64_t n, int ranks, int64_t tile,
                        const char *op, jmg_error *err) {
  memset(p, 0, sizeof *p);
  /* On one rank Π is the identity whatever T_A: plan it as one tile. */
  if (ranks == 1 && n >= 1 && tile >= 1) tile = n;
  if (n < 1 || ranks < 1 || tile < 1 || n % ranks != 0 ||
      (n / ranks) % tile != 0)
    return jmg_error_set(err, JMG_EINVAL, op, "layout",
                         "the local model needs N divisible by the %d "
                         "participants and T_A dividing the shard size "
                         "(N=%lld, T_A=%lld)",
                         ranks, (long long)n, (long long)tile);
  int rc = jmg_cyclic_plan_init(&p->plan, n, ranks, tile, err);
  if (rc != 0) {
    snprintf(err->op, sizeof err->op, "%s", op ? op : "");
    return rc;
  }
  p->n = n;
  p->ranks = ranks;
  p->tile = tile;
  p->local_cols = n / ranks;
  p->ntiles = n / tile;
  return 0;
}

void jmg_local_perm_free(jmg_local_perm *p) {
  if (p == NULL) return;
  jmg_cyclic_plan_free(&p->plan);
  memset(p, 0, sizeof *p);
}

/* The executor of the in-place permutation: the 1D plan's cycles over row
 * tiles (a slot of the plan is a row tile here). */
typedef struct rows_ctx {
  const jmg_local_perm *p;
  char *a;
  size_t pitch;      /* ld * elem */
  size_t tile_bytes; /* T_A * elem: a row tile's width in bytes */
  int64_t cols;
  char *stage;
  jmg_copy2d_fn copy;
  void *ctx;
} rows_ctx;

static void *rows_at(const rows_ctx *c, jmg_unit_loc loc, size_t *pitch) {
  if (loc.dev == JMG_STAGE) {
    *pitch = c->tile_bytes;
    return c->stage;
  }
  /* The plan's slot (dev, unit) is global tile dev * q + unit. */
  const int64_t tile =
      (int64_t)loc.dev * (c->p->local_cols / c->p->tile) + loc.unit;
  *pitch = c->pitch;
  return c->a + (size_t)tile * c->tile_bytes;
}

static int rows_copy(void *ctx, int lane, jmg_unit_loc dst, jmg_unit_loc src,
                     jmg_error *err) {
  (void)lane;
  rows_ctx *c = ctx;
  size_t dp, sp;
  void *d = rows_at(c, dst, &dp);
  const void *s = rows_at(c, src, &sp);
  return c->copy(c->ctx, d, dp, s, sp, c->tile_bytes, (size_t)c->cols, err);
}

int jmg_local_rows_permute(const jmg_local_perm *p, jmg_local_dir dir, void *a,
                           int64_t ld, int64_t cols, size_t elem, void *stage,
                           jmg_copy2d_fn copy, void *ctx, jmg_error *err) {
  if (p->plan.ncycles == 0 || cols == 0) return 0;
  rows_ctx c = {p,    a,    (size_t)ld * elem, (size_t)p->tile * elem,
                cols, stage, copy,             ctx};
  /* APPLY: new tile k = old tile dest[k], the plan's inverse direction;
   * UNDO: new tile dest[k] = old tile k, its forward direction. */
  return jmg_cyclic_apply(&p->plan,
                          dir == JMG_LOCAL_APPLY ? JMG_FROM_CYCLIC
                                                 : JMG_TO_CYCLIC,
                          1, rows_copy, &c, err);
}

int jmg_local_rows_gather(const jmg_local_perm *p, jmg_local_dir dir,
                          void *dst, const void *src, int64_t ld, int64_t cols,
                          size_t elem, jmg_copy2d_fn copy, void *ctx,
                          jmg_error *err) {
  const size_t pitch = (size_t)ld * elem;
  if (cols == 0) return 0;
  if (p->plan.ncycles == 0 && ld == p->n) {
    const size_t bytes = pitch * (size_t)cols; /* one run */
    return copy(ctx, dst, bytes, src, bytes, bytes, 1, err);
  }
  const size_t tb = (size_t)p->tile * elem;
  for (int64_t k = 0; k < p->ntiles; ++k) {
    const int64_t from = dir == JMG_LOCAL_APPLY ? p->plan.dest[k] : k;
    const int64_t to = dir == JMG_LOCAL_APPLY ? k : p->plan.dest[k];
    int rc = copy(ctx, (char *)dst + (size_t)to * tb, pitch,
                  (const char *)src + (size_t)from * tb, pitch, tb,
                  (size_t)cols, err);
    if (rc != 0) return rc;
  }
  return 0;
}

int jmg_local_redist_init(jmg_local_redist *r, const jmg_local_perm *p,
                          int rank, const char *op, jmg_error *err) {
  memset(r, 0, sizeof *r);
  if (rank < 0 || rank >= p->ranks)
    return jmg_error_set(err, JMG_EINVAL, op, "layout",
                         "rank %d is not one of the %d", rank, p->ranks);
  const int P = p->ranks;
  const int64_t q = p->local_cols / p->tile;
  r->rank = rank;
  r->ranks = P;
  r->ntiles = q;
  r->send = malloc((size_t)(q ? q : 1) * sizeof *r->send);
  r->recv = malloc((size_t)(q ? q : 1) * sizeof *r->recv);
  if (r->send == NULL || r->recv == NULL) {
    jmg_local_redist_free(r);
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate the redistribution plan (%lld "
                         "tiles)",
                         (long long)q);
  }
  for (int64_t s = 0; s < q; ++s) {
    /* Block-cyclic local tile s holds global tile k = s P + rank, which the
     * contiguous layout puts on rank k / q at local tile k % q. */
    const int64_t k = s * P + rank;
    r->send[s].peer = (int)(k / q);
    r->send[s].tile = k % q;
    /* Contiguous local tile s is global tile k = rank q + s, which the
     * block-cyclic layout holds on rank k % P at local tile k / P. */
    const int64_t g = (int64_t)rank * q + s;
    r->recv[s].peer = (int)(g % P);
    r->recv[s].tile = g / P;
  }
  return 0;
}

void jmg_local_redist_free(jmg_local_redist *r) {
  if (r == NULL) return;
  free(r->send);
  free(r->recv);
  memset(r, 0, sizeof *r);
}
