/* The system's LAPACK (liblapack.so.3) for the C tests, its routines
 * registered as the Python layer registers SciPy's (engine/lapack/table.h).
 * Where it is absent, a test that needs it says so and checks nothing
 * (NEED_LAPACK). Registration is global: the runner forgets every routine
 * before each test (jmg_test_lapack_forget), so a test registers what it
 * uses and finds nothing registered by another. */
#ifndef JMG_TESTS_TEST_LAPACK_H
#define JMG_TESTS_TEST_LAPACK_H

#include <stddef.h>
#include <stdio.h>

/* The library, opened once and kept open (what it registered stays valid);
 * NULL where it is absent. */
void *jmg_test_lapack(void);

/* Registers names[0 .. count-1] (LAPACK's: "dpotrf", ...) from it: 1 when
 * every one was, 0 where the library or a routine is missing. */
int jmg_test_lapack_register(const char *const *names, size_t count);

/* Forgets every routine registered, by anyone: the table as the process
 * started. The runner calls it before each test. */
void jmg_test_lapack_forget(void);

/* In a test: returns from it, saying why, where `have` is 0. */
#define NEED_LAPACK(have)                                                \
  do {                                                                   \
    if (!(have)) {                                                       \
      fprintf(stderr, "  (no liblapack.so.3 here: nothing to check)\n"); \
      return;                                                            \
    }                                                                    \
  } while (0)

#endif
