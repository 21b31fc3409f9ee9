/* potrs and lu_solve in mixed precision on CPU devices (mixed.h): the
 * lower-precision factorization, the refinement loop's steps
 * (engine/refine.h) on host buffers, and the fallback to the exact
 * routine. Classical refinement, then GMRES-IR where it stalls: the
 * GMRES steps below (Arnoldi by classical Gram-Schmidt twice, the
 * preconditioner the float32/complex64 factor) on host vectors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "engine/lapack/lapack.h"
#include "engine/lapack/mixed.h"
#include "engine/lapack/table.h"
#include "engine/refine.h"

/* One solve's buffers and routines, the refinement steps' context. */
typedef struct solve_ctx {
  const char *op;
  jmg_dtype dtype, low;
  int n, k;
  const void *a; /* the gathered A, intact (A's dtype) */
  void *f;       /* A's lower-precision factor */
  int *ipiv;     /* lu_solve's pivots; NULL for potrs */
  char trans;    /* getrs's: 'T' or 'N' */
  jmg_mixed_kind kind;
  void *kept; /* the right-hand sides, kept (b below) */
  const void *b;
  void *x;                       /* the solution: the caller's b */
  void *r;                       /* the residual (A's dtype) */
  void *w;                       /* a right-hand side in the lower precision */
  const jmg_lapack_routines *rl; /* the lower precision's */
  /* GMRES-IR: the basis (JMG_GMRES_RESTART + 1 vectors of n, A's dtype), a
   * zero vector of n, the Gram-Schmidt coefficients (pairs). */
  double *v, *zero, *coef;
} solve_ctx;

/* w = F^-1 w (its first cols columns), by the lower-precision factor. */
static int low_solve_cols(solve_ctx *c, int cols, jmg_error *err) {
  int info = 0;
  char lower = 'L';
  if (c->ipiv != NULL)
    c->rl->getrs(&c->trans, &c->n, &cols, c->f, &c->n, c->ipiv, c->w, &c->n,
                 &info);
  else
    c->rl->potrs(&lower, &c->n, &cols, c->f, &c->n, c->w, &c->n, &info);
  if (info < 0)
    return jmg_error_set(err, JMG_ELAPACK, c->op,
                         c->ipiv != NULL ? "LAPACK getrs (lower precision)"
                                         : "LAPACK potrs (lower precision)",
                         "argument %d was rejected", -info);
  return 0;
}

static int low_solve(solve_ctx *c, jmg_error *err) {
  return low_solve_cols(c, c->k, err);
}

static size_t count_of(const solve_ctx *c) {
  return (size_t)c->n * (size_t)c->k;
}

/* x = F^-1 b. */
static int step_first(void *ctx, jmg_error *err) {
  solve_ctx *c = ctx;
  jmg_mixed_narrow(c->dtype, c->b, c->w, count_of(c));
  int rc = low_solve(c, err);
  if (rc == 0) jmg_mixed_widen(c->dtype, c->w, c->x, count_of(c), 0);
  return rc;
}

/* r = b - A x and the norms of r's and x's columns. */
static int step_residual(void *ctx, double *rnorm, double *xnorm,
                         jmg_error *err) {
  (void)err;
  solve_ctx *c = ctx;
  jmg_mixed_residual(c->dtype, c->a, c->n, c->b, c->x, c->r, c->k, c->kind);
  jmg_mixed_column_norms(c->dtype, c->r, c->n, c->k, rnorm);
  jmg_mixed_column_norms(c->dtype, c->x, c->n, c->k, xnorm);
  return 0;
}

/* x = x + F^-1 r. */
static int step_correct(void *ctx, jmg_error *err) {
  solve_ctx *c = ctx;
  jmg_mixed_narrow(c->dtype, c->r, c->w, count_of(c));
  int rc = low_solve(c, err);
  if (rc == 0) jmg_mixed_widen(c->dtype, c->w, c->x, count_of(c), 1);
  return rc;
}

/* --- GMRES-IR's steps (engine/refine.h) on host vectors ------------------ */

/* Reals in one vector of n. */
static size_t vlen(const solve_ctx *c) {
  return (jmg_dtype_is_complex(c->dtype) ? 2 : 1) * (size_t)c->n;
}

