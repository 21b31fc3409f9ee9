/* The ops: potrs, potri, syevd, lu_solve, gesvd, sygvd, qr, one file each. Each file holds the op's
 * description (exec/op_desc.h: its own buffers and scalars beside the common
 * ones, where they sit in the FFI frame) and its steps in the leader model
 * (exec/leader.h), in the same order for every op: the leader permutes the
 * shards in place into the block-cyclic layout, calls the engine, writes
 * every participant's outputs and permutes back what returns sharded; the
 * exec layer around them joins the participants, checks that all describe
 * the same call and sets every status. Each op has local steps too
 * (exec/local.h), run by every participant on its own shard for the
 * local-model engines, with the same outputs, status and NaN semantics.
 *
 * Buffers, per participant, in the engine's memory (host on CPU, the device
 * on GPU), all column-major with leading dimension n:
 *   a       in/out  n x local_cols: this shard's columns of A. The rows of a
 *                   row-sharded JAX array, read column-major, are the
 *                   columns of Aᵀ: conj(A) for a Hermitian A (potrs, potri,
 *                   syevd; the Python layer accounts for the conjugation),
 *                   the plain transpose for a general one (lu_solve solves
 *                   with the transpose of what the engine factors).
 *   status  out     int32: the solver's info, on every shard.
 *   and each op's own (potrs, lu_solve: B in, X out; syevd: W out;
 *   gesvd: S, U, Vh out), described in its file.
 * gesvd's and qr's A are rectangular, m x n: a shard is n x local_cols,
 * the columns of Aᵀ, m / local_cols shards (exec/op_desc.h, rows_scalar);
 * ops/gesvd.c and ops/qr.c account for the transpose.
 * On numerical failure (info != 0) the outputs are NaN.
 *
 * Adding an op (as lu_solve was: A and B in, X out, status; its pivots
 * internal to the engine) touches:
 *   1. csrc/ops/<op>.c: its io struct, its description, its leader steps
 *      (and one line for it below and in CMakeLists.txt's jaxmg_core);
 *   2. csrc/engine/: its routine in engine.h's routine sets and in
 *      jmg_engine_has (select.c), and one routine per engine that has it;
 *   3. csrc/ffi/cpu_targets.c and cuda_targets.c: one JMG_FFI_EXPORT line
 *      each (its handler symbol, e.g. jaxmg_lu_solve_cpu);
 *   4. python/jaxmg/: one module that builds the call (and registers the
 *      symbols).
 * Decoding the frame, sharing buffers between processes and checking that
 * the shards agree follow from the description: ffi/, exec/ and share/ do not
 * change. */
#ifndef JMG_OPS_OPS_H
#define JMG_OPS_OPS_H

#include "exec/op_desc.h"
#include "mem/mem.h"

extern const jmg_op_desc jmg_potrs_op;
extern const jmg_op_desc jmg_potri_op;
extern const jmg_op_desc jmg_syevd_op;
extern const jmg_op_desc jmg_lu_solve_op;
extern const jmg_op_desc jmg_gesvd_op;
extern const jmg_op_desc jmg_qr_op;
extern const jmg_op_desc jmg_sygvd_op;

/* syevd's and sygvd's optional vectors_in_a (ops/vectors.c): V itself in
 * A's buffer on a group of one device. jmg_vectors_in_a_check: 0, or an
 * error naming op where the attribute is set without eigenvectors or on a
 * group of parts > 1. jmg_vectors_in_a: participant 0's n x n
 * eigenvectors a, as the engine left them, replaced by their conjugate
 * transpose (mem's conj_transpose). */
int jmg_vectors_in_a_check(const char *op, int64_t vectors_in_a,
                           int64_t want_vectors, int parts, jmg_error *err);
int jmg_vectors_in_a(const jmg_mem *mem, const jmg_mem_group *g, void *a,
                     int64_t n, jmg_dtype dtype, jmg_error *err);

#endif
