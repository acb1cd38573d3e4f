/* perf_usage.c - `kolo-perf --help` (and kolo-mpi-ref's): every flag, in a
 * line or two each; docs/benchmarking.md says more. */
#include "perf/perf_args.h"

static void usage_nccl_tests(FILE *out, int tool) {
  fprintf(out,
          "nccl-tests' flags, with its letters, long names and meanings:\n"
          "  -b, --minbytes N         smallest size (default 32M; K, M, G suffixes)\n"
          "  -e, --maxbytes N         largest size (default 32M)\n"
          "  -f, --stepfactor N       multiply the size by N each step (default 2)\n"
          "  -i, --stepbytes N        add N bytes each step instead (used when -f is 1 or not given)\n"
          "  -n, --iters N            timed iterations per size (default 20)\n"
          "  -w, --warmup_iters N     untimed calls before each size (default 5; nccl-tests' is 1)\n"
          "  -m, --agg_iters N        calls per timed iteration, issued as one group; times are per call\n"
          "                           (default 1)\n"
          "  -N, --run_cycles N       run the whole sweep N times (default 1; 0: until stopped)\n"
          "  -c, --check N            check every element of N calls per size (default 1; 0: no check)\n"
          "  -d, --datatype T         int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double\n"
          "                           f8e4m3 f8e5m2, or an alias such as float32 (default float)\n"
          "  -o, --op OP              sum prod max min avg mulsum (default sum; mulsum: a premul-sum)\n"
          "  -r, --root R             root of broadcast, reduce, gather and scatter (default 0)\n"
          "  -a, --average 0|1|2|3    a row's time: 0 rank 0's, 1 the ranks' mean, 2 the fastest's,\n"
          "                           3 the slowest's (default 3; nccl-tests' is 1)\n"
          "  -z, --blocking 0|1|2|3   0: wait once at the end; 1: wait for each call, then a timed\n"
          "                           barrier; 2: wait for each call; 3: wait and barrier after each\n"
          "                           iteration, the barrier not timed (default 0)\n"
          "  -C, --report_cputime 0|1 1: the time column is the host's time to issue the calls\n");
  if (tool == PERF_TOOL_KOLO)
    fprintf(out,
            "  -p, --parallel_init 0|1  1: each thread inits its own rank (koloCommInitRank) (default 0)\n"
            "  -T, --timeout S          a size running longer than S seconds fails the job, exit 2\n"
            "                           (default 0: no limit)\n"
            "  -G, --cudagraph N        (--mem cuda) launch a CUDA graph of a size's calls N times\n"
            "                           (default 0: no graph)\n"
            "  -t, --nthreads N         threads per process (default 1)\n"
            "  -g, --ngpus N            ranks per thread (default 1): a process runs t x g ranks\n");
  fprintf(out,
          "  -J, --output_file FILE   as --json FILE: kolo's schema (docs/perf-json.md), not\n"
          "                           nccl-tests'\n"
          "  -y -R -x -D -V -S -M -u -I -K   nccl-tests' other flags: taken at their default (0; -V\n"
          "                           any), any other value refused with a sentence saying why\n");
}

static void usage_own(FILE *out, int tool) {
  fprintf(out,
          "%s's own:\n"
          "      --inplace 0|1        out-of-place only (0) or in-place only (1); default both\n"
          "      --offset BYTES       the buffers start BYTES (0..4095) past a 4 KiB boundary (default 0:\n"
          "                           on one; malloc's large blocks start 16 past one)\n"
          "      --json FILE          also write the results as JSON (docs/perf-json.md)\n"
          "      --label TEXT         the run's name in the JSON (plots use it; default: none)\n"
          "      --ceiling GBPS|memcpy  a busbw ceiling for the JSON: GB/s, or memcpy: half of one\n"
          "                           core's memcpy rate at -e (host memory)\n",
          tool == PERF_TOOL_KOLO ? "kolo-perf" : "kolo-mpi-ref");
  if (tool != PERF_TOOL_KOLO) return;
  fprintf(out,
          "  -P, --procs N            fork N processes here (default 1; without -P a launcher's job\n"
          "                           is joined from its environment)\n"
          "      --bind none|core     with -P: core pins process i to the i-th CPU it may use\n"
          "      --mem host|cuda      memory kind of the buffers (default host)\n"
          "      --devices LIST       CUDA devices, e.g. 0 or 0,1,2,3 (default: every visible one);\n"
          "                           rank r of this machine runs on LIST[r mod length] (--gpu: the same)\n"
          "      --graph              as -G 1\n"
          "      --schedule FILE      run the collectives FILE declares (KOLO_SCHEDULE_FILE)\n"
          "      --params             print kolo's KOLO_* parameters and exit\n");
}

void perf_usage(FILE *out, const char *prog, int tool) {
  fprintf(out,
          "usage: %s COLL [flags]\n"
          "  COLL: all_reduce reduce_scatter all_gather broadcast reduce sendrecv alltoall gather scatter\n"
          "  prints nccl-tests' table: size, count, type, redop, root, then time, algbw, busbw,\n"
          "  #wrong out of place and in place (GB/s = 1e9 bytes per second)\n",
          prog);
  usage_nccl_tests(out, tool);
  usage_own(out, tool);
  fprintf(out, "  -h, --help               this text\n");
  if (tool != PERF_TOOL_KOLO) return;
  fprintf(out,
          "\n"
          "usage: %s prims [flags]\n"
          "  the CUDA kernels' copy and reduce primitives beside cudaMemcpyAsync on one device\n"
          "  -b -e -f -i -n -w          as above;  -c 0|1 check every output byte (default 1)\n"
          "  -d T                       element type (default: float, then bfloat16)\n"
          "      --devices DEV          the device (default 0)\n"
          "      --launch entry|grid|both  the test entry's launch, the whole GPU's, or both (default)\n"
          "      --blocks N             blocks of the grid launch (default 0: one full wave)\n"
          "      --block-threads N      threads per block of the grid launch, 32..512 (default 512)\n"
          "\n"
          "usage: %s net|overlap|plot|topo|p2p|tune [flags]   (`%s SUBCOMMAND --help` lists its flags)\n"
          "  net      point-to-point bandwidth and latency over a kolo net provider (socket, ib)\n"
          "  overlap  a simulated training step: gradients all-reduced through the fusion API\n"
          "  plot     busbw and time against size from --json files, as a PNG (gnuplot)\n"
          "  topo     what kolo sees and would use: CPUs, NUMA, GPUs, RDMA, interfaces, rings\n"
          "  p2p      copy bandwidth and latency between every pair of GPUs and of host ranks\n"
          "  tune     measures alpha and beta per transport, the collectives' crossovers and channels\n"
          "           within a host and across hosts, and writes a KOLO_TUNING_FILE\n",
          prog, prog, prog);
}
