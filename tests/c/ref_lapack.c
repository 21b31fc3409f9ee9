/* Reference LAPACK for the CPU handlers' tests (ref_lapack.h). */
#include "ref_lapack.h"

#include <math.h>
#include <stdlib.h>

#include "fake_xla.h" /* jaxmg_cpu_register_lapack */

double complex ref_load(jmg_dtype t, const void *p, size_t i) {
  switch (t) {
    case JMG_F32:
      return ((const float *)p)[i];
    case JMG_F64:
      return ((const double *)p)[i];
    case JMG_C64:
      return ((const float complex *)p)[i];
    default:
      return ((const double complex *)p)[i];
  }
}

void ref_store(jmg_dtype t, void *p, size_t i, double complex v) {
  switch (t) {
    case JMG_F32:
      ((float *)p)[i] = (float)creal(v);
      break;
    case JMG_F64:
      ((double *)p)[i] = creal(v);
      break;
    case JMG_C64:
      ((float complex *)p)[i] = (float complex)v;
      break;
    default:
      ((double complex *)p)[i] = v;
      break;
  }
}

/* ---- double, computed in double ------------------------------------------ */

static void ref_dpotrf(char *uplo, int *n, void *a, int *lda, int *info) {
  double *A = a;
  const int N = *n, ld = *lda;
  *info = 0;
  if (*uplo != 'L') {
    *info = -1;
    return;
  }
  for (int j = 0; j < N; ++j) {
    double d = A[j + j * ld];
    for (int k = 0; k < j; ++k) d -= A[j + k * ld] * A[j + k * ld];
    if (!(d > 0.0)) {
      A[j + j * ld] = d;
      *info = j + 1;
      return;
    }
    d = sqrt(d);
    A[j + j * ld] = d;
    for (int i = j + 1; i < N; ++i) {
      double s = A[i + j * ld];
      for (int k = 0; k < j; ++k) s -= A[i + k * ld] * A[j + k * ld];
      A[i + j * ld] = s / d;
    }
  }
}

static void ref_dpotrs(char *uplo, int *n, int *nrhs, void *a, int *lda,
                       void *b, int *ldb, int *info) {
  const double *L = a;
  double *B = b;
  const int N = *n, ld = *lda, ldB = *ldb;
  *info = 0;
  if (*uplo != 'L') {
    *info = -1;
    return;
  }
  for (int r = 0; r < *nrhs; ++r) {
    double *y = B + (size_t)r * (size_t)ldB;
    for (int i = 0; i < N; ++i) { /* L y = b */
      double s = y[i];
      for (int k = 0; k < i; ++k) s -= L[i + k * ld] * y[k];
      y[i] = s / L[i + i * ld];
    }
    for (int i = N - 1; i >= 0; --i) { /* L^T x = y */
      double s = y[i];
      for (int k = i + 1; k < N; ++k) s -= L[k + i * ld] * y[k];
      y[i] = s / L[i + i * ld];
    }
  }
}

static void ref_dpotri(char *uplo, int *n, void *a, int *lda, int *info) {
  double *A = a;
  const int N = *n, ld = *lda;
  *info = 0;
  if (*uplo != 'L') {
    *info = -1;
    return;
  }
  double *W = calloc((size_t)N * (size_t)N, sizeof *W); /* inv(L), col-major */
  if (W == NULL) abort();
  for (int j = 0; j < N; ++j) {
    if (A[j + j * ld] == 0.0) {
      *info = j + 1;
      free(W);
      return;
    }
    W[j + j * N] = 1.0 / A[j + j * ld];
    for (int i = j + 1; i < N; ++i) {
      double s = 0.0;
      for (int k = j; k < i; ++k) s += A[i + k * ld] * W[k + j * N];
      W[i + j * N] = -s / A[i + i * ld];
    }
  }
  /* inv(A) = inv(L)^T inv(L); only the lower triangle is written. */
  for (int j = 0; j < N; ++j)
    for (int i = j; i < N; ++i) {
      double s = 0.0;
      for (int k = i; k < N; ++k) s += W[k + i * N] * W[k + j * N];
      A[i + j * ld] = s;
    }
  free(W);
}

