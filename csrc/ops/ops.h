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

#include "common/dtype.h"
#include "common/error.h"
#include "engine/engine.h"
#include "mem/mem.h"
#include "rendezvous/rendezvous.h"
#include "share/share.h"

typedef struct jmg_shard_io {
  /* The call, as this participant sees it; the leader checks that all agree. */
  jmg_dtype dtype;
  int64_t n;
  int64_t local_cols;
  int64_t tile;
  int64_t nrhs;     /* potrs */
  int want_vectors; /* syevd */
  /* Whether the leader may take a scratch shard per device to permute A out
   * of place (the Python layer's judgment of the memory; see _shard.py). */
  int scratch_ok;
  /* Buffers. */
  void *a;
  const void *b;
  void *x;
  void *w;
  int32_t *status;
  void *device_ctx; /* engine-specific (CUDA: device, stream, allocator) */
} jmg_shard_io;

typedef struct jmg_op_call {
  const jmg_engine *engine; /* chosen for this call (engine/engine.h) */
  const jmg_mem *mem;       /* the platform's memory operations */
  const jmg_rendezvous *rdv;
  jmg_rdv_key key; /* key.op is set by the op */
  int shard;
  double timeout_s;
  /* NULL: the participants are threads of one process (SPMD) and the leader
   * uses their buffers as they are. Else they may be processes (MPMD): posts
   * carry buffers exported through share, and rdv is the process
   * rendezvous. */
  const jmg_share *share;
  /* NULL: the run functions block until the call is over. Else they join
   * asynchronously and return 0 once joined; done reports the end. The call
   * and io must then live until done has run. */
  jmg_rdv_done_fn done;
  void *done_ctx;
} jmg_op_call;

/* Tells the other participants of call that this one failed before it could
 * join (err says why), and returns err's status. */
int jmg_op_abort(jmg_op_call *call, const char *op, jmg_error *err);

int jmg_potrs_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err);
int jmg_potri_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err);
int jmg_syevd_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err);

#endif
