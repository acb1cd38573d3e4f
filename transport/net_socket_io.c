/* net_socket_io.c - the socket provider's frames (net.h; the connection's
 * state and layout in net_socket_conn.h).
 *
 * Output: the send calls queue frames for stream 0 and parts for the other
 * streams; progress(OUT) writes each stream's queue with one sendmsg of as
 * many of its frames as are waiting, so a slice costs one system call, and
 * several queued ones no more.  A credit that has not started out yet takes
 * a newer head instead of queueing another frame.
 *
 * Input: stream 0 is read into a staging buffer, which a small slice arrives
 * in whole with its header, and taken apart there; a payload larger than
 * half the buffer is read straight into its slot.  A DATA header says where
 * its other parts land; each stream past 0 reads its parts in slice order.
 * A slice is told to the sink once all its parts are in, in step order.
 *
 * The peer's end: a stream that ends with nothing owed on it ends quietly;
 * the connection is reported closed once stream 0 ended and every slice
 * whose header came is whole (or its stream ended too), so that everything
 * sent before a close is delivered first.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/copy.h"
#include "transport/net_socket_conn.h"

enum { IN_HEADER, IN_EXTRA, IN_PAYLOAD };
/* iovecs one sendmsg gathers (two per frame) */
#define SOCK_IOV 64

/* ---- errors ------------------------------------------------------------------ */

static koloResult_t failed_earlier(sock_comm *c, kolo_errbuf *eb) {
  return kolo_error_quiet(eb, koloRemoteError, "the network connection to %s failed earlier", c->who);
}

/* A peer that closes or resets is reported without logging: the engine
 * decides whether that is a failure (a sender that finished and left is
 * none).  Other errors are logged as errors. */
static koloResult_t fail(sock_comm *c, kolo_errbuf *eb, int err, int eof) {
  c->failed = 1;
  if (!eof && err != EPIPE && err != ECONNRESET)
    return kolo_syserror(eb, err, "the network connection to %s failed", c->who);
  if (eof) return kolo_error_quiet(eb, koloRemoteError, "%s closed its network connection", c->who);
  return kolo_error_quiet(eb, koloRemoteError, "%s closed its network connection (%s)", c->who, strerror(err));
}

static koloResult_t garbled(sock_comm *c, kolo_errbuf *eb, const char *why) {
  c->failed = 1;
  return kolo_error(eb, koloRemoteError, "%s %s", c->who, why);
}

/* ---- parts ------------------------------------------------------------------- */

/* How many streams carry a slice of len bytes. */
static int parts_of(size_t len, int nstreams) {
  size_t k = len / SOCK_MIN_PART_BYTES;
  return k < 1 ? 1 : k > (size_t)nstreams ? nstreams : (int)k;
}
static size_t part_lo(size_t len, int s, int n) { return len / (size_t)n * (size_t)s; }
static size_t part_hi(size_t len, int s, int n) { return s == n - 1 ? len : len / (size_t)n * (size_t)(s + 1); }

static char *slot_of(const sock_comm *c, uint32_t step) {
  return c->ring.slots + (size_t)(step % c->ring.nslots) * c->ring.slot_bytes;
}

static int parts_queued(const sock_comm *c, int s) { return c->part_head[s] != c->part_tail[s]; }

static void push_part(sock_comm *c, int s, char *buf, size_t len, uint32_t step) {
  c->parts[s - 1][c->part_tail[s]++ % KOLO_NET_MAX_REQS] = (sock_part){buf, len, 0, step};
}

static sock_part *first_part(sock_comm *c, int s) {
  return &c->parts[s - 1][c->part_head[s] % KOLO_NET_MAX_REQS];
}

/* ---- binding ------------------------------------------------------------------- */

koloResult_t kolo_sock_bind(void *comm, const kolo_net_ring *ring, const kolo_net_sink *sink, kolo_errbuf *eb) {
  sock_comm *c = comm;
  if (ring->nslots == 0 || ring->nslots > KOLO_NET_MAX_REQS || ring->slot_bytes > UINT32_MAX)
    return kolo_error(eb, koloInvalidArgument, "the network connection to %s cannot carry %u slots of %zu bytes",
                      c->who, ring->nslots, ring->slot_bytes);
  c->ring = *ring;
  c->sink = *sink;
  c->bound = 1;
  return koloSuccess;
}

