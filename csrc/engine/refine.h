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
 * near 1 / u_low, 10^7 for float32, 2 10^3 for TF32) stalls there.
 *
 * GMRES-IR (Carson & Higham, SIAM J. Sci. Comput. 2017 and 2018; what
 * NVIDIA's cusolverDnIRSXgesv calls CUSOLVER_IRS_REFINE_GMRES). Where the
 * engine hands the loop its three GMRES steps (steps->restart > 0) and
 * classical refinement stalls above sqrt(n) u or reaches its bound, the
 * loop goes on from the x it has: each outer iteration solves the
 * correction equation A d = r of each column by GMRES in A's dtype on the
 * left-preconditioned system F^-1 A d = F^-1 r (the lower-precision factor
 * as the preconditioner, applied as in a correction: narrowed, solved,
 * widened), at most steps->restart Arnoldi steps and until the
 * preconditioned residual falls by JMG_GMRES_TOL, then x += d and the
 * residual and backward error again, with classical refinement's stopping
 * rules (u; a step that does not halve it, converged where it is at most
 * sqrt(n) u) and at most JMG_GMRES_MAX_OUTER outer iterations. The loop
 * does the Givens rotations and the small least-squares problem on the
 * host; the engine does the vectors (Arnoldi with classical Gram-Schmidt
 * twice, in its BLAS). GMRES converges where classical refinement cannot
 * (u_low kappa(A) > 1) as long as F^-1 A is not too ill-conditioned:
 * kappa(F^-1 A) is about u_low kappa(A). The loop estimates it at each
 * Arnoldi step from the Hessenberg matrix's triangular factor (the
 * condition number of R, by a few power iterations on R and on R^-1: a
 * lower bound that grows towards kappa(F^-1 A)) and gives up once it
 * passes JMG_GMRES_MAX_COND: GMRES would need too many steps to be cheaper
 * than the exact factorization; so it does after JMG_GMRES_MAX_INNER
 * Arnoldi steps in all. On small test matrices (tests/c/
 * test_refine.c) condition numbers to 10^7 pass with a TF32-like factor
 * and to 10^10 with float32's; 10^12 with TF32 and 10^14 with float32 stop
 * within the first GMRES cycle (JMG_GMRES_RESTART steps). A GMRES solve
 * minimizes F^-1 (r - A d), not r - A d, so the backward error may grow
 * for one outer step while x's error falls: GMRES-IR stops after two outer
 * steps in a row that do not halve it (one where it is at most sqrt(n) u).
 *
 * Where neither converges the engine falls back to the exact factorization
 * in A's dtype, so that a mixed call returns the exact path's answer
 * either way. */
#ifndef JMG_ENGINE_REFINE_H
#define JMG_ENGINE_REFINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"

/* LAPACK's ITERMAX in dsgesv and dsposv. */
#define JMG_REFINE_MAX_ITER 30

/* GMRES-IR: the basis an engine holds beyond its first vector (the most
 * Arnoldi steps of one outer iteration), the outer iterations, the drop of
 * the preconditioned residual that ends an outer iteration's GMRES, and
 * the estimate of kappa(F^-1 A) past which GMRES-IR gives up. */
#define JMG_GMRES_RESTART 30
#define JMG_GMRES_MAX_OUTER 10
/* GMRES-IR's Arnoldi steps over all its outer iterations and columns:
 * past them it gives up (each costs a product with A and a solve with F, so
 * that beyond some number the exact factorization is faster; on small CPU
 * test matrices GMRES needs about n steps an outer iteration). */
#define JMG_GMRES_MAX_INNER 150
#define JMG_GMRES_TOL 1e-10
#define JMG_GMRES_MAX_COND 1e5

/* An engine's steps (see above); ctx is the engine's. Each returns 0 or a
 * negative jmg_status with err filled. residual writes nrhs norms of the
 * residual's columns and of x's to the host arrays rnorm and xnorm. */
typedef struct jmg_refine_steps {
  void *ctx;
  int (*first)(void *ctx, jmg_error *err);
  int (*residual)(void *ctx, double *rnorm, double *xnorm, jmg_error *err);
  int (*correct)(void *ctx, jmg_error *err);
  /* GMRES-IR's steps (restart 0 and NULL: classical refinement only). The
   * engine holds a basis V of restart + 1 vectors of n in A's dtype.
   * Complex numbers are pairs of doubles (real, imaginary; imaginary 0 for
   * the real dtypes).
   *   gmres_start: V_0 = F^-1 r_col (r of the last residual step), *beta =
   *     ||V_0||_2, V_0 /= beta where beta > 0;
   *   arnoldi: w = F^-1 A V_j (op(A) as the residual's), h_i = V_i^H w and
   *     w -= sum h_i V_i for i <= j (twice, the two passes' h summed), h_j+1
   *     = ||w||_2 (real), V_j+1 = w / h_j+1 where h_j+1 > 0; h: j + 2
   *     complex numbers on the host;
   *   gmres_update: x_col += sum_i<k y_i V_i (y: k complex numbers). */
  int restart;
  /* The Arnoldi steps GMRES-IR may take in all before it gives up (0:
   * JMG_GMRES_MAX_INNER); the environment's JAXMG_GMRES_MAX_INNER, where
   * set to a number of 0 or more, overrides it (0: no GMRES-IR). */
  int max_inner;
  /* The refinement steps (classical corrections and Arnoldi steps, each a
   * product with A and a solve with F) past which the exact path would
   * have been cheaper (0: no bound, the CPU devices'); the environment's
   * JAXMG_REFINE_MAX_STEPS, where set to a number of 0 or more, overrides
   * it. With a bound the loop fails fast (the engine then falls back):
   *   - classical refinement gives up where its contraction (the last
   *     correction's berr / the one before) predicts more corrections to
   *     sqrt(n) u than max(max_steps, JMG_REFINE_FLOOR) in all;
   *   - GMRES-IR takes at most what is left of max_steps (and max_inner),
   *     is skipped where that is below JMG_GMRES_MIN_INNER, and gives up
   *     where a cycle's residual reduction so far predicts more Arnoldi
   *     steps than that to reach what x still needs. */
  int max_steps;
  int (*gmres_start)(void *ctx, int64_t col, double *beta, jmg_error *err);
  int (*arnoldi)(void *ctx, int j, double *h, jmg_error *err);
  int (*gmres_update)(void *ctx, int64_t col, int k, const double *y,
                      jmg_error *err);
} jmg_refine_steps;

