/* lu_solve: solve A X = B (or Aᵀ X = B) for a general nonsingular A, by LU
 * with partial pivoting. X is written on every shard; A is consumed (it
 * holds the factors, in the block-cyclic layout, and is never returned to
 * the user); the pivots are internal to the engine.
 *
 * The transpose. A row-sharded A, read column-major as every engine reads
 * its shards (ops.h), is Aᵀ, the plain transpose, not conj(A): for a general
 * A that is a different matrix. The engine therefore factors M = Aᵀ as it
 * holds it (M = P L U) and the op asks it for the solve with Mᵀ, which is A
 * itself, also for complex dtypes (getrs's 'T', not 'C': Mᵀ = (Aᵀ)ᵀ = A,
 * while Mᴴ would be conj(A)). No data moves for the transpose. With the
 * attribute trans set, the op solves Aᵀ X = B, which is M X = B: the plain
 * solve. The Python layer needs that for the reverse derivative (Aᴴ y = x̄
 * is conj(Aᵀ conj(y)) = x̄, so a transposed solve with conjugated right-hand
 * side and solution, elementwise and local, instead of a distributed
 * transpose of A).
 *
 * With precision (common/op.h) JMG_PRECISION_MIXED, the engine's
 * lu_solve_mixed solves (a lower-precision LU, X refined against A kept
 * intact, the exact LU where refinement does not converge:
 * engine/refine.h), the transpose as above; the status is the exact
 * path's.
 *
 * Frame: args A (local_cols x n), B (nrhs x n: B column-major), shard;
 *        rets A (aliased), X (nrhs x n), status; attrs T_A, mesh_id, trans,
 *        precision (optional; absent: 0, exact).
 * A singular A (getrf's info > 0: the first exactly zero pivot) gives that
 * info as status and NaN in X, no error. */
#include <stddef.h>

#include "exec/leader.h"
#include "exec/local.h"
#include "ops/ops.h"

typedef struct lu_solve_io {
  jmg_shard_io io;
  int64_t nrhs;  /* B's columns */
  int64_t trans; /* 0: A X = B; 1: Aᵀ X = B */
  void *b;       /* n x nrhs right-hand sides, in: every shard has a copy */
  void *x;       /* n x nrhs solution, out: written on every shard */
  int64_t precision; /* jmg_precision */
} lu_solve_io;
JMG_OP_IO_FITS(lu_solve_io);

enum { LU_SOLVE_B, LU_SOLVE_X };        /* its buffers */
enum { LU_SOLVE_NRHS, LU_SOLVE_TRANS, LU_SOLVE_PRECISION }; /* its scalars */

static int lu_solve_leader(jmg_leader_view *v, int *info_out, jmg_error *err);
static int lu_solve_local(jmg_local_view *v, int *info_out, jmg_error *err);

const jmg_op_desc jmg_lu_solve_op = {
    .id = JMG_OP_LU_SOLVE,
    .name = "lu_solve",
    .io_size = sizeof(lu_solve_io),
    .nbufs = 2,
    .bufs =
        {
            [LU_SOLVE_B] = {.name = "B",
                            .dir = JMG_IN,
                            .elem = JMG_ELEM_OF_A,
                            .rank = 2,
                            .dims = {LU_SOLVE_NRHS, JMG_DIM_N},
                            .arg = 1,
                            .ret = JMG_FFI_NONE,
                            .offset = offsetof(lu_solve_io, b)},
            [LU_SOLVE_X] = {.name = "X",
                            .dir = JMG_OUT,
                            .elem = JMG_ELEM_OF_A,
                            .rank = 2,
                            .dims = {LU_SOLVE_NRHS, JMG_DIM_N},
                            .arg = JMG_FFI_NONE,
                            .ret = 1,
                            .offset = offsetof(lu_solve_io, x)},
        },
    .nscalars = 3,
    .scalars =
        {
            [LU_SOLVE_NRHS] = {.name = "nrhs",
                               .from = JMG_FROM_DIM,
                               .buf = LU_SOLVE_B,
                               .dim = 0,
                               .offset = offsetof(lu_solve_io, nrhs)},
            [LU_SOLVE_TRANS] = {.name = "trans",
                                .from = JMG_FROM_ATTR,
                                .boolean = 1,
                                .offset = offsetof(lu_solve_io, trans)},
            [LU_SOLVE_PRECISION] = {.name = "precision",
                                    .from = JMG_FROM_ATTR,
                                    .optional = 1,
                                    .offset = offsetof(lu_solve_io, precision)},
        },
    .leader = lu_solve_leader,
    .local = lu_solve_local,
};

