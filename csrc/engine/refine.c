/* Classical iterative refinement and GMRES-IR (refine.h). */
#include "engine/refine.h"

#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"

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

/* --- GMRES-IR ----------------------------------------------------------- */

/* The estimate of kappa(R) for R k x k upper triangular (column-major, ld
 * ldr, complex): sigma_max by power iterations on R^H R, sigma_min by
 * power iterations on (R^H R)^-1 (two triangular solves each), or the
 * ratio of R's largest and smallest diagonal entries where that is larger:
 * a lower bound of kappa(R); +Inf where a diagonal entry is 0. */
static double triangular_cond(const double complex *R, int ldr, int k,
                              double complex *v, double complex *t) {
  for (int i = 0; i < k; ++i)
    if (cabs(R[(size_t)i * ldr + i]) == 0.0) return INFINITY;
  double smax = 0.0, smin_inv = 0.0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < k; ++i) v[i] = 1.0 + 0.1 * i;
    double lambda = 0.0;
    for (int it = 0; it < 24; ++it) {
      double nv = 0.0;
      for (int i = 0; i < k; ++i) nv += creal(conj(v[i]) * v[i]);
      nv = sqrt(nv);
      if (!(nv > 0.0) || isinf(nv)) break;
      for (int i = 0; i < k; ++i) v[i] /= nv;
      if (pass == 0) {
        /* t = R v, v = R^H t. */
        for (int i = 0; i < k; ++i) {
          double complex s = 0.0;
          for (int j = i; j < k; ++j) s += R[(size_t)j * ldr + i] * v[j];
          t[i] = s;
        }
        for (int j = 0; j < k; ++j) {
          double complex s = 0.0;
          for (int i = 0; i <= j; ++i) s += conj(R[(size_t)j * ldr + i]) * t[i];
          v[j] = s;
        }
      } else {
        /* R^H t = v (forward), R v = t (backward). */
        for (int j = 0; j < k; ++j) {
          double complex s = v[j];
          for (int i = 0; i < j; ++i) s -= conj(R[(size_t)j * ldr + i]) * t[i];
          t[j] = s / conj(R[(size_t)j * ldr + j]);
        }
        for (int i = k - 1; i >= 0; --i) {
          double complex s = t[i];
          for (int j = i + 1; j < k; ++j) s -= R[(size_t)j * ldr + i] * v[j];
          v[i] = s / R[(size_t)i * ldr + i];
        }
      }
      lambda = 0.0;
      for (int i = 0; i < k; ++i) lambda += creal(conj(v[i]) * v[i]);
      lambda = sqrt(lambda); /* ||(R^H R)^+-1 v|| for a unit v */
    }
    if (pass == 0)
      smax = sqrt(lambda);
    else
      smin_inv = sqrt(lambda);
  }
  /* max |r_ii| / min |r_ii| bounds kappa(R) from below too. */
  double dmax = 0.0, dmin = INFINITY;
  for (int i = 0; i < k; ++i) {
    const double d = cabs(R[(size_t)i * ldr + i]);
    if (d > dmax) dmax = d;
    if (d < dmin) dmin = d;
  }
  const double est = smax * smin_inv, diag = dmax / dmin;
  return est > diag ? est : diag;
}

/* GMRES's host state for one column: the rotated Hessenberg matrix R
 * ((m + 1) x m), the rotations, the right-hand side g, y, and scratch. */
typedef struct gmres_host {
  int m, max_inner;
  /* Under a step budget (predict): the reduction of the correction
   * equation's residual that x still needs (enough / berr, at least
   * JMG_GMRES_TOL), and n (GMRES's steps in exact arithmetic at most). */
  int predict;
  double need;
  int64_t n;
  double complex *R, *s, *g, *y, *v, *t;
  double *c, *h; /* cosines; the engine's h (pairs) */
} gmres_host;

