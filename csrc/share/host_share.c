/* Sharing CPU-device buffers between processes: POSIX shared memory.
 *
 * The participant creates one segment, "/jaxmg-d-<pid>-<n>", holding all its
 * buffers (64-byte aligned), copies its inputs in, and posts the segment's
 * name as every buffer's handle; the leader maps it, the op writes the outputs
 * there, and after the call the participant copies the outputs back into
 * XLA's buffers, unmaps and unlinks the segment. The name carries the
 * creator's pid, so that a segment left behind by a killed process can be
 * recognized as such (jmg_host_share_sweep). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "share/host_share.h"
#include "share/share.h"

#define NAME_PREFIX "jaxmg-d-"

typedef struct region {
  void *base;
  size_t size;
  char name[JMG_SHARE_HANDLE_LEN];
} region;

static int sys_error(jmg_error *err, const char *op, const char *call,
                     const char *what) {
  return jmg_error_sys(err, jmg_errno_status(errno), op, call, errno, what);
}

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
  r->size = size ? size : 64;
  snprintf(r->name, sizeof r->name, "/" NAME_PREFIX "%ld-%lu", (long)getpid(),
           atomic_fetch_add(&counter, 1));
  int fd = shm_open(r->name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    int rc = sys_error(err, op, "shm_open", r->name);
    free(r);
    return rc;
  }
  int rc = 0;
  if (ftruncate(fd, (off_t)r->size) != 0) {
    rc = sys_error(err, op, "ftruncate", r->name);
  } else {
    r->base = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r->base == MAP_FAILED) {
      r->base = NULL;
      rc = sys_error(err, op, "mmap", r->name);
    }
  }
  close(fd);
  if (rc != 0) {
    shm_unlink(r->name);
    free(r);
    return rc;
  }
  for (int i = 0; i < JMG_SHARE_NBUF; ++i) {
    jmg_share_buf *b = &post->buf[i];
    snprintf((char *)b->handle, sizeof b->handle, "%s", r->name);
    if (b->local != 0 && b->bytes != 0 && jmg_share_is_input(b))
      memcpy((char *)r->base + b->offset, (const void *)(uintptr_t)b->local,
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
        memcpy((void *)(uintptr_t)b->local, (char *)r->base + b->offset,
               (size_t)b->bytes);
    }
  }
  munmap(r->base, r->size);
  if (shm_unlink(r->name) != 0 && errno != ENOENT)
    rc = sys_error(err, op, "shm_unlink", r->name);
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
  int fd = shm_open(r->name, O_RDWR, 0600);
  if (fd < 0) {
    int rc = sys_error(err, op, "shm_open", r->name);
    free(r);
    return rc;
  }
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) {
    rc = sys_error(err, op, "fstat", r->name);
  } else {
    r->size = (size_t)st.st_size;
    for (int i = 0; i < JMG_SHARE_NBUF; ++i)
      if (post->buf[i].offset + post->buf[i].bytes > r->size)
        rc = jmg_error_set(err, JMG_EINTERNAL, op, "rendezvous",
                           "shared region %s has %zu bytes, too few for "
                           "buffer %d",
                           r->name, r->size, i);
  }
  if (rc == 0) {
    r->base = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r->base == MAP_FAILED) {
      r->base = NULL;
      rc = sys_error(err, op, "mmap", r->name);
    }
  }
  close(fd);
  if (rc != 0) {
    free(r);
    return rc;
  }
  for (int i = 0; i < JMG_SHARE_NBUF; ++i)
    ptrs[i] =
        post->buf[i].local != 0 ? (char *)r->base + post->buf[i].offset : NULL;
  *state = r;
  return 0;
}

static int host_close(const char *op, void *state, jmg_error *err) {
  (void)op, (void)err;
  region *r = state;
  munmap(r->base, r->size);
  free(r);
  return 0;
}

static const jmg_share g_host = {
    "host", host_export, host_finish, host_import, host_close,
};

const jmg_share *jmg_host_share(void) { return &g_host; }

int jmg_host_share_sweep(void) {
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return 0; /* not Linux's layout: nothing to sweep */
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long pid = 0;
    unsigned long n = 0;
    if (strncmp(e->d_name, NAME_PREFIX, strlen(NAME_PREFIX)) != 0) continue;
    if (sscanf(e->d_name + strlen(NAME_PREFIX), "%ld-%lu", &pid, &n) != 2)
      continue;
    if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    if (shm_unlink(name) == 0) ++removed;
  }
  closedir(d);
  return removed;
}
