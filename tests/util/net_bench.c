/* net_bench.c - see net_bench.h. */
#define _GNU_SOURCE
#include "util/net_bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/net.h"
#include "transport/net_credit.h"
#include "transport/socket.h"

#define NSLOTS 8
#define SLOT_BYTES 4096
#define BW_SLOT_BYTES ((size_t)1 << 20)

typedef struct {
  const kolo_net_provider *net;
  uint32_t nslots;
  size_t slot_bytes;
  void *tx, *rx;        /* send end to the peer, receive end from it */
  char *tx_slots, *rx_slots;
  uint32_t sent, credited, landed, drained;
  uint32_t given; /* the receive end's last credit */
  int fd; /* the socket pair to the other process: handles, then the last barrier */
  kolo_errbuf eb;
} bench_end;

static void on_slice(void *ctx, uint32_t step, uint32_t len, const kolo_call_sig *sig) {
  (void)step, (void)len, (void)sig;
  ((bench_end *)ctx)->landed++;
}
static void on_credit(void *ctx, uint32_t head) { ((bench_end *)ctx)->credited = head; }
static void on_stop(void *ctx, uint32_t word, const kolo_call_mismatch *r) { (void)ctx, (void)word, (void)r; }

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Connects this process's send end to the peer's listener h, accepts its
 * receive end on its own listener, binds both. */
static int open_ends(bench_end *b, int me, const kolo_net_handle *h, void *lcomm) {
  const char *who[2] = {"process 0", "process 1"};
  if (b->net->connect(h, 0, kolo_deadline(10000), 10000, who[1 - me], &b->tx, &b->eb) != koloSuccess ||
      b->net->accept(lcomm, kolo_deadline(10000), 10000, who[1 - me], &b->rx, &b->eb) != koloSuccess)
    return -1;
  size_t bytes = b->nslots * b->slot_bytes;
  b->tx_slots = aligned_alloc(4096, bytes);
  b->rx_slots = aligned_alloc(4096, bytes);
  if (b->tx_slots == NULL || b->rx_slots == NULL) return -1;
  memset(b->tx_slots, 1, bytes);
  memset(b->rx_slots, 0, bytes);
  kolo_net_ring tr = {b->tx_slots, b->nslots, b->slot_bytes, 0}, rr = {b->rx_slots, b->nslots, b->slot_bytes, 0};
  kolo_net_sink sink = {b, on_slice, on_credit, on_stop};
  if (b->net->bind(b->tx, &tr, &sink, &b->eb) != koloSuccess || b->net->bind(b->rx, &rr, &sink, &b->eb) != koloSuccess)
    return -1;
  return 0;
}

static int turn(bench_end *b) {
  return b->net->progress(b->tx, KOLO_NET_OUT | KOLO_NET_IN, &b->eb) == koloSuccess &&
                 b->net->progress(b->rx, KOLO_NET_OUT | KOLO_NET_IN, &b->eb) == koloSuccess
             ? 0
             : -1;
}

/* Sends the next slice (with a signature) once the window allows. */
static int send_one(bench_end *b, size_t bytes) {
  kolo_call_sig sig = {bytes / 4, b->sent + 1, -1, 1, 7, 0, 1};
  for (;;) {
    int q = 0;
    if (b->sent - b->credited < b->nslots &&
        b->net->send_slice(b->tx, b->sent, bytes, &sig, &q, &b->eb) != koloSuccess)
      return -1;
    if (q) {
      b->sent++;
      return 0;
    }
    if (turn(b) != 0) return -1;
  }
}

/* Waits for slice `n - 1` to land, then drains it, crediting as net pipes
 * do (kolo_net_pipe_credit_due), and always after the `last` slice, as a
 * pipe does at the end of a call. */
