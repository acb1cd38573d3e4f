/* perf_net.c - `kolo-perf net` (perf_net.h): the command line, the two
 * provider connections, the sweep over sizes and the table. */
#define _GNU_SOURCE /* getopt_long, prctl */
#include "perf/perf_net.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf/perf_args.h" /* perf_parse_size, perf_parse_int */
#include "perf/perf_net_xfer.h"
#include "perf/perf_sweep.h"
#include "transport/socket.h"

#define DEFAULT_PORT 18600
#define DEFAULT_WINDOW 16
/* Without -W a window holds what one of kolo's net pipes keeps in flight
 * (KOLO_BUFFSIZE's default), within MIN_AUTO_WINDOW..DEFAULT_WINDOW
 * messages: 16 MiB messages in a window of 16 leave the caches (1 MiB ones
 * streamed over loopback 0.74 x as fast as in a window of 4). */
#define AUTO_WINDOW_BYTES ((uint64_t)4 << 20)
#define MIN_AUTO_WINDOW 4
#define DEFAULT_TIMEOUT_MS 30000
/* Bytes a side's ring may hold: one 64 MiB message in flight streams well. */
#define POOL_CAP_BYTES ((size_t)256 << 20)
/* The largest message (a net slot is far smaller). */
#define MAX_BYTES ((uint64_t)1 << 30)
#define PLAN_MAGIC 0x6b6e7066u /* "knpf" */
#define PLAN_VERSION 2 /* 2: window 0 means chosen per size */

enum { TEST_BW = 1, TEST_LAT = 2, TEST_BIDIR = 4 };

/* What the client decides and the server follows. */
typedef struct {
  uint32_t magic, version;
  char provider[16];
  uint64_t min_bytes, max_bytes, step_bytes, step_factor;
  uint64_t iters;  /* 0: chosen per size */
  int32_t warmup;  /* -1: chosen per size */
  int32_t window; /* 0: chosen per size (window_for) */
  int32_t check, tests, timeout_ms;
  int32_t busy; /* both sides spin instead of sleeping on the provider's fds */
} net_plan;

typedef struct {
  net_plan plan;
  int server, port, provider_given, list;
  const char *host; /* NULL: --server, or fork both here */
  const char *json;
} net_args;

/* ---- command line ------------------------------------------------------------ */

static void usage(FILE *out) {
  fprintf(out,
          "usage: kolo-perf net [flags] [--server | HOST[:PORT]]\n"
          "  point-to-point bandwidth and latency over a kolo net provider, perftest-style\n"
          "  (docs/benchmarking.md); without --server or HOST both sides run here, over 127.0.0.1\n"
          "  -P, --provider NAME   socket or ib (default: what kolo's net pipes use, KOLO_NET)\n"
          "  -s, --size N          one message size (default 65536; K, M, G suffixes)\n"
          "  -b, -e N              smallest, largest size of a sweep\n"
          "  -f N / -i N           multiply (default 2) / add N bytes per step\n"
          "  -n, --iters N         timed messages (latency: round trips) per size (default: by size)\n"
          "  -w, --warmup N        untimed, fully checked messages first (default: one window; 10)\n"
          "  -W, --window N        bandwidth: messages in flight (1..%d; default 4 MiB worth, %d..%d)\n"
          "  -c, --check 0|1       poison and check every byte of the warm-up (default 1)\n"
          "      --bw | --lat      only the bandwidth or only the latency test (default both)\n"
          "      --bidir           bandwidth both ways at once instead (MB/s per direction)\n"
          "      --busy            both sides poll the provider without sleeping (perftest's way)\n"
          "  -p, --port N          setup port (default %d)\n"
          "      --server          wait for one client, run its plan, exit\n"
          "      --timeout MS      a peer silent this long is an error (default %d)\n"
          "      --json FILE       also write the rows as JSON\n"
          "      --list            print the providers of this build, one a line, and exit\n"
          "  -h, --help            this text\n",
          KOLO_NET_MAX_REQS, MIN_AUTO_WINDOW, DEFAULT_WINDOW, DEFAULT_PORT, DEFAULT_TIMEOUT_MS);
}