/* u^H w (u^T w for float64) into re, im. */
static void vdot(const solve_ctx *c, const double *u, const double *w,
                 double *re, double *im) {
  double sr = 0.0, si = 0.0;
  if (jmg_dtype_is_complex(c->dtype))
    for (size_t i = 0; i < (size_t)c->n; ++i) {
      sr += u[2 * i] * w[2 * i] + u[2 * i + 1] * w[2 * i + 1];
      si += u[2 * i] * w[2 * i + 1] - u[2 * i + 1] * w[2 * i];
    }
  else
    for (size_t i = 0; i < (size_t)c->n; ++i) sr += u[i] * w[i];
  *re = sr;
  *im = si;
}

/* w += (re + i im) u. */
static void vaxpy(const solve_ctx *c, double re, double im, const double *u,
                  double *w) {
  if (jmg_dtype_is_complex(c->dtype))
    for (size_t i = 0; i < (size_t)c->n; ++i) {
      w[2 * i] += re * u[2 * i] - im * u[2 * i + 1];
      w[2 * i + 1] += re * u[2 * i + 1] + im * u[2 * i];
    }
  else
    for (size_t i = 0; i < (size_t)c->n; ++i) w[i] += re * u[i];
}

/* dst = F^-1 src (one column of n in A's dtype; dst may be src); negate
 * with sign -1. */
static int precondition(solve_ctx *c, const double *src, double *dst,
                        double sign, jmg_error *err) {
  jmg_mixed_narrow(c->dtype, src, c->w, (size_t)c->n);
  int rc = low_solve_cols(c, 1, err);
  if (rc != 0) return rc;
  jmg_mixed_widen(c->dtype, c->w, dst, (size_t)c->n, 0);
  if (sign < 0)
    for (size_t i = 0; i < vlen(c); ++i) dst[i] = -dst[i];
  return 0;
}

/* v = v / ||v|| where it is not 0; the norm into *norm. */
static void normalize(solve_ctx *c, double *v, double *norm) {
  jmg_mixed_column_norms(c->dtype, v, c->n, 1, norm);
  if (*norm > 0.0 && isfinite(*norm))
    for (size_t i = 0; i < vlen(c); ++i) v[i] /= *norm;
}

static int step_gmres_start(void *ctx, int64_t col, double *beta,
                            jmg_error *err) {
  solve_ctx *c = ctx;
  int rc = precondition(c, (const double *)c->r + (size_t)col * vlen(c), c->v,
                        1.0, err);
  if (rc == 0) normalize(c, c->v, beta);
  return rc;
}

static int step_arnoldi(void *ctx, int j, double *h, jmg_error *err) {
  solve_ctx *c = ctx;
  const size_t len = vlen(c);
  double *w = c->v + (size_t)(j + 1) * len;
  /* w = -A V_j (a residual against b = 0), then F^-1 w negated. */
  jmg_mixed_residual(c->dtype, c->a, c->n, c->zero, c->v + (size_t)j * len, w,
                     1, c->kind);
  int rc = precondition(c, w, w, -1.0, err);
  if (rc != 0) return rc;
  for (int i = 0; i < 2 * (j + 2); ++i) h[i] = 0.0;
  /* Classical Gram-Schmidt, twice. */
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i <= j; ++i)
      vdot(c, c->v + (size_t)i * len, w, &c->coef[2 * i], &c->coef[2 * i + 1]);
    for (int i = 0; i <= j; ++i) {
      vaxpy(c, -c->coef[2 * i], -c->coef[2 * i + 1], c->v + (size_t)i * len, w);
      h[2 * i] += c->coef[2 * i];
      h[2 * i + 1] += c->coef[2 * i + 1];
    }
  }
  normalize(c, w, &h[2 * (j + 1)]);
  return 0;
}

static int step_gmres_update(void *ctx, int64_t col, int k, const double *y,
                             jmg_error *err) {
  (void)err;
  solve_ctx *c = ctx;
  const size_t len = vlen(c);
  double *x = (double *)c->x + (size_t)col * len;
  for (int i = 0; i < k; ++i)
    vaxpy(c, y[2 * i], y[2 * i + 1], c->v + (size_t)i * len, x);
  return 0;
}

