/* A call's identity, as both rendezvous implementations store and compare
 * it: the key with the op name copied in (the key only points to it). Plain
 * data, so that it can also live in shared memory. Internal to this layer. */
#ifndef JMG_RENDEZVOUS_CALL_IDENT_H
#define JMG_RENDEZVOUS_CALL_IDENT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rendezvous/rendezvous.h"

#define JMG_RDV_OP_LEN 32

typedef struct jmg_call_ident {
  char op[JMG_RDV_OP_LEN];
  int64_t mesh_id, run_id, seq;
  int nparts;
} jmg_call_ident;

static inline jmg_call_ident jmg_call_ident_of(const jmg_rdv_key *key) {
  jmg_call_ident id;
  memset(&id, 0, sizeof id);
  snprintf(id.op, sizeof id.op, "%s", key->op ? key->op : "");
  id.mesh_id = key->mesh_id;
  id.run_id = key->run_id;
  id.seq = key->seq;
  id.nparts = key->nparts;
  return id;
}

static inline int jmg_call_ident_same(const jmg_call_ident *a,
                                      const jmg_call_ident *b) {
  return a->mesh_id == b->mesh_id && a->run_id == b->run_id &&
         a->seq == b->seq && a->nparts == b->nparts &&
         strncmp(a->op, b->op, JMG_RDV_OP_LEN) == 0;
}

/* The error every participant of a call gets when participant `shard`
 * aborts it: why's code and call, and its message prefixed with the shard. */
static inline void jmg_rdv_abort_error(const jmg_call_ident *id, int shard,
                                       const jmg_error *why, jmg_error *out) {
  char reason[JMG_ERROR_MSG_LEN];
  snprintf(reason, sizeof reason, "%s", why ? why->msg : "failed");
  jmg_error_set(out, why ? why->code : JMG_EPEER, id->op,
                why ? why->call : "rendezvous", "shard %d failed: %s", shard,
                reason);
}

#endif
