/* The gather engine's parts (internal to engine/gather/).
 *
 * For small problems on several GPUs of one node one GPU is faster than any
 * distributed engine (thresholds.c says where). The engine, of the leader
 * model, takes the distributed A as every leader engine does (the
 * block-cyclic jmg_dist_matrix, a pointer to every shard), and
 *   1. gathers it into one N x N column-major buffer on participant 0's GPU
 *      (memory from the platform's mem->alloc: XLA's allocator), one copy
 *      per column tile, every GPU sending at once (a copy lane each);
 *   2. runs jmg_cusolverdn_engine's routine on a one-GPU view of that buffer
 *      (the same routines as a group of one GPU: nothing duplicated);
 *   3. scatters what the op returns in A's place into the layout the op's
 *      leader contract demands (engine/engine.h): potri's inverse in the
 *      CONTIGUOUS layout, syevd's and sygvd's eigenvectors in the
 *      BLOCK-CYCLIC one (sygvd gathers B beside A: jmg_gather_second).
 *      potrs's and lu_solve's B, w and the factor's diagonal are on
 *      participant 0 (or the host) already: cuSOLVERDn writes them in place.
 *
 * When the N x N buffer cannot be had. A refusal (JMG_ENOMEM) comes before
 * anything is written: the routine then returns the buffer it has and runs
 * the distributed engine's routine (cuSOLVERMg's, jmg_cusolvermg_engine) on
 * the same distributed A, which needs no more than one extra shard: the call
 * succeeds wherever cuSOLVERMg alone would. JAXMG_TRACE shows it ("no memory
 * to gather: cusolvermg"; the engine of the line becomes
 * "cusolverdn-gather>cusolvermg"). So that this fall back is always
 * possible, `supports` accepts only problems cuSOLVERMg supports too (its T_A
 * limits then stay the defaults' limits: the Python layer narrows T_A as it
 * did). A memory estimate in `supports` is not possible: selection knows no
 * GPU's free memory, and XLA's allocator decides at the call. The cost of a
 * refusal: XLA's allocator may wait for memory to be freed before it fails,
 * which can take seconds; it happens only when GPU 0 cannot hold N^2
 * elements beside its shard, for N below the table's sizes (at most 17 GB
 * at N=32768 complex128). cuSOLVERDn's own workspace refused (JMG_ENOMEM,
 * nothing written either) falls back the same way.
 *
 * The device set: the gather engine locks the handles of the call's whole
 * device set (cuda/handles.h) for the gather and scatter (that also enables
 * peer access between its GPUs, as cuSOLVERMg's calls do), and cuSOLVERDn
 * locks participant 0's own set inside; the lock is released before a fall
 * back, whose routine takes it again. */
#ifndef JMG_ENGINE_GATHER_GATHER_H
#define JMG_ENGINE_GATHER_GATHER_H

#include <stddef.h>

#include "cuda/call.h"
#include "engine/engine.h"

/* The engine cuSOLVERDn's routines come from, and the one a call falls back
 * on when the gathered copy does not fit. */
#define JMG_GATHER_ONE (&jmg_cusolverdn_engine)
#define JMG_GATHER_DISTRIBUTED (&jmg_cusolvermg_engine)

/* One call's frame: the CUDA call frame (cuda/call.h: the device set
 * locked, the gathered buffers taken from it and returned at its end) and
 * the gathered copies. */
typedef struct jmg_gather_call {
  jmg_cuda_call cuda;
  const jmg_dist_matrix *a; /* the distributed A (block-cyclic) */
  size_t bytes;             /* of one gathered copy */
  void *buf;                /* A's: N x N on participant 0, lda N */
  void *one_data[1];
  jmg_dist_matrix one; /* the one-GPU view of buf, for cuSOLVERDn */
  void *second_data[1];
  jmg_dist_matrix second; /* jmg_gather_second's B, viewed as `one` */
} jmg_gather_call;

/* The layouts an op's result goes back to A's shards in (and a
 * rectangular A comes in). */
typedef enum {
  JMG_GATHER_TO_CYCLIC,    /* tile k to device k % ndev (syevd's vectors) */
  JMG_GATHER_TO_CONTIGUOUS /* device d: columns d*local_cols ... (potri) */
} jmg_gather_layout;

