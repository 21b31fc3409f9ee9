/* The error model of jaxmg, in one place.
 *
 * Every fallible function returns an int: 0 on success, a negative jmg_status
 * on failure, and fills a jmg_error that the caller owns. The error carries the
 * op that failed ("potrs"), the call that failed ("dpotrf",
 * "cudaMemcpyPeerAsync", "rendezvous") and a message that includes the vendor's
 * own error string.
 *
 * Numerical failure (a matrix that is not positive definite) is not an error:
 * it is data (the solver's info) returned to the user as a status, with NaN
 * outputs. The statuses, the same on every engine:
 *   0                   success;
 *   k > 0               the solver's info, LAPACK's convention (potrs,
 *                       potri: the leading minor of order k is not
 *                       positive definite; lu_solve: U(k, k) is exactly
 *                       zero, the first such pivot; syevd, gesvd: the
 *                       solver did not converge; qr: never; Python's
 *                       least_squares: R(k, k) negligible, A's rank
 *                       deficient, see jaxmg._src.core.least_squares);
 *   JMG_INFO_NONFINITE  A has a NaN or an Inf entry (anywhere, in any
 *                       triangle): no solver ran (exec/finite.h). */
#ifndef JMG_COMMON_ERROR_H
#define JMG_COMMON_ERROR_H

#include <stddef.h>

/* X-macro table: name, value, description. One table yields the codes,
 * their names and their messages. */
#define JMG_STATUS_TABLE(X)                                           \
  X(JMG_OK, 0, "success")                                             \
  X(JMG_EINVAL, 1, "invalid argument")                                \
  X(JMG_ENOMEM, 2, "out of memory")                                   \
  X(JMG_ETIMEDOUT, 3, "timed out waiting for the other participants") \
  X(JMG_EPEER, 4, "another participant of the call failed")           \
  X(JMG_ELAPACK, 5, "LAPACK error")                                   \
  X(JMG_ECUDA, 6, "CUDA runtime error")                               \
  X(JMG_ECUSOLVER, 7, "cuSOLVER error")                               \
  X(JMG_EUNSUPPORTED, 8, "unsupported")                               \
  X(JMG_EINTERNAL, 9, "internal error")

typedef enum {
#define JMG_STATUS_ENUM(name, value, text) name = value,
  JMG_STATUS_TABLE(JMG_STATUS_ENUM)
#undef JMG_STATUS_ENUM
} jmg_status;

/* The status of a call whose A has a NaN or an Inf entry. */
#define JMG_INFO_NONFINITE (-1)

#define JMG_ERROR_OP_LEN 32
#define JMG_ERROR_CALL_LEN 64
#define JMG_ERROR_MSG_LEN 400

typedef struct jmg_error {
  jmg_status code;
  char op[JMG_ERROR_OP_LEN];     /* "potrs", "syevd", ... or "" */
  char call[JMG_ERROR_CALL_LEN]; /* the call that failed */
  char msg[JMG_ERROR_MSG_LEN];   /* what went wrong, in words */
} jmg_error;

/* Resets err to "no error". */
void jmg_error_clear(jmg_error *err);

/* Fills err and returns -code, so that `return jmg_error_set(...)` reads well.
 * op or call may be NULL. The message is printf-formatted and truncated to fit.
 */
int jmg_error_set(jmg_error *err, jmg_status code, const char *op,
                  const char *call, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Names op in err where no op is named yet: the first op named is kept
 * (an inner call's, which is the more precise). */
void jmg_error_name_op(jmg_error *err, const char *op);

/* For a failed system call: "what: <strerror(errnum)>", with code. */
int jmg_error_sys(jmg_error *err, jmg_status code, const char *op,
                  const char *call, int errnum, const char *what);

/* The status a system call's errno means: JMG_ENOMEM for ENOMEM and ENOSPC
 * (shared memory is memory), else JMG_EINTERNAL. */
jmg_status jmg_errno_status(int errnum);

/* Copies src into dst (both caller-owned). */
void jmg_error_copy(jmg_error *dst, const jmg_error *src);

/* The code's name ("JMG_EINVAL") and description ("invalid argument"). */
const char *jmg_status_name(int code);
const char *jmg_status_text(int code);

/* Formats "jaxmg.<op>: <call>: <msg> [<NAME>]" into buf; returns buf. */
char *jmg_error_format(const jmg_error *err, char *buf, size_t len);

#endif
