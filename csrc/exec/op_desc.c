/* The walk over an op's description (exec/op_desc.h). */
#include "exec/op_desc.h"

/* The buffers every op has. */
static const jmg_op_buf k_a = {.name = "A",
                               .dir = JMG_INOUT,
                               .elem = JMG_ELEM_OF_A,
                               .rank = 2,
                               .dims = {JMG_DIM_LOCAL_COLS, JMG_DIM_N},
                               .arg = 0,
                               .ret = 0,
                               .offset = offsetof(jmg_shard_io, a)};
static const jmg_op_buf k_status = {.name = "status",
                                    .dir = JMG_OUT,
                                    .elem = JMG_ELEM_INT32,
                                    .rank = 0,
                                    .arg = JMG_FFI_NONE,
                                    .ret = JMG_FFI_LAST,
                                    .offset = offsetof(jmg_shard_io, status)};

int jmg_op_nbuffers(const jmg_op_desc *op) { return op->nbufs + 2; }

const jmg_op_buf *jmg_op_buffer(const jmg_op_desc *op, int i) {
  if (i == 0) return &k_a;
  if (i <= op->nbufs) return &op->bufs[i - 1];
  return &k_status;
}

/* A, the op's own arguments, the shard position. */
int jmg_op_nargs(const jmg_op_desc *op) {
  int n = 2;
  for (int i = 0; i < op->nbufs; ++i) n += op->bufs[i].arg >= 0;
  return n;
}

/* A, the op's own results, status. */
int jmg_op_nrets(const jmg_op_desc *op) {
  int n = 2;
  for (int i = 0; i < op->nbufs; ++i) n += op->bufs[i].ret >= 0;
  return n;
}

int jmg_op_nrets_in(const jmg_op_desc *op, const jmg_shard_io *io) {
  int n = jmg_op_nrets(op);
  for (int i = 0; i < op->nbufs; ++i)
    n -= op->bufs[i].ret >= 0 && !jmg_op_buf_present(op, &op->bufs[i], io);
  return n;
}

int jmg_op_buf_present(const jmg_op_desc *op, const jmg_op_buf *b,
                       const jmg_shard_io *io) {
  if (b->if_scalar <= 0) return 1;
  return *jmg_op_scalar_slot(&op->scalars[b->if_scalar - 1], io) != 0;
}

void **jmg_op_buf_slot(const jmg_op_buf *b, const jmg_shard_io *io) {
  return (void **)(uintptr_t)((const char *)io + b->offset);
}

int64_t *jmg_op_scalar_slot(const jmg_op_scalar *s, const jmg_shard_io *io) {
  return (int64_t *)(uintptr_t)((const char *)io + s->offset);
}

int64_t jmg_op_dim(const jmg_op_desc *op, const jmg_shard_io *io, int dim) {
  if (dim == JMG_DIM_N) return io->n;
  if (dim == JMG_DIM_LOCAL_COLS) return io->local_cols;
  return *jmg_op_scalar_slot(&op->scalars[dim], io);
}

/* The size of b's elements in a call of A's dtype. */
static size_t elem_size(const jmg_op_buf *b, jmg_dtype dtype) {
  switch (b->elem) {
    case JMG_ELEM_OF_A:
      return jmg_dtype_size(dtype);
    case JMG_ELEM_REAL:
      return jmg_dtype_real_size(dtype);
    default:
      return sizeof(int32_t);
  }
}

int64_t jmg_op_rows(const jmg_op_desc *op, const jmg_shard_io *io) {
  if (op->rows_scalar <= 0) return io->n;
  return *jmg_op_scalar_slot(&op->scalars[op->rows_scalar - 1], io);
}

int64_t jmg_op_ret_index(const jmg_op_desc *op, const jmg_op_buf *b,
                         const jmg_shard_io *io) {
  if (b->ret == JMG_FFI_LAST) return jmg_op_nrets_in(op, io) - 1;
  int64_t index = b->ret;
  for (int i = 0; i < op->nbufs; ++i) {
    const jmg_op_buf *o = &op->bufs[i];
    if (o->ret >= 0 && o->ret < b->ret && !jmg_op_buf_present(op, o, io))
      --index;
  }
  return index;
}

size_t jmg_op_buf_bytes(const jmg_op_desc *op, const jmg_op_buf *b,
                        const jmg_shard_io *io) {
  size_t bytes = elem_size(b, io->dtype);
  for (int k = 0; k < b->rank; ++k)
    bytes *= (size_t)jmg_op_dim(op, io, b->dims[k]);
  return bytes;
}

int jmg_op_check_local(const jmg_op_desc *op, const jmg_shard_io *io,
                       int nparts, jmg_error *err) {
  const char *name = op->name;
  if (io->n < 1 || io->local_cols < 1 || io->tile < 1)
    return jmg_error_set(err, JMG_EINVAL, name, "arguments",
                         "need N >= 1, shard size >= 1 and T_A >= 1 (got "
                         "N=%lld, shard=%lld, T_A=%lld)",
                         (long long)io->n, (long long)io->local_cols,
                         (long long)io->tile);
  const int64_t rows = jmg_op_rows(op, io);
  if (io->local_cols * nparts != rows)
    return jmg_error_set(err, JMG_EINVAL, name, "arguments",
                         "shard of %lld rows times %d shards is not %s=%lld",
                         (long long)io->local_cols, nparts,
                         op->rows_scalar > 0 ? "A's rows M" : "N",
                         (long long)rows);
  for (int i = 0; i < jmg_op_nbuffers(op); ++i) {
    const jmg_op_buf *b = jmg_op_buffer(op, i);
    if (*jmg_op_buf_slot(b, io) == NULL && jmg_op_buf_present(op, b, io))
      return jmg_error_set(err, JMG_EINVAL, name, "arguments",
                           "missing %s buffer", b->name);
  }
  for (int i = 0; i < op->nscalars; ++i)
    if (*jmg_op_scalar_slot(&op->scalars[i], io) < 0)
      return jmg_error_set(err, JMG_EINVAL, name, "arguments", "%s is negative",
                           op->scalars[i].name);
  return 0;
}
