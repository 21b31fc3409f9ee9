/* Named shared memory (common/shm.c), and the host share's sweep, which
 * removes a region only when its creator is dead (common/proc.h). */
#define _XOPEN_SOURCE 700 /* waitid's WNOWAIT */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/shm.h"
#include "share/host_share.h"
#include "test.h"

static int exists(const char *name) {
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd < 0) return 0;
  close(fd);
  return 1;
}

TEST(shm_create_open_unlink_round_trip) {
  char name[64];
  snprintf(name, sizeof name, "/jaxmg-test-%ld-a", (long)getpid());
  jmg_error err;
  jmg_shm a, b, c;
  CHECK_EQ(jmg_shm_create(name, 100, &a, "test", &err), 0);
  CHECK(a.base != NULL);
  CHECK_EQ(a.size, 100);
  memset(a.base, 0x5a, 100);
  CHECK_EQ(jmg_shm_create(name, 100, &c, "test", &err), JMG_SHM_TAKEN);
  CHECK(c.base == NULL);
  CHECK_EQ(jmg_shm_open(name, &b, "test", &err), 0);
  CHECK_EQ(b.size, 100);
  CHECK_EQ(((unsigned char *)b.base)[99], 0x5a); /* the same memory */
  CHECK_EQ(jmg_shm_unlink(name, "test", &err), 0);
  CHECK_EQ(jmg_shm_unlink(name, "test", &err), JMG_SHM_ABSENT);
  CHECK_EQ(jmg_shm_open(name, &c, "test", &err), JMG_SHM_ABSENT);
  ((unsigned char *)a.base)[0] = 7; /* mappings outlive the name */
  CHECK_EQ(((unsigned char *)b.base)[0], 7);
  jmg_shm_unmap(&a);
  jmg_shm_unmap(&b);
  jmg_shm_unmap(&b); /* twice is harmless */
  CHECK(a.base == NULL);
}

TEST(shm_open_of_an_unsized_segment_says_so) {
  char name[64];
  snprintf(name, sizeof name, "/jaxmg-test-%ld-b", (long)getpid());
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  CHECK(fd >= 0);
  close(fd);
  jmg_shm m;
  jmg_error err;
  CHECK_EQ(jmg_shm_open(name, &m, "test", &err), JMG_SHM_UNSIZED);
  CHECK(m.base == NULL);
  CHECK(m.ino != 0);
  CHECK_EQ(jmg_shm_unlink(name, "test", &err), 0);
}

typedef struct sweep_seen {
  int visits;
  char suffix; /* the last letter of the names to remove */
} sweep_seen;

static int visit_remove_suffix(void *ctx, const char *name) {
  sweep_seen *s = ctx;
  s->visits++;
  if (name[strlen(name) - 1] != s->suffix) return 0;
  jmg_error err;
  return jmg_shm_unlink(name, "test", &err) == 0;
}

TEST(shm_sweep_visits_its_prefix_only_and_counts_removals) {
  char prefix[64], names[3][80], other[80];
  snprintf(prefix, sizeof prefix, "jaxmg-test-%ld-sweep-", (long)getpid());
  const char letters[3] = {'x', 'y', 'x'};
  jmg_shm m;
  jmg_error err;
  for (int i = 0; i < 3; ++i) {
    snprintf(names[i], sizeof names[i], "/%s%d%c", prefix, i, letters[i]);
    CHECK_EQ(jmg_shm_create(names[i], 64, &m, "test", &err), 0);
    jmg_shm_unmap(&m);
  }
  snprintf(other, sizeof other, "/jaxmg-test-%ld-other-x", (long)getpid());
  CHECK_EQ(jmg_shm_create(other, 64, &m, "test", &err), 0);
  jmg_shm_unmap(&m);
  sweep_seen seen = {0, 'x'};
  CHECK_EQ(jmg_shm_sweep(prefix, visit_remove_suffix, &seen), 2);
  CHECK_EQ(seen.visits, 3);
  CHECK(!exists(names[0]));
  CHECK(exists(names[1]));
  CHECK(!exists(names[2]));
  CHECK(exists(other));
  CHECK_EQ(jmg_shm_unlink(names[1], "test", &err), 0);
  CHECK_EQ(jmg_shm_unlink(other, "test", &err), 0);
}

TEST(host_share_sweep_removes_regions_of_dead_creators_only) {
  /* Regions named after a live process (this one), a zombie and a reaped
   * process: only the last two go (a zombie is dead: common/proc.h). */
  pid_t zombie = fork();
  if (zombie == 0) _exit(0);
  CHECK(zombie > 0);
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  CHECK(gone > 0);
  int st;
  waitpid(gone, &st, 0);
  siginfo_t info; /* wait until the zombie has exited, without reaping it */
  CHECK_EQ(waitid(P_PID, (id_t)zombie, &info, WEXITED | WNOWAIT), 0);
  const pid_t owners[3] = {getpid(), zombie, gone};
  char names[3][64];
  jmg_shm m;
  jmg_error err;
  for (int i = 0; i < 3; ++i) {
    snprintf(names[i], sizeof names[i], "/jaxmg-d-%ld-990%d", (long)owners[i],
             i);
    CHECK_EQ(jmg_shm_create(names[i], 64, &m, "test", &err), 0);
    jmg_shm_unmap(&m);
  }
  CHECK(jmg_host_share_sweep() >= 2);
  int live_kept = exists(names[0]);
  int zombie_swept = !exists(names[1]);
  int gone_swept = !exists(names[2]);
  jmg_shm_unlink(names[0], "test", &err);
  jmg_shm_unlink(names[1], "test", &err);
  jmg_shm_unlink(names[2], "test", &err);
  waitpid(zombie, &st, 0);
  CHECK(live_kept);
  CHECK(zombie_swept);
  CHECK(gone_swept);
}
