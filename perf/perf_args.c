/* perf_args.c - nccl-tests' command line and size arithmetic. */
#define _GNU_SOURCE /* getopt_long */
#include "perf/perf_args.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char *const coll_names[PERF_NUM_COLLS] = {
    "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "sendrecv", "alltoall", "gather", "scatter"};
/* nccl-tests' spelling first; aliases after. */
static const char *const type_names[PERF_NUM_TYPES] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
static const struct {
  const char *name;
  perf_type type;
} type_aliases[] = {{"char", PERF_INT8},       {"int", PERF_INT32},       {"uint", PERF_UINT32},
                    {"float16", PERF_FLOAT16}, {"fp16", PERF_FLOAT16},    {"float32", PERF_FLOAT32},
                    {"fp32", PERF_FLOAT32},    {"float64", PERF_FLOAT64}, {"fp64", PERF_FLOAT64},
                    {"bf16", PERF_BFLOAT16},   {"float8e4m3", PERF_FLOAT8E4M3}, {"float8e5m2", PERF_FLOAT8E5M2}};
static const char *const op_names[PERF_NUM_OPS] = {"sum", "prod", "max", "min", "avg", "mulsum"};
static const size_t type_sizes[PERF_NUM_TYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

const char *perf_coll_name(perf_coll c) { return (unsigned)c < PERF_NUM_COLLS ? coll_names[c] : "?"; }
const char *perf_type_name(perf_type t) { return (unsigned)t < PERF_NUM_TYPES ? type_names[t] : "?"; }
const char *perf_op_name(perf_op o) { return (unsigned)o < PERF_NUM_OPS ? op_names[o] : "?"; }
size_t perf_type_size(perf_type t) { return (unsigned)t < PERF_NUM_TYPES ? type_sizes[t] : 0; }

int perf_coll_has_op(perf_coll c) {
  return c == PERF_ALL_REDUCE || c == PERF_REDUCE_SCATTER || c == PERF_REDUCE;
}
int perf_coll_has_root(perf_coll c) {
  return c == PERF_BROADCAST || c == PERF_REDUCE || c == PERF_GATHER || c == PERF_SCATTER;
}

void perf_usage(FILE *out, const char *prog, int tool) {
  fprintf(out,
          "usage: %s COLL [flags]\n"
          "  COLL: all_reduce reduce_scatter all_gather broadcast reduce sendrecv alltoall gather scatter\n"
          "  -b, --minbytes N      smallest size (default 32M; K, M, G suffixes)\n"
          "  -e, --maxbytes N      largest size (default 32M)\n"
          "  -f, --stepfactor N    multiply the size by N each step (default 2)\n"
          "  -i, --stepbytes N     add N bytes each step instead (used when -f is 1 or not given)\n"
          "  -n, --iters N         timed iterations per size (default 20)\n"
          "  -w, --warmup_iters N  untimed iterations before each size (default 5)\n"
          "  -c, --check 0|1       check every element of the results (default 1)\n"
          "  -d, --datatype T      int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double\n"
          "                        f8e4m3 f8e5m2 (aliases: float16 float32 float64 float8e4m3\n"
          "                        float8e5m2 char int; default float)\n"
          "  -o, --op OP           sum prod max min avg mulsum (default sum; mulsum: a premul-sum,\n"
          "                        koloRedOpCreatePreMulSum, each rank its own scalar)\n"
          "  -r, --root R          root of broadcast, reduce, gather and scatter (default 0)\n"
          "  -a, --inplace 0|1     out-of-place only (0) or in-place only (1); default both\n"
          "      --json FILE       also write the results as JSON\n",
          prog);
  if (tool == PERF_TOOL_KOLO)
    fprintf(out,
            "  -p, --procs N         fork N processes here (default 1; a launcher's job is joined\n"
            "                        from its environment when -p is not given); once one process\n"
            "                        fails, the others get KOLO_TIMEOUT_MS + 2 s (at most 10 s) to\n"
            "                        end, then are killed, and kolo-perf exits 2\n"
            "  -t, --threads N       ranks per process, as threads (default 1)\n"
            "  -m, --mem host|cuda   memory kind of the buffers (default host); cuda: device\n"
            "                        buffers, one non-blocking stream per rank, cudaEvent timing\n"
            "  -g, --gpu LIST        CUDA devices, e.g. 0 or 0,1,2,3 (default: every visible one);\n"
            "                        rank r of this machine runs on LIST[r mod length], so -t 8 -g 0\n"
            "                        puts 8 ranks on device 0 (nccl-tests' -g counts GPUs instead)\n"
            "      --graph           (cuda) capture the -n calls of a size into one CUDA graph per\n"
            "                        rank after the warm-up, and time its launch: per call in a graph\n"
            "      --schedule FILE   run the collectives FILE declares with its programs\n"
            "                        (KOLO_SCHEDULE_FILE; docs/schedule-format.md)\n"
            "      --params          print kolo's KOLO_* parameters and exit\n");
  fprintf(out, "  -h, --help            this text\n");
  if (tool == PERF_TOOL_KOLO)
    fprintf(out,
            "\n"
            "usage: %s prims [flags]\n"
            "  the copy and reduce primitives of the CUDA kernels beside cudaMemcpyAsync device to\n"
            "  device, on one device, each SIZE of -b..-e: time per call, GB/s of bytes read + written\n"
            "  (memcpy 2S, copy 2S, copy2 3S, sum 3S, sum2 4S) and the ratio to memcpy's at that size\n"
            "  -b -e -f -i -n -w      as above;  -c 0|1 check every output byte (default 1)\n"
            "  -d T                   element type (default: float, then bfloat16)\n"
            "  -g DEV                 the device (default 0)\n"
            "      --launch entry|grid|both\n"
            "                         entry: kolo_cuda_reduce, the test entry, as it launches;\n"
            "                         grid: the benchmark's launch over the whole GPU (default both)\n"
            "      --blocks N         blocks of the grid launch (default 0: one full wave)\n"
            "      --block-threads N  threads per block of the grid launch, 32..512 (default 512)\n"
            "\n"
            "usage: %s net [flags] [--server | HOST[:PORT]]\n"
            "  point-to-point bandwidth and latency over a kolo net provider (socket, ib),\n"
            "  perftest-style; `%s net --help` lists its flags\n",
            prog, prog, prog);
  if (tool == PERF_TOOL_KOLO)
    fprintf(out,
            "\n"
            "usage: %s overlap [flags]\n"
            "  a simulated training step: real models' gradients all-reduced through the fusion\n"
            "  API while a calibrated backward pass produces them; `%s overlap --help` lists its flags\n",
            prog, prog);
}

/* "32M" -> 33554432: K, M, G are powers of 1024 as in nccl-tests. */
int perf_parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (end == s || errno != 0 || s[0] == '-') return -1;
  unsigned long long mult = 1;
  switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; end++; break;
    case 'm': case 'M': mult = 1ull << 20; end++; break;
    case 'g': case 'G': mult = 1ull << 30; end++; break;
    default: break;
  }
  if (*end == 'b' || *end == 'B') end++;
  if (*end != '\0' || v > SIZE_MAX / mult) return -1;
  *out = (size_t)(v * mult);
  return 0;
}

