/* Transposes between parts in A's 2D block-cyclic layout (square blocks),
 * for what cuSOLVERMp 0.8 cannot do itself:
 * - lu_solve's transposed solve: cusolverMpGetrs solves with A only ("Only
 *   CUBLAS_OP_N is currently supported", functions.html), so the ranks
 *   factor Aᵀ;
 * - potri's Hermitian matrices (jmg_mp_hermitian): cusolverMpGels, which
 *   inverts, reads both triangles; jaxmg's ops give the lower one.
 *
 * Block (p, q) of dst is block (q, p) of src, transposed (conjugated too
 * for conj 1). One NCCL group per block row r of dst: the ranks holding
 * block column r of src transpose their blocks of it (cuBLAS geam) into a
 * packed staging buffer and send each to the owner of its place in dst;
 * the ranks holding block row r of dst receive theirs into a second
 * staging buffer and unpack them. Between two ranks, sends and receives are
 * issued in the same order (by block, ascending), as NCCL pairs them. A
 * rank may send to itself. The stream orders each row's staging after the
 * last row's exchange. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cuda/blas.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "cuda/handles.h"
#include "engine/cusolvermp/mp.h"

/* The lower triangle (and diagonal) of an n x n block, packed (trttp), and
 * unpacked into another block, leaving its strict upper triangle (tpttr). */
static cublasStatus_t copy_lower(cublasHandle_t h, jmg_dtype t, int n,
                                 const void *src, void *dst, int ld,
                                 void *packed) {
  const cublasFillMode_t lo = CUBLAS_FILL_MODE_LOWER;
  cublasStatus_t st = CUBLAS_STATUS_INVALID_VALUE;
  switch (t) {
    case JMG_F32:
      st = cublasStrttp(h, lo, n, src, ld, packed);
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasStpttr(h, lo, n, packed, dst, ld);
      break;
    case JMG_F64:
      st = cublasDtrttp(h, lo, n, src, ld, packed);
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasDtpttr(h, lo, n, packed, dst, ld);
      break;
    case JMG_C64:
      st = cublasCtrttp(h, lo, n, src, ld, packed);
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasCtpttr(h, lo, n, packed, dst, ld);
      break;
    case JMG_C128:
      st = cublasZtrttp(h, lo, n, src, ld, packed);
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasZtpttr(h, lo, n, packed, dst, ld);
      break;
  }
  return st;
}

int jmg_mp_transpose_take(jmg_mp_call *c, jmg_mp_stage *s, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  memset(s, 0, sizeof *s);
  int rc = 0;
  if (a->ld > INT_MAX || a->nb > INT_MAX)
    rc = jmg_error_set(err, JMG_EUNSUPPORTED, c->cuda.op, "cublasXgeam",
                       "ld %lld or T_A %lld exceeds cuBLAS's int",
                       (long long)a->ld, (long long)a->nb);
  if (rc == 0)
    rc = jmg_mp_take(c, (size_t)(a->rows * a->nb) * c->elem, &s->send, err);
  if (rc == 0)
    rc = jmg_mp_take(c, (size_t)(a->nb * a->cols) * c->elem, &s->recv, err);
  if (rc == 0)
    rc = jmg_mp_take(c, (size_t)(a->nb * (a->nb + 1) / 2) * c->elem, &s->tri,
                     err);
  if (rc == 0) rc = jmg_mp_handles(c, err);
  return rc;
}

/* Rows (= columns) of block k; the last may be short. */
static int64_t block_len(const jmg_local_matrix *a, int64_t k) {
  return a->n - k * a->nb < a->nb ? a->n - k * a->nb : a->nb;
}

/* Where block (p, q) starts in its owner's part. */
static size_t block_off(const jmg_mp_call *c, int64_t p, int64_t q) {
  const jmg_local_matrix *a = c->a;
  size_t row = (size_t)((p / a->grid_rows) * a->mb);
  size_t col = (size_t)((q / a->grid_cols) * a->nb);
  return (col * (size_t)a->ld + row) * c->elem;
}

static int owner(const jmg_local_matrix *a, int64_t p, int64_t q) {
  return (int)((p % a->grid_rows) + (q % a->grid_cols) * a->grid_rows);
}

