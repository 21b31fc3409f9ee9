/* The engines: the solvers behind the ops, one folder each, behind this one
 * interface.
 *
 * Two execution models. An engine runs the ops in one of them:
 *   JMG_MODEL_LEADER  one participant (the leader, shard 0) drives every
 *                     device of the call over a global view of all shards
 *                     (jmg_dist_matrix: a pointer to every shard). The ops
 *                     layer's leader steps permute A into the layout the
 *                     engine takes before the call and write every
 *                     participant's outputs after it. LAPACK on CPU devices
 *                     (engine/lapack/), cuSOLVERDn on one GPU
 *                     (engine/cusolverdn/), cuSOLVERDn on a copy gathered
 *                     onto one GPU of several (engine/gather/) and
 *                     cuSOLVERMg with jaxmg's tiled Cholesky on several GPUs
 *                     (engine/cusolvermg/) work so.
 *   JMG_MODEL_LOCAL   every participant calls the library on its own shard
 *                     (jmg_local_matrix: rank, ranks, a communicator, the
 *                     shard), and the library talks between ranks itself.
 *                     cuSOLVERMp (engine/cusolvermp/) works so; and
 *                     the one-device path, rank 0 gathering A over the
 *                     communicator (engine/local_gather/): cuSOLVERDn
 *                     (engine/cusolverdn_local/) and on CPU devices
 *                     lapack-local (engine/lapack_local/, for testing);
 *                     their executor is exec/local.c.
 *
 * Memory is not the engines' business: copies, copy lanes, allocations, NaN
 * fills and waits are the platform's memory module (mem/mem.h: host_mem.c on
 * CPU, cuda/mem.c on GPUs), shared by the platform's engines and by the ops'
 * leader steps. The CUDA engines share cuda/ too: error checks, the device
 * context, dtypes, and the cuBLAS/cuSOLVERDn handles of a device set
 * (cuda/handles.h).
 *
 * Which engine runs a call: jmg_engine_select (engine/select.c), per call,
 * from the platform's engines in its order of preference, the problem (op,
 * group size, dtype, N, T_A) and JAXMG_ENGINE:
 *   - JAXMG_ENGINE set: the engine of that name, which must be one of the
 *     platform's and support the problem; else the call fails with an error
 *     that names JAXMG_ENGINE, the reason, and the engines there are. Nothing
 *     falls back silently to another engine.
 *   - else the first engine of the list that supports the problem and
 *     prefers it: it has a routine for the op, its `supports` (if any)
 *     accepts the problem, and its `prefers` (if any) too. None: the call
 *     fails, naming every engine's reason.
 * `supports` is what the engine CAN run (every limit of its library);
 * `prefers` is where its measured speed earns it the call by default (a
 * table of sizes, e.g. engine/gather/thresholds.c). JAXMG_ENGINE asks only
 * `supports`: an engine can be forced beyond where it is preferred, to
 * measure it there.
 *
 * Adding an engine: a folder engine/NAME/ with one file per routine and a
 * table (a const jmg_engine) that gives its name, model, `supports` (every
 * limit the library has that would otherwise fail inside it: put it there,
 * with the reason) and its routines (NULL for the ops it lacks); a line in
 * the platform's list of engines (ffi/cpu_targets.c, ffi/cuda_targets.c), in
 * the place its measured speed earns; its files in CMakeLists.txt or
 * cmake/cuda.cmake.
 *
 * The contract of every routine:
 * - Numerical failure is data: *info receives LAPACK's info (> 0: the leading
 *   minor of that order is not positive definite, or the eigensolver did not
 *   converge) and the routine returns 0. Only a failure of the machinery
 *   (memory, a driver call) is an error, which names the op.
 * - A is finite: an A with a NaN or an Inf entry never reaches an engine
 *   (exec/finite.h answers it, status JMG_INFO_NONFINITE, for all of them).
 * - A routine fails with JMG_ENOMEM only before it has written anything (it
 *   takes all its memory first), so that the ops layer can free memory of its
 *   own and call it again.
 * - A routine takes every buffer it needs beyond its arguments itself (from
 *   the platform's memory module) and returns when its results are complete.
 * - Each op's output layout is fixed here, whatever engine runs it. */
