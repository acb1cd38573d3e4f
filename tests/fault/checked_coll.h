/* checked_coll.h - one collective call, its inputs made from a seed and
 * every element of its output checked against an exact reference.
 *
 * Values are small integers (0..7; 1 or 2 for products), so every sum,
 * product, max and min over up to 8 ranks is exact in every dtype used
 * (no float8: partial sums there round).  Outputs are poisoned (all bits
 * set) before the call, so an element the call did not write is caught. */
#ifndef KOLO_CHECKED_COLL_H
#define KOLO_CHECKED_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "kolo.h"

typedef enum {
  CC_ALL_REDUCE,
  CC_ALL_GATHER,
  CC_REDUCE_SCATTER,
  CC_BROADCAST,
  CC_REDUCE,
  CC_ALLTOALL,
  CC_SENDRECV, /* each rank sends to rank + 1 and receives from rank - 1, in a group */
  CC_NUM_KINDS
} cc_kind;

typedef struct {
  cc_kind kind;
  koloDataType_t dt;
  koloRedOp_t op;
  size_t count; /* the API's count argument */
  int in_place;
  int root;
  uint64_t seed; /* of the input values */
} cc_case;

/* What one call did. */
typedef struct {
  koloResult_t res;  /* the call's result (koloSuccess before checking) */
  size_t bad;        /* elements that differ from the reference */
  size_t first_bad;  /* index of the first one */
  double got, want;  /* its values */
  int64_t call_ns;   /* the call's own time */
} cc_result;

const char *cc_kind_name(cc_kind k);
/* Whether the kind supports in place. */
int cc_has_in_place(cc_kind k);
/* A random case, the same on every rank for the same state. */
cc_case cc_random_case(uint64_t *state, int nranks, size_t max_bytes);
/* Runs the case on comm (host memory) as `rank` of `nranks` and checks it. */
cc_result cc_run(koloComm_t comm, int rank, int nranks, const cc_case *c);
/* At most this many cases in one group. */
#define CC_MAX_GROUP 8
/* Runs k cases in one group (k > 1) and checks them all; after_first (if
 * not NULL) is called inside the group, after the first call is queued. */
cc_result cc_run_group(koloComm_t comm, int rank, int nranks, const cc_case *cases, int k,
                       void (*after_first)(void *), void *arg);

/* ---- the parts of a run, for other memory kinds (fault_cuda.c) ---- */

typedef struct {
  size_t in_elems, out_elems; /* of the separate buffers (out of place) */
  size_t in_at;               /* in place: where the input sits in out, in elements */
} cc_geometry;

/* A case's buffers in host memory: the output poisoned, the rank's input
 * written; src and dst point into them (in place: both into out). */
typedef struct {
  cc_geometry g;
  char *out, *in;             /* allocations (in: NULL in place) */
  size_t out_bytes, in_bytes; /* their sizes (in_bytes 0 in place) */
  char *src, *dst;            /* what the call gets */
} cc_bufs;

/* 0, or -1 when out of memory (nothing left allocated). */
int cc_bufs_make(const cc_case *c, int rank, int nranks, cc_bufs *b);
void cc_bufs_free(cc_bufs *b);
/* Issues the case's call(s) on stream (ignored by host communicators). */
koloResult_t cc_issue(koloComm_t comm, int rank, int nranks, const cc_case *c, const void *in, void *out,
                      koloStream_t stream);
/* Adds to res the output elements (out: out_elems of them) that differ
 * from the reference. */
void cc_check(const cc_case *c, int rank, int nranks, const void *out, size_t out_elems, cc_result *res);

/* One line describing the case. */
void cc_describe(const cc_case *c, char *buf, size_t len);

#endif
