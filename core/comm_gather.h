/* comm_gather.h - an allgather of one record per rank over the bootstrap. */
#ifndef KOLO_CORE_COMM_GATHER_H
#define KOLO_CORE_COMM_GATHER_H

#include "core/comm_state.h"

/* Allgathers one encoded record of `bytes` from every rank over the
 * bootstrap (tag): this rank's is `mine`; *all (freed by the caller) holds
 * rank r's at r * bytes.  Fails as the bootstrap does (c->err says why). */
koloResult_t kolo_comm_gather(struct koloComm *c, uint32_t tag, const uint8_t *mine, size_t bytes, uint8_t **all);

#endif
