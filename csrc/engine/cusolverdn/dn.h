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
 * gesvd.c and qr.c: their matrices alone are rectangular, engine.h), the
 * factorization that potrs and potri share in cholesky.c, the call frame and
 * the table here. */
#ifndef JMG_ENGINE_CUSOLVERDN_DN_H
#define JMG_ENGINE_CUSOLVERDN_DN_H

#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <stddef.h>

#include "cuda/device.h"
#include "cuda/handles.h"
#include "engine/engine.h"
#include "mem/mem.h"

/* cuSOLVER info words a call may use (one per cuSOLVER routine it runs). */
#define JMG_DN_MAX_INFO 4

/* One call's frame: the device set (one GPU, locked), its stream, the saved
 * current device, the workspaces. */
typedef struct jmg_dn_call {
  const char *op;
  const jmg_dist_matrix *a;
  void *a_data;        /* a->data[0]: the n x n matrix, lda n */
  jmg_mem_group group; /* a's one participant, for the memory operations */
  const jmg_mem *mem;
  jmg_cuda_handles *h;
  cusolverDnHandle_t dn;     /* h->dn[0], on stream */
  cusolverDnParams_t params; /* h->dn_params: the 64-bit API's */
  cudaStream_t stream;       /* the participant's XLA stream */
  int saved_device;
  void *work; /* device: work_bytes for cuSOLVER, then the info words */
  size_t work_bytes, alloc_bytes;
  int *d_info; /* JMG_DN_MAX_INFO ints on the device, inside work */
  void *host_work;
  size_t host_bytes;
  int pending; /* work was issued on stream since the last wait */
} jmg_dn_call;

/* Starts a call: checks the group, locks the device set's handles, makes the
 * GPU current and puts the cuSOLVERDn handle on the participant's stream.
 * End it with jmg_dn_end_call whatever this returns. */
int jmg_dn_begin_call(jmg_dn_call *call, const char *op,
                      const jmg_dist_matrix *a, jmg_error *err);

/* Takes device_bytes of device workspace (plus the info words) and
 * host_bytes of host workspace. Fails with JMG_ENOMEM, having written
 * nothing, when either cannot be had. */
int jmg_dn_take_workspace(jmg_dn_call *call, size_t device_bytes,
                          size_t host_bytes, jmg_error *err);

/* Brings the first count info words to h_info and waits for the stream
 * (everything issued so far is then done). A negative info (an argument
 * cuSOLVER rejected) becomes an error naming names[i], the routine that
 * wrote word i. */
int jmg_dn_read_info(jmg_dn_call *call, int *h_info, int count,
                     const char *const *names, jmg_error *err);

/* Waits for the stream if work is pending (after a failure), returns the
 * workspaces, unlocks the device set, restores the device. */
void jmg_dn_end_call(jmg_dn_call *call);

/* Each routine's workspace, as the routine takes it: the device bytes it
 * hands jmg_dn_take_workspace and cuSOLVER's host bytes, asked of cuSOLVER
 * through the frame's dn, params and a (its n and dtype). cuSOLVER's
 * queries read no data: a_data and the other pointers may be NULL, so that
 * jmg_dn_workspace (workspace.c) asks them before any call.
 * The Cholesky factorization potrs and potri share (cholesky.c): its
 * workspace sizes, and A = L L^H in the lower triangle of a, info in
 * call->d_info[slot]. */
int jmg_dn_potrf_workspace(jmg_dn_call *call, size_t *device_bytes,
                           size_t *host_bytes, jmg_error *err);
int jmg_dn_potrf(jmg_dn_call *call, int slot, jmg_error *err);
/* potri's: potrf's or <t>potri's, the larger; *lwork <t>potri's in elements. */
int jmg_dn_potri_workspace(jmg_dn_call *call, size_t *device_bytes,
                           size_t *host_bytes, int *lwork, jmg_error *err);