#ifndef JMG_ENGINE_ENGINE_H
#define JMG_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/op.h"

typedef enum {
  JMG_MODEL_LEADER, /* one leader over a global view of all shards */
  JMG_MODEL_LOCAL   /* every participant on its own shard, with a comm */
} jmg_model;

/* JMG_MODEL_LEADER's view: a matrix distributed 1D block-cyclically over
 * ndev devices (layout/cyclic.h), the layout cuSOLVERMg defines: device d
 * holds its columns column-major with leading dimension n. */
typedef struct jmg_dist_matrix {
  int ndev;
  int64_t n;          /* order of the (padded) matrix */
  int64_t tile;       /* T_A */
  int64_t local_cols; /* n / ndev columns on each device */
  jmg_dtype dtype;
  void *const *data; /* data[d]: device d's columns, column-major, lda n */
  /* The platform's per-participant context (CUDA: jmg_cuda_device, see
   * cuda/device.h; NULL on CPU). */
  void *const *device_ctx;
} jmg_dist_matrix;

/* JMG_MODEL_LOCAL's view: what one participant (a rank) hands the library.
 * Each rank holds its own part of A and calls the routine at the same time
 * as the others; the library exchanges data between ranks through the
 * communicator (comm/comm.h).
 *
 * The layout is 2D block-cyclic over a grid_rows x grid_cols grid of ranks
 * (rank r at row r % grid_rows, column r / grid_rows: column-major
 * mapping), with mb x nb blocks, the first block on rank 0; this rank's
 * part is column-major with leading dimension ld. The ops layer's local
 * steps (exec/local.h) bring a row-sharded A into it by a symmetric
 * permutation done inside each shard: today a 1 x ranks grid with
 * mb = nb = T_A, rows = n, cols = n / ranks, ld = n. */
typedef struct jmg_local_matrix {
  int rank;                            /* this participant, 0 .. ranks-1 */
  int ranks;                           /* participants of the call */
  int one_process; /* 1: every rank is a thread of this process (SPMD) */
  int grid_rows, grid_cols;            /* grid_rows * grid_cols == ranks */
  const struct jmg_comm_ops *comm_ops; /* the platform's (comm/comm.h) */
  struct jmg_comm *comm;               /* this rank's end, opened */
  int64_t n;                           /* order of the global matrix */
  int64_t mb, nb;                      /* block sizes */
  jmg_dtype dtype;
  void *data;         /* this rank's part */
  int64_t rows, cols; /* its size */
  int64_t ld;         /* its leading dimension (column-major) */
  void *device_ctx;   /* this participant's platform context */
  /* The platform's memory module (mem/mem.h), for engines that move the
   * parts themselves (engine/local_gather/); NULL reads as host memory
   * (jmg_host_mem). */
  const struct jmg_mem *mem;
} jmg_local_matrix;

/* What selection looks at: one call's problem. */
typedef struct jmg_problem {
  jmg_op op;
  int nparts;     /* participants (devices) in the call's group */
  int nodes;      /* hosts the group spans (1: one node; the leader model
                   * needs one node, the local model runs on any) */
  jmg_dtype dtype;
  int64_t n;
  int64_t m;    /* A's rows: n but for gesvd's and qr's m x n A (0 reads
                 * as n) */
  int64_t tile; /* T_A */
  /* jmg_precision (common/op.h): JMG_PRECISION_MIXED runs only on an
   * engine with the op's mixed routine (potrs_mixed, lu_solve_mixed). */
  int precision;
} jmg_problem;

/* A's rows in problem p: p->m, or p->n where m is 0. */
static inline int64_t jmg_problem_rows(const jmg_problem *p) {
  return p->m > 0 ? p->m : p->n;
}

struct jmg_engine;

