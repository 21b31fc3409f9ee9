/* potrs: solve A X = B for Hermitian positive definite A (Cholesky).
 * X is written on every shard; A is consumed (it holds the factor, in the
 * block-cyclic layout, and is never returned to the user).
 *
 * With want_logdet, also log det A = 2 sum log(real(diag(L))) (the factor
 * of conj(A), as the engines see it, has A's determinant), a real scalar
 * written on every shard, NaN when the factorization fails.
 *
 * With precision (common/op.h) JMG_PRECISION_MIXED, the engine's
 * potrs_mixed solves (a lower-precision factor, X refined against A kept
 * intact, the exact factorization where refinement does not converge:
 * engine/refine.h); the status is the exact path's. It gives no
 * log-determinant (that would come from the lower-precision factor): the
 * two together are refused.
 *
 * Frame: args A (local_cols x n), B (nrhs x n: B column-major), shard;
 *        rets A (aliased), X (nrhs x n), [logdet (rank 0, A's real type),
 *        only with want_logdet,] status; attrs T_A, mesh_id, want_logdet
 *        (optional, bool; absent: 0), precision (optional; absent: 0,
 *        exact). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "exec/leader.h"
#include "exec/local.h"
#include "ops/ops.h"

typedef struct potrs_io {
  jmg_shard_io io;
  int64_t nrhs; /* B's columns */
  void *b;      /* n x nrhs right-hand sides, in: every shard has a copy */
  void *x;      /* n x nrhs solution, out: written on every shard */
  void *logdet; /* real scalar, out (want_logdet only): on every shard */
  int64_t want_logdet;
  int64_t precision; /* jmg_precision */
} potrs_io;
JMG_OP_IO_FITS(potrs_io);

enum { POTRS_B, POTRS_X, POTRS_LOGDET }; /* its buffers */
enum { POTRS_NRHS, POTRS_WANT_LOGDET, POTRS_PRECISION }; /* its scalars */

static int potrs_leader(jmg_leader_view *v, int *info_out, jmg_error *err);
static int potrs_local(jmg_local_view *v, int *info_out, jmg_error *err);

const jmg_op_desc jmg_potrs_op = {
    .id = JMG_OP_POTRS,
    .name = "potrs",
    .io_size = sizeof(potrs_io),
    .nbufs = 3,
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
            [POTRS_LOGDET] = {.name = "logdet",
                              .dir = JMG_OUT,
                              .elem = JMG_ELEM_REAL,
                              .rank = 0,
                              .arg = JMG_FFI_NONE,
                              .ret = 2,
                              .offset = offsetof(potrs_io, logdet),
                              .if_scalar = POTRS_WANT_LOGDET + 1},
        },
    .nscalars = 3,
    .scalars =
        {
            [POTRS_NRHS] = {.name = "nrhs",
                            .from = JMG_FROM_DIM,
                            .buf = POTRS_B,
                            .dim = 0,
                            .offset = offsetof(potrs_io, nrhs)},
            [POTRS_WANT_LOGDET] = {.name = "want_logdet",
                                   .from = JMG_FROM_ATTR,
                                   .boolean = 1,
                                   .optional = 1,
                                   .offset = offsetof(potrs_io, want_logdet)},
            [POTRS_PRECISION] = {.name = "precision",
                                 .from = JMG_FROM_ATTR,
                                 .optional = 1,
                                 .offset = offsetof(potrs_io, precision)},
        },
    .leader = potrs_leader,
    .local = potrs_local,
};

/* log det from the factor's diagonal (n real parts of A's real type), in
 * double; NaN when the factorization failed. */
static double logdet_of(const void *diag, int64_t n, jmg_dtype dtype,
                        int info) {
  if (info != 0) return NAN;
  double sum = 0.0;
  const int single = jmg_dtype_real_size(dtype) == sizeof(float);
  for (int64_t i = 0; i < n; ++i)
    sum += log(single ? (double)((const float *)diag)[i]
                      : ((const double *)diag)[i]);
  return 2.0 * sum;
}

/* Writes the log-determinant on every shard, in A's real type, from the
 * host, and waits: the value lives on this stack frame. */
static int write_logdet(jmg_leader_view *v, double value, jmg_error *err) {
  const jmg_mem *m = v->mem;
  const float single = (float)value;
  const int is_single =
      jmg_dtype_real_size(v->a.dtype) == sizeof(float);
  const void *src = is_single ? (const void *)&single : (const void *)&value;
  const size_t bytes = is_single ? sizeof single : sizeof value;
  int rc = 0;
  for (int d = 0; rc == 0 && d < v->ndev; ++d) {
    const potrs_io *io = (const potrs_io *)v->io[d];
    rc = m->copy(&v->group, io->logdet, d, src, JMG_HOST, bytes, err);
  }
  if (rc == 0) rc = m->sync(&v->group, err);
  return rc;
}

/* 0, or the error of a mixed-precision call that cannot run: one that
 * wants the log-determinant, or an engine without potrs_mixed (selection
 * refuses it first; ffi/plan.c). */
static int check_precision(const jmg_engine *e, const potrs_io *io,
                           jmg_error *err) {
  if (io->precision == JMG_PRECISION_EXACT) return 0;
  if (io->precision != JMG_PRECISION_MIXED)
    return jmg_error_set(err, JMG_EINVAL, "potrs", "arguments",
                         "precision=%lld: 0 (exact) or 1 (mixed)",
                         (long long)io->precision);
  if (io->want_logdet)
    return jmg_error_set(err, JMG_EINVAL, "potrs", "arguments",
                         "precision=\"mixed\" gives no log-determinant (it "
                         "would come from the lower-precision factor): pass "
                         "precision=\"exact\" with return_logdet");
  if (!jmg_engine_has_precision(e, JMG_OP_POTRS, JMG_PRECISION_MIXED))
    return jmg_error_set(err, JMG_EUNSUPPORTED, "potrs", "arguments",
                         "engine %s has no potrs with precision=\"mixed\"; "
                         "pass precision=\"exact\"",
                         e->name);
  return 0;
}

