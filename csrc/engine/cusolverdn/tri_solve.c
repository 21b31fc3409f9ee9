/* Blocked solves with a lower Cholesky factor by gemv (tri_solve.h).
 * Written against the CUDA call frame; compiled, not yet run on a GPU. */
#include "engine/cusolverdn/tri_solve.h"

#include "cuda/blas.h"
#include "cuda/check.h"

static int64_t blocks(const jmg_dn_tri *t) { return (t->n + t->nb - 1) / t->nb; }

size_t jmg_dn_tri_inv_bytes(jmg_dtype low, int64_t n, int64_t nb) {
  if (n <= 0 || nb <= 0) return 0;
  const size_t count = (size_t)((n + nb - 1) / nb);
  return count * (size_t)nb * (size_t)nb * jmg_dtype_size(low);
}

/* L's element (row, col), lda n. */
static const char *l_at(const jmg_dn_tri *t, int64_t row, int64_t col) {
  return (const char *)t->f +
         ((size_t)col * (size_t)t->n + (size_t)row) * jmg_dtype_size(t->low);
}

/* Block i's inverse (the block starting at row and column i nb). */
static char *inv_at(const jmg_dn_tri *t, int64_t i) {
  return (char *)t->inv +
         (size_t)i * (size_t)t->nb * (size_t)t->nb * jmg_dtype_size(t->low);
}

static char *elem(const jmg_dn_tri *t, void *v, int64_t i) {
  return (char *)v + (size_t)i * jmg_dtype_size(t->low);
}

/* L^H's operation for the low dtype: conjugate transpose where complex. */
static cublasOperation_t herm(const jmg_dn_tri *t) {
  return jmg_dtype_is_complex(t->low) ? CUBLAS_OP_C : CUBLAS_OP_T;
}

/* t->ones on the host (1, or 1 + 0i), then into t->y's first nb. */
static int ones_to_device(const jmg_dn_tri *t, jmg_error *err) {
  const jmg_cuda_call *c = &t->call->cuda;
  const int cplx = jmg_dtype_is_complex(t->low);
  float *h = t->ones;
  for (int64_t i = 0; i < t->nb; ++i) {
    if (cplx) {
      h[2 * i] = 1.0f;
      h[2 * i + 1] = 0.0f;
    } else {
      h[i] = 1.0f;
    }
  }
  /* From pageable memory: the copy has read t->ones when it returns. */
  return JMG_CUDA_TRY(
      cudaMemcpyAsync(t->y, t->ones, (size_t)t->nb * jmg_dtype_size(t->low),
                      cudaMemcpyHostToDevice, c->stream),
      c->op, err);
}

int jmg_dn_tri_begin(const jmg_dn_tri *t, jmg_error *err) {
  const jmg_cuda_call *c = &t->call->cuda;
  int rc = JMG_CUDA_TRY(
      cudaMemsetAsync(t->inv, 0, jmg_dn_tri_inv_bytes(t->low, t->n, t->nb),
                      c->stream),
      c->op, err);
  if (rc == 0) rc = ones_to_device(t, err);
  return rc;
}

int jmg_dn_tri_invert_block(const jmg_dn_tri *t, int64_t i, jmg_error *err) {
  const jmg_cuda_call *c = &t->call->cuda;
  const size_t lo = jmg_dtype_size(t->low);
  const int64_t start = i * t->nb,
                jb = t->nb < t->n - start ? t->nb : t->n - start;
  char *x = inv_at(t, i);
  /* The identity's diagonal (stride nb + 1) from t->y's ones, then X =
   * L_ii^-1 X. */
  int rc = JMG_CUDA_TRY(
      cudaMemcpy2DAsync(x, (size_t)(t->nb + 1) * lo, t->y, lo, lo, (size_t)jb,
                        cudaMemcpyDeviceToDevice, c->stream),
      c->op, err);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_trsm_64(t->call->blas, t->low, CUBLAS_SIDE_LEFT,
                           CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                           CUBLAS_DIAG_NON_UNIT, jb, jb, l_at(t, start, start),
                           t->n, x, t->nb),
        c->op, err);
  return rc;
}

const void *jmg_dn_tri_inverse(const jmg_dn_tri *t, int64_t i) {
  return inv_at(t, i);
}

int jmg_dn_tri_invert(const jmg_dn_tri *t, jmg_error *err) {
  int rc = jmg_dn_tri_begin(t, err);
  for (int64_t i = 0; rc == 0 && i < blocks(t); ++i)
    rc = jmg_dn_tri_invert_block(t, i, err);
  return rc;
}

/* L y = w: y_i = L_ii^-1 w_i, then w below block i -= L(below, i) y_i. */
static int forward(const jmg_dn_tri *t, void *w, jmg_error *err) {
  const jmg_cuda_call *c = &t->call->cuda;
  cublasHandle_t h = t->call->blas;
  int rc = 0;
  for (int64_t i = 0; rc == 0 && i < blocks(t); ++i) {
    const int64_t start = i * t->nb,
                  jb = t->nb < t->n - start ? t->nb : t->n - start,
                  end = start + jb;
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_gemv_ab_64(h, t->low, CUBLAS_OP_N, jb, jb, 1.0, inv_at(t, i),
                              t->nb, elem(t, w, start), 0.0,
                              elem(t, t->y, start)),
        c->op, err);
    if (rc == 0 && end < t->n)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_gemv_ab_64(h, t->low, CUBLAS_OP_N, t->n - end, jb, -1.0,
                                l_at(t, end, start), t->n,
                                elem(t, t->y, start), 1.0, elem(t, w, end)),
          c->op, err);
  }
  return rc;
}

/* L^H z = y, z into w: z_i = L_ii^-H y_i, then y above block i -=
 * L(i, left of i)^H z_i. */
static int backward(const jmg_dn_tri *t, void *w, jmg_error *err) {
  const jmg_cuda_call *c = &t->call->cuda;
  cublasHandle_t h = t->call->blas;
  int rc = 0;
  for (int64_t i = blocks(t) - 1; rc == 0 && i >= 0; --i) {
    const int64_t start = i * t->nb,
                  jb = t->nb < t->n - start ? t->nb : t->n - start;
    rc = JMG_CUBLAS_TRY(
        jmg_cublas_gemv_ab_64(h, t->low, herm(t), jb, jb, 1.0, inv_at(t, i),
                              t->nb, elem(t, t->y, start), 0.0,
                              elem(t, w, start)),
        c->op, err);
    if (rc == 0 && start > 0)
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_gemv_ab_64(h, t->low, herm(t), jb, start, -1.0,
                                l_at(t, start, 0), t->n, elem(t, w, start),
                                1.0, t->y),
          c->op, err);
  }
  return rc;
}

int jmg_dn_tri_solve(const jmg_dn_tri *t, void *w, jmg_error *err) {
  int rc = forward(t, w, err);
  if (rc == 0) rc = backward(t, w, err);
  return rc;
}
