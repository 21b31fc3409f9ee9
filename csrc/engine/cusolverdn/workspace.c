/* The cuSOLVERDn engine's workspace query (engine.h's `workspace`, dn.h):
 * what a call of the problem would take from XLA's allocator, asked of
 * cuSOLVER through the very functions the routines size their workspaces
 * with, on a handle of its own on the current GPU, with no matrix (the
 * queries read no data). Each op's answer is its routine file's
 * (jmg_dn_<op>_query): potri's adds the Hermitian fill's scratch, syevd's
 * follows the solver the engine would choose (or q->syevd_solver), qr's is
 * for the problem's M x N A (its m). gesvd's workspace depends on more than
 * the problem (its routine by size, the vectors asked, a wide matrix's
 * transpose) and is not asked ahead. */
#include <string.h>

#include "cuda/check.h"
#include "engine/cusolverdn/dn.h"

/* Each op's query, in its routine's file (dn.h). */
typedef int (*dn_query)(jmg_dn_call *call, const jmg_workspace_query *q,
                        size_t *bytes, jmg_error *err);
static const dn_query k_queries[JMG_NUM_OPS] = {
    [JMG_OP_POTRS] = jmg_dn_potrs_query,
    [JMG_OP_POTRI] = jmg_dn_potri_query,
    [JMG_OP_SYEVD] = jmg_dn_syevd_query,
    [JMG_OP_SYGVD] = jmg_dn_sygvd_query,
    [JMG_OP_LU_SOLVE] = jmg_dn_lu_solve_query,
    [JMG_OP_QR] = jmg_dn_qr_query,
};

/* A mixed-precision call's (precision mixed, common/op.h): the larger of
 * its own workspace and the exact routine's, which its fallback takes after
 * the mixed one went back (mixed.c). */
static int mixed_query(jmg_dn_call *call, const jmg_workspace_query *q, int lu,
                       size_t *bytes, jmg_error *err) {
  size_t exact = 0, mixed = 0;
  int rc = lu ? jmg_dn_lu_solve_query(call, q, &exact, err)
              : jmg_dn_potrs_query(call, q, &exact, err);
  if (rc == 0) rc = jmg_dn_mixed_query(call, q, lu, &mixed, err);
  *bytes = exact > mixed ? exact : mixed;
  return rc;
}

static int potrs_mixed_query(jmg_dn_call *call, const jmg_workspace_query *q,
                             size_t *bytes, jmg_error *err) {
  return mixed_query(call, q, 0, bytes, err);
}

static int lu_solve_mixed_query(jmg_dn_call *call, const jmg_workspace_query *q,
                                size_t *bytes, jmg_error *err) {
  return mixed_query(call, q, 1, bytes, err);
}

/* A cuSOLVERDn handle and its params of their own on the current GPU,
 * made for the query and destroyed after it. Destroying cannot fail
 * usefully: its status is reported only where the query succeeded. */
static int query(jmg_dn_call *call, dn_query fn, const jmg_workspace_query *q,
                 size_t *bytes, jmg_error *err) {
  const char *op = call->cuda.op;
  int rc = JMG_CUSOLVER_TRY(cusolverDnCreate(&call->dn), op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnCreateParams(&call->params), op, err);
  if (rc == 0) rc = fn(call, q, bytes, err);
  jmg_error ignored;
  if (call->params != NULL) {
    int d = JMG_CUSOLVER_TRY(cusolverDnDestroyParams(call->params), op,
                             rc == 0 ? err : &ignored);
    if (rc == 0) rc = d;
  }
  if (call->dn != NULL) {
    int d = JMG_CUSOLVER_TRY(cusolverDnDestroy(call->dn), op,
                             rc == 0 ? err : &ignored);
    if (rc == 0) rc = d;
  }
  return rc;
}

int jmg_dn_workspace(const jmg_engine *e, const jmg_problem *p,
                     const jmg_workspace_query *q, size_t *bytes,
                     jmg_error *err) {
  (void)e;
  const char *op = jmg_op_name(p->op);
  dn_query fn =
      (int)p->op >= 0 && p->op < JMG_NUM_OPS ? k_queries[p->op] : NULL;
  if (p->precision == JMG_PRECISION_MIXED && p->op == JMG_OP_POTRS)
    fn = potrs_mixed_query;
  if (p->precision == JMG_PRECISION_MIXED && p->op == JMG_OP_LU_SOLVE)
    fn = lu_solve_mixed_query;
  if (fn == NULL)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "cuSOLVERDn",
                         "the workspace of %s is not asked ahead of a call "
                         "(JAXMG_TRACE=1 prints what a call took)",
                         op);
  void *none = NULL;
  /* The matrix as the routine gets it: qr's is Aᵀ, N x M (engine.h). */
  const jmg_dist_matrix a = {
      .ndev = 1,
      .n = p->n,
      .tile = p->tile,
      .local_cols = p->op == JMG_OP_QR ? jmg_problem_rows(p) : p->n,
      .dtype = p->dtype,
      .data = &none,
      .device_ctx = &none};
  /* A frame that is not begun: no GPU locked, no stream; its op names the
   * errors. */
  jmg_dn_call call;
  memset(&call, 0, sizeof call);
  call.cuda.op = op;
  call.a = &a;
  return query(&call, fn, q, bytes, err);
}