int perf_parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 0);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static int parse_name(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

static int parse_type(const char *s) {
  int t = parse_name(s, type_names, PERF_NUM_TYPES);
  for (size_t i = 0; t < 0 && i < sizeof type_aliases / sizeof type_aliases[0]; i++)
    if (strcmp(s, type_aliases[i].name) == 0) t = (int)type_aliases[i].type;
  return t;
}

enum { OPT_JSON = 1000, OPT_PARAMS, OPT_GRAPH, OPT_LAUNCH, OPT_BLOCKS, OPT_BLOCK_THREADS, OPT_SCHEDULE, OPT_END };

static const struct option long_opts[] = {
    {"minbytes", required_argument, NULL, 'b'},  {"maxbytes", required_argument, NULL, 'e'},
    {"stepbytes", required_argument, NULL, 'i'}, {"stepfactor", required_argument, NULL, 'f'},
    {"iters", required_argument, NULL, 'n'},     {"warmup_iters", required_argument, NULL, 'w'},
    {"check", required_argument, NULL, 'c'},     {"datatype", required_argument, NULL, 'd'},
    {"op", required_argument, NULL, 'o'},        {"root", required_argument, NULL, 'r'},
    {"inplace", required_argument, NULL, 'a'},   {"procs", required_argument, NULL, 'p'},
    {"threads", required_argument, NULL, 't'},   {"mem", required_argument, NULL, 'm'},
    {"json", required_argument, NULL, OPT_JSON}, {"params", no_argument, NULL, OPT_PARAMS},
    {"gpus", required_argument, NULL, 'g'},      {"gpu", required_argument, NULL, 'g'},
    {"graph", no_argument, NULL, OPT_GRAPH},     {"launch", required_argument, NULL, OPT_LAUNCH},
    {"blocks", required_argument, NULL, OPT_BLOCKS},
    {"block-threads", required_argument, NULL, OPT_BLOCK_THREADS},
    {"schedule", required_argument, NULL, OPT_SCHEDULE},
    {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0}};

/* Options seen on the command line, by getopt's value. */
typedef struct {
  unsigned char opt[128 + (OPT_END - OPT_JSON)];
} seen_opts;

static unsigned char *seen_slot(seen_opts *s, int c) {
  return &s->opt[c >= OPT_JSON ? 128 + (c - OPT_JSON) : c & 127];
}

static void set_defaults(perf_args *a) {
  memset(a, 0, sizeof *a);
  a->coll = PERF_NUM_COLLS;
  a->min_bytes = a->max_bytes = 32u << 20;
  a->step_bytes = 1u << 20;
  a->step_factor = 2;
  a->iters = 20;
  a->warmup = 5;
  a->check = 1;
  a->type = PERF_FLOAT32;
  a->op = PERF_SUM;
  a->placement = PERF_PLACE_BOTH;
  a->procs = a->threads = 1;
  a->launch = PERF_LAUNCH_BOTH;
  a->block_threads = 512;
}

int perf_parse_gpus(perf_args *a, const char *v) {
  a->ngpus = 0;
  while (*v) {
    char *end;
    errno = 0;
    long d = strtol(v, &end, 10);
    if (end == v || errno != 0 || d < 0 || d > 1023 || a->ngpus == PERF_MAX_GPUS) return -1;
    a->gpus[a->ngpus++] = (int)d;
    if (*end == '\0') return 0;
    if (*end != ',' || end[1] == '\0') return -1;
    v = end + 1;
  }
  return -1;
}

/* One option; returns 0, -1 for a bad value, -2 for kolo-perf's options in
 * another tool. */
static int apply_opt(perf_args *a, int c, const char *v, int tool, int *factor_given, int *incr_given) {
  size_t sz;
  int i;
  int kolo_only = (c == 'p' || c == 't' || c == 'm' || c == 'g' || c >= OPT_PARAMS);
  if (kolo_only && tool != PERF_TOOL_KOLO) return -2;
  switch (c) {
    case 'b': return perf_parse_size(v, &a->min_bytes);
    case 'e': return perf_parse_size(v, &a->max_bytes);
    case 'i': *incr_given = 1; return perf_parse_size(v, &a->step_bytes);
    case 'f':
      *factor_given = 1;
      if (perf_parse_size(v, &sz) != 0 || sz < 1) return -1;
      a->step_factor = sz;
      return 0;
    case 'n': return perf_parse_int(v, 1, 1 << 30, &a->iters);
    case 'w': return perf_parse_int(v, 0, 1 << 30, &a->warmup);
    case 'c': return perf_parse_int(v, 0, 1, &a->check);
    case 'a': return perf_parse_int(v, 0, 1, &a->placement);
    case 'r': return perf_parse_int(v, 0, 1 << 24, &a->root);
    case 'p': a->procs_given = 1; return perf_parse_int(v, 1, 4096, &a->procs);
    case 't': return perf_parse_int(v, 1, 4096, &a->threads);
    case 'd':
      if ((i = parse_type(v)) < 0) return -1;
      a->type = (perf_type)i;
      a->type_given = 1;
      return 0;
    case 'g': return perf_parse_gpus(a, v);
    case OPT_GRAPH: a->graph = 1; return 0;
    case OPT_LAUNCH:
      if (strcmp(v, "entry") == 0) a->launch = PERF_LAUNCH_ENTRY;
      else if (strcmp(v, "grid") == 0) a->launch = PERF_LAUNCH_GRID;
      else if (strcmp(v, "both") == 0) a->launch = PERF_LAUNCH_BOTH;
      else return -1;
      return 0;
    case OPT_BLOCKS: return perf_parse_int(v, 0, 1 << 20, &a->blocks);
    case OPT_BLOCK_THREADS:
      if (perf_parse_int(v, 32, 512, &a->block_threads) != 0 || a->block_threads % 32 != 0) return -1;
      return 0;
    case 'o':
      if ((i = parse_name(v, op_names, PERF_NUM_OPS)) < 0) return -1;
      a->op = (perf_op)i;
      return 0;
    case 'm':
      if (strcmp(v, "host") != 0 && strcmp(v, "cuda") != 0) return -1;
      a->mem_cuda = strcmp(v, "cuda") == 0;
      return 0;
    case OPT_JSON: a->json = v; return 0;
    case OPT_PARAMS: a->print_params = 1; return 0;
    case OPT_SCHEDULE: return setenv("KOLO_SCHEDULE_FILE", v, 1); /* the ranks' init loads it */
    default: return -1;
  }
}

/* The first option of `list` (getopt values, 0-terminated) that was given. */
static const char *first_seen(seen_opts *seen, const int *list) {
  for (; *list; list++) {
    if (!*seen_slot(seen, *list)) continue;
    for (const struct option *o = long_opts; o->name; o++)
      if (o->val == *list) return o->name;
  }
  return NULL;
}

/* Flags that do not go with the subcommand or the memory kind chosen. */
static int check_combination(perf_args *a, seen_opts *seen, const char *prog) {
  static const int not_prims[] = {'p', 't', 'o', 'r', 'a', 'm', OPT_GRAPH, OPT_JSON, 0};
  static const int prims_only[] = {OPT_LAUNCH, OPT_BLOCKS, OPT_BLOCK_THREADS, 0};
  const char *name;
  if (a->prims && (name = first_seen(seen, not_prims)) != NULL) {
    fprintf(stderr, "%s: --%s is not a flag of prims\n", prog, name);
    return -1;
  }
  if (!a->prims && (name = first_seen(seen, prims_only)) != NULL) {
    fprintf(stderr, "%s: --%s is a flag of prims alone\n", prog, name);
    return -1;
  }
  if (!a->prims && !a->mem_cuda && (a->graph || a->ngpus > 0)) {
    fprintf(stderr, "%s: --%s needs --mem cuda\n", prog, a->graph ? "graph" : "gpu");
    return -1;
  }
  if (a->graph && a->warmup < 1) {
    fprintf(stderr, "%s: --graph needs -w 1 or more: a rank's first call to a peer connects and "
                    "allocates, which a graph capture cannot hold\n", prog);
    return -1;
  }
  return 0;
}

int perf_args_parse(perf_args *a, int argc, char **argv, int tool) {
  const char *prog = argc > 0 ? argv[0] : "kolo-perf";
  int factor_given = 0, incr_given = 0, c;
  seen_opts seen;
  memset(&seen, 0, sizeof seen);
  set_defaults(a);
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":b:e:i:f:n:w:c:d:o:r:a:p:t:m:g:h", long_opts, NULL)) != -1) {
    if (c == 'h') {
      perf_usage(stdout, prog, tool);
      return 1;
    }
    if (c == ':' || c == '?') {
      fprintf(stderr, "%s: %s option %s\n", prog, c == ':' ? "missing value for" : "unknown",
              argv[optind - 1]);
      perf_usage(stderr, prog, tool);
      return -1;
    }
    *seen_slot(&seen, c) = 1;
    int bad = apply_opt(a, c, optarg, tool, &factor_given, &incr_given);
    if (bad != 0) {
      const char *name = "?";
      for (const struct option *o = long_opts; o->name; o++)
        if (o->val == c) name = o->name;
      if (bad == -2) fprintf(stderr, "%s: --%s is kolo-perf's alone\n", prog, name);
      else fprintf(stderr, "%s: bad value '%s' for --%s\n", prog, optarg ? optarg : "", name);
      return -1;
    }
  }
  if (incr_given && !factor_given) a->step_factor = 1; /* -i alone: a fixed increment */
  if (a->print_params && optind == argc) return 0;   /* --params needs no COLL */
  if (optind != argc - 1) {
    fprintf(stderr, "%s: expected one collective name\n", prog);
    perf_usage(stderr, prog, tool);
    return -1;
  }
  int coll = parse_name(argv[optind], coll_names, PERF_NUM_COLLS);
  a->prims = coll < 0 && tool == PERF_TOOL_KOLO && strcmp(argv[optind], "prims") == 0;
  if (coll < 0 && !a->prims) {
    fprintf(stderr, "%s: unknown collective '%s'\n", prog, argv[optind]);
    return -1;
  }
  if (!a->prims) a->coll = (perf_coll)coll;
  if (check_combination(a, &seen, prog) != 0) return -1;
  if (a->min_bytes > a->max_bytes) {
    fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", prog, a->min_bytes, a->max_bytes);
    return -1;
  }
  if (a->step_factor == 1 && a->step_bytes == 0) {
    fprintf(stderr, "%s: -i 0 with -f 1 never reaches -e\n", prog);
    return -1;
  }
  return 0;
}

