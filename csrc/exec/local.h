/* The local execution model (engine/engine.h, JMG_MODEL_LOCAL): every
 * participant runs the op on its own shard, with the others at the same
 * time, and talks to them only through the platform's communicator
 * (comm/comm.h): no leader, no rendezvous, no peer pointers, no shared
 * memory, so that it runs across processes and nodes alike.
 *
 * Where each model lives: the leader model in exec/leader.c (and each op's
 * leader steps), entered through the rendezvous by exec/join.c; the local
 * model here, in exec/local.c (and each op's local steps), entered by
 * exec/join.c without a rendezvous. ffi/plan.c picks the engine, the
 * engine's model picks the executor.
 *
 * jmg_local_run opens the communicator (the group's id from the Python
 * layer), agrees with the other ranks that everyone is ready before the
 * first collective (a rank that failed says so: no one waits for it), makes
 * the view (the rank's part of H = Π M Πᵀ, layout/local.h), runs the op's
 * local steps and writes the status on its own shard.
 *
 * These are the steps the ops compose. The rule every op keeps: every rank
 * calls jmg_local_agree at the same points, whatever happened before, and
 * branches only on what is the same on every rank (the agreed rc, the
 * solver's info); a collective (the engine, the redistribution) comes only
 * after an agreement, so that a rank that failed never leaves the others
 * waiting in it. */
#ifndef JMG_EXEC_LOCAL_H
#define JMG_EXEC_LOCAL_H

#include "comm/comm.h"
#include "exec/join.h"
#include "layout/local.h"

/* One participant's view of a local-model call. */
typedef struct jmg_local_view {
  const char *op; /* its name */
  const jmg_op_desc *desc;
  const jmg_engine *engine;
  const jmg_op_call *call;
  const jmg_config *config; /* read when the call was planned */
  jmg_shard_io *io;         /* this participant's (the op's io struct) */
  const jmg_mem *mem;       /* the platform's memory operations */
  jmg_mem_group group;      /* just this participant: position 0 */
  void *device_ctx;         /* io->device_ctx; group.device_ctx points here */
  const jmg_comm_ops *comm_ops;
  jmg_comm *comm; /* this rank's end, open */
  int rank, ranks;
  /* The rank's part of H as the engine gets it, data io->a (once
   * jmg_local_permute_a applied Π): on the line, a 1 x ranks grid, mb = nb
   * = T_A, rows n, cols local_cols, ld n; after jmg_local_to_grid, on the
   * call's grid (layout/local.h, "the grid"). */
  jmg_local_matrix a;
  jmg_local_perm perm; /* Π */
  /* The call's grid (the Python layer's attribute grid_rows: 1, the line,
   * unless A's rows are sharded over two mesh axes) and its moves. */
  int grid_rows;
  jmg_local_regrid regrid;
} jmg_local_view;

/* The participant's part of a local-model call (call->engine's model is
 * JMG_MODEL_LOCAL; io is its io struct with its device context): see above.
 * Returns 0 or an error naming the op; the status is written on success. */
int jmg_local_run(jmg_op_call *call, jmg_shard_io *io, jmg_error *err);

/* A participant that failed before jmg_local_run (err says why): opens the
 * communicator and answers the others' first agreement with a failure, so
 * that they fail instead of waiting. Needs call->device_ctx (without it
 * nothing is done). Returns err's status. */
int jmg_local_abort(jmg_op_call *call, jmg_error *err);

/* The agreement: every rank hands its rc so far; returns rc where this rank
 * failed, -JMG_EPEER (naming the op and `before`, what comes next) where
 * another did, 0 where none did. A failing communicator is an error too. */
int jmg_local_agree(jmg_local_view *v, int rc, const char *before,
                    jmg_error *err);

/* The rows of a n x cols column-major buffer (ld n, A's dtype) on this
 * participant: dst = Π src (JMG_LOCAL_APPLY) or Πᵀ src (JMG_LOCAL_UNDO), in
 * place (dst == src: by Π's cycles, through a T_A x cols staging buffer)
 * or out of place (one copy per row tile). For A's part (cols local_cols),
 * B and X (cols nrhs). Local: no communication. */
int jmg_local_permute_rows(jmg_local_view *v, void *dst, const void *src,
                           int64_t cols, jmg_local_dir dir, jmg_error *err);

/* A's part in place: to H's rows (APPLY) or back (UNDO). */
int jmg_local_permute_a(jmg_local_view *v, jmg_local_dir dir, jmg_error *err);

/* After a syevd: moves the eigenvectors in A's part from the block-cyclic
 * column order and H's rows (what the engine returns) to the contiguous
 * layout of M's eigenvectors (rank r: eigenvectors r L .. (r+1) L - 1, rows
 * Πᵀ'd), through a scratch part (taken here) and one group of sends and
 * receives. Collective: every rank calls it with its rc so far (it agrees
 * before it communicates) and it returns the agreed outcome. */
int jmg_local_redistribute_vectors(jmg_local_view *v, int rc, jmg_error *err);

/* Moves A's part from the line onto the call's grid (before the engine)
 * or back (for an output in A's place), through two scratch parts and one
 * group of sends and receives; v->a then describes the part where it is.
 * Nothing to do on a 1 x ranks grid. Collective: every rank calls it with
 * its rc so far (it agrees before it communicates) and it returns the
 * agreed outcome; from_grid moves nothing where skip (which must be the
 * same on every rank, e.g. the solver's info != 0) but still agrees. */
int jmg_local_to_grid(jmg_local_view *v, int rc, jmg_error *err);
int jmg_local_from_grid(jmg_local_view *v, int rc, int skip, jmg_error *err);

/* Moves another matrix of A's shape on the line (data: this rank's n x
 * local_cols part, already permuted by Π: sygvd's B) onto the call's grid
 * in place, as jmg_local_to_grid moves A's part (same plan, same agreement
 * rule); v->a is left as it is. Nothing to do on a 1 x ranks grid. */
int jmg_local_matrix_to_grid(jmg_local_view *v, void *data, int rc,
                             jmg_error *err);

/* Fills count elements of dtype at ptr (this participant's) with NaN. */
int jmg_local_nan(jmg_local_view *v, void *ptr, size_t count, jmg_dtype dtype,
                  jmg_error *err);

/* Fills A's part (the output in its place) with NaN. */
int jmg_local_nan_a(jmg_local_view *v, jmg_error *err);

/* Copies bytes from the host to this participant's dst and waits (src may
 * live on the caller's stack): a scalar output. */
int jmg_local_write(jmg_local_view *v, void *dst, const void *src,
                    size_t bytes, jmg_error *err);

#endif
