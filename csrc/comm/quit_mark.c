/* Quit marks (comm/quit_mark.h) on common/shm.h's segments. */
#include "comm/quit_mark.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/proc.h"
#include "common/shm.h"

#define NAME_PREFIX "jaxmg-q-"
#define NAME_LEN 80

static void make_name(const void *id, size_t id_len, int rank, int64_t pid,
                      char *name) {
  const uint64_t h = jmg_shm_hash(JMG_SHM_HASH_INIT, id, id_len);
  snprintf(name, NAME_LEN, "/" NAME_PREFIX "%016llx-%d-%lld",
           (unsigned long long)h, rank, (long long)pid);
}

int jmg_quit_mark(const void *id, size_t id_len, int rank, const char *op,
                  jmg_error *err) {
  (void)jmg_quit_sweep();
  char name[NAME_LEN];
  make_name(id, id_len, rank, (int64_t)getpid(), name);
  jmg_shm m;
  const int rc = jmg_shm_create(name, 8, &m, op, err);
  if (rc == 0) jmg_shm_unmap(&m);
  return rc == JMG_SHM_TAKEN ? 0 : rc;
}

int jmg_quit_marked(const void *id, size_t id_len, int rank, int64_t pid) {
  char name[NAME_LEN];
  make_name(id, id_len, rank, pid, name);
  jmg_shm m;
  jmg_error err;
  const int rc = jmg_shm_open(name, &m, "watchdog", &err);
  if (rc == 0) jmg_shm_unmap(&m);
  return rc == 0 || rc == JMG_SHM_UNSIZED;
}

/* Removes one mark found in /dev/shm if its process (named in it) is dead. */
static int sweep_mark(void *ctx, const char *name) {
  (void)ctx;
  unsigned long long h = 0;
  int rank = 0;
  long long pid = 0;
  if (sscanf(name + 1 + strlen(NAME_PREFIX), "%16llx-%d-%lld", &h, &rank,
             &pid) != 3)
    return 0;
  if (pid <= 0 || jmg_proc_alive((pid_t)pid)) return 0;
  jmg_error err;
  return jmg_shm_unlink(name, "watchdog", &err) == 0;
}

int jmg_quit_sweep(void) {
  return jmg_shm_sweep(NAME_PREFIX, sweep_mark, NULL);
}
