/* Joining a call (exec/join.h). In SPMD the post is the participant's
 * jmg_shard_io itself. In MPMD every participant but the leader exports its
 * buffers (share/share.h) into its post; the leader imports every post into a
 * jmg_shard_io of its own, runs the op's leader function exactly as in SPMD
 * over those, and closes them; after the call each participant brings its
 * outputs home. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/join.h"
#include "exec/leader.h"
#include "exec/local.h"

_Static_assert(sizeof(jmg_share_post) <= JMG_RDV_MAX_POST,
               "a participant's post must fit in the rendezvous' post slot");
_Static_assert(JMG_OP_MAX_BUFS + 2 <= JMG_SHARE_NBUF &&
                   JMG_OP_MAX_SCALARS <= JMG_SHARE_NSCALAR,
               "a post must have room for every buffer and scalar of an op");

/* One participant of a shared call, from before its join until its end. */
typedef struct shared_join {
  jmg_op_call *call;
  const char *op; /* its name */
  jmg_share_post post;
  void *export_state; /* NULL: nothing exported (the leader's own shard) */
  jmg_rdv_done_fn done;
  void *done_ctx;
  /* What the rendezvous copies: the post, padded to the slot's size. */
  unsigned char slot[JMG_RDV_MAX_POST];
} shared_join;

/* The participant's post: its io's fields and buffers, as op describes
 * them. */
static void fill_post(jmg_share_post *post, const jmg_op_desc *op,
                      const jmg_shard_io *io) {
  memset(post, 0, sizeof *post);
  post->pid = (int64_t)getpid();
  post->dtype = (int32_t)io->dtype;
  post->scratch_ok = io->scratch_ok;
  post->n = io->n;
  post->local_cols = io->local_cols;
  post->tile = io->tile;
  for (int i = 0; i < op->nscalars; ++i)
    post->scalar[i] = *jmg_op_scalar_slot(&op->scalars[i], io);
  post->local_device_ctx = (uint64_t)(uintptr_t)io->device_ctx;
  for (int i = 0; i < jmg_op_nbuffers(op); ++i) {
    const jmg_op_buf *b = jmg_op_buffer(op, i);
    const void *p = *jmg_op_buf_slot(b, io);
    post->buf[i].local = (uint64_t)(uintptr_t)p;
    post->buf[i].bytes = p != NULL ? jmg_op_buf_bytes(op, b, io) : 0;
    post->buf[i].dir = ((b->dir & JMG_IN) ? JMG_SHARE_IN : 0) |
                       ((b->dir & JMG_OUT) ? JMG_SHARE_OUT : 0);
  }
}

/* The leader's view of post d: an io of op whose buffers are pointers of
 * this process. */
static int import_post(const jmg_share *share, const jmg_op_desc *op,
                       const jmg_share_post *p, int d, jmg_shard_io *io,
                       void **state, jmg_error *err) {
  void *ptrs[JMG_SHARE_NBUF] = {NULL};
  void *device_ctx = NULL;
  *state = NULL;
  if (!p->exported) {
    if (p->pid != (int64_t)getpid())
      return jmg_error_set(err, JMG_EINTERNAL, op->name, "rendezvous",
                           "shard %d (pid %lld) posted buffers it did not "
                           "export",
                           d, (long long)p->pid);
    for (int i = 0; i < JMG_SHARE_NBUF; ++i)
      ptrs[i] = (void *)(uintptr_t)p->buf[i].local;
    device_ctx = (void *)(uintptr_t)p->local_device_ctx;
  } else {
    int rc = share->import_bufs(op->name, p, ptrs, &device_ctx, state, err);
    if (rc != 0) return rc;
  }
  memset(io, 0, op->io_size);
  io->dtype = (jmg_dtype)p->dtype;
  io->scratch_ok = p->scratch_ok;
  io->n = p->n;
  io->local_cols = p->local_cols;
  io->tile = p->tile;
  for (int i = 0; i < op->nscalars; ++i)
    *jmg_op_scalar_slot(&op->scalars[i], io) = p->scalar[i];
  for (int i = 0; i < jmg_op_nbuffers(op); ++i)
    *jmg_op_buf_slot(jmg_op_buffer(op, i), io) = ptrs[i];
  io->device_ctx = device_ctx;
  return 0;
}

