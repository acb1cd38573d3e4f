/* config.c - the table of KOLO_* parameters (see config.h). */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

typedef struct {
  const char *name;
  const char *deflt; /* NULL: unset */
  const char *help;
} kolo_param;

static const kolo_param params[] = {
    {"KOLO_DEBUG", NULL, "log level: WARN, INFO or TRACE"},
    {"KOLO_DEBUG_FILE", NULL, "log to this file instead of stderr (%h host, %p pid)"},
    {"KOLO_MEMORY", "host", "memory kind of new communicators: host or cuda"},
    {"KOLO_TIMEOUT_MS", "300000", "bound on any wait for a peer, in ms (0: none)"},
    {"KOLO_STALL_WARN_S", "60", "a rank waiting this many seconds in a call for peers that have not reached it logs them and the call once, at WARN, host and CUDA communicators alike (0: never)"},
    {"KOLO_BUFFSIZE", "4194304", "bytes of slots per connector (per channel and peer)"},
    {"KOLO_P2P_BUFFSIZE", "1048576",
     "bytes of slots per point-to-point pipe (send/receive, all-to-all, gather, scatter and the latency "
     "algorithms' pipes), per channel and peer; at most the communicator's KOLO_BUFFSIZE"},
    {"KOLO_NSLOTS", "8", "slots per connector: a power of two in 2..64"},
    {"KOLO_NCHANNELS", "2", "channels (rings) per communicator (unset: 2, or 1 over the network where a host has one CPU per rank but not two)"},
    {"KOLO_MIN_NCHANNELS", "1", "channels per communicator at least (config.minChannels)"},
    {"KOLO_MAX_NCHANNELS", "16", "channels per communicator at most (config.maxChannels)"},
    {"KOLO_PROTO", NULL,
     "CUDA protocols allowed, NCCL_PROTO's syntax: LL, Simple, a list, ^ to exclude, coll:list entries per "
     "collective separated by ; (unset: LL up to KOLO_LL_THRESHOLD)"},
    {"KOLO_MIN_CHANNEL_BYTES", "262144", "bytes a channel must have before another one is used"},
    {"KOLO_NET_CHUNK_BYTES", "0",
     "host memory over the network: bytes of a round's chunk, a multiple of 4 KiB, at most half the slots (0: a "
     "tuning file's chunk line, else 512 KiB over the most ranks per CPU on a host, at least 64 KiB); the same on all "
     "ranks"},
    {"KOLO_LL_THRESHOLD", "65536", "CUDA: calls of at most this many bytes (count x type size) use the LL protocol (0: never)"},
    {"KOLO_LL_SLOT_BYTES", "16384", "CUDA: bytes of one LL slot (half of it payload), a multiple of 1 KiB"},
    {"KOLO_HOST_CPUS", NULL, "CPUs kolo counts on this host when it sizes its waits, channels, net hand-offs and chunks over the network (unset: the CPUs online; set it where a container's CPU quota gives less)"},
    {"KOLO_SPIN", "2000", "polls of a blocked wait before yielding the CPU"},
    {"KOLO_YIELDS", "64", "sched_yield() calls of a blocked wait before sleeping"},
    {"KOLO_SHM_DISABLE", "0", "1: ranks on one host do not use shared memory (for tests)"},
    {"KOLO_HOSTID", NULL, "host identity (any string) instead of hostname + boot id: ranks with equal ids are one host (tests)"},
    {"KOLO_ALGO", NULL, "algorithms the cost model may choose, NCCL_ALGO's syntax: ring, hier, rd, rabenseifner, a list, ^ to exclude, coll:list;... per collective (unset: all)"},
    {"KOLO_TUNING_FILE", NULL, "the cost model's constants, measured by kolo-perf tune (docs/tuning.md); the same file on every rank"},
    {"KOLO_SCHEDULE_FILE", NULL, "run the collectives this schedule file declares with its programs (docs/schedule-format.md); proved at init, the same file on every rank"},
    {"KOLO_NET_FORCE", "0", "1: ranks in different processes of one host use the net transport, and the algorithm choice prices their links as a network (tests)"},
    {"KOLO_NET_GDR", "0", "1: net pipes of CUDA communicators put their slots in GPU memory registered with the NIC (GPUDirect RDMA, dma-buf) where supported; 0: staged in pinned host memory"},
    {"KOLO_BOOTSTRAP_PROCESS_LINKS", "1", "1: init links the ranks of one process to each other (a thread driving several of them needs it); 0: every link on first use"},
    {"KOLO_PROXY_IDLE_MS", "50", "longest sleep of an idle network proxy, in ms (hand-offs, stop words and sockets wake it sooner)"},
    {"KOLO_NET_CALLER_BYTES", NULL, "net pipes: slices of at most this many bytes are sent by the calling thread itself, larger ones by the network proxy (unset: 64K where the host has two CPUs per rank, else all)"},
    {"KOLO_NET_SEND_DIRECT", "1", "net pipes: 1: a slice the calling thread sends goes out from the user's buffer, only what the socket does not take at once is copied into a slot; 0: every slice is copied into a slot first"},
    {"KOLO_SOCKET_NSTREAMS", "2", "TCP streams per net connection (1..8), chosen by the receiver"},
    {"KOLO_SOCKET_IFNAME", NULL, "network interface(s) for bootstrap and net pipes (prefix, ^ excludes, = exact)"},
    {"KOLO_SOCKET_FAMILY", NULL, "AF_INET or AF_INET6 for bootstrap addresses"},
    {"KOLO_NET", NULL, "network provider of net pipes: ib or socket (unset: ib when a device is usable)"},
    {"KOLO_IB_HCA", NULL, "RDMA devices[:port] to use (prefix list, ^ excludes, = exact), e.g. mlx5_0:1,mlx5_1"},
    {"KOLO_IB_GID_INDEX", "-1", "GID index of RoCE ports (-1: the RoCEv2 IPv4-mapped GID, found automatically)"},
    {"KOLO_IB_QPS_PER_CONN", "1", "RC queue pairs per ib net connection (1..8), chosen by the receiver"},
    {"KOLO_IB_TIMEOUT", "18", "ib QP ack timeout: 4.096 us << this (0..31; 18 = 1.07 s), 7 retries"},
    {"KOLO_FUSION_BUCKET_BYTES", "25M", "fusion: bytes per gradient bucket (koloFusionConfig_t.bucketBytes)"},
    {"KOLO_FUSION_FIRST_BUCKET_BYTES", "1M", "fusion: bytes of the first bucket, which starts communication early"},
    {"KOLO_FUSION_MIN_BUCKETS", "10", "fusion: buckets after the first are capped at the gradients' bytes / this (1: DDP's layout)"},
    {"KOLO_FUSION_THRESHOLD", "64M", "fusion: bytes of the buffer EXTERNAL tensors are packed into"},
    {"KOLO_FUSION_CYCLE_US", "1000", "fusion: microseconds between negotiation rounds while a step is in flight"},
    {"KOLO_TIMELINE", NULL, "fusion: write a Chrome trace of every step here (%r: the rank; else .rankN is appended)"},
    {"KOLO_ROOT", NULL, "rendezvous host:port for koloCommInitFromEnv"},
    {"KOLO_COMM_ID", NULL, "host:port: koloGetUniqueId returns the id of a root there, which rank 0 starts at init"},
    {"KOLO_RANK", NULL, "this process's rank for koloCommInitFromEnv"},
    {"KOLO_WORLD_SIZE", NULL, "number of ranks for koloCommInitFromEnv"},
    {"KOLO_SECRET", NULL, "per-job secret (32 hex digits) for koloCommInitFromEnv"},
    {"KOLO_SECRET_FILE", NULL, "file holding the per-job secret (32 hex digits), readable by its owner only"},
    {"KOLO_TORCH_PORT_OFFSET", "1", "under torchrun without KOLO_ROOT: kolo's root listens on MASTER_PORT + this"},
};

