/* perf_args.c - kolo-perf's command line: nccl-tests' flags with its
 * letters and meanings, then kolo-perf's own (long names, and -P), and
 * which of them go together. */
#define _GNU_SOURCE /* getopt_long */
#include "perf/perf_args.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_args_opts.h"

/* Options seen on the command line, by getopt value. */
typedef struct {
  unsigned char opt[OPT_END];
} perf_seen_opts;

/* Short options: nccl-tests' string, then kolo-perf's -P (and ':' first,
 * so that a missing value is told apart from an unknown flag). */
#define SHORT_OPTS ":t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:P:"

#define ARG(name, c) {name, required_argument, NULL, c}
static const struct option long_opts[] = {
    ARG("nthreads", 't'), ARG("threads", 't'), ARG("ngpus", 'g'), ARG("minbytes", 'b'), ARG("maxbytes", 'e'),
    ARG("stepbytes", 'i'), ARG("stepfactor", 'f'), ARG("iters", 'n'), ARG("agg_iters", 'm'),
    ARG("warmup_iters", 'w'), ARG("run_cycles", 'N'), ARG("parallel_init", 'p'), ARG("check", 'c'),
    ARG("op", 'o'), ARG("datatype", 'd'), ARG("root", 'r'), ARG("blocking", 'z'), ARG("stream_null", 'y'),
    ARG("timeout", 'T'), ARG("cudagraph", 'G'), ARG("report_cputime", 'C'), ARG("report_timestamps", 'S'),
    ARG("output_file", 'J'), ARG("average", 'a'), ARG("local_register", 'R'), ARG("cta_policy", 'x'),
    ARG("device_implementation", 'D'), ARG("device_cta_count", 'V'), ARG("memory", 'M'), ARG("unalign", 'u'),
    ARG("per_iter_timing", 'I'), ARG("per_iter_skip", 'K'), ARG("procs", 'P'), ARG("mem", OPT_MEM),
    ARG("inplace", OPT_INPLACE), ARG("offset", OPT_OFFSET), ARG("devices", OPT_DEVICES), ARG("gpu", OPT_DEVICES),
    ARG("json", OPT_JSON),
    ARG("label", OPT_LABEL), ARG("ceiling", OPT_CEILING), {"params", no_argument, NULL, OPT_PARAMS},
    {"graph", no_argument, NULL, OPT_GRAPH}, ARG("launch", OPT_LAUNCH), ARG("blocks", OPT_BLOCKS),
    ARG("block-threads", OPT_BLOCK_THREADS), ARG("schedule", OPT_SCHEDULE), ARG("bind", OPT_BIND),
    {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};

/* What each flag's value must be, for the sentence that refuses a bad one;
 * for a whole number (hi > 0) also its field and range. */
#define INT_FLAG(c, field, lo, hi, expects) {c, expects, offsetof(perf_args, field), lo, hi}
#define FLAG(c, expects) {c, expects, 0, 0, 0}
static const struct {
  int c;
  const char *expects;
  size_t field;
  int lo, hi;
} flags[] = {
    INT_FLAG('n', iters, 1, 1 << 30, "1 or more"), INT_FLAG('w', warmup, 0, 1 << 30, "0 or more"),
    INT_FLAG('m', agg_iters, 1, 1 << 20, "1 or more"),
    INT_FLAG('N', run_cycles, 0, 1 << 30, "0 (until stopped) or more"),
    INT_FLAG('c', check, 0, 1 << 20, "0 or more calls to check"), INT_FLAG('r', root, 0, 1 << 24, "a rank"),
    INT_FLAG('a', average, 0, 3, "0 (rank 0), 1 (mean), 2 (min) or 3 (max)"),
    INT_FLAG('z', blocking, 0, 3, "0, 1, 2 or 3"), INT_FLAG('p', parallel_init, 0, 1, "0 or 1"),
    INT_FLAG('C', report_cputime, 0, 1, "0 or 1"), INT_FLAG('T', timeout_s, 0, 1 << 24, "seconds, 0 or more"),
    INT_FLAG('G', graph_launches, 0, 1 << 20, "graph launches, 0 or more"),
    INT_FLAG('t', threads, 1, 4096, "1 or more threads"),
    INT_FLAG('g', gpus_per_thread, 1, 4096, "1 or more ranks per thread"),
    INT_FLAG(OPT_INPLACE, placement, 0, 1, "0 or 1"),
    INT_FLAG(OPT_OFFSET, offset, 0, 4095, "bytes past a 4 KiB boundary, 0..4095"),
    INT_FLAG(OPT_BLOCKS, blocks, 0, 1 << 20, "0 or more"),
    FLAG('b', "a size such as 8, 64K, 128M"), FLAG('e', "a size such as 8, 64K, 128M"), FLAG('i', "a size"),
    FLAG('f', "a factor of 1 or more"), FLAG('P', "1 or more processes"), FLAG('d', "a type (see --help)"),
    FLAG('o', "sum, prod, max, min, avg or mulsum"), FLAG(OPT_MEM, "host or cuda"),
    FLAG(OPT_DEVICES, "device numbers, e.g. 0 or 0,1,2,3"), FLAG(OPT_CEILING, "GB/s above 0, or memcpy"),
    FLAG(OPT_LAUNCH, "entry, grid or both"), FLAG(OPT_BLOCK_THREADS, "a multiple of 32 in 32..512"),
    FLAG(OPT_BIND, "none or core"), FLAG(0, NULL)};

/* The long flags of this parse: a subcommand's own, then the shared ones. */
static struct option merged[sizeof long_opts / sizeof long_opts[0] + 32];

static const struct option *merge_longs(const perf_sub_flags *sub) {
  size_t n = 0;
  for (const struct option *o = sub ? sub->longs : NULL; o && o->name && n < 32; o++) merged[n++] = *o;
  memcpy(&merged[n], long_opts, sizeof long_opts);
  return merged;
}

static const char *long_name(int c) {
  for (const struct option *o = merged[0].name ? merged : long_opts; o->name; o++)
    if (o->val == c) return o->name;
  return "?";
}

/* c's row of flags (the terminator when none). */
static int flag_row(int c) {
  int i = 0;
  while (flags[i].c != 0 && flags[i].c != c) i++;
  return i;
}

/* "-a (--average)" or "--mem": how sentences name the flag of getopt value c. */
static const char *perf_flag_name(int c, char *buf, size_t len) {
  if (c < 128) snprintf(buf, len, "-%c (--%s)", c, long_name(c));
  else snprintf(buf, len, "--%s", long_name(c));
  return buf;
}

static void set_defaults(perf_args *a) {
  *a = (perf_args){.coll = PERF_NUM_COLLS, .min_bytes = 32u << 20, .max_bytes = 32u << 20, .step_bytes = 1u << 20,
                   .step_factor = 2, .iters = 20, .warmup = 5, .agg_iters = 1, .run_cycles = 1, .check = 1,
                   .type = PERF_FLOAT32, .op = PERF_SUM,
                   .average = PERF_AVERAGE_MAX, /* kolo-perf's figures have always been the slowest rank's */
                   .placement = PERF_PLACE_BOTH, .procs = 1, .threads = 1, .gpus_per_thread = 1,
                   .launch = PERF_LAUNCH_BOTH, .block_threads = 512};
}

static int set_enum(int *out, int v) {
  *out = v;
  return v < 0 ? -1 : 0;
}

/* A whole number of flags; 1 when c is none of them. */
static int apply_int(perf_args *a, int c, const char *v) {
  int i = flag_row(c);
  return flags[i].hi > 0 ? perf_parse_int(v, flags[i].lo, flags[i].hi, (int *)((char *)a + flags[i].field)) : 1;
}

/* "0,2,3" -> a->devs / a->ndevs (--devices). */
static int parse_devices(perf_args *a, const char *v) {
  a->ndevs = 0;
  while (*v) {
    char *end;
    errno = 0;
    long d = strtol(v, &end, 10);
    if (end == v || errno != 0 || d < 0 || d > 1023 || a->ndevs == PERF_MAX_GPUS) return -1;
    a->devs[a->ndevs++] = (int)d;
    if (*end == '\0') return 0;
    if (*end != ',' || end[1] == '\0') return -1;
    v = end + 1;
  }
  return -1;
}

static int parse_ceiling(perf_args *a, const char *v) {
  if (strcmp(v, "memcpy") == 0) return a->ceiling_memcpy = 1, 0;
  char *end;
  double g = strtod(v, &end);
  if (end == v || *end != '\0' || !(g > 0) || g > 1e6) return -1;
  a->ceiling_gbps = g;
  return 0;
}

/* The other flags kolo-perf implements; 1 when c is none of them. */
static int apply_other(perf_args *a, int c, const char *v) {
  int i;
  switch (c) {
    case 'b': return perf_parse_size(v, &a->min_bytes);
    case 'e': return perf_parse_size(v, &a->max_bytes);
    case 'i': return perf_parse_size(v, &a->step_bytes);
    case 'f': return perf_parse_size(v, &a->step_factor) != 0 || a->step_factor < 1 ? -1 : 0;
    case 'd': a->type_given = 1; return set_enum((int *)&a->type, perf_parse_type(v));
    case 'o': return set_enum((int *)&a->op, perf_parse_op(v));
    case 'P': a->procs_given = 1; return perf_parse_int(v, 1, 4096, &a->procs);
    case OPT_MEM: return set_enum(&a->mem_cuda, perf_parse_name(v, (const char *const[]){"host", "cuda"}, 2));
    case OPT_BIND: return set_enum(&a->bind_core, perf_parse_name(v, (const char *const[]){"none", "core"}, 2));
    case OPT_LAUNCH:
      i = perf_parse_name(v, (const char *const[]){"entry", "grid", "both"}, 3); /* PERF_LAUNCH_* - 1 */
      return set_enum(&a->launch, i < 0 ? -1 : i + 1);
    case OPT_BLOCK_THREADS:
      return perf_parse_int(v, 32, 512, &a->block_threads) != 0 || a->block_threads % 32 != 0 ? -1 : 0;
    case OPT_DEVICES: return parse_devices(a, v);
    case OPT_GRAPH: a->graph_launches = 1; return 0;
    case 'J':
    case OPT_JSON: a->json = v; return 0;
    case OPT_LABEL: a->label = v; return 0;
    case OPT_CEILING: return parse_ceiling(a, v);
    case OPT_PARAMS: a->print_params = 1; return 0;
    case OPT_SCHEDULE: return setenv("KOLO_SCHEDULE_FILE", v, 1); /* the ranks' init loads it */
    default: return 1;
  }
}

/* nccl-tests' flags kolo-perf does not implement: each is taken at the
 * value that means "off" in nccl-tests, and refused otherwise. */
static const struct { int c; const char *why; } not_here[] = {
    {'y', "calls on the NULL stream (each rank has a non-blocking stream of its own)"},
    {'R', "buffer registration (kolo does not use registrations to save a copy yet)"},
    {'x', "CTA policies (kolo sizes its grids itself: KOLO_MIN_NCHANNELS, KOLO_MAX_NCHANNELS)"},
    {'D', "device API implementations"}, {'S', "timestamps on each row"}, {'M', "device memory report"},
    {'u', "misaligned buffers"}, {'I', "per-iteration timing"}, {'K', "per-iteration timing's skipped samples"},
    {0, NULL}};

/* Why kolo-perf refuses c, or NULL when c is not one of not_here. */
static const char *not_here_why(int c) {
  for (int i = 0; not_here[i].c; i++)
    if (not_here[i].c == c) return not_here[i].why;
  return NULL;
}

/* 0 for an unimplemented flag at its "off" value, -3 otherwise; 1 when c
 * is not one of them.  -V (the device API's CTA count) means nothing
 * without -D, which is refused: any count passes. */
static int apply_not_here(int c, const char *v) {
  int n;
  if (c == 'V') return perf_parse_int(v, 1, 128, &n);
  if (not_here_why(c) == NULL) return 1;
  return perf_parse_int(v, 0, 0, &n) == 0 ? 0 : -3;
}

/* Flags kolo-mpi-ref does not take. */
static int kolo_only(int c) {
  return (c < 128 && strchr("PtgpTG", c) != NULL) || (c >= OPT_PARAMS && c < OPT_END);
}

static int takes(const perf_sub_flags *sub, int c) {
  for (const int *s = sub->shared; *s; s++)
    if (*s == c) return 1;
  return 0;
}

/* One option; 0, -1 for a bad value, -2 for kolo-perf's options in
 * another tool, -3 for an nccl-tests flag kolo-perf does not implement,
 * -4 for a flag the subcommand does not take. */
static int apply_opt(perf_args *a, int c, const char *v, int tool, const perf_sub_flags *sub) {
  if (kolo_only(c) && tool != PERF_TOOL_KOLO) return -2;
  if (sub && c >= PERF_SUB_OPT) return sub->apply(a, c, v) == 0 ? 0 : -1; /* only with sub->longs */
  if (sub && !takes(sub, c)) return -4;
  int r = apply_int(a, c, v);
  if (r == 1) r = apply_other(a, c, v);
  if (r == 1) r = apply_not_here(c, v);
  return r == 1 ? -1 : r;
}

static void report_bad(const char *prog, int c, const char *v, int bad, const perf_sub_flags *sub) {
  char name[64];
  const char *want = flags[flag_row(c)].expects;
  perf_flag_name(c, name, sizeof name);
  if (bad == -2) fprintf(stderr, "%s: %s is kolo-perf's alone\n", prog, name);
  else if (bad == -4)
    fprintf(stderr, "%s: %s is not a flag of %s (see --help)\n", prog, name, sub->name ? sub->name : "this tool");
  else if (bad == -3)
    fprintf(stderr, "%s: %s %s is refused: kolo-perf does not have nccl-tests' %s; only %s 0, nccl-tests' "
            "default, is taken\n", prog, name, v, not_here_why(c), name);
  else if (want == NULL) fprintf(stderr, "%s: bad value '%s' for %s (see --help)\n", prog, v ? v : "", name);
  else fprintf(stderr, "%s: bad value '%s' for %s: expected %s\n", prog, v ? v : "", name, want);
}

/* The getopt loop.  0 to go on, 1 after help, -1 on a bad flag. */
static int parse_flags(perf_args *a, int argc, char **argv, const char *prog, int tool, const perf_sub_flags *sub,
                       perf_seen_opts *seen) {
  int c;
  set_defaults(a);
  if (sub && sub->defaults) sub->defaults(a); /* after the shared ones */
  const struct option *longs = merge_longs(sub);
  opterr = 0;
  optind = 0; /* glibc: start afresh, so that a second parse (a test's) sees its own argv */
  while ((c = getopt_long(argc, argv, SHORT_OPTS, longs, NULL)) != -1) {
    if (c == 'h') return (sub ? sub->usage(stdout, prog) : perf_usage(stdout, prog, tool)), 1;
    if (c == ':' || c == '?')
      return fprintf(stderr, "%s: %s option %s (see --help)\n", prog,
                     c == ':' ? "missing value for" : "unknown", argv[optind - 1]), -1;
    if (c < OPT_END) seen->opt[c] = 1;
    int bad = apply_opt(a, c, optarg, tool, sub);
    if (bad != 0) return report_bad(prog, c, optarg, bad, sub), -1;
  }
  if (seen->opt['i'] && !seen->opt['f']) a->step_factor = 1; /* -i alone: a fixed increment */
  return 0;
}

/* ---- which flags go together (after all are parsed): each refusal is one
 * sentence naming the flags ---- */

/* The first flag of `list` (getopt values, 0-terminated) that was given, or 0. */
static int first_seen(perf_seen_opts *seen, const int *list) {
  for (; *list; list++)
    if (seen->opt[*list]) return *list;
  return 0;
}

static int refuse(const char *prog, const char *why, int c) {
  char name[64];
  fprintf(stderr, "%s: %s %s\n", prog, perf_flag_name(c, name, sizeof name), why);
  return -1;
}

/* prims runs on one device, without ranks. */
static int check_prims(perf_args *a, perf_seen_opts *seen, const char *prog) {
  static const int not_prims[] = {'P', 't', 'g', 'o', 'r', 'a', 'm', 'N', 'z', 'p', 'C', 'T', 'G', 'J',
                                  OPT_INPLACE, OPT_OFFSET, OPT_MEM, OPT_GRAPH, OPT_JSON, OPT_LABEL, OPT_CEILING,
                                  OPT_BIND, 0};
  static const int prims_only[] = {OPT_LAUNCH, OPT_BLOCKS, OPT_BLOCK_THREADS, 0};
  int c;
  if (a->prims && (c = first_seen(seen, not_prims)) != 0) return refuse(prog, "is not a flag of prims", c);
  if (!a->prims && (c = first_seen(seen, prims_only)) != 0) return refuse(prog, "is a flag of prims alone", c);
  return 0;
}

/* CUDA graphs and devices need device memory. */
static int check_cuda(perf_args *a, perf_seen_opts *seen, const char *prog) {
  if (a->prims || a->mem_cuda) return 0;
  if (a->graph_launches > 0)
    return refuse(prog, "needs --mem cuda: CUDA graphs hold device work, and host calls run on the host", 'G');
  if (a->ndevs > 0) return refuse(prog, "needs --mem cuda", OPT_DEVICES);
  if (a->ceiling_memcpy == 0 && seen->opt[OPT_CEILING] && a->ceiling_gbps <= 0)
    return refuse(prog, "needs a value", OPT_CEILING);
  return 0;
}

/* Graph capture's and -z 3's needs (nccl-tests refuses -z 3 with -G too). */
static int check_graph(perf_args *a, const char *prog) {
  if (a->graph_launches == 0) return 0;
  if (a->warmup < 1)
    return refuse(prog, "needs -w 1 or more: a rank's first call to a peer connects and allocates, which a graph "
                        "capture cannot hold", 'G');
  if (a->blocking != PERF_BLOCKING_NONE)
    return refuse(prog, "cannot go with -z 1, 2 or 3: a graph's calls cannot be waited for one by one", 'G');
  return 0;
}

static int check_sizes(perf_args *a, const char *prog) {
  if (a->min_bytes > a->max_bytes)
    return fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", prog, a->min_bytes, a->max_bytes), -1;
  if (a->step_factor == 1 && a->step_bytes == 0)
    return fprintf(stderr, "%s: -i 0 with -f 1 never reaches -e\n", prog), -1;
  return 0;
}

/* --bind pins the processes -P forks; a launcher's ranks are its to place. */
static int check_ceiling_bind(perf_args *a, const char *prog) {
  if (a->ceiling_memcpy && a->mem_cuda)
    return refuse(prog, "memcpy measures host memory: with --mem cuda give the ceiling in GB/s (kolo-perf prims "
                        "measures the device's copy rate)", OPT_CEILING);
  if (a->bind_core && !a->procs_given)
    return refuse(prog, "core needs -P: a launcher's ranks are placed by the launcher (mpirun --bind-to, "
                        "srun --cpu-bind, taskset)", OPT_BIND);
  return 0;
}

/* The rules between flags, once all are parsed: 0, or -1 with a sentence. */
static int perf_args_check(perf_args *a, perf_seen_opts *seen, const char *prog) {
  return (check_prims(a, seen, prog) || check_cuda(a, seen, prog) || check_graph(a, prog) || check_sizes(a, prog) ||
          check_ceiling_bind(a, prog)) ? -1 : 0;
}

/* The collective (or "prims") after the flags. */
static int parse_coll(perf_args *a, int argc, char **argv, const char *prog, int tool) {
  if (optind != argc - 1)
    return fprintf(stderr, "%s: expected one collective name after the flags (see --help)\n", prog), -1;
  int coll = perf_parse_coll(argv[optind]);
  a->prims = coll < 0 && tool == PERF_TOOL_KOLO && strcmp(argv[optind], "prims") == 0;
  if (coll < 0 && !a->prims)
    return fprintf(stderr, "%s: unknown collective '%s' (see --help)\n", prog, argv[optind]), -1;
  if (!a->prims) a->coll = (perf_coll)coll;
  return 0;
}

int perf_args_parse(perf_args *a, int argc, char **argv, int tool) {
  const char *prog = argc > 0 ? argv[0] : "kolo-perf";
  perf_seen_opts seen = {{0}};
  int r = parse_flags(a, argc, argv, prog, tool, NULL, &seen);
  if (r != 0) return r;
  if (a->print_params && optind == argc) return 0; /* --params needs no COLL */
  if (parse_coll(a, argc, argv, prog, tool) != 0) return -1;
  return perf_args_check(a, &seen, prog);
}

int perf_args_parse_sub(perf_args *a, int argc, char **argv, const perf_sub_flags *sub) {
  const char *prog = argc > 0 ? argv[0] : "kolo-perf";
  perf_seen_opts seen = {{0}};
  int r = parse_flags(a, argc, argv, prog, PERF_TOOL_KOLO, sub, &seen);
  if (r != 0) return r;
  int words = sub->name ? 1 : 0; /* getopt has moved the words after the flags */
  if (argc - optind != words || (words && strcmp(argv[optind], sub->name) != 0))
    return fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, argv[argc - 1]), -1;
  if (sub->check && sub->check(a, prog) != 0) return -1;
  return perf_args_check(a, &seen, prog);
}
