/* Wall-clock helpers for tests that bound how long something takes. Include
 * after defining _POSIX_C_SOURCE (clock_gettime, nanosleep). */
#ifndef JMG_TESTS_TEST_CLOCK_H
#define JMG_TESTS_TEST_CLOCK_H

#include <errno.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sleeps s seconds, resuming after signals. */
static inline void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts;
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

#endif
