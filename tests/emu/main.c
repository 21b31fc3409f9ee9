/* The multi-GPU eigensolver's GPU code (csrc/engine/eig_mgpu/sytrd.c,
 * ormtr.c, kernels.cu) run on the CPU under tests/emu/emu_cuda.cc, against
 * its algorithm on host arrays (host.c, itself checked by the C tests):
 * T, tau and the reflectors must agree, and Z = Q I must be the Q that the
 * reflectors make. Run by tests/emu/run.sh; prints one line per case and
 * exits non-zero on a failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/eig_mgpu/host.h"
#include "engine/eig_mgpu/trd.h"

extern long emu_launches;
extern void emu_set_async(unsigned long seed);

static double rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / 9007199254740992.0 - 0.5;
}

#define NAME(path) ((path) == JMG_TRD_REPLICATED ? "replicated" : "owner")

/* The larger of a running maximum and |x|, NaN where either is: C's fmax
 * would drop a NaN, and a NaN result must fail its check. */
static double worse(double m, double x) {
  return isnan(m) || isnan(x) ? NAN : fmax(m, fabs(x));
}

static double *alloc(size_t count) { return calloc(count ? count : 1, sizeof(double)); }

static int one_case(int64_t n, int64_t tile, int ndev, int nb, int64_t pad,
                    jmg_trd_path path, uint64_t seed) {
  double *dense = alloc((size_t)(n * n));
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = c; r < n; ++r) dense[r + c * n] = dense[c + r * n] = rnd(&seed);
  if (pad > 0) {
    const int64_t rp = n / ndev;
    double big = 0.0;
    for (int64_t r = 0; r < n; ++r) {
      double s = 0.0;
      for (int64_t c = 0; c < n; ++c) s += fabs(dense[r + c * n]);
      big = fmax(big, s);
    }
    for (int64_t g = 0; g < n; ++g)
      if (g % rp >= rp - pad)
        for (int64_t k = 0; k < n; ++k)
          dense[g + k * n] = dense[k + g * n] = k == g ? 1.0 + 2.0 * big : 0.0;
  }
  jmg_trd_matrix gm, hm, zm;
  jmg_trd_gpus g;
  memset(&gm, 0, sizeof gm);
  memset(&g, 0, sizeof g);
  gm.n = n;
  gm.tile = tile;
  hm = gm;
  zm = gm;
  g.ndev = ndev;
  void *work[JMG_TRD_MAX_DEV] = {NULL}, *owork[JMG_TRD_MAX_DEV] = {NULL};
  for (int q = 0; q < ndev; ++q) {
    const int64_t cnt = jmg_bc_count(n, tile, ndev, q);
    g.device[q] = q;
    /* Each GPU its stream and cuBLAS handle (emu_cuda.cc keeps a handle's
     * stream): what the streams' order and events allow is then checked
     * under EMU_ASYNC. */
    (void)cudaSetDevice(q);
    (void)cudaStreamCreateWithFlags(&g.stream[q], cudaStreamNonBlocking);
    g.blas[q] = (cublasHandle_t)(uintptr_t)(0x1000 + q);
    gm.a[q] = alloc((size_t)(cnt * n));
    hm.a[q] = alloc((size_t)(cnt * n));
    zm.a[q] = alloc((size_t)(cnt * n));
    for (int64_t lc = 0; lc < cnt; ++lc) {
      const int64_t gc = jmg_bc_global(lc, tile, ndev, q);
      memcpy(gm.a[q] + lc * n, dense + gc * n, (size_t)n * sizeof(double));
      zm.a[q][lc * n + gc] = 1.0;
    }
    memcpy(hm.a[q], gm.a[q], (size_t)(cnt * n) * sizeof(double));
    /* The scratch as XLA's allocator hands it out: what was there before.
     * All bits set is a NaN, so that a read before a write shows. */
    const size_t wb = jmg_trd_reduce_bytes(n, tile, ndev, q, nb),
                 ob = jmg_trd_ormtr_bytes(n, tile, ndev, q);
    work[q] = malloc(wb);
    owork[q] = malloc(ob);
    if (work[q] != NULL) memset(work[q], 0xFF, wb);
    if (owork[q] != NULL) memset(owork[q], 0xFF, ob);
  }
  double *d = alloc((size_t)n), *e = alloc((size_t)n), *tau = alloc((size_t)n);
  double *d2 = alloc((size_t)n), *e2 = alloc((size_t)n), *tau2 = alloc((size_t)n);
  jmg_error err;
  memset(&err, 0, sizeof err);
  jmg_trd_profile prof;
  int rc =
      jmg_trd_reduce(&g, &gm, nb, path, work, d, e, tau, &prof, "emu", &err);
  if (rc == 0) rc = jmg_trd_ormtr(&g, &gm, tau, &zm, owork, "emu", &err);
  for (int q = 0; q < ndev; ++q) { /* as syevd.c's sync_all */
    (void)cudaSetDevice(q);
    (void)cudaStreamSynchronize(g.stream[q]);
  }
  if (rc != 0) {
    printf("FAIL %-10s n %lld tile %lld ndev %d nb %d pad %lld: %s: %s\n",
           NAME(path), (long long)n, (long long)tile, ndev, nb, (long long)pad,
           err.call, err.msg);
    return 1;
  }
  jmg_trd_reduce_host(&hm, ndev, nb, d2, e2, tau2);
  double dt = 0.0, da = 0.0, dz = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    dt = worse(dt, d[i] - d2[i]);
    if (i + 1 < n) dt = worse(worse(dt, e[i] - e2[i]), tau[i] - tau2[i]);
  }
  /* The reflectors (below the diagonal of every column). */
  for (int q = 0; q < ndev; ++q)
    for (int64_t lc = 0; lc < jmg_bc_count(n, tile, ndev, q); ++lc) {
      const int64_t gc = jmg_bc_global(lc, tile, ndev, q);
      for (int64_t r = gc + 1; r < n; ++r)
        da = worse(da, gm.a[q][r + lc * n] - hm.a[q][r + lc * n]);
    }
  /* Q from the host's reflectors, applied to I from the last. */
  double *qd = alloc((size_t)(n * n));
  for (int64_t i = 0; i < n; ++i) qd[i + i * n] = 1.0;
  for (int64_t c = n - 2; c >= 0; --c) {
    const int o = jmg_bc_owner(c, tile, ndev);
    const double *col = hm.a[o] + jmg_bc_local(c, tile, ndev) * n;
    for (int64_t k = 0; k < n; ++k) {
      double s = qd[c + 1 + k * n];
      for (int64_t r = c + 2; r < n; ++r) s += col[r] * qd[r + k * n];
      qd[c + 1 + k * n] -= tau2[c] * s;
      for (int64_t r = c + 2; r < n; ++r) qd[r + k * n] -= tau2[c] * col[r] * s;
    }
  }
  for (int q = 0; q < ndev; ++q)
    for (int64_t lc = 0; lc < jmg_bc_count(n, tile, ndev, q); ++lc) {
      const int64_t gc = jmg_bc_global(lc, tile, ndev, q);
      for (int64_t r = 0; r < n; ++r)
        dz = worse(dz, zm.a[q][r + lc * n] - qd[r + gc * n]);
    }
  /* The GPU code's own results, whatever the summation order: A = Z T Z^T
   * and Z^T Z = I, Z = Q I from its reflectors (ormtr), T from its d, e. */
  double *zd = alloc((size_t)(n * n)), *zt = alloc((size_t)(n * n));
  for (int q = 0; q < ndev; ++q)
    for (int64_t lc = 0; lc < jmg_bc_count(n, tile, ndev, q); ++lc)
      memcpy(zd + jmg_bc_global(lc, tile, ndev, q) * n, zm.a[q] + lc * n,
             (size_t)n * sizeof(double));
  for (int64_t c = 0; c < n; ++c) /* Z T, column by column */
    for (int64_t r = 0; r < n; ++r)
      zt[r + c * n] = zd[r + c * n] * d[c] +
                      (c > 0 ? zd[r + (c - 1) * n] * e[c - 1] : 0.0) +
                      (c + 1 < n ? zd[r + (c + 1) * n] * e[c] : 0.0);
  double res = 0.0, orth = 0.0, amax = 0.0;
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = 0; r < n; ++r) {
      double s = 0.0, o = 0.0;
      for (int64_t k = 0; k < n; ++k) {
        s += zt[r + k * n] * zd[c + k * n];
        o += zd[k + r * n] * zd[k + c * n];
      }
      res = worse(res, s - dense[r + c * n]);
      orth = worse(orth, o - (r == c ? 1.0 : 0.0));
      amax = fmax(amax, fabs(dense[r + c * n]));
    }
  res /= amax > 0.0 ? amax : 1.0;
  free(zd);
  free(zt);
  /* Summation orders differ (atomics, gemm): agreement to rounding, far
   * below what an index slip would give; the backward error and Z's
   * orthogonality within a small multiple of n eps. A padded matrix splits
   * (columns reduced to rounding errors, whose reflectors any summation
   * order changes): its T and reflectors are not unique, only the backward
   * error and Z's orthogonality are checked. A NaN anywhere fails (worse). */
  const double tight = 16.0 * (double)(n > 1 ? n : 1) * 2.2e-16;
  const int same = pad > 0 || (dt < 1e-10 && da < 1e-10 && dz < 1e-10);
  const int bad = !(same && res < tight && orth < tight);
  fflush(stdout);
  printf(
      "%s %-10s n %lld tile %lld ndev %d nb %d pad %lld: |T - T_host| %.1e, "
      "|V - V_host| %.1e, |Q I - Q| %.1e; |Z T Z^T - A|/|A| %.1e, |Z^T Z - "
      "I| %.1e\n",
      bad ? "FAIL" : "ok  ", NAME(path), (long long)n, (long long)tile, ndev,
      nb, (long long)pad, dt, da, dz, res, orth);
  fflush(stdout);
  for (int q = 0; q < ndev; ++q) {
    free(gm.a[q]);
    free(hm.a[q]);
    free(zm.a[q]);
    free(work[q]);
    free(owork[q]);
    (void)cudaStreamDestroy(g.stream[q]);
  }
  free(dense);
  free(qd);
  free(d), free(e), free(tau), free(d2), free(e2), free(tau2);
  return bad;
}

