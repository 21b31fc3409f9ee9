/* sygvd: the generalized Hermitian-definite eigenproblem A v = λ B v (type
 * 1; B Hermitian positive definite): eigenvalues (ascending, on every
 * shard) and B-orthonormal eigenvectors (Vᴴ B V = I: the columns of V,
 * returned in A's buffers in A's own contiguous layout, as syevd's: shard d
 * holds eigenvectors d*n/ndev .. (d+1)*n/ndev - 1).
 *
 * B is sharded as A is and consumed: the solver overwrites it (with its
 * Cholesky factor), so it is an aliased result too (the Python layer hands
 * it back and drops it; donated, its buffer is the solver's workspace).
 * A B with a NaN or an Inf entry is caught as A is (exec/finite.h:
 * check_finite). Statuses, as LAPACK's ?sygvd: 1..n the eigensolver did
 * not converge; n + k B's leading minor of order k is not positive
 * definite; every output NaN for any nonzero status.
 *
 * Frame: args A (local_cols x n), B (local_cols x n), shard; rets A
 *        (aliased; becomes this shard's eigenvectors), W (n, real), B
 *        (aliased; its content afterwards unspecified), status; attrs T_A,
 *        mesh_id, want_vectors, vectors_in_a (optional, 0 when absent: V
 *        itself in A's buffer on a group of one device, ops/vectors.c). */
#include <stddef.h>
#include <stdlib.h>

#include "exec/leader.h"
#include "exec/local.h"
#include "ops/ops.h"

typedef struct sygvd_io {
  jmg_shard_io io;
  int64_t want_vectors; /* 0: eigenvalues only */
  int64_t vectors_in_a; /* 1: V itself in A's buffer, read row-major */
  void *w;              /* n eigenvalues (real), out: on every shard */
  void *b;              /* n x local_cols: this shard's columns of B, in;
                         * overwritten (workspace) */
} sygvd_io;
JMG_OP_IO_FITS(sygvd_io);

enum { SYGVD_W, SYGVD_B };   /* its buffers */
enum { SYGVD_WANT_VECTORS, SYGVD_VECTORS_IN_A }; /* its scalars */

static int sygvd_leader(jmg_leader_view *v, int *info_out, jmg_error *err);
static int sygvd_local(jmg_local_view *v, int *info_out, jmg_error *err);

const jmg_op_desc jmg_sygvd_op = {
    .id = JMG_OP_SYGVD,
    .name = "sygvd",
    .io_size = sizeof(sygvd_io),
    .nbufs = 2,
    .bufs =
        {
            [SYGVD_W] = {.name = "W",
                         .dir = JMG_OUT,
                         .elem = JMG_ELEM_REAL,
                         .rank = 1,
                         .dims = {JMG_DIM_N},
                         .arg = JMG_FFI_NONE,
                         .ret = 1,
                         .offset = offsetof(sygvd_io, w)},
            [SYGVD_B] = {.name = "B",
                         .dir = JMG_INOUT,
                         .elem = JMG_ELEM_OF_A,
                         .rank = 2,
                         .dims = {JMG_DIM_LOCAL_COLS, JMG_DIM_N},
                         .arg = 1,
                         .ret = 2,
                         .offset = offsetof(sygvd_io, b),
                         .check_finite = 1},
        },
    .nscalars = 2,
    .scalars =
        {
            [SYGVD_WANT_VECTORS] = {.name = "want_vectors",
                                    .from = JMG_FROM_ATTR,
                                    .boolean = 1,
                                    .offset = offsetof(sygvd_io, want_vectors)},
            [SYGVD_VECTORS_IN_A] = {.name = "vectors_in_a",
                                    .from = JMG_FROM_ATTR,
                                    .boolean = 1,
                                    .optional = 1,
                                    .offset = offsetof(sygvd_io, vectors_in_a)},
        },
    .leader = sygvd_leader,
    .local = sygvd_local,
};

/* Every shard's B, as the engine's second distributed matrix. */
static int b_view(jmg_leader_view *v, void ***data, jmg_dist_matrix *b,
                  jmg_error *err) {
  *data = malloc((size_t)v->ndev * sizeof **data);
  if (*data == NULL)
    return jmg_error_set(err, JMG_ENOMEM, v->op, "malloc",
                         "cannot allocate the view of B");
  for (int d = 0; d < v->ndev; ++d)
    (*data)[d] = ((const sygvd_io *)v->io[d])->b;
  *b = v->a;
  b->data = *data;
  return 0;
}

/* The leader model: A and B permuted into the block-cyclic layout (B in
 * place; A where jmg_leader_permute puts it), the engine, then the
 * eigenvectors back as syevd's (B is workspace: not permuted back). A
 * symmetric permutation P of both, P A Pᵀ and P B Pᵀ, keeps the eigenvalues
 * and makes the eigenvectors P V: the layout of syevd's. */
