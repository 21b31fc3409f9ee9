/* The cuSOLVERMg engine's parts (internal to engine/cusolvermg/).
 *
 * The engine drives the participants' GPUs from the leader, in one process:
 * cuSOLVERMg's handle and its 1 x G device grid, and matrix descriptors
 * cached by shape, tile and type, live per device set (context.c), beside the
 * cuBLAS/cuSOLVERDn handles every CUDA engine shares (cuda/handles.h), under
 * the device set's lock: calls on one device set run one at a time.
 * Workspaces come from XLA's allocator on each device (cuda/mem.c) and are
 * returned at the end of the call.
 *
 * cuSOLVERMg's routines run on their own streams and return when done; the
 * engine waits for every device after each of them. Copies go in order on
 * the leader's stream, which the ops layer relies on.
 *
 * The Cholesky factorization behind potrs and potri is not cuSOLVERMg's but
 * the tiled one of cuda_potrf.h (cuSOLVERMg's is wrong on GPUs that other
 * processes use, and slower; docs/gpu-notes.md), and potri's inverse from
 * it is jaxmg's tiled one (cuda_potri.h); potrs's solves and syevd are
 * cuSOLVERMg's. lu_solve is jaxmg's own tiled LU and solves (cuda_lu.h);
 * cusolverMgGetrf is not used until shown right on shared GPUs. The two
 * tiled factorizations share their geometry and per-device steps (tiles.h).
 * One file per routine: potrs.c, potri.c, syevd.c, lu_solve.c; the
 * factorization and the chunked solve in cholesky.c. */
#ifndef JMG_ENGINE_CUSOLVERMG_MG_H
#define JMG_ENGINE_CUSOLVERMG_MG_H

/* cuSOLVERMg is marked deprecated in CUDA 13 but still ships and works; only
 * this engine's files call it. */
#define DISABLE_CUSOLVERMG_DEPRECATED
#include <cusolverMg.h>

#include "cuda/call.h"
#include "engine/engine.h"

#define JMG_MG_MAX_DEVICES JMG_CUDA_MAX_DEVICES

typedef struct jmg_mg_context jmg_mg_context;

/* cuSOLVERMg's state of a device set. */
struct jmg_mg_context {
  cusolverMgHandle_t handle;
  cudaLibMgGrid_t grid;
};

/* One call's frame: the CUDA call frame (cuda/call.h: the device set
 * locked with its handles, the grid's first GPU current, buffers returned
 * at the end) and cuSOLVERMg's view: its state of the device set, A's
 * pointers as it takes them, the workspace on every device. */
typedef struct jmg_mg_call {
  jmg_cuda_call cuda;
  const jmg_dist_matrix *a;
  jmg_mg_context *ctx;
  void *a_ptrs[JMG_MG_MAX_DEVICES];
  void *work[JMG_MG_MAX_DEVICES];
  size_t work_bytes;
} jmg_mg_call;

/* Starts a call of op: checks N, begins the frame on a's devices, waits for
 * the participants' streams and leaves the grid's first GPU current. End it
 * with jmg_mg_end whatever this returns. */
int jmg_mg_begin(jmg_mg_call *call, jmg_op op, const jmg_dist_matrix *a,
                 jmg_error *err);
/* Ends the frame (jmg_cuda_call_end): returns rc, or the end's failure. */
int jmg_mg_end(jmg_mg_call *call, int rc, jmg_error *err);

/* Takes lwork elements of the matrix's type on every device. */
int jmg_mg_take_workspace(jmg_mg_call *call, int64_t lwork, jmg_error *err);

/* A cached descriptor of a rows x cols matrix in column tiles of col_block,
 * one row block (1D block-cyclic over the grid's columns). */
int jmg_mg_descriptor(jmg_mg_call *call, int64_t rows, int64_t cols,
                      int64_t col_block, cudaDataType type,
                      cudaLibMgMatrixDesc_t *out, jmg_error *err);

/* Waits for all work of the matrix's GPUs (cuSOLVERMg uses its own streams),
 * and leaves the grid's first GPU current, as NVIDIA's samples call it. */
int jmg_mg_sync_devices(const jmg_dist_matrix *m, const char *op,
                        jmg_error *err);

/* The step potrs and potri share (cholesky.c): A's descriptor, a workspace
 * large enough for potrf and for potrs in chunks of up to nrhs right-hand
 * sides (b[d] are buffers on GPU d for the size query), and the
 * factorization. h_info > 0 (not positive definite) is data: the caller
 * skips the solves. */
int jmg_mg_factor_for_solve(jmg_mg_call *call, void *const *b, int64_t nrhs,
                            cudaLibMgMatrixDesc_t *desc_a, int *h_info,
                            jmg_error *err);

/* Solves A X = B with the factor in A, for B on the grid's first GPU
 * (n x nrhs, column-major, leading dimension n), chunk by chunk; each chunk
 * is one column tile of B, the layout cuSOLVERMg's potrs takes. other[d] are
 * valid buffers of n x min(nrhs, JMG_MG_MAX_RHS_CHUNK) on GPU d (cuSOLVERMg
 * wants a B pointer on every GPU). */
int jmg_mg_solve_chunked(jmg_mg_call *call, cudaLibMgMatrixDesc_t desc_a,
                         void *b, int64_t nrhs, void *const *other, int *h_info,
                         jmg_error *err);

/* cuSOLVERMg's potrs gives wrong entries past the 2048th right-hand side of
 * a B tile (docs/gpu-notes.md, "Three defects of cuSOLVERMg 13.0"), so
 * right-hand sides go in chunks of at most this many. */
#define JMG_MG_MAX_RHS_CHUNK 2048

int jmg_mg_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                 int64_t nrhs, void *diag, int *info, jmg_error *err);
int jmg_mg_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                 jmg_error *err);
int jmg_mg_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                 int want_vectors, int *info, jmg_error *err);
int jmg_mg_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err);

#endif