/* The exact routine on the gathered A (b as the caller gave it). */
static int exact(const solve_ctx *c, void *full, void *b, int transpose,
                 int *info, jmg_error *err) {
  if (c->ipiv != NULL || c->kind != JMG_MIXED_HERMITIAN)
    return jmg_lapack_lu_solve_full(c->dtype, c->n, full, b, c->k, transpose,
                                    info, err);
  return jmg_lapack_potrs_full(c->dtype, c->n, full, b, c->k, NULL, info, err);
}

static void release(solve_ctx *c) {
  free(c->f);
  free(c->r);
  free(c->w);
  free(c->kept);
  free(c->ipiv);
  free(c->v);
  free(c->zero);
  free(c->coef);
  c->f = c->r = c->w = c->kept = NULL;
  c->ipiv = NULL;
  c->v = c->zero = c->coef = NULL;
}

/* The lower precision's routines registered, sizes in LAPACK's int, and
 * the buffers taken (all or none: JMG_ENOMEM before anything is written). */
static int prepare(solve_ctx *c, int64_t n, int64_t nrhs, int lu,
                   jmg_error *err) {
  c->rl = jmg_lapack_routines_for(c->low);
  const void *factor =
      lu ? (const void *)c->rl->getrf : (const void *)c->rl->potrf;
  const void *solve =
      lu ? (const void *)c->rl->getrs : (const void *)c->rl->potrs;
  int rc =
      jmg_lapack_require(factor, c->low, lu ? "getrf" : "potrf", c->op, err);
  if (rc == 0)
    rc = jmg_lapack_require(solve, c->low, lu ? "getrs" : "potrs", c->op, err);
  if (rc == 0) rc = jmg_lapack_int(n, "N", c->op, &c->n, err);
  if (rc == 0) rc = jmg_lapack_int(nrhs, "NRHS", c->op, &c->k, err);
  if (rc != 0) return rc;
  const size_t nn = (size_t)n * (size_t)n, nk = (size_t)n * (size_t)nrhs;
  const size_t hi = jmg_dtype_size(c->dtype), lo = jmg_dtype_size(c->low);
  c->f = malloc(nn * lo + 1);
  c->r = malloc(nk * hi + 1);
  c->w = malloc(nk * lo + 1);
  c->kept = malloc(nk * hi + 1);
  c->b = c->kept;
  c->ipiv = lu ? malloc((size_t)n * sizeof(int) + 1) : NULL;
  c->v = malloc((JMG_GMRES_RESTART + 1) * (size_t)n * hi + 1);
  c->zero = calloc((size_t)n * hi + 1, 1);
  c->coef = malloc(2 * (JMG_GMRES_RESTART + 2) * sizeof(double));
  if (c->f && c->r && c->w && c->kept && (!lu || c->ipiv) && c->v &&
      c->zero && c->coef)
    return 0;
  release(c);
  return jmg_error_set(err, JMG_ENOMEM, c->op, "malloc",
                       "cannot allocate the lower-precision copy of A and "
                       "the refinement's vectors (N=%lld, NRHS=%lld)",
                       (long long)n, (long long)nrhs);
}

/* Factors the lower-precision copy: 0 and *low_info (> 0: not positive
 * definite, or a zero pivot, in the lower precision), or an error. */
static int factor(solve_ctx *c, int *low_info, jmg_error *err) {
  char lower = 'L';
  *low_info = 0;
  if (c->ipiv != NULL)
    c->rl->getrf(&c->n, &c->n, c->f, &c->n, c->ipiv, low_info);
  else
    c->rl->potrf(&lower, &c->n, c->f, &c->n, low_info);
  if (*low_info < 0)
    return jmg_error_set(err, JMG_ELAPACK, c->op,
                         c->ipiv != NULL ? "LAPACK getrf (lower precision)"
                                         : "LAPACK potrf (lower precision)",
                         "argument %d was rejected", -*low_info);
  return 0;
}

