/* JAXMG_TRACE: one line per call with the time of each step (trace.h). */
#define _POSIX_C_SOURCE 200809L
#include "common/trace.h"

#include "common/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct trace {
  int active;
  double start, last;
  size_t len;
  char text[2048];
  char engine[32];
  size_t alloc_bytes; /* what the call asked its platform's allocator for */
  int allocs;
} trace;

static _Thread_local trace t_trace;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int jmg_trace_on(void) {
  jmg_config c;
  jmg_config_read(&c);
  return c.trace;
}

static void vappend(trace *t, const char *fmt, va_list ap) {
  if (t->len >= sizeof t->text) return;
  int w = vsnprintf(t->text + t->len, sizeof t->text - t->len, fmt, ap);
  if (w > 0) t->len += (size_t)w;
  if (t->len > sizeof t->text) t->len = sizeof t->text;
}

static void append(trace *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vappend(t, fmt, ap);
  va_end(ap);
}

void jmg_trace_begin(const char *fmt, ...) {
  trace *t = &t_trace;
  t->active = jmg_trace_on();
  if (!t->active) return;
  t->len = 0;
  append(t, "jaxmg trace ");
  va_list ap;
  va_start(ap, fmt);
  vappend(t, fmt, ap);
  va_end(ap);
  append(t, ":");
  t->engine[0] = '\0';
  t->alloc_bytes = 0;
  t->allocs = 0;
  t->start = t->last = now();
}

void jmg_trace_alloc(size_t bytes) {
  trace *t = &t_trace;
  if (!t->active) return;
  t->alloc_bytes += bytes;
  t->allocs += 1;
}

void jmg_trace_engine(const char *name) {
  trace *t = &t_trace;
  if (!t->active) return;
  snprintf(t->engine, sizeof t->engine, "%s", name);
}

void jmg_trace_mark(const char *what) {
  trace *t = &t_trace;
  if (!t->active) return;
  double n = now();
  append(t, " %s %.2f ms,", what, 1e3 * (n - t->last));
  t->last = n;
}

void jmg_trace_note(const char *fmt, ...) {
  trace *t = &t_trace;
  if (!t->active) return;
  append(t, " ");
  va_list ap;
  va_start(ap, fmt);
  vappend(t, fmt, ap);
  va_end(ap);
  append(t, ",");
}

void jmg_trace_end(void) {
  trace *t = &t_trace;
  if (!t->active) return;
  append(t, " total %.2f ms", 1e3 * (now() - t->start));
  if (t->engine[0] != '\0') append(t, ", engine %s", t->engine);
  append(t, ", workspace %zu bytes (%.1f MiB) in %d allocation%s",
         t->alloc_bytes, (double)t->alloc_bytes / (1024.0 * 1024.0), t->allocs,
         t->allocs == 1 ? "" : "s");
  /* vsnprintf keeps the text NUL-terminated, truncated or not. */
  fprintf(stderr, "%s\n", t->text);
  t->active = 0;
}
