/* lu_solve on cuSOLVERMp: cusolverMpGetrf (partial pivoting) and
 * cusolverMpGetrs on the right-hand sides in chunks of up to T_A columns (B
 * on grid column 0, mp.h, mp_rhs), then X broadcast to every rank.
 *
 * A singular A: cuSOLVERMp 0.8's getrf returns info 0 for a matrix with an
 * exactly zero pivot (one H200, 2026-11-24: all ones, or a zero row and
 * column, gave info 0 and NaN from getrs), where LAPACK's names the first
 * one. So the ranks read U's diagonal after getrf (mp_diag) and take the
 * first pivot that is exactly zero, or not finite (what a finite A gets
 * only from a division by a zero pivot), as info: the other engines'
 * status. getrs is then not called.
 *
 * The transposed solve (transpose 1: Aᵀ X = B, not conjugated): getrs
 * solves only with A itself ("Only CUBLAS_OP_N is currently supported",
 * functions.html), so the ranks factor Aᵀ instead: a scratch part in A's
 * layout receives Aᵀ (transpose.c: blocks exchanged over NCCL, each
 * transposed by cuBLAS), and getrf/getrs run on it. This is the ops layer's
 * usual case: the engines hold Aᵀ of the user's matrix. A is overwritten
 * or left as it is (engine.h: not returned).
 *
 * One rank holding the whole matrix runs the cuSOLVERDn engine's lu_solve
 * instead (mp.h, mp_one_gpu_view, says why). */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "engine/cusolvermp/mp.h"

/* What cusolverMpGetrs needs beside the column (mp_rhs_solve's ctx). */
typedef struct mp_getrs_ctx {
  jmg_mp_desc_t da;   /* the factored matrix's descriptor */
  void *m;            /* the factored matrix: A, or Aᵀ in a scratch part */
  const int64_t *ipiv; /* getrf's pivots */
} mp_getrs_ctx;

/* The first zero pivot on U's diagonal (1-based), or 0. */
static int first_zero_pivot(const mp_call *c, const void *diag) {
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

/* cusolverMpGetrs on one chunk (mp_rhs_solve). */
static cusolverStatus_t solve_chunk(mp_call *c, void *col, int64_t ncols,
                                    jmg_mp_desc_t col_desc, int *d_info,
                                    void *ctx) {
  const mp_getrs_ctx *g = ctx;
  return c->api->getrs(c->handle, CUBLAS_OP_N, c->a->n, ncols, g->m, 1, 1, g->da,
                       g->ipiv, col, 1, 1, col_desc, c->type, c->d_work,
                       c->d_bytes, c->h_work, c->h_bytes, d_info);
}

int jmg_mp_lu_solve(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err) {
  (void)e;
  mp_one_gpu one;
  if (mp_one_gpu_view(a, &one))
    return jmg_cusolverdn_engine.leader.lu_solve(&jmg_cusolverdn_engine,
                                                 &one.view, b, nrhs, transpose,
                                                 info, err);
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
  mp_call c;
  mp_rhs r;
  mp_stage st;
  memset(&r, 0, sizeof r);
  memset(&st, 0, sizeof st);
  int *d_info = NULL;
  int64_t *ipiv = NULL;
  void *d_diag = NULL, *h_diag = NULL;
  void *m = a->data; /* the matrix factored: A, or Aᵀ in a scratch part */
  int rc = mp_begin(&c, "lu_solve", a, err);
  if (rc == 0) rc = mp_take(&c, sizeof(int), (void **)&d_info, err);
  if (rc == 0) /* LOCr(M_A) + MB_A (functions.html, cusolverMpGetrf) */
    rc = mp_take(&c, (size_t)(a->rows + a->mb) * sizeof(int64_t),
                 (void **)&ipiv, err);
  if (rc == 0) rc = mp_rhs_take(&c, b, nrhs, &r, err);
  if (rc == 0) rc = mp_diag_take(&c, &d_diag, &h_diag, err);
  if (rc == 0 && transpose) {
    rc = mp_take(&c, (size_t)(a->ld * a->cols) * c.elem, &m, err);
    if (rc == 0) rc = mp_transpose_take(&c, &st, err);
  }
  rc = mp_agree(&c, rc, err);

  const jmg_mp_api *api = c.api;
  jmg_mp_desc_t da = NULL;
  if (rc == 0) {
    size_t d1 = 0, h1 = 0, d2 = 0, h2 = 0;
    rc = mp_grid(&c, err);
    if (rc == 0) rc = mp_desc_a(&c, &da, err);
    if (rc == 0) rc = mp_rhs_desc(&c, &r, err);
    if (rc == 0)
      rc = mp_check(api->getrf_buffer_size(c.handle, a->n, a->n, m, 1, 1, da,
                                           ipiv, c.type, &d1, &h1),
                    &c, "cusolverMpGetrf_bufferSize", err);
    if (rc == 0)
      rc = mp_check(api->getrs_buffer_size(c.handle, CUBLAS_OP_N, a->n,
                                           r.width, m,
                                           1, 1, da, ipiv,
                                           mp_rhs_col(&c, &r, b, 0), 1, 1,
                                           r.desc, c.type, &d2, &h2),
                    &c, "cusolverMpGetrs_bufferSize", err);
    if (rc == 0)
      rc = mp_take_work(&c, d1 > d2 ? d1 : d2, h1 > h2 ? h1 : h2, err);
    rc = mp_agree(&c, rc, err);
    jmg_trace_mark("engine start");
  }

  if (rc == 0 && transpose) {
    rc = mp_transpose(&c, a->data, m, 0, &st, err);
    rc = mp_agree(&c, rc, err);
    /* Traced, the transpose is timed on its own (the stream waited for),
     * apart from getrf. */
    if (rc == 0 && jmg_trace_on())
      rc = JMG_CUDA_TRY(cudaStreamSynchronize(c.stream), c.op, err);
    jmg_trace_mark("transpose");
  }
  int f = 0;
  if (rc == 0) {
    rc = JMG_CUDA_TRY(cudaMemsetAsync(d_info, 0, sizeof(int), c.stream),
                      c.op, err);
    cusolverStatus_t st = CUSOLVER_STATUS_SUCCESS;
    if (rc == 0)
      st = api->getrf(c.handle, a->n, a->n, m, 1, 1, da, ipiv, c.type, c.d_work,
                      c.d_bytes, c.h_work, c.h_bytes, d_info);
    rc = mp_agree_factor(&c, rc, st, d_info, "cusolverMpGetrf", &f, err);
  }
  /* The first zero pivot from U's diagonal, the same on every rank, also
   * where getrf gave an info: on several ranks cusolverMpGetrf (0.8) gave
   * the zero pivot's row within its block (7 for row 55 in blocks of 16;
   * docs/gpu-runs/2026-11-27-s15-h200x2/). An info with no zero on the
   * diagonal stays the library's. */
  if (rc == 0) {
    rc = mp_diag(&c, m, d_diag, h_diag, err);
    const int z = rc == 0 ? first_zero_pivot(&c, h_diag) : 0;
    if (z > 0) f = z;
  }
  jmg_trace_mark("getrf");
  /* f > 0: U(f, f) is exactly zero; X is left to the ops layer (NaN). */
  if (rc == 0 && f == 0) {
    mp_getrs_ctx g = {da, m, ipiv};
    rc = mp_rhs_solve(&c, b, &r, d_info, "cusolverMpGetrs", solve_chunk, &g,
                      err);
    jmg_trace_mark("getrs");
  }
  if (rc == 0) *info = f;
  mp_end(&c);
  return rc;
}
