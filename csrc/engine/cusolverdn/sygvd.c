/* sygvd with cuSOLVERDn: cusolverDn<t>sygvd (<t>hegvd for complex types),
 * itype 1 (A v = λ B v), on the lower triangles; the eigenvalues straight
 * into w (device memory), the eigenvectors in place of A, B overwritten by
 * its Cholesky factor (dn.h).
 *
 * cuSOLVER has no 64-bit sygvd (cusolverDnX*): these are its 32-bit
 * routines, whose n, lda and lwork are ints. The engine's `supports`
 * refuses sygvd where N * N exceeds INT_MAX, as the same API's potri fails
 * there (potri.c); the workspace size comes back as an int of elements. */
#include <limits.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "engine/cusolverdn/dn.h"

static cusolverEigMode_t jobz(int want_vectors) {
  return want_vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
}

static cusolverStatus_t sygvd_lwork(jmg_dn_call *c, const void *b, int n,
                                    int want_vectors, const void *w,
                                    int *lwork) {
  const cusolverEigType_t it = CUSOLVER_EIG_TYPE_1;
  const cusolverEigMode_t jz = jobz(want_vectors);
  const cublasFillMode_t lo = CUBLAS_FILL_MODE_LOWER;
  switch (c->a->dtype) {
    case JMG_F32:
      return cusolverDnSsygvd_bufferSize(c->dn, it, jz, lo, n, c->a_data, n, b,
                                         n, w, lwork);
    case JMG_F64:
      return cusolverDnDsygvd_bufferSize(c->dn, it, jz, lo, n, c->a_data, n, b,
                                         n, w, lwork);
    case JMG_C64:
      return cusolverDnChegvd_bufferSize(c->dn, it, jz, lo, n, c->a_data, n, b,
                                         n, w, lwork);
    default:
      return cusolverDnZhegvd_bufferSize(c->dn, it, jz, lo, n, c->a_data, n, b,
                                         n, w, lwork);
  }
}

static cusolverStatus_t sygvd(jmg_dn_call *c, void *b, int n, int want_vectors,
                              void *w, void *work, int lwork) {
  int *info = c->cuda.d_info;
  const cusolverEigType_t it = CUSOLVER_EIG_TYPE_1;
  const cusolverEigMode_t jz = jobz(want_vectors);
  const cublasFillMode_t lo = CUBLAS_FILL_MODE_LOWER;
  switch (c->a->dtype) {
    case JMG_F32:
      return cusolverDnSsygvd(c->dn, it, jz, lo, n, c->a_data, n, b, n, w, work,
                              lwork, info);
    case JMG_F64:
      return cusolverDnDsygvd(c->dn, it, jz, lo, n, c->a_data, n, b, n, w, work,
                              lwork, info);
    case JMG_C64:
      return cusolverDnChegvd(c->dn, it, jz, lo, n, c->a_data, n, b, n, w, work,
                              lwork, info);
    default:
      return cusolverDnZhegvd(c->dn, it, jz, lo, n, c->a_data, n, b, n, w, work,
                              lwork, info);
  }
}

int jmg_dn_sygvd_fits(int64_t n) { return n >= 0 && n <= INT_MAX / (n ? n : 1); }

/* [sygvd's workspace], *lwork in elements of A's type. */
static int layout(jmg_dn_call *call, const void *b, int want_vectors,
                  const void *w, jmg_cuda_work *work, size_t *at, int *lwork,
                  jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const char *op = call->cuda.op;
  *lwork = 0;
  *at = 0;
  if (!jmg_dn_sygvd_fits(a->n))
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "cuSOLVERDn",
                         "N=%lld: N*N exceeds cusolverDn<t>sygvd's 32-bit int",
                         (long long)a->n);
  int rc = JMG_CUSOLVER_TRY(
      sygvd_lwork(call, b, (int)a->n, want_vectors, w, lwork), op, err);
  if (rc == 0 && *lwork < 0)
    rc = jmg_error_set(err, JMG_ECUSOLVER, op, "cusolverDn<t>sygvd_bufferSize",
                       "returned a negative workspace size (%d)", *lwork);
  if (rc == 0)
    *at = jmg_cuda_work_part(work, (size_t)*lwork * jmg_dtype_size(a->dtype));
  return rc;
}

int jmg_dn_sygvd_query(jmg_dn_call *call, const jmg_workspace_query *q,
                       size_t *bytes, jmg_error *err) {
  jmg_cuda_work w = {0};
  size_t at = 0;
  int lwork = 0;
  int rc = layout(call, NULL, q->want_vectors, NULL, &w, &at, &lwork, err);
  *bytes = jmg_cuda_work_alloc_bytes(&w);
  return rc;
}

int jmg_dn_sygvd(const jmg_engine *e, const jmg_dist_matrix *a,
                 const jmg_dist_matrix *b, void *w, int want_vectors, int *info,
                 jmg_error *err) {
  (void)e;
  static const char *const names[] = {"cusolverDn<t>sygvd"};
  jmg_dn_call call;
  jmg_cuda_work work = {0};
  size_t at = 0;
  int lwork = 0, h_info = 0;
  int rc = jmg_dn_begin(&call, JMG_OP_SYGVD, a, err);
  if (rc == 0 && (b->ndev != 1 || b->n != a->n || b->dtype != a->dtype))
    rc = jmg_error_set(err, JMG_EINTERNAL, "sygvd", "cuSOLVERDn",
                       "B (%d GPUs, N=%lld) is not laid out as A", b->ndev,
                       (long long)b->n);
  void *b_data = rc == 0 ? b->data[0] : NULL;
  if (rc == 0)
    rc = layout(&call, b_data, want_vectors, w, &work, &at, &lwork, err);
  if (rc == 0) rc = jmg_cuda_call_take(&call.cuda, &work, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(sygvd(&call, b_data, (int)a->n, want_vectors, w,
                                jmg_cuda_call_part(&call.cuda, at), lwork),
                          call.cuda.op, err);
  rc = jmg_cuda_call_info(&call.cuda, rc, &h_info, 1, names, err);
  jmg_trace_mark("sygvd");
  *info = h_info;
  return jmg_dn_end(&call, rc, err);
}
