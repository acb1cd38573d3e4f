/* proxy.h - who takes a net pipe's turns (net_pipe.h), and when.
 *
 * The calling thread first, as MPI progresses in the caller: an executor
 * that fills a small slice hands it to the provider itself
 * (kolo_net_pipe_kick: one system call, no thread hand-off); one that
 * drained slots credits them once, at the end of its pass (kick on the
 * receive end); a blocked executor takes its pipe's turn itself while it
 * spins (kolo_net_pipe_pull: reads that pipe's own socket or completion
 * queue, nothing else) and sleeps on that pipe's fds (kolo_net_pipe_wait).
 * Each pipe has its own lock: turns of different pipes never wait for each
 * other, and a turn asked for while another thread holds the pipe is taken
 * by that thread before it lets go (none is lost, none waits).
 *
 * The proxy thread (one per process, started with the first pipe, stopped
 * with the last) keeps the rest: slices above the caller's share
 * (KOLO_NET_CALLER_BYTES: bulk transfers, moved while the executor
 * reduces), output a socket could not take at once, stop words, and polled
 * pipes.  It sleeps in epoll on the fds of the pipes it looks after now and
 * on two eventfds (hand-offs; stop words, which kolo_conn_stop rings through
 * ctrl->doorbell), with no bound on their number; a pipe it must watch and
 * cannot is failed, saying why.  The sleep is bounded (KOLO_PROXY_IDLE_MS,
 * default 50) for whatever announces nothing: then it takes a turn of every
 * pipe that needs one.
 *
 * Polled pipes (CUDA communicators: the executor is a kernel, which moves
 * the counters in mapped host memory but makes no system call).  Whoever
 * launches the kernel posts how many slices it will move through the pipe
 * (kolo_proxy_post, right after the launch); the proxy keeps polling while
 * a polled pipe has posted slices outstanding (sender: not yet handed to the
 * provider and written; receiver: not yet drained and credited), handing
 * the CPU to others between looks, and sleeps as above once none has, or
 * once the pipe stopped.
 */
#ifndef KOLO_TRANSPORT_PROXY_H
#define KOLO_TRANSPORT_PROXY_H

#include <stdint.h>

#include "transport/net_pipe.h"

/* Binds the pipe's connection (net_pipe.h) and hands the pipe to the proxy
 * (starting its thread if needed). */
koloResult_t kolo_proxy_add(kolo_net_pipe *p, kolo_errbuf *eb);
/* Flushes what the pipe still has to send (its data up to the tail, its
 * stop word; only the stop word once the pipe stopped: its data is moot),
 * until `deadline` (kolo_now_ms; 0: p->flush_ms from now), then takes it
 * back from the proxy (stopping the thread with the last pipe).  The
 * proxy no longer touches the pipe when this returns; a peer that never
 * reads (stopped, cut off) costs at most the deadline. */
void kolo_proxy_remove(kolo_net_pipe *p, int64_t deadline);

/* The executor moved a counter: filled a slice (send end: a slice within
 * the caller's share goes out now, from this thread; a larger one goes to
 * the proxy) or drained slots (receive end: the head goes out as a credit). */
void kolo_net_pipe_kick(kolo_net_pipe *p);
/* 1 when the executor's next slice of len bytes on this send pipe should
 * go out from where it lies (kolo_net_pipe_send): a socket pipe (send_direct),
 * within the caller's share; a bulk slice goes through the slot to the proxy. */
int kolo_net_pipe_sends_from(kolo_net_pipe *p, size_t len);
/* The executor's next slice on send end c of this pipe lies at src (its
 * buffer): it goes out from there, from this thread, as far as the network
 * takes it now, and only the rest is copied into the slot (for the proxy,
 * or this thread's next turn). */
void kolo_net_pipe_send(kolo_net_pipe *p, kolo_connector *c, const void *src, size_t len);
/* A blocked executor's turn on this pipe alone: what arrived comes in.
 * 1 when the turn moved something. */
int kolo_net_pipe_pull(kolo_net_pipe *p);
/* Sleeps until one of the pipe's fds is ready or timeout_us passed, then
 * takes a turn.  While another thread holds the pipe, sleeps on the
 * counter of end c instead (NULL: for the time out). */
void kolo_net_pipe_wait(kolo_net_pipe *p, kolo_connector *c, int timeout_us);
/* Turns callers took in this process so far (tests). */
uint64_t kolo_proxy_caller_turns(void);

/* A polled pipe will move `slices` more slices (posted by the thread that
 * launched the kernel moving them): the proxy polls the pipe until they
 * have gone through. */
void kolo_proxy_post(kolo_net_pipe *p, uint32_t slices);

#endif
