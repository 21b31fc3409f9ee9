/* Handing file descriptors from one process to another on the same node.
 *
 * MPMD on GPUs shares XLA's buffers as CUDA VMM allocations exported to POSIX
 * file descriptors (share/cuda_share.c); a descriptor means something only in
 * the process that holds it, so it must travel through the kernel: SCM_RIGHTS
 * over a Unix socket. The giver does not know the taker (the leader) when it
 * joins a call, and is blocked in the rendezvous after that, so it offers its
 * descriptors on a listening socket of its own, served by a thread, and posts
 * the socket's name; the taker connects and receives them all at once.
 *
 * The socket is in Linux's abstract namespace (no file to clean up after a
 * crash) under a name with random bits, and both ends check the other's
 * credentials: the giver serves only its own user, the taker accepts
 * descriptors only from the process that posted the name. */
#ifndef JMG_SHARE_FD_PASS_H
#define JMG_SHARE_FD_PASS_H

#include <sys/types.h>

#include "common/error.h"

#define JMG_FD_PASS_MAX 8       /* descriptors in one offer */
#define JMG_FD_PASS_NAME_LEN 48 /* an offer's name, NUL-terminated */

typedef struct jmg_fd_offer jmg_fd_offer;

/* Offers fds[0 .. nfds) (still owned by the caller, who must keep them open
 * until jmg_fd_offer_close) to the first process of this user that takes
 * them. Writes the offer's name to name. */
int jmg_fd_offer_open(const char *op, const int *fds, int nfds,
                      char name[JMG_FD_PASS_NAME_LEN], jmg_fd_offer **out,
                      jmg_error *err);

/* Whether the offer was taken. Stops serving it, and frees it. */
int jmg_fd_offer_close(jmg_fd_offer *offer);

/* Takes the offer called name from process giver: fds[0 .. nfds) receive
 * new descriptors of this process (close-on-exec), which the caller closes.
 * Fails, after at most timeout_s seconds, when no such offer is served, when
 * it is served by another process, or when it holds another count. */
int jmg_fd_take(const char *op, const char *name, pid_t giver, int *fds,
                int nfds, double timeout_s, jmg_error *err);

#endif