/* What the loop reached. */
typedef struct jmg_refine_result {
  int converged;  /* 1: x is the answer; 0: the engine falls back */
  int iterations; /* corrections applied (classical and GMRES-IR outer) */
  double berr;    /* the last backward error (NaN where none was computed) */
  int gmres_outer; /* GMRES-IR's outer iterations (0: classical only) */
  int gmres_inner; /* its Arnoldi steps, over every outer iteration */
  double gmres_cond; /* the largest kappa(F^-1 A) estimate (0: none) */
  int gmres_gave_up; /* 1: at the estimate, 2: at JMG_GMRES_MAX_INNER, 3: a
                        number was not finite, 4: its residual's reduction
                        predicted more steps than the budget, 5: skipped
                        (less than JMG_GMRES_MIN_INNER steps of budget) */
  int predicted; /* the corrections classical refinement's give-up by
                    prediction foresaw */
  int gmres_predicted; /* the Arnoldi steps GMRES-IR's (gave up 4) did */
  int classical_gave_up; /* 1: classical refinement's contraction was too
                            slow for max_steps (see above) */
  int max_steps; /* the bound it ran under (0: none) */
  int gmres_budget; /* the Arnoldi steps GMRES-IR was given */
} jmg_refine_result;

/* Classical refinement may always take this many corrections under a
 * bound (a condition number of 10^2 takes 4 with a TF32 factor, measured
 * on an H200 at N = 16384), GMRES-IR needs at least JMG_GMRES_MIN_INNER
 * Arnoldi steps of budget to run (fewer rarely gain the digits a stalled
 * classical refinement lacks: on the emulated TF32 factor of
 * tests/c/test_refine.c, kappa 1e6 takes 10), and a GMRES cycle predicts
 * its steps from the residual's reduction after JMG_GMRES_PREDICT_AFTER
 * of them. */
#define JMG_REFINE_FLOOR 10
#define JMG_GMRES_MIN_INNER 8
#define JMG_GMRES_PREDICT_AFTER 4

/* The refinement steps a loop on these steps may take in all (0: no
 * bound): steps->max_steps, JAXMG_REFINE_MAX_STEPS over it. */
int jmg_refine_max_steps(const jmg_refine_steps *steps);

/* The Arnoldi steps GMRES-IR could take from the start (before any
 * classical correction): JAXMG_GMRES_MAX_INNER where set, else
 * steps->max_inner (or JMG_GMRES_MAX_INNER) bounded by
 * jmg_refine_max_steps; 0 where the steps have no GMRES-IR. An engine
 * reads it to decide whether a preconditioner only GMRES-IR could use (a
 * shifted Cholesky factor) is worth computing. */
int jmg_refine_gmres_budget(const jmg_refine_steps *steps);

/* The lower precision of dtype: float32 for float64, complex64 for
 * complex128 (1 and *low); 0 for float32 and complex64, which have none
 * that jaxmg factors in. */
int jmg_refine_lower(jmg_dtype dtype, jmg_dtype *low);

/* The diagonal shift of a Cholesky factorization in a lower precision of
 * unit roundoff u_low that failed (A not positive definite to that
 * precision: a condition number past about 1 / u_low): the engines factor
 * A + JMG_REFINE_SHIFT u_low diag(A) once more (Higham & Pranesh, SIAM J.
 * Sci. Comput. 2021, "Exploiting lower precision arithmetic in solving
 * symmetric positive definite linear systems"), a preconditioner that
 * GMRES-IR can use where kappa(A) u_low JMG_REFINE_SHIFT stays below
 * JMG_GMRES_MAX_COND; a matrix indefinite by less than that shift may
 * thus be solved (status 0) where the exact Cholesky reports it. */
#define JMG_REFINE_SHIFT 8.0

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

/* "refine float64 3 iterations backward error 1.1e-17" (or "did not
 * converge after 2 iterations at backward error ..."), with " gmres-ir 2
 * outer 17 inner" after it where GMRES-IR ran (" gave up at cond 3e+05"
 * where its estimate stopped it, " gave up after 150 inner" at its bound,
 * " gave up: would need about 90 inner, budget 8" where its prediction
 * did, " skipped: budget 2 steps left"), " (contraction too slow: about
 * 25 more corrections, budget 10)" where classical refinement failed fast,
 * the mark JAXMG_TRACE prints after the
 * loop (common/trace.h): the words of the mark name the precision refined
 * in, the iterations and the backward error. */
void jmg_refine_describe(const jmg_refine_result *r, jmg_dtype dtype, char *out,
                         size_t len);

#endif
