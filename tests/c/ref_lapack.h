/* Reference LAPACK written here for the CPU handlers' tests, registered in
 * SciPy's place (engine/lapack/table.h): Cholesky (potrf, potrs, potri),
 * unblocked and plain, lower triangle, column-major, Fortran-style pointer
 * arguments; and the element access they compute with, every dtype in
 * double complex (the other op files use it too). The routines of one op
 * only (getrf, gesdd, geqrf) live in that op's test file. */
#ifndef JMG_TESTS_REF_LAPACK_H
#define JMG_TESTS_REF_LAPACK_H

#include <complex.h>
#include <stddef.h>

#include "common/dtype.h"

/* Element i of p, an array of dtype t, in double complex; and back (the
 * imaginary part dropped for real t). */
double complex ref_load(jmg_dtype t, const void *p, size_t i);
void ref_store(jmg_dtype t, void *p, size_t i, double complex v);

/* potrf / potrs for every dtype (Hermitian, L L^H), computed in double
 * complex. */
void ref_potrf(jmg_dtype t, char *uplo, int *n, void *a, int *lda, int *info);
void ref_potrs(jmg_dtype t, char *uplo, int *n, int *nrhs, void *a, int *lda,
               void *b, int *ldb, int *info);

/* Registers dpotrf, dpotrs and dpotri (double, computed in double); aborts
 * where the library refuses one. */
void register_reference_lapack(void);

/* Those, and spotrf/spotrs, cpotrf/cpotrs, zpotrf/zpotrs by ref_potrf and
 * ref_potrs. */
void register_reference_cholesky(void);

/* ?getrf and ?getrs for every dtype (test_lu_solve.c's reference LU,
 * computed in double complex); aborts where the library refuses one. */
void register_reference_lu(void);

#endif
