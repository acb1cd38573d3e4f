/* comm_topology.c - a communicator's rings (one per channel, rotated),
 * its hierarchical all-reduce where hosts allow it, and the ring pipes:
 * made at init, closed when it is freed. */
#include "core/comm_topology.h"

#include <stdlib.h>

#include "common/log.h"
#include "core/comm_config.h"
#include "ring/algo_select.h"
#include "ring/topology.h"
#include "ring/tuning.h"
#include "transport/socket.h"
#include "transport/transport.h"

#define TAG_RING_PIPE 0x1000u
#define TAG_HIER_PIPE 0x3000u /* | ring (0 intra, 1 inter) << 8 | channel */

/* Hierarchical all-reduce on this comm (host or CUDA memory: the host
 * executor runs its phases as dependent tasks, the CUDA planner as
 * consecutive launches): a topology that allows it, not forced off. */
static koloResult_t build_hier(struct koloComm *c, const kolo_hosts *h) {
  int possible = kolo_algo_hier_possible(&c->algo);
  if (c->algo.forced == KOLO_ALGO_HIER && !possible && c->rank == 0)
    KOLO_INFO("KOLO_ALGO=hier: all-reduce runs the flat ring, since it needs 2 or more hosts with the same "
              "number (2 or more) of ranks");
  if (!possible || !kolo_algo_may_run(&c->algo, KOLO_ALGO_HIER)) return koloSuccess;
  if (kolo_sched_has(c->sched, KOLO_COLL_ALL_REDUCE)) {
    if (c->rank == 0) KOLO_INFO("KOLO_SCHEDULE_FILE gives the all-reduce: no hierarchical all-reduce");
    return koloSuccess;
  }
  kolo_ring intra, inter;
  if (kolo_ring_build_intra(h, c->rank, &intra) != koloSuccess) return koloSystemError;
  if (kolo_ring_build_inter(h, c->rank, &inter) != koloSuccess) {
    kolo_ring_free(&intra);
    return koloSystemError;
  }
  koloResult_t res = koloSuccess;
  int built = 0;
  while (built < KOLO_HIER_PHASES && res == koloSuccess) {
    res = kolo_sched_all_reduce_hier(&intra, &inter, c->rank, built, &c->hier_prog[built]);
    if (res == koloSuccess) built++;
  }
  while (res != koloSuccess && built > 0) kolo_program_free(&c->hier_prog[--built]);
  kolo_ring_free(&intra);
  kolo_ring_free(&inter);
  c->hier_ready = res == koloSuccess;
  return res;
}

/* Programs per slot: one per ring, or per channel with a schedule file;
 * and two at least where the double binary tree may run on several
 * channels, whose even and odd channels run different trees (its rings
 * are 1 or nchannels: with nchannels, variant ch is channel ch). */
static int program_variants(const struct koloComm *c) {
  if (c->sched) return c->nchannels;
  int dbtree = c->nranks > 2 && (kolo_bcast_may_run(&c->algo, KOLO_ALGO_DBTREE) ||
                                 kolo_reduce_may_run(&c->algo, KOLO_ALGO_DBTREE));
  return c->nrings == 1 && c->nchannels > 1 && dbtree ? 2 : c->nrings;
}

/* The cost model's hosts: how many, and ranks per host where all are equal. */
static void price_hosts(struct koloComm *c, const kolo_hosts *h) {
  c->algo.nhosts = h->nhosts;
  c->algo.local = kolo_hosts_uniform(h) ? h->host_size[0] : 0;
}

/* The cost model prices each hop by the link it takes: its "hosts" are the
 * groups of ranks that reach each other without the network
 * (kolo_link_group), which KOLO_NET_FORCE=1 makes processes, else it
 * would price their TCP hops as shared memory. */
