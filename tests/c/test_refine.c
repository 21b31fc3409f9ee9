/* Mixed-precision solves (issue 39): the refinement loop (engine/refine.h)
 * on steps written here, whose error contracts by a chosen factor each
 * correction, and the LAPACK engine's potrs and lu_solve in mixed precision
 * (engine/lapack/mixed.h) on the reference routines (ref_lapack.h): a
 * benign matrix refined to the exact path's level without falling back,
 * a hopeless one (condition number 1e13) falling back to the exact path's
 * very answer, a matrix that is not positive definite or singular reported
 * as the exact path reports it, entries past float32's range, and float32
 * input on the exact path; GMRES-IR (a TF32-like factor of a dense matrix
 * at condition number 1e6, where classical refinement stalls; giving up at
 * 1e12 and 1e14; the LAPACK engine at 1e9 and 1e14); failing fast under
 * a step budget (an emulated TF32 LU: the factorization in float32 with
 * every product's operands rounded to 10 bits of mantissa, as on tensor
 * cores); and selection, which sends a mixed call only to an engine with
 * a mixed routine. */
#define _POSIX_C_SOURCE 200809L
#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/mixed.h"
#include "engine/refine.h"
#include "ref_lapack.h"
#include "test.h"

/* --- the loop on a one-dimensional problem a x = b, a = b = 1 ------------- */

/* Each solve by the "factor" makes the relative error rho: x0 = 1 + rho,
 * and a correction x += r (1 + rho) leaves an error of -rho times the
 * last. fail_at: the step (1 first, 2 residual, 3 correct) that fails;
 * nan_at: the residual call (1-based) whose norm is NaN. */
typedef struct toy {
  double rho, x, r;
  int calls, fail_at, nan_at;
} toy;

static int toy_first(void *ctx, jmg_error *err) {
  toy *t = ctx;
  if (t->fail_at == 1)
    return jmg_error_set(err, JMG_EINTERNAL, "potrs", "toy", "first failed");
  t->x = 1.0 + t->rho;
  return 0;
}

static int toy_residual(void *ctx, double *rnorm, double *xnorm,
                        jmg_error *err) {
  toy *t = ctx;
  if (t->fail_at == 2)
    return jmg_error_set(err, JMG_EINTERNAL, "potrs", "toy", "residual failed");
  t->calls += 1;
  t->r = 1.0 - t->x;
  *rnorm = t->calls == t->nan_at ? NAN : fabs(t->r);
  *xnorm = fabs(t->x);
  return 0;
}

static int toy_correct(void *ctx, jmg_error *err) {
  toy *t = ctx;
  if (t->fail_at == 3)
    return jmg_error_set(err, JMG_EINTERNAL, "potrs", "toy", "correct failed");
  t->x += t->r * (1.0 + t->rho);
  return 0;
}

static int run_toy(toy *t, int64_t n, jmg_refine_result *out, jmg_error *err) {
  const jmg_refine_steps steps = {.ctx = t,
                                  .first = toy_first,
                                  .residual = toy_residual,
                                  .correct = toy_correct};
  const double bnorm = 1.0;
  jmg_error_clear(err);
  return jmg_refine_run(&steps, JMG_F64, n, 1, &bnorm, 1.0, out, err);
}

TEST(refine_loop_converges_to_the_unit_roundoff_with_a_contracting_solve) {
  toy t = {.rho = 0.1};
  jmg_refine_result r;
  jmg_error err;
  CHECK_EQ(run_toy(&t, 100, &r, &err), 0);
  CHECK_EQ(r.converged, 1);
  /* The error 0.1^(k+1) falls below 2^-53 after 15 or 16 corrections. */
  CHECK(r.iterations >= 14 && r.iterations <= 17);
  CHECK(r.berr <= 0.5 * DBL_EPSILON);
  /* An exact first solve: converged with no correction. */
  toy exact = {.rho = 0.0};
  CHECK_EQ(run_toy(&exact, 100, &r, &err), 0);
  CHECK_EQ(r.converged, 1);
  CHECK_EQ(r.iterations, 0);
  CHECK(r.berr == 0.0);
}

TEST(refine_loop_stagnation_above_sqrt_n_u_is_not_converged) {
  /* An error that shrinks by 0.9 a step does not halve: stop after one
   * correction, far above sqrt(n) u. */
  toy slow = {.rho = 0.9};
  jmg_refine_result r;
  jmg_error err;
  CHECK_EQ(run_toy(&slow, 100, &r, &err), 0);
  CHECK_EQ(r.converged, 0);
  CHECK_EQ(r.iterations, 1);
  CHECK(r.berr > 0.1);
  /* A diverging one too. */
  toy diverging = {.rho = 2.0};
  CHECK_EQ(run_toy(&diverging, 100, &r, &err), 0);
  CHECK_EQ(r.converged, 0);
  CHECK_EQ(r.iterations, 1);
}

TEST(refine_loop_stops_at_its_iteration_bound) {
  /* An error that shrinks a little more than halving each step (0.49, of
   * one sign: rho = -0.49) is still 0.49^31 ~ 2e-10 after
   * JMG_REFINE_MAX_ITER corrections: not converged, and no more
   * corrections than the bound. */
  toy t = {.rho = -0.49};
  jmg_refine_result r;
  jmg_error err;
  CHECK_EQ(run_toy(&t, 100, &r, &err), 0);
  CHECK_EQ(r.converged, 0);
  CHECK_EQ(r.iterations, JMG_REFINE_MAX_ITER);
  CHECK(r.berr > 1e-11 && r.berr < 1e-9);
}

TEST(refine_loop_a_nan_stops_without_converging) {
  toy t = {.rho = 0.1, .nan_at = 3};
  jmg_refine_result r;
  jmg_error err;
  CHECK_EQ(run_toy(&t, 100, &r, &err), 0);
  CHECK_EQ(r.converged, 0);
  CHECK_EQ(r.iterations, 2);
  CHECK(isnan(r.berr));
  char text[128];
  jmg_refine_describe(&r, JMG_F64, text, sizeof text);
  CHECK_CONTAINS(text, "refine float64 did not converge after 2 iterations");
}

