/* syevd: eigenvalues (ascending, on every shard) and eigenvectors (the
 * columns of V, returned in A's buffers in A's own contiguous layout: shard d
 * holds eigenvectors d*n/ndev .. (d+1)*n/ndev - 1). */
#include "exec/leader.h"
#include "ops/ops.h"

static void *pick_w(jmg_shard_io *io) { return io->w; }

static int syevd_leader(void *ctx, void *const *posts, int nparts,
                        jmg_error *err) {
  jmg_op_call *call = ctx;
  jmg_leader_view v;
  int rc = jmg_leader_view_init(&v, "syevd", call->engine, posts, nparts, err);
  if (rc != 0) return rc;
  const jmg_engine *e = v.engine;
  jmg_shard_io *io0 = v.io[0];
  const jmg_dtype real =
      jmg_dtype_real_size(v.a.dtype) == 4 ? JMG_F32 : JMG_F64;
  const size_t w_bytes = (size_t)v.a.n * jmg_dtype_size(real);
  int info = 0;

  rc = jmg_leader_permute(&v, JMG_TO_CYCLIC, err);
  if (rc == 0) rc = e->syevd(e, &v.a, io0->w, io0->want_vectors, &info, err);
  if (jmg_leader_retry_without_scratch(&v, &rc, err))
    rc = e->syevd(e, &v.a, io0->w, io0->want_vectors, &info, err);
  if (rc == 0 && info != 0) {
    rc = e->fill_nan(e, &v.a, 0, io0->w, (size_t)v.a.n, real, err);
    if (rc == 0) rc = jmg_leader_nan_a(&v, err);
  } else if (rc == 0 && io0->want_vectors) {
    rc = jmg_leader_permute(&v, JMG_FROM_CYCLIC, err);
  }
  if (rc == 0) rc = jmg_leader_broadcast(&v, pick_w, w_bytes, err);
  if (rc == 0) rc = jmg_leader_finish(&v, info, err);
  jmg_leader_view_free(&v);
  return rc;
}

int jmg_syevd_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err) {
  if (io->w == NULL) {
    jmg_error_set(err, JMG_EINVAL, "syevd", "arguments",
                  "missing eigenvalue buffer");
    return jmg_op_abort(call, "syevd", err);
  }
  return jmg_op_join(call, "syevd", io, syevd_leader, err);
}
