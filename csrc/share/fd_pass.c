/* Handing file descriptors between processes: SCM_RIGHTS over an abstract
 * Unix socket, one offer served by one thread (see fd_pass.h). */
#define _GNU_SOURCE /* struct ucred, accept4, SOCK_CLOEXEC, MSG_CMSG_CLOEXEC \
                     */
#include "share/fd_pass.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct jmg_fd_offer {
  int listen_fd;
  int stop[2]; /* a pipe: a byte on stop[1] ends the serving thread */
  int nfds;
  int fds[JMG_FD_PASS_MAX];
  int taken;
  pthread_t thread;
};

static int sys_error(jmg_error *err, const char *op, const char *call,
                     const char *what) {
  return jmg_error_sys(err, jmg_errno_status(errno), op, call, errno, what);
}

/* The abstract address of name: a leading NUL, then the name, no NUL after. */
static socklen_t address(const char *name, struct sockaddr_un *sa) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  size_t len = strlen(name);
  memcpy(sa->sun_path + 1, name, len);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

static void random_name(char name[JMG_FD_PASS_NAME_LEN]) {
  uint64_t bits = 0;
  if (getrandom(&bits, sizeof bits, 0) != (ssize_t)sizeof bits) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    bits = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
           ((uint64_t)(uintptr_t)name << 7);
  }
  snprintf(name, JMG_FD_PASS_NAME_LEN, "jaxmg-fd-%ld-%016llx", (long)getpid(),
           (unsigned long long)bits);
}