TEST(refine_loop_returns_a_failing_step_s_error) {
  for (int step = 1; step <= 3; ++step) {
    toy t = {.rho = 0.1, .fail_at = step};
    jmg_refine_result r;
    jmg_error err;
    CHECK(run_toy(&t, 100, &r, &err) < 0);
    CHECK_CONTAINS(err.msg, "failed");
  }
}

TEST(refine_backward_error_of_zero_and_nan_columns) {
  const double zero[2] = {0.0, 0.0}, one[2] = {1.0, 1.0};
  const double r1[2] = {0.0, 1e-20}, nan2[2] = {0.0, NAN};
  CHECK(jmg_refine_backward_error(2, zero, zero, zero, 1.0) == 0.0);
  CHECK(isinf(jmg_refine_backward_error(2, r1, zero, zero, 1.0)));
  CHECK(isnan(jmg_refine_backward_error(2, nan2, one, one, 1.0)));
  CHECK(fabs(jmg_refine_backward_error(2, r1, one, one, 3.0) - 0.25e-20) <
        1e-35);
  jmg_dtype low;
  CHECK_EQ(jmg_refine_lower(JMG_F64, &low), 1);
  CHECK_EQ(low, JMG_F32);
  CHECK_EQ(jmg_refine_lower(JMG_C128, &low), 1);
  CHECK_EQ(low, JMG_C64);
  CHECK_EQ(jmg_refine_lower(JMG_F32, &low), 0);
  CHECK_EQ(jmg_refine_lower(JMG_C64, &low), 0);
}

/* --- GMRES-IR on a dense matrix with a TF32-like preconditioner ----------- */

/* A x = b, n x n real, A = Q1 D Q2 (singular values 1 to 1/kappa); the
 * "factor" F is the exact inverse of A + E, E random with ||E||_F about
 * u_low ||A||_F, u_low 2^-11 (TF32's unit roundoff): what a TF32
 * factorization's backward error leaves. Classical refinement converges
 * where u_low kappa < 1 and GMRES-IR beyond. */
enum { GN = 40, GM = JMG_GMRES_RESTART };

typedef struct dense {
  double a[GN * GN], finv[GN * GN], b[GN], x[GN], r[GN], v[(GM + 1) * GN];
  double zero_beta; /* unused */
} dense;

static void matvec(const double *m, const double *x, double *y) {
  for (int i = 0; i < GN; ++i) {
    double s = 0.0;
    for (int j = 0; j < GN; ++j) s += m[(size_t)j * GN + i] * x[j];
    y[i] = s;
  }
}

/* inv = m^-1 by Gauss-Jordan with partial pivoting (m is overwritten). */
static void invert(double *m, double *inv) {
  for (int i = 0; i < GN * GN; ++i) inv[i] = 0.0;
  for (int i = 0; i < GN; ++i) inv[(size_t)i * GN + i] = 1.0;
  for (int c = 0; c < GN; ++c) {
    int p = c;
    for (int i = c + 1; i < GN; ++i)
      if (fabs(m[(size_t)c * GN + i]) > fabs(m[(size_t)c * GN + p])) p = i;
    for (int j = 0; j < GN; ++j) {
      double t = m[(size_t)j * GN + c];
      m[(size_t)j * GN + c] = m[(size_t)j * GN + p];
      m[(size_t)j * GN + p] = t;
      t = inv[(size_t)j * GN + c];
      inv[(size_t)j * GN + c] = inv[(size_t)j * GN + p];
      inv[(size_t)j * GN + p] = t;
    }
    const double d = m[(size_t)c * GN + c];
    for (int j = 0; j < GN; ++j) {
      m[(size_t)j * GN + c] /= d;
      inv[(size_t)j * GN + c] /= d;
    }
    for (int i = 0; i < GN; ++i) {
      if (i == c) continue;
      const double f = m[(size_t)c * GN + i];
      for (int j = 0; j < GN; ++j) {
        m[(size_t)j * GN + i] -= f * m[(size_t)j * GN + c];
        inv[(size_t)j * GN + i] -= f * inv[(size_t)j * GN + c];
      }
    }
  }
}

static double unit_rand(void) { return rand() / (double)RAND_MAX - 0.5; }

static void dense_make(dense *d, double kappa, unsigned seed) {
  srand(seed);
  double q1[GN], q2[GN], q1q1 = 0.0, q2q2 = 0.0;
  for (int i = 0; i < GN; ++i) {
    q1[i] = unit_rand();
    q2[i] = unit_rand();
    q1q1 += q1[i] * q1[i];
    q2q2 += q2[i] * q2[i];
  }
  /* (I - 2 q1 q1^T / q1q1) D (I - 2 q2 q2^T / q2q2), D geometric. */
  double anorm = 0.0;
  for (int j = 0; j < GN; ++j)
    for (int i = 0; i < GN; ++i) {
      double s = 0.0;
      for (int l = 0; l < GN; ++l) {
        const double h1 = (i == l) - 2.0 * q1[i] * q1[l] / q1q1;
        const double h2 = (l == j) - 2.0 * q2[l] * q2[j] / q2q2;
        s += h1 * pow(kappa, -(double)l / (GN - 1)) * h2;
      }
      d->a[(size_t)j * GN + i] = s;
      anorm += s * s;
    }
  anorm = sqrt(anorm);
  double m[GN * GN];
  const double ulow = ldexp(1.0, -11);
  for (int i = 0; i < GN * GN; ++i)
    m[i] = d->a[i] + ulow * anorm / GN * 2.0 * unit_rand();
  invert(m, d->finv);
  for (int i = 0; i < GN; ++i) d->b[i] = 1.0 + 0.25 * (i % 5);
}

