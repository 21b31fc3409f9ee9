/* gesvd on the gathered A (gather.h): A's shards gathered in the contiguous
 * layout (gesvd's, engine.h) onto participant 0, cuSOLVERDn's gesvd there
 * (the singular values straight into s, on participant 0), U and Vᴴ made
 * on participant 0 and copied to the shards, device d its columns.
 *
 * No fall back. cuSOLVERMg has no SVD, so where the gathered copy and its
 * singular vectors do not fit on participant 0's GPU no engine of one node
 * runs the call: that is an error that says so (cuSOLVERMp 0.9's gesvd is
 * the only multi-GPU SVD, engine/cusolvermp/). */
#include <stdio.h>

#include "common/trace.h"
#include "engine/gather/gather.h"

/* A one-GPU buffer of rows x cols on participant 0, as a jmg_dist_matrix
 * of the gathered call. */
static int take_output(jmg_gather_call *c, int64_t rows, int64_t cols,
                       void **buf, void **data, jmg_dist_matrix *out,
                       jmg_error *err) {
  const size_t bytes = (size_t)rows * (size_t)cols * jmg_dtype_size(c->a->dtype);
  int rc = c->mem->alloc(&c->group, 0, bytes, buf, err);
  if (rc != 0) {
    *buf = NULL;
    return rc;
  }
  data[0] = *buf;
  *out = c->one;
  out->n = rows;
  out->local_cols = cols;
  out->tile = cols;
  out->data = data;
  return 0;
}

/* Copies the one-GPU result buf (x->n rows, all of x's columns) into x's
 * shards, device d its columns d*local_cols ... (contiguous slices). */
static int scatter(jmg_gather_call *c, const jmg_dist_matrix *x,
                   const void *buf, jmg_error *err) {
  const size_t slice =
      (size_t)x->n * (size_t)x->local_cols * jmg_dtype_size(x->dtype);
  int rc = 0;
  for (int d = 0; rc == 0 && d < x->ndev; ++d)
    rc = c->mem->copy(&c->group, x->data[d], d,
                      (const char *)buf + (size_t)d * slice, 0, slice, err);
  return rc;
}

int jmg_gather_gesvd(const jmg_engine *e, const jmg_dist_matrix *a, void *s,
                     const jmg_dist_matrix *u, const jmg_dist_matrix *vt,
                     int full, int *info, jmg_error *err) {
  (void)e;
  const char *op = "gesvd";
  const jmg_engine *one = JMG_GATHER_ONE;
  const int64_t rows = a->n, cols = (int64_t)a->ndev * a->local_cols;
  jmg_gather_call c;
  void *ubuf = NULL, *vbuf = NULL, *udata[1], *vdata[1];
  jmg_dist_matrix u1, vt1;
  size_t ubytes = 0, vbytes = 0;
  *info = 0;
  int rc = jmg_gather_begin_in(&c, op, a, JMG_GATHER_TO_CONTIGUOUS, err);
  if (rc == 0 && u != NULL) {
    ubytes = (size_t)u->n * (size_t)u->ndev * (size_t)u->local_cols *
             jmg_dtype_size(a->dtype);
    rc = take_output(&c, u->n, (int64_t)u->ndev * u->local_cols, &ubuf, udata,
                     &u1, err);
  }
  if (rc == 0 && vt != NULL) {
    vbytes = (size_t)vt->n * (size_t)cols * jmg_dtype_size(a->dtype);
    rc = take_output(&c, vt->n, cols, &vbuf, vdata, &vt1, err);
  }
  if (rc == 0)
    rc = one->leader.gesvd(one, &c.one, s, u != NULL ? &u1 : NULL,
                           vt != NULL ? &vt1 : NULL, full, info, err);
  if (rc == 0 && *info == 0 && u != NULL) rc = scatter(&c, u, ubuf, err);
  if (rc == 0 && *info == 0 && vt != NULL) rc = scatter(&c, vt, vbuf, err);
  jmg_trace_mark("scatter");
  /* Wait for the copies before their sources go. */
  if (rc == 0) rc = c.mem->sync(&c.group, err);
  if (ubuf != NULL) c.mem->release(&c.group, 0, ubuf, ubytes);
  if (vbuf != NULL) c.mem->release(&c.group, 0, vbuf, vbytes);
  jmg_gather_end(&c);
  if (rc == -(int)JMG_ENOMEM) {
    char what[JMG_ERROR_MSG_LEN];
    snprintf(what, sizeof what, "%s", err->msg);
    rc = jmg_error_set(err, JMG_ENOMEM, op, "cusolverdn-gather",
                       "the gathered %lld x %lld matrix and its singular "
                       "vectors do not fit on the first GPU of the %d (%s); "
                       "no multi-GPU SVD engine is available within a node "
                       "without cuSOLVERMp (cuSOLVERMg has no SVD; "
                       "cuSOLVERMp's gesvd needs version 0.9 or later)",
                       (long long)rows, (long long)cols, a->ndev, what);
  }
  return rc;
}
