/* potrs with cuSOLVERMg: the tiled factorization, then cuSOLVERMg's solves
 * in chunks of right-hand sides (mg.h). */
#include <stdio.h>

#include "common/trace.h"
#include "engine/cusolvermg/mg.h"

int jmg_mg_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                 int64_t nrhs, int *info, jmg_error *err) {
  (void)e;
  const char *op = "potrs";
  jmg_mg_call call;
  int rc = jmg_mg_begin_call(&call, op, a, err);
  /* cuSOLVERMg wants a B pointer on every GPU of its grid, though B's one
   * column tile lies on the first: buffers of a chunk's size on the others,
   * taken before anything is written (the JMG_ENOMEM contract). */
  const int64_t k = nrhs < JMG_MG_MAX_RHS_CHUNK ? nrhs : JMG_MG_MAX_RHS_CHUNK;
  const size_t b_bytes = (size_t)a->n * (size_t)k * jmg_dtype_size(a->dtype);
  void *bs[JMG_MG_MAX_DEVICES] = {0};
  bs[0] = b;
  for (int d = 1; rc == 0 && k > 0 && d < a->ndev; ++d)
    rc = call.mem->alloc(&call.group, d, b_bytes, &bs[d], err);
  if (rc != 0 && err->op[0] == '\0')
    snprintf(err->op, sizeof err->op, "%s", op);
  cudaLibMgMatrixDesc_t desc_a = NULL;
  int h_info = 0;
  if (rc == 0)
    rc = jmg_mg_factor_for_solve(&call, bs, nrhs, &desc_a, &h_info, err);
  if (rc == 0 && h_info == 0)
    rc = jmg_mg_solve_chunked(&call, desc_a, b, nrhs, bs, &h_info, err);
  jmg_trace_mark("potrs");
  *info = h_info;
  for (int d = 1; d < a->ndev && d < JMG_MG_MAX_DEVICES; ++d)
    if (bs[d] != NULL) call.mem->release(&call.group, d, bs[d], b_bytes);
  jmg_mg_end_call(&call);
  jmg_trace_mark("release");
  return rc;
}