static int dense_first(void *ctx, jmg_error *err) {
  (void)err;
  dense *d = ctx;
  matvec(d->finv, d->b, d->x);
  return 0;
}

static double norm2(const double *v) {
  double s = 0.0;
  for (int i = 0; i < GN; ++i) s += v[i] * v[i];
  return sqrt(s);
}

static int dense_residual(void *ctx, double *rnorm, double *xnorm,
                          jmg_error *err) {
  (void)err;
  dense *d = ctx;
  matvec(d->a, d->x, d->r);
  for (int i = 0; i < GN; ++i) d->r[i] = d->b[i] - d->r[i];
  *rnorm = norm2(d->r);
  *xnorm = norm2(d->x);
  return 0;
}

static int dense_correct(void *ctx, jmg_error *err) {
  (void)err;
  dense *d = ctx;
  double c[GN];
  matvec(d->finv, d->r, c);
  for (int i = 0; i < GN; ++i) d->x[i] += c[i];
  return 0;
}

static int dense_gmres_start(void *ctx, int64_t col, double *beta,
                             jmg_error *err) {
  (void)err, (void)col;
  dense *d = ctx;
  matvec(d->finv, d->r, d->v);
  *beta = norm2(d->v);
  if (*beta > 0.0)
    for (int i = 0; i < GN; ++i) d->v[i] /= *beta;
  return 0;
}

static int dense_arnoldi(void *ctx, int j, double *h, jmg_error *err) {
  (void)err;
  dense *d = ctx;
  double t[GN], *w = d->v + (size_t)(j + 1) * GN;
  matvec(d->a, d->v + (size_t)j * GN, t);
  matvec(d->finv, t, w);
  for (int i = 0; i < 2 * (j + 2); ++i) h[i] = 0.0;
  for (int pass = 0; pass < 2; ++pass) {
    double c[GM + 1];
    for (int i = 0; i <= j; ++i) {
      c[i] = 0.0;
      for (int l = 0; l < GN; ++l) c[i] += d->v[(size_t)i * GN + l] * w[l];
    }
    for (int i = 0; i <= j; ++i) {
      for (int l = 0; l < GN; ++l) w[l] -= c[i] * d->v[(size_t)i * GN + l];
      h[2 * i] += c[i];
    }
  }
  h[2 * (j + 1)] = norm2(w);
  if (h[2 * (j + 1)] > 0.0)
    for (int l = 0; l < GN; ++l) w[l] /= h[2 * (j + 1)];
  return 0;
}

static int dense_gmres_update(void *ctx, int64_t col, int k, const double *y,
                              jmg_error *err) {
  (void)err, (void)col;
  dense *d = ctx;
  for (int i = 0; i < k; ++i)
    for (int l = 0; l < GN; ++l) d->x[l] += y[2 * i] * d->v[(size_t)i * GN + l];
  return 0;
}

static int run_dense_bounded(dense *d, int gmres, int max_steps,
                             jmg_refine_result *out);

static int run_dense(dense *d, int gmres, jmg_refine_result *out) {
  return run_dense_bounded(d, gmres, 0, out);
}

static int run_dense_bounded(dense *d, int gmres, int max_steps,
                             jmg_refine_result *out) {
  const jmg_refine_steps steps = {.ctx = d,
                                  .first = dense_first,
                                  .residual = dense_residual,
                                  .correct = dense_correct,
                                  .max_steps = max_steps,
                                  .restart = gmres ? GM : 0,
                                  .gmres_start = dense_gmres_start,
                                  .arnoldi = dense_arnoldi,
                                  .gmres_update = dense_gmres_update};
  double anorm = 0.0;
  for (int i = 0; i < GN * GN; ++i) anorm += d->a[i] * d->a[i];
  const double bnorm = norm2(d->b);
  jmg_error err;
  jmg_error_clear(&err);
  return jmg_refine_run(&steps, JMG_F64, GN, 1, &bnorm, sqrt(anorm), out,
                        &err);
}

TEST(refine_gmres_ir_converges_where_classical_refinement_stalls) {
  /* kappa 1e6 with a TF32-like factor: u_low kappa ~ 500. */
  static dense d;
  dense_make(&d, 1e6, 3u);
  jmg_refine_result r;
  CHECK_EQ(run_dense(&d, 0, &r), 0);
  CHECK_EQ(r.converged, 0); /* classical refinement alone */
  CHECK_EQ(r.gmres_outer, 0);
  dense_make(&d, 1e6, 3u);
  CHECK_EQ(run_dense(&d, 1, &r), 0);
  CHECK_EQ(r.converged, 1);
  CHECK(r.gmres_outer >= 1 && r.gmres_outer <= 4);
  CHECK(r.gmres_inner >= 1 && r.gmres_inner <= 4 * GM);
  CHECK(r.berr <= sqrt((double)GN) * 0.5 * DBL_EPSILON);
  CHECK(r.gmres_cond > 1.0 && r.gmres_cond <= JMG_GMRES_MAX_COND);
  char text[160];
  jmg_refine_describe(&r, JMG_F64, text, sizeof text);
  CHECK_CONTAINS(text, "iterations backward error");
  CHECK_CONTAINS(text, "gmres-ir");
  CHECK_CONTAINS(text, "outer");
  /* A benign matrix: classical refinement converges, GMRES never runs. */
  dense_make(&d, 10.0, 5u);
  CHECK_EQ(run_dense(&d, 1, &r), 0);
  CHECK_EQ(r.converged, 1);
  CHECK_EQ(r.gmres_outer, 0);
  CHECK_EQ(r.gmres_inner, 0);
}

