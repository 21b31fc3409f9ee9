/* sygvd on the local model's one-device path (local_gather.h): A and B
 * gathered onto rank 0, the on_rank0 engine's sygvd there, the eigenvalues
 * broadcast to every rank and, with vectors, the eigenvectors' parts
 * scattered back in A's layout (column j the j-th eigenvector). B's parts
 * are left as they were (B is workspace). */
#include "engine/local_gather/local_gather.h"

/* Rank 0's sygvd on the two gathered matrices. */
static int run(const jmg_engine *one, jmg_lg_call *ca, jmg_lg_call *cb,
               void *w, int want_vectors, int *f, jmg_error *err) {
  return one->leader.sygvd(one, jmg_lg_square_view(ca), jmg_lg_square_view(cb),
                           w, want_vectors, f, err);
}

int jmg_lg_sygvd(const jmg_engine *e, const jmg_local_matrix *a,
                 const jmg_local_matrix *b, void *w, int want_vectors,
                 int *info, jmg_error *err) {
  jmg_lg_call ca, cb;
  int f = 0, began_a = 0;
  int rc = jmg_lg_begin(&cb, e, JMG_OP_SYGVD, b, err);
  if (rc == 0) rc = jmg_lg_gather(&cb, err);
  /* Both steps agree (begin) or are collective on every rank: rc is the
   * same everywhere here. */
  if (rc == 0) {
    rc = jmg_lg_begin(&ca, e, JMG_OP_SYGVD, a, err);
    began_a = 1;
  }
  if (rc == 0) rc = jmg_lg_gather(&ca, err);
  if (rc == 0) {
    int orc = 0;
    if (a->rank == 0) orc = run(e->on_rank0, &ca, &cb, w, want_vectors, &f, err);
    rc = jmg_lg_outcome(&ca, orc, &f, err);
  }
  /* f != 0: no convergence or B not positive definite; the ops layer
   * fills NaN. */
  if (rc == 0 && f == 0)
    rc = jmg_lg_bcast(&ca, w, (size_t)a->n * jmg_dtype_real_size(a->dtype), err);
  if (rc == 0 && f == 0 && want_vectors) rc = jmg_lg_scatter(&ca, err);
  if (rc == 0) *info = f;
  if (began_a) rc = jmg_lg_end(&ca, rc, err);
  rc = jmg_lg_end(&cb, rc, err);
  if (rc == JMG_LG_FALL_BACK)
    rc = e->fallback->local.sygvd(e->fallback, a, b, w, want_vectors, info,
                                  err);
  return rc;
}
