/* Whether a process is alive: the one definition jaxmg uses wherever it must
 * tell a process that is gone (the process rendezvous' participants and the
 * owners of shared-memory segments left in /dev/shm).
 *
 * A process is dead once it no longer exists, and also while it is a zombie
 * (dead, not yet reaped by its parent: a launcher that waits for its children
 * one after the other reaps a killed one late) or while its exit is under way
 * (the kernel's PF_EXITING: a process that held GPUs can take seconds to let
 * go of them before it becomes a zombie). A dead process never comes back, so
 * whatever waits for it can give up, and whatever it owned can be removed.
 *
 * Pids are those of this process' pid namespace. */
#ifndef JMG_COMMON_PROC_H
#define JMG_COMMON_PROC_H

#include <sys/types.h>

/* 1 if process pid is alive, 0 if it is dead (above) or pid <= 0. A process
 * that exists but that we may not signal (EPERM) is alive. Where /proc
 * cannot be read, an existing process is alive. */
int jmg_proc_alive(pid_t pid);

/* Whether a line of /proc/<pid>/stat describes a dead process: a zombie
 * ('Z', or 'X'/'x': being reaped), or one whose exit has begun (PF_EXITING
 * in its flags). A line that cannot be read describes a live one. */
int jmg_proc_stat_dead(const char *stat);

#endif
