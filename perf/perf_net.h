/* perf_net.h - `kolo-perf net`: point-to-point bandwidth and latency over
 * one of kolo's net providers (transport/net.h), the way perftest's
 * ib_write_bw / ib_write_lat measure a verbs device and iperf3 a TCP path,
 * so that the three can be printed side by side from the same devices.
 *
 *   kolo-perf net [-P socket|ib] [flags] --server        one side: waits for a client
 *   kolo-perf net [-P socket|ib] [flags] HOST[:PORT]     the other: runs the plan
 *   kolo-perf net [-P socket|ib] [flags]                 both here, over 127.0.0.1
 *
 * The client decides the plan (sizes, iterations, window, tests) and sends
 * it over a setup TCP connection (-p), which also carries the providers'
 * handles and one handshake per round; the provider listens on the address
 * it arrived at, for one connection each way.  The server adopts
 * the client's provider unless -P says otherwise (then they must agree);
 * each provider picks its device as kolo's net pipes do (KOLO_IB_HCA, ...).
 * How the figures are taken: perf_net_xfer.h.  Exit status: 0, 1 when a
 * byte was wrong, 2 on an error (printed).
 */
#ifndef KOLO_PERF_NET_H
#define KOLO_PERF_NET_H

/* argv[0] is "net". */
int perf_net_main(int argc, char **argv);

#endif