enum { OPT_BW = 256, OPT_LAT, OPT_BIDIR, OPT_BUSY, OPT_SERVER, OPT_TIMEOUT, OPT_JSON, OPT_LIST };
#define ARG(name, c) {name, required_argument, 0, c}
#define FLAG(name, c) {name, no_argument, 0, c}

static int parse_opt(net_args *a, int c, const char *v) {
  net_plan *p = &a->plan;
  size_t sz;
  int n;
  switch (c) {
    case 'P': return strlen(v) < sizeof p->provider ? (strcpy(p->provider, v), a->provider_given = 1, 0) : -1;
    case 's': return perf_parse_size(v, &sz) == 0 ? (p->min_bytes = p->max_bytes = sz, 0) : -1;
    case 'b': return perf_parse_size(v, &sz) == 0 ? (p->min_bytes = sz, 0) : -1;
    case 'e': return perf_parse_size(v, &sz) == 0 ? (p->max_bytes = sz, 0) : -1;
    case 'f': return perf_parse_size(v, &sz) == 0 && sz >= 1 ? (p->step_factor = sz, 0) : -1;
    case 'i': return perf_parse_size(v, &sz) == 0 && sz >= 1 ? (p->step_bytes = sz, p->step_factor = 1, 0) : -1;
    case 'n': return perf_parse_int(v, 1, 1 << 30, &n) == 0 ? (p->iters = (uint64_t)n, 0) : -1;
    case 'w': return perf_parse_int(v, 0, 1 << 30, &n) == 0 ? (p->warmup = (int32_t)n, 0) : -1;
    case 'W': return perf_parse_int(v, 1, KOLO_NET_MAX_REQS, &n) == 0 ? (p->window = (int32_t)n, 0) : -1;
    case 'c': return perf_parse_int(v, 0, 1, &n) == 0 ? (p->check = (int32_t)n, 0) : -1;
    case 'p': return perf_parse_int(v, 1, 65535, &n) == 0 ? (a->port = n, 0) : -1;
    case OPT_TIMEOUT: return perf_parse_int(v, 1, 1 << 30, &n) == 0 ? (p->timeout_ms = (int32_t)n, 0) : -1;
    case OPT_BW: p->tests = TEST_BW; return 0;
    case OPT_LAT: p->tests = TEST_LAT; return 0;
    case OPT_BIDIR: p->tests = TEST_BIDIR; return 0;
    case OPT_BUSY: p->busy = 1; return 0;
    case OPT_SERVER: a->server = 1; return 0;
    case OPT_JSON: a->json = v; return 0;
    case OPT_LIST: a->list = 1; return 0;
    default: return -1;
  }
}

/* 0 to run, 1 after --help, -1 on a bad command line (said). */
static int parse_args(net_args *a, int argc, char **argv) {
  static const struct option opts[] = {
      ARG("provider", 'P'), ARG("size", 's'), ARG("minbytes", 'b'), ARG("maxbytes", 'e'), ARG("stepfactor", 'f'),
      ARG("stepbytes", 'i'), ARG("iters", 'n'), ARG("warmup", 'w'), ARG("window", 'W'), ARG("check", 'c'),
      ARG("port", 'p'), ARG("timeout", OPT_TIMEOUT), ARG("json", OPT_JSON), FLAG("bw", OPT_BW), FLAG("lat", OPT_LAT),
      FLAG("bidir", OPT_BIDIR), FLAG("server", OPT_SERVER), FLAG("busy", OPT_BUSY), FLAG("list", OPT_LIST),
      FLAG("help", 'h'), {0, 0, 0, 0}};
  /* Static, so that the plan's padding, which goes over the wire, is zero. */
  static const net_args defaults = {
      .plan = {PLAN_MAGIC, PLAN_VERSION, "", 65536, 65536, 0, 2, .warmup = -1, .check = 1,
               .tests = TEST_BW | TEST_LAT, .timeout_ms = DEFAULT_TIMEOUT_MS},
      .port = DEFAULT_PORT};
  memcpy(a, &defaults, sizeof *a);
  net_plan *p = &a->plan;
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "P:s:b:e:f:i:n:w:W:c:p:h", opts, NULL)) != -1) {
    if (c == 'h') {
      usage(stdout);
      return 1;
    }
    if (c == '?' || parse_opt(a, c, optarg) != 0) {
      if (c != '?') net_fail("bad value '%s' for -%c", optarg, c < 256 ? c : '-');
      usage(stderr);
      return -1;
    }
  }
  if (optind < argc) a->host = argv[optind++];
  if (optind < argc || (a->server && a->host) || p->min_bytes > p->max_bytes || p->max_bytes > MAX_BYTES)
    return net_fail("%s", optind < argc              ? "one server address at most"
                          : a->server                 ? "--server takes no address"
                          : p->max_bytes > MAX_BYTES ? "messages of 1 GiB at most"
                                                      : "-b is above -e");
  return 0;
}