/* ---- output -------------------------------------------------------------------- */

static int out_room(const sock_comm *c) { return c->out_tail - c->out_head < SOCK_OUT_FRAMES; }

static sock_out *out_push(sock_comm *c) {
  sock_out *o = &c->out[c->out_tail++ % SOCK_OUT_FRAMES];
  memset(o, 0, offsetof(sock_out, hlen));
  o->hlen = KOLO_SOCK_HDR_BYTES;
  o->frame = (kolo_sock_frame){0};
  o->payload = NULL;
  o->plen = o->off = 0;
  o->credit = 0;
  return o;
}

/* Room for a slice: a frame, and a part on each stream it uses. */
static int slice_room(const sock_comm *c, int k) {
  if (!out_room(c) || c->out_tail - c->out_head >= KOLO_NET_MAX_REQS) return 0;
  for (int s = 1; s < k; s++)
    if (c->part_tail[s] - c->part_head[s] >= KOLO_NET_MAX_REQS) return 0;
  return 1;
}

koloResult_t kolo_sock_send_slice(void *comm, uint32_t step, size_t len, const kolo_call_sig *sig, int *queued,
                                  kolo_errbuf *eb) {
  sock_comm *c = comm;
  *queued = 0;
  if (c->failed) return failed_earlier(c, eb);
  if (!c->bound || !c->is_send || step != c->next_step || len > c->ring.slot_bytes)
    return kolo_error(eb, koloInternalError, "slice %u of %zu bytes to %s does not fit its connection (next %u)", step,
                      len, c->who, c->next_step);
  int k = parts_of(len, c->nstreams);
  if (!slice_room(c, k)) return koloSuccess;
  char *buf = slot_of(c, step);
  sock_out *o = out_push(c);
  o->frame = (kolo_sock_frame){KOLO_SOCK_DATA, sig ? KOLO_SOCK_FLAG_SIG : 0, step, (uint32_t)len, 0};
  kolo_encode_sock_frame(o->hdr, &o->frame);
  if (sig) kolo_encode_call_sig(sig, o->hdr + KOLO_SOCK_HDR_BYTES), o->hlen += KOLO_NET_SIG_BYTES;
  o->payload = buf;
  o->plen = part_hi(len, 0, k);
  for (int s = 1; s < k; s++) push_part(c, s, buf + part_lo(len, s, k), part_hi(len, s, k) - part_lo(len, s, k), step);
  c->next_step++;
  *queued = 1;
  return koloSuccess;
}

koloResult_t kolo_sock_send_credit(void *comm, uint32_t head, int *queued, kolo_errbuf *eb) {
  sock_comm *c = comm;
  *queued = 0;
  if (c->failed) return failed_earlier(c, eb);
  sock_out *last = c->out_tail != c->out_head ? &c->out[(c->out_tail - 1) % SOCK_OUT_FRAMES] : NULL;
  kolo_sock_frame f = {KOLO_SOCK_CREDIT, 0, head, 0, 0};
  if (last && last->credit && last->off == 0) { /* not started: the newer head replaces it */
    kolo_encode_sock_frame(last->hdr, &f);
  } else {
    if (!out_room(c)) return koloSuccess;
    sock_out *o = out_push(c);
    o->credit = 1;
    kolo_encode_sock_frame(o->hdr, &f);
  }
  *queued = 1;
  return koloSuccess;
}

koloResult_t kolo_sock_send_stop(void *comm, uint32_t word, const kolo_call_mismatch *report, int *queued,
                                 kolo_errbuf *eb) {
  sock_comm *c = comm;
  *queued = 0;
  if (c->failed) return failed_earlier(c, eb);
  if (c->stop_queued) { /* once: a second one has nothing to add */
    *queued = 1;
    return koloSuccess;
  }
  if (!out_room(c)) return koloSuccess;
  sock_out *o = out_push(c);
  kolo_sock_frame f = {KOLO_SOCK_STOP, report ? KOLO_SOCK_FLAG_REPORT : 0, word, 0, 0};
  kolo_encode_sock_frame(o->hdr, &f);
  if (report) kolo_encode_mismatch(report, o->hdr + KOLO_SOCK_HDR_BYTES), o->hlen += KOLO_NET_REPORT_BYTES;
  c->stop_queued = 1;
  *queued = 1;
  return koloSuccess;
}