/* A workspace query's options beside the problem (engine's `workspace`). */
typedef struct jmg_workspace_query {
  int64_t nrhs;     /* potrs, lu_solve: B's columns */
  int want_vectors; /* syevd, sygvd */
  /* Where an engine has several routines for the op, which one's workspace
   * to tell: 0 the one the engine would run (its own choice, by its own
   * settings); other values are the engine's, named in its folder (today
   * only cuSOLVERDn's syevd: engine/cusolverdn/dn.h, jmg_dn_syevd_choice).
   * An engine with one routine for the op ignores it. The ctypes query
   * passes the Python layer's number through (ffi/handler.h). */
  int syevd_solver;
} jmg_workspace_query;

/* The routines of JMG_MODEL_LEADER, called on the leader with A in the
 * block-cyclic layout of jmg_dist_matrix. */
typedef struct jmg_leader_routines {
  /* Solves A X = B for SPD/HPD A (lower triangle used; A is overwritten by
   * its factor and not returned). b: n x nrhs, column-major (lda n), in
   * participant 0's memory, overwritten by X. diag: NULL, or n elements of
   * A's real type in host memory, which receive the real parts of the
   * factor's diagonal (of the lower factor of the matrix as the engine
   * holds it) when the factorization succeeds: what a log-determinant needs,
   * read while the factor is still at hand. */
  int (*potrs)(const struct jmg_engine *e, const jmg_dist_matrix *a, void *b,
               int64_t nrhs, void *diag, int *info, jmg_error *err);
  /* Replaces A by its inverse, both triangles (Hermitian), in the
   * CONTIGUOUS layout (device d holds columns d*local_cols ...), the layout
   * the slab-by-slab solves of the GPU engine produce without a move. On
   * failure (*info != 0) A's content is unspecified. */
  int (*potri)(const struct jmg_engine *e, const jmg_dist_matrix *a, int *info,
               jmg_error *err);
  /* Eigenvalues (ascending, real, n of them, written to w in participant
   * 0's memory) and, if want_vectors, eigenvectors in place of A (column j
   * is the j-th), in the BLOCK-CYCLIC layout, as cuSOLVERMg returns them (the
   * ops layer permutes them back). */
  int (*syevd)(const struct jmg_engine *e, const jmg_dist_matrix *a, void *w,
               int want_vectors, int *info, jmg_error *err);
  /* Solves op(A) X = B for a general A by LU with partial pivoting, where A
   * is the distributed matrix as the engine holds it and op(A) is A
   * (transpose 0) or its transpose Aᵀ, not conjugated (transpose 1). A is
   * overwritten by its factors and not returned; the pivots are the
   * engine's own. b: n x nrhs, column-major (lda n), in participant 0's
   * memory, overwritten by X. *info: getrf's (> 0: U(info, info) is exactly
   * zero; b's content is then unspecified, and the ops layer fills X with
   * NaN). */
  int (*lu_solve)(const struct jmg_engine *e, const jmg_dist_matrix *a, void *b,
                  int64_t nrhs, int transpose, int *info, jmg_error *err);
  /* The singular value decomposition M = U S Vᴴ of a rectangular matrix,
   * with k = min(rows, cols). Every matrix here is in the CONTIGUOUS layout
   * and not square: a jmg_dist_matrix whose n is its number of ROWS (and
   * leading dimension), each device holding local_cols consecutive columns
   * (device d columns d*local_cols ...), tile unused.
   *   a: M, a->n rows and cols = a->ndev * a->local_cols columns; its
   *      content afterwards is unspecified.
   *   s: the k singular values, real, descending, in participant 0's
   *      memory.
   *   u: NULL, or U's first k columns (all a->n with full), a->n rows:
   *      u->ndev * u->local_cols of them.
   *   vt: NULL, or Vᴴ's first k rows (all cols with full): vt->n rows,
   *      cols columns (vt->local_cols = a->local_cols).
   * *info: the solver's (> 0: it did not converge; the ops layer fills
   * every output with NaN for any nonzero info). */
  int (*gesvd)(const struct jmg_engine *e, const jmg_dist_matrix *a, void *s,
               const jmg_dist_matrix *u, const jmg_dist_matrix *vt, int full,
               int *info, jmg_error *err);
  /* The reduced QR decomposition A = Q R of an m x n A, m >= n, given
   * TRANSPOSED, as a row-sharded A reaches the engine (ops/qr.c): every
   * matrix here is in the CONTIGUOUS layout, as gesvd's.
   *   a: M = Aᵀ, a->n = n rows (the leading dimension), m = a->ndev *
   *      a->local_cols columns; replaced by Qᵀ (n x m: Q's rows where A's
   *      were).
   *   rt: Rᵀ, rt->n = n rows, rt->ndev * rt->local_cols >= n columns (R's
   *      rows, ceil(n / ndev) a device): columns 0 .. n-1 receive Rᵀ,
   *      the columns past n zero. R's strict lower part may hold anything
   *      (cuSOLVERDn leaves the reflectors there): core/qr.py zeroes it.
   * Plain transposes, never conjugated. R's diagonal is the library's
   * Householder QR's (either sign; LAPACK's is real for complex dtypes). *info: 0 (a Householder QR does not fail
   * numerically; the ops layer fills Q and R with NaN for a nonzero
   * info). */
  int (*qr)(const struct jmg_engine *e, const jmg_dist_matrix *a,
            const jmg_dist_matrix *rt, int *info, jmg_error *err);
  /* The generalized Hermitian-definite eigenproblem A v = λ B v (type 1,
   * LAPACK's itype 1; lower triangles used): syevd's meanings for A, w and
   * want_vectors (the eigenvectors, B-orthonormal, in place of A in the
   * BLOCK-CYCLIC layout), with b the distributed B in the same layout as
   * A (same n, tile, local_cols, dtype), overwritten (its content
   * afterwards unspecified). *info: LAPACK's ?sygvd's: 1..n the
   * eigensolver did not converge, n + k B's leading minor of order k is
   * not positive definite. */
  int (*sygvd)(const struct jmg_engine *e, const jmg_dist_matrix *a,
               const jmg_dist_matrix *b, void *w, int want_vectors, int *info,
               jmg_error *err);
  /* potrs and lu_solve in mixed precision (common/op.h,
   * JMG_PRECISION_MIXED; NULL where the engine has none, and selection
   * then refuses a mixed call): the same meanings as potrs (no diag) and
   * lu_solve, with A factored in the next lower precision and X refined in
   * A's dtype against A kept intact (engine/refine.h), falling back to the
   * exact routine's factorization where refinement does not converge.
   * *info is the exact routine's: 0 whether refinement converged or the
   * fallback solved; the fallback's info otherwise. A's content afterwards
   * is unspecified, as for the exact routines. */
  int (*potrs_mixed)(const struct jmg_engine *e, const jmg_dist_matrix *a,
                     void *b, int64_t nrhs, int *info, jmg_error *err);
  int (*lu_solve_mixed)(const struct jmg_engine *e, const jmg_dist_matrix *a,
                        void *b, int64_t nrhs, int transpose, int *info,
                        jmg_error *err);
} jmg_leader_routines;

