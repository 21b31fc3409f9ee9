/* What the cuSOLVERMp engine's routines share (context.c): one call's
 * frame, the agreement between ranks, descriptors, the Cholesky steps of
 * potrs and potri (cholesky.c), and the right-hand sides' distribution.
 *
 * Every routine runs in three steps, so that no rank returns an error
 * before a collective its partners entered:
 *   1. jmg_mp_begin and every buffer the routine needs beyond the library's
 *      workspace (local: nothing collective), then jmg_mp_agree;
 *   2. jmg_mp_grid (collective the first time), descriptors, the library's
 *      workspace sizes and jmg_mp_take_work, then jmg_mp_agree again;
 *   3. the library calls, the results, jmg_mp_agree_info.
 * jmg_mp_end releases everything the call took, whatever happened.
 *
 * One rank holding a whole square A runs cuSOLVERDn's routine instead
 * (one_gpu.c says why): the engine's table points potrs, potri, syevd and
 * lu_solve there, and the routine files here are cuSOLVERMp's alone. */
#ifndef JMG_ENGINE_CUSOLVERMP_MP_H
#define JMG_ENGINE_CUSOLVERMP_MP_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "cuda/call.h"
#include "engine/cusolvermp/api.h"
#include "engine/engine.h"

/* One call's frame: the CUDA call frame (cuda/call.h: this rank's GPU, its
 * stream, the buffers and the workspace, the info word, the agreement
 * between ranks in cuda.agree) and cuSOLVERMp's state. */
typedef struct jmg_mp_call {
  jmg_cuda_call cuda; /* first: the agreement finds the call from it */
  const jmg_local_matrix *a;
  const jmg_mp_api *api;
  jmg_mp_handle_t handle;
  jmg_mp_grid_t grid;
  int slot;          /* the per-GPU state held (locked), or -1 */
  int myrow, mycol;  /* this rank's place in the grid (column-major) */
  cudaDataType type; /* A's, and the compute type */
  size_t elem;       /* bytes per element */
  void *d_work;      /* the library's device workspace (a part of cuda's) */
  size_t d_bytes, h_bytes; /* the library's sizes, as it asked */
  jmg_mp_desc_t descs[6];
  int ndescs;
} jmg_mp_call;

/* Step 1: the library, this GPU's handle (made once per process and GPU,
 * locked until jmg_mp_end), and checks of a's layout (mb == nb, the grid,
 * the part's size). Not collective. */
int jmg_mp_begin(jmg_mp_call *c, jmg_op op, const jmg_local_matrix *a,
                 jmg_error *err);
/* jmg_mp_begin for an m x a->n matrix (a's part of it checked against m
 * rows and a->n columns): qr's A. */
int jmg_mp_begin_mn(jmg_mp_call *c, jmg_op op, const jmg_local_matrix *a,
                    int64_t m, jmg_error *err);
/* Waits for the stream, destroys the descriptors, ends the frame and
 * unlocks the GPU's state. Returns rc, or the end's failure. */
int jmg_mp_end(jmg_mp_call *c, int rc, jmg_error *err);

/* Collective: every rank hands its rc (0 or a negative jmg_status, err
 * filled); returns rc where it failed here, JMG_EPEER (naming the worst
 * status) where only another rank failed, else 0. */
int jmg_mp_agree(jmg_mp_call *c, int rc, jmg_error *err);

/* Device memory of this GPU (XLA's allocator), returned by jmg_mp_end. */
int jmg_mp_take(jmg_mp_call *c, size_t bytes, void **out, jmg_error *err);
/* This GPU's cuBLAS and cuSOLVERDn handles (c->cuda.h, released by
 * jmg_mp_end), the cuSOLVERDn one on c's stream: for what cuSOLVERMp does
 * not do itself (transposes, qr's Rᵀ). Not collective. */
int jmg_mp_handles(jmg_mp_call *c, jmg_error *err);

/* Step 2's end: the library's workspaces, the larger of two routines'
 * (d1, h1 and d2, h2; 0 for a routine not asked), taken where rc is 0 (the
 * device one a part of the frame's workspace, before its info word
 * c->cuda.d_info; the host one from malloc), then the step's agreement
 * (collective whatever rc). */
