/* perf_net_xfer.c - the bandwidth and latency rounds of `kolo-perf net`
 * (see perf_net_xfer.h). */
#define _GNU_SOURCE
#include "perf/perf_net_xfer.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf/perf_check.h"
#include "perf/perf_sweep.h"
#include "transport/net_credit.h"
#include "transport/socket.h"

#define POISON 0xa5
#define SAMPLE_STRIDE_WORDS 512 /* timed rounds: one word in every 4 KiB */
/* Unproductive provider turns before sleeping in poll() on its fds: the
 * spin keeps latency low, the sleep leaves a small machine's CPU to the
 * sender (or the kernel's TCP).  KOLO_NET_SPIN (ib): see keep_spinning. */
#define SPIN_TURNS 200
#define SLEEP_MS 1

int net_fail(const char *fmt, ...) {
  char line[256]; /* the sentence's format: one write, as one fprintf makes */
  snprintf(line, sizeof line, "kolo-perf net: %s\n", fmt);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, line, ap);
  va_end(ap);
  return -1;
}

/* ---- pattern ---------------------------------------------------------------- */

static uint64_t pat_word(uint64_t seed, size_t j) { return perf_mix64(seed * 0x9e3779b97f4a7c15ull + j); }
static size_t nwords(size_t bytes) { return (bytes + 7) / 8; }

/* The expected word j of the message of iteration `iter`. */
static uint64_t msg_word(uint64_t seed, uint64_t iter, size_t j, size_t nw) {
  uint64_t w = pat_word(seed, j);
  if (j == 0 || j == nw - 1) w ^= perf_mix64(iter + 0x6b6f6c6full); /* the iteration's stamp */
  return w;
}

/* Word j's bytes that lie inside the buffer. */
static size_t word_len(size_t bytes, size_t j) { return bytes - j * 8 < 8 ? bytes - j * 8 : 8; }
static void put_word(char *buf, size_t bytes, size_t j, uint64_t w) { memcpy(buf + j * 8, &w, word_len(bytes, j)); }

/* Makes a pool buffer the message of `iter`: its first and last words. */
static void stamp(char *buf, size_t bytes, uint64_t seed, uint64_t iter) {
  size_t nw = nwords(bytes);
  if (nw == 0) return;
  put_word(buf, bytes, 0, msg_word(seed, iter, 0, nw));
  put_word(buf, bytes, nw - 1, msg_word(seed, iter, nw - 1, nw));
}

/* Wrong bytes of word j (only its bytes inside the buffer count). */
static uint64_t wrong_in_word(const char *buf, size_t bytes, size_t j, uint64_t want) {
  uint64_t got = 0, wrong = 0;
  size_t n = word_len(bytes, j);
  memcpy(&got, buf + j * 8, n);
  for (size_t i = 0; i < n; i++) wrong += ((got ^ want) >> (8 * i) & 0xff) != 0;
  return wrong;
}

/* Wrong bytes of a received message: all of them, or a sample. */
static uint64_t check(const char *buf, size_t bytes, uint64_t seed, uint64_t iter, int full) {
  size_t nw = nwords(bytes), stride = full ? 1 : SAMPLE_STRIDE_WORDS;
  uint64_t wrong = 0;
  for (size_t j = 0; j < nw; j += stride) wrong += wrong_in_word(buf, bytes, j, msg_word(seed, iter, j, nw));
  if (!full && nw > 1 && (nw - 1) % stride != 0)
    wrong += wrong_in_word(buf, bytes, nw - 1, msg_word(seed, iter, nw - 1, nw));
  return wrong;
}

/* Buffer k of the ring: the slot of steps k mod n, which carries seed k + 1. */
static char *slot(const net_bufs *b, int k) { return b->base + (size_t)k * b->bytes; }

int net_bufs_init(net_bufs *b, int n, size_t bytes) {
  *b = (net_bufs){NULL, n, bytes};
  /* Page aligned, as kolo's net slots are (ib registers them). */
  if (posix_memalign((void **)&b->base, 4096, (size_t)n * bytes + 1) != 0)
    return net_fail("cannot allocate %d buffers of %zu bytes", n, bytes);
  for (int k = 0; k < n; k++)
    for (size_t j = 0; j < nwords(bytes); j++) put_word(slot(b, k), bytes, j, pat_word((uint64_t)k + 1, j));
  return 0;
}

void net_bufs_fini(net_bufs *b) { free(b->base); }

/* ---- waiting on the provider ------------------------------------------------- */