static int recv_upto(bench_end *b, uint32_t n, int last) {
  while (b->landed < n)
    if (turn(b) != 0) return -1;
  b->drained = n;
  int q = 0;
  if (!last && !kolo_net_pipe_credit_due(n - b->given, b->nslots)) return 0;
  for (;;) { /* the last credit must go: the sender waits for it */
    if (b->net->send_credit(b->rx, n, &q, &b->eb) != koloSuccess) return -1;
    if (q) b->given = n;
    if (q || !last) return 0;
    if (turn(b) != 0) return -1;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One process's loop; process 0 keeps the times. */
static int run(bench_end *b, int me, int exchange, int iters, size_t bytes, double *t) {
  int warm = iters / 10 + 10;
  for (int i = 0; i < warm + iters; i++) {
    double t0 = now_us();
    int rc = 0;
    if (exchange || me == 0) rc = send_one(b, bytes);
    if (rc == 0) rc = recv_upto(b, (uint32_t)i + 1, i + 1 == warm + iters);
    if (rc == 0 && !exchange && me == 1) rc = send_one(b, bytes);
    if (rc != 0) return -1;
    if (i >= warm && me == 0) t[i - warm] = (now_us() - t0) / (exchange ? 1 : 2);
  }
  for (int k = 0; k < 2000 && (b->net->pending(b->tx) || b->net->pending(b->rx)); k++) turn(b), usleep(100);
  return 0;
}

static void close_ends(bench_end *b) {
  if (b->tx) b->net->close(b->tx);
  if (b->rx) b->net->close(b->rx);
  free(b->tx_slots);
  free(b->rx_slots);
}

static void summarize(double *t, int n, kt_bench_lat *out) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += t[i];
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  out->iters = n;
  out->mean_us = sum / n;
  out->p50_us = t[n / 2];
  out->p99_us = t[(int)(n * 0.99)];
}

/* One process's side of the meeting: its HCA (KOLO_TEST_IB_HCA_RANKn), a
 * listener of its own, handles traded over fd, then both ends opened. */
static int meet(bench_end *b, int me, int fd) {
  char var[64];
  snprintf(var, sizeof var, "KOLO_TEST_IB_HCA_RANK%d", me);
  if (getenv(var)) setenv("KOLO_IB_HCA", getenv(var), 1);
  struct sockaddr_storage lo = {0};
  ((struct sockaddr_in *)&lo)->sin_family = AF_INET;
  ((struct sockaddr_in *)&lo)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  kolo_net_handle mine, theirs;
  void *lcomm = NULL;
  const int64_t dl = kolo_deadline(10000);
  if (b->net->listen(&lo, 0, &mine, &lcomm, &b->eb) != koloSuccess) return -1;
  int rc = kolo_sock_send_all(fd, &mine, sizeof mine, dl, "the other process", &b->eb) == koloSuccess &&
                   kolo_sock_recv_all(fd, &theirs, sizeof theirs, dl, "the other process", &b->eb) == koloSuccess
               ? open_ends(b, me, &theirs, lcomm)
               : -1;
  b->net->close_listen(lcomm);
  return rc;
}

/* Both processes' setup: a fork (the child is process 1), then each
 * listens and hands its handle to the other over a socket pair.  Each
 * listens after the fork: a process's pipes share one listener
 * (transport/net_listen.h), which a child never takes over from its
 * parent.  *me says which this is; -1 with err filled on failure. */
static int start(bench_end *b, const char *provider, int *me, pid_t *child, char *err, size_t errlen) {
  b->net = kolo_net_find(provider);
  int sp[2];
  if (b->net == NULL || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
    snprintf(err, errlen, "setup: %s", b->net == NULL ? "no such provider" : strerror(errno));
    *me = 0;
    return -1;
  }
  *child = fork();
  *me = *child == 0 ? 1 : 0;
  close(sp[1 - *me]);
  b->fd = sp[*me];
  int rc = *child < 0 ? -1 : meet(b, *me, b->fd);
  if (rc != 0) snprintf(err, errlen, "process %d: %s", *me, *child < 0 ? "fork failed" : b->eb.msg);
  return rc;
}

/* Neither process closes its ends before the other is done with them: a
 * peer still reading its last slice would take the close for a failure. */
static int barrier(bench_end *b) {
  const int64_t dl = kolo_deadline(10000);
  char one = 1, got = 0;
  int ok = kolo_sock_send_all(b->fd, &one, 1, dl, "the other process", &b->eb) == koloSuccess &&
           kolo_sock_recv_all(b->fd, &got, 1, dl, "the other process", &b->eb) == koloSuccess;
  return ok ? 0 : -1;
}

/* Both processes' end: the child exits with rc; the parent reaps it. */
static int finish(bench_end *b, int me, pid_t child, int rc, char *err, size_t errlen) {
  if (rc == 0 && barrier(b) != 0) {
    snprintf(err, errlen, "process %d: %s", me, b->eb.msg);
    rc = -1;
  }
  if (b->fd >= 0) close(b->fd);
  close_ends(b);
  if (me == 1) {
    if (rc != 0) fprintf(stderr, "%s\n", err);
    _exit(rc == 0 ? 0 : 1);
  }
  int status = 0;
  if (child > 0 && (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) && rc == 0) {
    snprintf(err, errlen, "process 1 failed (status 0x%x)", status);
    rc = -1;
  }
  return rc;
}

int kt_net_bench_lat(const char *provider, int exchange, int iters, size_t bytes, kt_bench_lat *out, char *err,
                     size_t errlen) {
  bench_end b = {.nslots = NSLOTS, .slot_bytes = SLOT_BYTES, .fd = -1};
  double *t = calloc((size_t)iters, sizeof *t);
  int me = 0;
  pid_t child = -1;
  int rc = t == NULL || bytes > SLOT_BYTES ? -1 : start(&b, provider, &me, &child, err, errlen);
  if (rc == 0 && run(&b, me, exchange, iters, bytes, t) != 0) {
    snprintf(err, errlen, "process %d: %s", me, b.eb.msg);
    rc = -1;
  }
  rc = finish(&b, me, child, rc, err, errlen);
  if (rc == 0) summarize(t, iters, out);
  free(t);
  return rc;
}

/* Process 0 sends, process 1 receives and credits; 0 or -1. */
static int run_bw(bench_end *b, int me, int iters, size_t bytes, double *seconds) {
  int warm = b->nslots;
  double t0 = 0;
  for (int i = 0; i < warm + iters; i++) {
    if (i == warm) t0 = now_us();
    if (me == 0 && send_one(b, bytes) != 0) return -1;
    if (me == 1 && recv_upto(b, (uint32_t)i + 1, i + 1 == warm + iters) != 0) return -1;
  }
  while (me == 0 && b->credited != b->sent) /* the last one drained */
    if (turn(b) != 0) return -1;
  *seconds = (now_us() - t0) * 1e-6;
  for (int k = 0; k < 2000 && (b->net->pending(b->tx) || b->net->pending(b->rx)); k++) turn(b), usleep(100);
  return 0;
}

int kt_net_bench_bw(const char *provider, int iters, size_t bytes, int window, double *mbps, char *err,
                    size_t errlen) {
  bench_end b = {.nslots = (uint32_t)window, .slot_bytes = bytes, .fd = -1};
  int me = 0;
  pid_t child = -1;
  double secs = 0;
  int rc = bytes > BW_SLOT_BYTES || window < 2 || window > 64 ? -1 : start(&b, provider, &me, &child, err, errlen);
  if (rc == 0 && run_bw(&b, me, iters, bytes, &secs) != 0) {
    snprintf(err, errlen, "process %d: %s", me, b.eb.msg);
    rc = -1;
  }
  rc = finish(&b, me, child, rc, err, errlen);
  if (rc == 0) *mbps = (double)bytes * iters / secs / 1e6;
  return rc;
}
