/* Sharing CPU-device buffers between processes: POSIX shared memory.
 *
 * The participant creates one segment, "/jaxmg-d-<pid>-<n>", holding all its
 * buffers (64-byte aligned), copies its inputs in, and posts the segment's
 * name as every buffer's handle; the leader maps it, the op writes the outputs
 * there, and after the call the participant copies the outputs back into
 * XLA's buffers, unmaps and unlinks the segment. The name carries the
 * creator's pid, so that a segment left behind by a killed process can be
 * recognized as such (jmg_host_share_sweep). Segments are common/shm.h's. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/proc.h"
#include "common/shm.h"
#include "share/host_share.h"
#include "share/share.h"

#define NAME_PREFIX "jaxmg-d-"

typedef struct region {
  jmg_shm shm;
  char name[JMG_SHARE_HANDLE_LEN];
} region;

static size_t aligned(size_t n) { return (n + 63) & ~(size_t)63; }

static int host_export(const char *op, jmg_share_post *post, void *device_ctx,
                       void **state, jmg_error *err) {
  (void)device_ctx;
  static _Atomic unsigned long counter;
  region *r = calloc(1, sizeof *r);
  if (r == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate the shared region's record");
  size_t size = 0;
  for (int i = 0; i < JMG_SHARE_NBUF; ++i) {
    post->buf[i].offset = size;
    size += aligned((size_t)post->buf[i].bytes);
  }
  snprintf(r->name, sizeof r->name, "/" NAME_PREFIX "%ld-%lu", (long)getpid(),
           atomic_fetch_add(&counter, 1));
  int rc = jmg_shm_create(r->name, size ? size : 64, &r->shm, op, err);
  if (rc == JMG_SHM_TAKEN) /* left by an earlier process with this pid */
    rc = jmg_error_sys(err, jmg_errno_status(EEXIST), op, "shm_open", EEXIST,
                       r->name);
  if (rc != 0) {
    free(r);
    return rc;
  }
  for (int i = 0; i < JMG_SHARE_NBUF; ++i) {
    jmg_share_buf *b = &post->buf[i];
    snprintf((char *)b->handle, sizeof b->handle, "%s", r->name);
    if (b->local != 0 && b->bytes != 0 && jmg_share_is_input(b))
      memcpy((char *)r->shm.base + b->offset, (const void *)(uintptr_t)b->local,
             (size_t)b->bytes);
  }
  post->exported = 1;
  *state = r;
  return 0;
}

static int host_finish(const char *op, const jmg_share_post *post, void *state,
                       int ok, jmg_error *err) {
  region *r = state;
  int rc = 0;
  if (ok) {
    for (int i = 0; i < JMG_SHARE_NBUF; ++i) {
      const jmg_share_buf *b = &post->buf[i];
      if (b->local != 0 && b->bytes != 0 && jmg_share_is_output(b))
        memcpy((void *)(uintptr_t)b->local, (char *)r->shm.base + b->offset,
               (size_t)b->bytes);
    }
  }
  jmg_shm_unmap(&r->shm);
  const int urc = jmg_shm_unlink(r->name, op, err);
  if (urc < 0) rc = urc;
  free(r);
  return rc;
}

static int host_import(const char *op, const jmg_share_post *post,
                       void *ptrs[JMG_SHARE_NBUF], void **device_ctx,
                       void **state, jmg_error *err) {
  *device_ctx = NULL;
  region *r = calloc(1, sizeof *r);
  if (r == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate the shared region's record");
  memcpy(r->name, post->buf[0].handle, sizeof r->name);
  r->name[sizeof r->name - 1] = '\0';
  int rc = jmg_shm_open(r->name, &r->shm, op, err);
  if (rc == JMG_SHM_ABSENT)
    rc = jmg_error_sys(err, jmg_errno_status(ENOENT), op, "shm_open", ENOENT,
                       r->name);
  if (rc == JMG_SHM_UNSIZED) /* the exporter sizes it before posting it */
    rc = jmg_error_set(err, JMG_EINTERNAL, op, "rendezvous",
                       "shared region %s has 0 bytes", r->name);
  for (int i = 0; rc == 0 && i < JMG_SHARE_NBUF; ++i)
    if (post->buf[i].offset + post->buf[i].bytes > r->shm.size)
      rc = jmg_error_set(err, JMG_EINTERNAL, op, "rendezvous",
                         "shared region %s has %zu bytes, too few for "
                         "buffer %d",
                         r->name, r->shm.size, i);
  if (rc != 0) {
    jmg_shm_unmap(&r->shm);
    free(r);
    return rc;
  }
  for (int i = 0; i < JMG_SHARE_NBUF; ++i)
    ptrs[i] = post->buf[i].local != 0
                  ? (char *)r->shm.base + post->buf[i].offset
                  : NULL;
  *state = r;
  return 0;
}

static int host_close(const char *op, void *state, jmg_error *err) {
  (void)op, (void)err;
  region *r = state;
  jmg_shm_unmap(&r->shm);
  free(r);
  return 0;
}

static const jmg_share g_host = {
    "host", host_export, host_finish, host_import, host_close,
};

const jmg_share *jmg_host_share(void) { return &g_host; }

/* Removes one region found in /dev/shm if its creator (named in it) is dead:
 * never a live process' region. 1 if removed, else 0. */
static int sweep_region(void *ctx, const char *name) {
  (void)ctx;
  long pid = 0;
  unsigned long n = 0;
  if (sscanf(name + 1 + strlen(NAME_PREFIX), "%ld-%lu", &pid, &n) != 2)
    return 0;
  if (pid <= 0 || jmg_proc_alive((pid_t)pid)) return 0;
  jmg_error err;
  return jmg_shm_unlink(name, "share", &err) == 0;
}

int jmg_host_share_sweep(void) {
  return jmg_shm_sweep(NAME_PREFIX, sweep_region, NULL);
}
