/* all_to_all.c - all-to-all as a direct exchange: block j of a rank's input
 * goes to rank j, where it lands in block (sender) of the output.
 *
 * Rank r's peers are the other ranks in the order r+1, r+2, ... (mod n),
 * peer index k = rank r+1+k.  Each round, for j = 1 .. n-1:
 *
 *   send  in[block r+j]  to   r+j     (peer index j-1)
 *   recv  out[block r-j] from r-j     (peer index n-1-j)
 *
 * then copy in[block r] -> out[block r], the rank's own block, last so that
 * the peers get their data first.  Every rank is in phase j when it sends to
 * r+j, and r+j receives from r in its own phase j: each connector carries one
 * chunk per round, which (chunks being half a connector's slots) never
 * blocks a sender unless its receiver is two rounds behind on that pipe, so
 * the rank furthest behind can always move and no cycle of waits forms.
 * 2n-1 steps; with one rank a single copy (no peers).
 */
#include "ring/schedule.h"

koloResult_t kolo_sched_all_to_all(int n, int rank, kolo_program *p) {
  kolo_program q;
  if (kolo_program_alloc(&q, 2 * n - 1, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
  q.in_blocked = q.out_blocked = 1;
  if (n > 1 && kolo_program_alloc_peers(&q, n - 1) != koloSuccess) {
    kolo_program_free(&q);
    return koloSystemError;
  }
  for (int k = 0; k < n - 1; k++) q.peers[k].rank = (rank + 1 + k) % n;
  int s = 0;
  for (int j = 1; j < n; j++) {
    int to = (rank + j) % n, from = (rank + n - j) % n;
    kolo_program_set(&q, s, KOLO_STEP_SEND, 0, KOLO_BUF_IN, to, KOLO_BUF_OUT, to);
    kolo_program_set_peers(&q, s++, j - 1, 0);
    kolo_program_set(&q, s, KOLO_STEP_RECV, 0, KOLO_BUF_IN, from, KOLO_BUF_OUT, from);
    kolo_program_set_peers(&q, s++, 0, n - 1 - j);
  }
  kolo_program_set(&q, s, KOLO_STEP_COPY, 0, KOLO_BUF_IN, rank, KOLO_BUF_OUT, rank);
  kolo_program_index_peers(&q);
  *p = q;
  return koloSuccess;
}
