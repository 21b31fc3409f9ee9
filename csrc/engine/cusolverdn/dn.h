/* The cuSOLVERDn engine's parts (internal to engine/cusolverdn/).
 *
 * The engine runs a call whose group is ONE GPU (its `supports` refuses
 * more; cuSOLVERMg takes those): the matrix is then one column-major n x n
 * block on that GPU (lda n), where the block-cyclic and contiguous layouts
 * coincide, and cuSOLVERDn's single-GPU routines run on it in place, as
 * jaxlib's own solvers do.
 *
 * Everything runs in order on the participant's XLA stream, the stream the
 * ops layer's copies use too, so nothing waits for anything between steps:
 * the only wait of a routine is the one that brings cuSOLVER's info to the
 * host at its end (info is data: the ops layer decides on it). The
 * cuSOLVERDn handle is the device set's (cuda/handles.h), locked for the
 * call and set to the stream at its start. Workspaces come from XLA's
 * allocator (the platform's memory module), with cuSOLVER's info words in
 * the same allocation, and a host workspace where the 64-bit API wants one;
 * all are taken before anything is written (the JMG_ENOMEM contract) and
 * returned after the wait.
 *
 * uplo and conjugation are those of the cuSOLVERMg engine: the lower
 * triangle of the matrix as handed over (column-major), so that both engines
 * compute the same thing from the same bytes (the Python layer accounts for
 * the conjugation of a row-sharded Hermitian A, see ops/ops.h).
 *
 * One file per routine (potrs.c, potri.c, syevd.c, sygvd.c, lu_solve.c,
 * gesvd.c and qr.c: their matrices alone are rectangular, engine.h), each
 * with its workspace query; the factorization that potrs and potri share
 * in cholesky.c; the engine's frame and table in context.c. */
#ifndef JMG_ENGINE_CUSOLVERDN_DN_H
#define JMG_ENGINE_CUSOLVERDN_DN_H

#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <stddef.h>

#include "cuda/call.h"
#include "engine/engine.h"

/* One call's frame: the CUDA call frame (cuda/call.h: the GPU, locked with
 * its handles, the stream, the workspace, the info words) and what
 * cuSOLVERDn's routines take from it. */
typedef struct jmg_dn_call {
  jmg_cuda_call cuda;
  const jmg_dist_matrix *a;
  void *a_data;              /* a->data[0]: the n x n matrix, lda n */
  cusolverDnHandle_t dn;     /* the device set's, on the call's stream */
  cusolverDnParams_t params; /* the 64-bit API's */
  cublasHandle_t blas;       /* the device set's, on the call's stream */
} jmg_dn_call;

/* Starts a call of op on a: checks the group (one GPU), begins the frame
 * and puts the cuSOLVERDn and cuBLAS handles on the participant's stream.
 * End it with jmg_dn_end whatever this returns. */
int jmg_dn_begin(jmg_dn_call *call, jmg_op op, const jmg_dist_matrix *a,
                 jmg_error *err);
/* Ends the frame (jmg_cuda_call_end): returns rc, or the end's failure. */
int jmg_dn_end(jmg_dn_call *call, int rc, jmg_error *err);

/* Each routine's workspace, laid out into w (cuda/call.h) as the routine
 * takes it, asked of cuSOLVER through the call's dn, params and a (its n
 * and dtype). cuSOLVER's queries read no data: a_data and the other
 * pointers may be NULL, so that the workspace query (workspace.c) asks
 * them before any call. */

/* The Cholesky factorization potrs and potri share (cholesky.c): its
 * workspace as one part (cuSOLVER's device bytes; host bytes into w), and
 * A = L L^H in the lower triangle of a, with `work` that part, info in
 * call->cuda.d_info[slot]. */
int jmg_dn_potrf_workspace(jmg_dn_call *call, size_t *device_bytes,
                           size_t *host_bytes, jmg_error *err);
int jmg_dn_potrf(jmg_dn_call *call, void *work, size_t work_bytes, int slot,
                 jmg_error *err);

/* Which eigensolver syevd runs (JAXMG_SYEVD, syevd.c): cusolverDnXsyevd
 * where its workspace can be had (AUTO, the default), always (CUSOLVER), or
 * jaxmg's tridiagonal path always (TRIDIAGONAL). The values are the
 * workspace query's syevd_solver (engine.h): 0 asks for the one the engine
 * would choose. */
