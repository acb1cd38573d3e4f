/* tuning.h - a tuning file (docs/tuning.md): the cost model's measured
 * constants, per transport, and optional per-size algorithm overrides,
 * written by `kolo-perf tune` and loaded by KOLO_TUNING_FILE at init.
 *
 *   kolo-tuning 1
 *   # comments and blank lines anywhere
 *   link shm 0.8 9.5              # transport, alpha (us), beta (GB/s)
 *   link socket 18 1.1
 *   override allreduce rd 0 65536 # collective, algorithm, bytes min..max
 *   override allreduce direct 65537 1048576 ranks 8   # ... for 8 ranks only
 *   override broadcast dbtree 131072 1048576 ranks 8 mem host   # ... host memory only
 *   channels allreduce 1 0 4194304 ranks 4   # collective, channels, bytes min..max
 *   override allreduce rd 0 98304 ranks 4 mem host link socket   # ... over TCP only
 *   chunk socket 2097152 ranks 2  # a round's chunk over TCP, host memory
 *
 * Overrides name the all-reduce's, the broadcast's or the all-gather's
 * algorithms.  After MAX, "ranks N", "mem host|cuda" and "link TRANSPORT"
 * (in that order, any left out) narrow a line to communicators of N ranks,
 * of that memory kind and whose slowest link is that transport (the
 * network's where ranks span hosts): kolo-perf tune measures on one, and
 * what wins in host memory, or within a host, need not win on a GPU, or
 * over TCP.
 * Transports: shm (ranks of one host, host memory), socket and ib (the
 * network), cuda-p2p (ranks of one host, CUDA memory).  A transport the
 * file leaves out keeps the compiled constant (ring/algo.c).  The parser
 * takes bytes from outside: it refuses any line it cannot read with
 * "FILE:LINE: what is wrong", and no system calls (the fuzz target links
 * it).
 */
#ifndef KOLO_RING_TUNING_H
#define KOLO_RING_TUNING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KOLO_TUNING_VERSION 1
/* Lines a file may hold: a tune writes a few per collective (three of
 * them) and rank count, and a file joins several rank counts. */
#define KOLO_TUNING_MAX_OVERRIDES 128
#define KOLO_TUNING_MAX_CHANNEL_LINES 128
#define KOLO_TUNING_MAX_CHANNELS 16 /* core/comm_state.h's KOLO_MAX_CHANNELS (checked there) */
#define KOLO_TUNING_MAX_CHUNK_LINES 32

/* The memory kind a line holds for (its "mem" word). */
enum { KOLO_TUNE_MEM_ANY = 0, KOLO_TUNE_MEM_HOST, KOLO_TUNE_MEM_CUDA };

enum { KOLO_LINK_SHM, KOLO_LINK_SOCKET, KOLO_LINK_IB, KOLO_LINK_CUDA_P2P, KOLO_LINK_NUM };
/* A line without a "link" word holds on every link. */
#define KOLO_TUNE_LINK_ANY (-1)

typedef struct {
  int set;         /* 0: the file leaves it out */
  double alpha_us; /* latency of one hop, (0, 1e6] */
  double beta_gbs; /* bandwidth of one link, GB/s (1e9 B/s), (0, 1e5] */
} kolo_tune_link;

typedef struct {
  int coll;         /* KOLO_COLL_ALL_REDUCE, _BROADCAST or _ALL_GATHER (ring/schedule.h) */
  int algo;         /* KOLO_ALGO_* (ring/algo.h), one of coll's */
  uint64_t lo, hi;  /* calls of lo..hi bytes (a broadcast's, an all-gather's per rank) */
  int nranks;       /* on communicators of this many ranks; 0: any */
  int mem;          /* KOLO_TUNE_MEM_* */
  int link;         /* KOLO_LINK_* the communicator's slowest link, or KOLO_TUNE_LINK_ANY */
} kolo_tune_override;

/* How many channels calls of one collective and size range use. */
typedef struct {
  int coll;         /* KOLO_COLL_* (ring/schedule.h), not send / recv */
  int channels;     /* 1..KOLO_TUNING_MAX_CHANNELS */
  uint64_t lo, hi;  /* calls of lo..hi bytes (count x type size, as the API takes it) */
  int nranks;       /* on communicators of this many ranks; 0: any */
  int mem;          /* KOLO_TUNE_MEM_* */
  int link;         /* as kolo_tune_override's */
} kolo_tune_channels;

