/* program.h - step programs: what a schedule produces and an executor runs.
 *
 * A collective is compiled (ring/) into one program per rank and channel: a
 * short list of steps over connectors and the rank's two buffers (IN =
 * sendbuff, OUT = recvbuff), and kolo's SCRATCH chunks (below, at
 * kolo_buf_id).  Programs do not grow with the message size:
 * the executor runs the whole list once per *round*, each round covering the
 * next part of the buffers, until the buffers are exhausted.
 *
 * Peers.  A *single-peer* program (npeers == 0: the ring collectives, send,
 * recv) talks to at most two ranks, through the channel's two connectors:
 * every step that sends sends to send_peer, every step that receives
 * receives from recv_peer.  A *multi-peer* program (npeers > 0: all-to-all,
 * gather, scatter) carries its peer list: a step that sends sends to
 * peers[step.to].rank, one that receives receives from
 * peers[step.from].rank, and send_peer / recv_peer are -1.  Either way the
 * executor picks, per step, the connector of that peer and direction on the
 * task's channel (the core decides which pipes those are: ring, hierarchical
 * or point-to-point).  Each connector keeps its own step count, so steps may
 * move between peers in any order; what makes a program correct is that the
 * k-th send of a to b and the k-th receive of b from a name chunks of the
 * same size in the same round (ring/geometry.h), and that no rank waits in a
 * cycle (tests/test_schedule.cc checks both).
 *
 * Where a step's chunk lies (element offsets) depends on the layout:
 *
 *   KOLO_LAYOUT_RING (all-reduce): a round covers nchannels*nranks chunks of
 *   `rce` elements; chunk k of channel c in the round that starts at element
 *   `base` is [base + (c*nranks + k)*rce, +rce), clipped to `count`.  Both
 *   buffers hold `count` elements.
 *
 *   KOLO_LAYOUT_FLAT (the rest): a round covers nchannels chunks of `rce`
 *   elements of a block of `count` elements: [base + c*rce, +rce) clipped to
 *   `count`.  A buffer marked as blocked (in_blocked / out_blocked) holds
 *   nranks blocks of `count` elements (reduce-scatter's input, all-gather's
 *   output) and chunk k then lies in block k; an unblocked buffer holds one
 *   block and the chunk index is ignored.
 *
 * rce, the chunk size of a round, is min(chunk_elems, ceil(remaining /
 * parts)) rounded up to a multiple of 64 bytes, so that the last rounds are
 * spread over all channels and ranks (parts = nchannels*nranks for RING,
 * nchannels for FLAT).  Every rank computes the same rce for the same round,
 * which is what keeps the two ends of a connector in step.
 *
 * A chunk of n elements moves through a connector as ceil(n / slot_elems)
 * slots, one slot per *slice*; both ends of a connector always refer to the
 * same chunk at the same step, so they agree on the number of slices without
 * talking.  A chunk of 0 elements is a step with no slices.
 */
#ifndef KOLO_RING_PROGRAM_H
#define KOLO_RING_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

/* Roles a step op plays with its operands: the receive slot of the peer it
 * receives from, the send slot of the peer it sends to, its src chunk and
 * its dst chunk.  One table (KOLO_STEP_OPS) gives every op its roles; the
 * executors and the schedule checker derive what they do from it
 * (kolo_step_operands), so that a new op is one line here. */
enum {
  KOLO_ROLE_RECV = 1u << 0,   /* takes a slot from its receive end */
  KOLO_ROLE_SEND = 1u << 1,   /* fills a slot of its send end */
  KOLO_ROLE_SRC = 1u << 2,    /* reads its src chunk */
  KOLO_ROLE_DST = 1u << 3,    /* writes its dst chunk */
  KOLO_ROLE_REDUCE = 1u << 4, /* combines the received slot with src (else copies) */
  KOLO_ROLE_POST = 1u << 5,   /* on a FINAL step, applies the post-op to what it writes */
  KOLO_ROLE_ACC = 1u << 6     /* reads its dst chunk as the other operand (a local reduce) */
};

/* X(name, roles): every step op, in kolo_step_op's order. */
#define KOLO_STEP_OPS(X)                                                                        \
  X(SEND, KOLO_ROLE_SRC | KOLO_ROLE_SEND)                            /* src -> send */          \
  X(RECV, KOLO_ROLE_RECV | KOLO_ROLE_DST)                            /* recv -> dst */          \
  X(COPY, KOLO_ROLE_SRC | KOLO_ROLE_DST | KOLO_ROLE_POST)            /* src -> dst */           \
  X(COPY_SEND, KOLO_ROLE_SRC | KOLO_ROLE_DST | KOLO_ROLE_SEND)       /* src -> dst and send */  \
  X(RECV_COPY_SEND, KOLO_ROLE_RECV | KOLO_ROLE_DST | KOLO_ROLE_SEND) /* recv -> dst and send */ \
  X(RECV_REDUCE_SEND,                                                /* recv OP src -> send */  \
    KOLO_ROLE_RECV | KOLO_ROLE_SRC | KOLO_ROLE_REDUCE | KOLO_ROLE_SEND)                          \
  X(RECV_REDUCE_COPY,                                                /* recv OP src -> dst */   \
    KOLO_ROLE_RECV | KOLO_ROLE_SRC | KOLO_ROLE_REDUCE | KOLO_ROLE_DST | KOLO_ROLE_POST)          \
  X(RECV_REDUCE_COPY_SEND,                                           /* ... -> dst and send */  \
    KOLO_ROLE_RECV | KOLO_ROLE_SRC | KOLO_ROLE_REDUCE | KOLO_ROLE_DST | KOLO_ROLE_POST | KOLO_ROLE_SEND) \
  X(REDUCE,                                                          /* dst OP src -> dst */    \
    KOLO_ROLE_ACC | KOLO_ROLE_SRC | KOLO_ROLE_REDUCE | KOLO_ROLE_DST | KOLO_ROLE_POST)