/* One sendmsg of iov on stream s: bytes written, 0 when it would block, -1
 * on failure (*res says why). */
static ssize_t write_some(sock_comm *c, int s, struct iovec *iov, int n, koloResult_t *res, kolo_errbuf *eb) {
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
  for (;;) {
    ssize_t k = sendmsg(c->fds[s], &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k >= 0) return k;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    c->reset = errno == EPIPE || errno == ECONNRESET;
    *res = fail(c, eb, errno, 0);
    return -1;
  }
}

_Static_assert(((KOLO_COPY_ALIAS_MAX + 7) & ~7) <= KOLO_SOCK_PAD_MAX, "padding past kolo_copy's window fits a frame");

/* The kernel copies a payload into its socket buffer with REP MOVSB on
 * CPUs that have FSRM, which on some (common/copy.c) runs an order of
 * magnitude slower where the destination sits a few bytes past the source
 * within a 4 KiB page (1..31 where measured; kolo keeps clear of 1..63).
 * A write that finds the socket's buffer page free
 * starts at its beginning, so the payload lands hlen bytes past a page
 * boundary (plus what the same sendmsg wrote before it, `at`), and from a
 * slot on a page boundary that is the slow case: 2-process 4 MiB
 * all-reduce over loopback, 1.7 x the time.  A DATA frame not started yet
 * takes the padding that moves its payload out of it. */
static void place_payload(sock_out *o, size_t at) {
  if (o->off != 0 || o->frame.kind != KOLO_SOCK_DATA || o->plen < SOCK_PAD_MIN_PAYLOAD) return;
  uint32_t bare = o->hlen - o->frame.pad; /* the header without padding */
  unsigned past = (unsigned)(((uintptr_t)at + bare - (uintptr_t)o->payload) & 4095u);
  unsigned pad = past >= 1 && past <= KOLO_COPY_ALIAS_MAX ? (KOLO_COPY_ALIAS_MAX + 1 - past + 7) & ~7u : 0;
  if (pad == o->frame.pad) return;
  o->frame.pad = (uint8_t)pad;
  kolo_encode_sock_frame(o->hdr, &o->frame);
  memset(o->hdr + bare, 0, pad);
  o->hlen = bare + pad;
}

/* The unwritten bytes of frame o as at most two iovecs; their count. */
static int frame_iov(const sock_out *o, struct iovec *iov) {
  int n = 0;
  if (o->off < o->hlen) iov[n++] = (struct iovec){(void *)(o->hdr + o->off), o->hlen - o->off};
  size_t p = o->off > o->hlen ? o->off - o->hlen : 0;
  if (p < o->plen) iov[n++] = (struct iovec){(void *)(o->payload + p), o->plen - p};
  return n;
}

/* Writes stream 0's queued frames, as many per sendmsg as there are. */
static koloResult_t flush_frames(sock_comm *c, kolo_errbuf *eb) {
  koloResult_t res = koloSuccess;
  while (c->out_head != c->out_tail) {
    struct iovec iov[SOCK_IOV];
    int n = 0;
    size_t at = 0;
    for (uint32_t i = c->out_head; i != c->out_tail && n + 2 <= SOCK_IOV; i++) {
      sock_out *o = &c->out[i % SOCK_OUT_FRAMES];
      place_payload(o, at);
      int k = frame_iov(o, iov + n);
      for (int j = n; j < n + k; j++) at += iov[j].iov_len;
      n += k;
    }
    ssize_t k = write_some(c, 0, iov, n, &res, eb);
    if (k <= 0) return res;
    for (size_t left = (size_t)k; left > 0 && c->out_head != c->out_tail;) {
      sock_out *o = &c->out[c->out_head % SOCK_OUT_FRAMES];
      size_t take = o->hlen + o->plen - o->off < left ? o->hlen + o->plen - o->off : left;
      o->off += take;
      left -= take;
      if (o->off == o->hlen + o->plen) c->out_head++;
    }
  }
  return res;
}

