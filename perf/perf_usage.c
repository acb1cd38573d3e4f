/* perf_usage.c - `kolo-perf --help` (and kolo-mpi-ref's): every flag. */
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
          "  -m, --agg_iters N        calls per timed iteration, issued as one group (koloGroupStart /\n"
          "                           End; kolo-mpi-ref: back to back); times are per call (default 1)\n"
          "  -N, --run_cycles N       run the whole sweep N times, each printed (default 1; 0: until\n"
          "                           stopped)\n"
          "  -c, --check N            check every element of N calls per size, stopping at the first\n"
          "                           wrong one (default 1; 0: no check)\n"
          "  -d, --datatype T         int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double\n"
          "                           f8e4m3 f8e5m2 (aliases: float16 float32 float64 float8e4m3\n"
          "                           float8e5m2 char int; default float)\n"
          "  -o, --op OP              sum prod max min avg mulsum (default sum; mulsum: a premul-sum,\n"
          "                           koloRedOpCreatePreMulSum, each rank its own scalar)\n"
          "  -r, --root R             root of broadcast, reduce, gather and scatter (default 0)\n"
          "  -a, --average 0|1|2|3    a row's time from the ranks' times: 0 rank 0's, 1 their mean,\n"
          "                           2 the fastest rank's, 3 the slowest rank's (default 3; nccl-tests'\n"
          "                           is 1)\n"
          "  -z, --blocking 0|1|2|3   0: issue every call, wait once at the end; 1: wait for each call,\n"
          "                           then a barrier of all ranks, timed; 2: wait for each call; 3: wait\n"
          "                           and barrier after each iteration (-m calls), the barrier not\n"
          "                           timed (default 0).  On host memory a call returns complete, so\n"
          "                           0 and 2 time the same; the barrier is a small koloAllReduce\n"
          "  -C, --report_cputime 0|1 1: the time column is the host's time to issue the calls\n"
          "                           (header 'cputime'); algbw and busbw stay those of the latency\n");
  if (tool == PERF_TOOL_KOLO)
    fprintf(out,
            "  -p, --parallel_init 0|1  1: each thread inits its own rank (koloCommInitRank) instead of\n"
            "                           one koloCommInitAll for the process's ranks (default 0)\n"
            "  -T, --timeout S          a size that runs for longer than S seconds revokes the\n"
            "                           communicators (koloCommRevoke) and fails the job, exit 2\n"
            "                           (default 0: no limit)\n"
            "  -G, --cudagraph N        (--mem cuda) capture the -n x -m calls of a size into one CUDA\n"
            "                           graph per rank after the warm-up and launch it N times; the\n"
            "                           time is per call (default 0: no graph)\n"
            "  -t, --nthreads N         threads per process (default 1)\n"
            "  -g, --ngpus N            ranks per thread, nccl-tests' GPUs per thread (default 1): a\n"
            "                           process runs t x g ranks, each on a thread of its own (where\n"
            "                           nccl-tests drives a thread's g GPUs from that one thread)\n");
  fprintf(out,
          "  -J, --output_file FILE   as --json FILE: kolo's schema (docs/perf-json.md), not\n"
          "                           nccl-tests'\n"
          "  -y -R -x -D -V -S -M -u -I -K   nccl-tests' other flags (stream_null, local_register,\n"
          "                           cta_policy, device_implementation, device_cta_count,\n"
          "                           report_timestamps, memory, unalign, per_iter_timing,\n"
          "                           per_iter_skip): taken at nccl-tests' default (0; -V any), any\n"
          "                           other value refused with a sentence saying why\n");
}

static void usage_own(FILE *out, int tool) {
  fprintf(out,
          "%s's own:\n"
          "      --inplace 0|1        out-of-place only (0) or in-place only (1); default both\n"
          "      --json FILE          also write the results as JSON (docs/perf-json.md)\n"
          "      --label TEXT         the run's name in the JSON (plots use it; default: none)\n"
          "      --ceiling GBPS|memcpy  a busbw ceiling for the JSON (plots draw it): a number in GB/s,\n"
          "                           or memcpy: half of one core's memcpy rate at -e, measured on\n"
          "                           rank 0 (host memory; a ring rank moves each byte through\n"
          "                           memory about twice)\n",
          tool == PERF_TOOL_KOLO ? "kolo-perf" : "kolo-mpi-ref");
  if (tool != PERF_TOOL_KOLO) return;
  fprintf(out,
          "  -P, --procs N            fork N processes here (default 1; a launcher's job is joined\n"
          "                           from its environment when -P is not given); once one process\n"
          "                           fails, the others get KOLO_TIMEOUT_MS + 2 s (at most 10 s) to\n"
          "                           end, then are killed, and kolo-perf exits 2\n"
          "      --bind none|core     with -P: none (default) leaves the processes to the scheduler;\n"
          "                           core pins process i to the i-th CPU it may use (modulo their\n"
          "                           number), as mpirun --bind-to core --map-by core does\n"
          "      --mem host|cuda      memory kind of the buffers (default host); cuda: device\n"
          "                           buffers, one non-blocking stream per rank, cudaEvent timing\n"
          "      --devices LIST       CUDA devices, e.g. 0 or 0,1,2,3 (default: every visible one);\n"
          "                           rank r of this machine runs on LIST[r mod length], so -t 8\n"
          "                           --devices 0 puts 8 ranks on device 0 (--gpu: the same)\n"
          "      --graph              as -G 1\n"
          "      --schedule FILE      run the collectives FILE declares with its programs\n"
          "                           (KOLO_SCHEDULE_FILE; docs/schedule-format.md)\n"
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
          "  the copy and reduce primitives of the CUDA kernels beside cudaMemcpyAsync device to\n"
          "  device, on one device, each SIZE of -b..-e: time per call, GB/s of bytes read + written\n"
          "  (memcpy 2S, copy 2S, copy2 3S, sum 3S, sum2 4S) and the ratio to memcpy's at that size\n"
          "  -b -e -f -i -n -w          as above;  -c 0|1 check every output byte (default 1)\n"
          "  -d T                       element type (default: float, then bfloat16)\n"
          "      --devices DEV          the device (default 0)\n"
          "      --launch entry|grid|both\n"
          "                             entry: kolo_cuda_reduce, the test entry, as it launches;\n"
          "                             grid: the benchmark's launch over the whole GPU (default both)\n"
          "      --blocks N             blocks of the grid launch (default 0: one full wave)\n"
          "      --block-threads N      threads per block of the grid launch, 32..512 (default 512)\n"
          "\n"
          "usage: %s net|overlap|plot|topo|p2p|tune [flags]   (`%s SUBCOMMAND --help` lists its flags)\n"
          "  net      point-to-point bandwidth and latency over a kolo net provider (socket, ib)\n"
          "  overlap  a simulated training step: gradients all-reduced through the fusion API\n"
          "  plot     busbw and time against size from --json files, as a PNG (gnuplot)\n"
          "  topo     what kolo sees and would use: CPUs, NUMA, GPUs, RDMA, interfaces, rings\n"
          "  p2p      copy bandwidth and latency between every pair of GPUs and of host ranks\n"
          "  tune     measures alpha and beta per transport, the collectives' crossovers and channels within\n"
          "           a host and across hosts, and writes a KOLO_TUNING_FILE\n",
          prog, prog, prog);
}
