/* What the CPU platform's two communicators (comm/comm_threads.c between
 * the threads of one process, comm/comm_processes.c between processes)
 * share: a thread's pending operations between group_begin and group_end,
 * and the operations of comm/comm.h built on them (send, recv, bcast,
 * max_int), each of which opens a group of its own, nested in the caller's
 * if any, so that outside a group it runs at once.
 *
 * A transport says how it runs a group (run: every send queued, then the
 * receives in issue order, then the sends' completion) and what it keeps
 * per operation; everything else is here. Its pending operations are per
 * thread, like NCCL's groups, and its own: each transport keeps a
 * _Thread_local jmg_group and hands it out through pending, so that a
 * group of one transport never sees the other's operations.
 *
 * Errors name the transport's call (jmg_group_transport.call). */
#ifndef JMG_COMM_GROUP_H
#define JMG_COMM_GROUP_H

#include <stddef.h>
#include <time.h>

#include "comm/comm.h"
#include "common/error.h"

/* The channels a message travels on: the operations of different channels
 * between one pair of ranks never meet. */
enum { JMG_CHAN_P2P, JMG_CHAN_BCAST, JMG_CHAN_MAX };

/* An operation posted to the group: the first member of the transport's
 * own operation (jmg_group_transport.op_bytes), whose other members post
 * zeroes. */
typedef struct jmg_group_op {
  int send; /* 1: send, 0: receive */
  int chan; /* JMG_CHAN_* */
  jmg_comm *c;
  void *buf;
  size_t bytes;
  int peer;
} jmg_group_op;

/* A thread's pending operations. Zero is an empty one. */
typedef struct jmg_group {
  void *ops; /* count operations of op_bytes each */
  size_t count, cap;
  size_t op_bytes; /* the transport's, set by every post */
  int depth;       /* nesting of group_begin */
  int failed;      /* a post of this group failed: its group_end fails */
} jmg_group;

typedef struct jmg_group_transport {
  const char *call;            /* the errors' call: "threads communicator" */
  size_t op_bytes;             /* sizeof the transport's operation */
  jmg_group *(*pending)(void); /* this thread's group (_Thread_local) */
  int (*ranks)(const jmg_comm *c);
  int (*rank)(const jmg_comm *c);
  /* Runs the count operations of g (none, where the group posted
   * nothing); 0 or a negative jmg_status with err filled. */
  int (*run)(jmg_group *g, const char *op, jmg_error *err);
} jmg_group_transport;

/* The transport's operation i of g (0 <= i < g->count). Its address stays
 * the same until the group ends. */
void *jmg_group_op_at(const jmg_group *g, size_t i);

/* "send", "bcast" or "max_int": what a message of chan is, in the errors. */
const char *jmg_group_chan_name(int chan);

/* The CLOCK_MONOTONIC time seconds from now. */
struct timespec jmg_deadline_after(double seconds);

/* comm/comm.h's operations over transport t. */
int jmg_group_begin(const jmg_group_transport *t, const char *op,
                    jmg_error *err);
int jmg_group_end(const jmg_group_transport *t, const char *op, jmg_error *err);
int jmg_group_send(const jmg_group_transport *t, jmg_comm *c, const void *buf,
                   size_t bytes, int peer, const char *op, jmg_error *err);
int jmg_group_recv(const jmg_group_transport *t, jmg_comm *c, void *buf,
                   size_t bytes, int peer, const char *op, jmg_error *err);
/* The root's send to every other rank (inside a group too). */
int jmg_group_bcast(const jmg_group_transport *t, jmg_comm *c, void *buf,
                    size_t bytes, int root, const char *op, jmg_error *err);
/* Every rank's value sent to every other; refused inside a group. */
int jmg_group_max_int(const jmg_group_transport *t, jmg_comm *c, int *value,
                      const char *op, jmg_error *err);

#endif
