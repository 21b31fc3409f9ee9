#include "common/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v != NULL ? v : "";
}

static void copy_name(char *dst, const char *src) {
  snprintf(dst, JMG_CONFIG_NAME_LEN, "%s", src);
}

/* v as a whole decimal number within lo..hi, else otherwise. */
static long int_in(const char *v, long lo, long hi, long otherwise) {
  if (v[0] == '\0') return otherwise;
  char *end = NULL;
  const long x = strtol(v, &end, 10);
  return end != NULL && *end == '\0' && x >= lo && x <= hi ? x : otherwise;
}

void jmg_config_read(jmg_config *out) {
  memset(out, 0, sizeof *out);
  const char *trace = env("JAXMG_TRACE");
  out->trace = trace[0] != '\0' && strcmp(trace, "0") != 0;

  out->rendezvous_timeout_s = 300.0;
  const char *timeout = env("JAXMG_RENDEZVOUS_TIMEOUT");
  char *end = NULL;
  double t = strtod(timeout, &end);
  if (end != timeout && t > 0) out->rendezvous_timeout_s = t;

  out->local_gather = strcmp(env("JAXMG_LOCAL_GATHER"), "0") != 0;
  out->mixed_float32 = strcmp(env("JAXMG_MIXED_LOW"), "float32") == 0;
  out->mixed_bf16x9 = strcmp(env("JAXMG_MIXED_LOW"), "bf16x9") == 0;
  out->gmres_max_inner = (int)int_in(env("JAXMG_GMRES_MAX_INNER"), 0, 100000, -1);
  out->tf32_nb = (int)int_in(env("JAXMG_TF32_NB"), 64, 8192, 0);
  out->tf32_lookahead = strcmp(env("JAXMG_TF32_LOOKAHEAD"), "1") == 0;
  const char *mgpu = env("JAXMG_SYEVD_MGPU");
  out->syevd_mgpu = strcmp(mgpu, "1") == 0 ? 1 : strcmp(mgpu, "0") == 0 ? 0 : -1;
  out->refine_max_steps = (int)int_in(env("JAXMG_REFINE_MAX_STEPS"), 0, 100000, -1);
  const char *refine_nb = env("JAXMG_REFINE_NB");
  out->refine_nb = strcmp(refine_nb, "0") == 0 ? 0 : (int)int_in(refine_nb, 64, 8192, -1);
  out->tf32_trsm = strcmp(env("JAXMG_TF32_TRSM"), "1") == 0;
  out->potrf_pipeline = strcmp(env("JAXMG_POTRF_PIPELINE"), "1") == 0;
  const char *residual = env("JAXMG_REFINE_RESIDUAL");
  out->refine_residual = strcmp(residual, "symm") == 0   ? 1
                         : strcmp(residual, "gemv") == 0 ? 2
                                                         : 0;

  const char *lanes = env("JAXMG_COPY_LANES");
  if (lanes[0] != '\0') {
    long v = strtol(lanes, &end, 10);
    if (end != NULL && *end == '\0' && v >= 1 && v <= 64) out->copy_lanes = (int)v;
  }

  const char *permute = env("JAXMG_PERMUTE");
  out->permute = strcmp(permute, "inplace") == 0 ? JMG_PERMUTE_INPLACE
                 : strcmp(permute, "apart") == 0 ? JMG_PERMUTE_APART
                                                 : JMG_PERMUTE_AUTO;
  /* A value longer than the buffer must not pass for a valid one cut short. */
  const char *potrf = env("JAXMG_POTRF");
  copy_name(out->potrf, strlen(potrf) < JMG_CONFIG_NAME_LEN ? potrf : "?");
  const char *engine = env("JAXMG_ENGINE");
  copy_name(out->engine, strlen(engine) < JMG_CONFIG_NAME_LEN ? engine : "?");
  const char *syevd = env("JAXMG_SYEVD");
  copy_name(out->syevd, strlen(syevd) < JMG_CONFIG_NAME_LEN ? syevd : "?");
  const char *path = env("JAXMG_SYEVD_MGPU_PATH");
  copy_name(out->syevd_mgpu_path,
            strlen(path) < JMG_CONFIG_NAME_LEN ? path : "?");
}
