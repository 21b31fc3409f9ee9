/* syevd with cuSOLVERDn: cusolverDnXsyevd on the lower triangle, the
 * eigenvalues straight into w (device memory), the eigenvectors in place of A
 * (dn.h). Its workspace is about 4 A with or without eigenvectors; where XLA's
 * allocator cannot give it, jaxmg's own tridiagonal path runs instead
 * (syevd_tridiagonal.c: one more A for eigenvectors, next to nothing for
 * eigenvalues alone). JAXMG_SYEVD picks one of the two for every call. */
#include <string.h>

#include "common/config.h"
#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "engine/cusolverdn/dn.h"

static cusolverEigMode_t jobz(int want_vectors) {
  return want_vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
}

int jmg_dn_syevd_workspace(jmg_dn_call *call, int want_vectors, void *w,
                           size_t *device_bytes, size_t *host_bytes,
                           jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  *device_bytes = *host_bytes = 0;
  return JMG_CUSOLVER_TRY(
      cusolverDnXsyevd_bufferSize(call->dn, call->params, jobz(want_vectors),
                                  CUBLAS_FILL_MODE_LOWER, a->n, t, call->a_data,
                                  a->n, rt, w, t, device_bytes, host_bytes),
      call->op, err);
}

int jmg_dn_syevd_solver(const char *op, jmg_dn_syevd_choice *choice,
                        jmg_error *err) {
  jmg_config c;
  jmg_config_read(&c);
  if (c.syevd[0] == '\0' || strcmp(c.syevd, "auto") == 0)
    *choice = JMG_DN_SYEVD_AUTO;
  else if (strcmp(c.syevd, "cusolver") == 0)
    *choice = JMG_DN_SYEVD_CUSOLVER;
  else if (strcmp(c.syevd, "tridiagonal") == 0)
    *choice = JMG_DN_SYEVD_TRIDIAGONAL;
  else
    return jmg_error_set(err, JMG_EINVAL, op, "JAXMG_SYEVD",
                         "\"%s\" is not an eigensolver: use \"auto\" (the "
                         "default), \"cusolver\" or \"tridiagonal\"",
                         c.syevd);
  return 0;
}

/* The tridiagonal path on a call whose workspace is not taken yet. */
static int run_tridiagonal(jmg_dn_call *call, void *w, int want_vectors,
                           int *info, jmg_error *err) {
  int rc = jmg_dn_take_workspace(
      call,
      jmg_dn_syevd_tridiagonal_bytes(call->a->n, call->a->dtype, want_vectors),
      0, err);
  jmg_trace_mark("workspace");
  if (rc == 0) rc = jmg_dn_syevd_tridiagonal(call, w, want_vectors, info, err);
  /* Its last copies are on the stream: done when this returns. */
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamSynchronize(call->stream), call->op, err);
  if (rc == 0) call->pending = 0;
  return rc;
}

/* Whether bytes fit beside A in the GPU's whole memory (where the GPU's
 * size cannot be had: yes, let the allocator say). */
static int beside_a_on_the_gpu(const jmg_dist_matrix *a, size_t bytes) {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError(); /* not sticky: clear it */
    return 1;
  }
  const size_t a_bytes = (size_t)a->n * (size_t)a->n * jmg_dtype_size(a->dtype);
  return a_bytes <= total_b && bytes <= total_b - a_bytes;
}

int jmg_dn_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err) {
  (void)e;
  const char *op = "syevd";
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  static const char *const names[] = {"cusolverDnXsyevd"};
  jmg_dn_call call;
  jmg_dn_syevd_choice choice = JMG_DN_SYEVD_AUTO;
  size_t dev_bytes = 0, host_bytes = 0;
  int h_info = 0;
  *info = 0;
  int rc = jmg_dn_syevd_solver(op, &choice, err);
  if (rc != 0) return rc;
  rc = jmg_dn_begin_call(&call, op, a, err);
  int tridiagonal = choice == JMG_DN_SYEVD_TRIDIAGONAL;
  if (rc == 0 && !tridiagonal)
    rc = jmg_dn_syevd_workspace(&call, want_vectors, w, &dev_bytes, &host_bytes,
                                err);
  /* A workspace that the GPU cannot hold beside A is not asked of XLA's
   * allocator (whose refusal of 176 GiB took 10 s on an H200, with a
   * warning). */
  if (rc == 0 && choice == JMG_DN_SYEVD_AUTO &&
      !beside_a_on_the_gpu(a, dev_bytes)) {
    jmg_trace_mark("cusolverDnXsyevd's workspace exceeds the GPU");
    tridiagonal = 1;
  }
  if (rc == 0 && !tridiagonal) {
    rc = jmg_dn_take_workspace(&call, dev_bytes, host_bytes, err);
    /* cuSOLVER's device workspace does not fit beside A: the path that
     * needs less (nothing was written; a host workspace that malloc
     * refused stays the error). */
    if (rc == -(int)JMG_ENOMEM && choice == JMG_DN_SYEVD_AUTO &&
        call.work == NULL) {
      jmg_trace_mark("no room for cusolverDnXsyevd's workspace");
      tridiagonal = 1;
      rc = 0;
    }
  }
  if (rc == 0 && tridiagonal) {
    rc = run_tridiagonal(&call, w, want_vectors, info, err);
  } else if (rc == 0) {
    jmg_trace_mark("workspace");
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXsyevd(call.dn, call.params, jobz(want_vectors),
                         CUBLAS_FILL_MODE_LOWER, a->n, t, call.a_data, a->n, rt,
                         w, t, call.work, call.work_bytes, call.host_work,
                         call.host_bytes, call.d_info),
        op, err);
    if (rc == 0) rc = jmg_dn_read_info(&call, &h_info, 1, names, err);
    jmg_trace_mark("syevd");
    *info = h_info;
  }
  jmg_dn_end_call(&call);
  return rc;
}