TEST(refine_gmres_ir_bound_from_the_environment) {
  /* JAXMG_GMRES_MAX_INNER=0: no GMRES-IR (classical refinement stalls at
   * 1e6 with the TF32-like factor); =5: it gives up after 5 steps. */
  static dense d;
  jmg_refine_result r;
  setenv("JAXMG_GMRES_MAX_INNER", "0", 1);
  dense_make(&d, 1e6, 3u);
  CHECK_EQ(run_dense(&d, 1, &r), 0);
  CHECK_EQ(r.converged, 0);
  CHECK_EQ(r.gmres_inner, 0);
  setenv("JAXMG_GMRES_MAX_INNER", "5", 1);
  dense_make(&d, 1e6, 3u);
  CHECK_EQ(run_dense(&d, 1, &r), 0);
  CHECK_EQ(r.converged, 0);
  CHECK_EQ(r.gmres_inner, 5);
  CHECK_EQ(r.gmres_gave_up, 2);
  char text[160];
  jmg_refine_describe(&r, JMG_F64, text, sizeof text);
  CHECK_CONTAINS(text, "gave up after 5 inner");
  /* Not a number: the engine's bound (the default here). */
  setenv("JAXMG_GMRES_MAX_INNER", "many", 1);
  dense_make(&d, 1e6, 3u);
  CHECK_EQ(run_dense(&d, 1, &r), 0);
  CHECK_EQ(r.converged, 1);
  unsetenv("JAXMG_GMRES_MAX_INNER");
}

TEST(refine_gmres_ir_gives_up_on_a_hopeless_matrix) {
  /* kappa 1e12 and 1e14 with the TF32-like factor: the estimate of
   * kappa(F^-1 A) passes JMG_GMRES_MAX_COND within the first cycle. */
  const double kappas[2] = {1e12, 1e14};
  for (int i = 0; i < 2; ++i) {
    static dense d;
    dense_make(&d, kappas[i], 9u);
    jmg_refine_result r;
    CHECK_EQ(run_dense(&d, 1, &r), 0);
    CHECK_EQ(r.converged, 0);
    CHECK(r.gmres_cond > JMG_GMRES_MAX_COND);
    CHECK_EQ(r.gmres_outer, 0); /* within the first GMRES cycle */
    CHECK(r.gmres_inner >= 2 && r.gmres_inner <= JMG_GMRES_RESTART);
    char text[160];
    jmg_refine_describe(&r, JMG_F64, text, sizeof text);
    CHECK_CONTAINS(text, "did not converge");
    CHECK_CONTAINS(text, "gave up at cond");
  }
}

/* --- fail fast under a step budget (refine.h's max_steps) ----------------- */

/* x rounded to TF32 (10 bits of mantissa, to nearest): what a tensor core
 * reads of a float32 operand. */
static float tf32_round(float x) {
  uint32_t i;
  memcpy(&i, &x, sizeof i);
  i = (i + 0x1000u) & 0xFFFFE000u;
  memcpy(&x, &i, sizeof x);
  return x;
}

/* The TF32 factor emulated on the CPU: A's LU with partial pivoting in
 * float32, every product of the trailing updates taking its operands
 * rounded to TF32 (as cuBLAS's TF32 gemm, float32 accumulation); d->finv
 * = (P^T L U)^-1, applied in float64 (a solve with the factor). */
static void dense_make_tf32(dense *d, double kappa, unsigned seed) {
  dense_make(d, kappa, seed);
  float f[GN * GN];
  int piv[GN];
  for (int i = 0; i < GN * GN; ++i) f[i] = (float)d->a[i];
  for (int c = 0; c < GN; ++c) {
    int p = c;
    for (int i = c + 1; i < GN; ++i)
      if (fabsf(f[(size_t)c * GN + i]) > fabsf(f[(size_t)c * GN + p])) p = i;
    piv[c] = p;
    for (int j = 0; j < GN; ++j) {
      const float t = f[(size_t)j * GN + c];
      f[(size_t)j * GN + c] = f[(size_t)j * GN + p];
      f[(size_t)j * GN + p] = t;
    }
    for (int i = c + 1; i < GN; ++i) f[(size_t)c * GN + i] /= f[(size_t)c * GN + c];
    for (int j = c + 1; j < GN; ++j)
      for (int i = c + 1; i < GN; ++i)
        f[(size_t)j * GN + i] -= tf32_round(f[(size_t)c * GN + i]) *
                                 tf32_round(f[(size_t)j * GN + c]);
  }
  double m[GN * GN];
  for (int j = 0; j < GN; ++j)
    for (int i = 0; i < GN; ++i) {
      double s = 0.0;
      for (int l = 0; l <= (i < j ? i : j); ++l)
        s += (l == i ? 1.0 : (double)f[(size_t)l * GN + i]) *
             (double)f[(size_t)j * GN + l];
      m[(size_t)j * GN + i] = s;
    }
  for (int c = GN - 1; c >= 0; --c)
    for (int j = 0; j < GN; ++j) {
      const double t = m[(size_t)j * GN + c];
      m[(size_t)j * GN + c] = m[(size_t)j * GN + piv[c]];
      m[(size_t)j * GN + piv[c]] = t;
    }
  invert(m, d->finv);
}