/* syevd's, for w (may be NULL in a query). */
int jmg_dn_syevd_workspace(jmg_dn_call *call, int want_vectors, void *w,
                           size_t *device_bytes, size_t *host_bytes,
                           jmg_error *err);
/* Which eigensolver syevd runs (JAXMG_SYEVD, syevd.c): cusolverDnXsyevd
 * where its workspace can be had (AUTO, the default), always (CUSOLVER), or
 * jaxmg's tridiagonal path always (TRIDIAGONAL). A malformed value is
 * JMG_EINVAL naming the variable. */
typedef enum {
  JMG_DN_SYEVD_AUTO,
  JMG_DN_SYEVD_CUSOLVER,
  JMG_DN_SYEVD_TRIDIAGONAL
} jmg_dn_syevd_choice;
int jmg_dn_syevd_solver(const char *op, jmg_dn_syevd_choice *choice,
                        jmg_error *err);
/* The tridiagonal path (syevd_tridiagonal.c): the device workspace it
 * takes (n x n more for eigenvectors, besides panels of TRD_NB and ORM_NB
 * columns), and the path itself on a call whose workspace holds that many
 * bytes; T's eigenproblem runs on the host (engine/lapack/tridiagonal.h),
 * whose info (did not converge) is *info. Eigenvalues into w (device), the
 * eigenvectors in place of A, as cusolverDnXsyevd's. */
size_t jmg_dn_syevd_tridiagonal_bytes(int64_t n, jmg_dtype dtype,
                                      int want_vectors);
int jmg_dn_syevd_tridiagonal(jmg_dn_call *call, void *w, int want_vectors,
                             int *info, jmg_error *err);
/* sygvd's (sygvd.c), for b and w (may be NULL in a query); *lwork in
 * elements of A's type. An N whose N * N exceeds INT_MAX (the routine's
 * 32-bit API, jmg_dn_sygvd_fits) is JMG_EUNSUPPORTED. */
int jmg_dn_sygvd_fits(int64_t n);
int jmg_dn_sygvd_workspace(jmg_dn_call *call, const void *b, int want_vectors,
                           const void *w, size_t *device_bytes, int *lwork,
                           jmg_error *err);
/* qr's (qr.c), for call->a as the routine gets it (M = Aᵀ: A's columns
 * a->n, its rows a->local_cols): geqrf's and orgqr's, the larger, then
 * X (A's transpose, m x n) and tau; cuSOLVER's host bytes. An A that
 * jmg_dn_qr_fits refuses is JMG_EINVAL. */
int jmg_dn_qr_workspace(jmg_dn_call *call, size_t *device_bytes,
                        size_t *host_bytes, jmg_error *err);
/* Whether an m x n A fits qr's 32-bit cusolverDn<t>orgqr (m, n and m * n
 * at most INT_MAX; qr.c), and gesvd's cuBLAS transpose of a tall A
 * (gesvd.c): `supports` refuses the rest before a call. */
int jmg_dn_qr_fits(int64_t m, int64_t n);
int jmg_dn_gesvd_fits(int64_t m, int64_t n);
/* lu_solve's: getrf's, then the pivots from *piv_at on. */
int jmg_dn_lu_workspace(jmg_dn_call *call, size_t *device_bytes,
                        size_t *host_bytes, size_t *piv_at, jmg_error *err);
/* The bytes jmg_dn_take_workspace takes from XLA for device_bytes (the info
 * words after them, aligned). */
size_t jmg_dn_alloc_bytes(size_t device_bytes);

/* engine.h's workspace query: what a call of problem p on the current GPU
 * would take from XLA's allocator (workspace.c); qr's for p's M x N A.
 * gesvd's is not asked ahead (it depends on the vectors asked and the
 * routine the size picks): JMG_EUNSUPPORTED. */
int jmg_dn_workspace(const jmg_engine *e, const jmg_problem *p,
                     const jmg_workspace_query *q, size_t *bytes,
                     jmg_error *err);

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

#endif