static int provider_failed(const net_link *l, const char *what, const kolo_errbuf *eb) {
  return net_fail("%s (%s provider, peer %s): %s", what, l->net->name, l->who, eb->msg);
}

/* The pacer's clock, read every turn: CLOCK_MONOTONIC as of the kernel's
 * last tick, since a VM without a usable TSC (QEMU's, the soft-RoCE guest)
 * reads the HPET, ~2 us and an exit to the emulator per precise read. */
static int64_t coarse_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct {
  int idle;
  int64_t since; /* coarse_ms: the start, or the last turn that moved */
} pacer;

/* When this process last posted a send or saw one finish (KOLO_NET_SPIN). */
static int64_t last_send_ms = INT64_MIN / 2;

/* A pacer started now: at the start of a wait, and after each turn that moved. */
static pacer pacer_start(void) { return (pacer){0, coarse_ms()}; }

/* KOLO_NET_SPIN: keep polling while this side sends (sends in flight, or one
 * finished lately: an answer is due), up to KOLO_NET_SPIN_MS after progress. */
static int keep_spinning(const pacer *p, const net_link *l, int64_t now, int sending) {
  if (!(l->net->flags & KOLO_NET_SPIN)) return 0;
  return now - p->since < KOLO_NET_SPIN_MS && (sending || now - last_send_ms < KOLO_NET_SPIN_MS);
}

/* After a turn that moved nothing: spins, then sleeps on the fds of comm and
 * comm2 (or NULL), `sending` when this side has sends in flight; -1 (said)
 * when nothing moved for the whole timeout. */
static int pacer_turn(pacer *p, const net_link *l, void *comm, void *comm2, int sending) {
  int64_t now = coarse_ms();
  if (l->timeout_ms > 0 && now - p->since >= l->timeout_ms)
    return net_fail("nothing moved for %d ms (%s provider, peer %s)", l->timeout_ms, l->net->name, l->who);
  if (++p->idle < SPIN_TURNS || l->busy || keep_spinning(p, l, now, sending)) return 0;
  struct pollfd pf[2 * (KOLO_NET_MAX_STREAMS + 2)];
  int n = l->net->pollfds(comm, pf, KOLO_NET_MAX_STREAMS + 2);
  if (comm2) n += l->net->pollfds(comm2, pf + n, KOLO_NET_MAX_STREAMS + 2);
  /* n == 0: a provider without fds (polled completion queue) */
  if (n <= 0 || (poll(pf, (nfds_t)n, SLEEP_MS) < 0 && errno != EINTR)) sched_yield();
  return 0;
}

/* ---- one end of a connection ------------------------------------------------------ */

static void on_slice(void *ctx, uint32_t step, uint32_t len, const kolo_call_sig *sig) {
  (void)len, (void)sig;
  ((net_end *)ctx)->landed = step + 1;
}
static void on_credit(void *ctx, uint32_t head) { ((net_end *)ctx)->head = head; }
static void on_stop(void *ctx, uint32_t word, const kolo_call_mismatch *report) {
  (void)word, (void)report;
  ((net_end *)ctx)->stopped = 1;
}

/* Binds the ring to the end for a round (none is in flight: rounds end settled). */
static int bind_end(const net_link *l, net_end *e, net_bufs *b) {
  kolo_net_ring ring = {b->base, (uint32_t)b->n, b->bytes, 0};
  kolo_net_sink sink = {e, on_slice, on_credit, on_stop};
  kolo_errbuf eb = {0};
  if (l->net->bind(e->comm, &ring, &sink, &eb) != koloSuccess) return provider_failed(l, "bind", &eb);
  e->base = e->next;
  e->ring = b;
  return 0;
}

/* One progress call in the directions dir. */
static int end_turn(const net_link *l, net_end *e, unsigned dir) {
  kolo_errbuf eb = {0};
  if (l->net->progress(e->comm, dir, &eb) != koloSuccess) return provider_failed(l, "progress", &eb);
  return e->stopped ? net_fail("%s sent a stop word (%s provider)", l->who, l->net->name) : 0;
}

/* Receiver: credits what it drained when a net pipe would, or `force`. */
static int credit(const net_link *l, net_end *e, int force) {
  uint32_t owed = e->next - e->credited;
  if (owed == 0 || (!force && !kolo_net_pipe_credit_due(owed, (uint32_t)e->ring->n))) return 0;
  kolo_errbuf eb = {0};
  int queued = 0;
  if (l->net->send_credit(e->comm, e->next, &queued, &eb) != koloSuccess) return provider_failed(l, "credit", &eb);
  if (queued) e->credited = e->next;
  return 0;
}

