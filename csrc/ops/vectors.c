/* syevd's and sygvd's optional attribute vectors_in_a: the eigenvectors
 * made V itself in A's buffer.
 *
 * Both solvers leave their eigenvectors column-major, column j the j-th:
 * read row-major by the caller (JAX), shard d's buffer holds its rows of
 * Vᴴ (conj(V)ᵀ). With vectors_in_a the call returns V itself, read
 * row-major (V[i, j], the columns the eigenvectors): the eigenvectors are
 * conjugate-transposed in place after the solver (the platform's
 * conj_transpose, mem/mem.h), so that the caller needs no second N x N
 * buffer for V. Only where the whole matrix is one buffer: a group of one
 * device, with eigenvectors (the Python layer sets it only for an
 * unpadded call, whose buffer is the caller's A); anything else is
 * refused. */
#include "common/trace.h"
#include "ops/ops.h"

int jmg_vectors_in_a_check(const char *op, int64_t vectors_in_a,
                           int64_t want_vectors, int parts, jmg_error *err) {
  if (!vectors_in_a) return 0;
  if (!want_vectors)
    return jmg_error_set(err, JMG_EINVAL, op, "vectors_in_a",
                         "V in A's buffer was asked for without eigenvectors "
                         "(want_vectors 0)");
  if (parts != 1)
    return jmg_error_set(err, JMG_EINVAL, op, "vectors_in_a",
                         "V in A's buffer needs the whole matrix in one "
                         "buffer (a group of one device); this group has %d",
                         parts);
  return 0;
}

int jmg_vectors_in_a(const jmg_mem *mem, const jmg_mem_group *g, void *a,
                     int64_t n, jmg_dtype dtype, jmg_error *err) {
  const int rc = mem->conj_transpose(g, 0, a, n, dtype, err);
  jmg_trace_mark("vectors in A");
  return rc;
}
