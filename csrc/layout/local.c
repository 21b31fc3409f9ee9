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

int64_t jmg_local_pow2_block(int64_t n, int ranks, int64_t tile) {
  int64_t cap = tile < n ? tile : n;
  const int64_t shard = ranks > 0 ? n / ranks : n;
  int64_t b = 1;
  while (b <= cap / 2 && (ranks == 1 || shard % (2 * b) == 0)) b *= 2;
  return b;
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
    jmg_error_name_op(err, op);
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

/* ---- the grid ----------------------------------------------------------*/

int jmg_local_regrid_init(jmg_local_regrid *g, int64_t n, int64_t tile,
                          int ranks, int grid_rows, int rank, const char *op,
                          jmg_error *err) {
  memset(g, 0, sizeof *g);
  if (n < 1 || tile < 1 || ranks < 1 || grid_rows < 1 ||
      ranks % grid_rows != 0 || n % ranks != 0 || (n / ranks) % tile != 0 ||
      rank < 0 || rank >= ranks)
    return jmg_error_set(err, JMG_EINVAL, op, "layout",
                         "a %d-row grid of %d ranks (rank %d) needs the rows "
                         "divide the ranks, N divisible by the ranks and "
                         "T_A dividing the shard size (N=%lld, T_A=%lld)",
                         grid_rows, ranks, rank, (long long)n,
                         (long long)tile);
  g->rank = rank;
  g->ranks = ranks;
  g->grid_rows = grid_rows;
  g->grid_cols = ranks / grid_rows;
  g->myrow = rank % grid_rows;
  g->mycol = rank / grid_rows;
  g->n = n;
  g->tile = tile;
  g->ntiles = n / tile;
  g->rows = n / grid_rows;
  g->cols = n / g->grid_cols;
  const size_t bytes = (size_t)ranks * sizeof(int64_t);
  g->line = calloc(1, bytes);
  g->line_off = calloc(1, bytes);
  g->grid = calloc(1, bytes);
  g->grid_off = calloc(1, bytes);
  if (!g->line || !g->line_off || !g->grid || !g->grid_off) {
    jmg_local_regrid_free(g);
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate the grid plan (%d ranks)", ranks);
  }
  const int64_t nt = g->ntiles, R = grid_rows, C = g->grid_cols;
  /* Line tiles (I, J), J = s P + rank: to the grid rank of (I % R, J % C). */
  for (int64_t J = rank; J < nt; J += ranks)
    for (int64_t I = 0; I < nt; ++I) ++g->line[(I % R) + (J % C) * R];
  /* Grid tiles (I, J), I = myrow + k R, J = mycol + l C: from line rank
   * J % P. */
  for (int64_t J = g->mycol; J < nt; J += C)
    g->grid[J % ranks] += (nt - g->myrow + R - 1) / R;
  for (int p = 1; p < ranks; ++p) {
    g->line_off[p] = g->line_off[p - 1] + g->line[p - 1];
    g->grid_off[p] = g->grid_off[p - 1] + g->grid[p - 1];
  }
  return 0;
}

void jmg_local_regrid_free(jmg_local_regrid *g) {
  if (g == NULL) return;
  free(g->line);
  free(g->line_off);
  free(g->grid);
  free(g->grid_off);
  memset(g, 0, sizeof *g);
}

/* Visits every tile of this rank's line part (side JMG_LOCAL_TO_GRID) or
 * grid part (JMG_LOCAL_FROM_GRID), J ascending then I, with its slot in
 * the packed buffer (grouped by peer, in that order within a peer) and its
 * element offset in the part; pack copies part -> packed, else back. */
static int regrid_walk(const jmg_local_regrid *g, jmg_local_grid_dir side,
                       int pack, void *packed, void *part, size_t elem,
                       jmg_copy2d_fn copy, void *ctx, jmg_error *err) {
  const int64_t T = g->tile, nt = g->ntiles, R = g->grid_rows,
                C = g->grid_cols, P = g->ranks;
  const int line = side == JMG_LOCAL_TO_GRID;
  const int64_t ld = line ? g->n : g->rows;
  const int64_t *off = line ? g->line_off : g->grid_off;
  int64_t *used = calloc((size_t)P, sizeof *used);
  if (used == NULL)
    return jmg_error_set(err, JMG_ENOMEM, "", "malloc",
                         "cannot allocate the grid move's cursors");
  const size_t tb = (size_t)(T * T) * elem, pitch = (size_t)ld * elem;
  int rc = 0;
  const int64_t j0 = line ? g->rank : g->mycol, jstep = line ? P : C;
  const int64_t i0 = line ? 0 : g->myrow, istep = line ? 1 : R;
  for (int64_t J = j0, lj = 0; rc == 0 && J < nt; J += jstep, ++lj)
    for (int64_t I = i0, li = 0; rc == 0 && I < nt; I += istep, ++li) {
      const int peer = line ? (int)((I % R) + (J % C) * R) : (int)(J % P);
      char *t = (char *)packed + (size_t)(off[peer] + used[peer]++) * tb;
      char *a = (char *)part + (size_t)(lj * T) * pitch + (size_t)(li * T) * elem;
      rc = pack ? copy(ctx, t, (size_t)T * elem, a, pitch, (size_t)T * elem,
                       (size_t)T, err)
                : copy(ctx, a, pitch, t, (size_t)T * elem, (size_t)T * elem,
                       (size_t)T, err);
    }
  free(used);
  return rc;
}

int jmg_local_regrid_pack(const jmg_local_regrid *g, jmg_local_grid_dir dir,
                          void *packed, const void *part, size_t elem,
                          jmg_copy2d_fn copy, void *ctx, jmg_error *err) {
  return regrid_walk(g, dir, 1, packed, (void *)part, elem, copy, ctx, err);
}

int jmg_local_regrid_unpack(const jmg_local_regrid *g, jmg_local_grid_dir dir,
                            void *part, const void *packed, size_t elem,
                            jmg_copy2d_fn copy, void *ctx, jmg_error *err) {
  /* What a move to the grid receives fills the grid part, and back. */
  return regrid_walk(
      g, dir == JMG_LOCAL_TO_GRID ? JMG_LOCAL_FROM_GRID : JMG_LOCAL_TO_GRID, 0,
      (void *)packed, part, elem, copy, ctx, err);
}
