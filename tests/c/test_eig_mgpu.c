/* The multi-GPU eigensolver's host-side logic (engine/eig_mgpu/map.h,
 * host.h): the block-cyclic maps, the split of the symmetric product over
 * the GPUs' columns, and the reduction's bookkeeping (panels, per-column
 * steps, trailing update per GPU) run on host arrays and checked by
 * A = Q T Q^T and Q^T Q = I. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/eig_mgpu/host.h"
#include "test.h"

TEST(eig_mgpu_maps_agree_with_counting) {
  const int64_t ns[] = {1, 7, 64, 100, 129};
  const int64_t tiles[] = {1, 3, 8, 64};
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; ++a)
    for (size_t b = 0; b < sizeof tiles / sizeof tiles[0]; ++b)
      for (int ndev = 1; ndev <= 4; ++ndev) {
        const int64_t n = ns[a], tile = tiles[b];
        int64_t seen[4] = {0, 0, 0, 0};
        for (int64_t c = 0; c < n; ++c) {
          const int o = jmg_bc_owner(c, tile, ndev);
          const int64_t lc = jmg_bc_local(c, tile, ndev);
          CHECK_EQ(lc, seen[o]); /* each GPU's columns in order */
          CHECK_EQ(jmg_bc_global(lc, tile, ndev, o), c);
          seen[o]++;
        }
        for (int d = 0; d < ndev; ++d) {
          CHECK_EQ(jmg_bc_count(n, tile, ndev, d), seen[d]);
          for (int64_t c = 0; c <= n; ++c) {
            int64_t want = seen[d];
            for (int64_t lc = 0; lc < seen[d]; ++lc)
              if (jmg_bc_global(lc, tile, ndev, d) >= c) {
                want = lc;
                break;
              }
            CHECK_EQ(jmg_bc_first_from(c, n, tile, ndev, d), want);
          }
        }
        for (int64_t nb = 1; nb <= 9; nb += 4) {
          int64_t w = 0;
          for (int64_t i = 0; i < n; i += w) {
            w = jmg_bc_panel(i, n - 1, tile, nb);
            CHECK(w >= 1 && w <= nb);
            CHECK_EQ(jmg_bc_owner(i + w - 1, tile, ndev),
                     jmg_bc_owner(i, tile, ndev));
            CHECK_EQ((i + w - 1) / tile, i / tile);
          }
        }
      }
}

static double rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / 9007199254740992.0 - 0.5;
}

/* A random symmetric n x n (dense, both triangles) and its block-cyclic
 * copy over ndev GPUs. */
static int make(int64_t n, int64_t tile, int ndev, uint64_t seed, double **dense,
                jmg_trd_matrix *m) {
  *dense = malloc((size_t)(n * n) * sizeof(double));
  if (*dense == NULL) return -1;
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = c; r < n; ++r) {
      const double x = rnd(&seed);
      (*dense)[r + c * n] = x;
      (*dense)[c + r * n] = x;
    }
  m->n = n;
  m->tile = tile;
  for (int d = 0; d < ndev; ++d) {
    const int64_t cnt = jmg_bc_count(n, tile, ndev, d);
    m->a[d] = malloc((size_t)((cnt > 0 ? cnt : 1) * n) * sizeof(double));
    if (m->a[d] == NULL) return -1;
    for (int64_t lc = 0; lc < cnt; ++lc)
      memcpy(m->a[d] + lc * n,
             *dense + jmg_bc_global(lc, tile, ndev, d) * n,
             (size_t)n * sizeof(double));
  }
  return 0;
}

static void drop(double *dense, jmg_trd_matrix *m, int ndev) {
  free(dense);
  for (int d = 0; d < ndev; ++d) free(m->a[d]);
}

TEST(eig_mgpu_split_symv_sums_to_the_trailing_product) {
  const int64_t n = 37;
  uint64_t seed = 7;
  for (int ndev = 1; ndev <= 3; ++ndev)
    for (int64_t tile = 1; tile <= 8; tile += 7)
      for (int64_t j = 0; j < n; j += 9) {
        double *dense = NULL;
        jmg_trd_matrix m;
        memset(&m, 0, sizeof m);
        CHECK(make(n, tile, ndev, 11 + (uint64_t)j, &dense, &m) == 0);
        double v[37], ys[3][37], *y[3] = {ys[0], ys[1], ys[2]};
        for (int64_t r = 0; r < n; ++r) v[r] = r >= j ? rnd(&seed) : 0.0;
        /* The upper triangle must not be read: spoil it. */
        for (int d = 0; d < ndev; ++d)
          for (int64_t lc = 0; lc < jmg_bc_count(n, tile, ndev, d); ++lc)
            for (int64_t r = 0; r < jmg_bc_global(lc, tile, ndev, d); ++r)
              m.a[d][r + lc * n] = 1e300;
        jmg_trd_split_symv_host(&m, ndev, j, v, y);
        for (int64_t r = j; r < n; ++r) {
          double want = 0.0, got = 0.0;
          for (int64_t c = j; c < n; ++c) want += dense[r + c * n] * v[c];
          for (int d = 0; d < ndev; ++d) got += y[d][r];
          if (fabs(got - want) > 1e-13) {
            TEST_FAIL_AT("ndev %d tile %lld j %lld row %lld: %.17g != %.17g",
                         ndev, (long long)tile, (long long)j, (long long)r,
                         got, want);
            drop(dense, &m, ndev);
            return;
          }
        }
        drop(dense, &m, ndev);
      }
}

