/* The LAPACK engine's mixed-precision solves (common/op.h,
 * JMG_PRECISION_MIXED; engine/refine.h for the algorithm): potrs and
 * lu_solve of a float64 or complex128 A factored in float32 or complex64
 * by LAPACK (spotrf/cpotrf, sgetrf/cgetrf), refined in A's dtype against
 * the gathered A, which the lower-precision factorization leaves intact, and
 * falling back to the exact routine (jmg_lapack_potrs_full,
 * jmg_lapack_lu_solve_full) on that same gathered A where refinement does
 * not converge. Memory beside the exact path's gathered A: one n x n copy
 * in the lower precision, b kept (n x nrhs), a residual in A's dtype and a
 * right-hand side in the lower precision.
 *
 * float32 and complex64 inputs run the exact path: CPU devices have no
 * lower precision that LAPACK factors in (no TF32, bfloat16 or float16
 * routines), and JAXMG_TRACE says so. mixed.c holds the solves, mixed_host.c
 * the arithmetic they share. */
#ifndef JMG_ENGINE_LAPACK_MIXED_H
#define JMG_ENGINE_LAPACK_MIXED_H

#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"

/* Which matrix a residual is of: the Hermitian one whose lower triangle is
 * held (potrs), M itself or Mᵀ, not conjugated (lu_solve's transpose). */
typedef enum {
  JMG_MIXED_HERMITIAN,
  JMG_MIXED_GENERAL,
  JMG_MIXED_TRANSPOSED
} jmg_mixed_kind;

/* dst (count elements of dtype's lower precision) = src (count elements
 * of dtype, float64 or complex128), rounded. Returns 1 where a value
 * exceeded the lower precision's range (it became an Inf), else 0. */
int jmg_mixed_narrow(jmg_dtype dtype, const void *src, void *dst, size_t count);

/* dst (count elements of dtype) = src (the lower precision's), or += with
 * add. */
void jmg_mixed_widen(jmg_dtype dtype, const void *src, void *dst, size_t count,
                     int add);

/* The 2-norms of the nrhs columns of v (n x nrhs of dtype, lda n) into out;
 * NaN for a column with a NaN. */
void jmg_mixed_column_norms(jmg_dtype dtype, const void *v, int64_t n,
                            int64_t nrhs, double *out);

/* The Frobenius norm of a (n x n of dtype, lda n): of the Hermitian matrix
 * of its lower triangle where hermitian, else of all of it. */
double jmg_mixed_frobenius(jmg_dtype dtype, const void *a, int64_t n,
                           int hermitian);

/* r = b - op(A) x, every n x nrhs of dtype (lda n), A n x n (see
 * jmg_mixed_kind). */
void jmg_mixed_residual(jmg_dtype dtype, const void *a, int64_t n,
                        const void *b, const void *x, void *r, int64_t nrhs,
                        jmg_mixed_kind kind);

/* potrs's and lu_solve's mixed routines on the gathered n x n matrix full
 * (lda n, left intact but where the fallback factors it), with the
 * meanings of jmg_lapack_potrs_full (no diag) and jmg_lapack_lu_solve_full.
 * result (may be NULL) receives what refinement reached: its converged,
 * iterations and berr (engine/refine.h), and whether the call fell back. */
typedef struct jmg_mixed_outcome {
  int lowered;    /* a lower precision was tried (float64, complex128) */
  int converged;  /* refinement converged: x is its answer */
  int iterations; /* corrections applied */
  double berr;    /* the backward error refinement reached */
  int fell_back;  /* the exact factorization solved */
  int gmres_outer, gmres_inner; /* GMRES-IR's iterations (refine.h) */
} jmg_mixed_outcome;

int jmg_lapack_potrs_mixed_full(jmg_dtype dtype, int64_t n, void *full, void *b,
                                int64_t nrhs, int *info,
                                jmg_mixed_outcome *outcome, jmg_error *err);
int jmg_lapack_lu_solve_mixed_full(jmg_dtype dtype, int64_t n, void *full,
                                   void *b, int64_t nrhs, int transpose,
                                   int *info, jmg_mixed_outcome *outcome,
                                   jmg_error *err);

#endif
