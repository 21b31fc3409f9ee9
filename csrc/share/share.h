/* Sharing a participant's buffers with a leader in another process (MPMD).
 *
 * In SPMD every participant is a thread of one process and the leader uses
 * their buffer pointers as they are. In MPMD (one process per device, on one
 * node) a pointer means nothing in another process: each participant exports
 * its buffers into a post (a plain struct copied through the process
 * rendezvous), and the leader imports every post into pointers it can use,
 * runs the op exactly as in SPMD, and closes them again. Two implementations:
 *  - host (CPU devices): the participant copies its inputs into a POSIX
 *    shared-memory segment of its own, the leader maps it and writes the
 *    outputs there, the participant copies its outputs back after the call;
 *  - CUDA: the participant exports the allocation that holds each buffer
 *    (XLA sub-allocates: the allocation, plus the buffer's offset in it) as
 *    a POSIX file descriptor of the driver's virtual-memory API, or as a
 *    legacy CUDA IPC handle where the memory is of the cudaMalloc kind; the
 *    leader maps them and works in the participant's memory directly.
 *    Defined in libjaxmg_cuda.so only.
 * The exec layer (exec/join.c) moves an op's buffers and scalars between its
 * io and the post, as the op's description says; this layer knows no op: it
 * only makes handles for the buffers a post names and maps them. */
#ifndef JMG_SHARE_SHARE_H
#define JMG_SHARE_SHARE_H

#include <stdint.h>

#include "common/error.h"

/* Room for the buffers of one participant: every buffer of the op, in the
 * order of its description (exec/op_desc.h); unused entries have local 0. */
#define JMG_SHARE_NBUF 8
/* Room for the op's own scalars (exec/op_desc.h), likewise. */
#define JMG_SHARE_NSCALAR 8

/* A buffer's direction, from the op's description: whether the op reads it
 * (its contents must reach the leader) and whether it writes it (the leader's
 * results must come back). */
#define JMG_SHARE_IN 1
#define JMG_SHARE_OUT 2

#define JMG_SHARE_HANDLE_LEN 64 /* sizeof(cudaIpcMemHandle_t) */
#define JMG_SHARE_DEVICE_LEN 32 /* a PCI bus id, "0000:00:00.0" */
#define JMG_SHARE_OFFER_LEN 48  /* share/fd_pass.h's JMG_FD_PASS_NAME_LEN */

typedef struct jmg_share_buf {
  uint64_t local;        /* the address in the owner's process; 0: no buffer */
  uint64_t bytes;        /* its size */
  uint64_t offset;       /* from the start of the exported region (handle) */
  uint64_t region_bytes; /* the exported region's size, where it matters */
  int32_t kind;          /* how the region is exported: the share's own */
  int32_t region;        /* the region's index among the post's, likewise */
  int32_t dir;           /* JMG_SHARE_IN | JMG_SHARE_OUT */
  unsigned char handle[JMG_SHARE_HANDLE_LEN]; /* the region, as exported */
} jmg_share_buf;

/* A participant's post: plain data, copied through shared memory. */
static inline int jmg_share_is_input(const jmg_share_buf *b) {
  return (b->dir & JMG_SHARE_IN) != 0;
}
static inline int jmg_share_is_output(const jmg_share_buf *b) {
  return (b->dir & JMG_SHARE_OUT) != 0;
}

typedef struct jmg_share_post {
  int64_t pid; /* the participant's process */
  /* The call as the participant sees it: jmg_shard_io's call-wide fields,
   * then the op's own scalars in the order of its description. */
  int32_t dtype;
  int32_t scratch_ok;
  int64_t n, local_cols, tile;
  int64_t scalar[JMG_SHARE_NSCALAR];
  uint64_t local_device_ctx; /* its device_ctx, valid in its process only */
  int32_t exported;          /* 0: buffers are only usable in-process */
  char device[JMG_SHARE_DEVICE_LEN]; /* its device, node-wide (CUDA) */
  /* Where the leader takes the descriptors of the exported regions from
   * (CUDA, share/fd_pass.h); "" when there are none. */
  char offer[JMG_SHARE_OFFER_LEN];
  jmg_share_buf buf[JMG_SHARE_NBUF];
} jmg_share_post;

typedef struct jmg_share {
  const char *name;
  /* Participant, before joining: exports post->buf[i] (local and bytes set;
   * local 0 for absent buffers) and sets post->exported. device_ctx is the
   * participant's engine context. *state is what finish needs. */
  int (*export_bufs)(const char *op, jmg_share_post *post, void *device_ctx,
                     void **state, jmg_error *err);
  /* Participant, after the call: when ok, brings the outputs home (host:
   * copies them back); always lets go of what export made. */
  int (*finish)(const char *op, const jmg_share_post *post, void *state, int ok,
                jmg_error *err);
  /* Leader: ptrs[i] usable in this process for every present buffer of an
   * exported post, and the engine context of the post's device (NULL on the
   * host). *state is what close needs. */
  int (*import_bufs)(const char *op, const jmg_share_post *post,
                     void *ptrs[JMG_SHARE_NBUF], void **device_ctx,
                     void **state, jmg_error *err);
  /* Leader, after the op (whose last step waited for all its work). */
  int (*close)(const char *op, void *state, jmg_error *err);
} jmg_share;

/* CPU devices: POSIX shared memory. */
const jmg_share *jmg_host_share(void);

/* CUDA GPUs: CUDA IPC. Defined in libjaxmg_cuda.so only. */
const jmg_share *jmg_cuda_share(void);

#endif
