/* Mixed-precision solves (common/op.h, JMG_PRECISION_MIXED): classical
 * iterative refinement, one loop for every engine that has potrs_mixed or
 * lu_solve_mixed (engine/lapack/mixed.c on CPU devices, which lapack-local
 * runs on rank 0's gathered A; engine/cusolverdn/mixed.c on one GPU, which
 * the gather engine runs on its gathered copy).
 *
 * The engine factors A in the next lower precision (float32 for float64,
 * complex64 for complex128) beside A itself, which stays intact in A's
 * dtype, and hands this loop four steps on its own buffers and memory:
 *
 *   x0 = F^-1 b                            first (the lower-precision solve)
 *   r  = b - A x, ||r_j||, ||x_j||          residual (in A's dtype, against
 *                                           the intact A)
 *   x  = x + F^-1 r                         correct
 *
 * where F is the lower-precision factor. After each residual the loop
 * computes the normwise backward error of every column j,
 *
 *   berr_j = ||r_j||_2 / (||A||_F ||x_j||_2 + ||b_j||_2),
 *
 * (||A||_F bounds ||A||_2: a backward error in the Frobenius norm, the
 * norm one cuBLAS call gives on a GPU) and their maximum berr. It stops
 *   - converged, when berr <= u (A's dtype's unit roundoff, 2^-53 for
 *     float64): nothing finer is representable;
 *   - converged, when a correction no longer halves berr (stagnation) and
 *     berr <= sqrt(n) u (the exact path's level: LAPACK's dsgesv/dsposv
 *     stop at the same sqrt(n) eps bound in the infinity norm);
 *   - not converged, when berr stagnates above sqrt(n) u, is not a number
 *     (a lower-precision factor overflowed), or JMG_REFINE_MAX_ITER
 *     corrections did not bring it there.
 * A matrix too ill-conditioned for the lower precision (condition number
 * near 1 / u_low, 10^7 for float32) does not converge; the engine then
 * falls back to the exact factorization in A's dtype, so that a mixed call
 * returns the exact path's answer either way. */
#ifndef JMG_ENGINE_REFINE_H
#define JMG_ENGINE_REFINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"

/* LAPACK's ITERMAX in dsgesv and dsposv. */
#define JMG_REFINE_MAX_ITER 30

/* An engine's steps (see above); ctx is the engine's. Each returns 0 or a
 * negative jmg_status with err filled. residual writes nrhs norms of the
 * residual's columns and of x's to the host arrays rnorm and xnorm. */
typedef struct jmg_refine_steps {
  void *ctx;
  int (*first)(void *ctx, jmg_error *err);
  int (*residual)(void *ctx, double *rnorm, double *xnorm, jmg_error *err);
  int (*correct)(void *ctx, jmg_error *err);
} jmg_refine_steps;

/* What the loop reached. */
typedef struct jmg_refine_result {
  int converged;  /* 1: x is the answer; 0: the engine falls back */
  int iterations; /* corrections applied */
  double berr;    /* the last backward error (NaN where none was computed) */
} jmg_refine_result;

/* The lower precision of dtype: float32 for float64, complex64 for
 * complex128 (1 and *low); 0 for float32 and complex64, which have none
 * that jaxmg factors in. */
int jmg_refine_lower(jmg_dtype dtype, jmg_dtype *low);

/* A's dtype's unit roundoff (2^-53 for float64 and complex128, 2^-24 for
 * float32 and complex64). */
double jmg_refine_unit_roundoff(jmg_dtype dtype);

/* The largest backward error over the nrhs columns (see above), from the
 * norms of the residual's columns, x's and b's and A's Frobenius norm. A
 * column whose denominator is 0 (b and x both 0) has backward error 0, or
 * +Inf where its residual is not 0. NaN where any input is NaN. */
double jmg_refine_backward_error(int64_t nrhs, const double *rnorm,
                                 const double *xnorm, const double *bnorm,
                                 double anorm);

/* Runs the loop for an n x nrhs solve in dtype (A's): steps->first, then
 * residual and correct in turn, as above; bnorm (nrhs host values) and
 * anorm are b's column norms and A's Frobenius norm. Writes *out; returns
 * 0, or the first step that failed (out is then unspecified). Needs
 * nrhs >= 1. */
int jmg_refine_run(const jmg_refine_steps *steps, jmg_dtype dtype, int64_t n,
                   int64_t nrhs, const double *bnorm, double anorm,
                   jmg_refine_result *out, jmg_error *err);

/* "refine float64 3 iterations backward error 1.1e-17" (or "stalled
 * after 2 iterations at backward error ..."), the mark JAXMG_TRACE prints
 * after the loop (common/trace.h): the words of the mark name the
 * precision refined in, the iterations and the backward error. */
void jmg_refine_describe(const jmg_refine_result *r, jmg_dtype dtype, char *out,
                         size_t len);

#endif