/* Ends a round settled: what rx drained credited and written, and every
 * message tx sent credited by the peer (either may be NULL). */
static int settle(const net_link *l, net_end *tx, net_end *rx) {
  pacer p = pacer_start();
  for (;;) {
    if (rx && (credit(l, rx, 1) != 0 || end_turn(l, rx, KOLO_NET_OUT) != 0)) return -1;
    if (tx && end_turn(l, tx, KOLO_NET_OUT | KOLO_NET_IN) != 0) return -1;
    int done = (!rx || (rx->credited == rx->next && !l->net->pending(rx->comm))) &&
               (!tx || (tx->head == tx->next && !l->net->pending(tx->comm)));
    if (done) return 0;
    if (pacer_turn(&p, l, tx ? tx->comm : rx->comm, tx && rx ? rx->comm : NULL, tx != NULL) != 0) return -1;
  }
}

/* Receiver: checks what arrived (poisoning it for the next lap when full); 1 if any. */
static int drain(net_end *e, const net_round *r, uint64_t *wrong) {
  int moved = 0;
  for (; e->next != e->landed; e->next++, moved = 1) {
    int k = (int)(e->next % (uint32_t)e->ring->n);
    *wrong += check(slot(e->ring, k), r->bytes, (uint64_t)k + 1, e->next - e->base, r->full);
    if (r->full) memset(slot(e->ring, k), POISON, r->bytes);
  }
  return moved;
}

/* Sender: hands over the round's messages before `upto` that the window
 * allows, until the provider has no room now (*moved when it took one). */
static int feed(const net_link *l, net_end *e, const net_round *r, uint64_t upto, int *moved) {
  for (int sent = 1; sent && e->next - e->base < upto && e->next - e->head < (uint32_t)e->ring->n;) {
    int k = (int)(e->next % (uint32_t)e->ring->n);
    kolo_errbuf eb = {0};
    stamp(slot(e->ring, k), r->bytes, (uint64_t)k + 1, e->next - e->base);
    sent = 0;
    if (l->net->send_slice(e->comm, e->next, r->bytes, NULL, &sent, &eb) != koloSuccess)
      return provider_failed(l, "send", &eb);
    if (sent) e->next++, last_send_ms = coarse_ms();
    *moved |= sent;
  }
  return 0;
}

/* ---- setup socket -------------------------------------------------------------- */

/* Its 16-byte messages (the plan goes first, whole: perf_net.c). */
enum { NET_MSG_READY = 2, NET_MSG_DONE = 3 };
typedef struct { uint32_t tag, pad; uint64_t value; } wire_msg;

/* Says (say) or hears message `tag`, with *value when there is one: 0, or -1 (said). */
static int net_msg(const net_link *l, int say, uint32_t tag, uint64_t *value) {
  wire_msg m = {tag, 0, say && value ? *value : 0};
  kolo_errbuf eb = {0};
  int64_t deadline = kolo_deadline(l->timeout_ms);
  if ((say ? kolo_sock_send_all(l->oob, &m, sizeof m, deadline, l->who, &eb)
           : kolo_sock_recv_all(l->oob, &m, sizeof m, deadline, l->who, &eb)) != koloSuccess)
    return net_fail("the setup connection: %s", eb.msg);
  if (m.tag != tag) return net_fail("%s sent message %u where %u was due (different versions?)", l->who, m.tag, tag);
  if (!say && value) *value = m.value;
  return 0;
}

/* ---- the rounds -------------------------------------------------------------- */

/* Bandwidth: sends on tx and receives on rx (one of them NULL: one way)
 * until this side has all its credits and all the peer's messages. */
static int bw_round(const net_link *l, net_end *tx, net_end *rx, const net_round *r, uint64_t *wrong) {
  pacer p = pacer_start();
  while ((tx && tx->head - tx->base < r->iters) || (rx && rx->next - rx->base < r->iters)) {
    int moved = 0;
    uint32_t head = tx ? tx->head : 0;
    if (tx && (feed(l, tx, r, r->iters, &moved) != 0 || end_turn(l, tx, KOLO_NET_OUT | KOLO_NET_IN) != 0))
      return -1;
    if (rx && end_turn(l, rx, KOLO_NET_OUT | KOLO_NET_IN) != 0) return -1;
    moved |= (rx && drain(rx, r, wrong)) | (tx && tx->head != head);
    /* Both ways, all of the peer's messages in: credit the last ones now,
     * whatever their number, or a peer still waiting for them would wait
     * forever while this side waits for its own last credits. */
    if (rx && credit(l, rx, tx && rx->next - rx->base >= r->iters) != 0) return -1;
    if (moved)
      p = pacer_start();
    else if (pacer_turn(&p, l, (tx ? tx : rx)->comm, tx && rx ? rx->comm : NULL, tx && tx->next != tx->head) != 0)
      return -1;
  }
  return rx ? settle(l, tx, rx) : 0;
}

