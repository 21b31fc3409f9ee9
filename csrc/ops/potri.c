/* potri: the inverse of a Hermitian positive definite A (Cholesky), both
 * triangles, returned in A's own buffers in A's own (contiguous) layout. The
 * engine returns it in that layout already: no permutation back, only a
 * local copy home when A was permuted out of place. */
#include "exec/leader.h"
#include "ops/ops.h"

static int potri_leader(void *ctx, void *const *posts, int nparts,
                        jmg_error *err) {
  jmg_op_call *call = ctx;
  jmg_leader_view v;
  int rc = jmg_leader_view_init(&v, "potri", call->engine, posts, nparts, err);
  if (rc != 0) return rc;
  int info = 0;

  rc = jmg_leader_permute(&v, JMG_TO_CYCLIC, err);
  if (rc == 0) rc = v.engine->potri(v.engine, &v.a, &info, err);
  if (jmg_leader_retry_without_scratch(&v, &rc, err))
    rc = v.engine->potri(v.engine, &v.a, &info, err);
  if (rc == 0 && info == 0) {
    /* The engine returns the inverse in the contiguous layout, its lower
     * triangle right; the user gets both triangles. */
    rc = v.engine->fill_upper(v.engine, &v.a, err);
    if (rc == 0) rc = jmg_leader_home(&v, err);
  } else if (rc == 0) {
    rc = jmg_leader_nan_a(&v, err);
  }
  if (rc == 0) rc = jmg_leader_finish(&v, info, err);
  jmg_leader_view_free(&v);
  return rc;
}

int jmg_potri_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err) {
  return jmg_op_join(call, "potri", io, potri_leader, err);
}