/* ---- sizes and counts (both sides compute them alike) ------------------------ */

static uint64_t next_size(const net_plan *p, uint64_t s) {
  uint64_t n = p->step_factor > 1 ? (s ? s * p->step_factor : 1) : s + p->step_bytes;
  return n > p->max_bytes || n <= s ? 0 : n;
}

/* How many messages of `bytes` make `worth` bytes, within lo..hi. */
static uint64_t count_of(uint64_t worth, uint64_t bytes, uint64_t lo, uint64_t hi) {
  uint64_t n = worth / (bytes ? bytes : 1);
  return n < lo ? lo : n > hi ? hi : n;
}

static int window_for(const net_plan *p, uint64_t bytes) {
  uint64_t want = p->window ? (uint64_t)p->window : count_of(AUTO_WINDOW_BYTES, bytes, MIN_AUTO_WINDOW, DEFAULT_WINDOW);
  return (int)count_of(POOL_CAP_BYTES, bytes, 1, want);
}

/* Timed messages (latency: round trips) per size, as the usage says. */
static uint64_t iters_for(const net_plan *p, uint64_t bytes, int lat) {
  if (p->iters) return p->iters;
  return lat ? count_of((uint64_t)128 << 20, bytes, 10, 1000) : count_of((uint64_t)512 << 20, bytes, 8, 20000);
}

/* ---- the rounds of one size ---------------------------------------------------- */

typedef struct {
  uint64_t bytes;
  int window;
  uint64_t bw_n, lat_n;
  double mbps, lat_p50, lat_p99; /* NAN when not run */
  uint64_t wrong;
} net_row;

/* Nearest-rank percentile of sorted v. */
static double percentile(const double *v, uint64_t n, double pct) {
  uint64_t k = (uint64_t)ceil(pct / 100.0 * (double)n);
  return v[k > 0 ? k - 1 : 0];
}

/* The client's latency figures from the round trips (sorted here). */
static void latency_of(net_row *row, double *rtt) {
  for (uint64_t i = 0; i < row->lat_n; i++) rtt[i] /= 2; /* half round trip */
  perf_sort_doubles(rtt, (size_t)row->lat_n);
  row->lat_p50 = percentile(rtt, row->lat_n, 50);
  row->lat_p99 = percentile(rtt, row->lat_n, 99);
}

/* Latency: buffers in each ring while they fit the pool cap, at least 2
 * (a receiver credits as a net pipe does, lagging by up to 7 of 9). */
#define LAT_RING 9

/* The warm-up round and the timed one of `test` (TEST_BW or TEST_LAT) at
 * row's size; the client fills in the figures. */
