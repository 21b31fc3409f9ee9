/* Named POSIX shared memory: what jaxmg's processes of one node share through.
 *
 * Two users: the process rendezvous (one segment per call, "/jaxmg-<hash>")
 * and the host share (one segment per participant's CPU buffers,
 * "/jaxmg-d-<pid>-<n>"). This module creates, opens, maps, unmaps and
 * unlinks segments, and walks the names in /dev/shm for a sweep; what a
 * segment holds, and when one is stale, is its user's business. Every
 * segment is created 0600 (the processes of one job are one user's) and
 * mapped read-write and shared.
 *
 * Errors carry the failing system call and the segment's name; their code is
 * jmg_errno_status(errno) (JMG_ENOMEM where the system ran out of memory, as
 * shared memory is memory). */
#ifndef JMG_COMMON_SHM_H
#define JMG_COMMON_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct jmg_shm {
  void *base;  /* the mapping, or NULL */
  size_t size; /* its length: the segment's size when it was mapped */
  ino_t ino;   /* the object the name referred to (jmg_shm_open) */
} jmg_shm;

/* jmg_shm_create: the name exists already; nothing was created. */
#define JMG_SHM_TAKEN 1
/* jmg_shm_open: there is no segment of that name. */
#define JMG_SHM_ABSENT 1
/* jmg_shm_open: the segment exists but has no size yet (its creator has not
 * sized it); nothing is mapped, out->ino says which object that is. */
#define JMG_SHM_UNSIZED 2

/* Creates segment `name` ("/..." ) of `size` bytes (> 0) and maps it into
 * *out. 0, JMG_SHM_TAKEN, or a negative status with err filled (for op),
 * in which case nothing is left behind: the name is unlinked again. */
int jmg_shm_create(const char *name, size_t size, jmg_shm *out, const char *op,
                   jmg_error *err);

/* Opens the existing segment `name` and maps all of it into *out. 0,
 * JMG_SHM_ABSENT, JMG_SHM_UNSIZED, or a negative status with err filled. */
int jmg_shm_open(const char *name, jmg_shm *out, const char *op,
                 jmg_error *err);

/* Unmaps m (if mapped) and marks it unmapped. */
void jmg_shm_unmap(jmg_shm *m);

/* Removes the name; mappings live on until unmapped. 0 once removed,
 * JMG_SHM_ABSENT when it was gone already (not an error), or a negative
 * status with err filled. */
int jmg_shm_unlink(const char *name, const char *op, jmg_error *err);

/* A 64-bit FNV-1a hash of n bytes, continuing h (JMG_SHM_HASH_INIT to
 * start): what segment names are made of where a key is too long for one. */
#define JMG_SHM_HASH_INIT 14695981039346656037ULL
uint64_t jmg_shm_hash(uint64_t h, const void *data, size_t n);

/* Decides about one segment found by jmg_shm_sweep: `name` is "/" and the
 * entry's name. Returns 1 if it removed the segment, else 0. */
typedef int (*jmg_shm_visit_fn)(void *ctx, const char *name);

/* Calls visit for every segment in /dev/shm whose name begins with `prefix`
 * (without the "/"), and returns how many it removed. Where there is no
 * /dev/shm (not Linux's layout) there is nothing to sweep: 0. */
int jmg_shm_sweep(const char *prefix, jmg_shm_visit_fn visit, void *ctx);

#endif
