/* Handing descriptors between processes (share/fd_pass.c): a forked child
 * offers descriptors of its own making, the parent takes them and reads what
 * the child wrote; offers refuse the wrong giver and count; an offer nobody
 * takes closes without hanging. */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "share/fd_pass.h"
#include "test.h"

/* A memory file holding text: what a CUDA export is to the kernel (a
 * descriptor only its holder can use), with contents to check. */
static int memfd_with(const char *text) {
  int fd = memfd_create("jaxmg-test", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = strlen(text) + 1;
  if (write(fd, text, len) != (ssize_t)len) {
    close(fd);
    return -1;
  }
  return fd;
}

static int reads(int fd, const char *text) {
  char buf[64] = {0};
  ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
  return got == (ssize_t)(strlen(text) + 1) && strcmp(buf, text) == 0;
}

TEST(fd_pass_forked_child_hands_three_descriptors_to_parent) {
  int name_pipe[2], done_pipe[2];
  CHECK(pipe(name_pipe) == 0);
  CHECK(pipe(done_pipe) == 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    int fds[3];
    char texts[3][32];
    for (int i = 0; i < 3; ++i) {
      snprintf(texts[i], sizeof texts[i], "child %ld buffer %d", (long)getpid(),
               i);
      fds[i] = memfd_with(texts[i]);
    }
    char name[JMG_FD_PASS_NAME_LEN] = {0};
    jmg_fd_offer *offer = NULL;
    jmg_error err;
    int rc = jmg_fd_offer_open("test", fds, 3, name, &offer, &err);
    if (write(name_pipe[1], name, sizeof name) != (ssize_t)sizeof name)
      _exit(3);
    char byte;
    if (read(done_pipe[0], &byte, 1) != 1) _exit(4);
    int taken = jmg_fd_offer_close(offer);
    _exit(rc != 0 ? 2 : taken ? 0 : 1);
  }
  char name[JMG_FD_PASS_NAME_LEN];
  CHECK(read(name_pipe[0], name, sizeof name) == (ssize_t)sizeof name);
  int fds[3];
  jmg_error err;
  int rc = jmg_fd_take("test", name, child, fds, 3, 5.0, &err);
  CHECK(write(done_pipe[1], "x", 1) == 1);
  int st = 0;
  waitpid(child, &st, 0);
  if (rc != 0) fprintf(stderr, "  take: %s\n", err.msg);
  CHECK_EQ(rc, 0);
  CHECK(WIFEXITED(st));
  CHECK_EQ(WEXITSTATUS(st), 0);
  for (int i = 0; i < 3; ++i) {
    char text[32];
    snprintf(text, sizeof text, "child %ld buffer %d", (long)child, i);
    CHECK(reads(fds[i], text)); /* the child has exited: ours keep them */
    close(fds[i]);
  }
  close(name_pipe[0]);
  close(name_pipe[1]);
  close(done_pipe[0]);
  close(done_pipe[1]);
}

TEST(fd_pass_refuses_an_offer_served_by_another_process) {
  int fd = memfd_with("mine");
  char name[JMG_FD_PASS_NAME_LEN];
  jmg_fd_offer *offer = NULL;
  jmg_error err;
  CHECK_EQ(jmg_fd_offer_open("test", &fd, 1, name, &offer, &err), 0);
  int got = -1;
  /* Our own offer, but we claim another giver: the credentials disagree. */
  int rc = jmg_fd_take("test", name, getpid() + 1, &got, 1, 2.0, &err);
  CHECK(rc != 0);
  CHECK_CONTAINS(err.msg, "not by process");
  CHECK_EQ(got, -1);
  jmg_fd_offer_close(offer);
  close(fd);
}

TEST(fd_pass_refuses_a_different_count) {
  int fds[2] = {memfd_with("a"), memfd_with("b")};
  char name[JMG_FD_PASS_NAME_LEN];
  jmg_fd_offer *offer = NULL;
  jmg_error err;
  CHECK_EQ(jmg_fd_offer_open("test", fds, 2, name, &offer, &err), 0);
  int got[3] = {-1, -1, -1};
  int rc = jmg_fd_take("test", name, getpid(), got, 3, 2.0, &err);
  CHECK(rc != 0);
  CHECK_CONTAINS(err.msg, "3 were expected");
  for (int i = 0; i < 3; ++i) CHECK_EQ(got[i], -1);
  jmg_fd_offer_close(offer);
  close(fds[0]);
  close(fds[1]);
}

TEST(fd_pass_take_of_unknown_offer_fails_naming_it) {
  int got = -1;
  jmg_error err;
  int rc = jmg_fd_take("potrs", "jaxmg-fd-0-nothing-here", getpid(), &got, 1,
                       1.0, &err);
  CHECK(rc != 0);
  CHECK_CONTAINS(err.msg, "jaxmg-fd-0-nothing-here");
  CHECK_CONTAINS(err.op, "potrs");
  CHECK_EQ(got, -1);
}

TEST(fd_pass_offer_nobody_takes_closes_at_once) {
  int fd = memfd_with("unused");
  char name[JMG_FD_PASS_NAME_LEN];
  jmg_fd_offer *offer = NULL;
  jmg_error err;
  CHECK_EQ(jmg_fd_offer_open("test", &fd, 1, name, &offer, &err), 0);
  CHECK_EQ(jmg_fd_offer_close(offer), 0);
  /* The name is free again: nobody answers it. */
  int got = -1;
  CHECK(jmg_fd_take("test", name, getpid(), &got, 1, 1.0, &err) != 0);
  close(fd);
}
