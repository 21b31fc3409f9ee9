/* qr on the gathered A (gather.h): A's shards gathered in the contiguous
 * layout (qr's, engine.h: M = Aᵀ, n x m) onto participant 0, cuSOLVERDn's
 * qr there (Qᵀ in place of the gathered copy, Rᵀ into a buffer of R's
 * shards' columns on participant 0), then Qᵀ scattered back into A's
 * shards and Rᵀ into R's, device d its columns (contiguous slices).
 *
 * No fall back. cuSOLVERMg has no QR, so where the gathered copy (A, and
 * cuSOLVERDn's transposed copy of it) does not fit on participant 0's GPU
 * no engine of one node runs the call: that is an error that says so. */
#include "common/trace.h"
#include "engine/gather/gather.h"

int jmg_gather_qr(const jmg_engine *e, const jmg_dist_matrix *a,
                  const jmg_dist_matrix *rt, int *info, jmg_error *err) {
  (void)e;
  const jmg_engine *one = JMG_GATHER_ONE;
  const int64_t cols = (int64_t)rt->ndev * rt->local_cols;
  jmg_gather_call c;
  void *rdata[1];
  jmg_dist_matrix rt1;
  *info = 0;
  int rc = jmg_gather_begin_in(&c, JMG_OP_QR, a, JMG_GATHER_TO_CONTIGUOUS, err);
  if (rc == 0) rc = jmg_gather_output(&c, rt->n, cols, rdata, &rt1, err);
  if (rc == 0) rc = one->leader.qr(one, &c.one, &rt1, info, err);
  if (rc == 0 && *info == 0)
    rc = jmg_gather_scatter(&c, JMG_GATHER_TO_CONTIGUOUS, err);
  if (rc == 0 && *info == 0) rc = jmg_gather_scatter_to(&c, rt, &rt1, err);
  jmg_trace_mark("scatter");
  rc = jmg_gather_end(&c, rc, err);
  return jmg_gather_no_room(
      rc, "qr", a, (int64_t)a->ndev * a->local_cols, a->n, "its QR",
      "no multi-GPU QR engine runs within a node yet (cuSOLVERMg has no QR)",
      err);
}