/* 0, or the error of a call in a precision the engine lacks (selection
 * refuses it first; ffi/plan.c). */
static int check_precision(const jmg_engine *e, const lu_solve_io *io,
                           jmg_error *err) {
  if (io->precision == JMG_PRECISION_EXACT) return 0;
  if (io->precision == JMG_PRECISION_MIXED &&
      jmg_engine_has_precision(e, JMG_OP_LU_SOLVE, JMG_PRECISION_MIXED))
    return 0;
  return jmg_error_set(err, JMG_EUNSUPPORTED, "lu_solve", "arguments",
                       "engine %s has no lu_solve with precision=%lld (1: "
                       "mixed); pass precision=\"exact\"",
                       e->name, (long long)io->precision);
}

/* The engine's solve in the call's precision. */
static int solve(const jmg_engine *e, const lu_solve_io *io,
                 const jmg_dist_matrix *a, int transpose, int *info,
                 jmg_error *err) {
  if (io->precision == JMG_PRECISION_MIXED)
    return e->leader.lu_solve_mixed(e, a, io->x, io->nrhs, transpose, info,
                                    err);
  return e->leader.lu_solve(e, a, io->x, io->nrhs, transpose, info, err);
}

static int lu_solve_leader(jmg_leader_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const jmg_mem *m = v->mem;
  const lu_solve_io *io0 = (const lu_solve_io *)v->io[0];
  const size_t x_count = (size_t)v->a.n * (size_t)io0->nrhs;
  const size_t x_bytes = x_count * jmg_dtype_size(v->a.dtype);
  /* The engine holds Aᵀ (see above): A X = B is its transposed solve. */
  const int transpose = io0->trans ? 0 : 1;
  int info = 0;
  const int refused = check_precision(e, io0, err);
  if (refused != 0) return refused;

  int rc = jmg_leader_permute(v, JMG_TO_CYCLIC, err);
  /* The solver overwrites its right-hand side: solve in shard 0's x, so that
   * the user's b is never written. */
  if (rc == 0) rc = m->copy(&v->group, io0->x, 0, io0->b, 0, x_bytes, err);
  if (rc == 0) rc = solve(e, io0, &v->a, transpose, &info, err);
  if (jmg_leader_retry_without_scratch(v, &rc, err))
    rc = solve(e, io0, &v->a, transpose, &info, err);
  if (rc == 0 && info != 0)
    rc = m->fill_nan(&v->group, 0, io0->x, x_count, v->a.dtype, err);
  if (rc == 0)
    rc = jmg_leader_broadcast(v, &jmg_lu_solve_op.bufs[LU_SOLVE_X], err);
  *info_out = info;
  return rc;
}

/* The local model (exec/local.h): the engine factors H = Π M Πᵀ (M = Aᵀ as
 * above) and solves with Hᵀ = Π A Πᵀ (transpose 1) or H (trans set), the
 * same choice as the leader's, with Π B for B: X = Πᵀ of its answer, on
 * every rank (B is never written). H goes onto the call's grid first; the
 * factors stay there (not returned). */
static int lu_solve_local(jmg_local_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const lu_solve_io *io = (const lu_solve_io *)v->io;
  const size_t x_count = (size_t)v->a.n * (size_t)io->nrhs;
  const int transpose = io->trans ? 0 : 1;
  int info = 0;
  /* An engine without lu_solve_mixed: selection refuses a mixed call
   * first. */
  const int refused = check_precision(e, io, err);
  if (refused != 0) return refused;
  int rc = jmg_local_permute_a(v, JMG_LOCAL_APPLY, err);
  if (rc == 0)
    rc = jmg_local_permute_rows(v, io->x, io->b, io->nrhs, JMG_LOCAL_APPLY,
                                err);
  rc = jmg_local_to_grid(v, rc, err);
  rc = jmg_local_agree(v, rc, "the solver", err);
  if (rc == 0 && io->precision == JMG_PRECISION_MIXED)
    rc = e->local.lu_solve_mixed(e, &v->a, io->x, io->nrhs, transpose, &info,
                                 err);
  else if (rc == 0)
    rc = e->local.lu_solve(e, &v->a, io->x, io->nrhs, transpose, &info, err);
  if (rc == 0 && info != 0)
    rc = jmg_local_nan(v, io->x, x_count, v->a.dtype, err);
  else if (rc == 0)
    rc = jmg_local_permute_rows(v, io->x, io->x, io->nrhs, JMG_LOCAL_UNDO,
                                err);
  /* H's zero pivot, numbered as M's rows (layout/local.h). */
  *info_out = (int)jmg_local_perm_info(&v->perm, info);
  return rc;
}
