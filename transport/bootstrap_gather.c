/* bootstrap_gather.c - allgather and barrier among the ranks in
 * ceil(log2 n) rounds (Bruck's algorithm), and the peer table gathered the
 * same way at init (bootstrap_int.h).
 *
 * In round k (d = 2^k < n) rank r sends the blocks it holds, those of
 * ranks r .. r+d-1 (at most n - d of them), to rank r - d, and receives
 * those of ranks r+d .. r+2d-1 from rank r + d (mod n): after the last
 * round it holds all n.  A rank talks to 2 log2(n) peers, each over the
 * link the sender makes when it first sends, and no rank does more than
 * log2(n) rounds of work: init is not serial in n anywhere.
 */
#include <stdlib.h>
#include <string.h>

#include "transport/bootstrap_int.h"

/* Blocks [first, first + cnt) mod n, cut at n and at KOLO_MAX_MSG_BYTES:
 * a run of blocks that are contiguous in the buffer, one message each.
 * The sender and the receiver cut alike. */
typedef struct {
  int at, left; /* the next block, blocks still to go */
  int n, per;   /* ranks, blocks per message */
} block_runs;

static block_runs runs_of(int first, int cnt, int n, size_t len) {
  uint64_t per = len ? KOLO_MAX_MSG_BYTES / len : (uint64_t)n;
  return (block_runs){first, cnt, n, per < 1 ? 1 : per > (uint64_t)n ? n : (int)per};
}

/* The next run: its first block and count; 0 when none is left. */
static int next_run(block_runs *b, int *first, int *count) {
  if (b->left == 0) return 0;
  int c = b->n - b->at; /* up to the wrap */
  if (c > b->left) c = b->left;
  if (c > b->per) c = b->per;
  *first = b->at;
  *count = c;
  b->at = (b->at + c) % b->n;
  b->left -= c;
  return 1;
}

static koloResult_t send_blocks(kolo_bootstrap *bs, int to, uint32_t tag, const char *all, size_t len, int first,
                                int cnt) {
  block_runs b = runs_of(first, cnt, bs->nranks, len);
  int at, c;
  koloResult_t res = koloSuccess;
  while (res == koloSuccess && next_run(&b, &at, &c))
    res = kolo_bootstrap_send(bs, to, tag, all + (size_t)at * len, (size_t)c * len);
  return res;
}

static koloResult_t recv_blocks(kolo_bootstrap *bs, int from, uint32_t tag, char *all, size_t len, int first,
                                int cnt) {
  block_runs b = runs_of(first, cnt, bs->nranks, len);
  int at, c;
  koloResult_t res = koloSuccess;
  while (res == koloSuccess && next_run(&b, &at, &c))
    res = kolo_bootstrap_recv(bs, from, tag, all + (size_t)at * len, (size_t)c * len);
  return res;
}

/* ---- init's peer table: each round names the next partner ---------------------- */

/* After round d: rank r + d, which sent to this rank, sends to r - d next
 * round, this rank's partner now; and this rank's own next partner, r - 2d,
 * is that of r - d now.  Each tells the other. */
static koloResult_t pass_next(kolo_bootstrap *bs, int to, int from, int d) {
  int n = bs->nranks, next = ((bs->rank - 2 * d) % n + n) % n;
  uint8_t m[KOLO_PEER_INFO_BYTES];
  kolo_encode_peer_info(&bs->peers[to], m);
  koloResult_t res = kolo_bootstrap_send(bs, from, KOLO_TAG_NEXT, m, sizeof m);
  if (res == koloSuccess) res = kolo_bootstrap_recv(bs, to, KOLO_TAG_NEXT, m, sizeof m);
  if (res != koloSuccess) return res;
  char why[KOLO_ERR_LEN / 2], who[112];
  if (kolo_decode_peer_info(m, sizeof m, next, &bs->peers[next], why, sizeof why) == KOLO_WIRE_OK) return koloSuccess;
  return kolo_error(bs->eb, koloRemoteError, "%s %s", kolo_bs_peer_name(bs, to, who, sizeof who), why);
}