/* Writes stream s's queued parts. */
static koloResult_t flush_parts(sock_comm *c, int s, kolo_errbuf *eb) {
  koloResult_t res = koloSuccess;
  while (parts_queued(c, s)) {
    struct iovec iov[SOCK_IOV];
    int n = 0;
    for (uint32_t i = c->part_head[s]; i != c->part_tail[s] && n < SOCK_IOV; i++) {
      sock_part *p = &c->parts[s - 1][i % KOLO_NET_MAX_REQS];
      iov[n++] = (struct iovec){p->buf + p->off, p->len - p->off};
    }
    ssize_t k = write_some(c, s, iov, n, &res, eb);
    if (k <= 0) return res;
    for (size_t left = (size_t)k; left > 0 && parts_queued(c, s);) {
      sock_part *p = first_part(c, s);
      size_t take = p->len - p->off < left ? p->len - p->off : left;
      p->off += take;
      left -= take;
      if (p->off == p->len) c->part_head[s]++;
    }
  }
  return res;
}

static koloResult_t read_in(sock_comm *c, kolo_errbuf *eb);

/* A write found the peer gone, and what it sent before it went may still
 * wait in this end's input: its stop word above all, which says why (a
 * peer that stops and closes with bytes unread resets the connection, and
 * a reset fails the next write at once).  It is delivered before the
 * failure is reported, as a read that meets the end delivers what came
 * before it; whatever else that read finds changes nothing. */
static void read_last_words(sock_comm *c) {
  kolo_errbuf ignored = {0};
  c->idle_in = 0;
  c->drained0 = 0;
  (void)read_in(c, &ignored);
}

static koloResult_t flush_out(sock_comm *c, kolo_errbuf *eb) {
  koloResult_t res = flush_frames(c, eb);
  for (int s = 1; s < c->nstreams && res == koloSuccess && c->is_send; s++) res = flush_parts(c, s, eb);
  if (res != koloSuccess && c->reset) read_last_words(c);
  return res;
}

/* ---- a slice from outside its slot --------------------------------------------- */

/* The newest slice's frame and parts point into `to` where they pointed
 * into `from` (both hold the slice at the same offsets). */
static void point_slice(sock_comm *c, int k, const char *from, const char *to) {
  sock_out *o = &c->out[(c->out_tail - 1) % SOCK_OUT_FRAMES];
  o->payload = to + (o->payload - from);
  for (int s = 1; s < k; s++) {
    sock_part *p = &c->parts[s - 1][(c->part_tail[s] - 1) % KOLO_NET_MAX_REQS];
    p->buf = (char *)to + (p->buf - from);
  }
}

/* The newest slice's bytes not written yet move from src into its slot,
 * and the slice points there: src is the caller's again. */
static void keep_rest(sock_comm *c, int k, const char *src, char *slot) {
  sock_out *o = &c->out[(c->out_tail - 1) % SOCK_OUT_FRAMES];
  size_t p = o->off > o->hlen ? o->off - o->hlen : 0;
  if (p < o->plen) kolo_copy(slot + (o->payload - src) + p, o->payload + p, o->plen - p);
  for (int s = 1; s < k; s++) {
    sock_part *q = &c->parts[s - 1][(c->part_tail[s] - 1) % KOLO_NET_MAX_REQS];
    if (q->off < q->len) kolo_copy(slot + (q->buf - src) + q->off, q->buf + q->off, q->len - q->off);
  }
  point_slice(c, k, src, slot);
}

/* The kernel copies from src what its socket buffers take now; only the
 * rest is copied into the slot, to go out later (a bulk slice on a busy
 * socket: most of it). */
koloResult_t kolo_sock_send_slice_from(void *comm, uint32_t step, size_t len, const kolo_call_sig *sig,
                                       const void *src, int *queued, kolo_errbuf *eb) {
  sock_comm *c = comm;
  koloResult_t res = kolo_sock_send_slice(comm, step, len, sig, queued, eb);
  if (res != koloSuccess || !*queued) return res;
  int k = parts_of(len, c->nstreams);
  char *slot = slot_of(c, step);
  point_slice(c, k, slot, src);
  res = flush_out(c, eb);
  keep_rest(c, k, src, slot);
  return res;
}

/* ---- input --------------------------------------------------------------------- */

/* One recv on stream s into buf: bytes read, 0 when nothing is there or
 * the stream ended (eof set), -1 on failure. */
