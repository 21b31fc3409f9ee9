/* syevd: eigenvalues (ascending, on every shard) and eigenvectors (the
 * columns of V, returned in A's buffers in A's own contiguous layout: shard d
 * holds eigenvectors d*n/ndev .. (d+1)*n/ndev - 1).
 *
 * Frame: args A (local_cols x n), shard; rets A (aliased; becomes this
 *        shard's eigenvectors), W (n, real), status; attrs T_A, mesh_id,
 *        want_vectors, vectors_in_a (optional, 0 when absent).
 *
 * With vectors_in_a the call returns V itself in A's buffer on a group of
 * one device (ops/vectors.c). */
#include <stddef.h>

#include "exec/leader.h"
#include "exec/local.h"
#include "ops/ops.h"

typedef struct syevd_io {
  jmg_shard_io io;
  int64_t want_vectors; /* 0: eigenvalues only */
  int64_t vectors_in_a; /* 1: V itself in A's buffer, read row-major */
  void *w;              /* n eigenvalues (real), out: on every shard */
} syevd_io;
JMG_OP_IO_FITS(syevd_io);

enum { SYEVD_W };            /* its buffers */
enum { SYEVD_WANT_VECTORS, SYEVD_VECTORS_IN_A }; /* its scalars */

static int syevd_leader(jmg_leader_view *v, int *info_out, jmg_error *err);
static int syevd_local(jmg_local_view *v, int *info_out, jmg_error *err);

const jmg_op_desc jmg_syevd_op = {
    .id = JMG_OP_SYEVD,
    .name = "syevd",
    .io_size = sizeof(syevd_io),
    .nbufs = 1,
    .bufs =
        {
            [SYEVD_W] = {.name = "W",
                         .dir = JMG_OUT,
                         .elem = JMG_ELEM_REAL,
                         .rank = 1,
                         .dims = {JMG_DIM_N},
                         .arg = JMG_FFI_NONE,
                         .ret = 1,
                         .offset = offsetof(syevd_io, w)},
        },
    .nscalars = 2,
    .scalars =
        {
            [SYEVD_WANT_VECTORS] = {.name = "want_vectors",
                                    .from = JMG_FROM_ATTR,
                                    .boolean = 1,
                                    .offset = offsetof(syevd_io, want_vectors)},
            [SYEVD_VECTORS_IN_A] = {.name = "vectors_in_a",
                                    .from = JMG_FROM_ATTR,
                                    .boolean = 1,
                                    .optional = 1,
                                    .offset = offsetof(syevd_io, vectors_in_a)},
        },
    .leader = syevd_leader,
    .local = syevd_local,
};

static int syevd_leader(jmg_leader_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const syevd_io *io0 = (const syevd_io *)v->io[0];
  const jmg_dtype real =
      jmg_dtype_real_size(v->a.dtype) == 4 ? JMG_F32 : JMG_F64;
  int info = 0;

  int rc = jmg_vectors_in_a_check("syevd", io0->vectors_in_a, io0->want_vectors,
                                  v->ndev, err);
  if (rc == 0) rc = jmg_leader_permute(v, JMG_TO_CYCLIC, err);
  if (rc == 0) rc = e->leader.syevd(e, &v->a, io0->w, io0->want_vectors, &info, err);
  if (jmg_leader_retry_without_scratch(v, &rc, err))
    rc = e->leader.syevd(e, &v->a, io0->w, io0->want_vectors, &info, err);
  if (rc == 0 && info != 0) {
    rc = v->mem->fill_nan(&v->group, 0, io0->w, (size_t)v->a.n, real, err);
    if (rc == 0) rc = jmg_leader_nan_a(v, err);
  } else if (rc == 0 && io0->want_vectors) {
    rc = jmg_leader_permute(v, JMG_FROM_CYCLIC, err);
    if (rc == 0 && io0->vectors_in_a) /* one shard: the whole matrix */
      rc = jmg_vectors_in_a(v->mem, &v->group, v->home[0], v->a.n,
                            v->a.dtype, err);
  }
  if (rc == 0) rc = jmg_leader_broadcast(v, &jmg_syevd_op.bufs[SYEVD_W], err);
  *info_out = info;
  return rc;
}

/* The local model (exec/local.h): H = Π M Πᵀ has M's eigenvalues (the
 * engine writes them on every rank) and eigenvectors Π V for M's V. The
 * engine returns H's in the block-cyclic column order: they are exchanged
 * to the contiguous one and their rows brought back (Πᵀ); on a grid of
 * several rows they come back from it to the line first. After the
 * engine every rank agrees first: the exchange is collective, and it
 * depends on info, which is the same on every rank. */
static int syevd_local(jmg_local_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const syevd_io *io = (const syevd_io *)v->io;
  const jmg_dtype real =
      jmg_dtype_real_size(v->a.dtype) == 4 ? JMG_F32 : JMG_F64;
  int info = 0;
  int rc = jmg_vectors_in_a_check("syevd", io->vectors_in_a, io->want_vectors,
                                  v->ranks, err);
  if (rc == 0) rc = jmg_local_permute_a(v, JMG_LOCAL_APPLY, err);
  rc = jmg_local_to_grid(v, rc, err);
  rc = jmg_local_agree(v, rc, "the solver", err);
  if (rc == 0) rc = e->local.syevd(e, &v->a, io->w, io->want_vectors, &info, err);
  rc = jmg_local_agree(v, rc, "the eigenvectors' exchange", err);
  if (rc == 0 && info != 0) {
    rc = jmg_local_nan(v, io->w, (size_t)v->a.n, real, err);
    if (rc == 0) rc = jmg_local_nan_a(v, err);
  } else if (rc == 0 && io->want_vectors) {
    rc = jmg_local_from_grid(v, rc, 0, err);
    rc = jmg_local_redistribute_vectors(v, rc, err);
    /* One rank (jmg_vectors_in_a_check): no agreement needed after it. */
    if (rc == 0 && io->vectors_in_a)
      rc = jmg_vectors_in_a(v->mem, &v->group, v->a.data, v->a.n,
                            v->a.dtype, err);
  }
  *info_out = info;
  return rc;
}