typedef enum {
  JMG_DN_SYEVD_AUTO,
  JMG_DN_SYEVD_CUSOLVER,
  JMG_DN_SYEVD_TRIDIAGONAL
} jmg_dn_syevd_choice;
/* The tridiagonal path (syevd_tridiagonal.c): its workspace (n x n more
 * for eigenvectors, besides panels of TRD_NB and ORM_NB columns), and the
 * path itself on a call that took it; T's eigenproblem runs on the host
 * (engine/lapack/tridiagonal.h), whose info (did not converge) is *info.
 * Eigenvalues into w (device), the eigenvectors in place of A, as
 * cusolverDnXsyevd's. */
void jmg_dn_syevd_tridiagonal_workspace(int64_t n, jmg_dtype dtype,
                                        int want_vectors, jmg_cuda_work *w);
int jmg_dn_syevd_tridiagonal(jmg_dn_call *call, void *w, int want_vectors,
                             int *info, jmg_error *err);

/* Whether an N x N sygvd fits cuSOLVERDn's 32-bit API (N * N at most
 * INT_MAX; sygvd.c), an m x n A qr's 32-bit cusolverDn<t>orgqr (m, n and
 * m * n at most INT_MAX; qr.c), and gesvd's cuBLAS transpose of a tall A
 * (gesvd.c): `supports` refuses the rest before a call. */
int jmg_dn_sygvd_fits(int64_t n);
int jmg_dn_qr_fits(int64_t m, int64_t n);
int jmg_dn_gesvd_fits(int64_t m, int64_t n);

/* engine.h's workspace query (workspace.c): what a call of problem p on the
 * current GPU would take from XLA's allocator, each op's routine file
 * answering for it (jmg_dn_<op>_query, on a call frame with no matrix and
 * no stream); qr's for p's M x N A. gesvd's is not asked ahead (it depends
 * on the vectors asked and the routine the size picks): JMG_EUNSUPPORTED. */
int jmg_dn_workspace(const jmg_engine *e, const jmg_problem *p,
                     const jmg_workspace_query *q, size_t *bytes,
                     jmg_error *err);
int jmg_dn_potrs_query(jmg_dn_call *call, const jmg_workspace_query *q,
                       size_t *bytes, jmg_error *err);
int jmg_dn_potri_query(jmg_dn_call *call, const jmg_workspace_query *q,
                       size_t *bytes, jmg_error *err);
int jmg_dn_syevd_query(jmg_dn_call *call, const jmg_workspace_query *q,
                       size_t *bytes, jmg_error *err);
int jmg_dn_sygvd_query(jmg_dn_call *call, const jmg_workspace_query *q,
                       size_t *bytes, jmg_error *err);
int jmg_dn_lu_solve_query(jmg_dn_call *call, const jmg_workspace_query *q,
                          size_t *bytes, jmg_error *err);
int jmg_dn_qr_query(jmg_dn_call *call, const jmg_workspace_query *q,
                    size_t *bytes, jmg_error *err);

int jmg_dn_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err);
int jmg_dn_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                 jmg_error *err);
int jmg_dn_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err);
int jmg_dn_sygvd(const jmg_engine *e, const jmg_dist_matrix *a,
                 const jmg_dist_matrix *b, void *w, int want_vectors, int *info,
                 jmg_error *err);
int jmg_dn_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err);
int jmg_dn_gesvd(const jmg_engine *e, const jmg_dist_matrix *a, void *s,
                 const jmg_dist_matrix *u, const jmg_dist_matrix *vt, int full,
                 int *info, jmg_error *err);
int jmg_dn_qr(const jmg_engine *e, const jmg_dist_matrix *a,
              const jmg_dist_matrix *rt, int *info, jmg_error *err);

/* potrs and lu_solve in mixed precision (mixed.c): engine.h's potrs_mixed
 * and lu_solve_mixed. jmg_dn_mixed_query: their workspace beside the exact
 * routine's, which the fallback takes after it (lu: lu_solve's). */
int jmg_dn_potrs_mixed(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                       int64_t nrhs, int *info, jmg_error *err);
int jmg_dn_lu_solve_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                          void *b, int64_t nrhs, int transpose, int *info,
                          jmg_error *err);
int jmg_dn_mixed_query(jmg_dn_call *call, const jmg_workspace_query *q, int lu,
                       size_t *bytes, jmg_error *err);

#endif
