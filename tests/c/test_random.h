/* The C tests' uniform random numbers: a xorshift sequence whose state the
 * test holds, so that each test starts it again from its own seed and its
 * matrices do not depend on which tests ran before it. */
#ifndef JMG_TESTS_TEST_RANDOM_H
#define JMG_TESTS_TEST_RANDOM_H

#include <stdint.h>

/* The next number of the sequence in *state (nonzero), in (-1, 1). */
static inline double test_uniform(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return (double)(*state >> 11) / 4503599627370496.0 - 1.0;
}

#endif
