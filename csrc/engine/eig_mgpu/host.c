/* The multi-GPU reduction's algorithm on host arrays (host.h): the steps
 * of engine/eig_mgpu/sytrd.c and kernels.cu, in their order, each as a
 * plain loop. */
#include "engine/eig_mgpu/host.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void jmg_trd_split_symv_host(const jmg_trd_matrix *a, int ndev, int64_t j,
                             const double *v, double *const *y) {
  const int64_t n = a->n, tile = a->tile;
  for (int d = 0; d < ndev; ++d) {
    memset(y[d], 0, (size_t)n * sizeof(double));
    const int64_t cnt = jmg_bc_count(n, tile, ndev, d);
    for (int64_t lc = 0; lc < cnt; ++lc) {
      const int64_t gc = jmg_bc_global(lc, tile, ndev, d);
      if (gc < j) continue;
      const double *col = a->a[d] + lc * n;
      for (int64_t r = gc; r < n; ++r) {
        y[d][r] += col[r] * v[gc];
        if (r > gc) y[d][gc] += col[r] * v[r];
      }
    }
  }
}

int jmg_trd_reduce_host(const jmg_trd_matrix *a, int ndev, int nb, double *d,
                        double *e, double *tau) {
  const int64_t n = a->n, tile = a->tile;
  if (nb < 1 || nb > JMG_TRD_NB_MAX || ndev < 1 || ndev > JMG_TRD_MAX_DEV)
    return -1;
  const size_t nn = (size_t)(n > 0 ? n : 1);
  double *w = calloc(nn * (size_t)nb, sizeof(double));
  double *v = calloc(nn, sizeof(double));
  double *ys = calloc(nn * (size_t)ndev, sizeof(double));
  double *y[JMG_TRD_MAX_DEV];
  double p1[JMG_TRD_NB_MAX], p2[JMG_TRD_NB_MAX], wc[JMG_TRD_NB_MAX],
      vc[JMG_TRD_NB_MAX];
  if (w == NULL || v == NULL || ys == NULL) {
    free(w);
    free(v);
    free(ys);
    return -1;
  }
  for (int q = 0; q < ndev; ++q) y[q] = ys + (size_t)q * nn;
  int64_t wd = 0;
  for (int64_t i = 0; i < n; i += wd) {
    wd = jmg_bc_panel(i, n - 1, tile, nb);
    const int o = jmg_bc_owner(i, tile, ndev);
    double *vp = a->a[o] + jmg_bc_local(i, tile, ndev) * n;
    double dot = 0.0;
    int64_t c = i;
    for (int64_t k = 0; k < wd; ++k) {
      c = i + k;
      double *acol = vp + k * n;
      /* update_col */
      if (k > 0) {
        const double a2 = -0.5 * tau[c - 1] * dot;
        double *wl = w + (k - 1) * n, *vl = vp + (k - 1) * n;
        for (int64_t q = 0; q < k; ++q) {
          vc[q] = vp[c + q * n];
          wc[q] = w[c + q * n] + (q == k - 1 ? a2 * vc[q] : 0.0);
        }
        for (int64_t r = c; r < n; ++r) {
          const double wprev = wl[r] + a2 * vl[r];
          if (r > c) wl[r] = wprev;
          double acc = acol[r];
          for (int64_t q = 0; q < k - 1; ++q)
            acc -= vp[r + q * n] * wc[q] + w[r + q * n] * vc[q];
          acc -= vl[r] * wc[k - 1] + wprev * vc[k - 1];
          acol[r] = acc;
        }
      }
      d[c] = acol[c];
      if (c == n - 1) break;
      double x2 = 0.0;
      for (int64_t r = c + 2; r < n; ++r) x2 += acol[r] * acol[r];
      /* house */
      const double al = acol[c + 1], norm = sqrt(al * al + x2);
      double beta = al, t = 0.0, scale = 1.0;
      if (x2 > 0.0 && norm >= DBL_MIN) {
        beta = al >= 0.0 ? -norm : norm;
        t = (beta - al) / beta;
        scale = 1.0 / (al - beta);
      }
      tau[c] = t;
      e[c] = beta;
      for (int64_t r = c + 1; r < n; ++r) {
        acol[r] = r == c + 1 ? 1.0 : acol[r] * scale;
        v[r] = acol[r];
      }
      /* symv, split over the GPUs' columns; p1 = W^T v, p2 = V^T v */
      const int64_t j = c + 1;
      jmg_trd_split_symv_host(a, ndev, j, v, y);
      for (int64_t q = 0; q < k; ++q) {
        p1[q] = p2[q] = 0.0;
        for (int64_t r = j; r < n; ++r) {
          p1[q] += w[r + q * n] * v[r];
          p2[q] += vp[r + q * n] * v[r];
        }
      }
      /* finish_w */
      dot = 0.0;
      for (int64_t r = j; r < n; ++r) {
        double yv = 0.0;
        for (int q = 0; q < ndev; ++q) yv += y[q][r];
        for (int64_t q = 0; q < k; ++q)
          yv -= vp[r + q * n] * p1[q] + w[r + q * n] * p2[q];
        w[r + k * n] = t * yv;
        dot += w[r + k * n] * v[r];
      }
    }
    if (i + wd >= n) break;
    /* fix_w on the panel's last column, then each GPU's trailing columns
     * (every row from the panel's end) -= V W(cols)^T + W V(cols)^T */
    {
      const double a2 = -0.5 * tau[c] * dot;
      double *wl = w + (wd - 1) * n, *vl = vp + (wd - 1) * n;
      for (int64_t r = c + 1; r < n; ++r) wl[r] += a2 * vl[r];
    }
    const int64_t r0 = i + wd;
    for (int q = 0; q < ndev; ++q) {
      const int64_t cnt = jmg_bc_count(n, tile, ndev, q);
      for (int64_t lc = jmg_bc_first_from(r0, n, tile, ndev, q); lc < cnt;
           ++lc) {
        const int64_t g = jmg_bc_global(lc, tile, ndev, q);
        double *col = a->a[q] + lc * n;
        for (int64_t r = r0; r < n; ++r) {
          double s = 0.0;
          for (int64_t p = 0; p < wd; ++p)
            s += vp[r + p * n] * w[g + p * n] + w[r + p * n] * vp[g + p * n];
          col[r] -= s;
        }
      }
    }
  }
  free(w);
  free(v);
  free(ys);
  return 0;
}