static ssize_t read_some(sock_comm *c, int s, void *buf, size_t len, koloResult_t *res, kolo_errbuf *eb) {
  for (;;) {
    ssize_t k = recv(c->fds[s], buf, len, MSG_DONTWAIT);
    if (k > 0) return k;
    if (k == 0) {
      c->eof[s] = 1;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET) { /* as an end: what came before it was read */
      c->eof[s] = 1;
      return 0;
    }
    *res = fail(c, eb, errno, 0);
    return -1;
  }
}

/* Reads more of stream 0 into the staging buffer: 1 when bytes came.  Not
 * again in this progress call once a read came back short: the socket had
 * no more, and asking again costs a system call for nothing. */
static int refill(sock_comm *c, koloResult_t *res, kolo_errbuf *eb) {
  if (c->drained0) return 0;
  if (c->stage_lo == c->stage_hi) c->stage_lo = c->stage_hi = 0;
  if (c->stage_hi == c->stage_cap) { /* what is left moves to the front */
    memmove(c->stage, c->stage + c->stage_lo, c->stage_hi - c->stage_lo);
    c->stage_hi -= c->stage_lo;
    c->stage_lo = 0;
  }
  size_t room = c->stage_cap - c->stage_hi;
  ssize_t k = read_some(c, 0, c->stage + c->stage_hi, room, res, eb);
  c->drained0 = k < (ssize_t)room;
  if (k <= 0) return 0;
  c->stage_hi += (size_t)k;
  return 1;
}

/* Copies up to `want` staged bytes to dst; the count. */
static size_t take_staged(sock_comm *c, void *dst, size_t want) {
  size_t n = c->stage_hi - c->stage_lo < want ? c->stage_hi - c->stage_lo : want;
  kolo_copy(dst, c->stage + c->stage_lo, n);
  c->stage_lo += n;
  return n;
}

/* The next thing on stream 0 is a header. */
static void next_frame(sock_comm *c) {
  c->in_state = IN_HEADER;
  c->in_got = 0;
}

/* Tells the sink, in step order, every slice whose parts are all in. */
static void deliver(sock_comm *c) {
  while (c->delivered != c->next_step) {
    sock_slice *sl = &c->slices[c->delivered % KOLO_NET_MAX_REQS];
    if (sl->parts_left > 0) return;
    c->sink.slice(c->sink.ctx, c->delivered, sl->len, sl->has_sig ? &sl->sig : NULL);
    c->delivered++;
  }
}

static void part_done(sock_comm *c, uint32_t step) {
  c->slices[step % KOLO_NET_MAX_REQS].parts_left--;
  deliver(c);
}

/* 1 when the current DATA frame's padding is all zero. */
static int padding_zero(const sock_comm *c, int has_sig) {
  const uint8_t *p = c->in_hdr + KOLO_SOCK_HDR_BYTES + (has_sig ? KOLO_NET_SIG_BYTES : 0);
  for (unsigned i = 0; i < c->cur.pad; i++)
    if (p[i] != 0) return 0;
  return 1;
}

/* A DATA header and its signature came: where its parts land. */
static koloResult_t begin_slice(sock_comm *c, kolo_errbuf *eb) {
  sock_slice *sl = &c->slices[c->cur.value % KOLO_NET_MAX_REQS];
  char why[160];
  if (c->cur.value - c->delivered >= KOLO_NET_MAX_REQS) {
    snprintf(why, sizeof why, "sent slice %u while %u slices before it were still coming", c->cur.value,
             c->cur.value - c->delivered);
    return garbled(c, eb, why);
  }
  sl->has_sig = (c->cur.flags & KOLO_SOCK_FLAG_SIG) != 0;
  if (sl->has_sig && kolo_decode_call_sig(c->in_hdr + KOLO_SOCK_HDR_BYTES, &sl->sig, why, sizeof why) != KOLO_NET_WIRE_OK)
    return garbled(c, eb, why);
  if (!padding_zero(c, sl->has_sig)) return garbled(c, eb, "sent a slice whose padding is not zero");
  int k = parts_of(c->cur.len, c->nstreams);
  sl->len = c->cur.len;
  sl->parts_left = k;
  char *buf = slot_of(c, c->cur.value);
  for (int s = 1; s < k; s++)
    push_part(c, s, buf + part_lo(c->cur.len, s, k), part_hi(c->cur.len, s, k) - part_lo(c->cur.len, s, k),
              c->cur.value);
  c->pay = buf;
  c->pay_len = part_hi(c->cur.len, 0, k);
  c->pay_got = 0;
  c->next_step++;
  c->in_state = IN_PAYLOAD;
  return koloSuccess;
}

