/* An engine's execution model asked by its name (engine/engine.h,
 * jmg_engine_model_of), as the Python layer asks it of the engine the
 * engine check chose: over a table of its own and through the CPU
 * library's export (ffi/cpu_targets.c, jaxmg_engine_model_cpu) over its
 * real engines. */
#include <stddef.h>

#include "engine/engine.h"
#include "test.h"

/* The CPU library's export (ffi/handler.h, JMG_FFI_EXPORT_ENGINE_MODEL). */
int jaxmg_engine_model_cpu(const char *name);

TEST(engine_model_of_names_each_engine_s_model) {
  static const jmg_engine leader = {.name = "one", .model = JMG_MODEL_LEADER};
  static const jmg_engine local = {.name = "every", .model = JMG_MODEL_LOCAL};
  const jmg_engine *const engines[] = {&leader, &local, NULL};
  CHECK_EQ(jmg_engine_model_of(engines, "one"), JMG_MODEL_LEADER);
  CHECK_EQ(jmg_engine_model_of(engines, "every"), JMG_MODEL_LOCAL);
  /* A name of no engine here, a prefix of one, none at all. */
  CHECK_EQ(jmg_engine_model_of(engines, "on"), -1);
  CHECK_EQ(jmg_engine_model_of(engines, ""), -1);
  CHECK_EQ(jmg_engine_model_of(engines, NULL), -1);
  const jmg_engine *const none[] = {NULL};
  CHECK_EQ(jmg_engine_model_of(none, "one"), -1);
}

TEST(engine_model_export_answers_for_the_cpu_engines) {
  CHECK_EQ(jaxmg_engine_model_cpu("lapack"), JMG_MODEL_LEADER);
  CHECK_EQ(jaxmg_engine_model_cpu("lapack-local"), JMG_MODEL_LOCAL);
  /* A CUDA engine is no engine of the CPU library's. */
  CHECK_EQ(jaxmg_engine_model_cpu("cusolvermp"), -1);
  CHECK_EQ(jaxmg_engine_model_cpu(NULL), -1);
}