/* The engine's solve in the call's precision. */
static int solve(const jmg_engine *e, const potrs_io *io,
                 const jmg_dist_matrix *a, void *diag, int *info,
                 jmg_error *err) {
  if (io->precision == JMG_PRECISION_MIXED)
    return e->leader.potrs_mixed(e, a, io->x, io->nrhs, info, err);
  return e->leader.potrs(e, a, io->x, io->nrhs, diag, info, err);
}

static int potrs_leader(jmg_leader_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const jmg_mem *m = v->mem;
  const potrs_io *io0 = (const potrs_io *)v->io[0];
  const size_t x_count = (size_t)v->a.n * (size_t)io0->nrhs;
  const size_t x_bytes = x_count * jmg_dtype_size(v->a.dtype);
  int info = 0;
  const int refused = check_precision(e, io0, err);
  if (refused != 0) return refused;
  /* The factor's diagonal, on the host, when the call wants the
   * log-determinant (the engines' potrs reads it while it holds the
   * factor). */
  void *diag = NULL;
  if (io0->want_logdet) {
    diag = malloc((size_t)v->a.n * jmg_dtype_real_size(v->a.dtype));
    if (diag == NULL)
      return jmg_error_set(err, JMG_ENOMEM, "potrs", "logdet",
                           "cannot allocate the factor's diagonal (N=%lld)",
                           (long long)v->a.n);
  }

  int rc = jmg_leader_permute(v, JMG_TO_CYCLIC, err);
  /* The solver overwrites its right-hand side: solve in shard 0's x, so that
   * the user's b is never written. */
  if (rc == 0) rc = m->copy(&v->group, io0->x, 0, io0->b, 0, x_bytes, err);
  if (rc == 0) rc = solve(e, io0, &v->a, diag, &info, err);
  if (jmg_leader_retry_without_scratch(v, &rc, err))
    rc = solve(e, io0, &v->a, diag, &info, err);
  if (rc == 0 && info != 0)
    rc = m->fill_nan(&v->group, 0, io0->x, x_count, v->a.dtype, err);
  if (rc == 0) rc = jmg_leader_broadcast(v, &jmg_potrs_op.bufs[POTRS_X], err);
  if (rc == 0 && diag != NULL)
    rc = write_logdet(v, logdet_of(diag, v->a.n, v->a.dtype, info), err);
  free(diag);
  *info_out = info;
  return rc;
}

/* The local model (exec/local.h): every rank solves with its own copy of B
 * and writes its own X and log-determinant. The engine holds H = Π M Πᵀ
 * (on the call's grid: its factor is not returned, so it stays there),
 * so it solves H (Π x) = Π b: X starts as Π B (B is never written) and
 * ends as Πᵀ of the engine's answer. The factor's diagonal comes in H's
 * order, which the sum does not see. */
static int potrs_local(jmg_local_view *v, int *info_out, jmg_error *err) {
  const jmg_engine *e = v->engine;
  const potrs_io *io = (const potrs_io *)v->io;
  const size_t x_count = (size_t)v->a.n * (size_t)io->nrhs;
  int info = 0, rc = 0;
  void *diag = NULL;
  /* An engine without potrs_mixed: selection refuses such a call before it
   * gets here (engine/select.c). */
  const int refused = check_precision(e, io, err);
  if (refused != 0) return refused;
  if (io->want_logdet) {
    diag = malloc((size_t)v->a.n * jmg_dtype_real_size(v->a.dtype));
    if (diag == NULL)
      rc = jmg_error_set(err, JMG_ENOMEM, "potrs", "logdet",
                         "cannot allocate the factor's diagonal (N=%lld)",
                         (long long)v->a.n);
  }
  if (rc == 0) rc = jmg_local_permute_a(v, JMG_LOCAL_APPLY, err);
  if (rc == 0)
    rc = jmg_local_permute_rows(v, io->x, io->b, io->nrhs, JMG_LOCAL_APPLY,
                                err);
  rc = jmg_local_to_grid(v, rc, err);
  rc = jmg_local_agree(v, rc, "the solver", err);
  if (rc == 0 && io->precision == JMG_PRECISION_MIXED)
    rc = e->local.potrs_mixed(e, &v->a, io->x, io->nrhs, &info, err);
  else if (rc == 0)
    rc = e->local.potrs(e, &v->a, io->x, io->nrhs, diag, &info, err);
  if (rc == 0 && info != 0)
    rc = jmg_local_nan(v, io->x, x_count, v->a.dtype, err);
  else if (rc == 0)
    rc = jmg_local_permute_rows(v, io->x, io->x, io->nrhs, JMG_LOCAL_UNDO,
                                err);
  if (rc == 0 && diag != NULL) {
    const double value = logdet_of(diag, v->a.n, v->a.dtype, info);
    const float single = (float)value;
    const int is_single = jmg_dtype_real_size(v->a.dtype) == sizeof(float);
    rc = jmg_local_write(v, io->logdet,
                         is_single ? (const void *)&single
                                   : (const void *)&value,
                         is_single ? sizeof single : sizeof value, err);
  }
  free(diag);
  /* H's leading minor, numbered as M's rows (layout/local.h). */
  *info_out = (int)jmg_local_perm_info(&v->perm, info);
  return rc;
}
