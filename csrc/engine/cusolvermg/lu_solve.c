/* lu_solve with jaxmg's own tiled LU over the GPUs of the group
 * (cuda_lu.h), not cusolverMgGetrf (mg.h says why). */
#include <stdio.h>

#include "common/trace.h"
#include "engine/cusolvermg/cuda_lu.h"
#include "engine/cusolvermg/mg.h"

int jmg_mg_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  (void)e;
  const char *op = "lu_solve";
  const size_t es = jmg_dtype_size(a->dtype);
  jmg_mg_call call;
  size_t bytes = 0;
  int64_t info64 = 0;
  *info = 0;
  int rc = jmg_mg_begin_call(&call, op, a, err);
  if (rc == 0) rc = jmg_cuda_getrf_workspace(a, call.h, &bytes, op, err);
  if (rc == 0)
    rc = jmg_mg_take_workspace(&call, (int64_t)((bytes + es - 1) / es), err);
  jmg_trace_mark("workspace");
  if (rc == 0) rc = jmg_cuda_getrf(a, call.h, call.work, &info64, op, err);
  jmg_trace_mark("getrf");
  if (rc == 0 && info64 == 0 && nrhs > 0)
    rc = jmg_cuda_getrs(a, call.h, call.work, transpose, b, nrhs, op, err);
  jmg_trace_mark("getrs");
  if (rc == 0) *info = (int)info64;
  jmg_mg_end_call(&call);
  return rc;
}
