/* Classical iterative refinement (refine.h). */
#include "engine/refine.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int jmg_refine_lower(jmg_dtype dtype, jmg_dtype *low) {
  if (dtype == JMG_F64) *low = JMG_F32;
  if (dtype == JMG_C128) *low = JMG_C64;
  return dtype == JMG_F64 || dtype == JMG_C128;
}

double jmg_refine_unit_roundoff(jmg_dtype dtype) {
  /* DBL_EPSILON is the spacing at 1, twice the unit roundoff. */
  return jmg_dtype_real_size(dtype) == sizeof(float) ? 0.5 * FLT_EPSILON
                                                     : 0.5 * DBL_EPSILON;
}

double jmg_refine_backward_error(int64_t nrhs, const double *rnorm,
                                 const double *xnorm, const double *bnorm,
                                 double anorm) {
  double worst = 0.0;
  for (int64_t j = 0; j < nrhs; ++j) {
    const double den = anorm * xnorm[j] + bnorm[j];
    double e;
    if (isnan(rnorm[j]) || isnan(den))
      return NAN;
    else if (den > 0.0)
      e = rnorm[j] / den;
    else
      e = rnorm[j] > 0.0 ? INFINITY : 0.0;
    if (e > worst) worst = e;
  }
  return worst;
}

/* The residual's backward error into *berr, by the engine's step. */
static int measure(const jmg_refine_steps *s, int64_t nrhs, double *rnorm,
                   double *xnorm, const double *bnorm, double anorm,
                   double *berr, jmg_error *err) {
  int rc = s->residual(s->ctx, rnorm, xnorm, err);
  if (rc == 0)
    *berr = jmg_refine_backward_error(nrhs, rnorm, xnorm, bnorm, anorm);
  return rc;
}

int jmg_refine_run(const jmg_refine_steps *steps, jmg_dtype dtype, int64_t n,
                   int64_t nrhs, const double *bnorm, double anorm,
                   jmg_refine_result *out, jmg_error *err) {
  const double u = jmg_refine_unit_roundoff(dtype);
  const double enough = sqrt((double)(n > 1 ? n : 1)) * u;
  out->converged = 0;
  out->iterations = 0;
  out->berr = NAN;
  double *norms = malloc(2 * (size_t)nrhs * sizeof *norms);
  if (norms == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "refinement",
                         "cannot allocate %lld norms", (long long)(2 * nrhs));
  double *rnorm = norms, *xnorm = norms + nrhs;
  double berr = NAN, previous = INFINITY;
  int rc = steps->first(steps->ctx, err);
  if (rc == 0)
    rc = measure(steps, nrhs, rnorm, xnorm, bnorm, anorm, &berr, err);
  while (rc == 0) {
    out->berr = berr;
    /* Not a number: not converged, no more corrections. */
    if (isnan(berr)) break;
    if (berr <= u) {
      out->converged = 1;
      break;
    }
    if (!(berr <= 0.5 * previous)) {
      out->converged = berr <= enough;
      break;
    }
    if (out->iterations == JMG_REFINE_MAX_ITER) {
      out->converged = berr <= enough;
      break;
    }
    previous = berr;
    rc = steps->correct(steps->ctx, err);
    if (rc == 0) {
      out->iterations += 1;
      rc = measure(steps, nrhs, rnorm, xnorm, bnorm, anorm, &berr, err);
    }
  }
  free(norms);
  return rc;
}

void jmg_refine_describe(const jmg_refine_result *r, jmg_dtype dtype, char *out,
                         size_t len) {
  if (r->converged)
    snprintf(out, len, "refine %s %d iteration%s backward error %.2g",
             jmg_dtype_name(dtype), r->iterations,
             r->iterations == 1 ? "" : "s", r->berr);
  else
    snprintf(out, len,
             "refine %s did not converge after %d iteration%s at backward "
             "error %.2g",
             jmg_dtype_name(dtype), r->iterations,
             r->iterations == 1 ? "" : "s", r->berr);
}
