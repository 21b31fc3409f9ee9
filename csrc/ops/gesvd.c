/* gesvd: the singular value decomposition A = U S Vh of an m x n A (any m
 * and n; k = min(m, n)): S (k reals, descending) on every shard; U (m x k,
 * or m x m with full_matrices) and Vh (k x n, or n x n) when asked, each
 * row-sharded like A (the Python layer checks that their rows divide into
 * the group). A is consumed (its content afterwards is unspecified).
 *
 * The transposes, accounted for here and nowhere else. Every engine reads
 * a shard column-major (ops.h): a row-sharded m x n A is, to the engine,
 * M = Aᵀ, n x m, shard d holding its columns d*local_cols ... (the
 * contiguous layout; this op permutes nothing). From the engine's M =
 * U_M S Vh_M follows A = Mᵀ = Vh_Mᵀ S U_Mᵀ: A's U is Vh_Mᵀ and A's Vh is
 * U_Mᵀ, plain transposes (no conjugation, also for complex dtypes: the
 * transpose of a unitary matrix is unitary). And a transpose is free here:
 * a column-major U_M (n x k) is, read row-major, the k x n matrix U_Mᵀ =
 * A's Vh, and a column-major Vh_M (k x m) is the m x k matrix A's U. So the
 * engine writes U_M's columns straight into the shards of A's Vh (shard d
 * its rows d*rows_per_shard ... = U_M's columns), and Vh_M's columns into
 * the shards of A's U; nothing is conjugated, copied twice or permuted.
 *
 * The engine decomposes the logical m x n matrix: the op never pads
 * (zero rows or columns would change U and Vh of a rank-deficient A), and
 * the engines take any m and n.
 *
 * Frame: args A (local_cols x n), shard; rets A (aliased), S (k, A's real
 *        type), [U (local_cols x m or k), only with want_u,] [Vh (rows x n:
 *        this shard's rows of Vh), only with want_vh,] status; attrs T_A,
 *        mesh_id, m (A's rows: the group is m / local_cols), want_u,
 *        want_vh, full_matrices (these three optional bools, absent: 0;
 *        optional so that the handler reads them before it counts the
 *        frame's results).
 * A decomposition that fails (info > 0: the solver did not converge) gives
 * that info as status and NaN in S, U and Vh, no error; an A with a NaN or
 * an Inf entry never reaches the engine (exec/finite.h: status -1). */
#include <stddef.h>
#include <stdlib.h>

#include "exec/leader.h"
#include "ops/ops.h"

typedef struct gesvd_io {
  jmg_shard_io io;
  int64_t m;       /* A's rows */
  int64_t want_u;  /* 0: no U */
  int64_t want_vh; /* 0: no Vh */
  int64_t full;    /* full_matrices: U m x m and Vh n x n */
  int64_t k;       /* S's length: min(m, n) */
  int64_t u_cols;  /* U's columns: k, or m with full */
  int64_t vh_rows; /* this shard's rows of Vh: (k, or n with full) / group */
  void *s;         /* k singular values (real), out: on every shard */
  void *u;         /* this shard's rows of U, out */
  void *vh;        /* this shard's rows of Vh, out */
} gesvd_io;
JMG_OP_IO_FITS(gesvd_io);

enum { GESVD_S, GESVD_U, GESVD_VH }; /* its buffers */
enum {                               /* its scalars */
       GESVD_M,
       GESVD_WANT_U,
       GESVD_WANT_VH,
       GESVD_FULL,
       GESVD_K,
       GESVD_U_COLS,
       GESVD_VH_ROWS
};

static int gesvd_leader(jmg_leader_view *v, int *info_out, jmg_error *err);

const jmg_op_desc jmg_gesvd_op = {
    .id = JMG_OP_GESVD,
    .name = "gesvd",
    .io_size = sizeof(gesvd_io),
    .nbufs = 3,
    .bufs =
        {
            [GESVD_S] = {.name = "S",
                         .dir = JMG_OUT,
                         .elem = JMG_ELEM_REAL,
                         .rank = 1,
                         .dims = {GESVD_K},
                         .arg = JMG_FFI_NONE,
                         .ret = 1,
                         .offset = offsetof(gesvd_io, s)},
            [GESVD_U] = {.name = "U",
                         .dir = JMG_OUT,
                         .elem = JMG_ELEM_OF_A,
                         .rank = 2,
                         .dims = {JMG_DIM_LOCAL_COLS, GESVD_U_COLS},
                         .arg = JMG_FFI_NONE,
                         .ret = 2,
                         .offset = offsetof(gesvd_io, u),
                         .if_scalar = GESVD_WANT_U + 1},
            [GESVD_VH] = {.name = "Vh",
                          .dir = JMG_OUT,
                          .elem = JMG_ELEM_OF_A,
                          .rank = 2,
                          .dims = {GESVD_VH_ROWS, JMG_DIM_N},
                          .arg = JMG_FFI_NONE,
                          .ret = 3,
                          .offset = offsetof(gesvd_io, vh),
                          .if_scalar = GESVD_WANT_VH + 1},
        },
    .nscalars = 7,
    .scalars =
        {
            [GESVD_M] = {.name = "m",
                         .from = JMG_FROM_ATTR,
                         .offset = offsetof(gesvd_io, m)},
            [GESVD_WANT_U] = {.name = "want_u",
                              .from = JMG_FROM_ATTR,
                              .boolean = 1,
                              .optional = 1,
                              .offset = offsetof(gesvd_io, want_u)},
            [GESVD_WANT_VH] = {.name = "want_vh",
                               .from = JMG_FROM_ATTR,
                               .boolean = 1,
                               .optional = 1,
                               .offset = offsetof(gesvd_io, want_vh)},
            [GESVD_FULL] = {.name = "full_matrices",
                            .from = JMG_FROM_ATTR,
                            .boolean = 1,
                            .optional = 1,
                            .offset = offsetof(gesvd_io, full)},
            [GESVD_K] = {.name = "k",
                         .from = JMG_FROM_DIM,
                         .buf = GESVD_S,
                         .dim = 0,
                         .offset = offsetof(gesvd_io, k)},
            [GESVD_U_COLS] = {.name = "u_cols",
                              .from = JMG_FROM_DIM,
                              .buf = GESVD_U,
                              .dim = 1,
                              .offset = offsetof(gesvd_io, u_cols)},
            [GESVD_VH_ROWS] = {.name = "vh_rows",
                               .from = JMG_FROM_DIM,
                               .buf = GESVD_VH,
                               .dim = 0,
                               .offset = offsetof(gesvd_io, vh_rows)},
        },
    .rows_scalar = GESVD_M + 1,
    .leader = gesvd_leader,
    /* No engine of the local model has gesvd (engine/engine.h). */
    .local = NULL,
};