/* A whole header and what follows it (signature, report) came. */
static koloResult_t frame_in(sock_comm *c, kolo_errbuf *eb) {
  char why[160];
  if (c->cur.kind == KOLO_SOCK_DATA) return begin_slice(c, eb);
  next_frame(c);
  if (c->cur.kind == KOLO_SOCK_CREDIT) {
    c->sink.credit(c->sink.ctx, c->cur.value);
    return koloSuccess;
  }
  kolo_call_mismatch m;
  int has = (c->cur.flags & KOLO_SOCK_FLAG_REPORT) != 0;
  if (has && kolo_decode_mismatch(c->in_hdr + KOLO_SOCK_HDR_BYTES, &m, why, sizeof why) != KOLO_NET_WIRE_OK)
    return garbled(c, eb, why);
  c->sink.stop(c->sink.ctx, c->cur.value, has ? &m : NULL);
  return koloSuccess;
}

/* The header being read is whole: checks it, then waits for its extra. */
static koloResult_t header_in(sock_comm *c, kolo_errbuf *eb) {
  char why[160];
  if (kolo_decode_sock_frame(c->in_hdr, c->is_send, c->next_step, c->ring.slot_bytes, &c->cur, why, sizeof why) !=
      KOLO_NET_WIRE_OK)
    return garbled(c, eb, why);
  c->in_need = KOLO_SOCK_HDR_BYTES + kolo_sock_frame_extra(&c->cur);
  c->in_state = IN_EXTRA;
  return c->in_got == c->in_need ? frame_in(c, eb) : koloSuccess;
}

/* Moves the current DATA frame's first part; 1 while more may come now. */
static int payload_in(sock_comm *c, koloResult_t *res, kolo_errbuf *eb) {
  size_t want = c->pay_len - c->pay_got;
  if (want > 0 && c->stage_lo != c->stage_hi) {
    c->pay_got += take_staged(c, c->pay + c->pay_got, want);
  } else if (want >= c->stage_cap / 2) {
    if (c->drained0) return 0;
    ssize_t k = read_some(c, 0, c->pay + c->pay_got, want, res, eb);
    c->drained0 = k < (ssize_t)want;
    if (k <= 0) return 0;
    c->pay_got += (size_t)k;
  } else if (want > 0 && !refill(c, res, eb)) {
    return 0;
  }
  if (c->pay_got < c->pay_len) return 1;
  next_frame(c);
  part_done(c, c->cur.value);
  return 1;
}

/* Takes apart what stream 0 brings: 0 once it has nothing more now. */
static int stream0_step(sock_comm *c, koloResult_t *res, kolo_errbuf *eb) {
  if (c->in_state == IN_PAYLOAD) return payload_in(c, res, eb);
  size_t need = c->in_state == IN_HEADER ? KOLO_SOCK_HDR_BYTES : c->in_need;
  if (c->stage_lo == c->stage_hi && !refill(c, res, eb)) return 0;
  c->in_got += take_staged(c, c->in_hdr + c->in_got, need - c->in_got);
  if (c->in_got < need) return 1;
  *res = c->in_state == IN_HEADER ? header_in(c, eb) : frame_in(c, eb);
  return *res == koloSuccess;
}

/* Reads stream s's parts (receiver, s > 0). */
static koloResult_t read_parts(sock_comm *c, int s, kolo_errbuf *eb) {
  koloResult_t res = koloSuccess;
  while (parts_queued(c, s)) {
    sock_part *p = first_part(c, s);
    if (p->off < p->len) {
      ssize_t k = read_some(c, s, p->buf + p->off, p->len - p->off, &res, eb);
      if (k <= 0) return res;
      p->off += (size_t)k;
      if (p->off < p->len) continue;
    }
    c->part_head[s]++;
    part_done(c, p->step);
  }
  return res;
}

