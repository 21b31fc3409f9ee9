/* A library opened at run time (dlopen), where it is found: the path the
 * Python layer sets before the first use (NVIDIA's wheels), else the
 * library's soname. Used by the loaders of NCCL (cuda/comm_nccl.c) and
 * cuSOLVERMp (engine/cusolvermp/loader.c), so that neither is a link-time
 * dependency of libjaxmg_cuda.so. */
#ifndef JMG_COMMON_RUNTIME_LIB_H
#define JMG_COMMON_RUNTIME_LIB_H

#include <pthread.h>
#include <stddef.h>

#define JMG_RUNTIME_LIB_PATH_MAX 4096

/* Where one library is looked for. Define one per library with
 * JMG_RUNTIME_LIB_INIT(soname). */
typedef struct jmg_runtime_lib {
  pthread_mutex_t mu;
  const char *soname;
  char path[JMG_RUNTIME_LIB_PATH_MAX]; /* "": the soname */
  int started; /* set by the first open: the path is fixed from then on */
} jmg_runtime_lib;

#define JMG_RUNTIME_LIB_INIT(name) \
  { PTHREAD_MUTEX_INITIALIZER, (name), {0}, 0 }

/* Sets where lib is looked for (NULL: its soname). Returns 0, or -1 when the
 * path is too long or lib has already been opened from another path. */
int jmg_runtime_lib_set_path(jmg_runtime_lib *lib, const char *path);

/* Opens lib (RTLD_NOW | RTLD_GLOBAL: the libraries that need it find its
 * symbols) from its path or soname, which is written to tried (len bytes).
 * Returns the handle, or NULL with dlerror's words in why (why_len bytes). */
void *jmg_runtime_lib_open(jmg_runtime_lib *lib, char *tried, size_t len,
                           char *why, size_t why_len);

/* Looks name up in handle into the function pointer at slot (size bytes:
 * dlsym's void * copied, since ISO C leaves casting it to a function
 * pointer undefined). Returns 0, or -1 when handle has no such symbol. */
int jmg_runtime_lib_lookup(void *handle, const char *name, void *slot,
                           size_t size);

#endif
