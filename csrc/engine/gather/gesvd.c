/* gesvd on the gathered A (gather.h): A's shards gathered in the contiguous
 * layout (gesvd's, engine.h) onto participant 0, cuSOLVERDn's gesvd there
 * (the singular values straight into s, on participant 0), U and Vᴴ made
 * on participant 0 and copied to the shards, device d its columns.
 *
 * No fall back. cuSOLVERMg has no SVD, so where the gathered copy and its
 * singular vectors do not fit on participant 0's GPU no engine of one node
 * runs the call: that is an error that says so (cuSOLVERMp 0.9's gesvd is
 * the only multi-GPU SVD, engine/cusolvermp/). */
#include "common/trace.h"
#include "engine/gather/gather.h"

int jmg_gather_gesvd(const jmg_engine *e, const jmg_dist_matrix *a, void *s,
                     const jmg_dist_matrix *u, const jmg_dist_matrix *vt,
                     int full, int *info, jmg_error *err) {
  (void)e;
  const jmg_engine *one = JMG_GATHER_ONE;
  const int64_t rows = a->n, cols = (int64_t)a->ndev * a->local_cols;
  jmg_gather_call c;
  void *udata[1], *vdata[1];
  jmg_dist_matrix u1, vt1;
  *info = 0;
  int rc =
      jmg_gather_begin_in(&c, JMG_OP_GESVD, a, JMG_GATHER_TO_CONTIGUOUS, err);
  if (rc == 0 && u != NULL)
    rc = jmg_gather_output(&c, u->n, (int64_t)u->ndev * u->local_cols, udata,
                           &u1, err);
  if (rc == 0 && vt != NULL)
    rc = jmg_gather_output(&c, vt->n, cols, vdata, &vt1, err);
  if (rc == 0)
    rc = one->leader.gesvd(one, &c.one, s, u != NULL ? &u1 : NULL,
                           vt != NULL ? &vt1 : NULL, full, info, err);
  if (rc == 0 && *info == 0 && u != NULL)
    rc = jmg_gather_scatter_to(&c, u, &u1, err);
  if (rc == 0 && *info == 0 && vt != NULL)
    rc = jmg_gather_scatter_to(&c, vt, &vt1, err);
  jmg_trace_mark("scatter");
  rc = jmg_gather_end(&c, rc, err);
  return jmg_gather_no_room(
      rc, "gesvd", a, rows, cols, "its singular vectors",
      "no multi-GPU SVD engine is available within a node without "
      "cuSOLVERMp (cuSOLVERMg has no SVD; cuSOLVERMp's gesvd needs version "
      "0.9 or later)",
      err);
}
