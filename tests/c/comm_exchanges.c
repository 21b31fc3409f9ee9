/* The exchanges every communicator's tests run (comm_exchanges.h). */
#include "comm_exchanges.h"

#include <stdlib.h>

int comm_rounds(const jmg_comm_ops *o, jmg_comm *c, int rank, int ranks,
                int *bad, jmg_error *err) {
  int rc = 0;
  for (int round = 0; rc == 0 && round < 20; ++round) {
    int v = rank * 7 + round;
    rc = o->max_int(c, &v, NULL, "test", err);
    if (rc == 0 && v != (ranks - 1) * 7 + round) *bad = 1;
    long out = (long)rank * 1000 + round, in = -1;
    const int next = (rank + 1) % ranks;
    const int prev = (rank + ranks - 1) % ranks;
    if (rc == 0) rc = o->group_begin("test", err);
    if (rc == 0) rc = o->send(c, &out, sizeof out, next, NULL, "test", err);
    if (rc == 0) rc = o->recv(c, &in, sizeof in, prev, NULL, "test", err);
    if (rc == 0) rc = o->group_end("test", err);
    if (rc == 0 && in != (long)prev * 1000 + round) *bad = 1;
    int word = rank == round % ranks ? 4242 + round : 0;
    if (rc == 0)
      rc = o->bcast(c, &word, sizeof word, round % ranks, NULL, "test", err);
    if (rc == 0 && word != 4242 + round) *bad = 1;
  }
  return rc;
}

/* Byte k of rank p's big message. */
static unsigned char big_byte(int p, size_t k) {
  return (unsigned char)(p * 31 + (int)(k % 251));
}

/* Sends, then receives, every rank's many small messages and big one. */
static int exchange(const jmg_comm_ops *o, jmg_comm *c, int ranks, int many,
                    size_t big, const int *out, int *in,
                    const unsigned char *big_out, unsigned char *big_in,
                    jmg_error *err) {
  int rc = o->group_begin("test", err);
  for (int p = 0; rc == 0 && p < ranks; ++p) {
    for (int m = 0; rc == 0 && m < many; ++m)
      rc = o->send(c, &out[p * many + m], sizeof(int), p, NULL, "test", err);
    if (rc == 0) rc = o->send(c, big_out, big, p, NULL, "test", err);
  }
  for (int p = 0; rc == 0 && p < ranks; ++p) {
    for (int m = 0; rc == 0 && m < many; ++m)
      rc = o->recv(c, &in[p * many + m], sizeof(int), p, NULL, "test", err);
    if (rc == 0)
      rc = o->recv(c, big_in + (size_t)p * big, big, p, NULL, "test", err);
  }
  if (rc == 0) rc = o->group_end("test", err);
  return rc;
}

/* Broadcasts from every root, in one group. */
static int bcast_from_every_root(const jmg_comm_ops *o, jmg_comm *c, int rank,
                                 int ranks, int *bad, jmg_error *err) {
  int words[16];
  for (int p = 0; p < ranks; ++p) words[p] = p == rank ? 100 + p : -1;
  int rc = o->group_begin("test", err);
  for (int p = 0; rc == 0 && p < ranks; ++p)
    rc = o->bcast(c, &words[p], sizeof words[p], p, NULL, "test", err);
  if (rc == 0) rc = o->group_end("test", err);
  for (int p = 0; rc == 0 && p < ranks; ++p)
    if (words[p] != 100 + p) *bad = 1;
  return rc;
}

int comm_big_exchange(const jmg_comm_ops *o, jmg_comm *c, int rank, int ranks,
                      int many, size_t big, int *bad, jmg_error *err) {
  const size_t small = (size_t)ranks * (size_t)many;
  int *out = malloc(small * sizeof *out);
  int *in = malloc(small * sizeof *in);
  unsigned char *big_out = malloc(big), *big_in = malloc((size_t)ranks * big);
  int rc = 0;
  if (ranks > 16 || !out || !in || !big_out || !big_in) {
    *bad = 1;
  } else {
    for (int p = 0; p < ranks; ++p)
      for (int m = 0; m < many; ++m)
        out[p * many + m] = (rank * 100 + p) * many + m;
    for (size_t k = 0; k < big; ++k) big_out[k] = big_byte(rank, k);
    rc = exchange(o, c, ranks, many, big, out, in, big_out, big_in, err);
    for (int p = 0; rc == 0 && p < ranks; ++p) {
      for (int m = 0; m < many; ++m)
        if (in[p * many + m] != (p * 100 + rank) * many + m) *bad = 1;
      for (size_t k = 0; k < big; k += 997)
        if (big_in[(size_t)p * big + k] != big_byte(p, k)) *bad = 1;
    }
    if (rc == 0) rc = bcast_from_every_root(o, c, rank, ranks, bad, err);
  }
  free(out), free(in), free(big_out), free(big_in);
  return rc;
}