static int size_test(net_link *l, const net_plan *p, int server, int test, net_row *row) {
  int lat = test == TEST_LAT, n = lat ? (int)count_of(POOL_CAP_BYTES, row->bytes, 2, LAT_RING) : row->window;
  int both = lat || (p->tests & TEST_BIDIR), tx = both || !server, rx = both || server;
  uint64_t iters = lat ? row->lat_n : row->bw_n;
  double *rtt = lat && !server ? calloc(iters, sizeof *rtt) : NULL;
  net_bufs b[2] = {{NULL, 0, 0}, {NULL, 0, 0}}; /* the send ring, the receive ring */
  int rc = 0;
  if ((lat && !server && rtt == NULL) || (tx && net_bufs_init(&b[0], n, row->bytes) != 0) ||
      (rx && net_bufs_init(&b[1], n, row->bytes) != 0))
    rc = -1;
  net_round r = {row->bytes, 0, lat, p->check, NULL, 0, 0};
  for (int timed = 0; timed <= 1 && rc == 0; timed++) {
    r.iters = timed ? iters : p->warmup >= 0 ? (uint64_t)p->warmup : lat ? 10 : (uint64_t)row->window;
    r.full = timed ? 0 : p->check;
    r.rtt_us = timed ? rtt : NULL;
    if (r.iters == 0) continue;
    rc = net_round_run(l, &r, server, tx ? &b[0] : NULL, rx ? &b[1] : NULL);
    row->wrong += r.wrong;
  }
  if (rc == 0 && !server && lat) latency_of(row, rtt);
  if (rc == 0 && !server && !lat) row->mbps = (double)row->bytes * (double)row->bw_n / r.seconds / 1e6;
  net_bufs_fini(&b[1]);
  net_bufs_fini(&b[0]);
  free(rtt);
  return rc;
}

/* ---- the table ----------------------------------------------------------------- */

static void print_header(const net_plan *p, const char *peer) {
  printf("# kolo-perf net: provider %s, peer %s\n", p->provider, peer);
  printf("# bandwidth: %s, MB/s = 1e6 payload bytes per second (perftest's\n"
         "#   MB/sec is 2^20); latency: half the round trip of a ping-pong, median and 99th percentile\n",
         p->tests & TEST_BIDIR ? "both ways at once, per direction" : "uni-directional client -> server");
  printf("# waiting: %s\n", p->busy ? "busy polling (--busy)"
                            : "a short spin, then poll() on the provider's fds, as kolo's proxy (ib: "
                              "polling while this side sends, which the proxy does not)");
  printf("# check: %s; timed messages sample-checked\n",
         p->check ? "warm-up poisoned and checked byte by byte" : "off for the warm-up");
  printf("#%11s %8s %6s %11s %8s %8s %11s %11s %8s\n", "bytes", "bw_iters", "window", "MB/s", "GB/s",
         "lat_iters", "t_p50(us)", "t_p99(us)", "#wrong");
}

/* A figure of the table, or "-" for a test that did not run. */
static const char *cell(char *buf, const char *fmt, double v, int run) {
  if (!run) return "-";
  snprintf(buf, 24, fmt, v);
  return buf;
}

static void print_row(const net_row *r) {
  char c[6][24];
  int bw = !isnan(r->mbps), lat = !isnan(r->lat_p50);
  printf(" %11llu %8s %6d %11s %8s %8s %11s %11s %8llu\n", (unsigned long long)r->bytes,
         cell(c[0], "%.0f", (double)r->bw_n, bw), r->window, cell(c[1], "%.2f", r->mbps, bw),
         cell(c[2], "%.3f", r->mbps / 1e3, bw), cell(c[3], "%.0f", (double)r->lat_n, lat),
         cell(c[4], "%.2f", r->lat_p50, lat), cell(c[5], "%.2f", r->lat_p99, lat), (unsigned long long)r->wrong);
  fflush(stdout);
}