static int shared_leader(void *ctx, void *const *posts, int nparts,
                         jmg_error *err) {
  shared_join *j = ctx;
  const jmg_share *share = j->call->share;
  const jmg_op_desc *op = j->call->op;
  unsigned char *ios = calloc((size_t)nparts, op->io_size);
  void **views = calloc((size_t)nparts, sizeof *views);
  void **states = calloc((size_t)nparts, sizeof *states);
  int rc = 0, opened = 0;
  if (ios == NULL || views == NULL || states == NULL)
    rc = jmg_error_set(err, JMG_ENOMEM, j->op, "malloc",
                       "cannot allocate the views of %d participants", nparts);
  for (; rc == 0 && opened < nparts; ++opened) {
    jmg_share_post p; /* the slot is only byte-aligned as far as C knows */
    memcpy(&p, posts[opened], sizeof p);
    jmg_shard_io *io = (jmg_shard_io *)(void *)(ios + opened * op->io_size);
    rc = import_post(share, op, &p, opened, io, &states[opened], err);
    if (rc != 0) {
      char why[JMG_ERROR_MSG_LEN];
      snprintf(why, sizeof why, "%s", err->msg);
      jmg_error_set(err, err->code, j->op, err->call,
                    "cannot reach the buffers of shard %d (pid %lld): %s",
                    opened, (long long)p.pid, why);
      break;
    }
    views[opened] = io;
  }
  if (rc == 0) rc = jmg_leader_run(j->call, views, nparts, err);
  for (int d = 0; d < opened; ++d) {
    if (states[d] == NULL) continue;
    jmg_error e;
    int crc = share->close(j->op, states[d], &e);
    if (crc != 0 && rc == 0) {
      rc = crc;
      jmg_error_copy(err, &e);
    }
  }
  free(ios);
  free(views);
  free(states);
  return rc;
}

/* The participant's end: outputs home, exports released. */
static int finish(shared_join *j, int rc, jmg_error *err) {
  if (j->export_state == NULL) return rc;
  jmg_error e;
  int frc =
      j->call->share->finish(j->op, &j->post, j->export_state, rc == 0, &e);
  j->export_state = NULL;
  if (frc != 0 && rc == 0) {
    jmg_error_copy(err, &e);
    return frc;
  }
  return rc;
}

static void shared_done(void *ctx, int rc, const jmg_error *err) {
  shared_join *j = ctx;
  jmg_error e;
  if (err != NULL)
    jmg_error_copy(&e, err);
  else
    jmg_error_clear(&e);
  rc = finish(j, rc, &e);
  j->done(j->done_ctx, rc, rc != 0 ? &e : NULL);
  free(j);
}

/* jmg_op_join for calls whose participants may be processes (call->share
 * set): the buffers travel through call->share. */
static int join_shared(jmg_op_call *call, jmg_shard_io *io, jmg_error *err) {
  const char *op = call->op->name;
  shared_join *j = calloc(1, sizeof *j);
  if (j == NULL) {
    jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                  "cannot allocate the participant's state");
    return jmg_op_abort(call, err);
  }
  j->call = call;
  j->op = op;
  fill_post(&j->post, call->op, io);
  /* The leader's own buffers need no export: it uses them as they are. */
  if (call->shard != 0) {
    int rc = call->share->export_bufs(op, &j->post, io->device_ctx,
                                      &j->export_state, err);
    if (rc != 0) {
      free(j);
      return jmg_op_abort(call, err);
    }
  }
  memcpy(j->slot, &j->post, sizeof j->post);
  if (call->done != NULL) {
    j->done = call->done;
    j->done_ctx = call->done_ctx;
    int rc =
        call->rdv->join_async(&call->key, call->shard, j->slot, shared_leader,
                              j, call->timeout_s, shared_done, j, err);
    if (rc != 0) { /* not joined: done will not be called */
      jmg_error ignored;
      finish(j, rc, &ignored);
      free(j);
    }
    return rc;
  }
  int rc = call->rdv->join(&call->key, call->shard, j->slot, shared_leader, j,
                           call->timeout_s, err);
  rc = finish(j, rc, err);
  free(j);
  return rc;
}

int jmg_op_abort(jmg_op_call *call, jmg_error *err) {
  call->key.op = call->op->name;
  if (jmg_op_call_is_local(call)) return jmg_local_abort(call, err);
  call->rdv->abort(&call->key, call->shard, err);
  return -(int)err->code;
}

int jmg_op_join(jmg_op_call *call, jmg_shard_io *io, jmg_error *err) {
  call->key.op = call->op->name;
  if (jmg_op_call_is_local(call)) {
    /* No rendezvous: the participant runs its part now (it checks its
     * arguments and tells the others itself). */
    int rc = jmg_local_run(call, io, err);
    if (call->done == NULL) return rc;
    call->done(call->done_ctx, rc, rc != 0 ? err : NULL);
    return 0;
  }
  if (jmg_op_check_local(call->op, io, call->key.nparts, err) != 0)
    return jmg_op_abort(call, err);
  if (call->share != NULL) return join_shared(call, io, err);
  if (call->done != NULL)
    return call->rdv->join_async(&call->key, call->shard, io, jmg_leader_run,
                                 call, call->timeout_s, call->done,
                                 call->done_ctx, err);
  return call->rdv->join(&call->key, call->shard, io, jmg_leader_run, call,
                         call->timeout_s, err);
}