/* The routines of JMG_MODEL_LOCAL, called by every rank at once on its
 * part of A (the matrix as the engine holds it: the ops layer has
 * permuted it), with the leader's meanings otherwise:
 *   potrs, lu_solve: b is this rank's own full copy of B (n x nrhs, lda n,
 *     on its device, rows in the held matrix's order), overwritten by X on
 *     every rank; the engine distributes and gathers it itself. diag: NULL,
 *     or n reals on the host of every rank (in the held order).
 *   potri: A's part replaced by the inverse's part, same layout, both
 *     triangles.
 *   syevd: w (n reals, on the device) on every rank; with want_vectors the
 *     eigenvectors replace A's part, in A's layout (column j, the j-th
 *     eigenvector, in the block-cyclic column order; the ops layer moves
 *     them to the contiguous one).
 *   sygvd: syevd's, with b this rank's part of B in A's layout (same
 *     grid, blocks and ld), overwritten; *info as the leader's sygvd.
 * *info is the same on every rank. */
typedef struct jmg_local_routines {
  int (*potrs)(const struct jmg_engine *e, const jmg_local_matrix *a, void *b,
               int64_t nrhs, void *diag, int *info, jmg_error *err);
  int (*potri)(const struct jmg_engine *e, const jmg_local_matrix *a, int *info,
               jmg_error *err);
  int (*syevd)(const struct jmg_engine *e, const jmg_local_matrix *a, void *w,
               int want_vectors, int *info, jmg_error *err);
  int (*lu_solve)(const struct jmg_engine *e, const jmg_local_matrix *a,
                  void *b, int64_t nrhs, int transpose, int *info,
                  jmg_error *err);
  /* qr, the leader's qr routine rank by rank: a is this rank's columns of
   * M = Aᵀ in the CONTIGUOUS layout (a->n = N rows, ld N, a->cols = this
   * rank's M / ranks of A's rows: rank r holds columns r * a->cols ...;
   * no Π, no grid), replaced by the same columns of Qᵀ; rt (N x rr, ld
   * N, on this rank's device) receives this rank's columns of Rᵀ (R's
   * rows r * rr ...; zero past R's N rows). m: A's rows. */
  int (*qr)(const struct jmg_engine *e, const jmg_local_matrix *a, void *rt,
            int64_t m, int64_t rr, int *info, jmg_error *err);
  int (*sygvd)(const struct jmg_engine *e, const jmg_local_matrix *a,
               const jmg_local_matrix *b, void *w, int want_vectors, int *info,
               jmg_error *err);
  /* potrs and lu_solve in mixed precision: the leader's potrs_mixed and
   * lu_solve_mixed with the local meanings of potrs (no diag) and
   * lu_solve (b this rank's full copy, X on every rank); NULL where the
   * engine has none (lapack-local has them; cuSOLVERMp not). */
  int (*potrs_mixed)(const struct jmg_engine *e, const jmg_local_matrix *a,
                     void *b, int64_t nrhs, int *info, jmg_error *err);
  int (*lu_solve_mixed)(const struct jmg_engine *e, const jmg_local_matrix *a,
                        void *b, int64_t nrhs, int transpose, int *info,
                        jmg_error *err);
} jmg_local_routines;

