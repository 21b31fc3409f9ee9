/* lu_solve on cuSOLVERMp: cusolverMpGetrf (partial pivoting) and
 * cusolverMpGetrs on the right-hand sides in chunks of up to T_A columns (B
 * on grid column 0, mp.h, jmg_mp_rhs), then X broadcast to every rank.
 *
 * A singular A: cuSOLVERMp 0.8's getrf returns info 0 for a matrix with an
 * exactly zero pivot (all ones, or a zero row and column, gave info 0 and
 * NaN from getrs: docs/gpu-notes.md, cuSOLVERMp 0.8.0), where LAPACK's
 * names the first one. So the ranks read U's diagonal after getrf
 * (jmg_mp_diag) and take the first pivot that is exactly zero, or not
 * finite (what a finite A gets only from a division by a zero pivot), as
 * info: the other engines' status. getrs is then not called.
 *
 * The transposed solve (transpose 1: Aᵀ X = B, not conjugated): getrs
 * solves only with A itself ("Only CUBLAS_OP_N is currently supported",
 * functions.html), so the ranks factor Aᵀ instead: a scratch part in A's
 * layout receives Aᵀ (transpose.c: blocks exchanged over NCCL, each
 * transposed by cuBLAS), and getrf/getrs run on it. This is the ops layer's
 * usual case: the engines hold Aᵀ of the user's matrix. A is overwritten
 * or left as it is (engine.h: not returned). */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "common/trace.h"
#include "engine/cusolvermp/mp.h"

/* What cusolverMpGetrs needs beside the column (jmg_mp_rhs_solve's ctx). */
typedef struct mp_getrs_ctx {
  jmg_mp_desc_t da;   /* the factored matrix's descriptor */
  void *m;            /* the factored matrix: A, or Aᵀ in a scratch part */
  const int64_t *ipiv; /* getrf's pivots */
} mp_getrs_ctx;

/* The first zero pivot on U's diagonal (1-based), or 0. */
static int first_zero_pivot(const jmg_mp_call *c, const void *diag) {
  const jmg_local_matrix *a = c->a;
  const int single = jmg_dtype_real_size(a->dtype) == 4;
  const size_t step = jmg_dtype_is_complex(a->dtype) ? 2 : 1;
  for (int64_t i = 0; i < a->n; ++i) {
    int zero = 1, finite = 1;
    for (size_t p = 0; p < step; ++p) {
      const size_t k = (size_t)i * step + p;
      const double v =
          single ? (double)((const float *)diag)[k] : ((const double *)diag)[k];
      zero = zero && v == 0.0;
      finite = finite && isfinite(v);
    }
    if (zero || !finite) return i + 1 > INT_MAX ? INT_MAX : (int)(i + 1);
  }
  return 0;
}

/* cusolverMpGetrs on one chunk (jmg_mp_rhs_solve). */
static cusolverStatus_t solve_chunk(jmg_mp_call *c, void *col, int64_t ncols,
                                    jmg_mp_desc_t col_desc, int *d_info,
                                    void *ctx) {
  const mp_getrs_ctx *g = ctx;
  return c->api->getrs(c->handle, CUBLAS_OP_N, c->a->n, ncols, g->m, 1, 1,
                       g->da, g->ipiv, col, 1, 1, col_desc, c->type, c->d_work,
                       c->d_bytes, c->cuda.host_work, c->h_bytes, d_info);
}

/* One call's buffers beside the library's workspace (step 1). */
typedef struct lu_bufs {
  jmg_mp_rhs r;
  jmg_mp_stage st;
  int64_t *ipiv;
  void *d_diag, *h_diag;
  void *m; /* the matrix factored: A, or Aᵀ in a scratch part */
} lu_bufs;

static int take_buffers(jmg_mp_call *c, void *b, int64_t nrhs, int transpose,
                        lu_bufs *u, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  /* LOCr(M_A) + MB_A pivots (functions.html, cusolverMpGetrf). */
  int rc = jmg_mp_take(c, (size_t)(a->rows + a->mb) * sizeof(int64_t),
                       (void **)&u->ipiv, err);
  if (rc == 0) rc = jmg_mp_rhs_take(c, b, nrhs, &u->r, err);
  if (rc == 0) rc = jmg_mp_diag_take(c, &u->d_diag, &u->h_diag, err);
  if (rc == 0 && transpose) {
    rc = jmg_mp_take(c, (size_t)(a->ld * a->cols) * c->elem, &u->m, err);
    if (rc == 0) rc = jmg_mp_transpose_take(c, &u->st, err);
  }
  return rc;
}