int jmg_mp_take_work(jmg_mp_call *c, int rc, size_t d1, size_t h1, size_t d2,
                     size_t h2, jmg_error *err);

/* Step 2: the grid of a's comm and shape (cached per GPU), and a
 * descriptor on it (destroyed by jmg_mp_end). */
int jmg_mp_grid(jmg_mp_call *c, jmg_error *err);
int jmg_mp_desc(jmg_mp_call *c, int64_t m, int64_t n, int64_t mb, int64_t nb,
                int64_t lld, jmg_mp_desc_t *out, jmg_error *err);
/* A's own descriptor (from a's fields). */
int jmg_mp_desc_a(jmg_mp_call *c, jmg_mp_desc_t *out, jmg_error *err);

/* Rows (or columns) of n in blocks of nb that process iproc of nprocs holds,
 * the first block on process 0 (ScaLAPACK's NUMROC). */
int64_t jmg_mp_numroc(int64_t n, int64_t nb, int iproc, int nprocs);

/* 0, or err naming the library call and cuSOLVER's status. */
int jmg_mp_check(cusolverStatus_t st, const jmg_mp_call *c, const char *call,
                 jmg_error *err);
/* Step 3, before each library call: its info word (c->cuda.d_info)
 * zeroed, on the stream. */
int jmg_mp_zero_info(jmg_mp_call *c, jmg_error *err);
/* Step 3 after a factorization (potrf, getrf: rc, the outcome here before
 * the call; st, its status): the largest info > 0 of any rank is the
 * numerical failure (*info, 0 returned, on every rank, even where this
 * rank's status failed with it); else a failed status or info < 0 on any
 * rank is an error on every rank; else *info = 0. Collective (two
 * agreements) whatever rc and st. */
int jmg_mp_agree_factor(jmg_mp_call *c, int rc, cusolverStatus_t st,
                        const char *call, int *info, jmg_error *err);

/* Step 3, after each library call (rc: its outcome here): the library's
 * info word to the host, the same on every rank (the maximum:
 * jmg_cuda_call_info with the ranks' agreement). Collective even where
 * rc != 0, so that no rank is left waiting: a failed call or an info < 0
 * (a bad argument) on any rank is an error on every rank, naming call. */
int jmg_mp_agree_info(jmg_mp_call *c, int rc, const char *call, int *info,
                      jmg_error *err);

typedef struct jmg_mp_rhs jmg_mp_rhs;

/* The Cholesky factorization potrs and potri share, and sygvd's of B
 * (cholesky.c). Step 2: the grid, A's descriptor (*da), and the
 * workspace of potrf and of potrs on the right-hand sides: r's chunks of
 * b (r made by jmg_mp_rhs_take; its descriptors made here), or, where r is
 * NULL, n right-hand sides in b, a part in A's layout; then the step's
 * agreement. rc: step 1's outcome. Step 3: cusolverMpPotrf of m (A's
 * layout, descriptor dm, lower triangle) where rc (the outcome so far) is
 * 0, and its info agreed whatever rc (collective; *f > 0: the leading minor
 * of that order is not positive definite). */
int jmg_mp_cholesky_workspace(jmg_mp_call *c, int rc, jmg_mp_rhs *r, void *b,
                              jmg_mp_desc_t *da, jmg_error *err);
int jmg_mp_potrf(jmg_mp_call *c, int rc, void *m, jmg_mp_desc_t dm, int *f,
                 jmg_error *err);

/* The right-hand sides B (n x nrhs) as the library takes them: in chunks
 * of at most MB_A columns, each chunk an n x width matrix with MB_B = MB_A
 * (which potrs and getrs require) and NB_B = MB_A, so that all of it lies
 * in grid column 0: rank (row, 0) holds that chunk's row blocks of grid
 * row `row`. 0.7's documentation said potrs and getrs solve one right-hand
 * side per call ("Currently, this routine only supports NRHS=1"); 0.8.0's
 * library checks only NRHS >= 0 and JB + NRHS - 1 <= N_B (read from its
 * argument checks: docs/gpu-notes.md, cuSOLVERMp 0.8.0), so jaxmg
 * gives it whole chunks (tests/gpu: every column of up to 300 right-hand
 * sides checked). The columns sit side by side in this rank's part (ld
 * lld), which on a 1 x P grid is b itself on rank 0. Each rank has all of
 * B, so the distribution is local copies; the solution goes back to every
 * rank by one broadcast per rank of grid column 0. */
