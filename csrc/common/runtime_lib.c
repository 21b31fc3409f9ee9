/* Libraries opened at run time (common/runtime_lib.h). */
#include "common/runtime_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int jmg_runtime_lib_set_path(jmg_runtime_lib *lib, const char *path) {
  if (path == NULL) path = "";
  int rc = 0;
  pthread_mutex_lock(&lib->mu);
  if (strlen(path) >= sizeof lib->path)
    rc = -1;
  else if (lib->started)
    rc = strcmp(lib->path, path) == 0 ? 0 : -1;
  else
    snprintf(lib->path, sizeof lib->path, "%s", path);
  pthread_mutex_unlock(&lib->mu);
  return rc;
}

void *jmg_runtime_lib_open(jmg_runtime_lib *lib, char *tried, size_t len,
                           char *why, size_t why_len) {
  pthread_mutex_lock(&lib->mu);
  lib->started = 1;
  snprintf(tried, len, "%s", lib->path[0] ? lib->path : lib->soname);
  pthread_mutex_unlock(&lib->mu);
  void *handle = dlopen(tried, RTLD_NOW | RTLD_GLOBAL);
  if (handle == NULL) {
    const char *e = dlerror();
    snprintf(why, why_len, "%s", e ? e : "unknown reason");
  }
  return handle;
}

int jmg_runtime_lib_lookup(void *handle, const char *name, void *slot,
                           size_t size) {
  void *p = dlsym(handle, name);
  if (p == NULL) return -1;
  memcpy(slot, &p, size < sizeof p ? size : sizeof p);
  return 0;
}