/* Sends the offer's descriptors on a connected socket. */
static int send_fds(int conn, const jmg_fd_offer *o) {
  int32_t count = o->nfds;
  struct iovec iov = {&count, sizeof count};
  union {
    char buf[CMSG_SPACE(sizeof(int) * JMG_FD_PASS_MAX)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {0};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)o->nfds);
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)o->nfds);
  memcpy(CMSG_DATA(c), o->fds, sizeof(int) * (size_t)o->nfds);
  ssize_t sent;
  do {
    sent = sendmsg(conn, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == (ssize_t)sizeof count ? 0 : -1;
}

static void *serve(void *arg) {
  jmg_fd_offer *o = arg;
  for (;;) {
    struct pollfd p[2] = {{o->listen_fd, POLLIN, 0}, {o->stop[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return NULL;
    }
    if (p[1].revents != 0) return NULL;
    int conn = accept4(o->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (conn < 0) continue; /* EAGAIN (the listener is non-blocking), ... */
    struct ucred cred;
    socklen_t len = sizeof cred;
    int ours = getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
               cred.uid == getuid();
    int sent = ours && send_fds(conn, o) == 0;
    close(conn);
    if (sent) {
      o->taken = 1;
      return NULL;
    }
  }
}

int jmg_fd_offer_open(const char *op, const int *fds, int nfds,
                      char name[JMG_FD_PASS_NAME_LEN], jmg_fd_offer **out,
                      jmg_error *err) {
  *out = NULL;
  if (nfds < 1 || nfds > JMG_FD_PASS_MAX)
    return jmg_error_set(err, JMG_EINTERNAL, op, "fd offer",
                         "%d descriptors offered; 1 to %d can be", nfds,
                         JMG_FD_PASS_MAX);
  jmg_fd_offer *o = calloc(1, sizeof *o);
  if (o == NULL)
    return jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                         "cannot allocate a descriptor offer");
  o->listen_fd = -1;
  o->stop[0] = o->stop[1] = -1;
  o->nfds = nfds;
  memcpy(o->fds, fds, sizeof(int) * (size_t)nfds);
  int rc = 0;
  o->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (o->listen_fd < 0) rc = sys_error(err, op, "socket", "AF_UNIX");
  /* A random name cannot be squatted in advance; retry the rare collision. */
  for (int tries = 0; rc == 0 && tries < 8; ++tries) {
    struct sockaddr_un sa;
    random_name(name);
    if (bind(o->listen_fd, (struct sockaddr *)&sa, address(name, &sa)) == 0)
      break;
    if (errno != EADDRINUSE || tries == 7)
      rc = sys_error(err, op, "bind", name);
  }
  if (rc == 0 && listen(o->listen_fd, 4) != 0)
    rc = sys_error(err, op, "listen", name);
  if (rc == 0 && pipe2(o->stop, O_CLOEXEC) != 0)
    rc = sys_error(err, op, "pipe2", "the offer's stop pipe");
  if (rc == 0) {
    int e = pthread_create(&o->thread, NULL, serve, o);
    if (e != 0) {
      errno = e;
      rc = sys_error(err, op, "pthread_create", "the offer's server");
    }
  }
  if (rc != 0) {
    if (o->listen_fd >= 0) close(o->listen_fd);
    if (o->stop[0] >= 0) close(o->stop[0]);
    if (o->stop[1] >= 0) close(o->stop[1]);
    free(o);
    return rc;
  }
  *out = o;
  return 0;
}

int jmg_fd_offer_close(jmg_fd_offer *o) {
  if (o == NULL) return 0;
  ssize_t w;
  do {
    w = write(o->stop[1], "x", 1);
  } while (w < 0 && errno == EINTR);
  pthread_join(o->thread, NULL);
  int taken = o->taken;
  close(o->listen_fd);
  close(o->stop[0]);
  close(o->stop[1]);
  free(o);
  return taken;
}

int jmg_fd_take(const char *op, const char *name, pid_t giver, int *fds,
                int nfds, double timeout_s, jmg_error *err) {
  for (int i = 0; i < nfds; ++i) fds[i] = -1;
  if (nfds < 1 || nfds > JMG_FD_PASS_MAX)
    return jmg_error_set(err, JMG_EINTERNAL, op, "fd take",
                         "%d descriptors asked for; 1 to %d can be", nfds,
                         JMG_FD_PASS_MAX);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return sys_error(err, op, "socket", "AF_UNIX");
  struct timeval tv;
  tv.tv_sec = (time_t)timeout_s;
  tv.tv_usec = (suseconds_t)((timeout_s - (double)tv.tv_sec) * 1e6);
  int rc = 0;
  struct sockaddr_un sa;
  if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
    rc = sys_error(err, op, "setsockopt", "SO_RCVTIMEO");
  if (rc == 0 && connect(s, (struct sockaddr *)&sa, address(name, &sa)) != 0)
    rc = sys_error(err, op, "connect", name);
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (rc == 0 && getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    rc = sys_error(err, op, "getsockopt", "SO_PEERCRED");
  if (rc == 0 && cred.pid != giver)
    rc = jmg_error_set(err, JMG_EINTERNAL, op, "fd take",
                       "offer %s is served by process %ld, not by process %ld "
                       "that posted it",
                       name, (long)cred.pid, (long)giver);
  int32_t count = 0;
  union {
    char buf[CMSG_SPACE(sizeof(int) * JMG_FD_PASS_MAX)];
    struct cmsghdr align;
  } control;
  struct iovec iov = {&count, sizeof count};
  struct msghdr msg = {0};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  ssize_t got = 0;
  if (rc == 0) {
    do {
      got = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
    } while (got < 0 && errno == EINTR);
    if (got < 0) rc = sys_error(err, op, "recvmsg", name);
  }
  int received = 0;
  int in[JMG_FD_PASS_MAX];
  if (rc == 0) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL;
         c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < k; ++i) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof fd);
        if (received < JMG_FD_PASS_MAX)
          in[received++] = fd;
        else
          close(fd);
      }
    }
    if (got != (ssize_t)sizeof count || (msg.msg_flags & MSG_CTRUNC) ||
        count != nfds || received != nfds)
      rc = jmg_error_set(err, JMG_EINTERNAL, op, "fd take",
                         "offer %s gave %d descriptors (announced %d, %zd "
                         "bytes); %d were expected",
                         name, received, (int)count, got, nfds);
  }
  close(s);
  for (int i = 0; i < received; ++i) {
    if (rc == 0)
      fds[i] = in[i];
    else
      close(in[i]);
  }
  return rc;
}