/* Step 2: the grid, the descriptors, getrf's and getrs's workspace. */
static int workspace(jmg_mp_call *c, lu_bufs *u, void *b, jmg_mp_desc_t *da,
                     jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const jmg_mp_api *api = c->api;
  size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
  int rc = jmg_mp_grid(c, err);
  if (rc == 0) rc = jmg_mp_desc_a(c, da, err);
  if (rc == 0) rc = jmg_mp_rhs_desc(c, &u->r, err);
  if (rc == 0)
    rc = jmg_mp_check(api->getrf_buffer_size(c->handle, a->n, a->n, u->m, 1, 1,
                                             *da, u->ipiv, c->type, &d1, &h1),
                      c, "cusolverMpGetrf_bufferSize", err);
  if (rc == 0)
    rc = jmg_mp_check(
        api->getrs_buffer_size(
            c->handle, CUBLAS_OP_N, a->n, u->r.width, u->m, 1, 1, *da, u->ipiv,
            jmg_mp_rhs_col(c, &u->r, b, 0), 1, 1, u->r.desc, c->type, &d2, &h2),
        c, "cusolverMpGetrs_bufferSize", err);
  return jmg_mp_take_work(c, rc, d1, h1, d2, h2, err);
}

/* getrf of u->m, its info agreed, then the first zero pivot of U's
 * diagonal (the same diagonal on every rank, so the same *f). */
static int factor(jmg_mp_call *c, lu_bufs *u, jmg_mp_desc_t da, int *f,
                  jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  int rc = jmg_mp_zero_info(c, err);
  cusolverStatus_t st = CUSOLVER_STATUS_SUCCESS;
  if (rc == 0)
    st = c->api->getrf(c->handle, a->n, a->n, u->m, 1, 1, da, u->ipiv, c->type,
                       c->d_work, c->d_bytes, c->cuda.host_work, c->h_bytes,
                       c->cuda.d_info);
  rc = jmg_mp_agree_factor(c, rc, st, "cusolverMpGetrf", f, err);
  /* The first zero pivot from U's diagonal, the same on every rank, also
   * where getrf gave an info: on several ranks cusolverMpGetrf (0.8) gave
   * the zero pivot's row within its block (7 for row 55 in blocks of 16;
   * docs/gpu-runs/2026-11-27-s15-h200x2/). An info with no zero on the
   * diagonal stays the library's. */
  if (rc == 0) {
    rc = jmg_mp_diag(c, u->m, u->d_diag, u->h_diag, err);
    const int z = rc == 0 ? first_zero_pivot(c, u->h_diag) : 0;
    if (z > 0) *f = z;
  }
  jmg_trace_mark("getrf");
  return rc;
}

int jmg_mp_lu_solve(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  (void)e;
  /* One process driving a grid of more than one row: cusolverMpGetrf (0.8)
   * crashed the process there (segmentation fault, 2 H200, a 2 x 1 grid,
   * float64, N = 192 in blocks of 32; docs/gpu-runs/2026-11-27-s15-h200x2/),
   * where one process per GPU on the same grid ran right, and so does one
   * process on the 1 x P line. Refused until the cause is known. */
  if (a->one_process && a->grid_rows > 1 && a->ranks > 1)
    return jmg_error_set(err, JMG_EUNSUPPORTED, "lu_solve", "cuSOLVERMp",
                         "one process driving a %d x %d grid: cusolverMpGetrf "
                         "crashed the process there; shard A's rows over one "
                         "mesh axis (P(axis, None)), run one process per GPU, "
                         "or use another engine",
                         a->grid_rows, a->grid_cols);
  jmg_mp_call c;
  lu_bufs u;
  memset(&u, 0, sizeof u);
  u.m = a->data;
  jmg_mp_desc_t da = NULL;
  int rc = jmg_mp_begin(&c, JMG_OP_LU_SOLVE, a, err);
  if (rc == 0) rc = take_buffers(&c, b, nrhs, transpose, &u, err);
  rc = jmg_mp_agree(&c, rc, err);
  if (rc == 0) rc = workspace(&c, &u, b, &da, err);
  if (rc == 0 && transpose) {
    rc = jmg_mp_transpose(&c, a->data, u.m, 0, &u.st, err);
    rc = jmg_mp_agree(&c, rc, err);
    /* Traced, the transpose is timed on its own (the stream waited for),
     * apart from getrf. */
    if (rc == 0 && jmg_trace_on()) rc = jmg_cuda_call_sync(&c.cuda, err);
    jmg_trace_mark("transpose");
  }
  int f = 0;
  if (rc == 0) rc = factor(&c, &u, da, &f, err);
  /* f > 0: U(f, f) is exactly zero; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    mp_getrs_ctx g = {da, u.m, u.ipiv};
    rc = jmg_mp_rhs_solve(&c, b, &u.r, "cusolverMpGetrs", solve_chunk, &g, err);
    jmg_trace_mark("getrs");
  }
  if (rc == 0) *info = f;
  return jmg_mp_end(&c, rc, err);
}