static int gmres_host_alloc(gmres_host *gh, int m, jmg_error *err) {
  const size_t m1 = (size_t)m + 1;
  gh->m = m;
  gh->R = calloc(m1 * (size_t)m + 5 * m1, sizeof(double complex));
  gh->c = calloc(m1 + 2 * (m1 + 1), sizeof(double));
  if (gh->R == NULL || gh->c == NULL) {
    free(gh->R);
    free(gh->c);
    gh->R = NULL;
    gh->c = NULL;
    return jmg_error_set(err, JMG_ENOMEM, NULL, "refinement",
                         "cannot allocate GMRES's Hessenberg matrix (%d)", m);
  }
  gh->s = gh->R + m1 * (size_t)m;
  gh->g = gh->s + m1;
  gh->y = gh->g + m1;
  gh->v = gh->y + m1;
  gh->t = gh->v + m1;
  gh->h = gh->c + m1;
  return 0;
}

/* Arnoldi's column j (st->arnoldi's pairs in gh->h) into rj, rows 0..j+1;
 * 0 where a number was not finite. */
static int hessenberg_column(const gmres_host *gh, double complex *rj, int j) {
  int finite = 1;
  for (int i = 0; i <= j + 1; ++i) {
    rj[i] = gh->h[2 * i] + I * gh->h[2 * i + 1];
    finite &= isfinite(gh->h[2 * i]) && isfinite(gh->h[2 * i + 1]);
  }
  return finite;
}

/* Givens rotations on column j: the earlier ones, then a new one that
 * zeroes rj[j + 1], applied to g too. */
static void rotate_column(gmres_host *gh, double complex *rj, int j) {
  for (int i = 0; i < j; ++i) {
    const double complex a = rj[i], b = rj[i + 1];
    rj[i] = gh->c[i] * a + gh->s[i] * b;
    rj[i + 1] = -conj(gh->s[i]) * a + gh->c[i] * b;
  }
  const double complex a = rj[j], b = rj[j + 1];
  const double na = cabs(a), t = hypot(na, cabs(b));
  if (t == 0.0) {
    gh->c[j] = 1.0;
    gh->s[j] = 0.0;
  } else if (na == 0.0) {
    gh->c[j] = 0.0;
    gh->s[j] = conj(b) / t;
    rj[j] = t;
  } else {
    gh->c[j] = na / t;
    gh->s[j] = (a / na) * conj(b) / t;
    rj[j] = (a / na) * t;
  }
  rj[j + 1] = 0.0;
  gh->g[j + 1] = -conj(gh->s[j]) * gh->g[j];
  gh->g[j] = gh->c[j] * gh->g[j];
}

/* After k Arnoldi steps: 1 with *give_up set where the predicted steps
 * pass the budget (4) or kappa(R)'s estimate JMG_GMRES_MAX_COND (1). */
static int gmres_gives_up(const gmres_host *gh, int k, double beta,
                          jmg_refine_result *out, int *give_up) {
  const int ld = gh->m + 1;
  /* Fail fast: the reduction so far, q = |g_k| / beta after k steps,
   * extrapolated (geometric) to the reduction x still needs. */
  if (gh->predict && k >= JMG_GMRES_PREDICT_AFTER) {
    const double q = cabs(gh->g[k]) / beta;
    double needed = q < 1.0 && q > 0.0 ? ceil(k * log(gh->need) / log(q))
                                       : (q == 0.0 ? k : INFINITY);
    if (needed > (double)gh->n) needed = (double)gh->n;
    if ((double)(out->gmres_inner - k) + needed > (double)gh->max_inner) {
      out->gmres_predicted = needed > 1e9 ? 1000000000 : (int)needed;
      *give_up = out->gmres_gave_up = 4;
      return 1;
    }
  }
  if (k >= 2) {
    const double cond = triangular_cond(gh->R, ld, k, gh->v, gh->t);
    if (cond > out->gmres_cond) out->gmres_cond = cond;
    if (!(cond <= JMG_GMRES_MAX_COND)) {
      *give_up = out->gmres_gave_up = 1;
      return 1;
    }
  }
  return 0;
}

