/* A platform's communicator: what the participants of a JMG_MODEL_LOCAL
 * call (engine/engine.h) use to talk to each other, across processes and
 * nodes, without a leader and without shared memory.
 *
 * CUDA's is NCCL (cuda/comm_nccl.c, libnccl loaded at run time); the CPU
 * platform has two, for the lapack-local engine: one joins the threads of
 * one process (comm/comm_threads.c), the other the processes of one node
 * (comm/comm_processes.c, where a group spans processes); the id says
 * which (ffi/platform.h, comm_of_id). A communicator
 * joins the ranks of one group: it is opened once per (id, rank) and cached
 * until the process exits. The id is made by one rank (make_id) and handed
 * to the others by the Python layer (through JAX's distributed key-value
 * store when the ranks are processes), so that no rendezvous between
 * processes is needed.
 *
 * Every operation is collective over the ranks of comm unless it says
 * otherwise, and runs on the participant's stream (its device_ctx); a rank
 * that returns an error before a collective leaves the others waiting in it,
 * so the local executor agrees (max_int) before the first collective whose
 * partners might have failed. Every function returns 0 or a negative
 * jmg_status with err filled, naming op. */
#ifndef JMG_COMM_COMM_H
#define JMG_COMM_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* The largest id any platform's communicator uses (NCCL: 128 bytes). */
#define JMG_COMM_ID_MAX 128

typedef struct jmg_comm jmg_comm; /* one rank's end of a communicator */

typedef struct jmg_comm_ops {
  const char *name; /* "nccl" */
  size_t id_bytes;  /* <= JMG_COMM_ID_MAX */
  /* 1: a communicator costs next to nothing to open (threads of one
   * process), and the platform may run a program's independent calls in
   * different orders on different devices (XLA:CPU does): the local
   * executor then opens one per call site (ffi/plan.c writes the call
   * site's identity into the id's last 8 bytes, which make_id leaves zero),
   * so that two calls never meet on one communicator. 0 (NCCL): one per
   * group of devices, whose calls every device makes in program order. */
  int per_call_site;
  /* Not collective: makes a new id (on one rank; the others receive it). */
  int (*make_id)(void *id, const char *op, jmg_error *err);
  /* Opens (or finds in the cache) rank's end of the communicator of ranks
   * ranks named by id, on the device of device_ctx. Collective the first
   * time: every rank opens it at once. */
  int (*open)(const void *id, int rank, int ranks, void *device_ctx,
              jmg_comm **out, const char *op, jmg_error *err);
  /* Optional (NULL where the communicator has no use for it): the pid of
   * the process of every rank of id's group (ranks entries, 0 where it
   * cannot be watched from here), told before open, so that the first open
   * fails at once, naming the rank, where a rank's process is gone, instead
   * of waiting for it until the timeout. Not collective. */
  void (*watch)(const void *id, int ranks, const int64_t *pids);
  /* Optional (NULL where every wait of the communicator ends by itself,
   * as the CPU communicators' do by JAXMG_RENDEZVOUS_TIMEOUT): guards one
   * call on c, from just after open to the end of the call, for a library
   * whose waits cannot time out (NCCL: its kernels wait for a dead peer
   * forever). Between guard_begin and guard_end a watchdog thread
   * (comm/watchdog.h) aborts c where a watched rank's process dies, the
   * library reports an asynchronous error, or, until the call's first
   * max_int completes (every rank arrived), JAXMG_RENDEZVOUS_TIMEOUT
   * passes; the call's waits then end with errors. guard_end returns rc,
   * or, where the watchdog aborted c, its error naming op, the rank and its
   * pid (or the timeout); c is then dead: a later open of its id fails at
   * once. Not collective; a guard_begin that failed needs no guard_end
   * (guard_end is harmless then). */
  int (*guard_begin)(jmg_comm *c, const char *op, jmg_error *err);
  int (*guard_end)(jmg_comm *c, int rc, jmg_error *err);
  /* The library's own handle (ncclComm_t), for engines that take it. */
  void *(*native)(jmg_comm *c);
  /* *value = the maximum of every rank's *value (a host int); waits for the
   * result. The agreement step: ranks that failed say so before anyone
   * enters a collective that would wait for them. */
  int (*max_int)(jmg_comm *c, int *value, void *device_ctx, const char *op,
                 jmg_error *err);
  /* Broadcasts bytes of buf (device memory) from rank root to every rank's
   * buf, on the stream. */
  int (*bcast)(jmg_comm *c, void *buf, size_t bytes, int root,
               void *device_ctx, const char *op, jmg_error *err);
  /* Point to point, issued between group_begin and group_end so that a set
   * of sends and receives runs as one (NCCL group semantics; a rank may
   * send to itself). */
  int (*group_begin)(const char *op, jmg_error *err);
  int (*group_end)(const char *op, jmg_error *err);
  int (*send)(jmg_comm *c, const void *buf, size_t bytes, int peer,
              void *device_ctx, const char *op, jmg_error *err);
  int (*recv)(jmg_comm *c, void *buf, size_t bytes, int peer,
              void *device_ctx, const char *op, jmg_error *err);
} jmg_comm_ops;

/* NCCL (cuda/comm_nccl.c): ops over libnccl, loaded on first use from the
 * path the Python layer set (jaxmg_nccl_set_path), else by its soname.
 * Defined in libjaxmg_cuda.so only. */
const jmg_comm_ops *jmg_nccl_comm(void);

/* The threads of one process, over host memory (comm/comm_threads.c): the
 * CPU platform's in one process (SPMD). Its ids name nothing outside the
 * process that made them, so it cannot span processes: opening another
 * process's id is refused. */
const jmg_comm_ops *jmg_threads_comm(void);

/* The processes of one node (and their threads), over Unix domain sockets
 * (comm/comm_processes.c): the CPU platform's where a group spans processes
 * (MPMD, one process per CPU device), for the local model on CPU devices and
 * its tests; across nodes the GPU engines' NCCL carries the work. */
const jmg_comm_ops *jmg_processes_comm(void);

/* 1 if id (JMG_COMM_ID_MAX bytes) was made by jmg_processes_comm's
 * make_id. */
int jmg_comm_processes_id(const void *id);

#endif