TEST(refine_fails_fast_under_a_step_budget) {
  /* The emulated TF32 factor of dense matrices (GN = 40) under the budgets
   * of one GPU (refine.h's max_steps; cusolverdn/mixed.c gives max(1,
   * N / 4096): 1 below N = 8192, 4 at N = 16384). */
  static dense d;
  jmg_refine_result r;
  char text[256];
  /* Benign: classical refinement within its floor, whatever the budget. */
  const double benign[2] = {1e2, 1e4};
  for (int i = 0; i < 2; ++i) {
    dense_make_tf32(&d, benign[i], 3u);
    CHECK_EQ(run_dense_bounded(&d, 1, 1, &r), 0);
    CHECK_EQ(r.converged, 1);
    CHECK(r.iterations >= 2 && r.iterations <= JMG_REFINE_FLOOR);
    CHECK_EQ(r.gmres_inner, 0);
    CHECK_EQ(r.classical_gave_up, 0);
  }
  /* Hopeless: classical refinement's contraction predicts more than its
   * floor after one correction, and GMRES-IR has less budget left than
   * JMG_GMRES_MIN_INNER (1 and 4), or predicts more steps than it has
   * (16). */
  const int budgets[3] = {1, 4, 16};
  const int gave_up[3] = {5, 5, 4};
  const char *why[3] = {"gmres-ir skipped: budget 0 steps left of 1",
                        "gmres-ir skipped: budget 3 steps left of 4",
                        "gave up: would need about"};
  for (int b = 0; b < 3; ++b) {
    dense_make_tf32(&d, 1e12, 3u);
    CHECK_EQ(run_dense_bounded(&d, 1, budgets[b], &r), 0);
    CHECK_EQ(r.converged, 0);
    CHECK_EQ(r.classical_gave_up, 1);
    CHECK_EQ(r.iterations, 1);
    CHECK(r.predicted > JMG_REFINE_FLOOR);
    CHECK_EQ(r.gmres_gave_up, gave_up[b]);
    CHECK(r.iterations + r.gmres_inner <= budgets[b]);
    jmg_refine_describe(&r, JMG_F64, text, sizeof text);
    CHECK_CONTAINS(text, "did not converge after 1 iteration");
    CHECK_CONTAINS(text, "(contraction too slow: about");
    CHECK_CONTAINS(text, why[b]);
  }
  /* Without a budget (the CPU devices') the same factor's GMRES-IR
   * converges at 1e6 and 1e8 (GN Arnoldi steps at most solve it). */
  const double hard[2] = {1e6, 1e8};
  for (int i = 0; i < 2; ++i) {
    dense_make_tf32(&d, hard[i], 3u);
    CHECK_EQ(run_dense_bounded(&d, 1, 0, &r), 0);
    CHECK_EQ(r.converged, 1);
    CHECK(r.gmres_outer >= 1);
    CHECK_EQ(r.classical_gave_up, 0);
  }
  /* An outer iteration that reached the exact path's level before the
   * budget ran out counts as converged (1e6, budget 10). */
  dense_make_tf32(&d, 1e6, 3u);
  CHECK_EQ(run_dense_bounded(&d, 1, 10, &r), 0);
  CHECK_EQ(r.converged, 1);
  CHECK(r.berr <= sqrt((double)GN) * 0.5 * DBL_EPSILON);
  CHECK(r.iterations + r.gmres_inner <= 11);
}

TEST(refine_fails_fast_on_a_slow_classical_contraction) {
  /* The toy's error shrinks by 0.45 a correction: halving, yet about 40
   * corrections from sqrt(n) u. Under a budget of 5 (floor 10) it stops
   * after the first; without one it runs to JMG_REFINE_MAX_ITER. */
  toy t = {.rho = -0.45};
  const jmg_refine_steps steps = {.ctx = &t,
                                  .first = toy_first,
                                  .residual = toy_residual,
                                  .correct = toy_correct,
                                  .max_steps = 5};
  const double bnorm = 1.0;
  jmg_refine_result r;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_refine_run(&steps, JMG_F64, 100, 1, &bnorm, 1.0, &r, &err), 0);
  CHECK_EQ(r.converged, 0);
  CHECK_EQ(r.classical_gave_up, 1);
  CHECK_EQ(r.iterations, 1);
  CHECK(r.predicted >= 30 && r.predicted <= 50);
  CHECK_EQ(r.max_steps, 5);
  char text[256];
  jmg_refine_describe(&r, JMG_F64, text, sizeof text);
  CHECK_CONTAINS(text, "corrections, budget 10)");
  toy free_run = {.rho = -0.45};
  CHECK_EQ(run_toy(&free_run, 100, &r, &err), 0);
  CHECK_EQ(r.classical_gave_up, 0);
  CHECK_EQ(r.iterations, JMG_REFINE_MAX_ITER);
}

TEST(refine_step_budget_from_the_environment) {
  static dense d;
  jmg_refine_result r;
  const jmg_refine_steps gm = {.restart = GM,
                               .max_inner = 60,
                               .max_steps = 4,
                               .gmres_start = dense_gmres_start,
                               .arnoldi = dense_arnoldi,
                               .gmres_update = dense_gmres_update};
  const jmg_refine_steps classical = {.max_steps = 4};
  CHECK_EQ(jmg_refine_max_steps(&gm), 4);
  CHECK_EQ(jmg_refine_gmres_budget(&gm), 4);
  CHECK_EQ(jmg_refine_gmres_budget(&classical), 0);
  /* JAXMG_GMRES_MAX_INNER as it is, past the budget. */
  setenv("JAXMG_GMRES_MAX_INNER", "50", 1);
  CHECK_EQ(jmg_refine_gmres_budget(&gm), 50);
  unsetenv("JAXMG_GMRES_MAX_INNER");
  /* JAXMG_REFINE_MAX_STEPS=0: no budget (the hopeless matrix runs to
   * GMRES's own estimate); =4 over an engine's none. */
  setenv("JAXMG_REFINE_MAX_STEPS", "0", 1);
  CHECK_EQ(jmg_refine_max_steps(&gm), 0);
  CHECK_EQ(jmg_refine_gmres_budget(&gm), 60);
  dense_make_tf32(&d, 1e8, 3u);
  CHECK_EQ(run_dense_bounded(&d, 1, 1, &r), 0);
  CHECK_EQ(r.converged, 1);
  setenv("JAXMG_REFINE_MAX_STEPS", "4", 1);
  dense_make_tf32(&d, 1e12, 3u);
  CHECK_EQ(run_dense_bounded(&d, 1, 0, &r), 0);
  CHECK_EQ(r.converged, 0);
  CHECK_EQ(r.max_steps, 4);
  CHECK(r.iterations + r.gmres_inner <= 4);
  setenv("JAXMG_REFINE_MAX_STEPS", "x", 1);
  CHECK_EQ(jmg_refine_max_steps(&gm), 4);
  unsetenv("JAXMG_REFINE_MAX_STEPS");
}

