/* A platform's memory operations: moving, taking and filling buffers on the
 * devices of one call's participants.
 *
 * Every platform has one (host_mem.c for CPU devices, cuda/mem.c for GPUs);
 * its engines and the ops' leader steps share it, so that no engine carries
 * copies and allocations of its own and a second engine of a platform reuses
 * them as they are. The operations act on a group of participants, not on a
 * matrix: the group names each participant's device context (what the
 * platform made for it: on GPUs a jmg_cuda_device, see cuda/device.h; NULL on
 * CPU), and a buffer is named by its pointer and the position of its
 * participant in the group (0 .. n-1), or JMG_HOST.
 *
 * Ordering: copies, NaN fills and allocations may be asynchronous. Plain
 * copies (copy) run in order on participant 0's queue (the leader's stream
 * on GPUs), which the ops layer relies on; sync waits for every participant's
 * queue. Every operation returns 0 or a negative jmg_status with err filled,
 * except release, which cannot fail in a way the caller could act on. */
#ifndef JMG_MEM_MEM_H
#define JMG_MEM_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/error.h"

/* Where a buffer lives, for copies: a participant's position in the group
 * (0 .. n-1), or the host. */
enum { JMG_HOST = -1 };

/* The participants of one call, as memory operations see them. */
typedef struct jmg_mem_group {
  int n;
  void *const *device_ctx; /* device_ctx[d]: participant d's (NULL on CPU) */
} jmg_mem_group;

typedef struct jmg_mem {
  const char *name;
  /* Copies bytes between buffers of (possibly different) participants or
   * the host, in order on participant 0's queue. */
  int (*copy)(const jmg_mem_group *g, void *dst, int dst_dev, const void *src,
              int src_dev, size_t bytes, jmg_error *err);
  /* Copies a 2D region within participant dev's device memory, on dev's
   * queue (in order with what dev's queue runs: on GPUs its stream; on
   * participant 0 that is also copy's queue): height rows of width bytes,
   * src's rows src_pitch bytes apart, to dst's, dst_pitch apart. Regions
   * must not overlap. (A column-major r x c block with leading dimension
   * ld: width r * elem, height c, pitch ld * elem.) */
  int (*copy2d)(const jmg_mem_group *g, int dev, void *dst, size_t dst_pitch,
                const void *src, size_t src_pitch, size_t width, size_t height,
                jmg_error *err);
  /* Copy lanes: independent in-order queues, so that copies between
   * different devices run at the same time. lanes_open makes nlanes lanes
   * ordered after everything issued so far (*lanes may be NULL where no state
   * is needed); lane_copy issues a copy on a lane; lanes_close waits for
   * every lane and frees them, also after an error. */
  int (*lanes_open)(const jmg_mem_group *g, int nlanes, void **lanes,
                    jmg_error *err);
  int (*lane_copy)(const jmg_mem_group *g, void *lanes, int lane, void *dst,
                   int dst_dev, const void *src, int src_dev, size_t bytes,
                   jmg_error *err);
  int (*lanes_close)(const jmg_mem_group *g, void *lanes, jmg_error *err);
  /* Takes / returns bytes on participant dev's device (scratch, staging,
   * workspaces). On GPUs the memory comes from XLA's allocator. */
  int (*alloc)(const jmg_mem_group *g, int dev, size_t bytes, void **out,
               jmg_error *err);
  void (*release)(const jmg_mem_group *g, int dev, void *ptr, size_t bytes);
  /* Fills count elements of a dtype buffer on participant dev with NaN. */
  int (*fill_nan)(const jmg_mem_group *g, int dev, void *ptr, size_t count,
                  jmg_dtype dtype, jmg_error *err);
  /* Whether every element of a rows x cols column-major block (leading
   * dimension ld >= rows) on participant dev is finite (no NaN, no Inf, in
   * the real or the imaginary part): *finite 1 or 0, known when it returns
   * (it waits for dev's queue). */
  int (*all_finite)(const jmg_mem_group *g, int dev, const void *ptr,
                    int64_t rows, int64_t cols, int64_t ld, jmg_dtype dtype,
                    int *finite, jmg_error *err);
  /* Replaces the n x n column-major matrix at ptr on participant dev
   * (leading dimension n) by its conjugate transpose (its transpose for
   * the real dtypes), in place: element (i, j) becomes conj of element
   * (j, i). Tile by tile, through at most a small scratch (on GPUs two
   * tiles' worth, from the participant's allocator); complete when it
   * returns (it waits for dev's queue). syevd's eigenvectors on one
   * device: the solver leaves Vᴴ read row-major, the caller wants V. */
  int (*conj_transpose)(const jmg_mem_group *g, int dev, void *ptr,
                        int64_t n, jmg_dtype dtype, jmg_error *err);
  /* Waits until everything issued so far on every participant has finished. */
  int (*sync)(const jmg_mem_group *g, jmg_error *err);
} jmg_mem;

/* Host memory: CPU devices (memmove, malloc). */
const jmg_mem *jmg_host_mem(void);

/* CUDA device memory (cuda/mem.c): device contexts are jmg_cuda_device.
 * Defined in libjaxmg_cuda.so only. */
const jmg_mem *jmg_cuda_mem(void);

#endif
