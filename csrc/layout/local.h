/* The local model's layout (engine/engine.h, JMG_MODEL_LOCAL): pure
 * planners, and executors that move data through a copy callback.
 *
 * 2D block-cyclic index maps. A dimension of n indices in blocks of b goes
 * round-robin over p processes, the first block on process 0 (ScaLAPACK's
 * convention with source 0): index g lies on process (g / b) % p at local
 * index (g / (b p)) b + g % b; process q holds jmg_bc_count(n, b, q, p)
 * indices (ScaLAPACK's numroc). A 2D layout applies the map to the rows
 * over the grid's rows and to the columns over its columns.
 *
 * The permutation Π. A row-sharded A gives rank r of P the contiguous
 * columns [r L, (r+1) L) of M (the n x n matrix read column-major, L = n/P,
 * T_A dividing L), column-major with ld n. Let q = L / T_A. The 1 x P column
 * block-cyclic layout with nb = T_A puts tile k = s P + r of a matrix on rank
 * r at local tile s. So if the matrix the engine holds is H = Π M Πᵀ with
 *     tile k of H (rows and columns) = tile src(k) of M,
 *     src(s P + r) = r q + s,
 * rank r's columns of H are exactly its shard's columns of M: nothing moves
 * between ranks. Only the row tiles inside each shard are reordered. src is
 * the 1D planner's dest (layout/cyclic.h, with unit = T_A): that plan of
 * (n, P, T_A) is reused as it is; Π's cycles are its cycles.
 * Every vector of the solve follows: H (Π x) = Π b for any M, where
 * (Π v) has tile k = tile src(k) of v; and eigenvectors of M are Πᵀ times
 * those of H.
 *
 * Eigenvectors. The engine returns H's eigenvectors V (column j the j-th) in
 * the 1 x P block-cyclic column layout: rank r's local tile s holds V's
 * column tile k = s P + r. The user wants them contiguous (rank k / q, local
 * tile k % q). jmg_local_redist plans those moves: for every local tile, to
 * which rank and where; for every tile to receive, from whom. */
#ifndef JMG_LAYOUT_LOCAL_H
#define JMG_LAYOUT_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "layout/cyclic.h"

/* ---- block-cyclic index maps (n indices, blocks of b, p processes) ---- */

/* The process that holds global index g. */
static inline int jmg_bc_owner(int64_t g, int64_t b, int p) {
  return (int)((g / b) % p);
}
/* g's local index on its process. */
static inline int64_t jmg_bc_local(int64_t g, int64_t b, int p) {
  return (g / (b * p)) * b + g % b;
}
/* The global index of local index l on process proc. */
static inline int64_t jmg_bc_global(int64_t l, int64_t b, int proc, int p) {
  return ((l / b) * p + proc) * b + l % b;
}
/* How many of n indices process proc holds (numroc with source 0). */
int64_t jmg_bc_count(int64_t n, int64_t b, int proc, int p);

/* The largest power of two that is at most tile and divides the shard
 * n / ranks (on one rank, which holds the whole matrix in any blocks: the
 * largest power of two at most min(tile, n)); at least 1. The blocks of an
 * engine that takes powers of two only (cusolverMpSyevd), for a layout
 * that keeps every rank's shard where it lies. */
int64_t jmg_local_pow2_block(int64_t n, int ranks, int64_t tile);

/* ---- the permutation Π ----------------------------------------------- */

typedef struct jmg_local_perm {
  int64_t n;          /* order of the matrix */
  int ranks;          /* P */
  int64_t tile;       /* T_A */
  int64_t local_cols; /* L = n / P */
  int64_t ntiles;     /* n / T_A */
  /* The 1D plan of (n, P, T_A), unit T_A: tile k of H is tile
   * plan.dest[k] of M, and plan's cycles are Π's. */
  jmg_cyclic_plan plan;
} jmg_local_perm;

/* Plans Π. Fails with JMG_EINVAL (naming op) unless P divides n and T_A
 * divides n / P. On one rank Π is the identity for any T_A, planned as one
 * tile of n (p->tile = n). */
int jmg_local_perm_init(jmg_local_perm *p, int64_t n, int ranks, int64_t tile,
                        const char *op, jmg_error *err);
