/* qr: the reduced QR decomposition A = Q R of an m x n A with m >= n: Q
 * (m x n, orthonormal columns) in place of A, in A's layout (rows
 * sharded, the same shards: A's buffer, aliased, so a donated A's buffer
 * holds Q); R (n x n, upper triangular, its strict lower part zero)
 * row-sharded too, ceil(n / group) rows a shard, its rows past n (where
 * the group does not divide n) zero. The Python layer pads A's rows with
 * zeros where the group does not divide m ([A; 0] = [Q; 0] R: the same R)
 * and hands R's shards over as JAX arrays when the group divides n.
 *
 * The transposes, accounted for here and in the engines' contract
 * (engine.h's qr routine): every engine reads a shard column-major (ops.h),
 * so a row-sharded m x n A is, to the engine, M = Aᵀ (n x m), shard d
 * holding its columns d*local_cols ... (the contiguous layout; this op
 * permutes nothing, as gesvd). The engine writes back Qᵀ in the same
 * layout (A's shards then hold Q's rows) and Rᵀ into R's shards (a shard
 * of R's rows, read column-major, is Rᵀ's columns). Plain transposes, no
 * conjugation, also for complex dtypes.
 *
 * Frame: args A (local_cols x n), shard; rets A (aliased: Q), R (r_rows x
 *        n: this shard's rows of R), status; attrs T_A, mesh_id, m (A's
 *        rows: the group is m / local_cols).
 * The local model (qr_local): every rank hands its own columns of Aᵀ to
 * the engine as they are, with the same contract (engine.h's local qr).
 * A Householder QR does not fail numerically: status is 0, or -1 for an A
 * with a NaN or an Inf entry (exec/finite.h: every output NaN; no engine
 * runs). Rank deficiency is not a failure here (R has a zero on its
 * diagonal); jaxmg.least_squares reads it off R's diagonal. */
#include <stddef.h>
#include <stdlib.h>

#include "exec/leader.h"
#include "exec/local.h"
#include "ops/ops.h"

typedef struct qr_io {
  jmg_shard_io io;
  int64_t m;      /* A's rows */
  int64_t r_rows; /* this shard's rows of R: ceil(n / group) */
  void *r;        /* this shard's rows of R, out */
} qr_io;
JMG_OP_IO_FITS(qr_io);

enum { QR_R };               /* its buffers */
enum { QR_M, QR_R_ROWS };    /* its scalars */

static int qr_leader(jmg_leader_view *v, int *info_out, jmg_error *err);
static int qr_local(jmg_local_view *v, int *info_out, jmg_error *err);

const jmg_op_desc jmg_qr_op = {
    .id = JMG_OP_QR,
    .name = "qr",
    .io_size = sizeof(qr_io),
    .nbufs = 1,
    .bufs =
        {
            [QR_R] = {.name = "R",
                      .dir = JMG_OUT,
                      .elem = JMG_ELEM_OF_A,
                      .rank = 2,
                      .dims = {QR_R_ROWS, JMG_DIM_N},
                      .arg = JMG_FFI_NONE,
                      .ret = 1,
                      .offset = offsetof(qr_io, r)},
        },
    .nscalars = 2,
    .scalars =
        {
            [QR_M] = {.name = "m",
                      .from = JMG_FROM_ATTR,
                      .offset = offsetof(qr_io, m)},
            [QR_R_ROWS] = {.name = "r_rows",
                           .from = JMG_FROM_DIM,
                           .buf = QR_R,
                           .dim = 0,
                           .offset = offsetof(qr_io, r_rows)},
        },
    .rows_scalar = QR_M + 1,
    .leader = qr_leader,
    .local = qr_local,
};

/* A tall or square A, and R's shards against it (every shard describes
 * the same call: the leader checked). */
static int check_shapes(const qr_io *io, int ndev, jmg_error *err) {
  const int64_t m = io->m, n = io->io.n;
  if (m < n)
    return jmg_error_set(err, JMG_EINVAL, "qr", "FFI call frame",
                         "A is %lld x %lld: the reduced QR here needs M >= N",
                         (long long)m, (long long)n);
  const int64_t want = (n + ndev - 1) / ndev;
  if (io->r_rows != want)
    return jmg_error_set(err, JMG_EINVAL, "qr", "FFI call frame",
                         "R's shards have %lld rows; %lld rows over %d "
                         "devices take %lld each",
                         (long long)io->r_rows, (long long)n, ndev,
                         (long long)want);
  return 0;
}

static int qr_leader(jmg_leader_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const qr_io *io0 = (const qr_io *)v->io[0];
  int info = 0;
  int rc = check_shapes(io0, v->ndev, err);
  void **data = calloc((size_t)v->ndev, sizeof *data);
  if (rc == 0 && data == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, "qr", "malloc",
                       "cannot allocate R's view");
  if (rc == 0) {
    /* Rᵀ: n rows, r_rows columns on every shard (engine.h, the qr routine). */
    for (int d = 0; d < v->ndev; ++d) data[d] = ((const qr_io *)v->io[d])->r;
    jmg_dist_matrix rt = v->a;
    rt.n = v->a.n;
    rt.local_cols = io0->r_rows;
    rt.tile = io0->r_rows;
    rt.data = data;
    rc = e->leader.qr(e, &v->a, &rt, &info, err);
  }
  free(data);
  /* No engine reports a numerical failure for QR; should one, its outputs
   * are NaN as every op's. */
  if (rc == 0 && info != 0) {
    const jmg_op_desc *op = &jmg_qr_op;
    for (int d = 0; rc == 0 && d < v->ndev; ++d) {
      const qr_io *io = (const qr_io *)v->io[d];
      rc = v->mem->fill_nan(&v->group, d, io->io.a,
                            (size_t)io->io.n * (size_t)io->io.local_cols,
                            v->a.dtype, err);
      if (rc == 0)
        rc = v->mem->fill_nan(&v->group, d, io->r,
                              jmg_op_buf_bytes(op, &op->bufs[QR_R], &io->io) /
                                  jmg_dtype_size(v->a.dtype),
                              v->a.dtype, err);
    }
  }
  *info_out = info;
  return rc;
}

/* The local model (exec/local.h): every rank hands the engine its columns
 * of Aᵀ as they are (no Π, no grid: exec/local.c keeps a rectangular A
 * contiguous) and its R shard; the engine's routine is collective and its
 * info the same on every rank. */
static int qr_local(jmg_local_view *v, int *info_out, jmg_error *err) {
  qr_io *io = (qr_io *)v->io;
  int info = 0;
  int rc = check_shapes(io, v->ranks, err);
  rc = jmg_local_agree(v, rc, "the solver", err);
  if (rc == 0)
    rc = v->engine->local.qr(v->engine, &v->a, io->r, io->m, io->r_rows, &info,
                             err);
  if (rc == 0 && info != 0) {
    rc = jmg_local_nan_a(v, err);
    if (rc == 0)
      rc = jmg_local_nan(v, io->r, (size_t)io->r_rows * (size_t)io->io.n,
                         v->a.dtype, err);
  }
  *info_out = info;
  return rc;
}
