/* net_ends.h - the two ends of one net provider connection (transport/net.h)
 * for tests: listen, connect and
 * accept over loopback, rings of slots the harness allocates (poisoned),
 * and sinks that record what each end is told, in order.  Everything is
 * driven from the calling thread: nothing moves unless the test calls
 * progress.  End 0 receives and is "rank 0 (test)" to the other, end 1
 * sends and is "rank 1 (test)". */
#ifndef KOLO_TESTS_NET_ENDS_H
#define KOLO_TESTS_NET_ENDS_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { KT_RECV = 0, KT_SEND = 1 };
enum { KT_SLICE = 1, KT_CREDIT = 2, KT_STOP = 3 };
#define KT_POISON 0xEE

/* A call signature and a mismatch report, as plain fields. */
typedef struct {
  uint64_t count;
  uint32_t seq;
  int32_t root;
  uint8_t coll, type, op;
} kt_sig;
typedef struct {
  int32_t rank[2];
  kt_sig sig[2];
} kt_report;

/* What a sink was told. */
typedef struct {
  int kind;       /* KT_SLICE, KT_CREDIT, KT_STOP */
  uint32_t value; /* the step, the head, the word */
  uint32_t len;   /* KT_SLICE */
  int has_sig;
  kt_sig sig;
  int has_report;
  kt_report report;
} kt_net_event;

typedef struct kt_net_ends kt_net_ends;

typedef struct {
  const char *provider; /* "ib" or "socket" */
  int streams;          /* KOLO_IB_QPS_PER_CONN (ib) or KOLO_SOCKET_NSTREAMS (socket); 0: as set */
  const char *send_hca, *recv_hca; /* KOLO_IB_HCA of each end; NULL: as set */
  int stray;            /* a stray connection sends junk to the listener first */
  int timeout_ms;
} kt_net_cfg;

/* Opens both ends (not bound); NULL with err filled on failure. */
kt_net_ends *kt_net_open(const kt_net_cfg *cfg, char *err, size_t errlen);
/* Closes what is left of both ends and frees them. */
void kt_net_free(kt_net_ends *e);
/* Closes one end (the provider's close); the other stays. */
void kt_net_close_end(kt_net_ends *e, int end);

/* Binds an end to a new ring of nslots x slot_bytes (poisoned); the old
 * ring stays allocated until kt_net_free (a test may still look at it).
 * 0, or -1 with err filled. */
int kt_net_bind(kt_net_ends *e, int end, uint32_t nslots, size_t slot_bytes, char *err, size_t errlen);
/* Slot `step` of an end's current ring. */
unsigned char *kt_net_slot(kt_net_ends *e, int end, uint32_t step);

/* The provider's calls; 0, or -1 with err filled (the provider's sentence). */
int kt_net_send_slice(kt_net_ends *e, uint32_t step, size_t len, const kt_sig *sig, int *queued, char *err,
                      size_t errlen);
int kt_net_send_credit(kt_net_ends *e, uint32_t head, int *queued, char *err, size_t errlen);
int kt_net_send_stop(kt_net_ends *e, int end, uint32_t word, const kt_report *r, int *queued, char *err,
                     size_t errlen);
int kt_net_progress(kt_net_ends *e, int end, char *err, size_t errlen);
int kt_net_pending(kt_net_ends *e, int end);
int kt_net_pollfds(kt_net_ends *e, int end, struct pollfd *pf, int max);
/* The oldest event an end's sink recorded and not yet taken; 1 when there
 * was one. */
int kt_net_take(kt_net_ends *e, int end, kt_net_event *ev);

/* Connects the named provider to a listener of the other one; 0 when the
 * connect failed, with its sentence in err (which must name `who`). */
int kt_net_cross_connect(const char *listen_provider, const char *connect_provider, const char *who, char *err,
                         size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