/* max |Q T Q^T - A| and max |Q^T Q - I|, Q = H(0) ... H(n-2) from the
 * reflectors left in m (column c: v(c+1) = 1, v(r) = A(r, c) below). */
static void check_qtq(const jmg_trd_matrix *m, int ndev, const double *dense,
                      const double *d, const double *e, const double *tau,
                      double *err_a, double *err_q) {
  const int64_t n = m->n;
  double *q = calloc((size_t)(n * n), sizeof(double));
  double *t = calloc((size_t)(n * n), sizeof(double));
  double *v = calloc((size_t)n, sizeof(double));
  for (int64_t i = 0; i < n; ++i) q[i + i * n] = 1.0;
  /* Q = H(0) (H(1) (... H(n-2))): apply from the last, on the left. */
  for (int64_t c = n - 2; c >= 0; --c) {
    const int o = jmg_bc_owner(c, m->tile, ndev);
    const double *col = m->a[o] + jmg_bc_local(c, m->tile, ndev) * n;
    for (int64_t r = 0; r < n; ++r) v[r] = r < c + 1 ? 0.0 : col[r];
    v[c + 1] = 1.0;
    for (int64_t k = 0; k < n; ++k) {
      double s = 0.0;
      for (int64_t r = c + 1; r < n; ++r) s += v[r] * q[r + k * n];
      for (int64_t r = c + 1; r < n; ++r) q[r + k * n] -= tau[c] * v[r] * s;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    t[i + i * n] = d[i];
    if (i + 1 < n) t[i + 1 + i * n] = t[i + (i + 1) * n] = e[i];
  }
  *err_a = *err_q = 0.0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double s = 0.0, g = 0.0;
      for (int64_t k = 0; k < n; ++k) {
        double qt = 0.0; /* (Q T)(r, k) */
        for (int64_t l = (k > 0 ? k - 1 : 0); l <= k + 1 && l < n; ++l)
          qt += q[r + l * n] * t[l + k * n];
        s += qt * q[c + k * n];
        g += q[k + r * n] * q[k + c * n];
      }
      const double ea = fabs(s - dense[r + c * n]),
                   eq = fabs(g - (r == c ? 1.0 : 0.0));
      if (ea > *err_a) *err_a = ea;
      if (eq > *err_q) *err_q = eq;
    }
  free(q);
  free(t);
  free(v);
}

/* Reduces m (nb's panels) on the host and measures it against dense:
 * *finite (where finite is not NULL) whether T came out finite, err_a
 * and err_q as check_qtq's.
 * Returns the reduction's code (0: done). */
static int reduce_and_check(const jmg_trd_matrix *m, int ndev, int nb,
                            const double *dense, int *finite, double *err_a,
                            double *err_q) {
  const int64_t n = m->n;
  double *d = calloc((size_t)n, sizeof(double));
  double *e = calloc((size_t)n, sizeof(double));
  double *tau = calloc((size_t)n, sizeof(double));
  int rc = d != NULL && e != NULL && tau != NULL ? 0 : -1;
  if (rc == 0) rc = jmg_trd_reduce_host(m, ndev, nb, d, e, tau);
  int ok = 1;
  *err_a = *err_q = 0.0;
  if (rc == 0) {
    for (int64_t r = 0; r < n; ++r)
      ok = ok && isfinite(d[r]) && (r + 1 == n || isfinite(e[r]));
    if (finite != NULL) *finite = ok;
    check_qtq(m, ndev, dense, d, e, tau, err_a, err_q);
  }
  free(d);
  free(e);
  free(tau);
  return rc;
}