/* EMU_PATHS: "replicated", "owner" or both (unset); EMU_CASES: how many of
 * the cases, from the first (unset: all); EMU_ASYNC=seed: work queued on
 * its stream and run in a random order the streams and events allow
 * (emu_cuda.cc), the kernels' blocks too; EMU_ONE="n,tile,ndev,nb[,pad]":
 * that case alone. */
int main(void) {
  /* Then two padded matrices (below), and syevd's layouts on 2 GPUs at
   * T_A = 100 (panels of 64 and 36 columns, 32-row tiles of the column
   * kernels), on the default (replicated) path only (a few minutes):
   * N = 300 as the Python layer runs it, each shard of 150 rows padded to
   * 200 with 50 rows and columns of the padding value (a matrix that
   * splits: columns reduced to rounding errors, tau 0 where exactly zero;
   * its eigenvalues alone came back NaN once on 2 H200, session 21), and
   * 3 and 2.5 tiles over two GPUs, uneven, as the engine takes them from C
   * (N = 500, 5 tiles, about 5 minutes: EMU_ONE=500,100,2,64). */
  const struct {
    int64_t n, tile;
    int ndev, nb;
    int64_t pad;
    int replicated_only;
  } cases[] = {{1, 4, 1, 4, 0, 0},        {2, 1, 2, 1, 0, 0},
               {5, 2, 2, 2, 0, 0},        {33, 8, 1, 8, 0, 0},
               {33, 8, 2, 8, 0, 0},       {40, 8, 2, 3, 0, 0},
               {47, 12, 2, 8, 0, 0},      {40, 8, 3, 8, 0, 0},
               {70, 16, 2, 16, 0, 0},     {64, 32, 2, 16, 0, 0},
               {150, 40, 2, 32, 0, 0},    {131, 64, 2, 64, 0, 0},
               {60, 10, 3, 6, 4, 0},      {64, 16, 2, 16, 8, 0},
               {400, 100, 2, 64, 50, 1},  {300, 100, 2, 64, 0, 1},
               {250, 100, 2, 64, 0, 1}};
  const char *paths = getenv("EMU_PATHS"), *ncases = getenv("EMU_CASES");
  const char *one = getenv("EMU_ONE"), *async = getenv("EMU_ASYNC");
  if (async != NULL) emu_set_async(strtoul(async, NULL, 10));
  const jmg_trd_path first = paths != NULL && strcmp(paths, "owner") == 0
                                 ? JMG_TRD_OWNER
                                 : JMG_TRD_REPLICATED;
  if (one != NULL) {
    long long n = 0, t = 0, pd = 0;
    int nd = 0, nb = 0;
    if (sscanf(one, "%lld,%lld,%d,%d,%lld", &n, &t, &nd, &nb, &pd) < 4) {
      printf("EMU_ONE: \"n,tile,ndev,nb[,pad]\", not \"%s\"\n", one);
      return 2;
    }
    return one_case(n, t, nd, nb, pd, first, 99);
  }
  size_t count = sizeof cases / sizeof cases[0];
  if (ncases != NULL && (size_t)atoi(ncases) < count)
    count = (size_t)atoi(ncases);
  int fails = 0;
  for (int path = JMG_TRD_REPLICATED; path <= JMG_TRD_OWNER; ++path) {
    if (paths != NULL && strcmp(paths, NAME(path)) != 0) continue;
    for (size_t i = 0; i < count; ++i)
      if (path == JMG_TRD_REPLICATED || !cases[i].replicated_only)
        fails += one_case(cases[i].n, cases[i].tile, cases[i].ndev,
                          cases[i].nb, cases[i].pad, (jmg_trd_path)path,
                          40 + i);
  }
  printf("%d failed; %ld kernel launches emulated\n", fails, emu_launches);
  return fails != 0;
}