void jmg_local_perm_free(jmg_local_perm *p);

/* The tile of M that is tile k of H (src above). */
static inline int64_t jmg_local_perm_src(const jmg_local_perm *p, int64_t k) {
  return p->plan.dest[k];
}

/* A solver's info (LAPACK's convention: k > 0 names row and column k,
 * 1-based, e.g. potrf's leading minor of order k, getrf's zero pivot
 * U(k, k)) about H, renumbered as M's: H's index k - 1 is in tile
 * (k - 1) / T_A of H, which is tile src of M. Values <= 0, and values past
 * n (none of the solvers gives one), are returned as they are. The engine
 * factors H, not M: where M's own factorization would fail is not known,
 * but the index renumbered is the row of M where H's failed (for a failure
 * confined to one diagonal entry, M's own leading minor), and it is what
 * the other engines, which factor M, report in that case. */
static inline int64_t jmg_local_perm_info(const jmg_local_perm *p,
                                          int64_t info) {
  if (info <= 0 || info > p->n || p->tile < 1) return info;
  const int64_t h = info - 1;
  return jmg_local_perm_src(p, h / p->tile) * p->tile + h % p->tile + 1;
}

typedef enum {
  JMG_LOCAL_APPLY = 0, /* v -> Π v: row tile k <- row tile src(k) */
  JMG_LOCAL_UNDO = 1,  /* v -> Πᵀ v: row tile src(k) <- row tile k */
} jmg_local_dir;

/* Copies height rows of width bytes, src's rows src_pitch bytes apart, to
 * dst's (dst_pitch apart), in order with the copies issued before it.
 * Returns 0 or a negative status with err filled. (A column-major block of
 * r rows and c columns with ld: width r * elem, height c, pitch ld * elem.) */
typedef int (*jmg_copy2d_fn)(void *ctx, void *dst, size_t dst_pitch,
                             const void *src, size_t src_pitch, size_t width,
                             size_t height, jmg_error *err);

/* Applies Π (or Πᵀ) to the row tiles of a (n x cols, column-major, leading
 * dimension ld >= n, elements of elem bytes) in place, by Π's cycles: a
 * cycle of length c costs c + 1 tile copies, through stage (T_A x cols
 * elements, pitch T_A * elem). Nothing to do when Π is the identity. */
int jmg_local_rows_permute(const jmg_local_perm *p, jmg_local_dir dir, void *a,
                           int64_t ld, int64_t cols, size_t elem, void *stage,
                           jmg_copy2d_fn copy, void *ctx, jmg_error *err);

/* The same out of place: dst = Π src (or Πᵀ src), both n x cols with ld,
 * one copy per tile (one in all when Π is the identity and ld == n). dst
 * and src must not overlap. */
int jmg_local_rows_gather(const jmg_local_perm *p, jmg_local_dir dir,
                          void *dst, const void *src, int64_t ld, int64_t cols,
                          size_t elem, jmg_copy2d_fn copy, void *ctx,
                          jmg_error *err);

/* ---- the eigenvectors' column redistribution ------------------------- */

typedef struct jmg_local_move {
  int peer;     /* the other rank (may be this one) */
  int64_t tile; /* the local column tile on the peer */
} jmg_local_move;

typedef struct jmg_local_redist {
  int rank, ranks;
  int64_t ntiles; /* q = local tiles per rank */
  /* send[s]: where this rank's block-cyclic local tile s goes (the rank and
   * its contiguous local tile); recv[s]: where this rank's contiguous local
   * tile s comes from (the rank and its block-cyclic local tile). Issued in
   * order of s on every rank (sends, then receives, in one group), the
   * sends from rank a to rank b and the receives of b from a pair up in
   * order: both run in increasing global tile. */
  jmg_local_move *send;
  jmg_local_move *recv;
} jmg_local_redist;

int jmg_local_redist_init(jmg_local_redist *r, const jmg_local_perm *p,
                          int rank, const char *op, jmg_error *err);
void jmg_local_redist_free(jmg_local_redist *r);

