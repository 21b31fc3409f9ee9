/* The local model's one-device path (engine/engine.h, JMG_MODEL_LOCAL):
 * rank 0 gathers A (and B) over the call's communicator (comm/comm.h: the
 * CPU communicators, NCCL on GPUs; never a transport of its own), the
 * one-device engine of the leader model runs its routine there on a
 * one-device view of the gathered matrix (the engine's on_rank0: LAPACK on
 * CPU devices, cuSOLVERDn on a GPU, their own routines, reused), and every
 * rank receives what the local routines' contract says: X and the
 * factor's diagonal broadcast, the inverse's or the eigenvectors' parts
 * scattered back, the eigenvalues and *info broadcast. Internal to
 * engine/local_gather/; the engines over it (engine/lapack_local/,
 * engine/cusolverdn_local/) are its table and limits only.
 *
 * Memory: the platform's memory module (a->mem: host memory on CPU, XLA's
 * allocator on GPUs), so that the same steps run on both: copies within a
 * device are its copy2d, on the participant's queue (the GPU's XLA stream,
 * the one NCCL's operations run on too). Rank 0 takes the n x n matrix and
 * the parts as they arrive (n x n more); each other rank a packed copy of
 * its part only where its leading dimension exceeds its rows.
 *
 * The steps every routine takes, in order (each collective comes after an
 * agreement, so that no rank waits for one that failed):
 *   jmg_lg_begin    takes the buffers (rank 0: the whole matrix and the
 *                   parts) and agrees (max_int);
 *   jmg_lg_gather   every rank's part to rank 0, unpacked into the matrix;
 *   (rank 0 runs the one-device engine's routine: jmg_lg_view)
 *   jmg_lg_outcome  rank 0's rc and info, agreed: the same on every rank;
 *   jmg_lg_scatter / jmg_lg_bcast of the results, where info is 0;
 *   jmg_lg_end      waits for the queue and frees.
 *
 * Falling back. Where rank 0 cannot hold the gathered copy (its buffers,
 * or the one-device engine's workspace, refused with JMG_ENOMEM before
 * anything of the call's outputs was written), every rank learns it from
 * the agreement, the buffers go back, and the engine's `fallback` (a local
 * engine of the same layout: cuSOLVERMp on GPUs) runs the op on the same
 * parts, where it supports the problem; else the want of memory is the
 * error, naming both causes. begin and outcome return JMG_LG_FALL_BACK
 * then (a positive value: err is clear). */
#ifndef JMG_ENGINE_LOCAL_GATHER_LOCAL_GATHER_H
#define JMG_ENGINE_LOCAL_GATHER_LOCAL_GATHER_H

#include "comm/comm.h"
#include "engine/engine.h"
#include "mem/mem.h"

/* What begin and outcome return where the fallback engine must run. */
#define JMG_LG_FALL_BACK 1

typedef struct jmg_lg_call {
  const char *op;
  const jmg_engine *e;
  const jmg_local_matrix *a;
  const jmg_mem *mem;
  jmg_mem_group group; /* this rank's device alone */
  size_t elem;
  int64_t m; /* qr: A's rows (0: a square A) */
  void *full; /* rank 0: the n x n matrix, column-major, lda n */
  size_t full_bytes;
  void *packed; /* rank 0: every rank's part packed (ld = its rows), one
                 * after the other; other ranks: NULL unless its part has
                 * ld > rows (then its part packed) */
  size_t packed_bytes;
  void *stage; /* a device copy of the host diag (potrs), or NULL */
  size_t stage_bytes;
  /* The one-device view of full, for the on_rank0 engine's routine. */
  void *view_data[1];
  void *view_ctx[1];
  jmg_dist_matrix view;
} jmg_lg_call;

/* Takes the buffers and agrees: 0 on every rank, this rank's error,
 * -JMG_EPEER where another rank failed, or JMG_LG_FALL_BACK where rank 0
 * alone ran short of memory and e->fallback runs op instead (jmg_lg_end,
 * then the fallback's routine). */
int jmg_lg_begin(jmg_lg_call *c, const jmg_engine *e, jmg_op op,
                 const jmg_local_matrix *a, jmg_error *err);
/* The agreement of begin: rc, this rank's outcome of taking its buffers
 * (rank 0's JMG_ENOMEM may fall back); returns begin's values. */