typedef struct jmg_mp_rhs {
  int64_t nrhs;
  int64_t width;      /* columns per chunk: min(nrhs, MB_A), at least 1 */
  void *local;        /* this rank's part (NULL: off grid column 0) */
  int64_t local_rows; /* its rows */
  int64_t lld;
  void *recv;         /* the largest owner's part, for the gather */
  jmg_mp_desc_t desc; /* of a full chunk (n x width) */
  jmg_mp_desc_t last; /* of the last chunk, where narrower (else desc) */
} jmg_mp_rhs;

/* Step 1: its buffers (b itself where it already is the part). */
int jmg_mp_rhs_take(jmg_mp_call *c, void *b, int64_t nrhs, jmg_mp_rhs *r,
                    jmg_error *err);
/* Step 2: the chunks' descriptors. */
int jmg_mp_rhs_desc(jmg_mp_call *c, jmg_mp_rhs *r, jmg_error *err);
/* What the library is given for the chunk that begins at column j (any
 * valid pointer where this rank holds none of it). */
void *jmg_mp_rhs_col(const jmg_mp_call *c, const jmg_mp_rhs *r, void *b,
                     int64_t j);
/* Step 3: b into this rank's part (local copies, on the stream), and the
 * solution from the owners' parts into every rank's b (collective). */
int jmg_mp_rhs_scatter(jmg_mp_call *c, const void *b, jmg_mp_rhs *r,
                       jmg_error *err);
int jmg_mp_rhs_gather(jmg_mp_call *c, void *b, jmg_mp_rhs *r, jmg_error *err);
/* One chunk of a solve: the library's call for `ncols` right-hand sides at
 * `col`, described by col_desc (d_info, the call's info word, receives its
 * info), with what the routine passes as ctx. */
typedef cusolverStatus_t (*jmg_mp_rhs_solve_fn)(jmg_mp_call *c, void *col,
                                                int64_t ncols,
                                                jmg_mp_desc_t col_desc,
                                                int *d_info, void *ctx);
/* Steps 3 with the solves between: scatters b, solves each chunk in turn
 * (solve; the info agreed across ranks, a nonzero one after a successful
 * factorization an error naming call), gathers the solution into every
 * rank's b and waits for the stream. */
int jmg_mp_rhs_solve(jmg_mp_call *c, void *b, jmg_mp_rhs *r, const char *call,
                     jmg_mp_rhs_solve_fn solve, void *ctx, jmg_error *err);

/* The diagonal of a matrix in A's layout (m: this rank's part of it, e.g.
 * a factor), all n elements of A's type, on every rank: each diagonal
 * block's owner copies its diagonal into an n-vector on its GPU and
 * broadcasts that segment (one broadcast per diagonal block, in NCCL groups
 * of 64), then the vector goes to the host. jmg_mp_diag_take (step 1) takes the
 * device vector (released by jmg_mp_end) and the host one (host memory the
 * call frees in jmg_mp_end too); jmg_mp_diag (step 3, collective) fills them
 * and waits. */
int jmg_mp_diag_take(jmg_mp_call *c, void **d_diag, void **h_diag,
                     jmg_error *err);
int jmg_mp_diag(jmg_mp_call *c, const void *m, void *d_diag, void *h_diag,
                jmg_error *err);

/* Copies A's part (rows x cols, ld) from src to dst, both in A's layout. */
int jmg_mp_copy_part(jmg_mp_call *c, void *dst, const void *src,
                     jmg_error *err);

/* An eigensolver's outputs once it succeeded (syevd, sygvd): the n
 * eigenvalues w broadcast from rank 0, the eigenvectors (`vectors`, in A's
 * layout; NULL: none asked) copied into A's part, the stream waited for. */
int jmg_mp_eig_outputs(jmg_mp_call *c, void *w, const void *vectors,
                       jmg_error *err);

/* Transposes between parts in A's layout (transpose.c): dst = srcᵀ
 * (conj 0) or srcᴴ (conj 1), src and dst distinct parts of this rank
 * (ld a->ld). Blocks are exchanged over the communicator, one block row of
 * dst at a time, through staging buffers of one block column / block row
 * of the part (jmg_mp_transpose_take, step 1, with this GPU's cuBLAS handle).
 * Collective. */
