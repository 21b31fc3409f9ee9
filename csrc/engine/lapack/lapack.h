/* The LAPACK engine's parts (internal to engine/lapack/, whose *_full
 * functions engine/lapack_local/ calls too): the gather of the
 * distributed matrix into one column-major matrix and the scatter back, and
 * one routine per op (potrs.c, potri.c, syevd.c, lu_solve.c, gesvd.c,
 * sygvd.c, qr.c).
 *
 * CPU devices share host memory, so the engine gathers the distributed
 * columns into one matrix, runs LAPACK (routines handed over from SciPy at
 * import, table.h), and scatters the result back. The gather is the CPU
 * stand-in for what cuSOLVERMg does across GPUs; what matters is that the
 * ops, the layout and the rendezvous above it run exactly as they do on
 * GPUs. */
#ifndef JMG_ENGINE_LAPACK_LAPACK_H
#define JMG_ENGINE_LAPACK_LAPACK_H

#include "engine/engine.h"

/* Copies between the distributed columns and a full column-major matrix
 * (a->n rows, a->ndev * a->local_cols columns: n x n for the square ops);
 * the distributed ones are block-cyclic, or contiguous if `contiguous`. */
void jmg_lapack_move_columns(const jmg_dist_matrix *a, void *full, int to_full,
                             int contiguous);

/* Gathers the block-cyclic a into a new n x n matrix (*full, to be freed)
 * after checking that n fits LAPACK's int. */
int jmg_lapack_gather(const jmg_dist_matrix *a, const char *op, void **full,
                      jmg_error *err);

/* 0 where n fits LAPACK's int (*out), else an error naming op and what
 * (e.g. "N", "NRHS"). */
int jmg_lapack_int(int64_t n, const char *what, const char *op, int *out,
                   jmg_error *err);

/* A workspace query's answer (need elements, as LAPACK returns it in
 * work[0]) as *lwork (need + 1) where it fits LAPACK's int, else an error
 * naming op and routine. */
int jmg_lapack_lwork(double need, const char *op, const char *routine,
                     int *lwork, jmg_error *err);

/* The LAPACK engines' `supports` (engine.h): A's rows and columns (M and N
 * of gesvd's and qr's M x N A, N of a square one) in LAPACK's 32-bit int,
 * where the routines would refuse them (jmg_lapack_int) after the call
 * began. 1, or 0 with why. lapack-local's adds its own. */
int jmg_lapack_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                        size_t why_len);

/* For a full column-major n x n matrix: overwrites the strict upper triangle
 * with the conjugate transpose of the strict lower one. */
void jmg_lapack_fill_upper(void *full, int64_t n, jmg_dtype dtype);

/* The divide-and-conquer eigensolvers' workspaces (?syevd/?heevd,
 * ?sygvd/?hegvd): their query (lwork = lrwork = liwork = -1) returns the
 * sizes as the first element of work and rwork (a float for s/c, a double
 * for d/z) and in iwork; jmg_lapack_dc_work_alloc takes the three buffers
 * (rwork for complex types only), or fails with JMG_ENOMEM naming op, having
 * taken none. jmg_lapack_dc_work_free frees them (a zeroed struct too). */
typedef union {
  float f[4];
  double d[2];
} jmg_lapack_query;
typedef struct {
  void *work, *rwork;
  int *iwork;
  int lwork, lrwork, liwork;
} jmg_lapack_dc_work;
int jmg_lapack_dc_work_alloc(jmg_lapack_dc_work *ws, jmg_dtype dtype,
                             const jmg_lapack_query *qwork,
                             const jmg_lapack_query *qrwork, int qiwork,
                             const char *op, jmg_error *err);
void jmg_lapack_dc_work_free(jmg_lapack_dc_work *ws);

