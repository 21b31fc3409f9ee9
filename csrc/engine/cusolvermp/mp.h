/* What the cuSOLVERMp engine's routines share (context.c): one call's
 * state, the agreement between ranks, buffers, descriptors, and the
 * right-hand sides' distribution.
 *
 * Every routine runs in three steps, so that no rank returns an error
 * before a collective its partners entered:
 *   1. mp_begin and every buffer the routine needs beyond the library's
 *      workspaces (local: nothing collective), then mp_agree;
 *   2. mp_grid (collective the first time), descriptors, the library's
 *      workspace sizes and mp_take_work, then mp_agree again;
 *   3. the library calls, the results, mp_agree_info.
 * mp_end releases everything mp_* took, whatever happened. */
#ifndef JMG_ENGINE_CUSOLVERMP_MP_H
#define JMG_ENGINE_CUSOLVERMP_MP_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "cuda/device.h"
#include "engine/cusolvermp/api.h"
#include "engine/engine.h"

#define MP_MAX_TAKEN 12

typedef struct mp_call {
  const char *op;
  const jmg_local_matrix *a;
  const jmg_mp_api *api;
  const jmg_cuda_device *dev;
  cudaStream_t stream;
  jmg_mp_handle_t handle;
  jmg_mp_grid_t grid;
  int slot;          /* the per-GPU state held (locked), or -1 */
  int myrow, mycol;  /* this rank's place in the grid (column-major) */
  cudaDataType type; /* A's, and the compute type */
  size_t elem;       /* bytes per element */
  void *taken[MP_MAX_TAKEN];
  size_t taken_bytes[MP_MAX_TAKEN];
  int ntaken;
  void *d_work, *h_work;
  void *h_diag; /* mp_diag_take's host vector */
  size_t d_bytes, h_bytes;
  jmg_mp_desc_t descs[6];
  int ndescs;
  struct jmg_cuda_handles *blas; /* this GPU's cuBLAS (mp_transpose_take) */
} mp_call;

/* Step 1: the library, this GPU's handle (made once per process and GPU,
 * locked until mp_end), and checks of a's layout (mb == nb, the grid, the
 * part's size). Not collective. */
int mp_begin(mp_call *c, const char *op, const jmg_local_matrix *a,
             jmg_error *err);
void mp_end(mp_call *c);
/* mp_begin for an m x a->n matrix (a's part of it checked against m rows
 * and a->n columns): qr's A. */
int mp_begin_mn(mp_call *c, const char *op, const jmg_local_matrix *a,
                int64_t m, jmg_error *err);

/* Collective: every rank hands its rc (0 or a negative jmg_status, err
 * filled); returns rc where it failed here, JMG_EPEER (naming the worst
 * status) where only another rank failed, else 0. */
int mp_agree(mp_call *c, int rc, jmg_error *err);

/* Device memory of this GPU (XLA's allocator), released by mp_end. */
int mp_take(mp_call *c, size_t bytes, void **out, jmg_error *err);
/* This GPU's cuBLAS and cuSOLVERDn handles (c->blas, released by mp_end),
 * the cuSOLVERDn one on c's stream: for what cuSOLVERMp does not do
 * itself (transposes, qr's Rᵀ). Not collective. */
int mp_handles(mp_call *c, jmg_error *err);

/* One rank holding the whole matrix (a 1 x 1 grid, ld n): a one-GPU view
 * of its part for jmg_cusolverdn_engine's routines, as the gather engine
 * makes of its gathered copy. cuSOLVERMp's own factorizations are slower
 * there than cuSOLVERDn's, which JAX calls: at N = 8192 float64 on an
 * H100, cusolverMpGetrf took 109-114 ms of a 116 ms lu_solve where JAX's
 * whole solve took 42 ms (at every block size from 256 to 2048), and
 * cusolverMpPotrf held potrs at 0.75 of JAX's speed
 * (docs/gpu-runs/2026-11-25-s12-h100); its syevd needs a scratch Z
 * beside A and computes eigenvectors even for eigenvalues alone, its potri
 * a scratch W. potrs, potri, syevd and lu_solve run cuSOLVERDn's routine
 * there (no transpose, no scratch, the other engines' statuses and limits:
 * context.c's mp_supports asks jmg_cusolverdn_engine); several ranks run
 * cuSOLVERMp's. sygvd (sygvd.c says why) and qr's rectangular part keep
 * cuSOLVERMp's. Returns 1 with *o filled for such a part, else 0. */
