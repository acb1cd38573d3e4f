/* proto_select.h - KOLO_PROTO in NCCL_PROTO's syntax: which protocols the
 * CUDA planner may use, per collective.
 *
 *   value   := entry (';' entry)*
 *   entry   := [coll ':'] ['^'] name (',' name)*
 *   coll    := allreduce | broadcast | reduce | allgather | reducescatter
 *            | sendrecv | alltoall | gather | scatter          (any case)
 *   name    := LL | Simple | LL128                             (any case)
 *
 * The first five collectives are NCCL's; sendrecv (NCCL's name for its
 * point-to-point work: kolo's send and recv together, since both ends of a
 * transfer must use one protocol), alltoall, gather and scatter are the
 * other collectives kolo's CUDA path runs.  '^' excludes the names that
 * follow instead of listing those allowed.  An entry without a collective
 * is every collective's (NCCL's meaning); a later entry for a collective
 * replaces an earlier one.  kolo has LL and Simple: LL128 is taken and left
 * out (an entry that then allows nothing is refused).  Empty or unset:
 * nothing is left out.
 *
 * The result is what each collective may not use: KOLO_PROTO_OFF_BITS bits
 * per kolo_coll (ring/schedule.h), KOLO_PROTO_OFF_LL and/or _SIMPLE; 0:
 * nothing is left out, so a zeroed record means "KOLO_PROTO unset".  Pure
 * string work: the fuzz target links it.
 */
#ifndef KOLO_CORE_PROTO_SELECT_H
#define KOLO_CORE_PROTO_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "ring/schedule.h"

enum { KOLO_PROTO_OFF_LL = 1, KOLO_PROTO_OFF_SIMPLE = 2, KOLO_PROTO_OFF_BITS = 2 };
/* Every bit a valid record may have (both protocols off is never valid). */
#define KOLO_PROTO_OFF_ALL ((1u << (KOLO_PROTO_OFF_BITS * KOLO_COLL_NUM)) - 1)
/* The LL threshold that makes every call LL (KOLO_LL_THRESHOLD's maximum). */
#define KOLO_PROTO_LL_ALWAYS ((size_t)1 << 40)

/* The protocols v leaves out per collective (0 for NULL or ""), or with
 * what is wrong in why ("KOLO_PROTO / NCCL_PROTO \"LL,Fast\": no protocol
 * (kolo has LL and Simple) named \"Fast\"") KOLO_PROTO_UNREADABLE, or
 * KOLO_PROTO_NONE_LEFT for a readable entry that allows neither LL nor
 * Simple ("LL128": NCCL's, not kolo's).  *ll128 is set to 1 when v names
 * LL128. */
enum { KOLO_PROTO_UNREADABLE = -1, KOLO_PROTO_NONE_LEFT = -2 };
int kolo_proto_off_parse(const char *v, int *ll128, char *why, size_t why_len);

/* KOLO_PROTO_OFF_* of coll in a record. */
unsigned kolo_proto_off_of(uint32_t off, int coll);

/* NULL when a record is one kolo_proto_off_parse can give, else what is
 * wrong with it (a wire decoder's check). */
const char *kolo_proto_off_wrong(uint32_t off);

/* The LL threshold of coll: 0 when LL is left out, KOLO_PROTO_LL_ALWAYS
 * when Simple is, else ll_threshold (KOLO_LL_THRESHOLD). */
size_t kolo_proto_ll_threshold(uint32_t off, int coll, size_t ll_threshold);

/* "allreduce:LL;sendrecv:Simple" (only the collectives narrowed; "LL and
 * Simple" for 0), for messages. */
const char *kolo_proto_off_text(uint32_t off, char *out, size_t len);

#endif
