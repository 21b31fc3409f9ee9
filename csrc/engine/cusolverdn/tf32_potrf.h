/* jaxmg's blocked right-looking TF32 Cholesky on one GPU (internal to
 * engine/cusolverdn/): mixed.c's potrs route, described at the head of
 * mixed.c. The diagonal blocks by cusolverDnXpotrf in float32, the panel
 * below by trsm and the trailing update by a TF32 gemm, all on the call's
 * stream (the look-ahead variant puts the potrfs on a second one). */
#ifndef JMG_ENGINE_CUSOLVERDN_TF32_POTRF_H
#define JMG_ENGINE_CUSOLVERDN_TF32_POTRF_H

#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"
#include "engine/cusolverdn/dn.h"
#include "engine/cusolverdn/tri_solve.h"

/* One factorization: what it runs on and, with JAXMG_TRACE, where its
 * time went. */
typedef struct jmg_dn_tf32 {
  jmg_dn_call *call; /* handles, stream, info words, host workspace */
  jmg_dtype low;     /* float32 or complex64 */
  int64_t n, nb;     /* the order; the block (columns, 1 <= nb <= n) */
  void *f;           /* A's lower copy, n x n, lda n: factored in place */
  void *work;        /* the diagonal block's potrf workspace */
  size_t work_bytes;
  /* Panels by inverted diagonal blocks (jmg_dn_tf32_potrf only; NULL: by
   * trsm): each diagonal block, once factored, is inverted into tri (its
   * f, n and nb this factorization's) and the panel below it becomes
   * A21 L11^-H by one gemm from a copy of it in `panel` ((n - nb) x nb
   * elements), both in float32 arithmetic (CUBLAS_DEFAULT_MATH; TF32 there
   * costs the refinement's convergence, tf32_potrf.c):
   * the same flops as the panel's trsm, which ran at about 19 TFLOP/s on
   * an H200 (7.4 ms of 23 at N = 16384), as a gemm (float32 peak 67
   * TFLOP/s). The inverses are the refinement's blocked solves' too
   * (tri_solve.h). */
  const jmg_dn_tri *tri;
  void *panel;
  int inverted; /* out: 1 where every diagonal block's inverse was made */
  /* Out (JAXMG_TRACE only, by CUDA events, jmg_dn_tf32_potrf alone): its
   * diagonal blocks' potrf, its panels' trsm, its trailing updates, ms. */
  double t_diag, t_trsm, t_update;
} jmg_dn_tf32;

/* f = L L^H by blocks of nb columns; *low_info the first failing leading
 * minor (0: none). The cuBLAS handle's math mode is restored whatever
 * happens. */
int jmg_dn_tf32_potrf(jmg_dn_tf32 *p, int *low_info, jmg_error *err);

/* The same with a look-ahead of one block (JAXMG_TF32_LOOKAHEAD=1): the
 * diagonal blocks' potrf on a second stream, cuSOLVER's handle set back
 * to its stream after. */
int jmg_dn_tf32_potrf_lookahead(jmg_dn_tf32 *p, int *low_info, jmg_error *err);

#endif