TEST(eig_mgpu_reduction_on_host_arrays_is_an_orthogonal_similarity) {
  const struct {
    int64_t n, tile;
    int ndev, nb;
  } cases[] = {{1, 4, 1, 4},   {2, 1, 2, 1},  {9, 2, 2, 2},   {33, 4, 2, 4},
               {40, 8, 2, 3},  {40, 8, 3, 8}, {41, 16, 2, 8}, {50, 6, 4, 16},
               {64, 32, 2, 16}, {31, 5, 1, 128}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int64_t n = cases[i].n;
    const int ndev = cases[i].ndev;
    double *dense = NULL;
    jmg_trd_matrix m;
    memset(&m, 0, sizeof m);
    CHECK(make(n, cases[i].tile, ndev, 100 + i, &dense, &m) == 0);
    double err_a = 0.0, err_q = 0.0;
    CHECK_EQ(reduce_and_check(&m, ndev, cases[i].nb, dense, NULL, &err_a,
                              &err_q),
             0);
    drop(dense, &m, ndev);
    if (err_a > 1e-13 * (double)n || err_q > 1e-13 * (double)n) {
      TEST_FAIL_AT("case %zu (n %lld tile %lld ndev %d nb %d): |QTQ^T - A| "
                   "%.3g, |Q^TQ - I| %.3g",
                   i, (long long)n, (long long)cases[i].tile, ndev,
                   cases[i].nb, err_a, err_q);
      return;
    }
  }
}

/* syevd's padded layout (python/jaxmg/_src/_geometry.py pad_shard): each
 * of ndev shards of n / ndev rows ends with pad rows and columns of the
 * identity times a value above the spectrum, so A splits and columns
 * reduce to rounding errors (or to exact zeros: tau 0, H = I). N = 300 on
 * 2 GPUs at T_A = 100 runs as such an A of N = 400 (2 GPU run, session
 * 21: its eigenvalues alone came back NaN once; the same reduction on the
 * GPU code is tests/emu/main.c's case 400, 100, 2, 64, pad 50). T must be
 * finite and A = Q T Q^T. */
TEST(eig_mgpu_reduction_of_a_padded_matrix_is_an_orthogonal_similarity) {
  const struct {
    int64_t n, tile;
    int ndev, nb;
    int64_t pad;
  } cases[] = {{80, 20, 2, 16, 10}, {60, 10, 3, 6, 5}, {48, 12, 2, 8, 12}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int64_t n = cases[i].n, rp = n / cases[i].ndev, pad = cases[i].pad;
    const int ndev = cases[i].ndev;
    double *dense = NULL;
    jmg_trd_matrix m;
    memset(&m, 0, sizeof m);
    CHECK(make(n, cases[i].tile, ndev, 200 + i, &dense, &m) == 0);
    double big = 0.0;
    for (int64_t r = 0; r < n; ++r) {
      double s = 0.0;
      for (int64_t c = 0; c < n; ++c) s += fabs(dense[r + c * n]);
      if (s > big) big = s;
    }
    for (int64_t g = 0; g < n; ++g)
      if (g % rp >= rp - pad)
        for (int64_t k = 0; k < n; ++k)
          dense[g + k * n] = dense[k + g * n] = k == g ? 1.0 + 2.0 * big : 0.0;
    for (int d = 0; d < ndev; ++d)
      for (int64_t lc = 0; lc < jmg_bc_count(n, cases[i].tile, ndev, d); ++lc)
        memcpy(m.a[d] + lc * n,
               dense + jmg_bc_global(lc, cases[i].tile, ndev, d) * n,
               (size_t)n * sizeof(double));
    int finite = 1;
    double err_a = 0.0, err_q = 0.0;
    CHECK_EQ(reduce_and_check(&m, ndev, cases[i].nb, dense, &finite, &err_a,
                              &err_q),
             0);
    drop(dense, &m, ndev);
    if (!finite || !(err_a <= 1e-13 * (double)n * big) ||
        !(err_q <= 1e-13 * (double)n)) {
      TEST_FAIL_AT("case %zu (n %lld tile %lld ndev %d nb %d pad %lld): T %s, "
                   "|QTQ^T - A| %.3g, |Q^TQ - I| %.3g",
                   i, (long long)n, (long long)cases[i].tile, ndev,
                   cases[i].nb, (long long)pad, finite ? "finite" : "not finite",
                   err_a, err_q);
      return;
    }
  }
}

TEST(eig_mgpu_reduction_refuses_a_panel_out_of_range) {
  jmg_trd_matrix m;
  memset(&m, 0, sizeof m);
  m.n = 4;
  m.tile = 2;
  double d[4], e[4], tau[4];
  CHECK_EQ(jmg_trd_reduce_host(&m, 1, 0, d, e, tau), -1);
  CHECK_EQ(jmg_trd_reduce_host(&m, 1, JMG_TRD_NB_MAX + 1, d, e, tau), -1);
}