typedef struct mp_one_gpu {
  jmg_dist_matrix view;
  void *data, *device_ctx; /* what view.data and view.device_ctx point at */
} mp_one_gpu;
int mp_one_gpu_view(const jmg_local_matrix *a, mp_one_gpu *o);
/* The library's workspaces: device (mp_take) and host (malloc). */
int mp_take_work(mp_call *c, size_t d_bytes, size_t h_bytes, jmg_error *err);

/* Step 2: the grid of a's comm and shape (cached per GPU), and a
 * descriptor on it (destroyed by mp_end). */
int mp_grid(mp_call *c, jmg_error *err);
int mp_desc(mp_call *c, int64_t m, int64_t n, int64_t mb, int64_t nb,
            int64_t lld, jmg_mp_desc_t *out, jmg_error *err);
/* A's own descriptor (from a's fields). */
int mp_desc_a(mp_call *c, jmg_mp_desc_t *out, jmg_error *err);

/* Rows (or columns) of n in blocks of nb that process iproc of nprocs holds,
 * the first block on process 0 (ScaLAPACK's NUMROC). */
int64_t mp_numroc(int64_t n, int64_t nb, int iproc, int nprocs);

/* 0, or err naming the library call and cuSOLVER's status. */
int mp_check(cusolverStatus_t st, const mp_call *c, const char *call,
             jmg_error *err);
/* Step 3 after a factorization (potrf, getrf: rc, the outcome here before
 * the call; st, its status): the largest info > 0 of any rank is the
 * numerical failure (*info, 0 returned, on every rank, even where this
 * rank's status failed with it); else a failed status or info < 0 on any
 * rank is an error on every rank; else *info = 0. Collective (two
 * agreements) whatever rc and st. */
int mp_agree_factor(mp_call *c, int rc, cusolverStatus_t st,
                    const int *d_info, const char *call, int *info,
                    jmg_error *err);

/* Step 3, after each library call (rc: its outcome here): the library's
 * device info (d_info) to the host, the same on every rank (the maximum).
 * Collective even where rc != 0, so that no rank is left waiting: a failed
 * call or an info < 0 (a bad argument) on any rank is an error on every
 * rank, naming call. */
int mp_agree_info(mp_call *c, int rc, const int *d_info, const char *call,
                  int *info, jmg_error *err);

/* The right-hand sides B (n x nrhs) as the library takes them: in chunks
 * of at most MB_A columns, each chunk an n x width matrix with MB_B = MB_A
 * (which potrs and getrs require) and NB_B = MB_A, so that all of it lies
 * in grid column 0: rank (row, 0) holds that chunk's row blocks of grid
 * row `row`. 0.7's documentation said potrs and getrs solve one right-hand
 * side per call ("Currently, this routine only supports NRHS=1"); 0.8.0's
 * library checks only NRHS >= 0 and JB + NRHS - 1 <= N_B (read from its
 * argument checks, libcusolverMp.so.0 0.8.0.3126, 2026-11-25), so jaxmg
 * gives it whole chunks (tests/gpu: every column of up to 300 right-hand
 * sides checked). The columns sit side by side in this rank's part (ld
 * lld), which on a 1 x P grid is b itself on rank 0. Each rank has all of
 * B, so the distribution is local copies; the solution goes back to every
 * rank by one broadcast per rank of grid column 0. */
typedef struct mp_rhs {
  int64_t nrhs;
  int64_t width;      /* columns per chunk: min(nrhs, MB_A), at least 1 */
  void *local;        /* this rank's part (NULL: off grid column 0) */
  int64_t local_rows; /* its rows */
  int64_t lld;
  void *recv;         /* the largest owner's part, for the gather */
  jmg_mp_desc_t desc; /* of a full chunk (n x width) */
  jmg_mp_desc_t last; /* of the last chunk, where narrower (else desc) */
} mp_rhs;

