/* The cuSOLVERDn engine's workspace query (engine.h's `workspace`, dn.h):
 * what a call of the problem would take from XLA's allocator, asked of
 * cuSOLVER through the very functions the routines size their workspaces
 * with, on a handle of its own on the current GPU, with no matrix (the
 * queries read no data). potri adds the Hermitian fill's scratch; qr's is
 * for the problem's M x N A (its m). gesvd's workspace depends on more than
 * the problem (its routine by size, the vectors asked, a wide matrix's
 * transpose) and is not asked ahead. */
#include <stdio.h>
#include <string.h>

#include "cuda/check.h"
#include "engine/cuda_hermitian.h"
#include "engine/cusolverdn/dn.h"

static int sizes(jmg_dn_call *call, const jmg_workspace_query *q, size_t *bytes,
                 jmg_error *err) {
  size_t dev = 0, host = 0, piv_at = 0;
  int lwork = 0, rc = 0;
  const char *op = call->op;
  if (strcmp(op, "potrs") == 0) {
    rc = jmg_dn_potrf_workspace(call, &dev, &host, err);
  } else if (strcmp(op, "potri") == 0) {
    rc = jmg_dn_potri_workspace(call, &dev, &host, &lwork, err);
  } else if (strcmp(op, "syevd") == 0) {
    /* cusolverDnXsyevd's, which runs where it fits (JAXMG_SYEVD unset);
     * the tridiagonal path's where it is asked for. */
    jmg_dn_syevd_choice choice = (jmg_dn_syevd_choice)q->syevd_solver;
    if (q->syevd_solver == JMG_DN_SYEVD_AUTO)
      rc = jmg_dn_syevd_solver(op, &choice, err);
    if (rc == 0 && choice == JMG_DN_SYEVD_TRIDIAGONAL) {
      *bytes = jmg_dn_alloc_bytes(jmg_dn_syevd_tridiagonal_bytes(
          call->a->n, call->a->dtype, q->want_vectors));
      return 0;
    }
    if (rc == 0)
      rc = jmg_dn_syevd_workspace(call, q->want_vectors, NULL, &dev, &host,
                                  err);
  } else if (strcmp(op, "sygvd") == 0) {
    rc = jmg_dn_sygvd_workspace(call, NULL, q->want_vectors, NULL, &dev,
                                &lwork, err);
  } else if (strcmp(op, "lu_solve") == 0) {
    rc = jmg_dn_lu_workspace(call, &dev, &host, &piv_at, err);
  } else if (strcmp(op, "qr") == 0) {
    rc = jmg_dn_qr_workspace(call, &dev, &host, err);
  } else {
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "cuSOLVERDn",
                         "the workspace of %s is not asked ahead of a call "
                         "(JAXMG_TRACE=1 prints what a call took)",
                         op);
  }
  if (rc != 0) return rc;
  *bytes = jmg_dn_alloc_bytes(dev);
  if (strcmp(op, "potri") == 0)
    *bytes += jmg_cuda_hermitian_fill_bytes(call->a);
  return 0;
}

int jmg_dn_workspace(const jmg_engine *e, const jmg_problem *p,
                     const jmg_workspace_query *q, size_t *bytes,
                     jmg_error *err) {
  (void)e;
  void *none = NULL;
  /* The matrix as the routine gets it: qr's is Aᵀ, N x M (engine.h). */
  const jmg_dist_matrix a = {.ndev = 1,
                             .n = p->n,
                             .tile = p->tile,
                             .local_cols = strcmp(p->op, "qr") == 0
                                               ? jmg_problem_rows(p)
                                               : p->n,
                             .dtype = p->dtype,
                             .data = &none,
                             .device_ctx = &none};
  jmg_dn_call call;
  memset(&call, 0, sizeof call);
  call.op = p->op;
  call.a = &a;
  int rc = JMG_CUSOLVER_TRY(cusolverDnCreate(&call.dn), p->op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnCreateParams(&call.params), p->op, err);
  if (rc == 0) rc = sizes(&call, q, bytes, err);
  /* Destroying what was made cannot fail usefully; its status is checked
   * and reported only where the query itself succeeded. */
  if (call.params != NULL) {
    jmg_error ignored;
    int d = JMG_CUSOLVER_TRY(cusolverDnDestroyParams(call.params), p->op,
                             rc == 0 ? err : &ignored);
    if (rc == 0) rc = d;
  }
  if (call.dn != NULL) {
    jmg_error ignored;
    int d = JMG_CUSOLVER_TRY(cusolverDnDestroy(call.dn), p->op,
                             rc == 0 ? err : &ignored);
    if (rc == 0) rc = d;
  }
  return rc;
}
