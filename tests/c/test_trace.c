/* JAXMG_TRACE's line (common/trace.h): the steps with their times, a note
 * without a time of its own where it was added, then the total, the engine
 * and the workspace; nothing at all with tracing off. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/trace.h"
#include "test.h"

/* Runs a traced call's steps with stderr sent to a file; its text into
 * out (empty where nothing was printed). Returns 0, or -1 where stderr
 * could not be redirected. */
static int traced(const char *setting, char *out, size_t len) {
  out[0] = '\0';
  FILE *f = tmpfile();
  if (f == NULL) return -1;
  fflush(stderr);
  const int saved = dup(fileno(stderr));
  if (saved < 0 || dup2(fileno(f), fileno(stderr)) < 0) {
    fclose(f);
    return -1;
  }
  const char *before = getenv("JAXMG_TRACE");
  char *keep = before != NULL ? strdup(before) : NULL;
  setenv("JAXMG_TRACE", setting, 1);
  jmg_trace_begin("potrs float64 N=%d on %d", 64, 2);
  jmg_trace_mark("permute");
  jmg_trace_note("tiled potrf [GPU 0: factor %.2f ms; GPU 1: update %.2f ms]",
                 1.25, 3.5);
  jmg_trace_mark("potrf");
  jmg_trace_engine("cusolvermg");
  jmg_trace_end();
  if (keep != NULL) {
    setenv("JAXMG_TRACE", keep, 1);
    free(keep);
  } else {
    unsetenv("JAXMG_TRACE");
  }
  fflush(stderr);
  dup2(saved, fileno(stderr));
  close(saved);
  rewind(f);
  const size_t n = fread(out, 1, len - 1, f);
  out[n] = '\0';
  fclose(f);
  return 0;
}

TEST(trace_note_sits_between_the_steps_without_a_time) {
  char out[4096];
  CHECK_EQ(traced("1", out, sizeof out), 0);
  CHECK_CONTAINS(out, "jaxmg trace potrs float64 N=64 on 2: permute ");
  CHECK_CONTAINS(out,
                 " ms, tiled potrf [GPU 0: factor 1.25 ms; GPU 1: update "
                 "3.50 ms], potrf ");
  CHECK_CONTAINS(out, ", engine cusolvermg, workspace 0 bytes");
  /* The note comes after the first step and before the second. */
  const char *permute = strstr(out, "permute"), *note = strstr(out, "tiled"),
             *potrf = strstr(out, "], potrf");
  CHECK(permute != NULL && note != NULL && potrf != NULL);
  CHECK(permute < note && note < potrf);
}

TEST(trace_off_prints_nothing_notes_included) {
  char out[4096];
  CHECK_EQ(traced("0", out, sizeof out), 0);
  CHECK_EQ(strlen(out), 0);
}