static koloResult_t price_links(struct koloComm *c, const kolo_hosts *hosts) {
  uint64_t *ids = malloc((size_t)c->nranks * sizeof *ids);
  if (ids == NULL) return koloSystemError;
  int same = 1;
  for (int r = 0; r < c->nranks; r++) {
    const kolo_peer_info *p = kolo_bootstrap_peer(c->bs, r);
    ids[r] = kolo_link_group(p);
    same &= ids[r] == p->host_hash;
  }
  kolo_hosts g;
  koloResult_t res = same ? koloSuccess : kolo_hosts_build(c->nranks, ids, &g);
  free(ids);
  if (res != koloSuccess) return res;
  price_hosts(c, same ? hosts : &g);
  if (!same) kolo_hosts_free(&g);
  return koloSuccess;
}

/* The default channel count over the network is one where every rank has
 * a CPU but some host has no second one per rank: each channel is another
 * pipe whose slices the executor must move and poll, and without a spare
 * CPU a second channel only halves every send (2 processes on 2 CPUs,
 * loopback TCP, 2 MiB all-reduce: 531 us on one channel, 667 us on two).
 * Where ranks outnumber CPUs they keep their channels: a rank that gets
 * the CPU back finds more work ready on two (4 processes on 2 CPUs: 2 MiB
 * ~3.7 ms on one channel, ~2.9 ms on two).  Every rank decides alike: the
 * inputs are the agreed shapes (comm_agree.c) and the link groups.  Host
 * memory only: a CUDA channel is a block of the GPU. */
static void net_channels(struct koloComm *c) {
  int lower = c->cpus_short && !c->cpus_crowded && c->kind == NULL && c->algo.nhosts > 1;
  if (c->channels_fixed || !lower || c->nchannels == 1) return;
  if (c->rank == 0)
    KOLO_INFO("ranks meet over the network and a host of this communicator has one CPU per rank but not two: "
              "1 channel, not %d (KOLO_NCHANNELS sets it)", c->nchannels);
  c->nchannels = 1;
}

/* Host memory over the network: a round's chunk is at most 512 KiB per
 * rank sharing a CPU (at least 64 KiB), not half the slots (2 MiB by
 * default).  A ring step cannot start before the step it reduces has
 * arrived, so the chunk is what each rank has in flight and touches per
 * step: its input and output, its slot, and over TCP the kernel's socket
 * buffers on both ends; the smaller it is, the more of that stays in the
 * caches, and the more rounds pay their fixed cost.  Which wins moves with
 * the machine: on the 2-core VM, loopback TCP, 4-16 MiB all-reduce, 512 KiB
 * chunks took 0.60-0.67 x the time of 2 MiB ones with 2 processes, 256 KiB
 * ones 0.56-0.72 x with 4 (2026-12-02); a day later, with each round's
 * fixed cost grown (8-byte all-reduce 9.1 -> 15.7 us), 2 MiB took
 * 0.61-0.71 x the time of 512 KiB with 2 processes and buffers on a page
 * boundary (16 bytes past one, both the same), and with 4 no chunk beat
 * 256 KiB.  KOLO_NET_CHUNK_BYTES (agreed, as the shapes are) or a
 * tuning file's chunk line (kolo-perf tune measures it) sets it where the
 * rule loses.  Measured over TCP; ib pipes get the same rule,
 * unmeasured.  Every rank decides alike: the inputs are the agreed shapes
 * and the link groups. */
#define NET_CHUNK_PER_CPU (512u << 10)
#define NET_CHUNK_MIN (64u << 10)
static int ranks_per_cpu(const struct koloComm *c) { return c->ranks_per_cpu > 1 ? c->ranks_per_cpu : 1; }

static size_t net_chunk_rule(const struct koloComm *c) {
  size_t cap = NET_CHUNK_PER_CPU / (size_t)ranks_per_cpu(c);
  return cap < NET_CHUNK_MIN ? NET_CHUNK_MIN : cap & ~(size_t)4095; /* whole pages (a chunk: whole 64-byte lines) */
}

/* Where the chunk comes from: KOLO_NET_CHUNK_BYTES where set, else a
 * tuning file's chunk line for this link and rank count, else the rule. */