#define KOLO_STEP_ENUM_(name, roles) KOLO_STEP_##name,
typedef enum { KOLO_STEP_OPS(KOLO_STEP_ENUM_) KOLO_STEP_NUM_OPS } kolo_step_op;
#undef KOLO_STEP_ENUM_

/* The buffers a step reads and writes: the call's two, and SCRATCH, the
 * task's own: KOLO_SCRATCH_CHUNKS chunks per (call, channel), which keep
 * nothing from one round to the next.  Scratch chunk k of a round has the
 * length of the round's chunk k of an unblocked buffer (FLAT: of the
 * channel's chunk) and lies at k * chunk_elems in the task's scratch; a
 * program that reads a scratch chunk writes it first in the same round.
 * It holds what neither call buffer may: a running result beside a rank's
 * own input (one-shot all-reduce, in-place calls included) or at a rank
 * whose output buffer the collective does not give it (a reduce tree's
 * inner ranks). */
typedef enum { KOLO_BUF_IN = 0, KOLO_BUF_OUT = 1, KOLO_BUF_SCRATCH = 2, KOLO_BUF_NUM = 3 } kolo_buf_id;
#define KOLO_SCRATCH_CHUNKS 2

typedef enum { KOLO_LAYOUT_RING = 0, KOLO_LAYOUT_FLAT = 1 } kolo_layout;

/* Step flag: this step produces the final value of its elements, so the
 * post-op (division of an average) is applied to what it writes. */
#define KOLO_STEP_FINAL 0x1u
/* Step flag: a reducing step computes src OP recv instead of recv OP src
 * (schedules that combine the same two values on two ranks use it to put
 * them in the same order on both: ring/doubling.h).  Not where a premul-sum
 * scales src (that computes recv + pre(src): a sum, which only a NaN's
 * payload could tell from the other order). */
#define KOLO_STEP_SRC_FIRST 0x2u

typedef struct {
  uint8_t op;        /* kolo_step_op */
  uint8_t flags;     /* KOLO_STEP_* */
  uint8_t src_buf;   /* kolo_buf_id read by ops with a src */
  uint8_t dst_buf;   /* kolo_buf_id written by ops with a dst */
  int32_t src_chunk; /* chunk index (see layouts) */
  int32_t dst_chunk;
  /* Multi-peer programs: the peer index (into peers) a sending step sends
   * to and a receiving step receives from; 0 and ignored in single-peer
   * programs. */
  uint16_t to, from;
} kolo_step;

/* One peer of a multi-peer program, with the directions its steps use
 * (derived from the steps by kolo_program_index_peers). */
typedef struct {
  int32_t rank;
  uint8_t sends; /* 1: some step sends to it */
  uint8_t recvs; /* 1: some step receives from it */
  uint8_t pad[2];
} kolo_peer;

/* Most peers a multi-peer program may have (step.to / step.from are 16-bit). */
#define KOLO_PROGRAM_MAX_PEERS 65535

typedef struct {
  int32_t send_peer; /* single-peer programs: rank every send goes to, -1: none */
  int32_t recv_peer; /* single-peer programs: rank every receive comes from, -1: none */
  uint8_t layout;    /* kolo_layout */
  uint8_t in_blocked, out_blocked;
  int32_t nsteps;
  kolo_step *steps;  /* nsteps entries, owned by the program */
  int32_t npeers;    /* 0: a single-peer program */
  kolo_peer *peers;  /* npeers entries, owned by the program */
} kolo_program;

/* Inline helpers compile for the host and, under nvcc, for the device. */
#ifdef __CUDACC__
#define KOLO_HD __host__ __device__ __forceinline__
#else
#define KOLO_HD static inline
#endif

/* The roles of step op `op` (KOLO_ROLE_*), 0 for a value that is no op. */
#define KOLO_STEP_ROLES_(name, roles) (roles),
KOLO_HD unsigned kolo_step_roles(int op) {
  static const uint8_t roles[KOLO_STEP_NUM_OPS] = {KOLO_STEP_OPS(KOLO_STEP_ROLES_)};
  return op >= 0 && op < KOLO_STEP_NUM_OPS ? roles[op] : 0u;
}
#undef KOLO_STEP_ROLES_

