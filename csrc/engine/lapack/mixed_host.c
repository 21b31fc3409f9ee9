/* The host arithmetic of the LAPACK engine's mixed-precision solves
 * (mixed.h): conversions between a dtype and its lower precision, norms
 * that cannot overflow, and the residuals b - A x in A's dtype. Plain
 * loops over column-major arrays (lda n): each is O(n^2 nrhs) at most,
 * beside the O(n^3) factorization. */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "engine/lapack/mixed.h"

/* Reals in count elements of dtype (two per complex element). */
static size_t reals(jmg_dtype dtype, size_t count) {
  return jmg_dtype_is_complex(dtype) ? 2 * count : count;
}

int jmg_mixed_narrow(jmg_dtype dtype, const void *src, void *dst,
                     size_t count) {
  const double *s = src;
  float *d = dst;
  int overflow = 0;
  for (size_t i = 0, k = reals(dtype, count); i < k; ++i) {
    overflow |= fabs(s[i]) > (double)FLT_MAX;
    d[i] = (float)s[i];
  }
  return overflow;
}

void jmg_mixed_widen(jmg_dtype dtype, const void *src, void *dst, size_t count,
                     int add) {
  const float *s = src;
  double *d = dst;
  const size_t k = reals(dtype, count);
  if (add)
    for (size_t i = 0; i < k; ++i) d[i] += (double)s[i];
  else
    for (size_t i = 0; i < k; ++i) d[i] = (double)s[i];
}

/* sqrt(sum v_i^2) over k reals, scaled by the largest |v_i| so that
 * nothing overflows or underflows; NaN where a value is NaN. */
static double scaled_norm(const double *v, size_t k, size_t stride) {
  double big = 0.0;
  for (size_t i = 0; i < k; ++i) {
    const double a = fabs(v[i * stride]);
    if (isnan(a)) return NAN;
    if (a > big) big = a;
  }
  if (big == 0.0 || isinf(big)) return big;
  double sum = 0.0;
  for (size_t i = 0; i < k; ++i) {
    const double q = v[i * stride] / big;
    sum += q * q;
  }
  return big * sqrt(sum);
}

void jmg_mixed_column_norms(jmg_dtype dtype, const void *v, int64_t n,
                            int64_t nrhs, double *out) {
  const size_t col = reals(dtype, (size_t)n);
  for (int64_t j = 0; j < nrhs; ++j)
    out[j] = scaled_norm((const double *)v + (size_t)j * col, col, 1);
}

/* The Frobenius norm of the Hermitian matrix whose lower triangle a holds
 * (the diagonal's real parts, the strict lower part twice), or of all of a
 * (hermitian 0), scaled as scaled_norm. */
double jmg_mixed_frobenius(jmg_dtype dtype, const void *a, int64_t n,
                           int hermitian) {
  const int cplx = jmg_dtype_is_complex(dtype);
  const double *v = a;
  const size_t ld = reals(dtype, (size_t)n);
  double big = 0.0;
  for (int64_t j = 0; j < n; ++j)
    for (size_t i = hermitian ? reals(dtype, (size_t)j) : 0; i < ld; ++i) {
      const double x = fabs(v[(size_t)j * ld + i]);
      if (isnan(x)) return NAN;
      if (x > big) big = x;
    }
  if (big == 0.0 || isinf(big)) return big;
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const size_t first = hermitian ? reals(dtype, (size_t)j) : 0;
    for (size_t i = first; i < ld; ++i) {
      /* The diagonal's imaginary part is not read (LAPACK's potrf). */
      if (hermitian && cplx && i == first + 1) continue;
      const double q = v[(size_t)j * ld + i] / big;
      const int diagonal = hermitian && i < first + (cplx ? 2 : 1);
      sum += (diagonal ? 1.0 : 2.0) * q * q;
    }
  }
  return big * sqrt(sum);
}

/* r = b - H x, H Hermitian of which the lower triangle of h is read, one
 * column at a time (real and complex). */
static void hermitian_residual_d(const double *h, const double *b,
                                 const double *x, double *r, int64_t n) {
  memcpy(r, b, (size_t)n * sizeof *r);
  for (int64_t j = 0; j < n; ++j) {
    const double *col = h + (size_t)j * (size_t)n;
    const double xj = x[j];
    double s = col[j] * xj;
    for (int64_t i = j + 1; i < n; ++i) {
      r[i] -= col[i] * xj;
      s += col[i] * x[i];
    }
    r[j] -= s;
  }
}

static void hermitian_residual_z(const double complex *h,
                                 const double complex *b,
                                 const double complex *x, double complex *r,
                                 int64_t n) {
  memcpy(r, b, (size_t)n * sizeof *r);
  for (int64_t j = 0; j < n; ++j) {
    const double complex *col = h + (size_t)j * (size_t)n;
    const double complex xj = x[j];
    double complex s = creal(col[j]) * xj;
    for (int64_t i = j + 1; i < n; ++i) {
      r[i] -= col[i] * xj;
      s += conj(col[i]) * x[i];
    }
    r[j] -= s;
  }
}

/* r = b - op(M) x for a general M: op M itself (transpose 0) or Mᵀ, not
 * conjugated (transpose 1). */
static void general_residual_d(const double *m, const double *b,
                               const double *x, double *r, int64_t n,
                               int transpose) {
  for (int64_t j = 0; j < n; ++j) {
    const double *col = m + (size_t)j * (size_t)n;
    if (transpose) {
      double s = 0.0;
      for (int64_t i = 0; i < n; ++i) s += col[i] * x[i];
      r[j] = b[j] - s;
    } else {
      if (j == 0) memcpy(r, b, (size_t)n * sizeof *r);
      for (int64_t i = 0; i < n; ++i) r[i] -= col[i] * x[j];
    }
  }
}

static void general_residual_z(const double complex *m, const double complex *b,
                               const double complex *x, double complex *r,
                               int64_t n, int transpose) {
  for (int64_t j = 0; j < n; ++j) {
    const double complex *col = m + (size_t)j * (size_t)n;
    if (transpose) {
      double complex s = 0.0;
      for (int64_t i = 0; i < n; ++i) s += col[i] * x[i];
      r[j] = b[j] - s;
    } else {
      if (j == 0) memcpy(r, b, (size_t)n * sizeof *r);
      for (int64_t i = 0; i < n; ++i) r[i] -= col[i] * x[j];
    }
  }
}

void jmg_mixed_residual(jmg_dtype dtype, const void *a, int64_t n,
                        const void *b, const void *x, void *r, int64_t nrhs,
                        jmg_mixed_kind kind) {
  const size_t col = (size_t)n;
  for (int64_t k = 0; k < nrhs; ++k) {
    const size_t at = (size_t)k * col;
    if (dtype == JMG_C128) {
      const double complex *bk = (const double complex *)b + at;
      const double complex *xk = (const double complex *)x + at;
      double complex *rk = (double complex *)r + at;
      if (kind == JMG_MIXED_HERMITIAN)
        hermitian_residual_z(a, bk, xk, rk, n);
      else
        general_residual_z(a, bk, xk, rk, n, kind == JMG_MIXED_TRANSPOSED);
    } else {
      const double *bk = (const double *)b + at;
      const double *xk = (const double *)x + at;
      double *rk = (double *)r + at;
      if (kind == JMG_MIXED_HERMITIAN)
        hermitian_residual_d(a, bk, xk, rk, n);
      else
        general_residual_d(a, bk, xk, rk, n, kind == JMG_MIXED_TRANSPOSED);
    }
  }
}