static size_t chunk_wanted(const struct koloComm *c, const char **from) {
  size_t tuned = c->algo.tuned != NULL ? kolo_tuned_chunk(&c->tuned, c->nranks) : 0;
  *from = c->net_chunk_bytes != 0 ? "KOLO_NET_CHUNK_BYTES" : tuned != 0 ? "a KOLO_TUNING_FILE chunk line" : NULL;
  return c->net_chunk_bytes != 0 ? c->net_chunk_bytes : tuned != 0 ? tuned : net_chunk_rule(c);
}

/* A chunk set by the user is said at INFO where it does not apply, as the
 * rule would not, and where half the slots bound it. */
static void net_chunk(struct koloComm *c) {
  size_t half_slots = c->slot_bytes * (c->nslots / 2);
  if (c->kind != NULL || c->algo.nhosts < 2) {
    if (c->net_chunk_bytes != 0 && c->rank == 0)
      KOLO_INFO("KOLO_NET_CHUNK_BYTES=%zu does not apply: the ranks %s; rounds of %zu-byte chunks (half the slots)",
                c->net_chunk_bytes, c->kind != NULL ? "hold CUDA memory" : "meet without the network", half_slots);
    return;
  }
  const char *from;
  size_t cap = chunk_wanted(c, &from);
  if (cap > half_slots && from != NULL && c->rank == 0)
    KOLO_INFO("%s asks for %zu-byte chunks, more than half the slots: rounds of %zu-byte chunks (KOLO_BUFFSIZE "
              "sets the slots)", from, cap, half_slots);
  if (cap >= half_slots) return;
  c->chunk_cap = cap;
  if (c->rank == 0 && from != NULL)
    KOLO_INFO("ranks meet over the network in host memory: rounds of %zu-byte chunks (%s), not %zu (half the slots)",
              cap, from, half_slots);
  else if (c->rank == 0)
    KOLO_INFO("ranks meet over the network in host memory, at most %d per CPU on a host: rounds of %zu-byte "
              "chunks, not %zu (half the slots)", ranks_per_cpu(c), cap, half_slots);
}

koloResult_t kolo_comm_build_topology(struct koloComm *c) {
  uint64_t *ids = malloc((size_t)c->nranks * sizeof *ids);
  if (ids == NULL) return kolo_error(&c->err, koloSystemError, "out of memory at init");
  for (int r = 0; r < c->nranks; r++) ids[r] = kolo_bootstrap_peer(c->bs, r)->host_hash;
  kolo_hosts h;
  koloResult_t res = kolo_hosts_build(c->nranks, ids, &h);
  free(ids);
  if (res != koloSuccess) return kolo_error(&c->err, res, "out of memory grouping ranks by host");
  c->nhosts = h.nhosts;
  c->algo.nranks = c->nranks;
  res = price_links(c, &h);
  if (res != koloSuccess) {
    kolo_hosts_free(&h);
    return kolo_error(&c->err, res, "out of memory grouping ranks by their links");
  }
  /* A tuning file's lines for the link this communicator does not take
   * (the network's on one host, the host's across hosts) go now. */
  if (c->algo.tuned != NULL) {
    kolo_tuned_narrow(&c->tuned, c->algo.nhosts > 1);
    kolo_comm_narrowed_channels(c);
  }
  c->algo.no_auto_peers = c->memory == koloMemCuda; /* ring/algo.h: never measured on a GPU */
  net_channels(c);
  net_chunk(c);
  /* Rotating a ring moves its off-host hops: pointless on one host or with
   * one rank per host, where every channel keeps one ring. */
  c->nrings = h.nhosts > 1 && kolo_hosts_max_size(&h) > 1 ? c->nchannels : 1;
  c->nvariants = program_variants(c);
  for (int ch = 0; ch < c->nrings && res == koloSuccess; ch++)
    res = kolo_ring_build_channel(&h, ch, &c->rings[ch]);
  if (res == koloSuccess) res = build_hier(c, &h);
  kolo_hosts_free(&h);
  if (res != koloSuccess) return kolo_error(&c->err, res, "out of memory building the rings");
  for (int ch = 0; ch < c->nrings; ch++)
    KOLO_INFO("rank %d/%d: %d host(s), channel %d ring prev %d next %d", c->rank, c->nranks,
              c->nhosts, ch, kolo_ring_prev(&c->rings[ch], c->rank), kolo_ring_next(&c->rings[ch], c->rank));
  KOLO_INFO("rank %d: %d channel(s) on %d ring(s), %u slots of %zu bytes, hierarchical all-reduce %s",
            c->rank, c->nchannels, c->nrings, c->nslots, c->slot_bytes,
            c->hier_ready ? "available" : "off");
  return koloSuccess;
}

