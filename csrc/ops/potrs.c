/* potrs: solve A X = B for Hermitian positive definite A (Cholesky).
 * X is written on every shard; A is consumed (it holds the factor, in the
 * block-cyclic layout, and is never returned to the user).
 *
 * Frame: args A (local_cols x n), B (nrhs x n: B column-major), shard;
 *        rets A (aliased), X (nrhs x n), status; attrs T_A, mesh_id. */
#include <stddef.h>

#include "exec/leader.h"
#include "ops/ops.h"

typedef struct potrs_io {
  jmg_shard_io io;
  int64_t nrhs; /* B's columns */
  void *b;      /* n x nrhs right-hand sides, in: every shard has a copy */
  void *x;      /* n x nrhs solution, out: written on every shard */
} potrs_io;
JMG_OP_IO_FITS(potrs_io);

enum { POTRS_B, POTRS_X }; /* its buffers */
enum { POTRS_NRHS };       /* its scalars */

static int potrs_leader(jmg_leader_view *v, int *info_out, jmg_error *err);

const jmg_op_desc jmg_potrs_op = {
    .name = "potrs",
    .io_size = sizeof(potrs_io),
    .nbufs = 2,
    .bufs =
        {
            [POTRS_B] = {.name = "B",
                         .dir = JMG_IN,
                         .elem = JMG_ELEM_OF_A,
                         .rank = 2,
                         .dims = {POTRS_NRHS, JMG_DIM_N},
                         .arg = 1,
                         .ret = JMG_FFI_NONE,
                         .offset = offsetof(potrs_io, b)},
            [POTRS_X] = {.name = "X",
                         .dir = JMG_OUT,
                         .elem = JMG_ELEM_OF_A,
                         .rank = 2,
                         .dims = {POTRS_NRHS, JMG_DIM_N},
                         .arg = JMG_FFI_NONE,
                         .ret = 1,
                         .offset = offsetof(potrs_io, x)},
        },
    .nscalars = 1,
    .scalars =
        {
            [POTRS_NRHS] = {.name = "nrhs",
                            .from = JMG_FROM_DIM,
                            .buf = POTRS_B,
                            .dim = 0,
                            .offset = offsetof(potrs_io, nrhs)},
        },
    .leader = potrs_leader,
};

static int potrs_leader(jmg_leader_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const jmg_mem *m = v->mem;
  const potrs_io *io0 = (const potrs_io *)v->io[0];
  const size_t x_count = (size_t)v->a.n * (size_t)io0->nrhs;
  const size_t x_bytes = x_count * jmg_dtype_size(v->a.dtype);
  int info = 0;

  int rc = jmg_leader_permute(v, JMG_TO_CYCLIC, err);
  /* The solver overwrites its right-hand side: solve in shard 0's x, so that
   * the user's b is never written. */
  if (rc == 0) rc = m->copy(&v->group, io0->x, 0, io0->b, 0, x_bytes, err);
  if (rc == 0) rc = e->leader.potrs(e, &v->a, io0->x, io0->nrhs, &info, err);
  if (jmg_leader_retry_without_scratch(v, &rc, err))
    rc = e->leader.potrs(e, &v->a, io0->x, io0->nrhs, &info, err);
  if (rc == 0 && info != 0)
    rc = m->fill_nan(&v->group, 0, io0->x, x_count, v->a.dtype, err);
  if (rc == 0) rc = jmg_leader_broadcast(v, &jmg_potrs_op.bufs[POTRS_X], err);
  *info_out = info;
  return rc;
}
