/* proxy_records.h - what a net pipe's proxy carries besides slots, credits
 * and plain stop words: records longer than one 8-byte control message,
 * sent as words (KOLO_NET_CTRL_WORD) and then the message that says what
 * they were.  The signature of a call (transport/connector.h's
 * kolo_call_sig) goes with the slice that carries it, and the mismatch
 * report with the stop word KOLO_STOP_MISMATCH, so that net pipes check
 * calls and pass the report on like shared-memory ones do.
 *
 * Internal to the proxy (proxy.c), under its lock.  The control channel
 * keeps its messages in order, but not in order with the data streams: the
 * receiving executor waits for a signature it expects
 * (kolo_connector.sig_late), whichever comes first.
 */
#ifndef KOLO_TRANSPORT_PROXY_RECORDS_H
#define KOLO_TRANSPORT_PROXY_RECORDS_H

#include "transport/proxy.h"

/* Sender: queues the signature the executor left with the slice of `step`,
 * if any, and clears it there.  0 when the queue has no room yet (the
 * caller waits before sending the slice). */
int kolo_proxy_queue_sig(kolo_net_pipe *p, uint32_t step);

/* Queues the stop word, after its mismatch report when it has one. */
int kolo_proxy_queue_stop(kolo_net_pipe *p, uint32_t word);

/* Sends what the queue holds, in order, as far as the provider takes it
 * (stop_sent once the stop word went). */
koloResult_t kolo_proxy_flush_records(kolo_net_pipe *p, int *moved);

/* 1 while queued messages wait for the provider. */
static inline int kolo_proxy_records_pending(const kolo_net_pipe *p) { return p->outq_at != p->outq_n; }

/* A WORD or SIG message that came in (kind, value); 0 for other kinds.
 * take_stop: a STOP came in: leaves the report its words made in the
 * pipe's control block (when they made one) before the caller sets it. */
int kolo_proxy_take_record(kolo_net_pipe *p, uint32_t kind, uint32_t value);
void kolo_proxy_take_stop(kolo_net_pipe *p, uint32_t word);

#endif