koloResult_t kolo_comm_connect_ring(struct koloComm *c) {
  if (c->nranks == 1) return koloSuccess;
  kolo_conn_request reqs[6 * KOLO_MAX_CHANNELS];
  int n = 0;
  for (int ch = 0; ch < c->nchannels; ch++) {
    const kolo_ring *ring = &c->rings[ch % c->nrings];
    reqs[n++] = (kolo_conn_request){&c->ring_recv[ch], kolo_ring_prev(ring, c->rank), 0, ch,
                                    TAG_RING_PIPE | (uint32_t)ch};
    reqs[n++] = (kolo_conn_request){&c->ring_send[ch], kolo_ring_next(ring, c->rank), 1, ch,
                                    TAG_RING_PIPE | (uint32_t)ch};
    for (int k = 0; k < 2 && c->hier_ready; k++) {
      /* the intra programs share their peers, as do the inter one's */
      const kolo_program *p = &c->hier_prog[k == 0 ? KOLO_HIER_INTRA_RS : KOLO_HIER_INTER_AR];
      uint32_t tag = TAG_HIER_PIPE | (uint32_t)k << 8 | (uint32_t)ch;
      reqs[n++] = (kolo_conn_request){&c->hier_recv[k][ch], p->recv_peer, 0, ch, tag};
      reqs[n++] = (kolo_conn_request){&c->hier_send[k][ch], p->send_peer, 1, ch, tag};
    }
  }
  /* the ring and hierarchy pipes are closed by free_comm (CUDA: in IPC's order) */
  kolo_conn_set set = {c->bs, c->job, c->slot_bytes, c->nslots, kolo_comm_conn_mem(c), reqs, n, &c->err, NULL,
                       koloSuccess, 1, 0};
  return kolo_connect_sets(&set, 1);
}

/* How long closing may take to flush the pipes, all of them together:
 * after an abort or a failure only their stop words matter (a stopped or
 * cut-off peer reads nothing, so waiting longer only delays the survivor);
 * otherwise the last calls' data, within the communicator's timeout. */
#define ABORT_FLUSH_MS 200
#define CLOSE_FLUSH_MAX_MS 10000

static int64_t close_deadline(const struct koloComm *c) {
  int stopped = atomic_load(&c->aborted) || atomic_load(&c->failed) != koloSuccess || atomic_load(&c->revoked);
  int t = c->timeout_ms > 0 && c->timeout_ms < CLOSE_FLUSH_MAX_MS ? c->timeout_ms : CLOSE_FLUSH_MAX_MS;
  return kolo_deadline(stopped ? ABORT_FLUSH_MS : t);
}

void kolo_comm_close_pipes(struct koloComm *c) {
  int64_t dl = close_deadline(c);
  for (int ch = 0; ch < KOLO_MAX_CHANNELS; ch++) {
    kolo_connector_close_by(&c->ring_send[ch], dl);
    kolo_connector_close_by(&c->ring_recv[ch], dl);
    for (int k = 0; k < 2; k++) {
      kolo_connector_close_by(&c->hier_send[k][ch], dl);
      kolo_connector_close_by(&c->hier_recv[k][ch], dl);
    }
  }
  size_t np = (size_t)c->nranks * (size_t)c->nchannels;
  for (size_t i = 0; c->p2p_send && i < np; i++) {
    if (c->p2p_send_ready[i]) kolo_connector_close_by(&c->p2p_send[i], dl);
    if (c->p2p_recv_ready[i]) kolo_connector_close_by(&c->p2p_recv[i], dl);
  }
}