typedef struct jmg_engine {
  const char *name; /* what JAXMG_ENGINE names it by */
  jmg_model model;
  /* Whether the engine runs problem p (only asked when it has a routine for
   * p->op). Returns 1, or 0 with the reason in why[0 .. why_len) (a phrase:
   * "T_A=2048 > 1024: cusolverMgSyevd rejects wider tiles"). NULL: every
   * problem its routines cover. */
  int (*supports)(const struct jmg_engine *e, const jmg_problem *p, char *why,
                  size_t why_len);
  /* Whether the engine should run problem p when JAXMG_ENGINE does not name
   * one (only asked when it supports p): 1, or 0 with the reason in why
   * ("N=40000 >= 32768: ..."). NULL: wherever it supports p. */
  int (*prefers)(const struct jmg_engine *e, const jmg_problem *p, char *why,
                 size_t why_len);
  /* The bytes a call of problem p would take from the platform's allocator
   * (XLA's on GPUs) beside A, B and the op's outputs: the library's
   * workspace as the library reports it for p, asked now on the current
   * device, plus the engine's own buffers; what JAXMG_TRACE prints after a
   * call ("workspace ... bytes"). Returns 0 and *bytes, or an error
   * (JMG_EUNSUPPORTED: not known before the call for this op). NULL: the
   * engine cannot tell ahead of a call. */
  int (*workspace)(const struct jmg_engine *e, const jmg_problem *p,
                   const jmg_workspace_query *q, size_t *bytes, jmg_error *err);
  /* JMG_MODEL_LOCAL only: the block size (MB = NB) the engine's layout
   * takes for problem p, where the library cannot run p->tile (T_A) itself
   * (cusolverMpSyevd: powers of two). The executor (exec/local.c) lays A
   * out in these blocks instead of T_A: on several ranks the block must
   * divide the shard p->n / p->nparts (so that every rank's shard stays
   * where it lies, layout/local.h); on one rank, which holds the whole
   * matrix, any block from 1 to n. NULL: T_A. What T_A the engine is given
   * is then its own business: `supports` refuses a T_A only where no
   * block serves it. */
  int64_t (*block)(const struct jmg_engine *e, const jmg_problem *p);
  /* One routine per op; NULL where the engine lacks it. An engine fills the
   * set of its model and leaves the other empty. */
  jmg_leader_routines leader;
  jmg_local_routines local;
  /* JMG_MODEL_LOCAL engines that gather A onto rank 0
   * (engine/local_gather/): the one-device engine (JMG_MODEL_LEADER) whose
   * routines run on rank 0's gathered matrix, and the local engine whose
   * routines run instead where rank 0 cannot hold the gathered copy
   * (NULL: none; the want of memory is then the error). NULL elsewhere. */
  const struct jmg_engine *on_rank0;
  const struct jmg_engine *fallback;
} jmg_engine;

