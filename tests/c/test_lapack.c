#include "test_lapack.h"

#include <dlfcn.h>

#include "engine/lapack/table.h"

void *jmg_test_lapack(void) {
  static void *lib = NULL;
  if (lib == NULL) lib = dlopen("liblapack.so.3", RTLD_NOW | RTLD_LOCAL);
  return lib;
}

int jmg_test_lapack_register(const char *const *names, size_t count) {
  void *lib = jmg_test_lapack();
  if (lib == NULL) return 0;
  for (size_t i = 0; i < count; ++i) {
    char sym[32];
    snprintf(sym, sizeof sym, "%s_", names[i]);
    void *fn = dlsym(lib, sym);
    if (fn == NULL || jmg_lapack_register(names[i], fn) != 0) return 0;
  }
  return 1;
}