/* --- the LAPACK engine's mixed routines ------------------------------------
 */

/* H = I - 2 v vᴴ / (vᴴ v) applied to the columns of m (n x n, column-major,
 * double complex): m = H m (left) or m H (right). */
static void reflect(double complex *m, const double complex *v, int n,
                    int left) {
  double vv = 0.0;
  for (int i = 0; i < n; ++i) vv += creal(conj(v[i]) * v[i]);
  for (int k = 0; k < n; ++k) {
    double complex s = 0.0;
    for (int i = 0; i < n; ++i)
      s += left ? conj(v[i]) * m[(size_t)k * n + i]
                : m[(size_t)i * n + k] * v[i];
    s *= 2.0 / vv;
    for (int i = 0; i < n; ++i) {
      if (left)
        m[(size_t)k * n + i] -= v[i] * s;
      else
        m[(size_t)i * n + k] -= s * conj(v[i]);
    }
  }
}

/* An n x n matrix of dtype t with singular values from 1 to 1/kappa: H1 D
 * H1 (Hermitian positive definite, hpd) or H1 D H2, H1 and H2 Householder
 * reflectors; stored in t into out and returned in double complex. */
static double complex *conditioned(jmg_dtype t, int n, double kappa, int hpd,
                                   unsigned seed, void *out) {
  double complex *m = calloc((size_t)n * n, sizeof *m);
  double complex *v1 = malloc((size_t)n * sizeof *v1);
  double complex *v2 = malloc((size_t)n * sizeof *v2);
  srand(seed);
  const int cplx = jmg_dtype_is_complex(t);
  for (int i = 0; i < n; ++i) {
    v1[i] = (rand() / (double)RAND_MAX - 0.5) +
            (cplx ? I * (rand() / (double)RAND_MAX - 0.5) : 0.0);
    v2[i] = (rand() / (double)RAND_MAX - 0.5) +
            (cplx ? I * (rand() / (double)RAND_MAX - 0.5) : 0.0);
    m[(size_t)i * n + i] = pow(kappa, -(double)i / (n - 1));
  }
  reflect(m, v1, n, 1);
  reflect(m, hpd ? v1 : v2, n, 0);
  for (size_t i = 0; i < (size_t)n * n; ++i) ref_store(t, out, i, m[i]);
  free(v1);
  free(v2);
  return m;
}

/* ||b - op(A) x|| / (||A||_F ||x|| + ||b||) over every column, the worst,
 * A column-major in double complex. */
static double backward_error(const double complex *a, const void *x,
                             const void *b, jmg_dtype t, int n, int k,
                             int transpose) {
  double anorm = 0.0, worst = 0.0;
  for (size_t i = 0; i < (size_t)n * n; ++i) anorm += creal(conj(a[i]) * a[i]);
  anorm = sqrt(anorm);
  for (int c = 0; c < k; ++c) {
    double rn = 0.0, xn = 0.0, bn = 0.0;
    for (int i = 0; i < n; ++i) {
      double complex s = ref_load(t, b, (size_t)c * n + i);
      for (int j = 0; j < n; ++j) {
        const double complex aij =
            transpose ? a[(size_t)i * n + j] : a[(size_t)j * n + i];
        s -= aij * ref_load(t, x, (size_t)c * n + j);
      }
      const double complex xi = ref_load(t, x, (size_t)c * n + i);
      const double complex bi = ref_load(t, b, (size_t)c * n + i);
      rn += creal(conj(s) * s);
      xn += creal(conj(xi) * xi);
      bn += creal(conj(bi) * bi);
    }
    const double e = sqrt(rn) / (anorm * sqrt(xn) + sqrt(bn));
    if (e > worst) worst = e;
  }
  return worst;
}

enum { MN = 24, MK = 2 };

/* One mixed call and the exact one on copies of the same A and b: the
 * outcome, both infos, x of each (into xm, xe), and the mixed x's backward
 * error. */
typedef struct pair_result {
  jmg_mixed_outcome out;
  int rc, info_mixed, info_exact;
  double berr;
} pair_result;

static pair_result solve_pair(jmg_dtype t, double kappa, int lu, int transpose,
                              unsigned seed, void *xm, void *xe) {
  const size_t es = jmg_dtype_size(t), nn = (size_t)MN * MN;
  void *a1 = malloc(nn * es), *a2 = malloc(nn * es), *b = malloc(MN * MK * es);
  double complex *a = conditioned(t, MN, kappa, !lu, seed, a1);
  memcpy(a2, a1, nn * es);
  for (size_t i = 0; i < (size_t)MN * MK; ++i)
    ref_store(
        t, b, i,
        (double)(i % 7) - 3.0 + (jmg_dtype_is_complex(t) ? 0.5 * I : 0.0));
  memcpy(xm, b, (size_t)MN * MK * es);
  memcpy(xe, b, (size_t)MN * MK * es);
  pair_result p;
  jmg_error err;
  jmg_error_clear(&err);
  if (lu) {
    p.rc = jmg_lapack_lu_solve_mixed_full(t, MN, a1, xm, MK, transpose,
                                          &p.info_mixed, &p.out, &err);
    p.rc |= jmg_lapack_lu_solve_full(t, MN, a2, xe, MK, transpose,
                                     &p.info_exact, &err);
  } else {
    p.rc = jmg_lapack_potrs_mixed_full(t, MN, a1, xm, MK, &p.info_mixed, &p.out,
                                       &err);
    p.rc |= jmg_lapack_potrs_full(t, MN, a2, xe, MK, NULL, &p.info_exact, &err);
  }
  p.berr = backward_error(a, xm, b, t, MN, MK, lu && transpose);
  free(a);
  free(a1);
  free(a2);
  free(b);
  return p;
}