/* The peer's end, once everything sent before it is in (see the top). */
static koloResult_t check_end(sock_comm *c, kolo_errbuf *eb) {
  if (!c->eof[0]) return koloSuccess;
  int mid_frame = c->in_state != IN_HEADER || c->in_got > 0 || c->stage_lo != c->stage_hi;
  for (int s = 1; s < c->nstreams; s++)
    if (parts_queued(c, s) && !c->eof[s]) return koloSuccess; /* its parts may still come */
  if (!c->is_send && (mid_frame || c->delivered != c->next_step)) {
    c->failed = 1;
    return kolo_error_quiet(eb, koloRemoteError, "%s closed its network connection in the middle of a slice",
                            c->who);
  }
  return fail(c, eb, 0, 1);
}

/* 1 when a stream this end reads may have bytes: after a read that found
 * none, a poll() with no wait asks first.  A waiting executor takes a turn
 * on every poll of its loop, and a recv takes the socket's lock, which the
 * softirq delivering the peer's packet needs too (across a veth, 8-byte
 * all-reduce between 2 namespaces: 7.5% of the samples in that lock's slow
 * path); tcp_poll looks without it. */
static int maybe_readable(sock_comm *c) {
  if (!c->idle_in) return 1;
  struct pollfd pf[KOLO_NET_MAX_STREAMS];
  int n = 0;
  if (!c->eof[0]) pf[n++] = (struct pollfd){c->fds[0], POLLIN, 0};
  for (int s = 1; s < c->nstreams && !c->is_send; s++)
    if (parts_queued(c, s) && !c->eof[s]) pf[n++] = (struct pollfd){c->fds[s], POLLIN, 0};
  int k = n > 0 ? poll(pf, (nfds_t)n, 0) : 1;
  c->idle_in = k == 0;
  return k != 0;
}

static koloResult_t read_in(sock_comm *c, kolo_errbuf *eb) {
  koloResult_t res = koloSuccess;
  if (!maybe_readable(c)) return koloSuccess;
  uint32_t delivered = c->delivered;
  size_t got = c->in_got, staged = c->stage_hi;
  while (res == koloSuccess && stream0_step(c, &res, eb)) {
  }
  /* Nothing came: ask poll() before the next read. */
  c->idle_in = c->delivered == delivered && c->in_got == got && c->stage_hi == staged && !c->eof[0];
  for (int s = 1; s < c->nstreams && res == koloSuccess && !c->is_send; s++) res = read_parts(c, s, eb);
  return res == koloSuccess ? check_end(c, eb) : res;
}

koloResult_t kolo_sock_progress(void *comm, unsigned dir, kolo_errbuf *eb) {
  sock_comm *c = comm;
  if (c->failed) return failed_earlier(c, eb);
  if (!c->bound) return koloSuccess;
  koloResult_t res = (dir & KOLO_NET_OUT) ? flush_out(c, eb) : koloSuccess;
  c->drained0 = 0;
  if (res == koloSuccess && (dir & KOLO_NET_IN)) res = read_in(c, eb);
  return res;
}

int kolo_sock_pending(void *comm) {
  sock_comm *c = comm;
  if (c->failed) return 0;
  if (c->out_head != c->out_tail) return 1;
  for (int s = 1; s < c->nstreams && c->is_send; s++)
    if (parts_queued(c, s)) return 1;
  return 0;
}

/* SIOCOUTQ: bytes written and not yet acknowledged (tcp(7)).  A stream
 * that cannot say counts as drained: the flush must not wait on it. */
int kolo_sock_unacked(void *comm) {
  sock_comm *c = comm;
  if (c->failed || !c->bound) return 0;
  for (int s = 0; s < c->nstreams; s++) {
    int n = 0;
    if (!c->eof[s] && ioctl(c->fds[s], SIOCOUTQ, &n) == 0 && n > 0) return 1;
  }
  return 0;
}

int kolo_sock_pollfds(void *comm, struct pollfd *pf, int max) {
  sock_comm *c = comm;
  int n = 0;
  if (c->failed) return 0;
  short ev0 = (short)((c->eof[0] ? 0 : POLLIN) | (c->out_head != c->out_tail ? POLLOUT : 0));
  if (ev0 && n < max) pf[n++] = (struct pollfd){c->fds[0], ev0, 0};
  for (int s = 1; s < c->nstreams && n < max; s++)
    if (parts_queued(c, s) && !c->eof[s]) pf[n++] = (struct pollfd){c->fds[s], c->is_send ? POLLOUT : POLLIN, 0};
  return n;
}
