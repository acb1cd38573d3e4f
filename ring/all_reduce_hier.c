/* all_reduce_hier.c - hierarchical all-reduce: an intra-host reduce-scatter,
 * an inter-host all-reduce among the ranks of one local index, an
 * intra-host all-gather.
 *
 * Every host has L ranks (intra ring, position p = local index) and there
 * are H hosts (inter ring, position q).  The buffer uses the RING layout
 * with L*H chunks per channel and round; chunk c(j, h) = j*H + h.  Local
 * rank j owns the "super-chunk" {c(j, h) : h < H}; within it, chunk c(j, h)
 * is finished by the rank of local index j on host position h.
 *
 * Three programs, run one after the other on each channel (the second
 * reads what the first wrote, the third what the second wrote: the core
 * orders them; each is a plain ring program over its own connectors):
 *
 *   1 intra reduce-scatter (in -> out), for each h: the ring reduce-scatter
 *     of chunks c(., h) over the L local ranks, so rank p ends with the
 *     host's sum of its super-chunk in out.  One h after the other, never
 *     all at once: a rank that sent H chunks before receiving one would
 *     fill its pipe's slots (two chunks) while its neighbour does the same.
 *   2 inter all-reduce (out -> out): the ring all-reduce (all_reduce.c) of
 *     super-chunk p over the H ranks of local index p; the last addend
 *     is FINAL (avg divides there, once).
 *   3 intra all-gather (out -> out), for each h: the ring all-gather of
 *     chunks c(., h) over the L local ranks.
 *
 * Steps: L*H, 2H-1 and L*H; L >= 2 and H >= 2 (otherwise the flat ring is
 * this algorithm already).
 */
#include "ring/schedule.h"

/* Position j places before pos on a ring of n. */
static int ago(int pos, int j, int n) { return (pos + n - (j % n)) % n; }

static int chunk(int j, int h, int H) { return j * H + h; }

static void set(kolo_program *p, int *s, int op, int flags, int src_buf, int dst_buf, int c) {
  kolo_program_set(p, (*s)++, op, flags, src_buf, c, dst_buf, c);
}

static koloResult_t intra_reduce_scatter(const kolo_ring *intra, int H, int rank, kolo_program *p) {
  int L = intra->nranks, pos = intra->pos[rank], s = 0;
  if (kolo_program_alloc(p, L * H, KOLO_LAYOUT_RING) != koloSuccess) return koloSystemError;
  for (int h = 0; h < H; h++) {
    set(p, &s, KOLO_STEP_SEND, 0, KOLO_BUF_IN, KOLO_BUF_OUT, chunk(ago(pos, 1, L), h, H));
    for (int j = 2; j <= L - 1; j++)
      set(p, &s, KOLO_STEP_RECV_REDUCE_SEND, 0, KOLO_BUF_IN, KOLO_BUF_OUT, chunk(ago(pos, j, L), h, H));
    set(p, &s, KOLO_STEP_RECV_REDUCE_COPY, 0, KOLO_BUF_IN, KOLO_BUF_OUT, chunk(pos, h, H));
  }
  return koloSuccess;
}

static koloResult_t inter_all_reduce(const kolo_ring *intra, const kolo_ring *inter, int rank,
                                     kolo_program *p) {
  int H = inter->nranks, j = intra->pos[rank], q = inter->pos[rank], s = 0;
  if (kolo_program_alloc(p, 2 * H - 1, KOLO_LAYOUT_RING) != koloSuccess) return koloSystemError;
  const int O = KOLO_BUF_OUT;
  set(p, &s, KOLO_STEP_SEND, 0, O, O, chunk(j, ago(q, 1, H), H));
  for (int k = 2; k <= H - 1; k++) set(p, &s, KOLO_STEP_RECV_REDUCE_SEND, 0, O, O, chunk(j, ago(q, k, H), H));
  set(p, &s, KOLO_STEP_RECV_REDUCE_COPY_SEND, KOLO_STEP_FINAL, O, O, chunk(j, q, H));
  for (int k = 1; k <= H - 2; k++) set(p, &s, KOLO_STEP_RECV_COPY_SEND, 0, O, O, chunk(j, ago(q, k, H), H));
  set(p, &s, KOLO_STEP_RECV, 0, O, O, chunk(j, ago(q, H - 1, H), H));
  return koloSuccess;
}

static koloResult_t intra_all_gather(const kolo_ring *intra, int H, int rank, kolo_program *p) {
  int L = intra->nranks, pos = intra->pos[rank], s = 0;
  if (kolo_program_alloc(p, L * H, KOLO_LAYOUT_RING) != koloSuccess) return koloSystemError;
  const int O = KOLO_BUF_OUT;
  for (int h = 0; h < H; h++) {
    set(p, &s, KOLO_STEP_SEND, 0, O, O, chunk(pos, h, H));
    for (int j = 1; j <= L - 2; j++) set(p, &s, KOLO_STEP_RECV_COPY_SEND, 0, O, O, chunk(ago(pos, j, L), h, H));
    set(p, &s, KOLO_STEP_RECV, 0, O, O, chunk(ago(pos, L - 1, L), h, H));
  }
  return koloSuccess;
}

koloResult_t kolo_sched_all_reduce_hier(const kolo_ring *intra, const kolo_ring *inter, int rank,
                                        int phase, kolo_program *out) {
  int L = intra->nranks, H = inter->nranks;
  if (L < 2 || H < 2 || intra->pos[rank] < 0 || inter->pos[rank] < 0) return koloInvalidArgument;
  kolo_program p;
  koloResult_t res;
  const kolo_ring *ring = phase == KOLO_HIER_INTER_AR ? inter : intra;
  switch (phase) {
  case KOLO_HIER_INTRA_RS: res = intra_reduce_scatter(intra, H, rank, &p); break;
  case KOLO_HIER_INTER_AR: res = inter_all_reduce(intra, inter, rank, &p); break;
  case KOLO_HIER_INTRA_AG: res = intra_all_gather(intra, H, rank, &p); break;
  default: return koloInvalidArgument;
  }
  if (res != koloSuccess) return res;
  p.send_peer = kolo_ring_next(ring, rank);
  p.recv_peer = kolo_ring_prev(ring, rank);
  *out = p;
  return koloSuccess;
}
