/* syevd on the local model's one-device path (local_gather.h): the
 * on_rank0 engine's syevd on rank 0's gathered matrix, the eigenvalues
 * broadcast to every rank and, with vectors, the eigenvectors' parts
 * scattered back in A's layout (column j the j-th eigenvector; on one
 * device the block-cyclic layout is the matrix itself). */
#include "engine/local_gather/local_gather.h"

int jmg_lg_syevd(const jmg_engine *e, const jmg_local_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err) {
  const jmg_engine *one = e->on_rank0;
  jmg_lg_call c;
  int f = 0;
  int rc = jmg_lg_begin(&c, e, JMG_OP_SYEVD, a, err);
  if (rc == 0) rc = jmg_lg_gather(&c, err);
  if (rc == 0) {
    int orc = 0;
    if (a->rank == 0) {
      const jmg_dist_matrix *v = jmg_lg_square_view(&c);
      orc = one->leader.syevd(one, v, w, want_vectors, &f, err);
    }
    rc = jmg_lg_outcome(&c, orc, &f, err);
  }
  /* f > 0: no convergence; the ops layer fills NaN. */
  if (rc == 0 && f == 0)
    rc = jmg_lg_bcast(&c, w, (size_t)a->n * jmg_dtype_real_size(a->dtype), err);
  if (rc == 0 && f == 0 && want_vectors) rc = jmg_lg_scatter(&c, err);
  if (rc == 0) *info = f;
  rc = jmg_lg_end(&c, rc, err);
  if (rc == JMG_LG_FALL_BACK)
    rc = e->fallback->local.syevd(e->fallback, a, w, want_vectors, info, err);
  return rc;
}