static int sygvd_leader(jmg_leader_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const sygvd_io *io0 = (const sygvd_io *)v->io[0];
  const jmg_dtype real =
      jmg_dtype_real_size(v->a.dtype) == 4 ? JMG_F32 : JMG_F64;
  int info = 0;
  void **b_data = NULL;
  jmg_dist_matrix b;
  int rc = jmg_vectors_in_a_check("sygvd", io0->vectors_in_a,
                                  io0->want_vectors, v->ndev, err);
  if (rc == 0) rc = b_view(v, &b_data, &b, err);
  if (rc == 0) rc = jmg_leader_permute_matrix(v, b_data, JMG_TO_CYCLIC, err);
  if (rc == 0) rc = jmg_leader_permute(v, JMG_TO_CYCLIC, err);
  if (rc == 0)
    rc = e->leader.sygvd(e, &v->a, &b, io0->w, io0->want_vectors, &info, err);
  if (jmg_leader_retry_without_scratch(v, &rc, err))
    rc = e->leader.sygvd(e, &v->a, &b, io0->w, io0->want_vectors, &info, err);
  if (rc == 0 && info != 0) {
    rc = v->mem->fill_nan(&v->group, 0, io0->w, (size_t)v->a.n, real, err);
    if (rc == 0) rc = jmg_leader_nan_a(v, err);
    for (int d = 0; rc == 0 && d < v->ndev; ++d)
      rc = v->mem->fill_nan(&v->group, d, b_data[d],
                            (size_t)v->a.n * (size_t)v->a.local_cols,
                            v->a.dtype, err);
  } else if (rc == 0 && io0->want_vectors) {
    rc = jmg_leader_permute(v, JMG_FROM_CYCLIC, err);
    if (rc == 0 && io0->vectors_in_a) /* one shard: the whole matrix */
      rc = jmg_vectors_in_a(v->mem, &v->group, v->home[0], v->a.n,
                            v->a.dtype, err);
  }
  if (rc == 0) rc = jmg_leader_broadcast(v, &jmg_sygvd_op.bufs[SYGVD_W], err);
  free(b_data);
  *info_out = info;
  return rc;
}

/* The local model (exec/local.h), as syevd's: H_A = Π A Πᵀ and
 * H_B = Π B Πᵀ have A and B's eigenvalues and eigenvectors Π V; B's part
 * is permuted (and moved onto the grid) as A's is, and consumed by the
 * engine. */
static int sygvd_local(jmg_local_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const sygvd_io *io = (const sygvd_io *)v->io;
  const jmg_dtype real =
      jmg_dtype_real_size(v->a.dtype) == 4 ? JMG_F32 : JMG_F64;
  int info = 0;
  int rc = jmg_vectors_in_a_check("sygvd", io->vectors_in_a,
                                  io->want_vectors, v->ranks, err);
  if (rc == 0)
    rc = jmg_local_permute_rows(v, io->b, io->b, v->a.cols, JMG_LOCAL_APPLY,
                                err);
  if (rc == 0) rc = jmg_local_permute_a(v, JMG_LOCAL_APPLY, err);
  rc = jmg_local_matrix_to_grid(v, io->b, rc, err);
  rc = jmg_local_to_grid(v, rc, err);
  rc = jmg_local_agree(v, rc, "the solver", err);
  jmg_local_matrix b = v->a;
  b.data = io->b;
  if (rc == 0)
    rc = e->local.sygvd(e, &v->a, &b, io->w, io->want_vectors, &info, err);
  rc = jmg_local_agree(v, rc, "the eigenvectors' exchange", err);
  if (rc == 0 && info != 0) {
    rc = jmg_local_nan(v, io->w, (size_t)v->a.n, real, err);
    if (rc == 0) rc = jmg_local_nan_a(v, err);
    if (rc == 0)
      rc = jmg_local_nan(v, io->b, (size_t)v->a.rows * (size_t)v->a.cols,
                         v->a.dtype, err);
  } else if (rc == 0 && io->want_vectors) {
    rc = jmg_local_from_grid(v, rc, 0, err);
    rc = jmg_local_redistribute_vectors(v, rc, err);
    /* One rank (jmg_vectors_in_a_check): no agreement needed after it. */
    if (rc == 0 && io->vectors_in_a)
      rc = jmg_vectors_in_a(v->mem, &v->group, v->a.data, v->a.n, v->a.dtype,
                            err);
  }
  /* n + k (B's leading minor of order k of H) is renumbered as M's, as
   * potrs's minor is (jmg_local_perm_info); 1..n (no convergence) names no
   * row. */
  if (info > v->a.n)
    info = (int)(v->a.n + jmg_local_perm_info(&v->perm, info - v->a.n));
  *info_out = info;
  return rc;
}