/* The rounds; with `next` each also passes the next partner's address. */
static koloResult_t bruck(kolo_bootstrap *bs, uint32_t tag, char *all, size_t len, int next) {
  int n = bs->nranks, r = bs->rank;
  koloResult_t res = koloSuccess;
  bs->whole_job = 1; /* any rank failing fails it: each one's entry is needed */
  for (int d = 1; d < n && res == koloSuccess; d *= 2) {
    int to = (r - d + n) % n, from = (r + d) % n, cnt = d < n - d ? d : n - d;
    /* 2d == n: the partner sends to this rank as this rank to it; the
     * lower one connects and sends first, so that they do not both connect. */
    int second = to == from && r > to;
    if (second) res = recv_blocks(bs, from, tag, all, len, from, cnt);
    if (res == koloSuccess) res = send_blocks(bs, to, tag, all, len, r, cnt);
    if (res == koloSuccess && !second) res = recv_blocks(bs, from, tag, all, len, from, cnt);
    if (res == koloSuccess && next && 2 * d < n) res = pass_next(bs, to, from, d);
  }
  bs->whole_job = 0;
  return res;
}

koloResult_t kolo_bootstrap_allgather(kolo_bootstrap *bs, uint32_t tag, void *all, size_t len) {
  if (all == NULL && len > 0)
    return kolo_error(bs->eb, koloInvalidArgument, "bootstrap allgather on rank %d: buffer is NULL", bs->rank);
  if (len > KOLO_MAX_MSG_BYTES)
    return kolo_error(bs->eb, koloInvalidArgument,
                      "bootstrap allgather on rank %d: a block of %zu bytes is larger than the limit of %llu",
                      bs->rank, len, (unsigned long long)KOLO_MAX_MSG_BYTES);
  return bruck(bs, tag, all, len, 0);
}

koloResult_t kolo_bootstrap_barrier(kolo_bootstrap *bs, uint32_t tag) {
  char *all = calloc((size_t)bs->nranks, 1);
  if (all == NULL) return kolo_error(bs->eb, koloSystemError, "rank %d: out of memory in a barrier", bs->rank);
  koloResult_t res = kolo_bootstrap_allgather(bs, tag, all, 1);
  free(all);
  return res;
}

static int same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  uint16_t fa, pa, fb, pb;
  uint8_t xa[16], xb[16];
  kolo_addr_to_wire(a, &fa, &pa, xa);
  kolo_addr_to_wire(b, &fb, &pb, xb);
  return fa == fb && pa == pb && memcmp(xa, xb, sizeof xa) == 0;
}

/* The gathered entries into the table: each must be its rank's, and agree
 * with what the rounds told this rank about its partners. */
static koloResult_t take_table(kolo_bootstrap *bs, const uint8_t *enc) {
  for (int k = 0; k < bs->nranks; k++) {
    kolo_peer_info p;
    char why[KOLO_ERR_LEN / 2];
    if (kolo_decode_peer_info(enc + (size_t)k * KOLO_PEER_INFO_BYTES, KOLO_PEER_INFO_BYTES, k, &p, why, sizeof why) !=
        KOLO_WIRE_OK)
      return kolo_error(bs->eb, koloRemoteError, "%s: the peer table it gathered is garbled: a rank %s", bs->name, why);
    const kolo_peer_info *was = &bs->peers[k];
    if (was->addr.ss_family != 0 && !same_addr(&was->addr, &p.addr))
      return kolo_error(bs->eb, koloRemoteError, "%s: rank %d's address in the gathered table differs from the one "
                        "its neighbours passed on", bs->name, k);
    bs->peers[k] = p;
  }
  return koloSuccess;
}

koloResult_t kolo_bs_gather_peers(kolo_bootstrap *bs) {
  uint8_t *enc = calloc((size_t)bs->nranks, KOLO_PEER_INFO_BYTES);
  if (enc == NULL)
    return kolo_error(bs->eb, koloSystemError, "%s: out of memory for a peer table of %d ranks", bs->name, bs->nranks);
  kolo_encode_peer_info(&bs->peers[bs->rank], enc + (size_t)bs->rank * KOLO_PEER_INFO_BYTES);
  koloResult_t res = bruck(bs, KOLO_TAG_PEERS, (char *)enc, KOLO_PEER_INFO_BYTES, 1);
  if (res == koloSuccess) res = take_table(bs, enc);
  free(enc);
  return res;
}
