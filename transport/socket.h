/* socket.h - small TCP helpers with deadlines, for the bootstrap.
 *
 * Sockets are non-blocking and close-on-exec; every wait goes through
 * poll() with an absolute deadline (0: none), so that no call can hang.
 * Errors are reported into an errbuf naming `who` (a rank or an address). */
#ifndef KOLO_TRANSPORT_SOCKET_H
#define KOLO_TRANSPORT_SOCKET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/error.h"

/* Monotonic milliseconds. */
int64_t kolo_now_ms(void);
/* Deadline timeout_ms from now; 0 when timeout_ms <= 0 (no bound). */
int64_t kolo_deadline(int timeout_ms);

/* "1.2.3.4:5" or "[::1]:5". */
void kolo_addr_str(const struct sockaddr_storage *a, char *buf, size_t len);
socklen_t kolo_addr_len(const struct sockaddr_storage *a);

/* Listens on addr (port 0: any); writes the bound address back. */
koloResult_t kolo_sock_listen(struct sockaddr_storage *addr, int *fd, kolo_errbuf *eb);
/* Connects to addr, retrying refused connections until the deadline. */
koloResult_t kolo_sock_connect(const struct sockaddr_storage *addr, int64_t deadline, int *fd,
                               kolo_errbuf *eb, const char *who);
/* Accepts one connection; koloTimeout at the deadline. */
koloResult_t kolo_sock_accept(int lfd, int64_t deadline, int *fd, kolo_errbuf *eb);
/* Whole-buffer I/O.  EOF before the end: koloRemoteError naming who. */
koloResult_t kolo_sock_send(int fd, const void *buf, size_t len, int64_t deadline,
                            kolo_errbuf *eb, const char *who);
koloResult_t kolo_sock_recv(int fd, void *buf, size_t len, int64_t deadline, kolo_errbuf *eb,
                            const char *who);

#endif
