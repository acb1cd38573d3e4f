/* perf_net.h - `kolo-perf net`: point-to-point bandwidth and latency over
 * one of kolo's net providers (transport/net.h), perftest-style
 * (docs/benchmarking.md). */
#ifndef KOLO_PERF_NET_H
#define KOLO_PERF_NET_H

/* argv[0] is "net".  Exit status: 0, 1 when a byte was wrong, 2 on an error. */
int perf_net_main(int argc, char **argv);

#endif