void register_reference_lapack(void) {
  if (jaxmg_cpu_register_lapack("dpotrf", (void *)ref_dpotrf) != 0 ||
      jaxmg_cpu_register_lapack("dpotrs", (void *)ref_dpotrs) != 0 ||
      jaxmg_cpu_register_lapack("dpotri", (void *)ref_dpotri) != 0)
    abort();
}

/* ---- every dtype, computed in double complex ----------------------------- */

void ref_potrf(jmg_dtype t, char *uplo, int *n, void *a, int *lda, int *info) {
  const int N = *n, ld = *lda;
  *info = 0;
  if (*uplo != 'L') {
    *info = -1;
    return;
  }
#define L(i, j) ref_load(t, a, (size_t)(i) + (size_t)(j) * (size_t)ld)
  for (int j = 0; j < N; ++j) {
    double d = creal(L(j, j));
    for (int k = 0; k < j; ++k) d -= creal(L(j, k) * conj(L(j, k)));
    if (!(d > 0.0)) {
      *info = j + 1;
      return;
    }
    d = sqrt(d);
    ref_store(t, a, (size_t)j + (size_t)j * (size_t)ld, d);
    for (int i = j + 1; i < N; ++i) {
      double complex s = L(i, j);
      for (int k = 0; k < j; ++k) s -= L(i, k) * conj(L(j, k));
      ref_store(t, a, (size_t)i + (size_t)j * (size_t)ld, s / d);
    }
  }
}

void ref_potrs(jmg_dtype t, char *uplo, int *n, int *nrhs, void *a, int *lda,
               void *b, int *ldb, int *info) {
  const int N = *n, ld = *lda, ldB = *ldb;
  *info = 0;
  if (*uplo != 'L') {
    *info = -1;
    return;
  }
  for (int r = 0; r < *nrhs; ++r) {
    const size_t off = (size_t)r * (size_t)ldB;
    for (int i = 0; i < N; ++i) { /* L y = b */
      double complex s = ref_load(t, b, off + (size_t)i);
      for (int k = 0; k < i; ++k)
        s -= L(i, k) * ref_load(t, b, off + (size_t)k);
      ref_store(t, b, off + (size_t)i, s / L(i, i));
    }
    for (int i = N - 1; i >= 0; --i) { /* L^H x = y */
      double complex s = ref_load(t, b, off + (size_t)i);
      for (int k = i + 1; k < N; ++k)
        s -= conj(L(k, i)) * ref_load(t, b, off + (size_t)k);
      ref_store(t, b, off + (size_t)i, s / L(i, i));
    }
  }
#undef L
}

#define REF_CHOL(p, T)                                                     \
  static void ref_##p##potrf_any(char *uplo, int *n, void *a, int *lda,    \
                                 int *info) {                              \
    ref_potrf(T, uplo, n, a, lda, info);                                   \
  }                                                                        \
  static void ref_##p##potrs_any(char *uplo, int *n, int *nrhs, void *a,   \
                                 int *lda, void *b, int *ldb, int *info) { \
    ref_potrs(T, uplo, n, nrhs, a, lda, b, ldb, info);                     \
  }
REF_CHOL(s, JMG_F32)
REF_CHOL(c, JMG_C64)
REF_CHOL(z, JMG_C128)
#undef REF_CHOL

void register_reference_cholesky(void) {
  register_reference_lapack();
  if (jaxmg_cpu_register_lapack("spotrf", (void *)ref_spotrf_any) != 0 ||
      jaxmg_cpu_register_lapack("cpotrf", (void *)ref_cpotrf_any) != 0 ||
      jaxmg_cpu_register_lapack("zpotrf", (void *)ref_zpotrf_any) != 0 ||
      jaxmg_cpu_register_lapack("spotrs", (void *)ref_spotrs_any) != 0 ||
      jaxmg_cpu_register_lapack("cpotrs", (void *)ref_cpotrs_any) != 0 ||
      jaxmg_cpu_register_lapack("zpotrs", (void *)ref_zpotrs_any) != 0)
    abort();
}
