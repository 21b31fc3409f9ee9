/* The one handler that runs any op from its description: the frame decoded
 * (ffi/decode.h), the call planned (ffi/plan.h), the op joined and run
 * (exec/join.h), blocking or through an XLA future (ffi/async.h). Each
 * platform exports one C symbol per op (JMG_FFI_EXPORT), which the Python
 * layer registers by name. */
#ifndef JMG_FFI_HANDLER_H
#define JMG_FFI_HANDLER_H

#include "exec/op_desc.h"
#include "ffi/decode.h"
#include "ffi/platform.h"

/* Runs one participant's call of op on platform. Every op's frame begins
 * and ends the same way: argument 0 is this shard of A (local_cols x n, read
 * column-major), the last argument the int32 shard position; result 0 is
 * A's aliased output, the last result the int32 status; attributes mesh_id,
 * T_A and the optional call_id, scratch, job_id and pids (ffi/plan.h). The
 * op's own buffers and scalars are where its description puts them. */
XLA_FFI_Error *jmg_ffi_handle(XLA_FFI_CallFrame *frame,
                              const jmg_ffi_platform *platform,
                              const jmg_op_desc *op);

/* Defines the exported handler `symbol` of op on platform (a pointer to a
 * static jmg_ffi_platform). */
#define JMG_FFI_EXPORT(symbol, op, platform)                    \
  __attribute__((visibility("default"))) XLA_FFI_Error *symbol( \
      XLA_FFI_CallFrame *frame);                                \
  __attribute__((visibility("default"))) XLA_FFI_Error *symbol( \
      XLA_FFI_CallFrame *frame) {                               \
    return jmg_ffi_handle(frame, platform, op);                 \
  }

/* Defines the exported
 * `int symbol(op, nparts, nodes, dtype, m, n, tile, precision, out, len,
 * block)`:
 * jmg_engine_check over platform's engines (engine/engine.h), for the
 * Python layer, through ctypes (m: A's rows, 0 for a square A); and
 * `symbol_workspace(op, nparts, nodes, dtype, m, n, tile, precision, nrhs,
 * want_vectors, syevd_solver, bytes, out, len)`: jmg_engine_workspace. */
#define JMG_FFI_EXPORT_ENGINE_CHECK(symbol, platform)                          \
  __attribute__((visibility("default"))) int symbol(                           \
      const char *op, int nparts, int nodes, const char *dtype, int64_t m,     \
      int64_t n, int64_t tile, int precision, char *out, size_t len,           \
      int64_t *block);                                                         \
  __attribute__((visibility("default"))) int symbol(                           \
      const char *op, int nparts, int nodes, const char *dtype, int64_t m,     \
      int64_t n, int64_t tile, int precision, char *out, size_t len,           \
      int64_t *block) {                                                        \
    return jmg_engine_check((platform)->engines, op, nparts, nodes, dtype, m,  \
                            n, tile, precision, out, len, block);              \
  }                                                                            \
  __attribute__((visibility("default"))) int symbol##_workspace(               \
      const char *op, int nparts, int nodes, const char *dtype, int64_t m,     \
      int64_t n, int64_t tile, int precision, int64_t nrhs, int want_vectors,  \
      int syevd_solver, size_t *bytes, char *out, size_t len);                 \
  __attribute__((visibility("default"))) int symbol##_workspace(               \
      const char *op, int nparts, int nodes, const char *dtype, int64_t m,     \
      int64_t n, int64_t tile, int precision, int64_t nrhs, int want_vectors,  \
      int syevd_solver, size_t *bytes, char *out, size_t len) {                \
    const jmg_workspace_query q = {.nrhs = nrhs,                               \
                                   .want_vectors = want_vectors,               \
                                   .syevd_solver = syevd_solver};              \
    return jmg_engine_workspace((platform)->engines, op, nparts, nodes, dtype, \
                                m, n, tile, precision, &q, bytes, out, len);   \
  }

/* Defines the exported `int symbol(name)`: jmg_engine_model_of over
 * platform's engines (engine/engine.h): 0 (JMG_MODEL_LEADER), 1
 * (JMG_MODEL_LOCAL), or -1 where the platform has no engine of that name;
 * for the Python layer, through ctypes. */
#define JMG_FFI_EXPORT_ENGINE_MODEL(symbol, platform)                      \
  __attribute__((visibility("default"))) int symbol(const char *name);     \
  __attribute__((visibility("default"))) int symbol(const char *name) {    \
    return jmg_engine_model_of((platform)->engines, name);                 \
  }

#endif
