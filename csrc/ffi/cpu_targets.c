/* The CPU platform and its registration table: the handlers libjaxmg_cpu.so
 * exports, one per op, registered by the Python layer for platform "cpu". */
#include <stdint.h>
#include <string.h>

#include "comm/comm.h"
#include "engine/lapack/table.h"
#include "ffi/handler.h"
#include "ops/ops.h"

static int cpu_read_shard(XLA_FFI_CallFrame *frame, const void *buf,
                          int32_t *out, jmg_error *err) {
  (void)frame, (void)err;
  memcpy(out, buf, sizeof *out); /* CPU device memory is host memory */
  return 0;
}

static int cpu_make_device_ctx(XLA_FFI_CallFrame *frame, void **ctx,
                               jmg_error *err) {
  (void)frame, (void)err;
  *ctx = NULL;
  return 0;
}

static void cpu_free_device_ctx(void *ctx) { (void)ctx; }

static int cpu_copy_local(void *ctx, void *dst, const void *src, size_t bytes,
                          jmg_error *err) {
  (void)ctx, (void)err;
  memmove(dst, src, bytes);
  return 0;
}

/* The communicator an id was made by: processes or threads. */
static const jmg_comm_ops *cpu_comm_of_id(const void *id) {
  return jmg_comm_processes_id(id) ? jmg_processes_comm() : jmg_threads_comm();
}

static const jmg_engine *const g_cpu_engines[] = {
    &jmg_lapack_engine, &jmg_lapack_local_engine, NULL};

static const jmg_ffi_platform g_cpu = {
    .name = "cpu",
    .engines = g_cpu_engines,
    .mem = jmg_host_mem,
    .rendezvous = jmg_rendezvous_threads,
    .read_shard = cpu_read_shard,
    .make_device_ctx = cpu_make_device_ctx,
    .free_device_ctx = cpu_free_device_ctx,
    .copy_local = cpu_copy_local,
    .async = 1,
    .share = jmg_host_share,
    /* lapack-local's: threads of this process (SPMD), or processes of this
     * node (MPMD), as the call's id says */
    .comm = jmg_threads_comm,
    .comm_of_id = cpu_comm_of_id,
};

/* The handlers, one per op. */
JMG_FFI_EXPORT(jaxmg_potrs_cpu, &jmg_potrs_op, &g_cpu)
JMG_FFI_EXPORT(jaxmg_potri_cpu, &jmg_potri_op, &g_cpu)
JMG_FFI_EXPORT(jaxmg_syevd_cpu, &jmg_syevd_op, &g_cpu)
JMG_FFI_EXPORT(jaxmg_lu_solve_cpu, &jmg_lu_solve_op, &g_cpu)
JMG_FFI_EXPORT(jaxmg_gesvd_cpu, &jmg_gesvd_op, &g_cpu)
JMG_FFI_EXPORT(jaxmg_qr_cpu, &jmg_qr_op, &g_cpu)
JMG_FFI_EXPORT(jaxmg_sygvd_cpu, &jmg_sygvd_op, &g_cpu)

/* Which engine would run a call: asked by the Python layer before tracing. */
JMG_FFI_EXPORT_ENGINE_CHECK(jaxmg_engine_check_cpu, &g_cpu)
/* Which model an engine runs in (the local model's calls carry
 * communicator ids): asked by the Python layer of the engine chosen. */
JMG_FFI_EXPORT_ENGINE_MODEL(jaxmg_engine_model_cpu, &g_cpu)

#define JMG_EXPORT __attribute__((visibility("default")))

/* Called by the Python layer at import with SciPy's LAPACK pointers. */
JMG_EXPORT int jaxmg_cpu_register_lapack(const char *name, void *fn) {
  return jmg_lapack_register(name, fn);
}

static int new_id(const jmg_comm_ops *comm, uint8_t *out, size_t len,
                  char *err_msg, size_t errlen) {
  jmg_error err;
  jmg_error_clear(&err);
  int rc = 0;
  if (out == NULL || len < JMG_COMM_ID_MAX)
    rc = jmg_error_set(&err, JMG_EINVAL, "comm_new_id", NULL,
                       "the buffer holds %zu bytes; an id needs %d",
                       out == NULL ? (size_t)0 : len, JMG_COMM_ID_MAX);
  if (rc == 0) {
    memset(out, 0, len);
    rc = comm->make_id(out, "comm_new_id", &err);
  }
  if (rc != 0) {
    if (err_msg != NULL && errlen > 0) jmg_error_format(&err, err_msg, errlen);
    return -1;
  }
  if (err_msg != NULL && errlen > 0) err_msg[0] = '\0';
  return 0;
}

/* A new id of the CPU platform's communicator for a group of one process
 * (the threads communicator; the CUDA library exports the same symbol for
 * NCCL's): 0, or -1 and the reason. */
JMG_EXPORT int jaxmg_comm_new_id(uint8_t *out, size_t len, char *err_msg,
                                 size_t errlen) {
  return new_id(jmg_threads_comm(), out, len, err_msg, errlen);
}

/* The same for a group that spans processes of this node (the processes
 * communicator). */
JMG_EXPORT int jaxmg_comm_new_id_processes(uint8_t *out, size_t len,
                                           char *err_msg, size_t errlen) {
  return new_id(jmg_processes_comm(), out, len, err_msg, errlen);
}
