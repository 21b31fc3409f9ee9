/* Quit marks: how a rank that gave up on a communicator tells the ranks of
 * its node, where the communicator itself cannot (NCCL has no way to tell a
 * peer that this rank aborted: a peer that comes late to a collective, or
 * is inside one, waits for ever, and its agreement may even complete
 * against what the abandoned call had posted).
 *
 * A mark is an empty shared-memory segment named after the communicator's
 * id, the rank and its pid ("/jaxmg-q-<hash>-<rank>-<pid>"). A rank's
 * watchdog (comm/watchdog.h) looks for its peers' marks, for the peers it
 * can watch (those of its node, whose pid it knows), as it looks for their
 * processes. A communicator's id is never used again once a rank gave up
 * on it, so a mark never goes stale while its process lives; marks whose
 * process is dead are swept when a new one is made. */
#ifndef JMG_COMM_QUIT_MARK_H
#define JMG_COMM_QUIT_MARK_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Marks that this process's rank `rank` gave up on the communicator whose
 * id is the id_len bytes at id. 0 (also where the mark exists already), or
 * a negative status with err filled (for op). */
int jmg_quit_mark(const void *id, size_t id_len, int rank, const char *op,
                  jmg_error *err);

/* 1 if rank `rank` of that communicator, in process pid, gave up on it;
 * else 0 (also where the mark cannot be read). */
int jmg_quit_marked(const void *id, size_t id_len, int rank, int64_t pid);

/* Removes the marks whose process is dead; returns how many. */
int jmg_quit_sweep(void);

#endif