static void json_row(FILE *f, const net_row *r, int first, int bidir) {
  fprintf(f, "%s\n    {\"bytes\": %llu, \"window\": %d", first ? "" : ",", (unsigned long long)r->bytes, r->window);
  if (!isnan(r->mbps))
    fprintf(f, ", \"bidir\": %s, \"bw_iters\": %llu, \"bw_MBps\": %.3f, \"bw_GBps\": %.6f",
            bidir ? "true" : "false", (unsigned long long)r->bw_n, r->mbps, r->mbps / 1e3);
  if (!isnan(r->lat_p50))
    fprintf(f, ", \"lat_iters\": %llu, \"lat_p50_us\": %.3f, \"lat_p99_us\": %.3f",
            (unsigned long long)r->lat_n, r->lat_p50, r->lat_p99);
  fprintf(f, ", \"wrong\": %llu}", (unsigned long long)r->wrong);
}

/* Runs every size; the client prints.  0, 1 (wrong bytes) or 2. */
static int sweep(net_link *l, const net_plan *p, int server, FILE *json) {
  uint64_t wrong = 0;
  for (uint64_t s = p->min_bytes, next = 0;; s = next) {
    net_row row = {s, window_for(p, s), iters_for(p, s, 0), iters_for(p, s, 1), NAN, NAN, NAN, 0};
    if ((p->tests & (TEST_BW | TEST_BIDIR)) && size_test(l, p, server, TEST_BW, &row) != 0) return 2;
    if ((p->tests & TEST_LAT) && size_test(l, p, server, TEST_LAT, &row) != 0) return 2;
    wrong += row.wrong;
    if (!server) {
      print_row(&row);
      if (json) json_row(json, &row, s == p->min_bytes, (p->tests & TEST_BIDIR) != 0);
    }
    if ((next = next_size(p, s)) == 0) break;
  }
  if (!server) printf("# #wrong bytes: %llu %s\n", (unsigned long long)wrong, wrong ? "FAILED" : "OK");
  return wrong ? 1 : 0;
}

/* ---- connections ----------------------------------------------------------------- */

static void close_link(net_link *l) {
  if (l->fwd.comm) l->net->close(l->fwd.comm);
  if (l->back.comm) l->net->close(l->back.comm);
}

/* The provider's two connections over the setup socket: the handles cross
 * (the client's first), then the forward connection is made, then the
 * backward one, so that each blocking call has its partner running. */
static int connect_link(net_link *l, int server) {
  struct sockaddr_storage local;
  socklen_t len = sizeof local;
  if (getsockname(l->oob, (struct sockaddr *)&local, &len) != 0) return net_fail("getsockname: %s", strerror(errno));
  kolo_errbuf eb = {0};
  int ndev = 0;
  void *lcomm = NULL;
  kolo_net_handle mine, theirs;
  int64_t deadline = kolo_deadline(l->timeout_ms);
  koloResult_t res = l->net->devices(&ndev, &eb);
  if (res == koloSuccess && ndev < 1)
    return net_fail("the %s provider finds no device%s%s", l->net->name, eb.msg[0] ? ": " : "", eb.msg);
  if (res == koloSuccess) res = l->net->listen(&local, 0, &mine, &lcomm, &eb);
  if (res != koloSuccess) return net_fail("%s provider: %s", l->net->name, eb.msg);
  /* step k == server: this side's turn to speak */
  for (int k = 0; k < 2 && res == koloSuccess; k++)
    res = k == server ? kolo_sock_send_all(l->oob, &mine, sizeof mine, deadline, l->who, &eb)
                      : kolo_sock_recv_all(l->oob, &theirs, sizeof theirs, deadline, l->who, &eb);
  for (int k = 0; k < 2 && res == koloSuccess; k++) { /* forward, then backward */
    void **comm = &(k ? &l->back : &l->fwd)->comm;
    res = k == server ? l->net->connect(&theirs, 0, deadline, l->timeout_ms, l->who, comm, &eb)
                      : l->net->accept(lcomm, deadline, l->timeout_ms, l->who, comm, &eb);
  }
  l->net->close_listen(lcomm);
  if (res == koloSuccess) return 0;
  net_fail("connecting the %s provider to %s: %s", l->net->name, l->who, eb.msg);
  close_link(l); /* the forward connection, when only the backward one failed */
  return -1;
}