TEST(lapack_mixed_refines_benign_matrices_to_the_exact_level) {
  register_reference_cholesky();
  register_reference_lu();
  const jmg_dtype types[] = {JMG_F64, JMG_C128};
  for (int ti = 0; ti < 2; ++ti)
    for (int op = 0; op < 3; ++op) { /* potrs, lu_solve, lu_solve with Aᵀ */
      const jmg_dtype t = types[ti];
      unsigned char xm[MN * MK * 16], xe[MN * MK * 16];
      pair_result p = solve_pair(t, 1e4, op > 0, op == 2, 7u + op, xm, xe);
      CHECK_EQ(p.rc, 0);
      CHECK_EQ(p.info_mixed, 0);
      CHECK_EQ(p.info_exact, 0);
      CHECK_EQ(p.out.lowered, 1);
      CHECK_EQ(p.out.converged, 1);
      CHECK_EQ(p.out.fell_back, 0);
      CHECK(p.out.iterations >= 1 && p.out.iterations <= 10);
      CHECK(p.out.berr <= sqrt((double)MN) * 0.5 * DBL_EPSILON);
      /* The caller's measure agrees, and x is the exact path's to ~kappa u. */
      CHECK(p.berr <= 4.0 * sqrt((double)MN) * DBL_EPSILON);
      for (size_t i = 0; i < (size_t)MN * MK; ++i)
        CHECK(cabs(ref_load(t, xm, i) - ref_load(t, xe, i)) <=
              1e-9 * (1.0 + cabs(ref_load(t, xe, i))));
    }
}

TEST(lapack_mixed_falls_back_on_a_hopeless_matrix_to_the_exact_answer) {
  register_reference_cholesky();
  register_reference_lu();
  for (int op = 0; op < 3; ++op) {
    unsigned char xm[MN * MK * 16], xe[MN * MK * 16];
    pair_result p =
        solve_pair(JMG_F64, 1e13, op > 0, op == 2, 11u + op, xm, xe);
    CHECK_EQ(p.rc, 0);
    CHECK_EQ(p.info_mixed, p.info_exact);
    CHECK_EQ(p.out.converged, 0);
    CHECK_EQ(p.out.fell_back, 1);
    /* The fallback is the exact routine on the same A and b. */
    CHECK(memcmp(xm, xe, (size_t)MN * MK * sizeof(double)) == 0);
  }
}

TEST(lapack_mixed_gmres_ir_past_classical_refinement_s_reach) {
  /* kappa 1e10: u_float32 kappa ~ 600, classical refinement stalls (it
   * still converges at 1e9 on these matrices); GMRES-IR preconditioned by
   * the float32 factor converges without falling back. */
  register_reference_cholesky();
  register_reference_lu();
  const jmg_dtype types[] = {JMG_F64, JMG_C128};
  for (int ti = 0; ti < 2; ++ti)
    for (int op = 0; op < 3; ++op) {
      const jmg_dtype t = types[ti];
      unsigned char xm[MN * MK * 16], xe[MN * MK * 16];
      pair_result p = solve_pair(t, 1e10, op > 0, op == 2, 21u + op, xm, xe);
      CHECK_EQ(p.rc, 0);
      CHECK_EQ(p.info_mixed, 0);
      CHECK_EQ(p.out.converged, 1);
      CHECK_EQ(p.out.fell_back, 0);
      CHECK(p.out.gmres_outer >= 1);
      CHECK(p.out.berr <= sqrt((double)MN) * 0.5 * DBL_EPSILON);
      CHECK(p.berr <= 4.0 * sqrt((double)MN) * DBL_EPSILON);
    }
  /* kappa 1e14: past GMRES-IR's reach with a float32 factor; the fallback
   * gives the exact path's very answer. */
  for (int op = 0; op < 3; ++op) {
    unsigned char xm[MN * MK * 16], xe[MN * MK * 16];
    pair_result p =
        solve_pair(JMG_F64, 1e14, op > 0, op == 2, 31u + op, xm, xe);
    CHECK_EQ(p.rc, 0);
    CHECK_EQ(p.out.converged, 0);
    CHECK_EQ(p.out.fell_back, 1);
    CHECK(memcmp(xm, xe, (size_t)MN * MK * sizeof(double)) == 0);
  }
}

TEST(lapack_mixed_reports_the_exact_path_s_info) {
  register_reference_cholesky();
  register_reference_lu();
  enum { N = 4 };
  /* Not positive definite at the leading minor of order 3 (diagonal 1, 1,
   * -1, 1); and singular, with a zero third row and column for LU. */
  for (int lu = 0; lu < 2; ++lu) {
    double a[N * N] = {0}, b[N] = {1, 2, 3, 4};
    for (int i = 0; i < N; ++i)
      a[i * N + i] = (i == 2) ? (lu ? 0.0 : -1.0) : 1.0;
    int info = -7;
    jmg_mixed_outcome out;
    jmg_error err;
    jmg_error_clear(&err);
    const int rc = lu ? jmg_lapack_lu_solve_mixed_full(JMG_F64, N, a, b, 1, 1,
                                                       &info, &out, &err)
                      : jmg_lapack_potrs_mixed_full(JMG_F64, N, a, b, 1, &info,
                                                    &out, &err);
    CHECK_EQ(rc, 0);
    CHECK_EQ(info, 3);
    CHECK_EQ(out.fell_back, 1);
  }
}

TEST(lapack_mixed_a_past_float32_s_range_falls_back) {
  register_reference_cholesky();
  enum { N = 3 };
  double a[N * N] = {1e300, 0, 0, 0, 1e300, 0, 0, 0, 1e300};
  double b[N] = {1e300, 2e300, 3e300};
  int info = -7;
  jmg_mixed_outcome out;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_lapack_potrs_mixed_full(JMG_F64, N, a, b, 1, &info, &out, &err),
           0);
  CHECK_EQ(info, 0);
  CHECK_EQ(out.lowered, 1);
  CHECK_EQ(out.fell_back, 1);
  CHECK(fabs(b[0] - 1.0) < 1e-15 && fabs(b[2] - 3.0) < 1e-15);
}

