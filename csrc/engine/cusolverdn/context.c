/* The cuSOLVERDn engine's call frame and its table with its limits (dn.h). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "engine/cusolverdn/dn.h"

int jmg_dn_begin(jmg_dn_call *call, jmg_op op, const jmg_dist_matrix *a,
                 jmg_error *err) {
  memset(call, 0, sizeof *call);
  call->a = a;
  call->a_data = a->data[0];
  /* The table's supports refuses other groups; this guards the routines
   * (gesvd's and qr's matrices alone are rectangular, engine.h). */
  if (a->ndev != 1 || (a->local_cols != a->n && !jmg_op_is_rectangular(op)))
    return jmg_error_set(err, JMG_EINTERNAL, jmg_op_name(op), "cuSOLVERDn",
                         "called on %d GPUs (%lld of %lld columns here); it "
                         "runs on one",
                         a->ndev, (long long)a->local_cols, (long long)a->n);
  jmg_cuda_call *c = &call->cuda;
  int rc = jmg_cuda_call_begin(c, jmg_op_name(op), "cuSOLVERDn", 1,
                               a->device_ctx, JMG_CUDA_CALL_HANDLES, err);
  snprintf(c->what, sizeof c->what, "N=%lld %s", (long long)a->n,
           jmg_dtype_name(a->dtype));
  if (rc == 0) {
    call->dn = c->h->dn[0];
    call->params = c->h->dn_params;
    call->blas = c->h->blas[0];
  }
  /* Inputs were written on XLA's stream, and the ops layer's copies go on
   * it too: on the same stream nothing needs to wait. */
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnSetStream(call->dn, c->stream), c->op, err);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(cublasSetStream(call->blas, c->stream), c->op, err);
  jmg_trace_mark("engine start");
  return rc;
}

int jmg_dn_end(jmg_dn_call *call, int rc, jmg_error *err) {
  return jmg_cuda_call_end(&call->cuda, rc, err);
}

/* ---- the engine -----------------------------------------------------------*/

/* What cuSOLVERDn cannot do, known before the call. */
static int dn_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                       size_t why_len) {
  (void)e;
  if (p->nparts != 1) {
    snprintf(why, why_len,
             "%d GPUs: cuSOLVERDn runs on one (cusolvermg takes several)",
             p->nparts);
    return 0;
  }
  /* qr's orgqr / ungqr has no 64-bit form (qr.c): its m, n, k, lda and
   * lwork are ints (cusolverDn.h), and M * N is kept within one too, as
   * cusolverDn<t>potri failed once N * N passed it (docs/guides/memory.md). */
  const int64_t rows = jmg_problem_rows(p);
  if (p->op == JMG_OP_QR && !jmg_dn_qr_fits(rows, p->n)) {
    snprintf(why, why_len,
             "qr of a %lld x %lld A: cusolverDn<t>orgqr takes 32-bit int "
             "sizes (M, N and M * N at most %d)",
             (long long)rows, (long long)p->n, INT_MAX);
    return 0;
  }
  /* gesvd of a tall A decomposes its transpose, made by cuBLAS geam, whose
   * sizes are ints (gesvd.c). */
  if (p->op == JMG_OP_GESVD && !jmg_dn_gesvd_fits(rows, p->n)) {
    snprintf(why, why_len,
             "gesvd of a %lld x %lld A: a tall A is transposed by cuBLAS "
             "geam, whose sizes are 32-bit ints (M at most %d)",
             (long long)rows, (long long)p->n, INT_MAX);
    return 0;
  }
  if (p->op == JMG_OP_SYGVD && !jmg_dn_sygvd_fits(p->n)) {
    snprintf(why, why_len,
             "N=%lld: N*N exceeds INT_MAX, and cuSOLVERDn's sygvd is its "
             "32-bit API (it has no 64-bit sygvd)",
             (long long)p->n);
    return 0;
  }
  return 1;
}

const jmg_engine jmg_cusolverdn_engine = {
    .name = "cusolverdn",
    .model = JMG_MODEL_LEADER,
    .supports = dn_supports,
    .workspace = jmg_dn_workspace,
    .leader =
        {
            .potrs = jmg_dn_potrs,
            .potri = jmg_dn_potri,
            .syevd = jmg_dn_syevd,
            .lu_solve = jmg_dn_lu_solve,
            .gesvd = jmg_dn_gesvd,
            .qr = jmg_dn_qr,
            .sygvd = jmg_dn_sygvd,
            .potrs_mixed = jmg_dn_potrs_mixed,
            .lu_solve_mixed = jmg_dn_lu_solve_mixed,
        },
};
