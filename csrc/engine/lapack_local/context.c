/* lapack-local's table (lapack_local.h): its limits, its blocks, its
 * workspace; its routines are engine/local_gather/'s. */
#include <stdio.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack_local/lapack_local.h"
#include "engine/local_gather/local_gather.h"
#include "layout/local.h"

/* ---- the engine ----------------------------------------------------------*/

static int ll_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                       size_t len) {
  (void)e;
  if (p->nodes > 1) {
    snprintf(why, len,
             "the group spans %d nodes and its communicators join the "
             "threads and processes of one node",
             p->nodes);
    return 0;
  }
  return jmg_lapack_supports(e, p, why, len);
}

static int ll_prefers(const jmg_engine *e, const jmg_problem *p, char *why,
                      size_t len) {
  (void)e, (void)p;
  snprintf(why, len,
           "it runs only when JAXMG_ENGINE=lapack-local names it (the local "
           "model on CPU devices, for testing; engine lapack is faster)");
  return 0;
}

/* The LAPACK engine's (the gathered A, the pivots, the mixed routine's
 * buffers), plus rank 0's packed parts: a second N x N. */
static int ll_workspace(const jmg_engine *e, const jmg_problem *p,
                        const jmg_workspace_query *q, size_t *bytes,
                        jmg_error *err) {
  int rc = jmg_lapack_workspace(e, p, q, bytes, err);
  if (rc == 0)
    *bytes += (size_t)p->n * (size_t)p->n * jmg_dtype_size(p->dtype);
  return rc;
}

const jmg_engine jmg_lapack_local_engine = {
    .name = "lapack-local",
    .model = JMG_MODEL_LOCAL,
    .supports = ll_supports,
    .prefers = ll_prefers,
    /* LAPACK takes any block: cuSOLVERMp's, so that the CPU tests run
     * the layouts the GPU engines get. */
    .block = jmg_lg_block,
    .workspace = ll_workspace,
    .local = JMG_LG_LOCAL_ROUTINES,
    .on_rank0 = &jmg_lapack_one_engine,
    .fallback = NULL, /* host memory: nothing else runs it */
};
