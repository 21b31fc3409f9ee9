/* Where a call's time goes: with JAXMG_TRACE=1 in the environment, the leader
 * of every call prints one line to stderr naming its steps and the wall time
 * of each, and the engine that ran it ("jaxmg trace potrs float64 N=65536
 * T_A=1024 nrhs=1 on 4: permute apart 21.3 ms, ..., total 250.1 ms, engine
 * cusolvermg, workspace ... bytes"; see jmg_trace_alloc).
 * For measuring, not for production: the steps are marked where the work
 * before them has finished (after a synchronization), so marks cost nothing
 * extra, and nothing at all when tracing is off. One trace per thread: the
 * leader's steps run on its thread, in the ops layer and in the engine. */
#ifndef JMG_COMMON_TRACE_H
#define JMG_COMMON_TRACE_H

#include <stddef.h>

/* Whether JAXMG_TRACE is set to something other than "" or "0". */
int jmg_trace_on(void);

/* Starts this thread's trace of a call; the header is printf-formatted. */
void jmg_trace_begin(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Names the engine of the call traced, printed after the total (the
 * steps come first so that the line reads the same for every engine). */
void jmg_trace_engine(const char *name);

/* Counts `bytes` that the call asked its platform's allocator for (XLA's on
 * GPUs, malloc on CPU devices: every workspace, staging and scratch buffer
 * of jaxmg's, not the libraries' own host memory); the trace prints their
 * sum after the engine ("workspace 2147483648 bytes (2048.0 MiB) in 1
 * allocation"), the memory the call needs beside its inputs and outputs. */
void jmg_trace_alloc(size_t bytes);

/* Ends the step `what`: the time since the previous mark (or the begin). */
void jmg_trace_mark(const char *what);

/* Adds a printf-formatted note after the steps so far, without a time of
 * its own ("tiled potrf [GPU 0: factor 1.20 ms, ...]"): what a step
 * measured inside itself, such as the time each device spent on each kind
 * of work (engine/cusolvermg/tiles.h, the step timer). */
void jmg_trace_note(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Prints the trace (with the total) and ends it. */
void jmg_trace_end(void);

#endif
