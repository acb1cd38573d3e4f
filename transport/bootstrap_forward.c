/* bootstrap_forward.c - jobs of several roots (koloCommInitRankScalable):
 * which root serves which ranks, and what passes between the roots
 * (bootstrap_wire.h).
 *
 * Each root receives only its own block of ranks.  Once its block is
 * complete, root k > 0 connects to root 0 like a rank, presents root 0's
 * secret and its block, and waits for root 0's answer: the peer info of the
 * rank before its block (the ring predecessor of its first rank), or why the
 * job failed, which it passes on to its ranks.  Root 0 answers when its own
 * block and every other root's block are in.  So a root handles about
 * nranks / nids + nids connections instead of nranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/bootstrap_wire.h"

/* Time root 0 may take beyond the timeout before a waiting root gives up
 * on it (root 0's own verdict should come first). */
#define FORWARD_GRACE_MS 1000

int kolo_root_of(int rank, int nranks, int nids) {
  return nids <= 1 ? 0 : (int)((int64_t)rank * nids / nranks);
}

void kolo_root_block(int k, int nranks, int nids, int *lo, int *hi) {
  if (nids <= 1) nids = 1;
  /* the first rank r with r * nids / nranks >= k, i.e. ceil(k * nranks / nids) */
  *lo = (int)(((int64_t)k * nranks + nids - 1) / nids);
  *hi = (int)(((int64_t)(k + 1) * nranks + nids - 1) / nids);
}

/* The body length a reply may announce: checked before anything is
 * allocated.  0 when the header is garbage. */
static size_t reply_len_ok(kolo_wire_header h) {
  if (h.magic != KOLO_WIRE_MAGIC) return 0;
  if (h.tag == KOLO_TAG_NEIGHBOR) return h.len == KOLO_PEER_INFO_BYTES;
  if (h.tag == KOLO_TAG_REFUSED) return h.len >= 4 && h.len <= KOLO_REFUSAL_MAX_BYTES;
  return 0;
}

koloResult_t kolo_root_read_reply(int fd, int rank, kolo_peer_info *info, int64_t dl, const char *who,
                                  kolo_errbuf *eb) {
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_REFUSAL_MAX_BYTES];
  koloResult_t res = kolo_sock_recv_all(fd, m, KOLO_WIRE_HDR_BYTES, dl, who, eb);
  if (res != koloSuccess) return res;
  kolo_wire_header h = kolo_decode_header(m);
  if (!reply_len_ok(h)) /* the decoder says what is wrong with it */
    return kolo_root_decode_reply(m, KOLO_WIRE_HDR_BYTES, rank, info, who, eb);
  res = kolo_sock_recv_all(fd, m + KOLO_WIRE_HDR_BYTES, (size_t)h.len, dl, who, eb);
  if (res != koloSuccess) return res;
  return kolo_root_decode_reply(m, KOLO_WIRE_HDR_BYTES + (size_t)h.len, rank, info, who, eb);
}

/* The hello and block root `index` presents to root 0. */
static koloResult_t send_block(int fd, const kolo_uid *first, int nranks, int nids, int index,
                               const kolo_peer_info *table, int64_t dl, const char *who, kolo_errbuf *eb) {
  kolo_rank_hello h = {.rank = -1, .nranks = nranks, .nids = nids, .root_index = index,
                       .role = KOLO_HELLO_SUBROOT, .first = *first};
  memcpy(h.secret, first->secret, sizeof h.secret);
  int lo, hi;
  kolo_root_block(index, nranks, nids, &lo, &hi);
  size_t blen = (size_t)(hi - lo) * KOLO_PEER_INFO_BYTES;
  size_t len = 2 * KOLO_WIRE_HDR_BYTES + KOLO_RANK_HELLO_BYTES + blen;
  uint8_t *m = malloc(len);
  if (m == NULL) return kolo_error(eb, koloSystemError, "out of memory sending a block of ranks to %s", who);
  kolo_encode_header(m, KOLO_TAG_RANK_HELLO, KOLO_RANK_HELLO_BYTES);
  kolo_encode_rank_hello(&h, m + KOLO_WIRE_HDR_BYTES);
  uint8_t *bh = m + KOLO_WIRE_HDR_BYTES + KOLO_RANK_HELLO_BYTES;
  kolo_encode_header(bh, KOLO_TAG_BLOCK, blen);
  kolo_encode_peer_table(table, lo, hi, bh + KOLO_WIRE_HDR_BYTES);
  koloResult_t res = kolo_sock_send_all(fd, m, len, dl, who, eb);
  free(m);
  return res;
}