static const kolo_net_provider *pick_provider(net_plan *p) {
  kolo_errbuf eb = {0};
  const kolo_net_provider *n = p->provider[0] ? kolo_net_find(p->provider) : kolo_net_default(&eb);
  if (n == NULL && p->provider[0])
    net_fail("no provider named '%s' in this build (socket%s)", p->provider,
#ifdef KOLO_HAVE_IBVERBS
            ", ib"
#else
            "; ib needs kolo built with libibverbs"
#endif
    );
  else if (n == NULL)
    net_fail("%s", eb.msg);
  if (n != NULL) snprintf(p->provider, sizeof p->provider, "%s", n->name);
  return n;
}

/* One side, the plan agreed and the provider picked: its two connections,
 * the sweep, and on the client the table (and the JSON). */
static int run_plan(net_plan *p, const kolo_net_provider *net, int oob, const char *peer, int server,
                    const char *json_path) {
  net_link l = {net, {0}, {0}, oob, p->timeout_ms, peer, p->busy};
  if (connect_link(&l, server) != 0) return 2;
  FILE *json = NULL;
  if (json_path && (json = fopen(json_path, "w")) == NULL) {
    net_fail("cannot write %s: %s", json_path, strerror(errno));
    close_link(&l);
    return 2;
  }
  if (json) fprintf(json, "{\n  \"tool\": \"kolo-perf net\", \"provider\": \"%s\", \"results\": [", p->provider);
  if (!server) print_header(p, peer);
  int code = sweep(&l, p, server, json);
  if (json) {
    fprintf(json, "\n  ]\n}\n");
    if (fclose(json) != 0) code = 2;
  }
  close_link(&l);
  return server && code == 1 ? 0 : code; /* wrong bytes are the client's to report */
}

/* The client: the setup connection to addr, the plan sent, then run. */
static int run_client(const net_args *a, const struct sockaddr_storage *addr) {
  char peer[96];
  kolo_addr_str(addr, peer, sizeof peer);
  net_plan p = a->plan;
  kolo_errbuf eb = {0};
  int fd = -1, code = 2;
  if (kolo_sock_connect(addr, kolo_deadline(p.timeout_ms), p.timeout_ms, peer, &eb, &fd) != koloSuccess) {
    net_fail("%s", eb.msg);
    return 2;
  }
  const kolo_net_provider *net = pick_provider(&p);
  if (net && kolo_sock_send_all(fd, &p, sizeof p, kolo_deadline(p.timeout_ms), peer, &eb) != koloSuccess)
    net_fail("sending the plan: %s", eb.msg);
  else if (net)
    code = run_plan(&p, net, fd, peer, 0, a->json);
  close(fd);
  return code;
}

/* The client's plan, if this server can follow it: 0, or -1 (said). */
static int receive_plan(const net_args *a, int oob, const char *peer, net_plan *p) {
  kolo_errbuf eb = {0};
  if (kolo_sock_recv_all(oob, p, sizeof *p, kolo_deadline(a->plan.timeout_ms), peer, &eb) != koloSuccess)
    return net_fail("receiving the plan from %s: %s", peer, eb.msg);
  if (p->magic != PLAN_MAGIC || p->version != PLAN_VERSION || p->window < 0 || p->window > KOLO_NET_MAX_REQS)
    return net_fail("%s sent no plan of this version", peer);
  p->provider[sizeof p->provider - 1] = '\0';
  if (a->provider_given && strcmp(a->plan.provider, p->provider) != 0)
    return net_fail("the client runs the %s provider, this server -P %s", p->provider, a->plan.provider);
  return 0;
}

/* Waits (without bound) for one client on lfd; the connection or -1. */
static int accept_client(int lfd, char *peer, size_t len) {
  struct sockaddr_storage from;
  kolo_errbuf eb = {0};
  int fd = -1;
  while (fd < 0) {
    struct pollfd pf = {lfd, POLLIN, 0};
    if (kolo_poll(&pf, 1, 0) < 0) return net_fail("poll: %s", strerror(errno));
    if (kolo_sock_accept(lfd, &from, &eb, &fd) != koloSuccess) return net_fail("%s", eb.msg);
  }
  kolo_addr_str(&from, peer, len);
  return fd;
}

