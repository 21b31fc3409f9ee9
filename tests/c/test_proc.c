/* One definition of a dead process (common/proc.c): gone, a zombie, or
 * exiting; from /proc/<pid>/stat lines and from real processes. */
#define _XOPEN_SOURCE 700 /* waitid's WNOWAIT */
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proc.h"
#include "test.h"
#include "test_clock.h"

TEST(proc_stat_tells_dead_processes) {
  /* Running, sleeping: flags without PF_EXITING (0x4). */
  CHECK_EQ(jmg_proc_stat_dead("42 (python3) S 1 42 42 0 -1 4194560 100 0"), 0);
  CHECK_EQ(jmg_proc_stat_dead("42 (python3) R 1 42 42 0 -1 4194304 1 0"), 0);
  /* Zombie and dead. */
  CHECK_EQ(jmg_proc_stat_dead("42 (python3) Z 1 42 42 0 -1 4227084 100 0"), 1);
  CHECK_EQ(jmg_proc_stat_dead("42 (python3) X 1 42 42 0 -1 0 0 0"), 1);
  /* Exiting but not yet a zombie (a process letting go of its GPUs). */
  CHECK_EQ(jmg_proc_stat_dead("42 (python3) D 1 42 42 0 -1 4194308 100 0"), 1);
  /* A command name with spaces and parentheses. */
  CHECK_EQ(jmg_proc_stat_dead("7 (a) b (c) S 1 7 7 0 -1 4194560 1 0"), 0);
  CHECK_EQ(jmg_proc_stat_dead("7 (a) b (c) D 1 7 7 0 -1 4194564 1 0"), 1);
  /* Unreadable lines are not dying. */
  CHECK_EQ(jmg_proc_stat_dead(""), 0);
  CHECK_EQ(jmg_proc_stat_dead("7 (a"), 0);
  CHECK_EQ(jmg_proc_stat_dead("7 (a) S 1"), 0);
}

TEST(proc_stat_of_this_process_is_alive) {
  FILE *f = fopen("/proc/self/stat", "r");
  if (f == NULL) return; /* not Linux's /proc: nothing to read */
  char buf[512];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  CHECK_EQ(jmg_proc_stat_dead(buf), 0);
}

TEST(proc_alive_tells_live_zombie_and_gone_processes) {
  CHECK_EQ(jmg_proc_alive(getpid()), 1);
  CHECK_EQ(jmg_proc_alive(0), 0);
  CHECK_EQ(jmg_proc_alive(-1), 0);
  pid_t sleeper = fork();
  if (sleeper == 0) {
    sleep_s(5.0);
    _exit(0);
  }
  CHECK(sleeper > 0);
  pid_t quitter = fork();
  if (quitter == 0) _exit(0);
  CHECK(quitter > 0);
  CHECK_EQ(jmg_proc_alive(sleeper), 1);
  /* The quitter exits at once; waiting for that without reaping it leaves a
   * zombie, which is dead. */
  siginfo_t info;
  CHECK_EQ(waitid(P_PID, (id_t)quitter, &info, WEXITED | WNOWAIT), 0);
  int zombie_dead = !jmg_proc_alive(quitter);
  int st;
  CHECK_EQ(waitpid(quitter, &st, 0), quitter);
  CHECK(zombie_dead);
  CHECK_EQ(jmg_proc_alive(quitter), 0); /* reaped: gone */
  kill(sleeper, SIGKILL);
  waitpid(sleeper, &st, 0);
  CHECK_EQ(jmg_proc_alive(sleeper), 0);
}
