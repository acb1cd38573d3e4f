/* socket.c - TCP helpers with deadlines (see socket.h). */
#include "transport/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t kolo_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t kolo_deadline(int timeout_ms) { return timeout_ms > 0 ? kolo_now_ms() + timeout_ms : 0; }

/* Milliseconds left for poll(): -1 without a deadline, 0 when past it. */
static int poll_ms(int64_t deadline) {
  if (deadline == 0) return -1;
  int64_t left = deadline - kolo_now_ms();
  return left <= 0 ? 0 : (left > 1000000 ? 1000000 : (int)left);
}

void kolo_addr_str(const struct sockaddr_storage *a, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    snprintf(buf, len, "%s:%u", host, ntohs(v4->sin_port));
  } else if (a->ss_family == AF_INET6) {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)a;
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    snprintf(buf, len, "[%s]:%u", host, ntohs(v6->sin6_port));
  } else {
    snprintf(buf, len, "(family %d)", a->ss_family);
  }
}

socklen_t kolo_addr_len(const struct sockaddr_storage *a) {
  return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static int make_socket(int family) {
  int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

koloResult_t kolo_sock_listen(struct sockaddr_storage *addr, int *fd, kolo_errbuf *eb) {
  char name[80];
  kolo_addr_str(addr, name, sizeof name);
  int s = make_socket(addr->ss_family);
  if (s < 0) return kolo_syserror(eb, errno, "cannot create a socket to listen on %s", name);
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = kolo_addr_len(addr);
  if (bind(s, (struct sockaddr *)addr, len) != 0 || listen(s, SOMAXCONN) != 0 ||
      getsockname(s, (struct sockaddr *)addr, &len) != 0) {
    int err = errno;
    close(s);
    return kolo_syserror(eb, err, "cannot listen on %s", name);
  }
  *fd = s;
  return koloSuccess;
}

/* Waits for fd to become ready for `events`; koloTimeout at the deadline. */
static koloResult_t wait_fd(int fd, short events, int64_t deadline, kolo_errbuf *eb,
                            const char *what, const char *who) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, poll_ms(deadline));
    if (n > 0) return koloSuccess;
    if (n == 0) return kolo_error(eb, koloTimeout, "timed out %s %s", what, who);
    if (errno != EINTR) return kolo_syserror(eb, errno, "poll failed %s %s", what, who);
  }
}

static koloResult_t try_connect(const struct sockaddr_storage *addr, int64_t deadline, int *fd,
                                int *err) {
  int s = make_socket(addr->ss_family);
  if (s < 0) {
    *err = errno;
    return koloSystemError;
  }
  if (connect(s, (const struct sockaddr *)addr, kolo_addr_len(addr)) == 0) {
    *fd = s;
    return koloSuccess;
  }
  *err = errno;
  if (*err == EINPROGRESS) {
    struct pollfd p = {s, POLLOUT, 0};
    int n;
    do n = poll(&p, 1, poll_ms(deadline));
    while (n < 0 && errno == EINTR);
    socklen_t l = sizeof *err;
    if (n > 0 && getsockopt(s, SOL_SOCKET, SO_ERROR, err, &l) == 0 && *err == 0) {
      *fd = s;
      return koloSuccess;
    }
    if (n == 0) *err = ETIMEDOUT;
  }
  close(s);
  return koloSystemError;
}

koloResult_t kolo_sock_connect(const struct sockaddr_storage *addr, int64_t deadline, int *fd,
                               kolo_errbuf *eb, const char *who) {
  char name[80];
  kolo_addr_str(addr, name, sizeof name);
  for (int delay_ms = 1;; delay_ms = delay_ms < 100 ? delay_ms * 2 : 100) {
    int err = 0;
    if (try_connect(addr, deadline, fd, &err) == koloSuccess) return koloSuccess;
    /* Refused or unreachable: the listener may not be up yet; retry. */
    int retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EAGAIN;
    if (!retry) return kolo_syserror(eb, err, "cannot connect to %s at %s", who, name);
    if (deadline != 0 && kolo_now_ms() + delay_ms >= deadline)
      return kolo_error(eb, koloTimeout, "%s at %s did not answer within the timeout", who, name);
    struct timespec ts = {0, delay_ms * 1000000L};
    nanosleep(&ts, NULL);
  }
}

koloResult_t kolo_sock_accept(int lfd, int64_t deadline, int *fd, kolo_errbuf *eb) {
  for (;;) {
    int s = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s >= 0) {
      int one = 1;
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      *fd = s;
      return koloSuccess;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return kolo_syserror(eb, errno, "accept failed");
    koloResult_t res = wait_fd(lfd, POLLIN, deadline, eb, "waiting for", "connections");
    if (res != koloSuccess) return res;
  }
}

koloResult_t kolo_sock_send(int fd, const void *buf, size_t len, int64_t deadline,
                            kolo_errbuf *eb, const char *who) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      koloResult_t res = wait_fd(fd, POLLOUT, deadline, eb, "sending to", who);
      if (res != koloSuccess) return res;
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET)
      return kolo_error(eb, koloRemoteError, "%s closed its connection", who);
    return kolo_syserror(eb, errno, "send to %s failed", who);
  }
  return koloSuccess;
}

koloResult_t kolo_sock_recv(int fd, void *buf, size_t len, int64_t deadline, kolo_errbuf *eb,
                            const char *who) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0) return kolo_error(eb, koloRemoteError, "%s closed its connection", who);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      koloResult_t res = wait_fd(fd, POLLIN, deadline, eb, "waiting for", who);
      if (res != koloSuccess) return res;
      continue;
    }
    if (errno == ECONNRESET) return kolo_error(eb, koloRemoteError, "%s reset its connection", who);
    return kolo_syserror(eb, errno, "recv from %s failed", who);
  }
  return koloSuccess;
}
