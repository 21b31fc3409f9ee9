/* A's parts replaced by those of Aᵀ (plain transpose), in the same 2D
 * block-cyclic layout with square blocks: lu_solve's transposed solve, as
 * cusolverMpGetrs solves only with A itself ("only non-transposed is
 * supported", cuSOLVERMp samples, mp_getrf_getrs.c).
 *
 * Block (p, q) of Aᵀ is block (q, p) of A, transposed. Each rank transposes
 * its blocks of A into a packed staging buffer (cuBLAS geam), sends each to
 * the owner of its place in Aᵀ and receives its own blocks of Aᵀ from their
 * owners in A (NCCL point to point, a rank sending to itself where it owns
 * both), then unpacks them over its part. Sends and receives between two
 * ranks must be issued in the same order: both sides go through the blocks
 * of Aᵀ by block row, then block column, one NCCL group per block row of
 * Aᵀ. */
#include <limits.h>
#include <string.h>

#include "cuda/check.h"
#include "cuda/dtype.h"
#include "cuda/handles.h"
#include "engine/cusolvermp/mp.h"

/* C = op(A) (m x n) through cublas?geam with beta 0 (C passed as B,
 * in place, as geam allows with transb N). */
static cublasStatus_t geam_t(cublasHandle_t h, jmg_dtype t, int m, int n,
                             const void *A, int lda, void *C, int ldc) {
  jmg_cuda_scalar one = jmg_cuda_scalar_of(t, 1.0);
  jmg_cuda_scalar zero = jmg_cuda_scalar_of(t, 0.0);
  switch (t) {
    case JMG_F32:
      return cublasSgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, &one.s, A, lda,
                         &zero.s, C, ldc, C, ldc);
    case JMG_F64:
      return cublasDgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, &one.d, A, lda,
                         &zero.d, C, ldc, C, ldc);
    case JMG_C64:
      return cublasCgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, &one.c, A, lda,
                         &zero.c, C, ldc, C, ldc);
    case JMG_C128:
      return cublasZgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, &one.z, A, lda,
                         &zero.z, C, ldc, C, ldc);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

int mp_transpose_take(mp_call *c, void **stage, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  size_t bytes = (size_t)a->rows * (size_t)a->cols * c->elem;
  int rc = mp_take(c, bytes, &stage[0], err);
  if (rc == 0) rc = mp_take(c, bytes, &stage[1], err);
  if (rc == 0)
    rc = jmg_cuda_handles_acquire((void *const *)&a->device_ctx, 1,
                                  "cuSOLVERMp", &c->blas, err);
  if (rc == 0 && (a->rows > INT_MAX || a->ld > INT_MAX))
    rc = jmg_error_set(err, JMG_EUNSUPPORTED, c->op, "cublasXgeam",
                       "a part of %lld rows (ld %lld) exceeds cuBLAS's int",
                       (long long)a->rows, (long long)a->ld);
  return rc;
}

/* Rows of block k (the last may be short). */
static int64_t block_len(const jmg_local_matrix *a, int64_t k) {
  return a->n - k * a->nb < a->nb ? a->n - k * a->nb : a->nb;
}

/* Where block (p, q) starts in its owner's part. */
static char *block_at(const mp_call *c, char *part, int64_t p, int64_t q) {
  const jmg_local_matrix *a = c->a;
  size_t row = (size_t)((p / a->grid_rows) * a->mb);
  size_t col = (size_t)((q / a->grid_cols) * a->nb);
  return part + (col * (size_t)a->ld + row) * c->elem;
}

static int owner(const jmg_local_matrix *a, int64_t p, int64_t q) {
  return (int)((p % a->grid_rows) + (q % a->grid_cols) * a->grid_rows);
}

int mp_transpose(mp_call *c, void *const *stage, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const int64_t T = (a->n + a->nb - 1) / a->nb;
  const int64_t R = a->grid_rows, C = a->grid_cols;
  char *send = stage[0], *recv = stage[1];
  cublasHandle_t h = c->blas->blas[0];
  int rc = JMG_CUBLAS_TRY(cublasSetStream(h, c->stream), c->op, err);

  /* Pack: block (p, q) of A, held here, transposed, in the order its
   * place (q, p) in Aᵀ is visited: q (Aᵀ's block row) outer, p inner. */
  size_t off = 0;
  for (int64_t q = c->mycol; rc == 0 && q < T; q += C)
    for (int64_t p = c->myrow; rc == 0 && p < T; p += R) {
      int64_t rows = block_len(a, p), cols = block_len(a, q);
      rc = JMG_CUBLAS_TRY(geam_t(h, a->dtype, (int)cols, (int)rows,
                                 block_at(c, a->data, p, q), (int)a->ld,
                                 send + off, (int)cols),
                          c->op, err);
      off += (size_t)(rows * cols) * c->elem;
    }

  /* Exchange, one group per block row r of Aᵀ. */
  size_t soff = 0, roff = 0;
  for (int64_t r = 0; rc == 0 && r < T; ++r) {
    rc = a->comm_ops->group_begin(c->op, err);
    /* Sends: this rank's blocks (p, r) of A, i.e. (r, p) of Aᵀ. */
    if (r % C == c->mycol)
      for (int64_t p = c->myrow; rc == 0 && p < T; p += R) {
        size_t bytes = (size_t)(block_len(a, p) * block_len(a, r)) * c->elem;
        rc = a->comm_ops->send(a->comm, send + soff, bytes, owner(a, r, p),
                               a->device_ctx, c->op, err);
        soff += bytes;
      }
    /* Receives: this rank's blocks (r, q) of Aᵀ, from (q, r) of A. */
    if (r % R == c->myrow)
      for (int64_t q = c->mycol; rc == 0 && q < T; q += C) {
        size_t bytes = (size_t)(block_len(a, r) * block_len(a, q)) * c->elem;
        rc = a->comm_ops->recv(a->comm, recv + roff, bytes, owner(a, q, r),
                               a->device_ctx, c->op, err);
        roff += bytes;
      }
    jmg_error ignored;
    int end = a->comm_ops->group_end(c->op, rc == 0 ? err : &ignored);
    if (rc == 0) rc = end;
  }

  /* Unpack the blocks of Aᵀ, in the order received, over A's part. */
  roff = 0;
  for (int64_t p = c->myrow; rc == 0 && p < T; p += R)
    for (int64_t q = c->mycol; rc == 0 && q < T; q += C) {
      int64_t rows = block_len(a, p), cols = block_len(a, q);
      rc = JMG_CUDA_TRY(
          cudaMemcpy2DAsync(block_at(c, a->data, p, q), (size_t)a->ld * c->elem,
                            recv + roff, (size_t)rows * c->elem,
                            (size_t)rows * c->elem, (size_t)cols,
                            cudaMemcpyDeviceToDevice, c->stream),
          c->op, err);
      roff += (size_t)(rows * cols) * c->elem;
    }
  return rc;
}