/* The outputs' shapes against A's (every shard describes the same call:
 * the leader checked). */
static int check_shapes(const gesvd_io *io, int ndev, jmg_error *err) {
  const int64_t m = io->m, n = io->io.n, k = m < n ? m : n;
  const int64_t u_cols = io->full ? m : k, vh_rows = io->full ? n : k;
  if (io->k != k)
    return jmg_error_set(err, JMG_EINVAL, "gesvd", "FFI call frame",
                         "S has %lld elements; a %lld x %lld A has %lld "
                         "singular values",
                         (long long)io->k, (long long)m, (long long)n,
                         (long long)k);
  if (io->want_u && io->u_cols != u_cols)
    return jmg_error_set(err, JMG_EINVAL, "gesvd", "FFI call frame",
                         "U has %lld columns, expected %lld (A %lld x %lld, "
                         "full_matrices=%d)",
                         (long long)io->u_cols, (long long)u_cols, (long long)m,
                         (long long)n, (int)io->full);
  if (io->want_vh && io->vh_rows * ndev != vh_rows)
    return jmg_error_set(err, JMG_EINVAL, "gesvd", "FFI call frame",
                         "Vh's shards of %lld rows over %d devices do not "
                         "make its %lld rows (A %lld x %lld, "
                         "full_matrices=%d)",
                         (long long)io->vh_rows, ndev, (long long)vh_rows,
                         (long long)m, (long long)n, (int)io->full);
  return 0;
}

/* The engine's view of one of the outputs on every shard (engine.h's
 * contiguous layout): rows x (ndev * local_cols), shard d's buffer at the
 * offset `offset` of its io. data must hold ndev pointers. */
static void output_view(const jmg_leader_view *v, size_t offset, int64_t rows,
                        int64_t local_cols, void **data, jmg_dist_matrix *out) {
  const jmg_op_buf b = {.offset = offset};
  for (int d = 0; d < v->ndev; ++d) data[d] = *jmg_op_buf_slot(&b, v->io[d]);
  *out = v->a;
  out->n = rows;
  out->local_cols = local_cols;
  out->tile = local_cols;
  out->data = data;
}

/* NaN in every wanted output of every shard (S on shard 0: it is
 * broadcast after). */
static int fill_nan(const jmg_leader_view *v, const gesvd_io *io0,
                    jmg_error *err) {
  const jmg_dtype real =
      jmg_dtype_real_size(v->a.dtype) == 4 ? JMG_F32 : JMG_F64;
  int rc = v->mem->fill_nan(&v->group, 0, io0->s, (size_t)io0->k, real, err);
  for (int d = 0; rc == 0 && d < v->ndev; ++d) {
    const gesvd_io *io = (const gesvd_io *)v->io[d];
    if (io->want_u)
      rc = v->mem->fill_nan(&v->group, d, io->u,
                            (size_t)io->io.local_cols * (size_t)io->u_cols,
                            v->a.dtype, err);
    if (rc == 0 && io->want_vh)
      rc = v->mem->fill_nan(&v->group, d, io->vh,
                            (size_t)io->vh_rows * (size_t)io->io.n, v->a.dtype,
                            err);
  }
  return rc;
}

static int gesvd_leader(jmg_leader_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const gesvd_io *io0 = (const gesvd_io *)v->io[0];
  int info = 0;
  int rc = check_shapes(io0, v->ndev, err);
  void **data = calloc(2 * (size_t)v->ndev, sizeof *data);
  if (rc == 0 && data == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, "gesvd", "malloc",
                       "cannot allocate the outputs' views");
  if (rc == 0) {
    /* The engine's U_M is A's Vh, its Vh_M A's U (see above). */
    jmg_dist_matrix u_m, vh_m;
    if (io0->want_vh)
      output_view(v, offsetof(gesvd_io, vh), v->a.n, io0->vh_rows, data, &u_m);
    if (io0->want_u)
      output_view(v, offsetof(gesvd_io, u), io0->u_cols, v->a.local_cols,
                  data + v->ndev, &vh_m);
    rc = e->leader.gesvd(e, &v->a, io0->s, io0->want_vh ? &u_m : NULL,
                         io0->want_u ? &vh_m : NULL, (int)io0->full, &info,
                         err);
  }
  free(data);
  if (rc == 0 && info != 0) rc = fill_nan(v, io0, err);
  if (rc == 0) rc = jmg_leader_broadcast(v, &jmg_gesvd_op.bufs[GESVD_S], err);
  *info_out = info;
  return rc;
}