/* Whether e has a routine for op (in its model's set). */
int jmg_engine_has(const jmg_engine *e, jmg_op op);

/* Whether e has op's routine in precision (jmg_precision): exact, its
 * plain routine (jmg_engine_has); mixed, its mixed one (potrs_mixed,
 * lu_solve_mixed; no other op has one). */
int jmg_engine_has_precision(const jmg_engine *e, jmg_op op, int precision);

/* The execution model (jmg_model: JMG_MODEL_LEADER or JMG_MODEL_LOCAL) of
 * the engine of engines (NULL-terminated) named name, or -1 where none is
 * named so. Asked by the Python layer (through ffi/handler.h's export) for
 * the engine jmg_engine_check chose: a call to an engine of the local model
 * carries communicator ids. */
int jmg_engine_model_of(const jmg_engine *const *engines, const char *name);

/* The block size e lays A out in for p (its `block`, else p->tile). */
int64_t jmg_engine_block(const jmg_engine *e, const jmg_problem *p);

/* Chooses the engine of one call by the rule above. engines: the platform's,
 * in order of preference, NULL-terminated. cfg: the settings read for this
 * call (cfg->engine is JAXMG_ENGINE, "" when unset). Returns 0 and *out, or
 * an error naming p->op. */
int jmg_engine_select(const jmg_engine *const *engines, const jmg_problem *p,
                      const jmg_config *cfg, const jmg_engine **out,
                      jmg_error *err);

/* The same choice asked ahead of a call, by the Python layer before it
 * traces anything (so that a T_A or a group an engine cannot take, or an
 * M x N that its library's 32-bit sizes cannot, is a ValueError naming the
 * limit, and the default T_A is one that runs): the problem by names (op
 * "potrs"..., dtype "float64"...), the settings read now. m is A's rows
 * (jmg_problem's m: gesvd's and qr's M; 0 reads as n, and the ops of a
 * square A take only 0 or n), n its columns (the order of a square A).
 * Returns 1 and the chosen engine's name in out, 0 and the error's message
 * (naming every reason) in out, or -1 for an unknown op or dtype, or an m
 * the op cannot have. out is always NUL-terminated when len > 0. block
 * (NULL: not wanted) receives the block size the chosen engine lays A out
 * in (jmg_engine_block), or 0 where none was chosen: the Python layer's
 * default T_A pads to a wider block where the engine's would be narrow.
 * precision: the problem's (jmg_precision; -1 for an unknown value, with
 * out saying so). */
int jmg_engine_check(const jmg_engine *const *engines, const char *op,
                     int nparts, int nodes, const char *dtype, int64_t m,
                     int64_t n, int64_t tile, int precision, char *out,
                     size_t len, int64_t *block);

