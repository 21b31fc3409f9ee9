/* One call of a CUDA engine: the frame that cuSOLVERDn, cuSOLVERMg, the
 * gather engine and cuSOLVERMp run their library's calls in, so that each
 * routine file reads as its library's call sequence and nothing around it
 * is written twice.
 *
 * The frame holds
 *   - the call's GPUs (a jmg_mem_group of jmg_cuda_device, cuda/device.h):
 *     participant 0's device is made current, its XLA stream is the call's
 *     stream, the caller's current device is restored at the end; on
 *     request the device set's cuBLAS/cuSOLVERDn handles, locked for the
 *     call (cuda/handles.h);
 *   - the workspace: named parts of ONE allocation from XLA's allocator on
 *     participant 0 (each part at a multiple of JMG_CUDA_ALIGN, as XLA
 *     aligns its blocks), with the library's info words after the parts,
 *     and the library's host workspace; more buffers where a routine needs
 *     them apart (on another device, or before the library's sizes are
 *     known), all returned at the end;
 *   - info: brought to the host in one copy and one wait, agreed between
 *     the ranks of a local-model call (c->agree), and a negative info (an
 *     argument the library rejected) made an error that names the routine;
 *   - the op: every error of the call names it. The rule is one: the first
 *     op named is kept (jmg_error_name_op), so that an inner call's own
 *     name survives;
 *   - the end: where work is still pending on the stream (a failure after
 *     work was issued) it is waited for before the memory goes back, and a
 *     failure of that wait is the call's error where it had none.
 *
 * A routine, sketched (cuSOLVERDn's potrs, engine/cusolverdn/potrs.c):
 *
 *   jmg_cuda_call c;
 *   jmg_cuda_work w = {0};
 *   int rc = jmg_cuda_call_begin(&c, "potrs", "cuSOLVERDn", 1, device_ctx,
 *                                JMG_CUDA_CALL_HANDLES, err);
 *   ... ask the library its sizes: solver = jmg_cuda_work_part(&w, bytes),
 *       w.host_bytes = host ...
 *   if (rc == 0) rc = jmg_cuda_call_take(&c, &w, err);
 *   ... the library's calls on c.stream, info into c.d_info[0], [1] ...
 *   rc = jmg_cuda_call_info(&c, rc, h_info, 2, names, err);
 *   return jmg_cuda_call_end(&c, rc, err);
 *
 * Every function returns 0 or a negative jmg_status with err filled and the
 * op named; every CUDA return code is checked. */
#ifndef JMG_CUDA_CALL_H
#define JMG_CUDA_CALL_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "common/error.h"
#include "cuda/device.h"
#include "cuda/handles.h"
#include "mem/mem.h"

/* Parts of a workspace start at multiples of this (XLA's block alignment). */
#define JMG_CUDA_ALIGN 256

/* The info words a call's workspace holds (one per library routine that
 * writes one before the info is read). */
#define JMG_CUDA_MAX_INFO 4

/* Buffers a call may take beside its workspace. */
#define JMG_CUDA_CALL_MAX_BUFFERS 20

/* bytes rounded up to a multiple of JMG_CUDA_ALIGN. */
size_t jmg_cuda_align(size_t bytes);

/* A workspace being laid out: parts one after the other, each starting at
 * a multiple of JMG_CUDA_ALIGN, and the host workspace's size. */
typedef struct jmg_cuda_work {
  size_t bytes;      /* the device parts so far */
  size_t host_bytes; /* the library's host workspace */
} jmg_cuda_work;

/* Adds a part of bytes; returns where it starts (its name in the routine:
 * `const size_t x_at = jmg_cuda_work_part(&w, ...)`). */
size_t jmg_cuda_work_part(jmg_cuda_work *w, size_t bytes);

/* The bytes jmg_cuda_call_take takes from XLA's allocator for w: its
 * parts and the info words (what a workspace query reports). */
size_t jmg_cuda_work_alloc_bytes(const jmg_cuda_work *w);

struct jmg_cuda_call;

/* How the ranks of a local-model call agree: *v becomes the maximum of
 * every rank's *v, on every rank whatever its rc (so that none waits);
 * returns rc where this rank had failed, else the agreement's outcome. */
typedef int (*jmg_cuda_agree_fn)(struct jmg_cuda_call *c, int rc, int *v,
                                 jmg_error *err);

typedef struct jmg_cuda_buffer {
  int dev; /* participant, or JMG_HOST (malloc) */
  void *ptr;
  size_t bytes;
} jmg_cuda_buffer;