/* R y = g (the leading k x k), then x_col += V y by st->gmres_update. */
static int gmres_solve_update(const jmg_refine_steps *st, gmres_host *gh,
                              int64_t col, int k, jmg_error *err) {
  const int ld = gh->m + 1;
  for (int i = k - 1; i >= 0; --i) {
    double complex s = gh->g[i];
    for (int j = i + 1; j < k; ++j) s -= gh->R[(size_t)j * ld + i] * gh->y[j];
    gh->y[i] = s / gh->R[(size_t)i * ld + i];
  }
  double *y = gh->h; /* the pairs, reused (k <= m + 1 < m + 2) */
  for (int i = 0; i < k; ++i) {
    y[2 * i] = creal(gh->y[i]);
    y[2 * i + 1] = cimag(gh->y[i]);
  }
  return st->gmres_update(st->ctx, col, k, y, err);
}

/* One GMRES solve of F^-1 A d = F^-1 r_col, d added to x_col; *give_up
 * where the estimate of kappa(F^-1 A) passed JMG_GMRES_MAX_COND or a
 * number was not finite. */
static int gmres_column(const jmg_refine_steps *st, gmres_host *gh, int64_t col,
                        jmg_refine_result *out, int *give_up, jmg_error *err) {
  const int m = gh->m, ld = m + 1;
  double beta = 0.0;
  int rc = st->gmres_start(st->ctx, col, &beta, err);
  if (rc != 0) return rc;
  if (!isfinite(beta)) {
    *give_up = out->gmres_gave_up = 3;
    return 0;
  }
  if (beta == 0.0) return 0;
  for (int i = 0; i <= m; ++i) gh->g[i] = 0.0;
  gh->g[0] = beta;
  int k = 0;
  for (int j = 0; j < m; ++j) {
    rc = st->arnoldi(st->ctx, j, gh->h, err);
    if (rc != 0) return rc;
    double complex *rj = gh->R + (size_t)j * ld;
    if (!hessenberg_column(gh, rj, j)) {
      *give_up = out->gmres_gave_up = 3;
      return 0;
    }
    const double next = creal(rj[j + 1]);
    rotate_column(gh, rj, j);
    k = j + 1;
    out->gmres_inner += 1;
    if (gmres_gives_up(gh, k, beta, out, give_up)) return 0;
    if (cabs(gh->g[j + 1]) <= JMG_GMRES_TOL * beta || next == 0.0) break;
    if (out->gmres_inner >= gh->max_inner) {
      *give_up = out->gmres_gave_up = 2;
      return 0;
    }
  }
  return gmres_solve_update(st, gh, col, k, err);
}

/* The bound on Arnoldi steps (refine.h: steps->max_inner, the
 * environment's JAXMG_GMRES_MAX_INNER over it); *forced where the
 * environment set it. */
static int gmres_max_inner(const jmg_refine_steps *st, int *forced) {
  jmg_config c;
  jmg_config_read(&c);
  *forced = c.gmres_max_inner >= 0;
  if (c.gmres_max_inner >= 0) return c.gmres_max_inner;
  return st->max_inner > 0 ? st->max_inner : JMG_GMRES_MAX_INNER;
}

static int has_gmres(const jmg_refine_steps *st) {
  return st->restart > 0 && st->gmres_start != NULL && st->arnoldi != NULL &&
         st->gmres_update != NULL;
}

int jmg_refine_max_steps(const jmg_refine_steps *steps) {
  jmg_config c;
  jmg_config_read(&c);
  if (c.refine_max_steps >= 0) return c.refine_max_steps;
  return steps->max_steps > 0 ? steps->max_steps : 0;
}

/* GMRES-IR's Arnoldi steps after `used` refinement steps: the engine's
 * (or the default) bound, within what is left of the step budget; the
 * environment's JAXMG_GMRES_MAX_INNER as it is. */
static int gmres_budget_after(const jmg_refine_steps *st, int used) {
  if (!has_gmres(st)) return 0;
  int forced = 0;
  const int m = gmres_max_inner(st, &forced);
  if (forced) return m;
  const int b = jmg_refine_max_steps(st);
  if (b == 0) return m;
  const int left = b - used > 0 ? b - used : 0;
  return left < m ? left : m;
}

