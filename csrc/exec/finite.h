/* A matrix with a NaN or an Inf entry, for every op and every engine, in
 * one place: both executors (exec/leader.c, exec/local.c) look at every
 * shard of A (and of an op's second input matrix, sygvd's B) before the
 * op's steps run, and where any entry anywhere in them is not finite they
 * run no solver at all: every output of the op (A's
 * place, and each of its own results: X, W, S, U, Vh, logdet) becomes NaN
 * on every shard, and the status is JMG_INFO_NONFINITE (common/error.h), the
 * same on every engine. No library is called on such a matrix because some
 * fail on it rather than say so (cusolverMpSyevd: CUSOLVER_STATUS_INTERNAL_
 * ERROR on a NaN, docs/gpu-notes.md, cuSOLVERMp 0.8.0), others return
 * status 0 with NaN
 * outputs (an Inf on the diagonal, every eigensolver) or a status whose
 * meaning differs from op to op (LAPACK's potrf: the NaN's column; gesdd:
 * -4). The look costs one read of A (on GPUs one cuBLAS gemv). */
#ifndef JMG_EXEC_FINITE_H
#define JMG_EXEC_FINITE_H

#include "exec/op_desc.h"
#include "mem/mem.h"

/* Whether every entry of participant dev's shard of A (io->a: n x
 * local_cols, column-major, ld n), and of each of op's own input matrices
 * marked check_finite (exec/op_desc.h: sygvd's B, shaped like A's shard),
 * is finite: *finite 1 or 0. */
int jmg_shard_finite(const jmg_mem *m, const jmg_mem_group *g, int dev,
                     const jmg_op_desc *op, const jmg_shard_io *io,
                     int *finite, jmg_error *err);

/* NaN into every output of op on participant dev: A's shard and each of
 * the op's own results present in the call (not the status, which the
 * executor writes). */
int jmg_shard_nan_outputs(const jmg_mem *m, const jmg_mem_group *g, int dev,
                          const jmg_op_desc *op, const jmg_shard_io *io,
                          jmg_error *err);

#endif
