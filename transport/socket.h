/* socket.h - small TCP helpers with deadlines, for the bootstrap.
 *
 * Sockets are non-blocking, close-on-exec and TCP_NODELAY; every wait goes
 * through poll() with an absolute deadline in monotonic milliseconds (0: no
 * bound), EINTR is retried, and no send raises SIGPIPE.  Errors are reported
 * into an errbuf naming `who` (a rank or an address, e.g. "rank 3
 * (10.0.0.2:4711)").  Thread safe: no state outside the arguments.
 */
#ifndef KOLO_TRANSPORT_SOCKET_H
#define KOLO_TRANSPORT_SOCKET_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/clock.h" /* deadlines are kolo_now_ms milliseconds */
#include "common/error.h"

/* poll()'s timeout for a deadline: -1 without one, 0 once it has passed. */
int kolo_poll_ms(int64_t deadline);
/* poll() that retries EINTR: the number of ready fds, 0 at the deadline,
 * -1 with errno on failure. */
int kolo_poll(struct pollfd *fds, nfds_t n, int64_t deadline);

/* "1.2.3.4:5" or "[::1]:5". */
void kolo_addr_str(const struct sockaddr_storage *a, char *buf, size_t len);
socklen_t kolo_addr_len(const struct sockaddr_storage *a);
/* The port of an AF_INET / AF_INET6 address (host order), or sets it. */
int kolo_addr_port(const struct sockaddr_storage *a);
void kolo_addr_set_port(struct sockaddr_storage *a, int port);
/* An address as net handles carry it: family, port (host order) and the
 * IPv4 (first 4 bytes) or IPv6 address bytes. */
void kolo_addr_to_wire(const struct sockaddr_storage *a, uint16_t *family, uint16_t *port,
                       uint8_t bytes[16]);
void kolo_addr_from_wire(uint16_t family, uint16_t port, const uint8_t bytes[16],
                         struct sockaddr_storage *a);
/* 1 when two secrets (pipe tokens) are equal; no early exit, so the time
 * taken does not tell a stray how much of a guess was right. */
int kolo_secret_equal(const uint8_t *a, const uint8_t *b, size_t len);

/* errno's text; for a descriptor that could not be made it names the limit:
 * "too many open files (RLIMIT_NOFILE 1024, hard limit 4096: ...)". */
const char *kolo_fd_errtext(int err, char *buf, size_t len);
/* errno's text for a connect that failed; ETIMEDOUT says what it may mean
 * (an unreachable host, or a listen backlog that overflowed). */
const char *kolo_connect_errtext(int err, char *buf, size_t len);
/* Raises this process's soft RLIMIT_NOFILE to `need` descriptors where it
 * allows fewer (up to the hard limit; kolo waits with poll, never select,
 * so a soft limit above 1024 is safe): 0 when it now allows them, else -1
 * and why. */
int kolo_fd_allow(long need, char *why, size_t len);

/* Listens on *addr (port 0: any free port) and writes the bound address
 * back into *addr. */
koloResult_t kolo_sock_listen(struct sockaddr_storage *addr, kolo_errbuf *eb, int *fd);
/* Connects to addr, retrying while nobody listens there (refused,
 * unreachable) until the deadline; at the deadline: koloTimeout "<who> did
 * not answer within <timeout_ms> ms". */
koloResult_t kolo_sock_connect(const struct sockaddr_storage *addr, int64_t deadline,
                               int timeout_ms, const char *who, kolo_errbuf *eb, int *fd);
/* A connect that does not wait: 0 and *fd once started (poll it for
 * POLLOUT, then ask kolo_sock_connect_done), or the errno. */
int kolo_sock_connect_start(const struct sockaddr_storage *addr, int *fd);
/* 0 once fd is connected, else the errno (ECONNREFUSED for a connection to
 * its own port: TCP's simultaneous open when nobody listens there). */
int kolo_sock_connect_done(int fd);
/* Accepts one pending connection without waiting: *fd = -1 when there is
 * none.  *from (may be NULL) receives the peer's address. */
koloResult_t kolo_sock_accept(int lfd, struct sockaddr_storage *from, kolo_errbuf *eb,
                              int *fd);

/* Reads what is there, up to len bytes, without waiting: the number of
 * bytes read (0: none ready), or -1 with *err = 0 at end of stream, else
 * the errno. */
ssize_t kolo_sock_read_some(int fd, void *buf, size_t len, int *err);

/* Whole-buffer I/O, waiting until the deadline (koloTimeout).  End of
 * stream or a reset connection: koloRemoteError naming who. */
koloResult_t kolo_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline,
                                const char *who, kolo_errbuf *eb);
koloResult_t kolo_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline,
                                const char *who, kolo_errbuf *eb);

#endif
