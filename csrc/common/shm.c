#define _POSIX_C_SOURCE 200809L
#include "common/shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int sys_error(jmg_error *err, const char *op, const char *call,
                     int errnum, const char *name) {
  return jmg_error_sys(err, jmg_errno_status(errnum), op, call, errnum, name);
}

/* Maps `size` bytes of fd into *out. 0 or a negative status. */
static int map(int fd, size_t size, jmg_shm *out, const char *name,
               const char *op, jmg_error *err) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return sys_error(err, op, "mmap", errno, name);
  out->base = p;
  out->size = size;
  return 0;
}

int jmg_shm_create(const char *name, size_t size, jmg_shm *out, const char *op,
                   jmg_error *err) {
  memset(out, 0, sizeof *out);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return JMG_SHM_TAKEN;
    return sys_error(err, op, "shm_open", errno, name);
  }
  int rc = 0;
  if (ftruncate(fd, (off_t)size) != 0)
    rc = sys_error(err, op, "ftruncate", errno, name);
  else
    rc = map(fd, size, out, name, op, err);
  close(fd);
  if (rc != 0) shm_unlink(name); /* ours, just created: nobody else has it */
  return rc;
}

int jmg_shm_open(const char *name, jmg_shm *out, const char *op,
                 jmg_error *err) {
  memset(out, 0, sizeof *out);
  int fd = shm_open(name, O_RDWR, 0600);
  if (fd < 0) {
    if (errno == ENOENT) return JMG_SHM_ABSENT;
    return sys_error(err, op, "shm_open", errno, name);
  }
  struct stat st;
  int rc;
  if (fstat(fd, &st) != 0) {
    rc = sys_error(err, op, "fstat", errno, name);
  } else {
    out->ino = st.st_ino;
    rc = st.st_size == 0 ? JMG_SHM_UNSIZED
                         : map(fd, (size_t)st.st_size, out, name, op, err);
  }
  close(fd);
  return rc;
}

void jmg_shm_unmap(jmg_shm *m) {
  if (m->base != NULL) munmap(m->base, m->size);
  m->base = NULL;
}

int jmg_shm_unlink(const char *name, const char *op, jmg_error *err) {
  if (shm_unlink(name) == 0) return 0;
  if (errno == ENOENT) return JMG_SHM_ABSENT;
  return sys_error(err, op, "shm_unlink", errno, name);
}

int jmg_shm_sweep(const char *prefix, jmg_shm_visit_fn visit, void *ctx) {
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return 0;
  const size_t plen = strlen(prefix);
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, plen) != 0) continue;
    char name[NAME_MAX + 2];
    if (snprintf(name, sizeof name, "/%s", e->d_name) >= (int)sizeof name)
      continue; /* cannot be a name we made */
    if (visit(ctx, name) > 0) ++removed;
  }
  closedir(d);
  return removed;
}

uint64_t jmg_shm_hash(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}
