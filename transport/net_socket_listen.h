/* net_socket_listen.h - one listening TCP socket per local address for all
 * the socket provider's pipes of a process.
 *
 * A listener per pipe took an ephemeral port per receiving pipe while its
 * connect ran: an all-to-all among 64 processes of one host asks for 8000
 * of them at once (2 channels x 63 peers x 64 ranks) beside the ports of
 * the connections themselves, and the host's ephemeral range (28k ports)
 * ran out ("cannot listen on ...: Address already in use").  Every pipe now
 * registers its random token with the process's listener for its address;
 * whoever accepts reads the hello and files the connection under the token
 * it presents, for the pipe that owns it.  A connection whose token no pipe
 * registered is refused, as before.  Private to net_socket.c.
 *
 * Threads: any number of pipes may accept at once (ranks as threads); one
 * at a time reads from the listening socket, the others wait for it to file
 * their connections.  After fork(), a child never uses its parent's
 * listener: the entry is recognised by its pid, and the child's copy of the
 * descriptor closed. */
#ifndef KOLO_TRANSPORT_NET_SOCKET_LISTEN_H
#define KOLO_TRANSPORT_NET_SOCKET_LISTEN_H

#include <stdint.h>
#include <sys/socket.h>

#include "common/error.h"
#include "transport/net_wire.h"

typedef struct kolo_sock_listener kolo_sock_listener;

/* Registers token (KOLO_SOCK_TOKEN_BYTES, expecting nstreams connections)
 * with the listener of local's address (port ignored), made if there is
 * none; *addr: the address to connect to. */
koloResult_t kolo_sock_listener_join(const struct sockaddr_storage *local, const uint8_t *token, int nstreams,
                                     kolo_sock_listener **out, struct sockaddr_storage *addr, kolo_errbuf *eb);
/* Unregisters token, closes the connections filed under it and not taken,
 * and the listener with its last pipe. */
void kolo_sock_listener_leave(kolo_sock_listener *l, const uint8_t *token);
/* One connection presenting token, accepting until the deadline (0: none):
 * its descriptor and the stream index of its hello; koloTimeout (nothing
 * written to eb) at the deadline, another error with its sentence. */
koloResult_t kolo_sock_listener_take(kolo_sock_listener *l, const uint8_t *token, int64_t deadline, int *fd,
                                     int *index, kolo_errbuf *eb);
/* The descriptor the listener waits on (tests). */
int kolo_sock_listener_fd(const kolo_sock_listener *l);

#endif