typedef struct jmg_cuda_call {
  const char *op;  /* named in every error of the call */
  const char *who; /* the library, as messages name it ("cuSOLVERDn") */
  char what[64];   /* the problem, for messages ("N=8192 float64"), or "" */
  jmg_mem_group group;
  const jmg_mem *mem;         /* cuda/mem.c */
  const jmg_cuda_device *dev; /* participant 0's */
  cudaStream_t stream;        /* participant 0's XLA stream */
  jmg_cuda_handles *h;        /* locked (JMG_CUDA_CALL_HANDLES), else NULL */
  /* The workspace (jmg_cuda_call_take), on participant 0. */
  void *work;
  size_t work_bytes; /* its parts (the info words follow) */
  int *d_info;       /* JMG_CUDA_MAX_INFO words, inside work */
  void *host_work;
  size_t host_bytes;
  /* A local-model call's agreement (NULL: one participant decides). */
  jmg_cuda_agree_fn agree;
  /* Internal. */
  size_t alloc_bytes;
  jmg_cuda_buffer buffers[JMG_CUDA_CALL_MAX_BUFFERS];
  int nbuffers;
  int saved_device; /* -1: nothing to restore */
  int begun;        /* jmg_cuda_call_end has something to undo */
  int pending;      /* work may still run on the call's memory */
} jmg_cuda_call;

/* jmg_cuda_call_begin's flags. */
enum {
  JMG_CUDA_CALL_HANDLES = 1 /* lock the device set's handles (c->h) */
};

/* Starts a call of op on the n GPUs of device_ctx (jmg_cuda_device each):
 * remembers the current device, locks the device set's handles where flags
 * ask (who names the library in their messages), and makes participant
 * 0's GPU current. End it with jmg_cuda_call_end whatever this returns; a
 * frame that was only zeroed (memset) ends as a no-op. */
int jmg_cuda_call_begin(jmg_cuda_call *c, const char *op, const char *who,
                        int n, void *const *device_ctx, int flags,
                        jmg_error *err);

/* Takes the workspace w describes: its parts and the info words in one
 * allocation on participant 0, the host workspace from malloc. Fails with
 * JMG_ENOMEM, having written nothing, where either cannot be had (c->work
 * is then NULL where the device part was refused). From here on work is
 * pending until jmg_cuda_call_info or jmg_cuda_call_sync waits for it. */
int jmg_cuda_call_take(jmg_cuda_call *c, const jmg_cuda_work *w,
                       jmg_error *err);

/* Where part `at` of the workspace lies (NULL before it is taken: the
 * libraries' size queries read no data). */
void *jmg_cuda_call_part(const jmg_cuda_call *c, size_t at);

/* A buffer of bytes (at least one) on participant dev, or on the host with
 * dev JMG_HOST, returned at the end of the call. */
int jmg_cuda_call_buffer(jmg_cuda_call *c, int dev, size_t bytes, void **out,
                         jmg_error *err);

/* Makes participant 0's GPU current again (after calls that move it). */
int jmg_cuda_call_device(jmg_cuda_call *c, jmg_error *err);

/* Waits for the call's stream; nothing is pending afterwards. */
int jmg_cuda_call_sync(jmg_cuda_call *c, jmg_error *err);

/* Brings the first count info words to h_info and waits for the stream
 * (everything issued so far is then done). Checks nothing. */
int jmg_cuda_call_read_info(jmg_cuda_call *c, int *h_info, int count,
                            jmg_error *err);

/* The call's info after its library routines (rc: their outcome so far):
 * jmg_cuda_call_read_info where rc is 0, then, where the call has ranks
 * (c->agree), each word the maximum over the ranks, every rank taking part
 * whatever rc; a negative word (or a failure on another rank) is an error
 * naming names[i], the routine that wrote word i. Returns rc where it was
 * not 0. */
int jmg_cuda_call_info(jmg_cuda_call *c, int rc, int *h_info, int count,
                       const char *const *names, jmg_error *err);

/* A library's info read on the host (cuSOLVERMg returns it there): a
 * negative one (an argument the library rejected) is an error naming
 * `name`; else 0. jmg_cuda_call_info's rule for the device words. */
int jmg_cuda_call_check_info(const jmg_cuda_call *c, int info, const char *name,
                             jmg_error *err);

/* Ends the call: waits for pending work (the call's stream; every
 * participant's where the call has several; its failure becomes the error
 * where rc is 0), returns the workspace and every buffer, unlocks the
 * handles, restores the current device, and names the op in err where rc
 * is not 0. Returns rc (or the wait's failure). */
int jmg_cuda_call_end(jmg_cuda_call *c, int rc, jmg_error *err);

#endif
