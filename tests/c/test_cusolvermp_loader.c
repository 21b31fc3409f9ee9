/* libjaxmg_cuda.so's run-time loading of NCCL and cuSOLVERMp, as the Python
 * layer calls it (ctypes), without a GPU: the library is dlopen'ed from the
 * build (JAXMG_CUDA_LIB, defined where CMake built it), pointed at a
 * libcusolverMp that does not exist, and must say so naming the extra that
 * brings it; the path is fixed once loading was tried; a new NCCL id needs
 * 128 bytes. Where no CUDA library was built, the test says so and checks
 * nothing. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "test.h"

TEST(cusolvermp_missing_library_names_the_extra) {
#ifndef JAXMG_CUDA_LIB
  fprintf(stderr, "  (no libjaxmg_cuda.so built: nothing to check)\n");
#else
  void *lib = dlopen(JAXMG_CUDA_LIB, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *e = dlerror();
    TEST_FAIL_AT("dlopen(%s): %s", JAXMG_CUDA_LIB, e ? e : "?");
    return;
  }
  int (*set_path)(const char *) = NULL;
  int (*available)(char *, size_t) = NULL;
  int (*new_id)(uint8_t *, size_t, char *, size_t) = NULL;
  void *p = dlsym(lib, "jaxmg_cusolvermp_set_path");
  CHECK(p != NULL);
  memcpy(&set_path, &p, sizeof p);
  p = dlsym(lib, "jaxmg_cusolvermp_available");
  CHECK(p != NULL);
  memcpy(&available, &p, sizeof p);
  p = dlsym(lib, "jaxmg_comm_new_id");
  CHECK(p != NULL);
  memcpy(&new_id, &p, sizeof p);
  CHECK(dlsym(lib, "jaxmg_nccl_set_path") != NULL);

  CHECK_EQ(set_path("/nonexistent/jaxmg-test/libcusolverMp.so.0"), 0);
  char why[1024];
  memset(why, 'x', sizeof why);
  CHECK_EQ(available(why, sizeof why), 0);
  CHECK_CONTAINS(why, "pip install \"jaxmg[cuda13]\"");
  /* Asked again: the same answer, remembered. */
  char again[1024];
  CHECK_EQ(available(again, sizeof again), 0);
  CHECK(strcmp(why, again) == 0);
  /* Loading was tried: another path is refused, the same one accepted. */
  CHECK_EQ(set_path("/elsewhere/libcusolverMp.so.0"), -1);
  CHECK_EQ(set_path("/nonexistent/jaxmg-test/libcusolverMp.so.0"), 0);

  uint8_t id[16];
  char err[256];
  CHECK_EQ(new_id(id, sizeof id, err, sizeof err), -1);
  CHECK_CONTAINS(err, "needs 128");
  /* libjaxmg_cuda.so stays loaded: its state is per process. */
#endif
}
