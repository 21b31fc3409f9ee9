#include "test_lapack.h"

#include <dlfcn.h>
#include <string.h>

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

/* The library offers no way to unregister (Python registers once, at
 * import). Its table is plain static storage (engine/lapack/table.c), so the
 * tests write it back through the pointer it hands out. */
void jmg_test_lapack_forget(void) {
  for (int t = 0; t < JMG_NUM_DTYPES; ++t)
    memset((void *)jmg_lapack_routines_for((jmg_dtype)t), 0,
           sizeof(jmg_lapack_routines));
}
