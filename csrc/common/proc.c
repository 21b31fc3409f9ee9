#define _POSIX_C_SOURCE 200809L
#include "common/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* The kernel's PF_EXITING in the flags word (field 9 of /proc/<pid>/stat). */
#define PF_EXITING_FLAG 0x4UL

int jmg_proc_stat_dead(const char *stat) {
  /* "pid (comm) S ppid pgrp session tty_nr tpgid flags ...": the fields
   * follow the last ')' (comm may hold one, and spaces). */
  const char *p = strrchr(stat, ')');
  if (p == NULL || p[1] != ' ') return 0;
  const char state = p[2];
  if (state == 'Z' || state == 'X' || state == 'x') return 1;
  long long ppid, pgrp, session, tty, tpgid;
  unsigned long flags = 0;
  if (sscanf(p + 3, "%lld %lld %lld %lld %lld %lu", &ppid, &pgrp, &session,
             &tty, &tpgid, &flags) != 6)
    return 0;
  return (flags & PF_EXITING_FLAG) != 0;
}

/* Whether /proc says the existing process pid is dead (a zombie, or
 * exiting). Where /proc cannot be read, it is not. */
static int stat_says_dead(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return jmg_proc_stat_dead(buf);
}

int jmg_proc_alive(pid_t pid) {
  if (pid <= 0) return 0;
  /* kill(pid, 0) fails with ESRCH only for a pid that no longer exists; a
   * zombie still exists, so /proc must say whether it is dead. */
  if (kill(pid, 0) == 0) return !stat_says_dead(pid);
  return errno != ESRCH;
}
