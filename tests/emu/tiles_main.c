#define _POSIX_C_SOURCE 200809L
/* jaxmg's tiled Cholesky and its tiled inverse from the factor
 * (csrc/engine/cusolvermg/cuda_potrf.c, cuda_potri.c) run on the CPU under
 * tests/emu/emu_cuda.cc and emu_tiles.cc, on 1 to 3 emulated GPUs: the
 * columns each device's x receives must be those of A^-1 (||A X - I||
 * small, X's lower triangle taken from the devices, the upper mirrored),
 * zero above each tile's first row, and A's shards must hold L. Run by
 * tests/emu/run.sh; prints one line per case and exits non-zero on a
 * failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.h"
#include "engine/cusolvermg/cuda_potrf.h"
#include "engine/cusolvermg/cuda_potri.h"

static double rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / 9007199254740992.0 - 0.5;
}

/* Global column of device d's local column c (tile width t, G devices). */
static int64_t global_col(int64_t c, int64_t t, int G, int d) {
  return (c / t * G + d) * t + c % t;
}

static int one_case(int64_t n, int64_t t, int G, uint64_t seed) {
  const int64_t lc = n / G;
  double *a = calloc((size_t)(n * n), sizeof *a), *m = calloc((size_t)(n * n), sizeof *m);
  for (int64_t i = 0; i < n * n; ++i) m[i] = rnd(&seed);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < n; ++i) {
      double s = i == j ? 1.0 : 0.0;
      for (int64_t k = 0; k < n; ++k) s += m[i + k * n] * m[j + k * n] / (double)n;
      a[i + j * n] = s;
    }
  void *data[JMG_CUDA_MAX_DEVICES], *x[JMG_CUDA_MAX_DEVICES], *work[JMG_CUDA_MAX_DEVICES],
      *panels[JMG_CUDA_MAX_DEVICES], *ctx[JMG_CUDA_MAX_DEVICES];
  jmg_cuda_device dev[JMG_CUDA_MAX_DEVICES];
  cublasHandle_t blas[JMG_CUDA_MAX_DEVICES];
  cusolverDnHandle_t dn[JMG_CUDA_MAX_DEVICES];
  char stream_token[JMG_CUDA_MAX_DEVICES];
  jmg_dist_matrix dm = {G, n, t, lc, JMG_F64, data, ctx};
  for (int d = 0; d < G; ++d) {
    memset(&dev[d], 0, sizeof dev[d]);
    dev[d].device = d;
    dev[d].stream = &stream_token[d];
    ctx[d] = &dev[d];
    blas[d] = (cublasHandle_t)&stream_token[d];
    dn[d] = (cusolverDnHandle_t)&stream_token[d];
    data[d] = calloc((size_t)(n * lc), sizeof(double));
    x[d] = calloc((size_t)(n * lc), sizeof(double));
    panels[d] = calloc(jmg_cuda_potri_workspace(&dm), 1);
    for (int64_t c = 0; c < lc; ++c)
      memcpy((double *)data[d] + c * n, a + global_col(c, t, G, d) * n, (size_t)n * sizeof(double));
  }
  jmg_cuda_potrf_handles h = {blas, dn, NULL};
  jmg_error err;
  memset(&err, 0, sizeof err);
  size_t wbytes = 0;
  int rc = jmg_cuda_potrf_workspace(&dm, &h, &wbytes, "potri", &err);
  for (int d = 0; rc == 0 && d < G; ++d) work[d] = calloc(wbytes, 1);
  int64_t info = -1;
  if (rc == 0) rc = jmg_cuda_potrf(&dm, &h, work, &info, "potri", &err);
  if (rc == 0 && info == 0) rc = jmg_cuda_potri_from_factor(&dm, &h, x, panels, "potri", &err);
  int bad = rc != 0 || info != 0;
  if (bad) printf("  rc %d info %lld: %s\n", rc, (long long)info, err.msg);
  /* X from the devices: its lower triangle, mirrored; the entries above the
   * diagonal inside a diagonal tile must match their mirror; zero above
   * the tile. */
  double *inv = calloc((size_t)(n * n), sizeof *inv), nonzero_above = 0.0, lerr = 0.0,
         tile_sym = 0.0;
  for (int d = 0; !bad && d < G; ++d)
    for (int64_t c = 0; c < lc; ++c) {
      const int64_t gc = global_col(c, t, G, d);
      const double *col = (const double *)x[d] + c * n;
      for (int64_t r = gc; r < n; ++r) inv[r + gc * n] = inv[gc + r * n] = col[r];
    }
  for (int d = 0; !bad && d < G; ++d)
    for (int64_t c = 0; c < lc; ++c) {
      const int64_t gc = global_col(c, t, G, d), top = gc / t * t;
      const double *col = (const double *)x[d] + c * n;
      for (int64_t r = 0; r < gc; ++r) {
        if (r < top) nonzero_above = fmax(nonzero_above, fabs(col[r]));
        else tile_sym = fmax(tile_sym, fabs(col[r] - inv[r + gc * n]));
      }
    }
  /* L's check: (L L^T)(r, c) = A(r, c) over the lower triangle. */
  double *ld = calloc((size_t)(n * n), sizeof *ld);
  for (int d = 0; !bad && d < G; ++d)
    for (int64_t c = 0; c < lc; ++c) {
      const int64_t gc = global_col(c, t, G, d);
      for (int64_t r = gc; r < n; ++r) ld[r + gc * n] = ((const double *)data[d])[r + c * n];
    }
  for (int64_t c = 0; !bad && c < n; ++c)
    for (int64_t r = c; r < n; ++r) {
      double s = 0.0;
      for (int64_t k = 0; k <= c; ++k) s += ld[r + k * n] * ld[c + k * n];
      lerr = fmax(lerr, fabs(s - a[r + c * n]));
    }
  double res = 0.0;
  for (int64_t j = 0; !bad && j < n; ++j)
    for (int64_t i = 0; i < n; ++i) {
      double s = i == j ? -1.0 : 0.0;
      for (int64_t k = 0; k < n; ++k) s += a[i + k * n] * inv[k + j * n];
      res = fmax(res, fabs(s));
    }
  bad = bad || !(res < 1e-12) || nonzero_above != 0.0 || !(lerr < 1e-12) || !(tile_sym < 1e-12);
  printf("%s n=%lld T_A=%lld on %d: ||A X - I||max %.2e, L L^T - A %.2e, in-tile symmetry "
         "%.1e, above tiles %.1e\n",
         bad ? "FAIL" : "ok  ", (long long)n, (long long)t, G, res, lerr, tile_sym,
         nonzero_above);
  for (int d = 0; d < G; ++d) {
    free(data[d]);
    free(x[d]);
    free(panels[d]);
    if (rc == 0 || info == 0) free(work[d]);
  }
  free(a);
  free(m);
  free(inv);
  free(ld);
  return bad;
}

int main(void) {
  int failed = 0;
  setenv("JAXMG_TRACE", "1", 1); /* the per-GPU timer's paths too */
  failed += one_case(24, 8, 1, 1);
  failed += one_case(32, 16, 2, 2);
  failed += one_case(48, 8, 2, 3);
  failed += one_case(60, 4, 3, 4);
  failed += one_case(72, 8, 3, 5);
  printf("%d failed\n", failed);
  return failed != 0;
}