/* Step 1: its buffers (b itself where it already is the part). */
int mp_rhs_take(mp_call *c, void *b, int64_t nrhs, mp_rhs *r, jmg_error *err);
/* Step 2: the chunks' descriptors. */
int mp_rhs_desc(mp_call *c, mp_rhs *r, jmg_error *err);
/* What the library is given for the chunk that begins at column j (any
 * valid pointer where this rank holds none of it). */
void *mp_rhs_col(const mp_call *c, const mp_rhs *r, void *b, int64_t j);
/* Step 3: b into this rank's part (local copies, on the stream), and the
 * solution from the owners' parts into every rank's b (collective). */
int mp_rhs_scatter(mp_call *c, const void *b, mp_rhs *r, jmg_error *err);
int mp_rhs_gather(mp_call *c, void *b, mp_rhs *r, jmg_error *err);
/* One chunk of a solve: the library's call for `ncols` right-hand sides at
 * `col`, described by col_desc (d_info receives its info), with what the
 * routine passes as ctx. */
typedef cusolverStatus_t (*mp_rhs_solve_fn)(mp_call *c, void *col,
                                            int64_t ncols,
                                            jmg_mp_desc_t col_desc,
                                            int *d_info, void *ctx);
/* Steps 3 with the solves between: scatters b, solves each chunk in turn
 * (solve; the info agreed across ranks, a nonzero one after a successful
 * factorization an error naming call), gathers the solution into every
 * rank's b and waits for the stream. */
int mp_rhs_solve(mp_call *c, void *b, mp_rhs *r, int *d_info, const char *call,
                 mp_rhs_solve_fn solve, void *ctx, jmg_error *err);

/* The diagonal of a matrix in A's layout (m: this rank's part of it, e.g.
 * a factor), all n elements of A's type, on every rank: each diagonal
 * block's owner copies its diagonal into an n-vector on its GPU and
 * broadcasts that segment (one broadcast per diagonal block, in NCCL groups
 * of 64), then the vector goes to the host. mp_diag_take (step 1) takes the
 * device vector (released by mp_end) and the host one (host memory the
 * call frees in mp_end too); mp_diag (step 3, collective) fills them and
 * waits. */
int mp_diag_take(mp_call *c, void **d_diag, void **h_diag, jmg_error *err);
int mp_diag(mp_call *c, const void *m, void *d_diag, void *h_diag,
            jmg_error *err);

/* Copies A's part (rows x cols, ld) from src to dst, both in A's layout. */
int mp_copy_part(mp_call *c, void *dst, const void *src, jmg_error *err);

/* An eigensolver's outputs once it succeeded (syevd, sygvd): the n
 * eigenvalues w broadcast from rank 0, the eigenvectors (`vectors`, in A's
 * layout; NULL: none asked) copied into A's part, the stream waited for. */
int mp_eig_outputs(mp_call *c, void *w, const void *vectors, jmg_error *err);

/* Transposes between parts in A's layout (transpose.c): dst = srcᵀ
 * (conj 0) or srcᴴ (conj 1), src and dst distinct parts of this rank
 * (ld a->ld). Blocks are exchanged over the communicator, one block row of
 * dst at a time, through staging buffers of one block column / block row
 * of the part (mp_transpose_take, step 1, with this GPU's cuBLAS handle).
 * Collective. */
typedef struct mp_stage {
  void *send, *recv; /* one block column of src, one block row of dst */
  void *tri;         /* one packed triangle of a diagonal block */
} mp_stage;
int mp_transpose_take(mp_call *c, mp_stage *s, jmg_error *err);
int mp_transpose(mp_call *c, const void *src, void *dst, int conj,
                 mp_stage *s, jmg_error *err);
/* dst = the Hermitian matrix of src's lower triangle: lower triangle and
 * diagonal from src, strict upper triangle the conjugate transpose of src's
 * strict lower one. Collective. */
int mp_hermitian(mp_call *c, const void *src, void *dst, mp_stage *s,
                 jmg_error *err);

/* The routines (potrs.c, potri.c, syevd.c, sygvd.c, lu_solve.c). */
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

#endif
