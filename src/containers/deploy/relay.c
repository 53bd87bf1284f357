/*
 * ocx2-container-relay NETNS SOCKET PORT: the relay to a container's proxy (docs/containers.md
 * section 12). It joins the network namespace NETNS (/proc/PID/ns/net of the container) but keeps
 * the host's file system, and makes port PORT of the container's loopback reachable at the host's
 * Unix socket SOCKET. A static C program, not Node: it is on the path from the request to the id,
 * and it starts in a millisecond where Node takes tens.
 *
 * It listens at once and prints "listening"; a connection it accepts waits, unread, until the
 * proxy accepts the connection made for it (tried again every 3 ms, with no deadline), so the
 * server's one dial needs no retry while the container starts; it prints "reached" once it relays
 * one. On the line "gone" on its standard input (the container ended) every connection waiting
 * and every later one is answered HTTP 503: there is no proxy to wait for. It ends when its
 * standard input does: the server that started it is gone; and then it kills the container's
 * first process (PID of NETNS, the sandbox's init: the whole container goes with it), through a
 * pidfd opened as it started, so a pid used again meanwhile is never signalled. Bubblewrap's
 * --die-with-parent should have done that already, but a bubblewrap whose parent died around its
 * start was seen to live on.
 *
 * Built by bin/fusemountfd.mjs with `gcc -static` into dist/ocx2-container-relay.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_PAIRS 64
#define BUFFER (64 * 1024)

/* one direction of a pair: what was read from `from` and not yet written to `to` */
struct flow {
  char data[BUFFER];
  size_t start, end;
  int eof; /* `from` ended: once drained, `to` is shut for writing */
  int shut;
};

struct pair {
  int down; /* the server's connection, on SOCKET */
  int up;   /* ours to the proxy: -1 while the proxy is not listening yet */
  int connecting;
  struct flow toUp, toDown;
};

static struct pair pairs[MAX_PAIRS];
static int pairCount = 0;
static int port;
static int gone = 0;
static int reached = 0;

static void say(const char *line) {
  ssize_t ignored = write(1, line, strlen(line));
  (void)ignored;
}

static void closePair(int i) {
  close(pairs[i].down);
  if (pairs[i].up >= 0) close(pairs[i].up);
  pairs[i] = pairs[--pairCount];
}

static void turnAway(int fd) {
  static const char answer[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  ssize_t ignored = write(fd, answer, sizeof answer - 1);
  (void)ignored;
  shutdown(fd, SHUT_WR);
  close(fd);
}

/* a non-blocking connection to the proxy begun: -1 when refused at once */
static int dial(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 || errno == EINPROGRESS) return fd;
  close(fd);
  return -1;
}

