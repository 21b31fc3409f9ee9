/* LAPACK routines for the CPU engine, handed over at import time.
 *
 * jaxmg needs no system LAPACK: the Python layer takes the function pointers
 * that SciPy exports in scipy.linalg.cython_lapack.__pyx_capi__ (as jaxlib
 * does) and registers each one by its LAPACK name ("dpotrf", "zheevd", ...).
 * Until a routine is registered, calling an op that needs it is an error that
 * names the routine. */
#ifndef JMG_ENGINE_LAPACK_TABLE_H
#define JMG_ENGINE_LAPACK_TABLE_H

#include "common/dtype.h"
#include "common/error.h"

/* Fortran calling convention: every argument by pointer. Element pointers are
 * void * here; the dtype picks the routine. */
typedef void (*jmg_potrf_fn)(char *uplo, int *n, void *a, int *lda, int *info);
typedef void (*jmg_potrs_fn)(char *uplo, int *n, int *nrhs, void *a, int *lda,
                             void *b, int *ldb, int *info);
typedef void (*jmg_potri_fn)(char *uplo, int *n, void *a, int *lda, int *info);
typedef void (*jmg_getrf_fn)(int *m, int *n, void *a, int *lda, int *ipiv,
                             int *info);
typedef void (*jmg_getrs_fn)(char *trans, int *n, int *nrhs, void *a, int *lda,
                             int *ipiv, void *b, int *ldb, int *info);
/* ssyevd / dsyevd */
typedef void (*jmg_syevd_fn)(char *jobz, char *uplo, int *n, void *a, int *lda,
                             void *w, void *work, int *lwork, int *iwork,
                             int *liwork, int *info);
/* cheevd / zheevd */
typedef void (*jmg_heevd_fn)(char *jobz, char *uplo, int *n, void *a, int *lda,
                             void *w, void *work, int *lwork, void *rwork,
                             int *lrwork, int *iwork, int *liwork, int *info);

/* ssygvd / dsygvd */
typedef void (*jmg_sygvd_fn)(int *itype, char *jobz, char *uplo, int *n,
                             void *a, int *lda, void *b, int *ldb, void *w,
                             void *work, int *lwork, int *iwork, int *liwork,
                             int *info);
/* chegvd / zhegvd */
typedef void (*jmg_hegvd_fn)(int *itype, char *jobz, char *uplo, int *n,
                             void *a, int *lda, void *b, int *ldb, void *w,
                             void *work, int *lwork, void *rwork, int *lrwork,
                             int *iwork, int *liwork, int *info);

/* sgesdd / dgesdd */
typedef void (*jmg_gesdd_fn)(char *jobz, int *m, int *n, void *a, int *lda,
                             void *s, void *u, int *ldu, void *vt, int *ldvt,
                             void *work, int *lwork, int *iwork, int *info);
/* cgesdd / zgesdd */
typedef void (*jmg_cgesdd_fn)(char *jobz, int *m, int *n, void *a, int *lda,
                              void *s, void *u, int *ldu, void *vt, int *ldvt,
                              void *work, int *lwork, void *rwork, int *iwork,
                              int *info);

/* ?geqrf (every dtype) */
typedef void (*jmg_geqrf_fn)(int *m, int *n, void *a, int *lda, void *tau,
                             void *work, int *lwork, int *info);
/* sorgqr / dorgqr / cungqr / zungqr */
typedef void (*jmg_orgqr_fn)(int *m, int *n, int *k, void *a, int *lda,
                             void *tau, void *work, int *lwork, int *info);

/* dsterf, dstemr, dstebz and dstein, double only (the host tridiagonal
 * eigensolver, tridiagonal.h, solves every dtype's T in double): registered
 * in JMG_F64's entry. tryrac is a Fortran LOGICAL (an int). */
typedef void (*jmg_sterf_fn)(int *n, double *d, double *e, int *info);
typedef void (*jmg_stemr_fn)(char *jobz, char *range, int *n, double *d,
                             double *e, double *vl, double *vu, int *il,
                             int *iu, int *m, double *w, double *z, int *ldz,
                             int *nzc, int *isuppz, int *tryrac, double *work,
                             int *lwork, int *iwork, int *liwork, int *info);
typedef void (*jmg_stebz_fn)(char *range, char *order, int *n, double *vl,
                             double *vu, int *il, int *iu, double *abstol,
                             const double *d, const double *e, int *m,
                             int *nsplit, double *w, int *iblock, int *isplit,
                             double *work, int *iwork, int *info);
typedef void (*jmg_stein_fn)(int *n, const double *d, const double *e, int *m,
                             const double *w, const int *iblock,
                             const int *isplit, double *z, int *ldz,
                             double *work, int *iwork, int *ifail, int *info);

typedef struct jmg_lapack_routines {
  jmg_potrf_fn potrf;
  jmg_potrs_fn potrs;
  jmg_potri_fn potri;
  void *syevd; /* jmg_syevd_fn for real dtypes, jmg_heevd_fn for complex */
  jmg_getrf_fn getrf;
  jmg_getrs_fn getrs;
  void *gesdd; /* jmg_gesdd_fn for real dtypes, jmg_cgesdd_fn for complex */
  jmg_geqrf_fn geqrf;
  jmg_orgqr_fn orgqr; /* ungqr for complex dtypes */
  void *sygvd; /* jmg_sygvd_fn for real dtypes, jmg_hegvd_fn for complex */
  jmg_sterf_fn sterf; /* JMG_F64's only */
  jmg_stemr_fn stemr; /* JMG_F64's only */
  jmg_stebz_fn stebz; /* JMG_F64's only */
  jmg_stein_fn stein; /* JMG_F64's only */
} jmg_lapack_routines;

/* Registers one routine by its LAPACK name. Returns 0, or -JMG_EINVAL for a
 * name jaxmg does not use or a NULL pointer. Exported: called through ctypes.
 */
int jmg_lapack_register(const char *name, void *fn);

/* The routines registered for dtype; entries may be NULL. */
const jmg_lapack_routines *jmg_lapack_routines_for(jmg_dtype dtype);

/* Fails with a message naming the routine when it was never registered. */
int jmg_lapack_require(const void *fn, jmg_dtype dtype, const char *family,
                       const char *op, jmg_error *err);

#endif