int jmg_lg_agree(jmg_lg_call *c, int rc, jmg_error *err);
/* Every rank's part into rank 0's full matrix. */
int jmg_lg_gather(jmg_lg_call *c, jmg_error *err);
/* Rank 0's full matrix back into every rank's part. */
int jmg_lg_scatter(jmg_lg_call *c, jmg_error *err);
/* rc: rank 0's outcome of its routine (ignored elsewhere); *info: rank
 * 0's, set on every rank. Returns rc on rank 0, -JMG_EPEER on the others
 * where rank 0 failed, JMG_LG_FALL_BACK on every rank where rank 0's
 * routine was refused its memory (JMG_ENOMEM) and e->fallback can run the
 * op, 0 where it did not fail. */
int jmg_lg_outcome(jmg_lg_call *c, int rc, int *info, jmg_error *err);
/* Broadcasts bytes of buf (the device's memory) from rank 0; nothing
 * where buf is NULL or bytes 0. */
int jmg_lg_bcast(jmg_lg_call *c, void *buf, size_t bytes, jmg_error *err);
/* Broadcasts bytes of host memory from rank 0, through a device buffer
 * (the communicator moves the device's memory). */
int jmg_lg_bcast_host(jmg_lg_call *c, void *host, size_t bytes,
                      jmg_error *err);
/* Waits for the rank's queue, frees; returns rc or the wait's failure. */
int jmg_lg_end(jmg_lg_call *c, int rc, jmg_error *err);

/* rank 0: the one-device view (jmg_dist_matrix, ndev 1) of an n-row,
 * cols-column matrix at data on this rank's device, in *view (its
 * pointers' homes in *data and *ctx). */
void jmg_lg_view_of(const jmg_local_matrix *a, void *data, int64_t rows,
                    int64_t cols, void **data_home, void **ctx_home,
                    jmg_dist_matrix *view);
/* rank 0: c->view over the gathered n x n matrix (c->full); returns it. */
const jmg_dist_matrix *jmg_lg_square_view(jmg_lg_call *c);

/* The blocks A is laid out in (engine.h, block): cuSOLVERMp's, T_A but a
 * power of two for the eigensolvers (layout/local.h), so that the
 * fallback, or cuSOLVERMp's routines beside it, run on the same layout. */
int64_t jmg_lg_block(const jmg_engine *e, const jmg_problem *p);

/* The generic routines (engine.h's local routines), for the engines'
 * tables: each runs e->on_rank0's leader routine on rank 0. */
int jmg_lg_potrs(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err);
int jmg_lg_potri(const jmg_engine *e, const jmg_local_matrix *a, int *info,
                 jmg_error *err);
int jmg_lg_syevd(const jmg_engine *e, const jmg_local_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err);
int jmg_lg_sygvd(const jmg_engine *e, const jmg_local_matrix *a,
                 const jmg_local_matrix *b, void *w, int want_vectors,
                 int *info, jmg_error *err);
int jmg_lg_lu_solve(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err);
int jmg_lg_qr(const jmg_engine *e, const jmg_local_matrix *a, void *rt,
              int64_t m, int64_t rr, int *info, jmg_error *err);
int jmg_lg_potrs_mixed(const jmg_engine *e, const jmg_local_matrix *a,
                       void *b, int64_t nrhs, int *info, jmg_error *err);
int jmg_lg_lu_solve_mixed(const jmg_engine *e, const jmg_local_matrix *a,
                          void *b, int64_t nrhs, int transpose, int *info,
                          jmg_error *err);

/* The workspace query of such an engine (engine.h's `workspace`): rank 0's
 * on_rank0 workspace for the problem on one device, plus its gathered
 * copies (A's; B's too for sygvd) and the parts as they arrive (one n x
 * n). What rank 0 takes; the others take at most a packed part. */
int jmg_lg_workspace(const jmg_engine *e, const jmg_problem *p,
                     const jmg_workspace_query *q, size_t *bytes,
                     jmg_error *err);

/* The generic routines as an engine's `local` table. */
#define JMG_LG_LOCAL_ROUTINES                                              \
  {                                                                        \
    .potrs = jmg_lg_potrs, .potri = jmg_lg_potri, .syevd = jmg_lg_syevd,   \
    .lu_solve = jmg_lg_lu_solve, .qr = jmg_lg_qr, .sygvd = jmg_lg_sygvd,   \
    .potrs_mixed = jmg_lg_potrs_mixed,                                     \
    .lu_solve_mixed = jmg_lg_lu_solve_mixed,                               \
  }

#endif
