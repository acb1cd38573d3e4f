/* net_socket_conn.h - the state of one socket provider connection, shared
 * by its setup (net_socket.c: listen, connect, accept, close) and its data
 * path (net_socket_io.c: frames).  Private to those two files.
 *
 * A connection is nstreams TCP sockets (KOLO_SOCKET_NSTREAMS, default 2),
 * non-blocking, TCP_NODELAY.  Stream 0 carries frames both ways (net_wire.h:
 * a 16-byte header, a call signature or a mismatch report, a slice's first
 * part); a large slice is cut into k contiguous parts (k = nstreams or fewer:
 * parts of at least 64 KiB), part i on stream i, in slice order, so a small
 * slice is one frame on one socket.  Credits and stop words from the
 * receiver are frames on its stream 0, going the other way.
 */
#ifndef KOLO_TRANSPORT_NET_SOCKET_CONN_H
#define KOLO_TRANSPORT_NET_SOCKET_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "transport/net.h"
#include "transport/net_wire.h"

/* Frames stream 0 may have queued: every slice in flight, a credit, a stop. */
#define SOCK_OUT_FRAMES (KOLO_NET_MAX_REQS + 2)
/* Stream 0 reads into this first: a header with a small slice (or several)
 * costs one recv.  Larger payloads are read straight into their slot. */
#define SOCK_STAGE_BYTES 16384
/* A sender reads only credits and stop words. */
#define SOCK_SENDER_STAGE_BYTES 256
/* Slices below nstreams x this travel on fewer streams. */
#define SOCK_MIN_PART_BYTES ((size_t)64 << 10)

/* DATA payloads from this size on are placed in the kernel's buffer with
 * padding (net_socket_io.c); below it a slow copy costs less. */
#define SOCK_PAD_MIN_PAYLOAD 1024

/* One frame queued on stream 0. */
typedef struct {
  uint8_t hdr[KOLO_SOCK_HDR_BYTES + KOLO_SOCK_EXTRA_MAX]; /* header, then a signature or report, padding */
  uint32_t hlen;
  kolo_sock_frame frame; /* as encoded in hdr; hlen counts its padding */
  const char *payload; /* DATA: its first part, in the sender's slot */
  size_t plen;
  size_t off;          /* bytes of hdr + payload written so far */
  int credit;          /* a credit nothing of which went out yet may take a newer head */
} sock_out;

/* A slice's part on a stream past 0 (its bytes in a slot). */
typedef struct {
  char *buf;
  size_t len, off;
  uint32_t step;
} sock_part;

/* Receiver: a slice whose header came, until all its parts are in. */
typedef struct {
  uint32_t len;
  int parts_left;
  int has_sig;
  kolo_call_sig sig;
} sock_slice;

typedef struct {
  int is_send, nstreams;
  int fds[KOLO_NET_MAX_STREAMS];
  int failed;      /* an error was reported: every call fails */
  int reset;       /* a write found the peer gone (EPIPE, ECONNRESET) */
  int eof[KOLO_NET_MAX_STREAMS];
  char who[96];
  int bound;
  kolo_net_ring ring;
  kolo_net_sink sink;
  /* stream 0 output */
  sock_out out[SOCK_OUT_FRAMES];
  uint32_t out_head, out_tail;
  int stop_queued;
  /* parts on streams 1.. (sender: to write; receiver: to read): row s - 1
   * for stream s (allocated for the streams there are) */
  sock_part (*parts)[KOLO_NET_MAX_REQS];
  uint32_t part_head[KOLO_NET_MAX_STREAMS], part_tail[KOLO_NET_MAX_STREAMS];
  /* stream 0 input: what was read, and the frame being taken apart */
  uint8_t *stage; /* SOCK_STAGE_BYTES (receiver), SOCK_SENDER_STAGE_BYTES (sender) */
  size_t stage_cap, stage_lo, stage_hi;
  int drained0;    /* a read of stream 0 came back short in this progress call */
  int idle_in;     /* the last reads found nothing: poll() before reading again */
  int in_state;    /* IN_HEADER, IN_EXTRA, IN_PAYLOAD (net_socket_io.c) */
  uint8_t in_hdr[KOLO_SOCK_HDR_BYTES + KOLO_SOCK_EXTRA_MAX];
  size_t in_got, in_need;
  kolo_sock_frame cur;
  char *pay;       /* the current DATA frame's first part: where it lands */
  size_t pay_len, pay_got;
  /* sender: the next slice's step; receiver: the next header's, and the
   * next slice to tell the sink */
  uint32_t next_step, delivered;
  sock_slice slices[KOLO_NET_MAX_REQS];
} sock_comm;

/* net_socket_io.c: the data half of the provider's table. */
koloResult_t kolo_sock_bind(void *comm, const kolo_net_ring *ring, const kolo_net_sink *sink, kolo_errbuf *eb);
koloResult_t kolo_sock_send_slice(void *comm, uint32_t step, size_t len, const kolo_call_sig *sig, int *queued,
                                  kolo_errbuf *eb);
koloResult_t kolo_sock_send_slice_from(void *comm, uint32_t step, size_t len, const kolo_call_sig *sig,
                                       const void *src, int *queued, kolo_errbuf *eb);
koloResult_t kolo_sock_send_credit(void *comm, uint32_t head, int *queued, kolo_errbuf *eb);
koloResult_t kolo_sock_send_stop(void *comm, uint32_t word, const kolo_call_mismatch *report, int *queued,
                                 kolo_errbuf *eb);
koloResult_t kolo_sock_progress(void *comm, unsigned dir, kolo_errbuf *eb);
int kolo_sock_pending(void *comm);
int kolo_sock_unacked(void *comm);
int kolo_sock_pollfds(void *comm, struct pollfd *pf, int max);

#endif
