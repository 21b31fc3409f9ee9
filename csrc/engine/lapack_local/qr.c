/* qr on lapack-local: rank 0 gathers every rank's columns of Aᵀ (the
 * contiguous layout: rank p's part is columns p * cols ..., engine.h's
 * local qr) over the communicator, runs the LAPACK engine's qr on them
 * (jmg_lapack_qr_full), and sends every rank its columns of Qᵀ and of Rᵀ
 * back. The steps of local.h, without ll_begin's square view: the parts
 * are whole columns, packed (ld N), and travel as they lie. */
#include <stdlib.h>
#include <string.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack_local/local.h"

/* Rank 0: every other rank's part from (to_root) or to (!to_root) its slot
 * of whole (slot p at p * bytes); the others: their own part to or from
 * rank 0. */
static int exchange(const jmg_local_matrix *a, const char *op, void *own,
                    char *whole, size_t bytes, int to_root, jmg_error *err) {
  const jmg_comm_ops *ops = a->comm_ops;
  int rc = ops->group_begin(op, err);
  if (rc == 0 && a->rank != 0)
    rc = to_root ? ops->send(a->comm, own, bytes, 0, a->device_ctx, op, err)
                 : ops->recv(a->comm, own, bytes, 0, a->device_ctx, op, err);
  for (int p = 1; rc == 0 && a->rank == 0 && p < a->ranks; ++p)
    rc = to_root ? ops->recv(a->comm, whole + (size_t)p * bytes, bytes, p,
                             a->device_ctx, op, err)
                 : ops->send(a->comm, whole + (size_t)p * bytes, bytes, p,
                             a->device_ctx, op, err);
  jmg_error ignored;
  int erc = ops->group_end(op, rc == 0 ? err : &ignored);
  return rc != 0 ? rc : erc;
}

int jmg_ll_qr(const jmg_engine *e, const jmg_local_matrix *a, void *rt,
              int64_t m, int64_t rr, int *info, jmg_error *err) {
  (void)e;
  const char *op = "qr";
  ll_call c;
  memset(&c, 0, sizeof c);
  c.op = op;
  c.a = a;
  c.elem = jmg_dtype_size(a->dtype);
  const int64_t n = a->n, rcols = rr * a->ranks;
  const size_t part = (size_t)n * (size_t)a->cols * c.elem;
  const size_t rpart = (size_t)n * (size_t)rr * c.elem;
  char *whole = NULL, *rwhole = NULL;
  int rc = 0;
  if (a->ld != n || a->rows != n || (int64_t)a->ranks * a->cols != m)
    rc = jmg_error_set(err, JMG_EINTERNAL, op, "lapack-local",
                       "rank %d holds %lld x %lld (ld %lld) of a %lld x %lld "
                       "Aᵀ over %d ranks: not its contiguous part",
                       a->rank, (long long)a->rows, (long long)a->cols,
                       (long long)a->ld, (long long)n, (long long)m, a->ranks);
  if (rc == 0 && a->rank == 0) {
    whole = malloc(part * (size_t)a->ranks + 1);
    rwhole = malloc(rpart * (size_t)a->ranks + 1);
    if (whole == NULL || rwhole == NULL)
      rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "rank 0 cannot allocate a %lld x %lld matrix and its "
                         "R to gather them",
                         (long long)m, (long long)n);
  }
  /* Everyone ready before the first collective (local.h). */
  int failed = rc != 0;
  jmg_error ignored;
  int arc = a->ranks > 1 ? a->comm_ops->max_int(a->comm, &failed, a->device_ctx,
                                                op, rc != 0 ? &ignored : err)
                         : 0;
  if (rc == 0 && arc != 0) rc = arc;
  if (rc == 0 && failed)
    rc = jmg_error_set(err, JMG_EPEER, op, "lapack-local",
                       "another rank failed before the gather");
  if (rc == 0 && a->rank == 0) memcpy(whole, a->data, part);
  if (rc == 0) rc = exchange(a, op, a->data, whole, part, 1, err);
  int f = 0;
  if (rc == 0) {
    int lrc = 0;
    if (a->rank == 0)
      lrc = jmg_lapack_qr_full(a->dtype, m, n, whole, rwhole, rcols, &f, err);
    rc = ll_outcome(&c, lrc, &f, err);
  }
  if (rc == 0 && f == 0) rc = exchange(a, op, a->data, whole, part, 0, err);
  if (rc == 0 && f == 0) rc = exchange(a, op, rt, rwhole, rpart, 0, err);
  if (rc == 0 && f == 0 && a->rank == 0) {
    memcpy(a->data, whole, part);
    memcpy(rt, rwhole, rpart);
  }
  if (rc == 0) *info = f;
  free(rwhole);
  free(whole);
  return rc;
}
