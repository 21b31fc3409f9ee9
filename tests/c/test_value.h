/* The values the rendezvous tests hand around (join_value): a pattern that
 * tells one call's value from another's, a stale value as a participant's
 * buffer may hold from an earlier call, and the check for an empty one. */
#ifndef JMG_TESTS_TEST_VALUE_H
#define JMG_TESTS_TEST_VALUE_H

#include <string.h>

#include "rendezvous/rendezvous.h"

/* Fills v with len bytes of seed's pattern (len <= JMG_RDV_MAX_VALUE bytes
 * are written; a larger len is kept, for the leader that gives too much). */
static inline void value_fill(jmg_rdv_value *v, size_t len, int seed) {
  v->len = len;
  for (size_t i = 0; i < len && i < JMG_RDV_MAX_VALUE; ++i)
    v->bytes[i] = (unsigned char)(seed * 31 + (int)i);
}

/* Whether v is seed's pattern, len bytes long. */
static inline int value_is(const jmg_rdv_value *v, size_t len, int seed) {
  if (v->len != len) return 0;
  for (size_t i = 0; i < len; ++i)
    if (v->bytes[i] != (unsigned char)(seed * 31 + (int)i)) return 0;
  return 1;
}

static inline void value_stale(jmg_rdv_value *v) {
  memset(v->bytes, 0xab, sizeof v->bytes);
  v->len = 77;
}

/* Whether v is empty: no length and no leftover bytes. */
static inline int value_empty(const jmg_rdv_value *v) {
  if (v->len != 0) return 0;
  for (size_t i = 0; i < JMG_RDV_MAX_VALUE; ++i)
    if (v->bytes[i] != 0) return 0;
  return 1;
}

#endif
