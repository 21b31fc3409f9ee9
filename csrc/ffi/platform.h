/* A platform (CPU, CUDA) as the FFI layer sees it: what differs between the
 * platforms' handlers. ffi/cpu_targets.c and ffi/cuda_targets.c define one
 * each. */
#ifndef JMG_FFI_PLATFORM_H
#define JMG_FFI_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "common/error.h"
#include "engine/engine.h"
#include "ffi/xla_compat.h"
#include "mem/mem.h"
#include "rendezvous/rendezvous.h"
#include "share/share.h"

/* What differs between platforms for a handler. */
typedef struct jmg_ffi_platform {
  const char *name; /* "cpu", "CUDA" */
  /* The platform's engines, in order of preference, NULL-terminated: one is
   * chosen per call (jmg_engine_select, engine/engine.h). */
  const jmg_engine *const *engines;
  /* The platform's memory operations (mem/mem.h). */
  const jmg_mem *(*mem)(void);
  const jmg_rendezvous *(*rendezvous)(void);
  /* Reads the int32 shard index from its buffer (device memory on GPUs).
   * On GPUs it waits for the participant's stream to do so, which is also
   * what makes the call's inputs complete (make_device_ctx relies on it). */
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
  /* The platform's communicator for JMG_MODEL_LOCAL engines (comm/comm.h);
   * NULL where it has none. */
  const jmg_comm_ops *(*comm)(void);
  /* Where the platform has several (CPU: threads of one process, or
   * processes of one node), the one a call's id was made by; NULL: comm()
   * for every id. */
  const jmg_comm_ops *(*comm_of_id)(const void *id);
} jmg_ffi_platform;

#endif
