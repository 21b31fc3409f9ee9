/* How long the host tridiagonal eigensolver (engine/lapack/tridiagonal.c)
 * takes on this machine's CPUs, to size the GPU engines' tridiagonal path:
 * dsterf alone (the eigenvalues) and jmg_tridiagonal_eigenvectors (dsterf,
 * then dstemr in chunks on `threads` threads), for a random T (d, e uniform
 * in [-1, 1), seeded) of order n. The sink takes each chunk and drops it
 * (no GPU copy is timed). LAPACK is SciPy's OpenBLAS where the script finds
 * it (its routines are named scipy_d*_), else liblapack.so.3.
 *
 *   scripts/probe-tridiagonal.sh BUILD_DIR N THREADS [CHUNK]
 *
 * Prints one line: n, threads, chunk (0: the solver's choice), the chunks
 * handed over, and both times. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/lapack/table.h"
#include "engine/lapack/tridiagonal.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int count_chunks(void *ctx, int64_t first, int64_t count, const void *z,
                        jmg_error *err) {
  (void)first, (void)count, (void)z, (void)err;
  ++*(int64_t *)ctx;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s LAPACK_LIB PREFIX N THREADS [CHUNK]\n", argv[0]);
    return 2;
  }
  const char *prefix = argv[2];
  const int64_t n = atoll(argv[3]);
  const int threads = atoi(argv[4]);
  const int64_t chunk = argc > 5 ? atoll(argv[5]) : 0;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen(%s): %s\n", argv[1], dlerror());
    return 1;
  }
  static const char *names[] = {"dsterf", "dstemr", "dstebz", "dstein"};
  for (int i = 0; i < 4; ++i) {
    char sym[64];
    snprintf(sym, sizeof sym, "%s%s_", prefix, names[i]);
    void *fn = dlsym(lib, sym);
    if (fn == NULL || jmg_lapack_register(names[i], fn) != 0) {
      fprintf(stderr, "%s: not found in %s\n", sym, argv[1]);
      return 1;
    }
  }
  double *d = malloc((size_t)n * sizeof *d), *e = malloc((size_t)n * sizeof *e);
  double *w = malloc((size_t)n * sizeof *w);
  if (d == NULL || e == NULL || w == NULL) return 1;
  uint64_t s = 2024;
  for (int64_t i = 0; i < 2 * n; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = (double)(s >> 11) / 4503599627370496.0 - 1.0;
    if (i < n)
      d[i] = u;
    else
      e[i - n] = u;
  }
  jmg_error err;
  jmg_error_clear(&err);
  int info = 0;
  int64_t chunks = 0;
  const double t0 = now();
  int rc = jmg_tridiagonal_eigenvalues("probe", n, d, e, w, &info, &err);
  const double t1 = now();
  if (rc == 0 && info == 0)
    rc = jmg_tridiagonal_eigenvectors_chunked("probe", n, d, e, w, JMG_F64,
                                              threads, chunk, 0, count_chunks,
                                              &chunks, &info, &err);
  const double t2 = now();
  if (rc != 0 || info != 0) {
    fprintf(stderr, "rc=%d info=%d %s: %s\n", rc, info, err.call, err.msg);
    return 1;
  }
  printf(
      "n=%lld threads=%d chunk=%lld chunks=%lld dsterf %.3f s, "
      "eigenvectors (dstebz windows + dstemr chunks) %.3f s\n",
      (long long)n, threads, (long long)chunk, (long long)chunks, t1 - t0,
      t2 - t1);
  free(d);
  free(e);
  free(w);
  return 0;
}