/* Begins the frame (the device set locked), takes the N x N buffer on
 * participant 0 and copies A into it, in global column order. Returns 0;
 * -JMG_ENOMEM, having written nothing of A's shards or B, when the buffer
 * (or anything else) cannot be had; or another error. End the call with
 * jmg_gather_end whatever this returns. */
int jmg_gather_begin(jmg_gather_call *c, jmg_op op, const jmg_dist_matrix *a,
                     jmg_error *err);

/* The same for an A in layout (jmg_gather_begin: the block-cyclic one):
 * gesvd's and qr's rectangular A, n x (ndev * local_cols), comes in the
 * contiguous layout (engine.h), and the buffer is that size. */
int jmg_gather_begin_in(jmg_gather_call *c, jmg_op op, const jmg_dist_matrix *a,
                        jmg_gather_layout layout, jmg_error *err);

/* Within a begun call c, a second N x N buffer on participant 0 holding b
 * (laid out as c's A, block-cyclic), viewed as c->second. sygvd's B.
 * -JMG_ENOMEM as jmg_gather_begin's, having written nothing of the
 * shards. */
int jmg_gather_second(jmg_gather_call *c, const jmg_dist_matrix *b,
                      jmg_error *err);

/* A buffer of rows x cols on participant 0 (returned at the end of the
 * call), viewed as a one-GPU matrix of the gathered call in *out (data:
 * its one pointer's home). gesvd's U and Vᴴ, qr's Rᵀ. */
int jmg_gather_output(jmg_gather_call *c, int64_t rows, int64_t cols,
                      void **data, jmg_dist_matrix *out, jmg_error *err);

/* Copies the N x N buffer back into A's shards, in layout. */
int jmg_gather_scatter(jmg_gather_call *c, jmg_gather_layout layout,
                       jmg_error *err);

/* Copies a one-GPU result `one` (x->n rows, all of x's columns) into x's
 * shards, device d its columns d*local_cols ... (contiguous slices), and
 * waits for the copies. */
int jmg_gather_scatter_to(jmg_gather_call *c, const jmg_dist_matrix *x,
                          const jmg_dist_matrix *one, jmg_error *err);

/* Ends the frame: waits where copies may still run, returns the buffers,
 * unlocks the device set. Returns rc, or the end's failure. */
int jmg_gather_end(jmg_gather_call *c, int rc, jmg_error *err);

/* After jmg_gather_end: whether the call ran short of memory before writing
 * anything (*rc is -JMG_ENOMEM), so that the distributed engine's routine
 * must run op on a instead. Then clears the error and *rc, says so in the
 * trace and returns 1. Where the distributed engine cannot run it (its
 * `supports`: cuSOLVERMg's syevd and T_A > 1024), the want of memory stays
 * the error, naming both causes; returns 0 then, as for any other rc. */
int jmg_gather_fall_back(int *rc, const jmg_dist_matrix *a, jmg_op op,
                         jmg_error *err);

/* After jmg_gather_end, for the ops without a fall back (gesvd, qr): a
 * want of memory (rc -JMG_ENOMEM) becomes the error that says what did not
 * fit (the gathered rows x cols matrix and `what`, on the first GPU of
 * a's) and why no engine of one node runs the call instead (`why`).
 * Returns rc. */
int jmg_gather_no_room(int rc, const char *op, const jmg_dist_matrix *a,
                       int64_t rows, int64_t cols, const char *what,
                       const char *why, jmg_error *err);

int jmg_gather_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                     int64_t nrhs, void *diag, int *info, jmg_error *err);
int jmg_gather_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                     jmg_error *err);
int jmg_gather_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                     int want_vectors, int *info, jmg_error *err);
int jmg_gather_sygvd(const jmg_engine *e, const jmg_dist_matrix *a,
                     const jmg_dist_matrix *b, void *w, int want_vectors,
                     int *info, jmg_error *err);
int jmg_gather_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                        int64_t nrhs, int transpose, int *info, jmg_error *err);
int jmg_gather_qr(const jmg_engine *e, const jmg_dist_matrix *a,
                  const jmg_dist_matrix *rt, int *info, jmg_error *err);
int jmg_gather_gesvd(const jmg_engine *e, const jmg_dist_matrix *a, void *s,
                     const jmg_dist_matrix *u, const jmg_dist_matrix *vt,
                     int full, int *info, jmg_error *err);

#endif
