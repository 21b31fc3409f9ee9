/* potrs: solve A X = B for Hermitian positive definite A (Cholesky).
 * X is written on every shard; A is consumed (it holds the factor, in the
 * block-cyclic layout, and is never returned to the user). */
#include <stdlib.h>

#include "exec/leader.h"
#include "ops/ops.h"

static void *pick_x(jmg_shard_io *io) { return io->x; }

static int potrs_leader(void *ctx, void *const *posts, int nparts,
                        jmg_error *err) {
  jmg_op_call *call = ctx;
  jmg_leader_view v;
  int rc = jmg_leader_view_init(&v, "potrs", call->engine, posts, nparts, err);
  if (rc != 0) return rc;
  const jmg_engine *e = v.engine;
  jmg_shard_io *io0 = v.io[0];
  const size_t x_count = (size_t)v.a.n * (size_t)io0->nrhs;
  const size_t x_bytes = x_count * jmg_dtype_size(v.a.dtype);
  int info = 0;

  rc = jmg_leader_permute(&v, JMG_TO_CYCLIC, err);
  /* The solver overwrites its right-hand side: solve in shard 0's x, so that
   * the user's b is never written. */
  if (rc == 0) rc = e->copy(e, &v.a, io0->x, 0, io0->b, 0, x_bytes, err);
  void **xs = calloc((size_t)nparts, sizeof *xs);
  if (xs == NULL && rc == 0)
    rc = jmg_error_set(err, JMG_ENOMEM, "potrs", "malloc",
                       "cannot allocate %d pointers", nparts);
  for (int d = 0; xs != NULL && d < nparts; ++d) xs[d] = v.io[d]->x;
  if (rc == 0) rc = e->potrs(e, &v.a, xs, io0->nrhs, &info, err);
  if (jmg_leader_retry_without_scratch(&v, &rc, err))
    rc = e->potrs(e, &v.a, xs, io0->nrhs, &info, err);
  free(xs);
  if (rc == 0 && info != 0)
    rc = e->fill_nan(e, &v.a, 0, io0->x, x_count, v.a.dtype, err);
  if (rc == 0) rc = jmg_leader_broadcast(&v, pick_x, x_bytes, err);
  if (rc == 0) rc = jmg_leader_finish(&v, info, err);
  jmg_leader_view_free(&v);
  return rc;
}

int jmg_potrs_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err) {
  if (io->b == NULL || io->x == NULL || io->nrhs < 0) {
    jmg_error_set(err, JMG_EINVAL, "potrs", "arguments",
                  "missing right-hand side or solution buffer");
    return jmg_op_abort(call, "potrs", err);
  }
  return jmg_op_join(call, "potrs", io, potrs_leader, err);
}
