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

/* Where eig-mgpu runs float64 syevd by default (JAXMG_SYEVD_MGPU unset):
 * the sizes and GPU counts where it was measured faster than one GPU (the
 * gathered cuSOLVERDn syevd, at JAX's speed), bench/scaling.py and
 * docs/gpu-runs/2026-11-28-s20/README.md, float64, T_A 256:
 *   2 H200: N=16384 2.219 s vs JAX's eigh 3.189 s (values 2.064 vs 3.197);
 *           N=32768 12.45 s vs 22.52 s;
 *   4 H200: N=16384 1.902 s vs 3.201 s (values 1.778 vs 3.197).
 * Below 16384 and above 32768 nothing was measured (above, Stedc's
 * workspace on the first GPU is the risk), nor 3 GPUs between 2 and 4:
 * the engines that ran there before keep them. */
enum { MGPU_FROM_N = 16384, MGPU_TO_N = 32768, MGPU_MAX_PARTS = 4 };

static int mgpu_prefers(const jmg_engine *e, const jmg_problem *p, char *why,
                        size_t why_len) {
  (void)e;
  jmg_config cfg;
  jmg_config_read(&cfg);
  if (p->nparts < 2) {
    snprintf(why, why_len, "one GPU: cuSOLVERDn's syevd runs it");
    return 0;
  }
  if (cfg.syevd_mgpu == 1) return 1;
  if (cfg.syevd_mgpu == 0) {
    snprintf(why, why_len, "JAXMG_SYEVD_MGPU=0");
    return 0;
  }
  if (p->n < MGPU_FROM_N || p->n > MGPU_TO_N || p->nparts > MGPU_MAX_PARTS) {
    snprintf(why, why_len, "by default N %d..%d on 2..%d GPUs only",
             MGPU_FROM_N, MGPU_TO_N, MGPU_MAX_PARTS);
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
