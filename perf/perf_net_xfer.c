/* perf_net_xfer.c - the bandwidth and latency rounds of `kolo-perf net`
 * (see perf_net_xfer.h). */
#define _GNU_SOURCE
#include "perf/perf_net_xfer.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport/socket.h"

#define POISON 0xa5
#define SAMPLE_STRIDE_WORDS 512 /* timed rounds: one word in every 4 KiB */
/* Unproductive provider turns before sleeping in poll() on its fds: a
 * short spin keeps latency low, the sleep keeps a busy receiver from taking
 * the CPU its sender (or the kernel's TCP) needs on a small machine.  A
 * KOLO_NET_SPIN provider (ib) spins longer while this side sends, as the
 * proxy does (net.h). */
#define SPIN_TURNS 200
#define SLEEP_MS 1

/* ---- pattern ---------------------------------------------------------------- */

static uint64_t mix(uint64_t x) { /* splitmix64's finalizer */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t pat_word(uint64_t seed, size_t j) { return mix(seed * 0x9e3779b97f4a7c15ull + j); }

/* Buffer k of a pool (and the k-th receive of a round: k = iteration mod
 * window) carries seed k + 1. */
static uint64_t seed_of(uint64_t iter, int window) { return iter % (uint64_t)window + 1; }
static uint64_t stamp_of(uint64_t iter) { return mix(iter + 0x6b6f6c6full); }

static size_t nwords(size_t bytes) { return (bytes + 7) / 8; }

/* The expected word j of the message of iteration `iter`. */
static uint64_t msg_word(uint64_t seed, uint64_t iter, size_t j, size_t nw) {
  uint64_t w = pat_word(seed, j);
  if (j == 0 || j == nw - 1) w ^= stamp_of(iter);
  return w;
}

/* Word j's bytes that lie inside the buffer. */
static size_t word_len(size_t bytes, size_t j) { return bytes - j * 8 < 8 ? bytes - j * 8 : 8; }

static void put_word(char *buf, size_t bytes, size_t j, uint64_t w) {
  memcpy(buf + j * 8, &w, word_len(bytes, j));
}

static void fill(char *buf, size_t bytes, uint64_t seed) {
  size_t nw = nwords(bytes);
  for (size_t j = 0; j < nw; j++) put_word(buf, bytes, j, pat_word(seed, j));
}

/* Makes a pool buffer the message of `iter`: its first and last words. */
static void stamp(char *buf, size_t bytes, uint64_t seed, uint64_t iter) {
  size_t nw = nwords(bytes);
  if (nw == 0) return;
  put_word(buf, bytes, 0, msg_word(seed, iter, 0, nw));
  put_word(buf, bytes, nw - 1, msg_word(seed, iter, nw - 1, nw));
}

/* Wrong bytes of word j (only its bytes inside the buffer count). */
static uint64_t wrong_in_word(const char *buf, size_t bytes, size_t j, uint64_t want) {
  uint64_t got = 0;
  size_t n = word_len(bytes, j);
  memcpy(&got, buf + j * 8, n);
  uint64_t wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += ((got >> (8 * i)) & 0xff) != ((want >> (8 * i)) & 0xff);
  return wrong;
}

/* Wrong bytes of a received message: all of them, or a sample. */
static uint64_t check(const char *buf, size_t bytes, uint64_t seed, uint64_t iter, int full) {
  size_t nw = nwords(bytes);
  uint64_t wrong = 0;
  size_t stride = full ? 1 : SAMPLE_STRIDE_WORDS;
  for (size_t j = 0; j < nw; j += stride) wrong += wrong_in_word(buf, bytes, j, msg_word(seed, iter, j, nw));
  if (!full && nw > 1 && (nw - 1) % stride != 0)
    wrong += wrong_in_word(buf, bytes, nw - 1, msg_word(seed, iter, nw - 1, nw));
  return wrong;
}

int net_bufs_init(net_bufs *b, int n, size_t bytes) {
  b->n = n;
  b->bytes = bytes;
  b->pool = calloc((size_t)n, sizeof *b->pool);
  if (b->pool == NULL) goto oom;
  for (int k = 0; k < n; k++) {
    /* Page aligned, as kolo's net slots are (ib registers them). */
    if (posix_memalign((void **)&b->pool[k], 4096, bytes ? bytes : 1) != 0) goto oom;
    fill(b->pool[k], bytes, (uint64_t)k + 1);
  }
  return 0;
oom:
  fprintf(stderr, "kolo-perf net: cannot allocate %d buffers of %zu bytes\n", n, bytes);
  net_bufs_fini(b);
  return -1;
}

void net_bufs_fini(net_bufs *b) {
  if (b->pool != NULL)
    for (int k = 0; k < b->n; k++) free(b->pool[k]);
  free(b->pool);
  b->pool = NULL;
}

/* ---- waiting on the provider ------------------------------------------------- */

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int provider_failed(const net_link *l, const char *what, const kolo_errbuf *eb) {
  fprintf(stderr, "kolo-perf net: %s (%s provider, peer %s): %s\n", what, l->net->name, l->who, eb->msg);
  return -1;
}

/* The pacer's clock: CLOCK_MONOTONIC in ms as of the kernel's last tick.
 * It is read every turn, and a precise clock is not free everywhere: a VM
 * without a usable TSC (QEMU's software emulation, where the soft-RoCE
 * figures come from) reads the HPET, ~2 us and an exit to the emulator per
 * read, slowing this loop and the other vCPU alike. */
static int64_t coarse_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct {
  int idle;
  int64_t deadline; /* coarse_ms; 0: none */
  int64_t since;    /* coarse_ms: the start, or the last turn that moved */
} pacer;

/* When this process last posted a send or saw one finish (KOLO_NET_SPIN). */
static int64_t last_send_ms = INT64_MIN / 2;
static void sent_now(void) { last_send_ms = coarse_ms(); }

static void pacer_restart(pacer *p, const net_link *l) {
  p->idle = 0;
  p->since = coarse_ms();
  p->deadline = l->timeout_ms > 0 ? p->since + l->timeout_ms : 0;
}

static void pacer_start(pacer *p, const net_link *l) { pacer_restart(p, l); }

/* KOLO_NET_SPIN: keep polling while this side sends (sends in flight, or
 * one finished lately: an answer is due), up to KOLO_NET_SPIN_MS after the
 * last progress. */
static int keep_spinning(const pacer *p, const net_link *l, int64_t now, int sending) {
  if (!(l->net->flags & KOLO_NET_SPIN)) return 0;
  return now - p->since < KOLO_NET_SPIN_MS && (sending || now - last_send_ms < KOLO_NET_SPIN_MS);
}

/* After a turn of the loop: spins, then sleeps on the connections' fds
 * (comm2 may be NULL); `sending`: this side has sends in flight.  -1 (said)
 * when nothing moved for the whole timeout. */
static int pacer_turn2(pacer *p, const net_link *l, void *comm, void *comm2, int moved, int sending) {
  if (moved) {
    pacer_restart(p, l);
    return 0;
  }
  int64_t now = coarse_ms();
  if (p->deadline != 0 && now >= p->deadline) {
    fprintf(stderr, "kolo-perf net: nothing moved for %d ms (%s provider, peer %s)\n", l->timeout_ms,
            l->net->name, l->who);
    return -1;
  }
  if (++p->idle < SPIN_TURNS || l->busy || keep_spinning(p, l, now, sending)) return 0;
  struct pollfd pf[2 * (KOLO_NET_MAX_STREAMS + 2)];
  int n = l->net->pollfds(comm, pf, KOLO_NET_MAX_STREAMS + 2);
  if (comm2) n += l->net->pollfds(comm2, pf + n, KOLO_NET_MAX_STREAMS + 2);
  if (n > 0) {
    if (poll(pf, (nfds_t)n, SLEEP_MS) < 0 && errno != EINTR) sched_yield();
  } else {
    sched_yield(); /* a provider without fds (polled completion queue) */
  }
  return 0;
}

static int pacer_turn(pacer *p, const net_link *l, void *comm, int moved, int sending) {
  return pacer_turn2(p, l, comm, NULL, moved, sending);
}

/* Waits for request id of comm (a send when is_send). */
static int wait_req(const net_link *l, void *comm, uint32_t id, int is_send, const char *what) {
  pacer p;
  pacer_start(&p, l);
  for (;;) {
    kolo_errbuf eb = {0};
    int done = 0;
    if (l->net->test(comm, id, &done, &eb) != koloSuccess) return provider_failed(l, what, &eb);
    if (done) {
      if (is_send) sent_now();
      return 0;
    }
    if (pacer_turn(&p, l, comm, 0, is_send) != 0) return -1;
  }
}

/* Posts one request, retrying while the provider's queue is full. */
static int post(const net_link *l, void *comm, int is_send, char *buf, size_t bytes, uint32_t *id) {
  pacer p;
  pacer_start(&p, l);
  for (;;) {
    kolo_errbuf eb = {0};
    int queued = 0;
    koloResult_t res = is_send ? l->net->isend(comm, buf, bytes, id, &queued, &eb)
                               : l->net->irecv(comm, buf, bytes, id, &queued, &eb);
    if (res != koloSuccess) return provider_failed(l, is_send ? "isend" : "irecv", &eb);
    if (queued) {
      if (is_send) sent_now();
      return 0;
    }
    if (pacer_turn(&p, l, comm, 0, is_send) != 0) return -1;
  }
}

/* ---- setup socket -------------------------------------------------------------- */

typedef struct {
  uint32_t tag, pad;
  uint64_t value;
} wire_msg;

int net_msg_send(const net_link *l, uint32_t tag, uint64_t value) {
  wire_msg m = {tag, 0, value};
  kolo_errbuf eb = {0};
  if (kolo_sock_send_all(l->oob, &m, sizeof m, kolo_deadline(l->timeout_ms), l->who, &eb) == koloSuccess)
    return 0;
  fprintf(stderr, "kolo-perf net: the setup connection: %s\n", eb.msg);
  return -1;
}

int net_msg_recv(const net_link *l, uint32_t tag, uint64_t *value) {
  wire_msg m;
  kolo_errbuf eb = {0};
  if (kolo_sock_recv_all(l->oob, &m, sizeof m, kolo_deadline(l->timeout_ms), l->who, &eb) != koloSuccess) {
    fprintf(stderr, "kolo-perf net: the setup connection: %s\n", eb.msg);
    return -1;
  }
  if (m.tag != tag) {
    fprintf(stderr, "kolo-perf net: %s sent message %u where %u was due (different versions?)\n", l->who,
            m.tag, tag);
    return -1;
  }
  if (value) *value = m.value;
  return 0;
}

/* ---- bandwidth --------------------------------------------------------------- */

int net_bw_client(const net_link *l, const net_round *r, net_bufs *send, net_round_result *out) {
  uint32_t ids[KOLO_NET_MAX_REQS];
  uint64_t posted = 0, done = 0, wrong = 0;
  if (net_msg_recv(l, NET_MSG_READY, NULL) != 0) return -1;
  double t0 = now_us();
  pacer p;
  pacer_start(&p, l);
  while (done < r->iters) {
    int moved = 0;
    while (posted < r->iters && posted - done < (uint64_t)r->window) {
      char *buf = send->pool[posted % (uint64_t)r->window];
      stamp(buf, r->bytes, seed_of(posted, r->window), posted);
      kolo_errbuf eb = {0};
      int queued = 0;
      if (l->net->isend(l->fwd, buf, r->bytes, &ids[posted % KOLO_NET_MAX_REQS], &queued, &eb) != koloSuccess)
        return provider_failed(l, "isend", &eb);
      if (!queued) break;
      posted++;
      moved = 1;
    }
    kolo_errbuf eb = {0};
    int fin = 0;
    if (l->net->test(l->fwd, ids[done % KOLO_NET_MAX_REQS], &fin, &eb) != koloSuccess)
      return provider_failed(l, "test", &eb);
    if (fin) done++;
    if (moved || fin) sent_now();
    if (pacer_turn(&p, l, l->fwd, moved || fin, posted > done) != 0) return -1;
  }
  if (net_msg_recv(l, NET_MSG_DONE, &wrong) != 0) return -1;
  out->seconds = (now_us() - t0) * 1e-6;
  out->wrong = wrong;
  return 0;
}

int net_bw_server(const net_link *l, const net_round *r, net_bufs *recv) {
  uint32_t ids[KOLO_NET_MAX_REQS];
  uint64_t posted = 0, done = 0, wrong = 0;
  int ready = 0;
  pacer p;
  pacer_start(&p, l);
  while (done < r->iters) {
    int moved = 0;
    while (posted < r->iters && posted - done < (uint64_t)r->window) {
      char *buf = recv->pool[posted % (uint64_t)r->window];
      if (r->full) memset(buf, POISON, r->bytes);
      if (post(l, l->fwd, 0, buf, r->bytes, &ids[posted % KOLO_NET_MAX_REQS]) != 0) return -1;
      posted++;
      moved = 1;
    }
    if (!ready && net_msg_send(l, NET_MSG_READY, 0) != 0) return -1;
    ready = 1;
    kolo_errbuf eb = {0};
    int fin = 0;
    if (l->net->test(l->fwd, ids[done % KOLO_NET_MAX_REQS], &fin, &eb) != koloSuccess)
      return provider_failed(l, "test", &eb);
    if (fin) {
      char *buf = recv->pool[done % (uint64_t)r->window];
      wrong += check(buf, r->bytes, seed_of(done, r->window), done, r->full);
      done++;
    }
    if (pacer_turn(&p, l, l->fwd, moved || fin, 0) != 0) return -1;
  }
  return net_msg_send(l, NET_MSG_DONE, wrong);
}

/* Both ways at once: sends on this side's send end, receives on the other,
 * each with its window; the client's clock runs from both "ready"s to its
 * last receive and the server's "got all", whichever is later. */
int net_bw_bidir(const net_link *l, const net_round *r, int server, net_bufs *send, net_bufs *recv,
                 net_round_result *out) {
  void *tx = server ? l->back : l->fwd, *rx = server ? l->fwd : l->back;
  uint32_t sids[KOLO_NET_MAX_REQS], rids[KOLO_NET_MAX_REQS];
  uint64_t sp = 0, sd = 0, rp = 0, rd = 0, wrong = 0, theirs = 0, w = (uint64_t)r->window;
  for (; rp < r->iters && rp < w; rp++) {
    if (r->full) memset(recv->pool[rp], POISON, r->bytes);
    if (post(l, rx, 0, recv->pool[rp], r->bytes, &rids[rp % KOLO_NET_MAX_REQS]) != 0) return -1;
  }
  /* The client's "ready" first, then the server's: each side's receives
   * are posted before the other starts sending. */
  if (server ? net_msg_recv(l, NET_MSG_READY, NULL) || net_msg_send(l, NET_MSG_READY, 0)
             : net_msg_send(l, NET_MSG_READY, 0) || net_msg_recv(l, NET_MSG_READY, NULL))
    return -1;
  double t0 = now_us();
  pacer p;
  pacer_start(&p, l);
  while (sd < r->iters || rd < r->iters) {
    int moved = 0, fin = 0;
    kolo_errbuf eb = {0};
    for (; sp < r->iters && sp - sd < w; sp++, moved = 1) {
      char *buf = send->pool[sp % w];
      int queued = 0;
      stamp(buf, r->bytes, seed_of(sp, r->window), sp);
      if (l->net->isend(tx, buf, r->bytes, &sids[sp % KOLO_NET_MAX_REQS], &queued, &eb) != koloSuccess)
        return provider_failed(l, "isend", &eb);
      if (!queued) break;
    }
    for (; rp < r->iters && rp - rd < w; rp++, moved = 1) {
      char *buf = recv->pool[rp % w];
      int queued = 0;
      if (r->full) memset(buf, POISON, r->bytes);
      if (l->net->irecv(rx, buf, r->bytes, &rids[rp % KOLO_NET_MAX_REQS], &queued, &eb) != koloSuccess)
        return provider_failed(l, "irecv", &eb);
      if (!queued) break;
    }
    if (sd < sp && l->net->test(tx, sids[sd % KOLO_NET_MAX_REQS], &fin, &eb) != koloSuccess)
      return provider_failed(l, "test", &eb);
    if (fin) sd++, moved = 1;
    if (moved) sent_now();
    fin = 0;
    if (rd < rp && l->net->test(rx, rids[rd % KOLO_NET_MAX_REQS], &fin, &eb) != koloSuccess)
      return provider_failed(l, "test", &eb);
    if (fin) {
      wrong += check(recv->pool[rd % w], r->bytes, seed_of(rd, r->window), rd, r->full);
      rd++;
      moved = 1;
    }
    if (pacer_turn2(&p, l, tx, rx, moved, sp > sd) != 0) return -1;
  }
  /* Both say "got all" (with their wrong bytes), then read the other's. */
  if (net_msg_send(l, NET_MSG_DONE, wrong) != 0 || net_msg_recv(l, NET_MSG_DONE, &theirs) != 0) return -1;
  out->seconds = (now_us() - t0) * 1e-6;
  out->wrong = server ? 0 : wrong + theirs;
  return 0;
}

/* ---- latency ------------------------------------------------------------------- */

/* The send pool has one buffer (seed 1): iteration i's message is stamped
 * i.  The receive pool has r->window >= 2 buffers: receive i lands in
 * buffer i % window, and receives are kept posted window - 1 messages
 * ahead, the next one posted right after this side's send, as the proxy
 * keeps its ring of slots posted: the receiver's advertisement (ib) is
 * then no step of the round trip. */
static int lat_post_recv(const net_link *l, void *comm, const net_round *r, net_bufs *recv, uint64_t i,
                         uint32_t *rids) {
  if (i >= r->iters) return 0;
  char *buf = recv->pool[i % (uint64_t)r->window];
  if (r->full) memset(buf, POISON, r->bytes);
  return post(l, comm, 0, buf, r->bytes, &rids[i % KOLO_NET_MAX_REQS]);
}

int net_lat_client(const net_link *l, const net_round *r, net_bufs *send, net_bufs *recv,
                   net_round_result *out) {
  uint64_t wrong = 0, ahead = (uint64_t)r->window - 1;
  uint32_t rids[KOLO_NET_MAX_REQS];
  char *sbuf = send->pool[0];
  for (uint64_t k = 0; k < ahead; k++)
    if (lat_post_recv(l, l->back, r, recv, k, rids) != 0) return -1;
  if (net_msg_recv(l, NET_MSG_READY, NULL) != 0) return -1;
  /* One clock read per round trip, as perftest takes the time between
   * consecutive posts: round trip i runs from the read that ended round
   * trip i - 1 (its check and the next stamp, a few words, fall inside).
   * In the soft-RoCE guest a precise read costs microseconds (see
   * coarse_ms), so two per round trip would weigh on a ~50 us figure. */
  double prev = now_us();
  for (uint64_t i = 0; i < r->iters; i++) {
    uint32_t sid;
    stamp(sbuf, r->bytes, 1, i);
    if (post(l, l->fwd, 1, sbuf, r->bytes, &sid) != 0 || lat_post_recv(l, l->back, r, recv, i + ahead, rids) != 0 ||
        wait_req(l, l->fwd, sid, 1, "send") != 0 ||
        wait_req(l, l->back, rids[i % KOLO_NET_MAX_REQS], 0, "receive") != 0)
      return -1;
    double now = now_us();
    if (r->rtt_us) r->rtt_us[i] = now - prev;
    prev = now;
    wrong += check(recv->pool[i % (uint64_t)r->window], r->bytes, 1, i, r->full);
  }
  uint64_t theirs = 0;
  if (net_msg_recv(l, NET_MSG_DONE, &theirs) != 0) return -1;
  out->seconds = 0;
  out->wrong = wrong + theirs;
  return 0;
}

int net_lat_server(const net_link *l, const net_round *r, net_bufs *send, net_bufs *recv) {
  uint64_t wrong = 0, ahead = (uint64_t)r->window - 1;
  uint32_t rids[KOLO_NET_MAX_REQS], sid;
  char *sbuf = send->pool[0];
  for (uint64_t k = 0; k < ahead; k++)
    if (lat_post_recv(l, l->fwd, r, recv, k, rids) != 0) return -1;
  if (net_msg_send(l, NET_MSG_READY, 0) != 0) return -1;
  for (uint64_t i = 0; i < r->iters; i++) {
    if (wait_req(l, l->fwd, rids[i % KOLO_NET_MAX_REQS], 0, "receive") != 0) return -1;
    wrong += check(recv->pool[i % (uint64_t)r->window], r->bytes, 1, i, r->full);
    stamp(sbuf, r->bytes, 1, i);
    if (post(l, l->back, 1, sbuf, r->bytes, &sid) != 0 || lat_post_recv(l, l->fwd, r, recv, i + ahead, rids) != 0 ||
        wait_req(l, l->back, sid, 1, "send") != 0)
      return -1;
  }
  return net_msg_send(l, NET_MSG_DONE, wrong);
}
