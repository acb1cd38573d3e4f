/* socket.c - TCP helpers with deadlines (see socket.h). */
#include "transport/socket.h"

#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- time ---------------------------------------------------------------- */

int kolo_poll_ms(int64_t deadline) {
  if (deadline == 0) return -1;
  int64_t left = deadline - kolo_now_ms();
  if (left <= 0) return 0;
  return left > 1000000 ? 1000000 : (int)left;
}

int kolo_poll(struct pollfd *fds, nfds_t n, int64_t deadline) {
  for (;;) {
    int ready = poll(fds, n, kolo_poll_ms(deadline));
    if (ready >= 0 || errno != EINTR) return ready;
  }
}

/* ---- addresses ----------------------------------------------------------- */

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
    snprintf(buf, len, "(address family %d)", a->ss_family);
  }
}

socklen_t kolo_addr_len(const struct sockaddr_storage *a) {
  return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

int kolo_addr_port(const struct sockaddr_storage *a) {
  if (a->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
  return ntohs(((const struct sockaddr_in *)a)->sin_port);
}

void kolo_addr_set_port(struct sockaddr_storage *a, int port) {
  if (a->ss_family == AF_INET6) ((struct sockaddr_in6 *)a)->sin6_port = htons((uint16_t)port);
  else ((struct sockaddr_in *)a)->sin_port = htons((uint16_t)port);
}

void kolo_addr_to_wire(const struct sockaddr_storage *a, uint16_t *family, uint16_t *port,
                       uint8_t bytes[16]) {
  memset(bytes, 0, 16);
  *family = (uint16_t)a->ss_family;
  *port = (uint16_t)kolo_addr_port(a);
  if (a->ss_family == AF_INET6) memcpy(bytes, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
  else memcpy(bytes, &((const struct sockaddr_in *)a)->sin_addr, 4);
}

void kolo_addr_from_wire(uint16_t family, uint16_t port, const uint8_t bytes[16],
                         struct sockaddr_storage *a) {
  memset(a, 0, sizeof *a);
  a->ss_family = family;
  if (family == AF_INET6) memcpy(&((struct sockaddr_in6 *)a)->sin6_addr, bytes, 16);
  else memcpy(&((struct sockaddr_in *)a)->sin_addr, bytes, 4);
  kolo_addr_set_port(a, port);
}

int kolo_secret_equal(const uint8_t *a, const uint8_t *b, size_t len) {
  unsigned diff = 0;
  for (size_t i = 0; i < len; i++) diff |= (unsigned)(a[i] ^ b[i]);
  return diff == 0;
}

/* ---- descriptors --------------------------------------------------------- */

const char *kolo_fd_errtext(int err, char *buf, size_t len) {
  struct rlimit rl;
  if (err == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0)
    snprintf(buf, len, "too many open files (RLIMIT_NOFILE %llu, hard limit %llu: raise it with ulimit -n)",
             (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
  else if (err == ENFILE)
    snprintf(buf, len, "too many open files in the system (fs.file-max)");
  else
    snprintf(buf, len, "%s", strerror(err));
  return buf;
}

int kolo_fd_allow(long need, char *why, size_t len) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    snprintf(why, len, "getrlimit(RLIMIT_NOFILE) failed: %s", strerror(errno));
    return -1;
  }
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)need) return 0;
  rlim_t was = rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= (rlim_t)need ? (rlim_t)need : rl.rlim_max;
  if (rl.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    snprintf(why, len, "setrlimit(RLIMIT_NOFILE) to %llu failed: %s", (unsigned long long)rl.rlim_cur,
             strerror(errno));
    return -1;
  }
  KOLO_INFO("raised RLIMIT_NOFILE from %llu to %llu (%ld descriptors wanted)", (unsigned long long)was,
            (unsigned long long)rl.rlim_cur, need);
  if (rl.rlim_cur >= (rlim_t)need) return 0;
  snprintf(why, len, "%ld descriptors are needed but RLIMIT_NOFILE allows %llu (its hard limit): raise it with "
           "ulimit -n", need, (unsigned long long)rl.rlim_cur);
  return -1;
}

/* net.core.somaxconn, or -1. */
static long somaxconn(void) {
  FILE *f = fopen("/proc/sys/net/core/somaxconn", "re");
  long v = -1;
  if (f != NULL) {
    if (fscanf(f, "%ld", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

const char *kolo_connect_errtext(int err, char *buf, size_t len) {
  if (err == ETIMEDOUT)
    snprintf(buf, len, "no answer to the connection request: the host is unreachable, or the listen backlog is "
             "full and drops requests (net.core.somaxconn %ld)", somaxconn());
  else
    snprintf(buf, len, "%s", strerror(err));
  return buf;
}

/* ---- connections --------------------------------------------------------- */

static int set_nodelay(int fd) {
  int one = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A non-blocking, close-on-exec TCP socket, or -1 with errno. */
static int make_socket(int family) {
  int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (set_nodelay(fd) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

/* Connections the kernel queues for accept: it caps this at
 * net.core.somaxconn (4096 on Linux 5.4 and later), which is what should
 * decide, not an older libc's SOMAXCONN of 128: a root that thousands of
 * ranks reach at once would drop their SYNs, and each would wait for a
 * retransmission (1 s, then 3 s ...). */
#define LISTEN_BACKLOG 65535

koloResult_t kolo_sock_listen(struct sockaddr_storage *addr, kolo_errbuf *eb, int *fd) {
  char name[80];
  kolo_addr_str(addr, name, sizeof name);
  int s = make_socket(addr->ss_family);
  char text[160];
  if (s < 0)
    return kolo_error(eb, koloSystemError, "cannot create a socket to listen on %s: %s", name,
                      kolo_fd_errtext(errno, text, sizeof text));
  int one = 1;
  socklen_t len = kolo_addr_len(addr);
  if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(s, (struct sockaddr *)addr, len) != 0 || listen(s, LISTEN_BACKLOG) != 0 ||
      getsockname(s, (struct sockaddr *)addr, &len) != 0) {
    int err = errno;
    close(s);
    return kolo_syserror(eb, err, "cannot listen on %s", name);
  }
  *fd = s;
  return koloSuccess;
}

/* A connection to our own port (TCP simultaneous open when nobody listens
 * on a local ephemeral port) is no connection to the listener. */
static int connected_to_self(int fd) {
  struct sockaddr_storage me, peer;
  socklen_t ml = sizeof me, pl = sizeof peer;
  if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 ||
      getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
    return 0;
  return ml == pl && memcmp(&me, &peer, ml) == 0;
}

int kolo_sock_connect_start(const struct sockaddr_storage *addr, int *fd) {
  int s = make_socket(addr->ss_family);
  if (s < 0) return errno;
  if (connect(s, (const struct sockaddr *)addr, kolo_addr_len(addr)) != 0 && errno != EINPROGRESS &&
      errno != EINTR) {
    int err = errno;
    close(s);
    return err;
  }
  *fd = s;
  return 0;
}

int kolo_sock_connect_done(int fd) {
  int err = 0;
  socklen_t l = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0) return errno;
  if (err == 0 && connected_to_self(fd)) err = ECONNREFUSED;
  return err;
}

/* One attempt: 0 and *fd on success, else an errno (ETIMEDOUT at the
 * deadline). */
static int try_connect(const struct sockaddr_storage *addr, int64_t deadline, int *fd) {
  int s = -1;
  int err = kolo_sock_connect_start(addr, &s);
  if (err != 0) return err;
  struct pollfd p = {s, POLLOUT, 0};
  int n = kolo_poll(&p, 1, deadline);
  err = n < 0 ? errno : n == 0 ? ETIMEDOUT : kolo_sock_connect_done(s);
  if (err != 0) {
    close(s);
    return err;
  }
  *fd = s;
  return 0;
}

/* Errors that mean "nobody listens there yet": worth another try. */
static int retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EAGAIN ||
         err == EHOSTUNREACH || err == ENETUNREACH || err == EADDRNOTAVAIL || err == EINTR;
}

/* A peer that is not there yet is normal for a moment; for longer it may be
 * a wrong address, and the job would wait silently for the whole timeout:
 * say so after CONNECT_FIRST_NOTICE_MS, then every CONNECT_NOTICE_EVERY_MS. */
#define CONNECT_FIRST_NOTICE_MS 5000
#define CONNECT_NOTICE_EVERY_MS 30000

static void notice_still_connecting(const char *who, int64_t start, int64_t *next, int timeout_ms, int err) {
  int64_t now = kolo_now_ms();
  if (now < *next) return;
  *next = now + CONNECT_NOTICE_EVERY_MS;
  KOLO_NOTICE("still connecting to %s after %lld s (%s); retrying until the timeout of %d ms (KOLO_TIMEOUT_MS)",
              who, (long long)((now - start) / 1000), strerror(err), timeout_ms);
}

/* An attempt's own bound, doubling from CONNECT_ATTEMPT_MS: a lost SYN is
 * sent again after a fraction of the kernel's 1 s retransmission timeout
 * (a lossy link otherwise cost a 2 s init its whole timeout), while a far
 * peer still gets attempts long enough for its round trip. */
#define CONNECT_ATTEMPT_MS 250

static int64_t attempt_deadline(int64_t deadline, int64_t *attempt_ms) {
  int64_t d = kolo_now_ms() + *attempt_ms;
  if (*attempt_ms < 8000) *attempt_ms *= 2;
  return deadline != 0 && deadline < d ? deadline : d;
}

koloResult_t kolo_sock_connect(const struct sockaddr_storage *addr, int64_t deadline,
                               int timeout_ms, const char *who, kolo_errbuf *eb, int *fd) {
  int64_t start = kolo_now_ms(), next_notice = start + CONNECT_FIRST_NOTICE_MS, attempt_ms = CONNECT_ATTEMPT_MS;
  for (int delay_ms = 1;; delay_ms = delay_ms < 100 ? delay_ms * 2 : 100) {
    int err = try_connect(addr, attempt_deadline(deadline, &attempt_ms), fd);
    if (err == 0) return koloSuccess;
    char text[160];
    if (!retryable(err))
      return kolo_error(eb, koloSystemError, "cannot connect to %s: %s", who, kolo_fd_errtext(err, text, sizeof text));
    notice_still_connecting(who, start, &next_notice, timeout_ms, err);
    int64_t left = deadline == 0 ? delay_ms : deadline - kolo_now_ms();
    char why[200];
    if (left <= 0)
      return kolo_error(eb, koloTimeout, "%s did not answer within %d ms (last attempt: %s)", who, timeout_ms,
                        kolo_connect_errtext(err, why, sizeof why));
    kolo_nap_us((long)(left < delay_ms ? left : delay_ms) * 1000L);
  }
}

koloResult_t kolo_sock_accept(int lfd, struct sockaddr_storage *from, kolo_errbuf *eb,
                              int *fd) {
  for (;;) {
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    int s = accept4(lfd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s >= 0 && set_nodelay(s) != 0) {
      int err = errno;
      close(s);
      return kolo_syserror(eb, err, "cannot set TCP_NODELAY on an accepted connection");
    }
    if (s >= 0) {
      if (from) *from = peer;
      *fd = s;
      return koloSuccess;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    char text[160];
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return kolo_error(eb, koloSystemError, "accept failed: %s", kolo_fd_errtext(errno, text, sizeof text));
    *fd = -1;
    return koloSuccess;
  }
}

/* ---- data ---------------------------------------------------------------- */

ssize_t kolo_sock_read_some(int fd, void *buf, size_t len, int *err) {
  for (;;) {
    ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
    if (n > 0) return n;
    if (n == 0 && len > 0) {
      *err = 0;
      return -1;
    }
    if (n == 0) return 0;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    *err = errno;
    return -1;
  }
}

/* Waits until fd is ready for `events`; koloTimeout at the deadline. */
static koloResult_t wait_fd(int fd, short events, int64_t deadline, const char *what,
                            const char *who, kolo_errbuf *eb) {
  struct pollfd p = {fd, events, 0};
  int n = kolo_poll(&p, 1, deadline);
  if (n > 0) return koloSuccess;
  if (n == 0) return kolo_error(eb, koloTimeout, "timed out %s %s", what, who);
  return kolo_syserror(eb, errno, "poll failed %s %s", what, who);
}

static koloResult_t peer_gone(int err, const char *who, kolo_errbuf *eb) {
  if (err == EPIPE || err == ECONNRESET)
    return kolo_error(eb, koloRemoteError, "%s closed its connection (%s)", who, strerror(err));
  return kolo_syserror(eb, err, "connection to %s failed", who);
}

koloResult_t kolo_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline,
                                const char *who, kolo_errbuf *eb) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      koloResult_t res = wait_fd(fd, POLLOUT, deadline, "sending to", who, eb);
      if (res != koloSuccess) return res;
    } else {
      return peer_gone(n < 0 ? errno : EPIPE, who, eb);
    }
  }
  return koloSuccess;
}

koloResult_t kolo_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline,
                                const char *who, kolo_errbuf *eb) {
  char *p = buf;
  while (len > 0) {
    int err = 0;
    ssize_t n = kolo_sock_read_some(fd, p, len, &err);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
    } else if (n == 0) {
      koloResult_t res = wait_fd(fd, POLLIN, deadline, "waiting for", who, eb);
      if (res != koloSuccess) return res;
    } else if (err == 0) {
      return kolo_error(eb, koloRemoteError, "%s closed its connection", who);
    } else {
      return peer_gone(err, who, eb);
    }
  }
  return koloSuccess;
}
