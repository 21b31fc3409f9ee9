/* The eigenproblem of a real symmetric tridiagonal matrix T on the host, by
 * LAPACK's routines (registered from SciPy at import, table.h), for the GPU
 * engines' own eigensolver (engine/cusolverdn/syevd.c's tridiagonal path:
 * the GPU reduces A to T, the host solves T, the GPU applies the reflectors
 * to T's eigenvectors).
 *
 * T is n x n, its diagonal d[0..n-1] and off-diagonal e[0..n-2], in double
 * whatever A's dtype (a float32 A's T is solved in double and its vectors
 * rounded). Neither d nor e is written.
 *
 * The eigenvectors are made in chunks of columns, never all at once on the
 * host: host memory is O(n * chunk * threads), so that n may be as large as
 * the GPU holds. Chunks are computed in parallel by LAPACK's dstemr (MRRR,
 * O(n) per vector, RANGE='I'), on threads of this process; each chunk's
 * index range ends where T's eigenvalues have a large gap (those near each
 * boundary found by dstebz's bisection, on threads too), so that no
 * cluster of close eigenvalues is split between two dstemr calls (their
 * vectors are then orthogonal to working accuracy, as ScaLAPACK's PDSYEVR
 * partitions its eigenvalues). A chunk where dstemr fails is computed as
 * LAPACK's dsyevr then does: dstebz's bisection and dstein's inverse
 * iteration. */
#ifndef JMG_ENGINE_LAPACK_TRIDIAGONAL_H
#define JMG_ENGINE_LAPACK_TRIDIAGONAL_H

#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"

/* T's eigenvalues, ascending, in w[0..n-1] (double), by dsterf on copies of
 * d and e. *info is dsterf's (> 0: it did not converge; w is then not
 * valid). Errors (a routine not registered, n past LAPACK's int, no memory)
 * name op. */
int jmg_tridiagonal_eigenvalues(const char *op, int64_t n, const double *d,
                                const double *e, double *w, int *info,
                                jmg_error *err);

/* Receives eigenvectors first .. first + count - 1 of T: z is n x count,
 * column-major (leading dimension n), in the dtype asked (a complex dtype's
 * imaginary parts are 0). Called on the calling thread of
 * jmg_tridiagonal_eigenvectors, chunk after chunk (in any order); z is valid
 * only during the call. Nonzero stops the solver, which returns it. */
typedef int (*jmg_tridiagonal_sink)(void *ctx, int64_t first, int64_t count,
                                    const void *z, jmg_error *err);

/* T's eigenvalues, ascending, in w[0..n-1] (double), and its eigenvectors,
 * handed to sink chunk by chunk in dtype's elements. threads <= 0: one per
 * online CPU (at most 64). *info is nonzero where LAPACK did not converge
 * (dstebz's, or dstein's where dstemr failed; the vectors
 * handed over so far are then not
 * valid). */
int jmg_tridiagonal_eigenvectors(const char *op, int64_t n, const double *d,
                                 const double *e, double *w, jmg_dtype dtype,
                                 int threads, jmg_tridiagonal_sink sink,
                                 void *ctx, int *info, jmg_error *err);

/* For tests: jmg_tridiagonal_eigenvectors with chunks of about `chunk`
 * vectors (each boundary moved by up to chunk / 4 to a large gap) where
 * chunk > 0, instead of the size it picks from n, threads and memory; and
 * with fallback_only, every chunk by the fallback that otherwise serves a
 * chunk where dstemr fails (dstebz and dstein, as LAPACK's dsyevr). */
int jmg_tridiagonal_eigenvectors_chunked(
    const char *op, int64_t n, const double *d, const double *e, double *w,
    jmg_dtype dtype, int threads, int64_t chunk, int fallback_only,
    jmg_tridiagonal_sink sink, void *ctx, int *info, jmg_error *err);

#endif
