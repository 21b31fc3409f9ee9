/* The leader execution model: one participant (shard 0) drives every shard
 * of the call through one engine. jmg_leader_run makes the leader's view of
 * all shards, runs the op's leader steps (its description's leader) and
 * writes every status. These are the steps the ops compose there: the
 * permutation into and out of the block-cyclic layout, the retry without
 * scratch, the broadcast of an output to every shard, the NaN fill. The ops
 * call them; they never call an op but through its description. */
#ifndef JMG_EXEC_LEADER_H
#define JMG_EXEC_LEADER_H

#include "exec/join.h"
#include "layout/cyclic.h"

/* The leader's view of one call: the posts and the distributed matrix. */
typedef struct jmg_leader_view {
  const char *op; /* its name */
  const jmg_op_desc *desc;
  const jmg_engine *engine;
  const jmg_mem *mem;    /* the platform's memory operations */
  jmg_mem_group group;   /* the shards' devices, for mem */
  const jmg_config *config; /* the leader's, read when its call was planned */
  jmg_shard_io *const *io;  /* io[d]: shard d's post */
  int ndev;
  /* Where A is now, on every shard: the shards' own buffers (io[d]->a, A's
   * home), or scratch after an out-of-place permutation. */
  void **a_data;
  void **home;       /* io[d]->a: where A is given and its outputs go */
  void **scratch;    /* NULL, or a shard-sized buffer per shard (see permute) */
  void **device_ctx; /* device_ctx of every shard */
  jmg_dist_matrix a;
  jmg_cyclic_plan plan;
} jmg_leader_view;

/* The leader's part of a call (a jmg_leader_fn; ctx is the leader's
 * jmg_op_call, posts[d] shard d's io): checks that every post describes the
 * same call (the call-wide fields and the op's own scalars), builds the view
 * of all shards (the distributed matrix and the layout plan), runs the op's
 * leader steps, writes every status and waits for all issued work. */
int jmg_leader_run(void *ctx, void *const *posts, int nparts, jmg_error *err);

/* Permutes A between the contiguous and block-cyclic layouts. To the cyclic
 * layout: out of place into scratch (one shard-sized buffer per shard, taken
 * from the engine; every unit copied straight to its place, all GPUs at once)
 * when shard 0's scratch_ok allows it and the scratch can be had, else in
 * place by cycles (one staging unit per lane). JAXMG_PERMUTE=inplace always
 * takes the latter, JAXMG_PERMUTE=apart tries the former whatever
 * scratch_ok says. Back: from wherever
 * A is to its home. */
int jmg_leader_permute(jmg_leader_view *v, jmg_cyclic_direction dir,
                       jmg_error *err);

/* Permutes another matrix of A's shape (one n x local_cols shard per
 * device, data[d] on device d: sygvd's B) in place by A's plan, between the
 * contiguous and block-cyclic layouts, by cycles (one staging unit per
 * lane). */
int jmg_leader_permute_matrix(jmg_leader_view *v, void *const *data,
                              jmg_cyclic_direction dir, jmg_error *err);

/* Brings A home (to the shards' own buffers) when it is elsewhere, in the
 * layout it has. For outputs returned in A's place in the contiguous layout
 * (potri). */
int jmg_leader_home(jmg_leader_view *v, jmg_error *err);

/* After a solver's call: when it failed for want of memory (*rc is
 * -JMG_ENOMEM, nothing written) while A sits in the permutation's scratch,
 * moves A home (same layout, local copies), frees the scratch, clears the
 * error and returns 1: call the solver again. Else returns 0. */
int jmg_leader_retry_without_scratch(jmg_leader_view *v, int *rc,
                                     jmg_error *err);

/* Copies the op's buffer buf from shard 0 to the same buffer of every other
 * shard. */
int jmg_leader_broadcast(jmg_leader_view *v, const jmg_op_buf *buf,
                         jmg_error *err);

/* Fills every shard's A (its home: the output) with NaN. */
int jmg_leader_nan_a(jmg_leader_view *v, jmg_error *err);

#endif
