/* lu_solve with jaxmg's own tiled LU over the GPUs of the group
 * (cuda_lu.h), not cusolverMgGetrf (mg.h says why). */
#include "common/trace.h"
#include "engine/cusolvermg/cuda_lu.h"
#include "engine/cusolvermg/mg.h"

int jmg_mg_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  (void)e;
  const size_t es = jmg_dtype_size(a->dtype);
  jmg_mg_call call;
  size_t bytes = 0;
  int64_t info64 = 0;
  *info = 0;
  int rc = jmg_mg_begin(&call, JMG_OP_LU_SOLVE, a, err);
  const jmg_cuda_call *c = &call.cuda;
  if (rc == 0) rc = jmg_cuda_getrf_workspace(a, c->h, &bytes, c->op, err);
  if (rc == 0)
    rc = jmg_mg_take_workspace(&call, (int64_t)((bytes + es - 1) / es), err);
  if (rc == 0) rc = jmg_cuda_getrf(a, c->h, call.work, &info64, c->op, err);
  jmg_trace_mark("getrf");
  if (rc == 0 && info64 == 0 && nrhs > 0)
    rc = jmg_cuda_getrs(a, c->h, call.work, transpose, b, nrhs, c->op, err);
  jmg_trace_mark("getrs");
  if (rc == 0) *info = (int)info64;
  return jmg_mg_end(&call, rc, err);
}