static const kolo_param *find_param(const char *name) {
  for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
    if (strcmp(params[i].name, name) == 0) return &params[i];
  fprintf(stderr, "kolo: internal error: unknown parameter %s\n", name);
  abort();
}

static _Atomic(kolo_param_fallback) fallback;

void kolo_param_set_fallback(kolo_param_fallback fn) { atomic_store(&fallback, fn); }

/* The variable's value, else the fallback's, else NULL. */
static const char *lookup(const char *name) {
  const char *v = getenv(name);
  if (v && *v) return v;
  kolo_param_fallback fn = atomic_load(&fallback);
  v = fn ? fn(name) : NULL;
  return (v && *v) ? v : NULL;
}

int kolo_param_is_set(const char *name) {
  (void)find_param(name);
  return lookup(name) != NULL;
}

const char *kolo_param_str(const char *name) {
  const kolo_param *p = find_param(name);
  const char *v = lookup(name);
  return v ? v : p->deflt;
}

static int parse_int(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (errno != 0 || end == s) return -1;
  int64_t mult = 1;
  switch (*end) {
  case 'k': case 'K': mult = 1LL << 10; end++; break;
  case 'm': case 'M': mult = 1LL << 20; end++; break;
  case 'g': case 'G': mult = 1LL << 30; end++; break;
  default: break;
  }
  if (*end != '\0') return -1;
  if (v > INT64_MAX / mult || v < INT64_MIN / mult) return -1;
  *out = (int64_t)v * mult;
  return 0;
}

/* One line per parameter and process, shown without KOLO_DEBUG: a setting
 * the user made and kolo does not follow must not pass unseen.  kolo goes on
 * with the default (a typo in a tuning knob should not stop a job), and says so. */
static _Atomic unsigned char malformed_reported[sizeof params / sizeof params[0]];

static void report_malformed(const kolo_param *p, const char *v) {
  if (atomic_exchange(&malformed_reported[p - params], 1)) return;
  KOLO_NOTICE("%s=%s is not an integer (decimal, 0x hex, or with a K/M/G suffix: %s); using the default %s",
              p->name, v, p->help, p->deflt ? p->deflt : "0");
}

int64_t kolo_param_int(const char *name) {
  const kolo_param *p = find_param(name);
  const char *v = lookup(name);
  int64_t out = 0;
  if (v && *v) {
    if (parse_int(v, &out) == 0) return out;
    report_malformed(p, v);
  }
  if (p->deflt == NULL || parse_int(p->deflt, &out) != 0) return 0;
  return out;
}

void kolo_param_print(FILE *out) {
  for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
    const char *v = lookup(params[i].name);
    fprintf(out, "%-24s %-12s (default %s) %s\n", params[i].name,
            v ? v : "-", params[i].deflt ? params[i].deflt : "-", params[i].help);
  }
}

/* The parser of kolo_param_int alone, for tests/fuzz/fuzz_env_config.c. */
int kolo_param_parse_int(const char *s, int64_t *out) { return parse_int(s, out); }

long kolo_host_cpus(void) {
  int64_t set = kolo_param_is_set("KOLO_HOST_CPUS") ? kolo_param_int("KOLO_HOST_CPUS") : 0;
  if (set >= 1) return set < (1 << 20) ? (long)set : 1L << 20;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online >= 1 ? online : 1;
}
