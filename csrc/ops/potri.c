/* potri: the inverse of a Hermitian positive definite A (Cholesky), both
 * triangles, returned in A's own buffers in A's own (contiguous) layout. The
 * engine returns it in that layout already: no permutation back, only a
 * local copy home when A was permuted out of place.
 *
 * Frame: args A (local_cols x n), shard; rets A (aliased; becomes the
 *        inverse), status; attrs T_A, mesh_id. No buffers or scalars beside
 *        the common ones. */
#include "exec/leader.h"
#include "exec/local.h"
#include "ops/ops.h"

static int potri_leader(jmg_leader_view *v, int *info_out, jmg_error *err);
static int potri_local(jmg_local_view *v, int *info_out, jmg_error *err);

const jmg_op_desc jmg_potri_op = {
    .id = JMG_OP_POTRI,
    .name = "potri",
    .io_size = sizeof(jmg_shard_io),
    .leader = potri_leader,
    .local = potri_local,
};

static int potri_leader(jmg_leader_view *v, int *info_out, jmg_error *err) {
  int info = 0;
  int rc = jmg_leader_permute(v, JMG_TO_CYCLIC, err);
  if (rc == 0) rc = v->engine->leader.potri(v->engine, &v->a, &info, err);
  if (jmg_leader_retry_without_scratch(v, &rc, err))
    rc = v->engine->leader.potri(v->engine, &v->a, &info, err);
  if (rc == 0 && info == 0) {
    /* The engine returns the inverse, both triangles, in the contiguous
     * layout (engine/engine.h). */
    rc = jmg_leader_home(v, err);
  } else if (rc == 0) {
    rc = jmg_leader_nan_a(v, err);
  }
  *info_out = info;
  return rc;
}

/* The local model (exec/local.h): the engine inverts H = Π M Πᵀ in place,
 * both triangles; H⁻¹ = Π M⁻¹ Πᵀ, whose columns on each rank are already
 * its shard's columns of M⁻¹: only the rows go back (Πᵀ). On a grid of
 * several rows, H goes onto it before the engine and H⁻¹ back after. */
static int potri_local(jmg_local_view *v, int *info_out, jmg_error *err) {
  int info = 0;
  int rc = jmg_local_permute_a(v, JMG_LOCAL_APPLY, err);
  rc = jmg_local_to_grid(v, rc, err);
  rc = jmg_local_agree(v, rc, "the solver", err);
  if (rc == 0) rc = v->engine->local.potri(v->engine, &v->a, &info, err);
  /* Back to the line: every rank, agreeing on rc; nothing to move where
   * the solver failed (info, the same on every rank). */
  rc = jmg_local_from_grid(v, rc, info != 0, err);
  if (rc == 0 && info == 0)
    rc = jmg_local_permute_a(v, JMG_LOCAL_UNDO, err);
  else if (rc == 0)
    rc = jmg_local_nan_a(v, err);
  /* H's leading minor, numbered as M's rows (layout/local.h). */
  *info_out = (int)jmg_local_perm_info(&v->perm, info);
  return rc;
}
