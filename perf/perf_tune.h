/* perf_tune.h - `kolo-perf tune`: measures the cost model's constants on
 * this machine and writes a tuning file (ring/tuning.h, docs/tuning.md). */
#ifndef KOLO_PERF_TUNE_H
#define KOLO_PERF_TUNE_H

/* argv[1] is "tune": its exit code. */
int perf_tune_main(int argc, char **argv);

#endif
