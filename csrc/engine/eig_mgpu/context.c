/* The eig-mgpu engine's table and limits (engine/engine.h). */
#include <stdio.h>

#include "common/config.h"
#include "engine/eig_mgpu/eig_mgpu.h"
#include "engine/eig_mgpu/trd.h"

static int mgpu_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                         size_t why_len) {
  (void)e;
  if (p->dtype != JMG_F64) {
    snprintf(why, why_len, "%s: its kernels are float64 only",
             jmg_dtype_name(p->dtype));
    return 0;
  }
  if (p->nparts > JMG_TRD_MAX_DEV) {
    snprintf(why, why_len, "%d GPUs: it drives at most %d", p->nparts,
             JMG_TRD_MAX_DEV);
    return 0;
  }
  return 1;
}

/* Opt-in: JAXMG_SYEVD_MGPU=1, and 2 or more GPUs. */
static int mgpu_prefers(const jmg_engine *e, const jmg_problem *p, char *why,
                        size_t why_len) {
  (void)e;
  jmg_config cfg;
  jmg_config_read(&cfg);
  if (!cfg.syevd_mgpu) {
    snprintf(why, why_len,
             "JAXMG_SYEVD_MGPU is not 1 (opt-in until measured on GPUs)");
    return 0;
  }
  if (p->nparts < 2) {
    snprintf(why, why_len, "one GPU: cuSOLVERDn's syevd runs it");
    return 0;
  }
  return 1;
}

static int mgpu_workspace(const jmg_engine *e, const jmg_problem *p,
                          const jmg_workspace_query *q, size_t *bytes,
                          jmg_error *err) {
  (void)e;
  (void)err;
  *bytes = jmg_eig_mgpu_syevd_bytes(p->n, p->tile, p->nparts, 0,
                                    q->want_vectors);
  return 0;
}

const jmg_engine jmg_eig_mgpu_engine = {
    .name = "eig-mgpu",
    .model = JMG_MODEL_LEADER,
    .supports = mgpu_supports,
    .prefers = mgpu_prefers,
    .workspace = mgpu_workspace,
    .leader = {.syevd = jmg_eig_mgpu_syevd},
};
