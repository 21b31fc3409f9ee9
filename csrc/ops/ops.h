/* The ops: potrs, potri, syevd, one file each, the same steps in the same
 * order: every participant joins the rendezvous with its buffers; the leader
 * checks that all posts describe the same call, permutes the shards in place
 * into the block-cyclic layout, calls the engine, writes every participant's
 * outputs, permutes back what returns sharded, and sets every status.
 *
 * Buffers, per participant, in the engine's memory (host on CPU, the device
 * on GPU), all column-major with leading dimension n:
 *   a       in/out  n x local_cols: this shard's columns of A. A is Hermitian,
 *                   so the rows of a row-sharded JAX array, read column-major,
 *                   are the columns of conj(A); the Python layer accounts for
 *                   the conjugation.
 *   b       in      potrs: n x nrhs right-hand sides (every shard has a copy).
 *   x       out     potrs: n x nrhs solution, written on every shard.
 *   w       out     syevd: n eigenvalues (real), ascending, on every shard.
 *   status  out     int32: the solver's info, on every shard.
 * On numerical failure (info != 0) the outputs are NaN. */
#ifndef JMG_OPS_OPS_H
#define JMG_OPS_OPS_H

#include <stdint.h>

#include "exec/join.h"

int jmg_potrs_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err);
int jmg_potri_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err);
int jmg_syevd_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err);

#endif
