/* program.h - step programs: what a schedule produces and an executor runs.
 *
 * A collective is compiled (ring/) into one program per rank and channel: a
 * short list of steps over the channel's two connectors (receive from
 * recv_peer, send to send_peer) and the rank's two buffers (IN = sendbuff,
 * OUT = recvbuff).  Programs do not grow with the message size: the executor
 * runs the whole list once per *round*, each round covering the next part of
 * the buffers, until the buffers are exhausted.
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

/* What a step does with (recv slot), (src chunk) and (dst chunk, send slot). */
typedef enum {
  KOLO_STEP_SEND = 0,              /* src -> send */
  KOLO_STEP_RECV,                  /* recv -> dst */
  KOLO_STEP_COPY,                  /* src -> dst (post-op applied) */
  KOLO_STEP_COPY_SEND,             /* src -> dst and send */
  KOLO_STEP_RECV_COPY_SEND,        /* recv -> dst and send */
  KOLO_STEP_RECV_REDUCE_SEND,      /* recv OP src -> send */
  KOLO_STEP_RECV_REDUCE_COPY,      /* recv OP src -> dst (post-op applied) */
  KOLO_STEP_RECV_REDUCE_COPY_SEND, /* recv OP src -> dst and send (post-op) */
  KOLO_STEP_NUM_OPS
} kolo_step_op;

typedef enum { KOLO_BUF_IN = 0, KOLO_BUF_OUT = 1 } kolo_buf_id;

typedef enum { KOLO_LAYOUT_RING = 0, KOLO_LAYOUT_FLAT = 1 } kolo_layout;

/* Step flag: this step produces the final value of its elements, so the
 * post-op (division of an average) is applied to what it writes. */
#define KOLO_STEP_FINAL 0x1u

typedef struct {
  uint8_t op;        /* kolo_step_op */
  uint8_t flags;     /* KOLO_STEP_* */
  uint8_t src_buf;   /* kolo_buf_id read by ops with a src */
  uint8_t dst_buf;   /* kolo_buf_id written by ops with a dst */
  int32_t src_chunk; /* chunk index (see layouts) */
  int32_t dst_chunk;
} kolo_step;

typedef struct {
  int32_t send_peer; /* rank this program sends to, -1: none */
  int32_t recv_peer; /* rank this program receives from, -1: none */
  uint8_t layout;    /* kolo_layout */
  uint8_t in_blocked, out_blocked;
  int32_t nsteps;
  kolo_step *steps;  /* nsteps entries, owned by the program */
} kolo_program;

/* Inline helpers compile for the host and, under nvcc, for the device. */
#ifdef __CUDACC__
#define KOLO_HD __host__ __device__ __forceinline__
#else
#define KOLO_HD static inline
#endif

/* Properties of step ops, shared by executors and the schedule checker. */
KOLO_HD int kolo_step_recvs(int op) {
  return op == KOLO_STEP_RECV || op == KOLO_STEP_RECV_COPY_SEND ||
         op == KOLO_STEP_RECV_REDUCE_SEND || op == KOLO_STEP_RECV_REDUCE_COPY ||
         op == KOLO_STEP_RECV_REDUCE_COPY_SEND;
}
KOLO_HD int kolo_step_sends(int op) {
  return op == KOLO_STEP_SEND || op == KOLO_STEP_COPY_SEND ||
         op == KOLO_STEP_RECV_COPY_SEND || op == KOLO_STEP_RECV_REDUCE_SEND ||
         op == KOLO_STEP_RECV_REDUCE_COPY_SEND;
}
KOLO_HD int kolo_step_reads_src(int op) {
  return op == KOLO_STEP_SEND || op == KOLO_STEP_COPY || op == KOLO_STEP_COPY_SEND ||
         op == KOLO_STEP_RECV_REDUCE_SEND || op == KOLO_STEP_RECV_REDUCE_COPY ||
         op == KOLO_STEP_RECV_REDUCE_COPY_SEND;
}
KOLO_HD int kolo_step_writes_dst(int op) {
  return op == KOLO_STEP_RECV || op == KOLO_STEP_COPY || op == KOLO_STEP_COPY_SEND ||
         op == KOLO_STEP_RECV_COPY_SEND || op == KOLO_STEP_RECV_REDUCE_COPY ||
         op == KOLO_STEP_RECV_REDUCE_COPY_SEND;
}
KOLO_HD int kolo_step_reduces(int op) {
  return op == KOLO_STEP_RECV_REDUCE_SEND || op == KOLO_STEP_RECV_REDUCE_COPY ||
         op == KOLO_STEP_RECV_REDUCE_COPY_SEND;
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