int jmg_mp_transpose(jmg_mp_call *c, const void *src, void *dst, int conj,
                     jmg_mp_stage *s, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const int64_t T = (a->n + a->nb - 1) / a->nb;
  const int64_t R = a->grid_rows, C = a->grid_cols;
  const cublasOperation_t op = conj ? CUBLAS_OP_C : CUBLAS_OP_T;
  const size_t e = c->elem;
  cublasHandle_t h = c->cuda.h->blas[0];
  int rc = JMG_CUBLAS_TRY(cublasSetStream(h, c->cuda.stream), c->cuda.op, err);
  for (int64_t r = 0; rc == 0 && r < T; ++r) {
    const int sending = r % C == c->mycol, receiving = r % R == c->myrow;
    /* Pack: blocks (p, r) of src held here, transposed: (r, p) of dst. */
    size_t off = 0;
    for (int64_t p = c->myrow; sending && rc == 0 && p < T; p += R) {
      int64_t rows = block_len(a, p), cols = block_len(a, r);
      rc = JMG_CUBLAS_TRY(
          jmg_cublas_geam(h, a->dtype, op, (int)cols, (int)rows,
                          (const char *)src + block_off(c, p, r), (int)a->ld,
                          (char *)s->send + off, (int)cols),
          c->cuda.op, err);
      off += (size_t)(rows * cols) * e;
    }
    if (rc == 0) rc = a->comm_ops->group_begin(c->cuda.op, err);
    off = 0;
    for (int64_t p = c->myrow; sending && rc == 0 && p < T; p += R) {
      size_t bytes = (size_t)(block_len(a, p) * block_len(a, r)) * e;
      rc = a->comm_ops->send(a->comm, (char *)s->send + off, bytes,
                             owner(a, r, p), a->device_ctx, c->cuda.op, err);
      off += bytes;
    }
    off = 0;
    for (int64_t q = c->mycol; receiving && rc == 0 && q < T; q += C) {
      size_t bytes = (size_t)(block_len(a, r) * block_len(a, q)) * e;
      rc = a->comm_ops->recv(a->comm, (char *)s->recv + off, bytes,
                             owner(a, q, r), a->device_ctx, c->cuda.op, err);
      off += bytes;
    }
    jmg_error ignored;
    int end = a->comm_ops->group_end(c->cuda.op, rc == 0 ? err : &ignored);
    if (rc == 0) rc = end;
    /* Unpack: blocks (r, q) of dst held here. */
    off = 0;
    for (int64_t q = c->mycol; receiving && rc == 0 && q < T; q += C) {
      int64_t rows = block_len(a, r), cols = block_len(a, q);
      rc = JMG_CUDA_TRY(
          cudaMemcpy2DAsync((char *)dst + block_off(c, r, q), (size_t)a->ld * e,
                            (char *)s->recv + off, (size_t)rows * e,
                            (size_t)rows * e, (size_t)cols,
                            cudaMemcpyDeviceToDevice, c->cuda.stream),
          c->cuda.op, err);
      off += (size_t)(rows * cols) * e;
    }
  }
  return rc;
}

int jmg_mp_hermitian(jmg_mp_call *c, const void *src, void *dst,
                     jmg_mp_stage *s, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const int64_t T = (a->n + a->nb - 1) / a->nb;
  const int64_t R = a->grid_rows, C = a->grid_cols;
  const size_t e = c->elem;
  /* dst = srcᴴ: its strict upper triangle is final. */
  int rc = jmg_mp_transpose(c, src, dst, 1, s, err);
  /* The lower triangle from src: whole blocks below the diagonal, and the
   * lower triangles of the diagonal blocks. */
  for (int64_t q = c->mycol; rc == 0 && q < T; q += C)
    for (int64_t p = c->myrow; rc == 0 && p < T; p += R) {
      if (p < q) continue;
      int64_t rows = block_len(a, p), cols = block_len(a, q);
      const char *from = (const char *)src + block_off(c, p, q);
      char *to = (char *)dst + block_off(c, p, q);
      if (p > q)
        rc = JMG_CUDA_TRY(
            cudaMemcpy2DAsync(to, (size_t)a->ld * e, from, (size_t)a->ld * e,
                              (size_t)rows * e, (size_t)cols,
                              cudaMemcpyDeviceToDevice, c->cuda.stream),
            c->cuda.op, err);
      else
        rc = JMG_CUBLAS_TRY(copy_lower(c->cuda.h->blas[0], a->dtype, (int)rows,
                                       from, to, (int)a->ld, s->tri),
                            c->cuda.op, err);
    }
  return rc;
}