/* Refinement from the lower-precision factor into out. */
static int refine(solve_ctx *c, jmg_mixed_outcome *out, jmg_error *err) {
  double *bnorm = malloc((size_t)c->k * sizeof *bnorm + 1);
  if (bnorm == NULL)
    return jmg_error_set(err, JMG_ENOMEM, c->op, "malloc",
                         "cannot allocate %d norms", c->k);
  jmg_mixed_column_norms(c->dtype, c->b, c->n, c->k, bnorm);
  const double anorm =
      jmg_mixed_frobenius(c->dtype, c->a, c->n, c->kind == JMG_MIXED_HERMITIAN);
  const jmg_refine_steps steps = {.ctx = c,
                                  .first = step_first,
                                  .residual = step_residual,
                                  .correct = step_correct,
                                  .restart = JMG_GMRES_RESTART,
                                  .gmres_start = step_gmres_start,
                                  .arnoldi = step_arnoldi,
                                  .gmres_update = step_gmres_update};
  jmg_refine_result r;
  int rc = jmg_refine_run(&steps, c->dtype, c->n, c->k, bnorm, anorm, &r, err);
  free(bnorm);
  if (rc != 0) return rc;
  out->converged = r.converged;
  out->iterations = r.iterations;
  out->berr = r.berr;
  out->gmres_outer = r.gmres_outer;
  out->gmres_inner = r.gmres_inner;
  char mark[128];
  jmg_refine_describe(&r, c->dtype, mark, sizeof mark);
  jmg_trace_mark(mark);
  return 0;
}

/* Both ops: lu selects getrf/getrs (transpose as jmg_lapack_lu_solve_full's)
 * over potrf/potrs. */
static int mixed_full(const char *op, jmg_dtype dtype, int64_t n, void *full,
                      void *b, int64_t nrhs, int lu, int transpose, int *info,
                      jmg_mixed_outcome *out, jmg_error *err) {
  solve_ctx c = {.op = op,
                 .dtype = dtype,
                 .a = full,
                 .x = b,
                 .trans = transpose ? 'T' : 'N',
                 .kind = !lu         ? JMG_MIXED_HERMITIAN
                         : transpose ? JMG_MIXED_TRANSPOSED
                                     : JMG_MIXED_GENERAL};
  memset(out, 0, sizeof *out);
  out->berr = NAN;
  *info = 0;
  /* No lower precision, or nothing to refine: the exact path. */
  if (!jmg_refine_lower(dtype, &c.low) || nrhs < 1 || n < 1) {
    jmg_trace_mark(jmg_refine_lower(dtype, &c.low)
                       ? "no right-hand side: exact path"
                       : "no lower precision on CPU devices: exact path");
    if (lu)
      return jmg_lapack_lu_solve_full(dtype, n, full, b, nrhs, transpose, info,
                                      err);
    return jmg_lapack_potrs_full(dtype, n, full, b, nrhs, NULL, info, err);
  }
  int rc = prepare(&c, n, nrhs, lu, err);
  if (rc != 0) return rc;
  memcpy(c.kept, b, count_of(&c) * jmg_dtype_size(dtype));
  out->lowered = 1;
  int low_info = 0;
  const int overflow =
      jmg_mixed_narrow(dtype, full, c.f, (size_t)n * (size_t)n);
  char mark[96];
  if (!overflow) rc = factor(&c, &low_info, err);
  double shift = 0.0;
  if (rc == 0 && !overflow && !lu && low_info > 0) {
    /* Not positive definite in the lower precision: once more with the
     * diagonal shifted (refine.h, JMG_REFINE_SHIFT). */
    shift = JMG_REFINE_SHIFT * jmg_refine_unit_roundoff(c.low);
    jmg_mixed_narrow(dtype, full, c.f, (size_t)n * (size_t)n);
    float *f = c.f;
    const size_t step = (jmg_dtype_is_complex(dtype) ? 2 : 1) * ((size_t)n + 1);
    for (size_t i = 0; i < (size_t)n; ++i) f[i * step] *= (float)(1.0 + shift);
    rc = factor(&c, &low_info, err);
  }
  char shifted[64] = "";
  if (shift > 0.0 && low_info == 0)
    snprintf(shifted, sizeof shifted, " (diagonal shifted by %.2g)", shift);
  snprintf(mark, sizeof mark, "%s %s%s%s", lu ? "getrf" : "potrf",
           jmg_dtype_name(c.low), shifted,
           overflow        ? " skipped (A exceeds its range)"
           : low_info != 0 ? " failed"
                           : "");
  jmg_trace_mark(mark);
  if (rc == 0 && !overflow && low_info == 0) rc = refine(&c, out, err);
  if (rc == 0 && !out->converged) {
    /* The exact factorization on the intact A, from the caller's b. */
    memcpy(b, c.b, count_of(&c) * jmg_dtype_size(dtype));
    free(c.f);
    c.f = NULL;
    out->fell_back = 1;
    rc = exact(&c, full, b, transpose, info, err);
    snprintf(mark, sizeof mark, "fallback %s %s", jmg_dtype_name(dtype),
             lu ? "getrf+getrs" : "potrf+potrs");
    jmg_trace_mark(mark);
  }
  release(&c);
  return rc;
}

