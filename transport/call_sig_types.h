/* call_sig_types.h - a call's signature and a mismatch report, the records
 * pipes carry to check that two ranks run the same call (connector.h says
 * where they live; kernels/call_sig.h what they mean).  Plain structs, no
 * atomics: network providers (net.h) and C++ tests see them too. */
#ifndef KOLO_TRANSPORT_CALL_SIG_TYPES_H
#define KOLO_TRANSPORT_CALL_SIG_TYPES_H

#include <stdint.h>

/* What a call is, as every rank of it must agree: the sender
 * writes its own with the first slice of each call it sends on a pipe, the
 * receiver compares it with its own before it consumes that slice.  Fields
 * a call's ranks may differ in are 0 (see kernels/call_sig.h). */
typedef struct kolo_call_sig {
  uint64_t count;
  uint32_t seq;   /* the communicator's count of collective calls (0: send/recv) */
  int32_t root;
  uint8_t coll, type, op;
  uint8_t set;    /* 1 once a sender wrote it */
} kolo_call_sig;

/* Two calls that do not match, as the rank that found them tells its peers
 * (written once per pipe, before the stop word). */
typedef struct kolo_call_mismatch {
  int32_t rank[2];
  kolo_call_sig sig[2];
} kolo_call_mismatch;

#endif
