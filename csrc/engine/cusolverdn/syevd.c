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

/* cusolverDnXsyevd's workspace, for w (NULL in a query): its device bytes
 * as one part of work, its host bytes. */
static int xsyevd_layout(jmg_dn_call *call, int want_vectors, void *w,
                         jmg_cuda_work *work, size_t *at, size_t *bytes,
                         jmg_error *err) {
  const jmg_dist_matrix *a = call->a;
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  *bytes = 0;
  int rc = JMG_CUSOLVER_TRY(
      cusolverDnXsyevd_bufferSize(call->dn, call->params, jobz(want_vectors),
                                  CUBLAS_FILL_MODE_LOWER, a->n, t, call->a_data,
                                  a->n, rt, w, t, bytes, &work->host_bytes),
      call->cuda.op, err);
  *at = jmg_cuda_work_part(work, *bytes);
  return rc;
}

/* The solver JAXMG_SYEVD names (AUTO where unset or "auto"). A malformed
 * value is JMG_EINVAL naming the variable. */
static int solver_of_config(const char *op, jmg_dn_syevd_choice *choice,
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

/* The workspace query's answer: cusolverDnXsyevd's, which runs where it
 * fits (JAXMG_SYEVD unset), or the tridiagonal path's where it is asked
 * for (q->syevd_solver, else JAXMG_SYEVD). */
int jmg_dn_syevd_query(jmg_dn_call *call, const jmg_workspace_query *q,
                       size_t *bytes, jmg_error *err) {
  jmg_dn_syevd_choice choice = (jmg_dn_syevd_choice)q->syevd_solver;
  jmg_cuda_work w = {0};
  size_t at = 0, xsyevd = 0;
  int rc = 0;
  if (choice == JMG_DN_SYEVD_AUTO)
    rc = solver_of_config(call->cuda.op, &choice, err);
  if (rc == 0 && choice == JMG_DN_SYEVD_TRIDIAGONAL)
    jmg_dn_syevd_tridiagonal_workspace(call->a->n, call->a->dtype,
                                       q->want_vectors, &w);
  else if (rc == 0)
    rc = xsyevd_layout(call, q->want_vectors, NULL, &w, &at, &xsyevd, err);
  *bytes = jmg_cuda_work_alloc_bytes(&w);
  return rc;
}

/* The tridiagonal path on a call whose workspace is not taken yet. */
static int run_tridiagonal(jmg_dn_call *call, void *w, int want_vectors,
                           int *info, jmg_error *err) {
  jmg_cuda_work work = {0};
  jmg_dn_syevd_tridiagonal_workspace(call->a->n, call->a->dtype, want_vectors,
                                     &work);
  int rc = jmg_cuda_call_take(&call->cuda, &work, err);
  if (rc == 0) rc = jmg_dn_syevd_tridiagonal(call, w, want_vectors, info, err);
  /* Its last copies are on the stream: done when this returns. */
  if (rc == 0) rc = jmg_cuda_call_sync(&call->cuda, err);
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

/* cusolverDnXsyevd's workspace taken for the call, where the choice lets
 * it: *tridiagonal 1 where AUTO finds it too large for the GPU, or XLA's
 * allocator refuses its device part (nothing was written; a host
 * workspace that malloc refused stays the error). */
static int take_xsyevd(jmg_dn_call *call, jmg_dn_syevd_choice choice,
                       int want_vectors, void *w, size_t *at, size_t *bytes,
                       int *tridiagonal, jmg_error *err) {
  jmg_cuda_work work = {0};
  int rc = xsyevd_layout(call, want_vectors, w, &work, at, bytes, err);
  /* A workspace that the GPU cannot hold beside A is not asked of XLA's
   * allocator, which takes seconds to refuse one, with a warning
   * (bench/results/2026-11-26-s14-h200-syevd-largest). */
  if (rc == 0 && choice == JMG_DN_SYEVD_AUTO &&
      !beside_a_on_the_gpu(call->a, *bytes)) {
    jmg_trace_mark("cusolverDnXsyevd's workspace exceeds the GPU");
    *tridiagonal = 1;
    return 0;
  }
  if (rc == 0) rc = jmg_cuda_call_take(&call->cuda, &work, err);
  if (rc == -(int)JMG_ENOMEM && choice == JMG_DN_SYEVD_AUTO &&
      call->cuda.work == NULL) {
    jmg_trace_mark("no room for cusolverDnXsyevd's workspace");
    jmg_error_clear(err);
    *tridiagonal = 1;
    return 0;
  }
  return rc;
}

int jmg_dn_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err) {
  (void)e;
  static const char *const names[] = {"cusolverDnXsyevd"};
  const cudaDataType t = jmg_cuda_data_type(a->dtype),
                     rt = jmg_cuda_real_data_type(a->dtype);
  jmg_dn_call call;
  jmg_dn_syevd_choice choice = JMG_DN_SYEVD_AUTO;
  size_t at = 0, bytes = 0;
  int h_info = 0;
  *info = 0;
  int rc = solver_of_config("syevd", &choice, err);
  if (rc != 0) return rc;
  rc = jmg_dn_begin(&call, JMG_OP_SYEVD, a, err);
  const jmg_cuda_call *c = &call.cuda;
  int tridiagonal = choice == JMG_DN_SYEVD_TRIDIAGONAL;
  if (rc == 0 && !tridiagonal)
    rc = take_xsyevd(&call, choice, want_vectors, w, &at, &bytes, &tridiagonal,
                     err);
  if (rc == 0 && tridiagonal)
    return jmg_dn_end(&call, run_tridiagonal(&call, w, want_vectors, info, err),
                      err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverDnXsyevd(call.dn, call.params, jobz(want_vectors),
                         CUBLAS_FILL_MODE_LOWER, a->n, t, call.a_data, a->n, rt,
                         w, t, jmg_cuda_call_part(c, at), bytes, c->host_work,
                         c->host_bytes, c->d_info),
        c->op, err);
  rc = jmg_cuda_call_info(&call.cuda, rc, &h_info, 1, names, err);
  jmg_trace_mark("syevd");
  *info = h_info;
  return jmg_dn_end(&call, rc, err);
}
