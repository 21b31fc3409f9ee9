/* An op described by data: what the layers that run an op (ffi/, exec/,
 * share/) know of it. Each op declares, once, in its file in ops/:
 *  - its own buffers, beside the two every op has (A, this shard of the
 *    matrix, in and out, argument 0 and result 0 of the frame; status, the
 *    int32 info, the frame's last result): name, direction, element type,
 *    shape, and where it sits in the FFI frame;
 *  - its own scalars, beside the call-wide ones (dtype, n, local_cols, tile,
 *    scratch_ok): name, and whether they come from an attribute or from a
 *    dimension of one of its buffers;
 *  - its steps in the leader model (exec/leader.h).
 * Decoding the frame (ffi/decode.c), packing posts between processes
 * (exec/join.c) and the leader's check that all shards describe the same call
 * (exec/leader.c) walk this description; none of them knows an op's fields.
 *
 * An op keeps its values in an io struct of its own whose first member is a
 * jmg_shard_io (the call-wide fields and the common buffers); the
 * description gives the offsets of its own fields in that struct, so that
 * the op's code reads them by name (io->nrhs, io->x) and the generic code by
 * description. */
#ifndef JMG_EXEC_OP_DESC_H
#define JMG_EXEC_OP_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"
#include "common/op.h"

/* What every participant hands to a call: the call as it sees it, and its
 * buffers, in the engine's memory (host on CPU, the device on GPU), all
 * column-major. */
typedef struct jmg_shard_io {
  /* The call, as this participant sees it; the leader checks that all agree
   * (but for scratch_ok). */
  jmg_dtype dtype;
  int64_t n;
  int64_t local_cols;
  int64_t tile;
  /* Whether the leader may take a scratch shard per device to permute A out
   * of place (the Python layer's judgment of the memory; see
   * python/jaxmg/_src/_ffi_call.py, scratch_fits). */
  int scratch_ok;
  void *a;          /* n x local_cols: this shard's columns of A, in and out */
  void *status;     /* int32: the solver's info */
  void *device_ctx; /* engine-specific (CUDA: device, stream, allocator) */
} jmg_shard_io;

/* The largest io struct of any op (checked by JMG_OP_IO_FITS). */
#define JMG_OP_MAX_IO 256
#define JMG_OP_IO_FITS(type)                                               \
  _Static_assert(sizeof(type) <= JMG_OP_MAX_IO && offsetof(type, io) == 0, \
                 #type                                                     \
                 " must begin with its jmg_shard_io io "                   \
                 "and fit in JMG_OP_MAX_IO bytes")

/* Room for an op's io struct of any op (the FFI handler's, the async
 * participant's). */
typedef union jmg_io_storage {
  jmg_shard_io io;
  max_align_t align;
  unsigned char bytes[JMG_OP_MAX_IO];
} jmg_io_storage;

typedef enum { JMG_IN = 1, JMG_OUT = 2, JMG_INOUT = 3 } jmg_op_dir;

/* A buffer's element type, from A's (jmg_shard_io.dtype). */
typedef enum {
  JMG_ELEM_OF_A,  /* A's */
  JMG_ELEM_REAL,  /* A's real type (float32 for complex64, ...) */
  JMG_ELEM_INT32, /* int32 */
} jmg_op_elem;

/* A dimension of a buffer's shape (in the frame's order): one of the op's
 * own scalars (its index, >= 0), or one of these. */
#define JMG_DIM_N (-1)
#define JMG_DIM_LOCAL_COLS (-2)

/* A buffer's place in the frame (jmg_op_buf's arg and ret): its index among
 * the arguments or the results, or one of these. */
#define JMG_FFI_NONE (-1) /* not there */
#define JMG_FFI_LAST (-2) /* the last result (status) */

#define JMG_OP_MAX_RANK 2
#define JMG_OP_MAX_BUFS 4    /* own buffers of an op */
#define JMG_OP_MAX_SCALARS 8 /* own scalars of an op */

typedef struct jmg_op_buf {
  const char *name; /* as messages say it: "B" */
  jmg_op_dir dir;
  jmg_op_elem elem;
  int rank;
  int dims[JMG_OP_MAX_RANK]; /* its shape: see JMG_DIM_N */
  /* An argument (arg set, ret JMG_FFI_NONE) or a result (the reverse); A
   * alone is both (aliased). */
  int arg;
  int ret;
  size_t offset; /* of its pointer (void *) in the op's io struct */
  /* 0: always there. k > 0: an optional result, there only when the op's
   * boolean scalar k - 1 is 1 (else its pointer is NULL and the frame has
   * one result less: the results after it move up one place, and status
   * stays the last). */
  int if_scalar;
  /* 1: an input matrix shard like A (n x local_cols, column-major, ld n,
   * A's dtype: sygvd's B) that the executors check for a NaN or an Inf
   * entry before the op's steps, as they check A (exec/finite.h). */
  int check_finite;
} jmg_op_buf;