/* Root 0 refuses a root after reading its hello alone, and closes: sending
 * the block then fails (EPIPE) with the refusal, which says why, already
 * received. */
static int refusal_waiting(int fd) {
  uint8_t raw[KOLO_WIRE_HDR_BYTES];
  ssize_t n = recv(fd, raw, sizeof raw, MSG_PEEK | MSG_DONTWAIT);
  if (n != (ssize_t)sizeof raw) return 0;
  kolo_wire_header h = kolo_decode_header(raw);
  return h.magic == KOLO_WIRE_MAGIC && h.tag == KOLO_TAG_REFUSED;
}

koloResult_t kolo_root_forward(const kolo_uid *first, int nranks, int nids, int index,
                               kolo_peer_info *table, int timeout_ms, kolo_errbuf *eb) {
  char addr[80], who[128];
  kolo_addr_str(&first->root, addr, sizeof addr);
  snprintf(who, sizeof who, "the root of commIds[0] (%s)", addr);
  int64_t dl = kolo_deadline(timeout_ms > 0 ? timeout_ms + FORWARD_GRACE_MS : 0);
  int fd;
  koloResult_t res = kolo_sock_connect(&first->root, dl, timeout_ms, who, eb, &fd);
  if (res != koloSuccess) return res;
  res = send_block(fd, first, nranks, nids, index, table, dl, who, eb);
  int lo, hi;
  kolo_root_block(index, nranks, nids, &lo, &hi);
  int before = (lo + nranks - 1) % nranks; /* the ring predecessor of the block */
  if (res == koloSuccess || refusal_waiting(fd)) res = kolo_root_read_reply(fd, before, &table[before], dl, who, eb);
  close(fd);
  return res;
}

int kolo_root_read_block(int fd, const kolo_rank_hello *h, kolo_peer_info *table, char *why, size_t why_len) {
  int lo, hi;
  kolo_root_block(h->root_index, h->nranks, h->nids, &lo, &hi);
  kolo_errbuf eb = {0};
  int64_t dl = kolo_deadline(KOLO_HELLO_TIMEOUT_MS);
  uint8_t raw[KOLO_WIRE_HDR_BYTES];
  size_t want = (size_t)(hi - lo) * KOLO_PEER_INFO_BYTES;
  koloResult_t res = kolo_sock_recv_all(fd, raw, sizeof raw, dl, "a root", &eb);
  kolo_wire_header bh = kolo_decode_header(raw);
  if (res == koloSuccess && (bh.magic != KOLO_WIRE_MAGIC || bh.tag != KOLO_TAG_BLOCK || bh.len != want)) {
    snprintf(why, why_len, "the root of commIds[%d] sent a block that is not ranks %d..%d", h->root_index, lo,
             hi - 1);
    return -1;
  }
  uint8_t *body = res == koloSuccess ? malloc(want ? want : 1) : NULL;
  if (res == koloSuccess && body == NULL) res = kolo_error(&eb, koloSystemError, "out of memory for its block");
  if (res == koloSuccess) res = kolo_sock_recv_all(fd, body, want, dl, "a root", &eb);
  char fault[KOLO_ERR_LEN];
  int d = res == koloSuccess ? kolo_decode_peer_table(body, want, lo, hi, table, fault, sizeof fault) : KOLO_WIRE_OK;
  free(body);
  if (res != koloSuccess) snprintf(why, why_len, "the root of commIds[%d]: %s", h->root_index, eb.msg);
  else if (d != KOLO_WIRE_OK) snprintf(why, why_len, "the root of commIds[%d] %s", h->root_index, fault);
  return res == koloSuccess && d == KOLO_WIRE_OK ? 0 : -1;
}
