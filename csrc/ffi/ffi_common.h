/* Decoding XLA FFI call frames in plain C.
 *
 * This layer is the only one that sees XLA's types. It answers the
 * registration-time metadata query, checks counts, element types and shapes of
 * arguments and results, reads attributes by name, and turns a jmg_error into
 * an XLA_FFI_Error. It never caches the api pointer: the CPU and CUDA
 * registries hand out different ones. */
#ifndef JMG_FFI_FFI_COMMON_H
#define JMG_FFI_FFI_COMMON_H

#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"
#include "engine/engine.h"
#include "mem/mem.h"
#include "ffi/xla_compat.h"
#include "ops/ops.h"
#include "rendezvous/rendezvous.h"
#include "share/share.h"

/* What differs between platforms (CPU, CUDA) for a handler. */
typedef struct jmg_ffi_platform {
  const char *name; /* "cpu", "CUDA" */
  /* The platform's engines, in order of preference, NULL-terminated: one is
   * chosen per call (jmg_engine_select, engine/engine.h). */
  const jmg_engine *const *engines;
  /* The platform's memory operations (mem/mem.h). */
  const jmg_mem *(*mem)(void);
  const jmg_rendezvous *(*rendezvous)(void);
  /* Reads the int32 shard index from its buffer (device memory on GPUs). */
  int (*read_shard)(XLA_FFI_CallFrame *frame, const void *buf, int32_t *out,
                    jmg_error *err);
  /* Makes this participant's engine context (NULL on CPU). */
  int (*make_device_ctx)(XLA_FFI_CallFrame *frame, void **ctx, jmg_error *err);
  void (*free_device_ctx)(void *ctx);
  /* Copies bytes within this participant's device memory. */
  int (*copy_local)(void *device_ctx, void *dst, const void *src, size_t bytes,
                    jmg_error *err);
  /* Whether handlers return at once with an XLA future instead of blocking
   * (XLA:CPU, which may run independent calls in different orders on
   * different devices; XLA:GPU runs every device's calls in program order). */
  int async;
  /* How participants in other processes share their buffers with the
   * leader (MPMD calls, see share/share.h). */
  const jmg_share *(*share)(void);
} jmg_ffi_platform;

/* A decoded buffer argument or result. */
typedef struct jmg_ffi_buffer {
  XLA_FFI_DataType xla_dtype;
  void *data;
  int64_t rank;
  const int64_t *dims;
} jmg_ffi_buffer;

/* If frame is the metadata query, answers it (API version of the headers we
 * built against, traits 0: never captured into a command buffer / CUDA graph)
 * and returns 1; else returns 0. */
int jmg_ffi_answer_metadata(XLA_FFI_CallFrame *frame);

/* Checks the numbers of arguments and results. */
int jmg_ffi_check_counts(const XLA_FFI_CallFrame *frame, const char *op,
                         int64_t nargs, int64_t nrets, jmg_error *err);

/* Argument / result i, which must be a buffer of the given rank. */
int jmg_ffi_arg(const XLA_FFI_CallFrame *frame, const char *op, int64_t i,
                const char *what, int64_t rank, jmg_ffi_buffer *out,
                jmg_error *err);
int jmg_ffi_ret(const XLA_FFI_CallFrame *frame, const char *op, int64_t i,
                const char *what, int64_t rank, jmg_ffi_buffer *out,
                jmg_error *err);

/* Maps an XLA element type to ours; fails for types jaxmg does not solve in. */
int jmg_ffi_dtype(XLA_FFI_DataType t, const char *op, const char *what,
                  jmg_dtype *out, jmg_error *err);

/* Checks that buf has element type t (what names it in the message). */
int jmg_ffi_expect_dtype(const jmg_ffi_buffer *buf, XLA_FFI_DataType t,
                         const char *op, const char *what, jmg_error *err);

/* Checks that buf's dims equal dims[0..rank). */
int jmg_ffi_expect_dims(const jmg_ffi_buffer *buf, const int64_t *dims,
                        const char *op, const char *what, jmg_error *err);

/* The int64 scalar attribute `name` (attributes arrive sorted by name and
 * are not NUL-terminated). Missing or of another type: an error. */
int jmg_ffi_attr_i64(const XLA_FFI_CallFrame *frame, const char *op,
                     const char *name, int64_t *out, jmg_error *err);

/* The int64 array attribute `name`: *data points into the frame (valid for
 * the handler's call), *n its length. Missing or of another type: an error. */
int jmg_ffi_attr_i64_array(const XLA_FFI_CallFrame *frame, const char *op,
                           const char *name, const int64_t **data, size_t *n,
                           jmg_error *err);

/* Whether the frame has an attribute called name. */
int jmg_ffi_has_attr(const XLA_FFI_CallFrame *frame, const char *name);

/* XLA's run id for this execution (0 when the runtime has none). */
int jmg_ffi_run_id(XLA_FFI_CallFrame *frame, const char *op, int64_t *out,
                   jmg_error *err);

/* Turns an error returned by an XLA API call into err (code, the call's
 * name, XLA's message) and destroys it; returns -code. */
int jmg_ffi_consume_error(const XLA_FFI_Api *api, XLA_FFI_Error *e,
                          jmg_status code, const char *call, jmg_error *err);

/* Makes an XLA_FFI_Error from err (NULL if err is success). */
XLA_FFI_Error *jmg_ffi_error(const XLA_FFI_CallFrame *frame,
                             const jmg_error *err);

/* The common start of every op handler. Every op's frame begins the same
 * way: argument 0 is this shard of A (local_cols x n, read column-major),
 * the last argument is the int32 shard index, result 0 is A's aliased output;
 * attributes mesh_id, T_A, (optional) call_id and (optional) job_id. Decodes
 * those, reads the run id and sequence number, and fills call and the
 * call-wide fields of io (not its buffers beyond a). A nonzero job_id makes
 * the call MPMD: the participants may be processes, they meet in the process
 * rendezvous and share their buffers through platform->share. Once it returns 0, later failures must go through
 * jmg_op_abort so that the other participants are released. */
int jmg_ffi_begin(XLA_FFI_CallFrame *frame, const jmg_ffi_platform *platform,
                  const char *op, int64_t nargs, int64_t nrets,
                  jmg_op_call *call, jmg_shard_io *io, jmg_ffi_buffer *a,
                  jmg_error *err);

/* The op body on this participant: jmg_potrs_run and its siblings. */
typedef int (*jmg_op_run_fn)(jmg_op_call *call, jmg_shard_io *io,
                             jmg_error *err);

/* The common end of every op handler: makes the device context, brings A
 * into its aliased result buffer and runs the op, blocking or (platform->async)
 * through an XLA future. Returns what the handler returns. */
XLA_FFI_Error *jmg_ffi_run(XLA_FFI_CallFrame *frame,
                           const jmg_ffi_platform *platform, jmg_op_run_fn run,
                           jmg_op_call *call, jmg_shard_io *io,
                           const jmg_ffi_buffer *a, jmg_error *err);

/* The three ops' handlers, for any platform. */
XLA_FFI_Error *jmg_ffi_potrs(XLA_FFI_CallFrame *frame,
                             const jmg_ffi_platform *platform);
XLA_FFI_Error *jmg_ffi_potri(XLA_FFI_CallFrame *frame,
                             const jmg_ffi_platform *platform);
XLA_FFI_Error *jmg_ffi_syevd(XLA_FFI_CallFrame *frame,
                             const jmg_ffi_platform *platform);

#endif