TEST(lapack_mixed_float32_runs_the_exact_path) {
  register_reference_cholesky();
  enum { N = 2 };
  float a[N * N] = {4, 0, 0, 9}, b[N] = {8, 9};
  int info = -7;
  jmg_mixed_outcome out;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_lapack_potrs_mixed_full(JMG_F32, N, a, b, 1, &info, &out, &err),
           0);
  CHECK_EQ(info, 0);
  CHECK_EQ(out.lowered, 0);
  CHECK_EQ(out.fell_back, 0);
  CHECK(b[0] == 2.0f && b[1] == 1.0f);
}

TEST(lapack_mixed_names_the_lower_precision_routine_it_lacks) {
  enum { N = 2 };
  double a[N * N] = {4, 0, 0, 9}, b[N] = {8, 9};
  int info = 0;
  jmg_mixed_outcome out;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK(jmg_lapack_potrs_mixed_full(JMG_F64, N, a, b, 1, &info, &out, &err) <
        0);
  CHECK_CONTAINS(err.msg, "LAPACK routine spotrf was not registered");
  CHECK_CONTAINS(err.op, "potrs");
}

/* --- selection: a mixed call goes to an engine with a mixed routine --------
 */

/* The CPU library's export (ffi/cpu_targets.c), over its real engines. */
int jaxmg_engine_check_cpu(const char *op, int nparts, int nodes,
                           const char *dtype, int64_t m, int64_t n,
                           int64_t tile, int precision, char *out, size_t len,
                           int64_t *block);

/* A local-model engine with potrs and lu_solve but no mixed routine (as
 * cuSOLVERMp, which libjaxmg_cpu.so lacks). */
static int fake_local_solve(const jmg_engine *e, const jmg_local_matrix *a,
                            void *b, int64_t nrhs, void *diag, int *info,
                            jmg_error *err) {
  (void)e, (void)a, (void)b, (void)nrhs, (void)diag, (void)err;
  *info = 0;
  return 0;
}

static int fake_local_lu(const jmg_engine *e, const jmg_local_matrix *a,
                         void *b, int64_t nrhs, int transpose, int *info,
                         jmg_error *err) {
  (void)transpose;
  return fake_local_solve(e, a, b, nrhs, NULL, info, err);
}

static const jmg_engine g_exact_local = {
    .name = "exact-local",
    .model = JMG_MODEL_LOCAL,
    .local = {.potrs = fake_local_solve, .lu_solve = fake_local_lu}};

/* JAXMG_ENGINE set to name (NULL: unset) around one engine check. */
static int check_named(const jmg_engine *const *engines, const char *name,
                       const char *op, char *out, size_t len) {
  const char *saved = getenv("JAXMG_ENGINE");
  char keep[64] = "";
  if (saved != NULL) snprintf(keep, sizeof keep, "%s", saved);
  if (name != NULL)
    setenv("JAXMG_ENGINE", name, 1);
  else
    unsetenv("JAXMG_ENGINE");
  const int rc = jmg_engine_check(engines, op, 4, 1, "float64", 0, 64, 16,
                                  JMG_PRECISION_MIXED, out, len, NULL);
  if (saved != NULL)
    setenv("JAXMG_ENGINE", keep, 1);
  else
    unsetenv("JAXMG_ENGINE");
  return rc;
}

TEST(engine_select_sends_mixed_solves_to_engines_with_a_mixed_routine) {
  CHECK_EQ(jmg_engine_has_precision(&jmg_lapack_engine, JMG_OP_POTRS,
                                    JMG_PRECISION_MIXED),
           1);
  CHECK_EQ(jmg_engine_has_precision(&jmg_lapack_engine, JMG_OP_LU_SOLVE,
                                    JMG_PRECISION_MIXED),
           1);
  CHECK_EQ(jmg_engine_has_precision(&jmg_lapack_engine, JMG_OP_SYEVD,
                                    JMG_PRECISION_MIXED),
           0);
  /* The local model: lapack-local has both; an engine without them not. */
  CHECK_EQ(jmg_engine_has_precision(&jmg_lapack_local_engine, JMG_OP_POTRS,
                                    JMG_PRECISION_MIXED),
           1);
  CHECK_EQ(jmg_engine_has_precision(&jmg_lapack_local_engine, JMG_OP_LU_SOLVE,
                                    JMG_PRECISION_MIXED),
           1);
  CHECK_EQ(jmg_engine_has_precision(&g_exact_local, JMG_OP_POTRS,
                                    JMG_PRECISION_MIXED),
           0);
  CHECK_EQ(jmg_engine_has_precision(&g_exact_local, JMG_OP_POTRS,
                                    JMG_PRECISION_EXACT),
           1);
  char out[1024];
  const jmg_engine *const cpu[] = {&jmg_lapack_engine,
                                   &jmg_lapack_local_engine, NULL};
  CHECK_EQ(check_named(cpu, NULL, "potrs", out, sizeof out), 1);
  CHECK_CONTAINS(out, "lapack");
  CHECK_EQ(check_named(cpu, "lapack-local", "lu_solve", out, sizeof out), 1);
  CHECK_CONTAINS(out, "lapack-local");
  /* No precision past mixed. */
  CHECK_EQ(jaxmg_engine_check_cpu("potrs", 4, 1, "float64", 0, 64, 16, 2, out,
                                  sizeof out, NULL),
           -1);
  CHECK_CONTAINS(out, "unknown precision 2");
  /* An engine named that has none: the op, the engine, what to pass. */
  const jmg_engine *const exact_only[] = {&g_exact_local, NULL};
  CHECK_EQ(check_named(exact_only, "exact-local", "lu_solve", out, sizeof out),
           0);
  CHECK_CONTAINS(out, "lu_solve float64 N=64 T_A=16 precision=\"mixed\"");
  CHECK_CONTAINS(out,
                 "has no lu_solve with precision=\"mixed\" (pass "
                 "precision=\"exact\"");
}
