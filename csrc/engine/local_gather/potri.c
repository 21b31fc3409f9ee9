/* potri on the local model's one-device path (local_gather.h): the
 * on_rank0 engine's potri on rank 0's gathered matrix (both triangles, in
 * place: on one device the contiguous layout is the matrix itself), the
 * inverse's parts scattered back in A's layout. */
#include "engine/local_gather/local_gather.h"

int jmg_lg_potri(const jmg_engine *e, const jmg_local_matrix *a, int *info,
                 jmg_error *err) {
  const jmg_engine *one = e->on_rank0;
  jmg_lg_call c;
  int f = 0;
  int rc = jmg_lg_begin(&c, e, JMG_OP_POTRI, a, err);
  if (rc == 0) rc = jmg_lg_gather(&c, err);
  if (rc == 0) {
    int orc = 0;
    if (a->rank == 0) {
      const jmg_dist_matrix *v = jmg_lg_square_view(&c);
      orc = one->leader.potri(one, v, &f, err);
    }
    rc = jmg_lg_outcome(&c, orc, &f, err);
  }
  /* f > 0: A's content is unspecified (the ops layer fills NaN). */
  if (rc == 0 && f == 0) rc = jmg_lg_scatter(&c, err);
  if (rc == 0) *info = f;
  rc = jmg_lg_end(&c, rc, err);
  if (rc == JMG_LG_FALL_BACK)
    rc = e->fallback->local.potri(e->fallback, a, info, err);
  return rc;
}