KOLO_HD int kolo_step_recvs(int op) { return (kolo_step_roles(op) & KOLO_ROLE_RECV) != 0; }
KOLO_HD int kolo_step_sends(int op) { return (kolo_step_roles(op) & KOLO_ROLE_SEND) != 0; }
KOLO_HD int kolo_step_reads_src(int op) { return (kolo_step_roles(op) & KOLO_ROLE_SRC) != 0; }
KOLO_HD int kolo_step_writes_dst(int op) { return (kolo_step_roles(op) & KOLO_ROLE_DST) != 0; }
KOLO_HD int kolo_step_reduces(int op) { return (kolo_step_roles(op) & KOLO_ROLE_REDUCE) != 0; }
KOLO_HD int kolo_step_accumulates(int op) { return (kolo_step_roles(op) & KOLO_ROLE_ACC) != 0; }

/* What one slice of a step computes, from the op's roles:
 *   o0[i] = post(a[i] OP b[i]), and the same into o1 when o1 is not NULL;
 *   b == NULL: o0[i] = post(a[i]), a copy.
 * a is the received slot (or, when the op receives nothing, dst for an op
 * that accumulates into it, else src), b is src
 * when the op reduces (a and b the other way round when src_first: the
 * step's KOLO_STEP_SRC_FIRST); the outputs are dst and the send slot,
 * whichever the op has (dst first).  post: 1 when the op applies the
 * post-op (a division by the step's divisor, on FINAL steps only).  A
 * copy-and-send whose dst is its src writes the slot only (the chunk
 * already holds what it would write). */
typedef struct {
  char *o0, *o1;
  const char *a, *b;
  int post;
} kolo_step_operands;

KOLO_HD kolo_step_operands kolo_step_operands_of(int op, int src_first, char *rslot, char *sslot, char *src,
                                                 char *dst) {
  const unsigned r = kolo_step_roles(op);
  kolo_step_operands x;
  char *d = (r & KOLO_ROLE_DST) ? dst : NULL, *sl = (r & KOLO_ROLE_SEND) ? sslot : NULL;
  x.a = (r & KOLO_ROLE_RECV) ? rslot : (r & KOLO_ROLE_ACC) ? dst : (r & KOLO_ROLE_SRC) ? src : NULL;
  x.b = (r & KOLO_ROLE_REDUCE) ? src : NULL;
  if (x.b != NULL && src_first) {
    x.b = x.a;
    x.a = src;
  }
  x.post = (r & KOLO_ROLE_POST) != 0;
  if (sl != NULL && !x.post && d == x.a) d = NULL;
  x.o0 = d != NULL ? d : sl;
  x.o1 = d != NULL ? sl : NULL;
  return x;
}

/* The rank step s of program p sends to / receives from, -1: none (the
 * step does not send / receive, or the program has no such peer). */
KOLO_HD int kolo_step_send_rank(const kolo_program *p, const kolo_step *s) {
  if (!kolo_step_sends(s->op)) return -1;
  return p->npeers == 0 ? p->send_peer : (s->to < p->npeers ? p->peers[s->to].rank : -1);
}
KOLO_HD int kolo_step_recv_rank(const kolo_program *p, const kolo_step *s) {
  if (!kolo_step_recvs(s->op)) return -1;
  return p->npeers == 0 ? p->recv_peer : (s->from < p->npeers ? p->peers[s->from].rank : -1);
}

/* 1 when a step of p reads or writes KOLO_BUF_SCRATCH. */
KOLO_HD int kolo_program_uses_scratch(const kolo_program *p) {
  for (int i = 0; i < p->nsteps; i++) {
    const kolo_step *s = &p->steps[i];
    if ((kolo_step_reads_src(s->op) && s->src_buf == KOLO_BUF_SCRATCH) ||
        (kolo_step_writes_dst(s->op) && s->dst_buf == KOLO_BUF_SCRATCH))
      return 1;
  }
  return 0;
}

/* Round geometry: both ends of every connector compute the same values. */
typedef struct {
  size_t count;       /* elements per block (RING: the whole buffer) */
  size_t elem_size;   /* bytes per element */
  int nranks;
  int nchannels;      /* channels taking part in this collective */
  size_t chunk_elems; /* largest chunk, a multiple of 64 bytes */
  int layout;         /* kolo_layout */
} kolo_geometry;

/* Chunk size for the round starting at `base` (see above); 0 when done. */
size_t kolo_round_chunk(const kolo_geometry *g, size_t base);
/* Elements of the whole round starting at base with chunk size rce. */
size_t kolo_round_span(const kolo_geometry *g, size_t rce);
/* [*off, *off + *n) of chunk `chunk` of channel `ch` in the round at base
 * with chunk size rce, for a buffer that is blocked or not (FLAT only). */
void kolo_chunk_range(const kolo_geometry *g, size_t base, size_t rce, int ch,
                      int chunk, int blocked, size_t *off, size_t *n);

void kolo_program_free(kolo_program *p);

#endif
