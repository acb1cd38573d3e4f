/* kolo_perf.c - kolo-perf: nccl-tests-style sweeps of kolo's collectives,
 * and its subcommands.
 *
 * Ranks come from one of three places (perf_launch.c, perf_ranks.c):
 *   -P PROCS  processes forked here (perf_fork.c), each with -t x -g ranks
 *             as threads;
 *   -t / -g   ranks as threads of this process (koloCommInitAll, or with
 *             -p 1 koloCommInitRank on each thread);
 *   a launcher's job (mpirun, srun, torchrun, or KOLO_* variables) when its
 *             world size is above 1 and -P is not given (koloCommInitFromEnv).
 * No rank tears its communicator down before every rank of this machine
 * has finished (perf_gate.h).
 *
 * CUDA (--mem cuda).  Rank r of this machine runs on device LIST[r mod n]
 * of --devices LIST (default: every visible device), with its own
 * non-blocking stream and device buffers (kolo_backend.c).  Before anything
 * else main asks CUDA whether there is a device at all -- from a
 * short-lived child when ranks are forked, so that the parent makes no
 * CUDA call before its forks -- and says "no CUDA device: <CUDA's words>"
 * when there is none.
 *
 * Subcommands: `kolo-perf prims` (perf_prims.c) times the copy and reduce
 * primitives; `net` (perf_net.c) the net providers point to point;
 * `overlap` (perf_overlap.c) a simulated training step over the fusion
 * API, on the ranks set up here, in place of the sweep; `plot`
 * (perf/plot.py) draws --json files; `topo` (perf_topo.c) says what kolo
 * sees; `p2p` (perf_p2p.c) measures every pair of GPUs and of host ranks.
 */
#include <stdio.h>
#include <string.h>

#include "common/config.h" /* kolo_param_print */
#include "perf/perf_args.h"
#include "perf/perf_ranks.h"
#include "perf/perf_net.h"
#include "perf/perf_overlap.h"
#include "perf/perf_prims.h"
#include "perf/perf_subcommands.h"

int main(int argc, char **argv) {
  /* Subcommands with a command line of their own. */
  if (argc > 1 && strcmp(argv[1], "net") == 0) return perf_net_main(argc - 1, argv + 1);
  int sub = perf_subcommand_main(argc, argv);
  if (sub >= 0) return sub;
  perf_args a;
  /* `kolo-perf overlap` runs on the ranks set up below (perf_overlap.h). */
  int overlap = argc > 1 && strcmp(argv[1], "overlap") == 0;
  int r = overlap ? perf_args_parse_sub(&a, argc, argv, &perf_overlap_flags)
                  : perf_args_parse(&a, argc, argv, PERF_TOOL_KOLO);
  if (r != 0) return r > 0 ? 0 : 2;
  if (a.print_params) {
    kolo_param_print(stdout);
    if (a.coll == PERF_NUM_COLLS && !a.prims) return 0;
  }
  if (a.prims) return perf_cuda_ready(&a, 0) == 0 ? perf_prims_run(&a) : 2;
  return perf_run_ranks(&a);
}
