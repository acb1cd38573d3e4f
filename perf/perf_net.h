/* perf_net.h - `kolo-perf net`: point-to-point bandwidth and latency over
 * one of kolo's net providers (transport/net.h), the way perftest's
 * ib_write_bw / ib_write_lat measure a verbs device and iperf3 a TCP path,
 * so that the three can be printed side by side from the same devices.
 *
 *   kolo-perf net [-P socket|ib] [flags] --server        one side: waits for a client
 *   kolo-perf net [-P socket|ib] [flags] HOST[:PORT]     the other: runs the plan
 *   kolo-perf net [-P socket|ib] [flags]                 both here: the server is forked,
 *                                                        the two meet over 127.0.0.1
 *
 * The client decides the plan (sizes, iterations, window, tests) and sends
 * it to the server over a setup TCP connection (-p PORT, default 18600),
 * which also carries the providers' handles and one handshake per round.
 * The provider's connections: one each way (forward: client -> server).
 * The server adopts the client's provider unless -P says otherwise (then
 * they must agree).  Each provider picks its device as kolo's net pipes
 * do (KOLO_IB_HCA, KOLO_SOCKET_NSTREAMS, ...); the provider listens on the
 * address the setup connection arrived at.
 *
 * Figures per size (perf_net_xfer.h says how they are taken): bandwidth
 * in MB/s and GB/s (payload bytes per second, 1e6 and 1e9: perftest's
 * MB/sec is 2^20 bytes), uni-directional, `window` messages in flight;
 * latency as half the round trip, median and 99th percentile; #wrong, the
 * payload bytes found wrong.  Exit status: 0, 1 when a byte was wrong, 2 on
 * an error (printed).
 */
#ifndef KOLO_PERF_NET_H
#define KOLO_PERF_NET_H

/* argv[0] is "net". */
int perf_net_main(int argc, char **argv);

#endif