int jmg_refine_gmres_budget(const jmg_refine_steps *steps) {
  return gmres_budget_after(steps, 0);
}

/* Outer iterations of GMRES-IR from the x whose residual (norms in rnorm,
 * xnorm) and backward error berr were just measured. */
static int gmres_ir(const jmg_refine_steps *st, int64_t n, int64_t nrhs,
                    double *rnorm, double *xnorm, const double *bnorm,
                    double anorm, double u, double enough, double berr,
                    int max_inner, jmg_refine_result *out, jmg_error *err) {
  gmres_host gh;
  memset(&gh, 0, sizeof gh);
  int rc = gmres_host_alloc(&gh, st->restart, err);
  gh.max_inner = max_inner;
  gh.predict = out->max_steps > 0;
  gh.n = n;
  double previous = berr;
  int give_up = 0, stalls = 0;
  while (rc == 0 && out->gmres_outer < JMG_GMRES_MAX_OUTER) {
    gh.need = enough / berr > JMG_GMRES_TOL ? enough / berr : JMG_GMRES_TOL;
    int64_t updated = 0; /* columns whose x this outer iteration changed */
    for (int64_t j = 0; rc == 0 && !give_up && j < nrhs; ++j) {
      /* A column already at u needs nothing. */
      if (jmg_refine_backward_error(1, rnorm + j, xnorm + j, bnorm + j,
                                    anorm) <= u)
        continue;
      rc = gmres_column(st, &gh, j, out, &give_up, err);
      if (rc == 0 && !give_up) updated += 1;
    }
    if (rc == 0 && give_up) {
      /* Given up: x as it stands may already be at the exact path's level
       * (an earlier outer iteration brought it there); measured again
       * where this one changed some column. */
      if (updated > 0) {
        rc = measure(st, nrhs, rnorm, xnorm, bnorm, anorm, &berr, err);
        if (rc == 0) out->berr = berr;
      }
      if (rc == 0) out->converged = out->berr <= enough;
    }
    if (rc != 0 || give_up) break;
    out->gmres_outer += 1;
    out->iterations += 1;
    rc = measure(st, nrhs, rnorm, xnorm, bnorm, anorm, &berr, err);
    if (rc != 0) break;
    out->berr = berr;
    if (isnan(berr)) break;
    if (berr <= u) {
      out->converged = 1;
      break;
    }
    /* A GMRES solve minimizes F^-1 (r - A d), not r - A d: the backward
     * error may grow for one step while x's error falls (Carson & Higham
     * stop on the correction's size for this reason), so two steps that
     * do not halve it in a row end the loop. */
    stalls = berr <= 0.5 * previous ? 0 : stalls + 1;
    if (stalls == 2 || (stalls == 1 && berr <= enough) ||
        out->gmres_outer == JMG_GMRES_MAX_OUTER) {
      out->converged = berr <= enough;
      break;
    }
    previous = berr;
  }
  free(gh.R);
  free(gh.c);
  return rc;
}