typedef enum {
  JMG_FROM_ATTR, /* the int64 (or bool) attribute called name */
  JMG_FROM_DIM   /* a dimension of one of the op's own buffers */
} jmg_op_from;

typedef struct jmg_op_scalar {
  const char *name; /* the attribute's name, and what messages say */
  jmg_op_from from;
  int buf, dim;  /* JMG_FROM_DIM: dimension dim of own buffer buf */
  int boolean;   /* stored as 0 or 1 */
  int optional;  /* JMG_FROM_ATTR: an absent attribute reads 0 */
  size_t offset; /* of its int64_t in the op's io struct */
} jmg_op_scalar;

struct jmg_leader_view;
struct jmg_local_view;

typedef struct jmg_op_desc {
  jmg_op id;        /* what the layers below tell it by */
  const char *name; /* "potrs": jmg_op_name(id), for messages and keys */
  size_t io_size;   /* of the op's io struct */
  int nbufs;
  jmg_op_buf bufs[JMG_OP_MAX_BUFS];
  int nscalars;
  jmg_op_scalar scalars[JMG_OP_MAX_SCALARS];
  /* 0: A is square, n x n, its shards' rows make n (every op but gesvd and qr).
   * k > 0: A is m x n, any m and n (gesvd; qr: m >= n): its shards are local_cols of
   * its m rows each (read column-major: n x local_cols, the columns of Aᵀ),
   * and m is the op's scalar k - 1, an attribute, which also gives the
   * group's size (m / local_cols, ffi/decode.c). Such an op has no
   * block-cyclic permutation in the leader model (exec/leader.c plans
   * none). */
  int rows_scalar;
  /* The op's steps in the leader model, between the leader's view of all
   * shards being made and every status being written (exec/leader.h):
   * sets *info to the solver's info. */
  int (*leader)(struct jmg_leader_view *v, int *info, jmg_error *err);
  /* Its steps in the local model (exec/local.h), run by every participant
   * on its own shard: sets *info to the solver's info (the same on every
   * participant). NULL: the op has none, and no local engine runs it. */
  int (*local)(struct jmg_local_view *v, int *info, jmg_error *err);
} jmg_op_desc;

/* Every buffer of an op, the common ones included, in the order posts carry
 * them: A, the op's own, status. */
int jmg_op_nbuffers(const jmg_op_desc *op);
const jmg_op_buf *jmg_op_buffer(const jmg_op_desc *op, int i);

/* The frame's numbers of arguments and results for op: every result
 * (jmg_op_nrets), and those of a call whose scalars io holds, without the
 * optional results it does not want (jmg_op_nrets_in). */
int jmg_op_nargs(const jmg_op_desc *op);
int jmg_op_nrets(const jmg_op_desc *op);
int jmg_op_nrets_in(const jmg_op_desc *op, const jmg_shard_io *io);

/* Whether buffer b of op is part of the call io describes (see if_scalar). */
int jmg_op_buf_present(const jmg_op_desc *op, const jmg_op_buf *b,
                       const jmg_shard_io *io);

/* Where a described buffer's pointer, or a described scalar, lies in io
 * (like strchr, from a const io: the caller knows whether it may write). */
void **jmg_op_buf_slot(const jmg_op_buf *b, const jmg_shard_io *io);
int64_t *jmg_op_scalar_slot(const jmg_op_scalar *s, const jmg_shard_io *io);

/* Dimension dim (see JMG_DIM_N) of a shape, as io's scalars make it. */
int64_t jmg_op_dim(const jmg_op_desc *op, const jmg_shard_io *io, int dim);

/* The size of all of b in a call as io describes it. */
size_t jmg_op_buf_bytes(const jmg_op_desc *op, const jmg_op_buf *b,
                        const jmg_shard_io *io);

/* A's rows: the op's rows scalar (rows_scalar), else n (square A). */
int64_t jmg_op_rows(const jmg_op_desc *op, const jmg_shard_io *io);

/* The index in the frame's results of op's result b in a call as io
 * describes it: its ret, less one for every optional result before it
 * that the call does not want (see if_scalar); status is the last. */
int64_t jmg_op_ret_index(const jmg_op_desc *op, const jmg_op_buf *b,
                         const jmg_shard_io *io);

/* Checks one participant's io before it joins: the sizes (N, shard, T_A at
 * least 1; nparts shards make N, or A's rows for a rectangular op; no
 * scalar negative) and every buffer of the call present. */
int jmg_op_check_local(const jmg_op_desc *op, const jmg_shard_io *io,
                       int nparts, jmg_error *err);

#endif