/* moves what it can of one direction; 0 on an error (the pair ends) */
static int pump(int from, int to, struct flow *f, short fromEvents) {
  if (!f->eof && f->end < BUFFER && (fromEvents & (POLLIN | POLLHUP | POLLERR))) {
    ssize_t n = read(from, f->data + f->end, BUFFER - f->end);
    if (n > 0) f->end += (size_t)n;
    else if (n == 0) f->eof = 1;
    else if (errno != EAGAIN && errno != EINTR) return 0;
  }
  /* written at once, whether or not `to` was polled: a non-blocking write that cannot is EAGAIN */
  if (f->start < f->end) {
    ssize_t n = write(to, f->data + f->start, f->end - f->start);
    if (n > 0) f->start += (size_t)n;
    else if (n < 0 && errno != EAGAIN && errno != EINTR) return 0;
    if (f->start == f->end) f->start = f->end = 0;
  }
  if (f->eof && f->start == f->end && !f->shut) {
    shutdown(to, SHUT_WR);
    f->shut = 1;
  }
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ocx2-container-relay NETNS SOCKET PORT\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  port = atoi(argv[3]);
  int container = -1, pid;
  if (sscanf(argv[1], "/proc/%d/ns/net", &pid) == 1) container = (int)syscall(SYS_pidfd_open, pid, 0);
  int ns = open(argv[1], O_RDONLY | O_CLOEXEC);
  if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
    fprintf(stderr, "ocx2-container-relay: cannot join the network namespace %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  close(ns);
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  if (strlen(argv[2]) >= sizeof addr.sun_path) {
    fprintf(stderr, "ocx2-container-relay: the socket's path is too long: %s\n", argv[2]);
    return 1;
  }
  strcpy(addr.sun_path, argv[2]);
  if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 16) != 0) {
    fprintf(stderr, "ocx2-container-relay: cannot listen at %s: %s\n", argv[2], strerror(errno));
    return 1;
  }
  say("listening\n");

  struct pollfd fds[2 + 2 * MAX_PAIRS];
  for (;;) {
    int waiting = 0;
    int n = 0;
    fds[n++] = (struct pollfd){ .fd = 0, .events = POLLIN };
    fds[n++] = (struct pollfd){ .fd = pairCount < MAX_PAIRS ? listener : -1, .events = POLLIN };
    for (int i = 0; i < pairCount; i++) {
      struct pair *p = &pairs[i];
      if (p->up < 0) {
        waiting = 1;
        fds[n++] = (struct pollfd){ .fd = -1 };
        fds[n++] = (struct pollfd){ .fd = -1 };
        continue;
      }
      short down = 0, up = 0;
      if (p->connecting) up = POLLOUT;
      else {
        if (!p->toUp.eof && p->toUp.end < BUFFER) down |= POLLIN;
        if (!p->toDown.eof && p->toDown.end < BUFFER) up |= POLLIN;
        if (p->toUp.start < p->toUp.end) up |= POLLOUT;
        if (p->toDown.start < p->toDown.end) down |= POLLOUT;
      }
      fds[n++] = (struct pollfd){ .fd = p->down, .events = down };
      fds[n++] = (struct pollfd){ .fd = p->up, .events = up };
    }
    if (poll(fds, (nfds_t)n, waiting ? 3 : -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (fds[0].revents) {
      char line[256];
      ssize_t got = read(0, line, sizeof line - 1);
      if (got <= 0) {
        if (container >= 0) syscall(SYS_pidfd_send_signal, container, SIGKILL, NULL, 0);
        return 0;
      }
      line[got] = 0;
      if (strstr(line, "gone") != NULL) gone = 1;
    }
    /* the pairs first, by the slots polled; new connections after */
    for (int i = pairCount - 1; i >= 0; i--) {
      struct pair *p = &pairs[i];
      short down = fds[2 + 2 * i].revents, up = fds[2 + 2 * i + 1].revents;
      if (p->up < 0) {
        if (gone) {
          turnAway(p->down);
          pairs[i] = pairs[--pairCount];
          continue;
        }
        p->up = dial();
        p->connecting = p->up >= 0;
        continue;
      }
      if (p->connecting) {
        if (!up) continue;
        int error = 0;
        socklen_t len = sizeof error;
        getsockopt(p->up, SOL_SOCKET, SO_ERROR, &error, &len);
        if (error != 0) {
          /* refused: the proxy does not listen yet; made again on the next turn */
          close(p->up);
          p->up = -1;
          p->connecting = 0;
          continue;
        }
        p->connecting = 0;
        if (!reached) say("reached\n");
        reached = 1;
        continue;
      }
      if (!pump(p->down, p->up, &p->toUp, down) || !pump(p->up, p->down, &p->toDown, up) ||
          (p->toUp.shut && p->toDown.shut) || ((down | up) & POLLERR)) {
        closePair(i);
      }
    }
    if (fds[1].revents & POLLIN) {
      int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        if (gone) turnAway(fd);
        else {
          struct pair *p = &pairs[pairCount++];
          memset(p, 0, sizeof *p);
          p->down = fd;
          p->up = dial();
          p->connecting = p->up >= 0;
        }
      }
    }
  }
}