int jmg_lapack_potrs_mixed_full(jmg_dtype dtype, int64_t n, void *full, void *b,
                                int64_t nrhs, int *info,
                                jmg_mixed_outcome *outcome, jmg_error *err) {
  jmg_mixed_outcome ignored;
  return mixed_full("potrs", dtype, n, full, b, nrhs, 0, 0, info,
                    outcome != NULL ? outcome : &ignored, err);
}

int jmg_lapack_lu_solve_mixed_full(jmg_dtype dtype, int64_t n, void *full,
                                   void *b, int64_t nrhs, int transpose,
                                   int *info, jmg_mixed_outcome *outcome,
                                   jmg_error *err) {
  jmg_mixed_outcome ignored;
  return mixed_full("lu_solve", dtype, n, full, b, nrhs, 1, transpose, info,
                    outcome != NULL ? outcome : &ignored, err);
}

int jmg_lapack_potrs_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                           void *b, int64_t nrhs, int *info, jmg_error *err) {
  (void)e;
  void *full;
  int rc = jmg_lapack_gather(a, "potrs", &full, err);
  if (rc != 0) return rc;
  rc = jmg_lapack_potrs_mixed_full(a->dtype, a->n, full, b, nrhs, info, NULL,
                                   err);
  free(full);
  return rc;
}

int jmg_lapack_lu_solve_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                              void *b, int64_t nrhs, int transpose, int *info,
                              jmg_error *err) {
  (void)e;
  void *full;
  int rc = jmg_lapack_gather(a, "lu_solve", &full, err);
  if (rc != 0) return rc;
  rc = jmg_lapack_lu_solve_mixed_full(a->dtype, a->n, full, b, nrhs, transpose,
                                      info, NULL, err);
  free(full);
  return rc;
}

int jmg_lapack_workspace(const jmg_engine *e, const jmg_problem *p,
                         const jmg_workspace_query *q, size_t *bytes,
                         jmg_error *err) {
  (void)e;
  const char *op = jmg_op_name(p->op);
  if (p->op != JMG_OP_POTRS && p->op != JMG_OP_LU_SOLVE)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "LAPACK",
                         "the engine cannot tell the workspace of %s ahead of "
                         "a call (LAPACK is asked for it during the call)",
                         op);
  const size_t n = (size_t)p->n, nrhs = (size_t)(q->nrhs > 0 ? q->nrhs : 0);
  const size_t hi = jmg_dtype_size(p->dtype);
  const int lu = p->op == JMG_OP_LU_SOLVE;
  /* The gathered A, and the exact LU's pivots. */
  *bytes = n * n * hi + (lu ? n * sizeof(int) : 0);
  jmg_dtype low;
  if (p->precision == JMG_PRECISION_MIXED && jmg_refine_lower(p->dtype, &low) &&
      nrhs > 0) {
    const size_t lo = jmg_dtype_size(low);
    /* A's lower-precision copy; b kept and the residual (A's dtype), a
     * right-hand side in the lower precision; its own pivots; GMRES-IR's
     * basis and a zero vector (A's dtype), its coefficients. */
    *bytes += n * n * lo + n * nrhs * (2 * hi + lo) +
              (lu ? n * sizeof(int) : 0) +
              (JMG_GMRES_RESTART + 2) * n * hi +
              2 * (JMG_GMRES_RESTART + 2) * sizeof(double);
  }
  return 0;
}
