/* A small test runner in the style of libuv's: named tests in one binary,
 * asserts that print both values and return from the failing test. */
#ifndef JMG_TESTS_TEST_H
#define JMG_TESTS_TEST_H

#include <stdio.h>
#include <string.h>

/* Set by the asserts; read by the runner after each test. */
extern int jmg_test_failed;

#define TEST_FAIL_AT(...)                             \
  do {                                                \
    fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                     \
    fprintf(stderr, "\n");                            \
    jmg_test_failed = 1;                              \
  } while (0)

#define CHECK(cond)                            \
  do {                                         \
    if (!(cond)) {                             \
      TEST_FAIL_AT("CHECK(%s) failed", #cond); \
      return;                                  \
    }                                          \
  } while (0)

#define CHECK_EQ(a, b)                                                  \
  do {                                                                  \
    long long va_ = (long long)(a), vb_ = (long long)(b);               \
    if (va_ != vb_) {                                                   \
      TEST_FAIL_AT("CHECK_EQ(%s, %s): %lld != %lld", #a, #b, va_, vb_); \
      return;                                                           \
    }                                                                   \
  } while (0)

#define CHECK_CONTAINS(haystack, needle)                                    \
  do {                                                                      \
    const char *h_ = (haystack), *n_ = (needle);                            \
    if (h_ == NULL || strstr(h_, n_) == NULL) {                             \
      TEST_FAIL_AT("CHECK_CONTAINS(%s, \"%s\"): got \"%s\"", #haystack, n_, \
                   h_ ? h_ : "(null)");                                     \
      return;                                                               \
    }                                                                       \
  } while (0)

/* Declares a test; list it in tests/c/tests.def too. */
#define TEST(name) void test_##name(void)

#endif
