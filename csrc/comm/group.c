/* The CPU communicators' groups and the operations built on them
 * (comm/group.h). */
#define _POSIX_C_SOURCE 200809L
#include "comm/group.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void *jmg_group_op_at(const jmg_group *g, size_t i) {
  return (unsigned char *)g->ops + i * g->op_bytes;
}

const char *jmg_group_chan_name(int chan) {
  return chan == JMG_CHAN_P2P     ? "send"
         : chan == JMG_CHAN_BCAST ? "bcast"
                                  : "max_int";
}

struct timespec jmg_deadline_after(double seconds) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  double whole = (double)(time_t)seconds;
  t.tv_sec += (time_t)seconds;
  t.tv_nsec += (long)((seconds - whole) * 1e9);
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

static void pend_reset(jmg_group *g) {
  free(g->ops);
  g->ops = NULL;
  g->count = g->cap = 0;
  g->failed = 0;
}

static int post(const jmg_group_transport *t, int send, int chan, jmg_comm *c,
                void *buf, size_t bytes, int peer, const char *op,
                jmg_error *err) {
  jmg_group *g = t->pending();
  if (c == NULL || peer < 0 || peer >= t->ranks(c)) {
    g->failed = 1;
    return jmg_error_set(err, JMG_EINVAL, op, t->call,
                         "peer %d is not a rank of the communicator (%d)", peer,
                         c ? t->ranks(c) : 0);
  }
  if (g->count == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 16;
    void *ops = realloc(g->ops, cap * t->op_bytes);
    if (ops == NULL) {
      g->failed = 1;
      return jmg_error_set(err, JMG_ENOMEM, op, t->call,
                           "cannot queue %zu operations", cap);
    }
    g->ops = ops;
    g->cap = cap;
  }
  g->op_bytes = t->op_bytes;
  jmg_group_op *o = jmg_group_op_at(g, g->count++);
  memset(o, 0, t->op_bytes); /* the transport's own members too */
  *o = (jmg_group_op){.send = send,
                      .chan = chan,
                      .c = c,
                      .buf = buf,
                      .bytes = bytes,
                      .peer = peer};
  return 0;
}

int jmg_group_begin(const jmg_group_transport *t, const char *op,
                    jmg_error *err) {
  (void)op, (void)err;
  jmg_group *g = t->pending();
  if (g->depth++ == 0) {
    g->count = 0;
    g->failed = 0;
  }
  return 0;
}

int jmg_group_end(const jmg_group_transport *t, const char *op,
                  jmg_error *err) {
  jmg_group *g = t->pending();
  if (g->depth == 0)
    return jmg_error_set(err, JMG_EINTERNAL, op, t->call,
                         "group_end without group_begin");
  if (--g->depth > 0) return 0;
  int rc = 0;
  if (g->failed)
    rc = jmg_error_set(err, JMG_EINTERNAL, op, t->call,
                       "an operation of the group could not be queued: the "
                       "group did not run");
  else
    rc = t->run(g, op, err);
  pend_reset(g);
  return rc;
}

/* Every operation opens a group of its own (nested in the caller's, if
 * any) and closes it here: outside a group it runs at once. rc: the
 * posts'; where they failed, the group's end does not overwrite err. */
static int one(const jmg_group_transport *t, int rc, const char *op,
               jmg_error *err) {
  jmg_error ignored;
  int erc = jmg_group_end(t, op, rc == 0 ? err : &ignored);
  return rc != 0 ? rc : erc;
}

int jmg_group_send(const jmg_group_transport *t, jmg_comm *c, const void *buf,
                   size_t bytes, int peer, const char *op, jmg_error *err) {
  (void)jmg_group_begin(t, op, err);
  return one(t, post(t, 1, JMG_CHAN_P2P, c, (void *)buf, bytes, peer, op, err),
             op, err);
}

int jmg_group_recv(const jmg_group_transport *t, jmg_comm *c, void *buf,
                   size_t bytes, int peer, const char *op, jmg_error *err) {
  (void)jmg_group_begin(t, op, err);
  return one(t, post(t, 0, JMG_CHAN_P2P, c, buf, bytes, peer, op, err), op,
             err);
}

int jmg_group_bcast(const jmg_group_transport *t, jmg_comm *c, void *buf,
                    size_t bytes, int root, const char *op, jmg_error *err) {
  if (c == NULL || root < 0 || root >= t->ranks(c))
    return jmg_error_set(err, JMG_EINVAL, op, t->call,
                         "bcast from rank %d of %d", root, c ? t->ranks(c) : 0);
  (void)jmg_group_begin(t, op, err);
  const int ranks = t->ranks(c);
  int rc = 0;
  if (bytes > 0 && t->rank(c) == root) {
    for (int p = 0; rc == 0 && p < ranks; ++p)
      if (p != root) rc = post(t, 1, JMG_CHAN_BCAST, c, buf, bytes, p, op, err);
  } else if (bytes > 0) {
    rc = post(t, 0, JMG_CHAN_BCAST, c, buf, bytes, root, op, err);
  }
  return one(t, rc, op, err);
}

int jmg_group_max_int(const jmg_group_transport *t, jmg_comm *c, int *value,
                      const char *op, jmg_error *err) {
  if (t->pending()->depth > 0)
    return jmg_error_set(err, JMG_EINTERNAL, op, t->call,
                         "max_int inside a group");
  const int ranks = t->ranks(c), me = t->rank(c);
  int *all = malloc((size_t)ranks * sizeof *all);
  if (all == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, t->call,
                         "cannot allocate %d ints", ranks);
  int mine = *value, rc = 0;
  (void)jmg_group_begin(t, op, err);
  for (int p = 0; rc == 0 && p < ranks; ++p)
    if (p != me)
      rc = post(t, 1, JMG_CHAN_MAX, c, &mine, sizeof mine, p, op, err);
  for (int p = 0; rc == 0 && p < ranks; ++p)
    if (p != me)
      rc = post(t, 0, JMG_CHAN_MAX, c, &all[p], sizeof *all, p, op, err);
  rc = one(t, rc, op, err);
  if (rc == 0) {
    for (int p = 0; p < ranks; ++p)
      if (p != me && all[p] > mine) mine = all[p];
    *value = mine;
  }
  free(all);
  return rc;
}