/* A round's chunk where host memory crosses the network
 * (core/comm_topology.c): "chunk TRANSPORT BYTES [ranks N]". */
typedef struct {
  int link;       /* KOLO_LINK_SOCKET or KOLO_LINK_IB */
  uint64_t bytes; /* a multiple of 4 KiB in 4 KiB..1 GiB */
  int nranks;     /* on communicators of this many ranks; 0: any */
} kolo_tune_chunk;

typedef struct {
  kolo_tune_link link[KOLO_LINK_NUM];
  int noverrides;
  kolo_tune_override ov[KOLO_TUNING_MAX_OVERRIDES];
  int nchannel_lines;
  kolo_tune_channels ch[KOLO_TUNING_MAX_CHANNEL_LINES];
  int nchunk_lines;
  kolo_tune_chunk chunk[KOLO_TUNING_MAX_CHUNK_LINES];
  uint64_t hash; /* of the text, compared across ranks at init */
} kolo_tuning;

/* What the cost model reads (kolo_algo_topo.tuned): seconds and bytes per
 * second; 0 where the compiled constant stays. */
typedef struct kolo_tuned {
  double a_host, b_host, a_net, b_net;
  int host_link, net_link; /* KOLO_LINK_* of the constants above */
  int noverrides;
  kolo_tune_override ov[KOLO_TUNING_MAX_OVERRIDES];
  int nchannel_lines;
  kolo_tune_channels ch[KOLO_TUNING_MAX_CHANNEL_LINES];
  int nchunk_lines; /* the chunk lines of net_link, host memory only */
  kolo_tune_chunk chunk[KOLO_TUNING_MAX_CHUNK_LINES];
} kolo_tuned;

/* Parses text[0..len) (name: for messages).  0, or -1 with "name:line: what"
 * in why. */
int kolo_tuning_parse(const char *text, size_t len, const char *name, kolo_tuning *out, char *why, size_t why_len);
/* The constants of one communicator: host_link (shm or cuda-p2p) within a
 * host, net_link (socket or ib) between hosts; and the lines that hold for
 * its memory kind (CUDA where host_link is cuda-p2p, else host). */
void kolo_tuning_resolve(const kolo_tuning *f, int host_link, int net_link, kolo_tuned *out);
/* Once the communicator's hosts are known: drops the lines for the link
 * it does not take (`spans_hosts`: the network's, else the host's).  Until
 * then the lines of both hold, so the channels a communicator is given
 * (kolo_tuned_max_channels, before its topology) count both. */
void kolo_tuned_narrow(kolo_tuned *t, int spans_hosts);
/* The algorithm an override gives a call of collective coll and `bytes`
 * on nranks ranks (the first line holding it), or -1. */
int kolo_tuned_override(const kolo_tuned *t, int coll, size_t bytes, int nranks);
/* 1 when some override of coll for nranks ranks names algo; with
 * mem_only, only an override whose line says its memory kind counts
 * (kolo_algo_topo.no_auto_peers: a CUDA communicator weighs the
 * multi-peer algorithms only where they were measured on a GPU). */
int kolo_tuned_names(const kolo_tuned *t, int coll, int algo, int nranks, int mem_only);
/* The channels a `channels` line gives a call of collective coll and
 * `bytes` on nranks ranks (the first line holding it), or 0: none does. */
int kolo_tuned_channels(const kolo_tuned *t, int coll, size_t bytes, int nranks);
/* The chunk a `chunk` line gives a communicator of nranks ranks (the first
 * line holding it), or 0: none does. */
size_t kolo_tuned_chunk(const kolo_tuned *t, int nranks);
/* The most channels any line for nranks ranks names, 0: none. */
int kolo_tuned_max_channels(const kolo_tuned *t, int nranks);
/* "allreduce", "allgather", ... (the names `channels` lines take), "?". */
const char *kolo_tuning_coll_name(int coll);
/* "shm", "socket", "ib", "cuda-p2p". */
const char *kolo_link_name(int link);
/* Writes f as a tuning file that kolo_tuning_parse reads back. */
int kolo_tuning_write(FILE *out, const kolo_tuning *f, const char *comment);

#endif
