/* Decoding XLA FFI call frames in plain C.
 *
 * This layer is the only one that sees XLA's types. It answers the
 * registration-time metadata query, checks counts, element types and shapes of
 * arguments and results, reads attributes by name, and turns a jmg_error into
 * an XLA_FFI_Error. It decides nothing about how a call runs (ffi/plan.h
 * does). It never caches the api pointer: the CPU and CUDA
 * registries hand out different ones. */
#ifndef JMG_FFI_DECODE_H
#define JMG_FFI_DECODE_H

#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"
#include "exec/op_desc.h"
#include "ffi/xla_compat.h"

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

/* The start every op's frame shares: argument 0 is this shard of A
 * (local_cols x n, read column-major), the last argument is the int32 shard
 * position. */
typedef struct jmg_ffi_head {
  jmg_ffi_buffer a;     /* argument 0 */
  jmg_ffi_buffer shard; /* the last argument */
  jmg_dtype dtype;      /* A's */
  int64_t n, local_cols;
  int64_t m;  /* A's rows: n, or a rectangular op's attribute */
  int nparts; /* m / local_cols */
} jmg_ffi_head;

/* Checks the counts of arguments and results and decodes the head of the
 * frame (A and the shard position, A's element type and shape). rows_attr:
 * NULL for a square A, else the attribute that holds a rectangular A's rows
 * (exec/op_desc.h, rows_scalar). */
int jmg_ffi_decode_head(const XLA_FFI_CallFrame *frame, const char *op,
                        int64_t nargs, int64_t nrets, const char *rows_attr,
                        jmg_ffi_head *out, jmg_error *err);

/* Decodes the rest of op's frame into io (op's io struct; its call-wide
 * fields already set from head), as op's description says: its scalars
 * from attributes, then its own buffers in order (element type and shape
 * checked; scalars taken from their dimensions where the description says
 * so), then status. Result A is the handler's. */
/* Decodes op's scalars that come from attributes into io (an optional one
 * that is absent reads 0), or its optional ones alone (optional_only): those
 * decide the frame's number of results, and are read before the head. */
int jmg_ffi_decode_scalars(const XLA_FFI_CallFrame *frame,
                           const jmg_op_desc *op, int optional_only,
                           jmg_shard_io *io, jmg_error *err);

int jmg_ffi_decode_op(const XLA_FFI_CallFrame *frame, const jmg_op_desc *op,
                      const jmg_ffi_head *head, jmg_shard_io *io,
                      jmg_error *err);

#endif
