/* The settings read in one place (common/config.h): the newer ones, each
 * with its default, a good value and a malformed one. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "common/config.h"
#include "test.h"

static jmg_config read_with(const char *name, const char *value) {
  if (value != NULL)
    setenv(name, value, 1);
  else
    unsetenv(name);
  jmg_config c;
  jmg_config_read(&c);
  unsetenv(name);
  return c;
}

TEST(config_reads_the_mixed_precision_and_local_gather_settings) {
  CHECK_EQ(read_with("JAXMG_LOCAL_GATHER", NULL).local_gather, 1);
  CHECK_EQ(read_with("JAXMG_LOCAL_GATHER", "1").local_gather, 1);
  CHECK_EQ(read_with("JAXMG_LOCAL_GATHER", "0").local_gather, 0);
  CHECK_EQ(read_with("JAXMG_MIXED_LOW", NULL).mixed_float32, 0);
  CHECK_EQ(read_with("JAXMG_MIXED_LOW", "float32").mixed_float32, 1);
  CHECK_EQ(read_with("JAXMG_MIXED_LOW", "bf16").mixed_float32, 0);
  CHECK_EQ(read_with("JAXMG_MIXED_LOW", "bf16x9").mixed_bf16x9, 1);
  CHECK_EQ(read_with("JAXMG_MIXED_LOW", "bf16x9").mixed_float32, 0);
  CHECK_EQ(read_with("JAXMG_MIXED_LOW", "float32").mixed_bf16x9, 0);
  CHECK_EQ(read_with("JAXMG_GMRES_MAX_INNER", NULL).gmres_max_inner, -1);
  CHECK_EQ(read_with("JAXMG_GMRES_MAX_INNER", "0").gmres_max_inner, 0);
  CHECK_EQ(read_with("JAXMG_GMRES_MAX_INNER", "40").gmres_max_inner, 40);
  CHECK_EQ(read_with("JAXMG_GMRES_MAX_INNER", "40x").gmres_max_inner, -1);
  CHECK_EQ(read_with("JAXMG_GMRES_MAX_INNER", "-3").gmres_max_inner, -1);
  CHECK_EQ(read_with("JAXMG_TF32_NB", NULL).tf32_nb, 0);
  CHECK_EQ(read_with("JAXMG_TF32_NB", "512").tf32_nb, 512);
  CHECK_EQ(read_with("JAXMG_TF32_NB", "32").tf32_nb, 0);
  CHECK_EQ(read_with("JAXMG_TF32_NB", "9000").tf32_nb, 0);
  CHECK_EQ(read_with("JAXMG_REFINE_MAX_STEPS", NULL).refine_max_steps, -1);
  CHECK_EQ(read_with("JAXMG_REFINE_MAX_STEPS", "0").refine_max_steps, 0);
  CHECK_EQ(read_with("JAXMG_REFINE_MAX_STEPS", "12").refine_max_steps, 12);
  CHECK_EQ(read_with("JAXMG_REFINE_MAX_STEPS", "-1").refine_max_steps, -1);
  CHECK_EQ(read_with("JAXMG_TF32_LOOKAHEAD", NULL).tf32_lookahead, 0);
  CHECK_EQ(read_with("JAXMG_TF32_LOOKAHEAD", "1").tf32_lookahead, 1);
  CHECK_EQ(read_with("JAXMG_TF32_LOOKAHEAD", "yes").tf32_lookahead, 0);
  CHECK_EQ(read_with("JAXMG_POTRF_PIPELINE", NULL).potrf_pipeline, 0);
  CHECK_EQ(read_with("JAXMG_POTRF_PIPELINE", "1").potrf_pipeline, 1);
  CHECK_EQ(read_with("JAXMG_POTRF_PIPELINE", "0").potrf_pipeline, 0);
  CHECK_EQ(read_with("JAXMG_POTRF_PIPELINE", "yes").potrf_pipeline, 0);
  CHECK_EQ(read_with("JAXMG_REFINE_NB", NULL).refine_nb, -1);
  CHECK_EQ(read_with("JAXMG_REFINE_NB", "0").refine_nb, 0);
  CHECK_EQ(read_with("JAXMG_REFINE_NB", "512").refine_nb, 512);
  CHECK_EQ(read_with("JAXMG_REFINE_NB", "32").refine_nb, -1);
  CHECK_EQ(read_with("JAXMG_REFINE_NB", "00").refine_nb, -1);
  CHECK_EQ(read_with("JAXMG_REFINE_RESIDUAL", NULL).refine_residual, 0);
  CHECK_EQ(read_with("JAXMG_REFINE_RESIDUAL", "symv").refine_residual, 0);
  CHECK_EQ(read_with("JAXMG_REFINE_RESIDUAL", "symm").refine_residual, 1);
  CHECK_EQ(read_with("JAXMG_REFINE_RESIDUAL", "gemv").refine_residual, 2);
  CHECK_EQ(read_with("JAXMG_REFINE_RESIDUAL", "gemm").refine_residual, 0);
  CHECK_EQ(read_with("JAXMG_TF32_TRSM", NULL).tf32_trsm, 0);
  CHECK_EQ(read_with("JAXMG_TF32_TRSM", "1").tf32_trsm, 1);
  CHECK_EQ(read_with("JAXMG_TF32_TRSM", "yes").tf32_trsm, 0);
  CHECK_EQ(read_with("JAXMG_SYEVD_MGPU", NULL).syevd_mgpu, -1);
  CHECK_EQ(read_with("JAXMG_SYEVD_MGPU", "1").syevd_mgpu, 1);
  CHECK_EQ(read_with("JAXMG_SYEVD_MGPU", "0").syevd_mgpu, 0);
  CHECK_EQ(read_with("JAXMG_SYEVD_MGPU", "yes").syevd_mgpu, -1);
  const jmg_config owner = read_with("JAXMG_SYEVD_MGPU_PATH", "owner");
  CHECK_CONTAINS(owner.syevd_mgpu_path, "owner");
  CHECK_EQ(read_with("JAXMG_SYEVD_MGPU_PATH", NULL).syevd_mgpu_path[0], '\0');
}