typedef struct jmg_mp_stage {
  void *send, *recv; /* one block column of src, one block row of dst */
  void *tri;         /* one packed triangle of a diagonal block */
} jmg_mp_stage;
int jmg_mp_transpose_take(jmg_mp_call *c, jmg_mp_stage *s, jmg_error *err);
int jmg_mp_transpose(jmg_mp_call *c, const void *src, void *dst, int conj,
                     jmg_mp_stage *s, jmg_error *err);
/* dst = the Hermitian matrix of src's lower triangle: lower triangle and
 * diagonal from src, strict upper triangle the conjugate transpose of src's
 * strict lower one. Collective. */
int jmg_mp_hermitian(jmg_mp_call *c, const void *src, void *dst,
                     jmg_mp_stage *s, jmg_error *err);

/* The routines (potrs.c, potri.c, syevd.c, sygvd.c, lu_solve.c, qr.c),
 * cuSOLVERMp's on any number of ranks; the table's potrs, potri, syevd and
 * lu_solve are one_gpu.c's, which run these on several ranks. */
int jmg_mp_potrs(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err);
int jmg_mp_potri(const jmg_engine *e, const jmg_local_matrix *a, int *info,
                 jmg_error *err);
int jmg_mp_sygvd(const jmg_engine *e, const jmg_local_matrix *a,
                 const jmg_local_matrix *b, void *w, int want_vectors,
                 int *info, jmg_error *err);
int jmg_mp_syevd(const jmg_engine *e, const jmg_local_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err);
int jmg_mp_lu_solve(const jmg_engine *e, const jmg_local_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err);
int jmg_mp_qr(const jmg_engine *e, const jmg_local_matrix *a, void *rt,
              int64_t m, int64_t rr, int *info, jmg_error *err);

/* Whether problem p's part is one rank's whole square A, which one_gpu.c
 * hands to cuSOLVERDn's routines (their limits and workspace are then the
 * engine's). */
int jmg_mp_one_gpu_problem(const jmg_problem *p);
int jmg_mp_one_gpu_potrs(const jmg_engine *e, const jmg_local_matrix *a,
                         void *b, int64_t nrhs, void *diag, int *info,
                         jmg_error *err);
int jmg_mp_one_gpu_potri(const jmg_engine *e, const jmg_local_matrix *a,
                         int *info, jmg_error *err);
int jmg_mp_one_gpu_syevd(const jmg_engine *e, const jmg_local_matrix *a,
                         void *w, int want_vectors, int *info, jmg_error *err);
int jmg_mp_one_gpu_lu_solve(const jmg_engine *e, const jmg_local_matrix *a,
                            void *b, int64_t nrhs, int transpose, int *info,
                            jmg_error *err);

/* Whether the eigensolvers' problem p runs on rank 0's gathered copy
 * (cusolverdn-local's routines, engine/cusolverdn_local/) rather than
 * cuSOLVERMp's: several ranks and N below the one-GPU crossover
 * (engine/gather/thresholds.c, jmg_gather_local_prefers). cuSOLVERMp's
 * eigensolver is slower than one GPU there (issue 37). Pure: the same on
 * every rank. */
int jmg_mp_gathers(const jmg_problem *p);
/* The table's syevd and sygvd: cusolverdn-local's routines where
 * jmg_mp_gathers, else cuSOLVERMp's (one_gpu.c's syevd, jmg_mp_sygvd). */
int jmg_mp_route_syevd(const jmg_engine *e, const jmg_local_matrix *a,
                       void *w, int want_vectors, int *info, jmg_error *err);
int jmg_mp_route_sygvd(const jmg_engine *e, const jmg_local_matrix *a,
                       const jmg_local_matrix *b, void *w, int want_vectors,
                       int *info, jmg_error *err);

/* cuSOLVERMp's own routines and limits, never routed to the gathered copy:
 * what cusolverdn-local falls back on where its copy does not fit (a
 * table of the same name, so that errors and traces name cuSOLVERMp). */
extern const jmg_engine jmg_cusolvermp_own_engine;

#endif