/* ---- the grid: A's part between the 1 x P layout and a 2D grid --------
 *
 * The engine may run on a grid_rows x grid_cols grid of the P ranks (rank r
 * at grid row r % grid_rows, column r / grid_rows, engine/engine.h's
 * column-major mapping) instead of the 1 x P one. Both hold the same H in
 * tiles of T_A: on the line (1 x P), column tile J on rank J % P at local
 * column tile J / P, every row (n x L, ld n); on the grid, tile (I, J) on
 * the rank at grid row I % grid_rows, column J % grid_cols, at local tile
 * (I / grid_rows, J / grid_cols) of its rows x cols part (ld rows). Both
 * parts hold n² / P elements.
 *
 * A move packs each rank's tiles, grouped by the peer they go to, into a
 * buffer of T_A x T_A tiles, exchanges one message per pair of ranks, and
 * unpacks. Within a pair both sides list the tiles in the same order
 * (column tile J ascending, then row tile I), so the message needs no
 * header. */
typedef enum {
  JMG_LOCAL_TO_GRID = 0,   /* line -> grid */
  JMG_LOCAL_FROM_GRID = 1, /* grid -> line */
} jmg_local_grid_dir;

typedef struct jmg_local_regrid {
  int rank, ranks;
  int grid_rows, grid_cols;
  int myrow, mycol; /* this rank's place on the grid */
  int64_t n, tile, ntiles; /* ntiles = n / T_A */
  int64_t rows, cols;      /* this rank's grid part (ld rows) */
  /* Per peer, in tiles: how many of this rank's line tiles belong to the
   * peer's grid part (line[p]), at line_off[p] in this rank's packed
   * buffer; and how many of its grid tiles belong to the peer's line part
   * (grid[p]), at grid_off[p]. A move to the grid sends line[p] tiles to p
   * and receives grid[p] from p; a move back, the other way round. */
  int64_t *line, *line_off, *grid, *grid_off;
} jmg_local_regrid;

/* Plans rank's moves. Fails with JMG_EINVAL (naming op) unless grid_rows
 * divides ranks, ranks divides n and T_A divides n / ranks. */
int jmg_local_regrid_init(jmg_local_regrid *g, int64_t n, int64_t tile,
                          int ranks, int grid_rows, int rank, const char *op,
                          jmg_error *err);
void jmg_local_regrid_free(jmg_local_regrid *g);

/* The tiles this rank sends in a move dir to peer (its message's size, in
 * tiles, at send_off) and receives from it. */
static inline int64_t jmg_local_regrid_sends(const jmg_local_regrid *g,
                                             jmg_local_grid_dir dir, int peer,
                                             int64_t *off) {
  *off = dir == JMG_LOCAL_TO_GRID ? g->line_off[peer] : g->grid_off[peer];
  return dir == JMG_LOCAL_TO_GRID ? g->line[peer] : g->grid[peer];
}
static inline int64_t jmg_local_regrid_recvs(const jmg_local_regrid *g,
                                             jmg_local_grid_dir dir, int peer,
                                             int64_t *off) {
  return jmg_local_regrid_sends(
      g, dir == JMG_LOCAL_TO_GRID ? JMG_LOCAL_FROM_GRID : JMG_LOCAL_TO_GRID,
      peer, off);
}

/* Packs the part a move dir sends (the line part for JMG_LOCAL_TO_GRID,
 * the grid part for JMG_LOCAL_FROM_GRID) into packed (n² / P elements of
 * elem bytes, T_A x T_A tiles), one copy per tile. */
int jmg_local_regrid_pack(const jmg_local_regrid *g, jmg_local_grid_dir dir,
                          void *packed, const void *part, size_t elem,
                          jmg_copy2d_fn copy, void *ctx, jmg_error *err);
/* Unpacks what a move dir received (packed, as the peers packed it) into
 * the part it fills (the grid part for JMG_LOCAL_TO_GRID, the line part for
 * JMG_LOCAL_FROM_GRID). */
int jmg_local_regrid_unpack(const jmg_local_regrid *g, jmg_local_grid_dir dir,
                            void *part, const void *packed, size_t elem,
                            jmg_copy2d_fn copy, void *ctx, jmg_error *err);

#endif
