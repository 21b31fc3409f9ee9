/* qr on the gathered A (gather.h): A's shards gathered in the contiguous
 * layout (qr's, engine.h: M = Aᵀ, n x m) onto participant 0, cuSOLVERDn's
 * qr there (Qᵀ in place of the gathered copy, Rᵀ into a buffer of R's
 * shards' columns on participant 0), then Qᵀ scattered back into A's
 * shards and Rᵀ into R's, device d its columns (contiguous slices).
 *
 * No fall back. cuSOLVERMg has no QR, so where the gathered copy (A, and
 * cuSOLVERDn's transposed copy of it) does not fit on participant 0's GPU
 * no engine of one node runs the call: that is an error that says so. */
#include <stdio.h>

#include "common/trace.h"
#include "engine/gather/gather.h"

int jmg_gather_qr(const jmg_engine *e, const jmg_dist_matrix *a,
                  const jmg_dist_matrix *rt, int *info, jmg_error *err) {
  (void)e;
  const char *op = "qr";
  const jmg_engine *one = JMG_GATHER_ONE;
  const int64_t cols = (int64_t)rt->ndev * rt->local_cols;
  const size_t rbytes = (size_t)rt->n * (size_t)cols * jmg_dtype_size(a->dtype);
  jmg_gather_call c;
  void *rbuf = NULL, *rdata[1];
  jmg_dist_matrix rt1;
  *info = 0;
  int rc = jmg_gather_begin_in(&c, op, a, JMG_GATHER_TO_CONTIGUOUS, err);
  if (rc == 0) {
    rc = c.mem->alloc(&c.group, 0, rbytes, &rbuf, err);
    if (rc != 0) rbuf = NULL;
  }
  if (rc == 0) {
    rdata[0] = rbuf;
    rt1 = c.one;
    rt1.n = rt->n;
    rt1.local_cols = cols;
    rt1.tile = cols;
    rt1.data = rdata;
    rc = one->leader.qr(one, &c.one, &rt1, info, err);
  }
  if (rc == 0 && *info == 0)
    rc = jmg_gather_scatter(&c, JMG_GATHER_TO_CONTIGUOUS, err);
  const size_t slice =
      (size_t)rt->n * (size_t)rt->local_cols * jmg_dtype_size(a->dtype);
  for (int d = 0; rc == 0 && *info == 0 && d < rt->ndev; ++d)
    rc = c.mem->copy(&c.group, rt->data[d], d,
                     (const char *)rbuf + (size_t)d * slice, 0, slice, err);
  jmg_trace_mark("scatter");
  /* Wait for the copies before their sources go. */
  if (rc == 0) rc = c.mem->sync(&c.group, err);
  if (rbuf != NULL) c.mem->release(&c.group, 0, rbuf, rbytes);
  jmg_gather_end(&c);
  if (rc == -(int)JMG_ENOMEM) {
    char what[JMG_ERROR_MSG_LEN];
    snprintf(what, sizeof what, "%s", err->msg);
    rc = jmg_error_set(err, JMG_ENOMEM, op, "cusolverdn-gather",
                       "the gathered %lld x %lld matrix and its QR do not "
                       "fit on the first GPU of the %d (%s); no multi-GPU QR "
                       "engine runs within a node yet (cuSOLVERMg has no QR)",
                       (long long)((int64_t)a->ndev * a->local_cols),
                       (long long)a->n, a->ndev, what);
  }
  return rc;
}
