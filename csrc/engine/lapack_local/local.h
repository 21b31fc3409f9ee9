/* lapack-local: the local model (engine/engine.h, JMG_MODEL_LOCAL) on CPU
 * devices, over the CPU platform's communicators: the threads of one
 * process (comm/comm_threads.c) or the processes of one node, one per
 * device (comm/comm_processes.c). Internal to engine/lapack_local/.
 *
 * Every rank holds its part of H in jmg_local_matrix's 2D block-cyclic
 * layout; the engine gathers the whole matrix onto rank 0 over the
 * communicator (one message per rank), runs the LAPACK engine's routine on
 * it there (engine/lapack/lapack.h, the *_full functions: the same LAPACK
 * calls as the leader model's engine), and hands every rank what the
 * local routines' contract says: X and the factor's diagonal broadcast,
 * the inverse's or the eigenvectors' parts scattered back, the eigenvalues
 * and *info broadcast. It is the CPU stand-in for cuSOLVERMp: what it is
 * for is running everything above the engine (the Python layer's ids, the
 * plan, the executor, Π, the grid moves, the ops' local steps) on a
 * machine without GPUs; it is not fast (rank 0 does all the work, and the
 * others wait for it within JAXMG_RENDEZVOUS_TIMEOUT).
 *
 * The steps every routine takes, in order (each collective comes after an
 * agreement, so that no rank waits for one that failed):
 *   ll_begin    takes the buffers (rank 0: the whole matrix and the parts
 *               as they arrive) and agrees (max_int);
 *   ll_gather   every rank's part to rank 0, unpacked into the matrix;
 *   (rank 0 runs LAPACK)
 *   ll_outcome  rank 0's rc and info broadcast: the same on every rank;
 *   ll_scatter / the broadcasts of the results, where info is 0;
 *   ll_end      frees. */
#ifndef JMG_ENGINE_LAPACK_LOCAL_LOCAL_H
#define JMG_ENGINE_LAPACK_LOCAL_LOCAL_H

#include "comm/comm.h"
#include "engine/engine.h"

typedef struct ll_call {
  const char *op;
  const jmg_local_matrix *a;
  size_t elem;
  void *full;   /* rank 0: the n x n matrix, column-major, lda n */
  void *packed; /* rank 0: every rank's part packed (ld = its rows), one
                 * after the other; other ranks: NULL unless its part has
                 * ld > rows (then its part packed) */
  size_t packed_bytes;
} ll_call;

/* Takes the buffers and agrees: 0 on every rank, this rank's error, or
 * -JMG_EPEER where another rank failed. */
int ll_begin(ll_call *c, const char *op, const jmg_local_matrix *a,
             jmg_error *err);
/* Every rank's part into rank 0's full matrix. */
int ll_gather(ll_call *c, jmg_error *err);
/* Rank 0's full matrix back into every rank's part. */
int ll_scatter(ll_call *c, jmg_error *err);
/* rc: rank 0's outcome of its LAPACK call (ignored elsewhere); *info:
 * rank 0's, set on every rank. Returns rc on rank 0, -JMG_EPEER on the
 * others where rank 0 failed, 0 where it did not. */
int ll_outcome(ll_call *c, int rc, int *info, jmg_error *err);
/* Broadcasts bytes of buf from rank 0 (several at once: a group). */
int ll_bcast(ll_call *c, void *const *bufs, const size_t *bytes, int count,
             jmg_error *err);
void ll_end(ll_call *c);

int jmg_ll_potrs(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err);
int jmg_ll_potri(const jmg_engine *e, const jmg_local_matrix *a, int *info,
                 jmg_error *err);
int jmg_ll_syevd(const jmg_engine *e, const jmg_local_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err);
int jmg_ll_sygvd(const jmg_engine *e, const jmg_local_matrix *a,
                 const jmg_local_matrix *b, void *w, int want_vectors,
                 int *info, jmg_error *err);
int jmg_ll_lu_solve(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err);
int jmg_ll_qr(const jmg_engine *e, const jmg_local_matrix *a, void *rt,
              int64_t m, int64_t rr, int *info, jmg_error *err);

/* potrs and lu_solve in mixed precision (mixed.c), and the engine's
 * workspace query (the LAPACK engine's plus rank 0's packed parts: potrs
 * and lu_solve, exact or mixed). */
int jmg_ll_potrs_mixed(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                       int64_t nrhs, int *info, jmg_error *err);
int jmg_ll_lu_solve_mixed(const jmg_engine *e, const jmg_local_matrix *a,
                          void *b, int64_t nrhs, int transpose, int *info,
                          jmg_error *err);
int jmg_ll_workspace(const jmg_engine *e, const jmg_problem *p,
                     const jmg_workspace_query *q, size_t *bytes,
                     jmg_error *err);

#endif
