/* comm_gather.c - one encoded record from every rank (comm_wire.h), over
 * the bootstrap mesh.  The records travel as
 * their codecs wrote them, never as a C struct; the caller decodes rank r's
 * with r as the sender its sentence names. */
#include <stdlib.h>
#include <string.h>

#include "core/comm_state.h"
#include "core/comm_gather.h"

koloResult_t kolo_comm_gather(struct koloComm *c, uint32_t tag, const uint8_t *mine, size_t bytes, uint8_t **all) {
  *all = calloc((size_t)c->nranks, bytes);
  if (*all == NULL) return kolo_error(&c->err, koloSystemError, "rank %d: out of memory gathering %zu bytes per rank",
                                      c->rank, bytes);
  memcpy(*all + (size_t)c->rank * bytes, mine, bytes);
  koloResult_t res = kolo_bootstrap_allgather(c->bs, tag, *all, bytes);
  if (res == koloSuccess) return koloSuccess;
  free(*all);
  *all = NULL;
  return res;
}
