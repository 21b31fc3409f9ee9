/* libcusolverMp, loaded at run time (engine/cusolvermp/api.h).
 *
 * Once per process (pthread_once): NCCL first (cuda/comm_nccl.c loads it
 * RTLD_GLOBAL), since libcusolverMp.so.0 depends on libnccl.so.2 and must
 * bind to the copy jaxmg's communicators use; then libcusolverMp from the
 * path the Python layer set (jaxmg_cusolvermp_set_path, from
 * JAXMG_CUSOLVERMP_LIB or the nvidia-cusolvermp wheel) or its soname. Its
 * other dependencies (libcublas, libcusolver, libcublasMp where it has one)
 * come from the CUDA wheels JAX preloads or the toolkit. A failure is
 * remembered with its reason, which names the extra that brings the
 * library. The series is told apart by a symbol 0.9 added
 * (cusolverMpGesvd): 0.8 or >= 0.9. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/runtime_lib.h"
#include "cuda/comm_nccl.h"
#include "engine/cusolvermp/api.h"

#define CUSOLVERMP_SONAME "libcusolverMp.so.0"
#define CUSOLVERMP_EXTRA "pip install \"jaxmg[cuda13]\""

static jmg_runtime_lib g_lib = JMG_RUNTIME_LIB_INIT(CUSOLVERMP_SONAME);
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static jmg_mp_api g_api;
static int g_loaded;
static char g_why[JMG_RUNTIME_LIB_PATH_MAX + 1024];
static const char *g_series = "";
static int g_version; /* written once under the handle lock (context.c) */

int jmg_cusolvermp_set_path(const char *path) {
  return jmg_runtime_lib_set_path(&g_lib, path);
}

static void load_once(void) {
  jmg_error err;
  jmg_error_clear(&err);
  if (jmg_nccl_load("cusolvermp", &err) != 0) {
    snprintf(g_why, sizeof g_why,
             "cuSOLVERMp needs NCCL, which did not load (%s); "
             CUSOLVERMP_EXTRA " installs both",
             err.msg);
    return;
  }
  char path[JMG_RUNTIME_LIB_PATH_MAX], why[512];
  void *lib = jmg_runtime_lib_open(&g_lib, path, sizeof path, why, sizeof why);
  if (lib == NULL) {
    snprintf(g_why, sizeof g_why,
             "cuSOLVERMp is not installed or cannot be loaded (it comes with "
             CUSOLVERMP_EXTRA "): %s: %s",
             path, why);
    return;
  }
  const char *missing = NULL;
#define JMG_MP_LOOKUP(field, name)                                       \
  if (missing == NULL &&                                                 \
      jmg_runtime_lib_lookup(lib, #name, &g_api.field,                   \
                             sizeof g_api.field) != 0)                   \
    missing = #name;
  JMG_MP_FUNCTIONS(JMG_MP_LOOKUP)
#undef JMG_MP_LOOKUP
  if (missing != NULL) {
    snprintf(g_why, sizeof g_why,
             "cuSOLVERMp (%s) has no %s: a version jaxmg does not know; "
             CUSOLVERMP_EXTRA " brings one it does",
             path, missing);
    return;
  }
  /* gesvd came in 0.9: its presence tells the series. */
  void *gesvd = NULL;
  g_series = jmg_runtime_lib_lookup(lib, "cusolverMpGesvd", &gesvd,
                                    sizeof gesvd) == 0
                 ? ">= 0.9"
                 : "0.8";
  g_loaded = 1;
}

const jmg_mp_api *jmg_mp_load(char *why, size_t len) {
  pthread_once(&g_once, load_once);
  if (g_loaded) return &g_api;
  if (why != NULL && len > 0) snprintf(why, len, "%s", g_why);
  return NULL;
}

int jmg_cusolvermp_available(char *why, size_t len) {
  if (jmg_mp_load(why, len) != NULL) {
    if (why != NULL && len > 0) why[0] = '\0';
    return 1;
  }
  return 0;
}

const char *jmg_cusolvermp_series(void) {
  pthread_once(&g_once, load_once);
  return g_series;
}

int jmg_cusolvermp_version(void) {
  return __atomic_load_n(&g_version, __ATOMIC_ACQUIRE);
}

void jmg_cusolvermp_note_version(int version) {
  __atomic_store_n(&g_version, version, __ATOMIC_RELEASE);
}