perf_sizes perf_sizes_for(perf_coll c, perf_type t, size_t size, int nranks) {
  perf_sizes s;
  size_t esize = perf_type_size(t), n = (size_t)nranks;
  s.elems = size / esize;
  s.count = s.send_elems = s.recv_elems = s.elems;
  if (c == PERF_REDUCE_SCATTER || c == PERF_ALL_GATHER || c == PERF_ALL_TO_ALL || c == PERF_GATHER ||
      c == PERF_SCATTER) {
    s.count = s.elems / n; /* per rank (per block), as nccl-tests rounds it */
    s.elems = s.count * n;
    int many_in = c == PERF_REDUCE_SCATTER || c == PERF_ALL_TO_ALL || c == PERF_SCATTER;
    int many_out = c == PERF_ALL_GATHER || c == PERF_ALL_TO_ALL || c == PERF_GATHER;
    s.send_elems = many_in ? s.elems : s.count;
    s.recv_elems = many_out ? s.elems : s.count;
  }
  s.bytes = s.elems * esize;
  return s;
}

double perf_bus_factor(perf_coll c, int nranks) {
  double n = nranks;
  switch (c) {
    case PERF_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case PERF_REDUCE_SCATTER:
    case PERF_ALL_GATHER:
    case PERF_ALL_TO_ALL:
    case PERF_GATHER:
    case PERF_SCATTER: return (n - 1) / n;
    default: return 1.0;
  }
}

size_t perf_next_size(const perf_args *a, size_t size) {
  size_t next;
  if (a->step_factor > 1) {
    if (size == 0) return 0; /* 0 * f never moves */
    next = size > SIZE_MAX / a->step_factor ? 0 : size * a->step_factor;
  } else {
    next = size > SIZE_MAX - a->step_bytes ? 0 : size + a->step_bytes;
  }
  return (next == 0 || next > a->max_bytes) ? 0 : next;
}

size_t perf_buffer_bytes(const perf_args *a, int nranks) {
  perf_sizes s = perf_sizes_for(a->coll, a->type, a->max_bytes, nranks);
  size_t elems = s.send_elems > s.recv_elems ? s.send_elems : s.recv_elems;
  size_t bytes = elems * perf_type_size(a->type);
  return (bytes + 4095) & ~(size_t)4095;
}