/* The workspace a call would take (engine's `workspace`), asked ahead of it
 * by the Python layer (jaxmg.memory_estimate): the engine jmg_engine_check
 * would choose (m and n as there), then its query on the current device.
 * Returns 1 with *bytes and the engine's name in out; 0 when the chosen
 * engine cannot tell (its name, then ": " and why, in out); -1 with the
 * error in out (unknown op or dtype, no engine for the problem, a failed
 * query). */
int jmg_engine_workspace(const jmg_engine *const *engines, const char *op,
                         int nparts, int nodes, const char *dtype, int64_t m,
                         int64_t n, int64_t tile, int precision,
                         const jmg_workspace_query *q, size_t *bytes, char *out,
                         size_t len);

/* The engines, as objects so that a platform's list of them is a constant
 * table. LAPACK for CPU devices (engine/lapack/). */
extern const jmg_engine jmg_lapack_engine;

/* LAPACK in the local model on CPU devices (engine/lapack_local/ over
 * engine/local_gather/): rank 0 gathers A over the CPU communicator;
 * chosen only by JAXMG_ENGINE.
 * Has potrs_mixed and lu_solve_mixed (rank 0 refines on its gathered A). */
extern const jmg_engine jmg_lapack_local_engine;

/* cuSOLVERDn for a group of one CUDA GPU (engine/cusolverdn/), and
 * cuSOLVERMg for CUDA GPUs, one or several (engine/cusolvermg/); device
 * contexts: jmg_cuda_device. Defined in libjaxmg_cuda.so only. */
extern const jmg_engine jmg_cusolverdn_engine;
extern const jmg_engine jmg_cusolvermg_engine;

/* cuSOLVERDn on a group of several CUDA GPUs of one node, for small problems
 * (engine/gather/): the leader gathers A onto participant 0's GPU, runs
 * jmg_cusolverdn_engine's routine there and scatters the results back into
 * each op's layout; preferred below the sizes of engine/gather/thresholds.c,
 * cuSOLVERMg's routines where the gathered copy does not fit. Defined in
 * libjaxmg_cuda.so only. */
extern const jmg_engine jmg_gather_engine;

/* jaxmg's own eigensolver on the CUDA GPUs one process drives
 * (engine/eig_mgpu/): float64 syevd only, the Householder reduction split
 * over the GPUs by columns. Preferred on 2 or more GPUs in the sizes where
 * it was measured faster than one GPU (engine/eig_mgpu/context.c), at every
 * size with JAXMG_SYEVD_MGPU=1, never with "0"; JAXMG_ENGINE=eig-mgpu
 * forces it. Defined in libjaxmg_cuda.so only. */
extern const jmg_engine jmg_eig_mgpu_engine;

/* cuSOLVERDn in the local model (engine/cusolverdn_local/): rank 0
 * gathers A over NCCL, jmg_cusolverdn_engine's routine runs there, the
 * results go back (engine/local_gather/, lapack-local's steps); preferred
 * on several GPUs below the one-GPU crossover of engine/gather/thresholds.c
 * (jmg_gather_local_prefers), cuSOLVERMp's routines where rank 0's copy
 * does not fit; JAXMG_LOCAL_GATHER=0 keeps it to where it is named.
 * Defined in libjaxmg_cuda.so only. */
extern const jmg_engine jmg_cusolverdn_local_engine;
/* Whether cusolverdn-local is chosen without being named, and cuSOLVERMp's
 * eigensolvers route to it (unless JAXMG_LOCAL_GATHER=0, common/config.h);
 * when not, why into why. */
int jmg_cusolverdn_local_by_default(char *why, size_t why_len);

/* cuSOLVERMp (engine/cusolvermp/), JMG_MODEL_LOCAL, any number of GPUs and
 * nodes; libcusolverMp is loaded at run time (the "cuda13" extra), and the
 * engine supports nothing where it cannot be loaded, saying so. */
extern const jmg_engine jmg_cusolvermp_engine;

#endif