/* The LAPACK work of each op on one full column-major n x n matrix in host
 * memory (lda n), with the meanings of engine.h's leader routines: shared
 * by this engine (after its gather) and by lapack-local
 * (engine/lapack_local/, on rank 0 after its gather over the
 * communicator). Each checks that its routines were registered and that
 * n and nrhs fit LAPACK's int; *info as engine.h says; potri leaves both
 * triangles of the inverse in full, syevd the eigenvectors (want_vectors)
 * in full's columns. b: n x nrhs, lda n, overwritten by X. diag: NULL or n
 * reals, filled when the factorization succeeds. */
int jmg_lapack_potrs_full(jmg_dtype dtype, int64_t n, void *full, void *b,
                          int64_t nrhs, void *diag, int *info, jmg_error *err);
int jmg_lapack_potri_full(jmg_dtype dtype, int64_t n, void *full, int *info,
                          jmg_error *err);
int jmg_lapack_syevd_full(jmg_dtype dtype, int64_t n, void *full, void *w,
                          int want_vectors, int *info, jmg_error *err);
/* sygvd (hegvd), itype 1, lower triangles: a and b full n x n (lda n);
 * the eigenvectors (want_vectors) in a's columns, b overwritten by its
 * Cholesky factor; *info LAPACK's (n + k: B's leading minor of order k is
 * not positive definite). */
int jmg_lapack_sygvd_full(jmg_dtype dtype, int64_t n, void *a, void *b,
                          void *w, int want_vectors, int *info,
                          jmg_error *err);
int jmg_lapack_lu_solve_full(jmg_dtype dtype, int64_t n, void *full, void *b,
                             int64_t nrhs, int transpose, int *info,
                             jmg_error *err);

/* qr's (engine.h, the qr routine) on the gathered Aᵀ: mt, n x m
 * column-major (ld n), replaced by Qᵀ; rt, n x rcols (ld n, rcols >= n),
 * receives Rᵀ in its first n columns and zeros past them. */
int jmg_lapack_qr_full(jmg_dtype dtype, int64_t m, int64_t n, void *mt,
                       void *rt, int64_t rcols, int *info, jmg_error *err);

int jmg_lapack_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                     int64_t nrhs, void *diag, int *info, jmg_error *err);
int jmg_lapack_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                     jmg_error *err);
int jmg_lapack_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                     int want_vectors, int *info, jmg_error *err);
int jmg_lapack_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                        int64_t nrhs, int transpose, int *info,
                        jmg_error *err);
int jmg_lapack_sygvd(const jmg_engine *e, const jmg_dist_matrix *a,
                     const jmg_dist_matrix *b, void *w, int want_vectors,
                     int *info, jmg_error *err);
int jmg_lapack_gesvd(const jmg_engine *e, const jmg_dist_matrix *a, void *s,
                     const jmg_dist_matrix *u, const jmg_dist_matrix *vt,
                     int full, int *info, jmg_error *err);
int jmg_lapack_qr(const jmg_engine *e, const jmg_dist_matrix *a,
                  const jmg_dist_matrix *rt, int *info, jmg_error *err);
/* The mixed-precision routines (mixed.h): potrs_mixed and lu_solve_mixed
 * of engine.h on the gathered matrix. */
int jmg_lapack_potrs_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                           void *b, int64_t nrhs, int *info, jmg_error *err);
int jmg_lapack_lu_solve_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                              void *b, int64_t nrhs, int transpose, int *info,
                              jmg_error *err);
/* engine.h's workspace query for the LAPACK engine: potrs's and
 * lu_solve's host buffers (the gathered A, lu_solve's pivots, and in mixed
 * precision the lower-precision copy and the refinement's vectors);
 * JMG_EUNSUPPORTED for the other ops (their LAPACK workspaces are asked of
 * LAPACK during the call). */
int jmg_lapack_workspace(const jmg_engine *e, const jmg_problem *p,
                         const jmg_workspace_query *q, size_t *bytes,
                         jmg_error *err);

#endif