int jmg_refine_run(const jmg_refine_steps *steps, jmg_dtype dtype, int64_t n,
                   int64_t nrhs, const double *bnorm, double anorm,
                   jmg_refine_result *out, jmg_error *err) {
  const double u = jmg_refine_unit_roundoff(dtype);
  const double enough = sqrt((double)(n > 1 ? n : 1)) * u;
  memset(out, 0, sizeof *out);
  out->berr = NAN;
  out->max_steps = jmg_refine_max_steps(steps);
  const int floor_steps =
      out->max_steps > JMG_REFINE_FLOOR ? out->max_steps : JMG_REFINE_FLOOR;
  double *norms = malloc(2 * (size_t)nrhs * sizeof *norms);
  if (norms == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "refinement",
                         "cannot allocate %lld norms", (long long)(2 * nrhs));
  double *rnorm = norms, *xnorm = norms + nrhs;
  double berr = NAN, previous = INFINITY;
  int stalled = 0;
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
    if (!(berr <= 0.5 * previous) ||
        out->iterations == JMG_REFINE_MAX_ITER) {
      out->converged = berr <= enough;
      stalled = !out->converged;
      break;
    }
    /* Fail fast under a step budget: the last contraction rho, held,
     * would need `more` corrections to sqrt(n) u. */
    if (out->max_steps > 0 && out->iterations >= 1 && berr > enough) {
      const double rho = berr / previous; /* < 0.5 here */
      const double more =
          rho > 0.0 ? ceil(log(enough / berr) / log(rho)) : 1.0;
      if ((double)out->iterations + more > (double)floor_steps) {
        out->classical_gave_up = 1;
        out->predicted = more > 1e9 ? 1000000000 : (int)more;
        stalled = 1;
        break;
      }
    }
    previous = berr;
    rc = steps->correct(steps->ctx, err);
    if (rc == 0) {
      out->iterations += 1;
      rc = measure(steps, nrhs, rnorm, xnorm, bnorm, anorm, &berr, err);
    }
  }
  /* Classical refinement stalled above sqrt(n) u: GMRES-IR from here,
   * within what is left of the budget. */
  if (rc == 0 && stalled && isfinite(berr) && has_gmres(steps)) {
    int forced = 0;
    const int bound = gmres_max_inner(steps, &forced);
    out->gmres_budget = gmres_budget_after(steps, out->iterations);
    if (!forced && bound > 0 && out->max_steps > 0 &&
        out->gmres_budget < JMG_GMRES_MIN_INNER)
      out->gmres_gave_up = 5;
    else if (out->gmres_budget > 0)
      rc = gmres_ir(steps, n, nrhs, rnorm, xnorm, bnorm, anorm, u, enough,
                    berr, out->gmres_budget, out, err);
  }
  free(norms);
  return rc;
}

void jmg_refine_describe(const jmg_refine_result *r, jmg_dtype dtype, char *out,
                         size_t len) {
  char gm[160] = "";
  if (r->classical_gave_up)
    snprintf(gm, sizeof gm,
             " (contraction too slow: about %d more corrections, budget %d)",
             r->predicted,
             r->max_steps > JMG_REFINE_FLOOR ? r->max_steps : JMG_REFINE_FLOOR);
  size_t at0 = strlen(gm);
  if (r->gmres_outer > 0 || r->gmres_inner > 0)
    snprintf(gm + at0, sizeof gm - at0, " gmres-ir %d outer %d inner",
             r->gmres_outer, r->gmres_inner);
  const size_t at = strlen(gm);
  if (r->gmres_gave_up == 1)
    snprintf(gm + at, sizeof gm - at, " gave up at cond %.1g", r->gmres_cond);
  else if (r->gmres_gave_up == 2)
    snprintf(gm + at, sizeof gm - at, " gave up after %d inner",
             r->gmres_inner);
  else if (r->gmres_gave_up == 3)
    snprintf(gm + at, sizeof gm - at, " gave up at a number not finite");
  else if (r->gmres_gave_up == 4)
    snprintf(gm + at, sizeof gm - at,
             " gave up: would need about %d inner, budget %d",
             r->gmres_predicted,
             r->gmres_budget);
  else if (r->gmres_gave_up == 5)
    snprintf(gm + at, sizeof gm - at,
             " gmres-ir skipped: budget %d steps left of %d", r->gmres_budget,
             r->max_steps);
  if (r->converged)
    snprintf(out, len, "refine %s %d iteration%s backward error %.2g%s",
             jmg_dtype_name(dtype), r->iterations,
             r->iterations == 1 ? "" : "s", r->berr, gm);
  else
    snprintf(out, len,
             "refine %s did not converge after %d iteration%s at backward "
             "error %.2g%s",
             jmg_dtype_name(dtype), r->iterations,
             r->iterations == 1 ? "" : "s", r->berr, gm);
}
