/* A matrix with a NaN or an Inf entry (exec/finite.h). */
#include "exec/finite.h"

int jmg_shard_finite(const jmg_mem *m, const jmg_mem_group *g, int dev,
                     const jmg_op_desc *op, const jmg_shard_io *io,
                     int *finite, jmg_error *err) {
  int rc = m->all_finite(g, dev, io->a, io->n, io->local_cols, io->n,
                         io->dtype, finite, err);
  for (int i = 0; rc == 0 && *finite && i < op->nbufs; ++i) {
    const jmg_op_buf *b = &op->bufs[i];
    if (!b->check_finite || !(b->dir & JMG_IN)) continue;
    const void *ptr = *jmg_op_buf_slot(b, io);
    if (ptr == NULL) continue;
    rc = m->all_finite(g, dev, ptr, io->n, io->local_cols, io->n, io->dtype,
                       finite, err);
  }
  return rc;
}

int jmg_shard_nan_outputs(const jmg_mem *m, const jmg_mem_group *g, int dev,
                          const jmg_op_desc *op, const jmg_shard_io *io,
                          jmg_error *err) {
  const jmg_dtype real =
      jmg_dtype_real_size(io->dtype) == 4 ? JMG_F32 : JMG_F64;
  for (int i = 0; i < jmg_op_nbuffers(op); ++i) {
    const jmg_op_buf *b = jmg_op_buffer(op, i);
    if (!(b->dir & JMG_OUT) || b->elem == JMG_ELEM_INT32 ||
        !jmg_op_buf_present(op, b, io))
      continue;
    const jmg_dtype t = b->elem == JMG_ELEM_REAL ? real : io->dtype;
    const size_t count = jmg_op_buf_bytes(op, b, io) / jmg_dtype_size(t);
    void *ptr = *jmg_op_buf_slot(b, io);
    if (ptr == NULL || count == 0) continue;
    int rc = m->fill_nan(g, dev, ptr, count, t, err);
    if (rc != 0) return rc;
  }
  return 0;
}
