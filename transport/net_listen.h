/* net_listen.h - one listening TCP socket per local address and provider
 * for all the net pipes of a process.
 *
 * A listener per pipe took an ephemeral port per receiving pipe while its
 * connect ran: an all-to-all among 64 processes of one host asks for 8000
 * of them at once (2 channels x 63 peers x 64 ranks) beside the ports of
 * the connections themselves, and the host's ephemeral range (28k ports)
 * ran out ("cannot listen on ...: Address already in use"); at a thousand
 * ranks, 8 to a host, a cluster's hosts would too.  Every pipe now
 * registers its random token with the process's listener for its address
 * and its provider's hello; whoever accepts reads the hello and files the
 * connection under the token it presents, for the pipe that owns it.  A
 * connection whose hello is wrong, of another version, of no registered
 * pipe or late (a second) is refused, with a log line saying why.
 *
 * Threads: any number of pipes may accept at once (ranks as threads); one
 * at a time reads from the listening socket, the others wait for it to file
 * their connections.  After fork(), a child never uses its parent's
 * listener: the entry is recognised by its pid, and the child's copy of the
 * descriptor closed. */
#ifndef KOLO_TRANSPORT_NET_LISTEN_H
#define KOLO_TRANSPORT_NET_LISTEN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/error.h"
#include "transport/net_wire.h"

#define KOLO_NET_LISTEN_TOKEN_BYTES 16

/* A provider's hello: how the listener reads it off an accepted connection. */
typedef struct {
  const char *name; /* "socket", "ib": keys the listener with the address */
  size_t bytes;     /* of the decoded hello (a struct) */
  /* Reads and decodes the hello of fd (until soon) into out: its token and
   * stream count; 0, or -1 with the reason in why. */
  int (*read)(int fd, int64_t soon, void *out, uint8_t *token, uint32_t *nstreams, char *why, size_t why_len);
} kolo_net_hello_kind;

typedef struct kolo_net_listener kolo_net_listener;

/* For a kind's read: reads a hello of len bytes off fd into m, the prefix
 * (magic, version) first and the rest only where the prefix is one of
 * magic / magic_v1, so that a peer of another version is named as such
 * from a shorter hello; *got: the bytes read.  -1 (why: "it sent no
 * complete hello") when the connection ended or stalled before. */
int kolo_net_listen_read(int fd, int64_t soon, uint8_t *m, size_t len, uint32_t magic, uint32_t magic_v1,
                         size_t *got, char *why, size_t why_len);

/* Registers token (KOLO_NET_LISTEN_TOKEN_BYTES, expecting nstreams
 * connections) with the listener of local's address (port ignored) for
 * kind, made if there is none; *addr: the address to connect to. */
koloResult_t kolo_net_listener_join(const struct sockaddr_storage *local, const kolo_net_hello_kind *kind,
                                    const uint8_t *token, int nstreams, kolo_net_listener **out,
                                    struct sockaddr_storage *addr, kolo_errbuf *eb);
/* Unregisters token, closes the connections filed under it and not taken,
 * and the listener with its last pipe. */
void kolo_net_listener_leave(kolo_net_listener *l, const uint8_t *token);
/* One connection presenting token, accepting until the deadline (0: none):
 * its descriptor and its decoded hello (kind->bytes into hello); koloTimeout
 * (nothing written to eb) at the deadline, another error with its sentence. */
koloResult_t kolo_net_listener_take(kolo_net_listener *l, const uint8_t *token, int64_t deadline, int *fd,
                                    void *hello, kolo_errbuf *eb);

#endif