/* The server: one client on lfd (closed), its plan, then run. */
static int serve(const net_args *a, int lfd) {
  char peer[96];
  net_plan p;
  int fd = accept_client(lfd, peer, sizeof peer), code = 2;
  close(lfd);
  if (fd < 0) return 2;
  const kolo_net_provider *net = receive_plan(a, fd, peer, &p) == 0 ? pick_provider(&p) : NULL;
  if (net) code = run_plan(&p, net, fd, peer, 1, NULL);
  close(fd);
  return code;
}

static int resolve(const char *host, int port, struct sockaddr_storage *out) {
  char name[256], service[16];
  snprintf(name, sizeof name, "%s", host);
  char *colon = strrchr(name, ':');
  if (colon && strchr(name, ':') == colon) { /* HOST:PORT (one colon: no IPv6 literal) */
    *colon = '\0';
    if (perf_parse_int(colon + 1, 1, 65535, &port) != 0)
      return net_fail("%s: the port '%s' is not a whole number from 1 to 65535", host, colon + 1);
  }
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
  int err = getaddrinfo(name, service, &hints, &ai);
  if (err != 0 || ai == NULL) return net_fail("cannot resolve %s: %s", host, gai_strerror(err));
  memset(out, 0, sizeof *out);
  memcpy(out, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
  return 0;
}

/* The setup socket's listener on 127.0.0.1 (loopback) or every address. */
static int listen_on(int port, int loopback, struct sockaddr_storage *addr) {
  struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY)};
  memset(addr, 0, sizeof *addr);
  memcpy(addr, &in, sizeof in);
  kolo_errbuf eb = {0};
  int fd = -1;
  return kolo_sock_listen(addr, &eb, &fd) == koloSuccess ? fd : net_fail("%s", eb.msg);
}

/* Both sides here: the server forked (before any thread exists), the
 * client in this process, over 127.0.0.1. */
static int run_both(const net_args *a) {
  struct sockaddr_storage addr;
  int lfd = listen_on(0, 1, &addr);
  if (lfd < 0) return 2;
  fflush(NULL);
  pid_t parent = getpid(), pid = fork();
  if (pid < 0) {
    net_fail("fork: %s", strerror(errno));
    close(lfd);
    return 2;
  }
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(2);
    int code = serve(a, lfd);
    fflush(NULL);
    _exit(code);
  }
  close(lfd);
  int code = run_client(a, &addr), status = 0;
  if (code == 2) kill(pid, SIGTERM); /* it may wait for us still */
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
  if (code == 2 || (!WIFSIGNALED(status) && WEXITSTATUS(status) == 0)) return code;
  if (WIFSIGNALED(status))
    net_fail("the server process was killed by signal %d", WTERMSIG(status));
  else
    net_fail("the server process failed (exit status %d)", WEXITSTATUS(status));
  return 2;
}

int perf_net_main(int argc, char **argv) {
  net_args a;
  int r = parse_args(&a, argc, argv);
  if (r != 0) return r > 0 ? 0 : 2;
  if (a.list) { /* the names kolo_net_find knows in this build */
    static const char *const names[] = {"socket", "ib"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (kolo_net_find(names[i]) != NULL) printf("%s\n", names[i]);
    return 0;
  }
  signal(SIGPIPE, SIG_IGN);
  struct sockaddr_storage addr;
  if (a.server) {
    int lfd = listen_on(a.port, 0, &addr);
    if (lfd < 0) return 2;
    printf("# kolo-perf net: server waiting on port %d\n", a.port);
    fflush(stdout);
    return serve(&a, lfd);
  }
  if (a.host == NULL) return run_both(&a);
  if (resolve(a.host, a.port, &addr) != 0) return 2;
  return run_client(&a, &addr);
}
