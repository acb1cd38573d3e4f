/* bootstrap_forward.c - jobs of several roots (koloCommInitRankScalable):
 * which root serves which ranks, and what passes between the roots
 * (bootstrap_wire.h).
 *
 * Each root receives only its own block of ranks.  Once its block is
 * complete, root k > 0 connects to root 0 like a rank, presents root 0's
 * secret and its block, and waits for root 0's answer: the table of every
 * rank (or why the job failed), which it passes on to its ranks.  Root 0
 * answers when its own block and every other root's block are in.  So a
 * root handles about nranks / nids + nids connections instead of nranks. */
#include <stdio.h>
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

koloResult_t kolo_root_read_reply(int fd, int nranks, kolo_peer_info *table, int64_t dl, const char *who,
                                  kolo_errbuf *eb) {
  kolo_wire_header hdr;
  koloResult_t res = kolo_sock_recv_all(fd, &hdr, sizeof hdr, dl, who, eb);
  if (res != koloSuccess) return res;
  if (hdr.magic == KOLO_WIRE_MAGIC && hdr.tag == KOLO_TAG_REFUSED) {
    kolo_root_refusal r;
    if (hdr.len < sizeof r.result || hdr.len > sizeof r)
      return kolo_error(eb, koloRemoteError, "%s sent a refusal of %llu bytes (garbage)", who,
                        (unsigned long long)hdr.len);
    res = kolo_sock_recv_all(fd, &r, (size_t)hdr.len, dl, who, eb);
    if (res != koloSuccess) return res;
    if (r.result == koloSuccess || !kolo_result_valid(r.result) || r.result == koloInProgress)
      r.result = koloRemoteError;
    return kolo_error(eb, (koloResult_t)r.result, "%.*s", (int)(hdr.len - sizeof r.result), r.text);
  }
  size_t want = (size_t)nranks * sizeof *table;
  if (hdr.magic != KOLO_WIRE_MAGIC || hdr.tag != KOLO_TAG_TABLE)
    return kolo_error(eb, koloRemoteError, "%s sent garbage (magic 0x%08x, tag 0x%08x)", who, hdr.magic, hdr.tag);
  if (hdr.len != want)
    return kolo_error(eb, koloRemoteError, "%s sent a table of %llu bytes, expected %zu (%d ranks)", who,
                      (unsigned long long)hdr.len, want, nranks);
  return kolo_sock_recv_all(fd, table, want, dl, who, eb);
}

/* The hello and block root `index` presents to root 0. */
static koloResult_t send_block(int fd, const kolo_uid *first, int nranks, int nids, int index,
                               const kolo_peer_info *table, int64_t dl, const char *who, kolo_errbuf *eb) {
  struct {
    kolo_wire_header hdr;
    kolo_rank_hello body;
  } m;
  memset(&m, 0, sizeof m);
  m.hdr = (kolo_wire_header){KOLO_WIRE_MAGIC, KOLO_TAG_RANK_HELLO, sizeof m.body};
  m.body = (kolo_rank_hello){.rank = -1, .nranks = nranks, .nids = nids, .root_index = index,
                             .role = KOLO_HELLO_SUBROOT, .first = *first};
  memcpy(m.body.secret, first->secret, sizeof m.body.secret);
  int lo, hi;
  kolo_root_block(index, nranks, nids, &lo, &hi);
  kolo_wire_header bh = {KOLO_WIRE_MAGIC, KOLO_TAG_BLOCK, (uint64_t)(hi - lo) * sizeof *table};
  koloResult_t res = kolo_sock_send_all(fd, &m, sizeof m, dl, who, eb);
  if (res == koloSuccess) res = kolo_sock_send_all(fd, &bh, sizeof bh, dl, who, eb);
  if (res == koloSuccess) res = kolo_sock_send_all(fd, table + lo, (size_t)bh.len, dl, who, eb);
  return res;
}

/* Root 0 refuses a root after reading its hello alone, and closes: sending
 * the block then fails (EPIPE) with the refusal, which says why, already
 * received. */
static int refusal_waiting(int fd) {
  kolo_wire_header hdr;
  ssize_t n = recv(fd, &hdr, sizeof hdr, MSG_PEEK | MSG_DONTWAIT);
  return n == (ssize_t)sizeof hdr && hdr.magic == KOLO_WIRE_MAGIC && hdr.tag == KOLO_TAG_REFUSED;
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
  if (res == koloSuccess || refusal_waiting(fd)) res = kolo_root_read_reply(fd, nranks, table, dl, who, eb);
  close(fd);
  return res;
}

int kolo_root_read_block(int fd, const kolo_rank_hello *h, kolo_peer_info *table, char *why, size_t why_len) {
  int lo, hi;
  kolo_root_block(h->root_index, h->nranks, h->nids, &lo, &hi);
  kolo_errbuf eb = {0};
  int64_t dl = kolo_deadline(KOLO_HELLO_TIMEOUT_MS);
  kolo_wire_header bh;
  size_t want = (size_t)(hi - lo) * sizeof *table;
  koloResult_t res = kolo_sock_recv_all(fd, &bh, sizeof bh, dl, "a root", &eb);
  if (res == koloSuccess && (bh.magic != KOLO_WIRE_MAGIC || bh.tag != KOLO_TAG_BLOCK || bh.len != want)) {
    snprintf(why, why_len, "the root of commIds[%d] sent a block that is not ranks %d..%d", h->root_index, lo,
             hi - 1);
    return -1;
  }
  if (res == koloSuccess) res = kolo_sock_recv_all(fd, table + lo, want, dl, "a root", &eb);
  for (int r = lo; r < hi && res == koloSuccess; r++)
    if (table[r].rank != r) {
      snprintf(why, why_len, "the root of commIds[%d] sent entry %d as rank %d", h->root_index, r, table[r].rank);
      return -1;
    }
  if (res != koloSuccess) snprintf(why, why_len, "the root of commIds[%d]: %s", h->root_index, eb.msg);
  return res == koloSuccess ? 0 : -1;
}
