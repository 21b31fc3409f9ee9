/* Solves with a lower Cholesky factor for one right-hand side at memory
 * bandwidth (internal to engine/cusolverdn/: mixed.c's refinement steps).
 *
 * cusolverDnXpotrs with one right-hand side runs two cuBLAS trsm of an n x 1
 * matrix, whose blocking makes gemm-shaped work of one column: at N = 16384
 * on an H200 a refinement step (that pair, a float64 symm of one column and
 * two norms) took about 5 ms where reading A and the factor once takes about
 * 0.8 ms (session 18). Here the factor's diagonal blocks (nb x nb) are
 * inverted once per call (trsm against the identity, float32 math), and
 * each solve is gemv only:
 *
 *   forward  L y = w:   y_i = L_ii^-1 w_i,  w_{i+1:} -= L_{i+1:,i} y_i
 *   backward L^H z = y: z_i = L_ii^-H y_i,  y_{:i} -= L_{i,:i}^H z_i
 *
 * (right-looking both ways: the forward pass reads the block columns below
 * the diagonal, gemv N of a tall panel; the backward pass the block rows
 * left of it, gemv T or C of a wide one: each reads the lower triangle
 * once, contiguously down columns), z into w, y a scratch vector. 4
 * ceil(n / nb) - 2 gemv a solve pair, no host synchronization. Multiplying
 * by an inverted diagonal block instead of substituting is as accurate as
 * the lower-precision factor the refinement corrects anyway (the inverse of
 * a well-conditioned triangular block; a block the factorization could not
 * make well conditioned makes refinement stall and the call fall back). */
#ifndef JMG_ENGINE_CUSOLVERDN_TRI_SOLVE_H
#define JMG_ENGINE_CUSOLVERDN_TRI_SOLVE_H

#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"
#include "engine/cusolverdn/dn.h"

typedef struct jmg_dn_tri {
  jmg_dn_call *call; /* handles, stream */
  jmg_dtype low;     /* float32 or complex64 */
  int64_t n, nb;     /* the order; the block (1 <= nb <= n) */
  const void *f;     /* L: lower triangle of n x n, lda n (upper not read) */
  void *inv;         /* jmg_dn_tri_inv_bytes: block i's L_ii^-1, nb x nb,
                        ld nb, at i nb nb elements (upper part zero) */
  void *y;           /* device scratch: n elements of low */
  void *ones;        /* host scratch: nb elements of low */
} jmg_dn_tri;

/* The bytes of t->inv for (low, n, nb): ceil(n / nb) blocks of nb x nb. */
size_t jmg_dn_tri_inv_bytes(jmg_dtype low, int64_t n, int64_t nb);

/* t->inv from t->f (once per factor), on the call's stream; errors name the
 * call's op and the routine. Leaves t->y undefined. The math mode is the
 * cuBLAS handle's (the callers' default: float32 arithmetic). */
int jmg_dn_tri_invert(const jmg_dn_tri *t, jmg_error *err);

/* The same a block at a time, for a factorization that inverts each
 * diagonal block as soon as it is factored (tf32_potrf.h):
 * jmg_dn_tri_begin once (t->inv zeroed, t->y's first nb the ones the
 * inversions read: t->y is not to be used until the last block), then
 * jmg_dn_tri_invert_block for block i (rows and columns from i nb) once
 * L_ii is final. */
int jmg_dn_tri_begin(const jmg_dn_tri *t, jmg_error *err);
int jmg_dn_tri_invert_block(const jmg_dn_tri *t, int64_t i, jmg_error *err);

/* Block i's inverse (nb x nb, ld nb, zero above its diagonal). */
const void *jmg_dn_tri_inverse(const jmg_dn_tri *t, int64_t i);

/* w = (L L^H)^-1 w, w n elements of low on the device, on the call's
 * stream; t->y is overwritten. */
int jmg_dn_tri_solve(const jmg_dn_tri *t, void *w, jmg_error *err);

#endif
