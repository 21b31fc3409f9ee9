/* Calls of the CPU handlers (ffi/cpu_targets.c) through the fake XLA
 * runtime, shared by the op test files: the potrs and potri frames as the
 * Python layer builds them, several float64 participants of one potrs or
 * potri call, participants of any dtype, and the matrices they solve. */
#ifndef JMG_TESTS_CPU_CALLS_H
#define JMG_TESTS_CPU_CALLS_H

#include <stdint.h>

#include "common/dtype.h"
#include "fake_xla.h"

/* The XLA element type of each jmg_dtype. */
extern const XLA_FFI_DataType k_xla_types[JMG_NUM_DTYPES];

/* potrs: args A (lc x n), B (nrhs x n), shard; rets A, X (nrhs x n), status;
 * attrs T_A, mesh_id (sorted by name, as XLA passes them). */
void build_potrs(frame_builder *f, int64_t run_id, int64_t mesh_id,
                 int64_t tile, XLA_FFI_DataType dt, void *a, int64_t lc,
                 int64_t n, void *b, void *x, int64_t nrhs, int32_t *shard,
                 int32_t *status);

/* potrs with the log-determinant where logdet is not NULL: rets A, X,
 * logdet (rank 0, of type logdet_dt), status; attrs T_A, mesh_id,
 * want_logdet. logdet NULL: build_potrs's frame. */
void build_potrs_logdet(frame_builder *f, int64_t run_id, int64_t mesh_id,
                        int64_t tile, XLA_FFI_DataType dt, void *a, int64_t lc,
                        int64_t n, void *b, void *x, int64_t nrhs,
                        XLA_FFI_DataType logdet_dt, void *logdet,
                        int32_t *shard, int32_t *status);

/* potri: args A, shard; rets A, status; attrs T_A, mesh_id. */
void build_potri(frame_builder *f, int64_t run_id, int64_t mesh_id,
                 int64_t tile, XLA_FFI_DataType dt, void *a, int64_t lc,
                 int64_t n, int32_t *shard, int32_t *status);

/* One participant of a potrs or potri call: its frame and its buffers. */
typedef struct shard_call {
  frame_builder f;
  double *a; /* lc x n: rows d*lc .. of A (= columns, A being symmetric) */
  double *b; /* nrhs x n */
  double *x; /* nrhs x n */
  int32_t shard, status;
  ffi_call call;
} shard_call;

/* Builds nparts potrs (or potri, when B == NULL) participants over the n x n
 * matrix A (row-major) and right-hand sides B (nrhs x n, row r = rhs r). */
shard_call *make_shard_calls(int nparts, int64_t n, int64_t tile,
                             int64_t mesh_id, int64_t run_id, const double *A,
                             const double *B, int64_t nrhs);
void run_shard_calls(shard_call *s, int nparts);
void free_shard_calls(shard_call *s, int nparts);

/* One participant of a call in any dtype: its frame and its buffers. */
typedef struct typed_call {
  frame_builder f;
  void *a, *b, *x;
  int32_t shard, status;
  ffi_call call;
} typed_call;

void free_typed_calls(typed_call *s, int nparts);

/* A well-conditioned SPD matrix (a Hilbert matrix plus n I), row-major, with
 * an irregular off-diagonal so that any misplaced column shows. */
double *spd_matrix(int64_t n);

#endif
