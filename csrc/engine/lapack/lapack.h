/* The LAPACK engine's parts (internal to engine/lapack/): the gather of the
 * distributed matrix into one column-major matrix and the scatter back, and
 * one routine per op (potrs.c, potri.c, syevd.c, lu_solve.c, gesvd.c).
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
 * and checks that n fits LAPACK's int (*n_int). */
int jmg_lapack_gather(const jmg_dist_matrix *a, const char *op, void **full,
                      int *n_int, jmg_error *err);

/* For a full column-major n x n matrix: overwrites the strict upper triangle
 * with the conjugate transpose of the strict lower one. */
void jmg_lapack_fill_upper(void *full, int64_t n, jmg_dtype dtype);

int jmg_lapack_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                     int64_t nrhs, void *diag, int *info, jmg_error *err);
int jmg_lapack_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                     jmg_error *err);
int jmg_lapack_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                     int want_vectors, int *info, jmg_error *err);
int jmg_lapack_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                        int64_t nrhs, int transpose, int *info,
                        jmg_error *err);
int jmg_lapack_gesvd(const jmg_engine *e, const jmg_dist_matrix *a, void *s,
                     const jmg_dist_matrix *u, const jmg_dist_matrix *vt,
                     int full, int *info, jmg_error *err);

#endif