/* Sends message i on tx once the window allows (credits come as a net pipe's). */
static int lat_send(const net_link *l, net_end *tx, const net_round *r, uint64_t i) {
  pacer p = pacer_start();
  for (;;) {
    int moved = 0;
    if (feed(l, tx, r, i + 1, &moved) != 0) return -1;
    if (end_turn(l, tx, moved ? KOLO_NET_OUT : KOLO_NET_OUT | KOLO_NET_IN) != 0) return -1;
    if (moved) return 0;
    if (pacer_turn(&p, l, tx->comm, NULL, 1) != 0) return -1;
  }
}

/* Waits for message i on rx, checks it, credits.  What tx could not write
 * at once goes on meanwhile: the peer's answer waits for it. */
static int lat_recv(const net_link *l, net_end *tx, net_end *rx, const net_round *r, uint64_t i, uint64_t *wrong) {
  pacer p = pacer_start();
  while (rx->landed - rx->base <= i) {
    int out = l->net->pending(tx->comm);
    if ((out && end_turn(l, tx, KOLO_NET_OUT) != 0) || end_turn(l, rx, KOLO_NET_OUT | KOLO_NET_IN) != 0) return -1;
    if (rx->landed - rx->base <= i && pacer_turn(&p, l, rx->comm, out ? tx->comm : NULL, out) != 0) return -1;
  }
  drain(rx, r, wrong);
  return credit(l, rx, 0);
}

/* Latency: ping-pong, the client's message first.  One clock read per round
 * trip, on the client, as perftest takes the time between consecutive posts:
 * in the soft-RoCE guest a precise read costs microseconds (coarse_ms), so
 * two per round trip would weigh on a ~50 us figure. */
static int lat_round(const net_link *l, net_end *tx, net_end *rx, const net_round *r, int server, uint64_t *wrong) {
  double prev = server ? 0 : perf_now_us();
  for (uint64_t i = 0; i < r->iters; i++) {
    if ((!server && lat_send(l, tx, r, i) != 0) || lat_recv(l, tx, rx, r, i, wrong) != 0 ||
        (server && lat_send(l, tx, r, i) != 0))
      return -1;
    if (server) continue;
    double now = perf_now_us();
    if (r->rtt_us) r->rtt_us[i] = now - prev;
    prev = now;
  }
  return settle(l, tx, rx);
}

int net_round_run(net_link *l, net_round *r, int server, net_bufs *send, net_bufs *recv) {
  net_end *tx = send ? (server ? &l->back : &l->fwd) : NULL;
  net_end *rx = recv ? (server ? &l->fwd : &l->back) : NULL;
  int both = tx && rx && !r->lat;
  uint64_t wrong = 0, theirs = 0;
  if (rx && r->full) memset(recv->base, POISON, (size_t)recv->n * r->bytes);
  if ((tx && bind_end(l, tx, send) != 0) || (rx && bind_end(l, rx, recv) != 0)) return -1;
  /* "Ready", the server's; both ways the client's first: the rings are bound before anyone sends. */
  if ((both && net_msg(l, !server, NET_MSG_READY, NULL) != 0) || net_msg(l, server, NET_MSG_READY, NULL) != 0)
    return -1;
  double t0 = perf_now_us();
  int rc = r->lat ? lat_round(l, tx, rx, r, server, &wrong) : bw_round(l, tx, rx, r, &wrong);
  /* "Got all" with this side's wrong bytes, the server's; both ways both say it, then hear it. */
  if (rc != 0 || ((server || both) && net_msg(l, 1, NET_MSG_DONE, &wrong) != 0) ||
      ((!server || both) && net_msg(l, 0, NET_MSG_DONE, &theirs) != 0))
    return -1;
  r->seconds = (perf_now_us() - t0) * 1e-6;
  r->wrong = server ? 0 : wrong + theirs;
  return 0;
}
