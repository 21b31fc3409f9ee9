/* The C test runner: runs every test in tests.def, or those named on the
 * command line (in the order named), and closes with "N passed, N failed".
 *
 *   jaxmg_c_tests [--list] [--reverse] [--shuffle[=SEED]] [NAME ...]
 *
 * --reverse and --shuffle reorder the tests chosen; a shuffle prints its
 * seed, so that `--shuffle=SEED` repeats it. No test may depend on another
 * having run before it: each starts from the state the process started
 * with, as far as the library keeps process-wide state a test can change
 * (the JAXMG_* environment and the LAPACK routines registered), which the
 * runner puts back before every test. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"
#include "test_lapack.h"

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
enum { NTESTS = sizeof g_tests / sizeof g_tests[0] };

/* ---- the state every test starts from --------------------------------- */

extern char **environ;

/* The JAXMG_* variables as the process started ("NAME=value" copies). */
static char *g_env[256];
static int g_nenv;

static void env_save(void) {
  for (char **e = environ; *e != NULL; ++e)
    if (strncmp(*e, "JAXMG_", 6) == 0 && g_nenv < 256)
      if ((g_env[g_nenv++] = strdup(*e)) == NULL) abort();
}

/* Unsets every JAXMG_* variable a test set, and sets the saved ones back. */
static void env_restore(void) {
  char name[256];
  for (;;) { /* unsetenv changes environ: start over after each */
    int again = 0;
    for (char **e = environ; *e != NULL && !again; ++e) {
      if (strncmp(*e, "JAXMG_", 6) != 0) continue;
      size_t len = strcspn(*e, "=");
      int saved = 0;
      for (int i = 0; i < g_nenv && !saved; ++i)
        saved = strncmp(g_env[i], *e, len + 1) == 0;
      if (saved || len >= sizeof name) continue;
      memcpy(name, *e, len);
      name[len] = '\0';
      unsetenv(name);
      again = 1;
    }
    if (!again) break;
  }
  for (int i = 0; i < g_nenv; ++i) {
    size_t len = strcspn(g_env[i], "=");
    if (len >= sizeof name) continue;
    memcpy(name, g_env[i], len);
    name[len] = '\0';
    setenv(name, g_env[i] + len + 1, 1);
  }
}

/* ---- choosing and ordering ---------------------------------------------- */

static int find(const char *name) {
  for (int i = 0; i < NTESTS; ++i)
    if (strcmp(g_tests[i].name, name) == 0) return i;
  return -1;
}

/* A small, fixed generator: a seed gives the same order anywhere. */
static uint64_t next_random(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

int main(int argc, char **argv) {
  static int order[NTESTS * 4];
  int count = 0, reverse = 0, shuffle = 0, list = 0;
  uint64_t seed = 0;
  for (int a = 1; a < argc; ++a) {
    if (strcmp(argv[a], "--reverse") == 0) {
      reverse = 1;
    } else if (strcmp(argv[a], "--shuffle") == 0) {
      shuffle = 1;
      seed = (uint64_t)time(NULL);
    } else if (strncmp(argv[a], "--shuffle=", 10) == 0) {
      shuffle = 1;
      seed = strtoull(argv[a] + 10, NULL, 10);
    } else if (strcmp(argv[a], "--list") == 0) {
      list = 1;
    } else if (find(argv[a]) < 0) {
      fprintf(stderr, "no test named %s (--list names them)\n", argv[a]);
      return 2;
    } else if (count < NTESTS * 4) {
      order[count++] = find(argv[a]);
    }
  }
  if (count == 0)
    for (int i = 0; i < NTESTS; ++i) order[count++] = i;
  if (reverse)
    for (int i = 0; i < count / 2; ++i) {
      int t = order[i];
      order[i] = order[count - 1 - i];
      order[count - 1 - i] = t;
    }
  if (shuffle) {
    printf("shuffled with --shuffle=%llu\n", (unsigned long long)seed);
    uint64_t s = seed;
    for (int i = count - 1; i > 0; --i) {
      int j = (int)(next_random(&s) % (uint64_t)(i + 1));
      int t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
  }
  if (list) {
    for (int i = 0; i < count; ++i) printf("%s\n", g_tests[order[i]].name);
    return 0;
  }

  env_save();
  int passed = 0, failed = 0;
  for (int i = 0; i < count; ++i) {
    const test_entry *t = &g_tests[order[i]];
    env_restore();
    jmg_test_lapack_forget();
    jmg_test_failed = 0;
    t->fn();
    if (jmg_test_failed) {
      printf("FAIL %s\n", t->name);
      ++failed;
    } else {
      printf("ok   %s\n", t->name);
      ++passed;
    }
    fflush(stdout);
  }
  for (int i = 0; i < g_nenv; ++i) free(g_env[i]);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
