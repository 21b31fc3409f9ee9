/* The exchanges every communicator's tests run (test_comm_threads.c,
 * test_comm_processes.c): one rank's part, over the communicator's ops, on
 * its opened end. Each returns 0 or the first failing op's code (err
 * filled), and sets *bad where a value came out wrong. */
#ifndef JMG_TESTS_COMM_EXCHANGES_H
#define JMG_TESTS_COMM_EXCHANGES_H

#include <stddef.h>

#include "comm/comm.h"

/* 20 rounds of max_int, a ring exchange (send to the next rank, receive
 * from the previous, in one group) and a broadcast from a root that moves
 * round by round. */
int comm_rounds(const jmg_comm_ops *o, jmg_comm *c, int rank, int ranks,
                int *bad, jmg_error *err);

/* In one group: to every rank (itself too) many small messages and one of
 * big bytes, then all the receives; then broadcasts from every root in one
 * group. ranks <= 16. */
int comm_big_exchange(const jmg_comm_ops *o, jmg_comm *c, int rank, int ranks,
                      int many, size_t big, int *bad, jmg_error *err);

#endif
