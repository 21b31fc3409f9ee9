/* A watchdog for communicators that cannot time out by themselves (NCCL,
 * cuda/comm_nccl.c): a call whose partner process died, or never came,
 * would wait in the library forever. One thread of the process watches
 * every guarded call and, once something is wrong, calls the call's fire
 * callback (which aborts the communicator, so that its waits end); the call
 * then turns its result into the watchdog's error.
 *
 * What is wrong, checked in this order every JMG_WATCHDOG_POLL_S:
 *   1. a watched peer's process is dead (common/proc.h, jmg_proc_alive: the
 *      pids that the local executor tells the communicator, comm.h's watch;
 *      0 = not watchable from here, e.g. on another node), or it gave up on
 *      this communicator (comm/quit_mark.h: its own call failed, by its
 *      deadline or otherwise, and the communicator cannot tell us);
 *   2. the library reports an asynchronous error (NCCL's
 *      ncclCommGetAsyncError: a network peer gone, which no pid shows);
 *   3. the deadline: until the call's first agreement completes (every rank
 *      has arrived), the call may wait JAXMG_RENDEZVOUS_TIMEOUT for the
 *      others; after it, no deadline (the timeout bounds the wait for the
 *      others to arrive, never the work: an eigensolve may take minutes).
 *
 * The decision (jmg_watch_check) is a pure function of what it is given, so
 * that it is tested with fake pids and clocks (tests/c/test_comm_watchdog.c);
 * the thread and its list are the rest of this file, tested with real
 * processes. Messages name the op, the rank and its pid, in the words of
 * the processes communicator (comm/comm_processes.c). */
#ifndef JMG_COMM_WATCHDOG_H
#define JMG_COMM_WATCHDOG_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/error.h"

/* How often the watchdog looks, in seconds. */
#define JMG_WATCHDOG_POLL_S 0.05

typedef enum {
  JMG_WATCH_OK = 0,
  JMG_WATCH_PEER_GONE, /* a watched peer's process is dead */
  JMG_WATCH_ASYNC,     /* the library reported an asynchronous error */
  JMG_WATCH_LATE,      /* not every rank arrived by the deadline */
  JMG_WATCH_PEER_QUIT, /* a watched peer gave up on the communicator */
} jmg_watch_verdict;

/* One rank's guarded call (or communicator set-up). */
typedef struct jmg_watch {
  int rank, ranks;
  const int64_t *pids; /* ranks entries, or NULL; 0: not watchable */
  double started;      /* monotonic seconds, when the wait began */
  double timeout_s;    /* JAXMG_RENDEZVOUS_TIMEOUT; <= 0: no deadline */
  int arrived;         /* 1: every rank has arrived (no deadline any more) */
} jmg_watch;

/* What jmg_watch_check looks at: the real ones in the watchdog thread
 * (jmg_proc_alive, the monotonic clock, the library), fakes in the tests. */
typedef struct jmg_watch_probe {
  int (*alive)(void *ctx, int64_t pid); /* 1 alive, 0 dead */
  double (*now)(void *ctx);             /* monotonic seconds */
  int (*async_error)(void *ctx);        /* 0, or the library's error code;
                                           NULL: none to ask */
  int (*quit)(void *ctx, int rank, int64_t pid); /* 1: rank (in pid) gave
                                           up on it; NULL: none to ask */
  void *ctx;
} jmg_watch_probe;

typedef struct jmg_watch_fault {
  jmg_watch_verdict verdict;
  int rank;      /* PEER_GONE: the lowest rank whose process is dead; else -1 */
  int64_t pid;   /* its pid */
  int code;      /* ASYNC: the library's error code */
  double waited; /* seconds since started, when found */
} jmg_watch_fault;

/* The verdict on w now (JMG_WATCH_OK, or what is wrong, with *f filled). */
jmg_watch_verdict jmg_watch_check(const jmg_watch *w, const jmg_watch_probe *p,
                                  jmg_watch_fault *f);

/* The error for fault f of w, naming op (call: what failed, e.g. "NCCL";
 * during: "the call", "the communicator's set-up"; async_words: the
 * library's words for f->code, or NULL). Returns -code. */
int jmg_watch_error(const jmg_watch *w, const jmg_watch_fault *f,
                    const char *during, const char *async_words,
                    const char *op, const char *call, jmg_error *err);

/* Seconds on the monotonic clock. */
double jmg_watch_now(void);

/* Milliseconds on the wall clock (CLOCK_REALTIME): comparable across the
 * processes, and (to NTP's accuracy) across the nodes, of one job. */
int64_t jmg_watch_wall_ms(void);

/* The arrival agreement's verdict. The ranks' first agreement of a call
 * also agrees on when each entered the call (wall clock, ms: first_ms the
 * earliest, last_ms the latest; own_ms this rank's). Where they entered
 * more than w->timeout_s apart, the earliest has given up by its own
 * deadline (JMG_WATCH_LATE), so an agreement that completed anyway
 * completed against what the abandoned call had left in flight (NCCL: a
 * peer's posted data), and nothing after it would: 0, or -JMG_ETIMEDOUT
 * with the error naming op, the rank, the spread and the timeout (the
 * same verdict on every rank that sees the same three numbers). */
int jmg_watch_arrival(const jmg_watch *w, int64_t own_ms, int64_t first_ms,
                      int64_t last_ms, const char *op, const char *call,
                      jmg_error *err);

/* ---- the watchdog thread ------------------------------------------------*/

/* A guarded call: filled by the caller (watch, async_error, fire, ctx),
 * owned by it, and listed with the watchdog between jmg_watchdog_add and
 * jmg_watchdog_remove; watch.pids must stay valid meanwhile. */
typedef struct jmg_watchdog_entry {
  jmg_watch watch;
  /* Called from the watchdog thread while the entry is listed (may be
   * NULL): 0, or the library's asynchronous error. */
  int (*async_error)(void *ctx);
  /* Likewise (may be NULL): 1 where watched peer `rank`, in process pid,
   * gave up on the communicator (comm/quit_mark.h). */
  int (*quit)(void *ctx, int rank, int64_t pid);
  /* Called once, from the watchdog thread while the entry is listed and the
   * watchdog's lock is held, when something is wrong: it must end the
   * call's waits (abort the communicator) and not block on the call. */
  void (*fire)(void *ctx, const jmg_watch_fault *f);
  void *ctx;
  /* The watchdog's. */
  atomic_int arrived;
  int fired;
  jmg_watch_fault fault;
  struct jmg_watchdog_entry *next;
} jmg_watchdog_entry;

/* Lists e (its watch.started set now), starting the thread on first use.
 * Returns 0, or an error naming op (the thread could not be started). */
int jmg_watchdog_add(jmg_watchdog_entry *e, const char *op, jmg_error *err);

/* The call's first agreement completed: every rank has arrived. Lock-free:
 * callable from the call's own thread at any time while e is listed. */
void jmg_watchdog_arrived(jmg_watchdog_entry *e);

/* Unlists e. Once it returns, e's callbacks are neither running nor ever
 * called again. Returns 1 with *f filled if e fired, else 0. */
int jmg_watchdog_remove(jmg_watchdog_entry *e, jmg_watch_fault *f);

#endif
