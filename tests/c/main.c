/* The C test runner: runs every test in tests.def, or those named on the
 * command line, and closes with "N passed, N failed". */
#include <stdio.h>
#include <string.h>

#include "test.h"

int jmg_test_failed;

#define JMG_TEST_DECLARE(name) void test_##name(void);
#include "tests.def"
#undef JMG_TEST_DECLARE

typedef struct {
  const char *name;
  void (*fn)(void);
} test_entry;

static const test_entry g_tests[] = {
#define JMG_TEST_DECLARE(name) {#name, test_##name},
#include "tests.def"
#undef JMG_TEST_DECLARE
};

static int selected(const char *name, int argc, char **argv) {
  if (argc < 2) return 1;
  for (int i = 1; i < argc; ++i)
    if (strcmp(argv[i], name) == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  int passed = 0, failed = 0;
  for (size_t i = 0; i < sizeof g_tests / sizeof g_tests[0]; ++i) {
    if (!selected(g_tests[i].name, argc, argv)) continue;
    jmg_test_failed = 0;
    g_tests[i].fn();
    if (jmg_test_failed) {
      printf("FAIL %s\n", g_tests[i].name);
      ++failed;
    } else {
      printf("ok   %s\n", g_tests[i].name);
      ++passed;
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
