/* The gather engine's workspace query (engine.h's `workspace`): what a
 * call of problem p takes from XLA's allocator on participant 0's GPU
 * beside A, B and the op's outputs: the gathered N x N copy of A (two for
 * sygvd: A's and B's), each at JMG_CUDA_ALIGN, plus cuSOLVERDn's own
 * workspace for the same problem on one GPU (jmg_cusolverdn_engine's
 * query: with precision "mixed", the larger of the mixed routine's and the
 * exact fallback's). gesvd's and qr's (rectangular copies and output
 * buffers) are not asked ahead. Where the copy does not fit, the call runs
 * the distributed engine's routine instead (gather.h), whose workspace this
 * does not tell. */
#include "engine/gather/mixed.h"

#include <stdint.h>

#include "cuda/call.h"
#include "engine/gather/gather.h"

int jmg_gather_workspace(const jmg_engine *e, const jmg_problem *p,
                         const jmg_workspace_query *q, size_t *bytes,
                         jmg_error *err) {
  (void)e;
  const jmg_engine *one = JMG_GATHER_ONE;
  const char *op = jmg_op_name(p->op);
  *bytes = 0;
  if (p->op == JMG_OP_GESVD || p->op == JMG_OP_QR || p->n < 0)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "cusolverdn-gather",
                         "the workspace of %s is not asked ahead of a call "
                         "(JAXMG_TRACE=1 prints what a call took)",
                         op);
  if (one->workspace == NULL)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "cusolverdn-gather",
                         "%s cannot tell its workspace ahead of a call",
                         one->name);
  const uint64_t elem = jmg_dtype_size(p->dtype), n = (uint64_t)p->n;
  if (n > 0 && n > SIZE_MAX / n / elem / 2)
    return jmg_error_set(err, JMG_EINVAL, op, "cusolverdn-gather",
                         "N=%lld: the gathered copy is too large to address",
                         (long long)p->n);
  const size_t copy = jmg_cuda_align((size_t)(n * n * elem));
  jmg_problem single = *p;
  single.nparts = 1;
  size_t library = 0;
  int rc = one->workspace(one, &single, q, &library, err);
  if (rc == 0)
    *bytes = (p->op == JMG_OP_SYGVD ? 2 : 1) * copy + library;
  return rc;
}
