/* An op's leader steps run as the FFI layer runs them, without XLA: the
 * tests fill one post per participant (its jmg_shard_io) by hand through
 * the op's description, and the LAPACK engine runs on host memory. Shared
 * by the op files that test below the handler (test_gesvd.c, test_qr.c,
 * test_sygvd.c). */
#ifndef JMG_TESTS_HOST_LEADER_H
#define JMG_TESTS_HOST_LEADER_H

#include <stdint.h>

#include "common/error.h"
#include "exec/join.h"
#include "ops/ops.h"

/* The op's scalar or buffer called name in its description; aborts where
 * the op has none (a mistake in the test). */
int64_t *op_scalar_named(const jmg_op_desc *op, jmg_shard_io *io,
                         const char *name);
const jmg_op_buf *op_buf_named(const jmg_op_desc *op, const char *name);

/* Begins a participant's post: its shard of A (a: n x local_cols, column-
 * major, in dtype t) in tiles of T_A tile, and its status, set to -99 (not
 * yet written). The op's own buffers and scalars are the test's. */
void host_shard_io_init(jmg_shard_io *io, jmg_dtype t, int64_t n,
                        int64_t local_cols, int64_t tile, void *a,
                        int32_t *status);

/* A call of op on the LAPACK engine over host memory, the configuration
 * read from the environment as at a call. */
void host_leader_call(jmg_op_call *call, const jmg_op_desc *op);

/* Checks the ndev posts as the handler does (jmg_op_check_local, on post
 * 0), then runs the op's leader steps over them. Returns 0 or the error. */
int host_leader_run(const jmg_op_desc *op, void **posts, int ndev,
                    jmg_error *err);

#endif
