/* potri with cuSOLVERDn: cusolverDnXpotrf, then cusolverDn<t>potri (the
 * inverse from the factor, lower triangle; the 64-bit API has no potri, so
 * N must fit an int: the table's supports checks it), then the Hermitian
 * fill of the upper triangle (engine/cuda_hermitian.h) once the infos say both
 * succeeded (dn.h). One GPU: the contiguous layout the contract wants is
 * the matrix as it lies. */
#include <limits.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cuda_hermitian.h"
#include "engine/cusolverdn/dn.h"

/* cusolverDn<t>potri's workspace, in elements of the matrix's type. */
static cusolverStatus_t potri_lwork(jmg_dn_call *c, int n, int *lwork) {
  const cublasFillMode_t lo = CUBLAS_FILL_MODE_LOWER;
  switch (c->a->dtype) {
    case JMG_F32:
      return cusolverDnSpotri_bufferSize(c->dn, lo, n, c->a_data, n, lwork);
    case JMG_F64:
      return cusolverDnDpotri_bufferSize(c->dn, lo, n, c->a_data, n, lwork);
    case JMG_C64:
      return cusolverDnCpotri_bufferSize(c->dn, lo, n, c->a_data, n, lwork);
    default:
      return cusolverDnZpotri_bufferSize(c->dn, lo, n, c->a_data, n, lwork);
  }
}

static cusolverStatus_t potri(jmg_dn_call *c, int n, int lwork, int *info) {
  const cublasFillMode_t lo = CUBLAS_FILL_MODE_LOWER;
  switch (c->a->dtype) {
    case JMG_F32:
      return cusolverDnSpotri(c->dn, lo, n, c->a_data, n, c->work, lwork, info);
    case JMG_F64:
      return cusolverDnDpotri(c->dn, lo, n, c->a_data, n, c->work, lwork, info);
    case JMG_C64:
      return cusolverDnCpotri(c->dn, lo, n, c->a_data, n, c->work, lwork, info);
    default:
      return cusolverDnZpotri(c->dn, lo, n, c->a_data, n, c->work, lwork, info);
  }
}

int jmg_dn_potri_workspace(jmg_dn_call *call, size_t *device_bytes,
                           size_t *host_bytes, int *lwork, jmg_error *err) {
  if (call->a->n > INT_MAX)
    return jmg_error_set(err, JMG_EUNSUPPORTED, call->op, "cusolverDn<t>potri",
                         "N=%lld exceeds its 32-bit int",
                         (long long)call->a->n);
  int rc = jmg_dn_potrf_workspace(call, device_bytes, host_bytes, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(potri_lwork(call, (int)call->a->n, lwork), call->op,
                          err);
  const size_t potri_bytes = (size_t)*lwork * jmg_dtype_size(call->a->dtype);
  if (potri_bytes > *device_bytes) *device_bytes = potri_bytes;
  return rc;
}

int jmg_dn_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                 jmg_error *err) {
  (void)e;
  const char *op = "potri";
  static const char *const names[] = {"cusolverDnXpotrf", "cusolverDn<t>potri"};
  jmg_dn_call call;
  size_t dev_bytes = 0, host_bytes = 0;
  int lwork = 0;
  int h_info[2] = {0, 0};
  int rc = jmg_dn_begin_call(&call, op, a, err);
  const int n = (int)a->n; /* jmg_dn_potri_workspace checks that it fits */
  if (rc == 0)
    rc = jmg_dn_potri_workspace(&call, &dev_bytes, &host_bytes, &lwork, err);
  if (rc == 0) rc = jmg_dn_take_workspace(&call, dev_bytes, host_bytes, err);
  jmg_trace_mark("workspace");
  if (rc == 0) rc = jmg_dn_potrf(&call, 0, err);
  /* On a factor that failed potri computes garbage, harmlessly: the ops
   * layer replaces A by NaN on info != 0. Running it saves a wait. */
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(potri(&call, n, lwork, call.d_info + 1), op, err);
  if (rc == 0) rc = jmg_dn_read_info(&call, h_info, 2, names, err);
  jmg_trace_mark("potrf+potri");
  *info = h_info[0] != 0 ? h_info[0] : h_info[1];
  if (rc == 0 && *info == 0) {
    rc = jmg_cuda_hermitian_fill(a, &call.h->blas[0], err);
    jmg_trace_mark("fill");
    /* The fill takes its scratch after A holds the inverse: a lack of
     * memory then is not the JMG_ENOMEM of the contract (nothing written),
     * on which the ops layer would call potri again, on the inverse. */
    if (rc == -(int)JMG_ENOMEM) {
      err->code = JMG_EINTERNAL;
      rc = -(int)JMG_EINTERNAL;
    }
  }
  jmg_dn_end_call(&call);
  return rc;
}
